"""Sharing between people end to end (issue 9 item 5, Bar "Sharing"): two real vaults on one
real server process, on SQLite and PostgreSQL (SAIHM "Sharing contracts", "Order of effect
and receipt").

A shares two memories with B; before B accepts, B gets nothing; once accepted B receives
them marked as A's; A revokes, and B's next fetch has none while the server's database
holds no share key of that contract any more.  Then expiry, decline, withdraw, erasure of a
shared cell, and the attacks: each refused with a clear error, nothing changed.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from ownmem.crypto import cbor, run_sync, sha256
from ownmem.errors import SyncError
from ownmem.saihm.contract import CONTRACT_CONTEXT
from ownmem.saihm.receipt import make_receipt, parse_receipt, verify_receipt
from ownmem.vault import share_tools, sharing
from ownmem.vault.sharing import ShareRefused
from ownmem.wire import shares, signed
from ownmem.wire.limits import HOLDER_SIG_LEN
from tests.sync.hostile import Answer, HostileProxy, Seen
from tests.sync.synckit import Backend, Device, Devices, ServerProcess, cli_env, ownmem

B_PASSPHRASE = "sync tests: the second person's own passphrase 77"
C_PASSPHRASE = "sync tests: a third person, mallory, 12 oranges"


@dataclass
class People:
    server: ServerProcess
    backend: Backend
    a: Device
    b: Device

    @property
    def b_id(self) -> bytes:
        return self.b.v.holder().holder_id

    @property
    def a_id(self) -> bytes:
        return self.a.v.holder().holder_id


_n = 0


def _people(backend: Backend, servers: Callable[..., ServerProcess], devices: Devices) -> People:
    global _n
    _n += 1
    srv = servers(backend)
    a = devices.first(srv.url, f"alice{_n}", label="a")
    b = devices.first(srv.url, f"bob{_n}", label="b", passphrase=B_PASSPHRASE)
    return People(srv, backend, a, b)


def _directory(url: str, holder_id: bytes, asker: Device | None) -> httpx.Response:
    """GET /v1/holders/{holder_id} with the credential of ``asker``'s vault (None: a stranger)."""
    headers = {}
    if asker is not None:
        asker.syncer.ensure_login()
        headers["Authorization"] = f"Bearer {asker.syncer.remote.token}"
    return httpx.get(f"{url}/v1/holders/{holder_id.hex()}", headers=headers, timeout=30)


def test_the_directory_answers_a_stranger_alike_for_a_held_and_a_free_name(
        backend: Backend, servers: Callable[..., ServerProcess], devices: Devices) -> None:
    """Issue 19 item 8. A vault lookup answers a held name with its holderId and a free name with a
    decoy's; the directory then answered the first 200 and the second 404. To a stranger (no
    credential, or a forged one) both are now the same 401; the person's vaults still use it."""
    p = _people(backend, servers, devices)
    held = httpx.get(f"{p.server.url}/v1/vaults/{p.b.remote.name}", timeout=30).json()
    free = httpx.get(f"{p.server.url}/v1/vaults/nobody-holds-this-{_n}", timeout=30).json()
    assert set(held) == set(free) and held["holder_id"] == p.b_id.hex()      # the lookup's decoy holds
    answers = []
    for holder_id in (bytes.fromhex(held["holder_id"]), bytes.fromhex(free["holder_id"])):
        for headers in ({}, {"Authorization": "Bearer " + "A" * 43}):
            r = httpx.get(f"{p.server.url}/v1/holders/{holder_id.hex()}", headers=headers, timeout=30)
            answers.append((r.status_code, r.json()))
    assert answers[0][0] == 401 and answers[0][1]["error"] == "unauthenticated", answers[0]
    assert all(a == answers[0] for a in answers), answers
    # a vault of this server (a sharer) still reads the record, and learns a free id is no one's
    assert _directory(p.server.url, p.b_id, p.a).json()["holder_id"] == p.b_id.hex()
    assert _directory(p.server.url, bytes.fromhex(free["holder_id"]), p.a).status_code == 404


def share_keys(backend: Backend, contract_id: bytes | None = None) -> int:
    if contract_id is None:
        return int(backend.rows("SELECT count(*) FROM share_keys")[0][0])
    return int(backend.rows("SELECT count(*) FROM share_keys WHERE contract_id = ?", (contract_id,))[0][0])


