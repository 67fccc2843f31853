"""The OAuth door over real HTTP (uvicorn on 127.0.0.1), from the attacker's side where it applies:
metadata, DCR, PKCE, exact redirect_uri, no open redirect, the code's single use, refresh rotation
and reuse, and what verify_token accepts (issue 21 Build items 3, 5, 6)."""
from __future__ import annotations

import asyncio
from dataclasses import replace

from ownmem.agent.credentials import LOCAL
from ownmem.agent.oauth import ACCESS_SECONDS, RemoteAccess, resource_metadata_url
from ownmem.uomp import tokens
from ownmem.uomp.tokens import Claims
from tests.agent.oauthkit import (
    REDIRECT,
    Door,
    authorize,
    code_for,
    door,  # noqa: F401 - fixture
    exchange,
    grant,
    pkce,
    query,
    refresh,
    register,
    vault,  # noqa: F401 - fixture
)


def verify(d: Door, token: str) -> RemoteAccess | None:
    return asyncio.run(d.server.verify_token(token))


def test_metadata_documents(door: Door) -> None:
    m = door.http.get("/.well-known/oauth-authorization-server").json()
    assert m["issuer"] == door.url                         # exactly, no trailing slash (RFC 8414 / 9207)
    assert m["code_challenge_methods_supported"] == ["S256"]
    assert m["authorization_response_iss_parameter_supported"] is True
    assert m["client_id_metadata_document_supported"] is True
    assert "none" in m["token_endpoint_auth_methods_supported"]
    assert m["registration_endpoint"] == door.url + "/register"
    assert m["authorization_endpoint"] == door.url + "/authorize" and m["token_endpoint"] == door.url + "/token"
    prm_url = resource_metadata_url(door.url)
    assert prm_url == door.url + "/.well-known/oauth-protected-resource/mcp" == door.server.resource_metadata_url()
    p = door.http.get(prm_url).json()
    assert p["resource"] == door.url + "/mcp" == door.server.resource_url
    assert p["authorization_servers"] == [door.url]


def test_dcr_registers_public_clients_with_https_or_loopback_redirects_only(door: Door) -> None:
    r = door.http.post("/register", json={"redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
                                          "token_endpoint_auth_method": "client_secret_post"})
    assert r.status_code == 201, r.text
    assert r.json()["token_endpoint_auth_method"] == "none" and "client_secret" not in r.json()
    for bad in (["http://evil.example/cb"], ["javascript:alert(1)"], ["https://x.example/cb#frag"], [],
                ["https://user@x.example/cb"], "https://x.example/cb"):
        r = door.http.post("/register", json={"redirect_uris": bad})
        assert r.status_code == 400 and r.json()["error"] == "invalid_redirect_uri", bad
    assert (door.folder / "oauth.db").stat().st_mode & 0o777 == 0o600


def test_pkce_missing_or_plain_is_refused(door: Door) -> None:
    cid = register(door)
    _, challenge = pkce()
    for extra in ({"code_challenge_method": "plain"}, {"code_challenge_method": "<omit>"},
                  {"code_challenge": "<omit>"}, {"code_challenge": "short"}):
        r = authorize(door, cid, challenge, **extra)
        assert r.status_code == 302, extra
        q = query(r.headers["location"])
        assert q["error"] == "invalid_request" and q["state"] == "st-1" and q["iss"] == door.url, extra
        assert "code" not in q


def test_a_redirect_uri_one_character_off_is_a_page_never_a_redirect(door: Door) -> None:
    cid = register(door)
    _, challenge = pkce()
    for off in (REDIRECT + "/", REDIRECT[:-1], REDIRECT.replace("33418", "33419"), REDIRECT + "?x=1",
                REDIRECT.upper(), "https://evil.example/callback"):
        r = authorize(door, cid, challenge, redirect=off)
        assert r.status_code == 400 and "location" not in r.headers, off
        assert r.headers["x-frame-options"] == "DENY"
    # an unknown client, or none, with an attacker's redirect: a page, not a redirect (open redirect)
    for client in ("no-such-client", "<omit>"):
        r = authorize(door, client, challenge, redirect="https://evil.example/")
        assert r.status_code == 400 and "location" not in r.headers


