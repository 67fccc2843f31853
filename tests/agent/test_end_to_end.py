"""End to end, as a person uses it: `ownmem agent connect` prints the MCP host configuration;
an MCP host (the SDK's ClientSession over stdio) starts `ownmem mcp` with exactly that
configuration against the running `ownmem agent`; the agent remembers; another device of the
person (a CLI vault logged in to the same server) syncs and sees the memory as trusted, written
by the agent; the agent forgets it through MCP; the other device's next sync no longer has it;
the FORGET receipt is in the public log, proven included under the signed checkpoint, and
verifies under the holder key of the KEY receipt, from the public endpoints alone."""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client, types

from tests.agent.agentkit import AgentProcess, AgentVault, LogReader, ownmem_cli
from tests.sync.synckit import PASSPHRASE, Backend, Devices, ServerProcess, cli_env, ownmem


def _text(r: types.CallToolResult) -> str:
    assert len(r.content) == 1 and isinstance(r.content[0], types.TextContent)
    return r.content[0].text


def test_an_mcp_agent_remembers_another_device_sees_it_as_the_agents_then_forget_reaches_every_device(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess], devices: Devices) -> None:
    srv = servers(sqlite_backend)
    v = agent_vault(srv.url, ("the owner's own note",))
    agent = agents(v)
    r = ownmem_cli("agent", "connect", "claude", "--port", str(agent.port), env=v.env)
    assert r.returncode == 0, r.stderr
    config = json.loads(r.stdout)["mcpServers"]["ownmem"]
    assert config["env"]["SAIHM_ENDPOINT_URL"] == agent.url
    assert config["env"]["SAIHM_AUTH_HEADER"].startswith("Bearer om_agent_")
    listed = ownmem_cli("agent", "credential", "list", env=v.env)
    assert "claude" in listed.stdout and config["env"]["SAIHM_AUTH_HEADER"][7:] not in listed.stdout

    params = StdioServerParameters(command=config["command"], args=config["args"], env=config["env"])

    async def session(fn: Callable[[ClientSession], Any]) -> Any:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                with anyio.fail_after(90):
                    return await fn(s)

    async def remember(s: ClientSession) -> dict[str, types.CallToolResult]:
        return {"status": await s.call_tool("saihm_status", {}),
                "remember": await s.call_tool("saihm_remember", {"content": "the person's dog is called Biscuit"}),
                "recall": await s.call_tool("saihm_recall", {"query": "dog"})}

    got = anyio.run(session, remember)
    assert not got["remember"].is_error, _text(got["remember"])
    cid = got["remember"].structured_content["cellId"]
    assert _text(got["remember"]).startswith(f"REMEMBERED [{cid}]")
    holder = got["status"].structured_content["agentIdHashHex"]
    cells = got["recall"].structured_content["cells"]
    assert [c["cellId"] for c in cells] == [cid] and cells[0]["plaintext"] == "the person's dog is called Biscuit"
    assert cells[0]["sharedByAnotherHolder"] is False
    assert "trust=agent" in _text(got["recall"])

    # another device of the person: the CLI, logged in to the same server under the vault's name
    phone = v.root / "phone"
    env = cli_env(v.root, phone)
    assert ownmem("login", "--server", srv.url, "--vault-name", v.name, env=env).returncode == 0
    assert ownmem("sync", env=env).returncode == 0
    listing = json.loads(ownmem("list", "--json", env=env).stdout)
    mine = [m for m in listing if m["content"] == "the person's dog is called Biscuit"]
    assert len(mine) == 1 and mine[0]["trust"] == "trusted" and mine[0]["source"] == "agent"
    assert {m["content"] for m in listing} == {"the person's dog is called Biscuit", "the owner's own note"}

    async def forget(s: ClientSession) -> dict[str, types.CallToolResult]:
        return {"forget": await s.call_tool("saihm_forget", {"id": cid}),
                "recall": await s.call_tool("saihm_recall", {"query": "dog"})}

    gone = anyio.run(session, forget)
    assert _text(gone["forget"]).startswith(f"FORGOTTEN [{cid}] erased"), _text(gone["forget"])
    anchor = gone["forget"].structured_content["destructionAnchor"]
    assert _text(gone["recall"]) == "RECALL: nothing matched the query."

    assert ownmem("sync", env=env).returncode == 0
    after = json.loads(ownmem("list", "--json", env=env).stdout)
    assert [m["content"] for m in after] == ["the owner's own note"]

    # a third party, with the public endpoints only: the receipt is in the tree the log signed,
    # it is a FORGET of that cell, and the holder's key (from its KEY receipt) verifies it
    log = LogReader(srv.url)
    try:
        from ownmem.saihm.receipt import parse_receipt

        receipt = parse_receipt(log.verify(anchor, log.holder_key(holder)))
        assert receipt.operation == "FORGET" and receipt.subject_id.hex() == cid and receipt.holder_id.hex() == holder
        assert cid in {e["cell_id"] for e in log.http.get(srv.url + "/v1/erasures").json()["entries"]}
    finally:
        log.close()
    assert PASSPHRASE not in agent.logs()


