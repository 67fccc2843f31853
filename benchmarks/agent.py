"""Area `agent`: the agent path of issue 9's Bar, against absolute targets and one anchor.

    MCP round trip       saihm_remember then saihm_recall of it, a real MCP ClientSession over
                         stdio -> `ownmem mcp` -> `ownmem agent` (HTTP, 127.0.0.1) -> the blind
                         server, on a 1,000-memory vault                          <= 50 ms p50
    anchor               the same round trip through the ApertoMemory reference's MCP adapter
                         (`python -m amem.mcp_server`, apertomemory 0.2.3) on the same 1,000
                         memories, in the same run (reported, not judged)
    ranked recall        saihm_recall at the operator (POST /saihm over a keep-alive connection,
                         timed at the client on 127.0.0.1) on a 10,000-memory vault  <= 30 ms p50
    log append, consistency check   benchmarks/logbench.py (both backends)
    UOMP Guard                      benchmarks/uomp_bench.py (issue 10)
    remote MCP                      benchmarks/remote_bench.py (issue 21): recall through /mcp over
                                    TLS 1.3 against the stdio path on one vault, remote p50 <= 1.5 x
                                    stdio p50; 32 concurrent remote sessions for 60 s, zero errors

The reference adapter is built on the MCP SDK 1.x (`mcp.server.fastmcp`), which ownmem's SDK
2.x no longer has, so it runs in a venv of its own, `.venv-anchor`, made here from PyPI with
the pins below; nothing of it is imported into ownmem's environment.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from ownmem.vault import Vault
from ownmem.vault.sync import link
from ownmem.vault.transfer import export_bytes

from . import logbench
from .mcp_round_trip import McpSide, round_trips
from .report import FAIL, PASS, AreaResult, Check
from .server import ROOT, ServerProcess, _free_port

PASSPHRASE = "agent bench: eleven quiet lanterns over the harbour"
ROUND_TRIP_TARGET = 50.0    # ms p50, MCP remember -> recall through ownmem mcp and ownmem agent
RECALL_TARGET = 30.0        # ms p50, ranked recall at the operator over 10,000 memories
ANCHOR_VENV = ROOT / ".venv-anchor"
ANCHOR_PINS = ("apertomemory==0.2.3", "mcp>=1.2,<2")
_SCRIPT = Path(sys.executable).with_name("ownmem")
OWNMEM = str(_SCRIPT) if _SCRIPT.exists() else "ownmem"
WORDS = ("amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "heron", "indigo", "juniper",
         "kestrel", "lagoon", "meadow", "nectar", "orchid", "pebble", "quartz", "raven", "saffron", "tundra")


@dataclass(frozen=True, slots=True)
class Sizes:
    memories: int = 1_000
    recall_memories: int = 10_000
    round_trips: int = 40
    recalls: int = 200
    anchor_round_trips: int = 1     # the reference re-derives its keys per object: minutes each


FULL = Sizes()
QUICK = Sizes(memories=100, recall_memories=1_000, round_trips=10, recalls=40)


def _say(msg: str) -> None:
    print(f"  {msg}", flush=True)


def _word(i: int) -> str:
    """A word unique to memory ``i``, also as a prefix (the operator matches query words as
    prefixes): fixed-width digits."""
    a, b = divmod(i, len(WORDS))
    return f"{WORDS[b]}{a:04d}"


def _theme(i: int) -> str:
    """One of 100 words, each held by 1 % of the memories."""
    return f"theme{i % 100:02d}"


def _fill(folder: Path, n: int) -> None:
    v = Vault.create(folder, PASSPHRASE)
    try:
        for i in range(n):
            v.add(f"memory {i}: the user keeps a note about {_word(i)} under {_theme(i * 37 + 11)}", tags=["bench"])
    finally:
        v.close()


def _env(tmp: Path, folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OWNMEM_", "SAIHM_"))}
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env.update(HOME=str(home), OWNMEM_VAULT=str(folder), OWNMEM_PASSPHRASE=PASSPHRASE)
    return env


class Agent:
    """`ownmem agent` on a vault linked to the bench's server, with one credential."""

    def __init__(self, tmp: Path, folder: Path, server: str, name: str, args: tuple[str, ...] = (),
                 env: dict[str, str] | None = None) -> None:
        self.env = {**_env(tmp, folder), **(env or {})}
        v = Vault(folder).unlock(PASSPHRASE)
        try:
            link(v, server, name).sync_once()     # registration, and every cell pushed with its receipt
        finally:
            v.close()
        r = subprocess.run([OWNMEM, "agent", "credential", "issue", "--name", "bench"], env=self.env,
                           capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL)
        self.auth = r.stdout.strip()
        self.port = _free_port()
        self.log = tmp / f"agent-{name}.log"
        with open(self.log, "ab") as out:
            # 43 writes (3 warm-up) within a minute: over the default per-credential quota
            # (agent/quota.py), which this bench does not measure
            self.proc = subprocess.Popen([OWNMEM, "agent", "--port", str(self.port), "--writes-per-minute", "100000",
                                          "--max-staged", "100000", *args], env=self.env, stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        with httpx.Client(timeout=2.0) as c:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"ownmem agent exited: {self.log.read_text(errors='replace')[-2000:]}")
                try:
                    if c.get(f"http://127.0.0.1:{self.port}/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("ownmem agent did not come up")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/saihm"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def anchor_python() -> Path:
    """The reference adapter's interpreter, its venv made on first use."""
    py = ANCHOR_VENV / "bin" / "python"
    if not py.exists():
        _say(f"making {ANCHOR_VENV.name} for the reference's MCP adapter ({', '.join(ANCHOR_PINS)}) ...")
        subprocess.run([sys.executable, "-m", "venv", str(ANCHOR_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *ANCHOR_PINS], check=True)
    return py


def _p(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def _ms(values: list[float]) -> str:
    return ", ".join(f"{v * 1000:.1f}" for v in values[:12]) + (" ..." if len(values) > 12 else "")


def measure_round_trip(s: Sizes, tmp: Path, server: str) -> tuple[list[float], list[float], str]:
    folder = tmp / "vault-1k"
    _say(f"filling a {s.memories:,}-memory vault ...")
    _fill(folder, s.memories)
    v = Vault(folder).unlock(PASSPHRASE)
    try:
        data, _ = export_bytes(v)
    finally:
        v.close()
    agent = Agent(tmp, folder, server, "bench-rt")
    try:
        env = {**agent.env, "SAIHM_ENDPOINT_URL": agent.url, "SAIHM_AUTH_HEADER": agent.auth}
        side = McpSide("ownmem mcp -> ownmem agent", OWNMEM, ("mcp",), env,
                       lambda c: ("saihm_remember", {"content": c}), lambda q: ("saihm_recall", {"query": q}))
        _say(f"{s.round_trips} round trips through ownmem mcp -> ownmem agent ...")
        own = round_trips(side, s.round_trips, warmup=3)
    finally:
        agent.stop()
    # the anchor: the same memories, imported by the reference itself from ownmem's export
    from amem.vault import Vault as ReferenceVault  # apertomemory is a test dependency of ownmem
    amem = tmp / "reference.amem"
    amem.write_bytes(data)
    ReferenceVault.import_file(amem, tmp / "reference-vault", PASSPHRASE)
    py = anchor_python()
    renv = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "OWNMEM_"))}
    renv.update(AMEM_VAULT=str(tmp / "reference-vault"), AMEM_PASSPHRASE=PASSPHRASE)
    ref_side = McpSide("reference amem-mcp", str(py), ("-m", "amem.mcp_server"), renv,
                       lambda c: ("amem_remember", {"content": c}), lambda q: ("amem_recall", {"query": q}))
    _say(f"{s.anchor_round_trips} round trip(s) through the reference's amem-mcp (slow: minutes) ...")
    ref = round_trips(ref_side, s.anchor_round_trips, warmup=0, timeout=3600.0)
    ver = subprocess.run([str(py), "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
                         capture_output=True, text=True).stdout.strip()
    return own, ref, ver


def measure_recall(s: Sizes, tmp: Path, server: str) -> tuple[list[float], int, float]:
    folder = tmp / "vault-10k"
    _say(f"filling a {s.recall_memories:,}-memory vault ...")
    _fill(folder, s.recall_memories)
    t0 = time.perf_counter()
    agent = Agent(tmp, folder, server, "bench-recall")
    started = time.perf_counter() - t0
    times: list[float] = []
    hits = 0
    try:
        with httpx.Client(timeout=60.0, headers={"Authorization": agent.auth}) as c:
            for i in range(s.recalls + 5):
                word = _word((i * 7919) % s.recall_memories)
                body = {"method": "saihm_recall", "params": {"query": f"{word} {_theme(i)}"}}
                t = time.perf_counter()
                r = c.post(agent.url, json=body)
                dt = time.perf_counter() - t
                r.raise_for_status()
                got = r.json()
                if not any(word in e.get("plaintext", "") for e in got):
                    raise RuntimeError(f"ranked recall for {word!r} did not return its memory")
                if got[0]["plaintext"].find(word) < 0:
                    raise RuntimeError(f"ranked recall for {word!r} did not rank its memory first")
                if i >= 5:
                    times.append(dt)
                    hits += len(got)
    finally:
        agent.stop()
    return times, hits // max(1, len(times)), started


def run(quick: bool = False) -> AreaResult:
    s = QUICK if quick else FULL
    res = AreaResult("agent", INTRO)
    with tempfile.TemporaryDirectory(prefix="ownmem-bench-agent-") as d:
        tmp = Path(d)
        srv = ServerProcess("sqlite", tmp, {"OWNMEM_DATA_DIR": str(tmp / "server-data")}, workers=1).start()
        try:
            own, ref, anchor_mcp = measure_round_trip(s, tmp, srv.url)
            recall, per_query, started = measure_recall(s, tmp, srv.url)
        finally:
            srv.stop()
    p50 = statistics.median(own) * 1000
    ref50 = statistics.median(ref) * 1000
    res.checks.append(Check(
        f"MCP remember -> recall round trip, {s.memories:,}-memory vault", PASS if p50 <= ROUND_TRIP_TARGET else FAIL,
        "One MCP ClientSession (the official SDK, over stdio) to `ownmem mcp`, which calls `ownmem agent` over "
        "HTTP on 127.0.0.1; each round trip is saihm_remember of a new memory (sealed, REMEMBER receipt written "
        "to the blind server's log, then the cell pushed) followed by saihm_recall of a word only it holds; the "
        "recall must return the stored text.  Timed at the MCP client.  The anchor is the same round trip "
        "(amem_remember, amem_recall) through the reference's MCP adapter on the same memories (imported by "
        "the reference from ownmem's .amem export).",
        (("ownmem, p50 / p99", f"{p50:.1f} ms / {_p(own, 0.99) * 1000:.1f} ms ({len(own)} round trips)"),
         ("ownmem runs, ms", _ms(own)),
         ("anchor: reference amem-mcp, median", f"{ref50:,.0f} ms ({len(ref)} round trip(s); MCP SDK {anchor_mcp})"),
         ("ratio ownmem / reference", f"{p50 / ref50:.2g}"),
         ("target", f"≤ {ROUND_TRIP_TARGET:.0f} ms p50")),
        notes=("The reference re-derives its keys from the passphrase (Argon2id) for every object it opens, so "
               "a recall over 1,000 memories costs it minutes; one round trip is timed.",),
        figure=f"{p50:.1f} ms p50 (reference: {ref50 / 1000:,.1f} s)", target=f"≤ {ROUND_TRIP_TARGET:.0f} ms p50"))
    r50 = statistics.median(recall) * 1000
    res.checks.append(Check(
        f"ranked recall at the operator, {s.recall_memories:,} memories", PASS if r50 <= RECALL_TARGET else FAIL,
        "POST /saihm {\"method\": \"saihm_recall\"} to `ownmem agent` over one keep-alive connection on 127.0.0.1, "
        "a two-word query (a word one memory holds, and a word 1 % of the memories hold; the operator "
        "matches any word), ranked by ownmem's one ranking (ownmem.recall: BM25 over the matching memories, "
        "a relevance floor, one page of at most 10); the memory holding the rare word must come first.  "
        "Timed at the client: it includes the operator's request for memories shared with the vault (from "
        "the blind server) and the JSON of the page.",
        (("p50 / p99", f"{r50:.1f} ms / {_p(recall, 0.99) * 1000:.1f} ms ({len(recall)} queries)"),
         ("memories answered per query (mean; a page is at most 10)", f"{per_query:,}"),
         ("agent start: unlock, index build, first sync", f"{started:.1f} s"),
         ("target", f"≤ {RECALL_TARGET:.0f} ms p50")),
        figure=f"{r50:.1f} ms p50", target=f"≤ {RECALL_TARGET:.0f} ms p50"))
    res.checks.extend(logbench.checks(quick))
    from . import uomp_bench  # the UOMP Guard's targets (issue 10); it builds on Agent here
    res.checks.extend(uomp_bench.checks(quick))
    from . import remote_bench  # the remote MCP door's targets (issue 21); it builds on Agent here
    res.checks.extend(remote_bench.checks(quick))
    return res


INTRO = ("The agent path: a real MCP client session through `ownmem mcp` and `ownmem agent` to the blind "
         "server (SQLite), the operator's ranked recall, and the public log's append and consistency check on "
         "SQLite and PostgreSQL, the UOMP Guard, and MCP for remote hosts (Streamable HTTP over TLS 1.3 at /mcp).  "
         "Absolute targets from issues 9 and 10; the round trip is also measured through the "
         "ApertoMemory reference's MCP adapter in the same run, as the anchor; remote recall is judged "
         "against the stdio path measured in the same run (issue 21).")
