"""Every SQLite failure after the store opened is a ``StoreError`` (a ``VaultError``), never a
``sqlite3`` exception: a lock held by another process, a damaged file, a broken constraint."""
from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from ownmem.aperto.container import ScopeEntry
from ownmem.aperto.keys import WrappedKek
from ownmem.errors import OwnmemError, StoreError, VaultError
from ownmem.vault.store import Store


def _scope(name: str, sid: bytes) -> ScopeEntry:
    return ScopeEntry(name, sid, WrappedKek(b"\x01" * 40, b"\x02" * 32))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path)
    with s.transaction():
        s.add_scope(_scope("default", b"\x00" * 16))
    yield s
    s.close()


def test_store_error_is_a_vault_error() -> None:
    assert issubclass(StoreError, VaultError) and issubclass(StoreError, OwnmemError)
    assert StoreError.code == "store"


def test_locked_by_another_process_is_a_store_error(store: Store, tmp_path: Path) -> None:
    store.db.execute("PRAGMA busy_timeout=50")
    with closing(sqlite3.connect(tmp_path / Store.FILENAME, isolation_level=None)) as other:
        other.execute("BEGIN EXCLUSIVE")
        with pytest.raises(StoreError, match="locked"):
            with store.transaction():
                store.add_known_key(b"\x03" * 8, b"\x04" * 32)
        other.execute("ROLLBACK")
    assert store.known_keys() == {}


def test_damaged_file_is_a_store_error_on_read_and_write(store: Store, tmp_path: Path) -> None:
    with closing(sqlite3.connect(tmp_path / Store.FILENAME, isolation_level=None)) as other:
        other.execute("DROP TABLE objects")
    with pytest.raises(StoreError, match="no such table"):
        store.count()
    with pytest.raises(StoreError, match="no such table"):
        store.objects()
    with pytest.raises(StoreError):
        with store.transaction():
            store.erase([b"\x05" * 16])


def test_broken_constraint_is_a_store_error_and_rolls_back(store: Store) -> None:
    with pytest.raises(StoreError, match="UNIQUE"):
        with store.transaction():
            store.add_known_key(b"\x03" * 8, b"\x04" * 32)
            store.add_scope(_scope("default", b"\x09" * 16))    # the name is taken
    assert store.known_keys() == {} and list(store.scopes()) == ["default"]


def test_closed_store_is_a_store_error(tmp_path: Path) -> None:
    s = Store(tmp_path)
    s.close()
    with pytest.raises(StoreError):
        s.count()
