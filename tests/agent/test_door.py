"""The agent port's door, from the attacker's side (issue 19, "Strangers write nothing"):
DNS rebinding (a foreign Host), a web page's fetch (an Origin header), a slowloris on 9374
(headers and bodies that never finish), malformed text (a lone surrogate, bytes that are not
UTF-8).  Each is refused in the protocol's own error shape and changes nothing."""
from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ownmem.agent.door import foreign, parse_json
from ownmem.agent.sessions import ADMIN_FILE, ADMIN_HEADER
from tests.agent.agentkit import AgentProcess, AgentVault, issue
from tests.sync.synckit import Backend, ServerProcess

READ = {"tags": ["preference"]}
_MADE: list[AgentProcess] = []


@pytest.fixture(autouse=True)
def _stop_agents() -> Iterator[None]:
    yield
    while _MADE:
        _MADE.pop().stop()


def _start(backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
           **env: str) -> tuple[AgentVault, AgentProcess, str]:
    srv = servers(backend)
    v = agent_vault(srv.url, ("the door code is 4711",))
    cred = issue(v.env, "claude")
    agent = AgentProcess(v.folder, v.root)
    agent.env.update(env)
    _MADE.append(agent)
    return v, agent.start(), cred


def _token(agent: AgentProcess, folder: Path) -> str:
    """A token granted as the person grants one: the admin secret and the approval the
    passphrase's key makes (ownmem.uomp.approval)."""
    from ownmem.uomp.approval import APPROVAL_HEADER, APPROVAL_INFO, sign
    from ownmem.vault import Vault
    from tests.sync.synckit import PASSPHRASE

    unlocked = Vault(folder).unlock(PASSPHRASE)
    try:
        key = unlocked.purpose_key(APPROVAL_INFO)
    finally:
        unlocked.close()
    base = f"http://127.0.0.1:{agent.port}"

    def post(path: str, body: dict[str, Any]) -> Any:
        raw = json.dumps(body).encode()
        h = {ADMIN_HEADER: (folder / ADMIN_FILE).read_text().strip(), "Content-Type": "application/json",
             APPROVAL_HEADER: sign(key, base, "POST", path, raw, int(time.time()))}
        return httpx.post(base + path, content=raw, headers=h).json()

    sid = post("/v1/sessions", {"agent_id": "a", "requested_scopes": {"read": READ}})["session_id"]
    return str(post(f"/v1/sessions/{sid}/grant", {"granted_scopes": {"read": READ}})["token"])


def _settled(fn: Callable[[], Any], quiet: float = 3.0, timeout: float = 30.0) -> Any:
    end = time.monotonic() + timeout
    last, since = fn(), time.monotonic()
    while time.monotonic() < end:
        time.sleep(0.5)
        now = fn()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return now
    raise AssertionError("never settled")


def test_host_and_origin_decisions() -> None:
    ok = [(b"host", b"127.0.0.1:9374")]
    assert foreign(ok, 9374) is None
    assert foreign([(b"host", b"LOCALHOST:9374")], 9374) is None
    for bad in ([], [(b"host", b"evil.example:9374")], [(b"host", b"127.0.0.1:9375")], [(b"host", b"127.0.0.1")],
                [(b"host", b"127.0.0.1.evil.example:9374")], ok + ok):
        assert foreign(bad, 9374) is not None, bad
    for origin in (b"https://evil.example", b"null", b"http://127.0.0.1:9374"):
        assert foreign(ok + [(b"origin", origin)], 9374) is not None


def test_a_lone_surrogate_or_bytes_that_are_not_utf8_are_no_json_text() -> None:
    assert parse_json(b'{"content": "caf\\u00e9 \\ud83d\\ude00"}') == {"content": "caf\u00e9 \U0001f600"}
    for raw in (b'{"content": "\\ud800"}', b'{"\\udfff": 1}', b'[[["x\\udc00"]]]', b'{"content": "\xff\xfe"}',
                b'"\xed\xa0\x80"'):
        with pytest.raises(ValueError):
            parse_json(raw)


