"""Issue 23, "No silent data mistakes", from the server's side.

- A backup restored under a new name and then linked must not become a second vault with the
  same keys (two copies that never exchange a change): the server refuses the registration,
  naming the vault those keys hold, to the holder of the keys only; ``link(follow=True)`` (the
  web app's "Link and sync") links back to it.
- A name can be checked before creating a vault (``GET /v1/names/{name}``), paid from the
  address's registration budget, the rate at which registering already tells a taken name;
  the lookup still answers decoys.  A new device at a name nobody holds is told so
  (``NoSuchVault``), a wrong passphrase at a held name is not.
"""
from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from ownmem.errors import NoSuchVault, SyncError, WrongPassphrase
from ownmem.vault import UnlockedVault, Vault
from ownmem.vault.store import Store
from ownmem.vault.sync import link, login_new_device
from ownmem.vault.transfer import export_bytes, import_bytes
from tests.server.conftest import Backend
from tests.server.storekit import registered
from tests.vault.vaultkit import PASSPHRASE


@pytest.fixture
def restored(tmp_path: Path) -> Iterator[Callable[[], tuple[UnlockedVault, UnlockedVault]]]:
    """make() -> (the original vault with two memories, its backup restored in a new folder)."""
    made: list[UnlockedVault] = []

    def make() -> tuple[UnlockedVault, UnlockedVault]:
        n = len(made)
        v = Vault.create(tmp_path / f"original-{n}", PASSPHRASE)
        v.add("the cat is called Miso")
        v.add("standup at nine")
        data, _ = export_bytes(v)
        folder = tmp_path / f"restored-{n}"
        folder.mkdir()
        report, copy = import_bytes(lambda: Store(folder), data, PASSPHRASE)
        assert report.identity_adopted
        made.extend((v, copy))
        return v, copy

    yield make
    for v in made:
        if v.ident is not None:
            v.lock()


def _names_of_owner(backend: Backend, v: UnlockedVault) -> str | None:
    st = backend.storage()
    try:
        name: str | None = st.name_of_owner(v.identity.sign_pub)
        return name
    finally:
        st.close()


def test_a_restored_backup_linked_under_a_new_name_is_refused_naming_the_original(
        backend: Backend, restored: Callable[[], tuple[UnlockedVault, UnlockedVault]], http: httpx.Client) -> None:
    original, copy = restored()
    name, new = "orig-" + secrets.token_hex(4), "copy-" + secrets.token_hex(4)
    link(original, backend.url, name, client=http).sync_once()
    with pytest.raises(SyncError) as e:
        link(copy, backend.url, new, client=http)
    assert e.value.server_code == "keys_registered" and e.value.status == 409
    assert e.value.vault == name and repr(name) in str(e.value)
    assert not registered(backend, new)
    assert copy.store.sync_get("name") is None        # nothing changed on the device either


def test_link_and_sync_of_a_restored_backup_links_back_to_its_vault(
        backend: Backend, restored: Callable[[], tuple[UnlockedVault, UnlockedVault]], http: httpx.Client) -> None:
    original, copy = restored()
    name, new = "orig-" + secrets.token_hex(4), "copy-" + secrets.token_hex(4)
    link(original, backend.url, name, client=http).sync_once()
    s = link(copy, backend.url, new, client=http, follow=True)
    assert s.remote.name == name and copy.store.sync_get("name") == name.encode()
    assert not registered(backend, new)
    copy.add("written on the restored copy")
    s.sync_once()
    link(original, backend.url, name, client=http).sync_once()
    assert "written on the restored copy" in {e.to_json()["content"] for e in original.open_all().heads()}


def test_a_second_name_for_the_same_keys_only_when_asked(
        backend: Backend, restored: Callable[[], tuple[UnlockedVault, UnlockedVault]], http: httpx.Client) -> None:
    original, _ = restored()
    name, other = "orig-" + secrets.token_hex(4), "again-" + secrets.token_hex(4)
    link(original, backend.url, name, client=http)
    link(original, backend.url, other, client=http, another_name=True)
    assert registered(backend, other) and _names_of_owner(backend, original) == name


def test_a_stranger_never_learns_which_vault_keys_hold(
        backend: Backend, restored: Callable[[], tuple[UnlockedVault, UnlockedVault]], http: httpx.Client) -> None:
    """The owner key is public (every lookup gives it); a registration carrying it without the
    keys' signatures is refused before the server looks for the vault it is in."""
    original, _ = restored()
    name = "orig-" + secrets.token_hex(4)
    link(original, backend.url, name, client=http)
    info = http.get(f"{backend.url}/v1/vaults/{name}").json()
    forged = {"name": "thief-" + secrets.token_hex(4), "salt": info["salt"], "owner_pub": info["owner_pub"],
              "sync_pub": info["sync_pub"], "ka_pub": info["ka_pub"], "holder_pub": info["holder_pub"],
              "metadata": "00", "metadata_sig": "00" * 64, "key_receipt": "00", "proof": "00" * 64,
              "holder_proof": "00" * 3309}
    r = http.post(f"{backend.url}/v1/vaults", json=forged)
    assert r.status_code in (400, 401, 403) and name not in r.text and "vault" not in r.json()


def test_the_name_check_says_taken_or_free_and_is_paid_from_the_registration_budget(
        backend: Backend, start_server: Callable[..., str], tmp_path: Path) -> None:
    url = start_server(backend.strict_env(), OWNMEM_REGISTER_PER_HOUR="3")
    v = Vault.create(tmp_path / "v", PASSPHRASE)
    try:
        name = "held-" + secrets.token_hex(4)
        with httpx.Client(timeout=30) as c:
            link(v, url, name, client=c)           # one registration of the three
            assert c.get(f"{url}/v1/names/{name}").json() == {"name": name, "taken": True}
            free = "free-" + secrets.token_hex(4)
            assert c.get(f"{url}/v1/names/{free}").json() == {"name": free, "taken": False}
            r = c.get(f"{url}/v1/names/another-{secrets.token_hex(4)}")
            assert r.status_code == 429 and r.json()["error"] == "rate_limited" and "Retry-After" in r.headers
            # the lookup still cannot tell: a decoy for the free name, keys for the held one
            assert c.get(f"{url}/v1/vaults/{free}").status_code == 200
            assert c.get(f"{url}/v1/names/NOT A NAME").status_code in (404, 429)
    finally:
        v.lock()


def test_a_new_device_is_told_no_vault_has_the_name_but_a_wrong_passphrase_stays_one(
        backend: Backend, linked_vault: Callable[..., object], tmp_path: Path, http: httpx.Client) -> None:
    lv = linked_vault(0)
    held = lv.name   # type: ignore[attr-defined]
    with pytest.raises(WrongPassphrase) as e:
        login_new_device(tmp_path / "d1", backend.url, held, "not the passphrase at all, no", client=http)
    assert not isinstance(e.value, NoSuchVault) and e.value.code == "wrong_passphrase"
    nobody = "nobody-" + secrets.token_hex(4)
    with pytest.raises(NoSuchVault) as n:
        login_new_device(tmp_path / "d2", backend.url, nobody, "any passphrase whatsoever here", client=http)
    assert n.value.code == "no_such_vault" and nobody in str(n.value)
    for d in ("d1", "d2"):
        assert not (tmp_path / d).exists() or not any((tmp_path / d).iterdir())
