"""Area `server`: the blind sync server over real HTTP, on SQLite and on PostgreSQL, one run.

    batched push          Remote.push of pre-made [cell, wrapped DEK] batches, every cell fully
                          verified by the server (ML-DSA-65 and the rest)   >= 5,000 cells/s (SQLite)
    change-feed pull      Remote.changes paging through the whole feed      >= 30,000 cells/s (SQLite)
    fresh CLI device      `ownmem login` into an empty folder, end to end   <= 5 s for 10,000 memories
    concurrency           32 clients, each its own session, 60 s, mixed     zero errors; p50/p99, req/s
    a stranger's flood    16 unauthenticated connections hammer lookup and  every `ownmem sync` of the
                          challenge at the owner's vault name for 30 s      owner succeeds (default limits)
    PostgreSQL            every measure above                               within 2x of SQLite
    anchor                pull items/s against Vaultwarden's ~10,000 items/s (3,000 items in ~300 ms)

Both backends are measured in the same run by two real server processes (``python -m
server``), one per backend, running side by side on 127.0.0.1; the PostgreSQL one gets a
fresh database, dropped at the end.  Repetitions alternate between the backends, so drift
in the machine lands on both.  The cells are made once, before anything is timed, from a
real vault (``UnlockedVault.add`` x N, then the very call ``Syncer.push`` makes per cell);
ML-DSA signing costs ~1.5 ms per cell and is the client's cost, not the server's.  A cell
is bound to its holder (the vault identity), not to a server or a vault name, so the same
identity is registered on both servers, and under a fresh name per timed push so that
every timed push stores every cell it sends.

Every loop here is bounded in count and in time; every request goes to 127.0.0.1.
"""
from __future__ import annotations

import gc
import json
import os
import random
import secrets
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path

import httpx

from ownmem.aperto import keys as K
from ownmem.crypto import run_sync
from ownmem.saihm.cell import make_cell
from ownmem.vault import UnlockedVault, Vault
from ownmem.vault.remote import PULL_PAGE, Remote
from ownmem.vault.sync import KEK_VERSION, TIER, link
from ownmem.wire import messages
from ownmem.wire.limits import MAX_BATCH, MAX_PAGE_BYTES
from server.verifypool import MIN_BATCH, default_processes

from .corpus import CREATED, memories
from .report import FAIL, PASS, AreaResult, Check
from .timing import clock

ROOT = Path(__file__).resolve().parent.parent
PASSPHRASE = "server bench: seven lanterns over a quiet harbour"
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
PG_URL = "postgresql://postgres@127.0.0.1:5432/{db}"
RATE = 1_000_000            # every rate limit and count: far above any load here (see notes)
# the limits the throughput servers lift; the flood runs with the defaults (none of these set)
LIFTED = ("OWNMEM_RATE_PER_SECOND", "OWNMEM_RATE_BURST", "OWNMEM_ADDRESS_RATE_PER_SECOND", "OWNMEM_ADDRESS_BURST",
          "OWNMEM_REGISTER_PER_HOUR", "OWNMEM_VAULTS_PER_KEY")
STRANGER = "127.0.0.2"      # the flood's source address: another client than the owner at 127.0.0.1
_SCRIPT = Path(sys.executable).with_name("ownmem")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "ownmem.cli"]

# the bar
PUSH_TARGET = 5_000.0       # cells/s, batched push with full verification, SQLite
PULL_TARGET = 30_000.0      # cells/s, change-feed pull
CLI_TARGET = 5.0            # s, a fresh CLI device syncing the whole vault
PG_FACTOR = 2.0             # PostgreSQL within 2x of SQLite, every measure
ANCHOR = 10_000.0           # items/s: Vaultwarden answers a 3,000-item sync in about 300 ms


@dataclass(frozen=True, slots=True)
class Sizes:
    cells: int = 10_000         # memories in the vault, cells per timed push, feed length per pull
    batch: int = 1_000          # cells per push request (the client's PUSH_BATCH)
    push_reps: int = 5
    pull_reps: int = 9
    cli_reps: int = 5
    clients: int = 32
    load_seconds: float = 60.0
    load_max_requests: int = 20_000   # per client: the load loop is bounded in count as well as time
    seed_cells: int = 500       # cells in each load client's vault before the load starts
    small_push: int = 10        # cells per push during the load
    pull_back: int = 100        # a load pull starts up to this many changes behind the client's last seq
    workers: int = 1            # server processes per backend for push, pull and the CLI (the default)
    load_workers: int = 2       # server processes per backend for the concurrency test (uvicorn --workers)
    flood_connections: int = 16
    flood_seconds: float = 30.0
    flood_baseline: int = 3     # owner's syncs timed before the flood, for comparison


FULL = Sizes()
QUICK = Sizes(cells=2_000, push_reps=2, pull_reps=3, cli_reps=2, load_seconds=5.0, seed_cells=200,
              flood_seconds=6.0, flood_baseline=2)


def _say(msg: str) -> None:
    print(f"  {msg}", flush=True)


def _rate(n: float, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


# ---------------------------------------------------------------- servers and backends

def _free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5) as c:
        c.execute(sql)


def _pg_version() -> str:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5) as c:
        return str(c.execute("SHOW server_version").fetchone()[0])


@contextmanager
def _pg_database() -> Iterator[str]:
    """A fresh database for this run, dropped afterwards whatever happens."""
    name = f"ownmem_bench_{secrets.token_hex(6)}"
    _pg_admin(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class ServerProcess:
    """``python -m server`` on its own port; stopped with SIGTERM (SIGKILL after a grace)."""

    def __init__(self, kind: str, root: Path, env: dict[str, str], workers: int, *, lifted: bool = True) -> None:
        self.kind, self.root, self.workers = kind, root, workers
        self.port = _free_port()
        base = {k: v for k, v in os.environ.items() if not k.startswith("OWNMEM_")}
        self.env = {**base, **env, **({k: str(RATE) for k in LIFTED} if lifted else {})}
        self.log = root / f"server-{kind}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restart(self, workers: int) -> ServerProcess:
        """Stop, then start again on the same store and port with ``workers`` processes."""
        self.stop()
        self.workers = workers
        return self.start()

    def start(self, timeout: float = 60.0) -> ServerProcess:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "server", "--host", "127.0.0.1", "--port",
                                          str(self.port), "--workers", str(self.workers)],
                                         cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2.0) as c:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"the {self.kind} server exited with {self.proc.returncode}: {self.tail()}")
                try:
                    r = c.get(self.url + "/health")
                    if r.status_code == 200:
                        if r.json().get("backend") != self.kind:
                            raise RuntimeError(f"server on port {self.port} runs {r.json()}, not {self.kind}")
                        return self
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the {self.kind} server did not come up in {timeout:.0f} s: {self.tail()}")

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def tail(self, n: int = 2000) -> str:
        try:
            return self.log.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""