def test_share_accept_receive_revoke(backend: Backend, servers: Callable[..., ServerProcess], devices: Devices) -> None:
    p = _people(backend, servers, devices)
    m1 = p.a.v.add("the spare key is under the blue pot")
    m2 = p.a.v.add("Grandma's soup: leek, potato, a bay leaf")
    p.a.v.add("not shared: my bank PIN hint")
    p.a.sync()
    made = sharing.share(p.a.syncer, [m1.hex(), m2.hex()], [p.b_id], "permanent")
    assert len(made.cell_ids) == 2 and made.expires_at == 0
    # the SHARE receipt is in the public log, subject the contract
    logged = httpx.get(f"{p.server.url}/v1/log/{made.receipt_id.hex()}").json()
    assert logged["operation"] == "SHARE" and logged["subject_id"] == made.contract_id.hex()
    # anyone can check it against A's holder key (public: A's KEY receipt in the log carries it)
    key = httpx.get(f"{p.server.url}/v1/log", params={"holder": p.a_id.hex(), "operation": "KEY"}).json()
    a_pub = parse_receipt(bytes.fromhex(key["entries"][0]["receipt"])).detail
    run_sync(verify_receipt(p.a.v.crypto, parse_receipt(bytes.fromhex(logged["receipt"])), a_pub))
    assert share_keys(backend, made.contract_id) == 2

    # before acceptance: offered, nothing released
    offers = sharing.offers(p.b.syncer)
    assert [(o.contract_id, o.state) for o in offers.received] == [(made.contract_id, "offered")]
    assert sharing.received(p.b.syncer).memories == ()
    mine = sharing.offers(p.a.syncer).offered
    assert [(o.grantee, o.state) for o in mine] == [(p.b_id, "offered")]

    assert sharing.accept(p.b.syncer, made.contract_id) == "accepted"
    got = sharing.received(p.b.syncer)
    assert got.refused == ()
    assert {m.content for m in got.memories} == {"the spare key is under the blue pot",
                                                "Grandma's soup: leek, potato, a bay leaf"}
    assert all(m.owner_holder_id == p.a_id and m.authorship == "shared" and m.contract_id == made.contract_id
               for m in got.memories)
    # B's own vault holds none of A's memories: shared, not copied
    p.b.sync()
    assert p.b.contents() == set()

    # revoke: access first, then the receipt; the keys are gone from the database
    rv = sharing.revoke(p.a.syncer, made.contract_id)
    assert rv.revoked and not rv.already
    assert share_keys(backend, made.contract_id) == 0
    assert sharing.received(p.b.syncer).memories == ()
    r = httpx.get(f"{p.server.url}/v1/log", params={"subject": made.contract_id.hex(), "operation": "REVOKE"}).json()
    assert [e["receipt_id"] for e in r["entries"]] == [rv.receipt_id.hex()]
    run_sync(verify_receipt(p.a.v.crypto, parse_receipt(bytes.fromhex(r["entries"][0]["receipt"])), a_pub))
    # a repeated revoke answers revoked = true and writes no receipt
    again = sharing.revoke(p.a.syncer, made.contract_id)
    assert again.revoked and again.already and again.receipt_id == rv.receipt_id
    r = httpx.get(f"{p.server.url}/v1/log", params={"subject": made.contract_id.hex(), "operation": "REVOKE"}).json()
    assert len(r["entries"]) == 1
    # a revoked contract cannot be accepted again
    with pytest.raises(SyncError) as e:
        sharing.accept(p.b.syncer, made.contract_id)
    assert e.value.server_code == "contract_closed"
    assert [o.revoked for o in sharing.offers(p.b.syncer).received] == [True]


def test_temporary_expiry_deletes_the_keys(backend: Backend, servers: Callable[..., ServerProcess],
                                           devices: Devices) -> None:
    p = _people(backend, servers, devices)
    m = p.a.v.add("for a few seconds only")
    p.a.sync()
    now = int(time.time())
    made = sharing.share(p.a.syncer, [m.hex()], [p.b_id], "temporary", expires=now + 3, now=now)
    assert made.mode == "TEMPORARY" and made.expires_at == now + 3
    sharing.accept(p.b.syncer, made.contract_id)
    assert [x.content for x in sharing.received(p.b.syncer).memories] == ["for a few seconds only"]
    while time.time() <= now + 3.5:
        time.sleep(0.25)
    assert sharing.received(p.b.syncer).memories == ()
    assert share_keys(backend, made.contract_id) == 0          # the sweep deleted them, not only hid them
    assert [x.expired for x in sharing.offers(p.b.syncer).received] == [True]


def test_decline_and_withdraw(backend: Backend, servers: Callable[..., ServerProcess], devices: Devices) -> None:
    p = _people(backend, servers, devices)
    m = p.a.v.add("an offer to think about")
    p.a.sync()
    first = sharing.share(p.a.syncer, [m.hex()], [p.b_id], "permanent")
    assert sharing.decline(p.b.syncer, first.contract_id) == "declined"
    assert share_keys(backend, first.contract_id) == 0
    assert sharing.received(p.b.syncer).memories == ()
    with pytest.raises(SyncError) as e:       # declined is final: a new offer is needed
        sharing.accept(p.b.syncer, first.contract_id)
    assert e.value.server_code == "contract_closed"
    assert sharing.decline(p.b.syncer, first.contract_id) == "declined"    # repeating shows the outcome

    second = sharing.share(p.a.syncer, [m.hex()], [p.b_id], "syndicate")
    sharing.accept(p.b.syncer, second.contract_id)
    assert len(sharing.received(p.b.syncer).memories) == 1
    assert sharing.withdraw(p.b.syncer, second.contract_id) == "withdrawn"
    assert sharing.received(p.b.syncer).memories == ()
    assert share_keys(backend, second.contract_id) == 0
    states = {(o.contract_id, o.grantee): o.state for o in sharing.offers(p.a.syncer).offered}
    assert states == {(first.contract_id, p.b_id): "declined", (second.contract_id, p.b_id): "withdrawn"}
    with pytest.raises(SyncError) as e:       # a stranger's contract id is no contract of B's
        sharing.withdraw(p.b.syncer, b"\x07" * 32)
    assert e.value.server_code == "contract_not_found"


