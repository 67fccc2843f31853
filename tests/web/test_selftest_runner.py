"""The vector runner the PWA's `selftest` op and the browser tests call (ownmem.web.selftest),
parametrised by pytest under CPython: every check by name, so one that stops running (a group
whose data went missing) fails here rather than shrinking the count."""
from __future__ import annotations

import json

import pytest

from ownmem.web import selftest
from tests.ownmem_testpaths import SAIHM_EXAMPLE, VECTORS

VECTOR_DATA = {
    "apertomemory_v2": json.loads((VECTORS / "apertomemory-v2" / "apertomemory-v2-test-vectors.json").read_text()),
    "saihm_example": json.loads(SAIHM_EXAMPLE.read_text()),
}
CHECKS = selftest.checks(VECTOR_DATA)


def test_every_group_of_the_runner_is_present() -> None:
    groups = {name.split(".")[0] for name in CHECKS}
    assert {"saihm", "v2"} <= groups, groups
    assert sum(n.startswith("saihm.") for n in CHECKS) == 6


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_selftest_check(name: str) -> None:
    CHECKS[name]()


def test_a_wrong_example_value_fails_its_check() -> None:
    wrong = dict(VECTOR_DATA["saihm_example"], holderId="00" * 32)
    report = selftest.run({"saihm_example": wrong})
    assert "saihm.holder_id" in report["failed"], report
    assert {"saihm.identity_key", "saihm.ciphertext", "saihm.cell_id"}.isdisjoint(report["failed"])


def test_a_vector_swapped_for_another_fails_its_checks() -> None:
    """007 read with 008's sealed object: the custody checks and the verdict see it."""
    vectors = json.loads(json.dumps(VECTOR_DATA["apertomemory_v2"]))
    inner = vectors.get("vectors", vectors)
    k7 = next(k for k in inner if k.startswith("007-"))
    k8 = next(k for k in inner if k.startswith("008-"))
    inner[k7]["input"]["sealed_object"] = inner[k8]["input"]["sealed_object"]
    failed = selftest.run({"apertomemory_v2": vectors})["failed"]
    assert {"v2.007_custody_attested", "v2.verdict_007", "v2.rebuild_007"} <= set(failed), failed
