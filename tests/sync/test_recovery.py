"""The recovery kit through a real server process (vault/recovery.py, vault/recovery_sync.py,
docs/decisions.md "Key Rotation"): a person with the vault name and the kit's words only opens
the vault on a new device and must set a new passphrase; the used kit is retired; the kit
follows a passphrase change made on another device; mistyped words are refused before anything
is asked; a server that hands out a kit (or keys) of its own making is refused with nothing
written; the server holds nothing that opens the vault."""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ownmem.aperto import keys as K
from ownmem.crypto import provider, random_bytes, run_sync
from ownmem.errors import PassphraseChanged, WrongPassphrase
from ownmem.vault import recovery as R, slots as S
from ownmem.vault.bip39_english import WORDS
from ownmem.vault.recovery_sync import recover_new_device, use_kit
from ownmem.vault.rekey_sync import catch_up, change_passphrase
from ownmem.vault.sync import Syncer, SyncReport, login_new_device
from tests.sync.hostile import Answer, HostileProxy, Seen
from tests.sync.synckit import PASSPHRASE, Backend, Device, Devices, ServerProcess, cli_env, ownmem

NEW = "recovery tests: the passphrase set after the kit 88"
P = provider()


@pytest.fixture(scope="module")
def url(sqlite_backend: Backend) -> Iterator[str]:
    s = ServerProcess(sqlite_backend, label="recovery")
    try:
        yield s.start().url
    finally:
        s.stop()


@pytest.fixture
def proxy(url: str) -> Iterator[HostileProxy]:
    p = HostileProxy(url).start()
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60.0) as c:
        yield c


def _kit(d: Device) -> str:
    """A new kit on ``d``, published (the owner-signed metadata carries it) -> its words."""
    words, _ = run_sync(R.create_kit_async(d.v))
    d.syncer.sync_metadata(SyncReport())
    return " ".join(words)


def _record(url: str, name: str) -> bytes:
    r = httpx.get(f"{url}/v1/vaults/{name}/recovery", timeout=30)
    assert r.status_code == 200, r.text
    return bytes.fromhex(r.json()["record"])


def _close(s: Syncer) -> None:
    s.v.close()
    if s.remote.http is not None:
        s.remote.http.close()


def test_the_kit_opens_the_vault_on_a_new_device_and_forces_a_new_passphrase(
        url: str, devices: Devices, tmp_path: Path, client: httpx.Client) -> None:
    a = devices.first(url, "kit-one")
    a.v.add("written before the passphrase was lost")
    a.sync()
    words = _kit(a)
    kit = R.recovery_slot(a.v.store)
    assert kit is not None and _record(url, "kit-one") == R.record(kit)
    holder = a.v.holder().holder_id

    s = recover_new_device(tmp_path / "new", url, "kit-one", words, client=client)
    assert s.v.holder().holder_id == holder and s.v.identity.sign_pub == a.v.identity.sign_pub
    new_words = " ".join(use_kit(s.v, NEW, s))          # the forced new passphrase, and a new kit
    s.sync_once()
    assert {e.opened.content for e in s.v.open_all().entries} == {"written before the passphrase was lost"}
    assert _record(url, "kit-one") == R.record(R.recovery_slot(s.v.store))   # type: ignore[arg-type]
    s.v.close()

    # the used kit is retired: it opens nothing on yet another device, nothing is written there
    with pytest.raises(WrongPassphrase):
        recover_new_device(tmp_path / "third", url, "kit-one", words, client=client)
    assert not (tmp_path / "third").exists()
    # the new words and the new passphrase open it; the old passphrase no longer does
    with pytest.raises(WrongPassphrase):
        login_new_device(tmp_path / "fourth", url, "kit-one", PASSPHRASE, client=client)
    login_new_device(tmp_path / "fifth", url, "kit-one", NEW, client=client).v.close()
    third = recover_new_device(tmp_path / "sixth", url, "kit-one", new_words, client=client)
    assert third.v.identity.sign_pub != a.v.identity.sign_pub
    third.v.close()
    # the first device learns of the change at its next sync, takes the new passphrase and the new kit
    with pytest.raises(PassphraseChanged):
        a.sync()
    catch_up(a.syncer, NEW)
    a.sync()
    assert R.record(R.recovery_slot(a.v.store)) == _record(url, "kit-one")     # type: ignore[arg-type]


