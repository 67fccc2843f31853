"""The Memory Guard in front of every SAIHM binding call (issue 19 item 1; UOMP draft-00
"Access Control", "Sensitivity Rules", "Audit and Logging"; SAIHM "Tool surface").

A SAIHM binding credential (credentials.py) is a UOMP session:

    credential  --session_for-->  Session(kind "saihm", id "sess_saihm_<credential id>",
                                   agent_id = the credential's agent id, scopes = its grant,
                                   expires_at = its expiry, token_hash = "sha256:" + its hash)
    every call  --claims_of, request_for-->  guard.decide(claims, session state, request[, item])
    recall      the ranked "query" path: each memory the operator ranks is re-filtered as an Item
                (memory_item), so high-sensitivity items never reach recall
    forget, share   the item they name must pass the same rules (else: not found, as for a
                memory the credential cannot see); stage a write, forget, share, revoke a share
                need the write grant
    audit       one entry per call, reads included, with the section 18 fields, in the
                service's one AuditLog (writes: the operator's staging.WriteAudit, under the
                credential's session id); never a count of what the credential could not see

``Sessions`` keeps the session store in step with the credentials file (``reconcile``, pure):
a live credential has its active session (published to the person's other devices, which list
it and can revoke it); a credential revoked here ends its session; a session revoked from
another device (an owner-signed revocation record) refuses its credential at its next call.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from ownmem.agent import keychange
from ownmem.agent.audit import AuditEntry, new_id
from ownmem.agent.credentials import ANY_TAG, REMOTE, Credential, CredentialFile
from ownmem.agent.operator import Operator, OperatorError
from ownmem.agent.recall_index import RecallEntry
from ownmem.agent.sessions import Session
from ownmem.agent.ticker import Ticker
from ownmem.agent.uomp_api import Uomp
from ownmem.aperto.model import Trust
from ownmem.saihm.errors import B
from ownmem.uomp import guard
from ownmem.uomp.errors import ErrorCode as E
from ownmem.uomp.items import EXTENSION, SENSITIVITIES, Item
from ownmem.uomp.tokens import Claims, Scope, Scopes
from ownmem.usecases.items import item_of
from ownmem.vault.devicekey import keys_changed_at
from ownmem.vault.vault import Entry

_log = logging.getLogger("ownmem.agent")

KIND = "saihm"                # the session of a LOCAL credential (an MCP host on this machine, SAIHM binding)
REMOTE_KIND = "mcp-remote"    # the session of a REMOTE one (an MCP host reaching /mcp with OAuth)
KINDS = (KIND, REMOTE_KIND)
# a plain memory (no "uomp" item extension) that names no sensitivity: not "high", so the
# person's ordinary notes stay recallable; "medium" says it was not chosen as "low" either
DEFAULT_SENSITIVITY = "medium"
# a credential issued without --expires: its session needs an end all the same (UOMP sessions
# always have one); 100 years reads as "never" and still formats as a date
NO_EXPIRY = 100 * 365 * 86400
MAX_AUDIT_TEXT = 256          # characters of a query kept in the audit entry's key
TOOL_PATHS = {"saihm_recall": "query", "saihm_status": "session", "saihm_remember": "stage",
              "saihm_forget": "forget", "saihm_share": "share", "saihm_revoke_share": "unshare"}
ACTIONS = {"saihm_recall": "query", "saihm_status": "status", "saihm_remember": "write",
           "saihm_forget": "forget", "saihm_share": "share", "saihm_revoke_share": "revoke_share"}
_SESSION_CODES = (E.SESSION_NOT_FOUND, E.SESSION_REVOKED, E.INVALID_TOKEN, E.TOKEN_EXPIRED)


# ---------------------------------------------------------------------------- pure
def scopes_of(cred: Credential) -> Scopes:
    """The credential's grant as UOMP scopes: its read lists; write ``*`` when it may write."""
    return Scopes(Scope(cred.tags, cred.keys, cred.deny_tags, cred.deny_keys),
                  Scope((ANY_TAG,)) if cred.write else Scope())


def expires_at(cred: Credential) -> int:
    return cred.expires if cred.expires is not None else cred.created + NO_EXPIRY


def token_hash_of(cred: Credential) -> str:
    """tokens.token_hash of the credential's token, from the hash the file keeps."""
    return "sha256:" + cred.digest.hex()


def session_for(cred: Credential) -> Session:
    scopes = scopes_of(cred)
    return Session(cred.session_id, cred.agent, cred.name, "active", cred.created, expires_at(cred), None,
                   scopes, scopes, token_hash_of(cred), kind=REMOTE_KIND if cred.kind == REMOTE else KIND,
                   client_id=cred.client_id)


