"""The UOMP audit log (UOMP draft-00 "Audit and Logging": "Audit Log Entry", "Required
Fields", "Storage").

    entry (the "Audit Log Entry" fields) --JSON--> AES-256-GCM under the purpose key
      "ownmem/v1/audit", nonce random 12 bytes, AAD = id | timestamp | session_id
    --> audit.journal (0600, O_DSYNC): appended, one synchronous write per batch, before the answer
    --> audit.db (SQLite, 0600) in the background, apart from the memory store

Durable before the answer, cheaply: ``record`` queues the entry and waits; one writer thread
takes everything queued, appends it to the journal in one synchronous write (O_DSYNC, or
write + fdatasync; group commit: concurrent requests share it) and only then releases the
waiters.  The journal is a preallocated file (rewriting blocks that exist changes no metadata,
so the sync is one data flush, ~1/3 of an SQLite WAL commit here), which the same thread ingests into audit.db every
INGEST_INTERVAL (one synchronous=FULL transaction), and then resets: the journal only ever holds
entries audit.db does not have yet.  Every read (entries, after, last_rowid, prune) ingests first.

    journal  = header record*
    header   = "OMAJ" u32 version=1 u64 generation           (16 bytes, little-endian)
    record   = u32 len  u32 crc32(generation | payload)  payload[len]
    payload  = u16 n id[n]  i64 ts  u16 n session_id[n]  nonce[12]  ct   (as audit.db's columns)

A reset writes generation+1 into the header, so the older records still in the file no longer
check; on open, records are read up to the first that does not (a zero length, a bad crc, a
short tail: the torn write of a batch that was never acknowledged) and ingested (INSERT OR
IGNORE: an entry ingested just before a crash is not doubled).  The crc only finds the tail;
the entries' authenticity is the AEAD's, checked whenever one is opened.

``timestamp`` and ``session_id`` stay in clear for the index and pruning; the rest (agent,
action, key, tags, verdict, reason) is sealed, and the AAD binds the clear columns, so an
entry moved to another session or time fails to open.  Retention: ``prune(before)`` (default
90 days).  ``group=False`` is the uomp-core MVP's discipline, one fdatasync per entry and no
group commit: the bench's anchor, never a default.
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import os
import secrets
import sqlite3
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ownmem.agent.sessions import _private_file
from ownmem.errors import AuthenticationFailed, StoreError
from ownmem.purposes import Purpose
from ownmem.uomp.tokens import iso

AUDIT_INFO = Purpose.AUDIT
DB_NAME = "audit.db"
JOURNAL_NAME = "audit.journal"
JOURNAL_SIZE = 4 << 20     # bytes preallocated (zeros written once): many ingests' worth
INGEST_INTERVAL = 0.2      # s an entry stays in the journal alone, at most, while the log is busy
INGEST_ENTRIES = 2048      # or this many entries
_log = logging.getLogger("ownmem.uomp")
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
        d = asdict(self)
        d["timestamp"] = iso(self.timestamp)
        d["tags"] = list(self.tags)
        return d


_FIELDS = tuple(f.name for f in fields(AuditEntry))
# characters of any one string an entry keeps (key, tag, reason, ids, each tag): the API refuses
# longer keys, tags and fields before auditing (api.too_long); this bounds what any other writer
# records (issue 19: one request put a 60,000-character key into the audit)
MAX_AUDITED = 1024
_CUT = "…[cut]"


def _cut(s: str) -> str:
    return s if len(s) <= MAX_AUDITED else s[:MAX_AUDITED - len(_CUT)] + _CUT


def bounded(e: AuditEntry) -> AuditEntry:
    """``e`` with every string at most MAX_AUDITED characters (the same entry when they are)."""
    strs = (e.key or "", e.tag or "", e.reason, e.session_id, e.agent_id, e.action, *e.tags)
    if all(len(x) <= MAX_AUDITED for x in strs):
        return e
    return replace(e, key=None if e.key is None else _cut(e.key), tag=None if e.tag is None else _cut(e.tag),
                   reason=_cut(e.reason), session_id=_cut(e.session_id), agent_id=_cut(e.agent_id),
                   action=_cut(e.action), tags=tuple(_cut(t) for t in e.tags))


def new_id() -> str:
    return "log_" + secrets.token_urlsafe(12)


def _aad(i: str, ts: int, sid: str) -> bytes:
    return f"{i}|{ts}|{sid}".encode()


Row = tuple[str, int, str, bytes, bytes]       # id, ts, session_id, nonce, ct: audit.db's columns
_HEAD = struct.Struct("<4sIQ")
_REC = struct.Struct("<II")
_MAGIC = b"OMAJ"
_fdatasync = getattr(os, "fdatasync", os.fsync)   # macOS has no fdatasync
# the journal is opened O_DSYNC where there is one: each write returns once its data is durable
# (on Linux, a data sync of the range written), the guarantee of write + fdatasync in one system
# call; measured here, 20-30 % more key reads per second than write + fdatasync
# (docs/decisions.md, UOMP "18.3 Storage")
_DSYNC = getattr(os, "O_DSYNC", 0)


def _encode(row: Row) -> bytes:
    i, ts, sid, nonce, ct = row
    bi, bs = i.encode(), sid.encode()
    return b"".join((struct.pack("<H", len(bi)), bi, struct.pack("<qH", ts, len(bs)), bs, nonce, ct))


def _decode(p: bytes) -> Row:
    (n,) = struct.unpack_from("<H", p, 0)
    i = p[2:2 + n].decode()
    ts, m = struct.unpack_from("<qH", p, 2 + n)
    o = 2 + n + 10
    sid = p[o:o + m].decode()
    o += m
    return i, ts, sid, p[o:o + 12], p[o + 12:]


def _generation(fd: int) -> int:
    head = os.pread(fd, _HEAD.size, 0)
    magic, version, gen = _HEAD.unpack(head) if len(head) == _HEAD.size else (b"", 0, 0)
    # a header that does not parse was never followed by an acknowledged record (the header is
    # written once per reset, and a reset waits for the ingest)
    return int(gen) if magic == _MAGIC and version == 1 else 0


def _scan(fd: int, gen: int, size: int) -> tuple[list[Row], int]:
    """The records of generation ``gen`` from the start, up to the first that does not check
    (a torn or voided one), and the offset where that one starts."""
    out: list[Row] = []
    g = struct.pack("<Q", gen)
    off = _HEAD.size
    while off + _REC.size <= size:
        n, crc = _REC.unpack(os.pread(fd, _REC.size, off))
        if n == 0 or off + _REC.size + n > size:
            break
        p = os.pread(fd, n, off + _REC.size)
        if len(p) != n or zlib.crc32(g + p) != crc:
            break
        try:
            out.append(_decode(p))
        except (struct.error, UnicodeDecodeError):
            break
        off += _REC.size + n
    return out, off


class Journal:
    """audit.journal: the batches on disk before their answers (see the module docstring).
    Not thread-safe: the AuditLog's lock holds it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if not path.exists() or path.stat().st_size < _HEAD.size:
            self._create()
        self.fd = os.open(path, os.O_RDWR | _DSYNC)
        os.chmod(path, 0o600)
        self.gen = _generation(self.fd)     # 0 where the header does not parse: start over
        self.size = os.fstat(self.fd).st_size
        self.end = _HEAD.size

    def _create(self) -> None:
        tmp = self.path.with_name(self.path.name + ".new")
        fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
        try:
            os.write(fd, _HEAD.pack(_MAGIC, 1, 1) + bytes(JOURNAL_SIZE - _HEAD.size))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        _sync_dir(self.path.parent)

    def records(self) -> list[Row]:
        """The records of this generation, up to the first that does not check."""
        out, self.end = _scan(self.fd, self.gen, self.size)
        return out

    def frame(self, rows: list[Row]) -> bytes:
        g = struct.pack("<Q", self.gen)
        parts: list[bytes] = []
        for r in rows:
            p = _encode(r)
            parts += (_REC.pack(len(p), zlib.crc32(g + p)), p)
        return b"".join(parts)

    def append(self, data: bytes) -> None:
        """One write and one fdatasync for the whole batch (``frame``d in this generation); the
        caller resets a journal that holds too much first."""
        if not self.fits(len(data)):
            # larger than the preallocated file (huge entries): grow it, which changes its size,
            # so the one sync is a full fsync
            grow = max(JOURNAL_SIZE, self.end + len(data) + _REC.size - self.size)
            os.pwrite(self.fd, bytes(grow), self.size)
            self.size += grow
            os.pwrite(self.fd, data, self.end)
            os.fsync(self.fd)
        else:
            os.pwrite(self.fd, data, self.end)        # durable on return with O_DSYNC
            if not _DSYNC:
                _fdatasync(self.fd)
        self.end += len(data)

    def fits(self, nbytes: int) -> bool:
        return self.end + nbytes + _REC.size <= self.size

    def reset(self) -> None:
        """Everything it held is in audit.db (durably): a new generation voids the old records."""
        self.gen += 1
        os.pwrite(self.fd, _HEAD.pack(_MAGIC, 1, self.gen), 0)
        if not _DSYNC:
            _fdatasync(self.fd)
        self.end = _HEAD.size

    def close(self) -> None:
        os.close(self.fd)


