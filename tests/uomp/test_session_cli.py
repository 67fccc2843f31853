"""`ownmem agent authorize | run | sessions | revoke | audit [prune]` against a running
`ownmem agent` (UOMP draft-00 "Local Profile": "Token Delivery")."""
from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.agent.agentkit import ownmem_cli
from tests.sync.synckit import Backend, ServerProcess
from tests.uomp.uompkit import Uomp, UompVault, code

MANIFEST = {"uomp_version": "1.0", "agent": {"id": "calendar_agent", "name": "Calendar", "version": "1.0.0"},
            "requested_scopes": {"read": {"tags": ["preference", "financial"], "keys": []}},
            "data_retention_policy": {"max_retention_seconds": 0, "deletion_method": "process_termination"}}

CHILD = """
import os, httpx
r = httpx.get(os.environ["UOMP_BASE_URL"] + "/v1/memory/preference.theme",
              headers={"Authorization": "Bearer " + os.environ["UOM_TOKEN"]})
print(r.json()["value"])
print(os.environ["UOM_TOKEN"])
"""


def test_authorize_run_sessions_revoke_audit_and_prune(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[[str], UompVault],
        agents: Callable[..., Any], tmp_path: Path) -> None:
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    agent = agents(uv.vault)
    env, port = uv.vault.env, str(agent.port)
    m = tmp_path / "uom.json"
    m.write_text(json.dumps(MANIFEST))
    u = Uomp(agent.port, uv.vault.folder)
    # without a terminal and without --yes nothing is granted
    r = ownmem_cli("agent", "authorize", str(m), "--port", port, env=env)
    assert r.returncode != 0 and "--yes" in r.stderr
    r = ownmem_cli("agent", "authorize", str(m), "--grant", "preference", "--deny", "financial", "--minutes", "5",
                   "--yes", "--port", port, env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert u.get("/v1/memory/preference.theme", out["token"]).json()["value"] == "dark"
    assert code(u.get("/v1/memory/preference.card", out["token"])) == "ACCESS_DENIED"     # --deny financial
    listed = ownmem_cli("agent", "sessions", "--json", "--port", port, env=env)
    assert out["session_id"] in {s["session_id"] for s in json.loads(listed.stdout)}
    assert ownmem_cli("agent", "revoke", out["session_id"], "--port", port, env=env).returncode == 0
    assert code(u.get("/v1/memory/preference.theme", out["token"])) == "SESSION_REVOKED"

    # run: the child reads with UOM_TOKEN from UOMP_BASE_URL; its token is revoked once it exits
    r = ownmem_cli("agent", "run", "--manifest", str(m), "--grant", "preference", "--yes", "--port", port, "--",
                   sys.executable, "-c", CHILD, env=env)
    assert r.returncode == 0, r.stderr
    value, token = r.stdout.split()
    assert value == "dark"
    assert code(u.get("/v1/memory/preference.theme", token)) == "SESSION_REVOKED"

    audit = json.loads(ownmem_cli("agent", "audit", "--session", out["session_id"], "--json", "--port", port,
                                  env=env).stdout)
    assert {e["action"] for e in audit} >= {"grant", "read", "revoked"}
    assert any(not e["allowed"] and e["key"] == "preference.card" for e in audit)
    # prune: nothing is 90 days old today; "as of 2099" is refused (issue 19: it erased everything)
    kept = ownmem_cli("agent", "audit", "prune", "--port", port, env=env)
    assert kept.returncode == 0 and kept.stdout.startswith("pruned 0 ")
    before = json.loads(ownmem_cli("agent", "audit", "--json", "--port", port, env=env).stdout)
    gone = ownmem_cli("agent", "audit", "prune", "--as-of", "2099-01-01", "--port", port, env=env)
    assert gone.returncode != 0 and "in the future" in gone.stderr
    assert json.loads(ownmem_cli("agent", "audit", "--json", "--port", port, env=env).stdout) == before


def test_audit_with_the_service_killed_shows_every_answered_read(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[[str], UompVault],
        agents: Callable[..., Any]) -> None:
    """`ownmem agent audit` on the agent's machine while its service is down (killed before it
    took its journal into audit.db): the log as the disk holds it, the journal included, each
    answered read once, and said so on stderr; the service restarted finds the same entries."""
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    agent = agents(uv.vault)
    env, port = uv.vault.env, str(agent.port)
    u = Uomp(agent.port, uv.vault.folder)
    sid, tok = u.session({"tags": ["preference"], "keys": [], "deny_tags": ["financial"], "deny_keys": []})
    for _ in range(20):
        assert u.get("/v1/memory/preference.theme", tok).status_code == 200
    assert code(u.get("/v1/memory/preference.card", tok)) == "ACCESS_DENIED"
    agent.kill()                                  # within the journal's ingest interval
    r = ownmem_cli("agent", "audit", "--session", sid, "--json", "--port", port, env=env)
    assert r.returncode == 0, r.stderr
    assert "does not answer" in r.stderr and "disk" in r.stderr
    rows = json.loads(r.stdout)
    assert len({e["id"] for e in rows}) == len(rows)
    reads = [e for e in rows if e["action"] == "read"]
    assert len(reads) == 21 and sum(not e["allowed"] for e in reads) == 1
    assert rows[0]["key"] == "preference.card"    # newest first: the last read
    text = ownmem_cli("agent", "audit", "--port", port, env=env)
    assert text.returncode == 0 and "DENIED" in text.stdout and "preference.card" in text.stdout
    agent.start()
    again = u.admin("GET", f"/v1/audit?session_id={sid}").json()["entries"]
    assert sorted(e["id"] for e in again) == sorted(e["id"] for e in rows)
