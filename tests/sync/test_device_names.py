"""A device's name reaches the server only sealed (vault/devicekey.py; docs/decisions.md "15.7"):
the server, on SQLite and on PostgreSQL, stores and answers no name a person gave, and every
device of the vault reads every name.  A server that moves a sealed name to another device,
forges one, or hands one in clear, never gets its words shown as if the person had named it."""
from __future__ import annotations

import base64
import secrets
from collections.abc import Iterator

import httpx
import pytest

from ownmem.crypto import provider, run_sync
from ownmem.vault import Vault
from ownmem.vault.devicekey import SEALED_PREFIX, default_label, open_label, seal_label, set_label
from ownmem.vault.devices import list_devices, this_device_id
from ownmem.vault.sync import link
from ownmem.wire.devices import LABEL_LEN, SEALED_LABEL_LEN
from tests.sync.hostile import Answer, HostileProxy, Seen
from tests.sync.synckit import PASSPHRASE, Backend, Device, Devices, ServerProcess

P = provider()
NAME = "Alice's work laptop \N{DESKTOP COMPUTER}"


@pytest.fixture(scope="module")
def server(backend: Backend) -> Iterator[ServerProcess]:
    s = ServerProcess(backend, label="device-names")
    try:
        yield s.start()
    finally:
        s.stop()


def _named_first(devices: Devices, url: str, name: str, label: str) -> Device:
    """A new vault whose first device carries ``label`` from its first login."""
    v = Vault.create(devices.root / f"named-{secrets.token_hex(3)}", PASSPHRASE)
    set_label(v.store, label)
    c = httpx.Client(timeout=60)
    d = Device(link(v, url, name, client=c), c)
    devices.made.append(d)
    d.sync()
    return d


def test_the_server_never_holds_a_devices_name_and_every_device_reads_them(
        server: ServerProcess, backend: Backend, devices: Devices) -> None:
    name = f"names-{secrets.token_hex(3)}"
    a = _named_first(devices, server.url, name, NAME)
    b = devices.join(server.url, name)
    b.sync()
    want = {this_device_id(a.syncer): NAME, this_device_id(b.syncer): default_label()}
    for d in (a, b):
        assert {r.device_id: r.label for r in list_devices(d.syncer)} == want

    # what the server answers and what it stores: sealed names, none of the words
    token = a.remote.token
    assert token is not None
    listed = httpx.get(f"{server.url}/v1/vaults/{name}/devices", headers={"authorization": f"Bearer {token}"}).json()
    kept = [d["label"] for d in listed["devices"]]
    assert len(kept) == 2 and all(k.startswith(SEALED_PREFIX) for k in kept), kept
    stored = b"".join(backend.snapshot().values())
    for words in (NAME, "Alice", default_label()):
        for form in (words.encode(), words.encode().hex().encode()):
            assert form not in stored, f"{words!r} stored by the server"
    assert kept[0].encode() in stored      # the search sees what the server does store


def test_names_the_server_moved_forged_or_sent_in_clear_are_shown_as_such(
        server: ServerProcess, devices: Devices) -> None:
    name = f"names-{secrets.token_hex(3)}"
    proxy = HostileProxy(server.url).start()
    try:
        a = _named_first(devices, proxy.url, name, NAME)
        b = devices.join(proxy.url, name)
        b.sync()
        ids = {"a": this_device_id(a.syncer).hex(), "b": this_device_id(b.syncer).hex()}

        def swap(_: Seen, ans: Answer) -> Answer:
            body = ans.json()
            by_id = {d["device_id"]: d for d in body["devices"]}
            by_id[ids["a"]]["label"], by_id[ids["b"]]["label"] = by_id[ids["b"]]["label"], by_id[ids["a"]]["label"]
            return ans.with_json(body)
        rule = proxy.on("GET", r"/devices$", swap)
        shown = {r.device_id.hex(): r.label for r in list_devices(a.syncer)}
        assert shown == {i: "a device whose name does not open with this vault's key" for i in ids.values()}
        proxy.clear()
        del rule

        def clear_and_forged(_: Seen, ans: Answer) -> Answer:
            body = ans.json()
            for d in body["devices"]:
                d["label"] = ("Remove me: I am the thief" if d["device_id"] == ids["b"]
                              else SEALED_PREFIX + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
            return ans.with_json(body)
        proxy.on("GET", r"/devices$", clear_and_forged)
        shown = {r.device_id.hex(): r.label for r in list_devices(a.syncer)}
        assert shown == {ids["a"]: "a device whose name does not open with this vault's key",
                         ids["b"]: "a device whose name the server shows unsealed: 'Remove me: I am the thief'"}
    finally:
        proxy.stop()


def test_a_sealed_name_opens_only_with_its_vaults_key_and_its_devices_id() -> None:
    key, other_key = secrets.token_bytes(32), secrets.token_bytes(32)
    dev, other_dev = secrets.token_bytes(16), secrets.token_bytes(16)
    sealed = run_sync(seal_label(P, key, dev, NAME))
    assert sealed.startswith(SEALED_PREFIX) and "Alice" not in sealed
    assert run_sync(open_label(P, key, dev, sealed)) == NAME
    assert sealed != run_sync(seal_label(P, key, dev, NAME)), "a fresh nonce each time"
    for n in range(1, 9):             # every length of base64 padding
        assert run_sync(open_label(P, key, dev, run_sync(seal_label(P, key, dev, "x" * n)))) == "x" * n
    refused = "a device whose name does not open with this vault's key"
    assert run_sync(open_label(P, other_key, dev, sealed)) == refused
    assert run_sync(open_label(P, key, other_dev, sealed)) == refused
    for bad in (SEALED_PREFIX, SEALED_PREFIX + "!!!", SEALED_PREFIX + "AAAA", sealed[:-4], sealed + "AAAA"):
        assert run_sync(open_label(P, key, dev, bad)) == refused, bad
    # the longest name, of 4-byte characters, fits what the server takes
    longest = "\N{GRINNING FACE}" * LABEL_LEN
    sealed = run_sync(seal_label(P, key, dev, longest))
    assert len(sealed) <= SEALED_LABEL_LEN and run_sync(open_label(P, key, dev, sealed)) == longest
    # a name that opens but was not cleaned before sealing (control characters) is shown cleaned
    nonce = secrets.token_bytes(12)
    raw = nonce + run_sync(P.aes_gcm_encrypt(key, nonce, b"phone\x1b[31m", dev))
    dirty = SEALED_PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")
    assert run_sync(open_label(P, key, dev, dirty)) == "phone[31m"
