"""UOMP draft-00 8.4 "All error responses MUST use a unified format": every code of its table,
with its status and the session it concerns (null when the caller proved none), from a running
`ownmem agent`; unknown paths and methods under /v1 and a failing audit store included."""
from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import httpx

from ownmem.agent.sessions import ADMIN_HEADER
from ownmem.uomp.approval import APPROVAL_HEADER
from tests.sync.synckit import Backend, ServerProcess
from tests.uomp.uompkit import UompVault, bearer, error_body, sleep_past_expiry, start

READ = {"tags": ["preference"], "keys": [], "deny_tags": ["financial"]}
THEME = "/v1/memory/preference.theme"


def test_every_error_code_in_the_error_format_with_its_status(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    agent, uv, u = start(sqlite_backend, servers, uomp_vault, agents)
    sid, tok = u.session(READ, limits={"max_read_queries": 3})
    # INVALID_TOKEN: nothing proven, so no session named
    error_body(u.get(THEME, "not.a.jwt"), 401, "INVALID_TOKEN", None)
    error_body(u.get(THEME, None), 401, "INVALID_TOKEN", None)
    # ACCESS_DENIED, WRITE_NOT_AVAILABLE, QUOTA_EXCEEDED: the token's session
    error_body(u.get("/v1/memory/preference.card", tok), 403, "ACCESS_DENIED", sid)
    error_body(u.http.put(THEME, json={"value": 1}, headers=bearer(tok)), 501, "WRITE_NOT_AVAILABLE", sid)
    assert u.get(THEME, tok).status_code == 200
    u.get(THEME, tok)
    error_body(u.get(THEME, tok), 429, "QUOTA_EXCEEDED", sid)
    # SESSION_REVOKED after close and after revoke
    sid2, tok2 = u.session(READ)
    assert u.admin("POST", f"/v1/sessions/{sid2}/revoke").status_code == 200
    error_body(u.get(THEME, tok2), 401, "SESSION_REVOKED", sid2)
    error_body(u.admin("POST", f"/v1/sessions/{sid2}/grant", {"granted_scopes": {"read": READ}}), 401,
               "SESSION_REVOKED", sid2)
    # TOKEN_EXPIRED
    _, tok3 = u.session(READ, minutes=0.1)
    sleep_past_expiry(tok3)
    error_body(u.get(THEME, tok3), 401, "TOKEN_EXPIRED", None)
    # SESSION_NOT_FOUND
    for path in ("/v1/sessions/sess_nope/close", "/v1/sessions/sess_nope/revoke", "/v1/sessions/sess_nope/grant"):
        error_body(u.admin("POST", path, {"granted_scopes": {}}), 404, "SESSION_NOT_FOUND", None)
    sid4, tok4 = u.session(READ)
    error_body(u.post("/v1/sessions/sess_nope/deletion-proof", tok4, {}), 404, "SESSION_NOT_FOUND", None)
    # INVALID_REQUEST: bodies and parameters out of shape, oversized, unknown paths and methods under /v1
    h = {ADMIN_HEADER: u.admin_secret, "Content-Type": "application/json"}
    for body in (b"{", b"[1]", b'{"agent_id": 7}', b'{"agent_id": "a", "duration_minutes": -1}',
                 b'{"agent_id": "a", "requested_scopes": {"read": {"tags": "x"}}}', b"x" * (65 * 1024)):
        approved = {**h, APPROVAL_HEADER: u.approval("POST", "/v1/sessions", body)}   # the person's, so the
        error_body(u.http.post("/v1/sessions", content=body, headers=approved), 400,     # body is what is refused
                   "INVALID_REQUEST", None)
    error_body(u.get("/v1/memory", tok4), 400, "INVALID_REQUEST", None)
    error_body(u.get("/v1/memory/aggregate", tok4, op="count"), 400, "INVALID_REQUEST", None)
    error_body(u.post("/v1/memory/query", tok4, {"query": 5}), 400, "INVALID_REQUEST", None)
    error_body(u.get("/v1/nothing", tok4), 404, "INVALID_REQUEST", None)
    error_body(u.http.post(THEME, headers=bearer(tok4)), 405, "INVALID_REQUEST", None)
    error_body(u.http.get(f"/v1/sessions/{sid4}/grant", headers=h), 405, "INVALID_REQUEST", None)
    error_body(u.http.delete("/v1/sessions", headers=h), 405, "INVALID_REQUEST", None)
    # the SAIHM binding keeps its own answers (not a UOMP path)
    assert u.http.get("/saihm").status_code == 405

    # STORE_UNAVAILABLE: the audit log refuses every write (a trigger stands in for a full or
    # failing disk): no decision is served that could not be audited, and nothing else breaks.
    # An entry the journal took is on disk, so its answer may be served (or refused, if this
    # read made audit.db ingest first); once audit.db has refused to ingest the journal (an
    # audit read makes it try at once) the log fails closed
    db = sqlite3.connect(uv.vault.folder / "audit.db")
    with db:
        db.execute("CREATE TRIGGER refuse BEFORE INSERT ON audit BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    assert u.get(THEME, tok4).status_code in (200, 503)
    error_body(u.admin("GET", "/v1/audit"), 503, "STORE_UNAVAILABLE", None)
    r = u.get(THEME, tok4)
    error_body(r, 503, "STORE_UNAVAILABLE", None)
    assert "dark" not in r.text
    error_body(u.get("/v1/memory", tok4, tag="preference"), 503, "STORE_UNAVAILABLE", None)
    # a close whose audit entry cannot be written is still a close (it fails closed): the answer
    # says the store failed, the token reads no more, and asking again says closed
    error_body(u.admin("POST", f"/v1/sessions/{sid4}/close"), 503, "STORE_UNAVAILABLE", None)
    with db:
        db.execute("DROP TRIGGER refuse")
    db.close()
    error_body(u.get(THEME, tok4), 401, "SESSION_REVOKED", sid4)
    assert u.admin("POST", f"/v1/sessions/{sid4}/close").json() == {"session_id": sid4, "status": "closed"}
    _, tok6 = u.session(READ)
    assert u.get(THEME, tok6).json()["value"] == "dark"
    assert httpx.get(f"{u.base}/health").status_code == 200
