"""The vault operations the web worker calls (docs/web.md "Worker operations").

``handle(op, args)`` is the one entry point: the worker calls it with
``callPromising`` so that the synchronous vault code below can wait for WebCrypto
and IndexedDB through ``ownmem.crypto.run_sync`` (JSPI).  Results are plain dicts
of JSON-able values and bytes; errors are ``{"code", "message"}`` of an OwnmemError,
never a secret.  The same UnlockedVault, import and sync code as the CLI runs here;
only the store (IndexedDB), the crypto provider (WebCrypto) and HTTP (fetch) differ.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from ..aperto.container import parse_container
from ..aperto.model import MemType
from ..crypto import cbor, provider, random_bytes, run_sync, set_provider
from ..errors import AuthenticationFailed, ImportRefused, OwnmemError, VaultError
from ..vault.transfer import export_bytes, import_bytes
from ..vault.vault import DEFAULT_SCOPE, UnlockedVault, create_in, unlock_store
from .store import IdbStore

CACHE_INFO = b"ownmem/v1/device-cache"
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


def _digest(b: bytes) -> bytes:
    from ..crypto import sha256

    return sha256(b)[:16]


class App:
    def __init__(self, js: Any) -> None:
        self.js = js
        self.store = IdbStore(js)
        self.loaded = self.store.load()
        self.vault: UnlockedVault | None = None
        self.cache = DeviceCache()
        self.syncer: Any = None
        self.last_sync: int | None = None

    # ------------------------------------------------------------ helpers
    @property
    def v(self) -> UnlockedVault:
        if self.vault is None:
            raise VaultError("the vault is locked")
        return self.vault

    def _cache_key(self) -> bytes:
        return self.v.purpose_key(CACHE_INFO)

    def _load_cache(self) -> None:
        from pyodide.ffi import jsnull

        blob = run_sync(self.js.idb_get("cache", CACHE_KEY))
        self.cache = DeviceCache()
        if blob is None or blob is jsnull:   # no record yet: JS null arrives as jsnull, not None
            return
        raw = bytes(blob.to_bytes())
        try:
            plain = run_sync(self.v.p.aes_gcm_decrypt(self._cache_key(), raw[:12], raw[12:], CACHE_KEY.encode()))
            m = cbor.decode(plain)
            self.cache.entries = {k: (v[0], v[1], v[2]) for k, v in m.items()}
        except (OwnmemError, KeyError, TypeError, IndexError):
            self.cache = DeviceCache(dirty=True)   # unreadable: rebuilt by the next listing

    def _save_cache(self) -> None:
        if not self.cache.dirty:
            return
        live = self.store.object_ids()
        plain = cbor.encode({k: list(v) for k, v in self.cache.entries.items() if k in live})
        nonce = random_bytes(12)
        ct = run_sync(self.v.p.aes_gcm_encrypt(self._cache_key(), nonce, plain, CACHE_KEY.encode()))
        from pyodide.ffi import to_js

        run_sync(self.js.idb_put("cache", CACHE_KEY, to_js(nonce + ct)))
        self.cache.dirty = False

    def _linked(self) -> tuple[str, str] | None:
        from ..vault.sync import Syncer

        return Syncer.linked(self.store)

    # ------------------------------------------------------------ operations
    def op_boot(self) -> dict[str, Any]:
        ident = self.store.identity()
        linked = self._linked()
        return {"vault": None if ident is None else {
                    "count": self.store.count(), "server": linked[0] if linked else None,
                    "name": linked[1] if linked else None, "salt": ident.salt.hex()},
                "provider": run_sync(self.js.features()).to_py() if hasattr(self.js, "features") else {}}

    def op_create(self, passphrase: str, master: Any = None, salt: Any = None) -> dict[str, Any]:
        if self.store.identity() is not None:
            raise VaultError("this browser already holds a vault")
        if not passphrase or len(passphrase) < 1:
            raise VaultError("the passphrase must not be empty")
        self.vault = create_in(self.store, passphrase, provider(), salt=bytes(salt) if salt else None,
                               master=bytes(master) if master else None)
        return {"key_id": self.v.identity.key_id.hex()}

    def op_unlock(self, passphrase: str, master: Any = None) -> dict[str, Any]:
        self.vault = unlock_store(self.store, passphrase, provider(), master=bytes(master) if master else None)
        self._load_cache()
        return {"count": self.store.count()}

    def op_lock(self) -> dict[str, Any]:
        if self.vault is not None:
            self.vault.lock()       # every key, and the provider's cached ones; the store stays for the next unlock
        self.vault = None
        self.cache = DeviceCache()
        self.syncer = None
        return {}

    def op_list(self, include_unverified: bool = False) -> dict[str, Any]:
        listing = self.v.open_all(allow_unverified=include_unverified, cache=self.cache)
        self._save_cache()
        heads = sorted(listing.heads(), key=lambda e: (-(e.opened.created or 0), e.id))
        return {"entries": [e.to_json() for e in heads], "refused": len(listing.refused),
                "conflicts": [[e.id.hex() for e in g] for g in listing.conflicts()],
                "scopes": sorted(self.v.scopes())}

    def op_add(self, content: str, tags: list[str] | None = None, type: str = "semantic",
               confidence: float = 0.8, scope: str = DEFAULT_SCOPE) -> dict[str, Any]:
        oid = self.v.add(content, tags=tags or [], mem_type=MemType.parse(type), confidence=float(confidence),
                         scope=scope)
        # The new memory, opened from what was stored (and so verified), for the page to show
        # at once instead of listing the whole vault again; the device cache learns it too.
        row = self.store.get_object(oid)
        if row is None:
            raise VaultError("the new memory was not stored")
        keyring = self.v.keyring()
        entry = self.v.open_stored(row, {s.scope_id: s for s in self.v.scopes().values()}, keyring)
        UnlockedVault._remember(self.cache, row, entry.opened, keyring)  # noqa: SLF001
        return {"id": oid.hex(), "entry": entry.to_json()}

    def op_edit(self, id: str, content: str | None = None, tags: list[str] | None = None,
                type: str | None = None, confidence: float | None = None) -> dict[str, Any]:
        new = self.v.edit(id, content=content, tags=tags, mem_type=MemType.parse(type) if type else None,
                          confidence=float(confidence) if confidence is not None else None)
        return {"id": new.hex()}

    def op_resolve(self, id: str) -> dict[str, Any]:
        return {"id": self.v.resolve_conflict(id).hex()}

    def op_forget(self, id: str) -> dict[str, Any]:
        return {"erased": len(self.v.forget(id))}

    def op_import(self, data: Any, accept_container_keys: bool = False, passphrase: str = "") -> dict[str, Any]:
        raw = bytes(data)
        ident = self.vault.identity if self.vault is not None else None
        if ident is not None and parse_container(raw).meta.sign_pub != ident.sign_pub:
            # The page imports into an unlocked vault without a passphrase: refuse a file of
            # another identity as import_bytes does, not with Argon2id failing on "".
            raise ImportRefused("this file belongs to a different identity; ownmem imports your own memory only")
        report, uv = import_bytes(lambda: self.store, raw, passphrase, accept_container_keys=accept_container_keys,
                                  crypto=provider(), ident=ident)
        if self.vault is None:
            self.vault = uv
        return {"imported": report.imported, "imported_ids": report.imported_ids, "skipped": report.skipped, "refused": report.refused,
                "scopes_added": report.scopes_added, "scopes_refused": report.scopes_refused,
                "keys_added": report.keys_added, "keys_held_back": report.keys_held_back,
                "identity_adopted": report.identity_adopted, "metadata_signed": report.metadata_signed}

    def op_export(self) -> dict[str, Any]:
        data, n = export_bytes(self.v)
        return {"data": data, "count": n}

    # ------------------------------------------------------------ sync
    def _syncer(self) -> Any:
        from ..vault.sync import Syncer
        from .remote import FetchRemote

        if self.syncer is None:
            linked = self._linked()
            if linked is None:
                raise VaultError("this vault is not linked to a server yet")
            self.syncer = Syncer(self.v, FetchRemote(linked[0], linked[1]))
        return self.syncer

    def op_link(self, server: str, name: str) -> dict[str, Any]:
        from ..vault.sync import Syncer, link
        from .remote import FetchRemote

        remote = FetchRemote(server, name)
        link(self.v, server, name, remote=remote)
        self.syncer = Syncer(self.v, remote)
        return {}

    def op_login(self, server: str, name: str, passphrase: str, master: Any = None) -> dict[str, Any]:
        from ..vault.sync import adopt_from_server
        from .remote import FetchRemote

        if self.store.identity() is not None:
            raise VaultError("this browser already holds a vault")
        self.syncer = adopt_from_server(self.store, FetchRemote(server, name), passphrase, provider(),
                                        master=bytes(master) if master else None)
        self.vault = self.syncer.v
        return self.op_sync()

    def op_sync(self) -> dict[str, Any]:
        r = self._syncer().sync_once()
        self.last_sync = int(time.time())
        return {"pushed": r.pushed, "pulled": r.pulled, "erased_remote": r.erased_remote,
                "erased_here": r.erased_here, "pending": self.store.unpushed_count(), "refusals": list(r.refusals)}

    def op_token(self) -> dict[str, Any]:
        s = self._syncer()
        s.ensure_login()
        return {"token": s.remote.token, "url": s.remote._url("/events")}  # noqa: SLF001

    def op_status(self) -> dict[str, Any]:
        linked = self._linked()
        return {"pending": self.store.unpushed_count() + len(self.store.erase_outbox()),
                "last_sync": self.last_sync, "server": linked[0] if linked else None,
                "name": linked[1] if linked else None, "unlocked": self.vault is not None,
                "count": self.store.count()}

    def op_selftest(self, vectors: str = "") -> dict[str, Any]:
        from .selftest import run

        return run(vectors)


_app: App | None = None


def handle(op: str, args: Any) -> Any:
    """Entry point for the worker: one operation, one JSON string (or JS object, when the result
    holds bytes) back."""
    global _app
    from pyodide.ffi import to_js
    import js

    try:
        if _app is None:
            import ownmem_js  # registered by the worker

            from .provider import BrowserProvider

            set_provider(BrowserProvider())
            _app = App(ownmem_js)
        kwargs = args.to_py() if args is not None and hasattr(args, "to_py") else (args or {})
        fn = getattr(_app, "op_" + op, None)
        if fn is None:
            raise VaultError(f"unknown operation {op!r}")
        result = fn(**kwargs)
        _app.store.flush()
        out: dict[str, Any] = {"ok": True, "result": result}
    except AuthenticationFailed as e:
        out = {"ok": False, "error": {"code": e.code, "message": str(e)}}
    except OwnmemError as e:
        out = {"ok": False, "error": {"code": e.code, "message": str(e)}}
    except (ValueError, TypeError) as e:
        out = {"ok": False, "error": {"code": "bad_request", "message": str(e).splitlines()[0][:200]}}
    # A result without bytes crosses as one JSON string (the worker parses it): converting a
    # list of 10,000 entries value by value through the FFI costs several times more.  ASCII
    # (\u escapes): with any non-ASCII text in it, ensure_ascii=False is ~8x slower here.
    try:
        return json.dumps(out, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return to_js(out, dict_converter=js.Object.fromEntries)
