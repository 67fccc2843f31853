"""Cell verification in worker processes, so a batch uses every core.

ML-DSA-65 verification (``cryptography``'s OpenSSL binding) holds the GIL for its whole
~0.2 ms, so threads verified a batch one cell at a time whatever the number of cores;
docs/benchmarks.md (area `server`) measured it.  A push of at least ``MIN_BATCH`` cells is
cut into parts that run ``check_cell`` -- the very same checks, in the same order -- in a
pool of processes; smaller pushes, and every push when the pool is off
(``OWNMEM_VERIFY_PROCESSES=0``) or cannot run, are checked in a thread as before.  A
worker returns only (cellId, cellNonce) per cell; the server builds what it stores from
the bytes it received itself.  Nothing is stored unless every part passed, and a refusal
names the first failing item, exactly as in one thread.

The workers are spawned (never forked from a process with threads) when the server starts,
so the first large push does not wait for them; they ignore Ctrl-C (the server's shutdown
ends them) and exit by themselves if the server process dies.
"""
from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from starlette.concurrency import run_in_threadpool

from ownmem.saihm.receipt import parse_receipt
from server.storage.base import LogEntry, PushCell
from server.verify import HolderKey, Refused, check_cell, check_receipt

MIN_BATCH = 8               # cells; below this, inter-process overhead outweighs a second core
MAX_BREAKS = 3              # pools that broke before verification stays in-process for good
_log = logging.getLogger("ownmem.server")

# ---------------------------------------------------------------- in the worker processes

_holders: dict[tuple[bytes, bytes], HolderKey] = {}


def _watch_parent(parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="ownmem-verify-watch", daemon=True).start()


def _holder(holder_pub: bytes, holder_id: bytes) -> HolderKey:
    h = _holders.get((holder_pub, holder_id))
    if h is None:
        if len(_holders) >= 64:
            _holders.clear()
        h = _holders[(holder_pub, holder_id)] = HolderKey(holder_pub, holder_id)
    return h


def _check_part(items: list[list[bytes]], holder_pub: bytes, holder_id: bytes
                ) -> list[tuple[bytes, bytes]] | tuple[int, str, str]:
    """(cellId, cellNonce) per item, or (index of the first refused item, code, message)."""
    h = _holder(holder_pub, holder_id)
    out = []
    for i, (c, d) in enumerate(items):
        try:
            pc = check_cell(c, d, h)
        except Refused as e:
            return (i, e.code, str(e))
        out.append((pc.cell_id, pc.object_id))
    return out


def _check_receipts_part(items: list[tuple[bytes, str]], holder_pub: bytes, holder_id: bytes
                         ) -> tuple[int, str, str] | None:
    """None when every (receipt, operation) passes ``check_receipt``, else the first refusal."""
    h = _holder(holder_pub, holder_id)
    for i, (raw, op) in enumerate(items):
        try:
            check_receipt(raw, h, holder_pub, op)
        except Refused as e:
            return (i, e.code, str(e))
    return None


# ---------------------------------------------------------------- in the server

def _ready() -> None:
    """A no-op: submitting it makes the pool start its workers."""


def check_items(items: list[list[bytes]], holder: HolderKey) -> list[PushCell] | tuple[int, Refused]:
    """In this thread: every item checked in order; stops at the first refusal."""
    out = []
    for i, (c, d) in enumerate(items):
        try:
            out.append(check_cell(c, d, holder))
        except Refused as e:
            return (i, e)
    return out


def check_receipts_here(items: list[tuple[bytes, str]], holder: HolderKey, holder_pub: bytes
                        ) -> list[LogEntry] | tuple[int, Refused]:
    """In this thread: every (receipt, operation) checked in order; stops at the first refusal."""
    out = []
    for i, (raw, op) in enumerate(items):
        try:
            out.append(check_receipt(raw, holder, holder_pub, op)[1])
        except Refused as e:
            return (i, e)
    return out


def _entry(raw: bytes) -> LogEntry:
    """The log entry of a receipt a worker checked in full (same bytes): parsing only."""
    r = parse_receipt(raw)
    return LogEntry(r.receipt_id, r.subject_id, r.operation, r.holder_id, r.timestamp, raw)


