"""Every answer of the agent port that is not a success is its protocol's error, with the status
its registry gives (issue 20, "One error registry per protocol"; UOMP draft-00 8.4 "Error
Format" under /v1, the SAIHM binding's {"error": code} elsewhere): a real `ownmem agent`, every
route of the tables its app is built from (uomp_mount.SERVED, service.ROUTES) asked with each
method it does not take and with a body that is not JSON, and paths no route takes."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
from starlette.routing import Match, Route

from ownmem.agent import port, service, uomp_mount
from ownmem.agent.answers import speaks_uomp
from ownmem.agent.sessions import ADMIN_FILE, ADMIN_HEADER
from ownmem.saihm.errors import BindingError
from ownmem.uomp.approval import APPROVAL_HEADER, APPROVAL_INFO, sign
from ownmem.uomp.errors import ErrorCode, HttpRefusal
from ownmem.vault import Vault
from tests.agent.agentkit import AgentProcess, AgentVault, issue
from tests.sync.synckit import PASSPHRASE, Backend, ServerProcess

TABLE = [(path, frozenset(methods)) for path, methods, _ in (*uomp_mount.SERVED, *service.ROUTES)]
METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH")
READ = {"tags": ["preference"]}
NOT_JSON = b'{"not json'
# what a body that is not JSON meets on each route that takes a body: the request's format,
# unless the route reads no body (close, revoke: the session named is none; PUT: no writes)
MALFORMED: dict[tuple[str, str], ErrorCode] = {
    ("/v1/sessions", "POST"): ErrorCode.INVALID_REQUEST,
    ("/v1/sessions/{sid}/grant", "POST"): ErrorCode.INVALID_REQUEST,
    ("/v1/sessions/{sid}/close", "POST"): ErrorCode.SESSION_NOT_FOUND,
    ("/v1/sessions/{sid}/revoke", "POST"): ErrorCode.SESSION_NOT_FOUND,
    ("/v1/sessions/{sid}/deletion-proof", "POST"): ErrorCode.INVALID_REQUEST,
    ("/v1/tokens/validate", "POST"): ErrorCode.INVALID_REQUEST,
    ("/v1/memory/query", "POST"): ErrorCode.INVALID_REQUEST,
    ("/v1/memory/{key:path}", "PUT"): ErrorCode.WRITE_NOT_AVAILABLE,
    ("/v1/audit/prune", "POST"): ErrorCode.INVALID_REQUEST,
}
UNKNOWN = ("/v2/memory/preference.theme", "/v1/nothing", "/v1", "/", "/saihm/x", "/healthz",
           "/v1/sessions/a/b/c", "/v1/audit/prune/x")


async def _nothing(_: Any) -> None:
    return None


ROUTES = [Route(path, _nothing, methods=list(methods)) for path, methods in TABLE]


def _taken(path: str, method: str) -> bool:
    """Whether the app's routing hands ``method path`` to a route (Starlette's own matching)."""
    scope = {"type": "http", "path": path, "method": method, "root_path": ""}
    return any(r.matches(scope)[0] is Match.FULL for r in ROUTES)


def _known(path: str) -> bool:
    scope = {"type": "http", "path": path, "method": "GET", "root_path": ""}
    return any(r.matches(scope)[0] is not Match.NONE for r in ROUTES)


def _uomp_error(r: httpx.Response, code: ErrorCode, http: HttpRefusal | None = None) -> None:
    assert r.headers["content-type"].startswith("application/json"), (r.status_code, r.text)
    doc = r.json()
    assert set(doc) == {"error"} and set(doc["error"]) == {"code", "message", "session_id"}, doc
    assert doc["error"]["code"] == code.value, (r.request.method, r.request.url, doc)
    assert r.status_code == (code.status if http is None else int(http)), (r.request.url, r.status_code, doc)


def _saihm_error(r: httpx.Response, code: BindingError) -> None:
    assert r.headers["content-type"].startswith("application/json"), (r.status_code, r.text)
    assert r.json() == {"error": code.value}, (r.request.method, r.request.url, r.text)
    assert r.status_code == code.status


class Person:
    """The admin secret and the person's approval of each request, as `ownmem agent authorize`."""

    def __init__(self, agent: AgentProcess, v: AgentVault) -> None:
        unlocked = Vault(v.folder).unlock(PASSPHRASE)
        try:
            self.key = unlocked.purpose_key(APPROVAL_INFO)
        finally:
            unlocked.close()
        self.base = f"http://127.0.0.1:{agent.port}"
        self.secret = (v.folder / ADMIN_FILE).read_text().strip()

    def headers(self, method: str, path: str, raw: bytes) -> dict[str, str]:
        return {ADMIN_HEADER: self.secret, "Content-Type": "application/json",
                APPROVAL_HEADER: sign(self.key, self.base, method, path, raw, int(time.time()))}

    def send(self, method: str, path: str, doc: Any) -> Any:
        import json

        raw = json.dumps(doc).encode()
        r = httpx.request(method, self.base + path, content=raw, headers=self.headers(method, path, raw))
        assert r.is_success, r.text
        return r.json()


