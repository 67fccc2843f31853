"""``UnlockedVault.lock()`` drops every secret, on every path that made one, and the PWA's
worker locks through it.

The check is by introspection, not by a list of known names: after ``lock()`` every
attribute of the vault except the declared non-secret ones must be empty, and none of the
secrets it held is reachable from it any more (its provider's caches included).  A secret
attribute added later without being dropped in ``lock()`` fails here."""
from __future__ import annotations

import sqlite3
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ownmem.crypto import run_sync
from ownmem.crypto.cpython import CPythonProvider
from ownmem.errors import StoreError, VaultError
from ownmem.saihm.receipt import make_receipt
from ownmem.vault import UnlockedVault, Vault
from ownmem.vault.unlock import unlock_store
from ownmem.web.api import CACHE_INFO, App, DeviceCache
from tests.vault.vaultkit import PASSPHRASE

# What a locked vault keeps, and why it is not a secret.
NOT_SECRET = {
    "_store": "sealed objects, wrapped DEKs and public metadata only",
    "crypto": "the crypto provider: its caches are searched for the secrets below",
}


def _attributes(o: object) -> dict[str, Any]:
    """Every instance attribute, in __dict__ or in any class's __slots__."""
    names = set(getattr(o, "__dict__", ()))
    for cls in type(o).__mro__:
        slots = getattr(cls, "__slots__", ())
        names |= {slots} if isinstance(slots, str) else set(slots)
    return {n: getattr(o, n) for n in names if n not in ("__dict__", "__weakref__") and hasattr(o, n)}


def _reachable_bytes(root: object) -> set[bytes]:
    """Every byte string reachable from ``root`` through attributes and containers."""
    seen: set[int] = set()
    found: set[bytes] = set()
    stack: list[object] = [root]
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, (type, types.ModuleType, types.FunctionType, types.MethodType,
                                           sqlite3.Connection, str, int, float, bool)) or o is None:
            continue
        seen.add(id(o))
        if isinstance(o, (bytes, bytearray, memoryview)):
            found.add(bytes(o))
        elif isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
        else:
            stack.extend(_attributes(o).values())
    return found


def _left_after_lock(v: UnlockedVault) -> dict[str, Any]:
    """The attributes that still hold something although they are not declared non-secret."""
    return {n: val for n, val in _attributes(v).items()
            if n not in NOT_SECRET and not (val is None or (isinstance(val, (dict, list, set, tuple)) and not val))}


def _touch_every_secret(v: UnlockedVault) -> set[bytes]:
    """Use every path that derives or caches a secret; -> the secrets now held."""
    v.add("a memory to sign and seal")                                       # owner key, scope KEK
    v.add_scope("work")
    v.add("in another scope", scope="work")
    assert len(v.open_all().entries) == 2                                    # every KEK unwrapped
    h = v.holder()                                                           # ML-DSA-65 holder seed
    run_sync(make_receipt(v.crypto, xi=h.xi, holder_id=h.holder_id, operation="KEY", subject_id=h.holder_id,
                          timestamp=1700000000, detail=h.public))           # ... cached by the provider
    sync = v.sync_key()                                                      # device-authentication key
    run_sync(v.crypto.ed25519_sign(sync.seed, b"a server challenge"))
    cache_key = v.purpose_key(CACHE_INFO)                                    # the PWA's device-cache key
    ident = v.identity
    return {ident.master, ident.sign.seed, ident.ka_seed, h.xi, sync.seed, cache_key, *v._keks.values()}


@pytest.fixture
def unlocked(tmp_path: Path) -> Iterator[tuple[UnlockedVault, set[bytes]]]:
    v = Vault.create(tmp_path / "v", PASSPHRASE, crypto=CPythonProvider())
    secrets = _touch_every_secret(v)
    yield v, secrets
    v.close()


def test_lock_drops_every_secret(unlocked: tuple[UnlockedVault, set[bytes]]) -> None:
    v, secrets = unlocked
    assert len(secrets) == 8
    # the search does find them while unlocked, so its silence after lock() means something
    assert secrets <= _reachable_bytes(v)
    assert set(_left_after_lock(v)) == {"ident", "_keks", "_kek_wraps", "_holder", "_sync", "_purpose"}
    v.lock()
    assert _left_after_lock(v) == {}, "lock() left a secret-bearing attribute set"
    assert not secrets & _reachable_bytes(v), "a secret is still reachable from the locked vault"
    for call in (lambda: v.identity, lambda: v.holder(), lambda: v.sync_key(), lambda: v.purpose_key(CACHE_INFO),
                 lambda: v.kek(v._store.scopes()["work"]), lambda: v.add("after lock")):
        with pytest.raises(VaultError, match="locked"):
            call()


def test_lock_keeps_the_store_open_and_close_closes_it(unlocked: tuple[UnlockedVault, set[bytes]]) -> None:
    v, _ = unlocked
    v.lock()
    u = unlock_store(v._store, PASSPHRASE, v.crypto)        # the PWA unlocks again on the same store
    assert len(u.open_all().entries) == 2
    u.close()
    assert _left_after_lock(u) == {}
    with pytest.raises(VaultError, match="locked"):
        u.store  # noqa: B018 - reading the property is the test: it must raise once locked
    with pytest.raises(StoreError, match="closed"):     # the store's own error, not sqlite3's
        u._store.identity()


def _held(app: App) -> tuple[object, object, object]:
    """What the worker holds, read through a call: mypy would keep the attributes narrowed to
    what the test assigned before op_lock."""
    return app.vault, app.syncer, app.cache.entries


def test_the_worker_locks_through_the_vault(
unlocked: tuple[UnlockedVault, set[bytes]]) -> None:
    """web/api.py ``op_lock``: the vault's lock (every secret, the provider's cached keys), the
    device cache of verified plaintext and the syncer (its session token) are all dropped."""
    v, secrets = unlocked
    app = App.__new__(App)          # without __init__: its IndexedDB store exists only in a browser
    app.vault, app.syncer = v, object()
    app.cache = DeviceCache(entries={bytes(16): (bytes(16), b"verified plaintext", bytes(32))})
    assert app.op_lock() == {}
    assert _held(app) == (None, None, {})
    assert _left_after_lock(v) == {} and not secrets & _reachable_bytes(v)
    assert len(unlock_store(v._store, PASSPHRASE, v.crypto).open_all().entries) == 2
