"""Storage backends of the blind server: SQLite by default, PostgreSQL at scale."""
from __future__ import annotations

from pathlib import Path

from server.storage.base import Storage, StorageConflict


def open_storage(url: str | None, data_dir: str | Path = "data") -> Storage:
    """``url`` from OWNMEM_DATABASE_URL: a postgresql:// URL, or None for SQLite under ``data_dir``."""
    if url and url.startswith(("postgres://", "postgresql://")):
        from server.storage.postgres import PostgresStorage  # start-up time: psycopg loads only for PostgreSQL

        return PostgresStorage(url)
    if url and url.startswith("sqlite:///"):
        from server.storage.sqlite import SqliteStorage  # the backend chosen, only (as above)

        return SqliteStorage(url[len("sqlite:///"):])
    if url:
        raise ValueError("OWNMEM_DATABASE_URL must be a postgresql:// or sqlite:/// URL")
    from server.storage.private import private_folder  # the default store's folder only (as above)
    from server.storage.sqlite import SqliteStorage  # the backend chosen, only

    private_folder(Path(data_dir))    # the server's own folder: 0700 (a sqlite:/// folder may be shared)
    return SqliteStorage(Path(data_dir) / "ownmem.db")


__all__ = ["Storage", "StorageConflict", "open_storage"]