def test_erasing_a_shared_cell_removes_it_from_the_grantee(backend: Backend, servers: Callable[..., ServerProcess],
                                                           devices: Devices) -> None:
    p = _people(backend, servers, devices)
    m1, m2 = p.a.v.add("to be forgotten"), p.a.v.add("to be kept")
    p.a.sync()
    made = sharing.share(p.a.syncer, [m1.hex(), m2.hex()], [p.b_id], "permanent")
    sharing.accept(p.b.syncer, made.contract_id)
    assert len(sharing.received(p.b.syncer).memories) == 2
    gone_cell = p.a.v.store.cell_of(m1)
    assert gone_cell is not None
    p.a.v.forget(m1.hex())
    p.a.sync()
    assert [x.content for x in sharing.received(p.b.syncer).memories] == ["to be kept"]
    assert backend.rows("SELECT count(*) FROM share_keys WHERE cell_id = ?", (gone_cell[0],))[0][0] == 0
    assert share_keys(backend, made.contract_id) == 1


# ---------------------------------------------------------------- the attacker's side

def _signed(dev: Device, body: dict[int, Any]) -> tuple[bytes, bytes]:
    """A contract map of any content (``body``: keys 2..8 and 10), signed by ``dev``'s holder."""
    h = dev.v.holder()
    raw = cbor.encode(body)
    sig = run_sync(dev.v.crypto.mldsa65_sign(h.xi, raw, CONTRACT_CONTEXT))
    cid = sha256(raw)
    return cbor.encode({**body, 1: cid, 9: sig}), cid


def _body(dev: Device, grantees: list[bytes], shards: list[bytes], *, mode: str = "PERMANENT", scope: str = "read",
          expires: int = 0, ts: int | None = None) -> dict[int, Any]:
    return {2: dev.v.holder().holder_id, 3: grantees, 4: shards, 5: mode, 6: scope, 7: expires,
            8: int(time.time()) if ts is None else ts, 10: b"\x11" * 16}


def _offer(dev: Device, contract: bytes, cid: bytes, pairs: list[tuple[bytes, bytes]],
           receipt_op: str = "SHARE", signer: Device | None = None) -> shares.ShareOffered:
    h = (signer or dev).v.holder()
    r = run_sync(make_receipt(dev.v.crypto, xi=h.xi, holder_id=h.holder_id, operation=receipt_op, subject_id=cid,
                              timestamp=int(time.time())))
    items = tuple(shares.ShareItem(g, c, b"\x22" * shares.SHARE_KEY_LEN).encode() for g, c in pairs)
    return sharing.ShareRemote(dev.syncer).offer(shares.ShareOffer(contract, r.to_cbor(), items))


def _state(backend: Backend) -> tuple[int, int, int, int]:
    def one(q: str) -> int:
        return int(backend.rows(q)[0][0])

    return (one("SELECT count(*) FROM contracts"), one("SELECT count(*) FROM contract_grantees"),
            one("SELECT count(*) FROM share_keys"), one("SELECT count(*) FROM log"))


