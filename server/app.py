"""The blind server's HTTP layer (Starlette).  Thin: parse, check, call storage, answer.

Every error is ``{"error": code, "message": text}`` with a stable code; nothing is
stored unless every check of the request passed.  Public routes: health, vault
lookup (salt and public keys, what a new device needs), login challenge and
session, the receipt log, the erasure list, the OpenAPI document and the PWA.
Everything else needs a bearer credential for that very vault.
"""
from __future__ import annotations

import contextlib
import base64
import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.staticfiles import NotModifiedResponse, StaticFiles

from ownmem import syncwire as W
from ownmem.crypto import cbor
from ownmem.errors import OwnmemError
from ownmem.saihm.receipt import OPERATIONS

from .live import Live
from .openapi import OPENAPI
from .ratelimit import RateLimiter
from .storage import Storage, StorageConflict, open_storage
from .storage.base import Change, ExportSnapshot, Registration, StorageBusy, VaultRecord
from .tlog_routes import log_routes
from .verify import HolderKey, Refused, check_receipt, ed25519_valid
from .verifypool import VerifyPool, default_processes

CBOR = "application/cbor"
AMEM = "application/amem+cbor"
P = ParamSpec("P")
T = TypeVar("T")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers


@dataclass
class Config:
    database_url: str | None = None
    data_dir: str = "data"
    web_dir: str | None = None
    rate_per_second: float = 200.0
    rate_burst: int = 400
    verify_processes: int = 0       # processes that verify large pushes; 0 or 1: in a thread (verifypool.py)

    @classmethod
    def from_env(cls) -> Config:
        return cls(database_url=os.environ.get("OWNMEM_DATABASE_URL") or None,
                   data_dir=os.environ.get("OWNMEM_DATA_DIR", "data"),
                   web_dir=os.environ.get("OWNMEM_WEB_DIR") or None,
                   rate_per_second=float(os.environ.get("OWNMEM_RATE_PER_SECOND", "200")),
                   rate_burst=int(os.environ.get("OWNMEM_RATE_BURST", "400")),
                   verify_processes=int(os.environ.get("OWNMEM_VERIFY_PROCESSES") or default_processes()))


MAX_JSON = 1 << 20          # bytes of a JSON request body; it also bounds every hex field in it
_HEX = re.compile(r"(?:[0-9a-f]{2})*")


def _hex(v: Any, n: int | None, what: str) -> bytes:
    # Lower-case pairs only, as the OpenAPI document says: bytes.fromhex would also take
    # whitespace and upper case, giving one value many spellings.  No cap of its own on the
    # length: the JSON body limit bounds it (a cap of 64 Ki digits here used to refuse any
    # metadata over 32 KiB as "not hex", under the 1 MiB the routes allow).
    if not isinstance(v, str) or not _HEX.fullmatch(v):
        raise ApiError(400, "malformed", f"{what} must be a hex string")
    b = bytes.fromhex(v)
    if n is not None and len(b) != n:
        raise ApiError(400, "malformed", f"{what} must be {n} bytes")
    return b


