"""A vault at rest and the way in: the folder (``Vault``, locked), creating a vault's identity
and first scope from a passphrase, and unlocking a store with one (Argon2id once; the keys
are then held by the ``UnlockedVault`` until it locks)."""
from __future__ import annotations

from pathlib import Path

from ownmem.aperto import keys as aperto_keys
from ownmem.aperto.container import ScopeEntry
from ownmem.crypto import CryptoProvider, provider, random_bytes, run_sync
from ownmem.errors import NotFound, OwnmemError, VaultError, WrongPassphrase
from ownmem.vault import rekey, slots
from ownmem.vault.store import PublicIdentity, Store
from ownmem.vault.vault import DEFAULT_SCOPE, UnlockedVault


class Vault:
    """A vault folder, locked."""

    def __init__(self, folder: str | Path, *, crypto: CryptoProvider | None = None) -> None:
        self.folder = Path(folder).expanduser()
        self.crypto = crypto or provider()

    def exists(self) -> bool:
        if not (self.folder / Store.FILENAME).exists():
            return False
        store = self._store()
        try:
            return store.identity() is not None
        finally:
            store.close()

    def _store(self) -> Store:
        return Store(self.folder)

    @classmethod
    def create(cls, folder: str | Path, passphrase: str, *, crypto: CryptoProvider | None = None) -> UnlockedVault:
        v = cls(folder, crypto=crypto)
        if v.exists():
            raise VaultError(f"a vault already exists at {v.folder}")
        if not passphrase:
            raise VaultError("the passphrase must not be empty")
        return create_in(v._store(), passphrase, v.crypto)

    def unlock(self, passphrase: str) -> UnlockedVault:
        if not self.exists():
            raise VaultError(f"no vault at {self.folder} (create one with `ownmem init`)")
        store = self._store()
        try:
            return unlock_store(store, passphrase, self.crypto)
        except OwnmemError:
            store.close()
            raise


def create_in(store: Store, passphrase: str, p: CryptoProvider, *, salt: bytes | None = None,
              master: bytes | None = None) -> UnlockedVault:
    """A new identity and its "default" scope in an empty store.  ``salt``/``master`` let a
    caller that already ran Argon2id for that salt (the browser, in parallel) pass it in."""
    return run_sync(create_in_async(store, passphrase, p, salt=salt, master=master))


# The ``*_async`` functions and methods are the vault's steps that wait for crypto; the plain
# names drive them with ``run_sync`` (no event loop: CPython's provider never suspends).  The
# browser worker without JSPI awaits them, so its provider can await WebCrypto (docs/web.md).
async def create_in_async(store: Store, passphrase: str, p: CryptoProvider, *, salt: bytes | None = None,
                          master: bytes | None = None) -> UnlockedVault:
    salt = salt if salt is not None else random_bytes(aperto_keys.SALT_LEN)
    if master is None:
        master = await aperto_keys.master_from_passphrase(p, passphrase, salt)
    ident = await aperto_keys.identity_from_master(p, master)
    kek, scope_id = aperto_keys.new_key(), random_bytes(16)
    wrapped = await aperto_keys.wrap_kek(p, kek, ident.ka_pub, scope_id)
    with store.transaction():
        store.set_identity(PublicIdentity(salt, ident.sign_pub, ident.ka_pub))
        store.add_scope(ScopeEntry(DEFAULT_SCOPE, scope_id, wrapped))
    return UnlockedVault(store, ident, p)


def unlock_store(store: Store, passphrase: str, p: CryptoProvider, *, master: bytes | None = None) -> UnlockedVault:
    """Argon2id once, then the keys are held by the returned vault until ``lock()``."""
    return run_sync(unlock_store_async(store, passphrase, p, master=master))


async def unlock_store_async(store: Store, passphrase: str, p: CryptoProvider, *,
                             master: bytes | None = None) -> UnlockedVault:
    pub = store.identity()
    if pub is None:
        raise VaultError("there is no vault here yet")
    if master is None:
        master = await aperto_keys.master_from_passphrase(p, passphrase, pub.salt)
    return await _unlock_with_master(store, pub, master, p, WrongPassphrase())


async def _unlock_with_master(store: Store, pub: PublicIdentity, master: bytes, p: CryptoProvider,
                              wrong: WrongPassphrase) -> UnlockedVault:
    ident = await aperto_keys.identity_from_master(p, master)
    if ident.sign_pub != pub.sign_pub or ident.ka_pub != pub.ka_pub:
        raise wrong
    wrap = store.root_wrap()
    if wrap is not None:           # changed passphrase: the vault root is kept wrapped (vault/rekey.py)
        ident = await rekey.identity_for(p, master, wrap)
    return UnlockedVault(store, ident, p)


def unlock_with_slot(store: Store, p: CryptoProvider, slot_id: bytes, secret: bytes) -> UnlockedVault:
    """Unlock with an unlock slot's secret (a recovery key, a passkey's PRF output) instead of
    the passphrase: no Argon2id, the slot opens the master (vault/slots.py)."""
    return run_sync(unlock_with_slot_async(store, p, slot_id, secret))


async def unlock_with_slot_async(store: Store, p: CryptoProvider, slot_id: bytes, secret: bytes) -> UnlockedVault:
    pub = store.identity()
    if pub is None:
        raise VaultError("there is no vault here yet")
    slot = next((s for s in store.unlock_slots() if s.slot_id == slot_id), None)
    if slot is None:
        raise NotFound("this vault has no such unlock slot (it was removed)")
    master = await slots.open_slot(p, slot, secret)
    # a slot that opens but to another master: one from before a passphrase change this device
    # took from another (or planted): it unlocks nothing
    return await _unlock_with_master(store, pub, master, p, WrongPassphrase(
        "this unlock slot opens an older key of the vault: unlock with the passphrase"))


async def check_passphrase_async(store: Store, passphrase: str, p: CryptoProvider) -> None:
    """WrongPassphrase unless ``passphrase`` derives this store's owner keys (one Argon2id): the
    passphrase typed again before what an unlocked device left unattended must not allow, such
    as adding a passkey (web/js/views/passkeys.js)."""
    pub = store.identity()
    if pub is None:
        raise VaultError("there is no vault here yet")
    master = await aperto_keys.master_from_passphrase(p, passphrase, pub.salt)
    ident = await aperto_keys.identity_from_master(p, master)
    if ident.sign_pub != pub.sign_pub or ident.ka_pub != pub.ka_pub:
        raise WrongPassphrase()
