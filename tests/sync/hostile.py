"""A hostile sync server: a real HTTP server between a device and a real ownmem server.

Every request is forwarded to the real server; the test scripts what comes back.  So the
device under test (the CLI's sync client, or the browser's worker pointed at ``url``)
talks to something that holds every byte the real server holds and can lie with all of
them: replay, roll back, drop, reorder, truncate, forge, redirect, hang.

    proxy = HostileProxy(real_server.url).start()
    proxy.on("GET", "/changes", lambda req, ans: ans.with_page(rows=...))
    ...
    proxy.stop()

A rule sees the request (``Seen``) and the real server's answer (``Answer``) and returns
the answer to give instead.  Rules run in the order they were added; ``once=True``
rules fire a single time.  A rule added with ``forward=False`` swallows the request: the
real server never sees it, and the rule's answer is all the device gets (it starts from an
empty 200).  ``python -m tests.sync.hostile UPSTREAM PORT BEHAVIOUR`` (from the repository root, ownmem
importable) runs one named behaviour standalone.
"""
from __future__ import annotations

import asyncio
import re
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from ownmem.crypto import cbor

HOP_HEADERS = {"content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding"}


@dataclass(frozen=True)
class Seen:
    method: str
    path: str           # e.g. /v1/vaults/alice/changes
    query: str
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    # -- the change feed: {1: [[seq, kind, cell_id, cell, wrapped], ...], 2: next, 3: last, 4: more}
    def page(self) -> dict[int, Any]:
        decoded = cbor.decode(self.body)
        assert isinstance(decoded, dict)
        return decoded

    def with_page(self, **changes: Any) -> Answer:
        p = self.page()
        for k, v in changes.items():
            p[{"rows": 1, "next": 2, "last": 3, "more": 4}[k]] = v
        return replace(self, body=cbor.encode(p))

    def json(self) -> Any:
        import json

        return json.loads(self.body)

    def with_json(self, value: Any) -> Answer:
        import json

        return replace(self, body=json.dumps(value).encode(), headers={**self.headers,
                                                                       "content-type": "application/json"})


Rewrite = Callable[[Seen, Answer], Answer]


@dataclass
class _Rule:
    method: str
    pattern: re.Pattern[str]
    fn: Rewrite
    once: bool
    forward: bool = True
    fired: int = 0


@dataclass
class HostileProxy:
    upstream: str
    port: int = 0
    rules: list[_Rule] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    # what the real server answered, per (method, path), newest last: material for replays
    answers: dict[tuple[str, str], list[Answer]] = field(default_factory=dict)
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ------------------------------------------------------------- scripting
    def on(self, method: str, path_regex: str, fn: Rewrite, *, once: bool = False, forward: bool = True) -> _Rule:
        rule = _Rule(method.upper(), re.compile(path_regex), fn, once, forward)
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def last_answer(self, method: str, path_regex: str) -> Answer:
        pat = re.compile(path_regex)
        for (m, p), got in reversed(list(self.answers.items())):
            if m == method.upper() and pat.search(p) and got:
                return got[-1]
        raise LookupError(f"no {method} {path_regex} answered yet")

    def all_answers(self, method: str, path_regex: str) -> list[Answer]:
        pat = re.compile(path_regex)
        return [a for (m, p), got in self.answers.items() if m == method.upper() and pat.search(p) for a in got]

    # ------------------------------------------------------------- serving
    async def _handle(self, request: Request) -> Response:
        body = await request.body()
        seen = Seen(request.method, request.url.path, request.url.query, body,
                    {k.lower(): v for k, v in request.headers.items()})
        with self._lock:
            self.seen.append(seen)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS | {"host"}}
        target = self.upstream + request.url.path + (f"?{request.url.query}" if request.url.query else "")
        rules = self._matching(seen)
        if request.url.path.endswith("/events") and not rules:
            return await self._stream(request.method, target, headers)
        if all(rule.forward for rule in rules):
            async with httpx.AsyncClient(timeout=60.0, follow_redirects=False) as c:
                r = await c.request(request.method, target, headers=headers, content=body)
            ans = Answer(r.status_code, {k.lower(): v for k, v in r.headers.items() if k.lower() not in HOP_HEADERS},
                         r.content)
            with self._lock:
                self.answers.setdefault((seen.method, seen.path), []).append(ans)
        else:                         # swallowed: the real server never hears of it
            ans = Answer(200, {"content-type": "application/json"}, b"")
        for rule in rules:
            ans = rule.fn(seen, ans)
        if ans.status == -1:          # a rule asked to hang up mid-answer
            raise ConnectionAbortedError
        return Response(ans.body, status_code=ans.status, headers=ans.headers)

    def _matching(self, seen: Seen) -> list[_Rule]:
        out = []
        with self._lock:
            for rule in self.rules:
                if rule.method in (seen.method, "*") and rule.pattern.search(seen.path):
                    if rule.once and rule.fired:
                        continue
                    rule.fired += 1
                    out.append(rule)
        return out

    async def _stream(self, method: str, target: str, headers: dict[str, str]) -> Response:
        client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, read=None))
        r = await client.send(client.build_request(method, target, headers=headers), stream=True)

        async def relay() -> Any:
            try:
                async for chunk in r.aiter_raw():
                    yield chunk
            finally:
                await r.aclose()
                await client.aclose()

        return StreamingResponse(relay(), status_code=r.status_code,
                                 headers={k: v for k, v in r.headers.items() if k.lower() not in HOP_HEADERS})

    def start(self) -> HostileProxy:
        if not self.port:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
        app = Starlette(routes=[Route("/{path:path}", self._handle,
                                      methods=["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"])])
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the hostile proxy did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)


if __name__ == "__main__":   # pragma: no cover - used by the browser tests
    upstream, port = sys.argv[1], int(sys.argv[2])
    proxy = HostileProxy(upstream, port)
    proxy.start()
    print(f"hostile proxy on {proxy.url} -> {upstream}", flush=True)
    try:
        asyncio.run(asyncio.Event().wait())
    except KeyboardInterrupt:
        proxy.stop()