@dataclass
class Backend:
    kind: str                  # "sqlite" | "postgres"
    server: ServerProcess
    label: str                 # "SQLite" | "PostgreSQL"

    @property
    def url(self) -> str:
        return self.server.url


# ---------------------------------------------------------------- the cells

@dataclass
class Source:
    """One real vault and its N cells, made once: every backend gets the same bytes."""

    vault: UnlockedVault
    items: list[list[bytes]]       # [cell CBOR, wrapped DEK], in object-id order
    cell_bytes: int                # total bytes of the items
    add_seconds: float
    cell_seconds: float


def make_source(s: Sizes, tmp: Path) -> Source:
    _say(f"making the source vault: UnlockedVault.add x {s.cells:,} ...")
    uv = Vault.create(tmp / "source-vault", PASSPHRASE)
    t0 = clock()
    for content, tags in memories(s.cells, seed=11):
        uv.add(content, tags=tags, now=CREATED)
    add = clock() - t0
    rows = uv.store.unpushed(s.cells + 1)
    if len(rows) != s.cells:
        raise RuntimeError(f"the source vault holds {len(rows)} unpushed objects, expected {s.cells}")
    _say(f"making {s.cells:,} cells (ML-DSA-65 signed, as Syncer.push makes them) ...")
    h, now = uv.holder(), int(time.time())
    t0 = clock()
    items = []
    for r in rows:   # the call Syncer._cell_for makes for a row that has no cell yet
        c = run_sync(make_cell(uv.crypto, xi=h.xi, holder_id=h.holder_id, kek_version=KEK_VERSION, tier=TIER,
                               cell_nonce=r.object_id, ciphertext=r.sealed, timestamp=now))
        items.append([c.to_cbor(), r.dek_wrapped])
    cells = clock() - t0
    return Source(uv, items, sum(len(a) + len(b) for a, b in items), add, cells)


def _session(b: Backend, src: Source, name: str, client: httpx.Client, *, register: bool) -> Remote:
    """A logged-in Remote for vault ``name`` on ``b``; registers the source identity there first."""
    if register:
        link(src.vault, b.url, name, client=client)
    r = Remote(b.url, name, client=client)
    r.login(src.vault.sync_key())
    return r


# ---------------------------------------------------------------- push

@dataclass
class Runs:
    seconds: dict[str, list[float]] = field(default_factory=dict)

    def add(self, kind: str, t: float) -> None:
        self.seconds.setdefault(kind, []).append(t)

    def median(self, kind: str) -> float:
        return statistics.median(self.seconds[kind])


def _push_request(items: list[list[bytes]]) -> messages.PushRequest:
    return messages.PushRequest(tuple(messages.PushItem(cell, wrapped) for cell, wrapped in items))


def _push_all(b: Backend, src: Source, name: str, items: list[list[bytes]], batch: int) -> float:
    with httpx.Client(timeout=300.0) as c:
        r = _session(b, src, name, c, register=True)
        batches = [_push_request(items[i:i + batch]) for i in range(0, len(items), batch)]
        gc.collect()
        t0 = clock()
        res = [r.push(x) for x in batches]
        dt = clock() - t0
    stored = sum(x.stored for x in res)
    if stored != len(items) or res[-1].last_seq != len(items):
        raise RuntimeError(f"{b.label}: push to {name} stored {stored} of {len(items)} cells: {res[-1]}")
    return dt


def _cpu_busy(window: float) -> float | None:
    """The share of all CPUs busy over ``window`` seconds (Linux /proc/stat), or None elsewhere."""
    def sample() -> tuple[int, int] | None:
        try:
            f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
        except (OSError, ValueError):
            return None
        return sum(f), f[3] + f[4]          # total, idle + iowait
    a = sample()
    time.sleep(window)
    b = sample()
    if a is None or b is None or b[0] == a[0]:
        return None
    return 1.0 - (b[1] - a[1]) / (b[0] - a[0])


SETTLE = {"waits": 0, "timed_out": 0}


def _settle(max_wait: float = 5.0, quiet: float = 0.25) -> None:
    """Wait (at most ``max_wait`` s) until the machine is quiet, so background work a previous run
    left behind (PostgreSQL's autovacuum after 40 MB of inserts, a SQLite checkpoint) does not land
    on the next timed run, whichever backend that is."""
    SETTLE["waits"] += 1
    deadline = time.monotonic() + max_wait
    while time.monotonic() < deadline:
        busy = _cpu_busy(0.25)
        if busy is None or busy < quiet:
            return
    SETTLE["timed_out"] += 1


def measure_push(s: Sizes, backends: list[Backend], src: Source) -> Runs:
    _say(f"push: warm-up of {2 * s.batch:,} cells per backend ...")
    for b in backends:
        _push_all(b, src, "push-warmup", src.items[:2 * s.batch], s.batch)
    runs = Runs()
    for rep in range(s.push_reps):
        for b in backends:
            _settle()
            t = _push_all(b, src, f"push-{rep}", src.items, s.batch)
            _say(f"push rep {rep} {b.label}: {s.cells:,} cells in {t:.3f} s = {_rate(s.cells, t):,.0f} cells/s")
            runs.add(b.kind, t)
    return runs


@dataclass
class Breakdown:
    """Where a push's time goes, per cell (µs), each piece timed on its own, outside the server."""

    decode: float
    verify_thread: float
    verify_pool: float
    processes: int
    storage: dict[str, float]


def _median_time(fn: Callable[[], object], reps: int = 3) -> float:
    times = []
    for _ in range(reps):
        gc.collect()
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times)


