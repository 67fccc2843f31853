"""The recall index follows every change, live: a memory another device adds, edits or erases
reaches the running agent's recall through the sync loop, with no restart (SAIHM "saihm_recall":
erased cells are omitted; DESIGN.md "Sync": live notification)."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.agent.agentkit import AgentProcess, AgentVault, issue
from tests.sync.synckit import Backend, Devices, ServerProcess


def _until(agent: AgentProcess, token: str, want: Callable[[list[dict[str, Any]]], bool],
           timeout: float = 30.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    got: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        got = agent.call("saihm_recall", {}, auth=token)[1]
        if want(got):
            return got
        time.sleep(0.2)
    raise AssertionError(f"recall never became what was expected: {got}")


def test_pulled_additions_edits_and_erasures_reach_the_running_agents_recall(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess], devices: Devices) -> None:
    srv = servers(sqlite_backend)
    v = agent_vault(srv.url, ("first note",))
    token = issue(v.env, "claude")
    agent = agents(v)
    phone = devices.join(srv.url, v.name, label="phone")
    oid = phone.v.add("the meeting is on tuesday")
    phone.sync()
    got = _until(agent, token, lambda g: len(g) == 2)
    assert {g["plaintext"] for g in got} == {"first note", "the meeting is on tuesday"}
    assert {g["ownmemTrust"] for g in got} == {"self"}
    # an edit: only the head is recalled
    phone.v.edit(oid.hex(), content="the meeting moved to wednesday")
    phone.sync()
    got = _until(agent, token, lambda g: "the meeting moved to wednesday" in {x["plaintext"] for x in g})
    assert {g["plaintext"] for g in got} == {"first note", "the meeting moved to wednesday"}
    assert agent.call("saihm_recall", {"query": "tuesday"}, auth=token) == (200, [])
    # an erasure on the phone: every version leaves the agent's recall
    phone.v.forget(oid.hex())
    phone.sync()
    got = _until(agent, token, lambda g: len(g) == 1)
    assert [g["plaintext"] for g in got] == ["first note"]
    assert agent.call("saihm_recall", {"query": "meeting"}, auth=token) == (200, [])
