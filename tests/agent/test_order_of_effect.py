"""SAIHM "Order of effect and receipt" under failure, with a hostile proxy between `ownmem agent`
and the real blind server (tests/sync/hostile.py) and the agent process killed mid-write.

    remember: stored invisibly -> receipt -> visible.  A receipt answer lost: looked up, found,
              success.  The log unreachable: operator_log_unavailable, the write discarded at
              once, and it never appears later, even when its receipt did reach the log.  Killed
              while the receipt was being written (and was logged, no answer given): after a
              restart the write is completed and synced.
    forget:   access withdrawn before the receipt; the server unreachable, or answering
              without erasing (or without logging), answers operator_log_unavailable, a repeat
              answers success false, and the sync loop delivers the erasure once the server is
              back or honest."""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ownmem.saihm.receipt import parse_receipt
from tests.agent.agentkit import AgentProcess, AgentVault, LogReader, issue, without_audit_batches
from tests.sync.hostile import Answer, HostileProxy, Seen
from tests.sync.synckit import PASSPHRASE, Backend, Devices, ServerProcess

DEAD = "http://127.0.0.1:1"


def _pending(v: AgentVault) -> int:
    with sqlite3.connect(f"file:{v.folder / 'vault.db'}?mode=ro", uri=True) as c:
        return int(c.execute("SELECT count(*) FROM pending_writes").fetchone()[0])


def _wait(cond: Callable[[], Any], timeout: float = 45.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


def _remembers(srv: ServerProcess, holder: str) -> list[dict[str, Any]]:
    r = httpx.get(srv.url + "/v1/log", params={"holder": holder, "operation": "REMEMBER", "limit": "1000"})
    return list(r.json()["entries"])


def _settled(srv: ServerProcess, holder: str) -> list[dict[str, Any]]:
    """The holder's REMEMBER receipts once the service's start has settled: each credential is a
    UOMP session whose owner-signed record is published (and receipted) just after the start
    (issue 19); the receipts a test counts are those after these."""
    last, stable_since = _remembers(srv, holder), time.monotonic()
    deadline = stable_since + 30
    while time.monotonic() - stable_since < 1.5 and time.monotonic() < deadline:
        time.sleep(0.2)
        now = _remembers(srv, holder)
        if now != last:
            last, stable_since = now, time.monotonic()
    return last


def _new(srv: ServerProcess, holder: str, base: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in _remembers(srv, holder) if e not in base]


def test_a_lost_receipt_answer_is_looked_up_and_the_write_completes(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess]) -> None:
    srv = servers(sqlite_backend)
    proxy = HostileProxy(srv.url).start()
    try:
        v = agent_vault(proxy.url)
        token = issue(v.env, "claude")
        agent = without_audit_batches(agents(v))   # no audit anchor may take the lost answer below
        # the receipt reaches the log, its answer does not
        proxy.on("POST", r"/receipts$", lambda s, a: Answer(-1, {}, b""), once=True)
        status, res = agent.call("saihm_remember", {"content": "answer lost, receipt kept"}, auth=token)
        assert status == 200, (res, agent.logs())
        assert [g["cellId"] for g in agent.call("saihm_recall", {}, auth=token)[1]] == [res["cellId"]]
        holder = agent.call("saihm_status", auth=token)[1]["agentIdHashHex"]
        assert [e["receipt_id"] for e in _remembers(srv, holder) if e["subject_id"] == res["cellId"]] == [
            res["receiptId"]]
        assert any(s.method == "GET" and s.path == f"/v1/log/{res['receiptId']}" for s in proxy.seen)
        assert _pending(v) == 0
    finally:
        proxy.stop()