def default_processes() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class VerifyPool:
    def __init__(self, processes: int) -> None:
        self.processes = max(0, processes)
        self._pool: ProcessPoolExecutor | None = None
        self._disabled = self.processes < 2
        self._breaks = 0
        self._lock = threading.Lock()

    def _get(self) -> ProcessPoolExecutor | None:
        if self._disabled:
            return None
        with self._lock:
            if self._pool is None:
                try:
                    self._pool = ProcessPoolExecutor(self.processes, mp_context=multiprocessing.get_context("spawn"),
                                                     initializer=_watch_parent, initargs=(os.getpid(),))
                except (OSError, ImportError, NotImplementedError) as e:   # no process support here
                    _log.warning("cell verification stays in-process: %s", e)
                    self._disabled = True
            return self._pool

    def _reset(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
                self._breaks += 1
                self._disabled = self._disabled or self._breaks >= MAX_BREAKS
        pool.shutdown(wait=False, cancel_futures=True)

    def _disable(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            self._disabled = True
            if self._pool is pool:
                self._pool = None
        pool.shutdown(wait=False, cancel_futures=True)

    def start(self) -> None:
        """Start the workers now, in the background (they import for a moment)."""
        pool = self._get()
        if pool is not None:
            try:
                for _ in range(self.processes):   # each submit that finds no idle worker starts one
                    pool.submit(_ready)
            except Exception as e:  # noqa: BLE001 - no workers here: threads it is
                _log.warning("cell verification stays in-process: the pool cannot start (%s)", e)
                self._disable(pool)

    def close(self) -> None:
        with self._lock:
            pool, self._pool, self._disabled = self._pool, None, True
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    async def _in_parts(self, fn: Callable[..., Any], items: Sequence[Any], holder: HolderKey, holder_pub: bytes
                        ) -> list[tuple[int, Sequence[Any], Any]] | None:
        """``fn(part, holder_pub, holder_id)`` over parts of ``items`` in the pool -> (offset, part,
        result) per part; None when the pool is off, too small a batch, or broke (then the
        caller checks in a thread)."""
        pool = self._get() if len(items) >= MIN_BATCH else None
        if pool is None:
            return None
        # more parts than workers (each of MIN_BATCH or more): a worker slowed by other load on its
        # core then takes fewer parts instead of holding up the whole batch
        n = max(1, min(4 * self.processes, len(items) // MIN_BATCH))
        size = -(-len(items) // n)
        bounds = [(lo, items[lo:lo + size]) for lo in range(0, len(items), size)]
        loop = asyncio.get_running_loop()
        try:
            futures = [loop.run_in_executor(pool, fn, list(part), holder_pub, holder.holder_id) for _, part in bounds]
        except BrokenProcessPool:   # it broke since the last batch: a new pool next time
            _log.warning("verification pool broke; checking this batch in-process")
            self._reset(pool)
            return None
        except Exception as e:  # noqa: BLE001 - the pool cannot start workers here: threads from now on
            _log.warning("verification stays in-process: the pool cannot start (%s)", e)
            self._disable(pool)
            return None
        try:
            results = await asyncio.gather(*futures)
        except BrokenProcessPool:   # a worker died (killed, out of memory): a new pool next time
            _log.warning("verification pool broke; checking this batch in-process")
            self._reset(pool)
            return None
        return [(lo, part, res) for (lo, part), res in zip(bounds, results, strict=False)]

    async def check(self, items: list[list[bytes]], holder: HolderKey, holder_pub: bytes
                    ) -> list[PushCell] | tuple[int, Refused]:
        """Every item checked; -> the cells to store, or (index of the first refused item, why)."""
        parts = await self._in_parts(_check_part, items, holder, holder_pub)
        if parts is None:
            return await run_in_threadpool(check_items, items, holder)
        cells: list[PushCell] = []
        for lo, part, res in parts:
            if isinstance(res, tuple):
                i, code, message = res
                return (lo + i, Refused(code, message))
            cells.extend(PushCell(cid, oid, c, d) for (cid, oid), (c, d) in zip(res, part, strict=False))
        return cells

    async def check_receipts(self, items: list[tuple[bytes, str]], holder: HolderKey, holder_pub: bytes
                             ) -> list[LogEntry] | tuple[int, Refused]:
        """Every (receipt, expected operation) checked as ``verify.check_receipt`` does, the
        ML-DSA-65 verifications spread over the pool like a push's -> the log entries, or (index
        of the first refused receipt, why)."""
        parts = await self._in_parts(_check_receipts_part, items, holder, holder_pub)
        if parts is None:
            return await run_in_threadpool(check_receipts_here, items, holder, holder_pub)
        for lo, _, res in parts:
            if res is not None:
                i, code, message = res
                return (lo + i, Refused(code, message))
        return [_entry(raw) for raw, _ in items]
