"""Area `agent`, the UOMP part: the Memory Guard of issue 10's Bar, against absolute targets.

    GET /v1/memory/:key    2 keep-alive connections, each request a granted key read through the
                           whole Guard (token, session, blacklist, quota, scope, deny, sensitivity)
                           with its audit entry on disk before the answer (group commit, one durable
                           write per batch)                                        >= 1,800 req/s
                           anchor, measured in the same run: the same load against the same
                           service restarted with the audit in the uomp-core MVP's discipline, one
                           durable write per entry and no group commit (the issue's ~600 req/s is that
                           MVP's own figure on this kind of machine)
    GET /v1/memory?tag=    a tag held by 1 % of 10,000 items, every match re-filtered per item
                                                                               <= 20 ms p50
    32 agents, 60 s        32 sessions, each its own connection and token, reading by key and by
                           tag in a loop                               zero errors; p50, p99 reported

One `ownmem agent` on a vault of 10,000 UOMP items (memories carrying the "uomp" extension, as
`put_item` writes them), linked to a blind server (SQLite).  The load is a lean client of raw
keep-alive HTTP/1.1 sockets in threads (its per-request cost is a few microseconds, so the
client takes as little of the two cores the agent shares with it as it can); each answer's
status and body are checked.  ``python -m benchmarks.uomp_bench [--quick]`` runs this part alone.
"""
from __future__ import annotations

import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path

import httpx

from ownmem.agent.audit import DB_NAME as AUDIT_DB, JOURNAL_NAME, Journal
from ownmem.agent.sessions import ADMIN_FILE, ADMIN_HEADER
from ownmem.agent.uomp_api import NO_GROUP_COMMIT_ENV
from ownmem.uomp.approval import APPROVAL_HEADER, APPROVAL_INFO, sign
from ownmem.vault import Vault

from .agent import PASSPHRASE, Agent, _p
from .report import FAIL, PASS, Check
from .server import ServerProcess

KEY_TARGET = 1_800.0      # req/s, GET /v1/memory/:key with 2 connections and a durable audit
KEY_MVP = 600.0           # req/s, the figure for the uomp-core MVP (fsync per audit write)
TAG_TARGET = 20.0         # ms p50, a tag query over 10,000 items
GROUPS = 100              # item i carries tag group<i % GROUPS>: each group tag is 1 % of the items


@dataclass(frozen=True, slots=True)
class Sizes:
    items: int = 10_000
    key_seconds: float = 20.0
    key_rounds: int = 3
    tag_queries: int = 200
    agents: int = 32
    agents_seconds: float = 60.0


FULL = Sizes()
QUICK = Sizes(items=1_000, key_seconds=3.0, key_rounds=1, tag_queries=40, agents=8, agents_seconds=5.0)


def _say(msg: str) -> None:
    print(f"  {msg}", flush=True)


def _key(i: int) -> str:
    return f"bench.item{i:05d}"


def fill(folder: Path, n: int) -> None:
    """n UOMP items: key bench.itemNNNNN, tags bench and group<NN>, value {"n": i, "score": ...}."""
    v = Vault.create(folder, PASSPHRASE)
    try:
        for i in range(n):
            ext: dict[str, object] = {"uomp": {"key": _key(i), "value": {"n": i, "score": (i * 37) % 1000},
                                               "sensitivity": "low", "source": "user"}}
            v.add(f"{_key(i)}: item {i} of the UOMP bench", tags=("bench", f"group{i % GROUPS:02d}"),
                  extensions=ext)
    finally:
        v.close()