def claims_of(cred: Credential, audience: str) -> Claims:
    return Claims(cred.session_id, cred.agent, cred.created, expires_at(cred), scopes_of(cred),
                  profile="local", audience=audience)


def memory_item(e: Entry) -> Item:
    """The Item the Guard judges for a memory of the vault.  A memory with a UOMP item extension
    is that item (items.item_of: its key, tags, sensitivity; none named reads "high").  Any
    other memory: its object id (hex) as key, its own tags, the sensitivity its "uomp"
    extension names if any, else DEFAULT_SENSITIVITY."""
    it = item_of(e)
    if it is not None:
        return it
    o = e.opened
    ext = o.extensions.get(EXTENSION)
    named = ext.get("sensitivity") if isinstance(ext, dict) else None
    return Item(key=o.object_id.hex(), value=None, tags=tuple(o.tags),
                sensitivity=named if named in SENSITIVITIES else DEFAULT_SENSITIVITY,
                source="user" if o.trust is Trust.SELF else "agent", created_at=o.created or 0,
                updated_at=o.updated or o.created or 0, description=None, object_id=o.object_id)


def shared_item(cell_id: bytes) -> Item:
    """A cell another holder shares with this one: no tags the person gave (its plaintext is the
    other holder's), so only a grant of ``*`` recalls it; never high."""
    return Item(key=cell_id.hex(), value=None, tags=(), sensitivity=DEFAULT_SENSITIVITY, source="shared",
                created_at=0, updated_at=0, description=None, object_id=cell_id)


@dataclass(frozen=True, slots=True)
class Reconciled:
    put: tuple[Session, ...]       # sessions to create or update (a credential's grant changed)
    end: tuple[Session, ...]       # saihm sessions whose credential is gone: revoked


def reconcile(creds: Iterable[Credential], sessions: Iterable[Session]) -> Reconciled:
    """What the session store needs so that it says what the credentials file says.  A session
    that is closed or revoked stays so (a revocation from another device is final for that
    credential: re-issuing makes another credential, with another id)."""
    have = {s.session_id: s for s in sessions}
    put, live = [], set()
    for c in creds:
        if not c.id:
            continue
        live.add(c.session_id)
        want, s = session_for(c), have.get(c.session_id)
        if s is None:
            put.append(want)
        elif s.status in ("created", "active") and (s.granted_scopes, s.expires_at, s.token_hash, s.agent_id) != (
                want.granted_scopes, want.expires_at, want.token_hash, want.agent_id):
            put.append(replace(s, granted_scopes=want.granted_scopes, requested_scopes=want.requested_scopes,
                               expires_at=want.expires_at, token_hash=want.token_hash, agent_id=want.agent_id))
    end = [s for s in have.values() if s.kind in KINDS and s.status in ("created", "active")
           and s.session_id not in live]
    return Reconciled(tuple(put), tuple(end))


def request_for(method: str, audience: str, key: str | None = None, profile: str = "local") -> guard.Request:
    return guard.Request(TOOL_PATHS[method], key=key, profile=profile, audience=audience)


def _clip(s: str | None) -> str | None:
    return None if s is None else s[:MAX_AUDIT_TEXT]


