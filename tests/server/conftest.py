"""Fixtures for the blind-server tests: a real server (uvicorn in a subprocess) on each backend.

    backend        parametrized "sqlite" | "postgres": the same test runs against both
    linked_vault   make(n) -> an unlocked local vault with n memories, registered on that server
    start_server   start(env) -> another server process (its own limits), stopped at teardown

PostgreSQL rule: when 127.0.0.1:5432 does not answer, the postgres half is skipped with a
visible reason on a developer machine, and FAILS when the CI variable is set, so CI can
never pass by silently skipping half the matrix.  Every session gets a fresh database
(``ownmem_test_<random>``), dropped at the end.
"""
from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from ownmem.crypto import cbor, provider, run_sync
from ownmem.saihm.cell import make_cell
from ownmem.saihm.receipt import make_receipt
from ownmem.vault import UnlockedVault, Vault
from ownmem.vault.store import Store
from ownmem.vault.sync import Syncer, SyncReport, link

ROOT = Path(__file__).resolve().parents[2]

PASSPHRASE = "server tests: correct horse battery staple"
PG_BASE = os.environ.get("OWNMEM_TEST_PG", "postgresql://postgres@127.0.0.1:5432")
STARTUP_TIMEOUT = 30.0


# ---------------------------------------------------------------- PostgreSQL availability

