"""A scope-KEK rotation through a real server process (vault/rotate.py, vault/rotate_sync.py,
POST /rewrap; docs/decisions.md "Key Rotation"), from the side of whoever kept the scope's OLD KEK,
of a server that hands back old or forged wraps, and of a rotation killed half-way (a real
SIGKILL of the CLI): the old KEK opens no wrap the server or any device holds afterwards; other
devices follow; every object stays readable on every device and on the server throughout, and a
second run completes."""
from __future__ import annotations

import functools
import os
import secrets
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import amem.keys
import amem.vault
import httpx
import pytest

from ownmem.crypto import provider, run_sync
from ownmem.vault import Vault
from ownmem.vault.metadata import parse_metadata
from ownmem.vault.rotate_sync import rotate_scope
from ownmem.vault.sync import link, syncer_for
from ownmem.wire import messages
from tests.sync.hostile import Answer, HostileProxy, Seen
from tests.sync.synckit import CLI, PASSPHRASE, Backend, Devices, ServerProcess, cli_env, ownmem

P = provider()


@pytest.fixture(scope="module")
def server(backend: Backend) -> Iterator[ServerProcess]:
    s = ServerProcess(backend, label="rotate")
    try:
        yield s.start()
    finally:
        s.stop()


@pytest.fixture
def proxy(server: ServerProcess) -> Iterator[HostileProxy]:
    p = HostileProxy(server.url).start()
    try:
        yield p
    finally:
        p.stop()


def _server_wraps(url: str, name: str, token: str) -> dict[bytes, bytes]:
    """cellId -> the wrapped DEK the server answers for it now (a new device's first pull)."""
    out: dict[bytes, bytes] = {}
    since = 0
    with httpx.Client(timeout=30) as c:
        while True:
            r = c.get(f"{url}/v1/vaults/{name}/changes?since={since}&limit=1000",
                      headers={"authorization": f"Bearer {token}"})
            r.raise_for_status()
            page = messages.ChangesPage.parse(r.content)
            out.update((row.cell_id, row.wrapped_dek) for row in page.rows if isinstance(row, messages.CellChange))
            since = page.next_since
            if not page.more:
                return out


def _stored(backend: Backend) -> dict[str, bytes]:
    """Every byte the server stores (pg_dump's output names a random token each run: left out)."""
    return {k: v for k, v in backend.snapshot().items() if k != "pg_dump"}


def _opened(kek: bytes, wraps: list[bytes]) -> int:
    return sum(d is not None for d in run_sync(P.aes_kw_unwrap_many(kek, wraps)))


def test_a_rotation_reaches_the_server_and_every_device(server: ServerProcess, devices: Devices) -> None:
    name = f"rot-{secrets.token_hex(3)}"
    a = devices.first(server.url, name)
    a.v.add_scope("work")
    ids = {a.v.add(f"work {i}", scope="work") for i in range(25)} | {a.v.add("default")}
    a.sync()
    b = devices.join(server.url, name)
    assert b.contents() == a.contents()
    scope = a.v.scopes()["work"]
    old_kek = a.v.kek(scope)

    done = rotate_scope(a.v, "work", a.syncer, batch=7)
    assert (done.finished, done.generation, done.rewrapped, done.sent) == (True, 2, 25, 25)
    new_kek = a.v.kek(a.v.scopes()["work"])
    assert new_kek != old_kek and a.v.scopes()["work"].scope_id == scope.scope_id

    # the server: every wrap of the scope opens under the new KEK, none under the old one; the
    # metadata names generation 2 and no retiring KEK any more
    token = a.remote.token
    assert token is not None
    wraps = _server_wraps(server.url, name, token)
    assert len(wraps) == 26
    assert _opened(old_kek, list(wraps.values())) == 0 and _opened(new_kek, list(wraps.values())) == 25
    meta = parse_metadata(a.remote.get_metadata().metadata)
    assert meta.generations == {scope.scope_id: (2, None)}

    # the other device follows: the new KEK, its wraps re-wrapped, the old KEK gone from its store
    report = b.sync()
    assert report.refusals == []
    assert b.v.kek(b.v.scopes()["work"]) == new_kek
    held = [w for _, w in b.v.store.wraps_in_scope(scope.scope_id)]
    assert _opened(old_kek, held) == 0 and _opened(new_kek, held) == 25
    assert b.v.store.kek_gens() == {scope.scope_id: (2, None)}
    assert b.contents() == a.contents() and {e.id for e in b.listing().entries} == ids
    # a memory written on b after the rotation is under the new KEK, and reaches a
    later = b.v.add("after the rotation, on b", scope="work")
    b.sync()
    a.sync()
    row = a.v.store.get_object(later)
    assert row is not None and _opened(new_kek, [row.dek_wrapped]) == 1
    # a new device reads everything
    c = devices.join(server.url, name, label="c")
    assert c.contents() == a.contents() and c.listing().refused == []


