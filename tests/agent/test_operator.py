"""The operator over real HTTP: `ownmem agent` (a subprocess) in front of a real blind server
(SAIHM "Tool surface": each tool's operator behaviour, result and error codes; "HTTPS binding";
"Order of effect and receipt"; "Receipt semantics").  SQLite backend: the receipt route's
storage is covered on both backends in test_receipts_route.py."""
from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from tests.agent.agentkit import AgentProcess, AgentVault, LogReader, issue, ownmem_cli, without_audit_batches
from tests.sync.synckit import Backend, Devices, ServerProcess

HEX64 = re.compile(r"[0-9a-f]{64}")


def _setup(sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
           agents: Callable[..., AgentProcess], content: tuple[str, ...] = ()
           ) -> tuple[ServerProcess, AgentVault, AgentProcess, str]:
    srv = servers(sqlite_backend)
    v = agent_vault(srv.url, content)
    token = issue(v.env, "claude")
    return srv, v, agents(v), token


def test_remember_writes_the_receipt_then_the_memory_and_answers_every_result_field(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess]) -> None:
    srv, v, agent, token = _setup(sqlite_backend, servers, agent_vault, agents)
    status, res = agent.call("saihm_remember", {"content": "the person prefers tea to coffee"}, auth=token)
    assert status == 200, res
    assert HEX64.fullmatch(res["cellId"]) and HEX64.fullmatch(res["receiptId"])
    assert re.fullmatch(r"[0-9a-f]{32}", res["cellNonce"]) and res["tier"] == "STANDARD" and res["kekVersion"] == 1
    assert res["epoch"].isdigit() and abs(int(res["epoch"]) - time.time()) < 120
    assert re.fullmatch(r"[0-9a-f]{16}", res["signaturePrefix"])
    log = LogReader(srv.url)
    try:
        entry = log.get(res["receiptId"])
        assert entry is not None and entry["operation"] == "REMEMBER" and entry["subject_id"] == res["cellId"]
        # a REMEMBER receipt carries no plaintext (SAIHM "Receipt semantics")
        assert b"tea" not in bytes.fromhex(entry["receipt"])
        # exactly one REMEMBER receipt for the cell: the push after it did not sign a second one
        assert len(log.list(subject=res["cellId"], operation="REMEMBER")) == 1
    finally:
        log.close()
    status, got = agent.call("saihm_recall", {"query": "tea"}, auth=token)
    assert status == 200 and [g["cellId"] for g in got] == [res["cellId"]]
    g = got[0]
    assert g["plaintext"] == "the person prefers tea to coffee" and g["cellNonce"] == res["cellNonce"]
    assert g["ownmemTrust"] == "agent" and g["ownmemAuthorship"]["authorship"] == "signed"
    assert re.fullmatch(r"[A-Za-z0-9_-]{11}", g["ownmemAuthorship"]["authorKey"])
    assert g["holderSignaturePrefix"] == res["signaturePrefix"] and g["timestamp"] == res["epoch"]
    status, st = agent.call("saihm_status", {}, auth=token)
    assert status == 200 and st["agentIdHashHex"] == g["holderIdHex"] and st["custody"] == "custodial"
    assert st["shards"] == {"STANDARD": 1} and st["contracts"] == []
    assert "bfsi" not in st and "bfsi_M" not in st


def test_empty_or_white_space_content_is_refused_and_nothing_is_logged(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess]) -> None:
    srv, v, agent, token = _setup(sqlite_backend, servers, agent_vault, agents)
    without_audit_batches(agent)       # the refusals are audited; their batch would be a REMEMBER too
    log = LogReader(srv.url)
    try:
        before = len(log.list(operation="REMEMBER"))
        for content in ("", "   ", "\n\t "):
            assert agent.call("saihm_remember", {"content": content}, auth=token) == (400, {"error": "empty_content"})
        assert agent.call("saihm_remember", {"content": 42}, auth=token) == (400, {"error": "invalid_params"})
        assert agent.call("saihm_remember", {}, auth=token) == (400, {"error": "invalid_params"})
        assert len(log.list(operation="REMEMBER")) == before
    finally:
        log.close()
    assert agent.call("saihm_recall", {}, auth=token) == (200, [])