class Server:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.storage: Storage = open_storage(config.database_url, config.data_dir)
        self.limiter = RateLimiter(config.rate_per_second, config.rate_burst)
        self.live = Live(self.storage, config.database_url)
        self.verifier = VerifyPool(config.verify_processes)
        self._holders: dict[int, HolderKey] = {}

    # ---------------------------------------------------------------- plumbing
    async def call(self, fn: Callable[P, T], *args: P.args, **kw: P.kwargs) -> T:
        return await run_in_threadpool(fn, *args, **kw)

    async def body(self, request: Request, limit: int = W.MAX_BODY) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None:
            try:
                if int(declared) > limit:
                    raise ApiError(413, "too_large", f"request body over {limit} bytes")
            except ValueError:
                raise ApiError(400, "malformed", "bad Content-Length") from None
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, "too_large", f"request body over {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def json_body(self, request: Request) -> dict[str, Any]:
        raw = await self.body(request, MAX_JSON)
        try:
            v = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):   # deep nesting: refused, not a 500
            raise ApiError(400, "malformed", "body must be a JSON object") from None
        if not isinstance(v, dict):
            raise ApiError(400, "malformed", "body must be a JSON object")
        return v

    async def vault(self, request: Request) -> VaultRecord:
        name = request.path_params["name"]
        if not W.valid_vault_name(name):
            raise ApiError(404, "unknown_vault", "no such vault")
        v = await self.call(self.storage.vault, name)
        if v is None:
            raise ApiError(404, "unknown_vault", "no such vault")
        self.limit(v.id)
        return v

    def limit(self, vault_id: int) -> None:
        wait = self.limiter.take(vault_id)
        if wait > 0:
            raise ApiError(429, "rate_limited", "too many requests for this vault",
                           {"Retry-After": str(max(1, int(wait + 0.999)))})

    async def authed(self, request: Request) -> VaultRecord:
        """The vault named in the path, for a bearer credential issued for that same vault."""
        auth = request.headers.get("authorization", "")
        if not auth.startswith("Bearer ") or len(auth) > 200:
            raise ApiError(401, "unauthenticated", "a bearer credential is required")
        token_hash = hashlib.sha256(auth[7:].strip().encode()).digest()
        vid = await self.call(self.storage.token_vault, token_hash, time.time())
        if vid is None:
            raise ApiError(401, "unauthenticated", "the credential is unknown or expired")
        v = await self.vault(request)
        if v.id != vid:
            raise ApiError(403, "wrong_vault", "this credential is for another vault")
        return v

    def holder(self, v: VaultRecord) -> HolderKey:
        h = self._holders.get(v.id)
        if h is None:
            h = self._holders[v.id] = HolderKey(v.holder_pub, v.holder_id)
        return h

    # ---------------------------------------------------------------- public routes
    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "backend": type(self.storage).__name__.replace("Storage", "").lower()})

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(OPENAPI)

    async def register(self, request: Request) -> Response:
        b = await self.json_body(request)
        name = b.get("name")
        if not isinstance(name, str) or not W.valid_vault_name(name):
            raise ApiError(400, "bad_name", "vault names are 1-64 of a-z 0-9 . _ - and start with a letter or digit")
        salt, owner, sync, ka = (_hex(b.get("salt"), 16, "salt"), _hex(b.get("owner_pub"), 32, "owner_pub"),
                                 _hex(b.get("sync_pub"), 32, "sync_pub"), _hex(b.get("ka_pub"), 32, "ka_pub"))
        holder_pub = _hex(b.get("holder_pub"), 1952, "holder_pub")
        metadata, metadata_sig = _hex(b.get("metadata"), None, "metadata"), _hex(b.get("metadata_sig"), 64, "metadata_sig")
        proof, key_receipt = _hex(b.get("proof"), 64, "proof"), _hex(b.get("key_receipt"), None, "key_receipt")
        holder_proof = _hex(b.get("holder_proof"), 3309, "holder_proof")
        if len(metadata) > 1 << 20:
            raise ApiError(413, "too_large", "metadata over 1 MiB")
        if not ed25519_valid(sync, proof, W.register_message(name, salt, owner, sync, ka, holder_pub)):
            raise ApiError(400, "bad_signature", "the registration is not signed by its sync key")
        if not ed25519_valid(owner, metadata_sig, W.metadata_message(name, 1, metadata)):
            raise ApiError(400, "bad_signature", "the metadata is not signed by the owner key")
        holder_id = hashlib.sha256(holder_pub).digest()
        try:
            hk = HolderKey(holder_pub, holder_id)
            r, entry = check_receipt(key_receipt, hk, holder_pub, "KEY")
        except Refused as e:
            raise ApiError(400, e.code, str(e)) from None
        except ValueError:
            raise ApiError(400, "malformed", "holder_pub is not an ML-DSA-65 public key") from None
        if r.subject_id != holder_id or r.detail != holder_pub:
            raise ApiError(400, "malformed_receipt", "a KEY receipt names the holder and carries its public key")
        # The KEY receipt is public (it is in the log), so it proves nothing about who
        # registers; the holder's own signature over this registration does.
        if not hk.valid(W.register_message(name, salt, owner, sync, ka, holder_pub), holder_proof,
                        W.REGISTER_HOLDER_CONTEXT):
            raise ApiError(400, "bad_signature", "the registration is not signed by its holder key")
        reg = Registration(name, salt, owner, sync, ka, holder_pub, holder_id, metadata, metadata_sig, entry)
        try:
            await self.call(self.storage.register, reg)
        except StorageConflict:
            raise ApiError(409, "name_taken", "a vault of that name exists") from None
        return JSONResponse({"name": name, "holder_id": holder_id.hex(), "key_receipt_id": r.receipt_id.hex()},
                            status_code=201)

    async def lookup(self, request: Request) -> Response:
        v = await self.vault(request)
        return JSONResponse({"name": v.name, "salt": v.salt.hex(), "owner_pub": v.owner_pub.hex(),
                             "sync_pub": v.sync_pub.hex(), "ka_pub": v.ka_pub.hex(),
                             "holder_pub": v.holder_pub.hex(), "holder_id": v.holder_id.hex()})

    async def challenge(self, request: Request) -> Response:
        v = await self.vault(request)
        c = secrets.token_bytes(32)
        expires = time.time() + W.CHALLENGE_TTL
        await self.call(self.storage.add_challenge, v.id, c, expires)
        return JSONResponse({"challenge": c.hex(), "expires_at": int(expires)})

    async def session(self, request: Request) -> Response:
        v = await self.vault(request)
        b = await self.json_body(request)
        c, sig = _hex(b.get("challenge"), 32, "challenge"), _hex(b.get("signature"), 64, "signature")
        # verify before consuming, so a forged signature cannot burn someone's challenge
        if not ed25519_valid(v.sync_pub, sig, W.auth_message(v.name, c)):
            raise ApiError(401, "unauthenticated", "could not authenticate")
        if not await self.call(self.storage.take_challenge, v.id, c, time.time()):
            raise ApiError(401, "unauthenticated", "the challenge is unknown, used or expired")
        token = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
        expires = time.time() + W.TOKEN_TTL
        await self.call(self.storage.add_token, hashlib.sha256(token.encode()).digest(), v.id, expires)
        return JSONResponse({"token": token, "expires_at": int(expires)})

    # ---------------------------------------------------------------- vault routes
    async def metadata(self, request: Request) -> Response:
        # One route for both methods, so a 405 on this path lists all it allows (Allow: GET, HEAD,
        # PUT); two routes on one path answered OPTIONS with the first route's methods only.
        return await (self.put_metadata(request) if request.method == "PUT" else self.get_metadata(request))

    async def get_metadata(self, request: Request) -> Response:
        v = await self.authed(request)
        version, meta, sig = await self.call(self.storage.metadata, v.id)
        return JSONResponse({"version": version, "metadata": meta.hex(), "signature": sig.hex()})

    async def put_metadata(self, request: Request) -> Response:
        v = await self.authed(request)
        b = await self.json_body(request)
        expected = b.get("expected_version")
        # bounded: a version is a 64-bit database integer, and 2**80 used to end in a 500
        if type(expected) is not int or not 1 <= expected < 1 << 62:
            raise ApiError(400, "malformed", "expected_version must be a positive integer")
        meta, sig = _hex(b.get("metadata"), None, "metadata"), _hex(b.get("signature"), 64, "signature")
        if len(meta) > 1 << 20:
            raise ApiError(413, "too_large", "metadata over 1 MiB")
        if not ed25519_valid(v.owner_pub, sig, W.metadata_message(v.name, expected + 1, meta)):
            raise ApiError(400, "bad_signature", "the metadata is not signed by the owner key for that version")
        try:
            version = await self.call(self.storage.cas_metadata, v.id, expected, meta, sig)
        except StorageConflict:
            raise ApiError(409, "stale_version", "the metadata changed; pull and retry") from None
        self.live.notify(v.id)
        return JSONResponse({"version": version})

    async def push(self, request: Request) -> Response:
        v = await self.authed(request)
        raw = await self.body(request)
        # the array's declared length first: a batch of 5000 would otherwise trip the item
        # cap of the decoder below and be called malformed instead of too large
        if _cbor_array_len(raw) > W.MAX_BATCH:
            raise ApiError(413, "batch_too_large", f"at most {W.MAX_BATCH} cells per push")
        try:
            items = cbor.decode(raw, max_items=4 * W.MAX_BATCH + 8)
        except OwnmemError:
            raise ApiError(400, "malformed", "body must be a CBOR array of [cell, wrapped DEK]") from None
        if not isinstance(items, list):
            raise ApiError(400, "malformed", "body must be a CBOR array of [cell, wrapped DEK]")
        if len(items) > W.MAX_BATCH:
            raise ApiError(413, "batch_too_large", f"at most {W.MAX_BATCH} cells per push")
        for it in items:
            if not (isinstance(it, list) and len(it) == 2 and isinstance(it[0], bytes) and isinstance(it[1], bytes)):
                raise ApiError(400, "malformed", "each item is [cell bytes, wrapped DEK bytes]")
        # Verification is most of the cost, and ML-DSA-65 verification holds the GIL: a large
        # batch is verified in worker processes, one part per core (verifypool.py).
        checked = await self.verifier.check(items, self.holder(v), v.holder_pub)
        if isinstance(checked, tuple):
            i, e = checked
            raise ApiError(400, e.code, f"item {i}: {e}")
        res = await self.call(self.storage.push, v.id, checked)
        if res.stored:
            self.live.notify(v.id)
        return JSONResponse({"stored": res.stored, "duplicates": res.duplicates, "erased": res.erased,
                             "last_seq": res.last_seq})

    async def changes(self, request: Request) -> Response:
        v = await self.authed(request)
        since, limit = _int_param(request, "since", 0), _int_param(request, "limit", 1000)
        limit = max(1, min(limit, W.MAX_PAGE))
        rows, last = await self.call(self.storage.changes, v.id, since, limit)
        # bounded in bytes as well as in count: one response never grows past MAX_PAGE_BYTES
        size, keep = 0, 0
        for c in rows:
            size += len(c.cell or b"") + 64
            if keep and size > W.MAX_PAGE_BYTES:
                break
            keep += 1
        rows = rows[:keep]
        nxt = rows[-1].seq if rows else since
        # Streamed in slices rather than built whole: a page runs to ~20 MB, and the device
        # starts reading while the rest is encoded (docs/benchmarks.md, area `server`).
        return StreamingResponse(_page_chunks(rows, nxt, last), media_type=CBOR)

    async def events(self, request: Request) -> Response:
        v = await self.authed(request)

        async def stream() -> AsyncIterator[bytes]:
            last = -1
            async for seq in self.live.watch(v.id):
                if await request.is_disconnected():
                    return
                if seq != last:
                    last = seq
                    yield f"event: changes\ndata: {json.dumps({'last_seq': seq})}\n\n".encode()
                else:
                    yield b": keep-alive\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def erase(self, request: Request) -> Response:
        v = await self.authed(request)
        b = await self.json_body(request)
        receipts = b.get("receipts")
        if not isinstance(receipts, list) or not receipts or len(receipts) > W.MAX_BATCH:
            raise ApiError(400, "malformed", f"receipts must be a list of 1 to {W.MAX_BATCH} FORGET receipts")
        holder = self.holder(v)
        entries, ids = [], []
        for i, hx in enumerate(receipts):
            try:
                r, entry = check_receipt(_hex(hx, None, "receipt"), holder, v.holder_pub, "FORGET")
            except Refused as e:
                raise ApiError(400, e.code, f"receipt {i}: {e}") from None
            entries.append(entry)
            ids.append(r.subject_id)
        done = await self.call(self.storage.erase, v.id, ids, entries, int(time.time()))
        if done:
            self.live.notify(v.id)
        # pending: erased bytes may still be on the server's disk (storage/scrub.py); sending
        # the same receipts again is how a client asks until it reads false
        pending = await self.call(self.storage.erasure_pending, v.id)
        return JSONResponse({"erased": [c.hex() for c in done],
                             "already": [c.hex() for c in ids if c not in set(done)], "pending": pending})

    async def export(self, request: Request) -> Response:
        """A streamed `.amem` of the vault, byte-identical to what the owner's device exports."""
        v = await self.authed(request)
        _, meta, _ = await self.call(self.storage.metadata, v.id)
        try:
            doc = cbor.decode(meta)
            vault_public, amem_sig = doc["vault_public"], doc["amem_sig"]
            if not isinstance(vault_public, dict) or not isinstance(amem_sig, bytes):
                raise KeyError
        except (OwnmemError, KeyError, TypeError):
            raise ApiError(409, "no_export", "this vault's metadata carries no export header") from None
        try:
            snap = await self.call(self.storage.export_snapshot, v.id)
        except StorageBusy as e:
            raise ApiError(503, "busy", str(e), {"Retry-After": "10"}) from None
        return StreamingResponse(_amem_stream(snap, vault_public, amem_sig), media_type=AMEM,
                                 headers={"Content-Disposition": f'attachment; filename="{v.name}.amem"'})

    # ---------------------------------------------------------------- public log
    async def log_get(self, request: Request) -> Response:
        rid = _hex(request.path_params["receipt_id"], 32, "receipt id") if _is_hex64(
            request.path_params["receipt_id"]) else None
        if rid is None:
            raise ApiError(404, "not_found", "no such receipt")
        r = await self.call(self.storage.log_get, rid)
        if r is None:
            raise ApiError(404, "not_found", "no such receipt")
        return JSONResponse(_log_json(r))

    async def log_list(self, request: Request) -> Response:
        q = request.query_params
        holder = _hex(q["holder"], 32, "holder") if "holder" in q else None
        subject = _hex(q["subject"], 32, "subject") if "subject" in q else None
        op = q.get("operation")
        if op is not None and op not in OPERATIONS:
            raise ApiError(400, "malformed", "unknown operation")
        rows = await self.call(self.storage.log_list, holder_id=holder, subject_id=subject, operation=op,
                               after=_int_param(request, "after", 0),
                               limit=max(1, min(_int_param(request, "limit", 100), 1000)))
        return JSONResponse({"entries": [_log_json(r) for r in rows]})

    async def erasures(self, request: Request) -> Response:
        rows = await self.call(self.storage.erasure_list, _int_param(request, "after", 0),
                               max(1, min(_int_param(request, "limit", 1000), 10000)))
        return JSONResponse({"entries": [{"index": i, "cell_id": c.hex(), "holder_id": h.hex(), "at": at}
                                         for i, c, h, at in rows]})

    async def index(self, request: Request) -> Response:
        web = self.web_dir()
        if web is not None and (web / "index.html").exists():
            return FileResponse(web / "index.html", headers=_web_headers())
        return Response("<!doctype html><title>ownmem</title><p>ownmem blind sync server. "
                        "The web app is not built: run <code>python3 build.py build</code>.</p>",
                        media_type="text/html", headers=_security_headers())

    def web_dir(self) -> Path | None:
        if self.config.web_dir:
            return Path(self.config.web_dir)
        built = Path(__file__).resolve().parent.parent / "web" / "dist"
        return built if built.exists() else None


