"""The OAuth 2.1 authorization server of `ownmem agent` and its token verifier (issue 21 Build
items 3-5; UOMP draft-00 "15. Remote Profile", "15.5 Token Refresh"): what a remote MCP host
(Claude, ChatGPT) goes through to reach /mcp.

    discovery   RFC 9728 /.well-known/oauth-protected-resource/mcp -> RFC 8414 metadata
    client      a CIMD URL (cimd.CimdFetcher) or a client registered by DCR (oauth_store)
    /authorize  PKCE S256, exact redirect_uri, resource = RESOURCE -> the consent page (consent.py)
    consent     the person's passphrase -> a REMOTE credential (credentials.py) whose session
                (guarded.session_for) the person's devices list and revoke -> a code (60 s, once)
    /token      code -> access token = a UOMP capability token (profile "remote", audience the
                /mcp URL, at most ACCESS_SECONDS) + a refresh token (opaque, hashed, rotated);
                a replayed code or a reused refresh token revokes the grant
    verify      the capability token, its profile and audience, a live REMOTE credential and an
                active, unblacklisted session -> RemoteAccess (the lead's /mcp takes it)

The SDK's handlers (mcp.server.auth.handlers) do the protocol; the routes here check first what
the SDK leaves open (raw redirect_uri match, PKCE method, resource, public clients only).
"""
from __future__ import annotations

import hmac
import json
import logging
import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import anyio.to_thread
from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.metadata import MetadataHandler, ProtectedResourceMetadataHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.revoke import RevocationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.middleware.client_auth import ClientAuthenticator
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    RegistrationError,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import ClientRegistrationOptions
from mcp.server.transport_security import RequestBodyLimitMiddleware
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken, ProtectedResourceMetadata
from pydantic import AnyUrl, ConfigDict
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, request_response
from starlette.types import ASGIApp, Message

from ownmem.agent.audit import AuditEntry, AuditLog, new_id
from ownmem.agent.cimd import CimdFetcher, CimdRefused
from ownmem.agent.consent import Choice, Consent, Pending, message
from ownmem.agent.credentials import REMOTE, Credential, CredentialFile
from ownmem.agent.guarded import expires_at, scopes_of, session_for, token_hash_of
from ownmem.agent.oauth_store import REFRESH_PREFIX, REFRESH_SECONDS, OAuthStore, RefreshRow, new_refresh_token
from ownmem.agent.sessions import SessionStore
from ownmem.aperto.keys import master_from_passphrase
from ownmem.crypto import run_sync
from ownmem.errors import MalformedInput, NotFound, VaultError
from ownmem.uomp import tokens
from ownmem.uomp.errors import InvalidToken, TokenExpired
from ownmem.uomp.remote import LIFETIMES, cimd_url, grant_name, origin_of, redirect_uri_ok
from ownmem.uomp.tokens import AuthKey, Claims
from ownmem.vault.vault import UnlockedVault

_log = logging.getLogger("ownmem.agent")
# UOMP "15.2 Security Requirements": a remote token SHOULD not outlive 10 minutes (refresh tokens
# carry the rest); issue 21 asks at most an hour: the spec's bound is within it
ACCESS_SECONDS = 600
CODE_SECONDS = 60
MAX_CODES = 64
USED_CODE_SECONDS = 600          # a replay is recognised this long after the code's one use
MAX_BODY = 64 * 1024
MAX_REDIRECT_URIS = 20
RESOURCE_PATH = "/mcp"
PRM_PATH = "/.well-known/oauth-protected-resource"
_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")      # base64url(SHA-256), no padding (RFC 7636 4.2)


