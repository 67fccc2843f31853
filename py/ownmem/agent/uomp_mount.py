"""The UOMP API put together on `ownmem agent`'s app (DESIGN.md "Agent access"): the API
(uomp_api.Uomp) keyed from the unlocked vault, its item view kept in step with the operator's
refreshes, owner-signed revocations from the person's other devices honoured, its sessions
published (published.py) and its audit batched, anchored and synced (audit_sync.py), with the
admin route POST /v1/audit/prune; and the ASGI app served around it (KeyReads: the hot path)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ownmem.agent.answers import error, ok
from ownmem.agent.audit import AUDIT_INFO
from ownmem.agent.audit_sync import INTERVAL, INTERVAL_ENV, AuditSync
from ownmem.agent.operator import Operator
from ownmem.agent.published import attach as attach_published
from ownmem.agent.recall_index import RecallEntry
from ownmem.agent.retention import (
    RETENTION_DAYS_ENV,
    RETENTION_PERIOD_ENV,
    RetentionRefused,
    prune_cutoff,
    retention_days,
    retention_period,
)
from ownmem.agent.ticker import Ticker
from ownmem.agent.uomp_api import KEY_PREFIX, NO_GROUP_COMMIT_ENV, ROUTES, Uomp
from ownmem.uomp import approval
from ownmem.uomp.control import Revocation
from ownmem.uomp.errors import ErrorCode as E
from ownmem.uomp.tokens import AUTH_INFO

# the admin route attach_audit mounts: (path, methods, what answers it), as uomp_api.ROUTES
PRUNE_ROUTE: tuple[str, tuple[str, ...], str] = ("/v1/audit/prune", ("POST",), "attach_audit's prune")
# every route of the UOMP API on the agent's app (the SAIHM binding's: service.ROUTES)
SERVED = (*ROUTES, PRUNE_ROUTE)

def mount(app: Starlette, op: Operator, folder: Path, port: int) -> Uomp:
    """Mount the UOMP API in the agent's app, keyed from the unlocked vault, with its item view
    kept in step with the operator's index (rebuilt after every refresh)."""
    v = op.v
    # the bench's anchor only (benchmarks/uomp_bench.py): the uomp-core MVP's one fsync per
    # audit entry; as durable, only slower
    group = os.environ.get(NO_GROUP_COMMIT_ENV) != "1"
    u = Uomp(Path(folder), v.purpose_key(AUTH_INFO), v.purpose_key(AUDIT_INFO), port=port,
             search=lambda q, allowed, limit, cursor, tie: _cells(op.index.page(
                 q, lambda e: allowed(e.cell_id), limit, cursor, lambda e: tie(e.cell_id))),
             group_commit=group,
             approval_key=v.purpose_key(approval.APPROVAL_INFO))
    inner = op.refresh
    built = [-1]          # the operator's version the item view was built from
    started = [False]

    def refresh() -> None:
        with op.lock:
            inner()
            if op.version != built[0]:
                u.items.rebuild(op.item_heads(), op._opened)  # noqa: SLF001 - the item view is built from the operator's opened memories
                built[0] = op.version
            # the first time, all the operator opened before the API was mounted; then only what
            # each refresh opened (revoke_remote is idempotent: one opened again changes nothing)
            if started[0]:
                fresh = [op._opened[oid][0] for oid in op.added if oid in op._opened]  # noqa: SLF001 - the item view is built from the operator's opened memories
            else:
                fresh, started[0] = [e for e, _, _ in op._opened.values()], True  # noqa: SLF001 - the item view is built from the operator's opened memories
        for e in fresh:
            sid = revocation_of(e)
            if sid is not None:
                u.revoke_remote(sid)
    # the operator calls self.refresh after syncs, writes and erasures: wrapped, so the view follows
    op.refresh = refresh  # type: ignore[method-assign]
    refresh()
    attach_published(u, op, Path(folder))   # session records for the person's other devices
    attach_audit(u, op, Path(folder), app)   # the audit for them too, in anchored batches
    app.router.routes.extend(u.routes())
    return u


def attach_audit(u: Uomp, op: Operator, folder: Path, app: Starlette) -> AuditSync:
    """Start batching the audit of ``u`` (uomp_api.Uomp) over operator ``op``, whose agent write
    attempts it records too; mount the admin route ``POST /v1/audit/prune {"before": unix
    seconds}`` on ``app``."""
    # the batch tick ("every N minutes or every M events"): INTERVAL unless the environment says
    interval = float(os.environ.get(INTERVAL_ENV) or INTERVAL)
    s = AuditSync(op, u, Path(folder), interval=interval if interval > 0 else INTERVAL, now=u.now)
    u.audit.on_commit = s.committed
    op.use_audit(u.audit)         # agent write attempts are entries of this audit too (staging.WriteAudit)
    u.before_close = s.stop

    async def prune(r: Request) -> Response:
        raw = await r.body()
        # the person's proof, not the file
        refused: Response | None = await u.approvals.refuse_unapproved(r, raw, "pruning the audit")
        if refused is not None:
            return refused
        try:
            d = json.loads(raw or b"{}")
            before = d.get("before") if isinstance(d, dict) else None
            if type(before) is not int or before < 0:
                raise ValueError
        except ValueError:
            return error(E.INVALID_REQUEST, "before must be a non-negative integer (Unix seconds)")
        try:
            pruned, forgotten = await run_in_threadpool(s.prune, before)
        except RetentionRefused as e:     # inside the retention by this service's clock: nothing deleted
            return error(E.INVALID_REQUEST, str(e))
        return ok({"pruned": pruned, "forgotten": forgotten})

    app.router.routes.append(Route(PRUNE_ROUTE[0], prune, methods=list(PRUNE_ROUTE[1])))
    # 18.3: the retention kept by the service itself, at its start and daily, whoever types what
    days = retention_days(os.environ.get(RETENTION_DAYS_ENV))
    pruner = Ticker("ownmem-uomp-retention", retention_period(os.environ.get(RETENTION_PERIOD_ENV)),
                    lambda: s.prune(prune_cutoff(u.now(), days=days)), "audit retention not applied")
    stop_batches = u.before_close

    def stop() -> None:
        pruner.stop()
        stop_batches()
    u.before_close = stop
    pruner.start()
    pruner.wake()                 # at once: a service down for months prunes when it comes back
    return s.start()


class KeyReads:
    """The ASGI app the agent serves, around the Starlette app: GET /v1/memory/{key} straight
    to Uomp.read_key (what the router would pick: every GET under /v1/memory/ but
    /v1/memory/aggregate), outside even Starlette's error middleware; all else unchanged."""

    def __init__(self, app: ASGIApp, u: Uomp) -> None:
        self.app, self.u = app, u

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] == "http" and scope["method"] == "GET" and scope["path"].startswith(KEY_PREFIX)
                and scope["path"] != "/v1/memory/aggregate" and not scope.get("root_path")):
            await self.u.read_key(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def revocation_of(e: Any) -> str | None:
    """The session id an owner-signed revocation record names, or None (control.Revocation.parse:
    the blind server that carries it, or an agent writing memories, cannot forge one)."""
    r = Revocation.parse(e.opened)
    return None if r is None else r.session_id


def _cells(got: tuple[list[RecallEntry], str | None]) -> tuple[list[bytes], str | None]:
    return [e.cell_id for e in got[0]], got[1]