def test_every_route_answers_every_error_in_its_protocols_shape_with_its_registry_status(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess],
        agent_vault: Callable[..., AgentVault], agents: Callable[..., AgentProcess]) -> None:
    srv = servers(sqlite_backend)
    v = agent_vault(srv.url, ("the door code is 4711",))
    cred = issue(v.env, "claude")
    agent = agents(v)
    person = Person(agent, v)
    base = person.base
    sid = person.send("POST", "/v1/sessions", {"agent_id": "a", "requested_scopes": {"read": READ}})["session_id"]
    token = person.send("POST", f"/v1/sessions/{sid}/grant", {"granted_scopes": {"read": READ}})["token"]
    fresh = person.send("POST", "/v1/sessions", {"agent_id": "b", "requested_scopes": {"read": READ}})["session_id"]

    def concrete(path: str, method: str) -> str:
        # the token's own session where a route reads one; an ungranted one to grant; none to end
        named = {"/v1/sessions/{sid}/grant": fresh, "/v1/sessions/{sid}/deletion-proof": sid}.get(path, "sess_none")
        return path.replace("{sid}", named).replace("{key:path}", "preference.theme")

    def ask(method: str, path: str, raw: bytes = b"") -> httpx.Response:
        h = {**person.headers(method, path, raw), "Authorization": f"Bearer {token}"}
        if path == port.PATH:
            h["Authorization"] = cred
        return httpx.request(method, base + path, content=raw, headers=h)

    # every route with every method it does not take: HTTP's 405, in the path's protocol
    asked = 0
    for path, methods in TABLE:
        p = concrete(path, "")
        for m in METHODS:
            if m in methods or _taken(p, m):
                continue
            r = ask(m, p)
            asked += 1
            if speaks_uomp(p):
                _uomp_error(r, ErrorCode.INVALID_REQUEST, HttpRefusal.WRONG_METHOD)
            else:
                _saihm_error(r, BindingError.METHOD_NOT_ALLOWED)
            assert "allow" in r.headers, (m, p)
    assert asked >= len(TABLE)

    # every route that takes a body, given one that is not JSON (the person's approval and
    # every credential with it, so that the body is what is judged)
    for path, methods in TABLE:
        for m in sorted(methods & {"POST", "PUT"}):
            r = ask(m, concrete(path, m), NOT_JSON)
            if path == port.PATH:
                _saihm_error(r, BindingError.INVALID_PARAMS)
            else:
                _uomp_error(r, MALFORMED[(path, m)])
    # a token that fails validation is still answered 200 {"valid": false} (9.5)
    r = ask("POST", "/v1/tokens/validate", b'{"token": "not.a.jwt"}')
    assert r.status_code == 200 and r.json()["valid"] is False

    # paths no route takes: 404 in the path's protocol
    for p in UNKNOWN:
        assert not _known(p), p
        for m in ("GET", "POST"):
            r = ask(m, p)
            if speaks_uomp(p):
                _uomp_error(r, ErrorCode.INVALID_REQUEST, HttpRefusal.NO_ROUTE)
            else:
                _saihm_error(r, BindingError.NOT_FOUND)

    # and the routes still serve
    assert httpx.get(base + "/health").json() == {"status": "ok"}
    assert httpx.get(base + "/v1/memory", params={"tag": "preference"},
                     headers={"Authorization": f"Bearer {token}"}).status_code == 200
