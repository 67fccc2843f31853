"""What the OAuth door keeps on disk (issue 21; UOMP draft-00 "15.5 Token Refresh"): the clients
registered by Dynamic Client Registration and the refresh tokens, in ``oauth.db`` (SQLite, mode
0600) in the vault folder.

    clients   client_id -> the registered metadata (JSON); at most MAX_CLIENTS: a new one evicts
              the oldest client that holds no grant (registration is open to anyone, so a flood
              must not grow the file, nor push out a client the person consented to)
    refresh   SHA-256(token) -> its grant (credential name, session, client), expiry, and when it
              was rotated: a rotated token presented again is a reuse (the caller revokes the grant)

A refresh token is ``om_rt_`` + 32 random bytes (base64url); only its hash is stored.
"""
from __future__ import annotations

import base64
import hashlib
import secrets
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mcp.shared.auth import OAuthClientInformationFull

from ownmem.agent.sessions import _private_file
from ownmem.errors import StoreError

DB_NAME = "oauth.db"
MAX_CLIENTS = 200
REFRESH_PREFIX = "om_rt_"
REFRESH_SECONDS = 7 * 86400     # "15.5 Token Refresh": lifetime configurable, default 7 days

_SCHEMA = """
CREATE TABLE IF NOT EXISTS clients (
  client_id TEXT PRIMARY KEY, doc TEXT NOT NULL, created INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS refresh (
  token_hash TEXT PRIMARY KEY, credential TEXT NOT NULL, session_id TEXT NOT NULL, client_id TEXT NOT NULL,
  created INTEGER NOT NULL, expires INTEGER NOT NULL, rotated INTEGER);
CREATE INDEX IF NOT EXISTS refresh_session ON refresh (session_id);
"""


@dataclass(frozen=True, slots=True)
class RefreshRow:
    token_hash: str
    credential: str          # the grant's credential name (CredentialFile.revoke takes it)
    session_id: str
    client_id: str
    created: int
    expires: int
    rotated: int | None      # when it was exchanged for a new one; None: the live one


def refresh_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_refresh_token() -> str:
    return REFRESH_PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()


class OAuthStore:
    def __init__(self, folder: Path) -> None:
        path = Path(folder) / DB_NAME
        _private_file(path)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as e:
            raise StoreError(f"the OAuth store cannot be opened: {e}") from None
        for suffix in ("-wal", "-shm"):
            p = Path(str(path) + suffix)
            if p.exists():
                p.chmod(0o600)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------------ clients
    def client(self, client_id: str) -> OAuthClientInformationFull | None:
        with self._lock:
            row = self._db.execute("SELECT doc FROM clients WHERE client_id = ?", (client_id,)).fetchone()
        return None if row is None else OAuthClientInformationFull.model_validate_json(row[0])

    def add_client(self, client: OAuthClientInformationFull, now: int, holds_grant: Callable[[str], bool]) -> bool:
        """Register ``client``; False when MAX_CLIENTS are registered and each holds a grant."""
        with self._lock:
            ids = [r[0] for r in self._db.execute("SELECT client_id FROM clients ORDER BY created, rowid")]
            if len(ids) >= MAX_CLIENTS:
                free = [i for i in ids if not holds_grant(i)]
                if not free:
                    return False
                self._db.execute("DELETE FROM clients WHERE client_id = ?", (free[0],))
            self._db.execute("INSERT INTO clients (client_id, doc, created) VALUES (?, ?, ?)",
                             (client.client_id, client.model_dump_json(exclude_none=True), now))
        return True

    def client_count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM clients").fetchone()[0])

    # ------------------------------------------------------------------ refresh tokens
    def add_refresh(self, token: str, credential: str, session_id: str, client_id: str, now: int,
                    expires: int) -> None:
        with self._lock:
            # what is past its expiry is no use to anyone: dropped as new ones come
            self._db.execute("DELETE FROM refresh WHERE expires <= ?", (now,))
            self._db.execute("INSERT INTO refresh (token_hash, credential, session_id, client_id, created, expires)"
                             " VALUES (?, ?, ?, ?, ?, ?)",
                             (refresh_hash(token), credential, session_id, client_id, now, expires))

    def refresh(self, token: str) -> RefreshRow | None:
        with self._lock:
            row = self._db.execute("SELECT token_hash, credential, session_id, client_id, created, expires, rotated"
                                   " FROM refresh WHERE token_hash = ?", (refresh_hash(token),)).fetchone()
        return None if row is None else RefreshRow(*row)

    def rotate(self, token_hash: str, now: int) -> bool:
        """Mark the token exchanged; False if it already was (two uses raced: a reuse)."""
        with self._lock:
            cur = self._db.execute("UPDATE refresh SET rotated = ? WHERE token_hash = ? AND rotated IS NULL",
                                   (now, token_hash))
            return cur.rowcount == 1

    def forget_session(self, session_id: str) -> None:
        """Every refresh token of a session: they die with it."""
        with self._lock:
            self._db.execute("DELETE FROM refresh WHERE session_id = ?", (session_id,))
