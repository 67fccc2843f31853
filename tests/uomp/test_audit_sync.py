"""The UOMP audit synced to the person's devices in anchored batches (ownmem.agent.audit_sync;
UOMP draft-00 "Audit and Logging"): another device sees who read what, when, allowed or denied
and why; a batch the server drops or spoils is flagged; so is an entry altered inside a batch;
the public log's anchor carries no key, value, tag or session id; prune erases old batches."""
from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from Crypto.Hash import keccak

from ownmem.agent import audit_batches as ab, audit_sync as au
from ownmem.agent.retention import RETENTION_DAYS_ENV
from ownmem.saihm import tlog
from ownmem.saihm.receipt import parse_receipt
from ownmem.uomp.control import AUDIT as AUDIT_RECORD, is_control
from ownmem.vault import Vault
from tests.agent.agentkit import AgentProcess, issue, ownmem_cli
from tests.sync.synckit import PASSPHRASE, Backend, Devices, ServerProcess, cli_env
from tests.uomp.uompkit import Uomp, UompVault

READ = {"tags": ["preference"], "keys": ["user.display_name"], "deny_tags": ["financial"], "deny_keys": []}


def _k(b: bytes) -> bytes:
    return keccak.new(digest_bits=256, data=b).digest()


def _entry(i: int, **kw: Any) -> dict[str, Any]:
    e = {"id": f"log_{i}", "timestamp": 1_800_000_000 + i, "session_id": "sess_a", "agent_id": "cal",
         "action": "read", "key": f"preference.k{i}", "tag": None, "tags": ["preference"], "allowed": True,
         "reason": "scope matched", "request_size": 0, "response_size": 12, "query_count_remaining": None}
    e.update(kw)
    return e


SESSIONS = {"sess_a": {"agent_id": "cal", "granted_tags": ["preference"], "expires_at": 1_800_000_600}}


def test_a_batched_entry_carries_every_field_of_the_audit_entry() -> None:
    """entry_doc builds the batch's entry field by field (asdict is too slow for the writer):
    a field added to AuditEntry and not to the batch would leave the Merkle root blind to it."""
    from dataclasses import asdict, fields

    from ownmem.agent.audit import AuditEntry

    e = AuditEntry(id="log_1", timestamp=1_800_000_000, session_id="sess_a", agent_id="cal", action="read",
                   key="preference.k1", tag=None, tags=("preference", "schedule"), allowed=True, reason="scope matched",
                   request_size=3, response_size=12, query_count_remaining=7)
    doc = au.entry_doc(e)
    assert set(doc) == {f.name for f in fields(AuditEntry)}
    assert doc == {**asdict(e), "tags": ["preference", "schedule"]}
    same = _entry(1, timestamp=1_800_000_000, tags=["preference", "schedule"], request_size=3, query_count_remaining=7)
    assert ab.canonical(doc) == ab.canonical(same)


def test_event_hashes_are_the_drafts_keccak256_and_the_root_covers_every_field() -> None:
    assert ab.keccak256(b"").hex() == "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
    sh = _k(b"sess_a" + b"cal" + b'["preference"]')
    ah = _k(b"cal")
    access = _entry(1)
    assert ab.event_hash(access, SESSIONS["sess_a"]) == _k(
        _k(b"GatewayAccess(bytes32,bytes32,bytes32,bool)") + sh + ah + _k(b"/v1/memory/preference.k1")
        + (1).to_bytes(32, "big"))
    granted = _entry(2, action="grant", key=None, reason="granted")
    assert ab.event_hash(granted, SESSIONS["sess_a"]) == _k(
        _k(b"SessionGranted(bytes32,bytes32,uint256)") + sh + ah + (1_800_000_600).to_bytes(32, "big"))
    revoked = _entry(3, action="revoked", key=None)
    assert ab.event_hash(revoked, SESSIONS["sess_a"]) == _k(_k(b"SessionRevoked(bytes32,bytes32)") + sh + ah)
    denied = _entry(4, allowed=False, key=None, tag="financial", reason="tag denied")
    assert ab.event_hash(denied, SESSIONS["sess_a"]).hex() != ab.event_hash(
        {**denied, "allowed": True}, SESSIONS["sess_a"]).hex()
    # the root is RFC 9162's tree hash over the leaves (the public log's own hashing)
    entries = [access, granted, revoked, denied, _entry(5)]
    leaves = [ab.leaf(e, SESSIONS["sess_a"]) for e in entries]
    assert ab.batch_root(entries, SESSIONS) == tlog.node_hash(
        tlog.node_hash(tlog.node_hash(tlog.leaf_hash(leaves[0]), tlog.leaf_hash(leaves[1])),
                       tlog.node_hash(tlog.leaf_hash(leaves[2]), tlog.leaf_hash(leaves[3]))),
        tlog.leaf_hash(leaves[4]))
    # every field of an entry is covered, not only what the event names
    root = ab.batch_root(entries, SESSIONS)
    for field, value in (("reason", "forged"), ("timestamp", 1), ("response_size", 99), ("tags", [])):
        changed = [dict(e) for e in entries]
        changed[3][field] = value
        assert ab.batch_root(changed, SESSIONS) != root, field
    assert ab.batch_root(entries[:2] + entries[3:], SESSIONS) != root          # one dropped
    assert ab.batch_root(entries, {"sess_a": {**SESSIONS["sess_a"], "granted_tags": ["x"]}}) != root


