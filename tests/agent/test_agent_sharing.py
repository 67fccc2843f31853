"""Sharing through the agents (issue 9 Bar "Sharing"): holder A's agent asks to share two memories
with holder B through ``saihm_share``; nothing is shared until person A confirms the staged request
(`ownmem staged confirm`, issue 19); B accepts; B's agent recalls them marked as A's (holderIdHex
A's, ownmemTrust "shared"); A's agent revokes with ``saihm_revoke_share``; B's next recall no
longer has them and the re-wrapped DEKs are gone from the server's database.  Both backends,
real processes: a blind server, two `ownmem agent`s, the CLI for B's acceptance."""
from __future__ import annotations

import re
from collections.abc import Callable

from tests.agent.agentkit import AgentProcess, AgentVault, LogReader, issue, ownmem_cli
from tests.sync.synckit import Backend, ServerProcess

HEX64 = re.compile(r"[0-9a-f]{64}")


def _keys(backend: Backend, contract_id: str | None = None) -> int:
    if contract_id is None:
        return int(backend.rows("SELECT count(*) FROM share_keys")[0][0])
    return int(backend.rows("SELECT count(*) FROM share_keys WHERE contract_id = ?",
                            (bytes.fromhex(contract_id),))[0][0])


def test_a_shares_with_b_through_the_agents_and_revokes(
        backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess]) -> None:
    srv = servers(backend)
    a = agent_vault(srv.url, ("A: the garage code is 2468", "A: the cat is fed at seven", "A: never shared"))
    b = agent_vault(srv.url, ("B: an own memory",))
    auth_a, auth_b = issue(a.env, "alice-agent"), issue(b.env, "bob-agent")
    agent_a, agent_b = agents(a), agents(b)
    _, st_a = agent_a.call("saihm_status", {}, auth=auth_a)
    _, st_b = agent_b.call("saihm_status", {}, auth=auth_b)
    a_id, b_id = st_a["agentIdHashHex"], st_b["agentIdHashHex"]
    status, mine = agent_a.call("saihm_recall", {"query": ""}, auth=auth_a)
    assert status == 200, mine
    cells = {g["plaintext"]: g["cellId"] for g in mine}
    shard_ids = [cells["A: the garage code is 2468"], cells["A: the cat is fed at seven"]]

    # the tool's refusals first: nothing is offered
    refusals: list[tuple[dict[str, object], str]] = [
        ({"scope": "write"}, "invalid_scope"), ({"type": "temporary", "expiryEpoch": "1"}, "invalid_expiry"),
        ({"granteeIdHashesHex": ["00" * 31]}, "invalid_grantee"), ({"shardIds": ["ab" * 32]}, "shard_not_found")]
    for change, code in refusals:
        params: dict[str, object] = {"granteeIdHashesHex": [b_id], "shardIds": shard_ids, "type": "permanent",
                                     "scope": "read", "expiryEpoch": None, **change}
        status, res = agent_a.call("saihm_share", params, auth=auth_a)
        assert (status, res) == (400 if code != "shard_not_found" else 404, {"error": code}), (change, status, res)
    assert _keys(backend) == 0

    # the share waits for person A (issue 19): no contract, no key on the server, B reads nothing
    share = {"granteeIdHashesHex": [b_id], "shardIds": shard_ids, "type": "permanent", "scope": "read",
             "expiryEpoch": None}
    status, made = agent_a.call("saihm_share", share, auth=auth_a)
    assert status == 200, made
    assert "contractId" not in made and made["ownmemStaged"] is True and "confirm" in made["ownmemNotice"]
    assert made["type"] == "permanent" and made["granteeCount"] == 1 and made["epoch"].isdigit()
    assert agent_a.call("saihm_share", share, auth=auth_a)[1]["ownmemRequest"] == made["ownmemRequest"]  # a retry
    assert _keys(backend) == 0
    assert agent_a.call("saihm_status", {}, auth=auth_a)[1]["contracts"] == []
    # person A confirms it in the CLI: the share is made on A's device, through vault/sharing.py
    r = ownmem_cli("staged", "confirm", made["ownmemRequest"], env=a.env)
    assert r.returncode == 0, r.stderr
    contract = re.search(r"contract ([0-9a-f]{64})", r.stdout)
    assert contract is not None, r.stdout
    cid = contract.group(1)
    assert _keys(backend, cid) == 2
    log = LogReader(srv.url)
    try:
        [entry] = log.list(subject=cid, operation="SHARE")
        assert entry["operation"] == "SHARE" and entry["subject_id"] == cid
    finally:
        log.close()
    _, st_a = agent_a.call("saihm_status", {}, auth=auth_a)
    assert st_a["contracts"] == [{"contractId": cid, "mode": "PERMANENT", "granteeIds": [b_id], "expiresAt": "0"}]

    # before B accepts: B's agent recalls only B's own
    _, got = agent_b.call("saihm_recall", {"query": ""}, auth=auth_b)
    assert [g["plaintext"] for g in got] == ["B: an own memory"]
    r = ownmem_cli("share", "accept", cid, env=b.env)
    assert r.returncode == 0, r.stderr

    _, got = agent_b.call("saihm_recall", {"query": ""}, auth=auth_b)
    shared = [g for g in got if g["holderIdHex"] == a_id]
    assert sorted(g["plaintext"] for g in shared) == ["A: the cat is fed at seven", "A: the garage code is 2468"]
    assert sorted(g["cellId"] for g in shared) == sorted(shard_ids)
    assert all(g["ownmemTrust"] == "shared" and g["ownmemAuthorship"]["authorship"] == "shared" for g in shared)
    own = [g for g in got if g["holderIdHex"] == b_id]
    assert [g["plaintext"] for g in own] == ["B: an own memory"] and own[0]["ownmemTrust"] == "self"
    _, hit = agent_b.call("saihm_recall", {"query": "garage"}, auth=auth_b)
    assert [g["cellId"] for g in hit] == [cells["A: the garage code is 2468"]]
    # B's agent cannot forget A's memory, nor revoke A's contract
    assert agent_b.call("saihm_forget", {"id": shard_ids[0]}, auth=auth_b)[0] == 403
    assert agent_b.call("saihm_revoke_share", {"contractId": cid}, auth=auth_b) == (403, {"error": "not_holder"})
    _, st_b = agent_b.call("saihm_status", {}, auth=auth_b)
    assert st_b["shards"] == {"STANDARD": 1} and st_b["contracts"] == []     # shared cells are not B's shards

    # A revokes: B's next recall has none, and the server's database holds none of the keys
    status, rv = agent_a.call("saihm_revoke_share", {"contractId": cid}, auth=auth_a)
    assert status == 200 and rv["revoked"] is True and HEX64.fullmatch(rv["receiptId"]), rv
    assert _keys(backend, cid) == 0
    _, got = agent_b.call("saihm_recall", {"query": ""}, auth=auth_b)
    assert [g["plaintext"] for g in got] == ["B: an own memory"]
    again = agent_a.call("saihm_revoke_share", {"contractId": cid}, auth=auth_a)
    assert again[0] == 200 and again[1]["revoked"] is True and again[1]["receiptId"] == rv["receiptId"]
    _, st_a = agent_a.call("saihm_status", {}, auth=auth_a)
    assert st_a["contracts"] == []
