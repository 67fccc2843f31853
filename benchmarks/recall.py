"""Area `recall`: how well ownmem's one ranking finds what a question needs, on public data
(and how long bringing memories in from another assistant takes).

LoCoMo (long-term conversational memory: 10 conversations, each between two people over many
sessions, with questions whose evidence is named dialog turns) comes inside the registry package
``neatmem==0.8.3`` (``neatmem/evaluation/dataset/locomo10.json``; licensed CC BY-NC 4.0 upstream),
which this area installs into the bench environment with ``--no-deps`` and reads from there: it is
never copied into this repository.  Only conversations 0-4, the development half, are loaded;
5-9 are held out (not looked at, not tuned on).

Each conversation goes into a vault of its own through ownmem's API (``Vault.add``), one memory
per dialog turn: "<speaker>: <text>", with "(shared <caption>)" for a turn that shared a photo,
written at its session's date and time, the turns of a session half a minute apart in order.
Each question is asked through the ranking every search of ownmem uses (``ownmem.vault.vault.
ranking_of`` over the vault's opened heads, ``Ranking.page`` with the default cap of 10).

Measured per question and averaged: evidence recall@k (the share of the evidence turns found in
the first k), MRR@10 (the reciprocal rank of the first evidence turn), session hit@5 (any of the
first 5 from a session that holds evidence), and how many memories each answer hands back.  The
anchor is plain BM25 (``rank_bm25``'s BM25Okapi over the lower-cased words, runs of letters and
digits, of the same turns: no stop words, no stemming, the whole ranking, no cap), measured in the
same run.

The target is judged on evidence turns pooled over all questions ("the evidence turns found in
the first 5", the issue's wording), the stricter of the two readings; the mean over questions of
each question's share is shown beside it.
"""
from __future__ import annotations

import importlib.util
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ownmem.recall.pages import DEFAULT_LIMIT
from ownmem.usecases import import_from
from ownmem.vault import Vault
from ownmem.vault.vault import ranking_of

from .report import FAIL, PASS, AreaResult, Check

_WORD = re.compile(r"\w+")
PACKAGES = ("neatmem==0.8.3", "rank_bm25==0.2.2")
DEV = range(5)                   # the development half; 5-9 are held out
R5_TARGET, S5_TARGET = 0.65, 0.95
PASSPHRASE = "correct horse battery staple recall bench"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
INTRO = __doc__.split("\n\n", 1)[1].replace("\n", " ")


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    session: int
    text: str
    timestamp: int


@dataclass
class Scores:
    """Per-question figures, kept whole so each can be averaged by category."""

    r1: list[float] = field(default_factory=list)
    r5: list[float] = field(default_factory=list)
    r10: list[float] = field(default_factory=list)
    mrr: list[float] = field(default_factory=list)
    s5: list[float] = field(default_factory=list)
    returned: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    category: list[int] = field(default_factory=list)
    turns5: list[bool] = field(default_factory=list)     # per evidence turn, all questions pooled

    def add(self, ranked: Sequence[str], evidence: set[str], category: int, seconds: float) -> None:
        top = list(ranked[:10])
        for k, out in ((1, self.r1), (5, self.r5), (10, self.r10)):
            out.append(sum(e in top[:k] for e in evidence) / len(evidence))
        self.turns5.extend(e in top[:5] for e in evidence)
        self.mrr.append(next((1 / (i + 1) for i, d in enumerate(top) if d in evidence), 0.0))
        sessions = {e.split(":")[0] for e in evidence}
        self.s5.append(float(any(d.split(":")[0] in sessions for d in top[:5])))
        self.returned.append(len(ranked))
        self.seconds.append(seconds)
        self.category.append(category)

    @property
    def pooled_r5(self) -> float:
        return sum(self.turns5) / len(self.turns5)

    def mean(self, name: str, category: int | None = None) -> float:
        values = getattr(self, name)
        picked = [v for v, c in zip(values, self.category, strict=True) if category is None or c == category]
        return sum(picked) / len(picked) if picked else 0.0


