"""A pull page is streamed in slices (server/app.py ``_page_chunks``); the bytes are exactly the
deterministic CBOR the page was before: ``cbor.encode({1: rows, 2: next, 3: last, 4: more})``."""
from __future__ import annotations

import asyncio
import os

import pytest

from ownmem.crypto import cbor
from server.app import PAGE_SLICE, _page_chunks
from server.storage.base import Change


def _rows(n: int) -> list[Change]:
    out = []
    for i in range(n):
        seq = 1 + i * 37 + (1 << 33) * (i % 3 == 2)        # small and 64-bit sequence numbers
        if i % 7 == 3:
            out.append(Change(seq, "meta", None, None, None))
        elif i % 7 == 5:
            out.append(Change(seq, "erase", os.urandom(32), None, None))
        else:
            out.append(Change(seq, "cell", os.urandom(32), os.urandom(20 + 97 * (i % 50)), os.urandom(40)))
    return out


async def _collect(rows: list[Change], nxt: int, last: int) -> bytes:
    return b"".join([chunk async for chunk in _page_chunks(rows, nxt, last)])


@pytest.mark.parametrize("n", [0, 1, PAGE_SLICE - 1, PAGE_SLICE, PAGE_SLICE + 1, 2 * PAGE_SLICE + 5])
def test_streamed_page_is_the_deterministic_encoding(n):
    rows = _rows(n)
    nxt = rows[-1].seq if rows else 9
    for last in (nxt, nxt + 1, 1 << 40):
        want = cbor.encode({1: [[c.seq, c.kind, c.cell_id, c.cell, c.wrapped_dek] for c in rows],
                            2: nxt, 3: last, 4: nxt < last})
        assert asyncio.run(_collect(rows, nxt, last)) == want