def test_forged_or_old_wraps_from_the_server_are_refused_and_nothing_is_lost(
        server: ServerProcess, devices: Devices, proxy: HostileProxy) -> None:
    name = f"rot-{secrets.token_hex(3)}"
    a = devices.first(server.url, name)
    ids = {a.v.add(f"note {i}") for i in range(6)}
    a.sync()
    b = devices.join(proxy.url, name)            # b reads the server through a hostile proxy
    old_kek = b.v.kek(b.v.scopes()["default"])
    old_wraps = {o.object_id: o.dek_wrapped for o in b.v.store.objects()}

    forged = os.urandom(40)

    def forge(_s: Seen, ans: Answer) -> Answer:
        rows = ans.page()[1]
        return ans.with_page(rows=[[r[0], r[1], r[2], r[3], forged if r[1] == "wrap" else r[4]] for r in rows])
    proxy.on("GET", r"/changes$", forge)
    rotate_scope(a.v, "default", a.syncer)
    report = b.sync()
    # b re-wrapped what it holds from its own old KEK (the metadata, owner-signed, named the new
    # one); each forged wrap was refused, and it holds the right one
    assert any("do not open under the scope's key in force" in r for r in report.refusals)
    new_kek = a.v.kek(a.v.scopes()["default"])
    held = {o.object_id: o.dek_wrapped for o in b.v.store.objects()}
    assert forged not in held.values()
    assert _opened(new_kek, list(held.values())) == 6 and _opened(old_kek, list(held.values())) == 0
    assert {e.id for e in b.listing().entries} == ids and b.listing().refused == []
    proxy.clear()

    # a server handing back the OLD wraps as if new: refused too, nothing lost
    def replay(_s: Seen, ans: Answer) -> Answer:
        rows = ans.page()[1]
        by_cell = {b.v.store.cell_of(o)[0]: w for o, w in old_wraps.items()}  # type: ignore[index]
        return ans.with_page(rows=[[r[0], r[1], r[2], r[3], by_cell.get(r[2], r[4]) if r[1] == "wrap" else r[4]]
                                   for r in rows])
    b.v.store.sync_set("pull_seq", b"0")          # as if b pulled the whole feed again
    proxy.on("GET", r"/changes$", replay)
    report = b.sync()
    assert any("do not open under the scope's key in force" in r for r in report.refusals)
    assert {o.object_id: o.dek_wrapped for o in b.v.store.objects()} == held
    assert {e.id for e in b.listing().entries} == ids


def test_the_server_replaces_wraps_only_of_cells_the_vault_holds(server: ServerProcess, devices: Devices,
                                                                 backend: Backend) -> None:
    name, other_name = f"rot-{secrets.token_hex(3)}", f"rot-{secrets.token_hex(3)}"
    a = devices.first(server.url, name)
    o = devices.first(server.url, other_name, label="o")
    a.v.add("mine")
    gone = a.v.add("to be forgotten")
    o.v.add("theirs")
    a.sync()
    o.sync()
    a.v.forget(gone.hex())
    a.sync()
    mine = {cid for cid in (a.v.store.cell_of(x)[0] for x in a.v.store.object_ids())}  # type: ignore[index]
    theirs = {o.v.store.cell_of(x)[0] for x in o.v.store.object_ids()}  # type: ignore[index]
    erased = next(iter(a.v.store.erase_outbox() or [(b"", b"")]))[0]
    before = _stored(backend)
    auth = {"authorization": f"Bearer {a.remote.token}"}
    url = f"{server.url}/v1/vaults/{name}/rewrap"

    def post(cells: list[bytes], body: dict[str, Any] | None = None) -> httpx.Response:
        return httpx.post(url, headers=auth, timeout=30, json=body if body is not None else {
            "cell_ids": [c.hex() for c in cells], "wrapped_deks": [os.urandom(40).hex() for _ in cells]})

    for cells in ([*mine, *theirs], [*mine, os.urandom(32)], [*mine, *([erased] if erased else [])]):
        if cells == list(mine):
            continue
        r = post(cells)
        assert r.status_code == 409 and r.json()["error"] == "unknown_cell", r.text
    for bad in ({"cell_ids": [next(iter(mine)).hex()], "wrapped_deks": []},
                {"cell_ids": [next(iter(mine)).hex()] * 2, "wrapped_deks": [os.urandom(40).hex()] * 2},
                {"cell_ids": [next(iter(mine)).hex()], "wrapped_deks": [os.urandom(24).hex()]}):
        r = post([], bad)
        assert r.status_code == 400 and r.json()["error"] == "malformed", r.text
    r = httpx.post(url, timeout=30, json={"cell_ids": [next(iter(mine)).hex()], "wrapped_deks": ["00" * 40]})
    assert r.status_code == 401
    assert _stored(backend) == before                       # nothing replaced by any refusal
    # a stolen session of another vault cannot replace this vault's wraps either
    r = httpx.post(url, headers={"authorization": f"Bearer {o.remote.token}"}, timeout=30,
                   json={"cell_ids": [next(iter(mine)).hex()], "wrapped_deks": ["00" * 40]})
    assert r.status_code == 403 and _stored(backend) == before