def _install() -> Path:
    """The LoCoMo file inside the installed neatmem package (installed here if missing)."""
    if importlib.util.find_spec("neatmem") is None or importlib.util.find_spec("rank_bm25") is None:
        print("benchmarks: installing " + " ".join(PACKAGES) + " into the bench environment", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", PACKAGES[0]], check=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", PACKAGES[1]], check=True)
    spec = importlib.util.find_spec("neatmem")
    assert spec is not None and spec.submodule_search_locations
    path = Path(next(iter(spec.submodule_search_locations))) / "evaluation" / "dataset" / "locomo10.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: neatmem 0.8.3 should carry the LoCoMo set there")
    return path


def turns_of(conversation: dict[str, Any]) -> list[Turn]:
    out = []
    n = 1
    while f"session_{n}" in conversation:
        when = datetime.strptime(conversation[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
        start = int(when.replace(tzinfo=UTC).timestamp())
        for i, t in enumerate(conversation[f"session_{n}"]):
            text = f"{t['speaker']}: {t['text']}"
            if t.get("blip_caption"):
                text += f" (shared {t['blip_caption']})"
            out.append(Turn(t["dia_id"], n, text, start + 30 * i))
        n += 1
    return out


def questions_of(sample: dict[str, Any]) -> list[tuple[str, set[str], int]]:
    out = []
    for q in sample["qa"]:
        evidence = {e.strip() for e in q.get("evidence", []) if isinstance(e, str) and e.strip()}
        if evidence:
            out.append((q["question"], evidence, int(q["category"])))
    return out


def _ownmem(turns: list[Turn], folder: Path) -> tuple[Callable[[str], list[str]], float]:
    """Load the turns into a vault through ownmem's API -> (ask, seconds to load and index)."""
    t0 = time.perf_counter()
    v = Vault.create(folder, PASSPHRASE)
    try:
        ids = {v.add(t.text, now=t.timestamp): t.dia_id for t in turns}
        heads = v.open_all().heads()
    finally:
        v.close()
    ranking = ranking_of(heads)
    loaded = time.perf_counter() - t0

    def ask(question: str) -> list[str]:
        keys, _ = ranking.page(question, limit=DEFAULT_LIMIT)
        return [ids[k] for k in keys]
    return ask, loaded


def _bm25(turns: list[Turn]) -> Callable[[str], list[str]]:
    from rank_bm25 import BM25Okapi

    index = BM25Okapi([_WORD.findall(t.text.lower()) for t in turns])

    def ask(question: str) -> list[str]:
        s = index.get_scores(_WORD.findall(question.lower()))
        return [turns[i].dia_id for i in sorted(range(len(turns)), key=lambda i: -s[i])]
    return ask


def measure(data: list[dict[str, Any]], tmp: Path) -> tuple[Scores, Scores, list[str]]:
    own, anchor, notes = Scores(), Scores(), []
    for c in DEV:
        sample = data[c]
        turns = turns_of(sample["conversation"])
        ask, loaded = _ownmem(turns, tmp / f"conv{c}")
        bm25 = _bm25(turns)
        questions = questions_of(sample)
        notes.append(f"conversation {c}: {len(turns)} turns, {len(questions)} questions; vault filled and "
                     f"indexed in {loaded:.1f} s")
        for question, evidence, category in questions:
            t0 = time.perf_counter()
            got = ask(question)
            t1 = time.perf_counter()
            ref = bm25(question)
            t2 = time.perf_counter()
            own.add(got, evidence, category, t1 - t0)
            anchor.add(ref, evidence, category, t2 - t1)
    return own, anchor, notes


def run(quick: bool = False) -> AreaResult:
    res = AreaResult("recall", INTRO)
    data = json.loads(_install().read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="ownmem-bench-recall-") as d:
        own, anchor, notes = measure(data, Path(d))     # quick or not: it takes under a minute
    r5, s5 = own.pooled_r5, own.mean("s5")
    rows = [("questions (conversations 0-4) / evidence turns", f"{len(own.r5):,} / {len(own.turns5):,}"),
            ("evidence turns found in the first 5, pooled: ownmem / BM25 anchor",
             f"{r5:.3f} / {anchor.pooled_r5:.3f}")]
    for label, name in (("evidence recall@1, mean per question", "r1"), ("evidence recall@5, mean per question", "r5"),
                        ("evidence recall@10, mean per question", "r10"),
                        ("MRR@10", "mrr"), ("session hit@5", "s5")):
        rows.append((f"{label}: ownmem / BM25 anchor", f"{own.mean(name):.3f} / {anchor.mean(name):.3f}"))
    for cat, name in CATEGORIES.items():
        rows.append((f"recall@5 per question, {name} (category {cat}): ownmem / BM25",
                     f"{own.mean('r5', cat):.3f} / {anchor.mean('r5', cat):.3f}"))
    rows += [("memories handed back per question: median / max (cap)",
              f"{statistics.median(own.returned):.0f} / {max(own.returned)} ({DEFAULT_LIMIT})"),
             ("time per question, p50: ownmem / BM25 anchor",
              f"{statistics.median(own.seconds) * 1000:.2f} ms / {statistics.median(anchor.seconds) * 1000:.2f} ms")]
    res.checks.append(Check(
        "recall on LoCoMo, conversations 0-4", PASS if r5 >= R5_TARGET and s5 >= S5_TARGET else FAIL,
        "Each question of conversations 0-4 asked through `Ranking.page` (default cap) over a vault holding one "
        "memory per dialog turn; the anchor is plain BM25 over the same turns in the same run.",
        tuple(rows), notes=(*notes, *TRIED),
        figure=f"R@5 {r5:.3f}, session hit@5 {s5:.3f} (BM25: {anchor.pooled_r5:.3f}, {anchor.mean('s5'):.3f})",
        target=f"R@5 ≥ {R5_TARGET}, session hit@5 ≥ {S5_TARGET}"))
    res.checks.append(import_check())
    return res


IMPORT_COUNT = 5000

# What was tried on conversations 0-4 before the targets were left unmet (issue 22), pooled R@5 /
# session hit@5 each; the limit is the lexical one: multi-hop and open-domain questions share few
# words with their evidence.
TRIED = (
    "Unmet: pooled R@5 stands near 0.55 and session hit@5 near 0.89 against 0.65 and 0.95.  Tried, "
    "measured here: stop words + Snowball stemming 0.469 / 0.907 (from 0.387 / 0.834 without); BM25 k1/b "
    "grid (k1 0.9-1.5, b 0.25-0.75) all within ±0.01; temporal neighbours 0.541-0.550 (asymmetric, kept: "
    "S@5 +0.02); episode-level scores +0.017 R@5, -0.04 S@5 (not kept); pseudo-relevance feedback +0.009 "
    "(not kept); one result per episode in the top 5: S@5 0.927 but R@5 0.376 (not kept).",
    "Semantic recall, measured and not shipped (docs/decisions.md, \"Semantic recall: looked at, not "
    "shipped\"): dense alone 0.19-0.32; reciprocal rank fusion 0.41-0.49; score fusion +0.007 (WordLlama, "
    "16 MB) to +0.026 (all-MiniLM-L6-v2, 91 MB, no Pyodide runtime).  Categories 1 (multi-hop) and 3 "
    "(open-domain) stay lowest: their questions share few words with the evidence turns.",
)


def import_check() -> Check:
    """Bringing memory in: a pasted ChatGPT "Manage memories" list of 5,000 memories read, checked
    for duplicates against the vault and sealed into it in one transaction
    (ownmem.usecases.import_from, as `ownmem import-from chatgpt` and the web app run it), timed
    from the bytes to the committed vault; the vault is unlocked before the clock starts."""
    text = "".join(f"- Memory number {i}: prefers option {i % 7} for project {i % 131}\n" for i in range(IMPORT_COUNT))
    data = text.encode()
    with tempfile.TemporaryDirectory(prefix="ownmem-bench-import-") as d:
        v = Vault.create(Path(d) / "v", PASSPHRASE)
        try:
            t0 = time.perf_counter()
            plan = import_from.prepare("chatgpt", data, v.open_all())
            written = import_from.write(v, plan)
            took = time.perf_counter() - t0
            listed = len(v.open_all().heads())
        finally:
            v.close()
    ok = len(written) == IMPORT_COUNT == listed
    return Check(
        f"import-from chatgpt, {IMPORT_COUNT:,} memories", PASS if ok else FAIL,
        " ".join((import_check.__doc__ or "").split()),
        (("time", f"{took:.2f} s ({took / IMPORT_COUNT * 1000:.2f} ms a memory)"),
         ("memories in the vault afterwards", f"{listed:,}")),
        figure=f"{took:.1f} s", target="reported; every memory imported")
