"""A pull page is streamed in slices (``wire.messages.ChangesPage.chunks``, from the server's rows by
``server.vault_routes._change``); the bytes are exactly the deterministic CBOR the page was before:
``cbor.encode({1: rows, 2: next, 3: last, 4: more})``."""
from __future__ import annotations

import os

import pytest

from ownmem.crypto import cbor
from ownmem.wire import messages
from server.storage.base import Change
from server.vault_routes import _change


def _rows(n: int) -> list[Change]:
    out = []
    for i in range(n):
        seq = 1 + i * 37 + (1 << 33) * (i > n // 2)         # small and 64-bit sequence numbers
        if i % 7 == 3:
            out.append(Change(seq, "meta", None, None, None))
        elif i % 7 == 5:
            out.append(Change(seq, "erase", os.urandom(32), None, None))
        elif i % 7 == 6:                                     # a cell erased since: its bytes are gone
            out.append(Change(seq, "cell", os.urandom(32), None, None))
        else:
            out.append(Change(seq, "cell", os.urandom(32), os.urandom(20 + 97 * (i % 50)), os.urandom(40)))
    return out


@pytest.mark.parametrize("n", [0, 1, messages.PAGE_SLICE - 1, messages.PAGE_SLICE, messages.PAGE_SLICE + 1,
                               2 * messages.PAGE_SLICE + 5])
def test_streamed_page_is_the_deterministic_encoding(n: int) -> None:
    rows = _rows(n)
    nxt = rows[-1].seq if rows else 9
    for last in (nxt, nxt + 1, 1 << 40):
        want = cbor.encode({1: [[c.seq, c.kind, c.cell_id, c.cell, c.wrapped_dek] for c in rows],
                            2: nxt, 3: last, 4: nxt < last})
        page = messages.ChangesPage(tuple(_change(c) for c in rows), nxt, last)
        chunks = list(page.chunks())
        assert b"".join(chunks) == page.encode() == want
        assert len(chunks) == 2 + -(-n // messages.PAGE_SLICE)        # a head, the slices, a tail
        assert messages.ChangesPage.parse(want, 0 if rows else nxt) == page
