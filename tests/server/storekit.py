"""Helpers for the storage tests: a server store's files as bytes, a reader holding an old
snapshot, and rows for the storage API.  A plain module (like tests/sync/synckit.py).

    Store            one backend's store: its kind and where it is (SQLite data folder or
                     PostgreSQL URL); ``of(backend)`` for a running server's, ``open()``
                     for the storage API on it in this process
    Store.files()    every file of the database, as bytes: SQLite's file, -wal and -shm;
                     PostgreSQL's files of that database in its data directory, after a
                     CHECKPOINT (the tests run as the superuser) so nothing sits only in
                     shared buffers.  Not pg_wal (docs/decisions.md, "What the server cannot erase").
    Store.reader()   a second connection that holds a read transaction, with a snapshot
                     from before whatever happens while it is open
    Needles          the byte search of tests/sync/test_blindness.py (raw, hex, HEX)
"""
from __future__ import annotations

import os
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server.storage import Storage, open_storage
from server.storage.base import LogEntry, PushCell, Registration, VaultRecord
from tests.sync.test_blindness import Needles  # the blindness tests' search, reused as it is

__all__ = ["Needles", "Store", "cell_windows", "forget", "random_cells", "registered", "registration", "stocked",
           "wait_until"]


@dataclass(frozen=True)
class Store:
    kind: str           # "sqlite" | "postgres"
    where: str          # the SQLite data folder, or the PostgreSQL URL

    @classmethod
    def fresh(cls, kind: str, tmp_path: Path, request: Any) -> Store:
        """A store for one test: a folder of its own (SQLite), the session's database (PostgreSQL)."""
        if kind == "postgres":
            return cls("postgres", request.getfixturevalue("pg_database"))
        return cls("sqlite", str(tmp_path))

    @classmethod
    def of(cls, backend: Any) -> Store:
        """The store of a running server (tests/server/conftest.py Backend)."""
        if backend.kind == "postgres":
            return cls("postgres", backend.env["OWNMEM_DATABASE_URL"])
        return cls("sqlite", backend.env["OWNMEM_DATA_DIR"])

    def open(self) -> Storage:
        return open_storage(self.where if self.kind == "postgres" else None, self.where)

    def files(self) -> dict[str, bytes]:
        if self.kind == "sqlite":
            return {p.name: p.read_bytes() for p in sorted(Path(self.where).glob("ownmem.db*"))}
        import psycopg

        with psycopg.connect(self.where, autocommit=True) as c:
            c.execute("CHECKPOINT")
            data = c.execute("SHOW data_directory").fetchone()
            rel = c.execute("SELECT pg_relation_filepath('vaults')").fetchone()
        assert data is not None and rel is not None
        folder = Path(data[0]) / Path(rel[0]).parent        # base/<database oid>
        out: dict[str, bytes] = {}
        for p in sorted(folder.iterdir()):
            try:
                out[p.name] = p.read_bytes()
            except (FileNotFoundError, IsADirectoryError):     # unlinked since the listing
                pass
        assert out, f"no files under {folder}"
        return out

    @contextmanager
    def reader(self) -> Iterator[None]:
        if self.kind == "sqlite":
            with closing(sqlite3.connect(Path(self.where) / "ownmem.db", isolation_level=None)) as c:
                c.execute("BEGIN")
                c.execute("SELECT count(*), sum(length(wrapped_dek)) FROM cells").fetchone()
                yield
                c.execute("COMMIT")
            return
        import psycopg

        with psycopg.connect(self.where) as c:
            c.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            c.execute("SELECT count(*), sum(length(wrapped_dek)) FROM cells").fetchone()
            yield
            c.rollback()


def cell_windows(cell: bytes, width: int = 32, step: int = 256) -> list[bytes]:
    """Pieces of a cell to search for: PostgreSQL stores a cell in ~2 KB TOAST chunks, so the
    whole cell never stands in one place, but each chunk holds several of these."""
    return [cell[i:i + width] for i in range(0, len(cell) - width + 1, step)]


def wait_until(check: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


# ---------------------------------------------------------------- rows for the storage API
# The storage stores opaque bytes and checks nothing (the HTTP layer does), so random bytes
# of the right sizes are what it would be handed.

def registration() -> Registration:
    key = LogEntry(os.urandom(32), os.urandom(32), "KEY", os.urandom(32), int(time.time()), os.urandom(64))
    return Registration(f"s{secrets.token_hex(6)}", os.urandom(16), os.urandom(32), os.urandom(32), os.urandom(32),
                        os.urandom(1952), os.urandom(32), os.urandom(64), os.urandom(64), key)


def random_cells(n: int, size: int = 4300) -> list[PushCell]:
    return [PushCell(os.urandom(32), os.urandom(16), os.urandom(size), os.urandom(40)) for _ in range(n)]


def stocked(store: Store, n: int) -> tuple[Storage, VaultRecord, list[PushCell]]:
    """The storage API on ``store``, and a new vault in it holding ``n`` cells."""
    st = store.open()
    vault = st.register(registration())
    cells = random_cells(n)
    st.push(vault.id, cells)
    return st, vault, cells


def forget(vault: VaultRecord, cell_id: bytes) -> LogEntry:
    return LogEntry(os.urandom(32), cell_id, "FORGET", vault.holder_id, int(time.time()), os.urandom(64))


def registered(backend: Any, name: str) -> bool:
    """Whether the server of ``backend`` (conftest.Backend) holds a vault of that name, read from
    its store: a lookup cannot tell (a name it does not hold answers with a decoy's keys)."""
    st = backend.storage()
    try:
        return st.vault(name) is not None
    finally:
        st.close()
