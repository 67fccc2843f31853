"""Widening needs the person's proof, not a file (issue 19, Build item 3): attacked from the
agent's side.  The agent is the child of a real `ownmem agent run`; it knows the vault folder and
can read every file of the person's OS user there (uomp-admin, uomp.db, audit.db,
agent-credentials.json), but holds no passphrase.  It can grant, widen, issue and prune nothing;
the person's CLI, with the passphrase, does each."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from ownmem.agent.sessions import ADMIN_HEADER
from ownmem.uomp.approval import APPROVAL_HEADER
from tests.agent.agentkit import ownmem_cli
from tests.sync.synckit import CLI, PASSPHRASE, Backend, ServerProcess
from tests.uomp.uompkit import Uomp, UompVault, code, error_body

MANIFEST = {"uomp_version": "1.0", "agent": {"id": "calendar_agent", "name": "Calendar", "version": "1.0.0"},
            "requested_scopes": {"read": {"tags": ["preference"], "keys": []}},
            "data_retention_policy": {"max_retention_seconds": 0, "deletion_method": "process_termination"}}
WIDE = {"tags": ["preference", "identity", "financial"], "keys": ["user.password", "preference.secret"]}

# the agent: what it was given, then everything a process of the person's OS user can try with
# the vault folder's files and no passphrase
ATTACKER = r"""
import base64, hashlib, json, os, secrets, subprocess, sys
import httpx
folder, port, sid, cli, manifest = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), sys.argv[5]
out = {"env": sorted(os.environ)}
base = os.environ["UOMP_BASE_URL"]
admin = {"X-Ownmem-Admin": open(os.path.join(folder, "uomp-admin")).read().strip()}
wide = json.loads(sys.argv[6])
# the environment blocks of the processes that had the passphrase: its parent, the service
out["proc_environ"] = {}
for who, pid in (("parent", os.getppid()), ("service", int(sys.argv[7]))):
    with open(f"/proc/{pid}/environ", "rb") as f:
        out["proc_environ"][who] = f.read().decode("latin-1")

def answer(r):
    return [r.status_code, r.json()["error"]["code"] if r.status_code >= 400 else None]

out["create"] = answer(httpx.post(base + "/v1/sessions", headers=admin,
                                  json={"agent_id": "evil", "requested_scopes": {"read": wide}}))
out["grant"] = answer(httpx.post(base + f"/v1/sessions/{sid}/grant", headers=admin,
                                 json={"granted_scopes": {"read": wide}}))
out["prune"] = answer(httpx.post(base + "/v1/audit/prune", headers=admin, json={"before": 2 ** 40}))
forged = "v1.%d.%s.%s" % (__import__("time").time(), "A" * 22, "B" * 43)
out["forged_grant"] = answer(httpx.post(base + f"/v1/sessions/{sid}/grant", json={"granted_scopes": {"read": wide}},
                                        headers={**admin, "X-Ownmem-Approval": forged}))

