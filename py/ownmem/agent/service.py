"""`ownmem agent`: the person's custodial SAIHM operator on their own machine (DESIGN.md
"Processes", "Agent access"; SAIHM "HTTPS binding").

    unlock once (passphrase prompt, OWNMEM_PASSPHRASE, or the OS keyring when opted in)
      -> index the visible memories (recall_index.py, in memory only)
      -> sync in a background thread, live (Syncer.watch under the operator's lock); on a vault
         linked to no server, local-only (agent/local.py: a local receipts log), joining the
         server once the vault is linked
      -> serve 127.0.0.1:9374 only:
           POST /saihm  {"method": <tool>, "params": {...}}   Authorization: Bearer <credential>
             2xx: the tool's result (an array for saihm_recall), no envelope
             4xx/5xx: {"error": <code>}  (ownmem.saihm.errors: the codes per tool of the
                      spec, plus invalid_params, unknown_method, not_enabled, ...)
           GET /health  {"status": "ok"}  (no credential, says nothing of the vault)

While it serves, ``agent-port.json`` in the vault folder says where (host, port, pid): written as
it starts to serve, removed at stop (``port.PortFile``); `ownmem agent connect` reads it.

Any other bind address is refused before the vault is unlocked: the service hands out
plaintext to whoever holds a credential, and the transport is plain HTTP on loopback
(the client's 127.0.0.1 exception).  Remote hosts reach the same tools through MCP at /mcp on
a listener of their own, with TLS and OAuth (ownmem.mcp.remote, `--public-url`).
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ownmem.agent.answers import HANDLERS, ok, saihm_error
from ownmem.agent.credentials import Credential, CredentialFile, authenticate
from ownmem.agent.door import parse_json
from ownmem.agent.guarded import SaihmGuard
from ownmem.agent.local import join
from ownmem.agent.operator import Operator, OperatorError
from ownmem.agent.port import PATH
from ownmem.errors import OwnmemError
from ownmem.saihm.errors import B
from ownmem.uomp.tokens import Claims

_log = logging.getLogger("ownmem.agent")

MAX_REQUEST = 2 << 20      # a memory of MAX_CONTENT characters, JSON-escaped, fits
GOVERNANCE = ("saihm_governance_propose", "saihm_governance_vote")
TOOLS = ("saihm_remember", "saihm_recall", "saihm_forget", "saihm_status", "saihm_share",
         "saihm_revoke_share", *GOVERNANCE)


# The SAIHM binding's routes: (path, methods, the Binding method that answers).  The app is built
# from this table and the test that walks every route reads it (tests/agent/test_every_route.py).
ROUTES: tuple[tuple[str, tuple[str, ...], str], ...] = ((PATH, ("POST",), "saihm"), ("/health", ("GET",), "health"))


class Binding:
    """The HTTP layer: read a bounded JSON body, authenticate, dispatch through the Guard
    (``guard``: guarded.SaihmGuard, set once the UOMP API is mounted; none, every call is
    refused: nothing is served that was not decided and audited), answer."""

    def __init__(self, op: Operator, creds: CredentialFile, now: Callable[[], int] = lambda: int(time.time())) -> None:
        self.op, self.creds, self.now = op, creds, now
        self.tools: dict[str, Callable[[Credential, dict[str, Any]], Any]] = {
            "saihm_remember": op.remember, "saihm_recall": op.recall, "saihm_forget": op.forget,
            "saihm_status": op.status, "saihm_share": op.share, "saihm_revoke_share": op.revoke_share}
        self.guard: SaihmGuard | None = None

    async def _body(self, request: Request) -> bytes | None:
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_REQUEST):
            return None
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_REQUEST:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    async def saihm(self, request: Request) -> Response:
        cred = authenticate(await run_in_threadpool(self.creds.all), request.headers.get("authorization"), self.now())
        if cred is None:
            return saihm_error(B.UNAUTHENTICATED)
        try:
            raw = await self._body(request)
        except ClientDisconnect:
            return saihm_error(B.INVALID_PARAMS)
        if raw is None:
            return saihm_error(B.REQUEST_TOO_LARGE)
        try:
            doc = parse_json(raw)      # not UTF-8 text, or a lone surrogate: 400, not a 503 later
        except ValueError:
            return saihm_error(B.INVALID_PARAMS)
        if not isinstance(doc, dict) or not isinstance(doc.get("method"), str):
            return saihm_error(B.INVALID_PARAMS)
        method, params = doc["method"], doc.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return saihm_error(B.INVALID_PARAMS)
        try:
            result = await run_in_threadpool(self.dispatch, cred, method, params, len(raw))
        except OperatorError as e:
            return saihm_error(e.error)
        return ok(result)

    def dispatch(self, cred: Credential, method: str, params: dict[str, Any], size: int,
                 claims: Claims | None = None) -> Any:
        """One tool call of an authenticated caller, decided by the Guard -> its result, or
        OperatorError.  The /saihm route and the MCP door (agent/remote.py: ``claims`` of the
        remote host's verified token) both call this, so both answer alike."""
        if method in GOVERNANCE:
            raise OperatorError(B.GOVERNANCE_DISABLED)
        fn = self.tools.get(method)
        if fn is None:
            raise OperatorError(B.NOT_ENABLED if method in TOOLS else B.UNKNOWN_METHOD)
        guard = self.guard
        if guard is None:
            raise OperatorError(B.OPERATOR_STORAGE_UNAVAILABLE)
        self.creds.touch(cred, self.now())
        try:
            return guard.call(cred, method, fn, params, size, claims)
        except OperatorError:
            raise
        except OwnmemError as e:
            _log.warning("%s failed: %s", method, type(e).__name__)
            raise OperatorError(B.OPERATOR_STORAGE_UNAVAILABLE) from None

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    def app(self) -> Starlette:
        # one place turns an error into an answer (answers.HANDLERS), for the binding's routes and
        # for the UOMP API's, mounted into this app
        return Starlette(routes=[Route(path, getattr(self, name), methods=list(methods))
                                 for path, methods, name in ROUTES], exception_handlers=HANDLERS)


class SyncThread:
    """Syncer.watch in a daemon thread, restarted after any failure (the server may be down
    at start, or go away): the service keeps answering from the local vault meanwhile."""

    def __init__(self, op: Operator) -> None:
        self.op = op
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="ownmem-agent-sync", daemon=True)

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.op.syncer.watch(lambda report: None, stop=self.stopping.is_set)
                if join(self.op):           # a local-only vault was linked: sync with its server now
                    continue
            except OwnmemError as e:
                _log.info("sync failed (%s): retrying", e)
            except Exception:   # noqa: BLE001 - a sync bug must not end the service; it is logged
                _log.exception("sync failed unexpectedly: retrying")
            self.stopping.wait(2.0)

    def start(self) -> SyncThread:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
