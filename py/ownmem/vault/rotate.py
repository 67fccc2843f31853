"""Scope-KEK rotation (ApertoMemory §15.6 "Key Rotation", second bullet, and §15.7 "Device and Key Revocation"; SAIHM on
kekVersion; docs/decisions.md "Key Rotation").

    rotate NAME   1. a new KEK for the scope, under the SAME scope id (each sealed object names
                     its scope id, so no object and no cell changes)
                  2. one local transaction: the scope entry wraps the new KEK, the scope's
                     generation goes up (the kekVersion of cells made from now on), the old KEK
                     is kept wrapped as the *retiring* one, every DEK of the scope is re-wrapped
                     under the new KEK, and each one whose cell reached the server is queued
                  3. linked: the metadata carries the new entry, the generation and the retiring
                     KEK (a device or an export reading the server meanwhile can still open the
                     wraps not yet replaced); the queue goes to the server in bounded batches
                     (POST .../rewrap), each batch dequeued once the server took it
                  4. the queue empty: the retiring KEK is destroyed here, then in the metadata,
                     so on every device (each re-wraps what it holds under it first)

Killed anywhere, nothing is unreadable: step 2 is one transaction (before it the old KEK opens
everything, after it the new one opens everything here); the server holds old or new wraps,
and the metadata names both KEKs until the queue is empty; running it again (or a sync)
resumes at step 3.  O(objects in the scope); ciphertexts and cells are untouched.

What a device pulls while a rotation is under way may carry an old wrap: it is re-wrapped
under the KEK in force as it is stored (``adopt_wrap``), and queued for the server, so the
local store only ever holds wraps under a scope's KEK in force.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ownmem.aperto import keys as aperto_keys
from ownmem.aperto.container import ScopeEntry
from ownmem.aperto.keys import WrappedKek
from ownmem.crypto import CryptoProvider, run_sync
from ownmem.errors import AuthenticationFailed, SyncError, VaultError
from ownmem.vault import rekey
from ownmem.vault.vault import UnlockedVault


@dataclass(frozen=True, slots=True)
class Rotated:
    """What a rotation did: the scope, its new generation, the DEKs re-wrapped here, the new
    wraps the server took, whether the old KEK is destroyed everywhere it reaches, and whether
    another device's rotation of the scope reached the server first (``joined``: this device
    took that one's new KEK and finished it, rather than its own)."""

    scope: str
    generation: int
    rewrapped: int
    sent: int
    finished: bool
    refusals: list[str] = field(default_factory=list)
    joined: bool = False


# ---------------------------------------------------------------- decisions (keys in, keys out)

async def rewrap(p: CryptoProvider, wraps: Sequence[tuple[bytes, bytes]], old_kek: bytes, new_kek: bytes,
                 ) -> list[tuple[bytes, bytes]]:
    """(object id, wrap under ``new_kek``) for each wrap that opens under ``old_kek``; one that
    does not (already new, or damaged) is left as it is.  AES-KW is deterministic: every device
    that re-wraps one DEK under one KEK makes the same bytes."""
    deks = await p.aes_kw_unwrap_many(old_kek, [w for _, w in wraps])
    return [(oid, await p.aes_kw_wrap(new_kek, dek)) for (oid, _), dek in zip(wraps, deks, strict=True)
            if dek is not None]


async def wrap_accepted(p: CryptoProvider, offered: bytes, held: bytes, kek: bytes,
                        retiring: bytes | None) -> bool:
    """Whether a new wrap from the server replaces the one held: it must open under the KEK in
    force (an old wrap handed back, or a forged one, does not) to the DEK the held wrap opens
    to.  A held wrap that opens under neither KEK is no DEK to lose: the new one is taken."""
    new = (await p.aes_kw_unwrap_many(kek, [offered]))[0]
    if new is None:
        return False
    for k in (kek, retiring):
        if k is not None:
            have = (await p.aes_kw_unwrap_many(k, [held]))[0]
            if have is not None:
                return have == new
    return True


# ---------------------------------------------------------------- the local store

async def _kek_of(v: UnlockedVault, scope_id: bytes, wrapped: WrappedKek) -> bytes:
    return await aperto_keys.unwrap_kek(v.crypto, wrapped, scope_id, v.identity)


