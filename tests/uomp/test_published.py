"""Session records published by `ownmem agent` (ownmem.agent.published): a session's life shows
on another device of the person after sync, one live head per session; only the owner's records
count; no view lists them as memories."""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ownmem.agent.published import REVOCATION as PUBLISHED_REVOCATION, SESSION_RECORD, read_published
from ownmem.aperto import keys as aperto_keys
from ownmem.aperto.model import Memory, Trust
from ownmem.crypto import run_sync
from ownmem.uomp.control import CONTROL_EXTENSIONS, REVOCATION, is_control
from ownmem.vault import UnlockedVault, Vault
from ownmem.vault.vault import SUPERSEDES, TOOL
from tests.agent.agentkit import ownmem_cli
from tests.sync.synckit import Backend, Devices, ServerProcess, cli_env
from tests.uomp.uompkit import Uomp, UompVault

READ = {"tags": ["preference"], "keys": ["user.display_name"], "deny_tags": ["financial"], "deny_keys": []}
MANIFEST = {"uomp_version": "1.0",
            "agent": {"id": "calendar_agent", "name": "Calendar Assistant", "version": "1.2.0",
                      "publisher": "example-org"},
            "requested_scopes": {"read": {"tags": ["preference"], "keys": [], "deny_tags": ["financial"]}},
            "data_retention_policy": {"max_retention_seconds": 300, "deletion_method": "process_termination"}}


def _records(entries: list[Any], sid: str) -> list[Any]:
    return [e for e in entries if (e.opened.extensions.get(SESSION_RECORD) or {}).get("session_id") == sid]