def test_gaps_flag_a_missing_or_doubled_batch_but_not_what_a_deletion_entry_accounts_for() -> None:
    """Issue 19: seqs start at 1, so a batch missing below the oldest held is reported too, unless
    a deletion entry (retention.pruned_entry) in a batch held names it."""
    def b(seq: int, root: str = "00" * 32, entries: list[dict[str, Any]] | None = None) -> ab.Batch:
        return ab.Batch({"stream": "s1", "seq": seq, "root": root, "last": seq, "entries": entries or []}, bytes(16))
    assert ab.gaps([b(5), b(6), b(7)]) == {("s1", 5): "4 earlier batches of this audit (1-4) did not reach this "
                                                    "device and no deletion in this audit accounts for them"}
    pruned = _entry(9, action="audit_pruned", key=json.dumps({"batches": {"s1": [1, 4]}, "anchored_until": 0}))
    assert ab.gaps([b(5), b(6), b(7, entries=[pruned])]) == {}      # 1-4 deleted past retention: no warning
    partly = _entry(9, action="audit_pruned", key=json.dumps({"batches": {"s1": [1, 2], "s2": [3, 4]}}))
    assert "(3-4) did not reach" in ab.gaps([b(5), b(6, entries=[partly])])[("s1", 5)]
    forged = {**pruned, "allowed": False}                            # a refused deletion accounts for nothing
    assert ("s1", 5) in ab.gaps([b(5), b(6, entries=[forged])])
    got = ab.gaps([b(1), b(2), b(5), b(6), b(9), b(9, "11" * 32)])
    assert got[("s1", 9)] == ("2 earlier batches of this audit (7-8) did not reach this device; "
                              "two different batches carry this batch's number")
    assert set(got) == {("s1", 5), ("s1", 9)}
    assert "did not reach" in ab.gaps([b(1), b(3)])[("s1", 3)]


