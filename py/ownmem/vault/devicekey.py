"""This device's own key (ApertoMemory "Device and Key Revocation"; docs/decisions.md "15.7"):
a random Ed25519 seed made on this device and kept in its store (sync state ``device_key``),
never derived from the passphrase or the vault root, which every device holds, so a removed
device cannot make another device's key.  At each login it signs the server's challenge, and
the owner key in force signs its enrolment (bound to that challenge: good once).  The use cases
(list, remove) are vault/devices.py.

A device's name ("ownmem CLI on alice-laptop", "Firefox on Android") says who owns the vault and
what they use; the server keeps it only sealed: AES-256-GCM under the vault root's
``ownmem/v1/device-label`` key, bound to the device's id, so the server can neither read a name
nor move one to another device, and every device of the vault reads them all.
"""
from __future__ import annotations

import base64
import binascii
import platform
import sys
from dataclasses import dataclass
from typing import Any

from ownmem.crypto import CryptoProvider, random_bytes, run_sync
from ownmem.errors import OwnmemError
from ownmem.vault.store import Store
from ownmem.wire import signed
from ownmem.wire.devices import LABEL_LEN, device_id

SEALED_PREFIX = "s1."
NONCE_LEN = 12

DEVICE_KEY, DEVICE_LABEL = "device_key", "device_label"
# when this device last took new owner keys (a passphrase change made or taken here, which is
# also how a device removal ends): agent credentials and sessions issued before it are revoked
# (agent/keychange.py).  A device that took the change late counts from then: conservative.
KEYS_CHANGED_AT = "keys_changed_at"


@dataclass(frozen=True, slots=True)
class DeviceAuth:
    """This device's key, its label, and the owner key in force (to enrol it)."""

    seed: bytes
    public: bytes
    label: str
    owner_seed: bytes
    label_key: bytes          # the vault's Purpose.DEVICE_LABEL key: the label goes out sealed

    @property
    def device_id(self) -> bytes:
        return device_id(self.public)

    async def login_part(self, p: CryptoProvider, name: str, challenge: bytes) -> dict[str, Any]:
        """The ``device`` of a session request (wire.devices.DeviceLogin with its enrolment)."""
        sig = await p.ed25519_sign(self.seed, signed.device_auth_message(name, challenge, self.public))
        label = await seal_label(p, self.label_key, self.device_id, self.label)
        owner = await p.ed25519_sign(self.owner_seed, signed.device_enrol_message(name, challenge, self.public,
                                                                                 label))
        return {"device_pub": self.public.hex(), "signature": sig.hex(),
                "enrol": {"label": label, "owner_sig": owner.hex()}}


async def seal_label(p: CryptoProvider, key: bytes, device: bytes, label: str) -> str:
    """``label`` as the server keeps it: "s1." and base64url(nonce || AES-GCM(label), the
    device's id as associated data)."""
    nonce = random_bytes(NONCE_LEN)
    sealed = await p.aes_gcm_encrypt(key, nonce, clean_label(label).encode(), device)
    return SEALED_PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")


async def open_label(p: CryptoProvider, key: bytes, device: bytes, kept: str) -> str:
    """The name of a device as the server lists it: a sealed one opened; one the key does not
    open (the server's, or another device's moved here) or one in clear (which no ownmem sends
    since names are sealed) is never shown as if the person had given it."""
    if not kept.startswith(SEALED_PREFIX):
        return f"a device whose name the server shows unsealed: {clean_label(kept)!r}"
    try:
        body = kept[len(SEALED_PREFIX):]
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        return clean_label((await p.aes_gcm_decrypt(key, raw[:NONCE_LEN], raw[NONCE_LEN:], device)).decode())
    except (binascii.Error, ValueError, OwnmemError):
        return "a device whose name does not open with this vault's key"


def default_label() -> str:
    if sys.platform == "emscripten":      # the web app names itself from its browser (its link and login)
        return "ownmem in a browser"
    return clean_label(f"ownmem CLI on {platform.node() or 'this computer'}")


def clean_label(text: str) -> str:
    """A label the server takes: printable, at most 64 characters, never empty."""
    got = "".join(ch for ch in text if ch.isprintable()).strip()[:LABEL_LEN].strip()
    return got or "a device"


def device_auth(store: Store, owner_seed: bytes, label_key: bytes, p: CryptoProvider, *,
                seed: bytes | None = None, label: str | None = None) -> DeviceAuth:
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
    return DeviceAuth(seed, run_sync(p.ed25519_public(seed)), clean_label(label), owner_seed, label_key)


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


