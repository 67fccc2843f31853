"""The public log's figures of issue 9's Bar (part of area `agent`, benchmarks/agent.py).

    log append with verification   REMEMBER receipts through POST /v1/vaults/{name}/receipts, as
                                   every push sends them: the server parses each receipt, checks
                                   its ML-DSA-65 signature under the vault's holder key (in its
                                   pool of verification processes), then logs the batch and
                                   appends it to the Merkle tree in one transaction
                                                                   >= 2,000 receipts/s (SQLite)
    consistency check on sync      what a device does on every sync (ownmem.vault.logwatch):
                                   GET the checkpoint, verify its signature under the pinned key,
                                   GET the consistency proof from the kept checkpoint, verify it,
                                   for a log of 100,000 receipts, 10 appended since    <= 5 ms p50

Both on SQLite and PostgreSQL, each a real server process (``python -m server``) on 127.0.0.1.
The receipts of the first figure are signed before the clock starts (ML-DSA-65 signing is the
client's cost).  The 100,000-entry log of the second is filled through the storage layer (the
tree's own append code, ``_append_log``) with synthetic receipts: the tree hashes bytes, and a
device's check reads no receipt, so their content does not change what is timed.  Every loop is
bounded in count; every request goes to 127.0.0.1.

``checks(quick)`` gives the two Checks for the `agent` area; ``run(quick)`` an area of its own.
"""
from __future__ import annotations

import os
import secrets
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from ownmem.crypto import provider, run_sync
from ownmem.saihm.receipt import make_receipt
from ownmem.vault import Vault
from ownmem.vault.logrules import advance_problem, open_served_checkpoint, served_key
from ownmem.vault.logwatch import PublicLog
from ownmem.vault.remote import Remote
from ownmem.vault.sync import link
from ownmem.wire.limits import MAX_RECEIPTS
from server.storage import open_storage
from server.storage.base import LogEntry

from .report import FAIL, PASS, AreaResult, Check
from .server import PG_URL, ServerProcess, _pg_database, _runs_txt
from .timing import clock

APPEND_TARGET = 2_000.0     # receipts/s
CHECK_TARGET = 5.0          # ms p50
PASSPHRASE = "log bench: a lighthouse keeps its ledger"
GROWTH = 10                 # receipts appended between the kept checkpoint and the checked one


@dataclass(frozen=True, slots=True)
class Sizes:
    receipts: int = 4_000       # REMEMBER receipts per timed append run
    append_reps: int = 3
    log_size: int = 100_000     # entries of the log the device checks
    checks: int = 200           # timed consistency checks per backend


FULL = Sizes()
QUICK = Sizes(receipts=300, append_reps=1, log_size=2_000, checks=20)


def _say(msg: str) -> None:
    print(f"  {msg}", flush=True)


def _remembers(v: object, n: int) -> list[bytes]:
    """``n`` REMEMBER receipts of the vault's holder, as ``Syncer.push`` makes one per new cell
    (their cells need not exist: the log is what is measured)."""
    h = v.holder()  # type: ignore[attr-defined]
    p = provider()
    now = int(time.time())
    return [run_sync(make_receipt(p, xi=h.xi, holder_id=h.holder_id, operation="REMEMBER",
                                  subject_id=secrets.token_bytes(32), timestamp=now)).to_cbor() for _ in range(n)]


def measure_append(srv: ServerProcess, v: object, receipts: list[bytes]) -> float:
    """Seconds to check and log every receipt through POST /receipts, in the batches of
    ``MAX_RECEIPTS`` that ``Syncer.push`` sends before its cells."""
    name = f"logbench-{secrets.token_hex(4)}"
    with httpx.Client(timeout=120.0) as c:
        link(v, srv.url, name, client=c)  # type: ignore[arg-type]
        r = Remote(srv.url, name, client=c)
        r.login(v.sync_key())  # type: ignore[attr-defined]
        batches = [receipts[i:i + MAX_RECEIPTS] for i in range(0, len(receipts), MAX_RECEIPTS)]
        t0 = clock()
        done = sum(len(r.post_receipts(b)) for b in batches)
        took = clock() - t0
    if done != len(receipts):
        raise RuntimeError(f"{srv.kind}: {done} of {len(receipts)} receipts logged")
    return took


