"""Exports that always decode (server/storage/export.py; ApertoMemory "Portable Export Container").

A `.amem` states its object count before its objects and holds each object id once in its
DEK map.  The server used to count first and then read pages as they were at the time, so
a push or an erase while the export streamed made a 200 that does not decode ("truncated",
"trailing bytes"), and two cells of one object id made duplicate map keys.  Every export
here is decoded strictly (ownmem.aperto.container.parse_container: CBOR with trailing bytes,
short arrays and duplicate keys refused) and checked whole: objects in ascending id order,
each once, each with its wrapped DEK and no DEK without its object.
"""
from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ownmem.aperto.container import parse_container
from ownmem.aperto.seal import parse_sealed
from ownmem.crypto import cbor, run_sync
from ownmem.saihm.cell import make_cell, parse_cell
from server.storage import export
from server.storage.base import SnapshotClosed, StorageBusy
from tests.server.conftest import Backend, LinkedVault
from tests.server.storekit import Store, forget, stocked, wait_until

PAGE = 1000              # objects per page of the server's export stream (server/app.py)
# Three pages of ~8 MB.  uvicorn waits for the socket before it writes, not after: the server
# hands page 1 to the socket, reads page 2 at once, and then waits to send it, since 8 MB is
# more than loopback buffers take in (net.ipv4.tcp_wmem: 4 MB at most).  So with a client
# that stops reading after the head, page 3 is read only once the client reads on.
BIG = 2 * PAGE + 10
FILLER = "x" * 8000


def _big_vault(linked_vault: Any, n: int = BIG) -> Any:
    lv = linked_vault(0, key="c")
    lv.v.store.db.execute("PRAGMA synchronous=OFF")    # this test's device copy: its durability is not under test
    for i in range(n):
        lv.v.add(f"memory {i} {FILLER}")
    lv.sync()
    return lv


def _slow_client() -> httpx.Client:
    """A small receive buffer: reading nothing, it holds the server's stream up within a few MB."""
    small = httpx.HTTPTransport(socket_options=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)])
    return httpx.Client(timeout=60.0, transport=small)


def _object_ids(data: bytes) -> set[bytes]:
    """The object ids of an export, once it decoded as one consistent container."""
    c = parse_container(data)
    ids = [parse_sealed(o).object_id for o in c.objects]
    assert ids == sorted(set(ids)), "objects in ascending id order, each once"
    assert set(ids) == set(c.deks), "every object has its wrapped DEK, every DEK its object"
    return set(ids)


def _export(http: httpx.Client, lv: Any) -> bytes:
    r = http.get(lv.url("/export.amem"), headers=lv.auth())
    assert r.status_code == 200, r.text
    return r.content


def test_export_is_the_vault_as_it_was_when_the_export_began(
        backend: Backend, linked_vault: Callable[..., LinkedVault], http: httpx.Client) -> None:
    """A push and an erase that commit between the export's pages are not in it."""
    lv = _big_vault(linked_vault)
    store = lv.v.store
    at_start = store.object_ids()
    ordered = sorted(at_start)
    doomed = ordered[:5] + ordered[-5:]            # in the page already read, and in the one to come
    receipts = [lv.receipt("FORGET", (store.cell_of(o) or (b"", b""))[0]).hex() for o in doomed]
    for i in range(20):
        lv.v.add(f"pushed while the export streams, {i}")
    fresh = lv.cells()
    auth = lv.auth()
    with _slow_client() as slow, slow.stream("GET", lv.url("/export.amem"), headers=auth) as r:
        assert r.status_code == 200
        chunks = r.iter_raw()
        head = next(chunks)          # the count is out; the server waits behind the first page
        assert lv.push(fresh).json()["stored"] == 20
        assert len(http.post(lv.url("/erase"), headers=auth, json={"receipts": receipts}).json()["erased"]) == 10
        data = head + b"".join(chunks)
    assert _object_ids(data) == at_start
    after = (at_start - set(doomed)) | {parse_cell(c).cell_nonce for c, _ in fresh}
    assert _object_ids(_export(http, lv)) == after


