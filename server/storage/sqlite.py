"""SQLite backend: one file (WAL), one connection per thread, every write one transaction.

``BEGIN IMMEDIATE`` takes SQLite's write lock up front, so a push reads the vault's
last sequence number and writes the next ones without another writer in between;
several server processes may share the file.  ``synchronous=FULL``: a SIGKILL or a
power cut loses at most the transaction in flight, never half of one.

Physical erasure (scrub.py).  ``secure_delete`` zeroes a deleted row in its page, but
the page as it was, wrapped DEK included, stays in the write-ahead log until the log is
checkpointed and truncated, and a reader of the log holds that up.  ``erase`` used to run
``wal_checkpoint(TRUNCATE)`` under the 30 s busy timeout: it held the write lock while it
waited for readers, so every other vault's writers waited with it, and after 30 s it gave
up with the DEK still in ``ownmem.db-wal``.  Now the checkpoint runs on a connection of its
own with no busy timeout (it gives up at once), its result is read (busy, log frames,
checkpointed), and only ``busy == 0 and log == 0`` -- every frame copied into the file,
the log emptied -- clears the vault's ``erase_pending`` rows; until then it is retried.
``temp_store=MEMORY``: no sort or temporary index ever writes cell bytes to a temp file.
"""
from __future__ import annotations

import secrets
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from server.storage import devices as device_store, shares, tree, witness
from server.storage.base import (
    Change,
    ExportSnapshot,
    LogEntry,
    LoggedReceipt,
    PushCell,
    PushResult,
    Registration,
    RekeyKeys,
    StorageBusy,
    StorageConflict,
    StorageLimit,
    VaultRecord,
)
from server.storage.export import COUNT_SQL, PAGE_SQL, ExportSlots, Opened, Row
from server.storage.private import private_file
from server.storage.scrub import Scrubber
from server.storage.sql import Sql, added_bytes, erase_cells, fresh_cells, push_result, rewrap_cells

