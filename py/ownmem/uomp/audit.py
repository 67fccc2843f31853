"""The UOMP audit log (UOMP draft-00 "Audit and Logging": "Audit Log Entry", "Required
Fields", "Storage").

    entry (the "Audit Log Entry" fields) --JSON--> AES-256-GCM under the purpose key
      "ownmem/v1/audit", nonce random 12 bytes, AAD = id | timestamp | session_id
    --> audit.db in the vault folder (0600), apart from the memory store

Durable before the answer, cheaply: ``record`` queues the entry and waits; one writer thread
takes everything queued, writes it in one transaction (synchronous=FULL, so one fsync for the
whole batch: group commit) and only then releases the waiters.  Concurrent requests share an
fsync instead of paying one each.  Retention: ``prune(before)`` (default 90 days).
``timestamp`` and ``session_id`` stay in clear for the index and pruning; the rest (agent,
action, key, tags, verdict, reason) is sealed, and the AAD binds the clear columns, so an
entry moved to another session or time fails to open.
"""
from __future__ import annotations

import contextlib
import contextvars
import json
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..errors import AuthenticationFailed, StoreError
from .sessions import _private_file

AUDIT_INFO = b"ownmem/v1/audit"
DB_NAME = "audit.db"
RETENTION_DAYS = 90
COMMIT_DELAY = 0.0005      # s a batch waits at most for entries of requests already on their way
# the owed-entry flag of the request (asyncio task) inside AuditLog.coming, if any
_COMING: contextvars.ContextVar[list[bool] | None] = contextvars.ContextVar("uomp_audit_coming", default=None)


@dataclass(frozen=True, slots=True)
class AuditEntry:
    id: str
    timestamp: int
    session_id: str
    agent_id: str
    action: str                 # read | aggregate | query | write | deletion_proof | deletion_proof_missing | ...
    key: str | None
    tag: str | None
    tags: tuple[str, ...]
    allowed: bool
    reason: str
    request_size: int = 0
    response_size: int = 0
    query_count_remaining: int | None = None

    def to_json(self) -> dict[str, Any]:
        from .tokens import iso

        d = asdict(self)
        d["timestamp"] = iso(self.timestamp)
        d["tags"] = list(self.tags)
        return d


_FIELDS = tuple(f.name for f in fields(AuditEntry))


def new_id() -> str:
    return "log_" + secrets.token_urlsafe(12)


def _aad(i: str, ts: int, sid: str) -> bytes:
    return f"{i}|{ts}|{sid}".encode()


