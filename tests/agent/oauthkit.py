"""Helpers of the OAuth door's tests: a real unlocked vault, the door (oauth.OAuthServer) mounted
in a Starlette app served by uvicorn on 127.0.0.1, a controllable clock, and the steps a host
and the person take (register, authorize, consent, token)."""
from __future__ import annotations

import base64
import hashlib
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from starlette.applications import Starlette

from ownmem.agent.audit import AUDIT_INFO, AuditLog
from ownmem.agent.cimd import CimdFetcher
from ownmem.agent.credentials import CREDENTIALS_INFO, CredentialFile
from ownmem.agent.oauth import OAuthServer, passphrase_checker
from ownmem.agent.sessions import SessionStore
from ownmem.uomp.tokens import AUTH_INFO, AuthKey
from ownmem.vault.unlock import Vault
from ownmem.vault.vault import UnlockedVault
from tests.agent.tlskit import Served, free_port

PASS = "correct horse battery staple"
REDIRECT = "http://127.0.0.1:33418/callback"
TAGS = ["work", "health", "travel"]


@dataclass
class Door:
    server: OAuthServer
    http: httpx.Client
    url: str
    creds: CredentialFile
    sessions: SessionStore
    audit: AuditLog
    clock: list[int]
    auth_key: AuthKey
    folder: Path


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UnlockedVault]:
    v = Vault.create(tmp_path_factory.mktemp("vault"), PASS)
    yield v
    v.close()


def open_door(vault: UnlockedVault, folder: Path, fetcher: CimdFetcher | None = None) -> Iterator[Door]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    clock = [int(time.time())]
    creds = CredentialFile(folder, vault.purpose_key(CREDENTIALS_INFO))
    sessions, audit = SessionStore(folder), AuditLog(folder, vault.purpose_key(AUDIT_INFO))
    key = AuthKey.from_seed(vault.purpose_key(AUTH_INFO))
    server = OAuthServer(folder=folder, creds=creds, auth_key=key, sessions=sessions, audit=audit, public_url=url,
                         check_passphrase=passphrase_checker(vault), now=lambda: clock[0],
                         fetcher=fetcher or CimdFetcher())
    with Served(Starlette(routes=server.routes()), port=port), \
            httpx.Client(base_url=url, follow_redirects=False, timeout=30) as http:
        yield Door(server, http, url, creds, sessions, audit, clock, key, folder)
    server.close()
    audit.close()
    sessions.close()


@pytest.fixture
def door(vault: UnlockedVault, tmp_path: Path) -> Iterator[Door]:
    yield from open_door(vault, tmp_path)


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def register(d: Door, redirect: str = REDIRECT, name: str = "Claude") -> str:
    r = d.http.post("/register", json={"redirect_uris": [redirect], "client_name": name,
                                       "token_endpoint_auth_method": "none"})
    assert r.status_code == 201, r.text
    return str(r.json()["client_id"])


def authorize(d: Door, client_id: str, challenge: str, redirect: str = REDIRECT, state: str = "st-1",
              **extra: str) -> httpx.Response:
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect, "state": state,
              "code_challenge": challenge, "code_challenge_method": "S256", "resource": d.server.resource_url}
    params.update(extra)
    return d.http.get("/authorize", params={k: v for k, v in params.items() if v != "<omit>"})


def query(location: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def consent_form(d: Door, location: str) -> tuple[str, str]:
    """The consent page the authorize redirect leads to -> (request id, form token)."""
    assert location.startswith("/consent?request="), location
    page = d.http.get(location)
    assert page.status_code == 200
    rid = re.search(r"name=request value='([^']+)'", page.text)
    tok = re.search(r"name=token value='([^']+)'", page.text)
    assert rid and tok
    return rid.group(1), tok.group(1)


def decide(d: Door, rid: str, token: str, *, passphrase: str = PASS, action: str = "approve",
           allow: tuple[str, ...] = ("*",), deny: tuple[str, ...] = (), access: str = "read",
           lifetime: str = "86400", origin: str | None = None) -> httpx.Response:
    form = [("request", rid), ("token", token), ("action", action), ("access", access), ("lifetime", lifetime),
            ("passphrase", passphrase)] + [("allow", t) for t in allow] + [("deny", t) for t in deny]
    headers = {"Origin": origin if origin is not None else d.url}
    headers["Content-Type"] = "application/x-www-form-urlencoded"
    return d.http.post("/consent", content=urlencode(form), headers=headers)


def code_for(d: Door, client_id: str, challenge: str, **kw: Any) -> str:
    r = authorize(d, client_id, challenge)
    assert r.status_code == 302, r.text
    rid, tok = consent_form(d, r.headers["location"])
    r = decide(d, rid, tok, **kw)
    assert r.status_code == 303, r.text
    q = query(r.headers["location"])
    assert r.headers["location"].startswith(REDIRECT + "?")
    assert q["state"] == "st-1" and q["iss"] == d.url
    return q["code"]


def exchange(d: Door, client_id: str, code: str, verifier: str, redirect: str = REDIRECT) -> httpx.Response:
    return d.http.post("/token", data={"grant_type": "authorization_code", "code": code, "client_id": client_id,
                                       "redirect_uri": redirect, "code_verifier": verifier,
                                       "resource": d.server.resource_url})


def refresh(d: Door, client_id: str, token: str) -> httpx.Response:
    return d.http.post("/token", data={"grant_type": "refresh_token", "refresh_token": token,
                                       "client_id": client_id, "resource": d.server.resource_url})


def grant(d: Door, **kw: Any) -> tuple[str, dict[str, Any]]:
    """A host registered by DCR, consented, its tokens -> (client id, the token response)."""
    client_id = register(d)
    verifier, challenge = pkce()
    r = exchange(d, client_id, code_for(d, client_id, challenge, **kw), verifier)
    assert r.status_code == 200, r.text
    return client_id, dict(r.json())