PAGE_SLICE = 256   # changes per streamed slice of a pull page (~1 MB of cells)


async def _page_chunks(rows: list[Change], nxt: int, last: int) -> AsyncIterator[bytes]:
    """``cbor.encode({1: [[seq, kind, cell_id, cell, wrapped_dek], ...], 2: nxt, 3: last, 4: nxt < last})``
    byte for byte, in slices: the deterministic encoding of a map with keys 1..4 is those keys in order."""
    yield b"\xa4\x01" + cbor.head(4, len(rows))
    for i in range(0, len(rows), PAGE_SLICE):
        yield b"".join(cbor.encode([c.seq, c.kind, c.cell_id, c.cell, c.wrapped_dek]) for c in rows[i:i + PAGE_SLICE])
    yield b"\x02" + cbor.encode(nxt) + b"\x03" + cbor.encode(last) + b"\x04" + cbor.encode(nxt < last)


def _cbor_array_len(raw: bytes) -> int:
    """The length a definite-length CBOR array declares in its head; -1 if ``raw`` does not start with one."""
    if not raw or raw[0] >> 5 != 4 or raw[0] & 0x1F > 27:
        return -1
    ai = raw[0] & 0x1F
    if ai < 24:
        return ai
    size = 1 << (ai - 24)
    return int.from_bytes(raw[1:1 + size], "big") if len(raw) > size else -1


