"""PostgreSQL backend (psycopg 3 + a connection pool), for several server processes at scale.

Ordering: a push takes the vault row lock (``UPDATE vaults ... RETURNING last_seq``)
before it assigns sequence numbers, so within a vault they are handed out and
committed in order across every process; a reader paging by ``since`` never skips.
Live updates: each committing transaction sends ``NOTIFY ownmem_changes`` with the
vault id, which reaches the listeners of every process once the commit is durable.

Physical erasure (scrub.py).  MVCC never overwrites a row in place: a DELETE, or an UPDATE
to zeros before it, leaves the old tuple (wrapped DEK, TOASTed cell) where it was, and a
plain VACUUM only marks its space free; measured on PostgreSQL 15, the last tuple of a page
and every TOAST chunk keep their bytes through it.  Only a rewrite takes them out of the
files: VACUUM FULL writes the live rows to new files and truncates the old ones at commit.
A rewrite holds an ACCESS EXCLUSIVE lock, so ``cells`` is partitioned by vault (one
partition each, attached at registration): an erasure rewrites its own vault's rows and
locks no other vault's.  Statements are planned per call (``plan_cache_mode``): a generic
plan locks every partition, and would wait behind any vault's rewrite.  A rewrite also
copies the rows an older snapshot may still see, so it waits, retried and never blocking,
until every transaction of this database that ran when the erase was first seen has
ended and no prepared transaction or replication slot holds an xid as old as the erase's,
and it waits no longer than LOCK_TIMEOUT for the vault's partition.  The write-ahead log
keeps what it logged (docs/decisions.md).
"""
from __future__ import annotations

import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

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
    StorageConflict,
    StorageLimit,
    VaultRecord,
)
from server.storage.export import COUNT_SQL, PAGE_SQL, ExportSlots, Opened, Row
from server.storage.scrub import Scrubber
from server.storage.sql import VAULT_COLS, Sql, added_bytes, erase_cells, fresh_cells, push_result, rewrap_cells

CHANNEL = "ownmem_changes"
OPTIONS = "-c plan_cache_mode=force_custom_plan"
LOCK_TIMEOUT = "200ms"     # a rewrite waits no longer than this for its vault's partition

