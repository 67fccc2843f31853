"""Issue 22 item 3, the client's side alone: what `ownmem mcp` tells the agent of a staged remember,
of a share refused because an agent wrote the memory, and of an operator nobody runs, against an
operator the test serves over real HTTP on 127.0.0.1 whose answers it forges (the end-to-end
versions, against the real `ownmem agent`: tests/agent/test_truthful_results.py)."""
from __future__ import annotations

import pytest

from ownmem.binding.transport import Failure, Kind
from ownmem.mcp.server import Session
from tests.mcp.mcpkit import Operator, Reply, call

CID = "c" * 64
SHARE = {"granteeIdHashesHex": ["ab" * 32], "shardIds": [CID], "type": "permanent", "scope": "read"}


def test_a_staged_remember_says_so_in_the_first_line_and_the_structured_result(operator: Operator,
                                                                                session: Session) -> None:
    operator.overrides["saihm_remember"] = Reply.of({"cellId": CID, "tier": "STANDARD", "ownmemStaged": True,
                                                     "ownmemNotice": "SHARED with everyone [x]"})
    r = call(session, "saihm_remember", content="a fact")
    first, details = r.report().split("\n")
    assert first.startswith(f"REMEMBERED [{CID}], STAGED: saved, but it waits for the person's confirmation")
    assert "other agents and hosts will not see it" in first and details == "  tier STANDARD"
    assert "SHARED with everyone" not in r.report()          # the operator's own notice is never printed
    j = r.to_json()
    assert r.ok and j["outcome"] == "staged" and j["staged"] is True and j["notice"] in first


@pytest.mark.parametrize("flag", [False, "false", 0, "0", None, "yes", 2])
def test_a_remember_without_a_true_staged_flag_is_a_plain_remember(operator: Operator, session: Session,
                                                                   flag: object) -> None:
    operator.overrides["saihm_remember"] = Reply.of({"cellId": CID, "ownmemStaged": flag})
    r = call(session, "saihm_remember", content="a fact")
    assert r.report() == f"REMEMBERED [{CID}]" and r.to_json() == {"tool": "saihm_remember",
                                                                   "outcome": "remembered", "cellId": CID}


def test_a_share_refused_not_shareable_says_why_in_the_clients_words(operator: Operator, session: Session) -> None:
    operator.overrides["saihm_share"] = Reply.of({"error": "not_shareable"}, 403, reason=b"Forbidden")
    r = call(session, "saihm_share", **SHARE)
    assert not r.ok
    assert r.report() == (
        "SHARE FAILED: The operator answered HTTP 403 Forbidden (error not_shareable).\n"
        "Nothing was shared: only memories the person wrote themselves can be shared, and a listed cell was "
        "written by an agent or another author (an agent's memory stays the agent's, staged or confirmed), while a "
        "grantee verifies every shared memory against the person's own key. To share it, ask the person to add it "
        "in ownmem as their own memory and share that one.")
    # any other refusal keeps its one line
    operator.overrides["saihm_share"] = Reply.of({"error": "shard_not_found"}, 404, reason=b"Not Found")
    assert call(session, "saihm_share", **SHARE).report() == (
        "SHARE FAILED: The operator answered HTTP 404 Not Found (error shard_not_found).")


def test_an_operator_elsewhere_that_nobody_answers_for_still_names_ownmem_agent() -> None:
    # a remote https operator: the client cannot know it is `ownmem agent`, and says so conditionally
    text = Failure(Kind.NOT_DELIVERED, origin="https://memory.example.org").sentence()
    assert text == ("Could not connect to the operator; the call was not delivered. If the operator is your own "
                    "`ownmem agent`, start it with `ownmem agent` in a terminal (and keep it running), then call "
                    "again.")
    local = Failure(Kind.NOT_DELIVERED, origin="http://localhost:9374").sentence()
    assert local.startswith("ownmem agent is not running at http://localhost:9374 (nothing answers there)")
