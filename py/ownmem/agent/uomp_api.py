"""The UOMP HTTP API on `ownmem agent` (UOMP draft-00 "HTTP API", "Auth Service API",
"Memory Guard API", "Error Format"; DESIGN.md "Agent access").

    the person's approval (X-Ownmem-Approval, approval.py: a MAC under a key only the unlocked
    vault gives, over this very request; the admin file alone answers 403, audited)
      POST /v1/sessions                 create        -> created; a registered agent's manifest sets
                                        proof_required, deletion_method and identity_key (terms.py);
                                        enterprise mode: 403 ACCESS_DENIED "unverified publisher" (16.4)
      POST /v1/sessions/{id}/grant      grant         -> {token, token_type, expires_at}
      POST /v1/audit/prune              (uomp_mount.attach_audit)
    admin (X-Ownmem-Admin: <secret of uomp-admin>; a capability token never suffices): narrowing
    and reading only, harmless in the hands of a same-user process that read the file
      POST /v1/sessions/{id}/revoke     revoke        (blacklisted at once, durably)
      GET  /v1/sessions                 list
    admin or the session's own token
      POST /v1/sessions/{id}/close
      GET  /v1/audit[?session_id=]      (a token sees its own session's entries only)
    anyone holding a token
      POST /v1/tokens/validate
    capability token (Authorization: Bearer)
      POST /v1/sessions/{id}/deletion-proof
      GET  /v1/memory/{key}   GET /v1/memory?tag=   GET /v1/memory/aggregate?tag=&op=&field=
      POST /v1/memory/query {"query": text, "limit"?, "cursor"?}   ranked (ownmem.recall.ranking,
                                                   among the items in scope), one page, next_cursor
      PUT | DELETE /v1/memory/{key}                WRITE_NOT_AVAILABLE (audited "write" | "delete")

Revocation from another device: ``ownmem agent revoke SESSION`` on a device without the
admin credential seals a memory signed by the owner key with payload extension
"uomp_revocation": {"session_id"} and syncs it; the blind server carries it like any cell and
notifies the live stream, the agent's watch loop pulls it, and the refresh hook revokes the
session (durably, blacklisted, audited) before the next read is decided.

Thin: parse, tokens.verify, guard.decide, audit (durable before the answer), answer.  Every
error is {"error": {"code", "message", "session_id"}} (answers.error, its status from
ownmem.uomp.errors).  GET /v1/memory/{key}, the hot path (issue 10's 1,800 req/s), reaches the
same Guard through ``uomp_mount.KeyReads``, an ASGI layer in front of Starlette's routing (same
decision, same audit, same answer bytes).  Items are read from a snapshot (item_view.py) that
the operator's refresh replaces (never under the operator's lock on the event loop).
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request as HttpRequest
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ownmem.agent.answers import NO_STORE, error, internal_error, ok, store_error
from ownmem.agent.approvals import Approvals
from ownmem.agent.audit import AuditEntry, AuditLog, new_id
from ownmem.agent.door import parse_json
from ownmem.agent.item_view import MAX_QUERY, ItemView, too_long
from ownmem.agent.sessions import (
    DEFAULT_MINUTES,
    MAX_NAME,
    AdminCredential,
    Session,
    SessionStore,
    duration_minutes,
    parse_grant,
)
from ownmem.agent.strangers import (
    ACTION as STRANGER_ACTION,
    WINDOW as STRANGER_WINDOW,
    WINDOW_ENV as STRANGER_WINDOW_ENV,
    Tally,
)
from ownmem.errors import MalformedInput, NotFound, StoreError, VaultError
from ownmem.recall.pages import MAX_LIMIT, CursorError, is_limit
from ownmem.uomp import guard
from ownmem.uomp.errors import (
    UNCOUNTED,
    ErrorCode as E,
    HttpRefusal,
    InvalidToken,
    SessionNotFound,
    StoreUnavailable,
    UompError,
    error_body,
)
from ownmem.uomp.items import Item
from ownmem.uomp.manifest import ManifestForged, ManifestInvalid
from ownmem.uomp.publisher import load_trust
from ownmem.uomp.registered import registered
from ownmem.uomp.terms import Terms, admission, session_terms, terms_of
from ownmem.uomp.tokens import (
    AuthKey,
    Claims,
    Scopes,
    Verified,
    check_expiry,
    iso,
    issue,
    token_hash,
    verify,
    verify_signature,
)

# the ranked query: (text, which cells this session may read, limit, cursor, the order of ties) ->
# (cells, next cursor)
Search = Callable[[str, Callable[[bytes], bool], "int | None", "str | None", Callable[[bytes], str]],
                 tuple[list[bytes], "str | None"]]

_log = logging.getLogger("ownmem.uomp")
MAX_BODY = 64 * 1024
NO_GROUP_COMMIT_ENV = "OWNMEM_UOMP_AUDIT_NO_GROUP_COMMIT"
WRITE_ACTIONS = ("write", "delete")      # the audit actions of PUT and DELETE /v1/memory/{key}


class Uomp:
    def __init__(self, folder: Path, auth_seed: bytes, audit_key: bytes, *, port: int,
                 search: Search | None = None,
                 now: Callable[[], int] = lambda: int(time.time()), group_commit: bool = True,
                 approval_key: bytes | None = None) -> None:
        self.key = AuthKey.from_seed(auth_seed)
        self.folder = Path(folder)      # its registered manifests and trust list (uomp.registered)
        self.sessions = SessionStore(folder)
        self.audit = AuditLog(folder, audit_key, group=group_commit)
        self.admin_secret = AdminCredential(folder).ensure()
        self.audience = f"http://127.0.0.1:{port}"
        # approval_key None: no widening request is ever approved
        self.approvals = Approvals(approval_key, self.audience, self.admin_secret, self.sessions, self.audit,
                                   lambda: self.now())
        self.items = ItemView()
        self._bodies: dict[tuple[bytes, tuple[str, ...] | None], tuple[Item, bytes]] = {}
        self.search = search
        self.now = now
        self._counts: dict[str, list[int]] = {}     # session -> [reads, writes] (from the audit at first use)
        self._count_lock = threading.Lock()
        self._verified: dict[str, tuple[Verified, str]] = {}   # token -> (its claims, token_hash)
        self.on_grant: Callable[[Claims], None] = lambda claims: None   # published.Publisher.granted
        self.before_close: Callable[[], None] = lambda: None            # uomp_mount: the audit's batching stops
        self.strangers = Tally(int(os.environ.get(STRANGER_WINDOW_ENV) or STRANGER_WINDOW))
        self._sweeper = threading.Thread(target=self._sweep_loop, name="ownmem-uomp-sweep", daemon=True)
        self._stopping = threading.Event()
        self._sweeper.start()

    def close(self) -> None:
        self.before_close()
        self._stopping.set()
        try:
            # the open window's count (uvicorn re-raises SIGTERM after its shutdown, so a
            # service stopped by a signal may not get here: then at most one window is lost)
            self._record_strangers(final=True)
        except Exception:   # noqa: BLE001 - the count is lost, the service still stops
            _log.exception("the last unauthenticated count not recorded")
        self.audit.close()
        self.sessions.close()

    # ------------------------------------------------------------------ plumbing
    def _is_admin(self, r: HttpRequest) -> bool:
        return self.approvals.is_admin(r)

    async def _raw(self, r: HttpRequest) -> bytes:
        declared = r.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
            raise UompError("body too large")
        raw = b""
        async for chunk in r.stream():
            raw += chunk
            if len(raw) > MAX_BODY:
                raise UompError("body too large")
        return raw

    async def _json(self, r: HttpRequest, raw: bytes | None = None) -> Any:
        if raw is None:
            raw = await self._raw(r)
        try:
            return parse_json(raw) if raw else {}
        except ValueError:
            raise UompError("body is not JSON text (UTF-8, no lone surrogate)") from None

    async def _approved_body(self, r: HttpRequest, what: str) -> bytes | Response:
        return await self.approvals.body(r, what, self._raw)

    def _bearer(self, r: HttpRequest) -> str | None:
        return _bearer_of(r.headers.get("authorization", ""))

    def _counters(self, sid: str) -> list[int]:
        with self._count_lock:
            c = self._counts.get(sid)
            if c is None:
                entries = self.audit.entries(sid, limit=1_000_000)
                c = self._counts[sid] = [sum(1 for e in entries if e.action in ("read", "aggregate", "query")),
                                         sum(1 for e in entries if e.action in WRITE_ACTIONS)]
            return c

    def _state(self, claims: Claims, token: str) -> guard.SessionState:
        s = self.sessions.get(claims.session_id)
        known = self._verified.get(token)
        h = known[1] if known is not None else token_hash(token)
        if s is None:
            return guard.SessionState("missing", False, self.sessions.blacklisted(h), 0, 0)
        reads, writes = self._counters(s.session_id)
        return guard.SessionState(s.state(self.now()), s.token_hash == h and s.agent_id == claims.agent_id,
                                  self.sessions.blacklisted(h), reads, writes)

    def _claims(self, r: HttpRequest) -> tuple[Claims, str]:
        return self._claims_of(self._bearer(r))

    def _claims_of(self, token: str | None) -> tuple[Claims, str]:
        if token is None:
            raise InvalidToken("missing bearer token")
        # a token string whose signature verified once need not be verified again (the bytes
        # are the same, and so is their hash, the blacklist's key); both its expiries are
        # checked on every request all the same
        known = self._verified.get(token)
        if known is None:
            known = (verify_signature(token, self.key), token_hash(token))
            if len(self._verified) >= 4096:
                self._verified.clear()
            self._verified[token] = known
        claims = check_expiry(known[0], self.now())
        return claims, token

    async def _audit(self, claims: Claims | None, action: str, request: guard.Request, d: guard.Decision,
                     tags: tuple[str, ...] = (), response_size: int = 0, key: str | None = None) -> None:
        remaining = None
        if claims is not None and claims.max_read_queries is not None and action in ("read", "aggregate", "query"):
            remaining = max(0, claims.max_read_queries - self._counters(claims.session_id)[0])
        e = AuditEntry(new_id(), self.now(), claims.session_id if claims else "", claims.agent_id if claims else "",
                       action, key if key is not None else request.key, request.tag, tags, d.allowed, d.reason,
                       0, response_size, remaining)
        await self.audit.arecord(e)

    def _count(self, claims: Claims, action: str) -> None:
        c = self._counters(claims.session_id)
        with self._count_lock:
            c[0 if action == "read" else 1] += 1

    # ------------------------------------------------------------------ Guard
    async def _guarded(self, r: HttpRequest, req: guard.Request, action: str) -> Response:
        return await self._guard(self._bearer(r), req, action)

    async def _guard(self, bearer: str | None, req: guard.Request, action: str) -> Response:
        why = too_long(req)
        if why is not None:
            # no key, tag or field is this long (items.MAX_KEY, sessions.MAX_NAME): a malformed
            # request, refused before any token check and never audited (issue 19)
            return error(E.INVALID_REQUEST, why)
        try:
            claims, token = self._claims_of(bearer)
        except UompError as e:
            # steps 1-2 failed: nothing is proven of the caller.  Counted, one audit entry per
            # window (strangers.py): anyone, any web page, can send these, and one entry each
            # filled the person's audit, quota and log (issue 19)
            self.strangers.note(e.error_code, self.now())
            return error(e.error_code, str(e))
        with self.audit.coming():         # its audit entry is on its way: it may share a batch's fsync
            return await self._decided(req, action, claims, token)

    async def _decided(self, req: guard.Request, action: str, claims: Claims, token: str) -> Response:
        sid = claims.session_id
        state = self._state(claims, token)
        if req.path == "key":
            item = self.items.by_key.get(req.key or "")
            d = guard.decide(claims, state, req, item)
            if d.code not in UNCOUNTED:
                self._count(claims, req.action)
            await self._audit(claims, action, req, d, item.tags if item and d.allowed else ())
            if not d.allowed:
                return error(d.code or E.ACCESS_DENIED, guard.shown(d).reason, sid)
            assert item is not None
            return self._item_body(claims, item)
        first = guard.decide(claims, state, req)
        if first.code not in UNCOUNTED:
            self._count(claims, req.action)
        if not first.allowed:
            await self._audit(claims, action, req, first)
            return error(first.code or E.ACCESS_DENIED, first.reason, sid)
        next_cursor = None
        if req.path == "query":
            # ranked among the items this session may read only (ownmem.recall.ranking: the order
            # of what is served says nothing of what is not; issue 19, "No oracle")
            def allowed(cid: bytes) -> bool:
                it = self.items.by_cell.get(cid)
                return it is not None and guard.decide(claims, state, req, it).allowed

            def item_key(cid: bytes) -> str:       # ties by key: never by when an item was written
                it = self.items.by_cell.get(cid)
                return it.key if it is not None else ""
            try:
                cells, next_cursor = (await run_in_threadpool(self.search, req.key or "", allowed, req.limit,
                                                              req.cursor, item_key) if self.search else ([], None))
            except CursorError as e:
                return error(E.INVALID_REQUEST, str(e), sid)
            pool = [self.items.by_cell[c] for c in cells if c in self.items.by_cell]
        else:
            pool = self.items.by_tag.get(req.tag or "", [])
        passed = [it for it in pool if guard.decide(claims, state, req, it).allowed]
        if req.path == "tag":
            passed.sort(key=lambda it: it.key)   # an order of its own: none that other items shape
        if req.path == "aggregate":
            # checked and recorded with no await between: two concurrent aggregates of one
            # session are judged one after the other (differencing, guard.determines_few)
            # the history is the agent's, over all its sessions: two sessions of one agent
            # must not difference each other's sums (issue 19, 5377 - 4600)
            aid = claims.agent_id
            agg = guard.aggregate(claims, req, passed, self.sessions.answered(aid))
            if agg.basis is not None and self.sessions.note_answered(aid, agg.basis):
                await run_in_threadpool(self.sessions.save_answered, aid, agg.basis)   # durable: a restart keeps it
            await self._audit(claims, action, req, agg.decision)
            if not agg.decision.allowed:
                return error(agg.decision.code or E.ACCESS_DENIED, agg.decision.reason, sid)
            out: dict[str, Any] = {"op": req.op, "result": agg.result}
            out.update({"tag": req.tag} if req.op == "count" else {"field": req.field})
            return ok(out)
        d = guard.served(len(passed))
        await self._audit(claims, action, req, d, tuple(sorted({t for it in passed for t in it.tags})))
        body: dict[str, Any] = {"items": [guard.project(claims, it) for it in passed]}
        if next_cursor is not None:
            body["next_cursor"] = next_cursor
        return ok(body)

    def _item_body(self, claims: Claims, item: Item) -> Response:
        """The answer of a key read: the item's projection for these allowed_fields, encoded
        once per item and field set (an item never changes: an edit is a new Item), as ok()
        would encode it."""
        fields = None if claims.allowed_fields is None else tuple(claims.allowed_fields)
        got = self._bodies.get((item.object_id, fields))
        if got is not None and got[0] is item:
            body = got[1]
        else:
            if len(self._bodies) >= 4 * len(self.items.by_key) + 1024:
                self._bodies.clear()
            body = bytes(ok(guard.project(claims, item)).body)
            self._bodies[(item.object_id, fields)] = (item, body)
        return Response(body, media_type="application/json", headers=NO_STORE)

    def _req(self, path: str, **kw: Any) -> guard.Request:
        return guard.Request(path, profile="local", audience=self.audience, **kw)

    async def memory_key(self, r: HttpRequest) -> Response:
        key = r.path_params["key"]
        if r.method in ("PUT", "DELETE"):
            # each attempt audited under its own action ("write", "delete"): the person reads which
            # one the agent tried; both count against max_write_queries
            act = "write" if r.method == "PUT" else "delete"
            return await self._guarded(r, self._req(act, key=key), act)
        return await self._guarded(r, self._req("key", key=key), "read")

    async def memory_tag(self, r: HttpRequest) -> Response:
        tag = r.query_params.get("tag")
        if not tag:
            return error(E.INVALID_REQUEST, "tag is required")
        return await self._guarded(r, self._req("tag", tag=tag), "read")

    async def memory_aggregate(self, r: HttpRequest) -> Response:
        q = r.query_params
        if not q.get("tag") or not q.get("op"):
            return error(E.INVALID_REQUEST, "tag and op are required")
        return await self._guarded(r, self._req("aggregate", tag=q["tag"], op=q["op"], field=q.get("field")),
                                   "aggregate")

    async def memory_query(self, r: HttpRequest) -> Response:
        try:
            doc = await self._json(r)
        except UompError as e:
            return error(E.INVALID_REQUEST, str(e))
        if not isinstance(doc, dict) or not isinstance(doc.get("query"), str):
            return error(E.INVALID_REQUEST, f"query must be a string of at most {MAX_QUERY} characters")
        limit, cursor = doc.get("limit"), doc.get("cursor")
        if limit is not None and not is_limit(limit):
            return error(E.INVALID_REQUEST, f"limit must be a whole number from 1 to {MAX_LIMIT}")
        if cursor is not None and not isinstance(cursor, str):
            return error(E.INVALID_REQUEST, "cursor must be the next_cursor of an earlier answer")
        return await self._guarded(r, self._req("query", key=doc["query"], limit=limit, cursor=cursor), "query")

    # ------------------------------------------------------------------ Auth Service
    async def create(self, r: HttpRequest) -> Response:
        raw = await self._approved_body(r, "creating a session")
        if isinstance(raw, Response):
            return raw
        try:
            d = await self._json(r, raw)
            if not isinstance(d, dict) or not isinstance(d.get("agent_id"), str) or not d["agent_id"]:
                raise UompError("agent_id is required")
            for name in ("agent_id", "agent_name"):     # each is in every entry of the session
                if isinstance(d.get(name), str) and len(d[name]) > MAX_NAME:
                    raise UompError(f"{name} is at most {MAX_NAME} characters")
            minutes = duration_minutes(d.get("duration_minutes", DEFAULT_MINUTES))
            requested = Scopes.from_json(d.get("requested_scopes"))
            for name in ("identity_key", "deletion_method", "agent_name"):
                if d.get(name) is not None and not isinstance(d[name], str):
                    raise UompError(f"{name} must be a string")
            if not isinstance(d.get("proof_required", False), bool):
                raise UompError("proof_required must be true or false")
        except (UompError, ValueError) as e:
            return error(E.INVALID_REQUEST, str(e))
        # a registered agent's manifest sets the session's terms (9.6, 19.3, 19.4), and in
        # enterprise mode only an agent verified as the trust list demands gets one (16.4)
        try:
            registered, refused = await run_in_threadpool(self._admitted, d["agent_id"])
            if refused is not None:
                await self._refused_token(None, d["agent_id"], refused)
                return error(E.ACCESS_DENIED, refused)
            t = session_terms(Terms(d.get("proof_required", False), d.get("deletion_method"), d.get("identity_key")),
                              registered)
        except UompError as e:
            return error(e.error_code, str(e))
        now = self.now()
        s = Session(self.sessions.new_id(), d["agent_id"], d.get("agent_name") or d["agent_id"], "created", now,
                    now + int(minutes * 60), None, requested, None, None, t.proof_required,
                    t.deletion_method, t.identity_key)
        await run_in_threadpool(self.sessions.put, s)
        return ok({"session_id": s.session_id, "status": "created", "agent_id": s.agent_id,
                   "requested_scopes": requested.to_json(), "expires_at": iso(s.expires_at)}, 201)

    def _admitted(self, agent_id: str) -> tuple[Terms | None, str | None]:
        """(the terms of the agent's registered manifest, None when it has none; why it may not
        receive a token, None when it may).  Reads the vault folder: the trust list and the
        manifest, verified again against today's trust list (a damaged trust list is
        StoreUnavailable, never "no enterprise mode")."""
        try:
            trust = load_trust(self.folder)
        except VaultError as e:
            raise StoreUnavailable(str(e)) from None
        try:
            r = registered(self.folder, agent_id)
        except (ManifestInvalid, ManifestForged) as e:
            # its terms cannot be known: no session, whatever the mode
            return None, f"the registered manifest of {agent_id!r} does not verify: {e}"
        except (NotFound, MalformedInput):       # none registered (or no id a manifest can have)
            return None, admission(None, trust)
        return terms_of(r.manifest), admission(r.status, trust)

    async def _refused_token(self, s: Session | None, agent_id: str, reason: str) -> None:
        """A create or grant refused by 16.4: the person reads in the audit that it was refused."""
        await self.audit.arecord(AuditEntry(new_id(), self.now(), s.session_id if s else "", agent_id, "grant",
                                            None, None, (), False, reason))

    def _session(self, r: HttpRequest) -> Session:
        s = self.sessions.get(r.path_params["sid"])
        if s is None:
            raise SessionNotFound("no such session")
        return s

    async def grant(self, r: HttpRequest) -> Response:
        raw = await self._approved_body(r, "a grant")
        if isinstance(raw, Response):
            return raw
        try:
            s = self._session(r)
        except UompError as e:
            return error(e.error_code, str(e))
        try:
            g = parse_grant(await self._json(r, raw), s, self.now())
        except (UompError, ValueError) as e:
            return error(E.INVALID_REQUEST, str(e), s.session_id)
        now = self.now()
        if s.state(now) != "created":
            if s.state(now) == "active":
                return error(E.INVALID_REQUEST, "session is active", s.session_id, http=HttpRefusal.ALREADY_GRANTED)
            return error(E.SESSION_REVOKED, f"session is {s.state(now)}", s.session_id)
        # 16.4 again at the token's issue: the trust list may have changed since the create
        try:
            _, refused = await run_in_threadpool(self._admitted, s.agent_id)
        except UompError as e:
            return error(e.error_code, str(e), s.session_id)
        if refused is not None:
            await self._refused_token(s, s.agent_id, refused)
            return error(E.ACCESS_DENIED, refused, s.session_id)
        claims = Claims(s.session_id, s.agent_id, now, g.expires_at, g.scopes, g.max_read_queries,
                        g.max_write_queries, "local", self.audience, ("127.0.0.1",), g.allowed_fields,
                        g.aggregation_only, g.task_bound)
        token = issue(self.key, claims)
        self.on_grant(claims)
        await run_in_threadpool(self.sessions.put, replace(s, status="active", granted_scopes=g.scopes,
                                                           expires_at=g.expires_at, token_hash=token_hash(token)))
        await self._audit(claims, "grant", guard.Request("session"), guard.Decision(True, None, "granted"))
        return ok({"token": token, "token_type": "Bearer", "expires_at": iso(g.expires_at)})

    async def _end(self, r: HttpRequest, status: str) -> Response:
        try:
            s = self._session(r)
        except UompError as e:
            return error(e.error_code, str(e))
        allowed = self._is_admin(r)
        if not allowed and status == "closed":
            # the agent may end its own session with its own (valid) token
            try:
                claims, token = self._claims(r)
                allowed = claims.session_id == s.session_id and s.token_hash == token_hash(token)
            except UompError:
                allowed = False
        if not allowed:
            return error(E.INVALID_TOKEN, "admin credential required", s.session_id)
        now = self.now()
        if s.status in ("closed", "revoked"):
            return ok({"session_id": s.session_id, "status": s.status})
        ended = await run_in_threadpool(self.sessions.end, s, status, now)
        await self._log_session(ended, status, "session " + status)
        if ended.proof_required and not ended.proof_accepted and not ended.proof_missing:
            await self._proof_missing(ended)
        return ok({"session_id": s.session_id, "status": status})

    async def _log_session(self, s: Session, action: str, reason: str, allowed: bool = True) -> None:
        await self.audit.arecord(AuditEntry(new_id(), self.now(), s.session_id, s.agent_id, action, None, None, (),
                                            allowed, reason))

    async def _proof_missing(self, s: Session) -> None:
        await self._log_session(s, "deletion_proof_missing", "no deletion proof before the session ended", False)
        await run_in_threadpool(self.sessions.put, replace(self.sessions.get(s.session_id) or s, proof_missing=True))

    def _record_strangers(self, *, final: bool = False) -> None:
        s = self.strangers.due(self.now(), final=final)
        if s is not None:
            self.audit.record(AuditEntry(new_id(), s.end, "", "", STRANGER_ACTION, None, None, (), False, s.reason))

    def _sweep_loop(self) -> None:
        """deletion_proof_missing for sessions that expired without the proof they owed; the
        unauthenticated count of a window that ended."""
        while not self._stopping.wait(1.0):
            now = self.now()
            try:
                self._record_strangers()
            except Exception:   # noqa: BLE001 - that window's count is lost, and logged
                _log.exception("unauthenticated count not recorded")
            for s in self.sessions.all():
                if s.proof_required and not s.proof_accepted and not s.proof_missing and s.state(now) == "expired":
                    try:
                        self.audit.record(AuditEntry(new_id(), now, s.session_id, s.agent_id,
                                                     "deletion_proof_missing",
                                                     None, None, (), False, "session expired without a deletion proof"))
                        self.sessions.put(replace(s, proof_missing=True))
                    except Exception:   # noqa: BLE001 - retried on the next tick
                        _log.exception("deletion_proof_missing not recorded")

    def revoke_remote(self, sid: str) -> None:
        """A revocation record from another of the person's devices (see revocation_of)."""
        s = self.sessions.get(sid)
        if s is None or s.status in ("closed", "revoked"):
            return
        ended = self.sessions.end(s, "revoked", self.now())
        self.audit.record(AuditEntry(new_id(), self.now(), sid, ended.agent_id, "revoked", None, None, (), True,
                                     "session revoked from another device"))

    async def close_session(self, r: HttpRequest) -> Response:
        return await self._end(r, "closed")

    async def revoke(self, r: HttpRequest) -> Response:
        return await self._end(r, "revoked")

    async def list_sessions(self, r: HttpRequest) -> Response:
        if not self._is_admin(r):
            return error(E.INVALID_TOKEN, "admin credential required")
        now = self.now()
        return ok({"sessions": [s.to_json(now) for s in self.sessions.all()]})

    async def validate(self, r: HttpRequest) -> Response:
        """9.5: a token that fails is answered {"valid": false, "error": ...}; a request that is
        no validation request (a body that is not JSON, no token) is the Error Format's 400."""
        try:
            d = await self._json(r)
        except UompError as e:
            return error(E.INVALID_REQUEST, str(e))
        token = d.get("token") if isinstance(d, dict) else None
        if not isinstance(token, str):
            return error(E.INVALID_REQUEST, "token is required")
        try:
            claims = verify(token, self.key, self.now())
        except UompError as e:
            return ok({"valid": False, **error_body(e.error_code, str(e))})
        st = self._state(claims, token)
        d2 = guard.decide(claims, st, self._req("session"))
        if not d2.allowed:
            return ok({"valid": False, **error_body(d2.code or E.ACCESS_DENIED, d2.reason, claims.session_id)})
        return ok({"valid": True, "session_id": claims.session_id, "expires_at": iso(claims.expires_at)})

    async def deletion_proof(self, r: HttpRequest) -> Response:
        try:
            claims, token = self._claims(r)
            s = self._session(r)
            doc = await self._json(r)
        except UompError as e:
            return error(e.error_code, str(e))
        st = self._state(claims, token)
        d = guard.decide(claims, st, self._req("session"))       # steps 3-4b: a live session's own token
        if d.allowed:
            pid = doc.get("deletion_proof_id") if isinstance(doc, dict) else None
            d = guard.check_deletion_proof(claims, s.session_id, s.identity_key, s.deletion_method,
                                           isinstance(pid, str) and self.sessions.proof_seen(pid), doc, self.now())
        if d.allowed:
            assert isinstance(doc, dict)
            if not await run_in_threadpool(self.sessions.accept_proof, doc["deletion_proof_id"], s, doc, self.now()):
                d = guard.Decision(False, E.ACCESS_DENIED, "deletion proof replayed")
        # an accepted proof's id is its entry's key: its DataDeletionProofSubmitted event hashes it
        await self.audit.arecord(AuditEntry(new_id(), self.now(), claims.session_id, claims.agent_id,
                                            "deletion_proof", doc["deletion_proof_id"] if d.allowed else None, None,
                                            (), d.allowed, d.reason))
        if not d.allowed:
            return error(d.code or E.ACCESS_DENIED, d.reason, claims.session_id)
        if claims.task_bound:
            s2 = self.sessions.get(s.session_id) or s
            ended = await run_in_threadpool(self.sessions.end, s2, "closed", self.now())
            await self._log_session(ended, "closed", "task_bound session closed by its deletion proof")
        return ok({"status": "accepted", "deletion_proof_id": doc["deletion_proof_id"]})

    async def audit_log(self, r: HttpRequest) -> Response:
        want = r.query_params.get("session_id")
        claims: Claims | None = None
        if not self._is_admin(r):
            try:
                claims, token = self._claims(r)
            except UompError as e:
                return error(e.error_code, str(e))
            st = self._state(claims, token)
            d = guard.decide(claims, st, self._req("session"))
            if not d.allowed:
                return error(d.code or E.ACCESS_DENIED, d.reason, claims.session_id)
            if want is not None and want != claims.session_id:
                return error(E.ACCESS_DENIED, "another session's audit", claims.session_id)
            want = claims.session_id
        entries = await run_in_threadpool(self.audit.entries, want)
        if claims is None:                 # the person's admin credential: every entry as recorded
            return ok({"entries": [e.to_json() for e in entries]})
        # the token reads its own entries as it was answered: no reason tells of an unseen item,
        # and no item's tags when its allowed_fields withhold them (issue 19, "No oracle")
        hide_tags = claims.allowed_fields is not None and "tags" not in claims.allowed_fields
        return ok({"entries": [replace(e, reason=guard.shown_reason(e.allowed, e.reason),
                                       tags=() if hide_tags else e.tags).to_json() for e in entries]})

    async def read_key(self, scope: Scope, receive: Receive, send: Send) -> None:
        """GET /v1/memory/{key} as routing would deliver it to memory_key, without the Request
        object, the exception middleware and the route scan (the Bar's hot path: a third of its
        CPU).  The same _guard decides; a failure answers as the app's handlers (answers.py)."""
        bearer = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                bearer = _bearer_of(value.decode("latin-1"))
                break
        try:
            resp = await self._guard(bearer, self._req("key", key=scope["path"][len(KEY_PREFIX):]), "read")
        except StoreError as e:
            resp = await store_error(HttpRequest(scope), e)
        except Exception as e:   # noqa: BLE001 - outside Starlette's middleware: answered as it would
            _log.exception("failure on %s", scope["path"])
            resp = await internal_error(HttpRequest(scope), e)
        await resp(scope, receive, send)

    def routes(self) -> list[Route]:
        return [Route(path, getattr(self, name), methods=list(methods)) for path, methods, name in ROUTES]


# The UOMP API's routes: (path, methods, the Uomp method that answers).  The app is built from
# this table and the test that walks every route reads it (tests/agent/test_every_route.py).
ROUTES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("/v1/sessions", ("POST",), "create"),
    ("/v1/sessions", ("GET",), "list_sessions"),
    ("/v1/sessions/{sid}/grant", ("POST",), "grant"),
    ("/v1/sessions/{sid}/close", ("POST",), "close_session"),
    ("/v1/sessions/{sid}/revoke", ("POST",), "revoke"),
    ("/v1/sessions/{sid}/deletion-proof", ("POST",), "deletion_proof"),
    ("/v1/tokens/validate", ("POST",), "validate"),
    ("/v1/audit", ("GET",), "audit_log"),
    ("/v1/memory/aggregate", ("GET",), "memory_aggregate"),
    ("/v1/memory/query", ("POST",), "memory_query"),
    ("/v1/memory", ("GET",), "memory_tag"),
    ("/v1/memory/{key:path}", ("GET", "PUT", "DELETE"), "memory_key"),
)
KEY_PREFIX = "/v1/memory/"
def _bearer_of(h: str) -> str | None:
    return h[7:].strip() if h[:7].lower() == "bearer " else None
