"""Session and agent records that `ownmem agent` publishes for the person's other devices
(docs/decisions.md, UOMP "13. Session"; issue 10 item 9).

The sessions live in ``uomp.db`` on the agent's machine; the PWA and the CLI on another device
see them through owner-signed control records that travel through the blind server like any
memory.  One record per change of a session (create, grant, close, revoke, expiry, deletion
proof), each superseding that session's previous one, so a session has one live head:

    payload extension "uomp_session": {"kind": "session", "session_id", "agent_id", "agent_name",
        "status", "created_at", "expires_at", "closed_at", "granted", "scopes": {"read", "write"},
        "aggregation_only", "task_bound", "allowed_fields", "max_read_queries", "max_write_queries",
        "deletion_proof": {"required", "accepted", "missing"}, "published_at", "seq"
        [, "binding": "saihm" for a SAIHM binding credential's session (agent/guarded.py)]}

and one per registered agent (`ownmem agent register`), keyed by its agent_id:

    "uomp_session": {"kind": "agent", "agent_id", "agent_name", "version", "publisher",
        "publisher_verified", "publisher_summary", "retention", "retention_text", "retention_warning",
        "requested": {"read", "write"}, "published_at", "seq"}

Times are Unix seconds.  ``uomp_session`` is one of control.CONTROL_EXTENSIONS: no view lists
these as memories.  Only a record that opens as the owner's own (Trust.SELF) counts: an agent's
key or the server cannot make one (``read_published``).

The writer (``Publisher``, on the agent) is a reconciler: every half second, and at once when a
grant tells it the token's limits, it compares each session's record as it would be now with the
one it last published, seals the ones that differ under the operator's lock and syncs.  The
session store's on_change hook queues a change at once; the ticking catches expiry, which no
request causes.  The reader (``read_published``) is pure and runs in the browser too: nothing here but the
writer imports the agent's HTTP or JWT code.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ownmem.agent.ticker import Ticker
from ownmem.errors import SyncError
from ownmem.uomp.control import REVOCATION, SESSION_RECORD, Revocation, SessionRecord
from ownmem.uomp.publisher import TRUST_FILE
from ownmem.uomp.registered import AGENTS_DIR, registered, registered_ids
from ownmem.vault.vault import SUPERSEDES, Entry

if TYPE_CHECKING:       # the browser reads published records too, without the agent service's modules
    from ownmem.agent.operator import Operator
    from ownmem.agent.sessions import SessionStore
    from ownmem.agent.uomp_api import Uomp

__all__ = ["REVOCATION", "SESSION_RECORD", "Published", "PublishedSession", "Publisher", "attach", "read_published"]

_log = logging.getLogger("ownmem.uomp")

RECORD_TAG = "uomp-session"
INTERVAL = 0.5
STATUSES = SessionRecord.STATUSES
_VOLATILE = ("published_at", "seq")  # what differs between two records of the same state


@dataclass(frozen=True, slots=True)
class PublishedSession:
    """A session as its newest owner-signed record tells, with ``status`` as of ``now``: a live
    record past its expires_at reads as expired even before the agent's expiry record arrives."""

    doc: dict[str, Any]
    status: str
    record_id: bytes
    revocation_sent: bool            # an owner-signed revocation record names it (any device)

    @property
    def session_id(self) -> str:
        return str(self.doc["session_id"])

    def to_json(self) -> dict[str, Any]:
        return {**self.doc, "status": self.status, "record_id": self.record_id.hex(),
                "revocation_sent": self.revocation_sent}


@dataclass(frozen=True, slots=True)
class Published:
    sessions: list[PublishedSession]
    agents: list[dict[str, Any]]


def _record(e: Entry) -> dict[str, Any] | None:
    """The record ``e`` carries, if it is a well-formed one signed by the owner."""
    r = SessionRecord.parse(e.opened)
    return None if r is None else r.doc


def _revoked(e: Entry) -> str | None:
    r = Revocation.parse(e.opened)
    return None if r is None else r.session_id


def _order(doc: dict[str, Any]) -> tuple[int, int]:
    p, s = doc.get("published_at"), doc.get("seq")
    return (p if isinstance(p, int) else 0, s if isinstance(s, int) else 0)