# An export is refused while an erasure has been held up this long and another export is
# open: on SQLite every open snapshot holds up the checkpoint, so exports that overlap
# without end would keep every vault's erased bytes in the log for ever.
ERASURE_OVERDUE = 60.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS vault_roots (vault_id INTEGER PRIMARY KEY, root_wrap BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS vaults (
  id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, salt BLOB NOT NULL,
  owner_pub BLOB NOT NULL, sync_pub BLOB NOT NULL, ka_pub BLOB NOT NULL, holder_pub BLOB NOT NULL,
  holder_id BLOB NOT NULL, last_seq INTEGER NOT NULL DEFAULT 0, meta_version INTEGER NOT NULL,
  metadata BLOB NOT NULL, metadata_sig BLOB NOT NULL, stored_bytes INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS vaults_owner ON vaults (owner_pub);
CREATE INDEX IF NOT EXISTS vaults_sync ON vaults (sync_pub);
CREATE INDEX IF NOT EXISTS vaults_holder ON vaults (holder_id);
CREATE TABLE IF NOT EXISTS cells (
  vault_id INTEGER NOT NULL, cell_id BLOB NOT NULL, object_id BLOB NOT NULL, seq INTEGER NOT NULL,
  cell BLOB NOT NULL, wrapped_dek BLOB NOT NULL, PRIMARY KEY (vault_id, cell_id));
CREATE INDEX IF NOT EXISTS cells_object_seq ON cells (vault_id, object_id, seq);
DROP INDEX IF EXISTS cells_object;
CREATE TABLE IF NOT EXISTS changes (
  vault_id INTEGER NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, cell_id BLOB,
  PRIMARY KEY (vault_id, seq));
CREATE INDEX IF NOT EXISTS changes_cell ON changes (cell_id);
CREATE TABLE IF NOT EXISTS erased (
  vault_id INTEGER NOT NULL, cell_id BLOB NOT NULL, PRIMARY KEY (vault_id, cell_id));
CREATE TABLE IF NOT EXISTS erasure_list (
  idx INTEGER PRIMARY KEY AUTOINCREMENT, cell_id BLOB NOT NULL, holder_id BLOB NOT NULL, at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS challenges (
  vault_id INTEGER NOT NULL, challenge BLOB NOT NULL PRIMARY KEY, expires_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS challenges_expiry ON challenges (expires_at);
CREATE TABLE IF NOT EXISTS tokens (
  token_hash BLOB PRIMARY KEY, vault_id INTEGER NOT NULL, expires_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS tokens_expiry ON tokens (expires_at);
CREATE TABLE IF NOT EXISTS log (
  idx INTEGER PRIMARY KEY AUTOINCREMENT, receipt_id BLOB NOT NULL UNIQUE, subject_id BLOB NOT NULL,
  operation TEXT NOT NULL, holder_id BLOB NOT NULL, ts INTEGER NOT NULL, receipt BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS log_holder ON log (holder_id, idx);
CREATE INDEX IF NOT EXISTS log_subject ON log (subject_id, idx);
CREATE INDEX IF NOT EXISTS log_operation ON log (operation, idx);
CREATE TABLE IF NOT EXISTS erase_pending (id INTEGER PRIMARY KEY AUTOINCREMENT, vault_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS server_secret (id INTEGER PRIMARY KEY CHECK (id = 1), secret BLOB NOT NULL);
"""
# stored bytes, counted against the quota: a store made before the count has it added and filled in
ADD_STORED_BYTES = "ALTER TABLE vaults ADD COLUMN stored_bytes INTEGER NOT NULL DEFAULT 0"
FILL_STORED_BYTES = ("UPDATE vaults SET stored_bytes = (SELECT coalesce(sum(length(cell) + length(wrapped_dek)), 0) "
                     "FROM cells WHERE cells.vault_id = vaults.id)")
Q = Sql("?")
DELETE_CELL = "DELETE FROM cells WHERE vault_id = ? AND cell_id = ? RETURNING length(cell) + length(wrapped_dek)"


class SqliteStorage:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        private_file(self.path)        # 0600 before SQLite makes it (and its -wal, -shm) 0644
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        c = self._conn()
        c.executescript(SCHEMA + tree.SQLITE_SCHEMA + witness.SQLITE_SCHEMA + shares.SQLITE_SCHEMA
                        + device_store.SQLITE_SCHEMA)
        with self._tx() as c:    # several processes may open one file at once: one of them adds the column
            if "stored_bytes" not in {r[1] for r in c.execute("PRAGMA table_info(vaults)")}:
                c.execute(ADD_STORED_BYTES)
                c.execute(FILL_STORED_BYTES)
            c.execute("INSERT OR IGNORE INTO server_secret VALUES (1, ?)", (secrets.token_bytes(32),))
        with self._tx() as c:
            self._append_tree(c, [(bytes(r[0]), bytes(r[1])) for r in c.execute(tree.UNTREED)])
        self._checkpointer: sqlite3.Connection | None = None
        self._exports = ExportSlots()
        self._scrubber = Scrubber(self._scrub_step, name="ownmem-scrub-sqlite")
        self._scrubber.try_now()     # what a previous process left pending

    def _conn(self) -> sqlite3.Connection:
        c = getattr(self._local, "conn", None)
        if c is None:
            c = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
            # New files only (a no-op once the file has tables): 16 KiB pages hold a ~4 KB cell
            # inline, where 4 KiB pages chained it through overflow pages, which doubled the
            # bytes written per push (docs/benchmarks.md, area `server`).
            c.execute("PRAGMA page_size=16384")
            c.execute("PRAGMA journal_mode=WAL")
            c.execute("PRAGMA synchronous=FULL")
            c.execute("PRAGMA secure_delete=ON")
            c.execute("PRAGMA busy_timeout=30000")
            c.execute("PRAGMA temp_store=MEMORY")
            self._local.conn = c
            with self._lock:
                self._all.append(c)
        return c

    def close(self) -> None:
        self._scrubber.close()
        self._exports.close_all()
        with self._lock:
            for c in self._all:
                c.close()
            self._all.clear()
            if self._checkpointer is not None:
                self._checkpointer.close()
                self._checkpointer = None
        self._local = threading.local()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        c = self._conn()
        c.execute("BEGIN IMMEDIATE")
        try:
            yield c
        except BaseException:
            c.execute("ROLLBACK")
            raise
        c.execute("COMMIT")

    def sharing(self) -> shares.Shares:
        """The sharing tables (shares.py) over this store's write transactions and log."""
        @contextmanager
        def read() -> Iterator[sqlite3.Connection]:
            yield self._conn()      # this thread's connection, autocommit: a consistent statement

        return shares.Shares(self._tx, self._append_log, postgres=False, read=read)

    def devices(self) -> device_store.Devices:
        """A vault's enrolled devices (devices.py) over this store's write transactions."""
        return device_store.Devices(self._tx, "?", postgres=False)

    # ---------------------------------------------------------------- vaults
    def register(self, reg: Registration, *, max_per_key: int | None = None) -> VaultRecord:
        with self._tx() as c:    # the write lock: registrations are counted and made one at a time
            if max_per_key is not None and c.execute(
                    Q.same_keys, (reg.owner_pub, reg.sync_pub, reg.holder_id)).fetchone()[0] >= max_per_key:
                raise StorageLimit(f"a key of this registration is in {max_per_key} vaults already")
            try:
                cur = c.execute(
                    Q.insert_vault,
                    (reg.name, reg.salt, reg.owner_pub, reg.sync_pub, reg.ka_pub, reg.holder_pub, reg.holder_id,
                     reg.metadata, reg.metadata_sig))
            except sqlite3.IntegrityError:
                raise StorageConflict("vault name taken") from None
            self._append_log(c, [reg.key_receipt])
            vid = cur.lastrowid
            if reg.holder_proof:
                c.execute(Q.put_proof, (vid, reg.holder_id, reg.holder_proof))
        rec = self.vault_by_id(int(vid or 0))
        assert rec is not None
        return rec

    def vault(self, name: str) -> VaultRecord | None:
        r = self._conn().execute(Q.vault_by_name, (name,)).fetchone()
        return VaultRecord(*r) if r else None

    def vault_by_id(self, vault_id: int) -> VaultRecord | None:
        r = self._conn().execute(Q.vault_by_id, (vault_id,)).fetchone()
        return VaultRecord(*r) if r else None

    def name_of_owner(self, owner_pub: bytes) -> str | None:
        r = self._conn().execute(Q.name_of_owner, (owner_pub,)).fetchone()
        return str(r[0]) if r else None

    # ---------------------------------------------------------------- auth
    def use_challenge(self, vault_id: int, challenge: bytes, expires_at: float, now: float) -> bool:
        with self._tx() as c:
            c.execute(Q.expire_challenges, (now,))
            n = c.execute("INSERT OR IGNORE INTO challenges VALUES (?,?,?)", (vault_id, challenge, expires_at)).rowcount
        return n == 1

    def add_token(self, token_hash: bytes, vault_id: int, expires_at: float) -> None:
        with self._tx() as c:
            c.execute(Q.expire_tokens, (expires_at - 86400,))
            c.execute(Q.insert_token, (token_hash, vault_id, expires_at))

    def token_vault(self, token_hash: bytes, now: float) -> tuple[int, float] | None:
        r = self._conn().execute(Q.token_vault, (token_hash, now)).fetchone()
        return (int(r[0]), float(r[1])) if r else None

    # ---------------------------------------------------------------- metadata
    def metadata(self, vault_id: int) -> tuple[int, bytes, bytes]:
        r = self._conn().execute(Q.metadata, (vault_id,)).fetchone()
        return int(r[0]), bytes(r[1]), bytes(r[2])

    def cas_metadata(self, vault_id: int, expected: int, metadata: bytes, sig: bytes) -> int:
        with self._tx() as c:
            r = c.execute(Q.cas_metadata, (metadata, sig, vault_id, expected)).fetchone()
            if r is None:
                raise StorageConflict("metadata version is stale")
            c.execute(Q.meta_change, (vault_id, r[0]))
        return expected + 1

    def root_wrap(self, vault_id: int) -> bytes | None:
        r = self._conn().execute(Q.root_wrap, (vault_id,)).fetchone()
        return bytes(r[0]) if r else None

    def rekey(self, vault_id: int, expected: int, keys: RekeyKeys, metadata: bytes, sig: bytes) -> int:
        with self._tx() as c:
            r = c.execute(Q.rekey, (keys.salt, keys.owner_pub, keys.ka_pub, metadata, sig, vault_id,
                                    expected)).fetchone()
            if r is None:
                raise StorageConflict("metadata version is stale")
            c.execute(Q.meta_change, (vault_id, r[0]))
            c.execute(Q.put_root, (vault_id, keys.root_wrap))
            c.execute(Q.renew_proof, (keys.holder_proof, vault_id))
        return expected + 1

    # ---------------------------------------------------------------- cells
    @staticmethod
    def _known(c: sqlite3.Connection, vault_id: int, ids: list[bytes]) -> tuple[set[bytes], set[bytes]]:
        present: set[bytes] = set()
        erased: set[bytes] = set()
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            marks = ",".join("?" * len(chunk))
            present |= {r[0] for r in c.execute(
                f"SELECT cell_id FROM cells WHERE vault_id = ? AND cell_id IN ({marks})", (vault_id, *chunk))}
            erased |= {r[0] for r in c.execute(
                f"SELECT cell_id FROM erased WHERE vault_id = ? AND cell_id IN ({marks})", (vault_id, *chunk))}
        return present, erased

    def known_cells(self, vault_id: int, cell_ids: list[bytes]) -> tuple[set[bytes], set[bytes]]:
        return self._known(self._conn(), vault_id, cell_ids)

    def push(self, vault_id: int, cells: list[PushCell], *, quota: int | None = None) -> PushResult:
        with self._tx() as c:
            present, erased = self._known(c, vault_id, [x.cell_id for x in cells])
            new = fresh_cells(cells, present, erased)
            last, stored = c.execute("SELECT last_seq, stored_bytes FROM vaults WHERE id = ?",
                                     (vault_id,)).fetchone()
            added = added_bytes(new, stored, quota)
            if new:
                c.executemany("INSERT INTO cells VALUES (?,?,?,?,?,?)",
                              [(vault_id, x.cell_id, x.object_id, last + 1 + i, x.cell, x.wrapped_dek)
                               for i, x in enumerate(new)])
                c.executemany("INSERT INTO changes VALUES (?,?,'cell',?)",
                              [(vault_id, last + 1 + i, x.cell_id) for i, x in enumerate(new)])
                last += len(new)
                c.execute(Q.add_cells, (last, added, vault_id))
        return push_result(cells, new, erased, last)

    def rewrap(self, vault_id: int, wraps: list[tuple[bytes, bytes]]) -> tuple[int, int]:
        with self._tx() as c:
            present, _ = self._known(c, vault_id, [cid for cid, _ in wraps])
            if len(present) != len({cid for cid, _ in wraps}):
                raise StorageConflict("a new wrap names a cell this vault does not hold")
            last = int(c.execute(Q.last_seq, (vault_id,)).fetchone()[0])
            replaced, last = rewrap_cells(c, Q, vault_id, last, wraps)
        if replaced:
            self._scrubber.try_now()
        return replaced, last

    def changes(self, vault_id: int, since: int, limit: int) -> tuple[list[Change], int]:
        c = self._conn()
        rows = c.execute(Q.changes, (vault_id, since, limit)).fetchall()
        return [Change(*r) for r in rows], self.last_seq(vault_id)

    def last_seq(self, vault_id: int) -> int:
        r = self._conn().execute(Q.last_seq, (vault_id,)).fetchone()
        return int(r[0]) if r else 0

    def server_secret(self) -> bytes:
        return bytes(self._conn().execute(Q.server_secret).fetchone()[0])

    def foreign_cells(self, vault_id: int, cell_ids: list[bytes]) -> set[bytes]:
        c = self._conn()
        present, erased = self._known(c, vault_id, cell_ids)
        holder = c.execute(Q.holder_of, (vault_id,)).fetchone()[0]
        return {cid for cid in set(cell_ids) - present - erased
                if c.execute(Q.foreign_cell, (cid, holder, cid, holder)).fetchone() is not None}

    def erase(self, vault_id: int, cell_ids: list[bytes], receipts: list[LogEntry], now: int) -> list[bytes]:
        """Withdraw, destroy the wrapped DEK and the cell, list the id, log the FORGET receipt: one transaction."""
        with self._tx() as c:
            holder = c.execute(Q.holder_of, (vault_id,)).fetchone()[0]
            last = c.execute(Q.last_seq, (vault_id,)).fetchone()[0]
            done, _ = erase_cells(c, Q, DELETE_CELL, self._append_log, vault_id, holder, last, cell_ids, receipts,
                                  now)
            if done:
                c.execute(Q.erase_pending, (vault_id,))
        if done:
            self._scrubber.try_now()
        return done

    def erasure_pending(self, vault_id: int) -> bool:
        return self._conn().execute(Q.is_erase_pending, (vault_id,)).fetchone() is not None

    def _scrub_step(self) -> bool:
        """Checkpoint without waiting; on a full one, clear what was pending before it began."""
        if self._checkpointer is None:
            self._checkpointer = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=0)
            self._checkpointer.execute("PRAGMA busy_timeout=0")
        ck = self._checkpointer
        mark = ck.execute("SELECT max(id) FROM erase_pending").fetchone()[0]
        if mark is None:
            return True
        busy, log, _ = ck.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy or log:
            return False     # a reader still uses the log, or a writer held the lock: later
        # A normal write: it may wait for the write lock, but it holds nothing others need.
        with self._tx() as c:
            c.execute("DELETE FROM erase_pending WHERE id <= ?", (mark,))
            left = c.execute("SELECT 1 FROM erase_pending LIMIT 1").fetchone()
        return left is None

    def export_snapshot(self, vault_id: int) -> ExportSnapshot:
        self._scrubber.try_now()
        if self._scrubber.overdue(ERASURE_OVERDUE) and self._exports.open_count():
            raise StorageBusy("an erasure waits for the exports in progress; retry later")
        return self._exports.open(lambda: self._export_begin(vault_id))

    def _export_begin(self, vault_id: int) -> Opened:
        c = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        try:
            c.execute("PRAGMA temp_store=MEMORY")
            c.execute("BEGIN")      # the read transaction starts at the count: every page sees that state
            n = int(c.execute(COUNT_SQL.format(p="?"), (vault_id,)).fetchone()[0])
        except BaseException:
            c.close()
            raise

        def fetch(after: bytes, limit: int) -> list[Row]:
            rows = c.execute(PAGE_SQL.format(p="?"), (vault_id, after, limit)).fetchall()
            return [(bytes(a), bytes(b), bytes(d)) for a, b, d in rows]

        return n, fetch, c.close

    # ---------------------------------------------------------------- public log
    def log_receipts(self, receipts: list[LogEntry]) -> None:
        with self._tx() as c:
            self._append_log(c, receipts)

    @classmethod
    def _append_log(cls, c: sqlite3.Connection, entries: list[LogEntry]) -> None:
        new = []
        for e in entries:
            if c.execute("INSERT OR IGNORE INTO log (receipt_id, subject_id, operation, holder_id, ts, receipt) "
                         "VALUES (?,?,?,?,?,?)",
                         (e.receipt_id, e.subject_id, e.operation, e.holder_id, e.timestamp, e.receipt)).rowcount:
                new.append((e.receipt_id, e.receipt))
        cls._append_tree(c, new)

    @staticmethod
    def _append_tree(c: sqlite3.Connection, receipts: list[tuple[bytes, bytes]]) -> None:
        """The receipts as the next leaves of the Merkle tree; inside the caller's write transaction."""
        if not receipts:
            return
        size = int(c.execute(tree.TREE_SIZE).fetchone()[0])
        c.execute("UPDATE tlog_head SET size = ? WHERE id = 1", (size + len(receipts),))
        leaves, hashes = tree.new_rows(size, receipts, lambda idx: _read_hashes(c, idx))
        c.executemany("INSERT INTO tlog_leaves VALUES (?,?)", leaves)
        c.executemany("INSERT INTO tlog_hashes VALUES (?,?)", hashes)

    # ---------------------------------------------------------------- the log's Merkle tree
    def log_tree_size(self) -> int:
        return int(self._conn().execute(tree.TREE_SIZE).fetchone()[0])

    def read_hashes(self, indexes: Sequence[int]) -> list[bytes]:
        return _read_hashes(self._conn(), indexes)

    def log_leaves(self, start: int, limit: int) -> list[LoggedReceipt]:
        rows = self._conn().execute(Q.log_leaves, (start, limit)).fetchall()
        return [LoggedReceipt(r[0], LogEntry(*r[1:])) for r in rows]

    def log_leaf_index(self, receipt_id: bytes) -> int | None:
        r = self._conn().execute(Q.leaf_index, (receipt_id,)).fetchone()
        return int(r[0]) if r else None

    def log_key(self, candidate: bytes) -> bytes:
        with self._tx() as c:
            c.execute("INSERT OR IGNORE INTO tlog_key VALUES (1, ?)", (candidate,))
            return bytes(c.execute(Q.log_key).fetchone()[0])

    def log_get(self, receipt_id: bytes) -> LoggedReceipt | None:
        r = self._conn().execute(Q.log_get, (receipt_id,)).fetchone()
        return LoggedReceipt(r[0], LogEntry(*r[1:])) if r else None

    def log_list(self, *, holder_id: bytes | None, subject_id: bytes | None, operation: str | None,
                 after: int, limit: int) -> list[LoggedReceipt]:
        rows = self._conn().execute(*Q.log_list(holder_id, subject_id, operation, after, limit)).fetchall()
        return [LoggedReceipt(r[0], LogEntry(*r[1:])) for r in rows]

    def erasure_list(self, after: int, limit: int) -> list[tuple[int, bytes, bytes, int]]:
        return [(int(r[0]), bytes(r[1]), bytes(r[2]), int(r[3]))
                for r in self._conn().execute(Q.erasure_list, (after, limit))]


    # ---------------------------------------------------------------- log witnesses
    def put_witness(self, vault_id: int, device_id: bytes, record: bytes, now: float, keep: int) -> None:
        with self._tx() as c:
            c.execute(witness.UPSERT.format(p="?"), (vault_id, device_id, record, now))
            c.execute(witness.EVICT.format(p="?"), (vault_id, vault_id, keep))

    def witnesses(self, vault_id: int, limit: int) -> list[bytes]:
        return [bytes(r[0]) for r in self._conn().execute(witness.LIST.format(p="?"), (vault_id, limit))]

def _read_hashes(c: sqlite3.Connection, indexes: Sequence[int]) -> list[bytes]:
    found: dict[int, bytes] = {}
    wanted = sorted(set(indexes))
    for i in range(0, len(wanted), 500):
        chunk = wanted[i:i + 500]
        found.update((int(a), bytes(b)) for a, b in c.execute(
            f"SELECT idx, hash FROM tlog_hashes WHERE idx IN ({','.join('?' * len(chunk))})", chunk))
    return tree.in_order(indexes, found)
