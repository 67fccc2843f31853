"""The public log's signed tree heads (DESIGN.md "The public log"): C2SP signed notes and
the tlog-checkpoint body inside them.

    <text ending in a newline>
    <blank line>
    — <key name> base64(key ID (4 bytes, big-endian) || signature)      one line a signature

with Ed25519 key ID = SHA-256(key name || 0x0A || 0x01 || public key)[:4] and verifier
keys written ``<name>+<hex key ID>+base64(0x01 || public key)``.  A checkpoint body is the
log's origin, tree size, base64 root hash and optional extension lines.

Pure: no I/O, no clock, no key but the ones passed in.  What a checkpoint proves is only
that the holder of the log key said "the log had these n entries"; ``check_checkpoint_
consistency`` (a kept checkpoint against a new one, with the Merkle proofs of
``ownmem.saihm.tlog``) is what catches a rewritten or forked history.
"""
from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ownmem.crypto.interface import sha256
from ownmem.errors import OwnmemError
from ownmem.saihm.tlog import EMPTY_HASH, HASH_SIZE, MAX_TREE_SIZE, ProofFailed, check_consistency

if TYPE_CHECKING:
    from ownmem.crypto.interface import CryptoProvider

MAX_NOTE = 1 << 20                  # bytes of a signed note we are willing to parse
MAX_SIGNATURES = 100                # C2SP: a verifier MUST accept at least 16
ALG_ED25519 = 0x01


class NoteRefused(OwnmemError):
    """A signed note or checkpoint is malformed, or not signed (validly) by the expected key.

    Ignore its text.  ``reason`` says which check refused it, for tests and audit."""

    code = "note_refused"

    def __init__(self, reason: str) -> None:
        super().__init__(f"signed note refused: {reason}")
        self.reason = reason


_SIG_PREFIX = "\u2014 "                      # em dash, space


@dataclass(frozen=True, slots=True)
class NoteSignature:
    name: str
    key_id: int                             # uint32, big-endian in the line
    signature: bytes                        # without the key ID

    def line(self) -> str:
        return f"{_SIG_PREFIX}{self.name} {_b64(self.key_id.to_bytes(4, 'big') + self.signature)}\n"


@dataclass(frozen=True, slots=True)
class Note:
    """A parsed note: its text (ending in a newline) and every signature line, in order.

    ``verified`` lists the signatures that ``open_note`` checked; a note from
    ``parse_note`` has none, and its text must not be trusted."""

    text: str
    signatures: tuple[NoteSignature, ...]
    verified: tuple[NoteSignature, ...] = ()


@dataclass(frozen=True, slots=True)
class VerifierKey:
    """An Ed25519 note verifier key: ``<name>+<hex key ID>+base64(0x01 || public key)``."""

    name: str
    key_id: int
    public_key: bytes

    @classmethod
    def for_ed25519(cls, name: str, public_key: bytes) -> VerifierKey:
        if not valid_key_name(name) or len(public_key) != 32:
            raise NoteRefused("bad verifier name or key")
        return cls(name, note_key_id(name, public_key), public_key)

    def __str__(self) -> str:
        return f"{self.name}+{self.key_id:08x}+{_b64(bytes([ALG_ED25519]) + self.public_key)}"


def note_key_id(name: str, public_key: bytes, alg: int = ALG_ED25519) -> int:
    """SHA-256(key name || 0x0A || signature type || public key)[:4], as a uint32."""
    return int.from_bytes(sha256(name.encode() + b"\n" + bytes([alg]) + public_key)[:4], "big")


def valid_key_name(name: str) -> bool:
    """Non-empty, no Unicode space, no plus (C2SP signed-note "Format")."""
    return bool(name) and "+" not in name and not any(ch.isspace() for ch in name) and _no_controls(name)


def parse_verifier_key(vkey: str) -> VerifierKey:
    name, _, rest = vkey.partition("+")
    hex_id, _, key64 = rest.partition("+")
    if not valid_key_name(name) or len(hex_id) != 8 or any(c not in "0123456789abcdef" for c in hex_id):
        raise NoteRefused("malformed verifier key")
    key = _unb64(key64)
    if key is None or len(key) != 33 or key[0] != ALG_ED25519:
        raise NoteRefused("verifier key is not an Ed25519 key")
    vk = VerifierKey(name, int(hex_id, 16), key[1:])
    if note_key_id(name, vk.public_key) != vk.key_id:
        raise NoteRefused("verifier key ID does not match its name and key")
    return vk


def parse_note(data: bytes | str) -> Note:
    """Split a signed note into text and signature lines; check the syntax, nothing else."""
    raw = data.encode() if isinstance(data, str) else bytes(data)
    if len(raw) > MAX_NOTE:
        raise NoteRefused("note too large")
    # 1. valid UTF-8 with no ASCII control character but newline
    try:
        msg = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise NoteRefused("note is not UTF-8") from None
    if not _no_controls(msg.replace("\n", "")):
        raise NoteRefused("control character in note")
    # 2. the text ends at the last blank line; one or more signature lines follow it
    split = msg.rfind("\n\n")
    if split < 0:
        raise NoteRefused("no signature block")
    text, block = msg[:split + 1], msg[split + 2:]
    if not block or not block.endswith("\n"):
        raise NoteRefused("signature block must end in a newline")
    sigs = []
    for line in block[:-1].split("\n"):
        # 3. "— <name> <base64(key ID || signature)>"
        if not line.startswith(_SIG_PREFIX):
            raise NoteRefused("signature line must start with an em dash and a space")
        name, sep, b64 = line[len(_SIG_PREFIX):].partition(" ")
        blob = _unb64(b64)
        if not sep or not valid_key_name(name) or blob is None or len(blob) < 5:
            raise NoteRefused("malformed signature line")
        sigs.append(NoteSignature(name, int.from_bytes(blob[:4], "big"), blob[4:]))
        if len(sigs) > MAX_SIGNATURES:
            raise NoteRefused("too many signatures")
    return Note(text, tuple(sigs))


