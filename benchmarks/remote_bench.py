"""Area `agent`, the remote MCP part: MCP over Streamable HTTP and TLS 1.3 at /mcp of `ownmem
agent --public-url`, against the stdio path on the same vault (issue 21's Bar).

    recall, remote vs stdio   saihm_recall of a word one memory holds, through (a) the SDK client
                              over stdio -> `ownmem mcp` -> `ownmem agent` /saihm and (b) the SDK
                              client over Streamable HTTP + TLS 1.3 -> /mcp of the same agent,
                              calls alternating, 1,000-memory vault     remote p50 <= 1.5 x stdio p50
    32 sessions, 60 s         32 remote sessions, each its own grant, token and SDK ClientSession,
                              recalling in a loop               zero errors; p50, p99, calls/s reported

The tokens are real UOMP capability tokens (profile "remote", audience the /mcp URL) minted with
the vault's own auth key for REMOTE grants written with the vault's credentials key, as
tests/agent/test_remote_door.py does: the OAuth flow that issues the same tokens is tested
(tests/agent/test_oauth_*.py), not timed.  Everything binds 127.0.0.1; the certificate is a
throwaway CA's, made here.  ``python -m benchmarks.remote_bench [--quick] [--docs]`` runs this
part alone.
"""
from __future__ import annotations

import datetime
import ipaddress
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from ownmem.agent.credentials import REMOTE, Credential, CredentialFile
from ownmem.agent.guarded import scopes_of
from ownmem.purposes import Purpose
from ownmem.uomp.tokens import AuthKey, Claims, issue
from ownmem.vault import Vault

from .agent import OWNMEM, PASSPHRASE, Agent, _fill, _p, _word
from .mcp_round_trip import _text
from .report import FAIL, PASS, Check
from .server import ServerProcess, _free_port
from .uomp_bench import _cpu_seconds, run_alone

RATIO_TARGET = 1.5          # remote p50 / stdio p50, same vault, same run
PUBLIC_RATE = 100_000       # OWNMEM_PUBLIC_RATE for the bench: every session shares 127.0.0.1's bucket
TOKEN_LIFE = 3600           # s, the longest an access token lives (UOMP section 7.2 for a remote host)
CLIENT_ID = "https://bench.ownmem.invalid/oauth-client.json"


@dataclass(frozen=True, slots=True)
class Sizes:
    memories: int = 1_000
    recalls: int = 200          # per path
    warmup: int = 5             # per path, untimed
    sessions: int = 32
    seconds: float = 60.0


FULL = Sizes()
QUICK = Sizes(memories=100, recalls=40, warmup=3, sessions=8, seconds=10.0)


def _say(msg: str) -> None:
    print(f"  {msg}", flush=True)


@dataclass(frozen=True, slots=True)
class TlsFiles:
    ca: Path            # what the client trusts
    cert: Path          # the agent's certificate (PEM)
    key: Path           # its private key (PEM)


