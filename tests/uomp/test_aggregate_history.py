"""Aggregation used to extract one value across a restart of `ownmem agent` (UOMP draft-00
"Aggregation Query", 19.2 "Aggregation results MUST NOT leak any individual key or value"):
the sums and averages a session was answered are kept with the session (sessions.SessionStore),
so differencing two aggregates is refused after the service process restarts, as before."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.sync.synckit import Backend, ServerProcess
from tests.uomp.uompkit import Uomp, UompVault, error_body, start

ITEMS: list[tuple[str, Any, tuple[str, ...], str]] = [
    ("fund.a", {"v": 10}, ("fund", "fund:core"), "medium"),
    ("fund.b", {"v": 20}, ("fund", "fund:core"), "medium"),
    ("fund.c", {"v": 30}, ("fund", "fund:core"), "medium"),
    ("fund.d", {"v": 40}, ("fund",), "medium"),
]
READ = {"tags": ["fund", "fund:core"]}


def test_differencing_two_aggregates_across_a_restart_is_refused(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    agent, uv, u = start(sqlite_backend, servers, uomp_vault, agents, items=ITEMS)
    sid, tok = u.session(READ, aggregation_only=True)
    other, tok2 = u.session(READ, aggregation_only=True, agent_id="budget_agent")
    r = u.get("/v1/memory/aggregate", tok, tag="fund", op="sum", field="value.v")
    assert r.json() == {"op": "sum", "field": "value.v", "result": 100}
    # the attacker restarts the service (or waits for the person to), then asks for a+b+c: 100 - 60 = d
    agent.stop()
    agent.start()
    u = Uomp(agent.port, uv.vault.folder)
    for op in ("sum", "avg"):
        e = error_body(u.get("/v1/memory/aggregate", tok, tag="fund:core", op=op, field="value.v"), 403,
                       "ACCESS_DENIED", sid)
        assert "40" not in e["message"]
    # the same set as before still answers (it tells nothing new); another agent has its own history
    assert u.get("/v1/memory/aggregate", tok, tag="fund", op="avg", field="value.v").json()["result"] == 25
    assert u.get("/v1/memory/aggregate", tok2, tag="fund:core", op="sum", field="value.v").json()["result"] == 60
    error_body(u.get("/v1/memory/aggregate", tok2, tag="fund", op="sum", field="value.v"), 403, "ACCESS_DENIED",
               other)
    # and the refusals are audited as such
    refused = [e for e in u.admin("GET", f"/v1/audit?session_id={sid}").json()["entries"]
               if e["action"] == "aggregate" and not e["allowed"]]
    assert len(refused) == 2 and all("earlier aggregates" in e["reason"] for e in refused)


def test_two_sessions_of_one_agent_cannot_difference(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    """Issue 19: one agent summed a tag in one session and the tag less one holding in another
    (5377 - 4600 gave that holding).  The history is the agent's, over all its sessions, and
    a restart of the service keeps it."""
    agent, uv, u = start(sqlite_backend, servers, uomp_vault, agents, items=ITEMS)
    first, tok = u.session(READ, aggregation_only=True, agent_id="planner")
    assert u.get("/v1/memory/aggregate", tok, tag="fund", op="sum", field="value.v").json()["result"] == 100
    second, tok2 = u.session(READ, aggregation_only=True, agent_id="planner")
    for op in ("sum", "avg"):
        e = error_body(u.get("/v1/memory/aggregate", tok2, tag="fund:core", op=op, field="value.v"), 403,
                       "ACCESS_DENIED", second)
        assert "40" not in e["message"] and "earlier aggregates" in e["message"]
    agent.stop()
    agent.start()
    u = Uomp(agent.port, uv.vault.folder)
    third, tok3 = u.session(READ, aggregation_only=True, agent_id="planner")
    error_body(u.get("/v1/memory/aggregate", tok3, tag="fund:core", op="sum", field="value.v"), 403,
               "ACCESS_DENIED", third)
    # what the agent was already told it may be told again, in any session
    assert u.get("/v1/memory/aggregate", tok3, tag="fund", op="sum", field="value.v").json()["result"] == 100
    # another agent is judged on its own history
    _, tok4 = u.session(READ, aggregation_only=True, agent_id="auditor")
    assert u.get("/v1/memory/aggregate", tok4, tag="fund:core", op="sum", field="value.v").json()["result"] == 60
