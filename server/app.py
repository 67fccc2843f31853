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
import base64
import contextlib
import hashlib
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from ownmem.asgi import BODY_GRACE, BODY_MIN_RATE, BodyDeadline, BodyTimeout
from ownmem.crypto import cbor
from ownmem.errors import OwnmemError, WireError
from ownmem.saihm.receipt import OPERATIONS, parse_receipt
from ownmem.wire import codec, messages, signed
from ownmem.wire.errors import ErrorCode
from ownmem.wire.limits import (
    CHALLENGE_TTL,
    MAX_BATCH,
    MAX_BODY,
    MAX_JSON,
    MAX_PAGE,
    MAX_PAGE_BYTES,
    MAX_RECEIPTS,
    TOKEN_TTL,
    valid_vault_name,
)
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.staticfiles import NotModifiedResponse, StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server import challenge as challenges
from server.decoy import Decoys
from server.live import Live
from server.openapi import OPENAPI
from server.ratelimit import RateLimiter, client_key
from server.share_routes import share_routes, sweep_every, sweep_expired
from server.storage import Storage, StorageConflict, open_storage
from server.storage.base import (
    Change,
    ExportSnapshot,
    LogEntry,
    Registration,
    StorageBusy,
    StorageLimit,
    StorageQuota,
    VaultRecord,
)
from server.tlog_routes import log_routes
from server.verify import (
    HolderKey,
    Refused,
    check_receipt,
    claimed_cell_id,
    ed25519_valid,
)
from server.verifypool import VerifyPool, default_processes
from server.witness_routes import witness_routes

CBOR = "application/cbor"
AMEM = "application/amem+cbor"
E = ErrorCode
P = ParamSpec("P")
T = TypeVar("T")
_log = logging.getLogger("ownmem.server")
# what POST /receipts logs; KEY comes with registration, FORGET with erasure (it withdraws the
# cell in the same transaction), SHARE/REVOKE with their contracts
LOGGED_HERE = frozenset({"REMEMBER", "RECALL", "STATUS"})


