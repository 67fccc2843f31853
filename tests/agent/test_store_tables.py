"""The device store's tables for REMEMBER receipts and pending agent writes: a store made before
them gains them when it opens (the migration is the schema's CREATE TABLE IF NOT EXISTS), and
its cells already pushed are not receipted after the fact (docs/decisions.md)."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from ownmem.vault.store import PendingWrite, Store, StoredObject


def test_an_older_store_gains_the_tables_and_keeps_its_rows(tmp_path: Path) -> None:
    s = Store(tmp_path)
    with s.transaction():
        s.put_object(StoredObject(b"\\x01" * 16, b"\\x02" * 16, 2, b"sealed", b"w" * 40))
        s.put_cell(b"\\x01" * 16, b"\\x03" * 32, b"cell", pushed=True)
    s.close()
    with sqlite3.connect(tmp_path / "vault.db") as c:       # as a store of the previous version was
        c.execute("DROP TABLE remember_receipts")
        c.execute("DROP TABLE pending_writes")
    s = Store(tmp_path)
    try:
        assert s.remember_receipts([b"\\x03" * 32]) == {}
        assert s.recallable_cells() == {b"\\x01" * 16: (b"\\x03" * 32, b"cell")}
        w = PendingWrite(StoredObject(b"\\x04" * 16, b"\\x02" * 16, 2, b"s2", b"v" * 40), b"\\x05" * 32, b"c2", b"r")
        with s.transaction():
            s.put_pending(w)
        assert s.pending_writes() == [w] and s.get_object(b"\\x04" * 16) is None
        assert b"\\x04" * 16 not in s.recallable_cells() and s.unpushed_count() == 0
        with s.transaction():
            s.complete_pending(w)
        assert s.pending_writes() == [] and s.remember_receipts([b"\\x05" * 32]) == {b"\\x05" * 32: (b"r", True)}
        assert s.recallable_cells()[b"\\x04" * 16] == (b"\\x05" * 32, b"c2") and s.unpushed_count() == 1
        with s.transaction():        # the first receipt of a cell is kept
            s.put_remember_receipt(b"\\x05" * 32, b"other")
        assert s.remember_receipts([b"\\x05" * 32])[b"\\x05" * 32] == (b"r", True)
    finally:
        s.close()