async def open_note(p: CryptoProvider, data: bytes | str, keys: Sequence[VerifierKey]) -> Note:
    """Parse a signed note and verify it (C2SP signed-note "Signatures").

    1. it parses (``parse_note``);
    2. a signature whose (name, key ID) is no known key is ignored, even if one of the two matches;
    3. a signature by a known key must verify, or the whole note is refused;
    4. at least one signature by a known key must have verified."""
    note = parse_note(data)
    known: dict[tuple[str, int], VerifierKey] = {}
    for k in keys:
        if known.setdefault((k.name, k.key_id), k) != k:
            # two keys under one (name, key ID): whoever configured them has lost control
            raise NoteRefused(f"ambiguous key {k.name}+{k.key_id:08x}")
    message = note.text.encode()
    verified: list[NoteSignature] = []
    for sig in note.signatures:
        key = known.get((sig.name, sig.key_id))
        if key is None:
            continue
        if len(sig.signature) != 64 or not await p.ed25519_verify(key.public_key, sig.signature, message):
            raise NoteRefused(f"bad signature by known key {sig.name}+{sig.key_id:08x}")
        if sig not in verified:
            verified.append(sig)
    if not verified:
        raise NoteRefused("no signature by a known key")
    return Note(note.text, note.signatures, tuple(verified))


def signed_note(text: str, signatures: Sequence[NoteSignature]) -> str:
    """The signed note: ``text``, a blank line, one line a signature."""
    if not text.endswith("\n") or not signatures or not _no_controls(text.replace("\n", "")):
        raise NoteRefused("note text must end in a newline and carry a signature")
    for s in signatures:
        if not valid_key_name(s.name) or not 0 <= s.key_id < 1 << 32:
            raise NoteRefused("bad signer name or key ID")
    return text + "\n" + "".join(s.line() for s in signatures)


async def sign_note(p: CryptoProvider, text: str, name: str, seed: bytes) -> str:
    """Sign ``text`` with the Ed25519 key of ``seed`` under key ``name``."""
    public = await p.ed25519_public(seed)
    sig = await p.ed25519_sign(seed, text.encode())
    return signed_note(text, [NoteSignature(name, note_key_id(name, public), sig)])


# ---------------------------------------------------------------- checkpoints (C2SP tlog-checkpoint)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    def body(self) -> str:
        """The note text: origin, size, base64 root hash, extension lines; each ends in a newline."""
        if (not self.origin or not _no_controls(self.origin) or "\n" in self.origin
                or not 0 <= self.size <= MAX_TREE_SIZE or len(self.root_hash) != HASH_SIZE
                or any(not e or "\n" in e or not _no_controls(e) for e in self.extensions)):
            raise NoteRefused("not a well-formed checkpoint")
        return "".join(f"{line}\n" for line in (self.origin, str(self.size), _b64(self.root_hash),
                                                *self.extensions))


def parse_checkpoint(text: str) -> Checkpoint:
    """The checkpoint in a note's text: at least three non-empty lines, the size in decimal
    with no leading zero, the root hash 32 bytes of canonical base64."""
    if not text.endswith("\n"):
        raise NoteRefused("checkpoint must end in a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3 or any(not line for line in lines):
        raise NoteRefused("a checkpoint is at least three non-empty lines")
    origin, size_s, root_s, *ext = lines
    if not (size_s.isascii() and size_s.isdigit()) or (size_s != "0" and size_s[0] == "0") or len(size_s) > 19:
        raise NoteRefused("tree size must be decimal with no leading zero")
    size = int(size_s)
    root = _unb64(root_s)
    if size > MAX_TREE_SIZE or root is None or len(root) != HASH_SIZE:
        raise NoteRefused("malformed tree size or root hash")
    return Checkpoint(origin, size, root, tuple(ext))


async def open_checkpoint(p: CryptoProvider, data: bytes | str, key: VerifierKey,
                          origin: str | None = None) -> Checkpoint:
    """A checkpoint signed by ``key`` whose origin line is ``origin`` (the key's name unless given)."""
    note = await open_note(p, data, [key])
    cp = parse_checkpoint(note.text)
    if cp.origin != (key.name if origin is None else origin):
        raise NoteRefused("checkpoint is for another log")
    return cp


def check_checkpoint_consistency(old: Checkpoint, new: Checkpoint, proof: Sequence[bytes]) -> None:
    """What a device runs on each sync: the new checkpoint extends the one it kept.

    An empty old tree is extended by every tree (and its head must be the empty hash);
    otherwise RFC 9162 consistency, which also catches a shrunk log (new.size < old.size)."""
    if old.origin != new.origin:
        raise ProofFailed("checkpoints of two different logs")
    if old.size == 0:
        if old.root_hash != EMPTY_HASH or proof:
            raise ProofFailed("an empty tree has the empty hash and needs no proof")
        return
    check_consistency(proof, old.size, old.root_hash, new.size, new.root_hash)


# ---------------------------------------------------------------- helpers


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def _unb64(s: str) -> bytes | None:
    """Standard base64, padded and canonical (one value, one spelling), or None."""
    try:
        b = base64.b64decode(s.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None
    return b if s and _b64(b) == s else None


def _no_controls(s: str) -> bool:
    return not any(ord(ch) < 0x20 for ch in s)