def breakdown(v: object, receipts: list[bytes]) -> tuple[float, float]:
    """Where an append's time goes, in-process (no HTTP): µs per receipt of the server's receipt
    check (parse, deterministic CBOR, ML-DSA-65 verification) and of SQLite's log and tree append,
    the whole batch in one transaction, as POST /receipts makes it."""
    from server.verify import HolderKey, check_receipt

    h = v.holder()  # type: ignore[attr-defined]
    hk = HolderKey(h.public, h.holder_id)
    t0 = clock()
    entries = [check_receipt(r, hk, h.public, "REMEMBER") for r in receipts]
    check = clock() - t0
    tmp = Path(tempfile.mkdtemp(prefix="ownmem-bench-log-store-"))
    st = open_storage(None, str(tmp))
    try:
        t0 = clock()
        st.log_receipts([e for _, e in entries])    # as POST /receipts does: one transaction
        store = clock() - t0
    finally:
        st.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 1e6 * check / len(receipts), 1e6 * store / len(receipts)


def fill_log(env: dict[str, str], n: int) -> None:
    """Append ``n`` synthetic receipts to the store's log and tree (the storage's own append)."""
    st = open_storage(env.get("OWNMEM_DATABASE_URL"), env.get("OWNMEM_DATA_DIR", "data"))
    try:
        now = int(time.time())
        left = n
        while left:
            k = min(left, 5_000)
            entries = [LogEntry(secrets.token_bytes(32), secrets.token_bytes(32), "FORGET", secrets.token_bytes(32),
                                now, secrets.token_bytes(120)) for _ in range(k)]
            with st._tx() as c:                                         # noqa: SLF001
                st._append_log(c, entries)                              # type: ignore[attr-defined] # noqa: SLF001
            left -= k
    finally:
        st.close()


def measure_check(srv: ServerProcess, env: dict[str, str], s: Sizes) -> list[float]:
    """Milliseconds of each device check, kept checkpoint ``GROWTH`` receipts behind."""
    p = provider()
    with httpx.Client(timeout=30.0) as c:
        def get(url: str) -> bytes:
            r = c.get(url)
            r.raise_for_status()
            return r.content
        log = PublicLog(srv.url, get)
        key = served_key(log.key())
        kept = open_served_checkpoint(p, log.checkpoint(), key)
        fill_log(env, GROWTH)
        times = []
        for i in range(s.checks + 3):
            t0 = clock()
            new = open_served_checkpoint(p, log.checkpoint(), key)
            why = advance_problem(kept, new, log.consistency(kept.size, new.size))
            took = clock() - t0
            if why is not None or new.size != kept.size + GROWTH:
                raise RuntimeError(f"{srv.kind}: the check failed: {why} (size {new.size})")
            if i >= 3:                                                  # warm-up
                times.append(took * 1000)
    return times


def _secs(x: float) -> str:
    return f"{x:.2f}"


def _pct(xs: list[float], q: float) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, int(q * len(ys)))]


