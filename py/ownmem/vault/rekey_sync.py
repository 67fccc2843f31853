"""A passphrase change and the sync server (vault/rekey.py has the keys; docs/decisions.md
"Key Rotation"):

    change_passphrase  this device: sync, then the change in one local transaction that
                       commits only once the server took the new keys (POST .../rekey, signed
                       by the owner key in force, the new one, the sync and holder keys)
    catch_up           a device that missed it: its sync stopped with PassphraseChanged; the new
                       passphrase must derive the server's owner key AND unwrap the server's
                       root wrap to this device's own vault root, and the metadata must carry a
                       succession from this device's owner key, signed by both keys; then the
                       local keys and scopes follow the server's
"""
from __future__ import annotations

import time
from collections.abc import Mapping

from ownmem.aperto import keys as aperto_keys
from ownmem.aperto.container import ScopeEntry
from ownmem.crypto import cbor, random_bytes, run_sync
from ownmem.errors import SyncError, WrongPassphrase
from ownmem.vault import rekey, rotate, slots
from ownmem.vault.devicekey import note_keys_changed
from ownmem.vault.metadata import check_metadata_seen, note_metadata_seen, parse_metadata
from ownmem.vault.store import PublicIdentity
from ownmem.vault.sync import Syncer, SyncReport
from ownmem.wire import messages, signed


def change_passphrase(s: Syncer, new_passphrase: str, *, salt: bytes | None = None,
                      master: bytes | None = None) -> rekey.Rekeyed:
    """The change on this device and on the server, both or neither (a crash between the server's
    answer and the local commit leaves this device as one that missed it: ``catch_up``).
    ``salt``/``master``: a caller that ran Argon2id of the new passphrase itself (the browser)."""
    return run_sync(change_passphrase_async(s, new_passphrase, salt=salt, master=master))


async def change_passphrase_async(s: Syncer, new_passphrase: str, *, salt: bytes | None = None,
                                  master: bytes | None = None) -> rekey.Rekeyed:
    """``change_passphrase`` awaiting its Argon2id (the browser; ``master``: derived already from
    ``salt``); the HTTP exchanges stay synchronous, as in ``adopt_from_server_async``."""
    s.sync_metadata(SyncReport())            # the scopes and keys of every device, so all are re-wrapped
    held = s._call(s.remote.get_metadata)    # noqa: SLF001 (this package's own Syncer)
    old = s.v.identity

    def publish(done: rekey.Rekeyed) -> None:
        doc = s.metadata_doc(done.ident).encode()
        version = held.version + 1
        h, sync = s.v.holder(), s.v.sync_key()
        reg = signed.register_message(s.remote.name, done.salt, done.ident.sign_pub, sync.public, done.ident.ka_pub,
                                      h.public)
        c = s.v.crypto
        up = messages.Rekey(
            held.version, done.salt, done.ident.sign_pub, done.ident.ka_pub, done.root_wrap, doc,
            s._signed(version, doc, done.ident),                  # noqa: SLF001
            run_sync(c.ed25519_sign(old.sign.seed, signed.rekey_message(
                s.remote.name, version, done.salt, done.ident.sign_pub, done.ident.ka_pub, done.root_wrap, doc))),
            run_sync(c.ed25519_sign(sync.seed, reg)),
            run_sync(c.mldsa65_sign(h.xi, reg, signed.REGISTER_HOLDER_CONTEXT)))
        got = s._call(lambda: s.remote.rekey(up))                 # noqa: SLF001
        note_metadata_seen(s.store, got, doc)

    return await s.v.change_passphrase_async(new_passphrase, salt=salt, master=master, publish=publish)