def _pg_host() -> str:
    return PG_BASE.split("@", 1)[-1].split("/", 1)[0]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def pg_reachable() -> bool:
    import psycopg

    try:
        with psycopg.connect(f"{PG_BASE}/postgres", connect_timeout=3) as c:
            c.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def require_postgres() -> None:
    """Skip (developer machine) or fail (CI) when PostgreSQL does not answer."""
    if pg_reachable():
        return
    reason = f"PostgreSQL not reachable on {_pg_host()}: skipping PostgreSQL tests"
    if in_ci():
        pytest.fail(f"PostgreSQL not reachable on {_pg_host()} and CI is set: the PostgreSQL tests must run in CI",
                    pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A fresh database for this session: its URL.  Dropped at the end."""
    require_postgres()
    import psycopg

    name = f"ownmem_test_{secrets.token_hex(6)}"
    with psycopg.connect(f"{PG_BASE}/postgres", autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    try:
        yield f"{PG_BASE}/{name}"
    finally:
        with psycopg.connect(f"{PG_BASE}/postgres", autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


# ---------------------------------------------------------------- server processes

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """``python -m server --port P`` with the given environment; ready when /health answers."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        # nothing OWNMEM_* leaks in from the developer's shell: the test chooses the backend
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("OWNMEM_")}
        full = {**inherited, **env, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "py")])}
        for _ in range(3):   # the free port can be taken in between by another process: try another
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            self._out = log.open("wb")
            self.proc = subprocess.Popen([sys.executable, "-m", "server", "--port", str(self.port)], cwd=ROOT,
                                         env=full, stdout=self._out, stderr=subprocess.STDOUT)
            if self._wait_ready():
                return
            if "address already in use" not in self.output().lower():
                break
        pytest.fail(f"the server did not start:\n{self.output()}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                return False
            try:
                if httpx.get(self.url + "/health", timeout=1.0).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        return False

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._out.close()


# The session servers take many registrations and public requests from this one address (and
# vaults of three key sets); tests of those limits start servers of their own without these.
GENEROUS = {"OWNMEM_ADDRESS_RATE_PER_SECOND": "1000000", "OWNMEM_ADDRESS_BURST": "1000000",
            "OWNMEM_REGISTER_PER_HOUR": "1000000", "OWNMEM_VAULTS_PER_KEY": "1000000"}


@dataclass
class Backend:
    """A running server on one storage backend."""

    kind: str                   # "sqlite" | "postgres"
    url: str                    # base URL of the running server
    env: dict[str, str]         # the server environment that selects this backend's storage

    def strict_env(self) -> dict[str, str]:
        """``env`` without the session servers' generous limits: a server of the defaults."""
        return {k: v for k, v in self.env.items() if k not in GENEROUS}

    def storage(self) -> Any:
        """This backend's storage, opened in the test process: for states no request makes (expired ones)."""
        from server.storage import open_storage

        if self.kind == "postgres":
            return open_storage(self.env["OWNMEM_DATABASE_URL"])
        return open_storage(None, self.env["OWNMEM_DATA_DIR"])


def _backend_env(kind: str, tmp: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    if kind == "postgres":
        return {"OWNMEM_DATABASE_URL": request.getfixturevalue("pg_database")}
    return {"OWNMEM_DATA_DIR": str(tmp)}


def _session_server(kind: str, request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    tmp = tmp_path_factory.mktemp(f"{kind}-server")
    # two verification processes whatever the machine's CPU count, so large pushes always take
    # the process-pool path (server/verifypool.py) that production servers take on multi-core hosts
    env = {**_backend_env(kind, tmp / "data", request), "OWNMEM_VERIFY_PROCESSES": "2", **GENEROUS}
    srv = ServerProcess(env, tmp / "server.log")
    try:
        yield Backend(kind, srv.url, env)
    finally:
        srv.stop()
    # every refusal is an answer with a code: an exception the client never saw (a failure
    # inside a streamed response, say) shows up here
    assert "Traceback" not in srv.output(), f"the {kind} server logged an error:\n{srv.output()}"


@pytest.fixture(scope="session")
def sqlite_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    yield from _session_server("sqlite", request, tmp_path_factory)


@pytest.fixture(scope="session")
def postgres_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    yield from _session_server("postgres", request, tmp_path_factory)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> Backend:
    """The running server on each backend in turn: the same test runs on both."""
    b: Backend = request.getfixturevalue(f"{request.param}_server")
    return b


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """start(base_env, **extra_env) -> URL of a server of its own (e.g. with low rate limits)."""
    started: list[ServerProcess] = []

    def start(base_env: dict[str, str], **extra: str) -> str:
        srv = ServerProcess({**base_env, **extra}, tmp_path / f"server-{len(started)}.log")
        started.append(srv)
        return srv.url

    yield start
    for s in started:
        s.stop()
    for s in started:
        assert "Traceback" not in s.output(), s.output()


# ---------------------------------------------------------------- vaults on the server

def unique_name(prefix: str = "t") -> str:
    return f"{prefix}{secrets.token_hex(6)}"


@dataclass
class LinkedVault:
    """An unlocked vault registered on a server, with the raw HTTP an attacker would use."""

    v: UnlockedVault
    syncer: Syncer
    name: str
    base: str
    http: httpx.Client
    _token: str | None = field(default=None, repr=False)

    @property
    def token(self) -> str:
        if self._token is None:
            self.syncer.ensure_login()
            assert self.syncer.remote.token is not None
            self._token = self.syncer.remote.token
        return self._token

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def url(self, path: str = "") -> str:
        return f"{self.base}/v1/vaults/{self.name}{path}"

    def cells(self) -> list[list[bytes]]:
        """[cell, wrapped DEK] for every object not yet pushed, made fresh (nothing is stored or sent)."""
        h = self.v.holder()
        now = int(time.time())
        out = []
        for row in self.v.store.unpushed(10_000):
            c = run_sync(make_cell(self.v.crypto, xi=h.xi, holder_id=h.holder_id, kek_version=1, tier="STANDARD",
                                   cell_nonce=row.object_id, ciphertext=row.sealed, timestamp=now))
            out.append([c.to_cbor(), row.dek_wrapped])
        return out

    def push(self, items: list[list[bytes]] | bytes, token: str | None = None) -> httpx.Response:
        body = items if isinstance(items, bytes) else cbor.encode(items)
        return self.http.post(self.url("/cells"), content=body,
                              headers={"Authorization": f"Bearer {token or self.token}",
                                       "Content-Type": "application/cbor"})

    def sync(self) -> SyncReport:
        return self.syncer.sync_once()

    def receipt(self, operation: str, subject: bytes, *, detail: Any = None) -> bytes:
        h = self.v.holder()
        return run_sync(make_receipt(self.v.crypto, xi=h.xi, holder_id=h.holder_id, operation=operation,
                                     subject_id=subject, timestamp=int(time.time()), detail=detail)).to_cbor()

    def changes(self, since: int = 0) -> dict[int, Any]:
        r = self.http.get(self.url(f"/changes?since={since}&limit=5000"), headers=self.auth())
        assert r.status_code == 200, r.text
        page: dict[int, Any] = cbor.decode(r.content)
        return page

    def last_seq(self) -> int:
        return int(self.changes()[3])

    def snapshot(self) -> tuple[Any, ...]:
        """What the server holds for this vault, as its owner sees it: for "nothing changed"."""
        meta = self.http.get(self.url("/metadata"), headers=self.auth())
        assert meta.status_code == 200, meta.text
        lookup = self.http.get(self.url())
        h = self.v.holder().holder_id.hex()
        log = self.public_list("/v1/log", holder=h)
        erasures = [e for e in self.public_list("/v1/erasures") if e["holder_id"] == h]
        return meta.json(), self.changes(), lookup.json(), log, erasures

    def public_list(self, path: str, **params: str) -> list[dict[str, Any]]:
        """Every entry of a public list, page by page."""
        out: list[dict[str, Any]] = []
        while True:
            r = self.http.get(self.base + path, params={**params, "after": out[-1]["index"] if out else 0,
                                                         "limit": 1000})
            assert r.status_code == 200, r.text
            page = r.json()["entries"]
            if not page:
                return out
            out.extend(page)


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60.0) as c:
        yield c


@pytest.fixture(scope="session")
def _identities(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    """Three vault identities made once (Argon2id costs ~0.4 s each): role -> (empty vault folder, identity)."""
    out = {}
    for role in ("a", "b", "c"):
        folder = tmp_path_factory.mktemp(f"identity-{role}") / "vault"
        v = Vault.create(folder, PASSPHRASE)
        out[role] = (folder, v.identity)
        v.lock()
    return out


@pytest.fixture
def linked_vault(backend: Backend, tmp_path: Path, http: httpx.Client,
                 _identities: dict[str, tuple[Path, Any]]) -> Iterator[Callable[..., LinkedVault]]:
    """make(n=3, key="a", name=None) -> a vault with n new memories, linked (registered) on ``backend``.

    ``key`` picks one of three identities: vaults made with different keys have different owner,
    sync and holder keys; vaults made with the same key share them (each is still a fresh folder
    and a fresh vault name on the server)."""
    made: list[UnlockedVault] = []

    def make(n: int = 3, key: str = "a", name: str | None = None) -> LinkedVault:
        template, ident = _identities[key]
        folder = tmp_path / f"vault-{len(made)}"
        shutil.copytree(template, folder)
        v = UnlockedVault(Store(folder), ident, provider())
        made.append(v)
        for i in range(n):
            v.add(f"memory {i} of vault {len(made)}", tags=("test",))
        nm = name or unique_name()
        # identities are shared to save Argon2id: a second name for the same keys is asked for
        return LinkedVault(v, link(v, backend.url, nm, client=http, another_name=True), nm, backend.url, http)

    yield make
    for v in made:
        if v.ident is not None:
            v.lock()
