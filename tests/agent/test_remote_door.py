"""The remote MCP door of `ownmem agent` from the attacker's side (issue 21 Bar 3), against the
real service over TLS 1.3 with the official SDK's Streamable HTTP client.

The tokens here are real UOMP capability tokens, signed with the vault's own auth key (the test
holds the passphrase): the strongest position an attacker could reach short of the key (a token
the service issued for another resource, a local-profile token, one whose session was never
issued or was revoked).  The OAuth flows that issue them are tests/agent/test_oauth_*.py and the
end-to-end test tests/mcp/test_remote_oauth.py."""
from __future__ import annotations

import json
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from ownmem.agent.credentials import REMOTE, Credential, CredentialFile
from ownmem.agent.guarded import scopes_of
from ownmem.purposes import Purpose
from ownmem.uomp.tokens import AuthKey, Claims, issue
from ownmem.vault import Vault
from tests.agent.agentkit import AgentProcess, AgentVault, ownmem_cli
from tests.agent.tlskit import Tls, make_tls
from tests.sync.synckit import PASSPHRASE, Backend, ServerProcess, free_port

TOOLS = {"saihm_remember", "saihm_recall", "saihm_forget", "saihm_status", "saihm_share", "saihm_revoke_share",
         "saihm_governance_propose", "saihm_governance_vote"}