def catch_up(s: Syncer, new_passphrase: str, *, derived: tuple[bytes, bytes] | None = None) -> None:
    """Take the server's new keys with the new passphrase (after ``PassphraseChanged``).
    WrongPassphrase if it does not derive them; SyncError, nothing changed, if what the server
    shows is not this vault's own change.  ``derived``: (salt, master) of a caller that ran
    Argon2id of the new passphrase itself, for the salt the server answered (the browser)."""
    v, p = s.v, s.v.crypto
    info = s.remote.lookup()
    if info is None:
        raise SyncError(f"no vault named {s.remote.name!r} on {s.remote.base}")
    if derived is None:
        master = run_sync(aperto_keys.master_from_passphrase(p, new_passphrase, info.salt))
    elif derived[0] != info.salt:
        raise SyncError("the vault's passphrase changed again meanwhile: try again; nothing changed")
    else:
        master = derived[1]
    ident = run_sync(aperto_keys.identity_from_master(p, master))
    if ident.sign_pub != info.owner_pub or ident.ka_pub != info.ka_pub:
        raise WrongPassphrase("wrong passphrase: that is not the new passphrase of this vault")
    ident = run_sync(rekey.identity_for(p, master, info.root_wrap))
    if ident.root != v.identity.root:
        raise SyncError("the server's vault is not this one (its root key differs): refused, nothing changed")
    held = s._call(s.remote.get_metadata)                         # noqa: SLF001
    if not run_sync(p.ed25519_verify(ident.sign_pub, held.signature,
                                     signed.metadata_message(s.remote.name, held.version, held.metadata))):
        raise SyncError("the server's vault metadata is not signed by the new owner key: refused, nothing changed")
    check_metadata_seen(v.store, held.version, held.metadata)
    meta = parse_metadata(held.metadata)
    recs = list(meta.successions)
    if not all(run_sync(rekey.succession_valid(p, r)) for r in recs):
        raise SyncError("the server's record of the key change does not verify: refused, nothing changed")
    chain = rekey.chain_to(recs, ident.sign_pub)
    if chain is None or aperto_keys.key_id(v.identity.sign_pub) not in chain:
        raise SyncError("the server shows no change signed by this device's owner key: refused, nothing changed")
    scopes, keks = run_sync(_follow_scopes(s, meta.vault_public.scopes, ident))
    held_slots = [run_sync(slots.rewrap_slot(p, x, master)) for x in v.store.unlock_slots()]  # open the new master
    # a scope rotation made while this device was away too: its DEKs follow the server's KEK
    rewrapped, gens = run_sync(rotate.missed_rotations(
        v, meta.generations, {e.scope_id: e for e in meta.vault_public.scopes.values()}, ident))
    with v.store.transaction():
        v.store.set_unlock_slots(held_slots)
        v.store.set_wraps(rewrapped)
        for sid, (g, retiring) in gens.items():
            v.store.set_kek_gen(sid, g, retiring)
        v.store.replace_identity(PublicIdentity(info.salt, ident.sign_pub, ident.ka_pub), info.root_wrap)
        v.store.replace_scopes(scopes.values())
        v.store.set_successions(cbor.encode([r.encode() for r in recs]))
        note_metadata_seen(v.store, held.version, held.metadata)
        note_keys_changed(v.store, int(time.time()))     # agent tokens issued before: revoked
    v.ident = ident
    v._keks = keks                                                # noqa: SLF001 (the vault's KEK cache)
    p.forget_secrets()


async def _follow_scopes(s: Syncer, theirs: Mapping[str, ScopeEntry], ident: aperto_keys.Identity,
                         ) -> tuple[dict[str, ScopeEntry], dict[bytes, bytes]]:
    """The server's scope table, and each scope only this device holds (made here while it
    missed the change) re-wrapped to the new key and retired, with a fresh one under its name."""
    v = s.v
    table = dict(theirs)
    ids = {e.scope_id for e in theirs.values()}
    keks: dict[bytes, bytes] = {}
    for name, e in v.store.scopes().items():
        if e.scope_id in ids:
            continue
        kek = await v.kek_async(e)
        kept = name if rekey.is_retired(name) else rekey.retired_name(name, e.scope_id)
        table[kept] = ScopeEntry(kept, e.scope_id, await aperto_keys.wrap_kek(p := v.crypto, kek, ident.ka_pub,
                                                                             e.scope_id))
        keks[e.scope_id] = kek
        base = rekey.current_name(name)
        if base not in table:
            fresh, sid = aperto_keys.new_key(), random_bytes(16)
            table[base] = ScopeEntry(base, sid, await aperto_keys.wrap_kek(p, fresh, ident.ka_pub, sid))
            keks[sid] = fresh
    return table, keks
