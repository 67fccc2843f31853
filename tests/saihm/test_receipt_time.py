"""The public log tells the hour of a save, not its second (saihm.receipt.coarse_time;
docs/decisions.md, SAIHM).  The pure rounding here; the receipts a real sync publishes, and
that they still verify, in tests/sync/test_receipt_time.py."""
from __future__ import annotations

import asyncio

from ownmem.crypto import provider
from ownmem.saihm.identity import holder_from_seed
from ownmem.saihm.receipt import RECEIPT_TIME_GRAIN, coarse_time, make_receipt, parse_receipt, verify_receipt


def test_the_time_is_rounded_down_to_the_hour_and_never_later() -> None:
    assert RECEIPT_TIME_GRAIN == 3600
    assert coarse_time(1_747_526_400) == 1_747_526_400            # on the hour: unchanged
    assert coarse_time(1_747_526_400 + 3599) == 1_747_526_400
    assert coarse_time(1_747_526_400 + 3600) == 1_747_526_400 + 3600
    for t in (0, 1, 59, 3599, 1_765_000_123, 2**40 + 17):
        c = coarse_time(t)
        assert c <= t < c + 3600 and c % 3600 == 0


def test_a_receipt_with_the_coarse_time_verifies_as_any_other() -> None:
    p = provider()
    h = asyncio.run(holder_from_seed(p, b"\x05" * 32))
    r = asyncio.run(make_receipt(p, xi=h.xi, holder_id=h.holder_id, operation="REMEMBER", subject_id=b"\x09" * 32,
                                 timestamp=coarse_time(1_765_000_123)))
    again = parse_receipt(r.to_cbor())
    assert again.timestamp == 1_764_997_200 and again.receipt_id == r.receipt_id
    asyncio.run(verify_receipt(p, again, h.public))
