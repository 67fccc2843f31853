"""A SAIHM binding credential is a UOMP session (issue 19 item 1), attacked from the agent's side
with a real `ownmem agent` over a real blind server, and through the official MCP client where
the host's view is the point: the credential `ownmem agent connect` issues gets no
high-sensitivity item by any query, every recall is in the audit with the section 18 fields
(and says nothing of what the credential could not see), a credential scoped to one tag recalls
that tag alone, a revocation record from another device ends the credential at its next call,
a re-issued name does not inherit the old credential's staged writes, and credentials of an
older version are migrated to sessions and listed for the person to narrow."""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client, types

from ownmem.agent.published import read_published
from ownmem.uomp.control import REVOCATION
from tests.agent.agentkit import AgentProcess, credential, issue, ownmem_cli
from tests.sync.synckit import Backend, Devices, ServerProcess
from tests.uomp.uompkit import UompVault

# the high-sensitivity items of conftest.ITEMS, as put_item writes their text
HIGH = ("hunter2", "preference.secret", "user.password")
# every word an attacker knows of them: their values, keys, key parts and tags
HIGH_QUERIES = ("hunter2", "preference.secret", "preference secret", "secret", "user.password", "password",
                "pw", "user", "identity", "preference", "", "*", '"hunter2"', "hunter*")
SECTION_18 = {"id", "timestamp", "session_id", "agent_id", "action", "key", "tag", "tags", "allowed", "reason",
              "request_size", "response_size", "query_count_remaining"}


def _recall(agent: AgentProcess, auth: str, q: str) -> list[str]:
    status, got = agent.call("saihm_recall", {"query": q}, auth=auth)
    assert status == 200, got
    return [g["plaintext"] for g in got]


def _audit(agent: AgentProcess, env: dict[str, str], session: str | None = None) -> list[dict[str, Any]]:
    """The audit as the person reads it: `ownmem agent audit --json` (oldest last)."""
    extra = ("--session", session) if session else ()
    r = ownmem_cli("agent", "audit", "--json", "--port", str(agent.port), *extra, env=env)
    assert r.returncode == 0, r.stderr
    return list(json.loads(r.stdout))


def _text(r: types.CallToolResult) -> str:
    assert len(r.content) == 1 and isinstance(r.content[0], types.TextContent)
    return r.content[0].text


def test_the_credential_connect_issues_gets_no_high_item_by_any_query_through_mcp_and_every_recall_is_audited(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., AgentProcess]) -> None:
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    env = uv.vault.env
    agent = agents(uv.vault)
    r = ownmem_cli("agent", "connect", "claude", "--port", str(agent.port), env=env)
    assert r.returncode == 0, r.stderr
    # the default grant is explicit and shown
    assert "reads every tag and untagged memory (*)" in r.stderr and "high-sensitivity items never" in r.stderr
    config = json.loads(r.stdout)["mcpServers"]["ownmem"]
    cred = credential(env, "claude")
    assert cred["grant"]["tags"] == ["*"] and cred["migrated"] is False
    params = StdioServerParameters(command=config["command"], args=config["args"], env=config["env"])

    async def recall_all(s: ClientSession) -> dict[str, types.CallToolResult]:
        return {q: await s.call_tool("saihm_recall", {"query": q}) for q in HIGH_QUERIES + ("theme",)}

    async def session() -> dict[str, types.CallToolResult]:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                with anyio.fail_after(120):
                    return await recall_all(s)

    got = anyio.run(session)
    for q, res in got.items():
        assert not res.is_error, (q, _text(res))
        shown = _text(res) + json.dumps(res.structured_content)
        assert not [h for h in HIGH if h in shown], (q, shown)
    # recall itself works: the low item and the plain note are there
    assert 'preference.theme: \\"dark\\"' in json.dumps(got["theme"].structured_content)
    assert "a plain note without any uomp key" in json.dumps(got[""].structured_content)

    # every recall is in the audit, under the credential's session, with the section 18 fields,
    # and no entry counts what the credential could not see
    entries = [e for e in _audit(agent, env) if e["session_id"] == cred["session_id"] and e["action"] == "query"]
    assert sorted(e["key"] for e in entries) == sorted(HIGH_QUERIES + ("theme",))
    for e in entries:
        assert set(e) == SECTION_18 and e["agent_id"] == cred["agent_id"] and e["allowed"] is True
        assert e["response_size"] > 0 and " of " not in e["reason"]
    only_high = next(e for e in entries if e["key"] == "hunter2")
    assert only_high["reason"] == "0 memories recalled" and only_high["tags"] == []
    assert not [e for e in entries if "hunter2" in json.dumps({k: v for k, v in e.items() if k != "key"})]
    # the shards count what the credential may recall, not the high items it may not
    status, st = agent.call("saihm_status", {}, auth=config["env"]["SAIHM_AUTH_HEADER"])
    assert status == 200 and sum(st["shards"].values()) == len(_recall(agent, config["env"]["SAIHM_AUTH_HEADER"], ""))