def retiring_kek(v: UnlockedVault, scope_id: bytes, retiring: WrappedKek) -> bytes | None:
    """The retiring KEK of a rotation under way, or None if it is not wrapped to this vault's key."""
    try:
        return run_sync(_kek_of(v, scope_id, retiring))
    except AuthenticationFailed:
        return None


def _scope(v: UnlockedVault, name: str) -> ScopeEntry:
    s = v.store.scopes().get(name)
    if s is None:
        raise VaultError(f"no scope named {name!r} (see `ownmem scope list`)")
    return s


def start(v: UnlockedVault, name: str) -> tuple[ScopeEntry, int]:
    """Steps 1-2 (or nothing, if a rotation of this scope is under way: it is resumed).
    -> (the scope entry, the DEKs re-wrapped here)."""
    if rekey.is_retired(name):
        raise VaultError("a scope a passphrase change retired takes no writes: rotate the scope of its name instead")
    s = _scope(v, name)
    gen, retiring = v.store.kek_gens().get(s.scope_id, (1, None))
    if retiring is not None:
        return s, 0
    p = v.crypto
    old, new = v.kek(s), aperto_keys.new_key()
    wrapped = run_sync(aperto_keys.wrap_kek(p, new, v.identity.ka_pub, s.scope_id))
    done = run_sync(rewrap(p, v.store.wraps_in_scope(s.scope_id), old, new))
    with v.store.transaction():
        v.store.set_scope_wrap(s.scope_id, wrapped)
        v.store.set_kek_gen(s.scope_id, gen + 1, s.wrapped)
        v.store.set_wraps(done)
        v.store.queue_rewraps(o for o, _ in done)
    v.forget_kek(s.scope_id)
    return _scope(v, name), len(done)


def sweep(v: UnlockedVault, scope_id: bytes) -> int:
    """What this device still holds under the retiring KEK (written by another process as the
    rotation began, or pulled) re-wrapped under the one in force, each one with a cell queued
    for the server.  -> how many were queued."""
    retiring = v.store.kek_gens().get(scope_id, (1, None))[1]
    scope = next((s for s in v.store.scopes().values() if s.scope_id == scope_id), None)
    old = None if retiring is None or scope is None else retiring_kek(v, scope_id, retiring)
    if old is None or scope is None:
        return 0
    done = run_sync(rewrap(v.crypto, v.store.wraps_in_scope(scope_id), old, v.kek(scope)))
    with v.store.transaction():
        v.store.set_wraps(done)
        v.store.queue_rewraps(o for o, _ in done)
    return len(done)


def finish_here(v: UnlockedVault, scope_id: bytes) -> bool:
    """Step 4 on this device, once the server holds every new wrap: the retiring KEK destroyed
    (the store overwrites what it deletes).  -> False, nothing destroyed, if a wrap is still to
    reach the server."""
    gen, retiring = v.store.kek_gens().get(scope_id, (1, None))
    if retiring is None:
        return True
    sweep(v, scope_id)
    if v.store.rewraps_waiting(scope_id):
        return False
    with v.store.transaction():
        v.store.set_kek_gen(scope_id, gen, None)
    v.store.checkpoint()
    return True


