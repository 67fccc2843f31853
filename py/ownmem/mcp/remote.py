"""The remote door of `ownmem agent`: MCP over Streamable HTTP at /mcp for hosts that reach the
person's machine from their own clouds (Claude, ChatGPT), behind OAuth 2.1 (issue 21; MCP
"Authorization"; RFC 9728, RFC 8414; UOMP draft-00 "Deployment Profiles" remote).

    https://NAME (--public-url), TLS 1.3 only (stdlib ssl through uvicorn), on --public-bind
      PublicDoor   Host is the public URL's (DNS rebinding), Origin absent or the public origin,
                   a token bucket per client address (429), bodies bounded in size and time
      OAuth        the authorization server's routes (ownmem.agent.oauth: metadata, /authorize,
                   the consent page, /token, /register, /revoke)
      /mcp         Bearer: a UOMP capability token (profile "remote", audience this URL), else 401
                   with WWW-Authenticate resource_metadata -> the SDK's Streamable HTTP (both
                   revisions it serves) -> the eight SAIHM tools of `ownmem mcp` (ownmem.mcp.server,
                   the same names, schemas, annotations and framing) -> Binding.dispatch in this
                   process (InProcess: no second hop): the same Guard, audit and operator

The admin credential and the UOMP local-profile API are never served here: they stay on the
127.0.0.1 port.  Nothing here reads a forwarded-for header: behind a reverse proxy every host
shares the proxy's address (and so its rate bucket).
"""
from __future__ import annotations

import json
import math
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import uvicorn
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ownmem.agent.credentials import Credential
from ownmem.agent.door import TimedHttpTools
from ownmem.agent.oauth import RemoteAccess
from ownmem.agent.service import MAX_REQUEST, Binding
from ownmem.agent.tools import OperatorError
from ownmem.asgi import BodyDeadline
from ownmem.binding.transport import Answer, Call, Failure, interpret
from ownmem.errors import MalformedInput
from ownmem.mcp.server import Session, build_server
from ownmem.saihm.errors import B
from ownmem.uomp.tokens import Claims

MCP_PATH = "/mcp"
RATE = 50.0            # requests a second per client address, sustained (OWNMEM_PUBLIC_RATE)
BURST = 4             # seconds of the rate at once: a burst of 4 x OWNMEM_PUBLIC_RATE
MAX_ADDRESSES = 10_000 # buckets kept; the least recently seen goes first
LOOPBACK = ("127.0.0.1", "localhost")


# ---------------------------------------------------------------------------- pure
@dataclass(frozen=True, slots=True)
class PublicUrl:
    """Where hosts reach this service: https://NAME[:PORT], or http on loopback (a host on this
    machine, and tests: the MCP authorization spec allows http only for localhost)."""

    origin: str                  # scheme://host[:port], as the person gave it, lower-case
    hosts: frozenset[bytes]      # the Host header values that name it

    @property
    def tls(self) -> bool:
        return self.origin.startswith("https://")

    @property
    def resource(self) -> str:
        return self.origin + MCP_PATH

    @classmethod
    def parse(cls, value: str) -> PublicUrl:
        try:
            u = urlsplit(value.strip())
            port = u.port
        except ValueError:
            raise MalformedInput("--public-url is not a URL") from None
        host = (u.hostname or "").lower()
        if u.scheme not in ("https", "http") or not host or u.username is not None or u.password is not None \
                or u.query or u.fragment or u.path not in ("", "/"):
            raise MalformedInput("--public-url is https://NAME or https://NAME:PORT (no path, query or user)")
        if u.scheme == "http" and host not in LOOPBACK:
            raise MalformedInput("--public-url must be https: a remote host sends its tokens over it "
                                 "(http only for 127.0.0.1 or localhost, a host on this machine)")
        default = 443 if u.scheme == "https" else 80
        netloc = host if port in (None, default) else f"{host}:{port}"
        hosts = {netloc, f"{host}:{port or default}"}
        return cls(f"{u.scheme}://{netloc}", frozenset(h.encode() for h in hosts))


