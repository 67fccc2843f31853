"""Export snapshots: one vault's cells as they were at one moment, read page by page.

A streamed `.amem` (ApertoMemory "Portable Export Container") declares how many objects it
holds before the first one, and its DEK map may hold each object id once.  So:

 1. every page of one export is read in the state its count was taken in: one read
    transaction (SQLite) or one REPEATABLE READ snapshot (PostgreSQL) on a connection of
    the export's own, from the count to the last page; a push or an erase that commits
    meanwhile is not in it;
 2. each object id exports one cell: the first one stored (lowest sequence number), which
    is the one a device pulling the feed keeps (ownmem.vault.sync: a later cell of an id
    it holds is skipped).  Pages come in (object id, seq) order, so the first row of each
    id is its first cell, and a page that ends inside an id's rows loses nothing: the next
    page starts after that id.

A snapshot held open costs the server: it keeps the erased bytes it can see alive (physical
erasure waits for it, scrub.py) and a connection.  Hence at most EXPORT_SLOTS open per
storage, and none longer than EXPORT_SECONDS: a client that stops reading loses its
download (the stream breaks off, it never ends as a complete, undecodable file) rather
than hold either of them for ever.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from server.storage.base import SnapshotClosed, StorageBusy

EXPORT_SLOTS = 4           # export snapshots open at once, per storage (server process)
EXPORT_SECONDS = 600.0     # the longest an export may take: ~1 GiB at 2 MB/s

# Both backends run these, with their own placeholder.  The index on (vault_id, object_id,
# seq) gives the order, so no sort of cell bytes spills into a temporary file.
COUNT_SQL = "SELECT count(DISTINCT object_id) FROM cells WHERE vault_id = {p}"
PAGE_SQL = ("SELECT object_id, cell, wrapped_dek FROM cells WHERE vault_id = {p} AND object_id > {p} "
            "ORDER BY object_id, seq LIMIT {p}")

Row = tuple[bytes, bytes, bytes]             # (object id, cell, wrapped DEK)
Fetch = Callable[[bytes, int], list[Row]]    # PAGE_SQL's rows after an object id, at most a limit
Opened = tuple[int, Fetch, Callable[[], None]]   # (COUNT_SQL's count, fetch, end the snapshot)


def first_per_object(rows: Iterable[Row]) -> list[Row]:
    """Rows in (object id, seq) order -> the first row of each object id."""
    out: list[Row] = []
    for r in rows:
        if not out or out[-1][0] != r[0]:
            out.append(r)
    return out


class Snapshot:
    """An ExportSnapshot over one backend connection.  ``close`` never waits: called while a
    page is being read (the event loop closing a cancelled stream, the timer), it ends the
    snapshot as soon as that page is done."""

    def __init__(self, opened: Opened, on_end: Callable[[Snapshot], None]) -> None:
        self._count, self._fetch, self._end = opened
        self._on_end = on_end
        self._state = threading.Lock()
        self._closed = self._reading = self._ended = False

    @property
    def count(self) -> int:
        return self._count

    def page(self, after: bytes, limit: int) -> list[Row]:
        self._begin_read()
        try:
            return first_per_object(self._fetch(after, limit))
        finally:
            self._end_read()

    def _begin_read(self) -> None:
        with self._state:
            if self._closed:
                raise SnapshotClosed("the export snapshot is closed")
            self._reading = True

    def _end_read(self) -> None:
        with self._state:
            self._reading = False
            end = self._closed
        if end:
            self._finish()

    def close(self) -> None:
        with self._state:
            end = not self._closed and not self._reading
            self._closed = True
        if end:
            self._finish()

    def _finish(self) -> None:
        with self._state:
            if self._ended:
                return
            self._ended = True
        try:
            self._end()
        finally:
            self._on_end(self)


class ExportSlots:
    """The export snapshots of one storage: how many are open, and how long each may live."""

    def __init__(self, slots: int | None = None, seconds: float | None = None) -> None:
        self.slots = EXPORT_SLOTS if slots is None else slots
        self.seconds = EXPORT_SECONDS if seconds is None else seconds
        self._lock = threading.Lock()
        self._open: dict[Snapshot, threading.Timer] = {}
        self._reserved = 0

    def open_count(self) -> int:
        with self._lock:
            return len(self._open) + self._reserved

    def open(self, begin: Callable[[], Opened]) -> Snapshot:
        """A snapshot from ``begin`` (which opens the connection and takes the count), or StorageBusy."""
        with self._lock:
            if len(self._open) + self._reserved >= self.slots:
                raise StorageBusy(f"{self.slots} exports are running; retry later")
            self._reserved += 1
        try:
            opened = begin()
        except BaseException:
            with self._lock:
                self._reserved -= 1
            raise
        snap = Snapshot(opened, self._ended)
        timer = threading.Timer(self.seconds, snap.close)
        timer.daemon = True
        with self._lock:
            self._reserved -= 1
            self._open[snap] = timer
        timer.start()
        return snap

    def close_all(self) -> None:
        with self._lock:
            snaps = list(self._open)
        for s in snaps:
            s.close()

    def _ended(self, snap: Snapshot) -> None:
        with self._lock:
            timer = self._open.pop(snap, None)
        if timer is not None:
            timer.cancel()
