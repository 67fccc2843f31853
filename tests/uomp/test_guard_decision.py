"""The Guard's pure decision, branch by branch and in the order of UOMP draft-00 "Access
Control": a request failing two checks gets the earlier one's code and reason."""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest

from ownmem.uomp.errors import InvalidToken, TokenExpired
from ownmem.uomp.guard import ALLOW, Request, SessionState, aggregate, decide, project
from ownmem.uomp.items import Item
from ownmem.uomp.tokens import AuthKey, Claims, Scope, Scopes, issue, verify

NOW = int(time.time())      # PyJWT checks iat against the real clock
AUD = "http://127.0.0.1:9374"
C = Claims("sess_1", "cal", NOW - 10, NOW + 600,
           Scopes(Scope(tags=("preference", "portfolio"), keys=("k.high", "k.explicit"),
                        deny_tags=("financial",), deny_keys=("k.denied",))), audience=AUD)
LIVE = SessionState("active", True, False, 0, 0)


def item(key: str, tags: tuple[str, ...] = ("preference",), sens: str = "low", value: object = 1) -> Item:
    return Item(key, value, tags, sens, "user", NOW, NOW, None, key.encode())


def req(path: str = "key", **kw: Any) -> Request:
    return Request(path, audience=AUD, **kw)


@pytest.mark.parametrize("state,code,reason", [
    (replace(LIVE, status="missing"), "SESSION_NOT_FOUND", "the token's session does not exist"),
    (replace(LIVE, status="closed"), "SESSION_REVOKED", "session closed"),
    (replace(LIVE, status="revoked"), "SESSION_REVOKED", "session revoked"),
    (replace(LIVE, status="expired"), "SESSION_REVOKED", "session expired"),
    (replace(LIVE, status="created"), "SESSION_REVOKED", "session created"),
    (replace(LIVE, current_token=False), "INVALID_TOKEN", "not a token issued for this session"),
    (replace(LIVE, blacklisted=True), "SESSION_REVOKED", "token blacklisted"),
])
def test_session_state_and_blacklist(state: SessionState, code: str, reason: str) -> None:
    d = decide(C, state, req(key="k.explicit"), item("k.explicit"))
    assert (d.allowed, d.code, d.reason) == (False, code, reason)


def test_order_session_before_blacklist_before_profile_before_audience_before_quota() -> None:
    bad = replace(C, profile="remote", audience="https://elsewhere", max_read_queries=0, aggregation_only=True)
    all_bad = SessionState("revoked", False, True, 5, 0)
    assert decide(bad, all_bad, req(key="k.denied")).reason == "session revoked"
    assert decide(bad, replace(all_bad, status="active", current_token=True), req()).reason == "token blacklisted"
    s = replace(LIVE, reads_used=5)
    assert decide(bad, s, req()).reason == "profile 'remote' is not this deployment's"
    assert decide(replace(bad, profile="local"), s, req()).reason == "audience is another endpoint"
    assert decide(replace(bad, profile="local", audience=AUD), s, req()).code == "QUOTA_EXCEEDED"
    # quota before aggregation_only, which comes before scope
    assert decide(replace(bad, profile="local", audience=AUD, max_read_queries=9), s,
                  req(key="k.denied")).reason == "aggregation_only token on a raw-data path"
    assert decide(replace(C, profile="remote", audience=None), LIVE,
                  req()).reason == "profile 'remote' is not this deployment's"


def test_quota_counts_reads_and_writes_apart() -> None:
    q = replace(C, max_read_queries=2, max_write_queries=0)
    assert decide(q, replace(LIVE, reads_used=1), req(key="k.explicit"), item("k.explicit")).allowed
    assert decide(q, replace(LIVE, reads_used=2), req(key="k.explicit"), item("k.explicit")).code == "QUOTA_EXCEEDED"
    assert decide(q, LIVE, req("write", key="x")).code == "QUOTA_EXCEEDED"
    assert decide(C, LIVE, req("write", key="x")).code == "WRITE_NOT_AVAILABLE"
    assert decide(q, replace(LIVE, reads_used=99), req("session")).allowed


