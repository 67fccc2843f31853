"""Strangers on the agent port write nothing into the person's space (issue 19, "Strangers write
nothing"): 53,097 credential-less GETs in 20 s made 74 audit batches, 14.7 MB of the vault's
quota and 148 log receipts; any web page can send them to 127.0.0.1.  Now they are counted, one
audit entry per window, and that entry rides with the next batch the agent's own requests make."""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ownmem.agent.audit_sync import STATE_FILE
from ownmem.agent.strangers import WINDOW_ENV, Summary, Tally
from tests.agent.agentkit import AgentProcess
from tests.sync.synckit import Backend, ServerProcess
from tests.uomp.uompkit import Uomp, UompVault, start

FLOOD = 50_000
FLOOD_SECONDS = 30.0
WINDOW = 3


def test_a_window_of_refusals_is_one_summary_by_code() -> None:
    t = Tally(window=60)
    assert t.due(1000) is None
    for i in range(5):
        t.note("INVALID_TOKEN", 1000 + i)
    t.note("TOKEN_EXPIRED", 1010)
    assert t.due(1059) is None                      # the window is still open
    s = t.due(1060)
    assert s == Summary(1000, 1010, (("INVALID_TOKEN", 5), ("TOKEN_EXPIRED", 1)))
    assert s.reason == "6 requests without a valid token refused (INVALID_TOKEN 5, TOKEN_EXPIRED 1)"
    assert t.due(2000) is None                      # handed over once
    t.note("INVALID_TOKEN", 2001)
    final = t.due(2002, final=True)                 # the service stops: the open window is written
    assert final is not None and final.reason == "1 request without a valid token refused (INVALID_TOKEN 1)"