SCHEMA = """
CREATE TABLE IF NOT EXISTS vault_roots (vault_id BIGINT PRIMARY KEY, root_wrap BYTEA NOT NULL);
CREATE TABLE IF NOT EXISTS vaults (
  id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE, salt BYTEA NOT NULL,
  owner_pub BYTEA NOT NULL, sync_pub BYTEA NOT NULL, ka_pub BYTEA NOT NULL, holder_pub BYTEA NOT NULL,
  holder_id BYTEA NOT NULL, last_seq BIGINT NOT NULL DEFAULT 0, meta_version BIGINT NOT NULL,
  metadata BYTEA NOT NULL, metadata_sig BYTEA NOT NULL, stored_bytes BIGINT NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS vaults_owner ON vaults (owner_pub);
CREATE INDEX IF NOT EXISTS vaults_sync ON vaults (sync_pub);
CREATE INDEX IF NOT EXISTS vaults_holder ON vaults (holder_id);
CREATE TABLE IF NOT EXISTS cells (
  vault_id BIGINT NOT NULL, cell_id BYTEA NOT NULL, object_id BYTEA NOT NULL, seq BIGINT NOT NULL,
  cell BYTEA NOT NULL, wrapped_dek BYTEA NOT NULL, PRIMARY KEY (vault_id, cell_id)) PARTITION BY LIST (vault_id);
CREATE INDEX IF NOT EXISTS cells_object_seq ON cells (vault_id, object_id, seq);
CREATE TABLE IF NOT EXISTS changes (
  vault_id BIGINT NOT NULL, seq BIGINT NOT NULL, kind TEXT NOT NULL, cell_id BYTEA,
  PRIMARY KEY (vault_id, seq));
CREATE INDEX IF NOT EXISTS changes_cell ON changes (cell_id);
CREATE TABLE IF NOT EXISTS erased (
  vault_id BIGINT NOT NULL, cell_id BYTEA NOT NULL, PRIMARY KEY (vault_id, cell_id));
CREATE TABLE IF NOT EXISTS erasure_list (
  idx BIGSERIAL PRIMARY KEY, cell_id BYTEA NOT NULL, holder_id BYTEA NOT NULL, at BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS challenges (
  vault_id BIGINT NOT NULL, challenge BYTEA NOT NULL PRIMARY KEY, expires_at DOUBLE PRECISION NOT NULL);
CREATE INDEX IF NOT EXISTS challenges_expiry ON challenges (expires_at);
CREATE TABLE IF NOT EXISTS tokens (
  token_hash BYTEA PRIMARY KEY, vault_id BIGINT NOT NULL, expires_at DOUBLE PRECISION NOT NULL);
CREATE INDEX IF NOT EXISTS tokens_expiry ON tokens (expires_at);
CREATE TABLE IF NOT EXISTS log (
  idx BIGSERIAL PRIMARY KEY, receipt_id BYTEA NOT NULL UNIQUE, subject_id BYTEA NOT NULL,
  operation TEXT NOT NULL, holder_id BYTEA NOT NULL, ts BIGINT NOT NULL, receipt BYTEA NOT NULL);
CREATE INDEX IF NOT EXISTS log_holder ON log (holder_id, idx);
CREATE INDEX IF NOT EXISTS log_subject ON log (subject_id, idx);
CREATE INDEX IF NOT EXISTS log_operation ON log (operation, idx);
CREATE TABLE IF NOT EXISTS erase_pending (
  id BIGSERIAL PRIMARY KEY, vault_id BIGINT NOT NULL,
  xid BIGINT NOT NULL DEFAULT pg_current_xact_id()::text::bigint);
CREATE TABLE IF NOT EXISTS server_secret (id INT PRIMARY KEY CHECK (id = 1), secret BYTEA NOT NULL);
"""
# stored bytes, counted against the quota: a database made before the count has it added and filled in
ADD_STORED_BYTES = """
ALTER TABLE vaults ADD COLUMN stored_bytes BIGINT NOT NULL DEFAULT 0;
UPDATE vaults SET stored_bytes = (SELECT coalesce(sum(octet_length(cell) + octet_length(wrapped_dek)), 0)
                                  FROM cells WHERE cells.vault_id = vaults.id);
"""
REGISTER_LOCK = 7406       # advisory lock: registrations are counted and made one at a time
Q = Sql("%s")
DELETE_CELL = ("DELETE FROM cells WHERE vault_id = %s AND cell_id = %s "
               "RETURNING octet_length(cell) + octet_length(wrapped_dek)")


def _b(v: object) -> bytes:
    if isinstance(v, (bytes, memoryview, bytearray)):
        return bytes(v)
    raise TypeError(f"expected a bytea column, got {type(v).__name__}")


