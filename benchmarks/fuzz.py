"""The robustness run: the project's fuzz harness, at benchmark scale.

The harness lives with the tests (tests/aperto/fuzz_harness.py, ``run_fuzz(cases,
seed) -> dict``); the benchmark only calls it and reports what it returns.  The
target is zero unhandled exceptions: every hostile input must end in a result or
in one of ownmem's own errors.  A harness that raises is itself an unhandled
exception and fails the target; a harness not yet written is reported, not faked.
"""
from __future__ import annotations

import importlib
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .report import FAIL, NOT_RUN, PASS, Check
from .timing import clock

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "tests" / "aperto" / "fuzz_harness.py"
# Fields that must be zero: escaped exceptions, and objects opened with a trust they cannot prove.
_MUST_BE_ZERO = ("unhandled", "uncaught", "crash", "invariant")


def _show(v: Any) -> str:
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.3f}"
    if isinstance(v, (list, tuple, set, frozenset)):
        return f"{len(v):,} item(s)" + (f": {str(list(v)[:3])[:120]}" if v else "")
    s = str(v)
    return s if len(s) <= 120 else s[:117] + "..."


def _flatten(d: Mapping[Any, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, Mapping) and v and all(not isinstance(x, Mapping) for x in v.values()):
            out += _flatten(v, name + ".")
        else:
            out.append((name, v))
    return out


def _count(v: Any) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, (list, tuple, set, frozenset, Mapping)):
        return len(v)
    return 1 if v else 0


def _load() -> Any:
    for p in (ROOT / "tests", ROOT):
        if str(p) not in sys.path:
            sys.path.insert(0, str(p))
    return importlib.import_module("aperto.fuzz_harness").run_fuzz


def run(cases: int, seed: int) -> Check:
    title = f"robustness: fuzz harness, {cases:,} cases"
    how = (f"`run_fuzz(cases={cases}, seed={seed})` from `tests/aperto/fuzz_harness.py`, called "
           "in-process (tests/ on sys.path).  Target: zero unhandled exceptions (and zero trust-invariant "
           "violations, which the harness also counts).  Outcome counts are per input layer.")
    if not HARNESS.exists():
        return Check(title, NOT_RUN, how, (("harness", "missing"),),
                     ("harness missing: tests/aperto/fuzz_harness.py does not exist yet; "
                      "the benchmark calls it as soon as it does.",))
    try:
        run_fuzz = _load()
    except Exception as e:  # noqa: BLE001 - report, never crash the benchmark
        return Check(title, FAIL, how, (("harness", "failed to import"),),
                     (f"{type(e).__name__}: {e}",))
    print(f"  fuzz: {cases:,} cases (seed {seed}) ...", flush=True)
    t0 = clock()
    try:
        result = run_fuzz(cases, seed)
    except Exception as e:  # noqa: BLE001 - an exception escaping the harness is the failure
        tb = traceback.format_exception_only(type(e), e)[-1].strip()
        return Check(title, FAIL, how, (("harness", "raised"), ("elapsed", f"{clock() - t0:.1f} s")),
                     (f"unhandled exception escaped run_fuzz: {tb}",))
    elapsed = clock() - t0
    if not isinstance(result, Mapping):
        return Check(title, FAIL, how, (("result", _show(result)),),
                     ("run_fuzz did not return a dict",))
    flat = _flatten(result)
    rows = [(k, str(v) if k == "seed" else _show(v)) for k, v in flat]
    rows.append(("elapsed", f"{elapsed:.1f} s ({elapsed / max(cases, 1) * 1e6:,.0f} µs/case)"))
    zero = [(k, v) for k, v in flat if any(w in k.lower() for w in _MUST_BE_ZERO)]
    notes: list[str] = []
    if zero:
        verdict = PASS if all(_count(v) == 0 for _, v in zero) else FAIL
        notes += [f"`{k}` = {_count(v):,} (must be 0)" for k, v in zero]
    else:
        verdict = PASS
        notes.append("the harness reports no 'unhandled' field; PASS means run_fuzz completed "
                     "without an exception escaping it")
    return Check(title, verdict, how, tuple(rows), tuple(notes))