def test_forged_and_rule_breaking_offers_are_refused(backend: Backend, servers: Callable[..., ServerProcess],
                                                     devices: Devices) -> None:
    p = _people(backend, servers, devices)
    m = p.a.v.add("a memory of A's")
    p.a.sync()
    b_mem = p.b.v.add("a memory of B's")
    p.b.sync()
    a_cell, b_cell = p.a.v.store.cell_of(m), p.b.v.store.cell_of(b_mem)
    assert a_cell is not None and b_cell is not None
    cell, bid = a_cell[0], p.b_id
    now = int(time.time())
    good, good_id = _signed(p.a, _body(p.a, [bid], [cell]))
    m_good = cbor.decode(good)
    altered = cbor.encode({**m_good, 8: m_good[8] + 1})                 # timestamp changed after signing
    rehashed = dict(m_good)
    rehashed[5] = "SYNDICATE"
    rehashed[1] = sha256(cbor.encode({k: v for k, v in rehashed.items() if k not in (1, 9)}))
    cases: list[tuple[str, bytes, bytes, list[tuple[bytes, bytes]], str]] = [
        ("altered after signing", altered, good_id, [(bid, cell)], "bad_signature"),
        ("altered, contractId recomputed", cbor.encode(rehashed), rehashed[1], [(bid, cell)], "bad_signature"),
    ]
    for label, body, code in [
        ("foreign shardIds (B's cell)", _body(p.a, [bid], [b_cell[0]]), "shard_not_found"),
        ("a cell nobody holds", _body(p.a, [bid], [b"\x05" * 32]), "shard_not_found"),
        ("duplicate grantees", _body(p.a, [bid, bid], [cell]), "invalid_grantee"),
        ("a 31-byte grantee", _body(p.a, [bid[:31]], [cell]), "invalid_grantee"),
        ("a 33-byte grantee", _body(p.a, [bid + b"\x00"], [cell]), "invalid_grantee"),
        ("an unregistered grantee", _body(p.a, [b"\x09" * 32], [cell]), "invalid_grantee"),
        ("sharing with oneself", _body(p.a, [p.a_id], [cell]), "invalid_grantee"),
        ("scope write", _body(p.a, [bid], [cell], scope="write"), "invalid_scope"),
        ("scope readwrite", _body(p.a, [bid], [cell], scope="readwrite"), "invalid_scope"),
        ("an unknown mode", _body(p.a, [bid], [cell], mode="FOREVER"), "invalid_mode"),
        ("TEMPORARY beyond 24 h", _body(p.a, [bid], [cell], mode="TEMPORARY", expires=now + 86401, ts=now),
         "invalid_expiry"),
        ("TEMPORARY without expiry", _body(p.a, [bid], [cell], mode="TEMPORARY", expires=0), "invalid_expiry"),
        ("PERMANENT with an expiry", _body(p.a, [bid], [cell], expires=now + 60), "invalid_expiry"),
        ("TEMPORARY already expired", _body(p.a, [bid], [cell], mode="TEMPORARY", expires=now - 10, ts=now - 100),
         "invalid_expiry"),
        ("backdated by a day", _body(p.a, [bid], [cell], ts=now - 86400), "invalid_expiry"),
    ]:
        c, cid = _signed(p.a, body)
        pairs = [(g if len(g) == 32 else bid, s) for g in body[3] for s in body[4]]
        cases.append((label, c, cid, pairs, code))
    # a contract B signed, offered through A's session
    b_contract, b_cid = _signed(p.b, {**_body(p.b, [p.a_id], [b_cell[0]])})
    cases.append(("another holder's contract", b_contract, b_cid, [(p.a_id, b_cell[0])], "wrong_holder"))
    cases.append(("a key missing", good, good_id, [(bid, b_cell[0])], "malformed_contract"))
    cases.append(("a key twice", good, good_id, [(bid, cell), (bid, cell)], "malformed_contract"))
    before = _state(backend)
    for label, c, cid, pairs, code in cases:
        with pytest.raises(SyncError) as e:
            _offer(p.a, c, cid, pairs)
        assert e.value.server_code == code, (label, e.value)
        assert _state(backend) == before, label
    # a receipt of another operation, of another subject, of another holder
    wrong: list[tuple[str, dict[str, Any], str]] = [
        ("a FORGET receipt", {"receipt_op": "FORGET"}, "malformed_receipt"),
        ("a receipt signed by B", {"signer": p.b}, "wrong_holder")]
    for label, kw, code in wrong:
        with pytest.raises(SyncError) as e:
            _offer(p.a, good, good_id, [(bid, cell)], **kw)
        assert e.value.server_code == code, label
    with pytest.raises(SyncError) as e:
        _offer(p.a, good, b"\x01" * 32, [(bid, cell)])
    assert e.value.server_code == "malformed_receipt"
    assert _state(backend) == before

    # the honest offer goes through once; replayed, it is refused and changes nothing
    _offer(p.a, good, good_id, [(bid, cell)])
    after = _state(backend)
    assert after == (before[0] + 1, before[1] + 1, before[2] + 1, before[3] + 1)
    with pytest.raises(SyncError) as e:
        _offer(p.a, good, good_id, [(bid, cell)])
    assert e.value.server_code == "contract_exists"
    assert _state(backend) == after


def test_revoke_by_someone_else_is_refused(backend: Backend, servers: Callable[..., ServerProcess],
                                           devices: Devices) -> None:
    p = _people(backend, servers, devices)
    m = p.a.v.add("still shared after the attempt")
    p.a.sync()
    made = sharing.share(p.a.syncer, [m.hex()], [p.b_id], "permanent")
    sharing.accept(p.b.syncer, made.contract_id)
    before = _state(backend)
    # B, with its own REVOKE receipt: B is not the contract's holder
    with pytest.raises(SyncError) as e:
        sharing.revoke(p.b.syncer, made.contract_id)
    assert e.value.server_code == "not_holder"
    # B, replaying a REVOKE receipt of A's through B's session: not B's holder
    h = p.a.v.holder()
    a_receipt = run_sync(make_receipt(p.a.v.crypto, xi=h.xi, holder_id=h.holder_id, operation="REVOKE",
                                      subject_id=made.contract_id, timestamp=int(time.time())))
    with pytest.raises(SyncError) as e:
        sharing.ShareRemote(p.b.syncer).revoke(made.contract_id, a_receipt.to_cbor())
    assert e.value.server_code == "wrong_holder"
    # A, with a receipt for another contract
    other = run_sync(make_receipt(p.a.v.crypto, xi=h.xi, holder_id=h.holder_id, operation="REVOKE",
                                  subject_id=b"\x03" * 32, timestamp=int(time.time())))
    with pytest.raises(SyncError) as e:
        sharing.ShareRemote(p.a.syncer).revoke(made.contract_id, other.to_cbor())
    assert e.value.server_code == "malformed_receipt"
    # A, revoking a contract that does not exist
    with pytest.raises(SyncError) as e:
        sharing.revoke(p.a.syncer, b"\x03" * 32)
    assert e.value.server_code == "contract_not_found"
    assert _state(backend) == before
    assert [x.content for x in sharing.received(p.b.syncer).memories] == ["still shared after the attempt"]


def _rewrite_record(**fields: Callable[[Any], Any]) -> Callable[[Seen, Answer], Answer]:
    def fn(seen: Seen, ans: Answer) -> Answer:
        body = ans.json()
        for k, f in fields.items():
            body[k] = f(body)
        return ans.with_json(body)
    return fn


