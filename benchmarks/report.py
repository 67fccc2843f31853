"""Results and their Markdown: one table per measure, one summary for the run.

A ``Measure`` is one comparison: ownmem's figure, the reference's, and the largest
ratio ownmem / reference the target allows.  A ``Check`` is a result that has no
reference counterpart (the fuzz run, the server's absolute targets): a table of rows
and a verdict.

A run of some areas only keeps the other areas' sections from the report already on
disk (``previous_areas``), each marked with when it was measured, so `bench server`
does not wipe the core figures; a run of every area regenerates the whole document.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

PASS, FAIL, NOT_RUN = "PASS", "FAIL", "NOT RUN"


@dataclass(frozen=True, slots=True)
class Measure:
    title: str
    unit: str                  # "µs/object" or "s"
    ownmem: float
    reference: float
    target: float              # the largest ownmem/reference ratio that passes
    target_label: str          # "≤ 1/3 of the reference"
    how: str                   # what exactly was timed, on each side
    runs_ownmem: tuple[float, ...] = ()
    runs_reference: tuple[float, ...] = ()
    notes: tuple[str, ...] = ()
    paired_ratio: float | None = None   # when set, the ratio judged (see timing.PerItem)

    @property
    def ratio(self) -> float:
        return self.paired_ratio if self.paired_ratio is not None else self.ownmem / self.reference

    @property
    def verdict(self) -> str:
        return PASS if self.ratio <= self.target else FAIL


@dataclass(frozen=True, slots=True)
class Check:
    title: str
    verdict: str
    how: str
    rows: tuple[tuple[str, str], ...]
    notes: tuple[str, ...] = ()
    figure: str = ""           # the result in a few words, for the summary table
    target: str = ""           # the bar in a few words, for the summary table ("see below" if empty)


@dataclass
class AreaResult:
    name: str
    intro: str
    measures: list[Measure] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)

    def verdicts(self) -> list[tuple[str, str]]:
        return [(m.title, m.verdict) for m in self.measures] + [(c.title, c.verdict) for c in self.checks]


def fmt(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value:.3f} s" if value < 100 else f"{value:,.1f} s"
    return f"{value:,.1f} {unit}"


def fmt_ratio(r: float) -> str:
    """Three decimals, or two significant digits for ratios too small to show in three."""
    return f"{r:.3f}" if r >= 0.01 else f"{r:.2g}"


def _runs(values: tuple[float, ...], unit: str) -> str:
    return ", ".join(fmt(v, unit).rsplit(" ", 1)[0] for v in values)


def _measure_md(m: Measure) -> list[str]:
    how_ratio = "ownmem / reference, median of paired chunks" if m.paired_ratio is not None else "ownmem / reference"
    lines = [f"### {m.title}", "",
             f"| | ownmem | reference | ratio ({how_ratio}) | target | result |",
             "|---|---:|---:|---:|---|---|",
             f"| median, {m.unit} | {fmt(m.ownmem, m.unit)} | {fmt(m.reference, m.unit)} | {fmt_ratio(m.ratio)} "
             f"| {m.target_label} (≤ {m.target:.3f}) | **{m.verdict}** |", "",
             m.how, ""]
    if m.runs_ownmem or m.runs_reference:
        lines.append(f"Runs ({m.unit.split('/')[0]}): ownmem [{_runs(m.runs_ownmem, m.unit)}]; "
                     f"reference [{_runs(m.runs_reference, m.unit)}].")
        lines.append("")
    lines += [f"- {n}" for n in m.notes]
    if m.notes:
        lines.append("")
    return lines


def _check_md(c: Check) -> list[str]:
    lines = [f"### {c.title}", "", f"Result: **{c.verdict}**", "", c.how, "",
             "| | |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in c.rows]
    lines.append("")
    lines += [f"- {n}" for n in c.notes]
    if c.notes:
        lines.append("")
    return lines


@dataclass(frozen=True, slots=True)
class KeptArea:
    """An area's summary rows and section, taken from an earlier report as they were."""

    name: str
    summary_rows: tuple[str, ...]
    section: tuple[str, ...]


KEPT_MARK = "> **Kept from an earlier run:**"
_AREA_HEADING = re.compile(r"^## Area `([^`]+)`\s*$")