def foreign(headers: list[tuple[bytes, bytes]], url: PublicUrl) -> str | None:
    """Why a request's Host or Origin is refused at the public door, or None.  Pure.
    Hosts call from their servers (no Origin); the consent page posts to itself (its own
    origin); a page elsewhere that makes the person's browser call here carries its own."""
    hosts = [v for k, v in headers if k == b"host"]
    if len(hosts) != 1 or hosts[0].lower() not in url.hosts:
        return "the Host is not this service's public name"
    origins = [v for k, v in headers if k == b"origin"]
    if origins and (len(origins) != 1 or origins[0].lower().decode("latin-1") != url.origin):
        return "requests from another site's page (a foreign Origin) are refused"
    return None


class Buckets:
    """A token bucket per client address: ``take`` -> 0 (go on) or the seconds to wait."""

    def __init__(self, rate: float = RATE, burst: int = int(BURST * RATE),
                 now: Callable[[], float] = time.monotonic) -> None:
        if not (rate > 0 and burst >= 1):
            raise ValueError("the rate limit must be positive")
        self.rate, self.burst, self.now = rate, burst, now
        self._b: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, address: str) -> float:
        with self._lock:
            t = self.now()
            tokens, last = self._b.pop(address, (float(self.burst), t))
            tokens = min(float(self.burst), tokens + (t - last) * self.rate)
            wait = 0.0 if tokens >= 1 else (1 - tokens) / self.rate
            self._b[address] = (tokens - 1 if wait == 0 else tokens, t)
            while len(self._b) > MAX_ADDRESSES:
                self._b.popitem(last=False)
            return wait


# ---------------------------------------------------------------------------- I/O
class AuthServer(Protocol):
    """What the door needs of the OAuth authorization server (ownmem.agent.oauth.OAuthServer)."""

    resource_url: str

    def routes(self) -> list[BaseRoute]: ...

    async def verify_token(self, token: str) -> AccessToken | None: ...


class PublicDoor:
    """ASGI middleware in front of everything public: Host and Origin, then the rate."""

    def __init__(self, app: ASGIApp, url: PublicUrl, buckets: Buckets) -> None:
        self.app, self.url, self.buckets = app, url, buckets

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            why = foreign(scope["headers"], self.url)
            if why is not None:
                await JSONResponse({"error": "forbidden", "error_description": why}, 403,
                                   headers={"Cache-Control": "no-store"})(scope, receive, send)
                return
            client = scope.get("client")
            wait = self.buckets.take(client[0] if client else "")
            if wait:
                await JSONResponse({"error": "rate_limited", "error_description": "too many requests"}, 429,
                                   headers={"Retry-After": str(max(1, math.ceil(wait))),
                                            "Cache-Control": "no-store"})(scope, receive, send)
                return
        await self.app(scope, receive, send)


def access_of(ctx: ServerRequestContext[Any]) -> tuple[Credential, Claims]:
    """The caller of this MCP request: the verified token the bearer middleware put on it."""
    request = ctx.request
    user = getattr(request, "user", None) if request is not None else None
    token = getattr(user, "access_token", None)
    if not isinstance(token, RemoteAccess):
        raise OperatorError(B.UNAUTHENTICATED)   # not reachable behind RequireAuthMiddleware
    return token.credential, token.capability