def test_a_substituted_grantee_key_is_refused_by_the_sharer(backend: Backend, servers: Callable[..., ServerProcess],
                                                             devices: Devices) -> None:
    srv = servers(backend)
    proxy = HostileProxy(srv.url).start()
    try:
        a = devices.first(proxy.url, "alice-proxied", label="a")
        b = devices.first(srv.url, "bob-direct", label="b", passphrase=B_PASSPHRASE)
        c = devices.first(srv.url, "carol-direct", label="c", passphrase=C_PASSPHRASE)
        m = a.v.add("only for B")
        a.sync()
        bid = b.v.holder().holder_id
        c_record = _directory(srv.url, c.v.holder().holder_id, b).json()
        server_key = run_sync(a.v.crypto.x25519_public(b"\x44" * 32)).hex()
        before = _state(backend)
        for label, rewrite in [
            ("the server's own X25519 key", _rewrite_record(ka_pub=lambda _: server_key)),
            ("another owner key", _rewrite_record(owner_pub=lambda _: "ab" * 32)),
            ("another vault's proof", _rewrite_record(holder_proof=lambda _: c_record["holder_proof"])),
            ("another holder's whole record", lambda s, ans: ans.with_json(c_record)),
            ("C's keys under B's holderId", _rewrite_record(ka_pub=lambda _: c_record["ka_pub"],
                                                            owner_pub=lambda _: c_record["owner_pub"])),
        ]:
            proxy.clear()
            proxy.on("GET", r"^/v1/holders/", rewrite)
            with pytest.raises(ShareRefused):
                sharing.share(a.syncer, [m.hex()], [bid], "permanent")
            assert _state(backend) == before, label
        proxy.clear()
        made = sharing.share(a.syncer, [m.hex()], [bid], "permanent")     # the honest directory works
        sharing.accept(b.syncer, made.contract_id)
        assert [x.content for x in sharing.received(b.syncer).memories] == ["only for B"]
    finally:
        proxy.stop()


def test_a_cell_swapped_in_the_grantees_fetch_is_refused(backend: Backend, servers: Callable[..., ServerProcess],
                                                        devices: Devices) -> None:
    srv = servers(backend)
    proxy = HostileProxy(srv.url).start()
    try:
        a = devices.first(srv.url, "alice-direct", label="a")
        b = devices.first(proxy.url, "bob-proxied", label="b", passphrase=B_PASSPHRASE)
        m1, m2, m3 = a.v.add("shared one"), a.v.add("shared two"), a.v.add("never shared")
        a.sync()
        bid = b.v.holder().holder_id
        made = sharing.share(a.syncer, [m1.hex(), m2.hex()], [bid], "permanent")
        sharing.accept(b.syncer, made.contract_id)
        assert {x.content for x in sharing.received(b.syncer).memories} == {"shared one", "shared two"}
        uncovered = a.v.store.cell_of(m3)
        assert uncovered is not None

        def rows(fn: Callable[[list[list[Any]]], None]) -> Callable[[Seen, Answer], Answer]:
            def rw(seen: Seen, ans: Answer) -> Answer:
                page = cbor.decode(ans.body)
                fn(page[1])
                return replace(ans, body=cbor.encode(page))
            return rw

        def swap_cells(r: list[list[Any]]) -> None:
            r[0][2], r[1][2] = r[1][2], r[0][2]

        def uncovered_cell(r: list[list[Any]]) -> None:
            r[0][2] = uncovered[1]

        def uncovered_id(r: list[list[Any]]) -> None:
            r[0][1], r[0][2] = uncovered[0], uncovered[1]
            r.sort(key=lambda x: x[0] + x[1])

        def swap_keys(r: list[list[Any]]) -> None:
            r[0][3], r[1][3] = r[1][3], r[0][3]

        def flip_ciphertext(r: list[list[Any]]) -> None:
            cell = cbor.decode(r[0][2])
            ct = bytearray(cell[6])
            ct[-1] ^= 1
            cell[6] = bytes(ct)
            r[0][2] = cbor.encode(cell)

        def other_contract(r: list[list[Any]]) -> None:
            r[0][0] = b"\x00" * 32
            r.sort(key=lambda x: x[0] + x[1])

        for label, fn in [("two cells swapped", swap_cells), ("an uncovered cell under a covered id", uncovered_cell),
                          ("an uncovered cell and id", uncovered_id), ("two keys swapped", swap_keys),
                          ("a flipped ciphertext bit", flip_ciphertext),
                          ("a contract B never accepted", other_contract)]:
            proxy.clear()
            proxy.on("GET", r"/shared$", rows(fn))
            got = sharing.received(b.syncer)
            shown = {x.content for x in got.memories}
            assert "never shared" not in shown, label
            assert got.refused, label
            assert len(got.memories) + len(got.refused) == 2, label
            assert all(x.owner_holder_id == a.v.holder().holder_id for x in got.memories)
    finally:
        proxy.stop()


# ---------------------------------------------------------------- the CLI

