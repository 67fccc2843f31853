"""Issue 22 item 3: what the eight tools answer is true, as an MCP host sees it (the official MCP
SDK's ClientSession over stdio, starting the real `ownmem mcp` with the configuration the real
`ownmem agent connect` printed, in front of the real `ownmem agent`):

* a remember the operator stages says so, in its text and its structured result;
* sharing a memory the agent wrote is refused with its own code and a sentence saying why
  (docs/decisions.md, "Sharing contracts");
* with `ownmem agent` not running, every tool says how to start it;
* `ownmem agent` serves a vault linked to no server (local receipts log), and a vault linked
  later publishes those receipts before it syncs;
* `ownmem agent connect` without --port names the running agent's port.
"""
from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client, types

from ownmem.agent.port import PortFile
from ownmem.binding.tools import TOOLS
from ownmem.saihm.receipt import parse_receipt
from ownmem.vault.local_receipts import LOG_NAME, PUBLISHED_NAME
from tests.agent.agentkit import AgentProcess, LogReader, agent_env, ownmem_cli
from tests.sync.synckit import Backend, ServerProcess, cli_env, free_port, ownmem

ARGS: dict[str, dict[str, Any]] = {
    "saihm_remember": {"content": "x"}, "saihm_recall": {}, "saihm_forget": {"id": "c" * 64}, "saihm_status": {},
    "saihm_share": {"granteeIdHashesHex": ["ab" * 32], "shardIds": ["c" * 64], "type": "permanent", "scope": "read"},
    "saihm_revoke_share": {"contractId": "d" * 64}, "saihm_governance_propose": {"scope": "protocol_upgrade"},
    "saihm_governance_vote": {"proposalId": "e" * 64, "approve": True}}
assert set(ARGS) == set(TOOLS)


def _text(r: types.CallToolResult) -> str:
    assert len(r.content) == 1 and isinstance(r.content[0], types.TextContent)
    return r.content[0].text


def _local_vault(tmp_path: Path, *content: str) -> tuple[Path, dict[str, str]]:
    """A vault made by `ownmem init` and never linked to any server."""
    folder = tmp_path / "vault"
    env = agent_env(folder, tmp_path)
    r = ownmem("init", env=env)
    assert r.returncode == 0, r.stderr
    for c in content:
        assert ownmem("add", c, env=env).returncode == 0
    return folder, env


def _connect(env: dict[str, str], name: str, *extra: str) -> tuple[StdioServerParameters, str, str]:
    """`ownmem agent connect NAME --grant ...`: the host's stdio parameters, its endpoint, stderr."""
    r = ownmem_cli("agent", "connect", name, *extra, env=env)
    assert r.returncode == 0, r.stderr
    config = json.loads(r.stdout)["mcpServers"]["ownmem"]
    # the MCP SDK starts the server with a minimal environment: the sources under test, when a
    # PYTHONPATH names them (a worktree sharing the venv), are passed on
    extra_env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
    params = StdioServerParameters(command=config["command"], args=config["args"],
                                   env={**config["env"], **extra_env})
    return params, config["env"]["SAIHM_ENDPOINT_URL"], r.stderr


