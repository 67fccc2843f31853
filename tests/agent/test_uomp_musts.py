"""UOMP draft-00 MUSTs found broken by trying the running `ownmem agent` from the spec's text
(issue 22 item 4), each pinned here against the real service over HTTP and the real CLI:

  9.6 / 19.3 / 19.4  a session created through the Auth Service API takes its registered
                     manifest's terms: a valid deletion proof is accepted, a missing one recorded
  16.4               enterprise mode: no token for an unverified agent on any path; the panel
                     says "unverified publisher"
  12.7               imported created_at / updated_at kept and served back
  18.3               the 90-day retention kept by the service itself, at start and on its timer
  8.4                a validly signed token the service never issued is INVALID_TOKEN
  18.1               a refused PUT and a refused DELETE audited as two actions
"""
from __future__ import annotations

import base64
import copy
import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import base58
import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ownmem.agent.audit import AUDIT_INFO, AuditEntry, AuditLog, new_id
from ownmem.agent.retention import DAY, PRUNED_ACTION, RETENTION_DAYS, RETENTION_PERIOD_ENV
from ownmem.uomp.guard import proof_message
from ownmem.uomp.publisher import TrustList, did_key_of, did_proof_input, save_trust
from ownmem.uomp.tokens import AuthKey, Claims, iso, issue
from ownmem.vault import Vault
from tests.agent.agentkit import ownmem_cli
from tests.sync.synckit import CLI, PASSPHRASE, Backend, Devices, ServerProcess, cli_env
from tests.uomp.conftest import _close_clients, uomp_vault  # noqa: F401 - the UOMP tests' fixtures
from tests.uomp.uompkit import Uomp, UompVault, bearer, error_body, sleep_past_expiry, start

READ = {"tags": ["preference"], "keys": []}
THEME = "/v1/memory/preference.theme"


def _b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def _manifest(agent_id: str = "calendar_agent", *, proof_required: bool = False,
              method: str = "process_termination", key: Ed25519PrivateKey | None = None) -> dict[str, Any]:
    """A uom.json; with ``key``, its identity a did:key of that key, signed as 16.2 reads it."""
    d: dict[str, Any] = {
        "uomp_version": "1.0", "agent": {"id": agent_id, "name": "Calendar Assistant", "version": "1.2.0"},
        "requested_scopes": {"read": {"tags": ["preference"], "keys": []}},
        "data_retention_policy": {"max_retention_seconds": 0, "deletion_method": method,
                                  "proof_required": proof_required}}
    if key is not None:
        did = did_key_of(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))
        d["identity"] = {"did": did, "verification_methods": ["did"],
                         "proof": {"type": "Ed25519Signature2020", "created": "2026-07-12T10:00:00Z",
                                   "verificationMethod": did + "#" + did[len("did:key:"):],
                                   "proofPurpose": "assertionMethod", "proofValue": "z1"}}
        d["identity"]["proof"]["proofValue"] = "z" + base58.b58encode(key.sign(did_proof_input(d))).decode()
    return d


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def _entries(u: Uomp, sid: str | None = None) -> list[dict[str, Any]]:
    r = u.admin("GET", "/v1/audit" + (f"?session_id={sid}" if sid else ""))
    assert r.status_code == 200, r.text
    return list(r.json()["entries"])


def _sessions(u: Uomp) -> dict[str, dict[str, Any]]:
    r = u.admin("GET", "/v1/sessions")
    assert r.status_code == 200, r.text
    return {s["session_id"]: s for s in r.json()["sessions"]}


def _spec_create(u: Uomp, agent_id: str = "calendar_agent", minutes: float = 30, **extra: Any) -> Any:
    """9.1's request exactly: agent_id, agent_name, requested_scopes, duration_minutes."""
    return u.admin("POST", "/v1/sessions", {"agent_id": agent_id, "agent_name": "Calendar Assistant",
                                            "requested_scopes": {"read": READ}, "duration_minutes": minutes,
                                            **extra})


def _grant(u: Uomp, sid: str, **terms: Any) -> Any:
    return u.admin("POST", f"/v1/sessions/{sid}/grant", {"granted_scopes": {"read": READ}, **terms})


# --- 9.6 / 19.3 / 19.4 ---------------------------------------------------------------------------

