"""Helpers for the sync tests: real server processes, storage backends, devices, recorders.

A plain module, not a conftest: test
modules import helpers from here by name; ``conftest.py`` in this folder turns them
into fixtures.

    Backend        one fresh server store: a SQLite data folder, or a fresh PostgreSQL
                   database (created per test module, dropped after it)
    ServerProcess  ``python -m server`` as a real subprocess on its own port; SIGKILL-able,
                   restartable on the same storage; stdout/stderr kept in files
    Device         one unlocked vault + its Syncer, talking through an httpx client
                   the test owns (and closes)
    Recorder       an httpx client whose every request and response body is kept
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from ownmem.vault import Listing, UnlockedVault, Vault
from ownmem.vault.remote import Remote
from ownmem.vault.sync import Syncer, SyncReport, link, login_new_device
from ownmem.wire import messages

ROOT = Path(__file__).resolve().parents[2]

PASSPHRASE = "sync tests: blue walrus sings at dawn 41"
WRONG_PASSPHRASE = "sync tests: not the passphrase at all"

PG_HOST, PG_PORT = "127.0.0.1", 5432
PG_ADMIN_URL = f"postgresql://postgres@{PG_HOST}:{PG_PORT}/postgres"
PG_SKIP_REASON = f"PostgreSQL not reachable on {PG_HOST}:{PG_PORT}: skipping PostgreSQL tests"

_SCRIPT = Path(sys.executable).with_name("ownmem")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "ownmem.cli"]


# ------------------------------------------------------------------ PostgreSQL

_pg_ok: bool | None = None


def pg_reachable() -> bool:
    global _pg_ok
    if _pg_ok is None:
        try:
            import psycopg

            with psycopg.connect(PG_ADMIN_URL, connect_timeout=3) as c:
                c.execute("SELECT 1")
            _pg_ok = True
        except Exception:  # noqa: BLE001 - any failure means "not reachable"
            _pg_ok = False
    return _pg_ok


def require_postgres() -> None:
    """Skip (visibly) without PostgreSQL; in CI a missing database is a failure, not a skip."""
    if pg_reachable():
        return
    if os.environ.get("CI"):
        pytest.fail(PG_SKIP_REASON.replace("skipping", "CI is set, so not skipping"), pytrace=False)
    pytest.skip(PG_SKIP_REASON)


def _pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5) as c:
        c.execute(sql)


# ------------------------------------------------------------------ backends

@dataclass
class Backend:
    """One server store.  ``kind`` is "sqlite" or "postgres"."""

    kind: str
    root: Path                       # scratch folder: SQLite data, server logs
    database: str | None = None      # PostgreSQL database name

    @property
    def data_dir(self) -> Path:
        return self.root / "server-data"

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "ownmem.db"

    @property
    def database_url(self) -> str | None:
        return f"postgresql://postgres@{PG_HOST}:{PG_PORT}/{self.database}" if self.database else None

    @property
    def pg_url(self) -> str:
        """The PostgreSQL database's URL, for code that runs on that backend only."""
        url = self.database_url
        assert url is not None, "not a PostgreSQL backend"
        return url

    def server_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OWNMEM_")}
        if self.kind == "postgres":
            assert self.database_url is not None
            env["OWNMEM_DATABASE_URL"] = self.database_url
        else:
            env["OWNMEM_DATA_DIR"] = str(self.data_dir)
        return env

    def rows(self, query: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        """Read the server's store directly (``?`` placeholders on both backends)."""
        if self.kind == "postgres":
            import psycopg

            with psycopg.connect(self.pg_url, autocommit=True) as c:
                return [tuple(bytes(x) if isinstance(x, memoryview) else x for x in r)
                        for r in c.execute(query.replace("?", "%s"), params).fetchall()]
        with closing(sqlite3.connect(self.sqlite_path, timeout=30)) as c:
            return c.execute(query, params).fetchall()

    def last_seq(self, vault_name: str) -> int:
        r = self.rows("SELECT last_seq FROM vaults WHERE name = ?", (vault_name,))
        return int(r[0][0]) if r else 0

    def snapshot(self) -> dict[str, bytes]:
        """Every byte the server stores, by source name.

        SQLite: the database file and its -wal and -shm files, as they are on disk.
        PostgreSQL: a ``pg_dump`` of the database (bytea appears hex-encoded there) and
        every row of every table read back as raw bytes (so raw needles are found too).
        """
        out: dict[str, bytes] = {}
        if self.kind == "sqlite":
            for suffix in ("", "-wal", "-shm"):
                p = Path(str(self.sqlite_path) + suffix)
                if p.exists():
                    out[p.name] = p.read_bytes()
            return out
        assert self.database is not None
        if shutil.which("pg_dump"):
            r = subprocess.run(["pg_dump", "--no-owner", "-h", PG_HOST, "-p", str(PG_PORT), "-U", "postgres",
                                self.database], capture_output=True, timeout=120,
                               env={**os.environ, "PGCONNECT_TIMEOUT": "5"})
            assert r.returncode == 0, r.stderr.decode(errors="replace")
            out["pg_dump"] = r.stdout
        import psycopg
        from psycopg import sql

        chunks: list[bytes] = []
        with psycopg.connect(self.pg_url, autocommit=True) as c:
            tables = [t for (t,) in c.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                                              "ORDER BY tablename")]
            for t in tables:
                for row in c.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(t))):
                    for x in row:
                        chunks.append(bytes(x) if isinstance(x, (bytes, memoryview)) else str(x).encode())
        out["pg_rows"] = b"\x00".join(chunks)
        return out

    def integrity_ok(self) -> str:
        """SQLite's own verdict on the file (only meaningful with the server stopped)."""
        assert self.kind == "sqlite"
        with closing(sqlite3.connect(self.sqlite_path)) as c:
            return str(c.execute("PRAGMA integrity_check").fetchone()[0])


