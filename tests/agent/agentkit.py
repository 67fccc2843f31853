"""Helpers of the agent tests: `ownmem agent` as a real subprocess in front of a real blind server.

    AgentProcess   ``ownmem agent --port P`` on a vault folder; SIGKILL-able and restartable
    call()         one SAIHM HTTPS-binding request (POST /saihm) -> (status, JSON)
    LogReader      the public log as a third party reads it: key, checkpoint, inclusion proofs

The server processes, backends and devices are those of tests/sync (synckit).
"""
from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ownmem.crypto import provider, run_sync
from ownmem.saihm.notes import Checkpoint, open_checkpoint, parse_verifier_key
from ownmem.saihm.receipt import parse_receipt, verify_receipt
from ownmem.saihm.tlog import check_inclusion, leaf_hash
from tests.sync.synckit import CLI, PASSPHRASE, cli_env, free_port


def agent_env(folder: Path, root: Path, passphrase: str | None = PASSPHRASE) -> dict[str, str]:
    """synckit's CLI environment, without any SAIHM_ variable of the machine running the tests."""
    return {k: v for k, v in cli_env(root, folder, passphrase).items() if not k.startswith("SAIHM_")}


def ownmem_cli(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(CLI + list(args), env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       timeout=timeout)
    assert "Traceback" not in r.stdout + r.stderr, r.stderr
    return r


def without_audit_batches(agent: AgentProcess) -> AgentProcess:
    """Restart ``agent`` with a batch tick longer than any test: the UOMP audit of its write
    attempts (ownmem.agent.staging.WriteAudit) is then not sealed into anchored batches during the
    test, whose public-log assertions are about SAIHM receipts alone (the batches have their own
    tests in tests/uomp/test_audit_sync.py)."""
    from ownmem.agent.audit_sync import INTERVAL_ENV

    agent.stop()
    agent.env[INTERVAL_ENV] = "3600"
    return agent.start()


def issue(env: dict[str, str], name: str, *extra: str) -> str:
    r = ownmem_cli("agent", "credential", "issue", "--name", name, *extra, env=env)
    assert r.returncode == 0, r.stderr
    header = r.stdout.strip()
    assert header.startswith("Bearer om_agent_")
    return header


def credential(env: dict[str, str], name: str) -> dict[str, Any]:
    """The credential named ``name`` as `ownmem agent credential list --json` shows it: its id,
    session_id, agent_id (the agent id of what it writes) and grant."""
    r = ownmem_cli("agent", "credential", "list", "--json", env=env)
    assert r.returncode == 0, r.stderr
    found = [c for c in json.loads(r.stdout) if c["name"] == name]
    assert len(found) == 1, r.stdout
    return dict(found[0])


class AgentProcess:
    def __init__(self, folder: Path, root: Path, *, port: int | None = None, args: tuple[str, ...] = ()) -> None:
        self.folder, self.root, self.args = folder, root, args
        self.port = port or free_port()
        self.env = agent_env(folder, root)
        logs = root / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.log = logs / f"agent-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/saihm"

    def start(self, timeout: float = 60.0) -> AgentProcess:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(CLI + ["agent", "--port", str(self.port), *self.args], env=self.env,
                                         stdout=out, stderr=out, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2.0) as c:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"ownmem agent exited with {self.proc.returncode}:\n{self.logs()}")
                try:
                    if c.get(f"http://127.0.0.1:{self.port}/health").status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"ownmem agent did not come up in {timeout} s:\n{self.logs()}")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs (a crash, a power cut)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def logs(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def call(self, method: str, params: Any = None, *, auth: str | None, timeout: float = 60.0,
             raw: bytes | None = None) -> tuple[int, Any]:
        headers = {"Content-Type": "application/json"}
        if auth is not None:
            headers["Authorization"] = auth
        body = raw if raw is not None else json.dumps({"method": method, "params": params or {}}).encode()
        r = httpx.post(self.url, content=body, headers=headers, timeout=timeout)
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, r.text


class LogReader:
    """The public log as someone who holds nothing but its public endpoints reads it."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.http = httpx.Client(timeout=30.0)

    def close(self) -> None:
        self.http.close()

    def list(self, **params: str) -> list[dict[str, Any]]:
        r = self.http.get(self.base + "/v1/log", params={"limit": "1000", **params})
        assert r.status_code == 200, r.text
        return list(r.json()["entries"])

    def get(self, receipt_id: str) -> dict[str, Any] | None:
        r = self.http.get(self.base + f"/v1/log/{receipt_id}")
        return r.json() if r.status_code == 200 else None

    def checkpoint(self) -> Checkpoint:
        key = parse_verifier_key(self.http.get(self.base + "/v1/log/key").json()["vkey"])
        return run_sync(open_checkpoint(provider(), self.http.get(self.base + "/v1/log/checkpoint").text, key))

    def verify(self, receipt_id: str, holder_public: bytes) -> bytes:
        """The receipt, once it is proven in the signed checkpoint's tree and its holder's
        signature verifies under the holder key the KEY receipt in the log carries."""
        cp = self.checkpoint()
        p = self.http.get(self.base + "/v1/log/proof/inclusion", params={"receipt": receipt_id, "size": cp.size}).json()
        receipt = bytes.fromhex(self.http.get(self.base + f"/v1/log/entries/{p['index']}").json()["receipt"])
        check_inclusion([bytes.fromhex(x) for x in p["proof"]], cp.size, cp.root_hash, p["index"], leaf_hash(receipt))
        r = parse_receipt(receipt)
        assert r.receipt_id.hex() == receipt_id
        run_sync(verify_receipt(provider(), r, holder_public))
        return receipt

    def holder_key(self, holder_id: str) -> bytes:
        """The holder's public key, from its KEY receipt in the log."""
        keys = self.list(holder=holder_id, operation="KEY")
        assert keys, "no KEY receipt for the holder"
        detail = parse_receipt(bytes.fromhex(keys[0]["receipt"])).detail
        assert isinstance(detail, bytes)
        return detail


@dataclass
class AgentVault:
    """A vault folder linked to ``server_url`` under ``name``, closed, for an agent process."""

    folder: Path
    name: str
    server_url: str
    root: Path

    @property
    def env(self) -> dict[str, str]:
        return agent_env(self.folder, self.root)
