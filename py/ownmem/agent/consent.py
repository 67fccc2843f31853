"""The consent page of the OAuth door (issue 21 Build item 4): server-rendered HTML, no script,
where the person sees who asks (name, logo, client id, redirect host) and what, types the tags
to allow and deny (never listed: the page is shown before any passphrase), read or
read-write, and a lifetime, and approves with their passphrase.

    GET  /consent?request=ID   the page (a pending authorization request, kept PENDING_SECONDS)
    POST /consent              Origin, if present, must be the public URL's; the form token must be
                               remote.form_token(key, ID); deny -> the client's redirect with
                               error=access_denied; approve -> the passphrase checked (in a thread,
                               one check at a time, a global backoff after a wrong one, MAX_ATTEMPTS
                               per request, then the request is void) -> the grant, a code, redirect

Every page carries HEADERS (no framing, no script, nothing cached, no referrer to another site).  The grant
itself is made by the caller's ``approve`` (oauth.OAuthServer): this module holds the page.
"""
from __future__ import annotations

import html
import logging
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import anyio.to_thread
from mcp.server.auth.provider import AuthorizationParams
from mcp.shared.auth import OAuthClientInformationFull
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ownmem.agent.credentials import ANY_TAG, MAX_SCOPE, MAX_SCOPE_NAME
from ownmem.uomp.remote import LIFETIMES, backoff, form_token, form_token_ok

_log = logging.getLogger("ownmem.agent")
PENDING_SECONDS = 600
MAX_PENDING = 64
MAX_ATTEMPTS = 5
MAX_PASSPHRASE = 1024
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src https:; "
                               "form-action 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    # same-origin, not no-referrer: under no-referrer browsers send "Origin: null" with the form's
    # POST, which the door (and decide) must refuse; nothing leaves for another origin either way
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}
_STYLE = ("body{font-family:system-ui,sans-serif;max-width:40rem;margin:1.5rem auto;padding:0 1rem;color:#222;"
          "line-height:1.4}fieldset{margin:1rem 0;border:1px solid #ccc;border-radius:6px}"
          "label{display:block;margin:.4rem 0;min-height:44px}"
          "input:not([type]),input[type=password],select{display:block;box-sizing:border-box;width:100%;"
          "font-size:1rem;min-height:44px;padding:.4rem;margin-top:.2rem}"
          "input[type=checkbox],input[type=radio]{width:22px;height:22px;vertical-align:middle;margin-right:.5rem}"
          ".err{color:#a00;font-weight:bold}img{max-width:64px;max-height:64px;float:right}"
          "button{font-size:1rem;min-height:48px;padding:.5rem 1.5rem;margin:.5rem 1rem .5rem 0}"
          "code{word-break:break-all}")


@dataclass
class Pending:
    """An authorization request waiting for the person's decision."""

    id: str
    client: OAuthClientInformationFull
    params: AuthorizationParams
    redirect_uri: str            # exactly as the client sent it (and registered it)
    created: int
    attempts: int = 0


@dataclass(frozen=True, slots=True)
class Choice:
    tags: tuple[str, ...]
    deny_tags: tuple[str, ...]
    write: bool
    lifetime: int                # seconds, one of remote.LIFETIMES


_ORIGIN = re.compile(r"https?://[A-Za-z0-9.\-]+(:[0-9]{1,5})?|http://\[[0-9a-fA-F:]+\](:[0-9]{1,5})?")


def headers_for(p: Pending) -> dict[str, str]:
    """HEADERS, with the client's redirect origin added to form-action: browsers apply
    form-action to the redirect that answers the form too, so with 'self' alone the person's
    approval would never reach the host."""
    u = urlsplit(p.redirect_uri)
    target = f"{u.scheme}://{u.netloc}"
    if not _ORIGIN.fullmatch(target):           # registered URIs passed the parser; never a CSP token
        return HEADERS
    return {**HEADERS, "Content-Security-Policy": HEADERS["Content-Security-Policy"].replace(
        "form-action 'self'", f"form-action 'self' {target}")}


def _e(s: object) -> str:
    return html.escape(str(s), quote=True)