class InProcess:
    """A Sender (ownmem.mcp.server) that hands the call to the Binding in this process, read
    back exactly as `ownmem mcp` reads an HTTP answer (binding.transport.interpret)."""

    def __init__(self, binding: Binding, cred: Credential, claims: Claims) -> None:
        self.binding, self.cred, self.claims = binding, cred, claims

    async def send(self, call: Call) -> Answer | Failure:
        body = call.body()
        try:
            result = await run_in_threadpool(self.binding.dispatch, self.cred, call.method,
                                              dict(call.params), len(body), self.claims)
        except OperatorError as e:
            return interpret(e.error.status, b"", "application/json", json.dumps({"error": e.error.value}).encode())
        raw = json.dumps(result, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
        return interpret(200, b"OK", "application/json", raw)


class RemoteMcp:
    """The public app: the OAuth routes and /mcp, behind the door."""

    def __init__(self, binding: Binding, oauth: AuthServer, url: PublicUrl, buckets: Buckets | None = None,
                 body_limits: tuple[float, float] | None = None) -> None:
        self.binding, self.oauth, self.url = binding, oauth, url
        self.buckets = buckets or Buckets()
        self.body_limits = body_limits
        self._holders: dict[str, str | None] = {}     # credential id -> the holderId its status learned

    def _session(self, ctx: ServerRequestContext[Any]) -> Session:
        cred, claims = access_of(ctx)
        s = _Remembering(InProcess(self.binding, cred, claims), self._holders, cred.id)
        s.holder_id = self._holders.get(cred.id)
        return s

    def app(self) -> ASGIApp:
        server = build_server(self._session)
        security = TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                             allowed_hosts=[h.decode() for h in self.url.hosts],
                                             allowed_origins=[self.url.origin])
        manager = StreamableHTTPSessionManager(app=server, security_settings=security,
                                               max_request_body_size=MAX_REQUEST)
        metadata = AnyHttpUrl(resource_metadata_url(self.url))
        routes: list[BaseRoute] = [*self.oauth.routes(),
                                   Route(MCP_PATH, RequireAuthMiddleware(StreamableHTTPASGIApp(manager), [], metadata))]
        # the bearer is checked against this URL by verify_token (audience): not again by the SDK
        starlette = Starlette(routes=routes, lifespan=lambda _app: manager.run(), middleware=[
            Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(self.oauth)),
            Middleware(AuthContextMiddleware)])
        inner: ASGIApp = starlette
        if self.body_limits is not None:
            inner = BodyDeadline(starlette, grace=self.body_limits[0], min_rate=self.body_limits[1])
        return PublicDoor(inner, self.url, self.buckets)


class _Remembering(Session):
    """A Session whose holderId, once its status learns it, outlives the request (the next
    recall of the same grant need not ask for it again)."""

    def __init__(self, sender: InProcess, holders: dict[str, str | None], key: str) -> None:
        super().__init__(sender)
        self._holders, self._key = holders, key

    async def call(self, tool: str, args: Any) -> Any:
        try:
            return await super().call(tool, args)
        finally:
            self._holders[self._key] = self.holder_id


def resource_metadata_url(url: PublicUrl) -> str:
    """RFC 9728 section 3.1: the well-known path inserted before the resource's path."""
    return f"{url.origin}/.well-known/oauth-protected-resource{MCP_PATH}"


def tls13(config: uvicorn.Config, default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
    """uvicorn's context from the person's certificate and key, TLS 1.3 and nothing older."""
    ctx = default()
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    return ctx


def _bound(host: str, port: int) -> socket.socket:
    """A socket bound to host:port, or OSError (uvicorn's own bind_socket exits the process)."""
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and without
    # it Nagle and delayed ACKs add 40 ms to every answer
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


class PublicServer:
    """The public listener, in a thread of its own (uvicorn's signals stay with the local one)."""

    def __init__(self, app: ASGIApp, host: str, port: int, cert: str | None, key: str | None) -> None:
        self.config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                                     proxy_headers=False, http=TimedHttpTools, lifespan="on",
                                     ssl_certfile=cert, ssl_keyfile=key,
                                     ssl_context_factory=None if cert is None else tls13)
        self.config.load()          # a bad certificate or key fails here, before the thread
        self.socket = _bound(host, port)            # and a port in use (OSError), in the caller's thread
        self.server = uvicorn.Server(self.config)
        self.thread = threading.Thread(target=self.server.run, args=([self.socket],), name="ownmem-agent-public",
                                       daemon=True)

    def start(self) -> PublicServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