def push_breakdown(s: Sizes, src: Source, pg_url: str, tmp: Path) -> Breakdown:
    """The server's own pieces, called directly on one batch of the same cells: CBOR decode of the
    body, verification (in one thread, and in the process pool the server uses), and the storage
    transaction on each backend (into fresh vaults of scratch stores)."""
    import asyncio

    from ownmem.crypto import cbor
    from server.storage.base import LogEntry, Registration
    from server.storage.postgres import PostgresStorage
    from server.storage.sqlite import SqliteStorage
    from server.verify import HolderKey
    from server.verifypool import VerifyPool, check_items, default_processes

    _say("push: timing the server's pieces one by one ...")
    batch = src.items[:s.batch]
    n = len(batch)
    raw = cbor.encode(batch)
    decode = _median_time(lambda: cbor.decode(raw, max_items=4 * MAX_BATCH + 8))
    h = src.vault.holder()
    holder = HolderKey(h.public, h.holder_id)
    cells = check_items(batch, holder)
    if isinstance(cells, tuple):
        raise RuntimeError(f"a pre-made cell does not verify: item {cells[0]}: {cells[1]}")
    thread = _median_time(lambda: check_items(batch, holder))
    procs = default_processes()
    pool = VerifyPool(procs)
    try:
        pool.start()
        asyncio.run(pool.check(batch, holder, h.public))          # warm: the workers are up
        in_pool = _median_time(lambda: asyncio.run(pool.check(batch, holder, h.public)))
    finally:
        pool.close()
    storage: dict[str, float] = {}
    for kind, open_store in (("sqlite", lambda: SqliteStorage(tmp / "scratch-store" / "ownmem.db")),
                             ("postgres", lambda: PostgresStorage(pg_url))):
        st = open_store()
        try:
            vids = []
            for i in range(4):
                entry = LogEntry(os.urandom(32), h.holder_id, "KEY", h.holder_id, 0, b"scratch")
                reg = Registration(f"scratch-{i}", os.urandom(16), bytes(32), bytes(32), bytes(32), h.public,
                                   h.holder_id, b"", bytes(64), entry)
                vids.append(st.register(reg).id)
            st.push(vids[0], cells)                                  # warm-up
            it = iter(vids[1:])
            storage[kind] = _median_time(lambda st=st, it=it: st.push(next(it), cells)) / n * 1e6
        finally:
            st.close()
    return Breakdown(decode / n * 1e6, thread / n * 1e6, in_pool / n * 1e6, procs, storage)


# ---------------------------------------------------------------- pull

def _pull_all(b: Backend, src: Source, name: str, expect: int) -> float:
    with httpx.Client(timeout=300.0) as c:
        r = _session(b, src, name, c, register=False)
        gc.collect()
        t0 = clock()
        since, n, pages = 0, 0, 0
        while pages < expect // PULL_PAGE + 3:   # bounded: the feed holds `expect` changes
            page = r.changes(since)
            pages += 1
            n += sum(1 for row in page.rows if isinstance(row, messages.CellChange))
            since = page.next_since
            if not page.more:
                break
        dt = clock() - t0
    if n != expect:
        raise RuntimeError(f"{b.label}: pulled {n} cells from {name}, expected {expect}")
    return dt


def measure_pull(s: Sizes, backends: list[Backend], src: Source) -> Runs:
    _say(f"pull: warm-up, then {s.pull_reps} x {s.cells:,} cells per backend ...")
    for b in backends:
        for _ in range(2):
            _pull_all(b, src, "push-0", s.cells)
    runs = Runs()
    for rep in range(s.pull_reps):
        for b in backends:
            _settle()
            t = _pull_all(b, src, "push-0", s.cells)
            runs.add(b.kind, t)
        _say(f"pull rep {rep}: " + ", ".join(f"{b.label} {_rate(s.cells, runs.seconds[b.kind][-1]):,.0f} cells/s"
                                            for b in backends))
    return runs


# ---------------------------------------------------------------- a fresh CLI device

def _cli_env(tmp: Path, folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OWNMEM_")}
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env.update(HOME=str(home), OWNMEM_VAULT=str(folder), OWNMEM_PASSPHRASE=PASSPHRASE)
    return env


def _cli_login(b: Backend, name: str, folder: Path, tmp: Path, expect: int) -> float:
    env = _cli_env(tmp, folder)
    gc.collect()
    t0 = clock()
    r = subprocess.run(CLI + ["login", "--server", b.url, "--vault-name", name], env=env, capture_output=True,
                       text=True, stdin=subprocess.DEVNULL, timeout=600)
    dt = clock() - t0
    if r.returncode != 0 or f"with {expect} object(s)" not in r.stdout:
        raise RuntimeError(f"{b.label}: `ownmem login` failed ({r.returncode}): {r.stdout[-500:]} {r.stderr[-500:]}")
    return dt


def _cli_list_count(folder: Path, tmp: Path) -> tuple[int, int]:
    """(memories `ownmem list --json` shows, how many of them open as the owner's own)."""
    r = subprocess.run(CLI + ["list", "--json"], env=_cli_env(tmp, folder), capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"`ownmem list --json` failed ({r.returncode}): {r.stderr[-500:]}")
    entries = json.loads(r.stdout)
    return len(entries), sum(1 for e in entries if e.get("trust") == "self")


def measure_cli(s: Sizes, backends: list[Backend], tmp: Path) -> tuple[Runs, dict[str, tuple[int, int]]]:
    _say(f"fresh CLI device: {s.cli_reps} x `ownmem login` of {s.cells:,} memories per backend ...")
    runs = Runs()
    checked: dict[str, tuple[int, int]] = {}
    for rep in range(s.cli_reps):
        for b in backends:
            folder = tmp / f"cli-{b.kind}-{rep}" / "vault"
            folder.parent.mkdir(parents=True)
            _settle()
            t = _cli_login(b, "push-0", folder, tmp, s.cells)
            runs.add(b.kind, t)
            _say(f"cli rep {rep} {b.label}: {t:.3f} s")
            if rep == 0:   # outside the clock: the new device really holds every memory
                checked[b.kind] = _cli_list_count(folder, tmp)
            else:
                shutil.rmtree(folder.parent, ignore_errors=True)
    return runs, checked


# ---------------------------------------------------------------- concurrency

@dataclass
class LoadStats:
    clients: int
    seconds: float                                      # from the start signal to the last answer
    latencies: dict[str, list[float]]                   # by operation, seconds
    errors: int
    error_samples: list[str]
    non_2xx: int
    cells_pushed: int
    cells_pulled: int
    capped: int                                         # clients that hit load_max_requests

    @property
    def requests(self) -> int:
        return sum(len(v) for v in self.latencies.values())

    @property
    def all_latencies(self) -> list[float]:
        return [x for v in self.latencies.values() for x in v]

    @property
    def rps(self) -> float:
        return _rate(self.requests, self.seconds)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(q / 100 * len(v) + 0.5)) - 1))]