def test_a_session_created_over_the_api_takes_its_registered_manifests_proof_terms(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any], tmp_path: Path) -> None:
    agent, uv, u = start(sqlite_backend, servers, uomp_vault, agents)
    ident = Ed25519PrivateKey.generate()
    m = _write(tmp_path / "cal" / "uom.json", _manifest(proof_required=True, method="secure_wipe", key=ident))
    assert ownmem_cli("agent", "register", str(m), env=uv.vault.env).returncode == 0
    # 9.1's fields only: nothing says proof_required, deletion method or identity key
    r = _spec_create(u)
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    listed = _sessions(u)[sid]
    assert listed["proof_required"] is True and listed["deletion_method"] == "secure_wipe"
    g = _grant(u, sid)
    assert g.status_code == 200, g.text
    tok = g.json()["token"]

    def proof(pid: str, **over: Any) -> dict[str, Any]:
        doc = {"deletion_proof_id": pid, "session_id": sid, "agent_id": "calendar_agent",
               "deleted_at": iso(time.time()), "memory_hash": "sha256:" + "cd" * 32,
               "fields_accessed": ["key", "value"], "method": "secure_wipe", **over}
        doc["proof_value"] = _b64(ident.sign(proof_message(doc)))
        return doc
    path = f"/v1/sessions/{sid}/deletion-proof"
    # 19.3 "method must match data_retention_policy.deletion_method": the manifest's, not the request's
    e = error_body(u.post(path, tok, proof("del_m", method="process_termination")), 403, "ACCESS_DENIED", sid)
    assert "identity key" not in e["message"]
    # 19.4: signed by the agent's registered identity key: accepted (it was "no identity key registered")
    assert u.post(path, tok, proof("del_ok")).json() == {"status": "accepted", "deletion_proof_id": "del_ok"}
    other = Ed25519PrivateKey.generate()
    forged = proof("del_other")
    forged["proof_value"] = _b64(other.sign(proof_message({k: v for k, v in forged.items() if k != "proof_value"})))
    error_body(u.post(path, tok, forged), 403, "ACCESS_DENIED", sid)
    # a create that names another identity key or method than the registered manifest's is refused
    stranger = _b64(other.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))
    before = set(_sessions(u))
    error_body(_spec_create(u, identity_key=stranger), 400, "INVALID_REQUEST", None)
    error_body(_spec_create(u, deletion_method="process_termination"), 400, "INVALID_REQUEST", None)
    error_body(_spec_create(u, proof_required="yes"), 400, "INVALID_REQUEST", None)
    assert set(_sessions(u)) == before
    # 19.4: no proof before expiry -> one deletion_proof_missing, for a session made by 9.1's fields only
    r = _spec_create(u, minutes=0.1)
    sid2 = r.json()["session_id"]
    tok2 = _grant(u, sid2).json()["token"]
    assert u.get(THEME, tok2).status_code == 200
    sleep_past_expiry(tok2)
    deadline = time.monotonic() + 15
    while "deletion_proof_missing" not in {x["action"] for x in _entries(u, sid2)}:
        assert time.monotonic() < deadline, _entries(u, sid2)
        time.sleep(0.2)
    time.sleep(1.5)
    missing = [x for x in _entries(u, sid2) if x["action"] == "deletion_proof_missing"]
    assert len(missing) == 1 and missing[0]["allowed"] is False
    # the session whose proof was given owes nothing at its close
    assert u.admin("POST", f"/v1/sessions/{sid}/close").status_code == 200
    assert "deletion_proof_missing" not in {x["action"] for x in _entries(u, sid)}
    # an agent nobody registered keeps ownmem's create fields (no manifest to take them from)
    r = _spec_create(u, agent_id="notes_agent", proof_required=True, deletion_method="ephemeral_storage")
    assert _sessions(u)[r.json()["session_id"]]["deletion_method"] == "ephemeral_storage"


# --- 16.4 ----------------------------------------------------------------------------------------

_CHILD = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text('ran')"


def _panel(args: list[str], env: dict[str, str], answer: bytes = b"n\n", timeout: float = 60) -> tuple[int, str]:
    """`ownmem agent authorize` on a terminal (a pty): its panel's text, answered ``answer``."""
    master, slave = pty.openpty()
    p = subprocess.Popen(CLI + args, stdin=slave, stdout=slave, stderr=subprocess.STDOUT, env=env)
    os.close(slave)
    out, sent, deadline = b"", False, time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            if not sent and b"Grant?" in out:
                os.write(master, answer)
                sent = True
            if p.poll() is not None and not ready:
                break
        return p.wait(timeout=10), out.decode(errors="replace")
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()


