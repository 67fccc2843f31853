"""Unlock slots (vault/slots.py): a secret other than the passphrase opens the vault's current
master, from the attacker's side: a wrong secret, another slot's wrap moved in, a slot altered,
truncated or malformed, a slot of another vault planted in the store, a removed slot; and a
passphrase change, which re-wraps every slot to the new master without its secret."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ownmem.aperto import keys as K
from ownmem.crypto import cbor, provider, random_bytes, run_sync
from ownmem.errors import MalformedInput, NotFound, VaultError, WrongPassphrase
from ownmem.vault import Vault, slots as S
from ownmem.vault.store import Store
from ownmem.vault.unlock import unlock_with_slot

from .vaultkit import OTHER_PASSPHRASE, PASSPHRASE

P = provider()
SECRET = bytes(range(16))
PRF = bytes(range(100, 132))
NOW = 1_765_000_000


def _make(kind: str = "recovery", secret: bytes = SECRET, master: bytes = b"m" * 32, ref: bytes = b"") -> S.Slot:
    return run_sync(S.make_slot(P, kind, "Recovery kit", ref, secret, master, NOW))


def test_a_slot_opens_the_master_with_its_secret_only() -> None:
    master = random_bytes(32)
    slot = _make(master=master)
    assert run_sync(S.open_slot(P, slot, SECRET)) == master
    assert slot.pub == run_sync(S.slot_secret_key(P, "recovery", SECRET))[1]
    assert master not in S.encode_slot(slot)                       # the slot is public: no master in it
    for wrong in (bytes(16), SECRET[:-1] + b"\x00", SECRET + b"\x00"):
        with pytest.raises(WrongPassphrase):
            run_sync(S.open_slot(P, slot, wrong))
    with pytest.raises(MalformedInput):                            # too short to be a slot secret
        run_sync(S.open_slot(P, slot, SECRET[:15]))


def test_the_kind_is_part_of_the_key() -> None:
    """A passkey's PRF output does not open a recovery slot made from the same bytes, nor the reverse."""
    rec = _make("recovery", PRF)
    pk = _make("passkey", PRF, ref=b"credential-id")
    assert rec.pub != pk.pub
    with pytest.raises(WrongPassphrase):
        run_sync(S.open_slot(P, replace(pk, kind="recovery", ref=b""), PRF))
    with pytest.raises(WrongPassphrase):
        run_sync(S.open_slot(P, replace(rec, kind="passkey"), PRF))


def test_another_slots_wrap_moved_in_or_an_altered_wrap_does_not_open() -> None:
    a, b = _make(master=b"a" * 32), _make(master=b"b" * 32)       # the same secret: the same public key
    assert a.pub == b.pub and a.slot_id != b.slot_id
    moved = replace(a, eph_pub=b.eph_pub, wrapped=b.wrapped)       # b's wrap under a's id
    with pytest.raises(WrongPassphrase):
        run_sync(S.open_slot(P, moved, SECRET))
    flipped = replace(a, wrapped=a.wrapped[:-1] + bytes([a.wrapped[-1] ^ 1]))
    with pytest.raises(WrongPassphrase):
        run_sync(S.open_slot(P, flipped, SECRET))
    other_eph = replace(a, eph_pub=run_sync(P.x25519_public(random_bytes(32))))
    with pytest.raises(WrongPassphrase):
        run_sync(S.open_slot(P, other_eph, SECRET))
    with pytest.raises(WrongPassphrase):                           # a stranger's key in the slot
        run_sync(S.open_slot(P, replace(a, pub=_make(secret=b"x" * 16).pub), SECRET))


def test_a_rewrap_keeps_the_slot_and_opens_the_new_master() -> None:
    slot = _make(master=b"o" * 32)
    new = run_sync(S.rewrap_slot(P, slot, b"n" * 32))
    assert (new.slot_id, new.pub, new.kind, new.label, new.created) == (slot.slot_id, slot.pub, slot.kind,
                                                                        slot.label, slot.created)
    assert new.eph_pub != slot.eph_pub
    assert run_sync(S.open_slot(P, new, SECRET)) == b"n" * 32


def test_encoding_round_trips_and_refuses_anything_malformed() -> None:
    slot = _make("passkey", PRF, ref=b"\x01" * 64)
    raw = S.encode_slot(slot)
    assert S.parse_slot(raw) == slot
    fields = cbor.decode(raw)
    bad = [raw[:-1], raw[:10], b"", raw + b"\x00", cbor.encode(fields[:7]), cbor.encode([*fields, 1]),
           cbor.encode({"slot_id": fields[0]}), b"\xff\xff"]
    for i, short in [(0, 15), (4, 31), (5, 33), (6, 39)]:              # id, pub, eph_pub, wrapped lengths
        f = list(fields)
        f[i] = (f[i] + bytes(40))[:short]
        bad.append(cbor.encode(f))
    for i, value in [(1, "password"), (1, b"passkey"), (2, 5), (2, "x" * 201), (3, "ref"), (3, bytes(1024)),
                     (7, -1), (7, 1.5), (7, True), (7, "now")]:
        f = list(fields)
        f[i] = value
        bad.append(cbor.encode(f))
    rec = cbor.decode(S.encode_slot(_make()))
    rec[3] = b"ref"                                                    # a recovery slot's ref is its root check
    bad.append(cbor.encode(rec))
    for b in bad:
        with pytest.raises(MalformedInput):
            S.parse_slot(b)
    with pytest.raises(MalformedInput):
        run_sync(S.make_slot(P, "fingerprint", "x", b"", SECRET, b"m" * 32, NOW))
    with pytest.raises(MalformedInput):
        run_sync(S.make_slot(P, "recovery", "x", b"", SECRET, b"m" * 31, NOW))