def measure_load(s: Sizes, b: Backend, src: Source) -> LoadStats:
    names = [f"load-{i:02d}" for i in range(s.clients)]
    _say(f"load {b.label}: registering {s.clients} vaults, {s.seed_cells} cells each ...")
    with httpx.Client(timeout=300.0) as c:
        for name in names:
            r = _session(b, src, name, c, register=True)
            r.push(_push_request(src.items[:s.seed_cells]))
    pool = src.items[s.seed_cells:]

    lat: dict[str, list[float]] = {"pull": [], "push": [], "metadata": []}
    lock = threading.Lock()
    counters = {"errors": 0, "non_2xx": 0, "pushed": 0, "pulled": 0, "capped": 0}
    start: list[float] = []
    # every client is logged in before the clock starts; the last one to arrive starts it
    ready = threading.Barrier(s.clients + 1, action=lambda: start.append(clock()), timeout=300)
    ends: list[float] = []

    def client(i: int) -> None:
        rng = random.Random(1000 + i)
        local: dict[str, list[float]] = {"pull": [], "push": [], "metadata": []}
        errs: list[str] = []
        status: list[int] = [0]
        non2xx = pushed = pulled = nerr = 0
        last_seq, nxt = s.seed_cells, 0

        def on_response(resp: httpx.Response) -> None:
            status[0] = resp.status_code

        http = httpx.Client(timeout=60.0, event_hooks={"response": [on_response]})
        try:
            try:
                remote = Remote(b.url, names[i], client=http)
                remote.login(src.vault.sync_key())
            except Exception as e:  # noqa: BLE001 - a client that cannot start is an error, reported
                errs.append(f"login: {type(e).__name__}: {e}")
                nerr += 1
                remote = None
            ready.wait()
            deadline = start[0] + s.load_seconds
            n = 0
            while remote is not None and n < s.load_max_requests:
                t0 = clock()
                if t0 >= deadline:
                    break
                u = rng.random()
                op = "pull" if u < 0.5 else "metadata" if u < 0.8 else "push"
                status[0] = 0
                ok, got, err = True, 0, ""
                try:
                    if op == "pull":
                        page = remote.changes(max(0, last_seq - rng.randint(0, s.pull_back)), 1000)
                        got = len(page.rows)
                    elif op == "metadata":
                        remote.get_metadata()
                    else:
                        if nxt + s.small_push > len(pool):
                            nxt = 0          # the pool is spent: re-sends are duplicates, still fully verified
                        res = remote.push(_push_request(pool[nxt:nxt + s.small_push]))
                        nxt += s.small_push
                        last_seq = res.last_seq
                        got = res.stored
                    if not 200 <= status[0] < 300:
                        ok, err = False, f"{op}: HTTP {status[0]}"
                except Exception as e:  # noqa: BLE001 - every failure counts, whatever its kind
                    ok, err = False, f"{op}: {type(e).__name__}: {e}"
                dt = clock() - t0
                n += 1
                local[op].append(dt)
                if status[0] and not 200 <= status[0] < 300:
                    non2xx += 1
                if not ok:
                    nerr += 1
                    if len(errs) < 5:
                        errs.append(err)
                elif op == "push":
                    pushed += got
                else:
                    pulled += got
            if n >= s.load_max_requests:
                with lock:
                    counters["capped"] += 1
        except threading.BrokenBarrierError:
            errs.append("the start barrier broke")
            nerr += 1
        finally:
            http.close()
            with lock:
                ends.append(clock())
                for k, v in local.items():
                    lat[k].extend(v)
                samples.extend(errs)
                counters["errors"] += nerr
                counters["non_2xx"] += non2xx
                counters["pushed"] += pushed
                counters["pulled"] += pulled

    samples: list[str] = []
    threads = [threading.Thread(target=client, args=(i,), name=f"load-{i}", daemon=True) for i in range(s.clients)]
    for t in threads:
        t.start()
    _say(f"load {b.label}: {s.clients} clients for {s.load_seconds:.0f} s ...")
    gc.collect()
    ready.wait()
    for t in threads:
        t.join(timeout=s.load_seconds + 300)
    alive = sum(t.is_alive() for t in threads)
    if alive:
        samples.append(f"{alive} client thread(s) still running after the join timeout")
    elapsed = (max(ends) if ends else clock()) - start[0]
    st = LoadStats(s.clients, elapsed, lat, counters["errors"] + alive, samples[:10], counters["non_2xx"],
                   counters["pushed"], counters["pulled"], counters["capped"])
    _say(f"load {b.label}: {st.requests:,} requests, {st.rps:,.0f} req/s, {st.errors} errors, "
         f"p50 {_pct(st.all_latencies, 50) * 1e3:.1f} ms, p99 {_pct(st.all_latencies, 99) * 1e3:.1f} ms")
    return st


# ---------------------------------------------------------------- a stranger's flood

@dataclass
class FloodStats:
    seconds: float                      # of flood, from its start to its end
    baseline: list[float]               # the owner's `ownmem sync`, s, before the flood
    syncs: list[float]                  # ... and during it
    failures: list[str]                 # syncs that did not exit 0
    stranger: dict[int, int]            # the stranger's answers by status (0: no answer)

    @property
    def stranger_requests(self) -> int:
        return sum(self.stranger.values())