def test_a_resource_other_than_mcp_is_refused_at_authorize_and_token(door: Door) -> None:
    cid = register(door)
    verifier, challenge = pkce()
    r = authorize(door, cid, challenge, resource="https://other.example/mcp")
    assert query(r.headers["location"])["error"] == "invalid_target"
    code = code_for(door, cid, challenge)
    r = door.http.post("/token", data={"grant_type": "authorization_code", "code": code, "client_id": cid,
                                       "redirect_uri": REDIRECT, "code_verifier": verifier,
                                       "resource": door.url + "/other"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_target"


def test_the_code_flow_gives_a_remote_capability_token_for_mcp(door: Door) -> None:
    cid, tok = grant(door, allow=("work",), deny=("health",), access="write", lifetime="3600")
    assert tok["token_type"] == "Bearer" and tok["expires_in"] == ACCESS_SECONDS
    claims = tokens.verify(str(tok["access_token"]), door.auth_key, door.clock[0])
    assert claims.profile == "remote" and claims.audience == door.url + "/mcp"
    assert claims.scopes.read.tags == ("work",) and claims.scopes.read.deny_tags == ("health",)
    assert claims.scopes.write.tags == ("*",)
    access = verify(door, str(tok["access_token"]))
    assert access is not None and access.client_id == cid and access.capability == claims
    assert access.credential.kind == "remote" and access.credential.session_id == claims.session_id
    s = door.sessions.get(claims.session_id)
    assert s is not None and s.kind == "mcp-remote" and s.state(door.clock[0]) == "active"
    # the grant lasts an hour: a token never outlives it
    door.clock[0] += 3600 - 100
    _, again = str(tok["refresh_token"]), refresh(door, cid, str(tok["refresh_token"])).json()
    assert again["expires_in"] == 100


def test_a_replayed_code_is_refused_and_revokes_the_session_issued_from_it(door: Door) -> None:
    cid = register(door)
    verifier, challenge = pkce()
    code = code_for(door, cid, challenge)
    first = exchange(door, cid, code, verifier)
    assert first.status_code == 200
    access = str(first.json()["access_token"])
    assert verify(door, access) is not None
    again = exchange(door, cid, code, verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    assert verify(door, access) is None
    sid = tokens.verify(access, door.auth_key, door.clock[0]).session_id
    assert door.sessions.get(sid).status == "revoked"   # type: ignore[union-attr]
    assert not [c for c in door.creds.all() if c.session_id == sid]
    assert refresh(door, cid, str(first.json()["refresh_token"])).status_code == 400


def test_a_code_is_bound_to_its_verifier_client_and_redirect_and_lives_60_s(door: Door) -> None:
    cid, other = register(door), register(door)
    verifier, challenge = pkce()
    code = code_for(door, cid, challenge)
    assert exchange(door, cid, code, pkce()[0]).json()["error"] == "invalid_grant"          # wrong verifier
    assert exchange(door, other, code, verifier).json()["error"] == "invalid_grant"         # another client
    assert exchange(door, cid, code, verifier, redirect=REDIRECT + "x").status_code == 400  # another redirect
    door.clock[0] += 61
    assert exchange(door, cid, code, verifier).json()["error"] == "invalid_grant"


def test_refresh_rotates_and_a_reused_refresh_token_revokes_the_session(door: Door) -> None:
    cid, tok = grant(door)
    r1 = refresh(door, cid, str(tok["refresh_token"]))
    assert r1.status_code == 200, r1.text
    new = r1.json()
    assert new["refresh_token"] != tok["refresh_token"] and verify(door, new["access_token"]) is not None
    r2 = refresh(door, cid, new["refresh_token"])
    assert r2.status_code == 200
    # the first, already rotated, presented again: the whole session ends
    reuse = refresh(door, cid, str(tok["refresh_token"]))
    assert reuse.status_code == 400 and reuse.json()["error"] == "invalid_grant"
    latest = r2.json()
    assert verify(door, latest["access_token"]) is None
    assert refresh(door, cid, latest["refresh_token"]).status_code == 400
    sid = tokens.verify(latest["access_token"], door.auth_key, door.clock[0]).session_id
    assert door.sessions.get(sid).status == "revoked"   # type: ignore[union-attr]
    assert any(e.action == "revoked" and e.reason == "refresh token reused" for e in door.audit.entries(sid))


def test_verify_token_refuses_everything_but_a_live_remote_access_token(door: Door) -> None:
    cid, tok = grant(door)
    access, rt = str(tok["access_token"]), str(tok["refresh_token"])
    claims = tokens.verify(access, door.auth_key, door.clock[0])
    assert verify(door, access) is not None
    assert verify(door, rt) is None                                        # a refresh token
    sig = access.rsplit(".", 1)[1]
    flipped = sig[:10] + ("B" if sig[10] != "B" else "C") + sig[11:]
    assert verify(door, access[:-len(sig)] + flipped) is None              # forged
    assert verify(door, tokens.issue(door.auth_key, replace(claims, profile="local"))) is None
    assert verify(door, tokens.issue(door.auth_key, replace(claims, audience="https://other.example/mcp"))) is None
    assert verify(door, tokens.issue(door.auth_key, replace(claims, audience=door.url))) is None
    assert verify(door, tokens.issue(door.auth_key, replace(claims, agent_id="someone.else"))) is None
    # a local credential's session, with a remote-looking token: not a remote grant
    local = door.creds.issue("local-one", door.clock[0], kind=LOCAL).credential
    assert verify(door, tokens.issue(door.auth_key, Claims(local.session_id, local.agent, door.clock[0],
                                                           door.clock[0] + 60, claims.scopes, profile="remote",
                                                           audience=door.server.resource_url))) is None
    door.clock[0] += ACCESS_SECONDS                                        # expired
    assert verify(door, access) is None
    door.clock[0] -= ACCESS_SECONDS
    assert verify(door, access) is not None
    # revoked: the credential removed (as `ownmem agent credential revoke` or the PWA's revoke does)
    name = next(c.name for c in door.creds.all() if c.session_id == claims.session_id)
    door.creds.revoke(name)
    assert verify(door, access) is None
    assert refresh(door, cid, rt).status_code == 400


def test_a_session_revoked_from_another_device_refuses_the_token(door: Door) -> None:
    cid, tok = grant(door)
    access = str(tok["access_token"])
    sid = tokens.verify(access, door.auth_key, door.clock[0]).session_id
    s = door.sessions.get(sid)
    assert s is not None
    door.sessions.end(s, "revoked", door.clock[0])
    assert verify(door, access) is None
    assert refresh(door, cid, str(tok["refresh_token"])).status_code == 400


def test_revocation_by_the_host_ends_the_grant(door: Door) -> None:
    cid, tok = grant(door)
    r = door.http.post("/revoke", data={"token": tok["refresh_token"], "client_id": cid,
                                        "token_type_hint": "refresh_token"})
    assert r.status_code == 200
    assert verify(door, str(tok["access_token"])) is None
    assert not [c for c in door.creds.all() if c.client_id == cid]
