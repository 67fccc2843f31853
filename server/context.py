"""What every route of the blind server shares: its configuration (``Config``), the refusal a
route raises (``ApiError``, answered by server/app.py), request parsing (bodies, JSON bodies,
messages, parameters) and who pays for a request (rate limits, credentials), held by the
``Context`` each route module's ``*_routes(ctx)`` is given."""
from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ownmem.asgi import BODY_GRACE, BODY_MIN_RATE
from ownmem.errors import OwnmemError, WireError
from ownmem.wire import codec, messages
from ownmem.wire.errors import ErrorCode
from ownmem.wire.limits import MAX_BODY, MAX_JSON, valid_vault_name
from server import challenge as challenges
from server.decoy import Decoys
from server.live import Live
from server.ratelimit import RateLimiter, client_key
from server.storage import Storage, open_storage
from server.storage.base import VaultRecord
from server.verify import HolderKey
from server.verifypool import VerifyPool, default_processes

E = ErrorCode
P = ParamSpec("P")
T = TypeVar("T")


class ApiError(OwnmemError):
    """A refusal, answered with its code's status as ``{"error": code, "message": message}``."""

    code: ErrorCode

    def __init__(self, code: ErrorCode, message: str, headers: dict[str, str] | None = None,
                 vault: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.headers = code, message, headers
        self.vault = vault      # keys_registered: the vault these keys hold (told only to their holder)


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
    body_timeout: float = BODY_GRACE         # seconds a request body may take beyond its bytes at ...
    body_min_rate: float = BODY_MIN_RATE     # ... this many bytes per second
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


def parsed(parse: Callable[[Any], T], value: Any) -> T:
    """A request's message, or the 400 ``malformed`` that names what did not parse."""
    try:
        return parse(value)
    except WireError as e:
        raise ApiError(E.MALFORMED, str(e)) from None


def hex_param(v: str, what: str) -> bytes:
    return parsed(lambda x: codec.Hex(32).load(x, what), v)


def int_param(request: Request, name: str, default: int) -> int:
    v = request.query_params.get(name)
    if v is None:
        return default
    if not (v.isascii() and v.isdigit()) or len(v) > 18:   # str.isdigit alone takes "²" and "１"
        raise ApiError(E.MALFORMED, f"{name} must be a non-negative integer")
    return int(v)


class Context:
    """What every route module is given (server/app.py composes them): the configuration, the
    storage, the rate limiters, the verifiers, and the parsing and checks routes share."""

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
        v = parsed(codec.load_json, await self.body(request, MAX_JSON))
        if not isinstance(v, dict):
            raise ApiError(E.MALFORMED, "body must be a JSON object")
        return v

    # ---------------------------------------------------------------- who pays
    @staticmethod
    def charge(limiter: RateLimiter, key: object, what: str) -> None:
        wait = limiter.take(key)
        if wait > 0:
            raise ApiError(E.RATE_LIMITED, what, {"Retry-After": str(max(1, int(wait + 0.999)))})

    def limit_address(self, request: Request) -> None:
        """Public routes and failed credentials: the client's address pays, never a vault."""
        self.charge(self.address_limiter, client_key(request.scope), "too many requests from this address")

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
                self.charge(self.vault_limiter, found[0], "too many requests for this vault")
                return
        self.limit_address(request)

    async def named(self, request: Request) -> tuple[VaultRecord | None, messages.VaultInfo]:
        """The vault a public route names (None for a decoy) and what its lookup shows."""
        self.limit_address(request)
        name = request.path_params["name"]
        if not valid_vault_name(name):
            raise ApiError(E.UNKNOWN_VAULT, "no such vault")
        return await self.call(self.find, name)

    def find(self, name: str) -> tuple[VaultRecord | None, messages.VaultInfo]:
        decoy = self.decoys.info(name)    # made for every name, held or not: the answer takes as long
        v = self.storage.vault(name)
        if v is None:
            return None, decoy
        wrap = self.storage.root_wrap(v.id) or decoy.root_wrap
        return v, messages.VaultInfo(v.name, v.salt, v.owner_pub, v.sync_pub, v.ka_pub, v.holder_pub, v.holder_id,
                                     wrap)

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
        self.charge(self.vault_limiter, v.id, "too many requests for this vault")
        return v, expires

    def holder(self, v: VaultRecord) -> HolderKey:
        h = self._holders.get(v.id)
        if h is None:
            h = self._holders[v.id] = HolderKey(v.holder_pub, v.holder_id)
        return h

    # ---------------------------------------------------------------- public routes
