"""A scope-KEK rotation on one device (vault/rotate.py, docs/decisions.md "Key Rotation"), from
the side of whoever kept the scope's OLD KEK (a copy of an earlier export, a device's memory):
after the rotation it opens no wrapped DEK this vault holds or exports; each object, its id and
its bytes are unchanged; the reference opens every object of a post-rotation export, none forged;
a rotation that fails half-way changes nothing."""
from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import amem.keys
import amem.vault
import pytest

from ownmem.aperto import keys as K
from ownmem.aperto.container import parse_container
from ownmem.aperto.model import Trust
from ownmem.crypto import provider, run_sync
from ownmem.errors import AuthenticationFailed, StoreError, VaultError
from ownmem.vault import Vault, export_vault, rotate
from ownmem.vault.store import Store

PW = "rotation tests: a passphrase for the scope keys 93"
P = provider()


@pytest.fixture
def ref_memo() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(amem.keys, "master_from_passphrase",
                   functools.lru_cache(maxsize=None)(amem.keys.master_from_passphrase))
        yield


def _none_open(kek: bytes, wraps: list[bytes]) -> bool:
    return all(d is None for d in run_sync(P.aes_kw_unwrap_many(kek, wraps)))


def test_the_old_kek_opens_nothing_after_a_rotation_and_nothing_else_changes(tmp_path: Path, ref_memo: None) -> None:
    v = Vault.create(tmp_path / "v", PW)
    v.add_scope("work")
    in_work = {v.add(f"work note {i}", scope="work") for i in range(12)}
    elsewhere = {v.add("in the default scope")}
    scope = v.scopes()["work"]
    old_kek = v.kek(scope)
    sealed_before = {o.object_id: o.sealed for o in v.store.objects()}
    export_vault(v, tmp_path / "before.amem")

    done = rotate.start(v, "work")
    assert done[1] == len(in_work)
    assert rotate.finish_here(v, scope.scope_id)          # not linked: nothing waits for a server
    after = v.add("written after the rotation", scope="work")

    # the same scope id, every sealed object byte for byte; only the wraps changed
    new_scope = v.scopes()["work"]
    assert new_scope.scope_id == scope.scope_id and new_scope.wrapped != scope.wrapped
    assert {o.object_id: o.sealed for o in v.store.objects() if o.object_id != after} == sealed_before
    assert v.store.kek_gen(scope.scope_id) == 2 and v.store.kek_gens()[scope.scope_id][1] is None
    # the old KEK opens no wrap held here, and is no longer anywhere in the store
    work_wraps = [w for _, w in v.store.wraps_in_scope(scope.scope_id)]
    assert len(work_wraps) == len(in_work) + 1 and _none_open(old_kek, work_wraps)
    assert v.kek(new_scope) != old_kek
    listing = v.open_all()
    assert listing.refused == []
    assert {e.id for e in listing.entries} == in_work | elsewhere | {after}
    assert all(e.opened.trust is Trust.SELF for e in listing.entries)
    v.store.checkpoint()
    folder_bytes = b"".join(p.read_bytes() for p in (tmp_path / "v").iterdir() if p.is_file())
    assert scope.wrapped.kek_wrapped not in folder_bytes                  # the retiring wrap is gone
    export_vault(v, tmp_path / "after.amem")
    v.close()

    # the export: its scope entry opens with the owner's keys to the new KEK, under which every
    # wrap of the scope opens, and none under the old one
    c = parse_container((tmp_path / "after.amem").read_bytes())
    u = Vault(tmp_path / "v").unlock(PW)
    try:
        exported = c.meta.scopes["work"]
        assert exported.scope_id == scope.scope_id
        new_kek = run_sync(K.unwrap_kek(P, exported.wrapped, exported.scope_id, u.identity))
        assert new_kek != old_kek
        wraps = [c.deks[o] for o in in_work | {after}]
        assert _none_open(old_kek, wraps)
        assert None not in run_sync(P.aes_kw_unwrap_many(new_kek, wraps))
        # an export made before holds the old wraps: the new KEK opens none of them (nothing
        # written before moves to the old key; the old key moves to nothing)
        old_c = parse_container((tmp_path / "before.amem").read_bytes())
        assert _none_open(new_kek, [old_c.deks[o] for o in in_work])
    finally:
        u.close()

    # the reference opens every object of the post-rotation export, none forged
    amem.vault.Vault.import_file(tmp_path / "after.amem", tmp_path / "ref", PW)
    ok, bad = amem.vault.Vault(tmp_path / "ref").open_all(PW)
    assert bad == []
    assert {o["id"]: o["trust"] for o in ok} == {o.hex(): "self" for o in in_work | elsewhere | {after}}