class RemoteAccess(AccessToken):
    """A verified access token of a remote host: its grant and its claims."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    credential: Credential       # kind REMOTE, live
    # verified: profile "remote", audience = resource_url (not named ``claims``: that field is the
    # SDK's dict of JWT claims, which it reads "iss" from; it carries {"iss": the issuer})
    capability: Claims


class Code(AuthorizationCode):
    credential: str              # the grant's credential name
    session_id: str
    issued: int


class Refresh(RefreshToken):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    row: RefreshRow


def resource_metadata_url(public_url: str) -> str:
    """The RFC 9728 metadata URL of /mcp, for the WWW-Authenticate of a 401 at /mcp."""
    return public_url + PRM_PATH + RESOURCE_PATH


def passphrase_checker(vault: UnlockedVault) -> Callable[[str], bool]:
    """True iff the typed passphrase unlocks this vault (its master secret, compared in constant
    time); runs Argon2id, so callers run it in a thread."""
    pub = vault.store.identity()
    if pub is None:
        raise VaultError("there is no vault here yet")
    salt, crypto = pub.salt, vault.crypto

    def check(passphrase: str) -> bool:
        try:
            master = run_sync(master_from_passphrase(crypto, passphrase, salt))
            return hmac.compare_digest(master, vault.identity.master)
        except (MalformedInput, VaultError):       # not text; or the vault was locked meanwhile
            return False
    return check


def _public_url_ok(url: str) -> bool:
    u = urlsplit(url)
    return (u.path == "" and not u.query and not u.fragment and bool(u.hostname)
            and (u.scheme == "https" or (u.scheme == "http" and redirect_uri_ok(url + "/"))))


def _json_error(error: str, description: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": error, "error_description": description}, status_code=status,
                        headers={"Cache-Control": "no-store"})


def _cors(app: ASGIApp, methods: list[str]) -> ASGIApp:
    # as the SDK's routes: the metadata, token, registration and revocation endpoints are called
    # by browser-based clients too; the authorize and consent pages never are (no CORS)
    return CORSMiddleware(app, allow_origins="*", allow_methods=methods, allow_headers=["mcp-protocol-version"])


def _limited(app: ASGIApp) -> ASGIApp:
    return RequestBodyLimitMiddleware(app, MAX_BODY)


def _replayed(request: Request, body: bytes) -> Request:
    """``request`` with ``body`` as its body (the SDK's handler reads a body we rewrote)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}
    return Request(request.scope, receive)


class OAuthServer(OAuthAuthorizationServerProvider[Code, Refresh, RemoteAccess]):
    def __init__(self, *, folder: Path, creds: CredentialFile, auth_key: AuthKey, sessions: SessionStore,
                 audit: AuditLog, public_url: str, check_passphrase: Callable[[str], bool],
                 now: Callable[[], int] = lambda: int(time.time()), fetcher: CimdFetcher | None = None) -> None:
        if not _public_url_ok(public_url):
            raise ValueError("the public URL is https://HOST[:PORT] (or http on loopback), without a path")
        self.public_url = self.issuer = public_url
        self.resource_url = public_url + RESOURCE_PATH
        self.creds, self.auth_key, self.sessions, self.audit, self.now = creds, auth_key, sessions, audit, now
        self.store = OAuthStore(Path(folder))
        self.fetcher = fetcher if fetcher is not None else CimdFetcher.from_env()
        self.codes: dict[str, Code] = {}
        self.used_codes: dict[str, tuple[int, Code]] = {}
        # the consent form's key: the pending requests it protects live in this process only
        self.consent = Consent(secrets.token_bytes(32), origin_of(public_url), check_passphrase, now,
                               self._approve, self._deny_url, self._refused)

    def resource_metadata_url(self) -> str:
        return resource_metadata_url(self.public_url)

    def close(self) -> None:
        self.store.close()

    # ------------------------------------------------------------------ the routes
    def metadata(self) -> OAuthMetadata:
        u = self.public_url
        return OAuthMetadata.model_validate({
            "issuer": u, "authorization_endpoint": u + "/authorize", "token_endpoint": u + "/token",
            "registration_endpoint": u + "/register", "revocation_endpoint": u + "/revoke",
            "response_types_supported": ["code"], "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none"], "revocation_endpoint_auth_methods_supported": ["none"],
            "code_challenge_methods_supported": ["S256"], "client_id_metadata_document_supported": True,
            "authorization_response_iss_parameter_supported": True})

    def routes(self) -> list[BaseRoute]:
        prm = ProtectedResourceMetadataHandler(ProtectedResourceMetadata.model_validate(
            {"resource": self.resource_url, "authorization_servers": [self.public_url]}))
        auth = ClientAuthenticator(self)
        self._authorize_handler = AuthorizationHandler(self)
        self._token_handler = TokenHandler(self, auth)
        self._register_handler = RegistrationHandler(self, ClientRegistrationOptions(enabled=True))
        self._revoke_handler = RevocationHandler(self, auth)
        get, post = ["GET", "OPTIONS"], ["POST", "OPTIONS"]
        return [
            Route("/.well-known/oauth-authorization-server",
                  _cors(request_response(MetadataHandler(self.metadata()).handle), get), methods=get),
            Route(PRM_PATH + RESOURCE_PATH, _cors(request_response(prm.handle), get), methods=get),
            Route(PRM_PATH, _cors(request_response(prm.handle), get), methods=get),
            Route("/authorize", self._authorize, methods=["GET"]),
            Route("/token", _cors(_limited(request_response(self._token)), post), methods=post),
            Route("/register", _cors(_limited(request_response(self._register)), post), methods=post),
            Route("/revoke", _cors(_limited(request_response(self._revoke)), post), methods=post),
            Route("/consent", self.consent.show, methods=["GET"]),
            Route("/consent", _limited(request_response(self.consent.decide)), methods=["POST"]),
        ]

    async def _authorize(self, request: Request) -> Response:
        """What the SDK's handler does not check, before it runs: the client is known, the raw
        redirect_uri is one it registered character for character (else a page, never a
        redirect), PKCE is S256, the resource is /mcp.  Errors after that go back to the client
        with ``iss`` (RFC 9207)."""
        q = request.query_params
        client_id, raw = q.get("client_id"), q.get("redirect_uri")
        client = await self.get_client(client_id) if client_id else None
        if client is None:
            return message("Unknown application", "This application is not registered here.", 400)
        if raw is None or raw not in {str(u) for u in client.redirect_uris or []}:
            return message("Wrong return address", "This application did not register that return address.", 400)
        state = q.get("state")

        def fail(error: str, description: str) -> Response:
            return Response(status_code=302, headers={"Location": construct_redirect_uri(
                raw, error=error, error_description=description, state=state, iss=self.issuer),
                "Cache-Control": "no-store"})
        if q.get("response_type") != "code":
            return fail("unsupported_response_type", "response_type must be code")
        if q.get("code_challenge_method") != "S256" or not _CHALLENGE.fullmatch(q.get("code_challenge") or ""):
            return fail("invalid_request", "PKCE with code_challenge_method S256 is required")
        resource = q.get("resource")
        if resource is not None and resource != self.resource_url:
            return fail("invalid_target", f"the only resource here is {self.resource_url}")
        # the scope a host asks for is not the grant: the person chooses it on the page
        qs = request.scope["query_string"].split(b"&")
        scope = {**request.scope, "query_string": b"&".join(p for p in qs if p.split(b"=", 1)[0] != b"scope")}
        r: Response = await self._authorize_handler.handle(Request(scope, request.receive))
        loc = r.headers.get("location", "")
        if r.status_code == 302 and not loc.startswith("/consent?"):
            r.headers["location"] = construct_redirect_uri(loc, iss=self.issuer)
        return r

    async def _token(self, request: Request) -> Response:
        form = await request.form()      # kept by the request: the SDK's handler reads it again
        resource = form.get("resource")
        if resource is not None and resource != self.resource_url:
            return _json_error("invalid_target", f"the only resource here is {self.resource_url}")
        r: Response = await self._token_handler.handle(request)
        return r

    async def _register(self, request: Request) -> Response:
        """DCR (RFC 7591) for public clients: each redirect URI https or http on loopback, kept
        exactly as written; the auth method is always "none" (RFC 7591 3.2.1 lets the server
        replace what was asked: no client secret is ever issued or stored)."""
        try:
            doc = json.loads(await request.body())
        except ValueError:
            return _json_error("invalid_client_metadata", "the body is not JSON")
        uris = doc.get("redirect_uris") if isinstance(doc, dict) else None
        if not isinstance(uris, list) or not 0 < len(uris) <= MAX_REDIRECT_URIS or not all(
                isinstance(u, str) and redirect_uri_ok(u) and str(AnyUrl(u)) == u for u in uris):
            return _json_error("invalid_redirect_uri", "redirect_uris: 1 to 20, each https or http on loopback")
        assert isinstance(doc, dict)
        doc["token_endpoint_auth_method"] = "none"
        return await self._register_handler.handle(_replayed(request, json.dumps(doc).encode()))

    async def _revoke(self, request: Request) -> Response:
        """RFC 7009 for public clients: the SDK's request model requires a client_secret field,
        which a public client has none of (it is sent empty to the SDK's handler)."""
        form = await request.form()
        if "client_secret" in form:
            r: Response = await self._revoke_handler.handle(request)
            return r
        body = urlencode([*((k, v) for k, v in form.multi_items() if isinstance(v, str)), ("client_secret", "")])
        r = await self._revoke_handler.handle(_replayed(request, body.encode()))
        return r

    # ------------------------------------------------------------------ clients
    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        if cimd_url(client_id):
            try:
                return await self.fetcher.fetch(client_id)
            except CimdRefused as e:
                _log.warning("client id metadata document %s refused: %s", client_id[:200], e)
                return None
        return self.store.client(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        def holds_grant(cid: str) -> bool:
            return any(c.kind == REMOTE and c.client_id == cid for c in self.creds.all())
        if not await anyio.to_thread.run_sync(self.store.add_client, client_info, self.now(), holds_grant):
            raise RegistrationError("invalid_client_metadata", "too many registered clients")

    # ------------------------------------------------------------------ consent
    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        p = self.consent.add(client, params, str(params.redirect_uri))
        return f"/consent?request={p.id}"

    def _deny_url(self, p: Pending) -> str:
        return construct_redirect_uri(p.redirect_uri, error="access_denied", state=p.params.state, iss=self.issuer)

    async def _refused(self, p: Pending, reason: str) -> None:
        await self.audit.arecord(AuditEntry(new_id(), self.now(), "", "", "consent", p.client.client_id, None, (),
                                            False, reason))

    async def _approve(self, p: Pending, choice: Choice) -> str:
        now, client = self.now(), p.client
        issued = await anyio.to_thread.run_sync(lambda: self.creds.issue(
            grant_name(client.client_name), now, expires_days=choice.lifetime / 86400, tags=choice.tags,
            deny_tags=choice.deny_tags, write=choice.write, kind=REMOTE, client_id=client.client_id))
        cred = issued.credential
        # the session now, not at the guard's next reconcile: the token is usable at once
        await anyio.to_thread.run_sync(self.sessions.put, session_for(cred))
        host = urlsplit(p.redirect_uri).netloc
        await self.audit.arecord(AuditEntry(
            new_id(), now, cred.session_id, cred.agent, "consent", client.client_id, None, choice.tags, True,
            f"consent given to {client.client_name or client.client_id} (returns to {host}) for "
            f"{LIFETIMES[str(choice.lifetime)]}: {cred.grant_text()}"))
        self.codes = {k: c for k, c in self.codes.items() if now - c.issued < CODE_SECONDS}
        while len(self.codes) >= MAX_CODES:
            self.codes.pop(next(iter(self.codes)))
        code = secrets.token_urlsafe(32)
        self.codes[code] = Code(code=code, scopes=[], expires_at=time.time() + CODE_SECONDS,
                                client_id=client.client_id, code_challenge=p.params.code_challenge,
                                redirect_uri=p.params.redirect_uri, redirect_uri_provided_explicitly=True,
                                resource=p.params.resource, credential=cred.name, session_id=cred.session_id,
                                issued=now)
        return construct_redirect_uri(p.redirect_uri, code=code, state=p.params.state, iss=self.issuer)

    # ------------------------------------------------------------------ grants
    def _credential(self, name: str, client_id: str | None = None) -> Credential | None:
        now = self.now()
        for c in self.creds.all():
            if c.name == name and c.kind == REMOTE and c.live(now) and (client_id is None or c.client_id == client_id):
                return c
        return None

    async def _revoke_grant(self, name: str, session_id: str, client_id: str, reason: str) -> None:
        """End a grant: its credential, its session (the person's devices see it revoked), its
        refresh tokens; audited."""
        now = self.now()
        agent = next((c.agent for c in self.creds.all() if c.name == name), "")

        def revoke() -> None:
            try:
                self.creds.revoke(name)
            except NotFound:
                pass
            s = self.sessions.get(session_id)
            if s is not None and s.status in ("created", "active"):
                self.sessions.end(s, "revoked", now)
            self.store.forget_session(session_id)
        await anyio.to_thread.run_sync(revoke)
        _log.warning("remote grant %s revoked: %s", name, reason)
        await self.audit.arecord(AuditEntry(new_id(), now, session_id, agent, "revoked", client_id, None, (), False,
                                            reason))

    async def _tokens(self, cred: Credential, client_id: str) -> OAuthToken:
        now = self.now()
        ends = expires_at(cred)
        life = min(ACCESS_SECONDS, ends - now)
        if life <= 0:
            raise TokenError("invalid_grant", "the grant has expired")
        claims = Claims(cred.session_id, cred.agent, now, now + life, scopes_of(cred), profile="remote",
                        audience=self.resource_url)
        refresh = new_refresh_token()
        await anyio.to_thread.run_sync(self.store.add_refresh, refresh, cred.name, cred.session_id, client_id, now,
                                       min(now + REFRESH_SECONDS, ends))
        return OAuthToken(access_token=tokens.issue(self.auth_key, claims), expires_in=life, refresh_token=refresh)

    async def load_authorization_code(self, client: OAuthClientInformationFull, authorization_code: str) -> Code | None:
        now = self.now()
        self.used_codes = {k: v for k, v in self.used_codes.items() if now - v[0] < USED_CODE_SECONDS}
        used = self.used_codes.get(authorization_code)
        if used is not None:
            await self._revoke_grant(used[1].credential, used[1].session_id, used[1].client_id,
                                     "authorization code replayed")
            return None
        c = self.codes.get(authorization_code)
        if c is None or now - c.issued >= CODE_SECONDS or c.client_id != client.client_id:
            return None
        return c

    async def exchange_authorization_code(self, client: OAuthClientInformationFull,
                                          authorization_code: Code) -> OAuthToken:
        c = self.codes.pop(authorization_code.code, None)
        if c is None:         # used meanwhile (two requests raced): a replay
            await self._revoke_grant(authorization_code.credential, authorization_code.session_id,
                                     authorization_code.client_id, "authorization code replayed")
            raise TokenError("invalid_grant", "authorization code already used")
        self.used_codes[c.code] = (self.now(), c)
        cred = self._credential(c.credential, client.client_id)
        if cred is None:
            raise TokenError("invalid_grant", "the grant was revoked")
        return await self._tokens(cred, client.client_id)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> Refresh | None:
        row = self.store.refresh(refresh_token) if refresh_token.startswith(REFRESH_PREFIX) else None
        if row is None or row.client_id != client.client_id:
            return None
        if row.rotated is not None:
            await self._revoke_grant(row.credential, row.session_id, row.client_id, "refresh token reused")
            return None
        if row.expires <= self.now() or not self._session_live(row.credential, row.session_id):
            return None
        return Refresh(token=refresh_token, client_id=row.client_id, scopes=[], resource=self.resource_url, row=row)

    def _session_live(self, name: str, session_id: str) -> bool:
        cred = self._credential(name)
        s = self.sessions.get(session_id)
        return (cred is not None and cred.session_id == session_id and s is not None
                and s.state(self.now()) == "active" and not self.sessions.blacklisted(token_hash_of(cred)))

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: Refresh,
                                     scopes: list[str]) -> OAuthToken:
        row = refresh_token.row
        if not await anyio.to_thread.run_sync(self.store.rotate, row.token_hash, self.now()):
            await self._revoke_grant(row.credential, row.session_id, row.client_id, "refresh token reused")
            raise TokenError("invalid_grant", "refresh token already used")
        cred = self._credential(row.credential, client.client_id)
        if cred is None:
            raise TokenError("invalid_grant", "the grant was revoked")
        return await self._tokens(cred, client.client_id)

    async def load_access_token(self, token: str) -> RemoteAccess | None:
        return await self.verify_token(token)

    async def revoke_token(self, token: RemoteAccess | Refresh) -> None:
        """RFC 7009: the host gives the grant up; the whole grant ends (its session, every token)."""
        if isinstance(token, RemoteAccess):
            c = token.credential
            await self._revoke_grant(c.name, c.session_id, c.client_id, "revoked by the host (RFC 7009)")
        else:
            await self._revoke_grant(token.row.credential, token.row.session_id, token.row.client_id,
                                     "revoked by the host (RFC 7009)")

    # ------------------------------------------------------------------ the resource's check
    async def verify_token(self, token: str) -> RemoteAccess | None:
        """The access token of a remote host, or None for anything else (a refresh token, a
        local-profile token, another audience, an expired one, a revoked grant or session)."""
        if not token or token.startswith(REFRESH_PREFIX):
            return None
        now = self.now()
        try:
            claims = tokens.verify(token, self.auth_key, now)
        except (InvalidToken, TokenExpired):
            return None
        if claims.profile != "remote" or claims.audience != self.resource_url:
            return None
        cred = next((c for c in self.creds.all() if c.id and c.session_id == claims.session_id), None)
        if cred is None or cred.kind != REMOTE or not cred.live(now) or cred.agent != claims.agent_id:
            return None
        s = self.sessions.get(claims.session_id)
        if (s is None or s.state(now) != "active" or self.sessions.blacklisted(token_hash_of(cred))
                or self.sessions.blacklisted(tokens.token_hash(token))):
            return None
        return RemoteAccess(token=token, client_id=cred.client_id, scopes=[], expires_at=claims.expires_at,
                            resource=self.resource_url, credential=cred, capability=claims,
                            claims={"iss": self.issuer})

