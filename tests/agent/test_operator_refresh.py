"""The operator's refresh in-process, over a real vault (no server: nothing here needs one): edit
links are honoured once per change, by the operator, and the UOMP item view is built from the
operator's heads; a plain new memory costs no pass over the others; what the index holds is
what a full derivation from the store gives."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette

from ownmem.agent import operator as operator_module
from ownmem.agent.operator import Operator
from ownmem.agent.uomp_mount import mount
from ownmem.uomp.control import is_control
from ownmem.usecases.items import put_item
from ownmem.vault import Vault
from ownmem.vault.remote import Remote
from ownmem.vault.vault import honour_links

PASS = "refresh test: seven copper kettles on the stove"


def _recallable(op: Operator) -> None:
    """Mark every object's cell as having reached the server (what a sync does)."""
    store = op.v.store
    now = int(time.time())
    with store.transaction():
        for row in store.unpushed(10_000):
            cid, cell = op.syncer._cell_for(row, now)
            store.put_cell(row.object_id, cid, cell, pushed=True)


def _count_link_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The operator's passes over every entry's edit links, one length per pass."""
    calls: list[int] = []

    def counted(entries: Any) -> Any:
        calls.append(len(entries))
        return honour_links(entries)
    monkeypatch.setattr(operator_module, "honour_links", counted)
    return calls


def test_links_are_honoured_once_per_change_and_the_item_view_follows_the_operators_heads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v = Vault.create(tmp_path / "vault", PASS)
    calls = _count_link_passes(monkeypatch)
    op = Operator(v, Remote("http://127.0.0.1:1", "refresh-test"))
    try:
        first = v.add("the first note")
        put_item(v, "diet", "vegetarian", tags=["food"], sensitivity="low")
        _recallable(op)
        u = mount(Starlette(), op, tmp_path / "vault", 0)
        try:
            assert calls == []                         # the first refresh: only plain memories, no pass
            assert set(u.items.by_key) == {"diet"}
            # an edit: a link changed, so one pass, by the operator only
            v.edit(first.hex(), content="the first note, edited")
            put_item(v, "diet", "vegan", tags=["food"], sensitivity="low")
            _recallable(op)
            op.refresh()
            assert len(calls) == 1
            assert u.items.by_key["diet"].value == "vegan"
            assert sorted(e.plaintext for e in op.index.search(None)) == [
                "diet: \"vegan\"", "the first note, edited"]
            # a plain new memory: no pass over the others at all
            v.add("a plain new note")
            _recallable(op)
            op.refresh()
            assert len(calls) == 1
            # and the result is what a full derivation gives
            full = {e.id for e in honour_links([e for e, _, _ in op._opened.values()])[0] if e.is_head}
            assert {e.id for e in op.heads.values()} == full
            assert len(op.index) == len(full) == 3
        finally:
            u.close()
    finally:
        op.close()
        v.lock()


def test_bookkeeping_records_cost_no_pass_and_no_item_rebuild_but_a_revocation_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An audit batch (one per ~1,000 Guard decisions under load) or a session record links to
    nothing and changes no head: the operator opens it and derives nothing again, and the item
    view is not rebuilt.  A revocation record is control with an effect: a full pass."""
    v = Vault.create(tmp_path / "vault", PASS)
    calls = _count_link_passes(monkeypatch)
    op = Operator(v, Remote("http://127.0.0.1:1", "inert-test"))
    try:
        put_item(v, "diet", "vegetarian", tags=["food"], sensitivity="low")
        _recallable(op)
        u = mount(Starlette(), op, tmp_path / "vault", 0)
        rebuilt: list[int] = []
        inner = u.items.rebuild

        def rebuild(heads: Any, opened: Any) -> None:
            rebuilt.append(1)
            inner(heads, opened)
        monkeypatch.setattr(u.items, "rebuild", rebuild)
        try:
            heads = dict(op.heads)
            audit = v.add("UOMP audit batch 1", tags=("uomp-audit",),
                          extensions={"uomp_audit": {"v": 1, "seq": 1, "entries": []}})
            v.add("session record", tags=("uomp-session",), extensions={"uomp_session": {"session_id": "s1"}})
            _recallable(op)
            op.refresh()
            assert calls == [] and rebuilt == []
            assert op.heads == heads and set(u.items.by_key) == {"diet"}
            assert audit in op.linked and audit in op._opened
            # a new item: a plain head, so the view is rebuilt, still with no pass
            put_item(v, "lang", "en", tags=["pref"], sensitivity="low")
            _recallable(op)
            op.refresh()
            assert calls == [] and len(rebuilt) == 1 and set(u.items.by_key) == {"diet", "lang"}
            # a revocation record: control with an effect, one full pass
            v.add("revocation", tags=("uomp-revocation",), extensions={"uomp_revocation": {"session_id": "s1"}})
            _recallable(op)
            op.refresh()
            assert len(calls) == 1 and len(rebuilt) == 2 and set(u.items.by_key) == {"diet", "lang"}
            # and the result is what a full derivation gives
            full = {e.id for e in honour_links([e for e, _, _ in op._opened.values()])[0]
                    if e.is_head and not is_control(e.opened.extensions)}
            assert {e.id for e in op.heads.values()} == full
        finally:
            u.close()
    finally:
        op.close()
        v.lock()


def test_the_event_for_the_services_own_push_is_skipped_once_and_a_gap_syncs(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "vault", PASS)
    op = Operator(v, Remote("http://127.0.0.1:1", "echo-test"))
    s = op.syncer
    try:
        with v.store.transaction():
            v.store.sync_set("pull_seq", b"7")
        assert s.wants_sync(7)                  # nothing of its own: every event syncs
        s.own_push(1, 8)                        # seq 8 is its own cell, right after what it pulled
        assert not s.wants_sync(8)              # the echo of that push: no sync
        assert s.wants_sync(8)                  # a keep-alive repeating it later: a sync, as before
        s.own_push(2, 10)                       # 9, 10: its own again
        assert not s.wants_sync(9) and not s.wants_sync(10) and s.wants_sync(10)
        s.own_push(1, 12)                       # 11 is another device's change: a gap
        assert s.wants_sync(12)
        assert s.wants_sync(13)                 # and anything past its own push syncs
    finally:
        op.close()
        v.lock()


def test_a_keyring_change_with_the_services_own_write_reopens_every_entry(tmp_path: Path) -> None:
    """`ownmem trust remove` while the service writes: one refresh sees both its own write and a
    keyring that lost a key.  Every entry taken out for the keyring goes back in, derived again,
    not only the write (recall once came back with the write alone)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    v = Vault.create(tmp_path / "vault", PASS)
    op = Operator(v, Remote("http://127.0.0.1:1", "keyring-test"))
    try:
        v.add("written before the change")
        v.add("also written before")
        kid = v.trust_add(Ed25519PrivateKey.generate().public_key().public_bytes_raw())
        _recallable(op)
        op.refresh()
        assert len(op.index) == 2
        v.trust_remove(kid)
        new = v.add("the service's own write")
        _recallable(op)
        got = v.store.cell_of(new)
        assert got is not None
        op._admitted = {new: got}           # what the service's write leaves for this refresh
        op.refresh()
        assert sorted(e.plaintext for e in op.index.search(None)) == [
            "also written before", "the service's own write", "written before the change"]
    finally:
        op.close()
        v.lock()
