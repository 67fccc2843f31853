"""A passphrase change through a real server process (vault/rekey_sync.py, docs/decisions.md
"Key Rotation"), from the side of whoever still knows the OLD passphrase, and of a server that
replays what it held before: the old owner key can no longer change the vault on the server;
a device that was offline during the change finds its passphrase no longer unlocks, takes the
new one and then reads everything; the old passphrase opens nothing written afterwards on the
server; replayed old metadata is refused; a new device logs in with the new passphrase and has
the same holder and sync identity."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ownmem.aperto import keys as K
from ownmem.aperto.model import Trust
from ownmem.crypto import provider, run_sync
from ownmem.errors import OwnmemError, PassphraseChanged, SyncError, WrongPassphrase
from ownmem.vault import Vault
from ownmem.vault.metadata import parse_metadata
from ownmem.vault.rekey_sync import catch_up, change_passphrase
from ownmem.vault.sync import login_new_device
from ownmem.wire import messages, signed
from ownmem.wire.errors import ErrorCode
from tests.sync.hostile import HostileProxy
from tests.sync.synckit import PASSPHRASE, Backend, Devices, ServerProcess, cli_env, ownmem

NEW = "sync tests: a new passphrase after the shared screen 77"
P = provider()


@pytest.fixture(scope="module")
def url(sqlite_backend: Backend) -> Iterator[str]:
    s = ServerProcess(sqlite_backend, label="rekey")
    try:
        yield s.start().url
    finally:
        s.stop()


def _pull_raw(url: str, name: str, token: str) -> list[messages.ChangeRow]:
    with httpx.Client(timeout=30) as c:
        r = c.get(f"{url}/v1/vaults/{name}/changes?since=0&limit=1000", headers={"authorization": f"Bearer {token}"})
        r.raise_for_status()
        return list(messages.ChangesPage.parse(r.content).rows)


@pytest.fixture
def proxy(url: str) -> Iterator[HostileProxy]:
    p = HostileProxy(url).start()
    try:
        yield p
    finally:
        p.stop()


def test_passphrase_change_reaches_every_device_and_locks_the_old_one_out(url: str, devices: Devices,
                                                                          proxy: HostileProxy) -> None:
    a = devices.first(url, "rekey-one")
    b = devices.join(proxy.url, "rekey-one")      # b talks through a server that may replay
    before = a.v.add("before the change", scope="default")
    a.sync()
    b.sync()
    old_meta_answer = proxy.last_answer("GET", r"/metadata$")
    b.remote.lookup()
    old_lookup = proxy.last_answer("GET", r"^/v1/vaults/rekey-one$")
    holder, sync_pub = a.v.holder().holder_id, a.v.sync_key().public
    old_pub = a.v.identity.sign_pub
    old_meta = b.remote.get_metadata()            # what a server (or a thief) kept from before
    old_ident = b.v.identity                      # the keys the old passphrase derives

    change_passphrase(a.syncer, NEW)
    after = a.v.add("after the change", scope="default")
    a.sync()

    # the server now answers the new keys; the old owner key can change nothing there
    info = a.remote.lookup()
    assert info is not None and info.owner_pub == a.v.identity.sign_pub != old_pub
    doc = old_meta.metadata
    forged = messages.MetadataUpdate(a.remote.get_metadata().version, doc, run_sync(P.ed25519_sign(
        old_ident.sign.seed, signed.metadata_message("rekey-one", a.remote.get_metadata().version + 1, doc))))
    with pytest.raises(SyncError) as e:
        b.remote.put_metadata(forged)
    assert e.value.server_code == ErrorCode.BAD_SIGNATURE

    # the device that missed it: its sync stops and says so; its old passphrase still opened it
    # locally (it could not know), the new one is needed
    with pytest.raises(PassphraseChanged):
        b.sync()
    with pytest.raises(WrongPassphrase):
        catch_up(b.syncer, PASSPHRASE)
    catch_up(b.syncer, NEW)
    b.sync()
    got = {e.id: e.opened.trust for e in b.listing().entries}
    assert got[before] is Trust.SELF and got[after] is Trust.SELF
    with pytest.raises(WrongPassphrase):
        Vault(b.folder).unlock(PASSPHRASE)

    # on the server: every wrap of the new metadata, and every DEK written after the change,
    # is closed to the old passphrase's keys
    b.remote.token = None
    b.syncer.ensure_login()
    meta = parse_metadata(b.remote.get_metadata().metadata)
    old_keks = []
    for s in meta.vault_public.scopes.values():
        try:
            old_keks.append(run_sync(K.unwrap_kek(P, s.wrapped, s.scope_id, old_ident)))
        except OwnmemError:
            pass
    assert old_keks == []
    # ...nor do the KEKs the OLD metadata gave it open anything written afterwards
    for s in parse_metadata(old_meta.metadata).vault_public.scopes.values():
        old_keks.append(run_sync(K.unwrap_kek(P, s.wrapped, s.scope_id, old_ident)))
    token = b.syncer.remote.token
    assert token is not None
    rows = [r for r in _pull_raw(url, "rekey-one", token) if isinstance(r, messages.CellChange)]
    after_cells = [r for r in rows if after.hex() in r.cell.hex()]
    assert after_cells
    for r in after_cells:
        for kek in old_keks:
            with pytest.raises(OwnmemError):
                run_sync(K.unwrap_dek(P, r.wrapped_dek, kek))

    # a server that replays the old metadata and lookup to a device that saw the change: refused,
    # nothing changed, the device keeps the new keys
    proxy.on("GET", r"/metadata$", lambda _s, _a: old_meta_answer)
    proxy.on("GET", r"^/v1/vaults/rekey-one$", lambda _s, _a: old_lookup)
    new_pub, scopes = b.v.identity.sign_pub, b.v.scopes()
    with pytest.raises(SyncError, match="older vault metadata"):
        b.sync()
    assert b.v.identity.sign_pub == new_pub and b.v.scopes() == scopes
    stored = b.v.store.identity()
    assert stored is not None and stored.sign_pub == new_pub
    proxy.clear()

    # a new device: the new passphrase logs in, with the same holder and sync identity; the old does not
    with pytest.raises(WrongPassphrase):
        login_new_device(devices.root / "c-old", url, "rekey-one", PASSPHRASE)
    c = devices.join(url, "rekey-one", label="c", passphrase=NEW)
    assert (c.v.holder().holder_id, c.v.sync_key().public) == (holder, sync_pub)
    assert {e.id: e.opened.trust for e in c.listing().entries}.keys() >= {before, after}
    assert all(e.opened.trust is Trust.SELF for e in c.listing().entries)


def test_a_server_cannot_hand_a_device_someone_elses_change(url: str, devices: Devices) -> None:
    """Another vault's change (another root) offered under this vault's name is refused by the
    device that missed a change, whatever passphrase it is given."""
    a = devices.first(url, "rekey-two")
    other = devices.first(url, "rekey-other", label="o")
    change_passphrase(other.syncer, NEW)
    # the device of rekey-two is pointed at the other vault's server record
    a.remote.name = "rekey-other"
    a.remote.token = None
    with pytest.raises(SyncError, match="root key differs"):
        catch_up(a.syncer, NEW)


def test_the_cli_changes_the_passphrase_and_the_other_device_takes_it(url: str, tmp_path: Path) -> None:
    """`ownmem passphrase change` on one device, `ownmem sync` on the other says what happened,
    `ownmem passphrase update` takes the new one; each failure one line, no secret in any output."""
    env_a = cli_env(tmp_path / "a", tmp_path / "a" / "vault")
    env_b = cli_env(tmp_path / "b", tmp_path / "b" / "vault")

    def run(*args: str, env: dict[str, str], code: int = 0) -> str:
        r = ownmem(*args, env=env)
        assert r.returncode == code, r.stderr
        assert NEW not in r.stdout + r.stderr
        return r.stdout + r.stderr

    run("init", env=env_a)
    run("add", "written before", env=env_a)
    run("login", "--server", url, "--vault-name", "rekey-cli", env=env_a)
    run("sync", env=env_a)
    run("login", "--server", url, "--vault-name", "rekey-cli", env=env_b)
    out = run("passphrase", "change", env={**env_a, "OWNMEM_NEW_PASSPHRASE": NEW})
    assert "passphrase changed here and on" in out and "does not evict" in out
    run("add", "written after", env={**env_a, "OWNMEM_PASSPHRASE": NEW})
    run("sync", env={**env_a, "OWNMEM_PASSPHRASE": NEW})
    assert "wrong passphrase" in run("list", env=env_a, code=1)
    assert "changed on another device" in run("sync", env=env_b, code=1)
    assert "wrong passphrase" in run("passphrase", "update", env={**env_b, "OWNMEM_NEW_PASSPHRASE": PASSPHRASE},
                                     code=1)
    run("passphrase", "update", env={**env_b, "OWNMEM_NEW_PASSPHRASE": NEW})
    run("sync", env={**env_b, "OWNMEM_PASSPHRASE": NEW})
    listed = json.loads(run("list", "--json", env={**env_b, "OWNMEM_PASSPHRASE": NEW}))
    assert {m["content"]: m["trust"] for m in listed} == {"written before": "self", "written after": "self"}


def test_the_server_takes_new_keys_only_from_the_keys_in_force(url: str, devices: Devices) -> None:
    """Someone with a session (a stolen sync credential) but not the owner key cannot hand the
    vault to keys of their own; nor can a hand-over be replayed once the vault moved on."""
    a = devices.first(url, "rekey-three")
    held = a.remote.get_metadata()
    intruder = run_sync(K.identity_from_master(P, b"\x09" * 32))
    version = held.version + 1
    doc = held.metadata
    salt, wrap = b"\x01" * 16, b"\x02" * 40
    h, sync = a.v.holder(), a.v.sync_key()
    reg = signed.register_message("rekey-three", salt, intruder.sign_pub, sync.public, intruder.ka_pub, h.public)
    forged = messages.Rekey(
        held.version, salt, intruder.sign_pub, intruder.ka_pub, wrap, doc,
        run_sync(P.ed25519_sign(intruder.sign.seed, signed.metadata_message("rekey-three", version, doc))),
        run_sync(P.ed25519_sign(intruder.sign.seed, signed.rekey_message(
            "rekey-three", version, salt, intruder.sign_pub, intruder.ka_pub, wrap, doc))),
        run_sync(P.ed25519_sign(sync.seed, reg)), run_sync(P.mldsa65_sign(h.xi, reg, signed.REGISTER_HOLDER_CONTEXT)))
    with pytest.raises(SyncError) as e:
        a.remote.rekey(forged)
    assert e.value.server_code == ErrorCode.BAD_SIGNATURE
    info = a.remote.lookup()
    assert info is not None and info.owner_pub == a.v.identity.sign_pub      # nothing changed

    # the owner's own hand-over, replayed after it was taken: stale
    sent: list[messages.Rekey] = []
    real = a.remote.rekey

    def keep(up: messages.Rekey) -> int:
        sent.append(up)
        return real(up)
    a.remote.rekey = keep  # type: ignore[method-assign,assignment]
    change_passphrase(a.syncer, NEW)
    a.v.add("after")
    a.sync()
    with pytest.raises(SyncError) as e:
        real(sent[0])
    assert e.value.server_code in (ErrorCode.STALE_VERSION, ErrorCode.BAD_SIGNATURE)
    info = a.remote.lookup()
    assert info is not None and info.owner_pub == a.v.identity.sign_pub


def test_a_server_swapping_the_root_wrap_only_denies_a_new_device(url: str, devices: Devices,
                                                                    proxy: HostileProxy) -> None:
    """The lookup's root wrap of a changed vault swapped for a seeded one, or for another changed
    vault's real one: the new device's login fails with a clear error and creates nothing; it
    never ends up with keys of the server's choosing."""
    a = devices.first(url, "rekey-swap")
    a.v.add("written before")
    change_passphrase(a.syncer, NEW)
    a.sync()
    other = devices.first(url, "rekey-swap-other", label="o")
    change_passphrase(other.syncer, NEW)
    info, theirs = a.remote.lookup(), other.remote.lookup()
    assert info is not None and theirs is not None and theirs.root_wrap != info.root_wrap
    for swapped in (bytes(40), theirs.root_wrap):
        def swap(_s: Any, ans: Any, w: bytes = swapped) -> Any:
            return ans.with_json({**ans.json(), "root_wrap": w.hex()})
        proxy.on("GET", r"^/v1/vaults/rekey-swap$", swap)
        folder = devices.root / f"swap-{swapped[:2].hex()}"
        with pytest.raises(OwnmemError, match="root key"):
            login_new_device(folder, proxy.url, "rekey-swap", NEW)
        assert not (folder / "vault.db").exists()
        proxy.clear()
    c = devices.join(proxy.url, "rekey-swap", label="c", passphrase=NEW)     # the real answer: in
    assert c.v.holder().holder_id == a.v.holder().holder_id


