"""A small UOMP client for the tests: the person's side (the vault folder's admin credential,
and approvals made with the key the person's passphrase gives, as `ownmem agent authorize`
makes them) and the agent side (a bearer token), over real HTTP."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ownmem.agent.sessions import ADMIN_FILE, ADMIN_HEADER
from ownmem.uomp.approval import APPROVAL_HEADER, sign

OPEN: list[httpx.Client] = []      # closed after each test (conftest)
# vault folder -> its approval key (purpose key "ownmem/v1/uomp-approval"), derived by the
# uomp_vault fixture from the unlocked vault: what the person's passphrase gives
APPROVAL_KEYS: dict[str, bytes] = {}


class Uomp:
    def __init__(self, port: int, folder: Path) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.admin_secret = (folder / ADMIN_FILE).read_text().strip()
        self.approval_key = APPROVAL_KEYS.get(str(folder))
        self.http = httpx.Client(base_url=self.base, timeout=30)
        OPEN.append(self.http)

    def approval(self, method: str, path: str, raw: bytes) -> str:
        assert self.approval_key is not None, "no approval key for this vault folder (uomp_vault fixture)"
        return sign(self.approval_key, self.base, method, path, raw, int(time.time()))

    def admin(self, method: str, path: str, body: Any = None, *, approve: bool = True) -> httpx.Response:
        """As the person: the admin secret, and (``approve``) their approval of this request."""
        raw = json.dumps(body).encode() if body is not None else b""
        h = {ADMIN_HEADER: self.admin_secret, "Content-Type": "application/json"}
        if approve and self.approval_key is not None:
            h[APPROVAL_HEADER] = self.approval(method, path, raw)
        return self.http.request(method, path, content=raw, headers=h)

    def session(self, read: dict[str, Any], *, minutes: float = 30, **grant: Any) -> tuple[str, str]:
        r = self.admin("POST", "/v1/sessions", {"agent_id": grant.pop("agent_id", "calendar_agent"),
                                                "requested_scopes": {"read": read}, "duration_minutes": minutes,
                                                **grant.pop("create", {})})
        assert r.status_code == 201, r.text
        sid = r.json()["session_id"]
        g = self.admin("POST", f"/v1/sessions/{sid}/grant", {"granted_scopes": {"read": read}, **grant})
        assert g.status_code == 200, g.text
        return sid, g.json()["token"]

    def get(self, path: str, token: str | None, **params: str) -> httpx.Response:
        h = {"Authorization": f"Bearer {token}"} if token is not None else {}
        return self.http.get(path, params=params, headers=h)

    def post(self, path: str, token: str | None, body: Any) -> httpx.Response:
        h = {"Authorization": f"Bearer {token}"} if token is not None else {}
        return self.http.post(path, json=body, headers=h)


def code(r: httpx.Response) -> str:
    e = r.json()["error"]
    assert set(e) == {"code", "message", "session_id"}
    return str(e["code"])


def start(backend: Any, servers: Any, uomp_vault: Any, agents: Any, items: Any = None) -> tuple[Any, Any, Uomp]:
    """A blind server, a vault holding ``items`` (conftest.ITEMS by default) and `ownmem agent`
    on it -> (agent process, UompVault, client)."""
    srv = servers(backend)
    uv = uomp_vault(srv.url) if items is None else uomp_vault(srv.url, items)
    agent = agents(uv.vault)
    return agent, uv, Uomp(agent.port, uv.vault.folder)


def error_body(r: httpx.Response, status: int, error_code: str, session_id: str | None) -> dict[str, Any]:
    """The "Error Format" exactly: JSON, {"error": {code, message, session_id}} and nothing else."""
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json"), r.headers
    doc = r.json()
    assert set(doc) == {"error"} and set(doc["error"]) == {"code", "message", "session_id"}, doc
    e: dict[str, Any] = doc["error"]
    assert e["code"] == error_code and e["session_id"] == session_id, doc
    assert isinstance(e["message"], str) and e["message"], doc
    return e


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def sleep_past_expiry(token: str) -> None:
    """Wait until the token's ``exp`` (whole seconds) has surely passed on the service's clock."""
    import time

    import jwt

    exp = jwt.decode(token, options={"verify_signature": False})["exp"]
    time.sleep(max(0.0, exp - time.time()) + 1.1)


@dataclass
class UompVault:
    vault: Any                 # AgentVault
    auth_seed: bytes
