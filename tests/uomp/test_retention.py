"""The retention decision of the UOMP audit (ownmem.agent.retention; uomp-draft-00 "18.3 Storage";
issue 19): by the real clock, never shorter than 90 days, and a deletion's own entry says what
went without saying what it held."""
from __future__ import annotations

import json

import pytest

from ownmem.agent.retention import (
    PRUNED_ACTION,
    Pruned,
    RetentionRefused,
    accounted,
    check_cutoff,
    prune_cutoff,
    pruned_entry,
    uncovered,
)

NOW = 1_800_000_000
DAY = 86400


def test_the_cutoff_is_the_retention_before_now_or_before_a_past_date() -> None:
    assert prune_cutoff(NOW) == NOW - 90 * DAY
    assert prune_cutoff(NOW, days=365) == NOW - 365 * DAY
    assert prune_cutoff(NOW, as_of=NOW - 10 * DAY) == NOW - 100 * DAY
    assert prune_cutoff(NOW, as_of=NOW) == NOW - 90 * DAY


@pytest.mark.parametrize("as_of, days, says", [
    (4_070_908_800, 90, "is in the future"),        # 2099-01-01: "delete everything"
    (NOW + 1, 90, "is in the future"),
    (None, 0, "a shorter one is refused"),
    (None, 89.9, "a shorter one is refused"),
    (None, -1, "a shorter one is refused"),
    (None, float("nan"), "a shorter one is refused"),
    (None, 36501, "a shorter one is refused"),
])
def test_a_future_date_or_a_short_retention_is_refused(as_of: int | None, days: float, says: str) -> None:
    with pytest.raises(RetentionRefused) as e:
        prune_cutoff(NOW, as_of=as_of, days=days)
    assert says in str(e.value) and "nothing was deleted" in str(e.value)
    assert e.value.code == "retention_refused"


def test_a_raw_cutoff_inside_the_retention_is_refused() -> None:
    check_cutoff(NOW - 90 * DAY, NOW)
    for before in (NOW - 90 * DAY + 1, NOW, 2 ** 40):
        with pytest.raises(RetentionRefused, match="keeps every entry for 90 days"):
            check_cutoff(before, NOW)


def test_the_deletion_entry_counts_and_ranges_and_is_read_back_as_accounting() -> None:
    p = Pruned(3, NOW - 200 * DAY, NOW - 120 * DAY, {"s1": (1, 4), "s2": (7, 7)}, NOW - 119 * DAY)
    e = pruned_entry(p, NOW - 90 * DAY, NOW)
    assert (e.action, e.allowed, e.session_id, e.agent_id, e.tags, e.tag) == (PRUNED_ACTION, True, "", "", (), None)
    assert e.timestamp == NOW and e.reason.startswith("retention: 3 entries (")
    assert json.loads(e.key or "") == {"batches": {"s1": [1, 4], "s2": [7, 7]}, "anchored_until": NOW - 119 * DAY}
    doc = e.to_json()
    assert accounted([doc]) == ({"s1": [(1, 4)], "s2": [(7, 7)]}, NOW - 119 * DAY)
    # only an allowed deletion entry accounts; a malformed key accounts for nothing
    assert accounted([{**doc, "allowed": False}, {**doc, "key": "{"}, {**doc, "action": "read"}]) == ({}, 0)


def test_uncovered_is_interval_arithmetic() -> None:
    assert uncovered(1, 10, [(3, 4), (6, 20)]) == [(1, 2), (5, 5)]
    assert uncovered(1, 0, []) == []
    assert uncovered(1, 4, [(1, 4)]) == []
    assert uncovered(5, 8, [(1, 2), (7, 7)]) == [(5, 6), (8, 8)]
    assert uncovered(1, 10 ** 12, [(2, 10 ** 12)]) == [(1, 1)]        # no enumeration of a huge seq