def checks(quick: bool = False) -> list[Check]:
    s = QUICK if quick else FULL
    tmp = Path(tempfile.mkdtemp(prefix="ownmem-bench-log-"))
    servers: list[ServerProcess] = []
    try:
        _say("a vault to sign receipts with ...")
        v = Vault.create(tmp / "vault", PASSPHRASE)
        with _pg_database() as db:
            envs = {"sqlite": {"OWNMEM_DATA_DIR": str(tmp / "server-sqlite")},
                    "postgres": {"OWNMEM_DATABASE_URL": PG_URL.format(db=db)}}
            appends: dict[str, list[float]] = {k: [] for k in envs}
            for kind, env in envs.items():
                servers.append(ServerProcess(kind, tmp, env, 1).start())
            for rep in range(s.append_reps):
                _say(f"signing {s.receipts:,} REMEMBER receipts (outside the clock), run {rep + 1} ...")
                receipts = _remembers(v, s.receipts)
                for srv in servers:                  # the same receipts on both backends, in turn
                    appends[srv.kind].append(measure_append(srv, v, receipts))
            for srv in servers:
                srv.stop()
            parts = breakdown(v, receipts)
            _say(f"filling each log to {s.log_size:,} entries ...")
            checked: dict[str, list[float]] = {}
            for kind, env in envs.items():
                st = open_storage(env.get("OWNMEM_DATABASE_URL"), env.get("OWNMEM_DATA_DIR", "data"))
                have = st.log_tree_size()
                st.close()
                fill_log(env, max(0, s.log_size - GROWTH - have))
                srv = ServerProcess(kind, tmp, env, 1)
                servers.append(srv.start())
                checked[kind] = measure_check(srv, env, s)
                srv.stop()
        v.lock()
    finally:
        for srv in servers:
            srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    rates = {k: s.receipts / statistics.median(t) for k, t in appends.items()}
    p50 = {k: statistics.median(t) for k, t in checked.items()}
    ok_a = rates["sqlite"] >= APPEND_TARGET       # judged on SQLite, as area server's push; PostgreSQL reported
    ok_b = all(x <= CHECK_TARGET for x in p50.values())
    return [
        Check("log append with verification", PASS if ok_a else FAIL,
              f"{s.receipts:,} REMEMBER receipts through `POST /v1/vaults/{{name}}/receipts`, in the batches of "
              f"{MAX_RECEIPTS} that `Syncer.push` sends before its cells, one connection: each receipt parsed, its "
              "deterministic CBOR and ML-DSA-65 signature checked (spread over the server's pool of verification "
              "processes, one per core, as a push's cells are), then the batch logged and the Merkle tree "
              "appended in one transaction. Median of the runs. Judged on SQLite, as area `server` judges its "
              "push; PostgreSQL reported beside it.",
              tuple((f"{k}, receipts/s", f"{rates[k]:,.0f} (runs, s: {_runs_txt(appends[k], _secs)})")
                    for k in rates)
              + (("in-process: the receipt check in one thread, µs/receipt", f"{parts[0]:,.0f}"),
                 ("in-process: SQLite log and tree append of the batch, µs/receipt", f"{parts[1]:,.0f}"),
                 ("PostgreSQL also ≥ the target", "yes" if rates["postgres"] >= APPEND_TARGET else "no")),
              figure=", ".join(f"{k} {rates[k]:,.0f}/s" for k in rates),
              target=f"≥ {APPEND_TARGET:,.0f} receipts/s (SQLite)"),
        Check("checkpoint consistency check on sync", PASS if ok_b else FAIL,
              f"What `LogWatch` does on each sync, over HTTP to a server whose log holds {s.log_size:,} receipts: "
              f"GET /v1/log/checkpoint, verify its Ed25519 signature under the pinned key, GET the RFC 9162 "
              f"consistency proof from the kept checkpoint ({GROWTH} receipts behind), verify it. "
              f"{s.checks} checks after 3 warm-ups.",
              tuple((f"{k}, ms", f"p50 {p50[k]:.2f}, p90 {_pct(checked[k], 0.9):.2f}, max {max(checked[k]):.2f}")
                    for k in p50),
              figure=", ".join(f"{k} {p50[k]:.2f} ms" for k in p50), target=f"<= {CHECK_TARGET:g} ms p50"),
    ]


def run(quick: bool = False) -> AreaResult:
    r = AreaResult("log", "The public log's pieces of issue 9's Bar (they belong to area `agent`): "
                          "log append with verification and a device's consistency check on sync.")
    r.checks += checks(quick)
    return r


if __name__ == "__main__":       # a smoke run: python -m benchmarks.logbench
    for c in checks(quick=os.environ.get("FULL") is None):
        print(c.title, c.verdict, c.figure)