def follow(v: UnlockedVault, theirs: dict[bytes, tuple[int, WrappedKek | None]],
           entries: dict[bytes, ScopeEntry]) -> None:
    """The generations of the server's (owner-signed) metadata, each scope entry by id: a newer
    generation takes the server's entry and its retiring KEK, every DEK held here re-wrapped
    from this device's KEKs (the one in force and a retiring one) in one transaction.  At one
    generation, an entry whose KEK is not this device's is a rotation another device started
    at the same moment, which reached the server first: it is taken the same way (the server's
    first one wins, and this device's own new KEK is dropped before anything of it is pushed);
    a retiring KEK the metadata dropped is destroyed here too (``finish_here``)."""
    mine = v.store.kek_gens()
    for sid, (gen, retiring) in theirs.items():
        have, my_retiring = mine.get(sid, (1, None))
        scope = next((s for s in v.store.scopes().values() if s.scope_id == sid), None)
        new = entries.get(sid)
        if scope is None or new is None or gen < have:
            continue
        if gen == have and new.wrapped == scope.wrapped:
            if my_retiring is not None and retiring is None:
                finish_here(v, sid)
            continue
        try:
            new_kek = run_sync(_kek_of(v, sid, new.wrapped))
        except AuthenticationFailed:
            raise SyncError(f"the server's new key of scope {scope.name!r} does not open with this vault's "
                            "key: refused, nothing changed") from None
        old_kek = v.kek(scope)
        if gen == have and new_kek == old_kek:
            # the same KEK wrapped again (each wrap has its own ephemeral key): the server's bytes
            # taken, so the next sync compares equal without an unwrap
            with v.store.transaction():
                v.store.set_scope_wrap(sid, new.wrapped)
            if my_retiring is not None and retiring is None:
                finish_here(v, sid)
            continue
        held = v.store.wraps_in_scope(sid)
        done = run_sync(rewrap(v.crypto, held, old_kek, new_kek))
        straggling = None if my_retiring is None else retiring_kek(v, sid, my_retiring)
        if straggling is not None and straggling != new_kek:
            # written under this device's retiring KEK as its own rotation began (another process)
            done += run_sync(rewrap(v.crypto, held, straggling, new_kek))
        with v.store.transaction():
            v.store.set_scope_wrap(sid, new.wrapped)
            v.store.set_kek_gen(sid, gen, retiring)
            v.store.set_wraps(done)
            # the server may hold a cell of these under the old KEK that only this device
            # pushed (written before it learnt of the rotation): each goes again, and one
            # the server holds already is no change there
            v.store.queue_rewraps(o for o, _ in done)
        v.forget_kek(sid)
        if retiring is None:
            v.store.checkpoint()


async def missed_rotations(v: UnlockedVault, theirs: dict[bytes, tuple[int, WrappedKek | None]],
                           entries: dict[bytes, ScopeEntry], ident: aperto_keys.Identity,
                           ) -> tuple[list[tuple[bytes, bytes]], dict[bytes, tuple[int, WrappedKek | None]]]:
    """A device taking a passphrase change it missed (vault/rekey_sync.py ``catch_up``) may have
    missed a rotation before it too: the server's entries open only under the NEW keys
    (``ident``), this device's under its own.  -> (each DEK held here re-wrapped from this
    device's KEK to the server's, the generations to keep), decided before anything is written."""
    p, mine = v.crypto, v.store.kek_gens()
    local = {s.scope_id: s for s in v.store.scopes().values()}
    wraps: list[tuple[bytes, bytes]] = []
    gens: dict[bytes, tuple[int, WrappedKek | None]] = {}
    for sid, (gen, retiring) in theirs.items():
        have = mine.get(sid, (1, None))[0]
        if gen <= have or sid not in local or sid not in entries:
            continue
        old = await v.kek_async(local[sid])
        new = await aperto_keys.unwrap_kek(p, entries[sid].wrapped, sid, ident)
        wraps += await rewrap(p, v.store.wraps_in_scope(sid), old, new)
        gens[sid] = (gen, retiring)
    return wraps, gens


def adopt_wrap(v: UnlockedVault, scope_id: bytes, wrapped: bytes) -> tuple[bytes, bool]:
    """A wrapped DEK pulled from the server, as the store keeps it: one under the retiring KEK of
    a rotation under way is re-wrapped under the KEK in force -> (the wrap, whether it was)."""
    retiring = v.store.kek_gens().get(scope_id, (1, None))[1]
    scope = next((s for s in v.store.scopes().values() if s.scope_id == scope_id), None)
    if retiring is None or scope is None:
        return wrapped, False
    p, kek = v.crypto, v.kek(scope)
    if run_sync(p.aes_kw_unwrap_many(kek, [wrapped]))[0] is not None:
        return wrapped, False
    try:
        old = run_sync(_kek_of(v, scope_id, retiring))
    except AuthenticationFailed:
        return wrapped, False
    done = run_sync(rewrap(p, [(b"", wrapped)], old, kek))
    return (done[0][1], True) if done else (wrapped, False)
