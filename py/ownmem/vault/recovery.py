"""The recovery kit (issue 24 item 6; docs/decisions.md "Key Rotation"): a recovery key of 128
random bits, shown once as 12 BIP-39 English words (the last carries a 4-bit checksum, so a
mistyped word is caught before any key is tried), that opens the vault as the passphrase does.
It is an unlock slot of kind "recovery" (vault/slots.py): the vault keeps a public key and the
current master wrapped to it, never the key.  One kit at a time: a new kit replaces the slot of
the last one.

    key (16 random bytes) --BIP-39--> 12 words         (shown once, printed, never stored)
    key --slot--> opens the current master             (the slot is public)
    check = HKDF(key, "ownmem/v1/recovery-check" || root)   (the slot's ``ref``)

The check is what a NEW device trusts: it has only the vault name and the words, and a server
could wrap a master of its own to the kit's public key (an ECDH-ES wrap needs no secret) and
answer a lookup of its own keys to match; it cannot make the check of the root the words open
without the recovery key.  The kit travels in the owner-signed vault metadata (every device
holds it, so a passphrase change on any of them re-wraps it) and the server's public
``GET .../recovery`` answers it (``record``), or a seeded decoy record for a vault without one.

Using it forces a new passphrase (the CLI's ``recovery use``, the PWA's "Forgot your
passphrase?"), and the used kit is then replaced by a new one, shown once.
"""
from __future__ import annotations

import re
import time
import unicodedata

from ownmem.crypto import CryptoProvider, random_bytes, sha256
from ownmem.errors import MalformedInput, NotFound, WrongPassphrase
from ownmem.purposes import Purpose
from ownmem.vault import rekey, slots
from ownmem.vault.bip39_english import WORDS
from ownmem.vault.store import Store
from ownmem.vault.unlock import unlock_with_slot_async
from ownmem.vault.vault import UnlockedVault
from ownmem.wire.limits import RECOVERY_RECORD_LEN

KIND = "recovery"
KEY_LEN = 16                     # 128 bits: 12 words
WORD_COUNT = 12
_INDEX = {w: i for i, w in enumerate(WORDS)}
_PREFIX = {w[:4]: w for w in WORDS}          # BIP-39 words are unique in their first four letters
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


class BadRecoveryWords(MalformedInput):
    """The words are not a recovery kit's (an unknown word, too few or too many, a failed
    checksum): nothing was tried.  Check them against the printed kit."""

    code = "bad_recovery_words"


def new_key() -> bytes:
    return random_bytes(KEY_LEN)


def to_words(key: bytes) -> list[str]:
    """BIP-39: the key's bits, then the first len(key)/4 bits of its SHA-256, in 11-bit words."""
    if len(key) != KEY_LEN:
        raise MalformedInput("a recovery key is 16 bytes")
    checksum_bits = len(key) * 8 // 32
    n = int.from_bytes(key, "big") << checksum_bits | sha256(key)[0] >> (8 - checksum_bits)
    return [WORDS[(n >> (11 * (WORD_COUNT - 1 - i))) & 0x7FF] for i in range(WORD_COUNT)]


def from_words(text: str) -> bytes:
    """The key from the words as a person types them: any case and spacing, numbering ("1."),
    commas, and each word by its first four letters; BadRecoveryWords, saying what is wrong."""
    norm = unicodedata.normalize("NFKD", text).lower()
    found = [w for w in re.split(r"[^a-z]+", norm) if w]
    if len(found) != WORD_COUNT:
        raise BadRecoveryWords(f"a recovery kit has {WORD_COUNT} words; these are {len(found)}")
    n = 0
    for pos, w in enumerate(found, 1):
        word = w if w in _INDEX else _PREFIX.get(w[:4]) if len(w) >= 4 else None
        if word is None:
            raise BadRecoveryWords(f"word {pos} ({w!r}) is not one of the recovery kit's words: check its spelling")
        n = n << 11 | _INDEX[word]
    checksum_bits = KEY_LEN * 8 // 32
    key = (n >> checksum_bits).to_bytes(KEY_LEN, "big")
    if n & ((1 << checksum_bits) - 1) != sha256(key)[0] >> (8 - checksum_bits):
        raise BadRecoveryWords("these words do not check out: one of them is wrong or out of order")
    return key


def label(now: int) -> str:
    t = time.gmtime(now)
    return f"Recovery kit, {t.tm_mday} {_MONTHS[t.tm_mon - 1]} {t.tm_year}"


async def root_check(p: CryptoProvider, key: bytes, root: bytes) -> bytes:
    return await p.hkdf_sha256(key, Purpose.RECOVERY_CHECK.info + root)


# The kit as the metadata and the server's public route carry it: fixed length, so a decoy
# (random points and bytes, server/decoy.py) looks like a real one
RECORD_LEN = RECOVERY_RECORD_LEN     # slot_id 16, pub 32, eph_pub 32, wrapped 40, check 32, created 8