@dataclass
class Door:
    agent: AgentProcess
    public: str                  # https://127.0.0.1:P
    tls_files: Tls
    key: AuthKey
    creds: CredentialFile

    @property
    def mcp(self) -> str:
        return self.public + "/mcp"

    def tls(self, maximum: ssl.TLSVersion | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.tls_files.ca))
        if maximum is not None:
            ctx.maximum_version = maximum
        return ctx

    def grant(self, name: str = "remote-host", **kw: Any) -> Credential:
        c = self.creds.issue(name, int(time.time()), kind=REMOTE, client_id="https://client.example/oauth",
                             expires_days=1, **kw).credential
        return c

    def token(self, cred: Credential, *, audience: str | None = None, profile: str = "remote",
              life: int = 600, issued: int | None = None, session_id: str | None = None) -> str:
        now = int(time.time()) if issued is None else issued
        return issue(self.key, Claims(session_id or cred.session_id, cred.agent, now, now + life, scopes_of(cred),
                                      profile=profile, audience=self.mcp if audience is None else audience))

    def post(self, token: str | None, body: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
             "MCP-Protocol-Version": "2025-11-25", **(headers or {})}
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        doc = body if body is not None else {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        with httpx.Client(verify=self.tls(), timeout=30) as c:
            return c.post(self.mcp, content=json.dumps(doc) if not isinstance(doc, bytes) else doc, headers=h)


@pytest.fixture
def door(sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
         agents: Callable[..., AgentProcess], tmp_path: Path) -> Iterator[Door]:
    server = servers(sqlite_backend)
    v = agent_vault(server.url, ("The cat is called Miso", "Standup is at 9:30 on weekdays"))
    unlocked = Vault(v.folder).unlock(PASSPHRASE)
    key = AuthKey.from_seed(unlocked.purpose_key(Purpose.UOMP_AUTH))
    cred_key = unlocked.purpose_key(Purpose.AGENT_CREDENTIALS)
    unlocked.close()
    tls = make_tls(tmp_path / "tls")
    port = free_port()
    public = f"https://127.0.0.1:{port}"
    agent = agents(v, args=("--public-url", public, "--tls-cert", str(tls.cert), "--tls-key", str(tls.key),
                            "--public-bind", f"127.0.0.1:{port}"))
    d = Door(agent, public, tls, key, CredentialFile(v.folder, cred_key))
    # the public listener starts in its own thread: up once its metadata answers
    _until("the public listener", lambda: _answers(f"{public}/.well-known/oauth-protected-resource/mcp", d))
    yield d


def _answers(url: str, d: Door) -> bool:
    try:
        return httpx.get(url, verify=d.tls(), timeout=5).status_code == 200
    except httpx.ConnectError:
        return False


def _until(what: str, fn: Callable[[], bool], timeout: float = 10.0) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if fn():
            return time.monotonic() - t0
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {timeout} s")


async def _session_calls(d: Door, token: str, calls: list[tuple[str, dict[str, Any]]],
                         modern: bool = False) -> tuple[Any, list[Any]]:
    async with httpx2.AsyncClient(verify=d.tls(), headers={"Authorization": f"Bearer {token}"},
                                  timeout=30) as http:
        async with streamable_http_client(d.mcp, http_client=http) as (read, write):
            async with ClientSession(read, write) as s:
                if modern:
                    await s.discover()      # the stateless revision: server/discover, no handshake
                else:
                    await s.initialize()
                tools = await s.list_tools()
                return tools, [await s.call_tool(name, args) for name, args in calls]


def test_a_granted_host_gets_the_eight_tools_and_recalls_through_the_guard(door: Door) -> None:
    cred = door.grant(tags=["*"])
    token = door.token(cred)
    _until("the grant's session", lambda: door.post(token).status_code == 200)
    tools, (recall, status) = anyio.run(_session_calls, door, token,
                                        [("saihm_recall", {"query": "cat"}), ("saihm_status", {})])
    by = {t.name: t for t in tools.tools}
    assert set(by) == TOOLS
    assert by["saihm_recall"].annotations.read_only_hint is True
    assert by["saihm_status"].annotations.read_only_hint is True
    assert by["saihm_forget"].annotations.destructive_hint is True
    # SAIHM "saihm_revoke_share" Annotations: destructiveHint false (docs/decisions.md)
    assert by["saihm_revoke_share"].annotations.destructive_hint is False
    assert not recall.is_error, recall.content
    text = recall.content[0].text
    assert "Miso" in text and "Standup" not in text      # recall found the one memory, framed as data
    assert not status.is_error
    # the read is in the person's audit, under the grant's session
    out = ownmem_cli("agent", "audit", "--json", "--port", str(door.agent.port), env=door.agent.env)
    assert out.returncode == 0, out.stderr
    rows = [e for e in json.loads(out.stdout) if e.get("session_id") == cred.session_id]
    assert any(e["action"] == "query" and e["allowed"] for e in rows), rows


def test_the_stateless_revision_is_served_through_the_same_guard(door: Door) -> None:
    cred = door.grant(tags=["*"])
    token = door.token(cred)
    _until("the grant's session", lambda: door.post(token).status_code == 200)
    tools, (recall,) = anyio.run(_session_calls, door, token, [("saihm_recall", {"query": "standup"})], True)
    assert {t.name for t in tools.tools} == TOOLS
    assert not recall.is_error and "Standup" in recall.content[0].text and "Miso" not in recall.content[0].text
    door.creds.revoke(cred.name)
    _until("refused after revocation", lambda: door.post(token).status_code == 401, timeout=5)


def test_no_token_is_401_and_names_the_resource_metadata(door: Door) -> None:
    r = door.post(None)
    assert r.status_code == 401
    www = r.headers["www-authenticate"]
    assert www.startswith("Bearer") and \
        f'resource_metadata="{door.public}/.well-known/oauth-protected-resource/mcp"' in www
    meta = httpx.get(f"{door.public}/.well-known/oauth-protected-resource/mcp", verify=door.tls()).json()
    assert meta["resource"] == door.mcp and meta["authorization_servers"][0].rstrip("/") == door.public


@pytest.mark.parametrize("case", ["expired", "wrong_audience", "local_profile", "never_issued", "garbage",
                                  "not_yet_valid_signature"])
def test_tokens_an_attacker_could_hold_are_refused_at_mcp(door: Door, case: str) -> None:
    cred = door.grant(tags=["*"])
    good = door.token(cred)
    _until("the grant's session", lambda: door.post(good).status_code == 200)
    bad = {
        "expired": lambda: door.token(cred, issued=int(time.time()) - 7200, life=3600),
        "wrong_audience": lambda: door.token(cred, audience="https://other.example/mcp"),
        "local_profile": lambda: door.token(cred, profile="local", audience=f"http://127.0.0.1:{door.agent.port}"),
        "never_issued": lambda: door.token(cred, session_id="sess_saihm_0123456789abcdef"),
        "garbage": lambda: "om_agent_" + "A" * 43,
        # signed by another key: a forged token
        "not_yet_valid_signature": lambda: issue(AuthKey.from_seed(b"\x01" * 32), Claims(
            cred.session_id, cred.agent, int(time.time()), int(time.time()) + 600, scopes_of(cred),
            profile="remote", audience=door.mcp)),
    }[case]()
    r = door.post(bad)
    assert r.status_code == 401, (case, r.status_code, r.text)
    assert "invalid_token" in r.headers.get("www-authenticate", "") or r.json().get("error") == "invalid_token"


def test_a_remote_token_is_nothing_at_the_local_port(door: Door) -> None:
    cred = door.grant(tags=["*"])
    token = door.token(cred)
    _until("the grant's session", lambda: door.post(token).status_code == 200)
    status, body = door.agent.call("saihm_recall", {"query": "cat"}, auth=f"Bearer {token}")
    assert (status, body) == (401, {"error": "unauthenticated"})
    r = httpx.get(f"http://127.0.0.1:{door.agent.port}/v1/memory?tag=cat", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code in (401, 403) and "Miso" not in r.text


def test_revoking_the_grant_cuts_the_next_call_within_2_s(door: Door) -> None:
    cred = door.grant(tags=["*"])
    token = door.token(cred)
    _until("the grant's session", lambda: door.post(token).status_code == 200)
    door.creds.revoke(cred.name)
    took = _until("refused after revocation", lambda: door.post(token).status_code == 401, timeout=5)
    assert took < 2.0


def test_a_foreign_origin_or_host_is_403_and_tls12_is_refused(door: Door) -> None:
    cred = door.grant(tags=["*"])
    token = door.token(cred)
    _until("the grant's session", lambda: door.post(token).status_code == 200)
    assert door.post(token, headers={"Origin": "https://evil.example"}).status_code == 403
    assert door.post(token, headers={"Origin": door.public}).status_code == 200
    with httpx.Client(verify=door.tls(), timeout=10) as c:
        assert c.get(door.mcp, headers={"Host": "attacker.example"}).status_code == 403
    with pytest.raises(httpx.ConnectError), httpx.Client(verify=door.tls(ssl.TLSVersion.TLSv1_2), timeout=10) as c:
        c.get(f"{door.public}/.well-known/oauth-protected-resource/mcp")


def test_an_oversized_body_is_refused_before_it_is_read(door: Door) -> None:
    cred = door.grant(tags=["*"])
    token = door.token(cred)
    _until("the grant's session", lambda: door.post(token).status_code == 200)
    r = door.post(token, body=b"[" + b"1," * (3 << 20) + b"1]")
    assert r.status_code == 413


def test_a_read_only_grant_cannot_write_through_mcp(door: Door) -> None:
    cred = door.grant(name="reader", tags=["*"], write=False)
    token = door.token(cred)
    _until("the grant's session", lambda: door.post(token).status_code == 200)
    _, (remembered,) = anyio.run(_session_calls, door, token, [("saihm_remember", {"content": "a planted memory"})])
    assert remembered.is_error and "write_refused" in remembered.content[0].text


@pytest.mark.parametrize(("args", "says"), [
    (("--public-url", "http://memory.example.org"), "must be https"),
    (("--public-url", "https://memory.example.org"), "needs --tls-cert and --tls-key"),
    (("--public-url", "https://memory.example.org", "--tls-cert", "/nonexistent", "--tls-key", "/nonexistent"),
     "not a readable PEM certificate chain"),
    (("--public-url", "https://memory.example.org/mcp"), "no path"),
    (("--tls-key", "k.pem"), "go with --public-url"),
    (("--public-url", "http://127.0.0.1:9", "--public-bind", "nowhere"), "ADDRESS:PORT"),
])
def test_public_url_mistakes_are_refused_before_the_vault_is_unlocked(tmp_path: Path, args: tuple[str, ...],
                                                                      says: str) -> None:
    # no vault, no passphrase: the refusal comes first, never a prompt
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OWNMEM_VAULT": str(tmp_path / "none")}
    r = ownmem_cli("agent", *args, env=env)
    assert r.returncode != 0 and says in r.stderr, r.stderr
    assert "passphrase" not in r.stderr.lower()


def test_a_public_port_in_use_is_a_clear_error(door: Door, tmp_path: Path) -> None:
    # the running door's public port, asked for again by a second service on another vault
    port = int(door.public.rsplit(":", 1)[1])
    env = {**door.agent.env, "OWNMEM_VAULT": str(door.agent.folder)}
    r = ownmem_cli("agent", "--port", str(free_port()), "--public-url", f"http://127.0.0.1:{port}",
                   "--public-bind", f"127.0.0.1:{port}", env=env, timeout=120)
    assert r.returncode != 0
    assert f"the public listener cannot bind 127.0.0.1:{port}" in r.stderr, r.stderr


def test_a_grant_narrowed_after_the_token_binds_that_token_at_once(door: Door) -> None:
    cred = door.grant(name="narrowed", tags=["*"])
    token = door.token(cred)                      # issued while the grant could still write
    _until("the grant's session", lambda: door.post(token).status_code == 200)
    door.creds.narrow(cred.name, no_write=True)
    _, (remembered,) = anyio.run(_session_calls, door, token, [("saihm_remember", {"content": "after narrowing"})])
    assert remembered.is_error and "write_refused" in remembered.content[0].text, remembered.content
