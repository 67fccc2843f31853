"""What the blind server checks without any key that decrypts (SAIHM "Cell shape",
"Signed messages"; ownmem DESIGN.md "One memory, three views").

For each pushed cell, the checks every device makes too (``ownmem.saihm.cell.check_cell``):
 1. it parses as a cell (keys 1..8, right lengths);
 2. its holderId is the vault's;
 3. cellId = SHA-256(kekVersion_be32 || cellNonce || ciphertext), recomputed;
 4. the ML-DSA-65 signature (context SAIHM-CELL-v1) verifies under the vault's holder key;
 5. its ciphertext is an ApertoMemory sealed-object envelope whose id is the cellNonce;
and here, beside it: 6. it is deterministic CBOR (re-encoding the parsed cell gives its
bytes), as receipts must be: one cell, one byte form; 7. its wrapped DEK is 40 bytes (AES-KW
of a 32-byte key).  Every integer a receipt carries into the database (its timestamp) fits
the database's 64-bit signed integers.  Only public-key verification is imported here.
"""
from __future__ import annotations

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.mldsa import MLDSA65PublicKey

from ownmem.crypto import run_sync, sha256
from ownmem.errors import OwnmemError
from ownmem.saihm.cell import CellRefused, check_cell as check_saihm_cell
from ownmem.saihm.receipt import RECEIPT_CONTEXT, Receipt, parse_receipt
from ownmem.wire.errors import ErrorCode
from ownmem.wire.limits import MAX_COUNTER, WRAPPED_DEK_LEN
from server.storage.base import LogEntry, PushCell

# the head of a cell in deterministic CBOR: a map of 8, key 1, a byte string of 32 (the cellId)
CELL_HEAD = b"\xa8\x01\x58\x20"


class Refused(OwnmemError):
    """A pushed item failed a check; ``code`` is its stable code, one of the registry's."""

    code: ErrorCode

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = ErrorCode(code)   # a code outside the registry fails here, not on the wire


def ed25519_valid(public: bytes, signature: bytes, message: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
        return True
    except (InvalidSignature, ValueError):
        return False


class HolderKey:
    """A vault's holder key, parsed once."""

    def __init__(self, public: bytes, holder_id: bytes) -> None:
        self.key = MLDSA65PublicKey.from_public_bytes(public)
        self.holder_id = holder_id

    def valid(self, message: bytes, signature: bytes, context: bytes) -> bool:
        try:
            self.key.verify(signature, message, context)
            return True
        except (InvalidSignature, ValueError):
            return False

    async def verify(self, message: bytes, signature: bytes, context: bytes) -> bool:
        """``valid`` as the shared cell checks take it (a coroutine that never waits)."""
        return self.valid(message, signature, context)


def check_cell(raw: bytes, wrapped_dek: bytes, holder: HolderKey) -> PushCell:
    try:
        checked = run_sync(check_saihm_cell(raw, holder.holder_id, verify_signature=holder.verify))
    except CellRefused as e:
        raise Refused(e.code, str(e)) from None
    if checked.cell.to_cbor() != raw:
        raise Refused("malformed_cell", "cells are deterministic CBOR (RFC 8949 section 4.2.1)")
    if not isinstance(wrapped_dek, bytes) or len(wrapped_dek) != WRAPPED_DEK_LEN:
        raise Refused("malformed_cell", "a wrapped DEK is 40 bytes")
    return PushCell(checked.cell.cell_id, checked.cell.cell_nonce, raw, wrapped_dek)


def claimed_cell_id(raw: bytes) -> bytes | None:
    """The cellId a cell claims, read from its head without parsing it, or None when the head is
    not that of a deterministic encoding (such a cell fails ``check_cell`` anyway).  What a
    push deduplicates by before any verification (app.py): a claim is checked only where it
    would be stored."""
    return raw[4:36] if raw.startswith(CELL_HEAD) and len(raw) >= 36 else None


def check_receipt(raw: bytes, holder: HolderKey, holder_public: bytes, operation: str) -> tuple[Receipt, LogEntry]:
    try:
        r = parse_receipt(raw)
    except OwnmemError as e:
        raise Refused("malformed_receipt", str(e)) from None
    if r.operation != operation:
        raise Refused("malformed_receipt", f"expected a {operation} receipt")
    if r.to_cbor() != raw:
        # one receipt, one byte form in the public log
        raise Refused("malformed_receipt", "receipts are deterministic CBOR")
    if r.timestamp > MAX_COUNTER:
        # the log keeps it as a 64-bit signed integer: 2**63 used to end in a 500
        raise Refused("malformed_receipt", f"a receipt's timestamp is at most {MAX_COUNTER}")
    if r.holder_id != holder.holder_id:
        raise Refused("wrong_holder", "receipt belongs to another holder")
    body = r.body()
    if sha256(body) != r.receipt_id or not holder.valid(body, r.signature, RECEIPT_CONTEXT):
        raise Refused("bad_signature", "receipt signature does not verify under the vault's holder key")
    return r, LogEntry(r.receipt_id, r.subject_id, r.operation, r.holder_id, r.timestamp, raw)