def record(slot: slots.Slot) -> bytes:
    """slot_id || pub || eph_pub || wrapped || check || created (8 bytes, big-endian)."""
    if slot.kind != KIND or len(slot.ref) != slots.CHECK_LEN:
        raise MalformedInput("not a recovery kit's slot")
    return slot.slot_id + slot.pub + slot.eph_pub + slot.wrapped + slot.ref + slot.created.to_bytes(8, "big")


def from_record(raw: bytes) -> slots.Slot:
    """MalformedInput unless ``raw`` is a record of RECORD_LEN bytes of well-formed fields."""
    if not isinstance(raw, bytes) or len(raw) != RECORD_LEN:
        raise MalformedInput("malformed recovery kit record")
    sid, pub, eph, wrapped, check, created = (raw[:16], raw[16:48], raw[48:80], raw[80:120], raw[120:152],
                                              int.from_bytes(raw[152:], "big"))
    at = min(created, 253402300799)              # the label of a nonsense time is still a date
    return slots.checked(slots.Slot(sid, KIND, label(at), check, pub, eph, wrapped, created))


def recovery_slot(store: Store) -> slots.Slot | None:
    """The kit's slot (public: readable while locked), None if the vault has no kit."""
    return next((s for s in store.unlock_slots() if s.kind == KIND), None)


def set_kit(store: Store, slot: slots.Slot) -> None:
    """Within a transaction: ``slot`` is the vault's one kit (the last kit's slot goes)."""
    store.set_unlock_slots([*(s for s in store.unlock_slots() if s.kind != KIND), slot])


def merge_kit(mine: slots.Slot | None, theirs: bytes | None) -> slots.Slot | None:
    """The kit this device keeps, given the one in the owner-signed metadata the server holds:
    the same kit -> the server's copy (one wrap for all, so devices converge; a passphrase change
    re-wrapped it); two kits (made on two devices while apart) -> the later one, on every device
    alike; none there -> ours (to publish)."""
    if theirs is None:
        return mine
    try:
        remote = from_record(theirs)
    except MalformedInput:
        return mine
    if mine is None or remote.slot_id == mine.slot_id:
        return remote
    return max(mine, remote, key=lambda s: (s.created, s.slot_id))


async def create_kit_async(v: UnlockedVault, *, now: int | None = None) -> tuple[list[str], slots.Slot]:
    """A new kit -> (its words, to show once; its slot), replacing the last kit's slot in the
    same transaction: the old words open nothing here from then on.  It is dated after the kit it
    replaces even within the same second (or under a clock set back): merge_kit keeps the later of
    two kits, and a tie broken by slot id would hand the used kit back half the time."""
    at = int(time.time()) if now is None else now
    last = recovery_slot(v.store)
    if last is not None:
        at = max(at, last.created + 1)
    key = new_key()
    check = await root_check(v.crypto, key, v.identity.root)
    slot = await slots.make_slot(v.crypto, KIND, label(at), check, key, v.identity.master, at)
    with v.store.transaction():
        set_kit(v.store, slot)
    return to_words(key), slot


async def unlock_with_words_async(store: Store, p: CryptoProvider, words: str) -> UnlockedVault:
    """Unlock with the kit's words (BadRecoveryWords before anything is tried; WrongPassphrase if
    they are a kit's words but not this vault's current kit)."""
    key = from_words(words)
    slot = recovery_slot(store)
    if slot is None:
        raise NotFound("this vault has no recovery kit")
    try:
        v = await unlock_with_slot_async(store, p, slot.slot_id, key)
    except WrongPassphrase:
        raise WrongPassphrase("these recovery words do not open this vault (an older kit, or another "
                              "vault's)") from None
    if await root_check(p, key, v.identity.root) != slot.ref:
        v.lock()
        raise WrongPassphrase("this recovery kit was not made for this vault's keys: refused")
    return v


async def open_remote_kit(p: CryptoProvider, words: str, raw_record: bytes, info_root_wrap: bytes) -> bytes:
    """The master a server's kit record opens with ``words``, once the kit's root check proves it
    was made with this recovery key for the root it leads to (``info_root_wrap``: the lookup's).
    WrongPassphrase if the words do not open it (another vault's kit, a decoy); the caller
    (sync.adopt_from_server) then checks the keys against the lookup and the metadata."""
    key = from_words(words)
    try:
        slot = from_record(raw_record)
    except MalformedInput:
        raise WrongPassphrase("the server holds no recovery kit these words open") from None
    try:
        master = await slots.open_slot(p, slot, key)
    except WrongPassphrase:
        raise WrongPassphrase("these recovery words do not open this vault's recovery kit (check the vault "
                              "name, or an older kit)") from None
    root = (await rekey.identity_for(p, master, await rekey.real_root_wrap(p, master, info_root_wrap))).root
    if await root_check(p, key, root) != slot.ref:
        raise WrongPassphrase("the server's recovery kit was not made with these words for this vault: refused")
    return master