class ApiError(OwnmemError):
    """A refusal, answered with its code's status as ``{"error": code, "message": message}``."""

    code: ErrorCode

    def __init__(self, code: ErrorCode, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.headers = code, message, headers


@dataclass
class Config:
    database_url: str | None = None
    data_dir: str = "data"
    web_dir: str | None = None
    rate_per_second: float = 200.0      # per vault, once its credential checked
    rate_burst: int = 400
    address_rate_per_second: float = 20.0   # per client address: public routes, failed credentials
    address_burst: int = 100
    register_per_hour: int = 60         # registrations per client address (also the burst)
    vaults_per_key: int = 5             # vaults one owner, sync or holder key may be in
    vault_quota_bytes: int = 1 << 30    # cells + wrapped DEKs per vault
    body_timeout: float = 30.0          # seconds a request body may take beyond its bytes at ...
    body_min_rate: float = 16384.0      # ... this many bytes per second
    verify_processes: int = 0       # processes that verify large pushes; 0 or 1: in a thread (verifypool.py)

    @classmethod
    def from_env(cls) -> Config:
        env = os.environ.get

        def number(name: str, default: str, lo: float) -> float:
            value = float(env(name) or default)
            if not value >= lo:        # also refuses NaN
                raise ValueError(f"{name} must be a number of at least {lo}")
            return value

        return cls(database_url=env("OWNMEM_DATABASE_URL") or None,
                   data_dir=env("OWNMEM_DATA_DIR", "data"),
                   web_dir=env("OWNMEM_WEB_DIR") or None,
                   rate_per_second=number("OWNMEM_RATE_PER_SECOND", "200", 1e-6),
                   rate_burst=int(number("OWNMEM_RATE_BURST", "400", 1)),
                   address_rate_per_second=number("OWNMEM_ADDRESS_RATE_PER_SECOND", "20", 1e-6),
                   address_burst=int(number("OWNMEM_ADDRESS_BURST", "100", 1)),
                   register_per_hour=int(number("OWNMEM_REGISTER_PER_HOUR", "60", 1)),
                   vaults_per_key=int(number("OWNMEM_VAULTS_PER_KEY", "5", 1)),
                   vault_quota_bytes=int(number("OWNMEM_VAULT_QUOTA_BYTES", str(1 << 30), 0)),
                   body_timeout=number("OWNMEM_BODY_TIMEOUT", str(BODY_GRACE), 0.1),
                   body_min_rate=number("OWNMEM_BODY_MIN_RATE", str(BODY_MIN_RATE), 1),
                   verify_processes=int(env("OWNMEM_VERIFY_PROCESSES") or default_processes()))


@dataclass
class _Turn:
    """One vault's pushes, one at a time: the lock, and how many pushes hold or wait for it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


def _parsed(parse: Callable[[Any], T], value: Any) -> T:
    """A request's message, or the 400 ``malformed`` that names what did not parse."""
    try:
        return parse(value)
    except WireError as e:
        raise ApiError(E.MALFORMED, str(e)) from None


def _hex_param(v: str, what: str) -> bytes:
    return _parsed(lambda x: codec.Hex(32).load(x, what), v)


class Server:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.storage: Storage = open_storage(config.database_url, config.data_dir)
        self.vault_limiter = RateLimiter(config.rate_per_second, config.rate_burst)
        self.address_limiter = RateLimiter(config.address_rate_per_second, config.address_burst)
        self.register_limiter = RateLimiter(config.register_per_hour / 3600, config.register_per_hour)
        self.decoys = Decoys(self.storage.server_secret())
        self.challenge_key = challenges.challenge_key(self.storage.server_secret())
        self.live = Live(self.storage, config.database_url)
        self.verifier = VerifyPool(config.verify_processes)
        self._holders: dict[int, HolderKey] = {}
        self._pushing: dict[int, _Turn] = {}

    # ---------------------------------------------------------------- plumbing
    async def call(self, fn: Callable[P, T], *args: P.args, **kw: P.kwargs) -> T:
        return await run_in_threadpool(fn, *args, **kw)

    async def body(self, request: Request, limit: int = MAX_BODY) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None:
            try:
                if int(declared) > limit:
                    raise ApiError(E.TOO_LARGE, f"request body over {limit} bytes")
            except ValueError:
                raise ApiError(E.MALFORMED, "bad Content-Length") from None
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(E.TOO_LARGE, f"request body over {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def json_body(self, request: Request) -> dict[str, Any]:
        v = _parsed(codec.load_json, await self.body(request, MAX_JSON))
        if not isinstance(v, dict):
            raise ApiError(E.MALFORMED, "body must be a JSON object")
        return v

    # ---------------------------------------------------------------- who pays
    @staticmethod
    def _charge(limiter: RateLimiter, key: object, what: str) -> None:
        wait = limiter.take(key)
        if wait > 0:
            raise ApiError(E.RATE_LIMITED, what, {"Retry-After": str(max(1, int(wait + 0.999)))})

    def limit_address(self, request: Request) -> None:
        """Public routes and failed credentials: the client's address pays, never a vault."""
        self._charge(self.address_limiter, client_key(request.scope), "too many requests from this address")

    async def limit_reader(self, request: Request) -> None:
        """The public log's routes: a device of a vault reads them on every sync (checkpoint,
        consistency and inclusion proofs), so one presenting its vault's credential pays from that
        vault's budget; a person's devices behind one address then never run out of the address's
        budget by syncing.  Anyone else (no, or an unknown, credential) pays by address."""
        auth = request.headers.get("authorization", "")
        if auth.startswith("Bearer ") and len(auth) <= 200:
            found = await self.call(self.storage.token_vault, hashlib.sha256(auth[7:].strip().encode()).digest(),
                                    time.time())
            if found is not None:
                self._charge(self.vault_limiter, found[0], "too many requests for this vault")
                return
        self.limit_address(request)

    async def named(self, request: Request) -> tuple[VaultRecord | None, messages.VaultInfo]:
        """The vault a public route names (None for a decoy) and what its lookup shows."""
        self.limit_address(request)
        name = request.path_params["name"]
        if not valid_vault_name(name):
            raise ApiError(E.UNKNOWN_VAULT, "no such vault")
        return await self.call(self._find, name)

    def _find(self, name: str) -> tuple[VaultRecord | None, messages.VaultInfo]:
        decoy = self.decoys.info(name)    # made for every name, held or not: the answer takes as long
        v = self.storage.vault(name)
        if v is None:
            return None, decoy
        return v, messages.VaultInfo(v.name, v.salt, v.owner_pub, v.sync_pub, v.ka_pub, v.holder_pub, v.holder_id)

    async def authed(self, request: Request) -> tuple[VaultRecord, float]:
        """The vault named in the path and its credential's expiry, for a bearer credential issued
        for that same vault.  Only then is the vault's budget charged; whatever the path names,
        a credential of another vault answers wrong_vault (never whether that name is held)."""
        auth = request.headers.get("authorization", "")
        found = None
        if auth.startswith("Bearer ") and len(auth) <= 200:
            found = await self.call(self.storage.token_vault, hashlib.sha256(auth[7:].strip().encode()).digest(),
                                    time.time())
        if found is None:
            self.limit_address(request)
            raise ApiError(E.UNAUTHENTICATED, "the credential is missing, unknown or expired")
        vid, expires = found
        v = await self.call(self.storage.vault_by_id, vid)
        if v is None or v.name != request.path_params["name"]:
            raise ApiError(E.WRONG_VAULT, "this credential is for another vault")
        self._charge(self.vault_limiter, v.id, "too many requests for this vault")
        return v, expires

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
        self.limit_address(request)
        b = await self.json_body(request)
        name = b.get("name")
        if not isinstance(name, str) or not valid_vault_name(name):
            raise ApiError(E.BAD_NAME, E.BAD_NAME.description)
        reg = _parsed(messages.Registration.parse, b)
        # before any signature is verified: four verifications (two of them ML-DSA-65) and a
        # vault's storage per attempt
        self._charge(self.register_limiter, client_key(request.scope), "too many registrations from this address")
        if not ed25519_valid(reg.sync_pub, reg.proof, reg.message()):
            raise ApiError(E.BAD_SIGNATURE, "the registration is not signed by its sync key")
        if not ed25519_valid(reg.owner_pub, reg.metadata_sig, signed.metadata_message(name, 1, reg.metadata)):
            raise ApiError(E.BAD_SIGNATURE, "the metadata is not signed by the owner key")
        holder_id = hashlib.sha256(reg.holder_pub).digest()
        try:
            hk = HolderKey(reg.holder_pub, holder_id)
            r, entry = check_receipt(reg.key_receipt, hk, reg.holder_pub, "KEY")
        except Refused as e:
            raise ApiError(e.code, str(e)) from None
        except ValueError:
            raise ApiError(E.MALFORMED, "holder_pub is not an ML-DSA-65 public key") from None
        if r.subject_id != holder_id or r.detail != reg.holder_pub:
            raise ApiError(E.MALFORMED_RECEIPT, "a KEY receipt names the holder and carries its public key")
        # The KEY receipt is public (it is in the log), so it proves nothing about who
        # registers; the holder's own signature over this registration does.
        if not hk.valid(reg.message(), reg.holder_proof, signed.REGISTER_HOLDER_CONTEXT):
            raise ApiError(E.BAD_SIGNATURE, "the registration is not signed by its holder key")
        stored = Registration(name, reg.salt, reg.owner_pub, reg.sync_pub, reg.ka_pub, reg.holder_pub, holder_id,
                              reg.metadata, reg.metadata_sig, entry, reg.holder_proof)
        try:
            await self.call(self.storage.register, stored, max_per_key=self.config.vaults_per_key)
        except StorageConflict:
            raise ApiError(E.NAME_TAKEN, "a vault of that name exists") from None
        except StorageLimit:
            raise ApiError(E.TOO_MANY_VAULTS, f"a key of this registration is in {self.config.vaults_per_key} "
                                              "vaults on this server already") from None
        return JSONResponse(messages.Registered(name, holder_id, r.receipt_id).encode(), status_code=201)

    async def lookup(self, request: Request) -> Response:
        _, info = await self.named(request)
        return JSONResponse(info.encode())

    def _vault_name(self, request: Request) -> str:
        name: str = request.path_params["name"]
        if not valid_vault_name(name):
            self.limit_address(request)
            raise ApiError(E.UNKNOWN_VAULT, "no such vault")
        return name

    async def challenge(self, request: Request) -> Response:
        """Stateless (challenge.py): an HMAC, no row, no read, charged to nobody.  A stranger
        behind the owner's address who floods it spends nothing the owner's login needs."""
        name = self._vault_name(request)
        expires = int(time.time()) + CHALLENGE_TTL
        c = challenges.make(self.challenge_key, name, expires, secrets.token_bytes(challenges.NONCE_LEN))
        return JSONResponse(messages.Challenge(c, expires).encode())

    async def session(self, request: Request) -> Response:
        """A login that proves the vault's sync key is charged to the vault; one that does not,
        to the address (after the check: charging first would let a stranger's flood refuse
        the owner's login before its proof is even read)."""
        name = self._vault_name(request)
        req = _parsed(messages.SessionRequest.parse, await self.json_body(request))
        now = time.time()
        live_until = challenges.check(self.challenge_key, name, req.challenge, now, CHALLENGE_TTL)
        if live_until is None:
            self.limit_address(request)
            raise ApiError(E.UNAUTHENTICATED, "the challenge is unknown, used or expired")
        v, info = await self.call(self._find, name)
        # a decoy is checked against its sync key as well, and refused with the very same answer
        valid = ed25519_valid(info.sync_pub, req.signature, signed.auth_message(info.name, req.challenge))
        if v is None or not valid:
            self.limit_address(request)
            raise ApiError(E.UNAUTHENTICATED, "could not authenticate")
        self._charge(self.vault_limiter, v.id, "too many requests for this vault")
        # single use: the row is written only now, by a login that proved the key
        if not await self.call(self.storage.use_challenge, v.id, req.challenge, live_until, now):
            raise ApiError(E.UNAUTHENTICATED, "the challenge is unknown, used or expired")
        token = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
        expires = time.time() + TOKEN_TTL
        await self.call(self.storage.add_token, hashlib.sha256(token.encode()).digest(), v.id, expires)
        return JSONResponse(messages.Session(token, int(expires)).encode())

    # ---------------------------------------------------------------- vault routes
    async def metadata(self, request: Request) -> Response:
        # One route for both methods, so a 405 on this path lists all it allows (Allow: GET, HEAD,
        # PUT); two routes on one path answered OPTIONS with the first route's methods only.
        return await (self.put_metadata(request) if request.method == "PUT" else self.get_metadata(request))

    async def get_metadata(self, request: Request) -> Response:
        v, _ = await self.authed(request)
        version, meta, sig = await self.call(self.storage.metadata, v.id)
        return JSONResponse(messages.MetadataVersion(version, meta, sig).encode())

    async def put_metadata(self, request: Request) -> Response:
        v, _ = await self.authed(request)
        # the expected version is bounded (MAX_VERSION): a version is a 64-bit database integer,
        # and 2**80 used to end in a 500
        up = _parsed(messages.MetadataUpdate.parse, await self.json_body(request))
        if not ed25519_valid(v.owner_pub, up.signature, signed.metadata_message(v.name, up.expected_version + 1,
                                                                            up.metadata)):
            raise ApiError(E.BAD_SIGNATURE, "the metadata is not signed by the owner key for that version")
        try:
            version = await self.call(self.storage.cas_metadata, v.id, up.expected_version, up.metadata, up.signature)
        except StorageConflict:
            raise ApiError(E.STALE_VERSION, "the metadata changed; pull and retry") from None
        self.live.notify(v.id)
        return JSONResponse(messages.MetadataAccepted(version).encode())

    async def push(self, request: Request) -> Response:
        v, _ = await self.authed(request)
        # One push of a vault at a time (in this process), its body read only when its turn comes:
        # a vault's concurrent pushes queue behind each other, not in front of other vaults' pushes.
        turn = self._pushing.setdefault(v.id, _Turn())
        turn.users += 1
        try:
            async with turn.lock:
                res = await self._push(request, v)
        finally:
            turn.users -= 1
            if not turn.users:
                del self._pushing[v.id]
        if res.stored:
            self.live.notify(v.id)
        return JSONResponse(res.encode())

    async def _push(self, request: Request, v: VaultRecord) -> messages.PushResult:
        raw = await self.body(request)
        # the array's declared length first: a batch of 5000 would otherwise trip the item
        # cap of the decoder below and be called malformed instead of too large
        if _cbor_array_len(raw) > MAX_BATCH:
            raise ApiError(E.BATCH_TOO_LARGE, f"at most {MAX_BATCH} cells per push")
        req = _parsed(messages.PushRequest.parse, raw)
        # 1. What is worth verifying: each cellId once, and none the vault holds or erased.  The
        #    cellId is read from the cell's head; an item skipped here could never be stored
        #    (the storage keeps the first cell of an id, and never one it holds or erased), so
        #    it is counted as the duplicate (or erased cell) it is, unchecked.
        claims = [claimed_cell_id(it.cell) for it in req.items]
        present, erased = await self.call(self.storage.known_cells, v.id, list({c for c in claims if c}))
        todo: list[int] = []
        seen: set[bytes] = set()
        duplicates = gone = 0
        for i, cid in enumerate(claims):
            if cid is not None:
                if cid in present or cid in seen:
                    duplicates += 1
                    continue
                if cid in erased:
                    gone += 1
                    continue
                seen.add(cid)
            todo.append(i)
        # 2. The quota, before any verification (and again in the storage transaction).
        quota = self.config.vault_quota_bytes
        adding = sum(len(req.items[i].cell) + len(req.items[i].wrapped_dek) for i in todo)
        if adding and v.stored_bytes + adding > quota:
            raise ApiError(E.QUOTA_EXCEEDED, f"this push would take the vault to {v.stored_bytes + adding} bytes, "
                                             f"over its quota of {quota}")
        # 3. Verification is most of the cost, and ML-DSA-65 verification holds the GIL: a large
        #    batch is verified in worker processes, one part per core (verifypool.py).
        items = [[req.items[i].cell, req.items[i].wrapped_dek] for i in todo]
        checked = await self.verifier.check(items, self.holder(v), v.holder_pub)
        if isinstance(checked, tuple):
            i, e = checked
            raise ApiError(e.code, f"item {todo[i]}: {e}")
        try:
            res = await self.call(self.storage.push, v.id, checked, quota=quota)
        except StorageQuota as e:
            raise ApiError(E.QUOTA_EXCEEDED, str(e)) from None
        return messages.PushResult(res.stored, res.duplicates + duplicates, res.erased + gone, res.last_seq)

    async def changes(self, request: Request) -> Response:
        v, _ = await self.authed(request)
        since, limit = _int_param(request, "since", 0), _int_param(request, "limit", 1000)
        limit = max(1, min(limit, MAX_PAGE))
        rows, last = await self.call(self.storage.changes, v.id, since, limit)
        # bounded in bytes as well as in count: one response never grows past MAX_PAGE_BYTES
        size, keep = 0, 0
        for c in rows:
            size += len(c.cell or b"") + 64
            if keep and size > MAX_PAGE_BYTES:
                break
            keep += 1
        rows = rows[:keep]
        page = messages.ChangesPage(tuple(_change(c) for c in rows), rows[-1].seq if rows else since, last)
        # Streamed in slices rather than built whole: a page runs to ~20 MB, and the device
        # starts reading while the rest is encoded (docs/benchmarks.md, area `server`).
        return StreamingResponse(page.chunks(), media_type=CBOR)

    async def events(self, request: Request) -> Response:
        v, expires = await self.authed(request)

        async def stream() -> AsyncIterator[bytes]:
            last = -1
            # ends when the credential expires: the client logs in again and reconnects
            async for seq in self.live.watch(v.id, until=expires):
                if await request.is_disconnected():
                    return
                if seq != last:
                    last = seq
                    yield b"event: changes\ndata: " + codec.dump_json(messages.LiveEvent(seq).encode()) + b"\n\n"
                else:
                    yield b": keep-alive\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def erase(self, request: Request) -> Response:
        v, _ = await self.authed(request)
        req = _parsed(messages.EraseRequest.parse, await self.json_body(request))
        holder = self.holder(v)
        # off the event loop, the ML-DSA-65 verifications spread over the pool (verifypool.py)
        checked = await self.verifier.check_receipts([(raw, "FORGET") for raw in req.receipts], holder, v.holder_pub)
        if isinstance(checked, tuple):
            i, why = checked
            raise ApiError(why.code, f"receipt {i}: {why}")
        entries, ids = checked, [e.subject_id for e in checked]
        # a FORGET names a cell of this vault: another holder's cell is neither erased, logged
        # nor listed on this vault's word (an unknown cellId is: a push may still be on its way)
        foreign = await self.call(self.storage.foreign_cells, v.id, ids)
        if foreign:
            i = next(i for i, cid in enumerate(ids) if cid in foreign)
            raise ApiError(E.WRONG_HOLDER, f"receipt {i}: its cell is another holder's, not this vault's")
        done = await self.call(self.storage.erase, v.id, ids, entries, int(time.time()))
        if done:
            self.live.notify(v.id)
        # pending: erased bytes may still be on the server's disk (storage/scrub.py); sending
        # the same receipts again is how a client asks until it reads false
        pending = await self.call(self.storage.erasure_pending, v.id)
        erased = set(done)
        return JSONResponse(messages.EraseResult(tuple(done), tuple(c for c in ids if c not in erased), pending).encode())

    async def receipts(self, request: Request) -> Response:
        """Holder-signed receipts of this vault for the public log (SAIHM "Audit log", "Receipt
        semantics"): REMEMBER before a cell is pushed, and RECALL/STATUS if a device's policy
        writes any.  Every receipt is checked before any is logged, then all are logged in one
        transaction, idempotently by receiptId; the answer names them all."""
        v, _ = await self.authed(request)
        b = await self.json_body(request)
        raw = b.get("receipts")
        # the count before the hex of each is decoded: over the cap is its own 413, not "malformed"
        if isinstance(raw, list) and len(raw) > MAX_RECEIPTS:
            raise ApiError(E.TOO_MANY_RECEIPTS, f"at most {MAX_RECEIPTS} receipts per request")
        req = _parsed(messages.ReceiptsRequest.parse, b)
        holder = self.holder(v)
        ops: list[tuple[bytes, str]] = []
        for i, one in enumerate(req.receipts):
            try:
                op = parse_receipt(one).operation
            except OwnmemError as e:
                raise ApiError(E.MALFORMED_RECEIPT, f"receipt {i}: {e}") from None
            if op not in LOGGED_HERE:
                raise ApiError(E.MALFORMED_RECEIPT, f"receipt {i}: {op} receipts are not logged by this route")
            ops.append((one, op))
        # off the event loop, the ML-DSA-65 verifications spread over the pool (verifypool.py)
        checked = await self.verifier.check_receipts(ops, holder, v.holder_pub)
        if isinstance(checked, tuple):
            i, why = checked
            raise ApiError(why.code, f"receipt {i}: {why}")
        entries: dict[bytes, LogEntry] = {}
        for entry in checked:
            entries.setdefault(entry.receipt_id, entry)
        await self.call(self.storage.log_receipts, list(entries.values()))
        return JSONResponse(messages.ReceiptsLogged(tuple(entries)).encode())

    async def export(self, request: Request) -> Response:
        """A streamed `.amem` of the vault, byte-identical to what the owner's device exports."""
        v, _ = await self.authed(request)
        _, meta, _ = await self.call(self.storage.metadata, v.id)
        try:
            doc = cbor.decode(meta)
            vault_public, amem_sig = doc["vault_public"], doc["amem_sig"]
            if not isinstance(vault_public, dict) or not isinstance(amem_sig, bytes):
                raise KeyError
        except (OwnmemError, KeyError, TypeError):
            raise ApiError(E.NO_EXPORT, "this vault's metadata carries no export header") from None
        try:
            snap = await self.call(self.storage.export_snapshot, v.id)
        except StorageBusy as e:
            raise ApiError(E.BUSY, str(e), {"Retry-After": "10"}) from None
        return StreamingResponse(_amem_stream(snap, vault_public, amem_sig), media_type=AMEM,
                                 headers={"Content-Disposition": f'attachment; filename="{v.name}.amem"'})

    # ---------------------------------------------------------------- public log
    async def log_get(self, request: Request) -> Response:
        await self.limit_reader(request)
        rid = request.path_params["receipt_id"]
        r = await self.call(self.storage.log_get, bytes.fromhex(rid)) if _is_hex64(rid) else None
        if r is None:
            raise ApiError(E.NOT_FOUND, "no such receipt")
        return JSONResponse(_log_json(r))

    async def log_list(self, request: Request) -> Response:
        await self.limit_reader(request)      # a device reads its holder's FORGETs on every sync
        q = request.query_params
        holder = _hex_param(q["holder"], "holder") if "holder" in q else None
        subject = _hex_param(q["subject"], "subject") if "subject" in q else None
        op = q.get("operation")
        if op is not None and op not in OPERATIONS:
            raise ApiError(E.MALFORMED, "unknown operation")
        rows = await self.call(self.storage.log_list, holder_id=holder, subject_id=subject, operation=op,
                               after=_int_param(request, "after", 0),
                               limit=max(1, min(_int_param(request, "limit", 100), 1000)))
        return JSONResponse({"entries": [_log_json(r) for r in rows]})

    async def erasures(self, request: Request) -> Response:
        await self.limit_reader(request)
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


def _change(c: Change) -> messages.ChangeRow:
    return messages.change_row([c.seq, c.kind, c.cell_id, c.cell, c.wrapped_dek])


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
        raise ApiError(E.MALFORMED, f"{name} must be a non-negative integer")
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


# ---------------------------------------------------------------- every answer that is not 2xx

def refusal(code: ErrorCode, message: str, headers: Mapping[str, str] | None = None) -> Response:
    """The one shape of every answer that is not 2xx."""
    return JSONResponse(messages.ErrorBody(code, message).encode(), status_code=code.status, headers=headers)


# what Starlette raises itself: no route for the path (also a file the web mount lacks), and a
# route that does not take the method (with Allow)
_STARLETTE = {404: E.NOT_FOUND, 405: E.METHOD_NOT_ALLOWED}


async def _answer(request: Request, exc: Exception) -> Response:
    if isinstance(exc, ApiError):
        return refusal(exc.code, exc.message, exc.headers)
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
        except Exception:
            _log.exception("unexpected error answering %s %s", scope.get("method"), scope.get("path"))
            if not started:
                await refusal(E.INTERNAL, E.INTERNAL.description)(scope, receive, send)


def create_app(config: Config | None = None) -> Starlette:
    cfg = config or Config.from_env()
    srv = Server(cfg)
    routes: list[BaseRoute] = [
        Route("/health", srv.health),
        Route("/openapi.json", srv.openapi),
        Route("/v1/vaults", srv.register, methods=["POST"]),
        Route("/v1/vaults/{name}", srv.lookup),
        Route("/v1/vaults/{name}/challenge", srv.challenge, methods=["POST"]),
        Route("/v1/vaults/{name}/session", srv.session, methods=["POST"]),
        Route("/v1/vaults/{name}/metadata", srv.metadata, methods=["GET", "PUT"]),
        Route("/v1/vaults/{name}/cells", srv.push, methods=["POST"]),
        Route("/v1/vaults/{name}/changes", srv.changes),
        Route("/v1/vaults/{name}/events", srv.events),
        Route("/v1/vaults/{name}/erase", srv.erase, methods=["POST"]),
        Route("/v1/vaults/{name}/receipts", srv.receipts, methods=["POST"]),
        Route("/v1/vaults/{name}/export.amem", srv.export),
        *witness_routes(srv.storage, ApiError, srv.authed, srv.json_body, srv.call),
        Route("/v1/log", srv.log_list),
        # before /v1/log/{receipt_id}, which would take /v1/log/checkpoint; public: paid by the address
        *log_routes(srv.storage, ApiError, srv.limit_reader),
        Route("/v1/log/{receipt_id}", srv.log_get),
        Route("/v1/erasures", srv.erasures),
        *share_routes(srv),     # sharing between people: the holder directory, contracts, shared cells
        Route("/", srv.index),
    ]
    web = srv.web_dir()
    if web is not None:
        routes.append(WebMount("/", app=WebFiles(directory=str(web)), name="web"))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await srv.live.start()
        srv.verifier.start()
        sweeper = asyncio.create_task(sweep_expired(srv, sweep_every()))   # expired shares' keys
        try:
            yield
        finally:
            sweeper.cancel()
            await srv.live.stop()
            srv.verifier.close()
            srv.storage.close()

    app = Starlette(routes=routes, lifespan=lifespan,
                    middleware=[Middleware(LastResort),
                                Middleware(BodyDeadline, grace=cfg.body_timeout, min_rate=cfg.body_min_rate)],
                    exception_handlers={ApiError: _answer, HTTPException: _answer})
    app.state.server = srv
    return app
