"""Physical erasure, retried in the background until it is done (DESIGN.md "One memory,
three views": destroying every copy of a wrapped DEK is cryptographic erasure).

Deleting a row makes a wrapped DEK unreachable; it does not take its bytes off the disk.
Each backend has one step that does, and that step can be held up by a reader that still
sees the old bytes:

    SQLite       a checkpoint that copies the zeroed pages (secure_delete) into the file
                 and truncates the write-ahead log, which a reader of the log holds up;
    PostgreSQL   a rewrite of the vault's cells partition (VACUUM FULL), which must wait
                 until no snapshot older than the erase remains, or it copies the dead rows.

Waiting for those readers while holding a lock is what stalled every writer before, so
the step never waits: it is tried once when the erase commits and then here, with backoff,
until it reports that nothing is pending.  What is pending is stored in the database
(table ``erase_pending``), so another server process, or the next one after a crash,
finishes it.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

FIRST_RETRY = 0.05     # seconds after a failed step
LAST_RETRY = 2.0       # the backoff stops growing here
IDLE_POLL = 5.0        # with nothing pending here: look for what another process left

_log = logging.getLogger("ownmem.server")


class Scrubber:
    """Runs ``step`` (-> True once nothing is pending) now and again, in one thread of its own."""

    def __init__(self, step: Callable[[], bool], *, name: str) -> None:
        self._step = step
        self._lock = threading.Lock()          # one step at a time, whoever runs it
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._pending_since: float | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def try_now(self) -> bool:
        """One step now, unless one is running already -> whether nothing is pending.  Never waits."""
        if not self._lock.acquire(blocking=False):
            self._wake.set()
            return False
        try:
            done = self._attempt()
        finally:
            self._lock.release()
        if not done:
            self._wake.set()
        return done

    def overdue(self, seconds: float) -> bool:
        """Whether something has been pending, as this process saw it, for longer than ``seconds``."""
        since = self._pending_since
        return since is not None and time.monotonic() - since > seconds

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=30)

    def _attempt(self) -> bool:
        try:
            done = self._step()
        except Exception as e:  # noqa: BLE001 - a database error must not end the retries
            _log.warning("physical erasure step failed, retrying: %s", e)
            done = False
        if done:
            self._pending_since = None
        elif self._pending_since is None:
            self._pending_since = time.monotonic()
        return done

    def _run(self) -> None:
        delay = FIRST_RETRY
        while not self._stop.is_set():
            woken = self._wake.wait(IDLE_POLL if self._pending_since is None else delay)
            self._wake.clear()
            if self._stop.is_set():
                return
            with self._lock:
                done = self._attempt()
            delay = FIRST_RETRY if done or woken else min(delay * 2, LAST_RETRY)
