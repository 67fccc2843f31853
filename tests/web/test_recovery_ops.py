"""The recovery kit in a browser that holds no vault (ownmem.web.api App.op_recovery_login): a
lost phone and a forgotten passphrase, with the vault's name and the kit's 12 words only.  The
worker's own code over a real server process, with an in-memory store in place of IndexedDB and
the CLI's HTTP client in place of fetch.  From the side of the person (the vault arrives with its
memories, under a new passphrase, with a new kit; the old passphrase and the used words open
nothing afterwards), of a mistake (a mistyped word, a wrong name, words of another kit) and of a
hostile server (a kit of its own making): each refused plainly with nothing stored in the browser.
The same flow in three browsers: tests/browser/recovery.test.mjs."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ownmem.aperto import keys as K
from ownmem.crypto import provider, random_bytes, run_sync
from ownmem.errors import NoSuchVault, SyncError, VaultError, WrongPassphrase
from ownmem.vault import recovery as R, slots as S
from ownmem.vault.bip39_english import WORDS
from ownmem.vault.devices import list_devices
from ownmem.vault.recovery_sync import recover_new_device
from ownmem.vault.remote import Remote
from ownmem.vault.store import Store
from ownmem.vault.sync import Syncer, SyncReport, login_new_device
from ownmem.web.api import App, DeviceCache
from ownmem.web.search import ListedSearch
from tests.sync.conftest import devices, sqlite_backend  # noqa: F401 - the sync tests' fixtures, used here
from tests.sync.hostile import Answer, HostileProxy, Seen
from tests.sync.synckit import PASSPHRASE, Backend, Device, Devices, ServerProcess

NEW = "web tests: the passphrase chosen after the phone was lost 31"
LABEL = "Firefox on the new phone"
MEMORY = "The spare key is under the blue pot"
P = provider()


class _Browser(App):
    """The worker's App on an empty in-memory store (no IndexedDB here), its HTTP the CLI's."""

    def __init__(self, client: httpx.Client) -> None:      # App's own opens IndexedDB
        self.client, self.store = client, Store(None)       # type: ignore[assignment]
        self.vault, self.cache, self.syncer, self._agents = None, DeviceCache(), None, None
        self.listed_search, self.last_sync, self.awaits = ListedSearch(), None, False

    def _remote(self, server: str, name: str) -> Remote:
        return Remote(server, name, client=self.client)

    async def _load_cache(self) -> None:
        self.cache = DeviceCache()

    async def _save_cache_async(self) -> None:
        self.cache.dirty = False


@pytest.fixture(scope="module")
def url(sqlite_backend: Backend) -> Iterator[str]:
    s = ServerProcess(sqlite_backend, label="web-kit")
    try:
        yield s.start().url
    finally:
        s.stop()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60.0) as c:
        yield c


@pytest.fixture
def proxy(url: str) -> Iterator[HostileProxy]:
    p = HostileProxy(url).start()
    try:
        yield p
    finally:
        p.stop()


def _kit(d: Device) -> str:
    """A new kit on ``d``, published in the owner-signed metadata -> its words."""
    words, _ = run_sync(R.create_kit_async(d.v))
    d.syncer.sync_metadata(SyncReport())
    return " ".join(words)


def _holds_nothing(b: _Browser) -> None:
    assert b.vault is None and b.store.identity() is None and b.store.count() == 0
    assert not b.store.scopes() and Syncer.linked(b.store) is None     # no scope, not linked


def test_a_browser_with_no_vault_opens_it_with_the_name_and_words_and_sets_a_new_passphrase(
        url: str, devices: Devices, client: httpx.Client, tmp_path: Path) -> None:
    a = devices.first(url, "web-kit-one")
    a.v.add(MEMORY)
    a.sync()
    words = _kit(a)

    b = _Browser(client)
    # typed as a person copies them from paper: numbered, upper case, on lines
    typed = "\n".join(f"{i}. {w.upper()}" for i, w in enumerate(words.split(), 1))
    r = run_sync(b.op_recovery_login(url, "web-kit-one", typed, NEW, label=LABEL))
    assert r["synced"] and r["problem"] is None and r["pending"] == 0 and r["refusals"] == []
    assert len(r["words"]) == 12 and r["words"] != words.split()
    assert {e["content"]: e["trust"] for e in run_sync(b.op_list())["entries"]} == {MEMORY: "self"}
    assert b.v.holder().holder_id == a.v.holder().holder_id     # the same vault, not a copy
    # the browser named itself in the device list, as a passphrase login does
    assert any(d.label == LABEL and d.this_device for d in list_devices(b.syncer))
    # the new kit is the one the server hands out now
    assert R.record(R.recovery_slot(b.store)) == b.syncer.remote.recovery_record()  # type: ignore[arg-type]

    # the old passphrase and the used words open nothing any more; the new passphrase and words do
    with pytest.raises(WrongPassphrase):
        login_new_device(tmp_path / "old", url, "web-kit-one", PASSPHRASE, client=client)
    with pytest.raises(WrongPassphrase):
        run_sync(_Browser(client).op_recovery_login(url, "web-kit-one", words, "another new one 52 kites"))
    login_new_device(tmp_path / "new", url, "web-kit-one", NEW, client=client).v.close()
    recover_new_device(tmp_path / "kit", url, "web-kit-one", " ".join(r["words"]), client=client).v.close()
    # a browser that holds a vault already is not overwritten
    with pytest.raises(VaultError, match="already holds a vault"):
        run_sync(b.op_recovery_login(url, "web-kit-one", " ".join(r["words"]), NEW))


def test_mistakes_are_said_plainly_and_nothing_is_stored(url: str, devices: Devices, client: httpx.Client,
                                                       proxy: HostileProxy) -> None:
    a = devices.first(url, "web-kit-two")
    words = _kit(a).split()
    devices.first(url, "web-kit-none", label="c")          # a vault without a kit: the server answers a decoy
    b = _Browser(client)

    def fails(server: str, name: str, w: list[str], passphrase: str = NEW) -> Exception:
        with pytest.raises((R.BadRecoveryWords, WrongPassphrase, VaultError)) as e:
            run_sync(b.op_recovery_login(server, name, " ".join(w), passphrase))
        _holds_nothing(b)
        return e.value

    # a mistyped word and a failing checksum: refused before any request reaches the server
    e = fails(proxy.url, "web-kit-two", words[:2] + ["qwerty"] + words[3:])
    assert isinstance(e, R.BadRecoveryWords) and "word 3" in str(e)
    e = fails(proxy.url, "web-kit-two", words[:-1] + [WORDS[WORDS.index(words[-1]) ^ 1]])
    assert isinstance(e, R.BadRecoveryWords) and "do not check out" in str(e)
    assert proxy.seen == []
    e = fails(url, "web-kit-two", words, passphrase="")
    assert isinstance(e, VaultError) and "choose a new passphrase" in str(e)
    # a name nobody holds: said as such (the server's decoy kit alone would not tell)
    e = fails(url, "web-kit-nobody-holds", words)
    assert isinstance(e, NoSuchVault) and e.code == "no_such_vault"
    # a vault without a kit (its decoy), and another kit's words: the words do not open it
    for name, w in (("web-kit-none", words), ("web-kit-two", R.to_words(random_bytes(16)))):
        e = fails(url, name, w)
        assert type(e) is WrongPassphrase and "do not open" in str(e)


def test_a_kit_a_hostile_server_made_is_refused_and_nothing_is_stored(
        url: str, devices: Devices, client: httpx.Client, proxy: HostileProxy) -> None:
    """A server can wrap a master of its own to the kit's public key (ECDH-ES needs no secret) and
    answer a lookup of the keys that master derives: the kit's root check refuses it."""
    a = devices.first(url, "web-kit-three")
    words = _kit(a)
    real = R.from_record(Remote(url, "web-kit-three", client=client).recovery_record())
    fake_master = random_bytes(32)
    fake = run_sync(K.identity_from_master(P, fake_master))
    eph_pub, wrapped = run_sync(S._wrap(P, real.pub, real.slot_id, fake_master))
    forged = R.record(S.Slot(real.slot_id, "recovery", real.label, real.ref, real.pub, eph_pub, wrapped, real.created))
    proxy.on("GET", r"/recovery$", lambda seen, ans: ans.with_json({"record": forged.hex()}))
    keys = {"owner_pub": fake.sign_pub.hex(), "ka_pub": fake.ka_pub.hex()}
    proxy.on("GET", r"^/v1/vaults/web-kit-three$", lambda seen, ans: ans.with_json({**ans.json(), **keys}))
    b = _Browser(client)
    with pytest.raises(WrongPassphrase, match="not made with these words"):
        run_sync(b.op_recovery_login(proxy.url, "web-kit-three", words, NEW))
    _holds_nothing(b)
    assert not any(s.method == "POST" for s in proxy.seen)   # no login, no rekey: nothing sent in the vault's name