def make_tls(folder: Path) -> TlsFiles:
    """A throwaway CA and a certificate for 127.0.0.1 it signs, valid one day."""
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("ownmem bench CA")).issuer_name(name("ownmem bench CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(name("127.0.0.1")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    out = TlsFiles(folder / "ca.pem", folder / "cert.pem", folder / "key.pem")
    out.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    out.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    out.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    out.key.chmod(0o600)
    return out


class Door:
    """`ownmem agent` with its remote door on https://127.0.0.1:P, and what the person holds to
    grant remote hosts without the OAuth dance: the vault's credentials key and UOMP auth key."""

    def __init__(self, tmp: Path, folder: Path, server: str) -> None:
        v = Vault(folder).unlock(PASSPHRASE)
        try:
            self.key = AuthKey.from_seed(v.purpose_key(Purpose.UOMP_AUTH))
            self.creds = CredentialFile(folder, v.purpose_key(Purpose.AGENT_CREDENTIALS))
        finally:
            v.close()
        self.tls = make_tls(tmp / "tls")
        port = _free_port()
        self.public = f"https://127.0.0.1:{port}"
        self.agent = Agent(tmp, folder, server, "bench-remote",
                           args=("--public-url", self.public, "--tls-cert", str(self.tls.cert),
                                 "--tls-key", str(self.tls.key), "--public-bind", f"127.0.0.1:{port}"),
                           env={"OWNMEM_PUBLIC_RATE": str(PUBLIC_RATE)})
        # the public listener starts in a thread of its own, after the local one
        _until("the public listener", lambda: self._get(f"{self.public}/.well-known/oauth-protected-resource/mcp"))

    @property
    def mcp(self) -> str:
        return self.public + "/mcp"

    def ctx(self) -> ssl.SSLContext:
        """A client context that trusts the throwaway CA (and verifies the name)."""
        return ssl.create_default_context(cafile=str(self.tls.ca))

    def _get(self, url: str) -> bool:
        try:
            return httpx.get(url, verify=self.ctx(), timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def grant(self, name: str) -> Credential:
        """A read-only REMOTE grant of every tag, as a consent would write it."""
        return self.creds.issue(name, int(time.time()), kind=REMOTE, client_id=CLIENT_ID, expires_days=1,
                                write=False).credential

    def token(self, cred: Credential) -> str:
        """The access token the door's /token would give for ``cred``: a UOMP capability token."""
        now = int(time.time())
        return issue(self.key, Claims(cred.session_id, cred.agent, now, now + TOKEN_LIFE, scopes_of(cred),
                                      profile="remote", audience=self.mcp))

    def admitted(self, token: str) -> bool:
        """Whether /mcp takes ``token`` yet (the agent learns a new grant from the credential file)."""
        body = ('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
                '"capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}')
        try:
            r = httpx.post(self.mcp, content=body, verify=self.ctx(), timeout=10, headers={
                "Authorization": f"Bearer {token}", "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"})
        except httpx.HTTPError:
            return False
        return r.status_code == 200

    def stop(self) -> None:
        self.agent.stop()


def _until(what: str, ok: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what}: not ready within {timeout:g} s")


def _query(i: int, memories: int) -> str:
    return _word((i * 7919 + 3) % memories)


async def _recall(s: ClientSession, word: str) -> float:
    """Seconds for one saihm_recall of ``word``; raises unless the answer holds its memory."""
    t = time.perf_counter()
    r = await s.call_tool("saihm_recall", {"query": word})
    dt = time.perf_counter() - t
    if r.is_error or word not in _text(r):
        raise RuntimeError(f"saihm_recall {word!r} did not return its memory: {_text(r)[:200]!r}")
    return dt


async def _remote(door: Door, token: str, body: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    """``body`` with an initialized SDK ClientSession over Streamable HTTP + TLS to /mcp."""
    async with httpx2.AsyncClient(verify=door.ctx(), headers={"Authorization": f"Bearer {token}"},
                                  timeout=60) as http:
        async with streamable_http_client(door.mcp, http_client=http) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                return await body(s)


def compare(door: Door, token: str, s: Sizes) -> tuple[list[float], list[float]]:
    """Seconds per recall through stdio and through /mcp, both sessions open at once and the two
    paths alternating call by call (which goes first alternating too), so load from other work on
    the machine falls on both."""
    a = door.agent
    params = StdioServerParameters(command=OWNMEM, args=["mcp"], env={
        **a.env, "SAIHM_ENDPOINT_URL": a.url, "SAIHM_AUTH_HEADER": a.auth})

    async def go() -> tuple[list[float], list[float]]:
        local: list[float] = []
        remote: list[float] = []
        with open("/dev/null", "w") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as std:
                    await std.initialize()

                    async def both(rem: ClientSession) -> None:
                        for i in range(s.warmup + s.recalls):
                            word = _query(i, s.memories)
                            if i % 2:
                                t_rem, t_std = await _recall(rem, word), await _recall(std, word)
                            else:
                                t_std, t_rem = await _recall(std, word), await _recall(rem, word)
                            if i >= s.warmup:
                                local.append(t_std)
                                remote.append(t_rem)
                    with anyio.fail_after(600):
                        await _remote(door, token, both)
        return local, remote
    return anyio.run(go)


@dataclass(frozen=True, slots=True)
class Load:
    latencies: list[float]          # s per successful call
    errors: list[str]
    sessions: int                   # sessions that completed at least one call
    elapsed: float
    agent_cpu: float | None         # s of CPU the agent process used during the load (None: no /proc)
    client_cpu: float               # s of CPU the bench process (every client session) used


def concurrent(door: Door, tokens: list[str], s: Sizes) -> Load:
    """Every session its own grant, token, HTTP client and SDK ClientSession, recalling a word one
    memory holds in a loop until the fixed end; a session whose transport fails is counted as an
    error and opened again."""
    lat: list[list[float]] = [[] for _ in tokens]
    errors: list[str] = []

    async def one(n: int, token: str, stop: float) -> None:
        i = n

        async def loop(ses: ClientSession) -> None:
            nonlocal i
            while time.perf_counter() < stop:
                word = _query(i, s.memories)
                i += len(tokens)
                try:
                    lat[n].append(await _recall(ses, word))
                except RuntimeError as e:          # a wrong or error answer: the session goes on
                    errors.append(f"session {n}: {e}")
        while time.perf_counter() < stop:
            try:
                await _remote(door, token, loop)
            except Exception as e:  # noqa: BLE001 - a transport or protocol failure, counted
                errors.append(f"session {n}: {type(e).__name__}: {e}")
                await anyio.sleep(0.1)

    async def go() -> float:
        t0 = time.perf_counter()
        stop = t0 + s.seconds
        async with anyio.create_task_group() as tg:
            for n, tok in enumerate(tokens):
                tg.start_soon(one, n, tok, stop)
        return time.perf_counter() - t0
    agent0, client0 = _cpu_seconds(door.agent.proc.pid), time.process_time()
    elapsed = anyio.run(go)
    agent1, client1 = _cpu_seconds(door.agent.proc.pid), time.process_time()
    agent_cpu = agent1 - agent0 if agent0 is not None and agent1 is not None else None
    return Load([x for per in lat for x in per], errors, sum(1 for per in lat if per), elapsed, agent_cpu,
                client1 - client0)


def measure(s: Sizes) -> tuple[list[float], list[float], Load]:
    with tempfile.TemporaryDirectory(prefix="ownmem-bench-remote-") as d:
        tmp = Path(d)
        srv = ServerProcess("sqlite", tmp, {"OWNMEM_DATA_DIR": str(tmp / "server-data")}, workers=1).start()
        try:
            folder = tmp / "vault-remote"
            _say(f"filling a {s.memories:,}-memory vault ...")
            _fill(folder, s.memories)
            door = Door(tmp, folder, srv.url)
            try:
                token = door.token(door.grant("bench-remote-host"))
                _until("the remote grant's session", lambda: door.admitted(token))
                _say(f"{s.recalls} recalls each through stdio and through /mcp over TLS, alternating ...")
                local, remote = compare(door, token, s)
                tokens = [door.token(door.grant(f"bench-host-{n:02d}")) for n in range(s.sessions)]
                for t in tokens:
                    _until("a concurrent session's grant", partial(door.admitted, t))
                _say(f"{s.sessions} remote MCP sessions for {s.seconds:g} s ...")
                load = concurrent(door, tokens, s)
            finally:
                door.stop()
        finally:
            srv.stop()
    return local, remote, load


def checks(quick: bool = False) -> list[Check]:
    s = QUICK if quick else FULL
    local, remote, load = measure(s)
    l50, r50 = statistics.median(local) * 1000, statistics.median(remote) * 1000
    ratio = r50 / l50
    lat = load.latencies
    c50 = statistics.median(lat) * 1000 if lat else float("nan")
    c99 = _p(lat, 0.99) * 1000 if lat else float("nan")

    def cpu(seconds: float | None) -> str:
        if seconds is None:
            return "not measured (no /proc)"
        return f"{seconds / max(1, len(lat)) * 1000:.1f} ms ({seconds:.0f} s in {load.elapsed:.0f} s)"
    tokens_note = ("The bearer tokens are real UOMP capability tokens (profile \"remote\", audience the /mcp URL, "
                   f"{TOKEN_LIFE // 60} minutes) for REMOTE grants (CredentialFile.issue(kind=REMOTE)) written "
                   "with the vault's credentials key and signed with the vault's UOMP auth key, as "
                   "tests/agent/test_remote_door.py mints them: the OAuth flow that issues the same tokens "
                   "is tested (tests/agent/test_oauth_*.py), not timed.  The door's per-address rate limit "
                   f"is raised for the bench (OWNMEM_PUBLIC_RATE={PUBLIC_RATE:,}): every session comes from "
                   "127.0.0.1 and shares one bucket, which a loopback bench would otherwise exhaust.")
    return [
        Check(f"remote MCP: recall over /mcp + TLS 1.3 vs stdio, {s.memories:,}-memory vault",
              PASS if ratio <= RATIO_TARGET else FAIL,
              "saihm_recall of a word one memory holds (the answer must hold it), timed at the client, "
              "through two paths to one `ownmem agent` on one vault, in the same run: (a) stdio, the SDK's "
              "ClientSession over stdio to `ownmem mcp`, which calls the agent's POST /saihm over HTTP on "
              "127.0.0.1; (b) remote, the SDK's ClientSession over Streamable HTTP (httpx2, keep-alive, "
              "TLS 1.3 verified against a throwaway CA) to /mcp of the same agent started with "
              "--public-url https://127.0.0.1:P, where each request's bearer token is verified and the "
              "call dispatched in the agent's process (the same Guard, audit and operator).  Both "
              "sessions are open at once and the two paths alternate call by call, which goes first "
              f"alternating too; {s.warmup} untimed recalls each first.",
              (("remote p50 / p99", f"{r50:.1f} ms / {_p(remote, 0.99) * 1000:.1f} ms ({len(remote)} recalls)"),
               ("stdio p50 / p99 (the anchor)", f"{l50:.1f} ms / {_p(local, 0.99) * 1000:.1f} ms "
                                                f"({len(local)} recalls)"),
               ("ratio remote / stdio, p50", f"{ratio:.2f}"),
               ("target", f"remote p50 ≤ {RATIO_TARGET:g} × stdio p50")),
              notes=(tokens_note,),
              figure=f"{r50:.1f} ms p50, {ratio:.2f}× stdio ({l50:.1f} ms)",
              target=f"≤ {RATIO_TARGET:g}× the stdio p50"),
        Check(f"remote MCP: {s.sessions} concurrent sessions for {s.seconds:g} s",
              PASS if not load.errors and load.sessions == s.sessions else FAIL,
              f"{s.sessions} remote hosts at once, each its own REMOTE grant, token, HTTP client (its own "
              "TLS connections) and SDK ClientSession over Streamable HTTP to /mcp of one `ownmem agent` on "
              f"the same {s.memories:,}-memory vault, each calling saihm_recall of a word one memory holds "
              f"in a loop for {s.seconds:g} s (127.0.0.1 only, fixed duration).  All sessions run in one "
              "asyncio event loop of the bench process, which shares the machine's cores with the agent.  "
              "An error is any failed call, error result, answer without its memory, or broken session.  "
              "Latency per call at the client.",
              (("errors", f"{len(load.errors)}" + (f" (first: {load.errors[0][:300]})" if load.errors else "")),
               ("sessions that completed calls", f"{load.sessions} / {s.sessions}"),
               ("calls", f"{len(lat):,} ({len(lat) / load.elapsed:,.0f} calls/s)"),
               ("p50 / p99", f"{c50:.1f} ms / {c99:.1f} ms"),
               ("CPU per call: agent / bench client (all sessions)", f"{cpu(load.agent_cpu)} / {cpu(load.client_cpu)}"),
               ("target", "zero errors; p50 and p99 reported")),
              notes=(tokens_note,),
              figure=f"errors: {len(load.errors)}; p50 {c50:.1f} ms, p99 {c99:.1f} ms; "
                     f"{len(lat) / load.elapsed:,.0f} calls/s",
              target="zero errors"),
    ]


def main(argv: list[str]) -> int:
    return run_alone(argv, "remote_bench", checks, "remote MCP")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