def test_enterprise_mode_gives_an_unverified_agent_no_token_on_any_path_and_the_panel_says_so(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any], tmp_path: Path) -> None:
    agent, uv, u = start(sqlite_backend, servers, uomp_vault, agents)
    env, port = uv.vault.env, str(agent.port)
    plain = _write(tmp_path / "plain" / "uom.json", _manifest())
    # not enterprise: an unverified publisher may run, and the panel says so (16.4 "MUST prompt")
    none = set(_sessions(u))
    code, text = _panel(["agent", "authorize", str(plain), "--port", port], env)
    assert code != 0 and "publisher: unverified publisher" in text and "not authorized" in text, text
    assert set(_sessions(u)) == none                       # answered no: nothing created
    r = ownmem_cli("agent", "authorize", str(plain), "--yes", "--port", port, env=env)
    assert r.returncode == 0 and "unverified publisher" in r.stderr, r.stderr
    assert ownmem_cli("agent", "register", str(plain), env=env).returncode == 0
    pending = _spec_create(u).json()["session_id"]          # created before the mode changed, not granted
    # enterprise mode: did:key verification required; nobody is on the trust list yet
    save_trust(uv.vault.folder, TrustList(enterprise_methods=("did",)))
    r = ownmem_cli("agent", "register", str(plain), env=env)
    assert r.returncode != 0 and "may not receive a token" in r.stderr
    before = set(_sessions(u))
    # the Auth Service API: create, for the registered agent and for one never registered; grant
    e = error_body(_spec_create(u), 403, "ACCESS_DENIED", None)
    assert "unverified publisher" in e["message"]
    e = error_body(_spec_create(u, agent_id="nobody_agent"), 403, "ACCESS_DENIED", None)
    assert "unverified publisher" in e["message"]
    e = error_body(_grant(u, pending), 403, "ACCESS_DENIED", pending)
    assert "unverified publisher" in e["message"]
    assert _sessions(u)[pending]["status"] == "created" and _sessions(u)[pending]["token_hash"] is None
    # the CLI: authorize --yes, and run (whose child must never start)
    r = ownmem_cli("agent", "authorize", str(plain), "--yes", "--port", port, env=env)
    assert r.returncode != 0 and "unverified publisher" in r.stderr and not r.stdout.strip()
    marker = tmp_path / "child-ran"
    r = ownmem_cli("agent", "run", "--manifest", str(plain), "--yes", "--port", port, "--",
                   sys.executable, "-c", _CHILD, str(marker), env=env)
    assert r.returncode != 0 and "unverified publisher" in r.stderr and not marker.exists()
    assert set(_sessions(u)) == before
    refused = [x for x in _entries(u) if x["action"] == "grant" and not x["allowed"]]
    assert len(refused) == 3 and all("unverified publisher" in x["reason"] for x in refused)
    # verified as the trust list demands: the same paths give a token
    key = Ed25519PrivateKey.generate()
    signed = _write(tmp_path / "signed" / "uom.json", _manifest(key=key))
    did = json.loads(signed.read_text())["identity"]["did"]
    save_trust(uv.vault.folder, TrustList(dids=(did,), enterprise_methods=("did",)))
    assert ownmem_cli("agent", "register", str(signed), env=env).returncode == 0
    r = ownmem_cli("agent", "authorize", str(signed), "--yes", "--port", port, env=env)
    assert r.returncode == 0, r.stderr
    assert u.get(THEME, json.loads(r.stdout)["token"]).json()["value"] == "dark"
    code, text = _panel(["agent", "authorize", str(signed), "--port", port], env)
    assert "publisher: verified publisher: did " + did in text and "unverified" not in text, text


# --- 12.7 ----------------------------------------------------------------------------------------

