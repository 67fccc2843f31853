"""The browser's vault store: the CPython store's SQLite schema in memory, mirrored
record by record into IndexedDB (docs/web.md "Storage").

Triggers write the primary key of every row inserted, updated or deleted into a
journal table; after each commit the journal is sent to IndexedDB in one
transaction (``ownmem_js.idb_apply``) and cleared.  IndexedDB thus holds one record
per row (cells, wrapped DEKs, metadata), each the row's values as CBOR; on the next
visit ``load`` puts them back.  The vault code above it is the CPython vault's own.
One difference: a cell the server has accepted (``pushed``) is kept without its bytes,
which nothing reads again; an unpushed cell is kept whole, to be sent again as it was.
"""
from __future__ import annotations

from typing import Any

from ownmem.crypto import cbor, run_sync
from ownmem.errors import StoreError
from ownmem.vault.store import Store


class StorageFailed(StoreError):
    """IndexedDB refused a write (a full disk, storage evicted or blocked).  The in-memory
    store had committed it, so memory is ahead of disk from then on: nothing more runs until the
    app is reloaded from what IndexedDB holds (web/js/glue-sync.js does the same without JSPI)."""

    code = "storage_failed"

# table -> primary-key column (every table the vault store has)
TABLES = {"meta": "k", "scopes": "name", "known_keys": "key_id", "revoked_keys": "key_id",
          "objects": "object_id", "erased": "object_id", "cells": "object_id", "erase_outbox": "cell_id",
          "sync_state": "k"}


def _key(pk: Any) -> str:
    return pk.hex() if isinstance(pk, bytes) else str(pk)


class IdbStore(Store):
    def __init__(self, idb: Any) -> None:
        super().__init__(None)
        self.idb = idb
        self.broken: StorageFailed | None = None
        self.db.execute("CREATE TEMP TABLE journal (seq INTEGER PRIMARY KEY, tbl TEXT NOT NULL, pk)")

    def _columns(self, table: str) -> list[str]:
        return [r[1] for r in self.db.execute(f"PRAGMA table_info({table})")]

    def _triggers(self) -> None:
        for t, pk in TABLES.items():
            self.db.executescript(f"""
            CREATE TEMP TRIGGER IF NOT EXISTS j_{t}_i AFTER INSERT ON main.{t}
              BEGIN INSERT INTO journal (tbl, pk) VALUES ('{t}', NEW.{pk}); END;
            CREATE TEMP TRIGGER IF NOT EXISTS j_{t}_u AFTER UPDATE ON main.{t}
              BEGIN INSERT INTO journal (tbl, pk) VALUES ('{t}', OLD.{pk});
                    INSERT INTO journal (tbl, pk) VALUES ('{t}', NEW.{pk}); END;
            CREATE TEMP TRIGGER IF NOT EXISTS j_{t}_d AFTER DELETE ON main.{t}
              BEGIN INSERT INTO journal (tbl, pk) VALUES ('{t}', OLD.{pk}); END;""")

    def load(self) -> int:
        """Fill the in-memory database from IndexedDB (before the triggers exist)."""
        records = run_sync(self.idb.idb_load_all()).to_py()   # {table: one CBOR array of its rows}
        n = 0
        for t, blob in records.items():
            if t not in TABLES:
                continue
            raw = bytes(blob)
            values = cbor.decode(raw, max_items=len(raw) + 1)   # an item is at least one byte
            if not values:
                continue
            cols = self._columns(t)
            marks = ",".join("?" * len(cols))
            self.db.executemany(f"INSERT OR REPLACE INTO {t} ({','.join(cols)}) VALUES ({marks})",
                                [[row[c] for c in cols] for row in values])
            n += len(values)
        self._triggers()
        return n

    def after_commit(self) -> None:
        self.flush()

    def flush(self) -> None:
        """Send every journaled change to IndexedDB in one transaction, then forget it."""
        entries = self.db.execute("SELECT DISTINCT tbl, pk FROM journal").fetchall()
        if not entries:
            return
        tables, keys, values = [], [], []
        for t, pk in entries:
            cols = self._columns(t)
            row = self.db.execute(f"SELECT {','.join(cols)} FROM {t} WHERE {TABLES[t]} = ?", (pk,)).fetchone()
            record = dict(zip(cols, row, strict=True)) if row is not None else None
            if t == "cells" and record is not None and record["pushed"]:
                # The server has this cell: its bytes (mostly an ML-DSA-65 signature) are never
                # read here again (only unpushed cells are sent; erasure needs only the id), and
                # they were most of what every start read back from IndexedDB.
                record["cell"] = b""
            tables.append(t)
            keys.append(_key(pk))
            values.append(cbor.encode(record) if record is not None else None)
        from pyodide.ffi import to_js  # Pyodide-only (the worker's FFI)

        try:
            run_sync(self.idb.idb_apply(to_js(tables), to_js(keys), to_js(values)))
        except Exception as e:  # noqa: BLE001 - a JS DOMException (QuotaExceededError, ...)
            self.broken = StorageFailed(
                f"this browser refused to save to its storage ({str(e).splitlines()[0][:200]}); nothing more is "
                "saved until the app is reloaded (what was not saved and not synced is lost)")
            raise self.broken from None
        self.db.execute("DELETE FROM journal")