def test_a_sessions_life_shows_on_another_device_one_head_per_session(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[[str], UompVault],
        agents: Callable[..., Any], devices: Devices, tmp_path: Path) -> None:
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    (tmp_path / "uom.json").write_text(json.dumps(MANIFEST))
    r = ownmem_cli("agent", "register", str(tmp_path / "uom.json"), env=uv.vault.env)
    assert r.returncode == 0, r.stderr
    agent = agents(uv.vault)
    u = Uomp(agent.port, uv.vault.folder)
    revoked, tok = u.session(READ, aggregation_only=True, limits={"max_read_queries": 7},
                             create={"agent_name": "Calendar Assistant"})
    closed, tok2 = u.session(READ)
    short, _ = u.session(READ, minutes=0.05)          # 3 s: its expiry is published too
    created = u.admin("POST", "/v1/sessions", {"agent_id": "notes_agent", "requested_scopes": {"read": READ}}).json()
    assert u.admin("POST", f"/v1/sessions/{revoked}/revoke").status_code == 200
    assert u.post(f"/v1/sessions/{closed}/close", tok2, {}).status_code == 200

    phone = devices.join(srv.url, uv.vault.name, label="phone")
    want = {revoked: "revoked", closed: "closed", short: "expired", created["session_id"]: "created"}
    deadline = time.monotonic() + 30
    while True:
        phone.sync()
        entries = phone.listing().entries
        view = read_published(entries, int(time.time()))
        # the expiry is the agent's record, not only the clock here
        got = {s.session_id: s.doc["status"] for s in view.sessions}
        if got == want or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert got == want
    s = {x.session_id: x for x in view.sessions}[revoked]
    assert s.status == "revoked" and not s.revocation_sent
    assert s.doc["agent_name"] == "Calendar Assistant" and s.doc["agent_id"] == "calendar_agent"
    assert s.doc["scopes"]["read"] == READ and s.doc["granted"] is True
    assert s.doc["aggregation_only"] is True and s.doc["max_read_queries"] == 7
    assert s.doc["closed_at"] is not None and s.doc["expires_at"] > s.doc["created_at"]
    assert {x.session_id: x for x in view.sessions}[created["session_id"]].doc["granted"] is False
    # every change is a record, each superseding the one before: one live head per session
    chain = _records(entries, revoked)
    assert [e.opened.extensions[SESSION_RECORD]["status"] for e in
            sorted(chain, key=lambda e: e.opened.extensions[SESSION_RECORD]["seq"])] == ["created", "active", "revoked"]
    assert len([e for e in chain if e.is_head]) == 1
    for e in chain:
        assert e.opened.trust is Trust.SELF
    assert [a["agent_id"] for a in view.agents] == ["calendar_agent"]
    assert view.agents[0]["agent_name"] == "Calendar Assistant" and view.agents[0]["publisher_verified"] is False
    assert view.agents[0]["requested"]["read"]["deny_tags"] == ["financial"]

    # the records are no memories: `ownmem list` on that device shows none of them
    folder = phone.folder
    assert folder is not None
    phone.v.close()
    phone.client.close()
    devices.made.remove(phone)
    env = cli_env(tmp_path, folder)
    listed = ownmem_cli("list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    texts = [m["content"] for m in json.loads(listed.stdout)]
    assert texts and not any(t.startswith("UOMP ") for t in texts), texts
    found = ownmem_cli("search", "session", "--json", env=env)     # what only the records say
    assert found.returncode == 0 and json.loads(found.stdout) == [], found.stdout


def _sealed_by(v: UnlockedVault, key: aperto_keys.SigningKey, ext: dict[str, object]) -> bytes:
    m = Memory(content="forged", created=int(time.time()), tool=TOOL, extensions=ext)
    return v._seal_into(m, v.scope("default"), signer=key).object_id


def test_only_owner_signed_records_count_a_forged_or_foreign_one_is_ignored(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", "correct horse battery staple 42")
    try:
        now = int(time.time())
        doc = {"kind": "session", "session_id": "sess_real", "agent_id": "cal", "agent_name": "Cal",
               "status": "active", "created_at": now, "expires_at": now + 600, "published_at": now, "seq": 1}
        real = v.add("real", extensions={SESSION_RECORD: doc})
        # an accepted key that is not the owner's (an agent's author key): its records are nothing
        agent = run_sync(aperto_keys.signing_key(v.crypto, b"\x07" * 32))
        v.trust_add(agent.public)
        _sealed_by(v, agent, {SESSION_RECORD: {**doc, "session_id": "sess_forged"}})
        _sealed_by(v, agent, {SESSION_RECORD: {**doc, "status": "revoked", "seq": 9}, SUPERSEDES: real})
        _sealed_by(v, agent, {REVOCATION: {"session_id": "sess_real"}})
        _sealed_by(v, agent, {SESSION_RECORD: {"kind": "agent", "agent_id": "evil", "agent_name": "Evil"}})
        # malformed owner records are no record either
        v.add("bad", extensions={SESSION_RECORD: {**doc, "session_id": "sess_bad", "status": "hacked"}})
        v.add("bad", extensions={SESSION_RECORD: {**doc, "session_id": "sess_bad2", "expires_at": "soon"}})
        v.add("bad", extensions={SESSION_RECORD: "active"})
        entries = v.open_all(allow_unverified=True).entries
    finally:
        v.close()
    view = read_published(entries, now)
    assert [(s.session_id, s.status, s.revocation_sent) for s in view.sessions] == [("sess_real", "active", False)]
    assert view.agents == []
    # the same records unverified, or signed by a trusted key, never count
    for trust in (Trust.TRUSTED, Trust.UNVERIFIED):
        assert read_published([replace(e, opened=replace(e.opened, trust=trust)) for e in entries], now).sessions == []
    # past its expiry a live record reads as expired; an owner's revocation record is noted
    later = read_published(entries, now + 600)
    assert later.sessions[0].status == "expired"
    # every one of them is a control record, hidden from every list
    assert all(is_control(e.opened.extensions) for e in entries)
    assert SESSION_RECORD in CONTROL_EXTENSIONS and PUBLISHED_REVOCATION == REVOCATION


def test_an_owner_revocation_record_marks_the_session_revocation_sent(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", "correct horse battery staple 42")
    try:
        now = int(time.time())
        v.add("s", extensions={SESSION_RECORD: {"kind": "session", "session_id": "sess_a", "agent_id": "cal",
                                                "status": "active", "expires_at": now + 60, "published_at": now}})
        v.add("r", extensions={REVOCATION: {"session_id": "sess_a"}})
        entries = v.open_all().entries
    finally:
        v.close()
    s = read_published(entries, now).sessions[0]
    assert (s.status, s.revocation_sent) == ("active", True)


def test_after_a_restart_the_next_record_supersedes_the_last_one(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[[str], UompVault],
        agents: Callable[..., Any], devices: Devices) -> None:
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    agent = agents(uv.vault)
    u = Uomp(agent.port, uv.vault.folder)
    sid, _ = u.session(READ)
    phone = devices.join(srv.url, uv.vault.name, label="phone")

    def statuses() -> list[tuple[str, bool]]:
        phone.sync()
        return sorted((e.opened.extensions[SESSION_RECORD]["status"], e.is_head)
                      for e in _records(phone.listing().entries, sid))

    deadline = time.monotonic() + 30
    while statuses() != [("active", True), ("created", False)] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert statuses() == [("active", True), ("created", False)]
    agent.stop()
    agent.start()                    # a new process: it finds its last record in the vault
    u = Uomp(agent.port, uv.vault.folder)
    assert u.admin("POST", f"/v1/sessions/{sid}/revoke").status_code == 200
    deadline = time.monotonic() + 30
    while ("revoked", True) not in statuses() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert statuses() == [("active", False), ("created", False), ("revoked", True)]
    # nothing was published again for the restart itself
    assert read_published(phone.listing().entries, int(time.time())).sessions[0].status == "revoked"
