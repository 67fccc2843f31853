"""The MUSTs of UOMP draft-00 sections 7 ("Capability Token"), 8.3 ("Authentication"), 9.4/13.4
("Revoke", "Real-Time Revocation"), 14 ("Local Profile") and 20.1/20.3 (token security), over
real HTTP against a running `ownmem agent`, from the attacker's side: tokens forged, expired,
revoked, replayed at another endpoint, for another profile, or carried where they must not be
(docs/uomp-conformance.md lists which row each test pins)."""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ownmem.agent.sessions import ADMIN_HEADER
from ownmem.uomp.tokens import AuthKey, iso, parse_iso, token_hash
from tests.sync.synckit import Backend, ServerProcess, free_port
from tests.uomp.uompkit import Uomp, UompVault, bearer, code, error_body, sleep_past_expiry, start

READ = {"tags": ["preference"], "keys": ["user.display_name"], "deny_tags": ["financial"], "deny_keys": []}
THEME = "/v1/memory/preference.theme"


def _sign(key: AuthKey, payload: dict[str, Any]) -> str:
    return jwt.encode(payload, key.private, algorithm="EdDSA", headers={"kid": key.kid})


def _audit_reasons(u: Uomp, sid: str) -> list[str]:
    return [e["reason"] for e in u.admin("GET", f"/v1/audit?session_id={sid}").json()["entries"]]