# ---------------------------------------------------------------------------- I/O
class SaihmGuard:
    """The Guard of the running service for SAIHM credentials: sessions kept in step with the
    credentials file (at start, every second, and before each call when the file changed),
    each call decided and audited.  ``u``: the service's api.Uomp (its session store, audit
    log, audience); ``op``: the operator whose heads and index recall ranks."""

    def __init__(self, u: Uomp, op: Operator, creds: CredentialFile,
                 now: Callable[[], int] = lambda: int(time.time()), interval: float = 1.0) -> None:
        self.u, self.op, self.creds, self.now = u, op, creds, now
        self._seen: tuple[Credential, ...] | None = None
        self._keys_seen = 0        # the key change whose stale tokens were revoked last (keychange.py)
        self._items: dict[bytes, tuple[Any, Item]] = {}     # cellId -> (the OpenedMemory, its Item)
        self._lock = threading.Lock()
        self._ticker = Ticker("ownmem-saihm-sessions", interval, self.sync_sessions, "SAIHM sessions not reconciled")

    def start(self) -> SaihmGuard:
        self.sync_sessions()
        self._ticker.start()
        return self

    def stop(self) -> None:
        self._ticker.stop()

    def sync_sessions(self) -> None:
        self._end_stale()
        creds = self.creds.all()
        with self._lock:
            if creds is self._seen:
                return
            r = reconcile(creds, self.u.sessions.all())
            now = self.now()
            for s in r.put:
                # no audit entry: the grant is the person's (the credentials file), and the
                # session's owner-signed record (published.py) tells every device of it
                self.u.sessions.put(s)
            for s in r.end:
                self.u.sessions.end(s, "revoked", now)
                self._record(s.session_id, s.agent_id, "revoked", None, (), True, "SAIHM credential revoked")
            self._seen = creds

    def _end_stale(self) -> None:
        """Credentials and sessions issued before this vault's last key change: revoked (keychange.py)."""
        with self.op.lock:
            changed = keys_changed_at(self.op.v.store)
        if changed <= self._keys_seen:
            return
        keychange.end_stale(self.u.sessions, self.creds, changed, self.now(),
                            lambda s, why: self._record(s.session_id, s.agent_id, "revoked", None, (), True, why))
        self._keys_seen = changed

    def _state(self, cred: Credential) -> guard.SessionState:
        s = self.u.sessions.get(cred.session_id)
        h = token_hash_of(cred)
        if s is None:
            return guard.SessionState("missing", False, self.u.sessions.blacklisted(h), 0, 0)
        # no read or write quota on a credential's grant: the counts are not needed
        return guard.SessionState(s.state(self.now()), s.token_hash == h and s.agent_id == cred.agent,
                                  self.u.sessions.blacklisted(h), 0, 0)

    def _record(self, sid: str, agent: str, action: str, key: str | None, tags: tuple[str, ...], allowed: bool,
                reason: str, request_size: int = 0, response_size: int = 0) -> None:
        # durable before the answer (AuditLog.record returns once it is on disk); a StoreError
        # here answers operator_storage_unavailable, and nothing is served unaudited
        self.u.audit.record(AuditEntry(new_id(), self.now(), sid, agent, action, _clip(key), None, tags, allowed,
                                       reason, request_size, response_size))

    def _item(self, cid: bytes) -> Item | None:
        """Under the operator's lock.  An entry's OpenedMemory is kept until the operator opens it
        again (api.ItemView does the same), so its Item is remembered by that identity: a recall
        parses only what changed since the last one."""
        e = self.op.heads.get(cid)
        if e is None:
            return shared_item(cid) if self.op.index.is_shared(cid) else None
        got = self._items.get(cid)
        if got is not None and got[0] is e.opened:
            return got[1]
        if len(self._items) > 2 * len(self.op.heads) + 64:
            self._items = {}
        it = memory_item(e)
        self._items[cid] = (e.opened, it)
        return it

    def call(self, cred: Credential, method: str, fn: Callable[[Credential, dict[str, Any]], Any],
             params: dict[str, Any], request_size: int = 0, claims: Claims | None = None) -> Any:
        """Decide the call, run it (``fn``: the operator's tool) if allowed, audit it -> its result,
        or OperatorError with the binding's status and code.  ``claims``: those of the verified
        capability token a remote host presented at /mcp (agent/remote.py), decided as the remote
        profile at that audience; None: the local bearer credential's own."""
        if self.creds.all() is not self._seen:
            self.sync_sessions()
        if claims is None:
            claims = claims_of(cred, self.u.audience)
        elif claims.session_id != cred.session_id or claims.agent_id != cred.agent:
            raise OperatorError(B.UNAUTHENTICATED)      # verify_token pairs them; never trust a mismatch
        else:
            # the grant as it stands now, not as the token was issued: a grant the person narrowed
            # (`credential narrow`) binds a token issued before, for the rest of its minutes too
            claims = replace(claims, scopes=scopes_of(cred))
        audience, state = claims.audience or "", self._state(cred)
        sid, agent, action = cred.session_id, cred.agent, ACTIONS[method]
        query = params.get("query") if method == "saihm_recall" else params.get("id")
        req = request_for(method, audience, query if isinstance(query, str) else None, claims.profile)
        first = guard.decide(claims, state, req)
        if not first.allowed and first.code in _SESSION_CODES:
            self._record(sid, agent, action, req.key, (), False, first.reason, request_size)
            raise OperatorError(B.UNAUTHENTICATED)
        if method == "saihm_recall":
            return self._recall(cred, claims, state, req, params, request_size)
        if method == "saihm_status":
            return self._status(cred, claims, state, req, fn, params, request_size)
        if first.code == E.ACCESS_DENIED:        # no write grant: forget, share, remember, revoke_share
            self._record(sid, agent, action, req.key, (), False, first.reason, request_size)
            raise OperatorError(B.WRITE_REFUSED, "this credential may not " + action.replace("_", " "))
        if method == "saihm_forget":
            return self._forget(cred, claims, state, req, fn, params, request_size)
        if method == "saihm_share":
            return self._share(cred, claims, state, req, fn, params, request_size)
        # remember (stage) and revoke_share: the write grant alone
        if method == "saihm_revoke_share":
            cid = params.get("contractId")
            self._record(sid, agent, action, cid if isinstance(cid, str) else None, (), True, "allowed",
                         request_size)
        # saihm_remember: the operator's WriteAudit records the attempt and its outcome
        return fn(cred, params)

    def _recall(self, cred: Credential, claims: Claims, state: guard.SessionState, req: guard.Request,
                params: dict[str, Any], request_size: int) -> Any:
        def allowed(e: RecallEntry) -> bool:
            item = self._item(e.cell_id)
            return item is not None and guard.decide(claims, state, req, item).allowed
        with self.op.lock:          # the heads the items come from are those the recall ranked
            out = []
            # ranked among what this credential may read only (ownmem.recall.ranking: no oracle),
            # and checked again as each answer leaves
            for r in self.op.recall(cred, params, visible=allowed):
                cid = _cell_id(r.get("cellId"))
                item = self._item(cid) if cid is not None else None
                if item is not None and guard.decide(claims, state, req, item).allowed:
                    out.append((r, item))
        body = [r for r, _ in out]
        tags = tuple(sorted({t for _, it in out for t in it.tags}))
        # only what the credential sees: how many it was given, never how many matched
        self._record(cred.session_id, cred.agent, "query", req.key, tags, True, f"{len(body)} memories recalled",
                     request_size, len(json.dumps(body)))
        return body

    def _status(self, cred: Credential, claims: Claims, state: guard.SessionState, req: guard.Request,
                fn: Callable[[Credential, dict[str, Any]], Any], params: dict[str, Any], request_size: int) -> Any:
        """saihm_status counts shards per tier: of what this credential's recall could show only."""
        q = request_for("saihm_recall", claims.audience or "", profile=claims.profile)
        with self.op.lock:
            res = fn(cred, params)
            shards: dict[str, int] = {}
            for cid in self.op.index.cell_ids():
                e, item = self.op.index.get(cid), self._item(cid)
                if e is not None and item is not None and not self.op.index.is_shared(cid) \
                        and self.op.staged.get(cid, cred.agent) == cred.agent \
                        and guard.decide(claims, state, q, item).allowed:
                    shards[e.tier] = shards.get(e.tier, 0) + 1
        res["shards"] = shards
        self._record(cred.session_id, cred.agent, "status", None, (), True, "status", request_size)
        return res

    def _forget(self, cred: Credential, claims: Claims, state: guard.SessionState, req: guard.Request,
                fn: Callable[[Credential, dict[str, Any]], Any], params: dict[str, Any], request_size: int) -> Any:
        if not isinstance(params.get("id"), str):
            return fn(cred, params)           # the operator's invalid_params
        cid = _cell_id(params["id"])
        with self.op.lock:
            item = self._item(cid) if cid is not None else None
            d = guard.decide(claims, state, req, item)
            if not d.allowed:
                # out of scope, high, or no such memory: all read "not found" (success false),
                # as saihm_forget answers for a cell the caller's recall cannot show
                self._record(cred.session_id, cred.agent, "forget", req.key, (), False, _public(d), request_size)
                return {"success": False}
            assert item is not None
            self._record(cred.session_id, cred.agent, "forget", req.key, item.tags, True, "forget allowed",
                         request_size)
            return fn(cred, params)

    def _share(self, cred: Credential, claims: Claims, state: guard.SessionState, req: guard.Request,
               fn: Callable[[Credential, dict[str, Any]], Any], params: dict[str, Any], request_size: int) -> Any:
        sid, agent = cred.session_id, cred.agent
        shards = params.get("shardIds")
        with self.op.lock:
            ids = [_cell_id(x) for x in shards] if isinstance(shards, list) else []
            for cid in ids:
                item = self._item(cid) if cid is not None else None
                d = guard.decide(claims, state, req, item)
                if not d.allowed:
                    self._record(sid, agent, "share", None, (), False, _public(d), request_size)
                    # a cell it cannot see is, for it, no cell of this holder
                    raise OperatorError(B.SHARD_NOT_FOUND)
            self._record(sid, agent, "share", None, (), True, f"share of {len(ids)} cells allowed", request_size)
            return fn(cred, params)


def _public(d: guard.Decision) -> str:
    """The reason kept for a refused item: not whether it exists, is high or is denied by name
    (an entry about this credential must not tell what it could not see)."""
    return "not found within the grant"


def _cell_id(v: object) -> bytes | None:
    if not isinstance(v, str) or len(v) != 64:
        return None
    try:
        return bytes.fromhex(v)
    except ValueError:
        return None
