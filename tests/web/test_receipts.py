"""ownmem.web.receipts: how the PWA judges the receipts a server lists for a memory
(SAIHM "Audit log", "Receipt semantics").  The server is the attacker here: every test
hands check_entry what a hostile or broken server could send for GET /v1/log?subject=."""
from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from ownmem.crypto import cbor, provider
from ownmem.errors import WireError
from ownmem.saihm.identity import Holder, holder_from_seed
from ownmem.saihm.receipt import MAX_RECEIPT, Receipt, make_receipt
from ownmem.web.api import DeviceCache
from ownmem.web.receipts import PER_CELL, ReceiptView, check_entry, parse_log_page

CELL = bytes(range(32))
OTHER_CELL = bytes(range(1, 33))
OID = b"\x07" * 16


T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def holder() -> Holder:
    return run(holder_from_seed(provider(), b"\x01" * 32))


@pytest.fixture(scope="module")
def stranger() -> Holder:
    return run(holder_from_seed(provider(), b"\x02" * 32))


def receipt(h: Holder, subject: bytes = CELL, op: str = "REMEMBER", *, xi: bytes | None = None) -> Receipt:
    r: Receipt = run(make_receipt(provider(), xi=xi or h.xi, holder_id=h.holder_id, operation=op,
                                  subject_id=subject, timestamp=1_800_000_000))
    return r


def row(r: Receipt, **over: Any) -> dict[str, Any]:
    """The server's JSON for a logged receipt (server/app.py _log_json), with overrides."""
    out: dict[str, Any] = {"index": 3, "receipt_id": r.receipt_id.hex(), "subject_id": r.subject_id.hex(),
                           "operation": r.operation, "holder_id": r.holder_id.hex(), "timestamp": r.timestamp,
                           "receipt": r.to_cbor().hex()}
    out.update(over)
    return out


def check(entry: object, h: Holder) -> ReceiptView:
    v: ReceiptView = run(check_entry(provider(), entry, CELL, OID, h.public))
    return v


def test_a_genuine_receipt_verifies(holder: Holder) -> None:
    r = receipt(holder)
    v = check(row(r), holder)
    assert v.verified and v.problem is None
    assert (v.receipt_id, v.operation, v.timestamp, v.index) == (r.receipt_id.hex(), "REMEMBER", r.timestamp, 3)
    assert (v.object_id, v.cell_id) == (OID.hex(), CELL.hex())


def test_forged_signature_under_this_holder_id_is_flagged(holder: Holder, stranger: Holder) -> None:
    v = check(row(receipt(holder, xi=stranger.xi)), holder)
    assert not v.verified
    assert v.problem == "its signature does not verify under this vault's holder key"


def test_receipt_of_another_holder_is_flagged(holder: Holder, stranger: Holder) -> None:
    v = check(row(receipt(stranger)), holder)
    assert not v.verified and v.problem == "it names another holder than this vault"


def test_receipt_of_another_memory_replayed_under_this_one_is_flagged(holder: Holder) -> None:
    r = receipt(holder, subject=OTHER_CELL)
    v = check(row(r, subject_id=CELL.hex()), holder)     # the server files it under this cell
    assert not v.verified and v.problem == "the log listed a receipt of another memory under this one"


def test_summary_that_disagrees_with_the_receipt_is_flagged(holder: Holder) -> None:
    r = receipt(holder)
    for field, lie in (("operation", "FORGET"), ("timestamp", 1), ("receipt_id", "00" * 32)):
        v = check(row(r, **{field: lie}), holder)
        assert not v.verified, field
        assert v.problem == "the log's summary of this receipt does not match the receipt"
        assert v.operation == "REMEMBER"       # what is shown comes from the signed bytes


def test_rewritten_receipt_id_is_flagged(holder: Holder) -> None:
    r = receipt(holder)
    m = cbor.decode(r.to_cbor())
    m[1] = b"\x00" * 32
    v = check(row(r, receipt=cbor.encode(m).hex(), receipt_id=(b"\x00" * 32).hex()), holder)
    assert not v.verified and v.problem == "its receiptId does not match its contents"


def test_changed_timestamp_breaks_the_signature(holder: Holder) -> None:
    r = receipt(holder)
    m = cbor.decode(r.to_cbor())
    m[6] = r.timestamp + 1
    v = check(row(r, receipt=cbor.encode(m).hex(), timestamp=r.timestamp + 1), holder)
    assert not v.verified and v.problem == "its receiptId does not match its contents"


@pytest.mark.parametrize("entry", [
    None, [], "receipt", 7,
    {"receipt": None}, {"receipt": "zz"}, {"receipt": "abc"}, {"receipt": "00" * (MAX_RECEIPT + 1)},
    {"receipt": ""}, {"receipt": cbor.encode({1: 2}).hex()},
])
def test_malformed_entries_are_listed_as_such(holder: Holder, entry: object) -> None:
    v = check(entry, holder)
    assert not v.verified and v.problem


def test_truncated_receipt_is_malformed(holder: Holder) -> None:
    raw = receipt(holder).to_cbor()
    v = check({"receipt": raw[:-10].hex(), "receipt_id": "x"}, holder)
    assert not v.verified and v.problem == "the log entry's receipt is malformed"
    assert v.receipt_id == ""                  # a claimed id that is not 64 hex digits is not shown


def test_log_page_shape_is_checked() -> None:
    bodies: tuple[object, ...] = (None, [], {"entries": {}}, {"nothing": []})
    for body in bodies:
        with pytest.raises(WireError):
            parse_log_page(body)
    assert len(parse_log_page({"entries": list(range(10 * PER_CELL))})) == PER_CELL + 1


def test_device_cache_keeps_only_live_objects() -> None:
    c = DeviceCache()
    for i in range(3):
        c.put(bytes([i]) * 16, b"sealed%d" % i, b"payload", b"pub")
    c.dirty = False
    assert c.keep_only({b"\x00" * 16, b"\x02" * 16}) == 1
    assert set(c.entries) == {b"\x00" * 16, b"\x02" * 16} and c.dirty
    c.dirty = False
    assert c.keep_only(set(c.entries)) == 0 and not c.dirty
