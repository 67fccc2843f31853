"""UOMP sessions and the persistent blacklist (UOMP draft-00 "Session": "States", "Fields",
"Multi-Session Support", "Real-Time Revocation"; "Auth Service API").

    [created] --grant--> [active] --close | revoke | timeout | deletion proof (task_bound)-->
                                    [closed | revoked | expired]

Stored in ``uomp.db`` in the vault folder (mode 0600), so sessions, the blacklist, the
accepted deletion proofs and each agent's aggregation history over all its sessions (the
sum/avg item sets it was answered, which guard.aggregate judges differencing against) survive a
restart; an in-memory mirror answers the Guard's per-request lookups, written through under one
lock (every change is committed before the call returns, so a revocation is durable before it
is acknowledged).  ``expired`` is derived from the clock at read time, never stored.

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
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ownmem.errors import StoreError
from ownmem.uomp.errors import InvalidRequest
from ownmem.uomp.guard import Basis
from ownmem.uomp.items import FIELDS
from ownmem.uomp.tokens import Scopes, iso

DB_NAME = "uomp.db"
ADMIN_FILE = "uomp-admin"
ADMIN_HEADER = "x-ownmem-admin"
STATUSES = ("created", "active", "closed", "revoked", "expired")
MAX_MINUTES = 24 * 60
DEFAULT_MINUTES = 30
MAX_QUERIES = 1_000_000          # a quota above this is no quota: refused as nonsense
MAX_NAME = 256                   # characters of one tag or key in a scope (items.MAX_KEY)
MAX_NAMES = 1000                 # entries of one scope list
GRANT_FIELDS = ("granted_scopes", "limits", "allowed_fields", "aggregation_only", "task_bound", "duration_minutes")
SCOPE_FIELDS = ("tags", "keys", "deny_tags", "deny_keys", "description")
LIMIT_FIELDS = ("max_read_queries", "max_write_queries")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
  session_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS blacklist (
  token_hash TEXT PRIMARY KEY, session_id TEXT NOT NULL, added_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS deletion_proofs (
  deletion_proof_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, accepted_at INTEGER NOT NULL, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS aggregates (
  session_id TEXT NOT NULL, basis TEXT NOT NULL, PRIMARY KEY (session_id, basis));
CREATE TABLE IF NOT EXISTS agent_aggregates (
  agent_id TEXT NOT NULL, basis TEXT NOT NULL, PRIMARY KEY (agent_id, basis));
"""


def _basis_doc(b: Basis) -> str:
    return json.dumps(sorted([f, o.hex()] for f, o in b), separators=(",", ":"))


def _basis(doc: str) -> Basis:
    return frozenset((str(f), bytes.fromhex(o)) for f, o in json.loads(doc))


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
    kind: str = "uomp"                # "saihm": a SAIHM binding credential's session (agent/guarded.py)
    client_id: str = ""               # "mcp-remote": the OAuth client the person consented to (agent/oauth.py)

    def state(self, now: int) -> str:
        """The status as of ``now``: a live session past its expiry is ``expired``."""
        if self.status in ("created", "active") and now >= self.expires_at:
            return "expired"
        return self.status

    def to_json(self, now: int) -> dict[str, Any]:
        return {"session_id": self.session_id, "agent_id": self.agent_id, "agent_name": self.agent_name,
                "status": self.state(now), "created_at": iso(self.created_at), "expires_at": iso(self.expires_at),
                "closed_at": iso(self.closed_at) if self.closed_at is not None else None,
                "requested_scopes": self.requested_scopes.to_json(),
                "granted_scopes": self.granted_scopes.to_json() if self.granted_scopes else None,
                "token_hash": self.token_hash, "proof_required": self.proof_required,
                "deletion_method": self.deletion_method, "proof_accepted": self.proof_accepted, "kind": self.kind}

    def row_doc(self) -> str:
        """The JSON the session store keeps in its row (from_row reads it back)."""
        return json.dumps({"agent_name": self.agent_name, "status": self.status, "created_at": self.created_at,
                           "expires_at": self.expires_at, "closed_at": self.closed_at,
                           "requested_scopes": self.requested_scopes.to_json(),
                           "granted_scopes": self.granted_scopes.to_json() if self.granted_scopes else None,
                           "token_hash": self.token_hash, "proof_required": self.proof_required,
                           "deletion_method": self.deletion_method, "identity_key": self.identity_key,
                           "proof_accepted": self.proof_accepted, "proof_missing": self.proof_missing,
                           "kind": self.kind, **({"client_id": self.client_id} if self.client_id else {})})

    @classmethod
    def from_row(cls, sid: str, agent_id: str, doc: str) -> Session:
        d = json.loads(doc)
        g = d.get("granted_scopes")
        return cls(sid, agent_id, d["agent_name"], d["status"], d["created_at"], d["expires_at"], d["closed_at"],
                   Scopes.from_json(d["requested_scopes"]), Scopes.from_json(g) if g is not None else None,
                   d["token_hash"], d["proof_required"], d["deletion_method"], d["identity_key"],
                   d["proof_accepted"], d.get("proof_missing", False), d.get("kind", "uomp"),
                   str(d.get("client_id") or ""))


