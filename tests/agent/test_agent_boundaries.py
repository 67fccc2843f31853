"""What one agent credential may reach, from the agent's side (`ownmem agent` over real HTTP in
front of a real blind server): another agent's staged write is neither recalled nor erasable
by it; the vault's control records (UOMP session revocations, confirmations of staged writes:
ownmem.uomp.control) are never recalled nor erasable; a remember's answer says the write is
staged (docs/decisions.md, SAIHM "saihm_forget", "saihm_remember")."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ownmem.uomp.control import REVOCATION
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


def test_an_agent_cannot_erase_another_agents_unconfirmed_write_and_is_told_its_own_is_staged(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess]) -> None:
    srv = servers(sqlite_backend)
    v = agent_vault(srv.url)
    claude, cursor = issue(v.env, "claude"), issue(v.env, "cursor")
    agent = agents(v)
    status, res = agent.call("saihm_remember", {"content": "the person's sister is called Ada"}, auth=claude)
    assert status == 200, res
    assert res["ownmemStaged"] is True and "confirm" in res["ownmemNotice"]
    cell = res["cellId"]
    # cursor neither sees it nor can erase it: not found, as far as its credential goes
    assert agent.call("saihm_recall", {}, auth=cursor) == (200, [])
    assert agent.call("saihm_forget", {"id": cell}, auth=cursor) == (200, {"success": False})
    assert [g["cellId"] for g in agent.call("saihm_recall", {}, auth=claude)[1]] == [cell]
    # its own agent may erase it
    status, out = agent.call("saihm_forget", {"id": cell}, auth=claude)
    assert status == 200 and out["success"] is True and out["cellId"] == cell
    assert agent.call("saihm_recall", {}, auth=claude) == (200, [])


def test_control_records_are_never_recalled_nor_erasable_by_an_agent(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess], devices: Devices) -> None:
    srv = servers(sqlite_backend)
    v = agent_vault(srv.url)
    token = issue(v.env, "claude")
    agent = agents(v)
    phone = devices.join(srv.url, v.name, label="phone")
    # owner-signed control records, as `ownmem session revoke --via-server` and `ownmem staged
    # confirm` make them, written with words an agent might search for
    revocation = phone.v.add("revoke session sess_garden", tags=("uomp-revocation",),
                             extensions={REVOCATION: {"session_id": "sess_garden", "revoked_at": 1}})
    confirmation = phone.v.add("(confirms the staged write garden)", extensions={"uomp": {"confirms": "00" * 16}})
    phone.v.add("the garden gate code is in the blue notebook")
    phone.sync()
    got = _until(agent, token, lambda g: any("blue notebook" in x["plaintext"] for x in g))
    assert [x["plaintext"] for x in got] == ["the garden gate code is in the blue notebook"]
    assert [x["plaintext"] for x in agent.call("saihm_recall", {"query": "garden session revoke confirms"},
                                               auth=token)[1]] == ["the garden gate code is in the blue notebook"]
    for oid in (revocation, confirmation):
        held = phone.v.store.cell_of(oid)
        assert held is not None
        assert agent.call("saihm_forget", {"id": held[0].hex()}, auth=token) == (200, {"success": False})
    phone.sync()
    assert {revocation, confirmation} <= phone.v.store.object_ids()      # nothing was erased