class Conn:
    """One keep-alive HTTP/1.1 connection sending prepared GET requests: status and body back."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def get(self, request: bytes) -> tuple[int, bytes]:
        self.sock.sendall(request)
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = next(int(h.split(b":", 1)[1]) for h in lines[1:] if h.lower().startswith(b"content-length:"))
        while len(self.buf) < length:
            self._more()
        body, self.buf = self.buf[:length], self.buf[length:]
        return status, body

    def _more(self) -> None:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the agent closed the connection")
        self.buf += chunk

    def close(self) -> None:
        self.sock.close()


def request(path: str, token: str, port: int) -> bytes:
    # the agent port answers only its own Host, with the port (a DNS-rebinding guard, issue 19)
    return (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\r\n").encode()


class Admin:
    """The person: the admin file and the approval key their passphrase gives (uomp/approval.py)."""

    def __init__(self, agent: Agent, folder: Path) -> None:
        self.base = f"http://127.0.0.1:{agent.port}"
        self.http = httpx.Client(base_url=self.base, timeout=60.0,
                                 headers={ADMIN_HEADER: (folder / ADMIN_FILE).read_text().strip()})
        v = Vault(folder).unlock(PASSPHRASE)
        try:
            self.key = v.purpose_key(APPROVAL_INFO)
        finally:
            v.close()

    def _post(self, path: str, body: object) -> httpx.Response:
        raw = json.dumps(body).encode()
        r = self.http.post(path, content=raw, headers={
            "Content-Type": "application/json",
            APPROVAL_HEADER: sign(self.key, self.base, "POST", path, raw, int(time.time()))})
        r.raise_for_status()
        return r

    def token(self, agent_id: str, read: dict[str, list[str]]) -> str:
        r = self._post("/v1/sessions", {"agent_id": agent_id, "requested_scopes": {"read": read},
                                        "duration_minutes": 120})
        g = self._post(f"/v1/sessions/{r.json()['session_id']}/grant", {"granted_scopes": {"read": read}})
        return str(g.json()["token"])

    def close(self) -> None:
        self.http.close()


# every group tag granted (a tag query's own tag must be), a denied tag and key no item carries
READ = {"tags": ["bench", *(f"group{g:02d}" for g in range(GROUPS))], "keys": [], "deny_tags": ["financial"],
        "deny_keys": ["bench.secret"]}


def _check_key(status: int, body: bytes, key: str) -> None:
    if status != 200 or json.loads(body)["key"] != key:
        raise RuntimeError(f"GET /v1/memory/{key}: {status} {body[:200]!r}")


def measure_key(port: int, token: str, n: int, seconds: float, conns: int = 2) -> tuple[float, int]:
    """req/s over ``conns`` connections for ``seconds``: each a read of another granted key."""
    stop = time.perf_counter() + seconds
    counts = [0] * conns
    errors: list[BaseException] = []

    def run(c: int) -> None:
        conn = Conn(port)
        try:
            i = c
            while time.perf_counter() < stop:
                key = _key((i * 7919 + 1) % n)
                status, body = conn.get(request(f"/v1/memory/{key}", token, port))
                _check_key(status, body, key)
                counts[c] += 1
                i += conns
        except BaseException as e:   # noqa: BLE001 - reported after the run
            errors.append(e)
        finally:
            conn.close()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=run, args=(c,)) for c in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"key reads failed: {errors[0]!r}")
    return sum(counts) / elapsed, sum(counts)


def measure_tag(port: int, token: str, queries: int) -> tuple[list[float], int]:
    conn = Conn(port)
    times: list[float] = []
    matches = 0
    try:
        for i in range(queries + 5):
            g = f"group{(i * 37) % GROUPS:02d}"
            req = request(f"/v1/memory?tag={g}", token, port)
            t = time.perf_counter()
            status, body = conn.get(req)
            dt = time.perf_counter() - t
            items = json.loads(body)["items"] if status == 200 else None
            if items is None or not items or any(g not in it["tags"] for it in items):
                raise RuntimeError(f"GET /v1/memory?tag={g}: {status} {body[:200]!r}")
            if i >= 5:
                times.append(dt)
                matches += len(items)
    finally:
        conn.close()
    return times, matches // max(1, len(times))


def measure_agents(port: int, tokens: list[str], n: int, seconds: float) -> tuple[list[float], int, list[str]]:
    """Every agent its own connection and token, alternating a key read and a tag query."""
    stop = time.perf_counter() + seconds
    lat: list[list[float]] = [[] for _ in tokens]
    errors: list[str] = []

    def run(a: int) -> None:
        try:
            conn = Conn(port)
        except OSError as e:
            errors.append(f"agent {a}: connect: {e!r}")
            return
        try:
            i = a
            while time.perf_counter() < stop:
                if i % 2:
                    key = _key((i * 7919 + 1) % n)
                    t = time.perf_counter()
                    status, body = conn.get(request(f"/v1/memory/{key}", tokens[a], port))
                    lat[a].append(time.perf_counter() - t)
                    _check_key(status, body, key)
                else:
                    g = f"group{i % GROUPS:02d}"
                    t = time.perf_counter()
                    status, body = conn.get(request(f"/v1/memory?tag={g}", tokens[a], port))
                    lat[a].append(time.perf_counter() - t)
                    if status != 200 or not json.loads(body)["items"]:
                        raise RuntimeError(f"tag {g}: {status} {body[:200]!r}")
                i += len(tokens)
        except Exception as e:   # noqa: BLE001 - counted as this agent's error
            errors.append(f"agent {a}: {e!r}")
        finally:
            conn.close()
    threads = [threading.Thread(target=run, args=(a,)) for a in range(len(tokens))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [x for per in lat for x in per], len([1 for per in lat if per]), errors


def _audit_entries(folder: Path) -> int:
    """Entries on disk: the journal's records, then audit.db's rows.  In this order: an entry
    leaves the journal (a reset) only once audit.db holds it, so one read between the two is
    still counted (the other order missed those an ingest moved in between)."""
    import sqlite3

    j = Journal(folder / JOURNAL_NAME)
    try:
        ids = {r[0] for r in j.records()}
    finally:
        j.close()
    db = sqlite3.connect(folder / AUDIT_DB)
    try:
        ids.update(i for (i,) in db.execute("SELECT id FROM audit"))
    finally:
        db.close()
    return len(ids)


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process ``pid`` (Linux /proc; None elsewhere)."""
    import os

    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True, slots=True)
