"""A vault's devices (ApertoMemory "Device and Key Revocation"; docs/decisions.md "15.7").

    device key     a random Ed25519 seed made on this device and kept in its store (sync state
                   ``device_key``): never derived from the passphrase or the vault root, which
                   every device holds, so a removed device cannot make another device's key
    login          the sync key's proof, the device key's over the same challenge, and, while
                   this device is not enrolled, an enrolment signed by the owner key in force
                   (bound to that challenge: good once)
    remove         (a) the server removes the device (owner-signed): its credentials end and its
                   key never logs in again; (b) a passphrase change (the same passphrase again, or
                   a new one): new owner keys, fresh scope KEKs for all that is written afterwards,
                   which the removed device cannot derive, and the old owner key enrols nothing

What a removed device keeps: what it already held (the memories synced to it, and the keys of
what was written before), as ApertoMemory says; nothing written afterwards reaches it.
"""
from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ownmem.crypto import CryptoProvider, random_bytes, run_sync
from ownmem.errors import NotFound
from ownmem.vault.store import Store
from ownmem.wire import signed
from ownmem.wire.devices import LABEL_LEN, DeviceInfo, device_id

if TYPE_CHECKING:
    from ownmem.vault.rekey import Rekeyed
    from ownmem.vault.sync import Syncer

DEVICE_KEY, DEVICE_LABEL = "device_key", "device_label"
# when this device last took new owner keys (a passphrase change made or taken here, which is
# also how a device removal ends): agent credentials and sessions issued before it are revoked
# (agent/keychange.py).  A device that took the change late counts from then: conservative.
KEYS_CHANGED_AT = "keys_changed_at"

# Said wherever a device is removed (CLI, PWA, README), because it is what people would not guess.
WHAT_IT_KEEPS = (
    "A removed device can no longer sync, log in or be added back. It keeps what it already held: the memories "
    "synced to it before, and the keys to read them. Nothing written from now on reaches it. If someone may "
    "know your passphrase too, also change the passphrase.")


@dataclass(frozen=True, slots=True)
class DeviceAuth:
    """This device's key, its label, and the owner key in force (to enrol it)."""

    seed: bytes
    public: bytes
    label: str
    owner_seed: bytes

    @property
    def device_id(self) -> bytes:
        return device_id(self.public)

    async def login_part(self, p: CryptoProvider, name: str, challenge: bytes) -> dict[str, Any]:
        """The ``device`` of a session request (wire.devices.DeviceLogin with its enrolment)."""
        sig = await p.ed25519_sign(self.seed, signed.device_auth_message(name, challenge, self.public))
        owner = await p.ed25519_sign(self.owner_seed, signed.device_enrol_message(name, challenge, self.public,
                                                                                 self.label))
        return {"device_pub": self.public.hex(), "signature": sig.hex(),
                "enrol": {"label": self.label, "owner_sig": owner.hex()}}


@dataclass(frozen=True, slots=True)
class DeviceRow:
    """One enrolled device as the person sees it."""

    device_id: bytes
    label: str
    added_at: int
    last_sync: int
    this_device: bool


def default_label() -> str:
    return clean_label(f"ownmem CLI on {platform.node() or 'this computer'}")


def clean_label(text: str) -> str:
    """A label the server takes: printable, at most 64 characters, never empty."""
    got = "".join(ch for ch in text if ch.isprintable()).strip()[:LABEL_LEN].strip()
    return got or "a device"


def device_auth(store: Store, owner_seed: bytes, p: CryptoProvider, *, seed: bytes | None = None,
                label: str | None = None) -> DeviceAuth:
    """This device's key (made and kept on first use; ``seed``/``label``: a new device's, kept by
    the caller with the rest of its store)."""
    if seed is None:
        seed = store.sync_get(DEVICE_KEY)
        if seed is None:
            seed = random_bytes(32)
            with store.transaction():
                store.sync_set(DEVICE_KEY, seed)
    if label is None:
        raw = store.sync_get(DEVICE_LABEL)
        label = raw.decode() if raw else default_label()
    return DeviceAuth(seed, run_sync(p.ed25519_public(seed)), clean_label(label), owner_seed)


def note_keys_changed(store: Store, now: int) -> None:
    """Inside the caller's transaction (the one that stores the new keys)."""
    store.sync_set(KEYS_CHANGED_AT, str(int(now)).encode())


def keys_changed_at(store: Store) -> int:
    """UNIX seconds of this device's last key change; 0 if none."""
    raw = store.sync_get(KEYS_CHANGED_AT)
    try:
        return int(raw.decode()) if raw else 0
    except ValueError:
        return 0


def set_label(store: Store, label: str) -> None:
    with store.transaction():
        store.sync_set(DEVICE_LABEL, clean_label(label).encode())


def this_device_id(s: Syncer) -> bytes:
    return device_auth(s.store, s.v.identity.sign.seed, s.v.crypto).device_id


def rows(listed: tuple[DeviceInfo, ...], mine: bytes) -> list[DeviceRow]:
    return [DeviceRow(d.device_id, d.label, d.added_at, d.last_sync, d.device_id == mine) for d in listed]


def list_devices(s: Syncer) -> list[DeviceRow]:
    """The vault's enrolled devices (this one enrols itself by logging in)."""
    return rows(s._call(s.remote.devices), this_device_id(s))    # noqa: SLF001 (this package's own Syncer)


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
    from ownmem.vault.rekey_sync import change_passphrase
    sig = run_sync(s.v.crypto.ed25519_sign(s.v.identity.sign.seed, signed.device_remove_message(s.remote.name,
                                                                                                device)))
    s._call(lambda: s.remote.remove_device(device, sig))          # noqa: SLF001
    return change_passphrase(s, passphrase)