# ------------------------------------------------------------------ the vault and the store
def test_a_vault_unlocks_with_a_slot_as_with_its_passphrase(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", PASSPHRASE)
    oid = v.add("a memory")
    slot = v.add_unlock_slot("passkey", "Phone passkey", b"cred", PRF)
    assert v.unlock_slots() == [slot]
    ident = v.identity
    v.close()
    store = Store(tmp_path / "v")                                     # locked: the slots are listed
    assert [(s.slot_id, s.kind, s.label, s.ref) for s in store.unlock_slots()] == [
        (slot.slot_id, "passkey", "Phone passkey", b"cred")]
    u = unlock_with_slot(store, P, slot.slot_id, PRF)
    try:
        assert (u.identity.sign_pub, u.identity.root, u.identity.master) == (ident.sign_pub, ident.root, ident.master)
        assert [e.id for e in u.open_all().entries] == [oid]
    finally:
        u.close()
    store = Store(tmp_path / "v")
    try:
        with pytest.raises(WrongPassphrase):
            unlock_with_slot(store, P, slot.slot_id, bytes(32))
        with pytest.raises(NotFound):
            unlock_with_slot(store, P, random_bytes(16), PRF)
    finally:
        store.close()


def test_a_planted_slot_of_another_vault_unlocks_nothing(tmp_path: Path) -> None:
    """Whoever can write the store (or hands a device a slot) wraps ANOTHER master to a secret
    they know: it opens, but to keys that are not this vault's, so nothing unlocks."""
    v = Vault.create(tmp_path / "v", PASSPHRASE)
    v.close()
    other = run_sync(K.master_from_passphrase(P, OTHER_PASSPHRASE, bytes(16)))
    planted = _make(master=other)
    store = Store(tmp_path / "v")
    with store.transaction():
        store.set_unlock_slots([planted])
    with pytest.raises(WrongPassphrase):
        unlock_with_slot(store, P, planted.slot_id, SECRET)
    store.close()


def test_a_removed_slot_is_gone(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", PASSPHRASE)
    keep = v.add_unlock_slot("passkey", "Laptop", b"c1", PRF)
    gone = v.add_unlock_slot("recovery", "Recovery kit", b"", SECRET)
    v.remove_unlock_slot(gone.slot_id)
    assert v.unlock_slots() == [keep]
    with pytest.raises(NotFound):
        v.remove_unlock_slot(gone.slot_id)
    v.close()
    store = Store(tmp_path / "v")
    try:
        assert gone.wrapped not in (tmp_path / "v" / Store.FILENAME).read_bytes()
        with pytest.raises(NotFound):
            unlock_with_slot(store, P, gone.slot_id, SECRET)
    finally:
        store.close()


def test_slots_survive_a_passphrase_change_and_open_the_new_master(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", PASSPHRASE)
    rec = v.add_unlock_slot("recovery", "Recovery kit", b"", SECRET)
    pk = v.add_unlock_slot("passkey", "Phone", b"cred", PRF)
    old_master, root = v.identity.master, v.identity.root
    done = v.change_passphrase(OTHER_PASSPHRASE)
    after = v.add("written after the change")
    v.close()
    store = Store(tmp_path / "v")
    held = {s.slot_id: s for s in store.unlock_slots()}
    assert set(held) == {rec.slot_id, pk.slot_id} and held[rec.slot_id].pub == rec.pub
    assert run_sync(S.open_slot(P, held[rec.slot_id], SECRET)) == done.ident.master != old_master
    # the slot's old wrap (a copy kept from before the change) opens only the old master,
    # which unlocks nothing any more
    assert run_sync(S.open_slot(P, rec, SECRET)) == old_master
    with store.transaction():
        store.set_unlock_slots([rec])
    with pytest.raises(WrongPassphrase):
        unlock_with_slot(store, P, rec.slot_id, SECRET)
    with store.transaction():
        store.set_unlock_slots(held.values())
    for sid, secret in ((rec.slot_id, SECRET), (pk.slot_id, PRF)):
        u = unlock_with_slot(store, P, sid, secret)
        assert u.identity.sign_pub == done.ident.sign_pub and u.identity.root == root
        assert after in {e.id for e in u.open_all().entries}
        u.lock()
    store.close()


def test_a_damaged_slot_list_is_a_clear_error(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", PASSPHRASE)
    v.add_unlock_slot("recovery", "Recovery kit", b"", SECRET)
    with v.store.transaction():
        v.store.db.execute("UPDATE meta SET v = ? WHERE k = 'unlock_slots'", (cbor.encode([b"\x00"]),))
    with pytest.raises(VaultError, match="damaged"):
        v.unlock_slots()
    v.close()
