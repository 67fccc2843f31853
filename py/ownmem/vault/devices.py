"""A vault's devices, the use cases (ApertoMemory "Device and Key Revocation"; docs/decisions.md
"15.7"); this device's own key and login are vault/devicekey.py.

    list           the server's list of enrolled devices, this one marked
    remove         (a) the server removes the device (owner-signed): its credentials end and its
                   key never logs in again; (b) a passphrase change (the same passphrase again, or
                   a new one): new owner keys, fresh scope KEKs for all that is written afterwards,
                   which the removed device cannot derive, and the old owner key enrols nothing

What a removed device keeps: what it already held (the memories synced to it, and the keys of
what was written before), as ApertoMemory says; nothing written afterwards reaches it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ownmem.aperto import keys as aperto_keys
from ownmem.crypto import run_sync
from ownmem.errors import NotFound
from ownmem.purposes import Purpose
from ownmem.vault.devicekey import device_auth, open_label
from ownmem.vault.rekey import Rekeyed
from ownmem.vault.rekey_sync import change_passphrase_async
from ownmem.vault.sync import Syncer
from ownmem.wire import signed
from ownmem.wire.devices import DeviceInfo

# Said wherever a device is removed (CLI, PWA, README), because it is what people would not guess.
WHAT_IT_KEEPS = (
    "A removed device can no longer sync, log in or be added back. It keeps what it already held: the memories "
    "synced to it before, and the keys to read them. Nothing written from now on reaches it. If someone may "
    "know your passphrase too, also change the passphrase.")


@dataclass(frozen=True, slots=True)
class DeviceRow:
    """One enrolled device as the person sees it."""

    device_id: bytes
    label: str
    added_at: int
    last_sync: int
    this_device: bool


def this_device_id(s: Syncer) -> bytes:
    return device_auth(s.store, s.v.identity.sign.seed, b"", s.v.crypto).device_id


async def rows(s: Syncer, listed: tuple[DeviceInfo, ...], mine: bytes) -> list[DeviceRow]:
    """The server's list as the person reads it: each device's sealed name opened here."""
    key = await s.v.purpose_key_async(Purpose.DEVICE_LABEL)
    return [DeviceRow(d.device_id, await open_label(s.v.crypto, key, d.device_id, d.label), d.added_at, d.last_sync,
                      d.device_id == mine) for d in listed]


async def is_current_passphrase(s: Syncer, passphrase: str) -> bool:
    """Whether ``passphrase`` is this vault's (one Argon2id): a removal renews the keys under the
    passphrase typed, so a typo must never become the vault's passphrase."""
    pub = s.store.identity()
    if pub is None or not passphrase:
        return False
    master = await aperto_keys.master_from_passphrase(s.v.crypto, passphrase, pub.salt)
    return (await aperto_keys.identity_from_master(s.v.crypto, master)).sign_pub == s.v.identity.sign_pub


def list_devices(s: Syncer) -> list[DeviceRow]:
    """The vault's enrolled devices (this one enrols itself by logging in)."""
    return run_sync(rows(s, s._call(s.remote.devices), this_device_id(s)))  # noqa: SLF001 (this package's own Syncer)


def find_device(found: list[DeviceRow], prefix: str) -> DeviceRow:
    """The one device whose id starts with ``prefix`` (hex, as `ownmem devices` prints it)."""
    want = prefix.strip().lower()
    hits = [d for d in found if want and d.device_id.hex().startswith(want)]
    if not hits:
        raise NotFound(f"no device of this vault has an id starting with {prefix!r} (see `ownmem devices`)")
    if len(hits) > 1:
        raise NotFound(f"{prefix!r} starts the ids of {len(hits)} devices: give more of the id")
    if hits[0].this_device:
        raise NotFound("that is this device: remove it from another device")
    return hits[0]


def remove_device(s: Syncer, device: bytes, passphrase: str) -> Rekeyed:
    """(a) the server removes ``device``, then (b) the owner keys change under ``passphrase`` (the
    same one typed again, or a new one).  If (b) fails, the device is removed all the same and no
    device can be added until a passphrase change (``ownmem passphrase change``) finishes it."""
    return run_sync(remove_device_async(s, device, passphrase))


async def remove_device_async(s: Syncer, device: bytes, passphrase: str, *, salt: bytes | None = None,
                              master: bytes | None = None) -> Rekeyed:
    """``remove_device`` awaiting its Argon2id (the browser)."""
    sig = await s.v.crypto.ed25519_sign(s.v.identity.sign.seed, signed.device_remove_message(s.remote.name, device))
    s._call(lambda: s.remote.remove_device(device, sig))          # noqa: SLF001
    return await change_passphrase_async(s, passphrase, salt=salt, master=master)
