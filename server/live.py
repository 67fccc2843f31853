"""Live change notifications for the event stream, across every server process.

A watcher gets the vault's last sequence number at once and again whenever it
changes.  Within a process, writes wake watchers directly.  Across processes:
PostgreSQL delivers NOTIFY ownmem_changes to a listener thread in each process; with
SQLite (one file shared by the processes) a poller reads last_seq of the watched
vaults four times a second.  A keep-alive is yielded every 15 s.  A watch ends when the
credential it was opened with expires (``until``): an event stream never outlives the
session that opened it.
"""
from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import AsyncIterator

from server.storage import Storage

KEEPALIVE = 15.0
POLL = 0.25


class Live:
    def __init__(self, storage: Storage, database_url: str | None) -> None:
        self.storage = storage
        self.pg_url = database_url if database_url and database_url.startswith(("postgres", "postgresql")) else None
        self._waiters: dict[int, set[asyncio.Event]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self.pg_url:
            self._thread = threading.Thread(target=self._listen_pg, name="ownmem-listen", daemon=True)
            self._thread.start()
        else:
            self._task = asyncio.create_task(self._poll_sqlite())

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def notify(self, vault_id: int) -> None:
        for ev in self._waiters.get(vault_id, ()):
            ev.set()

    async def watch(self, vault_id: int, until: float = math.inf) -> AsyncIterator[int]:
        """The vault's last sequence number now, on each change and every KEEPALIVE, until
        ``until`` (wall-clock seconds, as credentials expire)."""
        ev = asyncio.Event()
        self._waiters.setdefault(vault_id, set()).add(ev)
        try:
            while not self._stop.is_set() and time.time() < until:
                yield await asyncio.to_thread(self.storage.last_seq, vault_id)
                left = until - time.time()
                if left <= 0:
                    return
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(ev.wait(), min(KEEPALIVE, left))
                ev.clear()
        finally:
            self._waiters[vault_id].discard(ev)
            if not self._waiters[vault_id]:
                del self._waiters[vault_id]

    async def _poll_sqlite(self) -> None:
        seen: dict[int, int] = {}
        while True:
            await asyncio.sleep(POLL)
            for vid in list(self._waiters):
                try:
                    seq = await asyncio.to_thread(self.storage.last_seq, vid)
                except Exception:  # noqa: BLE001 - a transient read error must not end live updates
                    continue
                if seen.get(vid) != seq:
                    seen[vid] = seq
                    self.notify(vid)

    def _listen_pg(self) -> None:
        import psycopg  # start-up time: the PostgreSQL driver loads only for a PostgreSQL store

        assert self.pg_url is not None and self._loop is not None
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.pg_url, autocommit=True) as conn:
                    conn.execute("LISTEN ownmem_changes")
                    while not self._stop.is_set():
                        for n in conn.notifies(timeout=1.0):
                            with contextlib.suppress(ValueError, RuntimeError):
                                self._loop.call_soon_threadsafe(self.notify, int(n.payload))
            except Exception:  # noqa: BLE001 - reconnect after a dropped connection
                self._stop.wait(1.0)