def test_imported_created_and_updated_times_are_kept_and_served_back(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any], devices: Devices, tmp_path: Path) -> None:
    agent, uv, u = start(sqlite_backend, servers, uomp_vault, agents)
    sid, tok = u.session({"tags": ["imp"], "keys": []})
    phone = devices.join(uv.vault.server_url, uv.vault.name, label="phone")
    folder = phone.folder
    assert folder is not None
    phone.v.close()
    phone.client.close()
    devices.made.remove(phone)
    env = cli_env(tmp_path, folder)
    records = [
        {"key": "imp.both", "tags": ["imp"], "sensitivity": "low", "value": 1,
         "created_at": "2019-03-04T05:06:07Z", "updated_at": "2020-01-02T03:04:05+01:00"},
        {"key": "imp.alias", "tags": ["imp"], "sensitivity": "low", "value": 2,        # 12.7's aliases
         "created": "2018-05-06T07:08:09Z", "updated": "2018-06-07T08:09:10Z"},
        {"key": "imp.created", "tags": ["imp"], "sensitivity": "low", "value": 3, "created_at": "2017-01-01"},
        {"key": "imp.none", "tags": ["imp"], "sensitivity": "low", "value": 4},
    ]
    f = _write(tmp_path / "r.json", records)  # type: ignore[arg-type]
    t0 = int(time.time())
    r = ownmem_cli("records", "import", str(f), env=env)
    assert r.returncode == 0, r.stderr
    assert ownmem_cli("sync", env=env).returncode == 0
    deadline = time.monotonic() + 20
    while len(u.get("/v1/memory", tok, tag="imp").json().get("items", [])) < 4:
        assert time.monotonic() < deadline, "the imported records never reached the agent service"
        time.sleep(0.2)
    items = {i["key"]: i for i in u.get("/v1/memory", tok, tag="imp").json()["items"]}
    assert (items["imp.both"]["created_at"], items["imp.both"]["updated_at"]) == \
        ("2019-03-04T05:06:07Z", "2020-01-02T02:04:05Z")
    assert (items["imp.alias"]["created_at"], items["imp.alias"]["updated_at"]) == \
        ("2018-05-06T07:08:09Z", "2018-06-07T08:09:10Z")
    # one stated time stands for both: the record as it was, never changed since
    assert items["imp.created"]["created_at"] == items["imp.created"]["updated_at"] == "2017-01-01T00:00:00Z"
    # none stated: the import's own time, as before
    assert items["imp.none"]["created_at"] >= iso(t0 - 1)
    # the same by key
    assert u.get("/v1/memory/imp.both", tok).json()["created_at"] == "2019-03-04T05:06:07Z"
    # an item the person edits later keeps the creation its import stated
    from ownmem.usecases.items import put_item
    v = Vault(folder).unlock(PASSPHRASE)
    try:
        put_item(v, "imp.both", 5, tags=("imp",), sensitivity="low")
    finally:
        v.close()
    assert ownmem_cli("sync", env=env).returncode == 0
    deadline = time.monotonic() + 20
    while (got := u.get("/v1/memory/imp.both", tok).json())["value"] != 5:
        assert time.monotonic() < deadline, got
        time.sleep(0.2)
    assert got["created_at"] == "2019-03-04T05:06:07Z" and got["updated_at"] >= iso(t0 - 1)


# --- 18.3 ----------------------------------------------------------------------------------------