env = dict(os.environ, OWNMEM_VAULT=folder)          # the attacker points the CLI at the vault
def run(*a):
    r = subprocess.run(cli + list(a), env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    return [r.returncode, r.stderr[-400:]]
out["cli_issue"] = run("agent", "credential", "issue", "--name", "evil")
out["cli_connect"] = run("agent", "connect", "evil2", "--port", port)
out["cli_authorize"] = run("agent", "authorize", manifest, "--grant", "identity", "--yes", "--port", port)
out["cli_prune"] = run("agent", "audit", "prune", "--port", port)   # a prune within the rules: only the proof stops it

# mint credentials by writing the file: one without a seal, one with a seal copied from the
# person's entry (it covers another entry's fields), one claiming to be a migrated entry
p = os.path.join(folder, "agent-credentials.json")
doc = json.load(open(p))
tokens = {}
for name, mac, migrated in (("forged-plain", None, False), ("forged-copied", doc["credentials"][0]["mac"], False),
                            ("forged-migrated", None, True)):
    t = "om_agent_" + base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
    e = {"name": name, "sha256": hashlib.sha256(t.encode()).hexdigest(), "created": 1, "expires": None,
         "last_used": None, "migrated": migrated}
    if mac:
        e["mac"] = mac
    doc["credentials"].append(e)
    tokens[name] = t
with open(p + ".x", "w") as f:
    json.dump(doc, f)
os.replace(p + ".x", p)
out["saihm"] = {}
for name, t in tokens.items():
    r = httpx.post(f"http://127.0.0.1:{port}/saihm", headers={"Authorization": "Bearer " + t},
                   json={"method": "saihm_status", "params": {}})
    out["saihm"][name] = [r.status_code, r.json()]
print(json.dumps(out))
"""


def _sessions(u: Uomp) -> dict[str, str]:
    return {s["session_id"]: s["status"] for s in u.admin("GET", "/v1/sessions").json()["sessions"]}


def _audit(u: Uomp) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = u.admin("GET", "/v1/audit").json()["entries"]
    return entries


def test_the_child_of_agent_run_cannot_grant_issue_or_prune_with_the_persons_files(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[[str], UompVault],
        agents: Callable[..., Any], tmp_path: Path) -> None:
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    agent = agents(uv.vault)
    folder, port = uv.vault.folder, str(agent.port)
    u = Uomp(agent.port, folder)
    # the person's environment: the passphrase and the vault (as `ownmem` reads them), a SAIHM
    # credential of their MCP host, a secret of their own, and one variable they choose to pass
    env = dict(uv.vault.env, SAIHM_AUTH_HEADER="Bearer om_agent_person", FOO_SECRET="not for agents",
               FOO_PASSED="for the agent", LC_ALL="C.UTF-8")
    assert "OWNMEM_PASSPHRASE" in env and "OWNMEM_VAULT" in env
    m = tmp_path / "uom.json"
    m.write_text(json.dumps(MANIFEST))
    # the person: a credential for their MCP host (with the passphrase), and a session created
    # for an agent but not granted yet (the one the attacker will try to widen)
    issued = ownmem_cli("agent", "credential", "issue", "--name", "claude", env=env)
    assert issued.returncode == 0, issued.stderr
    person_header = issued.stdout.strip()
    assert agent.call("saihm_status", auth=person_header)[0] == 200
    pending = u.admin("POST", "/v1/sessions", {"agent_id": "notes_agent",
                                               "requested_scopes": {"read": {"tags": ["ui"]}}})
    assert pending.status_code == 201, pending.text
    sid = pending.json()["session_id"]

    # --env cannot smuggle the vault's variables either
    refused = ownmem_cli("agent", "run", "--manifest", str(m), "--yes", "--port", port, "--env", "OWNMEM_PASSPHRASE",
                         "--", sys.executable, "-c", "pass", env=env)
    assert refused.returncode != 0 and "OWNMEM_PASSPHRASE" in refused.stderr

    r = ownmem_cli("agent", "run", "--manifest", str(m), "--grant", "preference", "--yes", "--port", port,
                   "--env", "FOO_PASSED", "--env", "PYTHONPATH", "--",
                   sys.executable, "-c", ATTACKER, str(folder), port, sid, json.dumps(CLI), str(m), json.dumps(WIDE),
                   str(agent.proc.pid), env=env, timeout=240)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])

    # 1. the child's environment: the token, the base URL, the allow-list and what the person added
    names = set(out["env"])
    assert not {n for n in names if n.startswith(("OWNMEM_", "SAIHM_"))}, names
    assert "FOO_SECRET" not in names
    assert {"UOM_TOKEN", "UOMP_BASE_URL", "FOO_PASSED", "LC_ALL", "PATH", "HOME"} <= names
    assert names <= {"UOM_TOKEN", "UOMP_BASE_URL", "FOO_PASSED", "PYTHONPATH", "PATH", "HOME", "LANG", "TERM", "TZ",
                     "TMPDIR", "USER", "LOGNAME", "SHELL"} | {n for n in names if n.startswith("LC_")}, names

    # nor in /proc/PID/environ of its parent or of the service, which it can read (same OS user)
    for who, block in out["proc_environ"].items():
        assert "PATH=" in block, who             # the attack is real: the block is readable
        assert PASSPHRASE not in block and "OWNMEM_PASSPHRASE=" not in block, who

    # 2. the admin file opens no widening route: 403, and the session stays as the person left it
    for what in ("create", "grant", "prune", "forged_grant"):
        assert out[what] == [403, "ACCESS_DENIED"], (what, out[what])
    states = _sessions(u)
    assert states[sid] == "created"
    assert not any(s["agent_id"] == "evil" for s in u.admin("GET", "/v1/sessions").json()["sessions"])
    # the CLI without the passphrase: nothing issued, authorized or pruned
    for what in ("cli_issue", "cli_connect", "cli_authorize", "cli_prune"):
        rc, err = out[what]
        assert rc != 0 and "passphrase" in err, (what, err)
    assert "pruned" not in out["cli_prune"][1]
    # 3. entries written into the file are refused by the service, each as an unknown credential
    for name, (status, body) in out["saihm"].items():
        assert (status, body) == (401, {"error": "unauthenticated"}), name
    assert agent.call("saihm_status", auth=person_header)[0] == 200       # the person's still works
    log = agent.logs()
    for name in ("forged-plain", "forged-copied", "forged-migrated"):
        assert f"agent credential '{name}' refused" in log, name
    listed = ownmem_cli("agent", "credential", "list", env=env).stdout
    assert "forged-plain" in listed and "NOT SEALED" in listed

    # shown to the person: each refused widening is in the audit, and the audit is all still there
    after = _audit(u)
    refusals = [e for e in after if e["action"] == "approval_refused"]
    assert len(refusals) == 4 and not any(e["allowed"] for e in refusals)
    assert any(e["session_id"] == sid and "grant" in e["reason"] for e in refusals)
    assert any("pruning" in e["reason"] for e in refusals)
    # the run's own grant (older than the attacker's prune of everything) is still there
    assert any(e["action"] == "grant" and e["agent_id"] == "calendar_agent" for e in after)

    # positive controls: the person's CLI with the passphrase does each
    granted = ownmem_cli("agent", "authorize", str(m), "--grant", "identity", "--yes", "--port", port, env=env)
    assert granted.returncode == 0, granted.stderr
    assert u.get("/v1/memory/user.display_name", json.loads(granted.stdout)["token"]).status_code == 200
    again = ownmem_cli("agent", "credential", "issue", "--name", "cursor", env=env)
    assert again.returncode == 0 and agent.call("saihm_status", auth=again.stdout.strip())[0] == 200
    # (the retention decides what goes: nothing here is 90 days old, so nothing is deleted, retention.py)
    pruned = ownmem_cli("agent", "audit", "prune", "--port", port, env=env)
    assert pruned.returncode == 0 and pruned.stdout.startswith("pruned 0 "), pruned.stderr


def _post(u: Uomp, path: str, raw: bytes, approval: str | None, admin: bool = True) -> httpx.Response:
    h = {"Content-Type": "application/json"}
    if admin:
        h[ADMIN_HEADER] = u.admin_secret
    if approval is not None:
        h[APPROVAL_HEADER] = approval
    return u.http.post(path, content=raw, headers=h)


def _approval(key: bytes, audience: str, path: str, raw: bytes, at: int, nonce: str = "n" * 22) -> str:
    """An approval made here from the format's definition (not with approval.sign)."""
    msg = b"\n".join([b"ownmem-uomp-approval-v1", audience.encode(), b"POST", path.encode(),
                      hashlib.sha256(raw).hexdigest().encode(), str(at).encode(), nonce.encode()])
    mac = base64.urlsafe_b64encode(hmac.new(key, msg, hashlib.sha256).digest()).rstrip(b"=").decode()
    return f"v1.{at}.{nonce}.{mac}"


def test_a_replayed_moved_stale_or_foreign_approval_is_refused_and_shown(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[[str], UompVault],
        agents: Callable[..., Any]) -> None:
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    agent = agents(uv.vault)
    u = Uomp(agent.port, uv.vault.folder)
    assert u.approval_key is not None
    create = json.dumps({"agent_id": "notes_agent", "requested_scopes": {"read": {"tags": ["ui"]}}}).encode()
    now = int(time.time())
    # the person's approval (made from the format, by hand): accepted, the admin file not needed
    first = _approval(u.approval_key, u.base, "/v1/sessions", create, now)
    made = _post(u, "/v1/sessions", create, first, admin=False)
    assert made.status_code == 201, made.text
    sid = made.json()["session_id"]
    count = len(_sessions(u))
    # replayed: refused, nothing created
    error_body(_post(u, "/v1/sessions", create, first), 403, "ACCESS_DENIED", None)
    assert len(_sessions(u)) == count
    # an approval of one body does not authorize another: the narrow grant's approval on a wide grant
    narrow = json.dumps({"granted_scopes": {"read": {"tags": ["ui"]}}}).encode()
    wide = json.dumps({"granted_scopes": {"read": WIDE}}).encode()
    grant = f"/v1/sessions/{sid}/grant"
    error_body(_post(u, grant, wide, u.approval("POST", grant, narrow)), 403, "ACCESS_DENIED", sid)
    # nor another path (another session's grant), nor another service's audience, nor long ago,
    # nor made with another key (the token-signing seed: a key of the vault, not the approval key)
    other = _post(u, "/v1/sessions", create, u.approval("POST", "/v1/sessions", create)).json()["session_id"]
    error_body(_post(u, grant, narrow, u.approval("POST", f"/v1/sessions/{other}/grant", narrow)), 403,
               "ACCESS_DENIED", sid)
    error_body(_post(u, grant, narrow, _approval(u.approval_key, "http://127.0.0.1:1", grant, narrow, now)), 403,
               "ACCESS_DENIED", sid)
    error_body(_post(u, grant, narrow, _approval(u.approval_key, u.base, grant, narrow, now - 600, "o" * 22)), 403,
               "ACCESS_DENIED", sid)
    error_body(_post(u, grant, narrow, _approval(uv.auth_seed, u.base, grant, narrow, now, "p" * 22)), 403,
               "ACCESS_DENIED", sid)
    assert _sessions(u)[sid] == "created"
    # shown to the person, each with its reason
    reasons = [e["reason"] for e in _audit(u) if e["action"] == "approval_refused"]
    assert sum("replayed" in r for r in reasons) == 1
    assert sum("does not verify" in r for r in reasons) == 4
    assert sum("time window" in r for r in reasons) == 1
    # the right approval still grants exactly what it approved
    ok = _post(u, grant, narrow, u.approval("POST", grant, narrow))
    assert ok.status_code == 200, ok.text
    assert code(u.get("/v1/memory/user.password", ok.json()["token"])) == "ACCESS_DENIED"
    assert u.get("/v1/memory/preference.theme", ok.json()["token"]).status_code == 200