def test_exports_taken_while_threads_push_and_erase_all_decode(
        backend: Backend, linked_vault: Callable[..., LinkedVault], http: httpx.Client) -> None:
    lv = _big_vault(linked_vault)
    store = lv.v.store
    base = store.object_ids()
    doomed = sorted(base)[::25]
    receipts = {o: lv.receipt("FORGET", (store.cell_of(o) or (b"", b""))[0]).hex() for o in doomed}
    for i in range(60):
        lv.v.add(f"pushed by a thread, {i}")
    fresh = lv.cells()
    fresh_ids = {parse_cell(c).cell_nonce for c, _ in fresh}
    auth = {**lv.auth(), "Content-Type": "application/cbor"}
    erased_at: dict[bytes, float] = {}      # when the erase was answered (committed before)
    pushed: list[int] = []
    stop = threading.Event()

    def pusher() -> None:
        with httpx.Client(timeout=60.0) as c:
            for i in range(0, len(fresh), 3):
                if stop.is_set():
                    return
                assert c.post(lv.url("/cells"), content=cbor.encode(fresh[i:i + 3]), headers=auth).status_code == 200
                pushed.append(i)
                time.sleep(0.05)

    def eraser() -> None:
        with httpx.Client(timeout=60.0) as c:
            for o in doomed:
                if stop.is_set():
                    return
                assert c.post(lv.url("/erase"), headers=auth, json={"receipts": [receipts[o]]}).status_code == 200
                erased_at[o] = time.monotonic()
                time.sleep(0.05)

    def slowly(chunks: Iterator[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            time.sleep(0.005)
            yield chunk

    workers = [threading.Thread(target=pusher), threading.Thread(target=eraser)]
    exports: list[tuple[float, int, int, bytes]] = []   # began, changes before, changes after, bytes
    for w in workers:
        w.start()
    try:
        with _slow_client() as slow:
            while len(exports) < 3 or (any(w.is_alive() for w in workers) and len(exports) < 8):
                began, changes = time.monotonic(), len(pushed) + len(erased_at)
                with slow.stream("GET", lv.url("/export.amem"), headers=lv.auth()) as r:
                    assert r.status_code == 200
                    data = b"".join(slowly(r.iter_raw()))
                exports.append((began, changes, len(pushed) + len(erased_at), data))
    finally:
        stop.set()
        for w in workers:
            w.join(60)
    assert any(after > before for _, before, after, _ in exports), "no export overlapped a push or an erase"
    for began, _, _, data in exports:
        ids = _object_ids(data)
        assert base - set(doomed) <= ids <= base | fresh_ids
        assert not ids & {o for o, t in erased_at.items() if t < began}, "an erased object came back"


def test_two_cells_of_one_object_export_it_once(
        backend: Backend, linked_vault: Callable[..., LinkedVault], http: httpx.Client) -> None:
    """Two cells with one cellNonce (another kekVersion, so another cellId): the first one stored is exported."""
    lv = linked_vault(2)
    items = lv.cells()
    assert lv.push(items).json()["stored"] == 2
    first = parse_cell(items[0][0])
    h = lv.v.holder()
    again = run_sync(make_cell(lv.v.crypto, xi=h.xi, holder_id=h.holder_id, kek_version=2, tier="STANDARD",
                               cell_nonce=first.cell_nonce, ciphertext=first.ciphertext, timestamp=int(time.time())))
    assert again.cell_id != first.cell_id
    assert lv.push([[again.to_cbor(), os.urandom(40)]]).json()["stored"] == 1
    c = parse_container(_export(http, lv))
    assert len(c.objects) == 2 and _object_ids(_export(http, lv)) == lv.v.store.object_ids()
    assert c.deks[first.cell_nonce] == items[0][1]


def test_exports_past_the_slots_are_refused_busy_until_one_ends(
        backend: Backend, linked_vault: Callable[..., LinkedVault], http: httpx.Client) -> None:
    """Clients that open exports and stop reading hold EXPORT_SLOTS snapshots at most: the next
    export is refused with 503 busy and Retry-After, and runs once one of them has gone."""
    lv = _big_vault(linked_vault, PAGE + 10)      # a first page the socket does not take in whole
    auth = lv.auth()
    readers: list[Iterator[bytes]] = []   # kept: an httpx iterator dropped unfinished closes its connection
    with contextlib.ExitStack() as stalled:
        for _ in range(export.EXPORT_SLOTS):
            slow = stalled.enter_context(_slow_client())
            r = stalled.enter_context(slow.stream("GET", lv.url("/export.amem"), headers=auth))
            assert r.status_code == 200
            readers.append(r.iter_raw())
            next(readers[-1])                      # the snapshot is open; then this client reads no more
        r = http.get(lv.url("/export.amem"), headers=auth)
        assert r.status_code == 503 and r.json()["error"] == "busy" and int(r.headers["Retry-After"]) > 0
    # the stalled clients hung up: their snapshots end with their streams
    assert wait_until(lambda: http.get(lv.url("/export.amem"), headers=auth).status_code == 200)
    assert _object_ids(_export(http, lv)) == lv.v.store.object_ids()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_exports_are_bounded_in_number_and_in_time(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that opens exports and stops reading cannot hold snapshots (and with them
    physical erasure) for ever: EXPORT_SLOTS at once, each for EXPORT_SECONDS at most."""
    monkeypatch.setattr(export, "EXPORT_SECONDS", 2.0)
    st, vault, cells = stocked(Store.fresh(kind, tmp_path, request), 3)
    try:
        stalled = [st.export_snapshot(vault.id) for _ in range(export.EXPORT_SLOTS)]
        with pytest.raises(StorageBusy):
            st.export_snapshot(vault.id)
        stalled.pop().close()
        st.export_snapshot(vault.id).close()          # a slot given back is a slot to use
        assert st.erase(vault.id, [cells[0].cell_id], [forget(vault, cells[0].cell_id)], int(time.time()))
        assert st.erasure_pending(vault.id)           # the stalled snapshots still see the row
        assert wait_until(lambda: not st.erasure_pending(vault.id), timeout=15)
        with pytest.raises(SnapshotClosed):
            stalled[0].page(b"", 10)
    finally:
        st.close()


def test_sqlite_refuses_new_exports_while_an_erasure_waits_for_open_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On SQLite every open snapshot holds the checkpoint up: exports that overlap without end
    would keep erased bytes in the log for ever, so once an erasure is overdue a new export
    waits (busy) for the open ones to end."""
    from server.storage import sqlite

    monkeypatch.setattr(sqlite, "ERASURE_OVERDUE", 0.5)
    st, vault, cells = stocked(Store("sqlite", str(tmp_path)), 3)
    try:
        held = st.export_snapshot(vault.id)
        assert st.erase(vault.id, [cells[0].cell_id], [forget(vault, cells[0].cell_id)], int(time.time()))
        st.export_snapshot(vault.id).close()          # not overdue yet: exports still open
        time.sleep(0.6)
        with pytest.raises(StorageBusy):
            st.export_snapshot(vault.id)
        held.close()
        assert wait_until(lambda: not st.erasure_pending(vault.id))
        st.export_snapshot(vault.id).close()
    finally:
        st.close()
