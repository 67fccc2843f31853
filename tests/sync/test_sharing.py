"""Sharing between people end to end (issue 9 item 5, Bar "Sharing"): two real vaults on one
real server process, on SQLite and PostgreSQL (SAIHM "Sharing contracts", "Order of effect
and receipt").

A shares two memories with B; before B accepts, B gets nothing; once accepted B receives
them marked as A's; A revokes, and B's next fetch has none while the server's database
holds no share key of that contract any more.  Then expiry, decline, withdraw, erasure of a
shared cell, and the attacks: each refused with a clear error, nothing changed.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest
from synckit import PASSPHRASE, Backend, Device, Devices, ServerProcess

from ownmem import syncwire as W
from ownmem.crypto import run_sync
from ownmem.errors import SyncError
from ownmem.saihm.contract import make_contract
from ownmem.saihm.receipt import make_receipt
from ownmem.vault import sharing
from ownmem.vault.sharing import ShareRefused

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
