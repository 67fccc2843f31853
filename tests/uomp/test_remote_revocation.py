"""Revocation from another of the person's devices reaches the agent service through the blind
server within 2 s (UOMP draft-00 "Real-Time Revocation"): an agent reading in a loop is cut off."""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ownmem.uomp.control import REVOCATION
from tests.agent.agentkit import ownmem_cli
from tests.sync.synckit import Backend, Devices, ServerProcess, cli_env
from tests.uomp.uompkit import Uomp, UompVault, code

READ = {"tags": ["preference"], "keys": []}


def _read_until_revoked(u: Uomp, token: str, limit: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        r = u.get("/v1/memory/preference.theme", token)
        if r.status_code != 200:
            assert code(r) == "SESSION_REVOKED"
            return time.monotonic() - t0
    raise AssertionError(f"still reading {limit} s after the revocation")


def test_a_reading_agent_is_cut_off_within_2s_of_a_revoke_on_another_device(
        backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[[str], UompVault],
        agents: Callable[..., Any], devices: Devices, tmp_path: Path) -> None:
    srv = servers(backend)        # SQLite and PostgreSQL: the record travels as an ordinary cell
    uv = uomp_vault(srv.url)
    agent = agents(uv.vault)
    u = Uomp(agent.port, uv.vault.folder)
    sid, tok = u.session(READ)
    sid2, tok2 = u.session(READ)
    phone = devices.join(srv.url, uv.vault.name, label="phone")
    assert u.get("/v1/memory/preference.theme", tok).status_code == 200
    phone.v.add("revoke", tags=("uomp-revocation",), extensions={REVOCATION: {"session_id": sid}})
    phone.sync()
    took = _read_until_revoked(u, tok, 2.0)
    assert took < 2.0
    # the other session is untouched
    assert u.get("/v1/memory/preference.theme", tok2).status_code == 200
    # the CLI on the phone (no admin credential there) goes through the server too
    folder = phone.folder
    assert folder is not None
    phone.v.close()
    phone.client.close()
    devices.made.remove(phone)
    r = ownmem_cli("agent", "revoke", sid2, env=cli_env(tmp_path, folder))
    assert r.returncode == 0, r.stderr
    _read_until_revoked(u, tok2, 2.0)
    states = {s["session_id"]: s["status"] for s in u.admin("GET", "/v1/sessions").json()["sessions"]}
    assert states[sid] == states[sid2] == "revoked"


def test_only_an_owner_signed_record_revokes(tmp_path: Path) -> None:
    from dataclasses import replace

    from ownmem.agent.uomp_mount import revocation_of
    from ownmem.aperto.model import Trust
    from ownmem.vault import Vault

    v = Vault.create(tmp_path / "v", "correct horse battery staple 42")
    try:
        v.add("revoke", extensions={REVOCATION: {"session_id": "sess_x"}})
        v.add("not a record", extensions={REVOCATION: {"session_id": 7}})
        entries = v.open_all().entries
    finally:
        v.close()
    assert sorted(str(revocation_of(e)) for e in entries) == ["None", "sess_x"]
    for e in entries:
        for trust in (Trust.TRUSTED, Trust.UNVERIFIED):
            assert revocation_of(replace(e, opened=replace(e.opened, trust=trust))) is None