def _poll(fn: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got:
            return got
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


def _anchors(srv: ServerProcess, holder: str) -> list[dict[str, Any]]:
    r = httpx.get(srv.url + "/v1/log", params={"holder": holder, "operation": "RECALL", "limit": "1000"})
    assert r.status_code == 200, r.text
    return list(r.json()["entries"])


def _anchored(srv: ServerProcess, holder: str, n: int) -> bool:
    return len(_anchors(srv, holder)) >= n


def _view(d: Any, grace: int = 60) -> ab.AuditView:
    d.sync()
    return ab.audit_view(d.listing().entries, holder_id=d.v.holder().holder_id,
                         anchor_check=ab.log_anchor_check(d.syncer),
                         newer_anchors=ab.log_newer_anchors(d.syncer, grace=grace))


def test_another_device_sees_the_audit_after_sync_anchored_with_no_key_or_value_in_the_log(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[[str], UompVault],
        agents: Callable[..., Any], devices: Devices, tmp_path: Path) -> None:
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    agent = agents(uv.vault)
    u = Uomp(agent.port, uv.vault.folder)
    sid, tok = u.session(READ)
    assert u.get("/v1/memory/preference.theme", tok).status_code == 200
    assert u.get("/v1/memory/preference.card", tok).status_code == 403         # denied: financial
    assert u.get("/v1/memory", tok, tag="preference").status_code == 200
    other, tok2 = u.session(READ, agent_id="notes_agent")
    assert u.get("/v1/memory/user.password", tok2).status_code == 403

    phone = devices.join(srv.url, uv.vault.name, label="phone")
    holder = phone.v.holder().holder_id.hex()

    def seen() -> ab.AuditView | None:
        v = _view(phone)
        return v if {e["session_id"] for e in v.entries} >= {sid, other} else None
    view = _poll(seen, "the audit reaches the phone")
    assert view.warnings == [] and view.anchored == view.batches >= 1
    mine = [e for e in view.entries if e["session_id"] == sid]
    assert [e["timestamp"] for e in view.entries] == sorted((e["timestamp"] for e in view.entries), reverse=True)
    theme = next(e for e in mine if e["key"] == "preference.theme")
    assert theme["allowed"] is True and theme["agent_id"] == "calendar_agent" and theme["action"] == "read"
    card = next(e for e in mine if e["key"] == "preference.card")
    assert card["allowed"] is False and card["reason"] == "item carries a denied tag"
    assert {e["action"] for e in mine} >= {"grant", "read"}
    assert set(theme) >= {"id", "timestamp", "session_id", "agent_id", "action", "key", "tags", "allowed", "reason",
                          "request_size", "response_size", "query_count_remaining"}      # UOMP 18.1
    # filtered by session, the same rows of that session only
    only = ab.audit_view(phone.listing().entries, holder_id=phone.v.holder().holder_id, session=other)
    assert {e["session_id"] for e in only.entries} == {other} and only.entries[0]["key"] == "user.password"
    # the batches are control records, never listed as memory, nor recalled by an agent (SAIHM)
    batches = [e for e in phone.listing().entries if AUDIT_RECORD in e.opened.extensions]
    assert batches and all(is_control(e.opened.extensions) for e in batches)
    recalled = httpx.post(f"http://127.0.0.1:{agent.port}/saihm",
                          headers={"Authorization": issue(uv.vault.env, "notes")},
                          json={"method": "saihm_recall", "params": {"query": ""}}, timeout=30)
    assert recalled.status_code == 200, recalled.text
    texts = [m["plaintext"] for m in recalled.json()]
    assert texts and not any(t.startswith("UOMP ") for t in texts), texts

    # the anchors: RECALL receipts whose subject is a batch root, no detail, no key/value/tag/session
    anchors = _anchors(srv, holder)
    roots = {b.root for b in ab.read_batches(phone.listing().entries)}
    assert roots <= {bytes.fromhex(a["subject_id"]) for a in anchors}
    for a in anchors:
        raw = bytes.fromhex(a["receipt"])
        r = parse_receipt(raw)
        assert r.operation == "RECALL" and r.detail is None
        for secret in (b"preference", b"theme", b"dark", b"financial", b"4111", sid.encode(), b"calendar_agent",
                       b"password", b"scope"):
            assert secret not in raw
    # the CLI on that device (no audit.db, no agent there) reads the synced batches
    folder = phone.folder
    assert folder is not None
    phone.v.close()
    phone.client.close()
    devices.made.remove(phone)
    env = cli_env(tmp_path, folder)
    out = ownmem_cli("agent", "audit", "--session", sid, "--json", env=env)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert {e["session_id"] for e in rows} == {sid} and any(not e["allowed"] for e in rows)
    assert "warning" not in out.stderr
    text = ownmem_cli("agent", "audit", env=env)
    assert text.returncode == 0 and "DENIED" in text.stdout and "preference.card" in text.stdout
    rows_all = json.loads(ownmem_cli("agent", "audit", "--json", env=env).stdout)
    # prune there (no service on that device): nothing is past the retention, and "as of 2099" is
    # refused (issue 19: it was "delete everything"), with every batch kept
    pr = ownmem_cli("agent", "audit", "prune", env=env)
    assert pr.returncode == 0 and "forgot 0 synced audit batches" in pr.stdout, pr.stdout + pr.stderr
    pr = ownmem_cli("agent", "audit", "prune", "--as-of", "2099-01-01", env=env)
    assert pr.returncode != 0 and pr.stdout == "" and "is in the future" in pr.stderr, pr.stderr
    # nothing was deleted (the SAIHM recall above is audited too, issue 19: its batch may arrive
    # since, so every row seen before is still there, and perhaps more)
    after = json.loads(ownmem_cli("agent", "audit", "--json", env=env).stdout)
    assert all(r in after for r in rows_all)


def _batch_cells(d: Any) -> dict[int, bytes]:
    """seq -> cellId of each audit batch a device holds."""
    batches = ab.read_batches(d.listing().entries)
    cells = d.v.store.cell_ids_of([b.object_id for b in batches])
    return {b.key[1]: cells[b.object_id] for b in batches}


def test_a_hostile_server_dropping_or_spoiling_a_batch_is_flagged(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[[str], UompVault],
        agents: Callable[..., Any], devices: Devices) -> None:
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    agent = agents(uv.vault)
    u = Uomp(agent.port, uv.vault.folder)
    sid, tok = u.session(READ)
    phone = devices.join(srv.url, uv.vault.name, label="phone")
    holder = phone.v.holder().holder_id.hex()
    for n in range(1, 6):            # five batches at least: one read, then its batch's anchor
        assert u.get("/v1/memory/preference.theme", tok).status_code == 200
        _poll(partial(_anchored, srv, holder, n), f"batch {n} anchored")
    _poll(lambda: len(_batch_cells(phone)) >= 5 if phone.sync() is not None else False, "five batches synced")
    cells = _batch_cells(phone)
    assert _view(phone).warnings == []
    seqs = sorted(cells)
    dropped, spoilt, newest = seqs[1], seqs[2], seqs[-1]
    db = sqlite3.connect(sqlite_backend.sqlite_path, timeout=30)
    try:
        with db:
            for gone in (dropped, newest):
                db.execute("DELETE FROM cells WHERE cell_id = ?", (cells[gone],))
                db.execute("DELETE FROM changes WHERE cell_id = ?", (cells[gone],))
            (cell,) = db.execute("SELECT cell FROM cells WHERE cell_id = ?", (cells[spoilt],)).fetchone()
            bad = bytearray(cell)
            bad[len(bad) // 2] ^= 0x01
            db.execute("UPDATE cells SET cell = ? WHERE cell_id = ?", (bytes(bad), cells[spoilt]))
    finally:
        db.close()
    tablet = devices.join(srv.url, uv.vault.name, label="tablet")
    view = _view(tablet, grace=0)          # no batch is being sealed now: the test made no read since
    held = {b.key[1] for b in ab.read_batches(tablet.listing().entries)}
    assert dropped not in held and spoilt not in held and newest not in held
    # the newest withheld: no later batch shows its gap, the log's anchor of it does
    assert any("has not reached this device" in w and w.startswith("an audit batch anchored")
               for w in view.warnings), view.warnings
    after = min(s for s in held if s > spoilt)
    assert any(w.startswith(f"audit batch {after}:") and "did not reach this device" in w for w in view.warnings), \
        view.warnings
    flagged = [e for e in view.entries if e["batch"]["seq"] == after]
    assert flagged and all(e["batch"]["problem"] for e in flagged)


def test_an_entry_altered_inside_a_batch_or_an_anchor_not_in_the_log_is_flagged(tmp_path: Path) -> None:
    """A batch sealed by an owner key (a compromised device) that no longer hashes to its anchored
    root, and one whose receipt names another root, are each flagged on their rows."""
    v = Vault.create(tmp_path / "v", "correct horse battery staple 42")
    try:
        from ownmem.crypto import run_sync
        from ownmem.saihm.receipt import make_receipt

        h = v.holder()
        entries = [_entry(i) for i in range(3)]
        root = ab.batch_root(entries, SESSIONS)

        def anchor(subject: bytes) -> str:
            return run_sync(make_receipt(v.crypto, xi=h.xi, holder_id=h.holder_id, operation="RECALL",
                                         subject_id=subject, timestamp=1)).to_cbor().hex()
        doc = {"v": 1, "stream": "s", "seq": 1, "first": 0, "last": 1_800_000_002, "count": 3, "root": root.hex(),
               "sessions": SESSIONS, "entries": entries, "anchor": anchor(root)}
        altered = [dict(e) for e in entries]
        altered[1]["allowed"], altered[1]["reason"] = False, "quietly rewritten"
        v.add("b1", extensions={AUDIT_RECORD: doc})
        v.add("b2", extensions={AUDIT_RECORD: {**doc, "seq": 2, "entries": altered}})
        v.add("b3", extensions={AUDIT_RECORD: {**doc, "seq": 3, "anchor": anchor(b"\x01" * 32)}})
        view = ab.audit_view(v.open_all().entries, holder_id=h.holder_id, anchor_check=lambda b: None)
        problems = {e["batch"]["seq"]: e["batch"]["problem"] for e in view.entries}
        assert problems[1] is None
        assert "do not hash to the root" in problems[2]
        assert "does not name this batch's root" in problems[3]
        assert len(view.warnings) == 2 and view.anchored == 1
        # read again (the PWA does on every sync): the kept verdicts are per batch content, so
        # b1 and b2, one root and one anchor, are still told apart
        again = ab.audit_view(v.open_all().entries, holder_id=h.holder_id, anchor_check=lambda b: None)
        assert again.to_json() == view.to_json()
    finally:
        v.close()


def test_a_version_2_batch_carries_its_entries_as_json_text_and_one_that_does_not_parse_is_no_batch(
        tmp_path: Path) -> None:
    """What the agent writes now (entries as one JSON text) and what it wrote before (a CBOR
    array) read the same; a text that is not a JSON array of entries makes no batch."""
    v = Vault.create(tmp_path / "v", "correct horse battery staple 42")
    try:
        from ownmem.crypto import run_sync
        from ownmem.saihm.receipt import make_receipt

        h = v.holder()
        entries = [_entry(i) for i in range(3)]
        root = ab.batch_root(entries, SESSIONS)
        anchor = run_sync(make_receipt(v.crypto, xi=h.xi, holder_id=h.holder_id, operation="RECALL",
                                       subject_id=root, timestamp=1)).to_cbor().hex()
        doc = {"v": 1, "stream": "s", "seq": 1, "first": 0, "last": 1_800_000_002, "count": 3, "root": root.hex(),
               "sessions": SESSIONS, "entries": entries, "anchor": anchor}
        text = "[" + ",".join(ab.canonical(e).decode() for e in entries) + "]"
        v.add("b1", extensions={AUDIT_RECORD: doc})
        v.add("b2", extensions={AUDIT_RECORD: {**doc, "v": 2, "seq": 2, "entries": text}})
        v.add("b3", extensions={AUDIT_RECORD: {**doc, "v": 2, "seq": 3, "entries": text[:-1]}})
        v.add("b4", extensions={AUDIT_RECORD: {**doc, "v": 2, "seq": 4, "entries": "[1, 2]"}})
        batches = ab.read_batches(v.open_all().entries)
        assert [b.key[1] for b in batches] == [1, 2]
        assert batches[0].doc["entries"] == batches[1].doc["entries"] == entries
        view = ab.audit_view(v.open_all().entries, holder_id=h.holder_id, anchor_check=lambda b: None)
        assert {e["batch"]["seq"]: e["batch"]["problem"] for e in view.entries} == {1: None, 2: None}
    finally:
        v.close()


DAY = 86400


def _old_entries(folder: Path, days_ago: int, n: int) -> None:
    """``n`` entries ``days_ago`` days old written into the agent's audit.db while it is stopped (as
    the service would have written them then): what retention may delete."""
    from ownmem.agent.audit import AUDIT_INFO, AuditEntry, AuditLog, new_id

    v = Vault(folder).unlock(PASSPHRASE)
    try:
        key = v.purpose_key(AUDIT_INFO)
    finally:
        v.close()
    log = AuditLog(folder, key)
    try:
        t = int(time.time()) - days_ago * DAY
        for i in range(n):
            log.record(AuditEntry(new_id(), t + i, "sess_old", "calendar_agent", "read", "preference.theme", None,
                                  ("preference",), True, "scope matched"))
    finally:
        log.close()


def test_a_prune_inside_the_retention_is_refused_and_deletes_nothing(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[[str], UompVault],
        agents: Callable[..., Any], devices: Devices) -> None:
    """The attack of issue 19: `ownmem agent audit prune --as-of 2099-01-01` (and the raw route, and a
    retention of 0 days) erased every audit entry and every synced batch. Now each is refused with
    a clear error, and the audit on the service and on another device is what it was."""
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    agent = agents(uv.vault)
    u = Uomp(agent.port, uv.vault.folder)
    _, tok = u.session(READ)
    assert u.get("/v1/memory/preference.theme", tok).status_code == 200
    phone = devices.join(srv.url, uv.vault.name, label="phone")
    cells = _poll(lambda: _batch_cells(phone) if phone.sync() is not None else None, "a batch synced")
    before = u.admin("GET", "/v1/audit").json()["entries"]
    env, port = uv.vault.env, str(agent.port)
    for args, says in ((("--as-of", "2099-01-01"), "is in the future"), (("--days", "0"), "a shorter one is refused"),
                       (("--days", "-1"), "a shorter one is refused")):
        r = ownmem_cli("agent", "audit", "prune", *args, "--port", port, env=env)
        assert r.returncode != 0 and r.stdout == "" and says in r.stderr and "nothing was deleted" in r.stderr, \
            (args, r.stdout, r.stderr)
    # the service's route judges by its own clock whatever the CLI said
    answer = u.admin("POST", "/v1/audit/prune", {"before": 2 ** 40})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "INVALID_REQUEST", answer.text
    assert "keeps every entry for 90 days" in answer.json()["error"]["message"]
    assert u.admin("POST", "/v1/audit/prune", {"before": int(time.time()) - 89 * DAY}).status_code == 400
    # a token is no admin credential for the prune route
    assert u.post("/v1/audit/prune", tok, {"before": 0}).status_code == 401
    # nothing is 90 days old: a prune by the retention deletes nothing, and records nothing
    r = ownmem_cli("agent", "audit", "prune", "--port", port, env=env)
    assert r.returncode == 0 and r.stdout.startswith("pruned 0 ") and "forgot 0 synced" in r.stdout, r.stderr
    after = u.admin("GET", "/v1/audit").json()["entries"]
    assert after == before
    phone.sync()
    assert cells.items() <= _batch_cells(phone).items() and _view(phone).warnings == []    # every batch kept


def test_a_prune_past_the_retention_is_itself_an_audit_entry_and_its_gap_is_accounted_for(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[[str], UompVault],
        devices: Devices) -> None:
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    _old_entries(uv.vault.folder, 100, 3)               # 100 days old, in audit.db before the service starts
    # the service keeps 120 days itself (its own prune at start leaves them), so the person's
    # prune of 90 days is the one that deletes them, after their batch has synced
    agent = AgentProcess(uv.vault.folder, uv.vault.root)
    agent.env[RETENTION_DAYS_ENV] = "120"
    agent.start()
    try:
        _prune_synced(agent, uv, devices, srv)
    finally:
        agent.stop()


def _prune_synced(agent: AgentProcess, uv: UompVault, devices: Devices, srv: ServerProcess) -> None:
    u = Uomp(agent.port, uv.vault.folder)
    phone = devices.join(srv.url, uv.vault.name, label="phone")
    _poll(lambda: 1 in _batch_cells(phone) if phone.sync() is not None else None, "the old entries' batch synced")
    _, tok = u.session(READ)                            # a grant: its own batch, at once
    assert u.get("/v1/memory/preference.theme", tok).status_code == 200
    _poll(lambda: len(_batch_cells(phone)) >= 2 if phone.sync() is not None else None, "a newer batch synced")
    old_cell = _batch_cells(phone)[1]

    r = ownmem_cli("agent", "audit", "prune", "--port", str(agent.port), env=uv.vault.env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["pruned 3 audit entries older than 90 days",
                                     "forgot 1 synced audit batches older than 90 days"], r.stdout
    entries = u.admin("GET", "/v1/audit").json()["entries"]
    assert not [e for e in entries if e["session_id"] == "sess_old"]
    (deletion,) = [e for e in entries if e["action"] == "audit_pruned"]
    assert deletion["allowed"] and deletion["reason"].startswith("retention: 3 entries (")
    assert json.loads(deletion["key"])["batches"] == {ab.read_batches(phone.listing().entries)[0].key[0]: [1, 1]}
    assert "preference" not in json.dumps(deletion)    # counts and ranges, no content

    # the phone: batch 1 erased, the deletion arrives as an entry of its own batch, and the gap it
    # leaves at seq 1 is accounted for: no warning

    def settled() -> ab.AuditView | None:
        view = _view(phone)
        held = _batch_cells(phone)
        ok = 1 not in held and old_cell not in held.values() and \
            any(e["action"] == "audit_pruned" for e in view.entries)
        return view if ok else None
    view = _poll(settled, "the deletion reaches the phone")
    assert view.warnings == [], view.warnings
    assert not [e for e in view.entries if e["session_id"] == "sess_old"]


def test_a_batch_deleted_on_the_server_shows_as_a_gap_on_another_device(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[[str], UompVault],
        agents: Callable[..., Any], devices: Devices) -> None:
    """A hostile server (or anyone at its database) deletes the oldest batch, which no seq before it
    betrayed, then every batch: another device reports both, no deletion entry accounting for them."""
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    agent = agents(uv.vault)
    u = Uomp(agent.port, uv.vault.folder)
    _, tok = u.session(READ)
    phone = devices.join(srv.url, uv.vault.name, label="phone")
    holder = phone.v.holder().holder_id.hex()
    for n in range(1, 4):
        assert u.get("/v1/memory/preference.theme", tok).status_code == 200
        _poll(partial(_anchored, srv, holder, n), f"batch {n} anchored")
    cells = _poll(lambda: _batch_cells(phone) if phone.sync() is not None and len(_batch_cells(phone)) >= 3
                  else None, "three batches synced")
    agent.stop()                                # nothing sealed while the server is tampered with

    def drop(seqs: list[int]) -> None:
        db = sqlite3.connect(sqlite_backend.sqlite_path, timeout=30)
        try:
            with db:
                for q in seqs:
                    db.execute("DELETE FROM cells WHERE cell_id = ?", (cells[q],))
                    db.execute("DELETE FROM changes WHERE cell_id = ?", (cells[q],))
        finally:
            db.close()
    drop([1])
    tablet = devices.join(srv.url, uv.vault.name, label="tablet")
    view = _view(tablet, grace=0)
    assert 1 not in _batch_cells(tablet)
    assert any(w.startswith("audit batch 2:") and "(1) did not reach this device and no deletion in this audit "
               "accounts for them" in w for w in view.warnings), view.warnings
    drop(sorted(cells)[1:])
    laptop = devices.join(srv.url, uv.vault.name, label="laptop")
    view = _view(laptop, grace=0)
    assert _batch_cells(laptop) == {} and view.entries == []
    assert len(view.warnings) == 1 and "anchored in the public log in the last 90 days" in view.warnings[0] \
        and "the audit shown is incomplete" in view.warnings[0], view.warnings
    # (`ownmem agent audit` on such a device prints these warnings, one `warning:` line each, once the
    # anchors are a minute old: the grace a batch sealed after its anchor is given)


def test_the_cursor_survives_an_audit_db_pruned_empty_and_batches_are_bounded(tmp_path: Path) -> None:
    """SQLite numbers rows from 1 again once a table is empty: entries written after a prune
    that emptied audit.db are still batched, not skipped as below the cursor."""
    from types import SimpleNamespace

    from ownmem.agent.audit import AuditEntry, AuditLog

    log = AuditLog(tmp_path, b"\x01" * 32)
    try:
        def entry(i: int, ts: int) -> AuditEntry:
            return AuditEntry(f"log_{i}", ts, "sess_a", "cal", "read", "k", None, (), True, "scope matched")
        for i in range(3):
            log.record(entry(i, 10))
        s = au.AuditSync(op=None, u=SimpleNamespace(audit=log), folder=tmp_path)  # type: ignore[arg-type]  # _next reads the audit only
        assert [d["id"] for _, d, _ in s._next()] == ["log_0", "log_1", "log_2"]
        s.state.rowid = 3                       # batched
        assert s._next() == []
        assert log.prune(before=11) == 3        # every row gone
        log.record(entry(7, 20))
        assert [d["id"] for _, d, _ in s._next()] == ["log_7"]
        # a batch is bounded in bytes as well as entries: long entries split into more batches
        s.state.rowid = log.last_rowid()
        # (long: 60 tags of 1,000 characters, ~60 KB; one string is cut at audit.MAX_AUDITED since issue 19)
        for i in range(10):
            log.record(AuditEntry(f"log_big{i}", 30, "sess_a", "cal", "query", "q", None,
                                  tuple(f"{t:03d}" + "t" * 997 for t in range(60)), True, "ok"))
        first = s._next()
        assert 1 <= len(first) < 10
        assert sum(len(c) for _, _, c in first) <= au.MAX_BYTES
        assert all(c == ab.canonical(d) for _, d, c in first)
    finally:
        log.close()
