"""Agent credentials and sessions after a key change (issue 24 item 8; agent/keychange.py): what
was issued before a passphrase change, or the key change that ends a device removal, is revoked,
never silently kept.  The rule on its own, the revocation over a real session store and
credentials file (with its audit sentence), and end to end: an agent credential issued before
`ownmem passphrase change` is refused by the running service right after it."""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx

from ownmem.agent.credentials import CredentialFile
from ownmem.agent.guarded import session_for
from ownmem.agent.keychange import REASON, end_stale, issued_before, stale
from ownmem.agent.sessions import Session, SessionStore
from ownmem.uomp.tokens import Scopes
from tests.agent.agentkit import AgentProcess, AgentVault, issue, ownmem_cli
from tests.sync.synckit import Backend, ServerProcess

NEW = "agent tests: the passphrase after the lost phone 31"


def test_the_rule_revokes_only_what_was_issued_before_the_change() -> None:
    assert not issued_before(100, 0)            # no key change ever: nothing is revoked
    assert issued_before(99, 100)
    assert not issued_before(100, 100)          # the second of the change: the agent reconnecting
    assert not issued_before(101, 100)


def _uomp(sid: str, created: int, status: str = "active") -> Session:
    return Session(sid, "agent", "an agent", status, created, created + 3600, None, Scopes(), Scopes(),
                   f"sha256:{sid}")


def test_stale_names_credentials_and_live_sessions_from_before(tmp_path: Path) -> None:
    creds = CredentialFile(tmp_path, key=b"k" * 32)
    old = creds.issue("old-agent", 1000).credential
    new = creds.issue("new-agent", 3000).credential
    sessions = [_uomp("before", 1500), _uomp("after", 2500), _uomp("closed-before", 1500, "closed")]
    got = stale(creds.all(), sessions, 2000)
    assert [c.name for c in got.credentials] == [old.name]
    assert [s.session_id for s in got.sessions] == ["before"]
    assert new.name not in {c.name for c in got.credentials}


def test_end_stale_revokes_ends_blacklists_and_says_why(tmp_path: Path) -> None:
    creds = CredentialFile(tmp_path, key=b"k" * 32)
    old = creds.issue("old-agent", 1000).credential
    creds.issue("new-agent", 3000)
    store = SessionStore(tmp_path)
    try:
        store.put(session_for(old))
        store.put(_uomp("uomp-before", 1500))
        store.put(_uomp("uomp-after", 2500))
        said: list[tuple[str, str]] = []
        end_stale(store, creds, 2000, 2001, lambda s, why: said.append((s.session_id, why)))
        assert sorted(said) == sorted([(old.session_id, REASON), ("uomp-before", REASON)])
        assert {c.name for c in creds.all()} == {"new-agent"}
        before, after = store.get("uomp-before"), store.get("uomp-after")
        assert before is not None and before.status == "revoked" and store.blacklisted("sha256:uomp-before")
        assert after is not None and after.status == "active" and not store.blacklisted("sha256:uomp-after")
    finally:
        store.close()


def test_an_agent_credential_from_before_a_passphrase_change_is_refused_after_it(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess],
        agent_vault: Callable[..., AgentVault]) -> None:
    srv = servers(sqlite_backend)
    v = agent_vault(srv.url, ("the door code is 4711",))
    cred = issue(v.env, "claude")
    agent = AgentProcess(v.folder, v.root)
    agent.start()
    try:
        recall = {"method": "saihm_recall", "params": {"query": "door"}}
        assert httpx.post(agent.url, json=recall, headers={"Authorization": cred}, timeout=30).status_code == 200
        time.sleep(1.1)                          # the credential's second is over
        env = dict(v.env, OWNMEM_NEW_PASSPHRASE=NEW)
        changed = ownmem_cli("passphrase", "change", env=env, timeout=180)
        assert changed.returncode == 0, changed.stderr
        deadline, status = time.monotonic() + 20, 200
        while time.monotonic() < deadline and status == 200:
            status = httpx.post(agent.url, json=recall, headers={"Authorization": cred}, timeout=30).status_code
            time.sleep(0.2)
        assert status == 401
        listed = ownmem_cli("agent", "credential", "list", "--json", env=dict(v.env, OWNMEM_PASSPHRASE=NEW))
        assert listed.returncode == 0 and "claude" not in listed.stdout
        # the agent connects again: a credential issued now works
        fresh = issue(dict(v.env, OWNMEM_PASSPHRASE=NEW), "claude-again")
        deadline, status = time.monotonic() + 20, 0
        while time.monotonic() < deadline and status != 200:
            status = httpx.post(agent.url, json=recall, headers={"Authorization": fresh}, timeout=30).status_code
            time.sleep(0.2)
        assert status == 200
    finally:
        agent.stop()