def measure_flood(s: Sizes, kind: str, label: str, store_env: dict[str, str], tmp: Path) -> FloodStats:
    """A server of the default limits on the backend's store; the owner's vault on it; its
    `ownmem sync` timed alone, then again and again while a stranger's connections hammer the
    vault's name with lookups and challenges."""
    server = ServerProcess(kind, tmp, store_env, 1, lifted=False).start()
    owner = Vault.create(tmp / f"flood-owner-{kind}", PASSPHRASE)
    try:
        for i in range(3):
            owner.add(f"flood memory {i}")
        name = f"flooded-{kind}"
        with httpx.Client(timeout=60.0) as c:
            link(owner, server.url, name, client=c)
        folder = owner.store.folder
        owner.lock()
        env = _cli_env(tmp, folder)
        failures: list[str] = []

        def sync() -> float:
            t0 = clock()
            r = subprocess.run(CLI + ["sync"], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                               timeout=300)
            dt = clock() - t0
            if r.returncode != 0:
                failures.append(f"exit {r.returncode}: {r.stderr.strip()[-200:]}")
            return dt

        _say(f"flood {label}: the owner's sync alone, {s.flood_baseline} times ...")
        baseline = [sync() for _ in range(s.flood_baseline)]
        stop = threading.Event()
        lock = threading.Lock()
        statuses: dict[int, int] = {}

        def hammer(i: int) -> None:
            with httpx.Client(transport=httpx.HTTPTransport(local_address=STRANGER), timeout=30.0) as c:
                n = i
                while not stop.is_set():
                    try:
                        r = (c.get(f"{server.url}/v1/vaults/{name}") if n % 2 else
                             c.post(f"{server.url}/v1/vaults/{name}/challenge"))
                        code = r.status_code
                    except httpx.HTTPError:
                        code = 0
                    n += 1
                    with lock:
                        statuses[code] = statuses.get(code, 0) + 1

        threads = [threading.Thread(target=hammer, args=(i,), daemon=True) for i in range(s.flood_connections)]
        _say(f"flood {label}: {s.flood_connections} stranger connections for {s.flood_seconds:.0f} s, "
             f"the owner syncing throughout ...")
        t0 = clock()
        for t in threads:
            t.start()
        syncs: list[float] = []
        try:
            time.sleep(0.5)                  # the flood is on before the first sync
            while clock() - t0 < s.flood_seconds and len(syncs) < 1000:
                syncs.append(sync())
        finally:
            stop.set()
            for t in threads:
                t.join(60)
        st = FloodStats(clock() - t0, baseline, syncs, failures, dict(sorted(statuses.items())))
        _say(f"flood {label}: {len(syncs)} syncs under the flood, {len(failures)} failed; the stranger got "
             f"{statuses}")
        return st
    finally:
        if owner.ident is not None:
            owner.lock()
        server.stop()


def _flood_check(s: Sizes, floods: dict[str, FloodStats], labels: dict[str, str]) -> Check:
    rows: list[tuple[str, str]] = []
    for kind in ("sqlite", "postgres"):
        f, lab = floods[kind], labels[kind]
        n = f.stranger_requests
        limited = f.stranger.get(429, 0)
        rows += [
            (f"{lab}: the owner's syncs during the flood", f"{len(f.syncs)}, of which failed: {len(f.failures)}"),
            (f"{lab}: `ownmem sync` alone / during the flood, median (max)",
             f"{statistics.median(f.baseline):.2f} s ({max(f.baseline):.2f}) / "
             f"{statistics.median(f.syncs):.2f} s ({max(f.syncs):.2f})"),
            (f"{lab}: the stranger's requests, answered per second",
             f"{n:,} in {f.seconds:.1f} s = {_rate(n, f.seconds):,.0f}/s; by status: "
             + ", ".join(f"{k or 'no answer'}: {v:,}" for k, v in f.stranger.items())
             + f" ({limited / n:.1%} refused 429)" if n else "none"),
        ]
    notes = [f"{labels[k]}: failures: {'; '.join(f.failures[:3])}" for k, f in floods.items() if f.failures]
    ok = all(not f.failures and f.syncs for f in floods.values())
    sq, pg = floods["sqlite"], floods["postgres"]
    return Check(
        f"a stranger's {s.flood_connections} connections for {s.flood_seconds:.0f} s: the owner's sync",
        _verdict(ok),
        (f"A server of the default limits (20 requests/s and a burst of 100 per client address for the public "
         f"routes, 200/s per vault once authenticated; one worker) on each backend's store.  The owner's vault "
         f"(3 memories, its own identity) is linked to it from 127.0.0.1; `ownmem sync` (a subprocess: start-up, "
         f"Argon2id, login, metadata, push, pull) is timed {s.flood_baseline} times alone, then run again and "
         f"again for {s.flood_seconds:.0f} s while {s.flood_connections} connections of a stranger at "
         f"{STRANGER} (one client thread each, in this process) send lookups and challenges for the owner's "
         f"vault name as fast as they are answered.  Passes when every one of the owner's syncs succeeds on "
         f"both backends (before issue 8's limits, those requests drew from the vault's own budget and the "
         f"owner's sync failed 429 within a second)."),
        tuple(rows), tuple(notes),
        figure=(f"{len(sq.syncs)} / {len(pg.syncs)} syncs, {len(sq.failures)} / {len(pg.failures)} failed; median "
                f"{statistics.median(sq.syncs):.2f} / {statistics.median(pg.syncs):.2f} s under the flood "
                f"(SQLite / PostgreSQL)"),
        target="every sync succeeds, both backends")


# ---------------------------------------------------------------- the report

def _verdict(ok: bool) -> str:
    return PASS if ok else FAIL


def _runs_txt(runs: list[float], unit: Callable[[float], str]) -> str:
    return ", ".join(unit(x) for x in runs)


def _env_rows(s: Sizes, pg_version: str) -> tuple[tuple[str, str], ...]:
    def v(name: str) -> str:
        try:
            return importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            return "not installed"
    fast = [n for n in ("uvloop", "httptools") if v(n) != "not installed"]
    loop = "with " + " and ".join(fast) if fast else "asyncio loop and h11 (no uvloop/httptools installed)"
    return (
        ("server", f"`python -m server` (uvicorn {v('uvicorn')}, starlette {v('starlette')}; {loop}); "
                   f"each worker verifies pushes of {MIN_BATCH}+ cells in a pool of {default_processes()} processes "
                   f"(OWNMEM_VERIFY_PROCESSES unset: one per usable CPU)"),
        ("worker processes", f"push, pull and the CLI device: {s.workers} (the default; it measured faster for one "
                             f"client than 2 on this machine); the {s.clients}-client test: `--workers "
                             f"{s.load_workers}`, restarted on the same store"),
        ("SQLite", f"{sqlite3.sqlite_version}, WAL, synchronous=FULL, one file shared by the worker processes"),
        ("PostgreSQL", f"{pg_version} on 127.0.0.1:5432, fresh database for the run (dropped after); "
                       f"psycopg {v('psycopg')}, pool of up to 8 connections per worker"),
        ("client", f"httpx {v('httpx')} over 127.0.0.1, keep-alive; the benchmark's clients run on the same "
                   f"machine as the servers"),
        ("limits", f"{', '.join(LIFTED)} = {RATE:,}, so no limit answers 429 (or refuses the 32 registrations "
                   f"of one identity) in the throughput measures: throughput is measured, not the limiter; the "
                   f"stranger's flood runs a server of the default limits"),
    )