def test_an_unreachable_log_stores_nothing_and_a_restart_discards_the_pending_write(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess]) -> None:
    srv = servers(sqlite_backend)
    proxy = HostileProxy(srv.url).start()
    try:
        v = agent_vault(proxy.url)
        token = issue(v.env, "claude")
        agent = without_audit_batches(agents(v))   # the refusal's audit batch would be a REMEMBER too
        holder = agent.call("saihm_status", auth=token)[1]["agentIdHashHex"]
        base = _settled(srv, holder)
        proxy.upstream = DEAD
        status, res = agent.call("saihm_remember", {"content": "never receipted"}, auth=token)
        assert (status, res) == (503, {"error": "operator_log_unavailable"})
        assert agent.call("saihm_recall", {}, auth=token) == (200, [])
        # the answer said nothing took effect: nothing is left to take effect later
        assert _pending(v) == 0
        agent.kill()
        proxy.upstream = srv.url
        agent.start()
        _wait(lambda: agent.call("saihm_status", auth=token)[0] == 200)
        assert agent.call("saihm_recall", {}, auth=token) == (200, [])
        assert _new(srv, holder, base) == []
    finally:
        proxy.stop()


def test_a_remember_answered_log_unavailable_never_completes_even_if_its_receipt_was_logged(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess]) -> None:
    """The receipt reaches the log but its answer is lost, and every lookup fails: the agent is
    told operator_log_unavailable ("no receipt was written, nothing took effect").  Neither the
    running service nor a restart may then make the memory appear: the agent believes it failed."""
    srv = servers(sqlite_backend)
    proxy = HostileProxy(srv.url).start()
    try:
        v = agent_vault(proxy.url)
        token = issue(v.env, "claude")
        # every call is audited now (issue 19): no audit batch's anchor may take the lost answer
        agent = without_audit_batches(agents(v))
        holder = agent.call("saihm_status", auth=token)[1]["agentIdHashHex"]
        base = _settled(srv, holder)
        proxy.on("POST", r"/receipts$", lambda s, a: Answer(-1, {}, b""), once=True)
        proxy.on("GET", r"/v1/log/[0-9a-f]{64}$", lambda s, a: Answer(-1, {}, b""))
        status, res = agent.call("saihm_remember", {"content": "told it failed"}, auth=token)
        assert (status, res) == (503, {"error": "operator_log_unavailable"})
        assert len(_new(srv, holder, base)) == 1        # yet the log has its receipt
        assert _pending(v) == 0
        proxy.clear()
        time.sleep(1.0)                                 # the live sync loop settles what it can
        assert agent.call("saihm_recall", {}, auth=token) == (200, [])
        agent.kill()
        agent.start()
        _wait(lambda: agent.call("saihm_status", auth=token)[0] == 200)
        assert agent.call("saihm_recall", {}, auth=token) == (200, [])
        assert _pending(v) == 0
        # nor does it reach the server as a cell
        assert agent.call("saihm_remember", {"content": "a later one"}, auth=token)[0] == 200
        got = agent.call("saihm_recall", {}, auth=token)[1]
        assert [g["plaintext"] for g in got] == ["a later one"]
    finally:
        proxy.stop()


def test_killed_mid_write_after_the_receipt_was_logged_the_restart_completes_it(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess], devices: Devices) -> None:
    srv = servers(sqlite_backend)
    proxy = HostileProxy(srv.url).start()
    release = threading.Event()

    def hold(seen: Seen, ans: Answer) -> Answer:
        release.wait(60)      # the receipt is logged upstream; its answer is held
        return ans

    try:
        v = agent_vault(proxy.url)
        token = issue(v.env, "claude")
        agent = without_audit_batches(agents(v))   # every call is audited: no batch anchor may be held
        holder = agent.call("saihm_status", auth=token)[1]["agentIdHashHex"]
        base = _settled(srv, holder)
        proxy.on("POST", r"/receipts$", hold, once=True)
        caller = threading.Thread(target=lambda: _swallow(agent, token), daemon=True)
        caller.start()
        logged = _wait(lambda: _new(srv, holder, base))
        assert _pending(v) == 1
        agent.kill()          # mid-write: the receipt is in the log, the memory is not visible
        proxy.clear()
        release.set()
        caller.join(30)
        agent.start()
        got = _wait(lambda: agent.call("saihm_recall", {}, auth=token)[1])
        assert [g["cellId"] for g in got] == [logged[0]["subject_id"]]
        assert got[0]["plaintext"] == "written while the process dies" and got[0]["ownmemTrust"] == "agent"
        assert _pending(v) == 0 and len(_new(srv, holder, base)) == 1
        # and it is synced: another device sees it, as the agent's
        other = devices.join(srv.url, v.name, label="phone", passphrase=PASSPHRASE)
        _wait(lambda: other.sync() and "written while the process dies" in other.contents())
    finally:
        release.set()
        proxy.stop()