def test_the_kit_follows_a_passphrase_change_made_on_another_device(url: str, devices: Devices,
                                                                     tmp_path: Path, client: httpx.Client) -> None:
    a = devices.first(url, "kit-two")
    words = _kit(a)
    b = devices.join(url, "kit-two")                    # b holds the kit from the metadata, never its words
    assert R.recovery_slot(b.v.store) == R.recovery_slot(a.v.store)
    change_passphrase(b.syncer, NEW)                    # b re-wraps it to the new master
    s = recover_new_device(tmp_path / "new", url, "kit-two", words, client=client)
    assert s.v.identity.sign_pub == b.v.identity.sign_pub
    _close(s)


def test_words_that_are_not_the_kits_are_refused_before_anything_is_written(
        url: str, devices: Devices, tmp_path: Path, client: httpx.Client) -> None:
    a = devices.first(url, "kit-three")
    words = _kit(a).split()
    # a mistyped word and a failing checksum: said before any request, no folder made
    with pytest.raises(R.BadRecoveryWords, match="word 3"):
        recover_new_device(tmp_path / "x", url, "kit-three", " ".join(words[:2] + ["qwerty"] + words[3:]),
                           client=client)
    last = WORDS[WORDS.index(words[-1]) ^ 1]
    with pytest.raises(R.BadRecoveryWords, match="do not check out"):
        recover_new_device(tmp_path / "x", url, "kit-three", " ".join(words[:-1] + [last]), client=client)
    # another kit's words; a vault without a kit (a decoy); a name nobody holds (a decoy)
    other = " ".join(R.to_words(random_bytes(16)))
    for name, w in (("kit-three", other), ("kit-three-none", " ".join(words)), ("nobody-holds-this", " ".join(words))):
        if name == "kit-three-none":
            devices.first(url, name)
        with pytest.raises(WrongPassphrase):
            recover_new_device(tmp_path / "x", url, name, w, client=client)
    assert not (tmp_path / "x").exists()
    # a decoy is a record of the same shape
    assert len(_record(url, "kit-three-none")) == len(_record(url, "nobody-holds-this")) == R.RECORD_LEN
    assert _record(url, "nobody-holds-this") == _record(url, "nobody-holds-this")


def test_a_kit_or_keys_a_server_made_are_refused_and_nothing_is_written(
        url: str, devices: Devices, tmp_path: Path, proxy: HostileProxy, client: httpx.Client) -> None:
    """Anyone can wrap a master of their own to the kit's public key (an ECDH-ES wrap needs no
    secret) and answer a lookup of the keys that master derives, with metadata signed by them: the
    kit's root check, which only the recovery key makes, refuses it."""
    a = devices.first(url, "kit-four")
    words = _kit(a)
    real = R.from_record(_record(url, "kit-four"))
    fake_master = random_bytes(32)
    fake = run_sync(K.identity_from_master(P, fake_master))
    eph_pub, wrapped = run_sync(S._wrap(P, real.pub, real.slot_id, fake_master))
    forged = R.record(S.Slot(real.slot_id, "recovery", real.label, real.ref, real.pub, eph_pub, wrapped, real.created))
    assert run_sync(S.open_slot(P, R.from_record(forged), R.from_words(words))) == fake_master   # it does open

    def kit(seen: Seen, ans: Answer) -> Answer:
        return ans.with_json({"record": forged.hex()})

    def lookup(seen: Seen, ans: Answer) -> Answer:
        return ans.with_json({**ans.json(), "owner_pub": fake.sign_pub.hex(), "ka_pub": fake.ka_pub.hex()})

    proxy.on("GET", r"/recovery$", kit)
    with pytest.raises(WrongPassphrase, match="not made with these words"):
        recover_new_device(tmp_path / "x", proxy.url, "kit-four", words, client=client)
    proxy.on("GET", r"^/v1/vaults/kit-four$", lookup)
    with pytest.raises(WrongPassphrase, match="not made with these words"):
        recover_new_device(tmp_path / "x", proxy.url, "kit-four", words, client=client)
    # a record from before a passphrase change (replayed): opens only a superseded master
    proxy.clear()
    stale = _record(url, "kit-four")
    change_passphrase(a.syncer, NEW)
    proxy.on("GET", r"/recovery$", lambda seen, ans: ans.with_json({"record": stale.hex()}))
    with pytest.raises(WrongPassphrase):
        recover_new_device(tmp_path / "x", proxy.url, "kit-four", words, client=client)
    assert not (tmp_path / "x").exists()
    proxy.clear()
    s = recover_new_device(tmp_path / "x", proxy.url, "kit-four", words, client=client)   # the real one still works
    assert s.v.identity.sign_pub == a.v.identity.sign_pub
    _close(s)


