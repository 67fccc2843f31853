"""ASGI guards both servers use (the blind server and `ownmem agent`): a request body's deadline.

``BodyDeadline`` (ASGI middleware) gives a request body, from the app's first read, ``grace``
seconds plus the time its bytes need at ``min_rate``: a slow link that keeps up the rate
finishes whatever its size; one that stalls raises ``BodyTimeout``, which each app answers
408 in its own protocol's error shape.  uvicorn times no request body, so a client sending a
byte every few seconds held a connection for ever (STYLE.md 7: cap the work untrusted input
can demand).
"""
from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ownmem.errors import OwnmemError

# The defaults of OWNMEM_HEADER_TIMEOUT, OWNMEM_BODY_TIMEOUT and OWNMEM_BODY_MIN_RATE, the same
# for both servers.
HEADER_TIMEOUT = 10.0              # seconds for a request's headers
BODY_GRACE = 30.0                  # seconds for a request body, from the app's first read
BODY_MIN_RATE = 16384.0            # bytes per second beyond it


class BodyTimeout(OwnmemError):
    """The request body did not arrive in time (answered 408 ``timeout``)."""

    code = "body_timeout"


class BodyDeadline:
    """ASGI middleware: a request body arrives within ``grace`` + its size / ``min_rate`` seconds
    of the app's first read, or reading it raises ``BodyTimeout``."""

    def __init__(self, app: ASGIApp, grace: float, min_rate: float) -> None:
        self.app, self.grace, self.min_rate = app, grace, min_rate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        started: float | None = None
        received = 0
        done = False

        async def bounded() -> Message:
            nonlocal started, received, done
            if done:                 # the body is in: what follows is waiting for a disconnect
                return await receive()
            now = loop.time()
            started = now if started is None else started
            left = started + self.grace + received / self.min_rate - now
            try:
                if left <= 0:
                    raise TimeoutError
                async with asyncio.timeout(left):
                    message = await receive()
            except TimeoutError:
                raise BodyTimeout(f"the request body did not arrive in time ({received} bytes received)") from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                done = not message.get("more_body", False)
            else:
                done = True
            return message

        await self.app(scope, bounded, send)