@contextmanager
def make_backend(kind: str, root: Path, tag: str) -> Iterator[Backend]:
    """A fresh store; for PostgreSQL a fresh database, dropped afterwards."""
    root.mkdir(parents=True, exist_ok=True)
    if kind == "sqlite":
        yield Backend("sqlite", root)
        return
    require_postgres()
    name = f"ownmem_sync_{tag}_{secrets.token_hex(4)}".lower()
    _pg_admin(f'CREATE DATABASE "{name}"')
    try:
        yield Backend("postgres", root, name)
    finally:
        _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# ------------------------------------------------------------------ server processes

def free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """``python -m server`` as a real subprocess.  Restarts reuse the port and the store;
    stdout and stderr of every run are appended to two files."""

    def __init__(self, backend: Backend, *, label: str = "server", workers: int = 1,
                 extra_env: dict[str, str] | None = None) -> None:
        self.backend = backend
        self.port = free_port()
        self.workers = workers
        self.env = {**backend.server_env(), **(extra_env or {})}
        logs = backend.root / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.stdout_path = logs / f"{label}-{self.port}.stdout"
        self.stderr_path = logs / f"{label}-{self.port}.stderr"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> ServerProcess:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        with open(self.stdout_path, "ab") as out, open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "server", "--port", str(self.port),
                                          "--workers", str(self.workers)],
                                         cwd=ROOT, env=self.env, stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2.0) as c:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"server exited with {self.proc.returncode}:\n"
                                       f"{self.logs().decode(errors='replace')}")
                try:
                    if c.get(self.url + "/health").status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"server did not come up in {timeout} s:\n{self.logs().decode(errors='replace')}")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, exactly like a crash or a power cut of the process."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self, timeout: float = 15.0) -> bool:
        """Graceful stop (SIGTERM); SIGKILL if it does not exit in time.  -> whether it exited by itself."""
        if self.proc is None or self.proc.poll() is not None:
            return True
        self.proc.terminate()
        try:
            self.proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            self.kill()
            return False

    def logs(self) -> bytes:
        return b"".join(p.read_bytes() for p in (self.stdout_path, self.stderr_path) if p.exists())


# ------------------------------------------------------------------ HTTP recording

