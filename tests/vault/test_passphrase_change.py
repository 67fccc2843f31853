"""A passphrase change (vault/rekey.py, docs/decisions.md "Key Rotation"), from the side of
someone who knew the OLD passphrase and kept copies of what it opened: after the change it
opens nothing written afterwards (locally, in an export); what was written before still opens
as ``self`` for the owner and is not reported forged by the reference; the vault's identity
keys (holder, sync, purposes) are unchanged."""
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
from ownmem.crypto import cbor, provider, run_sync
from ownmem.errors import AuthenticationFailed, OwnmemError, VaultError, WrongPassphrase
from ownmem.purposes import Purpose
from ownmem.vault import Vault, export_vault, rekey as R
from ownmem.vault.store import Store
from ownmem.vault.transfer import import_bytes

OLD = "the old passphrase, seen on a shared screen"
NEW = "a new passphrase nobody else has seen 42"
P = provider()


def _old_master(salt: bytes) -> K.Identity:
    return run_sync(K.identity_from_passphrase(P, OLD, salt))


def _opens_any(ident: K.Identity, amem_bytes: bytes, oids: set[bytes]) -> set[bytes]:
    """Which of ``oids`` the keys of ``ident`` open from an export: every scope KEK it can unwrap,
    then every DEK of those objects under any of them."""
    c = parse_container(amem_bytes)
    keks = []
    for s in c.meta.scopes.values():
        try:
            keks.append(run_sync(K.unwrap_kek(P, s.wrapped, s.scope_id, ident)))
        except OwnmemError:
            pass
    opened = set()
    for oid, wrapped in c.deks.items():
        if oid not in oids:
            continue
        for kek in keks:
            try:
                run_sync(K.unwrap_dek(P, wrapped, kek))
                opened.add(oid)
            except OwnmemError:
                pass
    return opened


@pytest.fixture
def ref_memo() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(amem.keys, "master_from_passphrase",
                   functools.lru_cache(maxsize=None)(amem.keys.master_from_passphrase))
        yield


def test_passphrase_change_keeps_the_past_and_locks_the_old_passphrase_out_of_the_future(
        tmp_path: Path, ref_memo: None) -> None:
    v = Vault.create(tmp_path / "v", OLD)
    v.add_scope("work")
    in_work = v.add("written before", scope="work")
    before = {in_work, v.add("also before")}
    old_salt = v.public().salt
    old_pub = v.identity.sign_pub
    holder_id, sync_pub = v.holder().holder_id, v.sync_key().public
    cache_key = v.purpose_key(Purpose.DEVICE_CACHE)
    export_vault(v, tmp_path / "before.amem")
    old_scopes = v.scopes()

    done = v.change_passphrase(NEW)
    assert done.ident.sign_pub != old_pub
    after = {v.add("written after", scope="work"), v.add("after, default scope")}
    # an edit of an old memory goes to the new KEK, not back into the retired scope
    edited = v.edit(in_work.hex(), content="edited after")
    after.add(edited)
    # the identity keys survive: the same holder, sync key, device-cache key
    assert (v.holder().holder_id, v.sync_key().public, v.purpose_key(Purpose.DEVICE_CACHE)) == (
        holder_id, sync_pub, cache_key)
    listing = v.open_all()
    assert listing.refused == []
    by_id = {e.id: e for e in listing.entries}
    assert all(by_id[o].opened.trust is Trust.SELF for o in before | after)
    assert by_id[edited].scope == "work"
    export_vault(v, tmp_path / "after.amem")
    v.close()

    # the old passphrase: refused by the vault, and its keys open nothing written after the change
    with pytest.raises(WrongPassphrase):
        Vault(tmp_path / "v").unlock(OLD)
    old_ident = _old_master(old_salt)
    data = (tmp_path / "after.amem").read_bytes()
    assert _opens_any(old_ident, data, after) == set()
    # ... nor with the KEKs it could unwrap from the export made before the change
    old_keks = [run_sync(K.unwrap_kek(P, s.wrapped, s.scope_id, old_ident)) for s in old_scopes.values()]
    c = parse_container(data)
    for oid in after:
        for kek in old_keks:
            with pytest.raises(AuthenticationFailed):
                run_sync(K.unwrap_dek(P, c.deks[oid], kek))
    # the new passphrase opens everything, the same identity keys, old objects as self
    u = Vault(tmp_path / "v").unlock(NEW)
    try:
        assert u.holder().holder_id == holder_id and u.sync_key().public == sync_pub
        assert {e.id: e.opened.trust for e in u.open_all().entries} == {o: Trust.SELF for o in
                                                                        (before | after)}
        # the superseded key is verify-only: never the signer of anything new
        assert u.identity.sign_pub == c.meta.sign_pub != old_pub
        assert c.meta.known_keys[K.key_id(old_pub)] == old_pub
    finally:
        u.close()

    # a fresh import of the post-change export is this vault again: the same holder, old objects as self
    report, w = import_bytes(lambda: Store(tmp_path / "restored"), data, NEW)
    try:
        assert report.imported == len(before | after)
        assert w.holder().holder_id == holder_id and w.sync_key().public == sync_pub
        assert {e.id: e.opened.trust for e in w.open_all().entries} == {o: Trust.SELF for o in before | after}
    finally:
        w.close()
    with pytest.raises(WrongPassphrase):
        import_bytes(lambda: Store(tmp_path / "restored-old"), data, OLD)

    # the reference opens every object of the post-change export, none forged
    amem.vault.Vault.import_file(tmp_path / "after.amem", tmp_path / "ref", NEW)
    ok, bad = amem.vault.Vault(tmp_path / "ref").open_all(NEW)
    assert bad == []
    trust = {o["id"]: o["trust"] for o in ok}
    assert set(trust) == {o.hex() for o in before | after}
    assert {trust[o.hex()] for o in after} == {"self"}
    assert {trust[o.hex()] for o in before} <= {"self", "trusted"}
    # the reference with the OLD passphrase opens nothing of it
    with pytest.raises(Exception):  # noqa: B017 - the reference's own error type
        amem.vault.Vault.import_file(tmp_path / "after.amem", tmp_path / "ref-old", OLD)


def test_a_forged_succession_record_is_refused(tmp_path: Path) -> None:
    """Someone who can write the store adds a record claiming their own key preceded the owner's:
    unsigned by the owner, it makes nothing of theirs open as self."""
    v = Vault.create(tmp_path / "v", OLD)
    try:
        stranger = run_sync(K.signing_key(P, b"\x07" * 32))
        m = R.succession_message(stranger.public, v.identity.sign_pub)
        forged = R.Succession(stranger.public, v.identity.sign_pub, run_sync(P.ed25519_sign(stranger.seed, m)),
                              b"\x00" * 64)
        with v.store.transaction():
            v.store.set_successions(cbor.encode([forged.encode()]))
        with pytest.raises(VaultError, match="does not verify"):
            v.keyring()
    finally:
        v.close()


def test_retired_scope_names_are_reserved(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", OLD)
    try:
        with pytest.raises(VaultError, match="~was-"):
            v.add_scope("work~was-12345678")
    finally:
        v.close()


def test_chain_to_refuses_records_that_do_not_lead_to_the_key() -> None:
    a, b, c = (run_sync(K.signing_key(P, bytes([i]) * 32)).public for i in (1, 2, 3))
    ab = R.Succession(a, b, b"", b"")
    bc = R.Succession(b, c, b"", b"")
    assert R.chain_to([ab, bc], c) == {K.key_id(a): a, K.key_id(b): b}
    assert R.chain_to([ab], c) is None                  # a record of another chain
    assert R.chain_to([], c) == {}