async def _flood(port: int, total: int, seconds: float, conns: int = 4, depth: int = 100) -> int:
    """``total`` credential-less or forged-token GETs, pipelined on keep-alive connections,
    stopping at ``seconds`` -> how many were answered 401."""
    forged = "eyJhbGciOiJFZERTQSJ9.e30.AAAA"
    reqs = [f"GET /v1/memory/preference.theme HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode(),
            (f"GET /v1/memory/user.password HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
             f"Authorization: Bearer {forged}\r\n\r\n").encode()]
    deadline = time.monotonic() + seconds
    refused = [0]

    async def one(n: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            sent = 0
            while sent < n and time.monotonic() < deadline:
                k = min(depth, n - sent)
                writer.write(b"".join(reqs[(sent + i) % 2] for i in range(k)))
                await writer.drain()
                for _ in range(k):
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n")
                                  if h.lower().startswith(b"content-length:"))
                    await reader.readexactly(length)
                    refused[0] += head.startswith(b"HTTP/1.1 401 ")
                sent += k
        finally:
            writer.close()
    await asyncio.gather(*(one(total // conns) for _ in range(conns)))
    return refused[0]


def _stored(backend: Backend, name: str) -> int:
    return int(backend.rows("SELECT stored_bytes FROM vaults WHERE name = ?", (name,))[0][0])


def _receipts(backend: Backend, name: str) -> int:
    """The vault's receipts in the public log (its holder's; each audit batch has one)."""
    return int(backend.rows("SELECT count(*) FROM log WHERE holder_id = (SELECT holder_id FROM vaults "
                            "WHERE name = ?)", (name,))[0][0])


def _seq(folder: Path) -> int:
    p = folder / STATE_FILE
    return int(json.loads(p.read_text())["seq"]) if p.exists() else 0


def _settled(fn: Callable[[], Any], quiet: float = 3.0, timeout: float = 30.0) -> Any:
    """``fn()`` once it has not changed for ``quiet`` seconds."""
    end = time.monotonic() + timeout
    last, since = fn(), time.monotonic()
    while time.monotonic() < end:
        time.sleep(0.5)
        now = fn()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return now
    raise AssertionError("never settled")


def test_50000_credential_less_requests_add_no_batch_no_receipt_and_no_byte_of_quota(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault]) -> None:
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    v = uv.vault
    agent = AgentProcess(v.folder, v.root)
    agent.env[WINDOW_ENV] = str(WINDOW)
    agent.start()
    try:
        u = Uomp(agent.port, v.folder)
        sid, tok = u.session({"tags": ["preference"]})      # a grant: its batch is sealed at once
        def state() -> tuple[int, int, int]:
            return _stored(sqlite_backend, v.name), _receipts(sqlite_backend, v.name), _seq(v.folder)
        before = _settled(state)
        refused = asyncio.run(_flood(agent.port, FLOOD, FLOOD_SECONDS))
        assert refused == FLOOD, f"{refused} of {FLOOD} answered 401 in {FLOOD_SECONDS} s"
        # two windows and a batch tick later: not a byte, not a receipt, not a batch
        time.sleep(2 * WINDOW + 3)
        assert state() == before
        # the person sees them, counted: a summary per window, no key, no session, nothing of the token
        mine = [e for e in u.admin("GET", "/v1/audit").json()["entries"] if e["action"] == "unauthenticated"]
        assert mine and sum(int(e["reason"].split()[0]) for e in mine) == FLOOD
        assert all(e["session_id"] == "" and e["key"] is None and e["allowed"] is False for e in mine)
        assert all("INVALID_TOKEN" in e["reason"] for e in mine)
        assert len(mine) <= FLOOD_SECONDS / WINDOW + 2
        # the agent's own request makes a batch, and the summaries ride in it
        assert u.get("/v1/memory/preference.theme", tok).status_code == 200
        after = _settled(state)
        assert after[2] == before[2] + 1 and after[1] == before[1] + 2    # its anchor and its push
    finally:
        agent.stop()



def test_an_overlong_key_tag_or_query_is_refused_before_the_audit(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any]) -> None:
    """One request put a 60,000-character key into the audit (issue 19).  Now a key, tag or
    field longer than any can be is a 400 before the Guard, with or without a token; no entry."""
    from tests.uomp.uompkit import error_body

    _, _, u = start(sqlite_backend, servers, uomp_vault, agents)
    sid, tok = u.session({"tags": ["preference"]})
    long = "k" * 10_000
    for t in (tok, None):
        error_body(u.get(f"/v1/memory/{long}", t), 400, "INVALID_REQUEST", None)
        error_body(u.get("/v1/memory", t, tag=long), 400, "INVALID_REQUEST", None)
        error_body(u.get("/v1/memory/aggregate", t, tag="preference", op="sum", field="value." + long), 400,
                   "INVALID_REQUEST", None)
        error_body(u.post("/v1/memory/query", t, {"query": long}), 400, "INVALID_REQUEST", None)
    assert u.admin("POST", "/v1/sessions", {"agent_id": long}).status_code == 400
    # at the bounds they are answered as usual
    error_body(u.get("/v1/memory/" + "k" * 256, tok), 403, "ACCESS_DENIED", sid)
    assert u.post("/v1/memory/query", tok, {"query": "dark " * 819}).status_code == 200
    entries = u.admin("GET", "/v1/audit").json()["entries"]
    assert max(len(e["key"] or "") for e in entries) <= 4096
    assert not any(long[:300] in (e["key"] or "") + (e["tag"] or "") + e["reason"] for e in entries)


def test_every_audited_string_is_bounded() -> None:
    from ownmem.agent.audit import MAX_AUDITED, AuditEntry, bounded

    e = AuditEntry("log_1", 1, "sess", "agent", "read", "k" * 60_000, "t" * 2000, ("x" * 5000, "y"), False,
                   "r" * 3000)
    b = bounded(e)
    assert all(len(s) <= MAX_AUDITED for s in (b.key or "", b.tag or "", b.reason, *b.tags))
    assert b.key is not None and b.key.startswith("k" * 1000) and b.key.endswith("[cut]") and b.tags[1] == "y"
    short = AuditEntry("log_2", 1, "sess", "agent", "read", "pref.theme", None, (), True, "scope matched")
    assert bounded(short) is short
