"""The blind server's HTTP layer (Starlette).  Thin: parse, check, call storage, answer.

Requests and answers are the typed messages of ``ownmem.wire``.  Every answer that is
not 2xx -- a refusal, an unknown route, a wrong method, an unexpected failure -- is
``{"error": code, "message": text}`` with a code of the registry ``ownmem.wire.errors.ErrorCode``
and that code's status; nothing is stored unless every check of the request passed, and
a failure is logged here once, never shown to the client.  Public routes: health, vault
lookup (salt and public keys, what a new device needs), login challenge and
session, the receipt log, the erasure list, the OpenAPI document and the PWA.
Everything else needs a bearer credential for that very vault.

What a request may demand is capped before the work it asks for (STYLE.md 7;
docs/decisions.md, "What a stranger can make the server do"): a public route and a failed
credential are charged to the client's address, never to a vault; a vault's own budget is
charged only once its credential checked; registrations are limited per address and per key
set; a vault's cells and wrapped DEKs are held to a quota; a push verifies each cellId once,
and none the vault holds already; bodies and headers arrive in bounded time (guard.py).  A
well-formed name the server does not hold answers as a vault would, with a decoy's keys
(decoy.py): a lookup tells nobody which names exist.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ownmem.asgi import BodyDeadline, BodyTimeout
from ownmem.wire import messages
from ownmem.wire.errors import ErrorCode
from server.context import ApiError, Config, Context
from server.device_routes import device_routes
from server.openapi import OPENAPI
from server.ratelimit import client_key
from server.share_routes import share_routes, sweep_every, sweep_expired
from server.tlog_routes import log_routes
from server.vault_routes import vault_routes
from server.web import web_routes
from server.witness_routes import witness_routes

E = ErrorCode
_log = logging.getLogger("ownmem.server")


# ---------------------------------------------------------------- every answer that is not 2xx

def refusal(code: ErrorCode, message: str, headers: Mapping[str, str] | None = None,
            vault: str | None = None) -> Response:
    """The one shape of every answer that is not 2xx (``keys_registered`` adds the vault it names)."""
    body = messages.ErrorBody(code, message).encode()
    if vault is not None:
        body["vault"] = vault
    return JSONResponse(body, status_code=code.status, headers=headers)


# what Starlette raises itself: no route for the path (also a file the web mount lacks), and a
# route that does not take the method (with Allow)
_STARLETTE = {404: E.NOT_FOUND, 405: E.METHOD_NOT_ALLOWED}


async def _answer(request: Request, exc: Exception) -> Response:
    if isinstance(exc, ApiError):
        return refusal(exc.code, exc.message, exc.headers, exc.vault)
    assert isinstance(exc, HTTPException)
    code = _STARLETTE.get(exc.status_code)
    if code is None:   # e.g. a web file the server may not read: the server's fault, not the request's
        _log.error("unexpected HTTP %d answering %s %s", exc.status_code, request.method, request.url.path)
        return refusal(E.INTERNAL, E.INTERNAL.description)
    return refusal(code, code.description, exc.headers)


class LastResort:
    """Outermost but for Starlette's own: an exception no handler took is logged here once,
    with its traceback, and answered as the JSON 500 if nothing was sent yet; the client
    never sees a traceback.  Once a streamed answer has started, the connection is cut."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except ClientDisconnect:   # the client left while sending: there is no one to answer
            _log.info("the client left before its request was read: %s %s", scope.get("method"), scope.get("path"))
        except BodyTimeout as e:
            _log.info("%s: %s %s from %s", e, scope.get("method"), scope.get("path"), client_key(scope))
            if not started:
                await refusal(E.TIMEOUT, str(e), {"Connection": "close"})(scope, receive, send)
        except Exception:   # noqa: BLE001 (the last resort: any failure is logged once and answered 500)
            _log.exception("unexpected error answering %s %s", scope.get("method"), scope.get("path"))
            if not started:
                await refusal(E.INTERNAL, E.INTERNAL.description)(scope, receive, send)


def create_app(config: Config | None = None) -> Starlette:
    """The app: every route module's routes over one ``Context``, in the order they must match."""
    cfg = config or Config.from_env()
    ctx = Context(cfg)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "backend": type(ctx.storage).__name__.replace("Storage", "").lower()})

    async def openapi(request: Request) -> Response:
        return JSONResponse(OPENAPI)

    vaults, log_listing = vault_routes(ctx)
    routes: list[BaseRoute] = [
        Route("/health", health),
        Route("/openapi.json", openapi),
        *vaults,
        *witness_routes(ctx),
        *device_routes(ctx),
        log_listing[0],                 # GET /v1/log
        # before /v1/log/{receipt_id}, which would take /v1/log/checkpoint; public: paid by the address
        *log_routes(ctx),
        *log_listing[1:],               # GET /v1/log/{receipt_id}, GET /v1/erasures
        *share_routes(ctx),     # sharing between people: the holder directory, contracts, shared cells
        *web_routes(cfg.web_dir),       # "/" and, last, the built bundle
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await ctx.live.start()
        ctx.verifier.start()
        sweeper = asyncio.create_task(sweep_expired(ctx, sweep_every()))   # expired shares' keys
        try:
            yield
        finally:
            sweeper.cancel()
            await ctx.live.stop()
            ctx.verifier.close()
            ctx.storage.close()

    app = Starlette(routes=routes, lifespan=lifespan,
                    middleware=[Middleware(LastResort),
                                Middleware(BodyDeadline, grace=cfg.body_timeout, min_rate=cfg.body_min_rate)],
                    exception_handlers={ApiError: _answer, HTTPException: _answer})
    app.state.server = ctx
    return app