def test_a_rotation_killed_half_way_leaves_every_object_readable(server: ServerProcess, devices: Devices,
                                                                 tmp_path: Path) -> None:
    """`ownmem scope rotate` SIGKILLed after its first batch of new wraps reached the server: this
    device, another device and a new device read every object; a second run completes."""
    name = f"rot-{secrets.token_hex(3)}"
    folder = tmp_path / "a" / "vault"
    v = Vault.create(folder, PASSPHRASE)
    v.add_scope("work")
    ids = {v.add(f"work {i}", scope="work") for i in range(40)} | {v.add("elsewhere")}
    with httpx.Client(timeout=60) as hc:
        link(v, server.url, name, client=hc).sync_once()
    sid = v.scopes()["work"].scope_id
    old_kek = v.kek(v.scopes()["work"])
    v.close()
    b = devices.join(server.url, name)
    env = {**cli_env(tmp_path / "a", folder), "OWNMEM_REWRAP_BATCH": "10", "OWNMEM_TEST_PAUSE_AFTER_BATCHES": "1"}

    proc = subprocess.Popen([*CLI, "scope", "rotate", "work"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "paused after 1 batch" in line, (line, proc.stderr.read() if proc.stderr else "")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    assert proc.returncode == -signal.SIGKILL

    # this device: every object opens; the rotation is recorded as under way
    u = Vault(folder).unlock(PASSPHRASE)
    try:
        assert {e.id for e in u.open_all().entries} == ids and u.open_all().refused == []
        gen, retiring = u.store.kek_gens()[sid]
        assert gen == 2 and retiring is not None and u.store.rewraps_waiting(sid) == 30
    finally:
        u.close()
    # the server holds 10 new wraps and 30 old ones; its metadata names both KEKs
    token = b.remote.token
    assert token is not None
    wraps = list(_server_wraps(server.url, name, token).values())
    assert _opened(old_kek, wraps) == 30
    # another device, and a new one, read everything meanwhile
    assert b.sync().refusals == [] and {e.id for e in b.listing().entries} == ids
    assert b.listing().refused == []
    c = devices.join(server.url, name, label="c")
    assert {e.id for e in c.listing().entries} == ids and c.listing().refused == []
    # the server's export would hold 30 wraps no KEK of its header opens: refused, saying what to do
    with httpx.Client(timeout=60) as hc:
        refused = hc.get(f"{server.url}/v1/vaults/{name}/export.amem", headers={"authorization": f"Bearer {token}"})
    assert (refused.status_code, refused.json()["error"]) == (409, "rotation_unfinished")
    assert "ownmem scope rotate" in refused.json()["message"]

    # a second run completes: the old KEK opens nothing on the server, and leaves every device
    r = ownmem("scope", "rotate", "work", env=cli_env(tmp_path / "a", folder))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "has a new key (generation 2)" in r.stdout and "old key is destroyed" in r.stdout
    wraps = list(_server_wraps(server.url, name, token).values())
    assert _opened(old_kek, wraps) == 0
    # ... and the server's export is whole again: the reference opens every object, none forged
    with httpx.Client(timeout=60) as hc:
        whole = hc.get(f"{server.url}/v1/vaults/{name}/export.amem", headers={"authorization": f"Bearer {token}"})
    assert whole.status_code == 200, whole.text
    (tmp_path / "server.amem").write_bytes(whole.content)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(amem.keys, "master_from_passphrase",
                   functools.lru_cache(maxsize=None)(amem.keys.master_from_passphrase))
        amem.vault.Vault.import_file(tmp_path / "server.amem", tmp_path / "ref", PASSPHRASE)
        ok, bad = amem.vault.Vault(tmp_path / "ref").open_all(PASSPHRASE)
    assert bad == [] and {o["id"]: o["trust"] for o in ok} == {i.hex(): "self" for i in ids}
    for d in (b, c):
        assert d.sync().refusals == []
        assert d.v.store.kek_gens() == {sid: (2, None)}
        assert _opened(old_kek, [w for _, w in d.v.store.wraps_in_scope(sid)]) == 0
        assert {e.id for e in d.listing().entries} == ids and d.listing().refused == []
    with httpx.Client(timeout=60) as hc:
        u = Vault(folder).unlock(PASSPHRASE)
        try:
            assert u.store.kek_gens() == {sid: (2, None)}
            syncer_for(u, client=hc).sync_once()
            assert {e.id for e in u.open_all().entries} == ids
        finally:
            u.close()


def test_a_device_that_missed_a_rotation_and_then_a_passphrase_change_reads_everything(
        server: ServerProcess, devices: Devices) -> None:
    from ownmem.vault.rekey_sync import catch_up, change_passphrase

    new = "rotation tests: the passphrase after the rotation 64"
    name = f"rot-{secrets.token_hex(3)}"
    a = devices.first(server.url, name)
    ids = {a.v.add(f"note {i}") for i in range(8)}
    a.sync()
    b = devices.join(server.url, name)           # then away for a while
    sid = b.v.scopes()["default"].scope_id
    held_before = set(ids)
    rotate_scope(a.v, "default", a.syncer)
    change_passphrase(a.syncer, new)
    ids.add(a.v.add("after both"))
    a.sync()
    b.remote.token = None
    catch_up(b.syncer, new)
    # at once, before any pull: what b held is re-wrapped under the server's KEK
    held = b.listing()
    assert {e.id for e in held.entries} == held_before and held.refused == []
    assert b.v.store.kek_gens()[sid][0] == 2
    assert b.sync().refusals == []
    assert {e.id for e in b.listing().entries} == ids and b.listing().refused == []
    assert b.v.store.kek_gens()[sid] == (2, None)


def test_two_devices_rotating_one_scope_at_once_leave_every_object_readable_everywhere(
        server: ServerProcess, devices: Devices) -> None:
    """Both devices start a rotation of "work" before either reaches the server (each makes its
    own new KEK at generation 2); the compare-and-swap on the metadata orders them.  Whatever
    order they finish in, every device, and a device that joins afterwards, opens every object,
    and no wrap on the server is under a KEK the metadata does not name."""
    name = f"rot-{secrets.token_hex(3)}"
    a = devices.first(server.url, name)
    a.v.add_scope("work")
    ids = {a.v.add(f"work {i}", scope="work") for i in range(12)}
    a.sync()
    b = devices.join(server.url, name)
    sid = a.v.scopes()["work"].scope_id
    old_kek = a.v.kek(a.v.scopes()["work"])
    from ownmem.vault import rotate
    rotate.start(a.v, "work")                 # both local halves first: neither has synced yet
    rotate.start(b.v, "work")
    ids.add(b.v.add("written on b during its rotation", scope="work"))
    done_a = rotate_scope(a.v, "work", a.syncer)
    done_b = rotate_scope(b.v, "work", b.syncer)
    for d in (a, b, a, b):                    # until both have settled
        assert d.sync().refusals == []
    kek_a, kek_b = a.v.kek(a.v.scopes()["work"]), b.v.kek(b.v.scopes()["work"])
    assert kek_a == kek_b != old_kek, "the two devices agree on one new KEK"
    assert a.v.store.kek_gens()[sid][1] is None and b.v.store.kek_gens()[sid][1] is None
    assert (done_a.generation, done_b.generation) == (2, 2), "one rotation, not two"
    assert (done_a.joined, done_b.joined) == (False, True), "b was told its rotation lost the race"
    token = a.remote.token
    assert token is not None
    wraps = _server_wraps(server.url, name, token)
    assert _opened(kek_a, list(wraps.values())) == len(ids) == len(wraps)
    meta = parse_metadata(a.remote.get_metadata().metadata)
    entry = meta.vault_public.scopes["work"]
    assert meta.generations[sid][1] is None
    for d in (a, b):
        assert {e.id for e in d.listing().entries} == ids and d.listing().refused == []
        held = [w for _, w in d.v.store.wraps_in_scope(sid)]
        assert _opened(kek_a, held) == len(ids)
    c = devices.join(server.url, name, label="c")
    assert c.v.scopes()["work"].wrapped == entry.wrapped
    assert {e.id for e in c.listing().entries} == ids and c.listing().refused == []
