"""The sharing tables on both backends, in process (server/storage/shares.py): SAIHM "Order of
effect and receipt" under a failing log write, an offer that is all or nothing, erasure and
expiry deleting share keys, and an offer of a cell erased meanwhile."""
from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest

from server.storage.base import LogEntry, StorageConflict, StorageQuota
from server.storage.shares import (
    ContractClosed,
    ContractMissing,
    NewContract,
    NotContractHolder,
    ShardsMissing,
    shares_of,
)
from tests.server.storekit import Store, forget, registration, stocked

GRANTEE = os.urandom(32)


def _contract(holder_id: bytes, cells: list[bytes], *, expires: int = 0, grantee: bytes = GRANTEE,
              size: int = 300) -> NewContract:
    cid = os.urandom(32)
    share = LogEntry(os.urandom(32), cid, "SHARE", holder_id, int(time.time()), os.urandom(64))
    return NewContract(cid, holder_id, os.urandom(size), expires, (grantee,), tuple(cells),
                       tuple((grantee, c, os.urandom(72)) for c in cells), share)


def _revoke_entry(holder_id: bytes, cid: bytes) -> LogEntry:
    return LogEntry(os.urandom(32), cid, "REVOKE", holder_id, int(time.time()), os.urandom(64))


class LogDown(Exception):
    pass


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_revocation_withdraws_access_before_the_receipt_and_never_restores_it(
        kind: str, tmp_path: Any, request: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    st, vault, cells = stocked(Store.fresh(kind, tmp_path, request), 2)
    try:
        sh = shares_of(st)
        now = int(time.time())
        new = _contract(vault.holder_id, [c.cell_id for c in cells])
        sh.offer(vault.id, new, now)
        assert sh.shared(GRANTEE, now, b"\x00" * 64, 10) == []           # nothing before acceptance
        assert sh.answer(GRANTEE, new.contract_id, "accept", now) == "accepted"
        assert len(sh.shared(GRANTEE, now, b"\x00" * 64, 10)) == 2
        assert st.log_get(new.receipt.receipt_id) is not None            # the SHARE receipt, with the offer

        def down(c: Any, entries: list[LogEntry]) -> None:
            raise LogDown("the log is unavailable")

        monkeypatch.setattr(sh, "_append_log", down)
        assert sh.revoke(vault.id, new.contract_id) is False              # access withdrawn, committed
        receipt = _revoke_entry(vault.holder_id, new.contract_id)
        with pytest.raises(LogDown):
            sh.log_revoke(vault.holder_id, new.contract_id, receipt)
        # the receipt write failed: access stays withdrawn, the keys stay deleted
        assert sh.shared(GRANTEE, now, b"\x00" * 64, 10) == []
        assert sh.key_count(new.contract_id) == 0
        assert st.log_get(receipt.receipt_id) is None
        with pytest.raises(ContractClosed):
            sh.answer(GRANTEE, new.contract_id, "accept", now)
        monkeypatch.undo()
        # the repeated revoke: already revoked, and now the receipt is written, once
        assert sh.revoke(vault.id, new.contract_id) is True
        assert sh.log_revoke(vault.holder_id, new.contract_id, receipt) == receipt.receipt_id
        other = _revoke_entry(vault.holder_id, new.contract_id)
        assert sh.log_revoke(vault.holder_id, new.contract_id, other) == receipt.receipt_id
        assert st.log_get(other.receipt_id) is None
        # someone else's vault: not the holder; a contract nobody offered: not found
        other_vault = st.register(registration())
        with pytest.raises(NotContractHolder):
            sh.revoke(other_vault.id, new.contract_id)
        with pytest.raises(ContractMissing):
            sh.revoke(vault.id, os.urandom(32))
    finally:
        st.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_an_offer_is_all_or_nothing(kind: str, tmp_path: Any, request: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    st, vault, cells = stocked(Store.fresh(kind, tmp_path, request), 2)
    try:
        sh = shares_of(st)
        now = int(time.time())
        new = _contract(vault.holder_id, [c.cell_id for c in cells])

        def down(c: Any, entries: list[LogEntry]) -> None:
            raise LogDown("the log is unavailable")

        monkeypatch.setattr(sh, "_append_log", down)
        with pytest.raises(LogDown):
            sh.offer(vault.id, new, now)
        monkeypatch.undo()
        assert sh.offered(vault.id, now) == [] and sh.key_count(new.contract_id) == 0
        with pytest.raises(ContractMissing):
            sh.answer(GRANTEE, new.contract_id, "accept", now)
        sh.offer(vault.id, new, now)
        with pytest.raises(StorageConflict):                               # a replay
            sh.offer(vault.id, new, now)
        assert sh.key_count(new.contract_id) == 2
        # a cell erased since: the offer naming it is refused whole
        assert st.erase(vault.id, [cells[0].cell_id], [forget(vault, cells[0].cell_id)], now)
        assert sh.key_count(new.contract_id) == 1                          # erasure deleted its share key
        late = _contract(vault.holder_id, [c.cell_id for c in cells])
        with pytest.raises(ShardsMissing):
            sh.offer(vault.id, late, now)
        assert sh.key_count(late.contract_id) == 0 and st.log_get(late.receipt.receipt_id) is None
    finally:
        st.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_sweep_deletes_the_keys_of_expired_contracts_only(kind: str, tmp_path: Any, request: Any) -> None:
    st, vault, cells = stocked(Store.fresh(kind, tmp_path, request), 1)
    try:
        sh = shares_of(st)
        now = int(time.time())
        soon = _contract(vault.holder_id, [cells[0].cell_id], expires=now + 100)
        never = _contract(vault.holder_id, [cells[0].cell_id])
        for c in (soon, never):
            sh.offer(vault.id, c, now)
            sh.answer(GRANTEE, c.contract_id, "accept", now)
        assert sh.sweep(now + 99) == 0
        assert len(sh.shared(GRANTEE, now + 99, b"\x00" * 64, 10)) == 2
        assert sh.sweep(now + 100) >= 1
        assert sh.key_count(soon.contract_id) == 0 and sh.key_count(never.contract_id) == 1
        assert [r[0] for r in sh.shared(GRANTEE, now + 100, b"\x00" * 64, 10)] == [never.contract_id]
        rows = {r.contract: r for r in sh.offered(vault.id, now + 100)}
        assert rows[soon.contract].expired and not rows[never.contract].expired
    finally:
        st.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_contracts_in_force_per_vault_are_bounded(kind: str, tmp_path: Any, request: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import server.storage.shares as shares_mod

    monkeypatch.setattr(shares_mod, "MAX_LIVE_CONTRACTS", 2)
    st, vault, cells = stocked(Store.fresh(kind, tmp_path, request), 1)
    try:
        sh = shares_of(st)
        now = int(time.time())
        first, second, third = (_contract(vault.holder_id, [cells[0].cell_id]) for _ in range(3))
        sh.offer(vault.id, first, now)
        sh.offer(vault.id, second, now)
        with pytest.raises(StorageQuota):
            sh.offer(vault.id, third, now)
        assert sh.key_count(third.contract_id) == 0
        sh.revoke(vault.id, first.contract_id)          # a revoked contract no longer counts
        sh.offer(vault.id, third, now)
    finally:
        st.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_flood_of_large_unanswered_offers_neither_hides_an_accepted_share_nor_outgrows_an_answer(
        kind: str, tmp_path: Any, request: Any) -> None:
    from ownmem.wire import codec, shares
    from ownmem.wire.limits import MAX_ANSWER
    from server.share_routes import LISTING_BYTES, within_budget
    from tests.server.storekit import random_cells

    st, friend, cells = stocked(Store.fresh(kind, tmp_path, request), 1)
    try:
        sh = shares_of(st)
        now = int(time.time())
        me = os.urandom(32)          # the grantee of this test alone (the module's is shared)
        kept = _contract(friend.holder_id, [cells[0].cell_id], grantee=me)
        sh.offer(friend.id, kept, now - 10)
        assert sh.answer(me, kept.contract_id, "accept", now) == "accepted"
        # a stranger offers the grantee contract after contract of the largest size, never answered
        stranger = st.register(registration())
        theirs = random_cells(1)
        st.push(stranger.id, theirs)
        big = MAX_ANSWER // 3 // 60_000 + 10
        for _ in range(big):
            sh.offer(stranger.id, _contract(stranger.holder_id, [theirs[0].cell_id], grantee=me, size=60_000), now)
        rows = sh.received(me, now)
        assert len(rows) == big + 1 and rows[0].contract == kept.contract   # the accepted one first
        entries, more = within_budget(rows)
        assert more and entries[0].contract == kept.contract and len(entries) < len(rows)
        assert sum(len(e.contract) for e in entries) <= LISTING_BYTES
        # what the grantee's device reads stays far inside its bound, both sides at their budget
        body = codec.dump_json(shares.ShareList(entries, entries, more).encode())
        assert len(body) < MAX_ANSWER * 2 // 3
        assert shares.ShareList.parse(json.loads(body)).more is True
    finally:
        st.close()


def test_a_listing_within_its_budget_says_nothing_was_left_out() -> None:
    from server.share_routes import within_budget
    from server.storage.shares import ShareRow

    rows = [ShareRow(os.urandom(300), GRANTEE, "offered", False, False) for _ in range(3)]
    entries, more = within_budget(rows)
    assert not more and [e.contract for e in entries] == [r.contract for r in rows]