def test_the_service_prunes_the_audit_past_its_retention_at_start_and_on_its_timer(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    agent, uv, u = start(sqlite_backend, servers, uomp_vault, agents)
    sid, tok = u.session(READ)
    assert u.get(THEME, tok).status_code == 200
    agent.stop()
    # two entries written while the service was down: one past the 90 days, one that will be in seconds
    v = Vault(uv.vault.folder).unlock(PASSPHRASE)
    key = v.purpose_key(AUDIT_INFO)
    v.close()
    now = int(time.time())
    margin = 20
    old, soon = new_id(), new_id()
    log = AuditLog(uv.vault.folder, key)
    for eid, ts in ((old, now - RETENTION_DAYS * DAY - 3600), (soon, now - RETENTION_DAYS * DAY + margin)):
        log.record(AuditEntry(eid, ts, sid, "calendar_agent", "read", "preference.lang", None, (), True,
                              "scope matched"))
    log.close()
    # nobody types `ownmem agent audit prune`: the service prunes at its start ...
    agent.env[RETENTION_PERIOD_ENV] = "1"
    agent.start()
    u = Uomp(agent.port, uv.vault.folder)
    deadline = time.monotonic() + 10
    while old in {x["id"] for x in _entries(u)}:
        assert time.monotonic() < deadline, "the service did not prune at its start"
        time.sleep(0.2)
    ids = {x["id"] for x in _entries(u)}
    assert time.time() < now + margin, "too slow to tell the start's prune from the timer's"
    assert soon in ids                                             # inside the retention: kept
    assert sum(x["action"] == "read" and x["allowed"] for x in _entries(u, sid)) == 2   # today's read, soon
    # ... and again on its timer, once the other entry is past the retention too
    deadline = time.monotonic() + margin + 15
    while soon in {x["id"] for x in _entries(u)}:
        assert time.monotonic() < deadline, "the service did not prune on its timer"
        time.sleep(0.5)
    pruned = [x for x in _entries(u) if x["action"] == PRUNED_ACTION]
    assert len(pruned) == 2 and all(x["reason"].startswith("retention: 1 entries") for x in pruned), pruned
    assert any(x["action"] == "grant" for x in _entries(u, sid))    # nothing younger went
    # a retention under the floor is not kept: the service does not start with it
    agent.stop()
    agent.env["OWNMEM_UOMP_AUDIT_RETENTION_DAYS"] = "30"
    try:
        agent.start(timeout=30)
        raise AssertionError("the service started with a 30-day retention")
    except RuntimeError as e:
        assert "90" in str(e)
    del agent.env["OWNMEM_UOMP_AUDIT_RETENTION_DAYS"]


# --- 8.4 -----------------------------------------------------------------------------------------

def test_a_validly_signed_token_never_issued_for_a_live_session_is_invalid_not_revoked(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    agent, uv, u = start(sqlite_backend, servers, uomp_vault, agents)
    sid, tok = u.session(READ)
    key = AuthKey.from_seed(uv.auth_seed)
    c = Claims.from_json(jwt.decode(tok, options={"verify_signature": False}))
    # the service's own key, the live session's id and agent, claims it would issue: never issued
    never = issue(key, replace(c, issued_at=c.issued_at - 1))
    wider = issue(key, replace(c, aggregation_only=False, max_read_queries=None,
                               scopes=replace(c.scopes, read=replace(c.scopes.read, tags=("*",)))))
    for t in (never, wider):
        assert t != tok
        e = error_body(u.get(THEME, t), 401, "INVALID_TOKEN", sid)
        assert "revoked" not in e["message"]
        v = u.http.post("/v1/tokens/validate", json={"token": t}).json()
        assert v["valid"] is False and v["error"]["code"] == "INVALID_TOKEN"
    assert _sessions(u)[sid]["status"] == "active"                 # nothing changed: the session lives
    assert u.get(THEME, tok).json()["value"] == "dark"
    # a token that was issued and then revoked still says so
    assert u.admin("POST", f"/v1/sessions/{sid}/revoke").status_code == 200
    error_body(u.get(THEME, tok), 401, "SESSION_REVOKED", sid)
    error_body(u.get(THEME, never), 401, "SESSION_REVOKED", sid)   # its session is revoked now


# --- 18.1 ----------------------------------------------------------------------------------------

def test_a_refused_put_and_a_refused_delete_are_audited_as_write_and_delete(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    agent, uv, u = start(sqlite_backend, servers, uomp_vault, agents)
    sid, tok = u.session(READ, limits={"max_write_queries": 2})
    error_body(u.http.put(THEME, json={"value": "light"}, headers=bearer(tok)), 501, "WRITE_NOT_AVAILABLE", sid)
    error_body(u.http.delete(THEME, headers=bearer(tok)), 501, "WRITE_NOT_AVAILABLE", sid)
    tried = [(x["action"], x["key"], x["allowed"]) for x in reversed(_entries(u, sid))
             if x["action"] in ("write", "delete")]
    assert tried == [("write", "preference.theme", False), ("delete", "preference.theme", False)]
    assert u.get(THEME, tok).json()["value"] == "dark"
    # both are writes to the quota, counted again from the audit after a restart
    agent.stop()
    agent.start()
    u = Uomp(agent.port, uv.vault.folder)
    error_body(u.http.delete(THEME, headers=bearer(tok)), 429, "QUOTA_EXCEEDED", sid)
    # the token reads its own audit with the same two actions
    own = [x["action"] for x in u.get("/v1/audit", tok).json()["entries"]]
    assert own.count("write") == 1 and own.count("delete") == 2


def test_manifest_helper_is_what_register_accepts(tmp_path: Path) -> None:
    """The did:key manifest of these tests verifies as 16.2 reads it (so the tests above test the
    service, not a malformed fixture)."""
    from ownmem.uomp.manifest import ManifestForged, parse_manifest
    from ownmem.uomp.publisher import verify_publisher

    key = Ed25519PrivateKey.generate()
    d = _manifest(key=key)
    status = verify_publisher(parse_manifest(json.dumps(d).encode()), TrustList(dids=(d["identity"]["did"],)))
    assert status.verified
    tampered = copy.deepcopy(d)
    tampered["data_retention_policy"]["proof_required"] = True
    try:
        verify_publisher(parse_manifest(json.dumps(tampered).encode()), TrustList())
        raise AssertionError("a tampered manifest verified")
    except ManifestForged:
        pass
    assert not verify_publisher(parse_manifest(json.dumps(_manifest()).encode()), TrustList()).verified