class AuditLog:
    def __init__(self, folder: Path, key: bytes) -> None:
        path = Path(folder) / DB_NAME
        _private_file(path)
        self._aead = AESGCM(key)
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("CREATE TABLE IF NOT EXISTS audit (id TEXT PRIMARY KEY, ts INTEGER NOT NULL, "
                             "session_id TEXT NOT NULL, nonce BLOB NOT NULL, ct BLOB NOT NULL)")
            self._db.execute("CREATE INDEX IF NOT EXISTS audit_session ON audit (session_id, ts)")
            self._db.execute("CREATE INDEX IF NOT EXISTS audit_ts ON audit (ts)")
        except sqlite3.Error as e:
            raise StoreError(f"the audit log cannot be opened: {e}") from None
        self._lock = threading.Lock()          # the connection
        self._cond = threading.Condition()
        self._queue: list[tuple[AuditEntry, Callable[[BaseException | None], None]]] = []
        self._stopping = False
        self._inflight = 0                     # requests inside coming() that have not submitted yet
        self.batches = 0                       # transactions committed (group commit, for tests)
        # told how many entries each commit put on disk (audit_sync.AuditSync.committed)
        self.on_commit: Callable[[int], None] = lambda n: None
        self._writer = threading.Thread(target=self._run, name="ownmem-uomp-audit", daemon=True)
        self._writer.start()

    def _seal(self, e: AuditEntry) -> tuple[str, int, str, bytes, bytes]:
        nonce = os.urandom(12)
        # the fields by name, as asdict would give them (asdict deep-copies: 10x the time)
        body = json.dumps({f: getattr(e, f) for f in _FIELDS}, separators=(",", ":")).encode()
        return e.id, e.timestamp, e.session_id, nonce, self._aead.encrypt(nonce, body, _aad(e.id, e.timestamp,
                                                                                            e.session_id))

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue and self._stopping:
                    return
                # entries already on their way (requests past the Guard's checks, see coming)
                # share this batch's fsync if they come within COMMIT_DELAY: with few
                # connections and a slow disk, each fsync would otherwise carry one entry
                deadline = time.monotonic() + COMMIT_DELAY
                while self._inflight > 0 and not self._stopping:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                batch, self._queue = self._queue, []
            err: BaseException | None = None
            try:
                rows = [self._seal(e) for e, _ in batch]
                with self._lock:
                    self._db.execute("BEGIN IMMEDIATE")
                    self._db.executemany("INSERT INTO audit (id, ts, session_id, nonce, ct) VALUES (?, ?, ?, ?, ?)",
                                         rows)
                    self._db.execute("COMMIT")          # the one fsync of the batch
                    self.batches += 1
                self.on_commit(len(rows))
            except sqlite3.Error as e:
                err = StoreError(f"the audit log failed: {e}")
                with self._lock:
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
            for _, done in batch:
                done(err)

    @contextlib.contextmanager
    def coming(self) -> Iterator[None]:
        """Around a request that will record one entry: until it submits it (or leaves
        without), a batch being formed may wait for it (COMMIT_DELAY at most)."""
        owed = [True]
        with self._cond:
            self._inflight += 1
        reset = _COMING.set(owed)
        try:
            yield
        finally:
            _COMING.reset(reset)
            if owed[0]:
                with self._cond:
                    self._inflight -= 1
                    self._cond.notify()

    def submit(self, e: AuditEntry, done: Callable[[BaseException | None], None]) -> None:
        owed = _COMING.get()
        with self._cond:
            if owed is not None and owed[0]:
                owed[0] = False
                self._inflight -= 1
            if self._stopping:
                done(StoreError("the audit log is closed"))
                return
            self._queue.append((e, done))
            self._cond.notify()

    def record(self, e: AuditEntry) -> None:
        """Blocking: returns once ``e`` is on disk (raises StoreError if it could not be)."""
        ev = threading.Event()
        box: list[BaseException | None] = [None]

        def done(err: BaseException | None) -> None:
            box[0] = err
            ev.set()
        self.submit(e, done)
        ev.wait()
        if box[0] is not None:
            raise box[0]

    async def arecord(self, e: AuditEntry) -> None:
        """The same from the event loop, without holding a thread while the batch commits."""
        import asyncio

        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def done(err: BaseException | None) -> None:
            def settle() -> None:
                if not fut.done():
                    fut.set_exception(err) if err is not None else fut.set_result(None)
            loop.call_soon_threadsafe(settle)
        self.submit(e, done)
        await fut

    def entries(self, session_id: str | None = None, limit: int = 1000) -> list[AuditEntry]:
        q = "SELECT id, ts, session_id, nonce, ct FROM audit"
        args: tuple[Any, ...] = ()
        if session_id is not None:
            q += " WHERE session_id = ?"
            args = (session_id,)
        q += " ORDER BY ts DESC, rowid DESC LIMIT ?"
        with self._lock:
            rows = self._db.execute(q, args + (limit,)).fetchall()
        return [self._open(*row) for row in rows]

    def _open(self, i: str, ts: int, sid: str, nonce: bytes, ct: bytes) -> AuditEntry:
        try:
            d = json.loads(self._aead.decrypt(nonce, ct, _aad(i, ts, sid)))
        except Exception:   # noqa: BLE001 - cryptography's InvalidTag and a bad body alike
            raise AuthenticationFailed("audit entry tampered with") from None
        d["tags"] = tuple(d["tags"])
        return AuditEntry(**d)

    def after(self, rowid: int, limit: int) -> list[tuple[int, AuditEntry]]:
        """The entries written after row ``rowid``, oldest first, with their rows (audit_sync's cursor)."""
        with self._lock:
            rows = self._db.execute("SELECT rowid, id, ts, session_id, nonce, ct FROM audit WHERE rowid > ? "
                                    "ORDER BY rowid LIMIT ?", (rowid, limit)).fetchall()
        return [(r[0], self._open(*r[1:])) for r in rows]

    def last_rowid(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT coalesce(max(rowid), 0) FROM audit").fetchone()[0])

    def count(self, session_id: str, actions: tuple[str, ...]) -> int:
        return sum(1 for e in self.entries(session_id, limit=1_000_000) if e.action in actions)

    def prune(self, before: int) -> int:
        with self._lock:
            cur = self._db.execute("DELETE FROM audit WHERE ts < ?", (before,))
            return cur.rowcount

    def close(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._writer.join(timeout=10)
        with self._lock:
            self._db.close()