def test_a_change_refused_after_the_fetch_leaves_the_vault_locked_and_the_kit_opens_it_again(
        url: str, devices: Devices, client: httpx.Client, proxy: HostileProxy) -> None:
    a = devices.first(url, "web-kit-four")
    a.v.add(MEMORY)
    a.sync()
    words = _kit(a)

    def refuse(seen: Seen, ans: Answer) -> Answer:
        return Answer(503, {"content-type": "application/json"}, b'{"error": "unavailable", "message": "later"}')

    rule = proxy.on("POST", r"/rekey$", refuse, forward=False)
    b = _Browser(client)
    with pytest.raises(SyncError):
        run_sync(b.op_recovery_login(proxy.url, "web-kit-four", words, NEW))
    assert rule.fired == 1
    # the words alone never leave it open: locked, and the old passphrase still the server's
    assert b.vault is None and b.syncer is None and b.store.identity() is not None
    assert Remote(url, "web-kit-four", client=client).lookup().owner_pub == a.v.identity.sign_pub  # type: ignore[union-attr]
    # the unlock screen's "Forgot your passphrase?" (op_recovery_use) with the same words finishes it
    proxy.clear()
    r = run_sync(b.op_recovery_use(words, NEW))
    assert len(r["words"]) == 12
    b.op_sync()
    assert {e["content"] for e in run_sync(b.op_list())["entries"]} == {MEMORY}
    assert Remote(url, "web-kit-four", client=client).lookup().owner_pub == b.v.identity.sign_pub  # type: ignore[union-attr]
    assert b.v.identity.sign_pub != a.v.identity.sign_pub