class KeyRun:
    rates: list[tuple[float, int]]      # per round: req/s, requests
    audited: int                        # audit entries the rounds added
    cpu_us: float | None                # the agent process's CPU time per request, µs

    @property
    def served(self) -> int:
        return sum(c for _, c in self.rates)

    @property
    def median(self) -> float:
        return statistics.median(r for r, _ in self.rates)


def restart(agent: Agent, env: dict[str, str]) -> None:
    """The stopped ``agent`` started again on its vault and port, with ``env`` added."""
    import subprocess

    from .agent import OWNMEM

    agent.env = {**agent.env, **env}
    with open(agent.log, "ab") as out:
        agent.proc = subprocess.Popen([OWNMEM, "agent", "--port", str(agent.port)], env=agent.env, stdout=out,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    with httpx.Client(timeout=2.0) as c:
        while time.monotonic() < deadline:
            if agent.proc.poll() is not None:
                raise RuntimeError(f"ownmem agent exited: {agent.log.read_text(errors='replace')[-2000:]}")
            try:
                if c.get(f"http://127.0.0.1:{agent.port}/health").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
    agent.stop()
    raise RuntimeError("ownmem agent did not come up again")


def key_rounds(agent: Agent, admin: Admin, folder: Path, s: Sizes, label: str) -> KeyRun:
    import os

    # what the setup wrote (the 10,000-item vault, the previous part's audit) to disk first: the
    # kernel's writeback of it, 30 s later, would otherwise land on these rounds' synchronous writes
    os.sync()
    token = admin.token("bench_reader", READ)
    rates = []
    before, cpu0 = _audit_entries(folder), _cpu_seconds(agent.proc.pid)
    for r in range(s.key_rounds):
        _say(f"GET /v1/memory/:key, 2 connections, {s.key_seconds:g} s ({label}, round {r + 1}) ...")
        rates.append(measure_key(agent.port, token, s.items, s.key_seconds))
    cpu1 = _cpu_seconds(agent.proc.pid)
    served = sum(c for _, c in rates)
    cpu = (cpu1 - cpu0) / served * 1e6 if cpu0 is not None and cpu1 is not None and served else None
    return KeyRun(rates, _audit_entries(folder) - before, cpu)


def checks(quick: bool = False) -> list[Check]:
    s = QUICK if quick else FULL
    with tempfile.TemporaryDirectory(prefix="ownmem-bench-uomp-") as d:
        tmp = Path(d)
        srv = ServerProcess("sqlite", tmp, {"OWNMEM_DATA_DIR": str(tmp / "server-data")}, workers=1).start()
        try:
            folder = tmp / "vault-uomp"
            _say(f"filling a vault with {s.items:,} UOMP items ...")
            fill(folder, s.items)
            agent = Agent(tmp, folder, srv.url, "bench-uomp")
            admin = Admin(agent, folder)
            try:
                own = key_rounds(agent, admin, folder, s, "ownmem")
                token = admin.token("bench_reader", READ)
                _say(f"tag queries over {s.items:,} items ...")
                tag_times, per_tag = measure_tag(agent.port, token, s.tag_queries)
                _say(f"{s.agents} agents for {s.agents_seconds:g} s ...")
                tokens = [admin.token(f"bench_agent_{a:02d}", READ) for a in range(s.agents)]
                lat, active, errors = measure_agents(agent.port, tokens, s.items, s.agents_seconds)
            finally:
                admin.close()
                agent.stop()
            _say("the anchor: the same service, one durable write per audit entry, no group commit ...")
            restart(agent, {NO_GROUP_COMMIT_ENV: "1"})
            admin = Admin(agent, folder)
            try:
                anc = key_rounds(agent, admin, folder, s, "anchor")
            finally:
                admin.close()
                agent.stop()
        finally:
            srv.stop()
    rps, anchor = own.median, anc.median

    def cpu(k: KeyRun) -> str:
        return "not measured (no /proc)" if k.cpu_us is None else f"{k.cpu_us:,.0f} µs"
    t50 = statistics.median(tag_times) * 1000
    a50, a99 = statistics.median(lat) * 1000, _p(lat, 0.99) * 1000
    return [
        Check("UOMP Guard: GET /v1/memory/:key, 2 connections, durable audit",
              PASS if rps >= KEY_TARGET and own.audited >= own.served and anc.audited >= anc.served else FAIL,
              "Two keep-alive connections to `ownmem agent` on 127.0.0.1, each sending GET /v1/memory/:key "
              "for another granted key of a 10,000-item vault, one request at a time, for "
              f"{s.key_seconds:g} s per round; every answer's status and key checked.  Each request goes the "
              "whole Guard: the capability token (signature verified once per token string, exp and "
              "expires_at on every request), session state, blacklist, profile, audience, quota, scope, "
              "deny lists, sensitivity, allowed_fields; and its audit entry (AES-256-GCM sealed) is on "
              "disk before the answer is sent: appended to the audit journal (a preallocated file opened "
              "O_DSYNC: one durable write per group commit), which audit.db (SQLite WAL, "
              "synchronous=FULL) ingests in the background.  Median of the rounds.  The anchor is "
              "measured in the same run: the same load against the same service and vault, restarted "
              "with the audit in the uomp-core MVP's "
              f"discipline (`{NO_GROUP_COMMIT_ENV}=1`: one durable write per entry, no group commit); "
              f"the issue's ~{KEY_MVP:,.0f} req/s is that MVP's own figure on this kind of machine.",
              (("req/s, median", f"{rps:,.0f} (rounds: {', '.join(f'{r:,.0f}' for r, _ in own.rates)})"),
               ("audit entries written / requests served", f"{own.audited:,} / {own.served:,}"),
               ("anchor: one durable write per entry, no group commit (measured)",
                f"{anchor:,.0f} req/s (rounds: {', '.join(f'{r:,.0f}' for r, _ in anc.rates)}; "
                f"{anc.audited:,} / {anc.served:,} entries)"),
               ("agent CPU time per request, ownmem / anchor", f"{cpu(own)} / {cpu(anc)}"),
               ("ratio ownmem / anchor", f"{rps / anchor:.1f}×"),
               ("the uomp-core MVP (the issue's figure)", f"~{KEY_MVP:,.0f} req/s"),
               ("target", f"≥ {KEY_TARGET:,.0f} req/s")),
              figure=f"{rps:,.0f} req/s (anchor {anchor:,.0f}, {rps / anchor:.1f}×)",
              target=f"≥ {KEY_TARGET:,.0f} req/s"),
        Check(f"UOMP Guard: tag query over {s.items:,} items", PASS if t50 <= TAG_TARGET else FAIL,
              "GET /v1/memory?tag=groupNN over one keep-alive connection; each group tag is held by 1 % of "
              f"the {s.items:,} items (all carry the granted tag `bench`): the Guard checks the tag, then "
              "re-filters every match by the key-level rules (deny lists, sensitivity) and projects its "
              "fields; the audit entry is on disk before the answer.  Timed at the client, every answer "
              "checked to hold only items of that tag.",
              (("p50 / p99", f"{t50:.1f} ms / {_p(tag_times, 0.99) * 1000:.1f} ms ({len(tag_times)} queries)"),
               ("items per answer (mean)", f"{per_tag:,}"),
               ("target", f"≤ {TAG_TARGET:.0f} ms p50")),
              figure=f"{t50:.1f} ms p50", target=f"≤ {TAG_TARGET:.0f} ms p50"),
        Check(f"UOMP Guard: {s.agents} concurrent agents for {s.agents_seconds:g} s",
              PASS if not errors and active == s.agents else FAIL,
              f"{s.agents} sessions, each granted on its own and used by its own thread over its own "
              "keep-alive connection, alternating GET /v1/memory/:key and GET /v1/memory?tag= (a 1 % tag) "
              f"for {s.agents_seconds:g} s; an error is any refused connection, non-200 answer or wrong "
              "body.  Latency per request at the client.",
              (("errors", f"{len(errors)}" + (f" (first: {errors[0]})" if errors else "")),
               ("agents that completed requests", f"{active} / {s.agents}"),
               ("requests", f"{len(lat):,} ({len(lat) / s.agents_seconds:,.0f} req/s)"),
               ("p50 / p99", f"{a50:.1f} ms / {a99:.1f} ms"),
               ("target", "zero errors; p50 and p99 reported")),
              figure=f"errors: {len(errors)}; p50 {a50:.1f} ms, p99 {a99:.1f} ms", target="zero errors"),
    ]


def splice(text: str, fresh: list[Check], prefix: str = "UOMP") -> str:
    """The report with the agent area's sections and summary rows whose titles start with
    ``prefix`` replaced by ``fresh`` (for a run of one part alone; a run of area `agent` writes
    them with the rest)."""
    from .report import _check_md

    lines = [x for x in text.splitlines() if not x.startswith(f"| agent | {prefix}")]
    rows = [f"| agent | {c.title} | {c.figure} | | | {c.target or 'see below'} | **{c.verdict}** |" for c in fresh]
    last = max(i for i, x in enumerate(lines) if x.startswith("| agent |"))
    lines[last + 1:last + 1] = rows
    start = lines.index("## Area `agent`")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    area, out, skipping = lines[start:end], [], False
    for x in area:
        if x.startswith("### "):
            skipping = x.startswith(f"### {prefix}")
        if not skipping:
            out.append(x)
    while out and not out[-1].strip():
        out.pop()
    for c in fresh:
        while out and not out[-1].strip():
            out.pop()
        out += ["", *_check_md(c)]
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(lines[:start] + out + ([""] + lines[end:] if end < len(lines) else [])).rstrip() + "\n"


def run_alone(argv: list[str], module: str, checks: Callable[[bool], list[Check]], prefix: str) -> int:
    """Run one part of area `agent` alone: ``--quick``: small sizes; ``--docs``: write its results
    into docs/benchmarks.md's agent area (the sections whose titles start with ``prefix``), each
    marked with when, at which revision and under which load it was measured."""
    from dataclasses import replace

    from . import machine
    from .report import AreaResult, summary
    from .server import ROOT

    load0 = machine.load()
    res = AreaResult("agent", "")
    res.checks.extend(checks("--quick" in argv))
    print(summary([res]))
    if "--docs" in argv and "--quick" not in argv:
        from datetime import datetime

        when = (f"Measured on its own by `.venv/bin/python -m benchmarks.{module} --docs` at "
                f"{datetime.now(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}, revision {machine.revision()}, "
                f"load average {load0} at start, {machine.load()} at end (2 CPUs shared with other work); "
                "the machine table above is the area's last full run.")
        fresh = [replace(c, notes=(*c.notes, when)) for c in res.checks]
        doc = ROOT / "docs" / "benchmarks.md"
        doc.write_text(splice(doc.read_text(encoding="utf-8"), fresh, prefix), encoding="utf-8")
        print(f"wrote {doc.relative_to(ROOT)}")
    return 0 if all(c.verdict == PASS for c in res.checks) else 1


def main(argv: list[str]) -> int:
    return run_alone(argv, "uomp_bench", checks, "UOMP")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
