"""UOMP sessions and the persistent blacklist (UOMP draft-00 "Session": "States", "Fields",
"Multi-Session Support", "Real-Time Revocation"; "Auth Service API").

    [created] --grant--> [active] --close | revoke | timeout | deletion proof (task_bound)-->
                                    [closed | revoked | expired]

Stored in ``uomp.db`` in the vault folder (mode 0600), so sessions, the blacklist and the
accepted deletion proofs survive a restart; an in-memory mirror answers the Guard's
per-request lookups, written through under one lock (every change is committed before
the call returns, so a revocation is durable before it is acknowledged).  ``expired`` is
derived from the clock at read time, never stored.

The admin credential (``uomp-admin``, 0600, in the vault folder) is a random secret that
the person's CLI sends as the ``X-Ownmem-Admin`` header; agents never see it, and no
capability token stands in for it.
"""
from __future__ import annotations

import hmac
import json
import os
import secrets
import sqlite3
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import StoreError
from .tokens import Scopes

DB_NAME = "uomp.db"
ADMIN_FILE = "uomp-admin"
ADMIN_HEADER = "x-ownmem-admin"
STATUSES = ("created", "active", "closed", "revoked", "expired")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
  session_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS blacklist (
  token_hash TEXT PRIMARY KEY, session_id TEXT NOT NULL, added_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS deletion_proofs (
  deletion_proof_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, accepted_at INTEGER NOT NULL, doc TEXT NOT NULL);
"""


@dataclass(frozen=True, slots=True)
class Session:
    """A session's fields ("Session": "Fields") plus what the Guard needs of its grant."""

    session_id: str
    agent_id: str
    agent_name: str
    status: str                       # as stored: created | active | closed | revoked
    created_at: int
    expires_at: int
    closed_at: int | None
    requested_scopes: Scopes
    granted_scopes: Scopes | None
    token_hash: str | None
    proof_required: bool = False
    deletion_method: str | None = None
    identity_key: str | None = None   # the agent's Ed25519 public key, base64url (its manifest's)
    proof_accepted: bool = False
    proof_missing: bool = False       # deletion_proof_missing already audited

    def state(self, now: int) -> str:
        """The status as of ``now``: a live session past its expiry is ``expired``."""
        if self.status in ("created", "active") and now >= self.expires_at:
            return "expired"
        return self.status

    def to_json(self, now: int) -> dict[str, Any]:
        from .tokens import iso

        return {"session_id": self.session_id, "agent_id": self.agent_id, "agent_name": self.agent_name,
                "status": self.state(now), "created_at": iso(self.created_at), "expires_at": iso(self.expires_at),
                "closed_at": iso(self.closed_at) if self.closed_at is not None else None,
                "requested_scopes": self.requested_scopes.to_json(),
                "granted_scopes": self.granted_scopes.to_json() if self.granted_scopes else None,
                "token_hash": self.token_hash, "proof_required": self.proof_required,
                "deletion_method": self.deletion_method, "proof_accepted": self.proof_accepted}

    def _doc(self) -> str:
        return json.dumps({"agent_name": self.agent_name, "status": self.status, "created_at": self.created_at,
                           "expires_at": self.expires_at, "closed_at": self.closed_at,
                           "requested_scopes": self.requested_scopes.to_json(),
                           "granted_scopes": self.granted_scopes.to_json() if self.granted_scopes else None,
                           "token_hash": self.token_hash, "proof_required": self.proof_required,
                           "deletion_method": self.deletion_method, "identity_key": self.identity_key,
                           "proof_accepted": self.proof_accepted, "proof_missing": self.proof_missing})

    @classmethod
    def _from_row(cls, sid: str, agent_id: str, doc: str) -> Session:
        d = json.loads(doc)
        g = d.get("granted_scopes")
        return cls(sid, agent_id, d["agent_name"], d["status"], d["created_at"], d["expires_at"], d["closed_at"],
                   Scopes.from_json(d["requested_scopes"]), Scopes.from_json(g) if g is not None else None,
                   d["token_hash"], d["proof_required"], d["deletion_method"], d["identity_key"],
                   d["proof_accepted"], d.get("proof_missing", False))


def _private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 if absent (never readable by others, even briefly)."""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    os.close(fd)
    os.chmod(path, 0o600)


class SessionStore:
    def __init__(self, folder: Path) -> None:
        path = Path(folder) / DB_NAME
        _private_file(path)
        for suffix in ("-wal", "-shm"):
            p = Path(str(path) + suffix)
            if p.exists():
                os.chmod(p, 0o600)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as e:
            raise StoreError(f"the session store cannot be opened: {e}") from None
        self._sessions = {sid: Session._from_row(sid, a, d)
                          for sid, a, d in self._db.execute("SELECT session_id, agent_id, doc FROM sessions")}
        self._blacklist = {h for (h,) in self._db.execute("SELECT token_hash FROM blacklist")}
        self._proofs = {p for (p,) in self._db.execute("SELECT deletion_proof_id FROM deletion_proofs")}

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def get(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    def all(self) -> list[Session]:
        return sorted(self._sessions.values(), key=lambda s: (s.created_at, s.session_id))

    def blacklisted(self, token_hash: str) -> bool:
        return token_hash in self._blacklist

    def proof_seen(self, proof_id: str) -> bool:
        return proof_id in self._proofs

    def new_id(self) -> str:
        return "sess_" + secrets.token_urlsafe(16)

    def put(self, s: Session) -> Session:
        with self._lock:
            try:
                self._db.execute("INSERT OR REPLACE INTO sessions (session_id, agent_id, doc) VALUES (?, ?, ?)",
                                 (s.session_id, s.agent_id, s._doc()))
            except sqlite3.Error as e:
                raise StoreError(f"the session store failed: {e}") from None
            self._sessions[s.session_id] = s
        return s

    def end(self, s: Session, status: str, now: int) -> Session:
        """Close or revoke: the session's token goes on the persistent blacklist, in the same
        transaction as the new state (so neither survives a crash without the other)."""
        ended = replace(s, status=status, closed_at=now)
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute("UPDATE sessions SET doc = ? WHERE session_id = ?", (ended._doc(), s.session_id))
                if s.token_hash is not None:
                    self._db.execute("INSERT OR IGNORE INTO blacklist (token_hash, session_id, added_at) "
                                     "VALUES (?, ?, ?)", (s.token_hash, s.session_id, now))
                self._db.execute("COMMIT")
            except sqlite3.Error as e:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise StoreError(f"the session store failed: {e}") from None
            self._sessions[s.session_id] = ended
            if s.token_hash is not None:
                self._blacklist.add(s.token_hash)
        return ended

    def accept_proof(self, proof_id: str, session: Session, doc: dict[str, Any], now: int) -> bool:
        """Record a deletion proof once; False if its id was seen before (a replay)."""
        with self._lock:
            if proof_id in self._proofs:
                return False
            try:
                self._db.execute("INSERT INTO deletion_proofs (deletion_proof_id, session_id, accepted_at, doc) "
                                 "VALUES (?, ?, ?, ?)", (proof_id, session.session_id, now, json.dumps(doc)))
                marked = replace(self._sessions.get(session.session_id, session), proof_accepted=True)
                self._db.execute("UPDATE sessions SET doc = ? WHERE session_id = ?",
                                 (marked._doc(), session.session_id))
            except sqlite3.Error as e:
                raise StoreError(f"the session store failed: {e}") from None
            self._proofs.add(proof_id)
            self._sessions[session.session_id] = marked
        return True


class AdminCredential:
    """The local admin secret: created once, 0600, read by the person's CLI."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / ADMIN_FILE

    def ensure(self) -> str:
        if not self.path.exists():
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write("om_admin_" + secrets.token_urlsafe(32) + "\n")
        os.chmod(self.path, 0o600)
        return self.read()

    def read(self) -> str:
        return self.path.read_text().strip()

    @staticmethod
    def matches(secret: str, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(secret.encode(), presented.encode())
