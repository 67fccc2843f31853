"""The MUSTs of UOMP draft-00 sections 10 ("Memory Guard API": "Access Control", "Aggregation
Query"), 11 ("Memory Item") and 19.2 ("Data Exposure Controls") over real HTTP against a running
`ownmem agent`, from the attacker's side: explicit keys against deny lists, high-sensitivity
items reached through a tag, the tag query's per-item re-filtering, allowed_fields on every
path, and aggregates used to extract one value (one-item sets, min/max, differencing two sets)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ownmem.uomp.tokens import parse_iso
from tests.sync.synckit import Backend, ServerProcess
from tests.uomp.uompkit import Uomp, UompVault, bearer, error_body, start

ITEMS: list[tuple[str, Any, tuple[str, ...], str]] = [
    ("pref.theme", "dark", ("preference", "ui"), "low"),
    ("pref.lang", "en-GB", ("preference",), "low"),                   # an explicit key, and denied by key
    ("pref.card", "4111-1111", ("preference", "financial"), "medium"),  # an explicit key with a denied tag
    ("pref.pin", "1234", ("preference",), "high"),                   # high, reachable by tag only
    ("pref.secret", "hunter2", ("preference",), "high"),             # high, an explicit key
    ("id.name", "Ada", ("identity",), "low"),
    ("id.ssn", "078-05-1120", ("identity",), "high"),
    ("fund.a", {"v": 10}, ("fund", "fund:core"), "medium"),
    ("fund.b", {"v": 20}, ("fund", "fund:core"), "medium"),
    ("fund.c", {"v": 30}, ("fund", "fund:core"), "medium"),
    ("fund.d", {"v": 40}, ("fund",), "medium"),
    ("fund.e", {"v": 1000}, ("fund",), "high"),                      # never in an aggregate
    ("fund.f", {"v": 5000}, ("fund", "financial"), "medium"),        # denied tag: never in an aggregate
    ("fund.g", {"v": 7000}, ("fund",), "medium"),                    # denied key: never in an aggregate
    ("solo.x", {"v": 42}, ("solo",), "medium"),
    ("pair.x", {"v": 1}, ("pair",), "medium"),
    ("pair.y", {"v": 2}, ("pair",), "medium"),
]
READ = {"tags": ["preference", "identity", "fund", "fund:core", "solo", "pair", "both"],
        "keys": ["pref.lang", "pref.card", "pref.secret"],
        "deny_tags": ["financial", "both"], "deny_keys": ["pref.lang", "fund.g", "pref.ghost"]}
SECRETS = ("4111", "1234", "hunter2", "078-05", "1000", "5000", "7000")


def _start(backend: Any, servers: Any, uomp_vault: Any, agents: Any) -> tuple[Any, UompVault, Uomp]:
    return start(backend, servers, uomp_vault, agents, items=ITEMS)


def _keys(r: Any) -> set[str]:
    assert r.status_code == 200, r.text
    return {i["key"] for i in r.json()["items"]}


def _denied(u: Uomp, sid: str) -> dict[str, str]:
    """key or tag -> reason, of the session's refused decisions."""
    return {e["key"] or e["tag"]: e["reason"] for e in u.admin("GET", f"/v1/audit?session_id={sid}").json()["entries"]
            if not e["allowed"]}


