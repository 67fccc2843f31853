"""POST /v1/vaults/{name}/receipts on both backends, and the REMEMBER receipts a device's push
writes (SAIHM "Audit log", "Receipt semantics", "Order of effect and receipt").

Attacker's side: another holder's receipt, a forged signature, a receipt whose id does not
match, operations the route does not take, a non-deterministic encoding, truncated and
oversized batches, no or another vault's credential, replays (idempotent)."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from ownmem.crypto import cbor, random_bytes, run_sync
from ownmem.errors import SyncError
from ownmem.saihm.receipt import make_receipt, parse_receipt
from ownmem.vault.remote import Remote
from ownmem.wire import codec
from ownmem.wire.errors import ErrorCode
from ownmem.wire.limits import MAX_RECEIPTS
from tests.agent.agentkit import LogReader
from tests.sync.hostile import Answer, HostileProxy
from tests.sync.synckit import Backend, Device, Devices, ServerProcess


def _receipt(d: Device, op: str, subject: bytes, **kw: Any) -> bytes:
    v = d.v
    h = v.holder()
    return run_sync(make_receipt(v.crypto, xi=h.xi, holder_id=h.holder_id, operation=op, subject_id=subject,
                                 timestamp=int(time.time()), **kw)).to_cbor()


def _cell_id(d: Device, oid: bytes) -> str:
    """The cell id of a pushed object, hex."""
    cell = d.syncer.store.cell_of(oid)
    assert cell is not None, "the object has no cell yet"
    return cell[0].hex()


def _post(d: Device, body: object, token: str | None = "own") -> httpx.Response:
    remote: Remote = d.remote
    d.syncer.ensure_login()
    auth = {"Authorization": f"Bearer {remote.token if token == 'own' else token}"} if token else {}
    return httpx.post(f"{remote.base}/v1/vaults/{remote.name}/receipts", json=body, headers=auth, timeout=30)


def test_receipts_are_checked_then_logged_idempotently_on_both_backends(
        backend: Backend, servers: Callable[..., ServerProcess], devices: Devices) -> None:
    srv = servers(backend)
    a = devices.first(srv.url, f"rcpt-a-{backend.kind}")
    b = devices.first(srv.url, f"rcpt-b-{backend.kind}", label="other")
    ops = [_receipt(a, op, random_bytes(32)) for op in ("REMEMBER", "RECALL", "STATUS")]
    ids = [parse_receipt(r).receipt_id for r in ops]
    log = LogReader(srv.url)
    try:
        size = log.checkpoint().size
        assert a.remote.post_receipts(ops) == tuple(ids)
        assert log.checkpoint().size == size + 3
        # replayed, alone and inside a batch with a new one: no second entry, no new leaf
        again = _receipt(a, "REMEMBER", random_bytes(32))
        assert a.remote.post_receipts(ops + [ops[0], again]) == tuple(ids) + (parse_receipt(again).receipt_id,)
        assert log.checkpoint().size == size + 4
        for rid in ids:
            assert a.remote.get_receipt(rid) == ops[ids.index(rid)]
        assert a.remote.get_receipt(random_bytes(32)) is None

        def refused(body: object, code: str, token: str | None = "own") -> None:
            before = log.checkpoint().size
            r = _post(a, body, token)
            assert r.status_code == ErrorCode(code).status and r.json()["error"] == code, r.text
            assert log.checkpoint().size == before, "a refused request logged something"

        fresh = _receipt(a, "REMEMBER", random_bytes(32))
        # every other operation has its own route, or none
        for op in ("KEY", "FORGET", "SHARE", "REVOKE", "PROPOSE", "VOTE"):
            refused({"receipts": [fresh.hex(), _receipt(a, op, random_bytes(32)).hex()]}, "malformed_receipt")
        # another holder's receipt, even over the right vault's credential
        refused({"receipts": [fresh.hex(), _receipt(b, "REMEMBER", random_bytes(32)).hex()]}, "wrong_holder")
        # a forged signature; an id that does not match the body
        r = parse_receipt(fresh)
        forged = cbor.encode({1: r.receipt_id, 2: r.subject_id, 3: r.operation, 4: r.holder_id,
                              5: bytes(len(r.signature)), 6: r.timestamp, 8: r.nonce})
        refused({"receipts": [forged.hex()]}, "bad_signature")
        moved = cbor.encode({1: random_bytes(32), 2: r.subject_id, 3: r.operation, 4: r.holder_id,
                             5: r.signature, 6: r.timestamp, 8: r.nonce})
        refused({"receipts": [moved.hex()]}, "bad_signature")
        # not deterministic CBOR (a map in another key order), truncated, not hex, not a list
        reordered = b"\xa7" + b"".join(cbor.encode(k) + cbor.encode(v) for k, v in reversed(
            [(1, r.receipt_id), (2, r.subject_id), (3, r.operation), (4, r.holder_id), (5, r.signature),
             (6, r.timestamp), (8, r.nonce)]))
        refused({"receipts": [reordered.hex()]}, "malformed_receipt")
        refused({"receipts": [fresh[:-10].hex()]}, "malformed_receipt")
        refused({"receipts": ["zz"]}, "malformed")
        refused({"receipts": []}, "malformed")
        refused({"receipts": fresh.hex()}, "malformed")
        refused({}, "malformed")
        # over the batch bound: its own 413, before any hex is read
        refused({"receipts": [fresh.hex()] * (MAX_RECEIPTS + 1)}, "too_many_receipts")
        # no credential, and another vault's
        refused({"receipts": [fresh.hex()]}, "unauthenticated", token=None)
        b.syncer.ensure_login()
        refused({"receipts": [fresh.hex()]}, "wrong_vault", token=b.remote.token)
        assert a.remote.get_receipt(parse_receipt(fresh).receipt_id) is None
    finally:
        log.close()


def test_every_pushed_cell_has_its_remember_receipt_in_the_log_before_it_is_pushed(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], devices: Devices) -> None:
    srv = servers(sqlite_backend)
    proxy = HostileProxy(srv.url).start()
    log = LogReader(srv.url)
    try:
        d = devices.first(proxy.url, "remember-order", sync=False)
        for i in range(5):
            d.v.add(f"memory {i}")
        d.sync()
        # in the order the server received them: each pushed cell's REMEMBER receipt was
        # logged (answered 200) by an earlier request
        logged: set[bytes] = set()
        answers = iter(proxy.all_answers("POST", r"/receipts$"))
        pushed = 0
        for seen in proxy.seen:
            if seen.path.endswith("/receipts"):
                assert next(answers).status == 200
                logged |= {parse_receipt(bytes.fromhex(h)).subject_id for h in codec.load_json(seen.body)["receipts"]}
            elif seen.path.endswith("/cells"):
                for cell, _ in cbor.decode(seen.body):
                    assert cbor.decode(cell)[1] in logged
                    pushed += 1
        assert pushed == 5
        cell_ids = {_cell_id(d, o) for o in d.syncer.store.object_ids()}
        assert len(cell_ids) == 5
        for cid in cell_ids:
            got = log.list(subject=cid, operation="REMEMBER")
            assert len(got) == 1 and got[0]["holder_id"] == d.v.holder().holder_id.hex()
            assert b"memory" not in bytes.fromhex(got[0]["receipt"])
    finally:
        proxy.stop()
        log.close()


def test_a_retried_push_resends_the_same_receipt_and_never_signs_a_second(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], devices: Devices) -> None:
    srv = servers(sqlite_backend)
    proxy = HostileProxy(srv.url).start()
    log = LogReader(srv.url)
    try:
        d = devices.first(proxy.url, "remember-retry", sync=True)
        d.v.add("once only")
        # the receipts are logged, but their answer is lost; then the push itself fails
        proxy.on("POST", r"/receipts$", lambda s, a: Answer(-1, {}, b""), once=True)
        proxy.on("POST", r"/cells$", lambda s, a: Answer(503, {}, b"busy"), once=True)
        failures = 0
        for _ in range(6):       # a sync may also meet the connection the lost answer broke
            try:
                d.sync()
                break
            except SyncError:
                failures += 1
        assert 2 <= failures < 6 and all(r.fired == 1 for r in proxy.rules)
        (oid,) = d.syncer.store.object_ids()
        cid = _cell_id(d, oid)
        assert len(log.list(subject=cid, operation="REMEMBER")) == 1
        posted = [s for s in proxy.seen if s.path.endswith("/receipts")]
        assert len(posted) == 2 and posted[0].body == posted[1].body    # the same bytes, re-sent
        # once logged and marked, later syncs post nothing
        d.sync()
        assert len([s for s in proxy.seen if s.path.endswith("/receipts")]) == 2
    finally:
        proxy.stop()
        log.close()
