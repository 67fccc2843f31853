"""The door of the agent port: what every request meets before the SAIHM binding or the UOMP
API reads it (issue 19, "Strangers write nothing"; DESIGN.md "Agent access").

    connection  -- headers within 10 s (TimedHttpTools; the blind server's deadline)
    request     -- Host is 127.0.0.1:PORT or localhost:PORT, else 403     (DNS rebinding)
                -- no Origin header at all, else 403                      (a web page's fetch)
                -- body within 30 s + size / 16 KiB/s (ownmem.asgi.BodyDeadline), else 408
    JSON body   -- parse_json: valid UTF-8, no lone surrogate in any string, else 400

A page on any site can send requests to 127.0.0.1 (Chromium and Firefox let it), and a name the
attacker controls can be re-pointed at 127.0.0.1 (DNS rebinding) so the browser believes the
page's own origin is being read; the first carries an Origin header, the second a Host that is
not this port's.  No client of this port is a browser (agents, `ownmem mcp`, the CLI): none
sends Origin.  Refusals answer in the protocol's error shape (ownmem.agent.answers.refusal):
UOMP's {"error": {"code", "message", "session_id"}} under /v1/, the SAIHM binding's {"error":
code} elsewhere.
"""
from __future__ import annotations

import asyncio
import json
import os
from typing import Any, ClassVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ownmem.agent.answers import refusal
from ownmem.asgi import BODY_GRACE, BODY_MIN_RATE, HEADER_TIMEOUT
from ownmem.saihm.errors import B
from ownmem.uomp.errors import ErrorCode as E, HttpRefusal

# headers that never completed name no path: the answer is the SAIHM binding's (the port's first)
_TIMEOUT_BODY = json.dumps({"error": B.TIMEOUT.value}, separators=(",", ":")).encode()
_TIMED_OUT = (f"HTTP/1.1 {B.TIMEOUT.status} Request Timeout\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(_TIMEOUT_BODY)}\r\nConnection: close\r\n\r\n").encode() + _TIMEOUT_BODY


class TimedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol (the agent's, for the Guard's hot path) with the blind
    server's header deadline (server.guard.GuardedH11Protocol does it for h11): each request's
    headers, the first of a connection and each after an answer, must be complete within
    ``header_timeout`` seconds, or the connection is answered 408 (when no answer is under way)
    and closed.  uvicorn's keep-alive timer is cancelled by the first byte of the next request,
    so a client sending a byte every few seconds held the port for ever."""

    header_timeout: ClassVar[float] = HEADER_TIMEOUT
    _timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._timer = self.loop.call_later(self.header_timeout, self._timed_out)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self) -> None:
        self._timer = None
        if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
            return            # a request is being answered: not a stalled header
        self.transport.write(_TIMED_OUT)
        self.transport.close()


def header_timeout() -> float:
    t = float(os.environ.get("OWNMEM_HEADER_TIMEOUT") or HEADER_TIMEOUT)
    if not t > 0:
        raise ValueError("OWNMEM_HEADER_TIMEOUT must be positive")
    return t


def body_limits() -> tuple[float, float]:
    """(grace seconds, bytes per second) for BodyDeadline: the blind server's variables
    OWNMEM_BODY_TIMEOUT and OWNMEM_BODY_MIN_RATE, and its defaults."""
    grace = float(os.environ.get("OWNMEM_BODY_TIMEOUT") or BODY_GRACE)
    rate = float(os.environ.get("OWNMEM_BODY_MIN_RATE") or BODY_MIN_RATE)
    if not (grace > 0 and rate > 0):
        raise ValueError("OWNMEM_BODY_TIMEOUT and OWNMEM_BODY_MIN_RATE must be positive")
    return grace, rate


def foreign(headers: list[tuple[bytes, bytes]], port: int) -> str | None:
    """Why a request's Host or Origin is refused, or None.  Pure."""
    hosts = [v for k, v in headers if k == b"host"]
    allowed = {f"127.0.0.1:{port}".encode(), f"localhost:{port}".encode()}
    if len(hosts) != 1 or hosts[0].lower() not in allowed:
        return "the Host is not this port's (127.0.0.1 or localhost)"
    if any(k == b"origin" for k, _ in headers):
        return "requests from a web page (an Origin header) are refused"
    return None


class Door:
    """ASGI middleware: Host and Origin checked on every HTTP request."""

    def __init__(self, app: ASGIApp, port: int) -> None:
        self.app, self.port = app, port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            why = foreign(scope["headers"], self.port)
            if why is not None:
                await refusal(scope["path"], E.ACCESS_DENIED, B.FORBIDDEN, why)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _lone_surrogate(doc: Any) -> bool:
    """Whether any string in the parsed JSON (keys too) holds a lone surrogate (JSON's
    "\\ud800" escape parses to one; it is no Unicode text and fails at the first encode)."""
    stack = [doc]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            try:
                x.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return False


def parse_json(raw: bytes) -> Any:
    """A request body as JSON text, or ValueError: not UTF-8 (UnicodeDecodeError is one), not
    JSON, nested too deep, or a string that is not Unicode text (a lone surrogate)."""
    try:
        doc = json.loads(raw) if raw else None
    except RecursionError:
        raise ValueError("nested too deep") from None
    if _lone_surrogate(doc):
        raise ValueError("a string holds a lone surrogate")
    return doc


async def body_timeout(r: Request, e: Exception) -> Response:
    """ownmem.asgi.BodyTimeout, raised by BodyDeadline's receive, in the protocol's shape."""
    return refusal(r.url.path, E.INVALID_REQUEST, B.TIMEOUT, "the request body did not arrive in time",
                   http=HttpRefusal.BODY_TIMEOUT)