def _holding(needle: bytes, *folders: Path) -> list[str]:
    """Every file under ``folders`` whose bytes hold ``needle`` (raw or as hex)."""
    hexed = needle.hex().encode()
    return sorted(str(p) for f in folders for p in f.rglob("*")
                  if p.is_file() and (needle in (b := p.read_bytes()) or hexed in b))


def test_after_an_agents_forget_no_stored_byte_of_server_devices_or_agent_holds_the_memorys_key(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess], devices: Devices) -> None:
    """SAIHM "Erasure", cryptographic erasure as ownmem states it (README, docs/decisions.md): the
    memory's DEK was random and wrapped for that one object, so once every copy of the wrapped DEK
    is gone, whoever holds every byte the server, the person's devices and the agent service
    stored cannot decrypt the ciphertext copies that remain.  Checked on the files themselves."""
    import time

    from tests.agent.agentkit import issue

    srv = servers(sqlite_backend)
    v = agent_vault(srv.url, ("the owner's own note",))
    agent = agents(v)
    auth = issue(v.env, "claude")
    status, got = agent.call("saihm_remember", {"content": "the person's locker code is 2718"}, auth=auth)
    assert status == 200, got
    oid = bytes.fromhex(got["cellNonce"])
    phone = devices.join(srv.url, v.name, label="phone")
    wrapped = (phone.v.store.get_object(oid) or pytest.fail("the phone did not get the memory")).dek_wrapped
    kept = next(o.dek_wrapped for o in phone.v.store.objects() if o.object_id != oid)
    places = (sqlite_backend.data_dir, v.folder, phone.folder)
    # positive control: the search finds the wrapped DEK on the server, in the agent's store and the phone's
    before = _holding(wrapped, *places)
    for place in places:
        assert any(h.startswith(str(place)) for h in before), (place, before)

    status, got = agent.call("saihm_forget", {"id": got["cellId"]}, auth=auth)
    assert status == 200 and got["success"] is True, got
    phone.sync()
    deadline = time.monotonic() + 30
    while _holding(wrapped, *places) and time.monotonic() < deadline:   # the server's scrub may wait a moment
        time.sleep(0.5)
    assert _holding(wrapped, *places) == []
    assert all(any(h.startswith(str(p)) for h in _holding(kept, *places)) for p in places), \
        "the search must still see the wrapped DEK of the memory that was kept"


def test_an_mcp_agent_asked_by_a_planted_memory_to_forget_and_share_the_persons_memory_is_told_it_waits(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess]) -> None:
    """Issue 19: through the real `ownmem mcp` in front of the real `ownmem agent`, the two calls a
    planted memory asks for report that nothing happened yet (not "not found", not "unconfirmed"),
    and nothing did: the memory is still recalled, no contract exists."""
    srv = servers(sqlite_backend)
    v = agent_vault(srv.url, ("the person's bank PIN hint is the cat's birthday",))
    agent = agents(v)
    r = ownmem_cli("agent", "connect", "claude", "--port", str(agent.port), env=v.env)
    assert r.returncode == 0, r.stderr
    config = json.loads(r.stdout)["mcpServers"]["ownmem"]
    # the MCP SDK starts the server with a minimal environment: the sources under test, when a
    # PYTHONPATH names them (a worktree sharing the venv), are passed on
    extra = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
    params = StdioServerParameters(command=config["command"], args=config["args"], env={**config["env"], **extra})

    async def attack(s: ClientSession) -> dict[str, types.CallToolResult]:
        recall = await s.call_tool("saihm_recall", {"query": "PIN"})
        cid = recall.structured_content["cells"][0]["cellId"]
        return {"forget": await s.call_tool("saihm_forget", {"id": cid}),
                "share": await s.call_tool("saihm_share", {"granteeIdHashesHex": ["ab" * 32], "shardIds": [cid],
                                                           "type": "permanent", "scope": "read"}),
                "status": await s.call_tool("saihm_status", {}),
                "after": await s.call_tool("saihm_recall", {"query": "PIN"})}

    async def run() -> dict[str, types.CallToolResult]:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                with anyio.fail_after(90):
                    return await attack(s)

    got = anyio.run(run)
    cid = got["after"].structured_content["cells"][0]["cellId"]
    assert not got["forget"].is_error and _text(got["forget"]).startswith(f"FORGET STAGED [{cid}]: not erased.")
    assert not got["share"].is_error and _text(got["share"]).startswith("SHARE STAGED: no contract yet.")
    assert got["status"].structured_content["contracts"] == []
    assert "PIN hint" in _text(got["after"])