def test_dns_rebinding_and_a_web_pages_origin_get_403_and_nothing(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess],
        agent_vault: Callable[..., AgentVault]) -> None:
    v, agent, cred = _start(sqlite_backend, servers, agent_vault)
    tok = _token(agent, v.folder)
    base = f"http://127.0.0.1:{agent.port}"
    recall = {"method": "saihm_recall", "params": {"query": "door"}}
    uomp = {"Authorization": f"Bearer {tok}"}
    # the keys work from this port's own names
    assert httpx.post(base + "/saihm", json=recall, headers={"Authorization": cred}).status_code == 200
    for host in (f"127.0.0.1:{agent.port}", f"localhost:{agent.port}"):
        assert httpx.get(base + "/health", headers={"Host": host}).status_code == 200
    # a rebinding page: its own name, re-pointed at 127.0.0.1; or a page with an Origin
    for h in ({"Host": f"evil.example:{agent.port}"}, {"Host": f"127.0.0.1:{agent.port + 1}"},
              {"Origin": "https://evil.example"}, {"Origin": "null"}):
        r = httpx.post(base + "/saihm", json=recall, headers={"Authorization": cred, **h})
        assert (r.status_code, r.json()) == (403, {"error": "forbidden"}), h
        r = httpx.get(base + "/v1/memory/preference.theme", headers={**uomp, **h})
        assert r.status_code == 403 and r.json()["error"]["code"] == "ACCESS_DENIED", h
        assert set(r.json()["error"]) == {"code", "message", "session_id"} and "dark" not in r.text
        r = httpx.post(base + "/v1/memory/query", json={"query": "door"}, headers={**uomp, **h})
        assert r.status_code == 403 and "4711" not in r.text
        r = httpx.request("OPTIONS", base + "/saihm", headers=h)          # a CORS preflight
        assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
    # nothing of them reached the Guard: the audit holds the grant and the one recall the
    # credential made from this port's own name (every SAIHM call is audited, issue 19), no more
    admin = {ADMIN_HEADER: (v.folder / ADMIN_FILE).read_text().strip()}
    actions = [e["action"] for e in httpx.get(base + "/v1/audit", headers=admin).json()["entries"]]
    assert set(actions) == {"grant", "query"} and actions.count("query") == 1, actions


def _slow(port: int, head: bytes, drip: bytes, seconds: float) -> tuple[bytes, float]:
    """Send ``head``, then ``drip`` a byte every 0.5 s -> (what came back, when the port closed)."""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(head)
        s.settimeout(0.5)
        got = b""
        for b in drip * 1000:
            if time.monotonic() - t0 > seconds:
                break
            try:
                s.sendall(bytes([b]))
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
            except TimeoutError:
                continue
            except OSError:
                break
        return got, time.monotonic() - t0


def test_a_slowloris_on_the_agent_port_is_cut(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess],
        agent_vault: Callable[..., AgentVault]) -> None:
    _, agent, cred = _start(sqlite_backend, servers, agent_vault, OWNMEM_HEADER_TIMEOUT="2",
                            OWNMEM_BODY_TIMEOUT="2")
    # headers dripped a byte at a time: cut at the header timeout with a 408
    got, took = _slow(agent.port, b"GET /v1/memory/x HTTP/1.1\r\n", b"X-Slow: 1\r\n", 20)
    assert got.startswith(b"HTTP/1.1 408 ") and took < 6, (got, took)
    # a body that stalls: 408 in the binding's shape, and the port still serves the next request
    head = (f"POST /saihm HTTP/1.1\r\nHost: 127.0.0.1:{agent.port}\r\nAuthorization: {cred}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n").encode()
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", agent.port)) as s:
        s.sendall(head + b'{"method": "saihm_recall", "params": {"query": "')
        s.settimeout(10)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
            if got.endswith(b"}"):
                break
    assert got.startswith(b"HTTP/1.1 408 ") and got.endswith(b'{"error":"timeout"}'), got
    assert time.monotonic() - t0 < 6
    assert httpx.get(f"http://127.0.0.1:{agent.port}/health").status_code == 200


def test_a_lone_surrogate_answers_400_and_stores_nothing(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess],
        agent_vault: Callable[..., AgentVault]) -> None:
    v, agent, cred = _start(sqlite_backend, servers, agent_vault)
    tok = _token(agent, v.folder)
    def server() -> Any:
        return (sqlite_backend.rows("SELECT stored_bytes FROM vaults WHERE name = ?", (v.name,)),
                sqlite_backend.rows("SELECT count(*) FROM log"))
    before = _settled(server)        # the grant's audit batch and session record are on the server
    for raw in (b'{"method": "saihm_remember", "params": {"content": "x\\ud800y"}}',
                b'{"method": "saihm_remember", "params": {"content": "\\udfff"}}',
                b'{"method": "saihm_remember", "params": {"content": "\xff\xfe"}}',
                b'{"method": "saihm_recall", "params": {"query": "\\ud800"}}'):
        assert agent.call("x", auth=cred, raw=raw) == (400, {"error": "invalid_params"}), raw
    for raw in (b'{"query": "\\ud800"}', b'{"query": "\xc3\x28"}'):
        r = httpx.post(f"http://127.0.0.1:{agent.port}/v1/memory/query", content=raw,
                       headers={"Authorization": f"Bearer {tok}", "Content-Type": "application/json"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_REQUEST", r.text
    time.sleep(3)             # a batch tick: had anything been written, it would be on the server
    assert server() == before