def test_scope_then_deny_then_sensitivity() -> None:
    # scope fails before deny: a denied key outside the scope reports the scope
    outside = Item("k.denied", 1, ("other",), "low", "user", NOW, NOW, None, b"x")
    assert decide(C, LIVE, req(key="k.denied"), outside).reason == "key not within granted scope"
    assert decide(C, LIVE, req(key="k.denied"), item("k.denied")).reason == "key explicitly denied"
    assert decide(C, LIVE, req(key="k.explicit"), item("k.explicit", ("financial",))).reason \
        == "item carries a denied tag"
    # deny beats an explicit key grant too
    assert decide(C, LIVE, req(key="k.explicit"), item("k.explicit", ("preference", "financial"))).code \
        == "ACCESS_DENIED"
    # high: by exact key yes; by tag (even one granted), query or aggregate no
    assert decide(C, LIVE, req(key="k.high"), item("k.high", sens="high")) is ALLOW
    assert decide(C, LIVE, req(key="k.tagonly"), item("k.tagonly", sens="high")).reason \
        == "high-sensitivity item outside an exact-key read"
    assert not decide(C, LIVE, req("tag", tag="preference"), item("k.high", sens="high")).allowed
    assert not decide(C, LIVE, req("query", key="x"), item("k.high", sens="high")).allowed
    # absent items: not found only for an explicitly granted key; otherwise it looks out of scope
    assert decide(C, LIVE, req(key="k.explicit")).code == "NOT_FOUND"
    assert decide(C, LIVE, req(key="k.unknown")).code == "ACCESS_DENIED"
    # the tag of a tag query itself
    assert decide(C, LIVE, req("tag", tag="identity")).reason == "tag not within granted scope"
    assert decide(replace(C, scopes=Scopes(Scope(tags=("financial",), deny_tags=("financial",)))), LIVE,
                  req("tag", tag="financial")).reason == "tag explicitly denied"
    # tag query items re-filtered by key rules
    assert decide(C, LIVE, req("tag", tag="preference"), item("k.denied")).reason == "key explicitly denied"


def test_allowed_fields_and_high_defaults() -> None:
    assert set(project(replace(C, allowed_fields=("key",)), item("a"))) == {"key"}
    assert "sensitivity" not in project(C, item("a", sens="high"))
    assert project(C, item("a"))["sensitivity"] == "low"


def test_aggregation_never_reveals_one_value() -> None:
    r = req("aggregate", tag="portfolio", op="sum", field="value.v")
    three = [item(f"h{i}", ("portfolio",), value={"v": i}) for i in (1, 2, 3)]
    assert aggregate(C, r, three).result == 6
    assert aggregate(C, replace(r, op="avg"), three).result == 2
    assert aggregate(C, replace(r, op="count"), three[:1]).result == 1
    for op in ("min", "max"):
        assert aggregate(C, replace(r, op=op), three).decision.code == "ACCESS_DENIED"
    assert aggregate(C, r, three[:2]).decision.code == "ACCESS_DENIED"
    # non-numeric values do not count towards the threshold
    assert aggregate(C, r, three[:2] + [item("s", ("portfolio",), value={"v": "x"})]).decision.code == "ACCESS_DENIED"
    assert aggregate(replace(C, allowed_fields=("key",)), r, three).decision.code == "ACCESS_DENIED"
    assert aggregate(C, replace(r, op="median"), three).decision.code == "INVALID_REQUEST"
    assert aggregate(C, replace(r, field="key"), three).decision.code == "INVALID_REQUEST"


def test_token_round_trip_signature_first_then_both_expiries() -> None:
    k = AuthKey.from_seed(b"\x01" * 32)
    t = issue(k, C)
    assert verify(t, k, NOW) == C
    with pytest.raises(TokenExpired):
        verify(t, k, NOW + 600)
    other = AuthKey.from_seed(b"\x02" * 32)
    with pytest.raises(InvalidToken):          # expired AND forged: the forgery is reported
        verify(issue(replace(other, kid=k.kid), C), k, NOW + 600)
    with pytest.raises(InvalidToken):
        verify(t[:-4] + "AAAA", k, NOW)
    assert int(time.time()) > 0