def test_cli_share_accept_received_revoke(sqlite_backend: Backend, servers: Callable[..., ServerProcess],
                                          tmp_path: Path) -> None:
    srv = servers(sqlite_backend)
    ea = cli_env(tmp_path / "a", tmp_path / "a" / "vault")
    eb = cli_env(tmp_path / "b", tmp_path / "b" / "vault", B_PASSPHRASE)
    for env, name in ((ea, "alice-cli"), (eb, "bob-cli")):
        assert ownmem("init", env=env).returncode == 0
        r = ownmem("login", "--server", srv.url, "--vault-name", name, env=env)
        assert r.returncode == 0, r.stderr
    for text in ("the cli shares this", "and this \x1b[2J\x1b[31mred\r\nforged line \x1b]52;c;aGk=\x07 \u202egnp.exe"):
        assert ownmem("add", text, env=ea).returncode == 0
    assert ownmem("sync", env=ea).returncode == 0
    ids = [m["id"] for m in json.loads(ownmem("list", "--json", env=ea).stdout)]
    b_id = ownmem("whoami", env=eb).stdout.strip()
    assert len(b_id) == 64 and ownmem("share", "id", env=eb).stdout.strip() == b_id
    a_id = ownmem("whoami", env=ea).stdout.strip()

    bad = ownmem("share", "create", "--to", "0x1234", "--memory", ids[0], "--mode", "permanent", env=ea)
    assert bad.returncode == 1 and "64 hex digits" in bad.stderr
    bad = ownmem("share", "create", "--to", b_id, "--memory", ids[0], "--mode", "temporary", "--expires", "soon",
                 env=ea)
    assert bad.returncode == 1 and "--expires" in bad.stderr
    bad = ownmem("share", "create", "--to", b_id, "--memory", ids[0], "--mode", "temporary",
                 "--expires", str(int(time.time()) + 3 * 86400), env=ea)
    assert bad.returncode == 1 and "24 hours" in bad.stderr

    r = ownmem("share", "create", "--to", b_id, "--memory", ids[0][:10], "--memory", ids[1], "--mode", "permanent",
               env=ea)
    assert r.returncode == 0, r.stderr
    cid = r.stdout.split("offered contract ", 1)[1].split()[0]
    assert len(cid) == 64
    listed = ownmem("share", "list", env=eb).stdout
    assert cid in listed and "offered" in listed and a_id in listed
    assert "no memories are shared with you" in ownmem("share", "received", env=eb).stdout
    r = ownmem("share", "accept", cid[:12], env=eb)
    assert r.returncode == 0 and r.stdout.strip() == f"contract {cid}: accepted", r.stderr
    got = ownmem("share", "received", env=eb).stdout
    lines = got.strip().splitlines()
    assert len(lines) == 2, got
    assert all(f"shared by {a_id[:16]} (alice-cli)" in line for line in lines)
    assert "the cli shares this" in got and "\x1b" not in got and "\r" not in got
    # issue 19 item 7: an OSC 52 clipboard write and a bidi override are shown, not obeyed (termsafe)
    assert "\x07" not in got and "\u202e" not in got and "\\u001b]52;c;aGk=\\u0007 \\u202egnp.exe" in got
    as_json = json.loads(ownmem("share", "received", "--json", env=eb).stdout)
    assert {m["authorship"] for m in as_json["memories"]} == {"shared"}
    assert {m["owner_holder_id"] for m in as_json["memories"]} == {a_id}
    states = json.loads(ownmem("share", "list", "--json", env=ea).stdout)["offered"]
    assert [(s["contract_id"], s["grantee"], s["state"]) for s in states] == [(cid, b_id, "accepted")]

    r = ownmem("share", "revoke", cid, env=ea)
    assert r.returncode == 0 and "revoked" in r.stdout, r.stderr
    assert "no memories are shared with you" in ownmem("share", "received", env=eb).stdout
    assert "revoked" in ownmem("share", "list", env=eb).stdout
    r = ownmem("share", "revoke", cid, env=eb)          # not B's to revoke
    assert r.returncode == 1 and "holder" in r.stderr


def _drop_proof(backend: Backend, holder_id: bytes) -> None:
    """The server's store as a vault registered before the directory left it: no holder proof."""
    if backend.kind == "postgres":
        import psycopg

        with psycopg.connect(backend.pg_url, autocommit=True) as c:
            c.execute("DELETE FROM holder_proofs WHERE holder_id = %s", (holder_id,))
        return
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(backend.sqlite_path, timeout=30)) as lite, lite:
        lite.execute("DELETE FROM holder_proofs WHERE holder_id = ?", (holder_id,))


def test_a_vault_registered_before_the_directory_publishes_its_proof(
        backend: Backend, servers: Callable[..., ServerProcess], devices: Devices) -> None:
    p = _people(backend, servers, devices)
    m = p.a.v.add("for a vault that predates the directory")
    p.a.sync()
    _drop_proof(backend, p.b_id)
    assert _directory(p.server.url, p.b_id, p.a).status_code == 404
    with pytest.raises(ShareRefused):
        sharing.share(p.a.syncer, [m.hex()], [p.b_id], "permanent")
    # a proof that is not the holder's signature over the registration the server keeps
    with pytest.raises(SyncError) as e:
        sharing.ShareRemote(p.b.syncer).publish(b"\x01" * HOLDER_SIG_LEN)
    assert e.value.server_code == "bad_signature"
    h = p.a.v.holder()          # A's holder signing B's registration: not B's holder
    b_public = p.b.v.store.identity()
    assert b_public is not None
    reg = signed.register_message(p.b.remote.name, b_public.salt, p.b.v.identity.sign_pub,
                             p.b.v.sync_key().public, p.b.v.identity.ka_pub, p.b.v.holder().public)
    with pytest.raises(SyncError) as e:
        sharing.ShareRemote(p.b.syncer).publish(run_sync(p.a.v.crypto.mldsa65_sign(h.xi, reg,
                                                                                    signed.REGISTER_HOLDER_CONTEXT)))
    assert e.value.server_code == "bad_signature"
    assert _directory(p.server.url, p.b_id, p.a).status_code == 404
    rec = sharing.publish_holder(p.b.syncer)
    assert rec.holder_id == p.b_id and rec.ka_pub == p.b.v.identity.ka_pub
    assert sharing.publish_holder(p.b.syncer) == rec           # idempotent
    made = sharing.share(p.a.syncer, [m.hex()], [p.b_id], "permanent")
    sharing.accept(p.b.syncer, made.contract_id)
    assert len(sharing.received(p.b.syncer).memories) == 1


