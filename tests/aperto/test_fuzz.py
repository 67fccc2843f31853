"""Seeded fuzz of ``open_sealed`` (and containers): open, or raise an OwnmemError.

The harness is ``fuzz_harness.run_fuzz`` (also run at 100,000 cases by the
benchmark).  OWNMEM_FUZZ_CASES sets the number of cases (default 2000) and
OWNMEM_FUZZ_SEED the seed, so a failure seen in CI reproduces exactly.
"""
from __future__ import annotations

import os
from typing import Any

import pytest

from ownmem.aperto import seal as seal_mod
from tests.aperto import fuzz_harness as harness

CASES = int(os.environ.get("OWNMEM_FUZZ_CASES", "2000"))
SEED = int(os.environ.get("OWNMEM_FUZZ_SEED", "20260722"))


def test_open_sealed_raises_only_ownmem_errors() -> None:
    report = harness.run_fuzz(CASES, SEED)
    shown = "\n".join(report["examples"])
    assert report["unhandled"] == 0, f"foreign exceptions escaped ownmem:\n{shown}"
    assert report["invariant_violations"] == 0, f"trust invariants broken:\n{shown}"
    totals = harness.total_outcomes(report)
    assert sum(totals.values()) == CASES
    if CASES >= 1000:
        # the fuzz reaches every layer: objects open, fail authentication, fail parsing
        assert totals["opened"] > 0
        assert totals["AuthenticationFailed"] > 0
        assert totals["MalformedInput"] > 0
        for layer in ("sealed", "encrypt0", "signed", "payload", "random"):
            assert report[f"outcomes_{layer}"], layer


def test_containers_are_fuzzed_when_the_module_exists() -> None:
    report = harness.run_fuzz(300, SEED)
    assert report["unhandled"] == 0, "\n".join(report["examples"])
    assert sum(report["outcomes_container"].values()) > 0
    assert report["container_objects"].get("opened", 0) > 0


def test_run_is_deterministic_for_a_seed() -> None:
    assert harness.run_fuzz(200, 5) == harness.run_fuzz(200, 5)
    assert harness.run_fuzz(200, 5) != harness.run_fuzz(200, 6)


def test_harness_catches_foreign_exceptions(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness is not vacuous: an exception outside the OwnmemError family is reported."""
    real = seal_mod.open_sealed
    calls = {"n": 0}

    async def flaky(*args: Any, **kwargs: Any) -> object:
        calls["n"] += 1
        if calls["n"] % 10 == 0:
            raise KeyError("boom")
        return await real(*args, **kwargs)

    monkeypatch.setattr(seal_mod, "open_sealed", flaky)
    report = harness.run_fuzz(200, 1)
    assert report["unhandled"] > 0
    assert any("KeyError" in line for line in report["examples"])
