"""An agent's forget and share of the person's memory wait for the person (issue 19 build 2), from the
attacker's side: a memory planted by a web page asks the agent for saihm_forget / saihm_share, and the
agent obliges.  Real `ownmem agent` processes in front of a real blind server, the person's CLI and a
second device: nothing changes until `ownmem staged confirm`; discard leaves nothing; a request not
signed by that agent's key is shown to nobody and does nothing; the per-credential quotas hold."""
from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.agent.agentkit import AgentProcess, issue, ownmem_cli
from tests.sync.synckit import Backend, cli_env
from tests.uomp.uompkit import Uomp


def _until(what: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError("the expected state never came")


def _recalled(agent: AgentProcess, auth: str) -> dict[str, str]:
    status, got = agent.call("saihm_recall", {"limit": 100}, auth=auth)     # every cell: one page of 100
    assert status == 200, got
    return {g["cellId"]: g["plaintext"] for g in got}


def _requests(env: dict[str, str]) -> list[dict[str, Any]]:
    r = ownmem_cli("staged", "list", "--json", env=env)
    assert r.returncode == 0, r.stderr
    return [s for s in json.loads(r.stdout) if s.get("request")]


LONG_NAME = "claude-" + "x" * 57


def _request_audit(agent: AgentProcess, folder: Any) -> list[tuple[str, str, str | None]]:
    r = Uomp(agent.port, Path(folder)).admin("GET", "/v1/audit")
    assert r.status_code == 200, r.text
    return [(e["agent_id"], e["action"], e["key"]) for e in reversed(r.json()["entries"])
            if e["action"].startswith("request_")]


def _erased_on_server(url: str, cell: str) -> bool:
    import httpx

    return cell in {e["cell_id"] for e in httpx.get(url + "/v1/erasures", timeout=30).json()["entries"]}


def test_an_agents_forget_of_the_persons_memory_changes_nothing_until_the_person_confirms(
        sqlite_backend: Backend, servers: Callable[..., Any], agent_vault: Callable[..., Any],
        agents: Callable[..., AgentProcess], devices: Any) -> None:
    srv = servers(sqlite_backend)
    v = agent_vault(srv.url, ("the spare key is under the blue pot", "the owner's other note"))
    # the longest name a credential may have (64): its agent id "<name>.<id>" is longer, and still
    # names the agent of its requests (credentials.valid_agent_id, not the name rule)
    claude = issue(v.env, LONG_NAME)
    agent = agents(v)
    phone = devices.join(srv.url, v.name, label="phone")
    cells = {t: c for c, t in _recalled(agent, claude).items()}
    target = cells["the spare key is under the blue pot"]
    oid = phone.v.store.object_of_cell(bytes.fromhex(target))
    assert oid is not None

    # what a planted memory asks for: the agent calls saihm_forget on the person's memory
    status, res = agent.call("saihm_forget", {"id": target}, auth=claude)
    assert status == 200 and res["success"] is False and res["ownmemStaged"] is True, res
    assert "nothing is erased until the person confirms" in res["ownmemNotice"]
    rid = res["ownmemRequest"]
    assert agent.call("saihm_forget", {"id": target}, auth=claude)[1]["ownmemRequest"] == rid   # a retry: the same
    # nothing changed: recalled, on the phone after its sync, not erased on the server
    assert target in _recalled(agent, claude)
    phone.sync()
    assert oid in phone.v.store.object_ids() and not _erased_on_server(srv.url, target)
    # the request is no memory: the phone lists it nowhere, the agent does not recall it
    from ownmem.uomp.control import is_control

    shown = [e.opened.content for e in phone.listing().entries if not is_control(e.opened.extensions)]
    assert sorted(shown) == ["the owner's other note", "the spare key is under the blue pot"]
    assert sorted(_recalled(agent, claude).values()) == ["the owner's other note",
                                                         "the spare key is under the blue pot"]

    # the person sees what it would do, in plain words
    [req] = _requests(v.env)
    # the agent is named by its credential's own agent id: "<name>.<credential id>" (issue 19)
    assert (req["id"], req["kind"]) == (rid, "forget") and re.fullmatch(LONG_NAME + r"\.[0-9a-f]{16}", req["agent_id"])
    assert req["description"] == 'forget "the spare key is under the blue pot"'
    listed = ownmem_cli("staged", "list", env=v.env).stdout
    assert f'{rid[:12]}  claude' in listed and 'asks to forget "the spare key is under the blue pot"' in listed

    # discard: nothing happens, the request is gone (from the other devices too, after a sync)
    assert ownmem_cli("staged", "discard", rid[:12], env=v.env).returncode == 0
    assert _requests(v.env) == []
    assert ownmem_cli("staged", "confirm", rid[:12], env=v.env).returncode != 0     # gone: nothing to confirm
    assert ownmem_cli("sync", env=v.env).returncode == 0
    phone.sync()
    assert oid in phone.v.store.object_ids() and bytes.fromhex(rid) not in phone.v.store.object_ids()
    assert target in _recalled(agent, claude) and not _erased_on_server(srv.url, target)

    # asked again, and the person confirms: erased here, on the server, on the phone, for the agent
    rid2 = agent.call("saihm_forget", {"id": target}, auth=claude)[1]["ownmemRequest"]
    assert rid2 != rid and target in _recalled(agent, claude)
    r = ownmem_cli("staged", "confirm", rid2[:12], env=v.env)
    assert r.returncode == 0 and "erased 1 object" in r.stdout, r.stdout + r.stderr
    assert ownmem_cli("sync", env=v.env).returncode == 0
    assert _erased_on_server(srv.url, target)
    phone.sync()
    assert oid not in phone.v.store.object_ids()
    _until(lambda: target not in _recalled(agent, claude))
    assert _requests(v.env) == []

    # the one UOMP audit has each request, and the person's answers, with ids only
    audit = _until(lambda: (a := _request_audit(agent, v.folder)) and len(a) >= 6 and a)
    assert [(a, act) for a, act, _ in audit] == [
        (req["agent_id"], "request_attempt"), (req["agent_id"], "request_staged"),
        (req["agent_id"], "request_discarded"), (req["agent_id"], "request_attempt"),
        (req["agent_id"], "request_staged"), (req["agent_id"], "request_confirmed")]
    assert [k for _, _, k in audit] == [None, rid, rid, None, rid2, rid2]


def test_a_request_not_signed_by_that_agents_key_is_shown_to_nobody_and_does_nothing(tmp_path: Path) -> None:
    """Forged requests in the person's vault (from another key the person accepted, from the key
    of an agent the vault no longer accepts, or owner-signed claiming an agent): none is listed,
    none can be confirmed, the memory each names stays; the genuine one is listed and works."""
    import os

    from ownmem.aperto import keys as aperto_keys
    from ownmem.aperto.model import Memory
    from ownmem.crypto import run_sync
    from ownmem.usecases import authors, requests as agent_requests
    from ownmem.usecases.authors import agent_info
    from ownmem.vault import Vault

    passphrase = "agent requests: a green heron on the dock 3"
    v = Vault.create(tmp_path / "v", passphrase)
    target = v.add("the passport is in the top drawer")
    planner = run_sync(aperto_keys.signing_key(v.crypto, v.purpose_key(agent_info("planner"))))
    ghost = run_sync(aperto_keys.signing_key(v.crypto, v.purpose_key(agent_info("ghost"))))
    stranger = run_sync(aperto_keys.signing_key(v.crypto, os.urandom(32)))
    v.trust_add(planner.public)
    v.trust_add(stranger.public)
    v.trust_add(ghost.public)
    v.trust_remove(ghost.key_id)            # the person removed that agent's key

    def request(agent: str, signer: Any) -> bytes:
        ext = agent_requests.extension("forget", agent, (target,), (b"\x01" * 32,), None)
        return v._seal_into(Memory(content="(request)", created=1, tool="t", extensions=ext), v.scope("default"),
                            signer).object_id

    forged = {request("planner", stranger), request("ghost", ghost), request("planner", None)}
    genuine = request("planner", planner)
    entries = v.open_all(allow_unverified=True).entries
    assert [r.id for r in agent_requests.pending(entries, authors.AgentKeys(v))] == [genuine]
    v.close()

    env = cli_env(tmp_path, tmp_path / "v", passphrase)
    listed = ownmem_cli("staged", "list", "--json", env=env)
    assert [s["id"] for s in json.loads(listed.stdout) if s.get("request")] == [genuine.hex()]
    for f in forged:
        r = ownmem_cli("staged", "confirm", f.hex(), env=env)
        assert r.returncode != 0 and "not a staged agent write" in r.stderr, r.stdout + r.stderr
    listing = json.loads(ownmem_cli("list", "--json", env=env).stdout)
    assert [m["content"] for m in listing] == ["the passport is in the top drawer"]   # no request is listed
    # the genuine one, confirmed: the memory goes
    assert ownmem_cli("staged", "confirm", genuine.hex(), env=env).returncode == 0
    assert json.loads(ownmem_cli("list", "--json", env=env).stdout) == []


def test_a_flood_of_writes_from_one_credential_is_held_to_its_quota(
        sqlite_backend: Backend, servers: Callable[..., Any], agent_vault: Callable[..., Any],
        agents: Callable[..., AgentProcess]) -> None:
    """200 writes of 64 Ki characters as fast as one credential can send them (bounded): the
    default 30 per minute are staged, every other one answers 429 rate_limited and stores
    nothing, and the audit holds one refusal entry per minute of refusals, not one per call."""
    from ownmem.agent.quota import Limits

    srv = servers(sqlite_backend)
    v = agent_vault(srv.url)
    flood, calm = issue(v.env, "flood"), issue(v.env, "calm")
    agent = agents(v)
    big = "x" * (64 * 1024)
    began = time.monotonic()
    answers = [agent.call("saihm_remember", {"content": f"{i} {big}"}, auth=flood) for i in range(200)]
    minutes = 1 + int((time.monotonic() - began) // 60)
    ok = [a for a in answers if a[0] == 200]
    assert all(a == (429, {"error": "rate_limited"}) for a in answers if a[0] != 200), {a[0] for a in answers}
    assert Limits().writes_per_minute == 30 and 30 <= len(ok) <= 30 * minutes
    assert len(_recalled(agent, flood)) == len(ok)
    # another credential is not held by the flood's quota
    assert agent.call("saihm_remember", {"content": "a calm note"}, auth=calm)[0] == 200
    r = Uomp(agent.port, Path(v.folder)).admin("GET", "/v1/audit")
    # its writes' entries ("<name>.<credential id>"; its recalls are audited too, as "query")
    mine = [e for e in r.json()["entries"] if e["agent_id"].startswith("flood.") and e["action"].startswith("write_")]
    refusals = [e for e in mine if e["action"] == "write_refused"]
    assert 1 <= len(refusals) <= minutes and refusals[0]["reason"].startswith("rate_limited")
    assert {e["session_id"] for e in mine} == {"sess_saihm_" + mine[0]["agent_id"].split(".", 1)[1]}
    assert len(mine) == 2 * len(ok) + len(refusals)


def test_the_staged_total_of_a_credential_is_bounded_and_freed_by_an_answer(
        sqlite_backend: Backend, servers: Callable[..., Any], agent_vault: Callable[..., Any],
        agents: Callable[..., AgentProcess]) -> None:
    srv = servers(sqlite_backend)
    v = agent_vault(srv.url, ("the owner's note",))
    planner = issue(v.env, "planner")
    agent = agents(v, args=("--max-staged", "3"))
    cells = [agent.call("saihm_remember", {"content": f"note {i}"}, auth=planner)[1]["cellId"] for i in range(3)]
    assert agent.call("saihm_remember", {"content": "one too many"}, auth=planner) == (429, {"error": "quota_exceeded"})
    owner = next(c for c, t in _recalled(agent, planner).items() if t == "the owner's note")
    # a request is staged too, so it counts
    assert agent.call("saihm_forget", {"id": owner}, auth=planner) == (429, {"error": "quota_exceeded"})
    assert _requests(v.env) == []
    # withdrawing its own staged write frees a place
    assert agent.call("saihm_forget", {"id": cells[0]}, auth=planner)[1]["success"] is True
    assert agent.call("saihm_remember", {"content": "now it fits"}, auth=planner)[0] == 200
    assert "one too many" not in _recalled(agent, planner).values()


def test_the_quota_decision() -> None:
    from ownmem.agent.quota import QUOTA_EXCEEDED, RATE_LIMITED, Limits, Usage, Window, decide

    lim = Limits(writes_per_minute=2, bytes_per_minute=100, staged_count=5, staged_bytes=1000)
    assert decide(lim, Usage(1, 50, 0, 0), 50) is None

    def refused(usage: Usage, size: int) -> str | None:
        refusal = decide(lim, usage, size)
        return refusal.code if refusal is not None else None

    assert refused(Usage(2, 0, 0, 0), 1) == RATE_LIMITED
    assert refused(Usage(0, 60, 0, 0), 41) == RATE_LIMITED
    assert refused(Usage(0, 0, 5, 0), 1) == QUOTA_EXCEEDED
    assert refused(Usage(0, 0, 0, 990), 11) == QUOTA_EXCEEDED
    w = Window()
    w.add(0.0, 10)
    w.add(30.0, 20)
    assert w.counts(59.0) == (2, 30) and w.counts(60.0) == (1, 20) and w.counts(91.0) == (0, 0)


def test_what_a_request_would_do_is_described_in_one_inert_line(tmp_path: Path) -> None:
    """`ownmem staged list` and the PWA show a request as what confirming it would do; the memory's
    text may be a hostile page's: an OSC 52 clipboard write and a bidi override print inert."""
    from ownmem.usecases import requests as agent_requests
    from ownmem.usecases.requests import AgentRequest, ShareTerms
    from ownmem.vault import Vault

    v = Vault.create(tmp_path / "v", "agent requests: a red kite over the hill 9")
    try:
        oid = v.add("copy this\x1b]52;c;cm0gLXJmIH4=\x07 now\u202e\nplease")
        by_id = {e.id: e for e in v.open_all().entries}
    finally:
        v.close()
    forget = AgentRequest(b"\x02" * 16, "claude", "forget", (oid,), (b"\x01" * 32,), None, 1)
    text = agent_requests.describe(forget, by_id)
    assert text == 'forget "copy this\\u001b]52;c;cm0gLXJmIH4=\\u0007 now\\u202e please"'
    assert all(c.isprintable() for c in text)
    grantee = bytes.fromhex("ab" * 32)
    share = AgentRequest(b"\x03" * 16, "claude", "share", (oid, b"\x09" * 16), (b"\x01" * 32, b"\x04" * 32),
                         ShareTerms((grantee,), "temporary", "read", 1767225600), 1)
    assert agent_requests.describe(share, by_id).endswith(
        'please"; (no longer in this vault) with ' + "ab" * 32 + " (temporary, until 2026-01-01 00:00 UTC)")
    assert agent_requests.describe(AgentRequest(b"\x03" * 16, "claude", "share", (oid,), (b"\x01" * 32,),
                                                ShareTerms((grantee,), "permanent", "read", None), 1), by_id
                                   ).endswith("(permanent, no expiry)")


def test_a_flood_of_malformed_writes_is_held_to_the_quota_too(
        sqlite_backend: Backend, servers: Callable[..., Any], agent_vault: Callable[..., Any],
        agents: Callable[..., AgentProcess]) -> None:
    """Oversized and empty writes store nothing but each would still cost an audit attempt and
    outcome: they count against the minute like any write, so 100 of them add a bounded audit."""
    from ownmem.agent.operator import MAX_CONTENT

    srv = servers(sqlite_backend)
    v = agent_vault(srv.url)
    flood = issue(v.env, "flood")
    agent = agents(v, args=("--writes-per-minute", "5"))
    began = time.monotonic()
    bodies = [{"content": "x" * (MAX_CONTENT + 1)}, {"content": "  "}, {"content": 7}, {}]
    answers = [agent.call("saihm_remember", bodies[i % 4], auth=flood)[0] for i in range(100)]
    minutes = 1 + int((time.monotonic() - began) // 60)
    assert set(answers) <= {413, 400, 429} and 5 <= len([a for a in answers if a != 429]) <= 5 * minutes
    r = Uomp(agent.port, Path(v.folder)).admin("GET", "/v1/audit")
    mine = [e for e in r.json()["entries"] if e["agent_id"].startswith("flood.")]   # "<name>.<credential id>"
    assert len(mine) <= 2 * 5 * minutes + minutes, len(mine)
    assert _recalled(agent, flood) == {}
