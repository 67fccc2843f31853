"""A SAIHM operator served by the test: raw HTTP/1.1 on a real socket on 127.0.0.1.

Raw because the attacks live below what a web framework lets one write: a false
Content-Length, a reason phrase with C1 or bidi bytes, a chunked body of 40 MiB, UTF-8 split
across chunks, a body trickled a byte at a time, an answer that never comes.  ``Operator``
is a well-behaved custodial operator (an in-memory store) whose answer to any method a test
can replace by a ``Reply`` or a function; ``TestServer`` serves it, over TLS when given a
certificate.  Every loop is bounded and every wait wakes when the server stops.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import socketserver
import ssl
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ownmem.mcp.server import Session
from ownmem.mcp.transport import Endpoint, Transport

HOLDER = "ab4f746fd1520d2736854559d6751969ae9127f5dbc607d7298acbf1afb1f588"   # the spec's example holderId
OTHER = "5d02" + "0" * 60
TOKEN = "Bearer test-credential-7f3a"
MAX_REQUEST = 1 << 20
TEST_TIMEOUT = 1.5

# Every character the control-character rule names, one of each range's ends and middles.
FORBIDDEN = ["\x00", "\x07", "\t", "\n", "\r", "\x1b", "\x1f", "\x7f", "\x85", "\x9f", "\u2028", "\u2029",
             "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"]
# What the identifier rule refuses: empty, too long, space, non-ASCII, a line break, not a string, null
BAD_IDS = ["", "a" * 257, "ab cd", "abcé", "ab\ncd", "ab\rcd", "ab\tcd", "ab\x7fcd", "\u202eab", 123, 1.5,
           None, True, ["ab"], {"id": "ab"}]


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    """One raw answer.  ``body`` is sent in ``chunks`` (joined when not chunked); ``length`` is the
    Content-Length to claim (None: none, so the body runs to the close; "auto": the true one)."""

    status: int = 200
    reason: bytes = b"OK"
    body: bytes | Iterable[bytes] = b""
    chunked: bool = False
    length: int | str | None = "auto"
    headers: tuple[tuple[bytes, bytes], ...] = ((b"Content-Type", b"application/json"),)
    delay: float = 0.0          # before the status line (a hang)
    gap: float = 0.0            # between pieces of the body (a trickle)

    @classmethod
    def of(cls, value: Any, status: int = 200, **kw: Any) -> Reply:
        return cls(status=status, body=json.dumps(value).encode(), **kw)


Handler = Callable[[Request], Reply]


def cell_id(content: str, n: int) -> str:
    return hashlib.sha256(f"{n}:{content}".encode()).hexdigest()


@dataclass
class Operator:
    """A conformant custodial operator in memory, with one hook per method for the attacks."""

    holder: str = HOLDER
    token: str | None = TOKEN
    cells: dict[str, str] = field(default_factory=dict)
    shared: list[dict[str, Any]] = field(default_factory=list)      # cells other holders share with us
    contracts: dict[str, dict[str, Any]] = field(default_factory=dict)
    overrides: dict[str, Reply | Handler] = field(default_factory=dict)
    seen: list[Request] = field(default_factory=list)
    governance: bool = False
    trust_labels: bool = False

    def __call__(self, req: Request) -> Reply:
        self.seen.append(req)
        try:
            call = req.json
            method, params = call["method"], call["params"]
        except (ValueError, KeyError, TypeError):
            return Reply.of({"error": "malformed_request"}, 400, reason=b"Bad Request")
        hook = self.overrides.get(method)
        if isinstance(hook, Reply):
            return hook
        if hook is not None:
            return hook(req)
        if self.token is not None and req.headers.get("authorization") != self.token:
            return Reply.of({"error": "unauthenticated"}, 401, reason=b"Unauthorized")
        fn: Callable[[dict[str, Any]], Reply] | None = getattr(self, "do_" + method.removeprefix("saihm_"), None)
        if fn is None:
            return Reply.of({"error": "unknown_method"}, 404, reason=b"Not Found")
        return fn(params)

    def methods(self) -> list[str]:
        return [r.json["method"] for r in self.seen]

    def do_status(self, p: dict[str, Any]) -> Reply:
        return Reply.of({"agentIdHashHex": self.holder, "custody": "custodial", "prs": "0.997",
                         "bfsi_window_start_ts": "1745020800", "bfsi_R": "0",
                         "shards": {"STANDARD": len(self.cells)},
                         "contracts": [{"contractId": k, "mode": c["type"].upper(), "granteeIds": c["grantees"],
                                        "expiresAt": "0"} for k, c in self.contracts.items()],
                         "governance": [], "ownmemExtension": {"ignored": True}})

    def do_remember(self, p: dict[str, Any]) -> Reply:
        content = p["content"]
        if not content.strip():
            return Reply.of({"error": "empty_content"}, 400, reason=b"Bad Request")
        cid = cell_id(content, len(self.cells))
        self.cells[cid] = content
        return Reply.of({"cellId": cid, "cellNonce": "25bd74b827789faacad8ffb7593c2359", "tier": "STANDARD",
                         "kekVersion": 1, "epoch": "1747526400", "signaturePrefix": "8b7466cd59b30c38",
                         "receiptId": "e" * 64, "accounting": {"units": 1}})

    def _element(self, cid: str, text: str, holder: str) -> dict[str, Any]:
        e: dict[str, Any] = {"cellId": cid, "plaintext": text, "holderIdHex": holder, "tier": "STANDARD",
                             "kekVersion": "1", "timestamp": 1747526400}
        if self.trust_labels:
            own = holder == self.holder
            e["ownmemTrust"] = "self" if own else "shared"
            e["ownmemAuthorship"] = ({"authorship": "signed", "authorKey": "Y8HonACcWtc", "custody": False}
                                     if own else {"authorship": "unknown", "authorKey": None, "custody": False})
        return e

    def do_recall(self, p: dict[str, Any]) -> Reply:
        q = p.get("query") or ""
        out = [self._element(k, v, self.holder) for k, v in self.cells.items() if q in v]
        out += [s for s in self.shared if q in s["plaintext"]]
        return Reply.of(out)

    def do_forget(self, p: dict[str, Any]) -> Reply:
        cid = p["id"]
        if cid not in self.cells:
            return Reply.of({"success": False})
        del self.cells[cid]
        return Reply.of({"success": "true", "cellId": cid, "destructionAnchor": "d" * 64, "epoch": 1747526401})

    def do_share(self, p: dict[str, Any]) -> Reply:
        if p["scope"] != "read":
            return Reply.of({"error": "invalid_scope"}, 400, reason=b"Bad Request")
        if any(s not in self.cells for s in p["shardIds"]):
            return Reply.of({"error": "shard_not_found"}, 404, reason=b"Not Found")
        cid = hashlib.sha256(json.dumps(p, sort_keys=True).encode()).hexdigest()
        self.contracts[cid] = {"type": p["type"], "grantees": p["granteeIdHashesHex"]}
        return Reply.of({"contractId": cid, "type": p["type"], "granteeCount": str(len(p["granteeIdHashesHex"])),
                         "epoch": "1747526402"})

    def do_revoke_share(self, p: dict[str, Any]) -> Reply:
        if p["contractId"] not in self.contracts:
            return Reply.of({"error": "contract_not_found"}, 404, reason=b"Not Found")
        self.contracts.pop(p["contractId"])
        return Reply.of({"revoked": 1, "epoch": "1747526403"})

    def do_governance_propose(self, p: dict[str, Any]) -> Reply:
        if not self.governance:
            return Reply.of({"error": "governance_disabled"}, 403, reason=b"Forbidden")
        return Reply.of({"proposalId": "f" * 64, "scope": p["scope"], "paramKey": p["paramKey"],
                         "proposedValue": p["proposedValue"], "snapshotEpoch": "1747526404",
                         "proposerHash": self.holder})

    def do_governance_vote(self, p: dict[str, Any]) -> Reply:
        if not self.governance:
            return Reply.of({"error": "governance_disabled"}, 403, reason=b"Forbidden")
        return Reply.of({"proposalId": p["proposalId"], "voterHash": self.holder, "approve": p["approve"],
                         "weight": "3", "castAtEpoch": "1747526405"})


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock = self.request
        sock.settimeout(10)
        try:
            if self.server.tls is not None:
                sock = self.server.tls.wrap_socket(sock, server_side=True)
            req = _read_request(sock)
            if req is None:
                return
            reply = self.server.handler(req)
            self._send(sock, reply)
        except (OSError, ssl.SSLError, ValueError):
            pass            # the client hung up (as it must, on a bound or a timeout) or never trusted us
        finally:
            try:
                sock.close()
            except OSError:
                pass

    def _wait(self, seconds: float) -> bool:
        """Sleep, unless the server stops first (then False)."""
        return seconds <= 0 or not self.server.stopping.wait(seconds)

    def _send(self, sock: socket.socket, r: Reply) -> None:
        if not self._wait(r.delay):
            return
        pieces: Iterable[bytes] = [r.body] if isinstance(r.body, bytes) else r.body
        head = b"HTTP/1.1 %d %s\r\n" % (r.status, r.reason) + b"".join(k + b": " + v + b"\r\n" for k, v in r.headers)
        if r.chunked:
            head += b"Transfer-Encoding: chunked\r\n"
        elif r.length == "auto":
            body = b"".join(pieces)
            pieces = [body]
            head += b"Content-Length: %d\r\n" % len(body)
        elif r.length is not None:
            head += b"Content-Length: " + str(r.length).encode() + b"\r\n"
        sock.sendall(head + b"Connection: close\r\n\r\n")
        for n, piece in enumerate(pieces):
            if n and not self._wait(r.gap):
                return
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if r.chunked else piece)
        if r.chunked:
            sock.sendall(b"0\r\n\r\n")


def _read_request(sock: socket.socket) -> Request | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk or len(data) > MAX_REQUEST:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    line, *rest = head.decode("latin-1").split("\r\n")
    method, path, _ = line.split(" ", 2)
    headers = {k.strip().lower(): v.strip() for k, v in (h.split(":", 1) for h in rest)}
    length = int(headers.get("content-length", "0"))
    while len(body) < min(length, MAX_REQUEST):
        chunk = sock.recv(65536)
        if not chunk:
            return None
        body += chunk
    return Request(method, path, headers, body[:length])


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.handler = handler
        self.tls = tls
        self.stopping = threading.Event()


class TestServer:
    """``with TestServer(handler) as s: s.url``; stops (waking every waiting reply) on exit."""

    __test__ = False

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None, host: str = "127.0.0.1") -> None:
        self._server = _Server(handler, tls)
        self.port = self._server.server_address[1]
        self.url = f"{'https' if tls else 'http'}://{host}:{self.port}/saihm"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def __enter__(self) -> TestServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def make_session(url: str, auth: str | None = TOKEN, **kw: Any) -> Session:
    kw.setdefault("timeout", TEST_TIMEOUT)
    return Session(Transport(Endpoint.parse(url), auth, **kw))


def call(session: Session, tool: str, **args: Any) -> Any:
    """One tool call through the real transport, as the MCP server makes it."""
    return asyncio.run(session.call(tool, args))