def previous_areas(text: str) -> dict[str, KeptArea]:
    """Every area section of an earlier report (its summary rows and its ``## Area`` section),
    each marked once with when it was measured: the date, command, revision and load of the
    report it first came from.  An area kept twice keeps its first mark."""
    lines = text.splitlines()
    machine: dict[str, str] = {}
    summary: dict[str, list[str]] = {}
    sections: dict[str, list[str]] = {}
    part, current = "", None
    for line in lines:
        if line.startswith("## "):
            m = _AREA_HEADING.match(line)
            part, current = ("area", m.group(1)) if m else (line[3:].strip().lower(), None)
            if current is not None:
                sections[current] = [line]
            continue
        if part == "area" and current is not None:
            sections[current].append(line)
        elif part == "machine" and line.startswith("| ") and not line.startswith("| |"):
            cells = [c.strip() for c in line.strip().strip("|").split("|", 1)]
            if len(cells) == 2:
                machine[cells[0]] = cells[1]
        elif part == "summary" and line.startswith("| ") and not line.startswith("| area |"):
            name = line.strip().strip("|").split("|", 1)[0].strip()
            summary.setdefault(name, []).append(line)
    when = (f"{KEPT_MARK} measured {machine.get('Date', 'at an unknown date')} by "
            f"{machine.get('Command', 'an unknown command')} at revision {machine.get('ownmem revision', '?')} "
            f"(load average {machine.get('Load average (1/5/15 min)', '?')}); the machine table above is "
            f"the latest run's.")
    out: dict[str, KeptArea] = {}
    for name, sec in sections.items():
        while sec and not sec[-1].strip():
            sec.pop()
        if not any(x.startswith(KEPT_MARK) for x in sec):
            sec[1:1] = ["", when]
        out[name] = KeptArea(name, tuple(summary.get(name, ())), tuple(sec))
    return out


def markdown(machine: list[tuple[str, str]], areas: list[AreaResult], preface: str,
             kept: Sequence[KeptArea] = (), order: Sequence[str] | None = None) -> str:
    """The whole report.  ``kept`` are sections of areas not run this time, placed by ``order``
    (the known area names) among the fresh ones."""
    fresh = {a.name: a for a in areas}
    old = {k.name: k for k in kept if k.name not in fresh}
    names = [n for n in (order or []) if n in fresh or n in old]
    names += [n for n in list(fresh) + list(old) if n not in names]
    lines = ["# Benchmarks", "", preface, ""]
    if old:
        lines += [f"This run measured {', '.join(f'`{n}`' for n in names if n in fresh)}; the section(s) of "
                  f"{', '.join(f'`{n}`' for n in names if n in old)} are kept from the previous report, each "
                  "marked with when it was measured.  `python3 build.py bench` re-runs every area.", ""]
    lines += ["## Machine", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in machine]
    lines += ["", "## Summary", "", "| area | measure | ownmem | reference | ratio | target | result |",
              "|---|---|---:|---:|---:|---|---|"]
    for n in names:
        if n in old:
            lines += old[n].summary_rows
            continue
        a = fresh[n]
        for m in a.measures:
            lines.append(f"| {a.name} | {m.title} | {fmt(m.ownmem, m.unit)} | {fmt(m.reference, m.unit)} "
                         f"| {fmt_ratio(m.ratio)} | {m.target_label} | **{m.verdict}** |")
        for c in a.checks:
            lines.append(f"| {a.name} | {c.title} | {c.figure} | | | {c.target or 'see below'} | **{c.verdict}** |")
    lines.append("")
    for n in names:
        if n in old:
            lines += [*old[n].section, ""]
            continue
        a = fresh[n]
        lines += [f"## Area `{a.name}`", "", a.intro, ""]
        for m in a.measures:
            lines += _measure_md(m)
        for c in a.checks:
            lines += _check_md(c)
    return "\n".join(lines).rstrip() + "\n"


def summary(areas: list[AreaResult]) -> str:
    out = []
    for a in areas:
        for m in a.measures:
            out.append(f"[{m.verdict:4}] {a.name}: {m.title}: ownmem {fmt(m.ownmem, m.unit)}, "
                       f"reference {fmt(m.reference, m.unit)}, ratio {fmt_ratio(m.ratio)} "
                       f"(target {m.target_label})")
        for c in a.checks:
            out.append(f"[{c.verdict}] {a.name}: {c.title}: "
                       + ", ".join(f"{k}={v}" for k, v in c.rows))
    return "\n".join(out)