def _swallow(agent: AgentProcess, token: str) -> None:
    try:
        agent.call("saihm_remember", {"content": "written while the process dies"}, auth=token, timeout=90)
    except httpx.HTTPError:
        pass      # the process was killed under it


def test_forget_with_the_server_unreachable_withdraws_access_and_the_erasure_follows(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess]) -> None:
    srv = servers(sqlite_backend)
    proxy = HostileProxy(srv.url).start()
    log = LogReader(srv.url)
    try:
        v = agent_vault(proxy.url)
        token = issue(v.env, "claude")
        agent = agents(v)
        cell = agent.call("saihm_remember", {"content": "forget me offline"}, auth=token)[1]["cellId"]
        proxy.upstream = DEAD
        assert agent.call("saihm_forget", {"id": cell}, auth=token) == (503, {"error": "operator_log_unavailable"})
        assert agent.call("saihm_recall", {}, auth=token) == (200, [])
        assert agent.call("saihm_forget", {"id": cell}, auth=token) == (200, {"success": False})
        proxy.upstream = srv.url
        erased = _wait(lambda: [e for e in log.http.get(srv.url + "/v1/erasures").json()["entries"]
                                if e["cell_id"] == cell])
        assert len(erased) == 1
        assert len(log.list(subject=cell, operation="FORGET")) == 1
    finally:
        log.close()
        proxy.stop()


@pytest.mark.parametrize("lie", ["names nothing", "names it, logs nothing"])
def test_forget_against_a_server_that_swallows_the_erasure_does_not_claim_success(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], agent_vault: Callable[..., AgentVault],
        agents: Callable[..., AgentProcess], lie: str) -> None:
    """The server answers POST /erase without acting on it: saihm_forget must not say success
    (operator_log_unavailable, access withdrawn all the same), and once the server is honest the
    sync loop delivers the erasure: the cell leaves the server and its FORGET is in the log."""
    srv = servers(sqlite_backend)
    proxy = HostileProxy(srv.url).start()
    log = LogReader(srv.url)

    def swallow(seen: Seen, ans: Answer) -> Answer:
        asked = [parse_receipt(bytes.fromhex(r)).subject_id.hex() for r in json.loads(seen.body)["receipts"]]
        return ans.with_json({"erased": asked if lie == "names it, logs nothing" else [], "already": [],
                              "pending": False})

    try:
        v = agent_vault(proxy.url)
        token = issue(v.env, "claude")
        agent = agents(v)
        cell = agent.call("saihm_remember", {"content": "forget me, says the agent"}, auth=token)[1]["cellId"]
        proxy.on("POST", r"/erase$", swallow, forward=False)
        assert agent.call("saihm_forget", {"id": cell}, auth=token) == (503, {"error": "operator_log_unavailable"})
        assert agent.call("saihm_recall", {}, auth=token) == (200, [])           # access is withdrawn
        assert srv.backend.rows("SELECT count(*) FROM cells WHERE cell_id = ?", (bytes.fromhex(cell),)) == [(1,)]
        assert log.list(subject=cell, operation="FORGET") == []
        proxy.clear()
        _wait(lambda: log.list(subject=cell, operation="FORGET"))
        _wait(lambda: srv.backend.rows("SELECT count(*) FROM cells WHERE cell_id = ?", (bytes.fromhex(cell),))
              == [(0,)])
    finally:
        log.close()
        proxy.stop()
