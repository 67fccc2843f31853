"""The consent page from the attacker's side (issue 21 Build item 4): only the person's passphrase
approves; five wrong ones void the request; a global backoff; CSRF (a foreign Origin, a forged
form token); the page's security headers; a denial goes back as access_denied; consent audited."""
from __future__ import annotations

from ownmem.agent.consent import MAX_ATTEMPTS
from tests.agent.oauthkit import (
    PASS,
    REDIRECT,
    TAGS,
    Door,
    authorize,
    consent_form,
    decide,
    door,  # noqa: F401 - fixture
    pkce,
    query,
    register,
    vault,  # noqa: F401 - fixture
)

SECURITY = {"content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; img-src https:; "
                                       "form-action 'self'; frame-ancestors 'none'",
            "x-frame-options": "DENY", "cache-control": "no-store", "referrer-policy": "same-origin"}


def pending(d: Door) -> tuple[str, str, str]:
    cid = register(d)
    r = authorize(d, cid, pkce()[1])
    assert r.status_code == 302
    return (cid, *consent_form(d, r.headers["location"]))


def no_grant(d: Door) -> bool:
    return not d.creds.all()


def test_the_page_shows_who_asks_and_carries_the_security_headers(door: Door) -> None:
    cid = register(door)
    r = authorize(door, cid, pkce()[1])
    page = door.http.get(r.headers["location"])
    for k, v in SECURITY.items():
        # the form may be answered by a redirect to this client's origin, and to no other
        # (browsers apply form-action to that redirect too)
        want = v.replace("form-action 'self'", "form-action 'self' http://127.0.0.1:33418") \
            if k == "content-security-policy" else v
        assert page.headers[k] == want, k
    assert "Claude asks to use your memories" in page.text and "127.0.0.1:33418" in page.text and cid in page.text
    # the vault's tags are typed, never listed: the page is shown before any passphrase
    for t in TAGS:
        assert t not in page.text
    assert "<script" not in page.text
    # every answer of the page has them, refusals too
    for resp in (door.http.get("/consent?request=nope"), decide(door, "x", "y"),
                 decide(door, *consent_form(door, r.headers["location"]), origin="https://evil.example")):
        assert resp.status_code in (400, 403)
        for k, v in SECURITY.items():
            assert resp.headers[k] == v, k


def test_a_client_name_cannot_inject_markup(door: Door) -> None:
    r = door.http.post("/register", json={"redirect_uris": [REDIRECT], "client_name": "<script>x</script>",
                                          "logo_uri": "http://insecure.example/l.png"})
    cid = r.json()["client_id"]
    page = door.http.get(authorize(door, cid, pkce()[1]).headers["location"])
    assert "<script>" not in page.text and "&lt;script&gt;" in page.text
    assert "insecure.example" not in page.text                 # an http logo is not shown


def test_no_approval_without_the_passphrase(door: Door) -> None:
    _, rid, tok = pending(door)
    r = decide(door, rid, tok, passphrase="")
    assert r.status_code == 400 and "location" not in r.headers and no_grant(door)


def test_five_wrong_passphrases_void_the_request_with_a_global_backoff(door: Door) -> None:
    _, rid, tok = pending(door)
    for i in range(MAX_ATTEMPTS):
        r = decide(door, rid, tok, passphrase=f"guess {i}")
        if i < MAX_ATTEMPTS - 1:
            assert r.status_code == 401 and "Wrong passphrase" in r.text
            # at once again: refused by the backoff, not even checked (and not counted)
            again = decide(door, rid, tok, passphrase=PASS)
            assert again.status_code == 429
            door.clock[0] += 60
    assert r.status_code == 403 and "void" in r.text
    # the right passphrase now: the request is gone
    door.clock[0] += 60
    assert decide(door, rid, tok).status_code == 400
    assert no_grant(door)
    assert any(e.action == "consent" and not e.allowed and "void" in e.reason for e in door.audit.entries())


def test_csrf_a_foreign_origin_or_a_forged_form_token_is_refused(door: Door) -> None:
    _, rid, tok = pending(door)
    assert decide(door, rid, tok, origin="https://evil.example").status_code == 403
    assert decide(door, rid, tok, origin="null").status_code == 403
    assert decide(door, rid, "0" * 64).status_code == 403
    _, rid2, tok2 = pending(door)
    assert decide(door, rid, tok2).status_code == 403          # another request's token
    assert no_grant(door)
    # the page itself, from its own origin, works
    r = decide(door, rid, tok)
    assert r.status_code == 303 and r.headers["location"].startswith(REDIRECT + "?code=")


def test_deny_goes_back_as_access_denied_and_approve_is_audited(door: Door) -> None:
    _, rid, tok = pending(door)
    r = decide(door, rid, tok, action="deny")
    assert r.status_code == 303
    q = query(r.headers["location"])
    assert q == {"error": "access_denied", "state": "st-1", "iss": door.url}
    assert no_grant(door)
    cid, rid, tok = pending(door)
    r = decide(door, rid, tok, allow=("work", "travel"), deny=("health",), access="write")
    assert r.status_code == 303
    (cred,) = door.creds.all()
    assert cred.kind == "remote" and cred.client_id == cid and cred.name.startswith("claude-")
    assert cred.tags == ("work", "travel") and cred.deny_tags == ("health",) and cred.write
    assert cred.expires == door.clock[0] + 86400
    entries = [e for e in door.audit.entries(cred.session_id) if e.action == "consent"]
    assert len(entries) == 1 and entries[0].allowed and entries[0].key == cid


def test_malformed_tags_and_an_empty_choice_are_refused(door: Door) -> None:
    _, rid, tok = pending(door)
    assert decide(door, rid, tok, allow=("bad\x1btag",)).status_code == 400
    assert decide(door, rid, tok, allow=("x" * 257,)).status_code == 400
    assert decide(door, rid, tok, allow=("work",), deny=("*",)).status_code == 400
    assert decide(door, rid, tok, allow=()).status_code == 400
    assert decide(door, rid, tok, lifetime="31536000").status_code == 400
    assert no_grant(door)


def test_a_pending_request_expires_after_ten_minutes(door: Door) -> None:
    _, rid, tok = pending(door)
    door.clock[0] += 601
    assert decide(door, rid, tok).status_code == 400 and no_grant(door)