INTRO = (
    "The blind sync server over real HTTP (`python -m server`, one process tree per backend, running side by "
    "side on 127.0.0.1), measured on SQLite and on PostgreSQL in the same run, repetitions alternating between "
    "the backends.  These targets are absolute (the issue's bar), not ratios to the reference: the reference "
    "implementation has no sync server.  The cells pushed are real: a vault was filled with "
    "`UnlockedVault.add`, and its cells were made (ML-DSA-65 signed) once, before anything was timed, with the "
    "call `Syncer.push` makes; the same identity is registered on both servers, so both get the same bytes.  "
    "The server verifies every pushed cell in full (shape, holder, recomputed cellId, ML-DSA-65 signature, "
    "sealed-object id).")


def _breakdown_notes(s: Sizes, runs: Runs, b: Breakdown) -> tuple[str, ...]:
    out = [f"Where the time goes, per cell, each piece of the server timed on its own on one batch of "
           f"{s.batch:,} of the same cells (median of 3): CBOR decode of the body {b.decode:.1f} µs; "
           f"full verification {b.verify_thread:.0f} µs in one thread, {b.verify_pool:.0f} µs (wall) in the "
           f"pool of {b.processes} processes the server uses; the storage transaction (duplicate and erasure "
           f"checks, cell and change-feed inserts, commit) {b.storage['sqlite']:.0f} µs on SQLite, "
           f"{b.storage['postgres']:.0f} µs on PostgreSQL."]
    for kind, label in (("sqlite", "SQLite"), ("postgres", "PostgreSQL")):
        total = runs.median(kind) / s.cells * 1e6
        rest = total - b.decode - b.verify_pool - b.storage[kind]
        out.append(f"{label}: of the {total:.0f} µs per cell measured over HTTP, roughly (the pieces were timed "
                   f"apart, so under a changing load they need not add up): verification "
                   f"{b.verify_pool / total:.0%}, storage {b.storage[kind] / total:.0%}, decode "
                   f"{b.decode / total:.0%}; the remaining ~{max(rest, 0.0):.0f} µs are the HTTP exchange (client "
                   f"encode, transport, the server's body read through h11, authentication, the answer) and "
                   f"the machine's other load.")
    floor = b.verify_thread / b.processes + b.decode + b.storage["sqlite"]
    threads = b.verify_thread + b.decode + b.storage["sqlite"]
    out.append(f"Without the pool, verification in threads is serialised by the GIL (the server used to split a "
               f"batch over two threads, to no effect): the same pieces then cap a push at about "
               f"{1e6 / threads:,.0f} cells/s on SQLite before any HTTP cost, against about {1e6 / floor:,.0f} "
               f"with the pool.")
    out.append(f"What bounds it: ML-DSA-65 verification, {b.verify_thread:.0f} µs per cell in OpenSSL (through "
               f"`cryptography`, which holds the GIL while it verifies, hence the server's process pool).  More "
               f"cores (the pool takes one process per usable CPU) or a faster ML-DSA-65 verifier raise the "
               f"ceiling; the storage commit (an fsync: synchronous=FULL) comes next.")
    return tuple(out)


def _push_check(s: Sizes, runs: Runs, src: Source, b: Breakdown) -> Check:
    sq, pg = _rate(s.cells, runs.median("sqlite")), _rate(s.cells, runs.median("postgres"))
    mb = src.cell_bytes / 1e6
    return Check(
        f"batched push with full verification, {s.cells:,} cells", _verdict(sq >= PUSH_TARGET),
        (f"Time of the HTTP pushes only: `Remote.push` of the {s.cells:,} pre-made [cell, wrapped DEK] items in "
         f"batches of {s.batch:,} ({s.cells // s.batch} requests, {mb:,.1f} MB in all, one keep-alive "
         f"connection), into a vault name registered just before (outside the clock) so every cell is stored.  "
         f"The figure includes client-side CBOR encoding, transport, the server's body read, CBOR decode, full "
         f"verification of every cell (in the server's pool of verification processes, `server/verifypool.py`), "
         f"and the storage transaction (duplicate and erasure checks, inserts of the cells and the change feed, "
         f"commit).  Median of {s.push_reps} runs per backend after a "
         f"warm-up of {2 * s.batch:,} cells, alternating."),
        (("SQLite, median", f"{sq:,.0f} cells/s ({runs.median('sqlite'):.3f} s)"),
         ("PostgreSQL, median", f"{pg:,.0f} cells/s ({runs.median('postgres'):.3f} s)"),
         ("SQLite runs, cells/s", _runs_txt(runs.seconds["sqlite"], lambda t: f"{_rate(s.cells, t):,.0f}")),
         ("PostgreSQL runs, cells/s", _runs_txt(runs.seconds["postgres"], lambda t: f"{_rate(s.cells, t):,.0f}")),
         ("target (SQLite)", f"≥ {PUSH_TARGET:,.0f} cells/s"),
         ("PostgreSQL also ≥ the target", "yes" if pg >= PUSH_TARGET else "no")),
        _breakdown_notes(s, runs, b),
        figure=f"SQLite {sq:,.0f} cells/s; PostgreSQL {pg:,.0f}", target=f"≥ {PUSH_TARGET:,.0f} cells/s (SQLite)")


def _pull_check(s: Sizes, runs: Runs) -> Check:
    sq, pg = _rate(s.cells, runs.median("sqlite")), _rate(s.cells, runs.median("postgres"))
    return Check(
        f"change-feed pull, {s.cells:,} cells", _verdict(sq >= PULL_TARGET),
        (f"Time of `Remote.changes(since)` paging through the whole feed of a {s.cells:,}-cell vault from "
         f"position 0, pages of up to {PULL_PAGE:,} changes (the client's page size; the server also caps a page "
         f"at {MAX_PAGE_BYTES >> 20} MiB of cells, and streams it in slices), every page decoded "
         f"(CBOR) by the client, as a new device's pull does before it stores anything.  Login is outside the "
         f"clock.  Median of {s.pull_reps} runs per backend after two warm-up runs, alternating."),
        (("SQLite, median", f"{sq:,.0f} cells/s ({runs.median('sqlite'):.3f} s)"),
         ("PostgreSQL, median", f"{pg:,.0f} cells/s ({runs.median('postgres'):.3f} s)"),
         ("SQLite runs, cells/s", _runs_txt(runs.seconds["sqlite"], lambda t: f"{_rate(s.cells, t):,.0f}")),
         ("PostgreSQL runs, cells/s", _runs_txt(runs.seconds["postgres"], lambda t: f"{_rate(s.cells, t):,.0f}")),
         ("target (SQLite)", f"≥ {PULL_TARGET:,.0f} cells/s"),
         ("PostgreSQL also ≥ the target", "yes" if pg >= PULL_TARGET else "no")),
        figure=f"SQLite {sq:,.0f} cells/s; PostgreSQL {pg:,.0f}", target=f"≥ {PULL_TARGET:,.0f} cells/s (SQLite)")


