"""A lost device (ApertoMemory "Device and Key Revocation"; vault/devices.py, server/device_routes.py;
docs/decisions.md "15.7"), through a real server process, from the removed device's side: its
credential and its login are refused, it cannot enrol again with its own key or another under
the old owner key, and it cannot open anything written after the removal with the keys it kept;
the other devices take the passphrase again and read everything.  And from a stranger's: a
forged, replayed or foreign device proof or enrolment opens no session."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ownmem.aperto import keys as K
from ownmem.crypto import provider, random_bytes, run_sync
from ownmem.errors import DeviceRemoved, OwnmemError, PassphraseChanged
from ownmem.vault.devicekey import DeviceAuth
from ownmem.vault.devices import list_devices, remove_device, this_device_id
from ownmem.vault.metadata import parse_metadata
from ownmem.vault.rekey_sync import catch_up, change_passphrase
from ownmem.wire import messages, signed
from ownmem.wire.errors import ErrorCode
from tests.sync.synckit import PASSPHRASE, Backend, Device, Devices, ServerProcess, cli_env, ownmem

P = provider()


@pytest.fixture(scope="module")
def url(sqlite_backend: Backend) -> Iterator[str]:
    s = ServerProcess(sqlite_backend, label="lost-device")
    try:
        yield s.start().url
    finally:
        s.stop()


def _session(url: str, name: str, sync_seed: bytes, device: dict[str, Any] | None = None,
             challenge: bytes | None = None) -> httpx.Response:
    """One raw login (a challenge is fetched unless given): the server's answer, unparsed."""
    with httpx.Client(timeout=30) as c:
        if challenge is None:
            challenge = bytes.fromhex(c.post(f"{url}/v1/vaults/{name}/challenge").json()["challenge"])
        body: dict[str, Any] = {"challenge": challenge.hex(), "signature": run_sync(P.ed25519_sign(
            sync_seed, signed.auth_message(name, challenge))).hex()}
        if device is not None:
            body["device"] = device
        return c.post(f"{url}/v1/vaults/{name}/session", json=body)


def _challenge(url: str, name: str) -> bytes:
    with httpx.Client(timeout=30) as c:
        return bytes.fromhex(c.post(f"{url}/v1/vaults/{name}/challenge").json()["challenge"])


def _device(seed: bytes, owner_seed: bytes, label: str = "a stranger's phone") -> DeviceAuth:
    return DeviceAuth(seed, run_sync(P.ed25519_public(seed)), label, owner_seed, random_bytes(32))


def _login_as(url: str, name: str, d: Device, dev: DeviceAuth) -> httpx.Response:
    c = _challenge(url, name)
    return _session(url, name, d.v.sync_key().seed, run_sync(dev.login_part(P, name, c)), c)


def _code(r: httpx.Response) -> str:
    return str(r.json().get("error"))


def _authed(url: str, name: str, token: str, path: str) -> httpx.Response:
    with httpx.Client(timeout=30) as c:
        return c.get(f"{url}/v1/vaults/{name}{path}", headers={"authorization": f"Bearer {token}"})


def test_a_removed_device_is_locked_out_and_opens_nothing_written_afterwards(url: str, devices: Devices) -> None:
    _removed_device_is_locked_out(url, devices, "lost-one")


def test_on_postgresql_too_a_removed_device_is_locked_out(pg_backend: Backend,
                                                          servers: Callable[..., ServerProcess],
                                                          devices: Devices) -> None:
    _removed_device_is_locked_out(servers(pg_backend).url, devices, "lost-pg")


