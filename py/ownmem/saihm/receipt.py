"""SAIHM receipts (SAIHM "Audit log", "Signed messages", "Wire formats", "Receipt semantics").

    receipt   = {1: receiptId, 2: subjectId, 3: operation, 4: holderId, 5: signature,
                 6: timestamp, ?7: detail, 8: receiptNonce}
    body      = deterministic CBOR of the receipt map without keys 1 and 5
    receiptId = SHA-256(body)
    signature = ML-DSA-65(holder, context "SAIHM-RECEIPT-v1", body)

A receipt never carries plaintext or key material except the KEY receipt's detail,
which is the holder's public key, so anyone can check every other receipt.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ownmem.crypto import CryptoProvider, cbor, random_bytes, sha256
from ownmem.errors import AuthenticationFailed, LimitExceeded, MalformedInput

RECEIPT_CONTEXT = b"SAIHM-RECEIPT-v1"
OPERATIONS = ("KEY", "REMEMBER", "RECALL", "STATUS", "FORGET", "SHARE", "REVOKE", "PROPOSE", "VOTE")
MAX_RECEIPT = 16384


@dataclass(frozen=True, slots=True)
class Receipt:
    receipt_id: bytes
    subject_id: bytes
    operation: str
    holder_id: bytes
    signature: bytes
    timestamp: int
    nonce: bytes
    detail: Any = None

    def body(self) -> bytes:
        return receipt_body(self.subject_id, self.operation, self.holder_id, self.timestamp, self.nonce,
                            self.detail)

    def to_cbor(self) -> bytes:
        m: dict[int, Any] = {1: self.receipt_id, 2: self.subject_id, 3: self.operation, 4: self.holder_id,
                             5: self.signature, 6: self.timestamp, 8: self.nonce}
        if self.detail is not None:
            m[7] = self.detail
        return cbor.encode(m)


# What the public log tells of when: a REMEMBER receipt's timestamp is the start of its hour
# (docs/decisions.md, SAIHM "The public log tells the hour of a save, not the second").  SAIHM
# asks a receipt to carry "the timestamp" and gives it no precision; every receipt check (its
# signature over the body, its id the body's hash) covers whatever value it holds.
RECEIPT_TIME_GRAIN = 3600


def coarse_time(t: int, grain: int = RECEIPT_TIME_GRAIN) -> int:
    """``t`` (Unix seconds) rounded down to a multiple of ``grain``: never later than ``t``."""
    return t - t % grain


def receipt_body(subject_id: bytes, operation: str, holder_id: bytes, timestamp: int, nonce: bytes,
                 detail: Any = None) -> bytes:
    m: dict[int, Any] = {2: subject_id, 3: operation, 4: holder_id, 6: timestamp, 8: nonce}
    if detail is not None:
        m[7] = detail
    return cbor.encode(m)


async def make_receipt(p: CryptoProvider, *, xi: bytes, holder_id: bytes, operation: str, subject_id: bytes,
                       timestamp: int, detail: Any = None, nonce: bytes | None = None,
                       deterministic: bool = False) -> Receipt:
    if operation not in OPERATIONS:
        raise MalformedInput(f"unknown receipt operation {operation!r}")
    n = nonce if nonce is not None else random_bytes(16)
    body = receipt_body(subject_id, operation, holder_id, timestamp, n, detail)
    sig = await p.mldsa65_sign(xi, body, RECEIPT_CONTEXT, deterministic=deterministic)
    return Receipt(sha256(body), subject_id, operation, holder_id, sig, timestamp, n, detail)


def key_receipt_subject(holder_id: bytes) -> bytes:
    return holder_id


def parse_receipt(data: bytes) -> Receipt:
    if len(data) > MAX_RECEIPT:
        raise LimitExceeded("receipt too large")
    m = cbor.decode(data, max_items=256)
    if not isinstance(m, dict) or not {1, 2, 3, 4, 5, 6, 8} <= set(m) or set(m) - {1, 2, 3, 4, 5, 6, 7, 8}:
        raise MalformedInput("malformed receipt")
    if (not isinstance(m[1], bytes) or len(m[1]) != 32 or not isinstance(m[2], bytes) or len(m[2]) != 32
            or m[3] not in OPERATIONS or not isinstance(m[4], bytes) or len(m[4]) != 32
            or not isinstance(m[5], bytes) or type(m[6]) is not int or m[6] < 0
            or not isinstance(m[8], bytes) or len(m[8]) != 16):
        raise MalformedInput("malformed receipt")
    return Receipt(m[1], m[2], m[3], m[4], m[5], m[6], m[8], m.get(7))


async def verify_receipt(p: CryptoProvider, r: Receipt, holder_public: bytes) -> None:
    body = r.body()
    if sha256(body) != r.receipt_id:
        raise AuthenticationFailed("receiptId does not match the receipt")
    if sha256(holder_public) != r.holder_id:
        raise AuthenticationFailed("receipt belongs to another holder")
    if not await p.mldsa65_verify(holder_public, body, r.signature, RECEIPT_CONTEXT):
        raise AuthenticationFailed("receipt signature does not verify")