def test_recall_is_ranked_and_an_empty_query_is_every_cell(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess]) -> None:
    own = ("the garden has three apple trees", "apple pie recipe: apple apple apple, butter, flour",
           "the car is blue")
    srv, v, agent, token = _setup(sqlite_backend, servers, agent_vault, agents, own)
    # every recall is audited (issue 19), and an audit batch is anchored as a receipt of its own
    # (the credential's session grant, at the service's start, is one): no batch during the
    # test, whose receipt assertions are about the reads themselves
    without_audit_batches(agent)
    log = LogReader(srv.url)
    try:
        holder = agent.call("saihm_status", {}, auth=token)[1]["agentIdHashHex"]
        anchored = log.list(operation="RECALL", holder=holder)
    finally:
        log.close()
    status, every = agent.call("saihm_recall", {}, auth=token)
    assert status == 200 and sorted(e["plaintext"] for e in every) == sorted(own)
    assert {e["ownmemTrust"] for e in every} == {"self"}
    assert agent.call("saihm_recall", {"query": ""}, auth=token)[1] == every
    status, apples = agent.call("saihm_recall", {"query": "apple"}, auth=token)
    # BM25: the memory that says "apple" most, in the fewest words, first; the car does not match
    assert [e["plaintext"] for e in apples] == [own[1], own[0]]
    # words, not substrings, with prefixes: "appl" finds both; nothing matches "zebra"
    assert len(agent.call("saihm_recall", {"query": "appl"}, auth=token)[1]) == 2
    assert agent.call("saihm_recall", {"query": "zebra"}, auth=token) == (200, [])
    # FTS5 syntax in a query is data, never an operator or an error
    for q in ('"', 'NEAR(apple', "apple*", "-car", "apple OR", "(", "tree AND NOT"):
        s, got = agent.call("saihm_recall", {"query": q}, auth=token)
        assert s == 200 and isinstance(got, list), (q, got)
    # punctuation only: containment, the baseline
    assert agent.call("saihm_recall", {"query": ":"}, auth=token)[1][0]["plaintext"] == own[1]
    # reads write no receipt (docs/decisions.md, "RECALL and STATUS write no receipt")
    status, st = agent.call("saihm_status", {}, auth=token)
    assert status == 200
    log = LogReader(srv.url)
    try:
        # this holder's (the backend is the module's: other tests' audit batches are anchored as RECALL)
        holder = st["agentIdHashHex"]
        assert log.list(operation="RECALL", holder=holder) == anchored
        assert log.list(operation="STATUS", holder=holder) == []
    finally:
        log.close()


def test_forget_withdraws_then_logs_the_receipt_and_a_repeat_answers_success_false(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess]) -> None:
    # the agent's own write, still staged: erased at once (the person's own memory would wait for
    # the person: tests/agent/test_agent_requests.py)
    srv, v, agent, token = _setup(sqlite_backend, servers, agent_vault, agents, ())
    assert agent.call("saihm_remember", {"content": "to be forgotten"}, auth=token)[0] == 200
    cell = agent.call("saihm_recall", {}, auth=token)[1][0]
    status, res = agent.call("saihm_forget", {"id": cell["cellId"]}, auth=token)
    assert status == 200 and res["success"] is True and res["cellId"] == cell["cellId"]
    assert HEX64.fullmatch(res["destructionAnchor"]) and res["epoch"].isdigit()
    assert agent.call("saihm_recall", {}, auth=token) == (200, [])
    assert agent.call("saihm_forget", {"id": cell["cellId"]}, auth=token) == (200, {"success": False})
    for unknown in ("0" * 64, "not a cell id", "AB" * 32):
        assert agent.call("saihm_forget", {"id": unknown}, auth=token) == (200, {"success": False})
    log = LogReader(srv.url)
    try:
        entry = log.get(res["destructionAnchor"])
        assert entry is not None and entry["operation"] == "FORGET" and entry["subject_id"] == cell["cellId"]
        erased = log.http.get(srv.url + "/v1/erasures").json()["entries"]
        assert cell["cellId"] in {e["cell_id"] for e in erased}
        # the repeat wrote no second receipt (SAIHM "Receipt semantics")
        assert len(log.list(subject=cell["cellId"], operation="FORGET")) == 1
    finally:
        log.close()


