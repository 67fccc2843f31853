"""Connection guards: how long a client may take to send a request, and how many connections it
may hold (STYLE.md 7: cap the work untrusted input can demand).

    connection open ---- request headers ---- request body ---- answer ---- (keep-alive) ----
    |<- OWNMEM_HEADER_TIMEOUT ->|  |<- OWNMEM_BODY_TIMEOUT + bytes / OWNMEM_BODY_MIN_RATE ->|

uvicorn bounds neither: its keep-alive timer runs only between requests and is cancelled by
the first byte of the next one, and nothing times a request body, so a client sending a byte
every few seconds held a connection for ever.  Here:

- ``GuardedH11Protocol`` (uvicorn's h11 protocol, subclassed) gives every request, the first
  of a connection and each after an answer, ``header_timeout`` seconds to complete its
  headers, and what is left of a body the app answered without reading the same time to
  arrive; past it the connection is answered 408 ``timeout`` (when no answer is under way)
  and closed.  It also caps connections per server process (``max_connections``; past it,
  503 ``busy``) and per client address (``per_address``; past it, 429 ``rate_limited``),
  each answered and closed at once.  Peers named trusted proxies are not capped per address:
  every client behind them shares their address.  (uvicorn's own ``limit_concurrency``
  answers in plain text, outside the error registry; this cap replaces it.)
- ``ownmem.asgi.BodyDeadline`` (ASGI middleware, shared with `ownmem agent`) gives a request
  body, from the app's first read, ``grace`` seconds plus the time its bytes need at
  ``min_rate``: a slow link that keeps up the rate finishes whatever its size; one that
  stalls is answered 408 ``timeout``.

All counts are per server process (``--workers N`` multiplies them).  A reverse proxy in
front is still the better place for these limits (docs/decisions.md).
"""
from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from ownmem.asgi import HEADER_TIMEOUT
from ownmem.wire import codec, messages
from ownmem.wire.errors import ErrorCode
from server.ratelimit import client_key

_log = logging.getLogger("ownmem.server")
DEFAULT_TRUSTED = "127.0.0.1,::1"     # uvicorn's own default for X-Forwarded-For


def _env_number(name: str, default: float, *, lo: float) -> float:
    raw = os.environ.get(name)
    value = float(raw) if raw else default
    if not value >= lo:
        raise ValueError(f"{name} must be at least {lo}")
    return value


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    header_timeout: float = HEADER_TIMEOUT
    max_connections: int = 1000
    per_address: int = 64
    trusted_proxies: str = DEFAULT_TRUSTED

    @classmethod
    def from_env(cls) -> ConnectionLimits:
        return cls(header_timeout=_env_number("OWNMEM_HEADER_TIMEOUT", HEADER_TIMEOUT, lo=0.1),
                   max_connections=int(_env_number("OWNMEM_MAX_CONNECTIONS", 1000, lo=1)),
                   per_address=int(_env_number("OWNMEM_CONNECTIONS_PER_ADDRESS", 64, lo=1)),
                   trusted_proxies=os.environ.get("OWNMEM_TRUSTED_PROXIES") or DEFAULT_TRUSTED)

    def trusts(self, host: str) -> bool:
        """Whether ``host`` is a trusted proxy (``*``: every peer is)."""
        spec = [s.strip() for s in self.trusted_proxies.split(",") if s.strip()]
        if "*" in spec:
            return True
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            return host in spec
        for s in spec:
            try:
                if ip in ipaddress.ip_network(s, strict=False):
                    return True
            except ValueError:
                continue
        return False


def raw_answer(code: ErrorCode, message: str, headers: dict[str, str] | None = None) -> bytes:
    """A whole HTTP/1.1 answer of the registry's shape, for a connection that is closed after it."""
    body = codec.dump_json(messages.ErrorBody(code, message).encode())
    head = [f"HTTP/1.1 {code.status} {code.name.replace('_', ' ').title()}", "Content-Type: application/json",
            f"Content-Length: {len(body)}", "Connection: close", *(f"{k}: {v}" for k, v in (headers or {}).items())]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a time limit on request headers and connection caps."""

    limits: ClassVar[ConnectionLimits | None] = None      # read from the environment on first use
    _open: ClassVar[Counter[str]] = Counter()             # this process's connections per address

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if GuardedH11Protocol.limits is None:
            GuardedH11Protocol.limits = ConnectionLimits.from_env()
        self._limits = GuardedH11Protocol.limits
        self._timer: asyncio.TimerHandle | None = None
        self._armed_for: object = None
        self._address = ""
        self._counted = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        host = self.client[0] if self.client else ""
        self._address = client_key({"client": self.client})
        if len(self.connections) > self._limits.max_connections:
            self._refuse(ErrorCode.BUSY, "too many connections to this server", {"Retry-After": "1"})
            return
        if not self._limits.trusts(host):
            if self._open[self._address] >= self._limits.per_address:
                self._refuse(ErrorCode.RATE_LIMITED, "too many connections from this address",
                             {"Retry-After": "1"})
                return
            self._open[self._address] += 1
            self._counted = True
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._counted:
            self._counted = False
            self._open[self._address] -= 1
            if self._open[self._address] <= 0:
                del self._open[self._address]
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._timer is not None and self.cycle is not self._armed_for:
            self._disarm()     # a new request's headers are complete: its body is BodyDeadline's

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._arm()        # the next request's headers (or what is left of an unread body)

    # ---------------------------------------------------------------- the header timer
    def _arm(self) -> None:
        self._disarm()
        self._armed_for = self.cycle
        self._timer = self.loop.call_later(self._limits.header_timeout, self._timed_out)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self) -> None:
        self._timer = None
        if self.transport.is_closing() or self.cycle is not self._armed_for:
            return
        _log.info("closed a connection from %s: no complete request in %g s", self._address,
                  self._limits.header_timeout)
        if self.conn.our_state is h11.IDLE and self.conn.their_state is h11.IDLE:
            self.transport.write(raw_answer(ErrorCode.TIMEOUT, "the request headers took too long"))
        self.transport.close()

    def _refuse(self, code: ErrorCode, message: str, headers: dict[str, str]) -> None:
        _log.info("refused a connection from %s: %s", self._address, message)
        self.transport.write(raw_answer(code, message, headers))
        self.transport.close()