def test_expired_keys_are_swept_without_any_request(sqlite_backend: Backend, servers: Callable[..., ServerProcess],
                                                    devices: Devices) -> None:
    srv = servers(sqlite_backend, extra_env={"OWNMEM_SHARE_SWEEP_SECONDS": "0.5"})
    a = devices.first(srv.url, "alice-sweep", label="a")
    b = devices.first(srv.url, "bob-sweep", label="b", passphrase=B_PASSPHRASE)
    m = a.v.add("gone by itself")
    a.sync()
    now = int(time.time())
    made = sharing.share(a.syncer, [m.hex()], [b.v.holder().holder_id], "temporary", expires=now + 2, now=now)
    sharing.accept(b.syncer, made.contract_id)
    assert share_keys(sqlite_backend, made.contract_id) == 1
    deadline = time.monotonic() + 15
    while share_keys(sqlite_backend, made.contract_id) and time.monotonic() < deadline:
        time.sleep(0.25)                     # no sharing request meanwhile: the server's own sweep
    assert share_keys(sqlite_backend, made.contract_id) == 0


def test_a_reader_kept_across_recalls_follows_erasure_and_revocation(
        backend: Backend, servers: Callable[..., ServerProcess], devices: Devices) -> None:
    """The agent service keeps one SharedReader: what verified once is not verified again, but
    every read asks the server, so the next read after an erasure or a revocation has neither."""
    p = _people(backend, servers, devices)
    m1, m2 = p.a.v.add("kept one"), p.a.v.add("kept two")
    p.a.sync()
    made = sharing.share(p.a.syncer, [m1.hex(), m2.hex()], [p.b_id], "syndicate")
    reader = sharing.SharedReader(p.b.syncer)
    assert reader.read().memories == ()
    sharing.accept(p.b.syncer, made.contract_id)
    first = reader.read()
    assert {m.content for m in first.memories} == {"kept one", "kept two"}
    assert reader.read() == first
    p.a.v.forget(m1.hex())
    p.a.sync()
    assert [m.content for m in reader.read().memories] == ["kept two"]
    sharing.revoke(p.a.syncer, made.contract_id)
    assert reader.read().memories == ()


# ---------------------------------------------------------------- the operator's tools (ownmem agent)

def test_the_sharing_tools_parameters_results_and_errors(sqlite_backend: Backend,
                                                         servers: Callable[..., ServerProcess],
                                                         devices: Devices) -> None:
    p = _people(sqlite_backend, servers, devices)
    m = p.a.v.add("through saihm_share")
    p.a.sync()
    cell = p.a.v.store.cell_of(m)
    assert cell is not None
    good = {"granteeIdHashesHex": [p.b_id.hex()], "shardIds": [cell[0].hex()], "type": "permanent",
            "scope": "read", "expiryEpoch": None}
    before = _state(sqlite_backend)
    cases: list[tuple[str, dict[str, object], str]] = [
        ("no grantee", {"granteeIdHashesHex": []}, "invalid_grantee"),
        ("a short grantee", {"granteeIdHashesHex": [p.b_id.hex()[:62]]}, "invalid_grantee"),
        ("a grantee twice", {"granteeIdHashesHex": [p.b_id.hex(), "0x" + p.b_id.hex()]}, "invalid_grantee"),
        ("an unknown grantee", {"granteeIdHashesHex": ["ab" * 32]}, "invalid_grantee"),
        ("no cell", {"shardIds": []}, "shard_not_found"),
        ("a cell not held", {"shardIds": ["cd" * 32]}, "shard_not_found"),
        ("scope write", {"scope": "write"}, "invalid_scope"),
        ("scope readwrite", {"scope": "readwrite"}, "invalid_scope"),
        ("an unknown type", {"type": "forever"}, "invalid_mode"),
        ("a non-decimal expiry", {"expiryEpoch": "12x"}, "invalid_expiry"),
        ("a numeric expiry", {"expiryEpoch": 12}, "invalid_expiry"),
        ("temporary beyond 24 h", {"type": "temporary", "expiryEpoch": str(int(time.time()) + 90000)},
         "invalid_expiry"),
        ("permanent with an expiry", {"expiryEpoch": str(int(time.time()) + 60)}, "invalid_expiry"),
    ]
    for label, change, code in cases:
        with pytest.raises(share_tools.ToolRefused) as e:
            share_tools.tool_share(p.a.syncer, {**good, **change})
        assert e.value.error == code, (label, e.value)
        assert 400 <= e.value.status < 500, label
        assert _state(sqlite_backend) == before, label
    got = share_tools.tool_share(p.a.syncer, {**good, "type": "temporary", "expiryEpoch": ""})
    assert got["type"] == "temporary" and got["granteeCount"] == 1 and len(str(got["contractId"])) == 64
    status = share_tools.tool_contracts(p.a.syncer)
    assert [c["contractId"] for c in status] == [got["contractId"]]
    assert status[0]["mode"] == "TEMPORARY" and status[0]["granteeIds"] == [p.b_id.hex()]
    assert int(str(status[0]["expiresAt"])) > time.time() + 86000         # the 24 h default
    with pytest.raises(share_tools.ToolRefused) as e:
        share_tools.tool_revoke_share(p.b.syncer, {"contractId": got["contractId"]})
    assert e.value.error == "not_holder" and e.value.status == 403
    with pytest.raises(share_tools.ToolRefused) as e:
        share_tools.tool_revoke_share(p.a.syncer, {"contractId": "ef" * 32})
    assert e.value.error == "contract_not_found"
    first = share_tools.tool_revoke_share(p.a.syncer, {"contractId": got["contractId"]})
    again = share_tools.tool_revoke_share(p.a.syncer, {"contractId": got["contractId"]})
    assert first["revoked"] is True and again["revoked"] is True and first["receiptId"] == again["receiptId"]
    assert share_tools.tool_contracts(p.a.syncer) == []                        # revoked: not listed


