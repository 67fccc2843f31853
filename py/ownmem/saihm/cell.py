"""The SAIHM cell envelope around an ApertoMemory sealed object (SAIHM "Cell shape",
"Signed messages", "Wire formats"; DESIGN.md "One memory, three views").

    cell      = {1: cellId, 2: holderId, 3: kekVersion, 4: tier, 5: cellNonce,
                 6: ciphertext, 7: signature, 8: timestamp}
    cellId    = SHA-256(kekVersion_be32 || cellNonce || ciphertext)
    signature = ML-DSA-65(holder, context "SAIHM-CELL-v1",
                          cellId || holderId || kekVersion_be32 || timestamp_be64)

In ownmem, cellNonce is the sealed object's 16-byte id and ciphertext is the whole
sealed-object bytes (already AEAD-protected under the object's DEK), so a blind
server can recompute the cellId and verify the holder's signature without any key
that decrypts.  ``timestamp`` is the time the cell was made, never the memory's
semantic time, which stays inside the encrypted payload.

``check_cell`` is the one sequence of checks before a cell is believed: the blind
server runs it on every pushed cell, each device on every pulled one.  It reads the
sealed object's envelope through ``aperto.envelope`` (structure only, nothing that
decrypts), so the blind server may import this module.
"""
from __future__ import annotations

import functools
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ownmem.aperto.envelope import parse_sealed
from ownmem.aperto.model import SealedObject
from ownmem.crypto import CryptoProvider, cbor, sha256
from ownmem.errors import AuthenticationFailed, LimitExceeded, MalformedInput, OwnmemError

CELL_CONTEXT = b"SAIHM-CELL-v1"
MAX_CIPHERTEXT = 1 << 20
MAX_TIER = 32
MLDSA65_SIG_LEN = 3309


@dataclass(frozen=True, slots=True)
class Cell:
    cell_id: bytes
    holder_id: bytes
    kek_version: int
    tier: str
    cell_nonce: bytes
    ciphertext: bytes
    signature: bytes
    timestamp: int

    def to_cbor(self) -> bytes:
        return cbor.encode({1: self.cell_id, 2: self.holder_id, 3: self.kek_version, 4: self.tier,
                            5: self.cell_nonce, 6: self.ciphertext, 7: self.signature, 8: self.timestamp})


def compute_cell_id(kek_version: int, cell_nonce: bytes, ciphertext: bytes) -> bytes:
    return sha256(struct.pack(">I", kek_version) + cell_nonce + ciphertext)


def signed_message(cell_id: bytes, holder_id: bytes, kek_version: int, timestamp: int) -> bytes:
    return cell_id + holder_id + struct.pack(">IQ", kek_version, timestamp)


def _check_fields(kek_version: int, tier: str, cell_nonce: bytes, ciphertext: bytes, timestamp: int) -> None:
    if type(kek_version) is not int or not 0 <= kek_version <= 0xFFFFFFFF:
        raise MalformedInput("kekVersion must be a 32-bit unsigned integer")
    if type(timestamp) is not int or not 0 <= timestamp <= 0xFFFFFFFFFFFFFFFF:
        raise MalformedInput("timestamp must be a 64-bit unsigned integer")
    if not isinstance(tier, str) or not 0 < len(tier) <= MAX_TIER or not tier.isascii() or not tier.isprintable():
        raise MalformedInput("tier must be a short printable ASCII string")
    if not isinstance(cell_nonce, bytes) or len(cell_nonce) != 16:
        raise MalformedInput("cellNonce must be 16 bytes")
    if not isinstance(ciphertext, bytes):
        raise MalformedInput("ciphertext must be bytes")
    if len(ciphertext) > MAX_CIPHERTEXT:
        raise LimitExceeded("cell ciphertext too large")


async def make_cell(p: CryptoProvider, *, xi: bytes, holder_id: bytes, kek_version: int, tier: str,
                    cell_nonce: bytes, ciphertext: bytes, timestamp: int,
                    deterministic: bool = False) -> Cell:
    _check_fields(kek_version, tier, cell_nonce, ciphertext, timestamp)
    cid = compute_cell_id(kek_version, cell_nonce, ciphertext)
    sig = await p.mldsa65_sign(xi, signed_message(cid, holder_id, kek_version, timestamp), CELL_CONTEXT,
                               deterministic=deterministic)
    return Cell(cid, holder_id, kek_version, tier, cell_nonce, ciphertext, sig, timestamp)


