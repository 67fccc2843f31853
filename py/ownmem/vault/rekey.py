"""A passphrase change (ApertoMemory §15.6 "Key Rotation"; docs/decisions.md "Key Rotation"):
the key decisions, as functions of keys in and keys out; the store and the server are the
callers' (vault/passwd.py, vault/sync.py).

    new passphrase --Argon2id(new salt)--> new master --> new owner signing and ka keys
    vault root R (unchanged)  --AES-KW under HKDF(new master, "ownmem/v1/root-wrap")--> root wrap
    each scope:  its KEK re-wrapped to the new ka key, under the name "<name>~was-<id8>"
                 (what was written before stays readable; nothing is written there again)
                 + a fresh KEK and scope id under the old name (what is written afterwards)
    succession:  old owner key -> new owner key, a record both keys sign

O(scopes): no object is touched.  Fresh KEKs, not the old ones re-wrapped, because the old
KEKs' wraps to the old ka key are in every earlier export and metadata copy: the old
passphrase must open nothing written after the change.  R is kept so every ``ownmem/v1/*``
key (holder, sync, agent credentials, device cache, audit) survives; who knew the old
passphrase and kept the old wrap (or the master itself before the first change) still derives
R: a passphrase change protects what is written afterwards, it does not evict anyone from the
identity keys (that is identity rotation).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ownmem.aperto import keys as aperto_keys
from ownmem.aperto.container import ScopeEntry
from ownmem.crypto import CryptoProvider, cbor, random_bytes
from ownmem.errors import AuthenticationFailed, MalformedInput, WrongPassphrase
from ownmem.purposes import Purpose

SUCCESSION_CONTEXT = "ownmem/v1/key-succession"
RETIRED_MARK = "~was-"


def retired_name(name: str, scope_id: bytes) -> str:
    """The name a scope's KEK keeps after a change: only what was written before is under it."""
    return f"{current_name(name)}{RETIRED_MARK}{scope_id.hex()[:8]}"


def is_retired(name: str) -> bool:
    return RETIRED_MARK in name


def current_name(name: str) -> str:
    """The scope that takes writes for ``name``: a retired scope's writes go to its successor."""
    return name.split(RETIRED_MARK, 1)[0]


@dataclass(frozen=True, slots=True)
class Succession:
    """One owner signing key superseded by the next (§15.6 "Key Rotation"): both signed the same message, so
    neither a thief of the old key alone nor a stranger's new key can claim the link."""

    old_pub: bytes
    new_pub: bytes
    old_sig: bytes
    new_sig: bytes

    def message(self) -> bytes:
        return succession_message(self.old_pub, self.new_pub)

    def encode(self) -> list[bytes]:
        return [self.old_pub, self.new_pub, self.old_sig, self.new_sig]


def succession_message(old_pub: bytes, new_pub: bytes) -> bytes:
    return cbor.encode([SUCCESSION_CONTEXT, old_pub, new_pub])


def parse_succession(raw: object) -> Succession:
    if not (isinstance(raw, list) and len(raw) == 4 and all(isinstance(x, bytes) for x in raw)
            and len(raw[0]) == 32 and len(raw[1]) == 32):
        raise MalformedInput("malformed key succession record")
    return Succession(raw[0], raw[1], raw[2], raw[3])


async def succession_valid(p: CryptoProvider, s: Succession) -> bool:
    m = s.message()
    return await p.ed25519_verify(s.old_pub, s.old_sig, m) and await p.ed25519_verify(s.new_pub, s.new_sig, m)


def chain_to(successions: list[Succession], owner_pub: bytes) -> dict[bytes, bytes] | None:
    """The superseded keys {key_id: public} whose records chain (each already verified) to
    ``owner_pub``, or None if a record does not link into the chain (a forged or foreign one)."""
    by_new = {s.new_pub: s for s in successions}
    out: dict[bytes, bytes] = {}
    cur = owner_pub
    while cur in by_new:
        old = by_new[cur].old_pub
        if old == owner_pub or aperto_keys.key_id(old) in out:
            return None                          # a cycle
        out[aperto_keys.key_id(old)] = old
        cur = old
    return out if len(out) == len(successions) else None


async def wrap_root(p: CryptoProvider, master: bytes, root: bytes) -> bytes:
    return await p.aes_kw_wrap(await aperto_keys.derive_purpose_key(p, master, Purpose.ROOT_WRAP), root)


async def unwrap_root(p: CryptoProvider, master: bytes, wrapped: bytes) -> bytes:
    """The vault root under this master; WrongPassphrase if it is not (an older wrap, another vault)."""
    try:
        return await p.aes_kw_unwrap(await aperto_keys.derive_purpose_key(p, master, Purpose.ROOT_WRAP), wrapped)
    except AuthenticationFailed:
        raise WrongPassphrase("the passphrase does not open this vault's root key") from None


async def real_root_wrap(p: CryptoProvider, master: bytes, offered: bytes) -> bytes | None:
    """``offered`` if it unwraps under ``master`` (a vault whose passphrase changed), else None: a
    server's lookup carries 40 bytes for every vault, seeded ones before the first change."""
    try:
        await unwrap_root(p, master, offered)
    except WrongPassphrase:
        return None
    return offered


async def identity_for(p: CryptoProvider, master: bytes, root_wrap: bytes | None) -> aperto_keys.Identity:
    """The owner's keys from a master secret: the root is the master until the first change."""
    root = None if root_wrap is None else await unwrap_root(p, master, root_wrap)
    return await aperto_keys.identity_from_master(p, master, root)


@dataclass(frozen=True, slots=True)
class Rekeyed:
    """Everything a passphrase change writes, decided before anything is written."""

    salt: bytes
    ident: aperto_keys.Identity
    root_wrap: bytes
    scopes: dict[str, ScopeEntry]          # the whole new scope table (retired + fresh)
    keks: dict[bytes, bytes]               # scope_id -> KEK, for every scope of the table
    succession: Succession


async def rekey(p: CryptoProvider, old: aperto_keys.Identity, scopes: Mapping[str, ScopeEntry],
                keks: Mapping[bytes, bytes], new_master: bytes, salt: bytes) -> Rekeyed:
    """The change from ``old`` to the keys of ``new_master`` (Argon2id of the new passphrase and
    ``salt``, run by the caller).  ``keks`` holds the unwrapped KEK of every scope."""
    new = await aperto_keys.identity_from_master(p, new_master, old.root)
    if new.sign_pub == old.sign_pub:
        raise MalformedInput("the new passphrase derives the same keys: choose another (or a new salt)")
    table: dict[str, ScopeEntry] = {}
    out_keks: dict[bytes, bytes] = {}
    for name, s in scopes.items():
        kept = name if is_retired(name) else retired_name(name, s.scope_id)
        table[kept] = ScopeEntry(kept, s.scope_id, await aperto_keys.wrap_kek(p, keks[s.scope_id], new.ka_pub,
                                                                             s.scope_id))
        out_keks[s.scope_id] = keks[s.scope_id]
        if not is_retired(name):
            kek, sid = aperto_keys.new_key(), random_bytes(16)
            table[name] = ScopeEntry(name, sid, await aperto_keys.wrap_kek(p, kek, new.ka_pub, sid))
            out_keks[sid] = kek
    m = succession_message(old.sign_pub, new.sign_pub)
    succ = Succession(old.sign_pub, new.sign_pub, await p.ed25519_sign(old.sign.seed, m),
                      await p.ed25519_sign(new.sign.seed, m))
    return Rekeyed(salt, new, await wrap_root(p, new_master, old.root), table, out_keks, succ)