def _cli_check(s: Sizes, runs: Runs, checked: dict[str, tuple[int, int]], argon: float) -> Check:
    sq, pg = runs.median("sqlite"), runs.median("postgres")
    return Check(
        f"fresh CLI device syncs a {s.cells:,}-memory vault", _verdict(sq <= CLI_TARGET),
        (f"Wall-clock time of `ownmem login --server URL --vault-name NAME` as a subprocess, with "
         f"OWNMEM_PASSPHRASE set, into an empty folder: interpreter start-up and imports, Argon2id, the vault "
         f"lookup, the challenge login, the owner-signed metadata, the pull of all {s.cells:,} cells (each "
         f"cell's holder and cellId checked, its sealed object parsed) and storing them in the new local vault.  "
         f"Median of {s.cli_reps} runs per backend, alternating, each into a new folder.  Outside the clock, "
         f"`ownmem list --json` in the first folder of each backend must list every memory, opened and "
         f"verified as the owner's own."),
        (("SQLite, median", f"{sq:.3f} s ({_rate(s.cells, sq):,.0f} memories/s end to end)"),
         ("PostgreSQL, median", f"{pg:.3f} s ({_rate(s.cells, pg):,.0f} memories/s end to end)"),
         ("SQLite runs, s", _runs_txt(runs.seconds["sqlite"], lambda t: f"{t:.3f}")),
         ("PostgreSQL runs, s", _runs_txt(runs.seconds["postgres"], lambda t: f"{t:.3f}")),
         ("`ownmem list --json` afterwards (SQLite / PostgreSQL)",
          " / ".join(f"{checked[k][0]:,} listed, {checked[k][1]:,} as the owner's own"
                     for k in ("sqlite", "postgres"))),
         ("one Argon2id derivation, in-process", f"{argon:.3f} s"),
         ("target (SQLite)", f"≤ {CLI_TARGET:.0f} s"),
         ("PostgreSQL also ≤ the target", "yes" if pg <= CLI_TARGET else "no")),
        figure=f"SQLite {sq:.2f} s; PostgreSQL {pg:.2f} s", target=f"≤ {CLI_TARGET:.0f} s (SQLite)")


def _load_check(s: Sizes, loads: dict[str, LoadStats], labels: dict[str, str]) -> Check:
    rows: list[tuple[str, str]] = []
    for kind in ("sqlite", "postgres"):
        st, lab = loads[kind], labels[kind]
        al = st.all_latencies
        rows += [
            (f"{lab}: requests, req/s", f"{st.requests:,} in {st.seconds:.1f} s = {st.rps:,.0f} req/s"),
            (f"{lab}: errors (exceptions or non-2xx)", f"{st.errors:,} (non-2xx responses: {st.non_2xx:,})"),
            (f"{lab}: latency p50 / p99, all", f"{_pct(al, 50) * 1e3:,.1f} ms / {_pct(al, 99) * 1e3:,.1f} ms"),
        ]
        for op in ("pull", "metadata", "push"):
            v = st.latencies[op]
            rows.append((f"{lab}: {op}, n and p50 / p99",
                         f"{len(v):,}; {_pct(v, 50) * 1e3:,.1f} ms / {_pct(v, 99) * 1e3:,.1f} ms"))
        rows.append((f"{lab}: cells stored by pushes / changes returned by pulls",
                     f"{st.cells_pushed:,} / {st.cells_pulled:,}"))
    total_errors = sum(st.errors for st in loads.values())
    notes = [f"{labels[k]}: error samples: {'; '.join(st.error_samples)}"
             for k, st in loads.items() if st.error_samples]
    capped = {k: st.capped for k, st in loads.items() if st.capped}
    if capped:
        notes.append(f"Clients that stopped at the {s.load_max_requests:,}-request cap before the time was up: "
                     f"{capped}.")
    sq, pg = loads["sqlite"], loads["postgres"]
    return Check(
        f"{s.clients} concurrent clients for {s.load_seconds:.0f} s", _verdict(total_errors == 0),
        (f"{s.clients} client threads, each with its own httpx connection and its own authenticated session on "
         f"its own vault name (the same identity registered {s.clients} times; each vault seeded with "
         f"{s.seed_cells} cells before the clock), loop for {s.load_seconds:.0f} s (and at most "
         f"{s.load_max_requests:,} requests each), each request picked at random: 50% pull (`GET changes` from up "
         f"to {s.pull_back} changes behind the client's last known position, so 0-{s.pull_back} cells), 30% "
         f"`GET metadata`, 20% push of {s.small_push} new pre-made cells (fully verified, stored).  Every "
         f"exception and every non-2xx answer is an error.  The server runs with {s.load_workers} worker processes; "
         f"the rate limit is set high (see configuration) so it is not what is measured.  The {s.clients} "
         f"client threads share one Python process (one GIL) on the same {os.cpu_count()}-CPU machine as the "
         f"server, so req/s is a floor for the server, not its capacity.  Latency is per request, from the "
         f"client's call to its decoded answer."),
        tuple(rows), tuple(notes),
        figure=(f"errors: {sq.errors} / {pg.errors}; {sq.rps:,.0f} / {pg.rps:,.0f} req/s; p99 "
                f"{_pct(sq.all_latencies, 99) * 1e3:,.0f} / {_pct(pg.all_latencies, 99) * 1e3:,.0f} ms "
                f"(SQLite / PostgreSQL)"),
        target="zero errors, both backends")


def _pg_check(s: Sizes, push: Runs, pull: Runs, cli: Runs, loads: dict[str, LoadStats]) -> Check:
    ratios = [
        ("batched push (time, PostgreSQL / SQLite)", push.median("postgres") / push.median("sqlite")),
        ("change-feed pull (time, PostgreSQL / SQLite)", pull.median("postgres") / pull.median("sqlite")),
        ("fresh CLI device (time, PostgreSQL / SQLite)", cli.median("postgres") / cli.median("sqlite")),
        (f"{s.clients} concurrent clients (req/s, SQLite / PostgreSQL)",
         loads["sqlite"].rps / loads["postgres"].rps if loads["postgres"].rps else float("inf")),
    ]
    p99 = _pct(loads["postgres"].all_latencies, 99) / _pct(loads["sqlite"].all_latencies, 99)
    worst = max(r for _, r in ratios)
    return Check(
        "PostgreSQL within 2× of SQLite, every measure", _verdict(worst <= PG_FACTOR),
        ("For each measure above, how many times slower PostgreSQL is than SQLite (ratios of the medians; "
         "above 1 means PostgreSQL is slower).  Passes when every ratio is at most 2."),
        tuple((k, f"{r:.3f}") for k, r in ratios) + (
            (f"{s.clients} concurrent clients, p99 latency PostgreSQL / SQLite (not judged)", f"{p99:.3f}"),
            ("target", f"every ratio ≤ {PG_FACTOR:.0f}")),
        figure=f"worst ratio {worst:.2f}", target=f"≤ {PG_FACTOR:.0f} for every measure")