def message(title: str, text: str, status: int) -> HTMLResponse:
    body = (f"<!doctype html><html lang=en><meta charset=utf-8><title>{_e(title)}</title><style>{_STYLE}</style>"
            f"<h1>{_e(title)}</h1><p>{_e(text)}</p></html>")
    return HTMLResponse(body, status_code=status, headers=HEADERS)


def render(p: Pending, token: str, error: str | None = None) -> str:
    c = p.client
    name = c.client_name or "An application"
    logo = str(c.logo_uri) if c.logo_uri is not None and str(c.logo_uri).startswith("https://") else None
    host = urlsplit(p.redirect_uri).netloc
    # the tags are typed, never listed: this page is shown to whoever starts an authorization,
    # before any passphrase, and a vault's tag names ("health", "divorce") are the person's own
    rows_allow = [f'<label><input type=checkbox name=allow value="{ANY_TAG}"> every memory (all tags and '
                  "untagged ones)</label>",
                  "<label>or these tags, separated by commas <input name=allow autocomplete=off "
                  "placeholder='e.g. recipes, projects'></label>"]
    rows_deny = ["<label>Tags it may never read, separated by commas <input name=deny autocomplete=off "
                 "placeholder='e.g. finances'></label>"]
    lifetimes = "".join(f'<option value="{s}"{" selected" if s == "86400" else ""}>{_e(t)}</option>'
                        for s, t in LIFETIMES.items())
    err = f'<p class=err role=alert>{_e(error)}</p>' if error else ""
    img = f'<img src="{_e(logo)}" alt="">' if logo else ""
    return (
        f"<!doctype html><html lang=en><meta charset=utf-8><meta name=viewport content='width=device-width'>"
        f"<title>Allow {_e(name)}?</title><style>{_STYLE}</style>{img}"
        f"<h1>{_e(name)} asks to use your memories</h1>"
        f"<p>Client: <code>{_e(c.client_id)}</code><br>It will be sent back to <b>{_e(host)}</b>.</p>"
        f"<p>It asks to read your memories and to propose new ones (a proposal waits for your confirmation). "
        f"It never sees high-sensitivity memories, and you can revoke it from any of your devices.</p>{err}"
        f"<form method=post action=/consent><input type=hidden name=request value='{_e(p.id)}'>"
        f"<input type=hidden name=token value='{_e(token)}'>"
        f"<fieldset><legend>Memories it may read</legend>{''.join(rows_allow)}</fieldset>"
        + f"<fieldset><legend>Never these tags</legend>{''.join(rows_deny)}</fieldset>"
        + "<fieldset><legend>Access</legend>"
        "<label><input type=radio name=access value=read checked> read only</label>"
        "<label><input type=radio name=access value=write> read, and propose memories (staged for you)</label>"
        f"</fieldset><label>For <select name=lifetime>{lifetimes}</select></label>"
        "<p><label>Your passphrase <input type=password name=passphrase autocomplete=current-password "
        "required></label></p>"
        "<button name=action value=approve>Allow</button><button name=action value=deny formnovalidate>Deny"
        "</button></form></html>")


def _tag_list(form: FormData, name: str) -> list[str]:
    """Every tag of the fields named ``name``: the "*" box, and the typed lists split at commas."""
    return [t.strip() for v in form.getlist(name) if isinstance(v, str) for t in v.split(",") if t.strip()]


def parse_choice(form: FormData) -> Choice | str:
    """The person's choice from the form, or what is wrong with it (shown on the page again)."""
    allow, deny = _tag_list(form, "allow"), _tag_list(form, "deny")
    if len(allow) > MAX_SCOPE or len(deny) > MAX_SCOPE or any(
            len(t) > MAX_SCOPE_NAME or not t.isprintable() for t in allow + deny) or ANY_TAG in deny:
        return f"Tags are at most {MAX_SCOPE_NAME} printable characters each, and * cannot be denied."
    if not allow:
        return "Choose at least one tag it may read (or every memory)."
    access, lifetime = form.get("access"), form.get("lifetime")
    if access not in ("read", "write") or not isinstance(lifetime, str) or lifetime not in LIFETIMES:
        return "Choose the access and how long it lasts."
    return Choice(tuple(dict.fromkeys(allow)), tuple(dict.fromkeys(deny)), access == "write", int(lifetime))