def test_a_credential_scoped_to_one_tag_recalls_only_that_tags_memories(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., AgentProcess]) -> None:
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    env = uv.vault.env
    ui = issue(env, "ui-only", "--grant", "ui")
    prefs = issue(env, "prefs", "--grant", "preference", "--deny", "financial", "--no-write")
    everything = issue(env, "all")
    agent = agents(uv.vault)
    for q in ("", "preference", "dark", "en", "Ada", "market_value"):
        assert _recall(agent, ui, q) in ([], ['preference.theme: "dark"']), q
    assert _recall(agent, ui, "") == ['preference.theme: "dark"']
    assert sorted(_recall(agent, prefs, "")) == sorted(['preference.theme: "dark"', 'preference.lang: "en"',
                                                         "a plain note without any uomp key"])
    assert _recall(agent, prefs, "4111") == [] and _recall(agent, prefs, "card") == []

    # forget is decided by the same rules: a cell the credential cannot see is "not found" to it
    lang = agent.call("saihm_recall", {"query": "lang"}, auth=everything)[1]
    assert [c["plaintext"] for c in lang] == ['preference.lang: "en"']
    assert agent.call("saihm_forget", {"id": lang[0]["cellId"]}, auth=ui) == (200, {"success": False})
    # a credential without the write grant may not forget (nor remember) at all
    assert agent.call("saihm_forget", {"id": lang[0]["cellId"]}, auth=prefs) == (403, {"error": "write_refused"})
    assert agent.call("saihm_remember", {"content": "x"}, auth=prefs) == (403, {"error": "write_refused"})
    assert _recall(agent, everything, "lang") == ['preference.lang: "en"']      # nothing changed
    # and sharing a cell it cannot see is refused as if there were no such cell
    status, body = agent.call("saihm_share", {"granteeIds": ["ab" * 32], "shardIds": [lang[0]["cellId"]],
                                              "mode": "read", "scope": "read"}, auth=ui)
    assert (status, body) == (404, {"error": "shard_not_found"})
    refused = [e for e in _audit(agent, env, credential(env, "ui-only")["session_id"])
               if e["action"] in ("forget", "share")]
    assert [(e["action"], e["allowed"], e["reason"]) for e in refused] == [
        ("share", False, "not found within the grant"), ("forget", False, "not found within the grant")]


def test_a_credential_revoked_from_another_device_is_refused_at_its_next_call(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., AgentProcess], devices: Devices) -> None:
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    env = uv.vault.env
    claude, other = issue(env, "claude", "--grant", "preference", "--expires", "2"), issue(env, "other")
    sid, other_sid = credential(env, "claude")["session_id"], credential(env, "other")["session_id"]
    agent = agents(uv.vault)
    assert _recall(agent, claude, "dark") == ['preference.theme: "dark"']
    # the session is the service's, listed by `ownmem agent sessions`
    r = ownmem_cli("agent", "sessions", "--json", "--port", str(agent.port), env=env)
    listed = {s["session_id"]: s for s in json.loads(r.stdout)}
    assert listed[sid]["kind"] == "saihm" and listed[sid]["status"] == "active"
    assert listed[sid]["granted_scopes"]["read"]["tags"] == ["preference"]

    # another device of the person lists it (published record) with its scopes and time left
    phone = devices.join(srv.url, uv.vault.name, label="phone")
    deadline, seen = time.monotonic() + 30, None
    while seen is None and time.monotonic() < deadline:
        phone.sync()
        now = int(time.time())
        seen = next((s for s in read_published(phone.v.open_all().entries, now).sessions if s.session_id == sid),
                    None)
        time.sleep(0.2)
    assert seen is not None and seen.status == "active" and seen.doc["binding"] == "saihm"
    assert seen.doc["scopes"]["read"]["tags"] == ["preference"] and 0 < seen.doc["expires_at"] - now <= 2 * 86400

    # "Revoke now" there: an owner-signed revocation record for the session id
    phone.v.add("revoke", tags=("uomp-revocation",), extensions={REVOCATION: {"session_id": sid}})
    phone.sync()
    deadline, status = time.monotonic() + 10, 200
    while status == 200 and time.monotonic() < deadline:
        status, body = agent.call("saihm_recall", {"query": "dark"}, auth=claude)
    assert (status, body) == (401, {"error": "unauthenticated"})
    for method in ("saihm_status", "saihm_remember", "saihm_forget", "saihm_share", "saihm_revoke_share"):
        assert agent.call(method, {"content": "x", "id": "00" * 32}, auth=claude)[0] == 401, method
    # for good: the service does not grant it again, and the other credential is untouched
    time.sleep(1.5)
    assert agent.call("saihm_recall", {"query": "dark"}, auth=claude)[0] == 401
    assert _recall(agent, other, "dark") == ['preference.theme: "dark"']
    states = {s["session_id"]: s["status"] for s in
              json.loads(ownmem_cli("agent", "sessions", "--json", "--port", str(agent.port), env=env).stdout)}
    assert states[sid] == "revoked" and states[other_sid] == "active"
    # and the person's credential list on this machine says so
    assert credential(env, "claude")["session_ended"] == "revoked"
    assert "(session revoked: refused" in ownmem_cli("agent", "credential", "list", env=env).stdout
    assert credential(env, "other")["session_ended"] is None
    refused = [e for e in _audit(agent, env, sid) if e["action"] == "query" and not e["allowed"]]
    assert refused and refused[0]["agent_id"] == credential(env, "claude")["agent_id"]


