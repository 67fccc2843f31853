"""One memory's receipts from the public log, checked on this device (SAIHM "Audit log",
"Receipt semantics", "Signed messages"; DESIGN.md "The public log").

    for each version of the memory that reached the server (its cellId, Store.cell_of):
        GET {server}/v1/log?subject=<cellId>        (public: no credential)
        each entry -> check_entry(...)              -> ReceiptView

The server's answer is untrusted: it lists, for a subject, whatever it likes.  What the
page shows comes from the receipt's own signed bytes, never from the server's summary
beside them, and each receipt is judged in numbered steps:

    1. the entry is an object whose "receipt" is the hex of at most MAX_RECEIPT bytes;
    2. those bytes parse as a SAIHM receipt (saihm.receipt.parse_receipt);
    3. its subjectId is the cell that was asked for (a server cannot pass off another
       memory's receipt, or a receipt of another vault, as this one's);
    4. the server's summary fields (receipt_id, operation, ...) agree with the receipt;
    5. receiptId = SHA-256(body), holderId = SHA-256(holder key) and the ML-DSA-65
       signature (context "SAIHM-RECEIPT-v1") verifies under this vault's holder key.

A receipt that fails a step is still listed, with why: a warning the person sees, not a
silent drop (a server that forges or rewrites receipts should be noticed).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ownmem.crypto import CryptoProvider, sha256
from ownmem.errors import OwnmemError, WireError
from ownmem.saihm.receipt import MAX_RECEIPT, parse_receipt, verify_receipt

# Receipts asked for per cell: far more than one memory version has (REMEMBER, SHARE,
# REVOKE ...); a server that answers with more is cut off here, and the page says so.
PER_CELL = 100
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True, slots=True)
class ReceiptView:
    """One receipt of a memory as the detail view shows it (hex for bytes)."""

    object_id: str              # the version of the memory whose cell it names
    cell_id: str
    receipt_id: str             # from the receipt's bytes when they parse, else the server's claim (or "")
    operation: str
    timestamp: int | None
    index: int | None           # the log's leaf index, as the server says (not checked here)
    verified: bool
    problem: str | None         # why it does not verify, one sentence

    def to_json(self) -> dict[str, Any]:
        return {"object_id": self.object_id, "cell_id": self.cell_id, "receipt_id": self.receipt_id,
                "operation": self.operation, "timestamp": self.timestamp, "index": self.index,
                "verified": self.verified, "problem": self.problem}


def _hex64(v: object) -> str:
    return v if isinstance(v, str) and len(v) == 64 and set(v) <= _HEX else ""


def _claims_agree(row: dict[str, Any], receipt_id: bytes, subject: bytes, operation: str, holder: bytes,
                  timestamp: int) -> bool:
    want = {"receipt_id": receipt_id.hex(), "subject_id": subject.hex(), "operation": operation,
            "holder_id": holder.hex(), "timestamp": timestamp}
    return all(row.get(k) == v for k, v in want.items() if k in row)


async def check_entry(p: CryptoProvider, row: object, cell_id: bytes, object_id: bytes,
                      holder_public: bytes) -> ReceiptView:
    """Judge one entry of ``GET /v1/log?subject=cell_id`` (the steps of the module docstring)."""
    oid, cid = object_id.hex(), cell_id.hex()
    index = row.get("index") if isinstance(row, dict) and type(row.get("index")) is int else None

    def refused(why: str, receipt_id: str = "", operation: str = "", timestamp: int | None = None) -> ReceiptView:
        return ReceiptView(oid, cid, receipt_id, operation, timestamp, index, False, why)

    # 1. an object carrying the receipt's bytes, bounded before they are decoded
    if not isinstance(row, dict):
        return refused("the log answered with something that is not a receipt entry")
    claimed = _hex64(row.get("receipt_id"))
    raw_hex = row.get("receipt")
    if not isinstance(raw_hex, str) or len(raw_hex) > 2 * MAX_RECEIPT or len(raw_hex) % 2 or not set(raw_hex) <= _HEX:
        return refused("the log entry carries no readable receipt", claimed)
    # 2. the bytes are a SAIHM receipt
    try:
        r = parse_receipt(bytes.fromhex(raw_hex))
    except OwnmemError:
        return refused("the log entry's receipt is malformed", claimed)
    shown = (r.receipt_id.hex(), r.operation, r.timestamp)
    # 3. it is about this memory's cell
    if r.subject_id != cell_id:
        return refused("the log listed a receipt of another memory under this one", *shown)
    # 4. what the server says beside it is what it says
    if not _claims_agree(row, r.receipt_id, r.subject_id, r.operation, r.holder_id, r.timestamp):
        return refused("the log's summary of this receipt does not match the receipt", *shown)
    # 5. the receipt is this vault's, signed by its holder key (verify_receipt decides; the
    #    first two of its checks are repeated here only to say which one failed, as an
    #    authentication failure is one opaque error)
    try:
        await verify_receipt(p, r, holder_public)
    except OwnmemError:
        if sha256(r.body()) != r.receipt_id:
            return refused("its receiptId does not match its contents", *shown)
        if sha256(holder_public) != r.holder_id:
            return refused("it names another holder than this vault", *shown)
        return refused("its signature does not verify under this vault's holder key", *shown)
    return ReceiptView(oid, cid, *shown, index, True, None)


def parse_log_page(body: object) -> list[object]:
    """The entries of a ``GET /v1/log`` answer (``{"entries": [...]}``), at most PER_CELL + 1
    of them; anything else is a WireError (nothing of it is used)."""
    if not isinstance(body, dict) or not isinstance(body.get("entries"), list):
        raise WireError("the log's answer is not a list of entries")
    entries: list[object] = body["entries"]
    return entries[:PER_CELL + 1]
