"""The audit as an oracle (issue 19, "No oracle"; UOMP draft-00 19.2 "Aggregation results MUST
NOT leak any individual key or value", "Audit Log"): a ranked query was audited as "N of M
items in scope", M counting every item whose text matched, high ones too, and the token reads
its own audit entries; a token granted the tag `pay` recovered ``salary.2026 = 91234`` (high,
never served) in 290 queries.  Now everything the token can read, answers and its own audit
entries alike, is the same whether the vault holds that value or not."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.sync.synckit import Backend, ServerProcess
from tests.uomp.uompkit import Uomp, UompVault, error_body, start

PAY: list[tuple[str, Any, tuple[str, ...], str]] = [
    ("pay.rate", {"v": 4100}, ("pay",), "medium"),
    ("pay.bonus", {"v": 500}, ("pay",), "medium"),
    ("pay.grade", {"v": 7}, ("pay",), "medium"),
]
SECRET = ("salary.2026", {"v": 91234}, ("pay",), "high")
READ = {"tags": ["pay"]}
# what differs between two vaults whatever they hold: when each item and entry was written
_VOLATILE_ITEM = ("created_at", "updated_at")
_VOLATILE_ENTRY = ("id", "timestamp", "session_id")


def _probes() -> list[tuple[str, str, dict[str, Any]]]:
    """1,000 requests of the attacker: the ranked query asked for every way the value could be
    written near 91234 (digit prefixes, the number, its neighbours), its key and tag, and the
    key read, tag query and aggregates of the granted tag."""
    texts = ["salary", "salary.2026", "2026", "91234", "salary 2026 91234", "pay", "v"]
    texts += ["91234"[:n] for n in range(1, 5)]
    texts += [str(91234 + d) for d in range(-492, 493)]
    probes: list[tuple[str, str, dict[str, Any]]] = [("query", t, {}) for t in texts]
    probes += [("key", "salary.2026", {}), ("tag", "pay", {}), ("count", "pay", {}), ("sum", "pay", {})]
    assert len(probes) == 1000
    return probes


def _ask(u: Uomp, tok: str, kind: str, arg: str) -> tuple[int, Any]:
    if kind == "query":
        r = u.post("/v1/memory/query", tok, {"query": arg})
    elif kind == "key":
        r = u.get(f"/v1/memory/{arg}", tok)
    elif kind == "tag":
        r = u.get("/v1/memory", tok, tag=arg)
    else:
        params = {"tag": arg, "op": kind} | ({"field": "value.v"} if kind == "sum" else {})
        r = u.get("/v1/memory/aggregate", tok, **params)
    doc = r.json()
    if isinstance(doc.get("items"), list):
        doc["items"] = [{k: v for k, v in it.items() if k not in _VOLATILE_ITEM} for it in doc["items"]]
    if isinstance(doc.get("error"), dict):
        doc["error"] = {k: v for k, v in doc["error"].items() if k != "session_id"}
    return r.status_code, doc


def _what_the_token_sees(backend: Backend, servers: Callable[..., ServerProcess],
                         uomp_vault: Callable[..., UompVault], agents: Callable[..., Any],
                         items: list[tuple[str, Any, tuple[str, ...], str]]) -> tuple[list[Any], list[Any]]:
    agent, _, u = start(backend, servers, uomp_vault, agents, items=items)
    sid, tok = u.session(READ)
    answers = [_ask(u, tok, kind, arg) for kind, arg, _ in _probes()]
    mine = u.get("/v1/audit", tok).json()["entries"]
    agent.stop()
    assert len(mine) == 1000 and {e["session_id"] for e in mine} == {sid}
    return answers, [{k: v for k, v in e.items() if k not in _VOLATILE_ENTRY} for e in mine]


def test_a_pay_token_learns_nothing_of_a_high_salary_in_1000_queries(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    with_secret = _what_the_token_sees(sqlite_backend, servers, uomp_vault, agents, [*PAY, SECRET])
    without = _what_the_token_sees(sqlite_backend, servers, uomp_vault, agents, PAY)
    # the attack's signal: the query for the value itself was audited differently
    q = [e for e in with_secret[1] if e["action"] == "query" and e["key"] == "91234"]
    assert q and q == [e for e in without[1] if e["action"] == "query" and e["key"] == "91234"]
    assert q[0]["reason"] == "0 items in scope"
    # the key read of the secret is refused as a key outside the scope, as a key that is not there
    k = _probes().index(("key", "salary.2026", {}))
    assert with_secret[0][k] == without[0][k] == (403, {"error": {"code": "ACCESS_DENIED",
                                                                  "message": "key not within granted scope"}})
    # every answer and every audit entry the token can read, one by one
    for i, (a, b) in enumerate(zip(with_secret[0], without[0], strict=False)):
        assert a == b, (_probes()[i], a, b)
    for i, (a, b) in enumerate(zip(with_secret[1], without[1], strict=False)):
        assert a == b, (i, a, b)
    assert not any("91234" in json.dumps(a) for a in with_secret[0])


def test_the_person_still_reads_why_the_secret_was_refused(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    """The token's view is the reduced one; the person's (admin) audit keeps the precise reason."""
    _, _, u = start(sqlite_backend, servers, uomp_vault, agents, items=[*PAY, SECRET])
    sid, tok = u.session(READ)
    error_body(u.get("/v1/memory/salary.2026", tok), 403, "ACCESS_DENIED", sid)
    theirs = [e["reason"] for e in u.get("/v1/audit", tok).json()["entries"] if e["action"] == "read"]
    ours = [e["reason"] for e in u.admin("GET", f"/v1/audit?session_id={sid}").json()["entries"]
            if e["action"] == "read"]
    assert theirs == ["key not within granted scope"]
    assert ours == ["high-sensitivity item outside an exact-key read"]


def test_a_token_without_the_tags_field_reads_no_tags_in_its_audit(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    """allowed_fields without "tags": the answer carries no tags, and neither do the entries the
    token reads of its own audit (the item's tags are recorded for the person)."""
    _, _, u = start(sqlite_backend, servers, uomp_vault, agents, items=PAY)
    sid, tok = u.session(READ, allowed_fields=["key", "value"])
    assert u.get("/v1/memory/pay.rate", tok).json() == {"key": "pay.rate", "value": {"v": 4100}}
    assert set(u.get("/v1/memory", tok, tag="pay").json()["items"][0]) == {"key", "value"}
    theirs = u.get("/v1/audit", tok).json()["entries"]
    ours = u.admin("GET", f"/v1/audit?session_id={sid}").json()["entries"]
    assert [e["tags"] for e in theirs if e["action"] == "read"] == [[], []]
    assert sorted(e["tags"] for e in ours if e["action"] == "read") == [["pay"], ["pay"]]