def test_the_server_holds_nothing_that_opens_the_vault(url: str, sqlite_backend: Backend, devices: Devices) -> None:
    """Everything the server stores: no recovery key, no words, no master, no root, no slot key;
    and the kit's record, tried with every 16 and 32 bytes of what the server holds of the vault's
    keys (the metadata, the record) as its secret, opens nothing."""
    a = devices.first(url, "kit-five")
    a.v.add("a secret memory")
    a.sync()
    words, _ = run_sync(R.create_kit_async(a.v))
    a.syncer.sync_metadata(SyncReport())
    key = R.from_words(" ".join(words))
    seed, _ = run_sync(S.slot_secret_key(P, "recovery", key))
    stored = sqlite_backend.snapshot()
    blob = b"".join(stored.values())
    for secret in (key, seed, a.v.identity.master, a.v.identity.root, " ".join(words).encode(),
                   words[0].encode() + b" " + words[1].encode()):
        assert secret not in blob
    raw_record = _record(url, "kit-five")
    record = R.from_record(raw_record)
    doc = a.remote.get_metadata().metadata
    assert raw_record in doc                       # the server's copy is the owner-signed metadata's
    tried = 0
    for raw in (doc, raw_record):
        for n in (16, 32):
            for i in range(len(raw) - n + 1):
                try:
                    run_sync(S.open_slot(P, record, raw[i:i + n]))
                except WrongPassphrase:
                    tried += 1
                    continue
                raise AssertionError("a value the server holds opened the recovery kit")
    assert tried > 100


def test_the_cli_makes_the_kit_and_uses_it_on_a_new_device(url: str, tmp_path: Path) -> None:
    """`ownmem init` shows a kit; `ownmem recovery use --server --vault-name` on a new device opens
    the vault with the words, sets the new passphrase and shows a new kit; no secret in an error."""
    env_a = cli_env(tmp_path / "a", tmp_path / "a" / "vault")
    env_b = {**cli_env(tmp_path / "b", tmp_path / "b" / "vault", passphrase=None), "OWNMEM_NEW_PASSPHRASE": NEW}

    def run(*args: str, env: dict[str, str], code: int = 0) -> str:
        r = ownmem(*args, env=env)
        assert r.returncode == code, r.stderr
        assert NEW not in r.stdout + r.stderr and PASSPHRASE not in r.stdout + r.stderr
        return r.stdout + r.stderr

    out = run("init", env=env_a)
    words = " ".join(w for _, w in sorted((int(n), w) for n, w in re.findall(r"(\d+)\. ([a-z]+)", out)))
    assert len(words.split()) == 12 and "shown only this once" in out
    run("add", "kept through the kit", env=env_a)
    run("login", "--server", url, "--vault-name", "kit-cli", env=env_a)
    run("sync", env=env_a)
    typo = " ".join(words.split()[:11] + ["zzzz"])
    assert "word 12" in run("recovery", "use", "--server", url, "--vault-name", "kit-cli",
                            env={**env_b, "OWNMEM_RECOVERY_WORDS": typo}, code=1)
    assert not (tmp_path / "b" / "vault").exists()
    out = run("recovery", "use", "--server", url, "--vault-name", "kit-cli",
              env={**env_b, "OWNMEM_RECOVERY_WORDS": words})
    assert "new passphrase (here and on the server" in out and "new one" in out
    assert words not in out
    run("sync", env={**env_b, "OWNMEM_PASSPHRASE": NEW})
    listed = json.loads(run("list", "--json", env={**env_b, "OWNMEM_PASSPHRASE": NEW}))
    assert [m["content"] for m in listed] == ["kept through the kit"]
    assert "do not open" in run("recovery", "use", env={**env_b, "OWNMEM_RECOVERY_WORDS": words}, code=1)