def _is_hex64(s: str) -> bool:
    return len(s) == 64 and all(ch in "0123456789abcdef" for ch in s)


def _int_param(request: Request, name: str, default: int) -> int:
    v = request.query_params.get(name)
    if v is None:
        return default
    if not (v.isascii() and v.isdigit()) or len(v) > 18:   # str.isdigit alone takes "²" and "１"
        raise ApiError(400, "malformed", f"{name} must be a non-negative integer")
    return int(v)


def _log_json(r: Any) -> dict[str, Any]:
    e = r.entry
    return {"index": r.index, "receipt_id": e.receipt_id.hex(), "subject_id": e.subject_id.hex(),
            "operation": e.operation, "holder_id": e.holder_id.hex(), "timestamp": e.timestamp,
            "receipt": e.receipt.hex()}


def _security_headers() -> dict[str, str]:
    # No remote script, no eval; 'wasm-unsafe-eval' only lets Pyodide and hash-wasm compile
    # their WebAssembly.  Workers (Pyodide's, the service worker) load from the app's own origin.
    return {"Content-Security-Policy": "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; "
                                       "worker-src 'self'; connect-src 'self'; img-src 'self' data:; "
                                       "style-src 'self'; manifest-src 'self'; object-src 'none'; "
                                       "base-uri 'none'; frame-ancestors 'none'",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


def _web_headers() -> dict[str, str]:
    # no-cache: revalidate every time (ETag, so usually a 304): the service worker keeps the
    # offline copy, and a stale HTTP-cached file must never mix into a newer bundle.
    return {**_security_headers(), "Cache-Control": "no-cache"}


# The content types the bundle needs, whatever the host's mime.types says: none knows .whl,
# and WebAssembly streaming compilation refuses anything but application/wasm.
_WEB_TYPES = {".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript",
              ".css": "text/css", ".json": "application/json", ".webmanifest": "application/manifest+json",
              ".wasm": "application/wasm", ".zip": "application/zip", ".whl": "application/zip",
              ".png": "image/png", ".svg": "image/svg+xml", ".ico": "image/x-icon"}


class WebMount(Mount):
    """The bundle at "/" takes GET and HEAD outside /v1/ only.  A Mount at "/" matches every
    path fully, and Starlette prefers a full match to a route's partial (wrong-method) one, so
    with a built bundle `TRACE /health` or `GET /v1/vaults/x/cells` answered 404 instead of the
    API's 405 with Allow; they now reach the API routes as they do without a bundle."""

    def matches(self, scope: Any) -> tuple[Match, Any]:
        path = scope["path"][len(scope.get("root_path", "")):]
        if scope.get("method") not in ("GET", "HEAD") or path.startswith("/v1/"):
            return Match.NONE, {}
        return super().matches(scope)


class WebFiles(StaticFiles):
    """The built PWA (web/dist).  Every file carries the security headers, not only the
    page: a worker's CSP is the one its own script was served with."""

    async def get_response(self, path: str, scope: Any) -> Response:
        # Only the app's files live here.  A request no API route took (another method, a
        # /v1/ path) is not found, as it is without a bundle, rather than "405: use GET".
        if scope["method"] not in ("GET", "HEAD") or Path(path).parts[:1] == ("v1",):
            raise HTTPException(status_code=404)
        return await super().get_response(path, scope)

    def file_response(self, full_path: Any, stat_result: os.stat_result, scope: Any,
                      status_code: int = 200) -> Response:
        media_type = _WEB_TYPES.get(Path(full_path).suffix.lower())
        response = FileResponse(full_path, status_code=status_code, stat_result=stat_result,
                                media_type=media_type, headers=_web_headers())
        if self.is_not_modified(response.headers, Headers(scope=scope)):
            return NotModifiedResponse(response.headers)
        return response


async def _amem_stream(snap: ExportSnapshot, vault_public: dict[Any, Any], amem_sig: bytes) -> AsyncIterator[bytes]:
    """{1: 1, 2: vault-public, 3: [n sealed objects], 4: {n id: wrapped}, 5: sig}, in deterministic order.

    Every page comes from the one snapshot the count was taken in (storage/export.py), so the
    count holds whatever is pushed or erased meanwhile.  Objects stream page by page; only the
    56-byte (id, wrapped DEK) pairs are held for key 4."""
    from ownmem.saihm.cell import parse_cell

    try:
        yield b"\xa5\x01\x01\x02" + cbor.encode(vault_public) + b"\x03" + cbor.head(4, snap.count)
        deks: list[tuple[bytes, bytes]] = []
        after = b""
        while True:
            page = await run_in_threadpool(snap.page, after, 1000)
            if not page:
                break
            yield b"".join(cbor.encode(parse_cell(cell).ciphertext) for _, cell, _ in page)
            deks.extend((oid, wrapped) for oid, _, wrapped in page)
            after = page[-1][0]
        yield b"\x04" + cbor.head(5, snap.count) + b"".join(cbor.encode(o) + cbor.encode(w) for o, w in deks)
        yield b"\x05" + cbor.encode(amem_sig)
    finally:
        snap.close()     # never waits (a page being read ends it when done)


def create_app(config: Config | None = None) -> Starlette:
    cfg = config or Config.from_env()
    srv = Server(cfg)

    def wrap(fn: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def handler(request: Request) -> Response:
            try:
                return await fn(request)
            except ApiError as e:
                return JSONResponse({"error": e.code, "message": e.message}, status_code=e.status, headers=e.headers)
        return handler

    routes: list[BaseRoute] = [
        Route("/health", wrap(srv.health)),
        Route("/openapi.json", wrap(srv.openapi)),
        Route("/v1/vaults", wrap(srv.register), methods=["POST"]),
        Route("/v1/vaults/{name}", wrap(srv.lookup)),
        Route("/v1/vaults/{name}/challenge", wrap(srv.challenge), methods=["POST"]),
        Route("/v1/vaults/{name}/session", wrap(srv.session), methods=["POST"]),
        Route("/v1/vaults/{name}/metadata", wrap(srv.metadata), methods=["GET", "PUT"]),
        Route("/v1/vaults/{name}/cells", wrap(srv.push), methods=["POST"]),
        Route("/v1/vaults/{name}/changes", wrap(srv.changes)),
        Route("/v1/vaults/{name}/events", wrap(srv.events)),
        Route("/v1/vaults/{name}/erase", wrap(srv.erase), methods=["POST"]),
        Route("/v1/vaults/{name}/export.amem", wrap(srv.export)),
        Route("/v1/log", wrap(srv.log_list)),
        *log_routes(srv.storage),               # before /v1/log/{receipt_id}, which would take /v1/log/checkpoint
        Route("/v1/log/{receipt_id}", wrap(srv.log_get)),
        Route("/v1/erasures", wrap(srv.erasures)),
        Route("/", wrap(srv.index)),
    ]
    web = srv.web_dir()
    if web is not None:
        routes.append(WebMount("/", app=WebFiles(directory=str(web)), name="web"))
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await srv.live.start()
        srv.verifier.start()
        try:
            yield
        finally:
            await srv.live.stop()
            srv.verifier.close()
            srv.storage.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.server = srv
    return app