def test_the_servers_export_is_the_devices_export_and_imports_as_the_same_vault(url: str, devices: Devices,
                                                                                 tmp_path: Path) -> None:
    """After a change, `GET .../export.amem` carries key 6 (root wrap, successions) as the device's
    export does, byte for byte: a fresh import of it is this vault, older objects as self."""
    from ownmem.vault.store import Store
    from ownmem.vault.transfer import export_bytes, import_bytes

    a = devices.first(url, "rekey-export")
    before = a.v.add("written before")
    change_passphrase(a.syncer, NEW)
    after = a.v.add("written after")
    a.sync()
    assert a.sync().refusals == []
    a.syncer.ensure_login()
    with httpx.Client(timeout=30) as c:
        r = c.get(f"{url}/v1/vaults/rekey-export/export.amem", headers={"authorization": f"Bearer {a.remote.token}"})
    r.raise_for_status()
    assert r.content == export_bytes(a.v)[0]
    report, w = import_bytes(lambda: Store(tmp_path / "restored"), r.content, NEW)
    try:
        assert report.imported == 2
        assert w.holder().holder_id == a.v.holder().holder_id and w.sync_key().public == a.v.sync_key().public
        assert {e.id: e.opened.trust for e in w.open_all().entries} == {before: Trust.SELF, after: Trust.SELF}
    finally:
        w.close()
