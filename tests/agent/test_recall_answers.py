"""What an agent gets back from recall (issue 22): on a vault of 300 memories, a question full of
common words answers the few memories about it, never the vault; a page holds at most 10, and
the cursor the answer gives reaches the rest.  Through the official MCP SDK's ClientSession over
stdio to `ownmem mcp`, as a host connects with `ownmem agent connect`."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client, types

from tests.agent.agentkit import AgentProcess, AgentVault, issue, ownmem_cli
from tests.sync.synckit import Backend, ServerProcess

FILLER = ("the weather is nice and the train was late", "what a day it was at the office",
          "the meeting is at ten and the room is booked", "remember that the car is in the garage",
          "it is what it is, said the neighbour")


def _text(r: types.CallToolResult) -> str:
    assert len(r.content) == 1 and isinstance(r.content[0], types.TextContent)
    return r.content[0].text


def test_a_question_recalls_the_few_memories_about_it_and_pages_the_rest(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess]) -> None:
    srv = servers(sqlite_backend)
    memories = tuple(f"{FILLER[i % len(FILLER)]} ({i})" for i in range(298)) + \
        ("Our cat is called Miso", "The cat sleeps on the blue chair")
    v = agent_vault(srv.url, memories)
    agent = agents(v)
    r = ownmem_cli("agent", "connect", "claude", "--port", str(agent.port), env=v.env)
    assert r.returncode == 0, r.stderr
    config = json.loads(r.stdout)["mcpServers"]["ownmem"]
    params = StdioServerParameters(command=config["command"], args=config["args"], env=config["env"])

    async def run() -> dict[str, Any]:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                with anyio.fail_after(90):
                    out: dict[str, Any] = {"status": await s.call_tool("saihm_status", {})}
                    out["cat"] = await s.call_tool("saihm_recall", {"query": "what is the cat called"})
                    out["all"] = await s.call_tool("saihm_recall", {})
                    cursor = (out["all"].structured_content or {}).get("nextCursor")
                    out["next"] = await s.call_tool("saihm_recall", {"cursor": cursor, "limit": 100})
                    out["bad"] = await s.call_tool("saihm_recall", {"cursor": "o１"})
                    out["schema"] = {t.name: t.input_schema for t in (await s.list_tools()).tools}
                    return out
    got = anyio.run(run)

    cat = got["cat"].structured_content
    texts = [c["plaintext"] for c in cat["cells"]]
    # the answer first; the other cat memory only if it is not under the relevance floor; never the vault
    assert texts[0] == "Our cat is called Miso"
    assert set(texts) <= {"Our cat is called Miso", "The cat sleeps on the blue chair"} and "nextCursor" not in cat
    assert len(_text(got["cat"])) < 4000

    everything = got["all"].structured_content
    assert len(everything["cells"]) == 10
    assert everything["nextCursor"] == "o10"
    assert 'cursor "o10"' in _text(got["all"])
    nxt = got["next"].structured_content
    assert len(nxt["cells"]) == 100 and nxt["nextCursor"] == "o110"
    first = {c["cellId"] for c in everything["cells"]}
    assert not first & {c["cellId"] for c in nxt["cells"]}, "the next page starts where the first ended"
    # a cursor no recall handed out is refused before it is sent
    assert "cursor" in _text(got["bad"]) and not (got["bad"].structured_content or {}).get("cells")
    schema = got["schema"]["saihm_recall"]
    assert schema["properties"]["limit"]["maximum"] == 100 and "cursor" in schema["properties"]


def test_the_operator_caps_a_raw_recall_and_refuses_a_forged_cursor(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess]) -> None:
    srv = servers(sqlite_backend)
    v = agent_vault(srv.url, tuple(f"note {i} about tea" for i in range(30)))
    token = issue(v.env, "claude")
    agent = agents(v)
    status, body = agent.call("saihm_recall", {"query": "tea"}, auth=token)
    assert status == 200 and len(body) == 10 and body[-1]["ownmemNextCursor"] == "o10"
    assert all("ownmemNextCursor" not in b for b in body[:-1])
    status, body = agent.call("saihm_recall", {"query": "tea", "cursor": "o20", "limit": "5"}, auth=token)
    assert status == 200 and len(body) == 5 and body[-1]["ownmemNextCursor"] == "o25"
    status, body = agent.call("saihm_recall", {"query": "tea", "cursor": "o25"}, auth=token)
    assert status == 200 and len(body) == 5 and "ownmemNextCursor" not in body[-1]
    for bad in ({"cursor": "10"}, {"cursor": "o-1"}, {"cursor": 10}, {"limit": 0}, {"limit": 101},
                {"limit": True}, {"limit": "１"}):
        status, body = agent.call("saihm_recall", {"query": "tea", **bad}, auth=token)
        assert status == 400 and body == {"error": "invalid_params"}, (bad, status, body)