def test_deny_lists_win_over_explicit_keys_and_high_items_never_come_through_a_tag(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    agent, uv, u = _start(sqlite_backend, servers, uomp_vault, agents)
    sid, tok = u.session(READ)
    # 10.4 step 7: deny_keys and deny_tags beat an explicit key, on every path
    for k in ("pref.lang", "pref.card"):
        e = error_body(u.get(f"/v1/memory/{k}", tok), 403, "ACCESS_DENIED", sid)
        assert "en-GB" not in e["message"] and "4111" not in e["message"]
    # a denied key that does not exist looks like any other refusal (no existence leak)
    error_body(u.get("/v1/memory/pref.ghost", tok), 403, "ACCESS_DENIED", sid)
    # a denied tag, and a tag both granted and denied, are refused as tags
    for tag in ("financial", "both"):
        error_body(u.get("/v1/memory", tok, tag=tag), 403, "ACCESS_DENIED", sid)
        error_body(u.get("/v1/memory/aggregate", tok, tag=tag, op="count"), 403, "ACCESS_DENIED", sid)
    # 10.4 step 8 / 11.3: a high item is not reached by a granted tag, by key or otherwise
    for k in ("pref.pin", "id.ssn"):
        error_body(u.get(f"/v1/memory/{k}", tok), 403, "ACCESS_DENIED", sid)
    # ...but by its exact granted key it is
    assert u.get("/v1/memory/pref.secret", tok).json()["value"] == "hunter2"
    # the tag query re-filters each item by key-level rules: no denied key or tag, no high item
    assert _keys(u.get("/v1/memory", tok, tag="preference")) == {"pref.theme"}
    assert _keys(u.get("/v1/memory", tok, tag="identity")) == {"id.name"}
    assert _keys(u.get("/v1/memory", tok, tag="fund")) == {"fund.a", "fund.b", "fund.c", "fund.d"}
    # the ranked query under the same rules, asked straight for the secrets' text
    q = u.post("/v1/memory/query", tok, {"query": " ".join(SECRETS) + " en-GB dark"})
    assert _keys(q) <= {"pref.theme"} and not any(s in q.text for s in SECRETS)
    # aggregates count only what a tag query returns
    assert u.get("/v1/memory/aggregate", tok, tag="preference", op="count").json()["result"] == 1
    assert u.get("/v1/memory/aggregate", tok, tag="fund", op="count").json()["result"] == 4
    s = u.get("/v1/memory/aggregate", tok, tag="fund", op="sum", field="value.v")
    assert s.json() == {"op": "sum", "field": "value.v", "result": 100}
    # 10.4 "If any check fails, MUST return ACCESS_DENIED and record an audit log"
    reasons = _denied(u, sid)
    assert reasons["pref.lang"] == "key explicitly denied" and reasons["pref.card"] == "item carries a denied tag"
    assert reasons["pref.pin"] == reasons["id.ssn"] == "high-sensitivity item outside an exact-key read"
    assert reasons["financial"] == "tag not within granted scope" and reasons["both"] == "tag explicitly denied"
    assert "pref.ghost" in reasons

    # 10.4 "Guard MUST first validate that the tag itself is allowed": keys alone open no tag
    sid2, tok2 = u.session({"tags": [], "keys": ["pref.theme", "pref.lang"]})
    assert u.get("/v1/memory/pref.theme", tok2).status_code == 200
    error_body(u.get("/v1/memory", tok2, tag="preference"), 403, "ACCESS_DENIED", sid2)
    error_body(u.get("/v1/memory/aggregate", tok2, tag="preference", op="count"), 403, "ACCESS_DENIED", sid2)
    # a granted tag opens only its own items, not a key of another tag
    sid3, tok3 = u.session({"tags": ["identity"], "keys": []})
    error_body(u.get("/v1/memory/pref.theme", tok3), 403, "ACCESS_DENIED", sid3)


def test_items_carry_the_memory_item_fields_and_allowed_fields_filters_every_path(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    agent, uv, u = _start(sqlite_backend, servers, uomp_vault, agents)
    sid, tok = u.session(READ)
    # 11.2: every MUST field, typed
    it = u.get("/v1/memory/pref.theme", tok).json()
    assert set(it) == {"key", "value", "tags", "sensitivity", "source", "created_at", "updated_at"}
    assert (it["key"], it["value"], it["tags"], it["sensitivity"], it["source"]) == \
        ("pref.theme", "dark", ["preference", "ui"], "low", "user")
    assert parse_iso(it["created_at"]) <= parse_iso(it["updated_at"])
    for i in u.get("/v1/memory", tok, tag="fund").json()["items"]:
        assert {"key", "value", "tags", "sensitivity", "source", "created_at", "updated_at"} <= set(i)
        assert i["sensitivity"] in ("low", "medium", "high") and i["source"] in ("user", "agent")
    # 7.2 / 19.2: allowed_fields filters the result of every path to those fields only
    sid2, tf = u.session(READ, allowed_fields=["key", "value"])
    assert set(u.get("/v1/memory/pref.theme", tf).json()) == {"key", "value"}
    assert set(u.get("/v1/memory/pref.secret", tf).json()) == {"key", "value"}
    items = u.get("/v1/memory", tf, tag="fund").json()["items"]
    assert items and all(set(i) == {"key", "value"} for i in items)
    q = u.post("/v1/memory/query", tf, {"query": "dark"}).json()["items"]
    assert q and all(set(i) == {"key", "value"} for i in q)
    sid3, tk = u.session(READ, allowed_fields=["key"])
    assert u.get("/v1/memory/pref.theme", tk).json() == {"key": "pref.theme"}
    # without "value" among the fields, no aggregate over values either
    error_body(u.get("/v1/memory/aggregate", tk, tag="fund", op="sum", field="value.v"), 403, "ACCESS_DENIED", sid3)


def test_aggregates_never_give_away_a_single_value(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    """10.5 / 19.2 "Aggregation results MUST NOT leak any individual key or value"."""
    agent, uv, u = _start(sqlite_backend, servers, uomp_vault, agents)
    sid, tok = u.session(READ, aggregation_only=True)

    def agg(tag: str, op: str, fld: str | None = "value.v") -> Any:
        return u.get("/v1/memory/aggregate", tok, tag=tag, op=op, **({"field": fld} if fld else {}))
    # a one-item set and a two-item set: sum and avg would be a value (or one given the other)
    for tag in ("solo", "pair"):
        for op in ("sum", "avg"):
            e = error_body(agg(tag, op), 403, "ACCESS_DENIED", sid)
            assert "42" not in e["message"]
    # min and max are one item's value, over any set
    for tag in ("solo", "fund"):
        for op in ("min", "max"):
            error_body(agg(tag, op), 403, "ACCESS_DENIED", sid)
    # count says how many, never which
    assert agg("solo", "count", None).json() == {"op": "count", "tag": "solo", "result": 1}
    # differencing: sum over fund (a, b, c, d) answered; then sum or avg over fund:core (a, b, c)
    # would give d = 100 - 60: refused, in this order and in the other
    ok = agg("fund", "sum")
    assert ok.json() == {"op": "sum", "field": "value.v", "result": 100}
    assert agg("fund", "avg").json()["result"] == 25           # the same set again tells nothing new
    for op in ("sum", "avg"):
        e = error_body(agg("fund:core", op), 403, "ACCESS_DENIED", sid)
        assert "40" not in e["message"]
    assert agg("fund:core", "count", None).json()["result"] == 3
    # another agent has a history of its own (one agent's sessions share theirs, issue 19)
    sid2, tok2 = u.session(READ, aggregation_only=True, agent_id="other_agent")
    first = u.get("/v1/memory/aggregate", tok2, tag="fund:core", op="avg", field="value.v")
    assert first.json()["result"] == 20
    error_body(u.get("/v1/memory/aggregate", tok2, tag="fund", op="sum", field="value.v"), 403, "ACCESS_DENIED", sid2)
    # a field that is not a value path, or an unknown op, is a bad request, not a leak
    error_body(agg("fund", "sum", "key"), 400, "INVALID_REQUEST", sid)
    error_body(agg("fund", "median"), 400, "INVALID_REQUEST", sid)
    error_body(agg("fund", "sum", None), 400, "INVALID_REQUEST", sid)      # field is REQUIRED for numeric ops
    error_body(u.get("/v1/memory/aggregate", tok, tag="fund"), 400, "INVALID_REQUEST", None)
    # every refusal audited; no answer named a key
    reasons = [e["reason"] for e in u.admin("GET", f"/v1/audit?session_id={sid}").json()["entries"]
               if not e["allowed"]]
    assert len(reasons) >= 10
    audit = u.admin("GET", f"/v1/audit?session_id={sid}").text
    assert "fund.d" not in audit


def test_agents_do_not_write_through_the_guard(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    """11.3 / 20.4 "Agents MUST NOT write Memory during the MVP phase" (the Guard's PUT and DELETE;
    staged writes go through the SAIHM binding, tests/uomp/test_staging.py)."""
    agent, uv, u = _start(sqlite_backend, servers, uomp_vault, agents)
    sid, tok = u.session(READ)
    for k, body in (("pref.theme", {"value": "light"}), ("pref.secret", {"value": "x", "sensitivity": "high"}),
                    ("new.key", {"value": 1, "tags": ["preference"]})):
        error_body(u.http.put(f"/v1/memory/{k}", json=body, headers=bearer(tok)), 501, "WRITE_NOT_AVAILABLE", sid)
        error_body(u.http.delete(f"/v1/memory/{k}", headers=bearer(tok)), 501, "WRITE_NOT_AVAILABLE", sid)
    assert u.get("/v1/memory/pref.theme", tok).json()["value"] == "dark"
    assert u.get("/v1/memory/pref.secret", tok).json()["value"] == "hunter2"
    error_body(u.get("/v1/memory/new.key", tok), 403, "ACCESS_DENIED", sid)
    entries = u.admin("GET", f"/v1/audit?session_id={sid}").json()["entries"]
    for action in ("write", "delete"):      # a PUT and a DELETE each under its own action
        tried = [e for e in entries if e["action"] == action]
        assert len(tried) == 3 and not any(e["allowed"] for e in tried)


def test_differencing_is_judged_over_all_earlier_sets_not_pairwise() -> None:
    """guard.determines_few, the pure check behind the refusals above."""
    from ownmem.uomp.guard import MAX_AGGREGATE_SETS, determines_few

    def s(names: str) -> frozenset[tuple[str, bytes]]:
        return frozenset(("value.v", n.encode()) for n in names)
    assert determines_few([s("abcd"), s("abc")])                 # d = the difference
    assert determines_few([s("abcde"), s("abc"), s("cde"), s("abde")])   # c, from three differences
    assert determines_few([s("abcd"), s("cdef"), s("abef")])     # c + d = (r1 + r2 - r3) / 2: each gives the other
    assert not determines_few([s("abc"), s("def")])
    assert not determines_few([s("abcdef"), s("abc")])           # def is a total of three
    assert not determines_few([s("abc"), s("abc")])
    assert not determines_few([s("abcdefghi"), s("abcdef"), s("defghi")])
    # the bound the modular arithmetic relies on leaves room for one more row
    many = [s("abcdefghijklmnopqrstuvwxyz"[i:i + 6]) for i in range(MAX_AGGREGATE_SETS)]
    assert determines_few(many + [s("abcdefghijklmnopqrstuvwxyz"[1:6])])
