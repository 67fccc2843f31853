"""Unlock slots: a secret other than the passphrase (a recovery key, a passkey's WebAuthn PRF
output) that opens the vault's CURRENT master secret, from which the owner keys follow (§9 "Key Hierarchy") and,
through the stored root wrap, the vault root (vault/rekey.py ``identity_for``).

    slot secret --HKDF("ownmem/v1/unlock-slot/<kind>")--> X25519 seed --> pub   (kept in the slot)
    master <-- AES-KW -- HKDF(ECDH(ephemeral, pub), "ownmem/v1/unlock-slot" || slot_id)

The master is wrapped TO A PUBLIC KEY (ECDH-ES, the shape of the scope-KEK wrap of §9 "Key Hierarchy") so that
a passphrase change, which holds the new master but never a slot's secret, re-wraps every slot
(``rewrap_slot``: same pub, fresh ephemeral).  The slot id is in the wrap key, so a wrap moved
into another slot does not open.  A slot is public: a public key and a wrap to it, useless
without the secret (128 bits or more), so it may be stored or shown anywhere.

Pure decisions: keys in, keys out; the store and the vault are the callers'.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ownmem.crypto import CryptoProvider, cbor, random_bytes
from ownmem.errors import AuthenticationFailed, MalformedInput, WrongPassphrase
from ownmem.purposes import Purpose, SlotSecret

KINDS = ("recovery", "passkey")
SLOT_ID_LEN = 16
MIN_SECRET = 16                  # 128 bits: a slot secret is never a thing a person makes up
MAX_LABEL = 200                  # characters
MAX_REF = 1023                   # bytes: WebAuthn's largest credential id
MASTER_LEN = 32
WRAPPED_LEN = MASTER_LEN + 8     # AES-KW adds 8 bytes
CHECK_LEN = 32                   # a recovery slot's ``ref``: its root check (vault/recovery.py)


@dataclass(frozen=True, slots=True)
class Slot:
    slot_id: bytes      # 16 random bytes
    kind: str           # "recovery" | "passkey"
    label: str          # shown to the person ("Recovery kit, 6 Dec 2026", "iPhone passkey")
    ref: bytes          # kind-specific: a passkey's WebAuthn credential id; a recovery kit's root check
                        # (vault/recovery.py: binds the kit to the vault's root, 32 bytes)
    pub: bytes          # X25519 public key derived from the slot secret
    eph_pub: bytes      # ephemeral X25519 public key of the current wrap
    wrapped: bytes      # AES-256-KW(master)
    created: int        # unix seconds

    def __repr__(self) -> str:
        return f"Slot(id={self.slot_id.hex()}, kind={self.kind}, label={self.label!r})"


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise MalformedInput(f"unknown unlock slot kind {kind!r}")


async def slot_secret_key(p: CryptoProvider, kind: str, secret: bytes) -> tuple[bytes, bytes]:
    """(X25519 private seed, public key) of a slot secret; the kind is in the derivation, so a
    recovery key and a passkey never share a key."""
    _check_kind(kind)
    if len(secret) < MIN_SECRET:
        raise MalformedInput("an unlock slot secret needs at least 128 bits")
    seed = await p.hkdf_sha256(secret, SlotSecret(kind).info)
    return seed, await p.x25519_public(seed)


async def _wrap_key(p: CryptoProvider, shared: bytes, slot_id: bytes) -> bytes:
    return await p.hkdf_sha256(shared, Purpose.UNLOCK_SLOT.info + slot_id)


async def _wrap(p: CryptoProvider, pub: bytes, slot_id: bytes, master: bytes) -> tuple[bytes, bytes]:
    """(eph_pub, wrapped): ``master`` wrapped to ``pub`` under a fresh ephemeral key."""
    if len(master) != MASTER_LEN:
        raise MalformedInput("a master secret is 32 bytes")
    eph = random_bytes(32)
    wk = await _wrap_key(p, await p.x25519_shared(eph, pub), slot_id)
    return await p.x25519_public(eph), await p.aes_kw_wrap(wk, master)


async def make_slot(p: CryptoProvider, kind: str, label: str, ref: bytes, secret: bytes, master: bytes,
                    now: int) -> Slot:
    _, pub = await slot_secret_key(p, kind, secret)
    slot_id = random_bytes(SLOT_ID_LEN)
    eph_pub, wrapped = await _wrap(p, pub, slot_id, master)
    return checked(Slot(slot_id, kind, label, bytes(ref), pub, eph_pub, wrapped, int(now)))


async def rewrap_slot(p: CryptoProvider, slot: Slot, master: bytes) -> Slot:
    """The same slot (id, kind, key) opening ``master`` instead: a passphrase change."""
    eph_pub, wrapped = await _wrap(p, slot.pub, slot.slot_id, master)
    return replace(slot, eph_pub=eph_pub, wrapped=wrapped)


async def open_slot(p: CryptoProvider, slot: Slot, secret: bytes) -> bytes:
    """The master secret the slot wraps; WrongPassphrase if ``secret`` is not this slot's or the
    slot was altered (another slot's wrap, another key)."""
    seed, pub = await slot_secret_key(p, slot.kind, secret)
    if pub != slot.pub:
        raise WrongPassphrase("that does not open this unlock slot")
    try:
        wk = await _wrap_key(p, await p.x25519_shared(seed, slot.eph_pub), slot.slot_id)
        return await p.aes_kw_unwrap(wk, slot.wrapped)
    except (AuthenticationFailed, MalformedInput):
        raise WrongPassphrase("that does not open this unlock slot (it was altered or moved)") from None


def checked(s: Slot) -> Slot:
    """``s`` if every field has its type and length; MalformedInput if not."""
    ok = (isinstance(s.slot_id, bytes) and len(s.slot_id) == SLOT_ID_LEN and s.kind in KINDS
          and isinstance(s.label, str) and len(s.label) <= MAX_LABEL
          and isinstance(s.ref, bytes) and len(s.ref) <= MAX_REF
          and isinstance(s.pub, bytes) and len(s.pub) == 32
          and isinstance(s.eph_pub, bytes) and len(s.eph_pub) == 32
          and isinstance(s.wrapped, bytes) and len(s.wrapped) == WRAPPED_LEN
          and type(s.created) is int and s.created >= 0)
    if not ok:
        raise MalformedInput("malformed unlock slot")
    if s.kind == "recovery" and len(s.ref) not in (0, CHECK_LEN):
        raise MalformedInput("malformed unlock slot: a recovery slot's reference is its 32-byte root check")
    return s


def encode_slot(s: Slot) -> bytes:
    s = checked(s)
    return cbor.encode([s.slot_id, s.kind, s.label, s.ref, s.pub, s.eph_pub, s.wrapped, s.created])


def parse_slot(data: bytes) -> Slot:
    """A slot from its CBOR, every field of its exact type and length; MalformedInput if not."""
    raw = cbor.decode(data, max_items=16, max_depth=2)
    if not (isinstance(raw, list) and len(raw) == 8):
        raise MalformedInput("malformed unlock slot")
    return checked(Slot(*raw))