def _removed_device_is_locked_out(url: str, devices: Devices, name: str) -> None:
    a = devices.first(url, name, label="laptop")
    b = devices.join(url, name, label="phone")          # the phone that is lost
    c = devices.join(url, name, label="tablet")
    before = a.v.add("written before the phone was lost", scope="default")
    for d in (a, b, c):
        d.sync()

    # every device enrolled itself; the list names them, and which one is this
    listed = list_devices(a.syncer)
    assert {d.device_id for d in listed} == {this_device_id(x.syncer) for x in (a, b, c)}
    assert [d.this_device for d in listed].count(True) == 1
    assert next(d for d in listed if d.this_device).device_id == this_device_id(a.syncer)
    assert all(d.added_at > 0 and d.last_sync >= d.added_at for d in listed)

    # what the thief holds: the phone's store, its keys, its live credential
    stolen_token, stolen_ident = b.remote.token, b.v.identity
    stolen_seed = b.v.store.sync_get("device_key")
    assert stolen_token is not None and stolen_seed is not None
    old_meta = a.remote.get_metadata()

    b_id = this_device_id(b.syncer)
    remove_device(a.syncer, b_id, PASSPHRASE)           # the same passphrase, typed again
    after = a.v.add("written after the phone was lost", scope="default")
    a.sync()
    assert {d.device_id for d in list_devices(a.syncer)} == {this_device_id(a.syncer), this_device_id(c.syncer)}

    # its credential ended at once; its next login, by its own app, says why
    assert _authed(url, name, stolen_token, "/metadata").status_code == 401
    with pytest.raises(DeviceRemoved):
        b.sync()
    # its own device key never logs in or enrols again, whatever it signs with
    r = _login_as(url, name, b, _device(stolen_seed, stolen_ident.sign.seed))
    assert (r.status_code, _code(r)) == (403, ErrorCode.DEVICE_REMOVED)
    # a fresh device key enrolled by the old owner key: that key is no longer in force
    r = _login_as(url, name, b, _device(random_bytes(32), stolen_ident.sign.seed))
    assert (r.status_code, _code(r)) == (400, ErrorCode.BAD_SIGNATURE)
    # the sync key alone (the old way) opens nothing once the vault has devices
    r = _session(url, name, b.v.sync_key().seed)
    assert (r.status_code, _code(r)) == (401, ErrorCode.DEVICE_REQUIRED)

    # with the keys it kept it opens nothing written afterwards: not the new scope keys...
    meta = parse_metadata(a.remote.get_metadata().metadata)
    for s in meta.vault_public.scopes.values():
        with pytest.raises(OwnmemError):
            run_sync(K.unwrap_kek(P, s.wrapped, s.scope_id, stolen_ident))
    # ...nor, with the old scope keys, the DEKs of what was written after the removal
    old_keks = [run_sync(K.unwrap_kek(P, s.wrapped, s.scope_id, stolen_ident))
                for s in parse_metadata(old_meta.metadata).vault_public.scopes.values()]
    token = a.remote.token
    assert token is not None
    with httpx.Client(timeout=30) as h:
        raw = h.get(f"{url}/v1/vaults/{name}/changes?since=0&limit=1000",
                    headers={"authorization": f"Bearer {token}"}).content
    rows = [r for r in messages.ChangesPage.parse(raw).rows if isinstance(r, messages.CellChange)]
    after_cells = [r for r in rows if after.hex() in r.cell.hex()]
    assert after_cells and old_keks
    for row in after_cells:
        for kek in old_keks:
            with pytest.raises(OwnmemError):
                run_sync(K.unwrap_dek(P, row.wrapped_dek, kek))

    # the tablet: still enrolled, asked for the passphrase, then reads everything
    with pytest.raises(PassphraseChanged):
        c.sync()
    catch_up(c.syncer, PASSPHRASE)
    c.sync()
    assert {"written before the phone was lost", "written after the phone was lost"} <= c.contents()
    assert before in {e.id for e in c.listing().entries}


def test_no_device_enrols_between_a_removal_and_the_key_change(url: str, devices: Devices) -> None:
    name = "lost-two"
    a = devices.first(url, name)
    b = devices.join(url, name)
    c = devices.join(url, name)
    b_id = this_device_id(b.syncer)
    sig = run_sync(P.ed25519_sign(a.v.identity.sign.seed, signed.device_remove_message(name, b_id)))
    a.remote.remove_device(b_id, sig)                   # step (a) only: the key change has not happened yet
    # the removed device holds the owner key still in force: it cannot enrol a new device key with it
    r = _login_as(url, name, b, _device(random_bytes(32), b.v.identity.sign.seed))
    assert (r.status_code, _code(r)) == (409, ErrorCode.ENROLMENT_CLOSED)
    # a removal replayed is refused as nothing to remove; enrolled devices go on
    with pytest.raises(OwnmemError):
        a.remote.remove_device(b_id, sig)
    c.remote.token = None
    c.sync()
    # a device cannot remove itself (it would lose the session the key change needs)
    a_id = this_device_id(a.syncer)
    with pytest.raises(OwnmemError) as e:
        a.remote.remove_device(a_id, run_sync(P.ed25519_sign(a.v.identity.sign.seed,
                                                             signed.device_remove_message(name, a_id))))
    assert getattr(e.value, "server_code", None) == ErrorCode.MALFORMED
    # once the keys changed, a device that knows the passphrase enrols again
    change_passphrase(a.syncer, PASSPHRASE)
    d = devices.join(url, name, label="new phone")
    assert this_device_id(d.syncer) in {x.device_id for x in list_devices(a.syncer)}