def parse_cell(data: bytes) -> Cell:
    """Shape only (step 1 of ``check_cell``, which decides whether to believe it)."""
    if len(data) > MAX_CIPHERTEXT + 8192:
        raise LimitExceeded("cell too large")
    m = cbor.decode(data, max_items=64)
    if not isinstance(m, dict) or set(m) != {1, 2, 3, 4, 5, 6, 7, 8}:
        raise MalformedInput("a cell is a map with keys 1..8")
    cid, hid, sig = m[1], m[2], m[7]
    if not isinstance(cid, bytes) or len(cid) != 32 or not isinstance(hid, bytes) or len(hid) != 32:
        raise MalformedInput("cellId and holderId must be 32 bytes")
    if not isinstance(sig, bytes) or len(sig) != MLDSA65_SIG_LEN:
        raise MalformedInput("the cell signature must be an ML-DSA-65 signature")
    _check_fields(m[3], m[4], m[5], m[6], m[8])
    return Cell(cid, hid, m[3], m[4], m[5], m[6], sig, m[8])


# (message, signature, context) -> whether the ML-DSA-65 signature verifies under the holder's key
CellVerifier = Callable[[bytes, bytes, bytes], Awaitable[bool]]


class CellRefused(OwnmemError):
    """A cell failed a step of ``check_cell``: do not store or use it.  ``code`` names the
    step, stably (the blind server answers a refused push with it): malformed_cell,
    wrong_holder, bad_cell_id or bad_signature."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class CheckedCell:
    """A cell that passed ``check_cell``, and the sealed-object envelope it carries."""

    cell: Cell
    sealed: SealedObject


async def check_cell(data: bytes, holder_id: bytes, *, verify_signature: CellVerifier | None) -> CheckedCell:
    """The checks made before believing the cell ``data`` of the holder ``holder_id``:

    1. it parses as a cell (SAIHM "Wire formats": keys 1..8, their types and lengths);
    2.-4. ``authenticate_cell``: its holder, its cellId, its signature;
    5. its ciphertext is an ApertoMemory sealed-object envelope whose id is the cellNonce
       (ownmem's binding, DESIGN.md "One memory, three views"), so no server can move a
       sealed object under another cell.

    ``verify_signature=None`` skips step 4 and must be passed explicitly: only a device that
    authenticates the object itself when it opens it (the owner's signature inside) may.
    """
    # 1. Shape.
    try:
        cell = parse_cell(data)
    except OwnmemError as e:
        raise CellRefused("malformed_cell", str(e)) from None
    # 2.-4. SAIHM's own checks ("Cell shape", "Identity binding", "Signed messages").
    await authenticate_cell(cell, holder_id, verify_signature)
    # 5. The sealed object inside, read as cleartext structure only.
    try:
        sealed = parse_sealed(cell.ciphertext)
    except OwnmemError:
        raise CellRefused("malformed_cell", "cell ciphertext is not a sealed object") from None
    if sealed.object_id != cell.cell_nonce:
        raise CellRefused("malformed_cell", "cellNonce is not the sealed object's id")
    return CheckedCell(cell, sealed)


async def authenticate_cell(cell: Cell, holder_id: bytes, verify_signature: CellVerifier | None) -> None:
    """Steps 2-4 of ``check_cell``, on a parsed cell of any content."""
    # 2. The holder: a cell of another holder is not this holder's memory.
    if cell.holder_id != holder_id:
        raise CellRefused("wrong_holder", "cell belongs to another holder")
    # 3. cellId = SHA-256(kekVersion_be32 || cellNonce || ciphertext), recomputed ("Cell shape":
    #    a reader MUST refuse a cell whose stored cellId does not match).
    if compute_cell_id(cell.kek_version, cell.cell_nonce, cell.ciphertext) != cell.cell_id:
        raise CellRefused("bad_cell_id", "cellId does not match the cell's contents")
    # 4. The ML-DSA-65 signature over cellId || holderId || kekVersion_be32 || timestamp_be64,
    #    context SAIHM-CELL-v1 ("Signed messages").
    if verify_signature is not None and not await verify_signature(
            signed_message(cell.cell_id, cell.holder_id, cell.kek_version, cell.timestamp), cell.signature,
            CELL_CONTEXT):
        raise CellRefused("bad_signature", "cell signature does not verify under the holder's key")


async def verify_cell(p: CryptoProvider, cell: Cell, holder_public: bytes) -> None:
    """SAIHM's checks of a parsed cell (steps 2-4 of ``check_cell``, with the provider's
    ML-DSA-65), whatever its ciphertext: holderId is SHA-256 of ``holder_public``.
    Raises AuthenticationFailed."""
    try:
        await authenticate_cell(cell, sha256(holder_public), functools.partial(p.mldsa65_verify, holder_public))
    except CellRefused as e:
        raise AuthenticationFailed(str(e)) from None