def duration_minutes(v: object) -> float:
    """A session length in minutes: a number in (0, MAX_MINUTES] (NaN fails the comparison)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v <= MAX_MINUTES:
        raise InvalidRequest(f"duration_minutes must be a number in (0, {MAX_MINUTES}]")
    return float(v)


@dataclass(frozen=True, slots=True)
class Grant:
    """What the person grants a created session ("Grant Session"), every term checked."""

    scopes: Scopes
    expires_at: int
    max_read_queries: int | None = None
    max_write_queries: int | None = None
    allowed_fields: tuple[str, ...] | None = None
    aggregation_only: bool = False
    task_bound: bool = False


def _known(d: dict[str, Any], allowed: tuple[str, ...], what: str) -> None:
    # a misspelt term (``deny_tag``) must not vanish silently: the grant would be wider than meant
    unknown = sorted(k for k in d if k not in allowed)
    if unknown:
        raise InvalidRequest(f"{what}: unknown member(s) {', '.join(map(repr, unknown))}")


def _scope_doc(d: object, what: str) -> None:
    if d is None:
        return
    if not isinstance(d, dict):
        raise InvalidRequest(f"{what} must be an object")
    _known(d, SCOPE_FIELDS, what)
    for name in SCOPE_FIELDS[:4]:
        v = d.get(name)
        if v is None:
            continue
        if not isinstance(v, list) or len(v) > MAX_NAMES or \
                not all(isinstance(x, str) and 0 < len(x) <= MAX_NAME for x in v):
            raise InvalidRequest(f"{what}.{name} must be a list of at most {MAX_NAMES} strings of 1 to "
                                 f"{MAX_NAME} characters")
    if d.get("description") is not None and not isinstance(d["description"], str):
        raise InvalidRequest(f"{what}.description must be a string")


def _quota(v: object, name: str) -> int | None:
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_QUERIES:
        raise InvalidRequest(f"limits.{name} must be an integer from 0 to {MAX_QUERIES:,}")
    return v


def _flag(d: dict[str, Any], name: str) -> bool:
    v = d.get(name, False)
    if not isinstance(v, bool):
        raise InvalidRequest(f"{name} must be true or false")
    return v


def parse_grant(doc: object, s: Session, now: int) -> Grant:
    """The grant request's terms, or InvalidRequest naming the first that is nonsense: unknown
    members, scopes that are not lists of strings, quotas that are not counts, fields no item
    has, flags that are not booleans, a length that is not a number of minutes or outlasts
    the session asked for (a grant may shorten a session, never lengthen it)."""
    if not isinstance(doc, dict):
        raise InvalidRequest("the grant must be an object")
    _known(doc, GRANT_FIELDS, "grant")
    scopes = doc.get("granted_scopes")
    if scopes is not None:
        if not isinstance(scopes, dict):
            raise InvalidRequest("granted_scopes must be an object")
        _known(scopes, ("read", "write"), "granted_scopes")
        for action in ("read", "write"):
            _scope_doc(scopes.get(action), f"granted_scopes.{action}")
    limits = doc.get("limits")
    if limits is None:
        limits = {}
    if not isinstance(limits, dict):
        raise InvalidRequest("limits must be an object")
    _known(limits, LIMIT_FIELDS, "limits")
    fields = doc.get("allowed_fields")
    if fields is not None:
        if not isinstance(fields, list) or not all(isinstance(f, str) and f in FIELDS for f in fields):
            raise InvalidRequest(f"allowed_fields must be a list of item fields ({', '.join(FIELDS)})")
        fields = tuple(fields)
    expires_at = s.expires_at
    if doc.get("duration_minutes") is not None:
        expires_at = now + int(duration_minutes(doc["duration_minutes"]) * 60)
        if expires_at > s.expires_at:
            raise InvalidRequest("duration_minutes outlasts the session asked for (a grant may only shorten it)")
    return Grant(Scopes.from_json(scopes), expires_at, _quota(limits.get("max_read_queries"), "max_read_queries"),
                 _quota(limits.get("max_write_queries"), "max_write_queries"), fields,
                 _flag(doc, "aggregation_only"), _flag(doc, "task_bound"))


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
        # told after every change of a session (put, end, accepted proof), outside the lock:
        # published.Publisher (a record for the other devices), audit_sync.AuditSync (anchor soon)
        self.on_change: list[Callable[[], None]] = []
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as e:
            raise StoreError(f"the session store cannot be opened: {e}") from None
        self._sessions = {sid: Session.from_row(sid, a, d)
                          for sid, a, d in self._db.execute("SELECT session_id, agent_id, doc FROM sessions")}
        self._blacklist = {h for (h,) in self._db.execute("SELECT token_hash FROM blacklist")}
        self._proofs = {p for (p,) in self._db.execute("SELECT deletion_proof_id FROM deletion_proofs")}
        # per agent (agent_id, over all its sessions), the sums and averages it was answered,
        # oldest first (guard.determines_few judges a new one against all of them): kept here,
        # not in memory only, so an agent cannot difference two aggregates across a restart of
        # the service, nor across two of its sessions.  The per-session rows of earlier
        # versions (table aggregates) count for their session's agent.
        self._answered: dict[str, list[Basis]] = {}
        old = [(s.agent_id, b) for sid, b in self._db.execute("SELECT session_id, basis FROM aggregates ORDER BY rowid")
               if (s := self._sessions.get(sid)) is not None]
        new = self._db.execute("SELECT agent_id, basis FROM agent_aggregates ORDER BY rowid").fetchall()
        for aid, b in [*old, *new]:
            sets = self._answered.setdefault(aid, [])
            if _basis(b) not in sets:
                sets.append(_basis(b))

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
                                 (s.session_id, s.agent_id, s.row_doc()))
            except sqlite3.Error as e:
                raise StoreError(f"the session store failed: {e}") from None
            self._sessions[s.session_id] = s
        self._changed()
        return s

    def _changed(self) -> None:
        for fn in self.on_change:
            fn()

    def end(self, s: Session, status: str, now: int) -> Session:
        """Close or revoke: the session's token goes on the persistent blacklist, in the same
        transaction as the new state (so neither survives a crash without the other)."""
        ended = replace(s, status=status, closed_at=now)
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute("UPDATE sessions SET doc = ? WHERE session_id = ?", (ended.row_doc(), s.session_id))
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
        self._changed()
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
                                 (marked.row_doc(), session.session_id))
            except sqlite3.Error as e:
                raise StoreError(f"the session store failed: {e}") from None
            self._proofs.add(proof_id)
            self._sessions[session.session_id] = marked
        self._changed()
        return True

    def proofs_of(self, session_id: str) -> dict[str, str]:
        """The deletion proofs accepted for a session: deletion_proof_id -> its memory_hash (what
        the DataDeletionProofSubmitted event hashes, audit_batches.event_hash)."""
        with self._lock:
            rows = self._db.execute("SELECT deletion_proof_id, doc FROM deletion_proofs WHERE session_id = ?",
                                    (session_id,)).fetchall()
        return {pid: str(json.loads(doc).get("memory_hash", "")) for pid, doc in rows}


    def answered(self, agent_id: str) -> list[Basis]:
        """The sum/avg item sets this agent was answered, in any of its sessions (a copy)."""
        with self._lock:
            return list(self._answered.get(agent_id, ()))

    def note_answered(self, agent_id: str, basis: Basis) -> bool:
        """Add a set to the agent's history in memory at once, so its next aggregate, in any
        session, is judged with it even before it is on disk -> whether it was new (then
        ``save_answered`` must follow before the answer is given)."""
        with self._lock:
            sets = self._answered.setdefault(agent_id, [])
            if basis in sets:
                return False
            sets.append(basis)
            return True

    def save_answered(self, agent_id: str, basis: Basis) -> None:
        with self._lock:
            try:
                self._db.execute("INSERT OR IGNORE INTO agent_aggregates (agent_id, basis) VALUES (?, ?)",
                                 (agent_id, _basis_doc(basis)))
            except sqlite3.Error as e:
                raise StoreError(f"the session store failed: {e}") from None


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