def _anchor_check(s: Sizes, pull: Runs, cli: Runs) -> Check:
    sq, pg = _rate(s.cells, pull.median("sqlite")), _rate(s.cells, pull.median("postgres"))
    e2e = _rate(s.cells, cli.median("sqlite"))
    return Check(
        "anchor: pull items/s against Vaultwarden", _verdict(min(sq, pg) > ANCHOR),
        ("Vaultwarden answers a 3,000-item sync in about 300 ms, about 10,000 items/s; ownmem must move more "
         "items per second than that.  ownmem's figure is the change-feed pull above (cells/s, every cell "
         "~4 KB: a sealed object plus its ML-DSA-65 signature), on each backend; passes when both exceed the "
         "anchor.  For context, not judged: the fresh CLI device's end-to-end memories/s, which adds process "
         "start-up, Argon2id, login and writing the local vault."),
        (("SQLite pull, items/s (ratio to the anchor)", f"{sq:,.0f} ({sq / ANCHOR:.2f}×)"),
         ("PostgreSQL pull, items/s (ratio to the anchor)", f"{pg:,.0f} ({pg / ANCHOR:.2f}×)"),
         ("fresh CLI device end to end, SQLite, items/s (ratio, not judged)", f"{e2e:,.0f} ({e2e / ANCHOR:.2f}×)"),
         ("anchor", f"{ANCHOR:,.0f} items/s (3,000 items in ~300 ms)")),
        figure=f"{sq / ANCHOR:.1f}× (SQLite), {pg / ANCHOR:.1f}× (PostgreSQL)", target="> 1× 10,000 items/s")


def _intro(s: Sizes, src: Source, pg_version: str) -> str:
    rows = _env_rows(s, pg_version) + (
        ("source vault", f"{s.cells:,} memories by `UnlockedVault.add` in {src.add_seconds:.1f} s; cells made in "
                         f"{src.cell_seconds:.1f} s ({src.cell_seconds / s.cells * 1e3:.2f} ms each, outside "
                         f"every clock); {src.cell_bytes / s.cells:,.0f} bytes per [cell, wrapped DEK] on average"),
        ("between timed runs", f"before each timed push, pull and CLI run the benchmark waited (at most 5 s) for "
                               f"the CPUs to fall under 25% busy, so background work one run leaves behind "
                               f"(PostgreSQL's autovacuum after 40 MB of inserts, a SQLite checkpoint) does not "
                               f"land on the next; {SETTLE['timed_out']} of {SETTLE['waits']} waits ran out "
                               f"(other work on the machine)"),)
    table = "\n".join(["Configuration, besides the machine above:", "", "| | |", "|---|---|"]
                      + [f"| {k} | {v} |" for k, v in rows])
    return f"{INTRO}\n\n{table}"


# ---------------------------------------------------------------- the area

def run(quick: bool = False) -> AreaResult:
    s = QUICK if quick else FULL
    SETTLE.update(waits=0, timed_out=0)
    result = AreaResult("server", INTRO)
    tmp = Path(tempfile.mkdtemp(prefix="ownmem-bench-server-"))
    servers: list[ServerProcess] = []
    src: Source | None = None
    try:
        pg_version = _pg_version()
        src = make_source(s, tmp)
        argon = _argon(src)
        with _pg_database() as db:
            sq_env = {"OWNMEM_DATA_DIR": str(tmp / "server-sqlite")}
            pg_env = {"OWNMEM_DATABASE_URL": PG_URL.format(db=db)}
            sq = ServerProcess("sqlite", tmp, sq_env, s.workers)
            pg = ServerProcess("postgres", tmp, pg_env, s.workers)
            servers += [sq, pg]
            _say(f"starting the servers ({s.workers} worker(s) each) ...")
            backends = [Backend("sqlite", sq.start(), "SQLite"), Backend("postgres", pg.start(), "PostgreSQL")]
            labels = {b.kind: b.label for b in backends}
            try:
                push = measure_push(s, backends, src)
                parts = push_breakdown(s, src, PG_URL.format(db=db), tmp)
                pull = measure_pull(s, backends, src)
                cli, checked = measure_cli(s, backends, tmp)
                _say(f"restarting the servers with {s.load_workers} workers each ...")
                for b in backends:
                    b.server.restart(s.load_workers)
                loads = {b.kind: measure_load(s, b, src) for b in backends}
                for b in backends:
                    b.server.stop()
                floods = {b.kind: measure_flood(s, b.kind, b.label, env, tmp)
                          for b, env in zip(backends, (sq_env, pg_env), strict=True)}
            except BaseException:
                for srv in servers:
                    print(f"--- {srv.kind} server log (tail) ---\n{srv.tail()}", file=sys.stderr)
                raise
            finally:
                for srv in servers:
                    srv.stop()
        for k, (n, own) in checked.items():
            if n != s.cells or own != s.cells:
                raise RuntimeError(f"{labels[k]}: the new CLI device lists {n} memories ({own} as the owner's own), "
                                   f"expected {s.cells}")
        result.intro = _intro(s, src, pg_version)
        result.checks += [_push_check(s, push, src, parts), _pull_check(s, pull), _cli_check(s, cli, checked, argon),
                          _load_check(s, loads, labels), _pg_check(s, push, pull, cli, loads),
                          _anchor_check(s, pull, cli), _flood_check(s, floods, labels)]
    finally:
        for srv in servers:
            srv.stop()
        if src is not None:
            src.vault.lock()
        shutil.rmtree(tmp, ignore_errors=True)
    return result


def _argon(src: Source) -> float:
    """One Argon2id derivation with the vault's parameters, in-process (context for the CLI figure)."""
    p = src.vault.crypto
    salt = os.urandom(16)
    times = []
    for _ in range(3):
        t0 = clock()
        run_sync(K.master_from_passphrase(p, PASSPHRASE, salt))
        times.append(clock() - t0)
    return statistics.median(times)