def test_a_granted_token_is_an_eddsa_jwt_with_kid_every_claim_and_profile_local(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    agent, uv, u = start(sqlite_backend, servers, uomp_vault, agents)
    before = int(time.time())
    sid, tok = u.session(READ, minutes=10)
    key = AuthKey.from_seed(uv.auth_seed)
    header = jwt.get_unverified_header(tok)
    assert header["alg"] == "EdDSA" and header["kid"] == key.kid                  # 7.2 SHOULD, kept
    # 20.1: signed by the Auth Service's key (it verifies under that key's public half alone)
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    c = jwt.decode(tok, Ed25519PublicKey.from_public_bytes(key.public), algorithms=["EdDSA"])
    # 7.2: every MUST claim, iat and exp beside them and consistent with issued_at / expires_at
    for name in ("version", "session_id", "agent_id", "issued_at", "expires_at", "scopes", "iat", "exp"):
        assert name in c, name
    assert c["version"] == "1.0" and c["session_id"] == sid and c["agent_id"] == "calendar_agent"
    assert parse_iso(c["issued_at"]) == c["iat"] and parse_iso(c["expires_at"]) == c["exp"]
    assert before <= c["iat"] <= int(time.time()) and c["exp"] - c["iat"] in range(599, 601)
    assert c["scopes"]["read"]["tags"] == ["preference"] and c["scopes"]["read"]["deny_tags"] == ["financial"]
    # 14.1: profile "local"; the audience is this Guard's endpoint
    assert c["profile"] == "local" and c["audience"] == u.base
    listed = {s["session_id"]: s for s in u.admin("GET", "/v1/sessions").json()["sessions"]}
    assert listed[sid]["expires_at"] == c["expires_at"] and listed[sid]["token_hash"] == token_hash(tok)

    # 20.1 / 7.3 step 1 from the attacker's side: the same claims under any other key, or with
    # the key confused for an HMAC secret, or without a kid, are bad signatures
    other = Ed25519PrivateKey.generate()
    hs = jwt.encode(c, key.public.hex(), algorithm="HS256", headers={"kid": key.kid})
    for bad in (jwt.encode(c, other, algorithm="EdDSA", headers={"kid": key.kid}), hs,
                jwt.encode(c, key.private, algorithm="EdDSA"),
                jwt.encode(c, key.private, algorithm="EdDSA", headers={"kid": "0" * 32})):
        error_body(u.get(THEME, bad), 401, "INVALID_TOKEN", None)
        assert u.http.post("/v1/tokens/validate", json={"token": bad}).json()["valid"] is False
    # 7.2: a token missing a MUST claim, signed by the real key, is refused as malformed
    for name in ("version", "session_id", "agent_id", "issued_at", "expires_at", "scopes", "iat", "exp"):
        partial = {k: v for k, v in c.items() if k != name}
        error_body(u.get(THEME, _sign(key, partial)), 401, "INVALID_TOKEN", None)


def test_a_token_replayed_at_another_endpoint_or_for_another_profile_is_refused_and_the_blacklist_stands_alone(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    """7.3 "audience matches the current Memory Guard endpoint", "profile matches the current
    deployment profile", 13.4 "Memory Guard MUST check the blacklist on every request": each
    check isolated, the others passing, on the service as it really runs."""
    agent, uv, u = start(sqlite_backend, servers, uomp_vault, agents)
    sid, tok = u.session(READ)
    assert u.get(THEME, tok).status_code == 200
    home = agent.port
    # the very token the session was granted, replayed at this vault's Guard on another endpoint
    agent.stop()
    agent.port = free_port()
    agent.start()
    away = Uomp(agent.port, uv.vault.folder)
    e = error_body(away.get(THEME, tok), 401, "INVALID_TOKEN", sid)
    assert "audience" in e["message"]
    assert away.http.post("/v1/tokens/validate", json={"token": tok}).json()["valid"] is False
    assert "audience is another endpoint" in _audit_reasons(away, sid)
    agent.stop()
    agent.port = home
    agent.start()
    u = Uomp(agent.port, uv.vault.folder)
    assert u.get(THEME, tok).json()["value"] == "dark"        # it was the endpoint, nothing else

    # a remote-profile token that is, by every other check, the session's own (its hash put in the
    # session row): refused for the profile; so is one with another audience by the same route
    key = AuthKey.from_seed(uv.auth_seed)
    payload = jwt.decode(tok, options={"verify_signature": False})
    remote = _sign(key, {**payload, "profile": "remote"})
    sid_b, tok_b = u.session(READ)
    sid_c, tok_c = u.session(READ)
    moved = _sign(key, {**jwt.decode(tok_c, options={"verify_signature": False}), "audience": "https://evil.example"})
    sid_d, tok_d = u.session(READ)
    assert u.admin("POST", f"/v1/sessions/{sid_d}/revoke").status_code == 200
    agent.stop()
    db = sqlite3.connect(uv.vault.folder / "uomp.db")
    with db:
        for s, t in ((sid, remote), (sid_c, moved)):
            doc = json.loads(db.execute("SELECT doc FROM sessions WHERE session_id = ?", (s,)).fetchone()[0])
            doc["token_hash"] = token_hash(t)
            db.execute("UPDATE sessions SET doc = ? WHERE session_id = ?", (json.dumps(doc), s))
        # the revoked session's row put back to active (an old copy of the row): its token stays blacklisted
        doc = json.loads(db.execute("SELECT doc FROM sessions WHERE session_id = ?", (sid_d,)).fetchone()[0])
        doc.update(status="active", closed_at=None)
        db.execute("UPDATE sessions SET doc = ? WHERE session_id = ?", (json.dumps(doc), sid_d))
    db.close()
    agent.start()
    u = Uomp(agent.port, uv.vault.folder)
    e = error_body(u.get(THEME, remote), 401, "INVALID_TOKEN", sid)
    assert "profile" in e["message"]
    e = error_body(u.get(THEME, moved), 401, "INVALID_TOKEN", sid_c)
    assert "audience" in e["message"]
    e = error_body(u.get(THEME, tok_d), 401, "SESSION_REVOKED", sid_d)
    assert "blacklisted" in e["message"]
    assert u.http.post("/v1/tokens/validate", json={"token": tok_d}).json()["valid"] is False
    assert u.get(THEME, tok_b).status_code == 200             # the untouched session reads on


def test_the_checks_run_in_the_order_of_access_control(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    """10.4: signature, expiry, session, blacklist, quota, aggregation_only, scope: a token
    failing two checks is refused by the earlier one."""
    agent, uv, u = start(sqlite_backend, servers, uomp_vault, agents)
    key = AuthKey.from_seed(uv.auth_seed)
    sid, tok = u.session(READ, minutes=0.1)
    payload = jwt.decode(tok, options={"verify_signature": False})
    assert u.admin("POST", f"/v1/sessions/{sid}/revoke").status_code == 200
    # forged and expired: the signature is checked first
    forged_old = jwt.encode({**payload, "exp": 1, "expires_at": iso(1)}, Ed25519PrivateKey.generate(),
                            algorithm="EdDSA", headers={"kid": key.kid})
    error_body(u.get(THEME, forged_old), 401, "INVALID_TOKEN", None)
    # revoked: SESSION_REVOKED while it lasts, then expired and revoked: TOKEN_EXPIRED
    error_body(u.get(THEME, tok), 401, "SESSION_REVOKED", sid)
    sleep_past_expiry(tok)
    error_body(u.get(THEME, tok), 401, "TOKEN_EXPIRED", None)
    # revoked beats quota, aggregation_only and scope
    sid2, tok2 = u.session(READ, aggregation_only=True, limits={"max_read_queries": 1})
    assert u.get("/v1/memory/aggregate", tok2, tag="preference", op="count").status_code == 200
    # quota (5) comes before aggregation_only (5b) and scope (6)
    error_body(u.get("/v1/memory/user.password", tok2), 429, "QUOTA_EXCEEDED", sid2)
    assert u.admin("POST", f"/v1/sessions/{sid2}/revoke").status_code == 200
    error_body(u.get("/v1/memory/user.password", tok2), 401, "SESSION_REVOKED", sid2)
    # aggregation_only (5b) comes before scope (6): the audit says which check refused
    sid3, tok3 = u.session(READ, aggregation_only=True)
    error_body(u.get("/v1/memory/user.password", tok3), 403, "ACCESS_DENIED", sid3)
    assert "aggregation_only token on a raw-data path" in _audit_reasons(u, sid3)
    # scope (6) before deny (7) before sensitivity (8), each audited with its reason
    # (holding.b: outside the scope and denied; user.password: granted, denied and high)
    sid4, tok4 = u.session({"tags": ["preference"], "keys": ["user.password"],
                            "deny_keys": ["user.password", "holding.b"], "deny_tags": ["financial"]})
    for k in ("user.password", "preference.card", "preference.secret", "holding.b"):
        error_body(u.get(f"/v1/memory/{k}", tok4), 403, "ACCESS_DENIED", sid4)
    assert _audit_reasons(u, sid4)[:4] == ["key not within granted scope", "high-sensitivity item outside an "
                                           "exact-key read", "item carries a denied tag", "key explicitly denied"]


def test_revocation_cuts_off_reads_in_flight_at_once_and_every_endpoint_refuses_the_token(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    """9.4 "Revoke MUST immediately invalidate the corresponding Token", 13.4, and 7.3 for the
    Auth Service's own endpoints: no read that starts after the revoke answered succeeds."""
    agent, uv, u = start(sqlite_backend, servers, uomp_vault, agents)
    sid, tok = u.session(READ)
    seen: list[tuple[float, int]] = []
    stop = threading.Event()

    def reader() -> None:
        with httpx.Client(base_url=u.base, timeout=30) as c:
            while not stop.is_set():
                t0 = time.monotonic()
                seen.append((t0, c.get(THEME, headers=bearer(tok)).status_code))
    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    assert u.admin("POST", f"/v1/sessions/{sid}/revoke").json() == {"session_id": sid, "status": "revoked"}
    revoked = time.monotonic()
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join()
    before = [s for t0, s in seen if t0 < revoked]
    after = [s for t0, s in seen if t0 > revoked]
    assert 200 in before and after, (len(before), len(after))
    assert set(after) == {401}, after
    # the token opens no other door either (7.3: the Auth Service checks too)
    assert u.http.post("/v1/tokens/validate", json={"token": tok}).json()["valid"] is False
    error_body(u.get("/v1/audit", tok), 401, "SESSION_REVOKED", sid)
    error_body(u.post(f"/v1/sessions/{sid}/deletion-proof", tok, {}), 401, "SESSION_REVOKED", sid)
    error_body(u.post("/v1/memory/query", tok, {"query": "dark"}), 401, "SESSION_REVOKED", sid)
    error_body(u.get("/v1/memory/aggregate", tok, tag="preference", op="count"), 401, "SESSION_REVOKED", sid)


def test_the_token_travels_only_in_the_authorization_header_and_is_kept_nowhere(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any], tmp_path: Path) -> None:
    """8.3 "All Agent requests MUST include the Token in the HTTP header Authorization: Bearer";
    20.1 "Tokens MUST NOT be persisted to locations freely accessible by the Agent" (the service
    keeps its hash only); 20.3 the service does not log it."""
    agent, uv, u = start(sqlite_backend, servers, uomp_vault, agents)
    sid, tok = u.session(READ)
    assert u.http.get(THEME, headers={"authorization": f"bearer {tok}"}).status_code == 200   # RFC 6750: any case
    wheres: list[dict[str, Any]] = [
        {"params": {"token": tok}}, {"params": {"access_token": tok}},
        {"headers": {"Authorization": tok}}, {"headers": {"Authorization": f"Token {tok}"}},
        {"headers": {"Authorization": f"Basic {tok}"}}, {"headers": {ADMIN_HEADER: tok}},
        {"headers": {"X-UOM-Token": tok}}, {"headers": {"Cookie": f"token={tok}"}}]
    for where in wheres:
        r = u.http.get(THEME, **where)
        error_body(r, 401, "INVALID_TOKEN", None)
    assert code(u.get("/v1/memory/user.password", tok)) == "ACCESS_DENIED"
    assert u.admin("POST", f"/v1/sessions/{sid}/close").status_code == 200
    listed = u.admin("GET", "/v1/sessions").text + u.admin("GET", "/v1/audit").text
    agent.stop()
    sig = tok.split(".")[2]
    assert tok not in listed and sig not in listed
    assert uv.vault.folder.is_relative_to(tmp_path) and agent.log.is_relative_to(tmp_path) and agent.log.exists()
    for f in [p for p in tmp_path.rglob("*") if p.is_file()]:
        raw = f.read_bytes()
        assert tok.encode() not in raw and sig.encode() not in raw, f


def _listening(port: int) -> set[str]:
    """The local addresses of the sockets listening on ``port`` (Linux /proc/net/tcp{,6})."""
    out = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(name).read_text().splitlines()[1:]:
            local, st = line.split()[1], line.split()[3]
            addr, p = local.split(":")
            if st == "0A" and int(p, 16) == port:
                out.add(addr)
    return out


def test_the_guard_listens_on_loopback_only_and_defaults_to_127_0_0_1_9374(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    """14.1 "MUST listen on 127.0.0.1:9374 by default", "MUST NOT bind to 0.0.0.0 or public
    interfaces by default" (another address is refused outright: tests/agent/test_operator.py::
    test_the_service_refuses_any_bind_address_but_loopback)."""
    from ownmem.cli import parser

    args = parser().parse_args(["agent"])
    assert (args.host, args.port) == ("127.0.0.1", 9374)        # the default, not bound here (a shared machine)
    agent, uv, u = start(sqlite_backend, servers, uomp_vault, agents)
    assert _listening(agent.port) == {"0100007F"}                # 127.0.0.1, nothing else, no IPv6 wildcard
    sid, tok = u.session(READ)
    assert jwt.decode(tok, options={"verify_signature": False})["audience"] == f"http://127.0.0.1:{agent.port}"