def test_the_server_never_holds_a_shared_plaintext_or_dek(backend: Backend, servers: Callable[..., ServerProcess],
                                                         devices: Devices) -> None:
    """Blindness with sharing: after an offer, an acceptance and a fetch, neither the shared
    plaintext nor its DEK (nor the share key's wrapping key material) is anywhere in the store."""
    from ownmem.aperto import keys as K
    from tests.sync.test_blindness import Needles

    p = _people(backend, servers, devices)
    secret = "the vault code is 4471-ALPHA-mango"
    m = p.a.v.add(secret)
    p.a.sync()
    made = sharing.share(p.a.syncer, [m.hex()], [p.b_id], "permanent")
    sharing.accept(p.b.syncer, made.contract_id)
    assert [x.content for x in sharing.received(p.b.syncer).memories] == [secret]
    row = p.a.v.store.get_object(m)
    assert row is not None
    scope = next(s for s in p.a.v.scopes().values() if s.scope_id == row.scope_id)
    dek = run_sync(K.unwrap_dek(p.a.v.crypto, row.dek_wrapped, p.a.v.kek(scope)))
    needles = Needles({"plaintext": [secret.encode()], "DEK": [dek],
                       "B's X25519 seed": [p.b.v.identity.ka_seed], "A's X25519 seed": [p.a.v.identity.ka_seed]})
    assert needles.found_in(backend.snapshot()) == []
    # the positive control: the share key is there, so the search would find what is stored
    key = backend.rows("SELECT share_key FROM share_keys WHERE contract_id = ?", (made.contract_id,))[0][0]
    assert Needles({"share key": [bytes(key)]}).found_in(backend.snapshot())


def test_a_revocation_confirmed_with_another_receipt_is_refused(backend: Backend, servers: Callable[..., ServerProcess],
                                                                devices: Devices) -> None:
    """A server that answers "revoked" naming a REVOKE receipt other than the one sent (it logged
    none, or another) is caught: the sharer is told, not shown a revocation the log may not hold."""
    from ownmem.errors import WireError

    srv = servers(backend)
    proxy = HostileProxy(srv.url).start()
    try:
        a = devices.first(proxy.url, "alice-revokes", label="a")
        b = devices.first(srv.url, "bob-revoked", label="b", passphrase=B_PASSPHRASE)
        m = a.v.add("shared, then revoked")
        a.sync()
        made = sharing.share(a.syncer, [m.hex()], [b.v.holder().holder_id], "permanent")
        proxy.on("POST", r"/revoke$", _rewrite_record(receipt_id=lambda _: "ab" * 32))
        with pytest.raises(WireError):
            sharing.revoke(a.syncer, made.contract_id)
        proxy.clear()
        again = sharing.revoke(a.syncer, made.contract_id)    # the honest answer: already revoked, first receipt
        assert again.revoked and again.already
    finally:
        proxy.stop()


def test_an_offer_of_more_keys_than_the_server_takes_is_refused_before_anything_is_done(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], devices: Devices) -> None:
    p = _people(sqlite_backend, servers, devices)
    p.a.sync()
    pushes = int(sqlite_backend.rows("SELECT count(*) FROM cells")[0][0])
    unknown = [os.urandom(16) for _ in range(shares.MAX_SHARE_KEYS + 1)]   # not even memories of the vault
    with pytest.raises(sharing.ShareRefused) as e:
        sharing.share_objects(p.a.syncer, unknown, [p.b_id], "permanent")
    assert f"at most {shares.MAX_SHARE_KEYS} keys" in str(e.value)
    # refused by count, before any memory was looked up, pushed or any key wrapped
    assert int(sqlite_backend.rows("SELECT count(*) FROM cells")[0][0]) == pushes
    assert sharing.offers(p.a.syncer).offered == ()
