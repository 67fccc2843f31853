"""A small UOMP client for the tests: the admin side (with the vault folder's credential) and
the agent side (a bearer token), over real HTTP."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from ownmem.uomp.sessions import ADMIN_FILE, ADMIN_HEADER


OPEN: list[httpx.Client] = []      # closed after each test (conftest)


class Uomp:
    def __init__(self, port: int, folder: Path) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.admin_secret = (folder / ADMIN_FILE).read_text().strip()
        self.http = httpx.Client(base_url=self.base, timeout=30)
        OPEN.append(self.http)

    def admin(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return self.http.request(method, path, json=body, headers={ADMIN_HEADER: self.admin_secret})

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
