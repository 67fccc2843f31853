"""The worker's device cache: verified plaintext for this device, sealed under the device-cache key
in IndexedDB (DESIGN.md "Browser specifics"), so an unlock lists the vault without opening every
object again.  Erasure reaches it at once (App._erase_from_cache)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ownmem.crypto import cbor, random_bytes, run_sync, sha256
from ownmem.errors import OwnmemError
from ownmem.purposes import Purpose
from ownmem.vault.vault import UnlockedVault

CACHE_INFO = Purpose.DEVICE_CACHE
CACHE_KEY = "verified-v1"


@dataclass
class DeviceCache:
    """Verified plaintext for this device, sealed under the device-cache key in IndexedDB."""

    entries: dict[bytes, tuple[bytes, bytes, bytes]] = field(default_factory=dict)  # oid -> (digest, payload, pub)
    dirty: bool = False

    def get(self, oid: bytes, sealed: bytes) -> tuple[bytes, bytes] | None:
        hit = self.entries.get(oid)
        if hit is None or hit[0] != _digest(sealed):
            return None
        return hit[1], hit[2]

    def put(self, oid: bytes, sealed: bytes, payload: bytes, signer_pub: bytes) -> None:
        self.entries[oid] = (_digest(sealed), payload, signer_pub)
        self.dirty = True

    def keep_only(self, live: set[bytes]) -> int:
        """Drop every entry whose object the store no longer holds (forgotten here, or erased
        through a sync) -> how many went."""
        gone = [oid for oid in self.entries if oid not in live]
        for oid in gone:
            del self.entries[oid]
        if gone:
            self.dirty = True
        return len(gone)


def _digest(b: bytes) -> bytes:
    return sha256(b)[:16]


async def load_cache(js: Any, v: UnlockedVault) -> DeviceCache:
    """The cache IndexedDB holds for this vault; an empty one when there is none, a dirty empty
    one (rebuilt by the next listing) when it does not open."""
    from pyodide.ffi import jsnull  # Pyodide-only module: the worker's JS null

    blob = run_sync(js.idb_get("cache", CACHE_KEY))
    if blob is None or blob is jsnull:   # no record yet: JS null arrives as jsnull, not None
        return DeviceCache()
    raw = bytes(blob.to_bytes())
    try:
        key = await v.purpose_key_async(CACHE_INFO)
        plain = await v.crypto.aes_gcm_decrypt(key, raw[:12], raw[12:], CACHE_KEY.encode())
        m = cbor.decode(plain)
        return DeviceCache({k: (x[0], x[1], x[2]) for k, x in m.items()})
    except (OwnmemError, KeyError, TypeError, IndexError):
        return DeviceCache(dirty=True)   # unreadable: rebuilt by the next listing


async def save_cache(js: Any, v: UnlockedVault, cache: DeviceCache, live: set[bytes]) -> None:
    """Seal the entries of objects still in the store (``live``) under a fresh nonce, replacing
    the record in one put; nothing when the cache has not changed."""
    if not cache.dirty:
        return
    plain = cbor.encode({k: list(x) for k, x in cache.entries.items() if k in live})
    nonce = random_bytes(12)
    key = await v.purpose_key_async(CACHE_INFO)
    ct = await v.crypto.aes_gcm_encrypt(key, nonce, plain, CACHE_KEY.encode())
    from pyodide.ffi import to_js  # Pyodide-only module: bytes to a JS Uint8Array

    run_sync(js.idb_put("cache", CACHE_KEY, to_js(nonce + ct)))
    cache.dirty = False