def _mcp(params: StdioServerParameters, fn: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                with anyio.fail_after(90):
                    return await fn(s)
    return anyio.run(run)


def _local_receipts(folder: Path, name: str = LOG_NAME) -> list[tuple[str, str]]:
    """(operation, subject hex) of each receipt of the local receipts log."""
    lines = (folder / name).read_text().splitlines()
    out = []
    for line in lines:
        r = parse_receipt(bytes.fromhex(json.loads(line)["receipt"]))
        out.append((r.operation, r.subject_id.hex()))
    return out


def test_a_local_only_agent_stages_a_remember_says_so_and_refuses_to_share_it(tmp_path: Path) -> None:
    folder, env = _local_vault(tmp_path, "the person's own note about tea")
    agent = AgentProcess(folder, tmp_path).start()
    try:
        # connect without --port: the port the running agent wrote (not the default)
        running = PortFile.read(folder)
        assert running is not None and running.port == agent.port != 9374
        params, url, said = _connect(env, "claude", "--grant", "*")
        assert url == agent.url and f"runs on port {agent.port}" in said
        other, _, _ = _connect(env, "cursor", "--grant", "*")

        async def first(s: ClientSession) -> dict[str, types.CallToolResult]:
            out = {"status": await s.call_tool("saihm_status", {}),
                   "remember": await s.call_tool("saihm_remember", {"content": "the person's dog is called Biscuit"})}
            cid = out["remember"].structured_content["cellId"]
            tea = await s.call_tool("saihm_recall", {"query": "tea"})
            own = [c["cellId"] for c in tea.structured_content["cells"]]
            out["recall"] = await s.call_tool("saihm_recall", {})
            out["share_mine"] = await s.call_tool("saihm_share", {
                "granteeIdHashesHex": ["ab" * 32], "shardIds": [cid], "type": "permanent", "scope": "read"})
            out["share_persons"] = await s.call_tool("saihm_share", {
                "granteeIdHashesHex": ["ab" * 32], "shardIds": own, "type": "permanent", "scope": "read"})
            return out

        got = _mcp(params, first)
        remember = got["remember"]
        assert not remember.is_error, _text(remember)
        cid = remember.structured_content["cellId"]
        # the staged notice reaches the model: first line of the text, and the structured result
        assert _text(remember).startswith(
            f"REMEMBERED [{cid}], STAGED: saved, but it waits for the person's confirmation (in `ownmem staged` "
            "or on the Agents screen of the ownmem app). Until the person confirms it, only this agent (this "
            "credential) recalls it; other agents and hosts will not see it")
        assert remember.structured_content["outcome"] == "staged"
        assert remember.structured_content["staged"] is True
        assert "waits for the person's confirmation" in remember.structured_content["notice"]
        # served on a vault with no server: recall has the person's memory and the agent's own write
        plain = {c["plaintext"] for c in got["recall"].structured_content["cells"]}
        assert plain == {"the person's own note about tea", "the person's dog is called Biscuit"}
        # sharing the agent's own (staged) memory: refused, with its code and why, nothing staged
        share = got["share_mine"]
        assert share.is_error and share.structured_content["failure"]["code"] == "not_shareable"
        assert "(error not_shareable)" in _text(share)
        assert "only memories the person wrote themselves can be shared" in _text(share)
        # the person's own memory: a share request staged for the person, as on a linked vault
        assert not got["share_persons"].is_error and _text(got["share_persons"]).startswith("SHARE STAGED")

        # the statement is true: another agent recalls nothing of it before the person confirms
        async def recall(s: ClientSession) -> types.CallToolResult:
            return await s.call_tool("saihm_recall", {})
        before = {c["plaintext"] for c in _mcp(other, recall).structured_content["cells"]}
        assert before == {"the person's own note about tea"}
        listed = json.loads(ownmem_cli("staged", "list", "--json", env=env).stdout)
        write = [w for w in listed if w.get("content") == "the person's dog is called Biscuit"]
        assert len(write) == 1, listed
        assert ownmem_cli("staged", "confirm", write[0]["id"], env=env).returncode == 0
        after: set[str] = set()
        for _ in range(40):
            after = {c["plaintext"] for c in _mcp(other, recall).structured_content["cells"]}
            if "the person's dog is called Biscuit" in after:
                break
            anyio.run(anyio.sleep, 0.5)
        assert after == {"the person's own note about tea", "the person's dog is called Biscuit"}
        # confirmed, it is still the agent's: sharing it is refused the same way
        async def share_confirmed(s: ClientSession) -> types.CallToolResult:
            return await s.call_tool("saihm_share", {"granteeIdHashesHex": ["ab" * 32], "shardIds": [cid],
                                                     "type": "permanent", "scope": "read"})
        assert _mcp(other, share_confirmed).structured_content["failure"]["code"] == "not_shareable"

        # the receipts went to the local receipts log: a REMEMBER for each cell recalled
        ops = _local_receipts(folder)
        assert ("REMEMBER", cid) in ops
        recalled = {c["cellId"] for c in got["recall"].structured_content["cells"]}
        assert recalled <= {subject for op, subject in ops if op == "REMEMBER"}
    finally:
        agent.stop()
    # stopped: the port file is gone, and connect says the agent is not running
    assert PortFile.read(folder) is None and not PortFile.path(folder).exists()
    _, url, said = _connect(env, "later", "--grant", "*")
    assert url == "http://127.0.0.1:9374/saihm" and "ownmem agent is not running" in said


def test_every_tool_with_the_agent_stopped_says_how_to_start_it(tmp_path: Path) -> None:
    folder, env = _local_vault(tmp_path)
    params, _, _ = _connect(env, "claude", "--grant", "*", "--port", str(free_port()))   # nothing listens there

    async def every(s: ClientSession) -> dict[str, types.CallToolResult]:
        return {t: await s.call_tool(t, a) for t, a in ARGS.items()}

    got = _mcp(params, every)
    assert set(got) == set(TOOLS)
    for tool, r in got.items():
        assert r.is_error, (tool, _text(r))
        assert "ownmem agent is not running" in _text(r), (tool, _text(r))
        assert "start it with `ownmem agent` in a terminal" in _text(r), (tool, _text(r))
        assert r.structured_content["failure"]["kind"] == "not_delivered", tool


def _remember_local_only(tmp_path: Path) -> tuple[Path, dict[str, str], AgentProcess, str]:
    """A never-linked vault with one memory of the person's, its agent running, and one agent
    write through it -> (folder, env, the running agent, the write's cellId)."""
    folder, env = _local_vault(tmp_path, "written before any server")
    agent = AgentProcess(folder, tmp_path).start()
    auth = ownmem_cli("agent", "credential", "issue", "--name", "bot", env=env).stdout.strip()
    status, made = agent.call("saihm_remember", {"content": "remembered while local-only"}, auth=auth)
    assert status == 200 and made["ownmemStaged"] is True, made
    status, cells = agent.call("saihm_recall", {}, auth=auth)
    assert status == 200 and len(cells) == 2
    assert ("REMEMBER", made["cellId"]) in _local_receipts(folder)
    return folder, env, agent, str(made["cellId"])


def _published_and_seen(tmp_path: Path, folder: Path, srv: ServerProcess, name: str) -> None:
    """Every receipt of the local log is in the server's public log, and another device of the
    person, logged in to that server, has both memories."""
    for _ in range(60):
        if (folder / PUBLISHED_NAME).exists():
            break
        anyio.run(anyio.sleep, 0.5)
    assert not (folder / LOG_NAME).exists() and (folder / PUBLISHED_NAME).exists()
    log = LogReader(srv.url)
    try:
        for line in (folder / PUBLISHED_NAME).read_text().splitlines():
            rid = parse_receipt(bytes.fromhex(json.loads(line)["receipt"])).receipt_id.hex()
            assert log.get(rid) is not None, rid
    finally:
        log.close()
    penv = cli_env(tmp_path, tmp_path / "phone")
    assert ownmem("login", "--server", srv.url, "--vault-name", name, env=penv).returncode == 0
    listing: list[dict[str, Any]] = []
    for _ in range(30):        # the agent pushes from its sync loop
        assert ownmem("sync", env=penv).returncode == 0
        listing = json.loads(ownmem("list", "--json", env=penv).stdout)
        if len(listing) == 2:
            break
        anyio.run(anyio.sleep, 0.5)
    assert {m["content"] for m in listing} == {"written before any server", "remembered while local-only"}


def test_a_running_local_only_agent_joins_the_server_its_vault_is_linked_to(
        tmp_path: Path, sqlite_backend: Backend, servers: Callable[..., ServerProcess]) -> None:
    folder, env, agent, _ = _remember_local_only(tmp_path)
    try:
        srv = servers(sqlite_backend)
        name = f"join-{tmp_path.name[-8:].lower().replace('_', '-')}"
        r = ownmem("login", "--server", srv.url, "--vault-name", name, env=env)
        assert r.returncode == 0, r.stderr
        # no restart: the agent publishes its local receipts, then syncs
        _published_and_seen(tmp_path, folder, srv, name)
        assert "is now linked to" in agent.logs()
    finally:
        agent.stop()


def test_the_clis_sync_publishes_the_local_receipts_before_it_pushes(
        tmp_path: Path, sqlite_backend: Backend, servers: Callable[..., ServerProcess]) -> None:
    folder, env, agent, _ = _remember_local_only(tmp_path)
    agent.stop()
    srv = servers(sqlite_backend)
    name = f"cli-{tmp_path.name[-8:].lower().replace('_', '-')}"
    assert ownmem("login", "--server", srv.url, "--vault-name", name, env=env).returncode == 0
    r = ownmem("sync", env=env)         # the CLI, not the agent: it publishes them first too
    assert r.returncode == 0, r.stderr
    _published_and_seen(tmp_path, folder, srv, name)