def read_published(entries: Iterable[Entry], now: int) -> Published:
    """The sessions and registered agents of a listing (``entries``: a vault's link-honoured
    entries, as open_all gives them).  Of several heads of one session (two records concurrent
    from a restored agent), the newest by (published_at, seq) is the one shown."""
    best: dict[tuple[str, str], tuple[dict[str, Any], bytes]] = {}
    revoked: set[str] = set()
    for e in entries:
        sid = _revoked(e)
        if sid is not None:
            revoked.add(sid)
        d = _record(e) if e.is_head else None
        if d is None:
            continue
        key = _key(d)
        old = best.get(key)
        if old is None or _order(d) > _order(old[0]):
            best[key] = (d, e.id)
    sessions = []
    for (kind, sid), (d, rid) in best.items():
        if kind != "session":
            continue
        status = d["status"]
        if status in ("created", "active") and now >= d["expires_at"]:
            status = "expired"
        sessions.append(PublishedSession(d, status, rid, sid in revoked))
    sessions.sort(key=lambda s: (s.status not in ("created", "active"), -int(s.doc.get("created_at") or 0),
                                 s.session_id))
    agents = sorted((d for (kind, _), (d, _) in best.items() if kind == "agent"), key=lambda d: str(d["agent_id"]))
    return Published(sessions, agents)


# ---------------------------------------------------------------------------- the writer (agent)

def grant_limits(claims: Any) -> dict[str, Any]:
    """What a grant's token allows beyond its scopes (tokens.Claims), as a record carries it."""
    return {"aggregation_only": bool(claims.aggregation_only), "task_bound": bool(claims.task_bound),
            "allowed_fields": list(claims.allowed_fields) if claims.allowed_fields is not None else None,
            "max_read_queries": claims.max_read_queries, "max_write_queries": claims.max_write_queries}


NO_LIMITS: dict[str, Any] = {"aggregation_only": False, "task_bound": False, "allowed_fields": None,
                             "max_read_queries": None, "max_write_queries": None}


def session_doc(s: Any, now: int, limits: dict[str, Any] | None) -> dict[str, Any]:
    """The record of session ``s`` (sessions.Session) as of ``now``, without the volatile fields."""
    granted = s.granted_scopes is not None
    scopes = (s.granted_scopes if granted else s.requested_scopes).to_json()
    # a grant's limits are noted (on_grant) just before its session is stored as granted: a
    # tick in between must not publish the still-ungranted session again with them
    limits = limits if granted else None
    doc = {"kind": "session", "session_id": s.session_id, "agent_id": s.agent_id, "agent_name": s.agent_name,
           "status": s.state(now), "created_at": s.created_at, "expires_at": s.expires_at,
           "closed_at": s.closed_at, "granted": granted, "scopes": scopes, **(limits or NO_LIMITS),
           "deletion_proof": {"required": s.proof_required, "accepted": s.proof_accepted,
                              "missing": s.proof_missing}}
    if getattr(s, "kind", "uomp") != "uomp":
        # a SAIHM binding credential (agent/guarded.py): its records name it, so a device can
        # tell an MCP host's credential from a UOMP session; older records have no member
        doc["binding"] = s.kind
    if getattr(s, "client_id", ""):
        doc["client_id"] = s.client_id     # a remote host: which OAuth client the person let in
    return doc


def agent_doc(r: Any) -> dict[str, Any]:
    """The record of a registered agent (manifest.Registered)."""
    m = r.manifest

    def scope(x: Any) -> dict[str, Any] | None:
        return None if x is None else {"tags": list(x.tags), "keys": list(x.keys), "deny_tags": list(x.deny_tags),
                                       "deny_keys": list(x.deny_keys), "description": x.description}
    return {"kind": "agent", "agent_id": m.agent.id, "agent_name": m.agent.name, "version": m.agent.version,
            "publisher": m.agent.publisher, "publisher_verified": r.status.verified,
            "publisher_summary": r.status.summary(), "retention": r.retention.level.name.lower(),
            "retention_text": r.retention.text, "retention_warning": r.retention.warning,
            "requested": {"read": scope(m.requested_scopes.read), "write": scope(m.requested_scopes.write)}}


def _content(d: dict[str, Any]) -> str:
    if d["kind"] == "agent":
        return f"UOMP agent {d['agent_id']} registered"
    return f"UOMP session {d['session_id']} of agent {d['agent_id']}: {d['status']}"