def _sync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _open_row(aead: AESGCM, row: Row) -> AuditEntry:
    i, ts, sid, nonce, ct = row
    try:
        d = json.loads(aead.decrypt(nonce, ct, _aad(i, ts, sid)).decode())
    except Exception:   # noqa: BLE001 - cryptography's InvalidTag and a bad body alike
        raise AuthenticationFailed("audit entry tampered with") from None
    d["tags"] = tuple(d["tags"])
    return AuditEntry(**d)


def _newest(session_id: str | None, limit: int) -> tuple[str, tuple[Any, ...]]:
    """audit.db's query for the newest ``limit`` entries (of one session): newest first."""
    q = "SELECT id, ts, session_id, nonce, ct FROM audit"
    args: tuple[Any, ...] = ()
    if session_id is not None:
        q, args = q + " WHERE session_id = ?", (session_id,)
    return q + " ORDER BY ts DESC, rowid DESC LIMIT ?", args + (limit,)


def read_on_disk(folder: Path, key: bytes, session_id: str | None = None, limit: int = 1000) -> list[AuditEntry]:
    """The log as the disk holds it, newest first (as AuditLog.entries), for a process that must
    not write under the service (``ownmem agent audit`` while the service does not answer: it
    may have died, or run on another port): audit.db read only, and the journal's records that
    audit.db does not hold yet, which a service killed before its ingest leaves there.  Opens
    nothing for writing; a record torn mid-write ends the journal's part, as at recovery."""
    seq: list[Row] = []              # oldest first, as written
    db_path = Path(folder) / DB_NAME
    if db_path.exists():
        try:
            con = sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True)
            try:
                got = con.execute(*_newest(session_id, limit)).fetchall()
            finally:
                con.close()
        except sqlite3.Error as e:
            raise StoreError(f"the audit log cannot be read: {e}") from None
        seq = [(r[0], int(r[1]), r[2], bytes(r[3]), bytes(r[4])) for r in reversed(got)]
    try:
        fd = os.open(Path(folder) / JOURNAL_NAME, os.O_RDONLY)
    except FileNotFoundError:
        fd = -1
    except OSError as e:
        raise StoreError(f"the audit journal cannot be read: {e}") from None
    if fd >= 0:
        try:
            journaled, _ = _scan(fd, _generation(fd), os.fstat(fd).st_size)
        finally:
            os.close(fd)
        seen = {r[0] for r in seq}      # ingested, and the journal not reset yet
        seq += [r for r in journaled if r[0] not in seen and (session_id is None or r[2] == session_id)]
    # newest first: by time, and at the same second the one written last first (a stable sort)
    newest = sorted(reversed(seq), key=lambda r: -r[1])
    aead = AESGCM(key)
    return [_open_row(aead, r) for r in newest[:limit]]