@dataclass
class Consent:
    """The pending requests and the two routes of the page (module docstring)."""

    form_key: bytes
    origin: str                                          # the public URL's origin
    check_passphrase: Callable[[str], bool]
    now: Callable[[], int]
    approve: Callable[[Pending, Choice], Awaitable[str]]        # -> the client's redirect URL
    deny_url: Callable[[Pending], str]                          # -> the client's access_denied redirect
    refused: Callable[[Pending, str], Awaitable[None]]          # audit a refusal or a voided request
    pending: dict[str, Pending] = field(default_factory=dict)
    failures: int = 0                                    # wrong passphrases in a row, any request
    next_check: int = 0                                  # no check before (the global backoff)
    _lock: anyio.Lock = field(default_factory=anyio.Lock)

    def add(self, client: OAuthClientInformationFull, params: AuthorizationParams, redirect_uri: str) -> Pending:
        now = self.now()
        self.pending = {k: v for k, v in self.pending.items() if now - v.created < PENDING_SECONDS}
        while len(self.pending) >= MAX_PENDING:
            self.pending.pop(next(iter(self.pending)))         # the oldest
        p = Pending(secrets.token_urlsafe(24), client, params, redirect_uri, now)
        self.pending[p.id] = p
        return p

    def get(self, request_id: object) -> Pending | None:
        p = self.pending.get(request_id) if isinstance(request_id, str) else None
        if p is not None and self.now() - p.created >= PENDING_SECONDS:
            self.pending.pop(p.id, None)
            return None
        return p

    def _page(self, p: Pending, error: str | None = None, status: int = 200) -> HTMLResponse:
        return HTMLResponse(render(p, form_token(self.form_key, p.id), error), status_code=status,
                            headers=headers_for(p))

    async def show(self, request: Request) -> Response:
        p = self.get(request.query_params.get("request"))
        if p is None:
            return message("This request has expired", "Start again from your assistant.", 400)
        return self._page(p)

    async def decide(self, request: Request) -> Response:
        origin = request.headers.get("origin")
        if origin is not None and origin != self.origin:
            return message("Refused", "This form can only be sent from its own page.", 403)
        form = await request.form()
        rid, token = form.get("request"), form.get("token")
        if not isinstance(rid, str) or not isinstance(token, str) or not form_token_ok(self.form_key, rid, token):
            return message("Refused", "This form is not one this page made.", 403)
        p = self.get(rid)
        if p is None:
            return message("This request has expired", "Start again from your assistant.", 400)
        if form.get("action") == "deny":
            self.pending.pop(p.id, None)
            await self.refused(p, "consent refused by the person")
            return RedirectResponse(self.deny_url(p), status_code=303, headers=headers_for(p))
        choice = parse_choice(form)
        if isinstance(choice, str):
            return self._page(p, choice, 400)
        passphrase = form.get("passphrase")
        if not isinstance(passphrase, str) or not passphrase or len(passphrase) > MAX_PASSPHRASE:
            return self._page(p, "Type your passphrase to allow it.", 400)
        async with self._lock:               # one check at a time
            wait = self.next_check - self.now()
            if wait > 0:
                return self._page(p, f"Too many wrong passphrases: try again in {wait} s.", 429)
            ok = await anyio.to_thread.run_sync(self.check_passphrase, passphrase)
            if p.id not in self.pending:
                return message("Already decided", "This request was decided meanwhile.", 409)
            if not ok:
                self.failures += 1
                self.next_check = self.now() + backoff(self.failures)
                p.attempts += 1
                if p.attempts >= MAX_ATTEMPTS:
                    self.pending.pop(p.id, None)
                    await self.refused(p, f"consent void after {MAX_ATTEMPTS} wrong passphrases")
                    return message("Request void", "Too many wrong passphrases: start again from your "
                                   "assistant.", 403)
                return self._page(p, f"Wrong passphrase ({MAX_ATTEMPTS - p.attempts} attempts left).", 401)
            self.failures, self.next_check = 0, 0
            self.pending.pop(p.id, None)
        return RedirectResponse(await self.approve(p, choice), status_code=303, headers=headers_for(p))