def test_governance_is_disabled_sharing_is_not_enabled_and_unknown_methods_refused(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess]) -> None:
    srv, v, agent, token = _setup(sqlite_backend, servers, agent_vault, agents)
    for m in ("saihm_governance_propose", "saihm_governance_vote"):
        assert agent.call(m, {"scope": "emission_param"}, auth=token) == (403, {"error": "governance_disabled"})
    assert agent.call("saihm_delete_everything", {}, auth=token) == (400, {"error": "unknown_method"})
    assert agent.call("x", auth=token, raw=b"not json") == (400, {"error": "invalid_params"})
    assert agent.call("x", auth=token, raw=b'{"method": "saihm_recall", "params": [1]}') == (
        400, {"error": "invalid_params"})
    # params absent or null: as {} (the binding's leniency); a recall of everything
    assert agent.call("x", auth=token, raw=b'{"method": "saihm_recall"}') == (200, [])
    assert agent.call("x", auth=token, raw=b'{"method": "saihm_recall", "params": null}') == (200, [])
    assert agent.call("x", auth=token, raw=b'{"method": "saihm_status", "params": {}}')[0] == 200
    big = b'{"method": "saihm_remember", "params": {"content": "' + b"a" * (3 << 20) + b'"}}'
    assert agent.call("x", auth=token, raw=big) == (413, {"error": "request_too_large"})


def test_credentials_missing_wrong_expired_and_revoked_are_unauthenticated(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess]) -> None:
    srv, v, agent, token = _setup(sqlite_backend, servers, agent_vault, agents)
    unauth = (401, {"error": "unauthenticated"})
    assert agent.call("saihm_status", auth=None) == unauth
    assert agent.call("saihm_status", auth=token + "x") == unauth
    assert agent.call("saihm_status", auth=token.replace("Bearer ", "Basic ")) == unauth
    assert agent.call("saihm_status", auth="Bearer " + "A" * 2000) == unauth
    # an expired credential (issued with a lifetime already over) fails like an unknown one
    expired = issue(v.env, "old", "--expires", "0.00001")
    time.sleep(1.2)
    assert agent.call("saihm_status", auth=expired) == unauth
    # revocation takes effect on the running service, no restart
    other = issue(v.env, "cursor")
    assert agent.call("saihm_status", auth=other)[0] == 200
    r = ownmem_cli("agent", "credential", "revoke", "cursor", env=v.env)
    assert r.returncode == 0, r.stderr
    assert agent.call("saihm_status", auth=other) == unauth
    assert agent.call("saihm_status", auth=token)[0] == 200
    listed = ownmem_cli("agent", "credential", "list", "--json", env=v.env)
    import json
    rows = {c["name"]: c for c in json.loads(listed.stdout)}
    assert set(rows) == {"claude", "old"} and rows["old"]["expired"] is True
    assert rows["claude"]["last_used"] is not None and rows["old"]["last_used"] is None
    # the file holds hashes only, readable by the owner only
    f = v.folder / "agent-credentials.json"
    assert (f.stat().st_mode & 0o777) == 0o600
    assert token.split()[1] not in f.read_text()
    assert ownmem_cli("agent", "credential", "issue", "--name", "claude", env=v.env).returncode != 0
    assert ownmem_cli("agent", "credential", "issue", "--name", "Bad Name", env=v.env).returncode != 0


def test_the_service_refuses_any_bind_address_but_loopback(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        devices: Devices) -> None:
    srv = servers(sqlite_backend)
    v = agent_vault(srv.url)
    for host in ("0.0.0.0", "::", "192.168.1.10", "localhost", "::1"):
        r = ownmem_cli("agent", "--host", host, "--port", "9", env=v.env)
        assert r.returncode != 0 and "listens on 127.0.0.1 only" in r.stderr, (host, r.stderr)