class AuditLog:
    def __init__(self, folder: Path, key: bytes, *, group: bool = True) -> None:
        path = Path(folder) / DB_NAME
        _private_file(path)
        self._aead = AESGCM(key)
        self._group = group
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
        self._lock = threading.Lock()          # the connection and the journal
        try:
            self._journal = Journal(Path(folder) / JOURNAL_NAME)
        except OSError as e:
            raise StoreError(f"the audit journal cannot be opened: {e}") from None
        self._pending: list[Row] = self._journal.records()   # left by a crash: ingested now
        self._refused = False                  # the last ingest failed
        self._ingested_at = time.monotonic()
        with self._lock:
            self._ingest()
        self._cond = threading.Condition()
        self._queue: list[tuple[AuditEntry, Callable[[BaseException | None], None]]] = []
        self._stopping = False
        self._inflight = 0                     # requests inside coming() that have not submitted yet
        self.batches = 0                       # journal writes (group commit, for tests)
        # told the entries each commit put on disk (audit_sync.AuditSync.committed)
        self.on_commit: Callable[[list[AuditEntry]], None] = lambda entries: None
        self._writer = threading.Thread(target=self._run, name="ownmem-uomp-audit", daemon=True)
        self._writer.start()

    def _seal(self, e: AuditEntry) -> Row:
        nonce = os.urandom(12)
        # the fields by name, as asdict would give them (asdict deep-copies: 10x the time)
        body = json.dumps({f: getattr(e, f) for f in _FIELDS}, separators=(",", ":")).encode()
        return e.id, e.timestamp, e.session_id, nonce, self._aead.encrypt(nonce, body, _aad(e.id, e.timestamp,
                                                                                            e.session_id))

    def _ingest(self) -> None:
        """Under the lock: the journal's entries into audit.db (one durable transaction), then
        the journal reset.  A failure leaves both as they were (the entries stay journaled)."""
        if not self._pending:
            return
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("INSERT OR IGNORE INTO audit (id, ts, session_id, nonce, ct) VALUES (?, ?, ?, ?, ?)",
                                 self._pending)
            self._db.execute("COMMIT")
        except sqlite3.Error as e:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            self._refused = True
            self._ingested_at = time.monotonic()     # tried again in INGEST_INTERVAL, not in a spin
            raise StoreError(f"the audit log failed: {e}") from None
        self._refused = False
        try:
            self._journal.reset()
        except OSError as e:
            raise StoreError(f"the audit journal failed: {e}") from None
        self._pending = []
        self._ingested_at = time.monotonic()

    def _take(self) -> list[tuple[AuditEntry, Callable[[BaseException | None], None]]] | None:
        """The next batch, or None when closing with nothing left; ingests while idle."""
        with self._cond:
            while not self._queue and not self._stopping:
                if self._pending:
                    left = INGEST_INTERVAL - (time.monotonic() - self._ingested_at)
                    if left <= 0:
                        return []          # idle with entries to ingest
                    self._cond.wait(left)
                else:
                    self._cond.wait()
            if not self._queue and self._stopping:
                return None
            if not self._group:
                batch, self._queue = self._queue[:1], self._queue[1:]
                return batch
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
            return batch

    def _commit(self, entries: list[AuditEntry]) -> bool:
        """``entries`` on disk (the one synchronous write of the batch) -> whether an ingest is due."""
        rows = [self._seal(e) for e in entries]
        with self._lock:
            if self._refused:
                # audit.db refused the journal's entries (a full or failing disk): fail
                # closed, no more answers, until it takes them
                self._ingest()
            if rows:
                data = self._journal.frame(rows)
                if self._pending and not self._journal.fits(len(data)):
                    self._ingest()
                    data = self._journal.frame(rows)    # in the new generation
                self._journal.append(data)              # the one synchronous write of the batch
                self._pending += rows
                self.batches += 1
            due = bool(self._pending) and (len(self._pending) >= INGEST_ENTRIES
                                           or time.monotonic() - self._ingested_at >= INGEST_INTERVAL)
        if entries:
            self.on_commit(entries)
        return due

    def _run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                break
            err: BaseException | None = None
            try:
                ingest = self._commit([e for e, _ in batch])
            except OSError as e:
                err = StoreError(f"the audit journal failed: {e}")
                ingest = False
            except StoreError as e:
                err, ingest = e, False
            for _, done in batch:
                done(err)
            if ingest:
                # after the answers: the batch's waiters do not wait for audit.db
                try:
                    with self._lock:
                        self._ingest()
                except StoreError as e:
                    _log.warning("%s (the entries stay in the journal)", e)
        with self._lock:
            try:
                self._ingest()
            except StoreError as e:
                _log.warning("%s (the entries stay in the journal)", e)

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
            self._queue.append((bounded(e), done))
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
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def done(err: BaseException | None) -> None:
            def settle() -> None:
                if not fut.done():
                    fut.set_exception(err) if err is not None else fut.set_result(None)
            loop.call_soon_threadsafe(settle)
        self.submit(e, done)
        await fut

    def _read(self, q: str, args: tuple[Any, ...]) -> list[Any]:
        with self._lock:
            self._ingest()                    # what the journal holds is part of the log
            return self._db.execute(q, args).fetchall()

    def entries(self, session_id: str | None = None, limit: int = 1000) -> list[AuditEntry]:
        return [self._open(*row) for row in self._read(*_newest(session_id, limit))]

    def _open(self, i: str, ts: int, sid: str, nonce: bytes, ct: bytes) -> AuditEntry:
        return _open_row(self._aead, (i, ts, sid, nonce, ct))

    def after(self, rowid: int, limit: int,
              known: Mapping[str, AuditEntry] | None = None) -> list[tuple[int, AuditEntry]]:
        """The entries written after row ``rowid``, oldest first, with their rows (audit_sync's
        cursor); those in ``known`` (by id: what this process committed) are not opened again."""
        rows = self._read("SELECT rowid, id, ts, session_id, nonce, ct FROM audit WHERE rowid > ? "
                          "ORDER BY rowid LIMIT ?", (rowid, limit))
        known = known or {}
        out = []
        for r in rows:
            e = known.get(r[1])
            out.append((r[0], e if e is not None and (e.timestamp, e.session_id) == (r[2], r[3])
                        else self._open(*r[1:])))
        return out

    def last_rowid(self) -> int:
        return int(self._read("SELECT coalesce(max(rowid), 0) FROM audit", ())[0][0])

    def count(self, session_id: str, actions: tuple[str, ...]) -> int:
        return sum(1 for e in self.entries(session_id, limit=1_000_000) if e.action in actions)

    def span(self, before: int) -> tuple[int, int | None, int | None]:
        """(count, oldest, newest time) of the entries older than ``before``: what prune would drop."""
        n, lo, hi = self._read("SELECT count(*), min(ts), max(ts) FROM audit WHERE ts < ?", (before,))[0]
        return int(n), lo, hi

    def prune(self, before: int) -> int:
        """Drop the entries older than ``before``: the decision (retention.prune_cutoff) and the
        deletion's own entry are the caller's (AuditSync.prune, the CLI without the service)."""
        with self._lock:
            self._ingest()
            cur = self._db.execute("DELETE FROM audit WHERE ts < ?", (before,))
            return cur.rowcount

    def close(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._writer.join(timeout=10)
        with self._lock:
            self._db.close()
            self._journal.close()
