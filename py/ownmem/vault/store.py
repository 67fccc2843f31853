"""The local vault store: one SQLite file, WAL, every change in one transaction.

It holds only what the format calls safe to store anywhere: the public identity
(salt, public keys), wrapped scope KEKs, accepted author keys, sealed objects and
their wrapped DEKs, plus the ids of erased objects so that an old export cannot
resurrect them.  No key that decrypts anything is ever written here.

Objects are immutable: an edit inserts a new object; only migration replaces one
in place (v1 -> v2, same id), and only erasure deletes.  ``secure_delete`` makes
SQLite overwrite what it deletes, and erasure checkpoints the WAL, so a destroyed
DEK does not linger in free pages.

Every SQLite failure after the store opened (a lock another process holds, a full disk,
a damaged file) is a ``StoreError``: ``db`` is the connection behind one narrow wrapper
that translates, so no ``sqlite3`` exception reaches the vault's callers.
"""
from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ownmem.aperto.container import ScopeEntry
from ownmem.aperto.keys import WrappedKek
from ownmem.crypto import cbor
from ownmem.errors import MalformedInput, StoreError, VaultError
from ownmem.vault.slots import Slot, encode_slot, parse_slot

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS scopes (name TEXT PRIMARY KEY, scope_id BLOB NOT NULL UNIQUE,
                                   kek_wrapped BLOB NOT NULL, eph_pub BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS known_keys (key_id BLOB PRIMARY KEY, public BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS objects (object_id BLOB PRIMARY KEY, scope_id BLOB NOT NULL,
                                    format_version INTEGER NOT NULL, sealed BLOB NOT NULL,
                                    dek_wrapped BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS erased (object_id BLOB PRIMARY KEY, erased_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS revoked_keys (key_id BLOB PRIMARY KEY);
-- sync: the cell made for each object once pushed or pulled, the outbox of erasures,
-- and the position in the server's change feed
CREATE TABLE IF NOT EXISTS cells (object_id BLOB PRIMARY KEY, cell_id BLOB NOT NULL UNIQUE,
                                  cell BLOB NOT NULL, pushed INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS erase_outbox (cell_id BLOB PRIMARY KEY, receipt BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS sync_state (k TEXT PRIMARY KEY, v BLOB NOT NULL);
-- the REMEMBER receipt signed for each cell before its first push, and whether the public
-- log holds it: a retry re-sends the same receipt and never signs a second one.  Created
-- here, so a store made before it gains it on open (its cells already pushed get none)
CREATE TABLE IF NOT EXISTS remember_receipts (cell_id BLOB PRIMARY KEY, receipt BLOB NOT NULL,
                                              logged INTEGER NOT NULL DEFAULT 0);
-- writes of the agent service stored durably but invisibly until their REMEMBER receipt is
-- logged (SAIHM "Order of effect and receipt"): not objects, so neither sync nor recall sees them
CREATE TABLE IF NOT EXISTS pending_writes (object_id BLOB PRIMARY KEY, scope_id BLOB NOT NULL,
                                           format_version INTEGER NOT NULL, sealed BLOB NOT NULL,
                                           dek_wrapped BLOB NOT NULL, cell_id BLOB NOT NULL UNIQUE,
                                           cell BLOB NOT NULL, receipt BLOB NOT NULL);
-- scope-KEK rotation (vault/rotate.py): a scope's KEK generation (absent: 1, the cells' kekVersion),
-- the retiring KEK (wrapped as a scope entry's is) while a rotation is under way, and the
-- objects whose new wrapped DEK the server does not hold yet
CREATE TABLE IF NOT EXISTS kek_gens (scope_id BLOB PRIMARY KEY, gen INTEGER NOT NULL,
                                     retiring_kek BLOB, retiring_eph BLOB);
CREATE TABLE IF NOT EXISTS rewrap_outbox (object_id BLOB PRIMARY KEY);
"""


@dataclass(frozen=True, slots=True)
class PublicIdentity:
    salt: bytes
    sign_pub: bytes
    ka_pub: bytes


@dataclass(frozen=True, slots=True)
class StoredObject:
    object_id: bytes
    scope_id: bytes
    format_version: int
    sealed: bytes
    dek_wrapped: bytes


@dataclass(frozen=True, slots=True)
class PendingWrite:
    """A sealed object, its cell and its REMEMBER receipt, not yet visible."""

    obj: StoredObject
    cell_id: bytes
    cell: bytes
    receipt: bytes


@contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as e:
        # SQLite's own words ("database is locked", "disk I/O error") name the cause; they
        # carry table and column names, never a value.
        raise StoreError(f"the vault store failed: {e}") from None


class _Cursor:
    """A cursor whose row fetches fail as ``StoreError`` (rows are read lazily, so they can fail too)."""

    __slots__ = ("_cur",)

    def __init__(self, cur: sqlite3.Cursor) -> None:
        self._cur = cur

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount

    def fetchone(self) -> Any:
        with _translated():
            return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        with _translated():
            return self._cur.fetchall()

    def __iter__(self) -> Iterator[Any]:
        with _translated():
            yield from self._cur


class _Connection:
    """The store's SQLite connection; what it raises is ``StoreError``."""

    __slots__ = ("_db",)

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Cursor:
        with _translated():
            return _Cursor(self._db.execute(sql, params))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> _Cursor:
        with _translated():
            return _Cursor(self._db.executemany(sql, rows))

    def executescript(self, script: str) -> None:
        with _translated():
            self._db.executescript(script)

    def close(self) -> None:
        with _translated():
            self._db.close()


class Store:
    FILENAME = "vault.db"

    def __init__(self, folder: Path | None) -> None:
        """``folder=None`` keeps the store in memory (the browser persists it to IndexedDB)."""
        self.folder = folder
        self.path = folder / self.FILENAME if folder is not None else None
        try:
            if folder is not None:
                # Owner-only, whatever the umask of the process that opens it: the store is
                # an offline passphrase oracle for whoever can copy it.  SQLite gives the
                # -wal and -shm files the main file's mode.
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                os.chmod(folder, 0o700)
                assert self.path is not None
                os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
                os.chmod(self.path, 0o600)
            db = sqlite3.connect(self.path or ":memory:", isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA secure_delete=ON")
            db.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as e:
            raise VaultError(f"cannot open the vault store at {self.path}: {e}") from None
        self.db = _Connection(db)

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
        self.after_commit()

    def after_commit(self) -> None:
        """A hook for stores that mirror the database elsewhere (the browser's IndexedDB)."""

    # ------------------------------------------------------------- identity
    def identity(self) -> PublicIdentity | None:
        rows = dict(self.db.execute("SELECT k, v FROM meta WHERE k IN ('salt','sign_pub','ka_pub')"))
        if len(rows) != 3:
            return None
        return PublicIdentity(salt=rows["salt"], sign_pub=rows["sign_pub"], ka_pub=rows["ka_pub"])

    def set_identity(self, ident: PublicIdentity) -> None:
        self.db.executemany("INSERT INTO meta (k, v) VALUES (?, ?)",
                            [("salt", ident.salt), ("sign_pub", ident.sign_pub),
                             ("ka_pub", ident.ka_pub), ("schema", SCHEMA_VERSION)])

    def replace_identity(self, ident: PublicIdentity, root_wrap: bytes) -> None:
        """A passphrase change (vault/rekey.py): the new public keys and the root wrapped under
        the new master, in the caller's transaction."""
        self.db.executemany("INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)",
                            [("salt", ident.salt), ("sign_pub", ident.sign_pub), ("ka_pub", ident.ka_pub),
                             ("root_wrap", root_wrap)])

    def root_wrap(self) -> bytes | None:
        """The vault root wrapped under the master secret; None until the first passphrase change."""
        r = self.db.execute("SELECT v FROM meta WHERE k = 'root_wrap'").fetchone()
        return r[0] if r else None

    def successions(self) -> bytes | None:
        """The owner-key succession records (CBOR; vault/rekey.py), None if the key never changed."""
        r = self.db.execute("SELECT v FROM meta WHERE k = 'successions'").fetchone()
        return r[0] if r else None

    def set_successions(self, raw: bytes) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (k, v) VALUES ('successions', ?)", (raw,))

    def unlock_slots(self) -> list[Slot]:
        """The unlock slots (vault/slots.py), oldest first; public, so readable while locked (the
        unlock screen lists them).  Kept in ``meta`` as one CBOR list: no table of its own, so
        the browser's IndexedDB mirror needs no new object store."""
        r = self.db.execute("SELECT v FROM meta WHERE k = 'unlock_slots'").fetchone()
        if not r:
            return []
        try:
            raw = cbor.decode(r[0])
            if not isinstance(raw, list):
                raise MalformedInput("not a list")
            return [parse_slot(x) for x in raw]
        except MalformedInput:
            raise VaultError("this vault's list of unlock slots is damaged") from None

    def set_unlock_slots(self, slots: Iterable[Slot]) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (k, v) VALUES ('unlock_slots', ?)",
                        (cbor.encode([encode_slot(s) for s in slots]),))

    def replace_scopes(self, scopes: Iterable[ScopeEntry]) -> None:
        self.db.execute("DELETE FROM scopes")
        for s in scopes:
            self.add_scope(s)

    # ------------------------------------------------------------- KEK generations (vault/rotate.py)
    def kek_gens(self) -> dict[bytes, tuple[int, WrappedKek | None]]:
        """scope_id -> (its KEK generation, the retiring KEK's wrap while a rotation is under way);
        a scope not listed is at generation 1 with nothing retiring."""
        return {bytes(sid): (int(g), WrappedKek(bytes(kw), bytes(eph)) if kw is not None else None)
                for sid, g, kw, eph in self.db.execute(
                    "SELECT scope_id, gen, retiring_kek, retiring_eph FROM kek_gens")}

    def kek_gen(self, scope_id: bytes) -> int:
        r = self.db.execute("SELECT gen FROM kek_gens WHERE scope_id = ?", (scope_id,)).fetchone()
        return int(r[0]) if r else 1

    def set_kek_gen(self, scope_id: bytes, gen: int, retiring: WrappedKek | None) -> None:
        self.db.execute("INSERT OR REPLACE INTO kek_gens VALUES (?, ?, ?, ?)",
                        (scope_id, gen, retiring.kek_wrapped if retiring else None,
                         retiring.eph_pub if retiring else None))

    def set_scope_wrap(self, scope_id: bytes, wrapped: WrappedKek) -> None:
        self.db.execute("UPDATE scopes SET kek_wrapped = ?, eph_pub = ? WHERE scope_id = ?",
                        (wrapped.kek_wrapped, wrapped.eph_pub, scope_id))

    def wraps_in_scope(self, scope_id: bytes) -> list[tuple[bytes, bytes]]:
        """(object id, wrapped DEK) of every object of the scope."""
        return [(bytes(o), bytes(w)) for o, w in self.db.execute(
            "SELECT object_id, dek_wrapped FROM objects WHERE scope_id = ? ORDER BY object_id", (scope_id,))]

    def set_wraps(self, wraps: Iterable[tuple[bytes, bytes]]) -> None:
        """A scope rotation only: each object's wrapped DEK replaced (the sealed object never)."""
        self.db.executemany("UPDATE objects SET dek_wrapped = ? WHERE object_id = ?", ((w, o) for o, w in wraps))

    def queue_rewraps(self, object_ids: Iterable[bytes]) -> None:
        """Queue for the server the new wraps of those objects that have a cell (one not made yet
        is pushed with the wrap it will have then)."""
        self.db.executemany("INSERT OR IGNORE INTO rewrap_outbox SELECT object_id FROM cells WHERE object_id = ?",
                            ((o,) for o in object_ids))

    def rewrap_outbox(self, limit: int) -> list[tuple[bytes, bytes, bytes]]:
        """(object id, cellId, wrapped DEK) of queued objects whose cell reached the server."""
        return [(bytes(o), bytes(c), bytes(w)) for o, c, w in self.db.execute(
            "SELECT r.object_id, c.cell_id, o.dek_wrapped FROM rewrap_outbox r JOIN objects o ON o.object_id = "
            "r.object_id JOIN cells c ON c.object_id = r.object_id AND c.pushed = 1 ORDER BY r.object_id LIMIT ?",
            (limit,))]

    def clear_rewraps(self, object_ids: Iterable[bytes]) -> None:
        self.db.executemany("DELETE FROM rewrap_outbox WHERE object_id = ?", ((o,) for o in object_ids))

    def rewraps_waiting(self, scope_id: bytes | None = None) -> int:
        """Queued new wraps the server does not hold yet (of one scope, or of every scope); an
        erased object's no longer counts."""
        sql = "SELECT count(*) FROM rewrap_outbox r JOIN objects o ON o.object_id = r.object_id"
        args: tuple[bytes, ...] = ()
        if scope_id is not None:
            sql, args = sql + " WHERE o.scope_id = ?", (scope_id,)
        return int(self.db.execute(sql, args).fetchone()[0])

    def is_empty(self) -> bool:
        return self.identity() is None and self.count() == 0

    # ------------------------------------------------------------- scopes and keys
    def scopes(self) -> dict[str, ScopeEntry]:
        return {name: ScopeEntry(name, sid, WrappedKek(kw, eph)) for name, sid, kw, eph in
                self.db.execute("SELECT name, scope_id, kek_wrapped, eph_pub FROM scopes ORDER BY name")}

    def add_scope(self, s: ScopeEntry) -> None:
        self.db.execute("INSERT INTO scopes VALUES (?, ?, ?, ?)",
                        (s.name, s.scope_id, s.wrapped.kek_wrapped, s.wrapped.eph_pub))

    def rename_scope(self, scope_id: bytes, name: str) -> None:
        """Sync only: settles one name given to two scopes (objects refer to scopes by id)."""
        self.db.execute("UPDATE scopes SET name = ? WHERE scope_id = ?", (name, scope_id))

    def known_keys(self) -> dict[bytes, bytes]:
        return dict(self.db.execute("SELECT key_id, public FROM known_keys ORDER BY key_id"))

    def add_known_key(self, kid: bytes, public: bytes) -> None:
        self.db.execute("INSERT OR IGNORE INTO known_keys VALUES (?, ?)", (kid, public))

    def remove_known_key(self, kid: bytes) -> bool:
        """Revocation is remembered so that sync does not bring the key back from another device."""
        gone = self.db.execute("DELETE FROM known_keys WHERE key_id = ?", (kid,)).rowcount > 0
        if gone:
            self.db.execute("INSERT OR IGNORE INTO revoked_keys VALUES (?)", (kid,))
        return gone

    def revoked_keys(self) -> set[bytes]:
        return {r[0] for r in self.db.execute("SELECT key_id FROM revoked_keys")}

    def add_revoked(self, kid: bytes) -> None:
        self.db.execute("INSERT OR IGNORE INTO revoked_keys VALUES (?)", (kid,))

    def unrevoke(self, kid: bytes) -> None:
        self.db.execute("DELETE FROM revoked_keys WHERE key_id = ?", (kid,))

    # ------------------------------------------------------------- objects
    def put_object(self, o: StoredObject) -> bool:
        """Insert if new; an existing id is never overwritten (objects are immutable)."""
        cur = self.db.execute("INSERT OR IGNORE INTO objects VALUES (?, ?, ?, ?, ?)",
                              (o.object_id, o.scope_id, o.format_version, o.sealed, o.dek_wrapped))
        return cur.rowcount > 0

    def put_objects(self, objs: Iterable[StoredObject]) -> None:
        self.db.executemany("INSERT OR IGNORE INTO objects VALUES (?, ?, ?, ?, ?)",
                            ((o.object_id, o.scope_id, o.format_version, o.sealed, o.dek_wrapped)
                             for o in objs))

    def replace_object(self, o: StoredObject) -> None:
        """Migration only: the v1 object and its DEK wrap are replaced in one statement."""
        self.db.execute("UPDATE objects SET scope_id=?, format_version=?, sealed=?, dek_wrapped=? "
                        "WHERE object_id=?", (o.scope_id, o.format_version, o.sealed, o.dek_wrapped,
                                              o.object_id))

    def objects(self) -> list[StoredObject]:
        return [StoredObject(*r) for r in self.db.execute(
            "SELECT object_id, scope_id, format_version, sealed, dek_wrapped FROM objects ORDER BY object_id")]

    def object_ids(self) -> set[bytes]:
        return {r[0] for r in self.db.execute("SELECT object_id FROM objects")}

    def get_object(self, oid: bytes) -> StoredObject | None:
        r = self.db.execute("SELECT object_id, scope_id, format_version, sealed, dek_wrapped "
                            "FROM objects WHERE object_id = ?", (oid,)).fetchone()
        return StoredObject(*r) if r else None

    def count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM objects").fetchone()[0])

    # ------------------------------------------------------------- erasure
    def erase(self, oids: Iterable[bytes], now: int | None = None) -> None:
        at = int(time.time()) if now is None else now
        for oid in oids:
            self.db.execute("DELETE FROM objects WHERE object_id = ?", (oid,))
            self.db.execute("DELETE FROM cells WHERE object_id = ?", (oid,))
            self.db.execute("INSERT OR IGNORE INTO erased VALUES (?, ?)", (oid, at))

    def cell_ids_of(self, oids: Iterable[bytes]) -> dict[bytes, bytes]:
        out = {}
        for oid in oids:
            r = self.db.execute("SELECT cell_id FROM cells WHERE object_id = ?", (oid,)).fetchone()
            if r:
                out[oid] = r[0]
        return out

    def erased_ids(self) -> set[bytes]:
        return {r[0] for r in self.db.execute("SELECT object_id FROM erased")}

    def checkpoint(self) -> None:
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # ------------------------------------------------------------- sync
    def sync_get(self, k: str) -> bytes | None:
        r = self.db.execute("SELECT v FROM sync_state WHERE k = ?", (k,)).fetchone()
        return bytes(r[0]) if r else None

    def sync_set(self, k: str, v: bytes) -> None:
        self.db.execute("INSERT OR REPLACE INTO sync_state VALUES (?, ?)", (k, v))

    def unpushed(self, limit: int) -> list[StoredObject]:
        return [StoredObject(*r) for r in self.db.execute(
            "SELECT o.object_id, o.scope_id, o.format_version, o.sealed, o.dek_wrapped FROM objects o "
            "LEFT JOIN cells c ON c.object_id = o.object_id WHERE c.pushed IS NULL OR c.pushed = 0 "
            "ORDER BY o.object_id LIMIT ?", (limit,))]

    def unpushed_count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM objects o LEFT JOIN cells c ON c.object_id = o.object_id "
                                   "WHERE c.pushed IS NULL OR c.pushed = 0").fetchone()[0])

    def cell_of(self, oid: bytes) -> tuple[bytes, bytes] | None:
        r = self.db.execute("SELECT cell_id, cell FROM cells WHERE object_id = ?", (oid,)).fetchone()
        return (r[0], r[1]) if r else None

    def put_cell(self, oid: bytes, cell_id: bytes, cell: bytes, pushed: bool) -> None:
        self.db.execute("INSERT OR REPLACE INTO cells VALUES (?, ?, ?, ?)", (oid, cell_id, cell, int(pushed)))

    def drop_cell(self, oid: bytes) -> tuple[bytes, bool] | None:
        """Forget the cell made for ``oid`` (its object was re-sealed in place, so it needs a
        new one) -> (the old cell id, whether it had reached the server), if there was one."""
        r = self.db.execute("DELETE FROM cells WHERE object_id = ? RETURNING cell_id, pushed", (oid,)).fetchone()
        return (bytes(r[0]), bool(r[1])) if r else None

    def mark_pushed(self, oids: Iterable[bytes]) -> None:
        self.db.executemany("UPDATE cells SET pushed = 1 WHERE object_id = ?", ((o,) for o in oids))

    def object_of_cell(self, cell_id: bytes) -> bytes | None:
        r = self.db.execute("SELECT object_id FROM cells WHERE cell_id = ?", (cell_id,)).fetchone()
        return r[0] if r else None

    def queue_erasure(self, cell_id: bytes, receipt: bytes) -> None:
        self.db.execute("INSERT OR IGNORE INTO erase_outbox VALUES (?, ?)", (cell_id, receipt))

    def erase_outbox(self) -> list[tuple[bytes, bytes]]:
        return [(r[0], r[1]) for r in self.db.execute("SELECT cell_id, receipt FROM erase_outbox")]

    def clear_erasures(self, cell_ids: Iterable[bytes]) -> None:
        self.db.executemany("DELETE FROM erase_outbox WHERE cell_id = ?", ((c,) for c in cell_ids))

    # ------------------------------------------------------------- REMEMBER receipts
    def remember_receipts(self, cell_ids: Iterable[bytes]) -> dict[bytes, tuple[bytes, bool]]:
        """cellId -> (its REMEMBER receipt, whether the log holds it), for those that have one."""
        out = {}
        for cid in cell_ids:
            r = self.db.execute("SELECT receipt, logged FROM remember_receipts WHERE cell_id = ?", (cid,)).fetchone()
            if r:
                out[cid] = (bytes(r[0]), bool(r[1]))
        return out

    def put_remember_receipt(self, cell_id: bytes, receipt: bytes, *, logged: bool = False) -> None:
        """The first receipt of a cell is kept: a cell has one REMEMBER receipt."""
        self.db.execute("INSERT OR IGNORE INTO remember_receipts VALUES (?, ?, ?)", (cell_id, receipt, int(logged)))
        if logged:
            self.mark_remember_logged([cell_id])

    def mark_remember_logged(self, cell_ids: Iterable[bytes]) -> None:
        self.db.executemany("UPDATE remember_receipts SET logged = 1 WHERE cell_id = ?", ((c,) for c in cell_ids))

    # ------------------------------------------------------------- pending writes (agent service)
    def put_pending(self, w: PendingWrite) -> None:
        o = w.obj
        self.db.execute("INSERT INTO pending_writes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (o.object_id, o.scope_id, o.format_version, o.sealed, o.dek_wrapped, w.cell_id, w.cell,
                         w.receipt))

    def pending_writes(self) -> list[PendingWrite]:
        return [PendingWrite(StoredObject(*r[:5]), r[5], r[6], r[7]) for r in self.db.execute(
            "SELECT object_id, scope_id, format_version, sealed, dek_wrapped, cell_id, cell, receipt "
            "FROM pending_writes ORDER BY object_id")]

    def drop_pending(self, object_id: bytes) -> None:
        self.db.execute("DELETE FROM pending_writes WHERE object_id = ?", (object_id,))

    def complete_pending(self, w: PendingWrite, *, pushed: bool = False) -> None:
        """Within a transaction: the write becomes an object with its cell (to push, unless
        ``pushed``: it reached the server already) and its logged REMEMBER receipt, and is no
        longer pending."""
        self.put_object(w.obj)
        self.put_cell(w.obj.object_id, w.cell_id, w.cell, pushed=pushed)
        self.put_remember_receipt(w.cell_id, w.receipt, logged=True)
        self.drop_pending(w.obj.object_id)

    def recallable_cells(self) -> dict[bytes, tuple[bytes, bytes]]:
        """object id -> (cellId, cell) of every object an agent may see: its cell reached the
        server (pushed or pulled) or its REMEMBER receipt is in the public log."""
        return {bytes(r[0]): (bytes(r[1]), bytes(r[2])) for r in self.db.execute(
            "SELECT c.object_id, c.cell_id, c.cell FROM cells c JOIN objects o ON o.object_id = c.object_id "
            "LEFT JOIN remember_receipts m ON m.cell_id = c.cell_id WHERE c.pushed = 1 OR m.logged = 1")}

    def recallable_ids(self) -> dict[bytes, bytes]:
        """object id -> cellId of what ``recallable_cells`` holds, without the cells' bytes (the
        agent service asks on every change, and opens only the objects new to it)."""
        return {bytes(r[0]): bytes(r[1]) for r in self.db.execute(
            "SELECT c.object_id, c.cell_id FROM cells c JOIN objects o ON o.object_id = c.object_id "
            "LEFT JOIN remember_receipts m ON m.cell_id = c.cell_id WHERE c.pushed = 1 OR m.logged = 1")}

    def erase_receipt(self, cell_id: bytes) -> bytes | None:
        """The FORGET receipt queued for ``cell_id``, while its erasure has not reached the server."""
        r = self.db.execute("SELECT receipt FROM erase_outbox WHERE cell_id = ?", (cell_id,)).fetchone()
        return bytes(r[0]) if r else None