def test_cells_made_after_a_rotation_carry_the_new_generation(tmp_path: Path) -> None:
    from ownmem.saihm.cell import parse_cell
    from ownmem.vault.sync import Syncer

    v = Vault.create(tmp_path / "v", PW)
    try:
        before = v.add("before")
        s = Syncer(v, None)  # type: ignore[arg-type]   # only makes cells here, talks to no server
        row = v.store.get_object(before)
        assert row is not None
        _, cell = s._cell_for(row, 1700000000)
        v.store.put_cell(before, parse_cell(cell).cell_id, cell, pushed=True)
        rotate.start(v, "default")
        after = v.store.get_object(v.add("after"))
        assert after is not None
        assert parse_cell(cell).kek_version == 1
        assert parse_cell(s._cell_for(after, 1700000000)[1]).kek_version == 2
        # the cell made before keeps its bytes; its object's new wrap waits for the server
        assert v.store.cell_of(before) == (parse_cell(cell).cell_id, cell)
        assert [o for o, _, _ in v.store.rewrap_outbox(10)] == [before]
        assert not rotate.finish_here(v, v.scopes()["default"].scope_id)    # the server lacks it: kept
        assert v.store.kek_gens()[v.scopes()["default"].scope_id][1] is not None
        # a second run resumes: no second new KEK while one rotation is under way
        wrapped = v.scopes()["default"].wrapped
        assert rotate.start(v, "default")[1] == 0 and v.scopes()["default"].wrapped == wrapped
        # and the passphrase cannot change under an unfinished rotation (the retiring KEK is
        # wrapped to today's key)
        with pytest.raises(VaultError, match="rotation is not finished"):
            v.change_passphrase("another passphrase for this vault 55")
    finally:
        v.close()


def test_a_rotation_that_fails_half_way_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v = Vault.create(tmp_path / "v", PW)
    try:
        ids = {v.add(f"note {i}") for i in range(5)}
        scope = v.scopes()["default"]
        rows = {o.object_id: o.dek_wrapped for o in v.store.objects()}

        def broken(self: Store, wraps: object) -> None:
            raise StoreError("the disk is full")
        monkeypatch.setattr(Store, "set_wraps", broken)
        with pytest.raises(StoreError):
            rotate.start(v, "default")
        monkeypatch.undo()
        assert v.scopes()["default"] == scope and v.store.kek_gens() == {}
        assert {o.object_id: o.dek_wrapped for o in v.store.objects()} == rows
        assert {e.id for e in v.open_all().entries} == ids
    finally:
        v.close()


def test_a_forged_new_wrap_is_refused_and_the_held_one_kept() -> None:
    dek, kek, other = b"\x01" * 32, b"\x02" * 32, b"\x03" * 32
    held = run_sync(P.aes_kw_wrap(kek, dek))
    assert run_sync(rotate.wrap_accepted(P, held, held, kek, None))
    # under a key not in force (the old one handed back, or any other): refused
    assert not run_sync(rotate.wrap_accepted(P, run_sync(P.aes_kw_wrap(other, dek)), held, kek, None))
    # under the key in force, but to another DEK than the one held: refused
    assert not run_sync(rotate.wrap_accepted(P, run_sync(P.aes_kw_wrap(kek, b"\x04" * 32)), held, kek, None))
    # the held wrap under the retiring key, the offered one under the new key, one DEK: taken
    old_held = run_sync(P.aes_kw_wrap(other, dek))
    assert run_sync(rotate.wrap_accepted(P, held, old_held, kek, other))
    with pytest.raises(AuthenticationFailed):
        run_sync(P.aes_kw_unwrap(other, held))


def test_the_cli_on_a_device_with_no_server_says_where_the_old_key_is_gone(tmp_path: Path) -> None:
    """`ownmem scope rotate` on a vault linked to no server claims nothing of a server or of other
    devices; a scope that does not exist is refused, naming how to list them, and nothing changes."""
    from tests.sync.synckit import cli_env, ownmem

    folder = tmp_path / "vault"
    v = Vault.create(folder, PW)
    v.add_scope("work")
    ids = {v.add(f"work {i}", scope="work") for i in range(3)}
    sid = v.scopes()["work"].scope_id
    v.close()
    env = cli_env(tmp_path, folder, PW)
    missing = ownmem("scope", "rotate", "nosuch", env=env)
    assert missing.returncode == 1 and "no scope named 'nosuch' (see `ownmem scope list`)" in missing.stderr
    r = ownmem("scope", "rotate", "work", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "has a new key (generation 2) on this device (it is not linked to a server): 3 memory key(s)" in r.stdout
    assert "the old key is destroyed on this device." in r.stdout
    assert "server" not in r.stdout.split("\n", 1)[1] and "other devices" not in r.stdout
    u = Vault(folder).unlock(PW)
    try:
        assert u.store.kek_gens() == {sid: (2, None)}
        assert {e.id for e in u.open_all().entries} == ids and u.open_all().refused == []
    finally:
        u.close()