def test_a_reissued_name_does_not_see_the_old_credentials_staged_writes(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., AgentProcess]) -> None:
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    env = uv.vault.env
    first = issue(env, "claude")
    first_id = credential(env, "claude")["agent_id"]
    agent = agents(uv.vault)
    status, _ = agent.call("saihm_remember", {"content": "staged by the first claude: ship the parcel"}, auth=first)
    assert status == 200
    assert _recall(agent, first, "parcel") == ["staged by the first claude: ship the parcel"]
    assert ownmem_cli("agent", "credential", "revoke", "claude", env=env).returncode == 0
    second = issue(env, "claude")
    second_id = credential(env, "claude")["agent_id"]
    assert second_id != first_id
    assert _recall(agent, second, "parcel") == []
    assert agent.call("saihm_recall", {"query": "parcel"}, auth=first)[0] == 401
    agent.stop()
    staged = json.loads(ownmem_cli("staged", "list", "--json", env=env).stdout)
    assert [(s["content"], s["agent_id"]) for s in staged] == [("staged by the first claude: ship the parcel",
                                                                first_id)]


def test_credentials_of_an_older_version_are_migrated_to_sessions_and_listed_to_narrow(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., AgentProcess]) -> None:
    from ownmem.agent.credentials import FILENAME, token_digest

    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    env = uv.vault.env
    token = "om_agent_" + "q" * 43
    # the file as the version before issue 19 wrote it
    Path(uv.vault.folder, FILENAME).write_text(json.dumps({"version": 1, "credentials": [
        {"name": "claude", "sha256": token_digest(token).hex(), "created": int(time.time()) - 60, "expires": None,
         "last_used": None}]}))
    listed = ownmem_cli("agent", "credential", "list", env=env).stdout
    assert "migrated" in listed and "ownmem agent credential narrow claude --deny TAG" in listed
    cred = credential(env, "claude")
    assert cred["migrated"] is True and cred["agent_id"] == "claude" and cred["grant"]["tags"] == ["*"]
    agent = agents(uv.vault)
    auth = f"Bearer {token}"
    # what it effectively had, minus what the Guard now forbids: high by query
    assert _recall(agent, auth, "dark") == ['preference.theme: "dark"']
    assert not [t for q in ("hunter2", "password", "") for t in _recall(agent, auth, q) if "hunter2" in t or "pw" in t]
    sessions = json.loads(ownmem_cli("agent", "sessions", "--json", "--port", str(agent.port), env=env).stdout)
    assert [s["session_id"] for s in sessions if s["kind"] == "saihm"] == [cred["session_id"]]
    # narrowed by the person: applied from the next call, and no longer listed as migrated
    r = ownmem_cli("agent", "credential", "narrow", "claude", "--deny", "preference", env=env)
    assert r.returncode == 0, r.stderr
    assert _recall(agent, auth, "dark") == []
    assert "Ada" in " ".join(_recall(agent, auth, "Ada"))
    assert credential(env, "claude")["migrated"] is False
    assert "migrated" not in ownmem_cli("agent", "credential", "list", env=env).stdout
    grants = {s["session_id"]: s["granted_scopes"]["read"] for s in
              json.loads(ownmem_cli("agent", "sessions", "--json", "--port", str(agent.port), env=env).stdout)}
    assert grants[cred["session_id"]]["deny_tags"] == ["preference"]
