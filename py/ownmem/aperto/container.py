"""The portable export container, `.amem` (draft-02 §10 "Portable Export Container").

    amem-export = {1: export_version (1), 2: vault-public, 3: [* sealed-object bstr],
                   4: {* object id => wrapped DEK}, ?5: metadata signature (ownmem),
                   ?6: {"root_wrap", "successions"} (ownmem, after a passphrase change)}
    vault-public = {"salt", "sign_pub", "ka_pub", "scopes": {name: {"scope_id", "kek_wrapped",
                    "eph_pub"}}, ?"known_keys": {hex key_id: Ed25519 public key}}

Beyond the reference: the reference leaves vault-public unauthenticated, so whoever
edits a file can plant an accepted key or swap a scope KEK.  ownmem adds key 5, an
Ed25519 signature by the owner key over

    CBOR ["ownmem/v1/amem-metadata", export_version, vault-public]

The reference reads only keys 1-4, so it still reads ownmem's files.  Verifying key 5
against the identity derived from the passphrase is the importer's job (vault.transfer, import_bytes step 2).

Parsing is one clean error for a container that cannot be read at all; objects are
kept as given and checked one by one later, so one bad object never sinks the rest.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ownmem.aperto.keys import SALT_LEN, Identity, WrappedKek, key_id
from ownmem.aperto.model import ID_LEN
from ownmem.crypto import CryptoProvider, cbor
from ownmem.errors import LimitExceeded, MalformedInput

EXPORT_VERSION = 1
METADATA_CONTEXT = "ownmem/v1/amem-metadata"
SIGNATURE_KEY = 5
# ownmem's vault-root record after a passphrase change: {"root_wrap": bstr, "successions": [...]}
# (ownmem.vault.rekey); each part authenticates itself (AES-KW under the master; records signed by
# both keys), so key 5 need not cover it.  The reference reads only keys 1-4.
ROOT_KEY = 6
MAX_CONTAINER = 1 << 30
MAX_ITEMS = 20_000_000


@dataclass(frozen=True, slots=True)
class ScopeEntry:
    name: str
    scope_id: bytes
    wrapped: WrappedKek


@dataclass(frozen=True, slots=True)
class VaultPublic:
    salt: bytes
    sign_pub: bytes
    ka_pub: bytes
    scopes: Mapping[str, ScopeEntry]
    known_keys: Mapping[bytes, bytes]     # key_id -> Ed25519 public key

    def to_cbor(self) -> dict[str, Any]:
        m: dict[str, Any] = {
            "salt": self.salt, "sign_pub": self.sign_pub, "ka_pub": self.ka_pub,
            "scopes": {s.name: {"scope_id": s.scope_id, "kek_wrapped": s.wrapped.kek_wrapped,
                                "eph_pub": s.wrapped.eph_pub} for s in self.scopes.values()},
        }
        if self.known_keys:
            m["known_keys"] = {kid.hex(): pub for kid, pub in self.known_keys.items()}
        return m

    def scope_by_id(self, scope_id: bytes) -> ScopeEntry | None:
        for s in self.scopes.values():
            if s.scope_id == scope_id:
                return s
        return None


@dataclass(frozen=True, slots=True)
class Container:
    export_version: int
    meta: VaultPublic
    meta_encoded: bytes          # vault-public exactly as the file's map decodes, re-encoded
    objects: tuple[Any, ...]     # each should be a sealed-object bstr; checked per object
    deks: Mapping[bytes, bytes]  # object id -> wrapped DEK
    signature: bytes | None      # ownmem's metadata signature, absent in reference files
    root: Any = None             # key 6 as given (ownmem.vault.transfer checks it), absent before a change


def _bytes(v: Any, n: int | None, what: str) -> bytes:
    if not isinstance(v, bytes) or (n is not None and len(v) != n):
        raise MalformedInput(f"corrupt .amem: {what} must be {n or 'a'} byte{'s' if n else ' string'}")
    return v


def parse_vault_public(v: Any) -> VaultPublic:
    if not isinstance(v, dict):
        raise MalformedInput("corrupt .amem: vault metadata is not a map")
    for k in ("salt", "sign_pub", "ka_pub", "scopes"):
        if k not in v:
            raise MalformedInput(f"corrupt .amem: vault metadata lacks {k!r}")
    scopes_v = v["scopes"]
    if not isinstance(scopes_v, dict):
        raise MalformedInput("corrupt .amem: scopes is not a map")
    scopes: dict[str, ScopeEntry] = {}
    seen_ids: set[bytes] = set()
    for name, e in scopes_v.items():
        if not isinstance(name, str) or not isinstance(e, dict):
            raise MalformedInput("corrupt .amem: malformed scope entry")
        sid = _bytes(e.get("scope_id"), ID_LEN, "scope_id")
        if sid in seen_ids:
            raise MalformedInput("corrupt .amem: two scopes share one scope_id")
        seen_ids.add(sid)
        scopes[name] = ScopeEntry(name, sid, WrappedKek(_bytes(e.get("kek_wrapped"), 40, "kek_wrapped"),
                                                        _bytes(e.get("eph_pub"), 32, "eph_pub")))
    known: dict[bytes, bytes] = {}
    kk = v.get("known_keys", {})
    if not isinstance(kk, dict):
        raise MalformedInput("corrupt .amem: known_keys is not a map")
    for hex_kid, pub in kk.items():
        pub = _bytes(pub, 32, "known key")
        if not isinstance(hex_kid, str) or hex_kid != key_id(pub).hex():
            raise MalformedInput("corrupt .amem: a known key is filed under another key id")
        known[key_id(pub)] = pub
    return VaultPublic(salt=_bytes(v["salt"], SALT_LEN, "salt"), sign_pub=_bytes(v["sign_pub"], 32, "sign_pub"),
                       ka_pub=_bytes(v["ka_pub"], 32, "ka_pub"), scopes=scopes, known_keys=known)


def parse_container(data: bytes) -> Container:
    """One clean MalformedInput for a container that cannot be read at all (§10 "Portable Export Container")."""
    if len(data) > MAX_CONTAINER:
        raise LimitExceeded("corrupt .amem: file too large")
    try:
        top = cbor.decode(data, max_items=MAX_ITEMS)
    except MalformedInput as e:
        raise MalformedInput(f"corrupt .amem: not readable CBOR ({e})") from None
    # type(), not ==: 1.0 and True compare equal to 1 in Python but are not a uint in CBOR
    if not isinstance(top, dict) or type(top.get(1)) is not int or top[1] != EXPORT_VERSION:
        raise MalformedInput("corrupt .amem: unsupported or malformed export container")
    for k in (2, 3, 4):
        if k not in top:
            raise MalformedInput(f"corrupt .amem: container lacks key {k}")
    meta = parse_vault_public(top[2])
    objs, deks_v = top[3], top[4]
    if not isinstance(objs, list) or not isinstance(deks_v, dict):
        raise MalformedInput("corrupt .amem: objects must be a list and DEKs a map")
    deks = {k: v for k, v in deks_v.items() if isinstance(k, bytes) and isinstance(v, bytes)}
    sig = top.get(SIGNATURE_KEY)
    if sig is not None and not isinstance(sig, bytes):
        raise MalformedInput("corrupt .amem: metadata signature must be a byte string")
    return Container(export_version=top[1], meta=meta, meta_encoded=cbor.encode(top[2]),
                     objects=tuple(objs), deks=deks, signature=sig, root=top.get(ROOT_KEY))


def metadata_message(export_version: int, meta_encoded: bytes) -> bytes:
    return cbor.encode([METADATA_CONTEXT, export_version, cbor.Raw(meta_encoded)])


async def sign_metadata(p: CryptoProvider, ident: Identity, meta: VaultPublic) -> bytes:
    return await p.ed25519_sign(ident.sign.seed, metadata_message(EXPORT_VERSION, cbor.encode(meta.to_cbor())))


async def metadata_signature_valid(p: CryptoProvider, c: Container, sign_pub: bytes) -> bool:
    if c.signature is None:
        return False
    return await p.ed25519_verify(sign_pub, c.signature, metadata_message(c.export_version, c.meta_encoded))


def build_container(meta: VaultPublic, objects: Iterable[tuple[bytes, bytes, bytes]],
                    signature: bytes | None, root: dict[str, Any] | None = None) -> bytes:
    """Deterministic bytes: objects in ascending id order; objects = (id, sealed, wrapped DEK)."""
    ordered = sorted(objects)
    top: dict[int, Any] = {1: EXPORT_VERSION, 2: meta.to_cbor(), 3: [s for _, s, _ in ordered],
                           4: {oid: w for oid, _, w in ordered}}
    if signature is not None:
        top[SIGNATURE_KEY] = signature
    if root is not None:
        top[ROOT_KEY] = root
    return cbor.encode(top)