def _stable(d: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if d is None else {k: v for k, v in d.items() if k not in _VOLATILE}


class Publisher:
    """Seals a record for every change of a session or registered agent, in order, under the
    operator's lock, then syncs (``op.syncer.sync_once``: the agent's own sync).  ``changed``
    snapshots what differs from the last record at the moment of the change (the session store
    calls it after each write: its on_change hook, see ``attach``), so two changes within one tick are two records;
    the thread also looks every tick, which catches expiry.  A sync that fails leaves the
    records in the outbox for the next one."""

    def __init__(self, op: Operator, sessions: SessionStore, folder: Path, *,
                 now: Callable[[], int] = lambda: int(time.time()), interval: float = INTERVAL) -> None:
        self.op, self.sessions, self.folder, self.now, self.interval = op, sessions, Path(folder), now, interval
        self._limits: dict[str, dict[str, Any]] = {}
        self._seen: dict[tuple[str, str], dict[str, Any] | None] = {}   # key -> last record queued (stable part)
        self._heads: dict[tuple[str, str], bytes] = {}           # key -> its object id (to supersede)
        self._queue: list[dict[str, Any]] = []
        self._qlock = threading.Lock()
        self._agents: tuple[Any, list[dict[str, Any]]] = ((), [])
        self._seq = 0
        self._ticker = Ticker("ownmem-uomp-publish", interval, self._tick, "session records not published")
        best: dict[tuple[str, str], tuple[dict[str, Any], bytes]] = {}
        with op.lock:
            entries = [e for e, _, _ in op._opened.values()]  # noqa: SLF001 - what the operator holds
        for e in entries:
            d = _record(e) if e.is_head else None
            if d is not None and (_key(d) not in best or _order(d) > _order(best[_key(d)][0])):
                best[_key(d)] = (d, e.id)
        for key, (d, oid) in best.items():
            self._seen[key], self._heads[key] = _stable(d), oid
            self._seq = max(self._seq, _order(d)[1])
            if d["kind"] == "session" and "aggregation_only" in d:
                self._limits[key[1]] = {k: d.get(k) for k in NO_LIMITS}

    def start(self) -> Publisher:
        self._ticker.start()
        return self

    def stop(self) -> None:
        self._ticker.stop(timeout=None)

    def granted(self, claims: Any) -> None:
        """api.Uomp.on_grant: the limits of a token about to be stored, which the session store keeps not."""
        self._limits[claims.session_id] = grant_limits(claims)

    def changed(self) -> None:
        """Queue the record of every session (and registered agent) that differs from its last one."""
        now = self.now()
        with self._qlock:
            docs = [session_doc(s, now, self._limits.get(s.session_id)) for s in self.sessions.all()]
            docs += self._agent_docs()
            for d in docs:
                if _stable(d) != self._seen.get(_key(d)):
                    self._seen[_key(d)] = _stable(d)
                    self._queue.append(d)
            due = bool(self._queue)
        if due:
            self._ticker.wake()

    def _tick(self) -> None:
        self.changed()
        self.publish_due()

    def _agent_docs(self) -> list[dict[str, Any]]:
        """The registered agents' records, read again only when a manifest or the trust list changed."""
        def stamp(p: Path) -> tuple[str, int, int]:
            try:
                st = os.stat(p)
                return (p.name, st.st_mtime_ns, st.st_size)
            except OSError:
                return (p.name, 0, 0)
        d = self.folder / AGENTS_DIR
        sig = tuple(sorted(stamp(p) for p in d.glob("*"))) if d.exists() else ()
        sig = sig + (stamp(self.folder / TRUST_FILE),)
        if sig != self._agents[0]:
            docs = []
            for aid in registered_ids(self.folder):
                try:
                    docs.append(agent_doc(registered(self.folder, aid)))
                except Exception as e:   # noqa: BLE001 - a manifest that no longer verifies is not published
                    _log.warning("registered agent %s not published: %s", aid, type(e).__name__)
            self._agents = (sig, docs)
        return self._agents[1]

    def publish_due(self) -> int:
        """Seal the queued records in order, then sync -> how many."""
        with self._qlock:
            todo, self._queue = self._queue, []
        if not todo:
            return 0
        op = self.op
        with op.lock:
            for d in todo:
                key = _key(d)
                self._seq += 1
                doc = {**d, "published_at": self.now(), "seq": self._seq}
                ext = SessionRecord(doc).make()
                if key in self._heads:
                    ext[SUPERSEDES] = self._heads[key]
                self._heads[key] = op.v.add(_content(doc), tags=(RECORD_TAG,), extensions=ext)
        try:
            op.syncer.sync_once()
        except SyncError as e:
            _log.info("session records kept for the next sync (%s)", e)
        return len(todo)


def _key(d: dict[str, Any]) -> tuple[str, str]:
    return (d["kind"], str(d["session_id"] if d["kind"] == "session" else d["agent_id"]))


def attach(u: Uomp, op: Operator, folder: Path) -> Publisher:
    """Start publishing the sessions of ``u`` (api.Uomp) over operator ``op``.  Each write of the
    session store is followed by ``changed`` (its on_change hook): every state a session passes
    through becomes a record."""
    p = Publisher(op, u.sessions, folder, now=u.now)
    u.on_grant = p.granted
    u.sessions.on_change.append(p.changed)
    return p.start()
