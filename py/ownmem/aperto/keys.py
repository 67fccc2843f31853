"""The ApertoMemory key hierarchy (draft-02 §9 "Key Hierarchy").

    passphrase --Argon2id(m=64 MiB, t=3, p=4, 16-byte salt)--> master secret (32 bytes)
    master --HKDF-SHA256("apertomemory/v1/sign")--> Ed25519 seed   (owner signing key)
    master --HKDF-SHA256("apertomemory/v1/ka")----> X25519 seed    (key agreement)
    scope KEK (32 random bytes)
        <-- ECDH-ES(X25519, ephemeral) + HKDF-SHA256("apertomemory/v1/kek-wrap" || scope_id) + AES-KW
    object DEK (32 random bytes, one object) <-- AES-KW -- scope KEK

The Argon2id parameters are fixed by the spec (§15.8 "Offline Verification Oracle" forbids weakening them), so
they are not parameters here.  Other ownmem keys derive from the same master
secret with their own info strings (DESIGN.md "Keys"); ``derive_purpose_key``
is the one door for those.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ownmem.crypto import CryptoProvider, random_bytes, sha256
from ownmem.errors import MalformedInput
from ownmem.purposes import AgentAuthor, KeyPurpose, Purpose

INFO_SIGN = b"apertomemory/v1/sign"
INFO_KA = b"apertomemory/v1/ka"
INFO_KEK_WRAP = b"apertomemory/v1/kek-wrap"
SALT_LEN = 16


def key_id(sign_pub: bytes) -> bytes:
    """author_key_id: the first 8 bytes of SHA-256 over the Ed25519 public key."""
    return sha256(sign_pub)[:8]


@dataclass(frozen=True, slots=True)
class SigningKey:
    seed: bytes
    public: bytes
    key_id: bytes = field(init=False, default=b"")

    def __post_init__(self) -> None:
        object.__setattr__(self, "key_id", key_id(self.public))  # once: every seal names it

    def __repr__(self) -> str:  # never print a seed
        return f"SigningKey(key_id={self.key_id.hex()})"


@dataclass(frozen=True, slots=True)
class Identity:
    """The owner's long-term keys, derived once per unlock.  ``root`` is the vault root every
    ``ownmem/v1/*`` purpose key derives from: the master secret itself until the first
    passphrase change, then kept wrapped under the current master (ownmem.vault.rekey)."""

    master: bytes
    sign: SigningKey
    ka_seed: bytes
    ka_pub: bytes
    root: bytes

    @property
    def sign_pub(self) -> bytes:
        return self.sign.public

    @property
    def key_id(self) -> bytes:
        return self.sign.key_id

    def __repr__(self) -> str:
        return f"Identity(key_id={self.key_id.hex()})"


async def master_from_passphrase(p: CryptoProvider, passphrase: str, salt: bytes) -> bytes:
    if len(salt) != SALT_LEN:
        raise MalformedInput("salt must be 16 bytes")
    try:
        secret = passphrase.encode("utf-8")
    except UnicodeEncodeError:   # a lone surrogate (a terminal's undecodable byte): not text
        raise MalformedInput("the passphrase is not valid text") from None
    return await p.argon2id(secret, salt)


async def signing_key(p: CryptoProvider, seed: bytes) -> SigningKey:
    return SigningKey(seed=seed, public=await p.ed25519_public(seed))


async def identity_from_master(p: CryptoProvider, master: bytes, root: bytes | None = None) -> Identity:
    sign_seed = await p.hkdf_sha256(master, INFO_SIGN)
    ka_seed = await p.hkdf_sha256(master, INFO_KA)
    return Identity(master=master, sign=await signing_key(p, sign_seed), ka_seed=ka_seed,
                    ka_pub=await p.x25519_public(ka_seed), root=root if root is not None else master)


async def identity_from_passphrase(p: CryptoProvider, passphrase: str, salt: bytes) -> Identity:
    return await identity_from_master(p, await master_from_passphrase(p, passphrase, salt))


async def derive_purpose_key(p: CryptoProvider, master: bytes, purpose: KeyPurpose) -> bytes:
    """32 bytes for one ownmem purpose of the registry (ownmem.purposes; DESIGN.md "Keys"), from
    the vault root (``Identity.root``; the master only for ROOT_WRAP); no
    key serves two purposes, and a bare info string (the format's own apertomemory/* ones
    included) is refused."""
    if not isinstance(purpose, (Purpose, AgentAuthor)):
        raise MalformedInput("a purpose key needs a purpose of the registry (ownmem.purposes); "
                             "apertomemory/* info strings belong to the format's own keys")
    return await p.hkdf_sha256(master, purpose.info)


@dataclass(frozen=True, slots=True)
class WrappedKek:
    kek_wrapped: bytes
    eph_pub: bytes


async def wrap_kek(p: CryptoProvider, kek: bytes, ka_pub: bytes, scope_id: bytes,
                   eph_seed: bytes | None = None) -> WrappedKek:
    """eph_seed is a parameter only so that vector 002 can be reproduced."""
    eph = eph_seed if eph_seed is not None else random_bytes(32)
    shared = await p.x25519_shared(eph, ka_pub)
    wk = await p.hkdf_sha256(shared, INFO_KEK_WRAP + scope_id)
    return WrappedKek(kek_wrapped=await p.aes_kw_wrap(wk, kek), eph_pub=await p.x25519_public(eph))


async def unwrap_kek(p: CryptoProvider, wrapped: WrappedKek, scope_id: bytes, ident: Identity) -> bytes:
    """Raises AuthenticationFailed if the wrap was altered or moved to another scope."""
    shared = await p.x25519_shared(ident.ka_seed, wrapped.eph_pub)
    wk = await p.hkdf_sha256(shared, INFO_KEK_WRAP + scope_id)
    return await p.aes_kw_unwrap(wk, wrapped.kek_wrapped)


def new_key() -> bytes:
    return random_bytes(32)


async def wrap_dek(p: CryptoProvider, dek: bytes, kek: bytes) -> bytes:
    return await p.aes_kw_wrap(kek, dek)


async def unwrap_dek(p: CryptoProvider, wrapped: bytes, kek: bytes) -> bytes:
    return await p.aes_kw_unwrap(kek, wrapped)