@dataclass
class Recorder:
    """Every request body a client sent and every response body it received."""

    sent: list[bytes] = field(default_factory=list)
    received: list[bytes] = field(default_factory=list)

    def client(self) -> httpx.Client:
        return httpx.Client(timeout=60.0, follow_redirects=False,
                            event_hooks={"request": [self._request], "response": [self._response]})

    def _request(self, request: httpx.Request) -> None:
        self.sent.append(request.content)

    def _response(self, response: httpx.Response) -> None:
        response.read()
        self.received.append(response.content)


# ------------------------------------------------------------------ devices

class Device:
    """One device: an unlocked vault and its Syncer, over a client the test owns."""

    def __init__(self, syncer: Syncer, client: httpx.Client) -> None:
        self.syncer, self.client = syncer, client

    @property
    def v(self) -> UnlockedVault:
        return self.syncer.v

    @property
    def folder(self) -> Path:
        folder = self.syncer.store.folder
        assert folder is not None, "a device's vault lives in a folder"
        return folder

    @property
    def remote(self) -> Remote:
        return self.syncer.remote

    def sync(self) -> SyncReport:
        return self.syncer.sync_once()

    def listing(self, **kw: Any) -> Listing:
        return self.v.open_all(**kw)

    def contents(self) -> set[str]:
        return {e.opened.content for e in self.listing().entries}

    def close(self) -> None:
        if self.v.ident is not None:
            self.v.lock()
        self.client.close()


class Devices:
    """Makes devices and closes every one of them at teardown."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.made: list[Device] = []
        self._n = 0

    def _folder(self, label: str) -> Path:
        self._n += 1
        return self.root / f"{self._n:02d}-{label}"

    def first(self, url: str, name: str, *, label: str = "a", passphrase: str = PASSPHRASE,
              client: httpx.Client | None = None, sync: bool = True) -> Device:
        """A new vault on this device, linked to the server under ``name``."""
        v = Vault.create(self._folder(label), passphrase)
        c = client or httpx.Client(timeout=60.0)
        try:
            s = link(v, url, name, client=c)
        except BaseException:
            v.lock()
            c.close()
            raise
        d = Device(s, c)
        self.made.append(d)
        if sync:
            d.sync()
        return d

    def join(self, url: str, name: str, *, label: str = "b", passphrase: str = PASSPHRASE,
             client: httpx.Client | None = None, sync: bool = True) -> Device:
        """A new device: no local vault, log in with the passphrase, pull."""
        c = client or httpx.Client(timeout=60.0)
        try:
            s = login_new_device(self._folder(label), url, name, passphrase, client=c)
        except BaseException:
            c.close()
            raise
        d = Device(s, c)
        self.made.append(d)
        if sync:
            d.sync()
        return d

    def close(self) -> None:
        for d in self.made:
            d.close()
        self.made.clear()


def row_key(row: messages.ChangeRow) -> tuple[int, str, bytes | None]:
    """A change as (seq, kind, cell id)."""
    if isinstance(row, messages.MetaChange):
        return row.seq, "meta", None
    if isinstance(row, messages.WrapChange):
        return row.seq, "wrap", row.cell_id
    return row.seq, "erase" if isinstance(row, messages.EraseChange) else "cell", row.cell_id


def feed(remote: Remote, *, page: int = 1000) -> list[tuple[int, str, bytes | None]]:
    """The whole change feed as (seq, kind, cell id), paged by ``since`` like a device pulls."""
    out: list[tuple[int, str, bytes | None]] = []
    since = 0
    while True:
        p = remote.changes(since, page)
        out.extend(row_key(r) for r in p.rows)
        since = p.next_since
        if not p.more:
            return out


def cli_env(root: Path, vault: Path, passphrase: str | None = PASSPHRASE) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OWNMEM_")}
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    env["HOME"] = str(home)
    env["OWNMEM_VAULT"] = str(vault)
    if passphrase is not None:
        env["OWNMEM_PASSPHRASE"] = passphrase
    return env


def ownmem(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """One CLI call; the passphrase never reaches its output and no traceback does either."""
    r = subprocess.run(CLI + list(args), env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       timeout=timeout)
    pw = env.get("OWNMEM_PASSPHRASE")
    if pw:
        assert pw not in r.stdout + r.stderr, f"passphrase leaked by ownmem {args[0]}"
    assert "Traceback" not in r.stdout + r.stderr, r.stderr
    return r
