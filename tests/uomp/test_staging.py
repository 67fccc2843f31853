"""Staged agent writes end to end (uomp-draft-00 11.3, 20.4): a real `ownmem agent` over a real
server; the writing agent recalls its staged write, another agent does not; a high-sensitivity
write is refused; every attempt is audited; the person lists, confirms and discards through the
CLI, and a confirmation reaches the agent service through sync."""
from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "agent"))
sys.path.insert(0, str(HERE.parent / "sync"))

from agentkit import AgentProcess, issue, ownmem_cli  # noqa: E402

from ownmem.uomp.staging import read_write_audit  # noqa: E402


def _agent_fixtures() -> Any:
    """tests/agent/conftest.py under another name: its server, vault and agent fixtures are this module's."""
    spec = importlib.util.spec_from_file_location("uomp_agent_conftest", HERE.parent / "agent" / "conftest.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod           # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


_a = _agent_fixtures()
backend, sqlite_backend, servers, devices = _a.backend, _a.sqlite_backend, _a.servers, _a.devices
agent_vault, agents = _a.agent_vault, _a.agents


def _recall(agent: AgentProcess, auth: str, q: str) -> list[str]:
    status, got = agent.call("saihm_recall", {"query": q}, auth=auth)
    assert status == 200, got
    return [g["plaintext"] for g in got]


def _staged(env: dict[str, str]) -> list[dict]:
    r = ownmem_cli("staged", "list", "--json", env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_staged_writes_are_the_writers_alone_until_the_person_confirms_or_discards(
        sqlite_backend, servers: Callable[..., Any], agent_vault: Callable[..., Any],
        agents: Callable[..., AgentProcess]) -> None:
    srv = servers(sqlite_backend)
    v = agent_vault(srv.url, ("the owner's own note about tea",))
    planner, other = issue(v.env, "planner"), issue(v.env, "other")
    agent = agents(v)

    status, res = agent.call("saihm_remember", {"content": "the person likes green tea"}, auth=planner)
    assert status == 200 and res["receiptId"], res
    status, _ = agent.call("saihm_remember", {"content": "the person dislikes tea bags"}, auth=planner)
    assert status == 200
    # a high-sensitivity write is refused (11.3) and nothing is stored
    status, body = agent.call("saihm_remember", {"content": "the person's PIN", "sensitivity": "high"}, auth=planner)
    assert status == 403 and body == {"error": "write_refused"}

    assert set(_recall(agent, planner, "tea")) == {"the owner's own note about tea", "the person likes green tea",
                                                   "the person dislikes tea bags"}
    assert _recall(agent, other, "tea") == ["the owner's own note about tea"]

    audit = read_write_audit(v.folder)
    assert [(a["agent_id"], a["outcome"]) for a in audit] == [("planner", "staged"), ("planner", "staged"),
                                                              ("planner", "refused")]
    agent.stop()

    staged = _staged(v.env)
    assert sorted(s["content"] for s in staged) == ["the person dislikes tea bags", "the person likes green tea"]
    assert all(s["trust"] == "trusted" and s["agent_id"] == "planner" and s["source"] == "agent" for s in staged)
    likes = next(s for s in staged if s["content"] == "the person likes green tea")
    bags = next(s for s in staged if "bags" in s["content"])
    # the owner's own memory is no staged write
    own = [m for m in json.loads(ownmem_cli("list", "--json", env=v.env).stdout) if m["trust"] == "self"]
    assert ownmem_cli("staged", "confirm", own[0]["id"], env=v.env).returncode != 0

    assert ownmem_cli("staged", "confirm", likes["id"][:12], env=v.env).returncode == 0
    assert ownmem_cli("staged", "discard", bags["id"][:12], env=v.env).returncode == 0
    assert _staged(v.env) == []
    # confirming twice is refused: it waits for no one any more
    assert ownmem_cli("staged", "confirm", likes["id"][:12], env=v.env).returncode != 0
    r = ownmem_cli("sync", env=v.env)
    assert r.returncode == 0, r.stderr

    agent = agents(v)
    assert sorted(_recall(agent, other, "tea")) == ["the owner's own note about tea", "the person likes green tea"]
    # the confirmation record is bookkeeping: no agent recalls it
    assert not [t for t in _recall(agent, planner, "") if t.startswith("(confirms")]
    # confirmed, the memory is still the agent's: trusted, never self
    mine = {m["content"]: m for m in json.loads(ownmem_cli("list", "--json", env=v.env).stdout)}
    assert mine["the person likes green tea"]["trust"] == "trusted"
    assert "the person dislikes tea bags" not in mine
