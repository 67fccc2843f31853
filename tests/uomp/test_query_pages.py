"""UOMP's ranked query (`POST /v1/memory/query`, "Semantic query (not in MVP)", so its body is
ownmem's): ownmem's one ranking among the items in scope, one page of `limit` (default 10, at most
100) with `next_cursor` when more match; a cursor no answer gave, or a limit out of range, is
INVALID_REQUEST and changes nothing.  Against the running `ownmem agent`."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.sync.synckit import Backend, ServerProcess
from tests.uomp.uompkit import Uomp, UompVault, code

ITEMS = [(f"note.tea{i:02d}", f"tea note {i}", ("drinks",), "low") for i in range(25)] + \
    [("note.secret", "tea with the secret recipe", ("private",), "low")]


def test_a_ranked_query_answers_a_page_and_a_cursor_for_the_rest(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url, ITEMS)
    agent = agents(uv.vault)
    u = Uomp(agent.port, uv.vault.folder)
    _, tok = u.session({"tags": ["drinks"]})
    first = u.post("/v1/memory/query", tok, {"query": "tea"}).json()
    assert len(first["items"]) == 10 and first["next_cursor"] == "o10"
    rest = u.post("/v1/memory/query", tok, {"query": "tea", "cursor": "o10", "limit": 100}).json()
    assert len(rest["items"]) == 15 and "next_cursor" not in rest
    keys = [i["key"] for i in first["items"] + rest["items"]]
    assert sorted(keys) == sorted(k for k, *_ in ITEMS[:25]), "every drink once; the private item never"
    for bad in ({"cursor": "10"}, {"cursor": 5}, {"limit": 0}, {"limit": 101}, {"limit": "5"}, {"limit": True}):
        r = u.post("/v1/memory/query", tok, {"query": "tea", **bad})
        assert r.status_code == 400 and code(r) == "INVALID_REQUEST", bad