def test_an_agent_whose_author_key_the_person_revoked_cannot_write_again(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess]) -> None:
    import base64

    srv, v, agent, token = _setup(sqlite_backend, servers, agent_vault, agents)
    status, res = agent.call("saihm_remember", {"content": "first, while trusted"}, auth=token)
    assert status == 200
    key = agent.call("saihm_recall", {}, auth=token)[1][0]["ownmemAuthorship"]["authorKey"]
    kid = base64.urlsafe_b64decode(key + "=").hex()
    r = ownmem_cli("trust", "remove", kid, env=v.env)
    assert r.returncode == 0, r.stderr
    # the service does not lift the person's revocation by writing under the key again
    assert agent.call("saihm_remember", {"content": "again"}, auth=token) == (401, {"error": "unauthenticated"})
    # and what the key wrote now reads as unverified (trust is derived at read time)
    got = agent.call("saihm_recall", {}, auth=token)[1]
    assert [g["ownmemTrust"] for g in got] == ["unverified"] and got[0]["ownmemAuthorship"]["authorKey"] is None


def test_the_passphrase_can_come_from_the_os_keyring_when_the_person_opts_in(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        tmp_path: Path) -> None:
    from tests.agent.agentkit import AgentProcess as Agent

    srv = servers(sqlite_backend)
    v = agent_vault(srv.url)
    token = issue(v.env, "claude")
    ring = tmp_path / "keyring.json"
    extra = {"PYTHON_KEYRING_BACKEND": "filekeyring.FileKeyring", "OWNMEM_TEST_KEYRING_FILE": str(ring),
             "PYTHONPATH": str(Path(__file__).resolve().parent)}
    # without --keyring the keyring is never touched
    plain = Agent(v.folder, v.root)
    plain.env.update(extra)
    plain.start()
    plain.stop()
    assert not ring.exists()
    # the first unlock with the passphrase keeps it in the keyring ...
    first = Agent(v.folder, v.root, args=("--keyring",))
    first.env.update(extra)
    first.start()
    assert first.call("saihm_status", auth=token)[0] == 200
    first.stop()
    assert ring.exists()
    # ... and a later start needs nothing else
    later = Agent(v.folder, v.root, port=first.port, args=("--keyring",))
    later.env.update(extra)
    del later.env["OWNMEM_PASSPHRASE"]
    later.start()
    try:
        assert later.call("saihm_status", auth=token)[0] == 200
    finally:
        later.stop()
    # no passphrase anywhere and no keyring: a clean refusal, not a hang or a traceback
    r = ownmem_cli("agent", "--port", "9", env={k: x for k, x in v.env.items() if k != "OWNMEM_PASSPHRASE"})
    assert r.returncode != 0 and "no passphrase" in r.stderr


def test_a_cell_that_fails_its_checks_is_omitted_from_recall(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess]) -> None:
    """SAIHM "saihm_recall": verify each cell's cellId and signature; omit (and log) one that
    fails.  The device store is altered under the service: a forged signature, a cell moved onto
    another object's ciphertext."""
    import sqlite3

    from ownmem.crypto import cbor

    srv = servers(sqlite_backend)
    v = agent_vault(srv.url, ("honest", "forged signature", "moved ciphertext"))
    token = issue(v.env, "claude")
    with sqlite3.connect(v.folder / "vault.db") as db:
        rows = db.execute("SELECT c.object_id, c.cell, o.sealed"
                          " FROM cells c JOIN objects o USING (object_id)").fetchall()
        assert len(rows) == 3
        (a, ca), (b, cb), (c, cc) = [(oid, cbor.decode(cell)) for oid, cell, _ in rows]
        sig = bytearray(cb[7])
        sig[100] ^= 1
        cb[7] = bytes(sig)
        cc[6] = ca[6]           # another object's sealed bytes under this cell
        db.execute("UPDATE cells SET cell = ? WHERE object_id = ?", (cbor.encode(cb), b))
        db.execute("UPDATE cells SET cell = ? WHERE object_id = ?", (cbor.encode(cc), c))
    agent = agents(v)
    got = agent.call("saihm_recall", {}, auth=token)[1]
    assert [g["cellId"] for g in got] == [ca[1].hex()]
    assert "omitted from recall" in agent.logs()