def _one(row: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """The row a query that always answers one row gave (an aggregate, a locked vault row)."""
    if row is None:
        raise RuntimeError("the database returned no row where one is certain")
    return row


def _vault(r: tuple[Any, ...]) -> VaultRecord:
    return VaultRecord(int(r[0]), str(r[1]), _b(r[2]), _b(r[3]), _b(r[4]), _b(r[5]), _b(r[6]), _b(r[7]),
                       int(r[8]), int(r[9]), int(r[10]))


def _partition(vault_id: int) -> str:
    return f"cells_v{int(vault_id)}"


def _add_partition(c: psycopg.Connection[Any], vault_id: int) -> None:
    # Created apart and then attached: ATTACH takes SHARE UPDATE EXCLUSIVE on ``cells``, which
    # no read or write waits for; CREATE TABLE ... PARTITION OF would take ACCESS EXCLUSIVE.
    name = _partition(vault_id)
    c.execute(f"CREATE TABLE {name} (LIKE cells INCLUDING DEFAULTS)")
    c.execute(f"ALTER TABLE cells ATTACH PARTITION {name} FOR VALUES IN ({int(vault_id)})")


def _create_schema(c: psycopg.Connection[Any]) -> None:
    """The schema; a database made before ``cells`` was partitioned has its rows moved into partitions."""
    c.execute("SELECT pg_advisory_xact_lock(7405)")    # several processes at once: one at a time
    kind = c.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass('cells')").fetchone()
    legacy = kind is not None and kind[0] == "r"
    uncounted = c.execute("SELECT to_regclass('vaults') IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "
                          "information_schema.columns WHERE table_schema = current_schema() AND "
                          "table_name = 'vaults' AND column_name = 'stored_bytes')").fetchone()
    if uncounted is not None and uncounted[0]:
        c.execute(ADD_STORED_BYTES)     # before SCHEMA, whose indexes and tables leave vaults as it is
    if legacy:
        c.execute("ALTER TABLE cells RENAME TO cells_unpartitioned")
        c.execute("ALTER INDEX cells_pkey RENAME TO cells_unpartitioned_pkey")
    c.execute(SCHEMA)
    if legacy:
        for (vid,) in c.execute("SELECT id FROM vaults ORDER BY id").fetchall():
            _add_partition(c, int(vid))
        c.execute("INSERT INTO cells SELECT vault_id, cell_id, object_id, seq, cell, wrapped_dek "
                  "FROM cells_unpartitioned")
        c.execute("DROP TABLE cells_unpartitioned")   # its files, erased rows' bytes included, go with it
    c.execute("INSERT INTO server_secret VALUES (1, %s) ON CONFLICT (id) DO NOTHING", (secrets.token_bytes(32),))


@dataclass(frozen=True, slots=True)
class _Wait:
    """What a vault's rewrite waits for: the transactions running when ``mark`` was first seen."""

    mark: int                     # the highest erase_pending id it covers
    xid: int                      # the newest erase's transaction id among those
    before: frozenset[str]        # virtual transaction ids


class PostgresStorage:
    def __init__(self, url: str, *, max_size: int = 8) -> None:
        self.url = url
        self.pool = ConnectionPool(url, min_size=1, max_size=max_size, open=True,
                                   kwargs={"autocommit": False, "options": OPTIONS})
        with self.pool.connection() as c:
            _create_schema(c)
            c.execute(tree.POSTGRES_SCHEMA)
            c.execute(witness.POSTGRES_SCHEMA)
            c.execute(shares.POSTGRES_SCHEMA)
            c.execute(device_store.POSTGRES_SCHEMA)
        with self._tx() as c:
            # another process may be at it too: the lock first, then what is left to append
            size = int(_one(c.execute("SELECT size FROM tlog_head WHERE id = 1 FOR UPDATE").fetchone())[0])
            self._append_tree(c, size, [(_b(r[0]), _b(r[1])) for r in c.execute(tree.UNTREED).fetchall()])
        self._scrub_conn: psycopg.Connection[Any] | None = None
        self._waits: dict[int, _Wait] = {}
        self._exports = ExportSlots()
        self._scrubber = Scrubber(self._scrub_step, name="ownmem-scrub-postgres")
        self._scrubber.try_now()     # what a previous process left pending

    def close(self) -> None:
        self._scrubber.close()
        self._exports.close_all()
        if self._scrub_conn is not None:
            self._scrub_conn.close()
        self.pool.close()

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection]:
        with self.pool.connection() as c:   # commits on success, rolls back on error
            yield c

    @contextmanager
    def _read(self) -> Iterator[psycopg.Connection]:
        """For one read statement: autocommit, so no BEGIN and COMMIT round trips around it
        (the public log's reads, on every device's every sync)."""
        with self.pool.connection() as c:
            c.autocommit = True
            try:
                yield c
            finally:
                c.autocommit = False

    def sharing(self) -> shares.Shares:
        """The sharing tables (shares.py) over this store's transactions: _append_log takes the
        tree's lock itself, and _tx commits on success."""
        return shares.Shares(self._tx, self._append_log, postgres=True)

    def devices(self) -> device_store.Devices:
        """A vault's enrolled devices (devices.py) over this store's transactions."""
        return device_store.Devices(self._tx, "%s", postgres=True)

    # ---------------------------------------------------------------- vaults
    def register(self, reg: Registration, *, max_per_key: int | None = None) -> VaultRecord:
        try:
            with self._tx() as c:
                c.execute("SELECT pg_advisory_xact_lock(%s)", (REGISTER_LOCK,))
                if max_per_key is not None and int(_one(c.execute(
                        Q.same_keys, (reg.owner_pub, reg.sync_pub, reg.holder_id)).fetchone())[0]) >= max_per_key:
                    raise StorageLimit(f"a key of this registration is in {max_per_key} vaults already")
                r = c.execute(
                    f"{Q.insert_vault} RETURNING {VAULT_COLS}",
                    (reg.name, reg.salt, reg.owner_pub, reg.sync_pub, reg.ka_pub, reg.holder_pub, reg.holder_id,
                     reg.metadata, reg.metadata_sig)).fetchone()
                _add_partition(c, int(_one(r)[0]))
                self._append_log(c, [reg.key_receipt])
                if reg.holder_proof:
                    c.execute(Q.put_proof, (int(_one(r)[0]), reg.holder_id, reg.holder_proof))
        except psycopg.errors.UniqueViolation:
            raise StorageConflict("vault name taken") from None
        assert r is not None
        return _vault(r)

    def vault(self, name: str) -> VaultRecord | None:
        with self._tx() as c:
            r = c.execute(Q.vault_by_name, (name,)).fetchone()
        return _vault(r) if r else None

    def vault_by_id(self, vault_id: int) -> VaultRecord | None:
        with self._tx() as c:
            r = c.execute(Q.vault_by_id, (vault_id,)).fetchone()
        return _vault(r) if r else None

    def name_of_owner(self, owner_pub: bytes) -> str | None:
        with self._tx() as c:
            r = c.execute(Q.name_of_owner, (owner_pub,)).fetchone()
        return str(r[0]) if r else None

    # ---------------------------------------------------------------- auth
    def use_challenge(self, vault_id: int, challenge: bytes, expires_at: float, now: float) -> bool:
        with self._tx() as c:
            c.execute(Q.expire_challenges, (now,))
            n = c.execute("INSERT INTO challenges VALUES (%s,%s,%s) ON CONFLICT (challenge) DO NOTHING",
                          (vault_id, challenge, expires_at)).rowcount
        return n == 1

    def add_token(self, token_hash: bytes, vault_id: int, expires_at: float) -> None:
        with self._tx() as c:
            c.execute(Q.expire_tokens, (expires_at - 86400,))
            c.execute(Q.insert_token, (token_hash, vault_id, expires_at))

    def token_vault(self, token_hash: bytes, now: float) -> tuple[int, float] | None:
        with self._tx() as c:
            r = c.execute(Q.token_vault, (token_hash, now)).fetchone()
        return (int(r[0]), float(r[1])) if r else None

    # ---------------------------------------------------------------- metadata
    def metadata(self, vault_id: int) -> tuple[int, bytes, bytes]:
        with self._tx() as c:
            r = c.execute(Q.metadata, (vault_id,)).fetchone()
        assert r is not None
        return int(r[0]), _b(r[1]), _b(r[2])

    def cas_metadata(self, vault_id: int, expected: int, metadata: bytes, sig: bytes) -> int:
        with self._tx() as c:
            r = c.execute(Q.cas_metadata, (metadata, sig, vault_id, expected)).fetchone()
            if r is None:
                raise StorageConflict("metadata version is stale")
            c.execute(Q.meta_change, (vault_id, r[0]))
            c.execute(f"NOTIFY {CHANNEL}, '{int(vault_id)}'")
        return expected + 1

    def root_wrap(self, vault_id: int) -> bytes | None:
        with self._tx() as c:
            r = c.execute(Q.root_wrap, (vault_id,)).fetchone()
        return _b(r[0]) if r else None

    def rekey(self, vault_id: int, expected: int, keys: RekeyKeys, metadata: bytes, sig: bytes) -> int:
        with self._tx() as c:
            r = c.execute(Q.rekey, (keys.salt, keys.owner_pub, keys.ka_pub, metadata, sig, vault_id,
                                    expected)).fetchone()
            if r is None:
                raise StorageConflict("metadata version is stale")
            c.execute(Q.meta_change, (vault_id, r[0]))
            c.execute(Q.put_root, (vault_id, keys.root_wrap))
            c.execute(Q.renew_proof, (keys.holder_proof, vault_id))
            c.execute(f"NOTIFY {CHANNEL}, '{int(vault_id)}'")
        return expected + 1

    # ---------------------------------------------------------------- cells
    @staticmethod
    def _known(c: psycopg.Connection[Any], vault_id: int, ids: list[bytes]) -> tuple[set[bytes], set[bytes]]:
        present = {_b(r[0]) for r in c.execute(
            "SELECT cell_id FROM cells WHERE vault_id = %s AND cell_id = ANY(%s)", (vault_id, ids))}
        erased = {_b(r[0]) for r in c.execute(
            "SELECT cell_id FROM erased WHERE vault_id = %s AND cell_id = ANY(%s)", (vault_id, ids))}
        return present, erased

    def known_cells(self, vault_id: int, cell_ids: list[bytes]) -> tuple[set[bytes], set[bytes]]:
        with self._tx() as c:
            return self._known(c, vault_id, cell_ids)

    def push(self, vault_id: int, cells: list[PushCell], *, quota: int | None = None) -> PushResult:
        with self._tx() as c:
            # the row lock: every later step of this push runs alone for this vault
            row = _one(c.execute("SELECT last_seq, stored_bytes FROM vaults WHERE id = %s FOR UPDATE",
                                 (vault_id,)).fetchone())
            last, stored = int(row[0]), int(row[1])
            present, erased = self._known(c, vault_id, [x.cell_id for x in cells])
            new = fresh_cells(cells, present, erased)
            added = added_bytes(new, stored, quota)
            if new:
                # binary COPY: bytea goes as raw bytes; text COPY hex-escaped every ~4 KB cell,
                # which doubled the time of a 1000-cell push (docs/benchmarks.md, area `server`)
                with c.cursor() as cur:
                    with cur.copy("COPY cells (vault_id, cell_id, object_id, seq, cell, wrapped_dek) "
                                  "FROM STDIN (FORMAT BINARY)") as cp:
                        cp.set_types(["int8", "bytea", "bytea", "int8", "bytea", "bytea"])
                        for i, x in enumerate(new):
                            cp.write_row((vault_id, x.cell_id, x.object_id, last + 1 + i, x.cell, x.wrapped_dek))
                    with cur.copy("COPY changes (vault_id, seq, kind, cell_id) FROM STDIN (FORMAT BINARY)") as cp:
                        cp.set_types(["int8", "int8", "text", "bytea"])
                        for i, x in enumerate(new):
                            cp.write_row((vault_id, last + 1 + i, "cell", x.cell_id))
                last += len(new)
                c.execute(Q.add_cells, (last, added, vault_id))
                c.execute(f"NOTIFY {CHANNEL}, '{int(vault_id)}'")
        return push_result(cells, new, erased, last)

    def rewrap(self, vault_id: int, wraps: list[tuple[bytes, bytes]]) -> tuple[int, int]:
        with self._tx() as c:
            # the row lock, as a push takes it: sequence numbers commit in order
            last = int(_one(c.execute("SELECT last_seq FROM vaults WHERE id = %s FOR UPDATE",
                                      (vault_id,)).fetchone())[0])
            present, _ = self._known(c, vault_id, [cid for cid, _ in wraps])
            if len(present) != len({cid for cid, _ in wraps}):
                raise StorageConflict("a new wrap names a cell this vault does not hold")
            replaced, last = rewrap_cells(c, Q, vault_id, last, wraps)
            if replaced:
                c.execute(f"NOTIFY {CHANNEL}, '{int(vault_id)}'")
        if replaced:
            self._scrubber.try_now()
        return replaced, last

    def changes(self, vault_id: int, since: int, limit: int) -> tuple[list[Change], int]:
        with self._tx() as c:
            # binary results: cells arrive as bytes, not as hex text to parse
            rows = c.execute(Q.changes, (vault_id, since, limit), binary=True).fetchall()
            last = c.execute(Q.last_seq, (vault_id,)).fetchone()
        return ([Change(int(r[0]), r[1], _b(r[2]) if r[2] is not None else None,
                        _b(r[3]) if r[3] is not None else None, _b(r[4]) if r[4] is not None else None)
                 for r in rows], int(last[0]) if last else 0)

    def last_seq(self, vault_id: int) -> int:
        with self._tx() as c:
            r = c.execute(Q.last_seq, (vault_id,)).fetchone()
        return int(r[0]) if r else 0

    def server_secret(self) -> bytes:
        with self._tx() as c:
            return _b(_one(c.execute(Q.server_secret).fetchone())[0])

    def foreign_cells(self, vault_id: int, cell_ids: list[bytes]) -> set[bytes]:
        with self._tx() as c:
            present, erased = self._known(c, vault_id, cell_ids)
            holder = _b(_one(c.execute(Q.holder_of, (vault_id,)).fetchone())[0])
            return {cid for cid in set(cell_ids) - present - erased
                    if c.execute(Q.foreign_cell, (cid, holder, cid, holder)).fetchone() is not None}

    def erase(self, vault_id: int, cell_ids: list[bytes], receipts: list[LogEntry], now: int) -> list[bytes]:
        with self._tx() as c:
            row = _one(c.execute("SELECT last_seq, holder_id FROM vaults WHERE id = %s FOR UPDATE",
                                 (vault_id,)).fetchone())
            done, _ = erase_cells(c, Q, DELETE_CELL, self._append_log, vault_id, _b(row[1]), int(row[0]), cell_ids,
                                  receipts, now)
            if done:
                c.execute(Q.erase_pending, (vault_id,))
                c.execute(f"NOTIFY {CHANNEL}, '{int(vault_id)}'")
        if done:
            self._scrubber.try_now()
        return done

    def erasure_pending(self, vault_id: int) -> bool:
        with self._tx() as c:
            return c.execute(Q.is_erase_pending, (vault_id,)).fetchone() is not None

    def _scrub_step(self) -> bool:
        """Rewrite each vault with pending erasures once no older snapshot can see their rows."""
        if self._scrub_conn is None or self._scrub_conn.broken:
            self._scrub_conn = psycopg.connect(self.url, autocommit=True, options=OPTIONS)
            self._scrub_conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
        c = self._scrub_conn
        rows = c.execute("SELECT vault_id, max(id), max(xid) FROM erase_pending GROUP BY vault_id").fetchall()
        if not rows:
            self._waits.clear()
            return True
        running = self._running_transactions(c)
        left = False
        for vault_id, mark, xid in rows:
            vid = int(vault_id)
            w = self._waits.setdefault(vid, _Wait(int(mark), int(xid), running))
            if w.before & running or self._older_xid_held(c, w.xid):
                left = True
                continue
            try:
                c.execute(f"VACUUM (FULL) {_partition(vid)}")
            except psycopg.errors.LockNotAvailable:
                left = True          # the vault's own requests hold its partition: next time
                continue
            c.execute("DELETE FROM erase_pending WHERE vault_id = %s AND id <= %s", (vid, w.mark))
            del self._waits[vid]
            left = left or w.mark < int(mark)
        return not left

    @staticmethod
    def _running_transactions(c: psycopg.Connection[Any]) -> frozenset[str]:
        """The transactions open in this database now, but this one (each holds its virtualxid lock).

        The removal horizon of a table counts only its own database's backends; pg_locks and
        the pid and datid of pg_stat_activity are readable without privileges."""
        return frozenset(str(v) for (v,) in c.execute(
            "SELECT l.virtualxid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'virtualxid' AND l.granted AND l.pid <> pg_backend_pid() "
            "AND (a.datid IS NULL OR a.datid = (SELECT oid FROM pg_database WHERE datname = current_database()))"))

    @staticmethod
    def _older_xid_held(c: psycopg.Connection[Any], xid: int) -> bool:
        """A prepared transaction or a replication slot that keeps rows as old as ``xid`` alive."""
        x = str(xid % (1 << 32))
        r = _one(c.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_prepared_xacts WHERE database = current_database() "
            "AND age(transaction) >= age(%s::xid)) "
            "OR EXISTS (SELECT 1 FROM pg_replication_slots WHERE xmin IS NOT NULL AND age(xmin) >= age(%s::xid))",
            (x, x)).fetchone())
        return bool(r[0])

    def export_snapshot(self, vault_id: int) -> ExportSnapshot:
        return self._exports.open(lambda: self._export_begin(vault_id))

    def _export_begin(self, vault_id: int) -> Opened:
        # A connection of its own, not the pool's: an export holds it for as long as it streams.
        c = psycopg.connect(self.url, autocommit=False, options=OPTIONS)
        try:
            c.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ   # one snapshot, from the count on
            c.read_only = True
            n = int(_one(c.execute(COUNT_SQL.format(p="%s"), (vault_id,)).fetchone())[0])
        except BaseException:
            c.close()
            raise

        def fetch(after: bytes, limit: int) -> list[Row]:
            rows = c.execute(PAGE_SQL.format(p="%s"), (vault_id, after, limit), binary=True).fetchall()
            return [(_b(a), _b(b), _b(d)) for a, b, d in rows]

        return n, fetch, c.close

    # ---------------------------------------------------------------- public log
    def log_receipts(self, receipts: list[LogEntry]) -> None:
        with self._tx() as c:
            self._append_log(c, receipts)

    @classmethod
    def _append_log(cls, c: psycopg.Connection, entries: list[LogEntry]) -> None:
        if not entries:
            return
        # The tree's lock first, then the rows: so log order (idx) is tree order, across vaults and
        # processes.  It is the last lock the transaction takes (vault rows come before), so no cycle.
        size = int(_one(c.execute("SELECT size FROM tlog_head WHERE id = 1 FOR UPDATE").fetchone())[0])
        # one statement for the batch (binary arrays: text ones hex-escape every receipt); a
        # receipt already logged is no new row and no new leaf
        inserted = c.execute(
            "INSERT INTO log (receipt_id, subject_id, operation, holder_id, ts, receipt) "
            "SELECT * FROM unnest(%b::bytea[], %b::bytea[], %b::text[], %b::bytea[], %b::bigint[], %b::bytea[]) "
            "ON CONFLICT (receipt_id) DO NOTHING RETURNING idx, receipt_id",
            ([e.receipt_id for e in entries], [e.subject_id for e in entries], [e.operation for e in entries],
             [e.holder_id for e in entries], [e.timestamp for e in entries], [e.receipt for e in entries])).fetchall()
        receipt = {e.receipt_id: e.receipt for e in entries}
        cls._append_tree(c, size, [(_b(rid), receipt[_b(rid)]) for _, rid in sorted(inserted, key=lambda r: int(r[0]))])

    @staticmethod
    def _append_tree(c: psycopg.Connection, size: int, receipts: list[tuple[bytes, bytes]]) -> None:
        """The receipts as the next leaves of the tree of ``size``; the caller holds the head row's lock."""
        if not receipts:
            return
        leaves, hashes = tree.new_rows(size, receipts, lambda idx: _read_hashes(c, idx))
        # leaves, hashes and the new size in one statement: one round trip
        c.execute("WITH l AS (INSERT INTO tlog_leaves SELECT * FROM unnest(%b::bigint[], %b::bytea[])), "
                  "h AS (INSERT INTO tlog_hashes SELECT * FROM unnest(%b::bigint[], %b::bytea[])) "
                  "UPDATE tlog_head SET size = %b WHERE id = 1",
                  ([i for i, _ in leaves], [r for _, r in leaves], [i for i, _ in hashes], [h for _, h in hashes],
                   size + len(receipts)))

    # ---------------------------------------------------------------- the log's Merkle tree
    def log_tree_size(self) -> int:
        with self._read() as c:
            return int(_one(c.execute(tree.TREE_SIZE).fetchone())[0])

    def read_hashes(self, indexes: Sequence[int]) -> list[bytes]:
        with self._read() as c:     # rows that never change once committed: no snapshot needed
            return _read_hashes(c, indexes)

    def log_leaves(self, start: int, limit: int) -> list[LoggedReceipt]:
        with self._tx() as c:
            rows = c.execute(Q.log_leaves, (start, limit)).fetchall()
        return [self._log_row(r) for r in rows]

    def log_leaf_index(self, receipt_id: bytes) -> int | None:
        with self._read() as c:
            r = c.execute(Q.leaf_index, (receipt_id,)).fetchone()
        return int(r[0]) if r else None

    def log_key(self, candidate: bytes) -> bytes:
        with self._tx() as c:
            c.execute("INSERT INTO tlog_key VALUES (1, %s) ON CONFLICT (id) DO NOTHING", (candidate,))
            return _b(_one(c.execute(Q.log_key).fetchone())[0])

    def _log_row(self, r: tuple[Any, ...]) -> LoggedReceipt:
        return LoggedReceipt(int(r[0]), LogEntry(_b(r[1]), _b(r[2]), r[3], _b(r[4]), int(r[5]), _b(r[6])))

    def log_get(self, receipt_id: bytes) -> LoggedReceipt | None:
        with self._tx() as c:
            r = c.execute(Q.log_get, (receipt_id,)).fetchone()
        return self._log_row(r) if r else None

    def log_list(self, *, holder_id: bytes | None, subject_id: bytes | None, operation: str | None,
                 after: int, limit: int) -> list[LoggedReceipt]:
        with self._tx() as c:
            rows = c.execute(*Q.log_list(holder_id, subject_id, operation, after, limit)).fetchall()
        return [self._log_row(r) for r in rows]

    def erasure_list(self, after: int, limit: int) -> list[tuple[int, bytes, bytes, int]]:
        with self._tx() as c:
            rows = c.execute(Q.erasure_list, (after, limit)).fetchall()
        return [(int(a), _b(b), _b(h), int(t)) for a, b, h, t in rows]


    # ---------------------------------------------------------------- log witnesses
    def put_witness(self, vault_id: int, device_id: bytes, record: bytes, now: float, keep: int) -> None:
        with self._tx() as c:
            c.execute(witness.UPSERT.format(p="%s"), (vault_id, device_id, record, now))
            c.execute(witness.EVICT.format(p="%s"), (vault_id, vault_id, keep))

    def witnesses(self, vault_id: int, limit: int) -> list[bytes]:
        with self._tx() as c:
            rows = c.execute(witness.LIST.format(p="%s"), (vault_id, limit)).fetchall()
        return [_b(r[0]) for r in rows]

def _read_hashes(c: psycopg.Connection, indexes: Sequence[int]) -> list[bytes]:
    rows = c.execute("SELECT idx, hash FROM tlog_hashes WHERE idx = ANY(%s)", (sorted(set(indexes)),)).fetchall()
    return tree.in_order(indexes, {int(a): _b(b) for a, b in rows})
