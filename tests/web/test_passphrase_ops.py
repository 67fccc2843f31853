"""The PWA's passphrase operations (ownmem.web.api App.op_passphrase_change and
op_passphrase_update) on a CPython vault and a real server process: the worker's own code,
with the CLI's SQLite store in place of IndexedDB and the CLI's HTTP client in place of fetch.
From the side of someone at an unlocked device who does not know the passphrase (a wrong
current one changes nothing), of a device that missed the change (a wrong new one changes
nothing; the right one makes it sync again, and its old passphrase is refused afterwards), and
of the device cache (still readable after a change: its key comes from the vault root).  The
same flow in three browsers: tests/browser/passphrase.test.mjs."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ownmem.aperto import keys as aperto_keys
from ownmem.crypto import provider, random_bytes, run_sync
from ownmem.errors import PassphraseChanged, SyncError, VaultError, WrongPassphrase
from ownmem.vault import Vault
from ownmem.vault.rekey_sync import catch_up
from ownmem.vault.sync import Syncer
from ownmem.vault.unlock import unlock_store
from ownmem.web.api import CACHE_INFO, App, DeviceCache
from ownmem.web.search import ListedSearch
from tests.sync.conftest import devices, sqlite_backend  # noqa: F401 - the sync tests' fixtures, used here
from tests.sync.synckit import PASSPHRASE, Backend, Devices, ServerProcess

NEW = "web tests: the new passphrase after the borrowed laptop 58"


class _App(App):
    """The worker's App on a CPython vault (as tests/web/test_search.py): no IndexedDB here."""

    async def _save_cache_async(self) -> None:
        self.cache.dirty = False


def _app(v: object, syncer: Syncer | None = None) -> _App:
    a = _App.__new__(_App)          # without __init__: its IndexedDB store exists only in a browser
    a.vault, a.cache, a.syncer, a._agents = v, DeviceCache(), syncer, None  # type: ignore[assignment]
    a.store = a.vault.store  # type: ignore[assignment,union-attr]
    a.listed_search = ListedSearch()
    a.last_sync = None
    return a


@pytest.fixture(scope="module")
def url(sqlite_backend: Backend) -> Iterator[str]:
    s = ServerProcess(sqlite_backend, label="web-rekey")
    try:
        yield s.start().url
    finally:
        s.stop()


def _contents(a: App) -> dict[str, str]:
    return {e["content"]: e["trust"] for e in run_sync(a.op_list())["entries"]}


def _unlocks(folder: Path, passphrase: str) -> bool:
    try:
        Vault(folder).unlock(passphrase).close()
    except WrongPassphrase:
        return False
    return True


def test_a_wrong_current_passphrase_changes_nothing(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", PASSPHRASE)
    try:
        a = _app(v)
        run_sync(a.op_add("written before"))
        salt, scopes = v.store.identity(), v.store.scopes()
        with pytest.raises(WrongPassphrase, match="wrong current passphrase"):
            run_sync(a.op_passphrase_change("not the passphrase", NEW))
        with pytest.raises(VaultError, match="same as the current one"):
            run_sync(a.op_passphrase_change(PASSPHRASE, PASSPHRASE))
        with pytest.raises(VaultError, match="choose a new passphrase"):
            run_sync(a.op_passphrase_change(PASSPHRASE, ""))
        assert v.store.identity() == salt and v.store.scopes() == scopes and v.store.root_wrap() is None
    finally:
        v.close()
    assert _unlocks(tmp_path / "v", PASSPHRASE) and not _unlocks(tmp_path / "v", NEW)


def test_an_unlinked_change_with_the_pages_argon2id_keeps_the_cache_and_what_was_written(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", PASSPHRASE)
    try:
        a = _app(v)
        run_sync(a.op_add("written before"))
        assert _contents(a) == {"written before": "self"}
        cached = dict(a.cache.entries)
        cache_key = run_sync(v.purpose_key_async(CACHE_INFO))
        # what client.js sends: Argon2id of the current passphrase (stored salt) and of the new one (fresh salt)
        p = provider()
        pub = v.store.identity()
        assert pub is not None
        salt = random_bytes(aperto_keys.SALT_LEN)
        r = run_sync(a.op_passphrase_change(
            PASSPHRASE, NEW, master=run_sync(aperto_keys.master_from_passphrase(p, NEW, salt)), salt=salt,
            current_master=run_sync(aperto_keys.master_from_passphrase(p, PASSPHRASE, pub.salt))))
        assert r["server"] is None and r["scopes"] == 1
        new_pub = v.store.identity()
        assert new_pub is not None and new_pub.salt == salt
        # the device cache's key comes from the vault root, which the change keeps
        assert run_sync(v.purpose_key_async(CACHE_INFO)) == cache_key and a.cache.entries == cached
        run_sync(a.op_add("written after"))
        assert _contents(a) == {"written before": "self", "written after": "self"}
        # a page's master that is not Argon2id of the current passphrase is refused like a wrong one
        with pytest.raises(WrongPassphrase):
            run_sync(a.op_passphrase_change(NEW, PASSPHRASE, current_master=bytes(32)))
    finally:
        v.close()
    assert _unlocks(tmp_path / "v", NEW) and not _unlocks(tmp_path / "v", PASSPHRASE)


def test_a_linked_change_reaches_the_device_that_missed_it(url: str, devices: Devices) -> None:
    one = devices.first(url, "web-rekey")
    two = devices.join(url, "web-rekey")
    a, b = _app(one.v, one.syncer), _app(two.v, two.syncer)
    run_sync(a.op_add("written before the change"))
    a.op_sync()
    b.op_sync()

    with pytest.raises(WrongPassphrase):
        run_sync(a.op_passphrase_change("a guess at the unlocked laptop", NEW))
    r = run_sync(a.op_passphrase_change(PASSPHRASE, NEW))
    assert r["server"] == url
    assert one.remote.lookup().owner_pub == one.v.identity.sign_pub  # type: ignore[union-attr]
    run_sync(a.op_add("written after the change"))
    a.op_sync()

    # the other device: its sync stops with passphrase_changed; a wrong new passphrase changes nothing
    with pytest.raises(PassphraseChanged):
        b.op_sync()
    held = two.v.store.identity()
    with pytest.raises(WrongPassphrase):
        run_sync(b.op_passphrase_update(PASSPHRASE))
    with pytest.raises(WrongPassphrase):
        run_sync(b.op_passphrase_update("not it either"))
    # Argon2id of the right passphrase but for a salt the server no longer answers (changed again meanwhile)
    stale = bytes(aperto_keys.SALT_LEN)
    with pytest.raises(SyncError, match="changed again meanwhile"):
        catch_up(two.syncer, NEW, derived=(stale, run_sync(aperto_keys.master_from_passphrase(provider(), NEW, stale))))
    assert two.v.store.identity() == held
    done = run_sync(b.op_passphrase_update(NEW))
    assert done["synced"] and done["problem"] is None and done["pending"] == 0
    # it syncs again, and both read everything as their own
    assert _contents(b) == {"written before the change": "self", "written after the change": "self"}
    assert _contents(a) == {"written before the change": "self", "written after the change": "self"}
    assert b.op_sync()["refusals"] == []
    assert two.v.holder().holder_id == one.v.holder().holder_id
    # the next unlock takes the new passphrase, on both devices; the old one is refused
    for d in (one, two):
        assert _unlocks(d.folder, NEW) and not _unlocks(d.folder, PASSPHRASE)
        with pytest.raises(WrongPassphrase):
            unlock_store(d.v.store, PASSPHRASE, provider())