def test_forged_replayed_and_foreign_device_proofs_open_no_session(url: str, devices: Devices) -> None:
    a = devices.first(url, "lost-three")
    other = devices.first(url, "lost-three-other", label="other")
    sync_seed, owner = a.v.sync_key().seed, a.v.identity.sign.seed

    # an enrolment not signed by the owner key in force
    r = _login_as(url, "lost-three", a, _device(random_bytes(32), random_bytes(32)))
    assert (r.status_code, _code(r)) == (400, ErrorCode.BAD_SIGNATURE)
    # a device proof signed by another key than the one it names
    c = _challenge(url, "lost-three")
    dev = _device(random_bytes(32), owner)
    part = run_sync(dev.login_part(P, "lost-three", c))
    part["signature"] = run_sync(P.ed25519_sign(random_bytes(32), signed.device_auth_message(
        "lost-three", c, dev.public))).hex()
    r = _session(url, "lost-three", sync_seed, part, c)
    assert (r.status_code, _code(r)) == (401, ErrorCode.UNAUTHENTICATED)
    # a genuine enrolment, replayed: its challenge was used
    c = _challenge(url, "lost-three")
    part = run_sync(_device(random_bytes(32), owner).login_part(P, "lost-three", c))
    assert _session(url, "lost-three", sync_seed, part, c).status_code == 200
    r = _session(url, "lost-three", sync_seed, part, c)
    assert (r.status_code, _code(r)) == (401, ErrorCode.UNAUTHENTICATED)
    # another vault's enrolled device, even with this vault's sync key: not enrolled here, and
    # its enrolment is signed by the other vault's owner key
    foreign = _device(other.v.store.sync_get("device_key") or b"", other.v.identity.sign.seed)
    r = _login_as(url, "lost-three", a, foreign)
    assert (r.status_code, _code(r)) == (400, ErrorCode.BAD_SIGNATURE)
    c = _challenge(url, "lost-three")
    part = run_sync(foreign.login_part(P, "lost-three", c))
    del part["enrol"]
    r = _session(url, "lost-three", sync_seed, part, c)
    assert (r.status_code, _code(r)) == (401, ErrorCode.DEVICE_REQUIRED)
    # a proof made for the other vault's challenge does not open this one
    c = _challenge(url, "lost-three-other")
    part = run_sync(foreign.login_part(P, "lost-three-other", c))
    r = _session(url, "lost-three", sync_seed, part, _challenge(url, "lost-three"))
    assert (r.status_code, _code(r)) == (401, ErrorCode.UNAUTHENTICATED)
    # the owner's own devices log in as before
    a.remote.token = None
    a.sync()


def test_the_cli_lists_and_removes_a_device(url: str, devices: Devices, tmp_path: Path) -> None:
    name = "lost-cli"
    a = devices.first(url, name, label="cli-a")
    b = devices.join(url, name, label="cli-b")
    env = cli_env(tmp_path, a.folder)
    a.close()
    got = ownmem("devices", env=env)
    assert got.returncode == 0, got.stderr
    assert "(this device)" in got.stdout and got.stdout.count("ownmem CLI on") == 2
    b_id = this_device_id(b.syncer).hex()
    wrong = ownmem("devices", "remove", "zz", env=env)
    assert wrong.returncode != 0 and "no device" in wrong.stderr
    gone = ownmem("devices", "remove", b_id[:8], env=env)
    assert gone.returncode == 0, gone.stderr
    assert "It keeps what it already held" in gone.stdout and "also change the passphrase" in gone.stdout
    listed = ownmem("devices", "list", env=env)
    assert b_id[:8] not in listed.stdout and "1 device(s)" in listed.stdout
    with pytest.raises(DeviceRemoved):
        b.sync()
