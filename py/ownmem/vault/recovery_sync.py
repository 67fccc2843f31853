"""The recovery kit and the sync server (vault/recovery.py has the kit; docs/decisions.md "Key
Rotation"):

    recover_new_device   a device with the vault name and the kit's words only: the server's
                         public kit record, opened by the words and proven by its root check,
                         gives the master; then the same adoption as a passphrase login (the
                         keys must be the lookup's, the metadata signed by them)
    use_kit              after an unlock with the words (here or on a new device): the forced
                         new passphrase (on the server too when linked), then a new kit in place
                         of the used one, published in the owner-signed metadata (use_kit_async:
                         the same awaiting its crypto, for the browser without JSPI)
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ownmem.crypto import CryptoProvider, run_sync
from ownmem.errors import NoSuchVault, SyncError, VaultError, WrongPassphrase
from ownmem.vault import recovery
from ownmem.vault.rekey_sync import change_passphrase_async
from ownmem.vault.remote import Remote
from ownmem.vault.store import Store
from ownmem.vault.sync import Syncer, SyncReport, adopt_from_server_async
from ownmem.vault.unlock import Vault
from ownmem.vault.vault import UnlockedVault

if TYPE_CHECKING:      # httpx is the CLI's client: the browser (ownmem.web.api) imports this module without it
    import httpx


async def recover_new_device_async(open_store: Callable[[], Store] | Store, remote: Remote, words: str,
                                   p: CryptoProvider, *, label: str | None = None) -> Syncer:
    """BadRecoveryWords before any request; WrongPassphrase if the server's kit is not one these
    words open for this vault (a decoy, another vault's, one a server made), NoSuchVault when the
    server also says no vault holds the name; nothing is written locally until the keys are proven
    as a passphrase login proves them.  ``label``: this device's name in the device list."""
    recovery.from_words(words)
    info = remote.lookup()
    if info is None:
        raise SyncError(f"no vault named {remote.name!r} on {remote.base}")
    try:
        master = await recovery.open_remote_kit(p, words, remote.recovery_record(), info.root_wrap)
    except WrongPassphrase:
        # a name nobody holds answers a decoy kit: only the name check (paid from the address's
        # registration budget, as a passphrase login's) tells a mistyped name from wrong words
        if remote.name_taken() is False:
            raise NoSuchVault(f"no vault named {remote.name!r} on {remote.base}: check the name") from None
        raise
    return await adopt_from_server_async(open_store, remote, "", p, master=master, label=label)


def recover_new_device(folder: str | Path, server: str, name: str, words: str, *,
                       client: httpx.Client | None = None) -> Syncer:
    vault = Vault(folder)
    if vault.exists():
        raise VaultError(f"a vault already exists at {vault.folder}")
    remote = Remote(server, name, client=client)
    try:
        return run_sync(recover_new_device_async(lambda: Store(vault.folder), remote, words, vault.crypto))
    except BaseException:
        if client is None and remote.http is not None:
            remote.http.close()
        raise


def use_kit(v: UnlockedVault, new_passphrase: str, syncer: Syncer | None) -> list[str]:
    """The new passphrase (on the server too, through ``syncer``), then a new kit replacing the
    used one -> its words, to show once.  A crash between the two leaves the used kit working
    (re-wrapped to the new passphrase's keys): run ``recovery create`` again."""
    return run_sync(use_kit_async(v, new_passphrase, syncer))


async def use_kit_async(v: UnlockedVault, new_passphrase: str, syncer: Syncer | None) -> list[str]:
    """``use_kit`` awaiting its crypto (the browser: Argon2id of the new passphrase in hash-wasm
    where there is no JSPI); the HTTP exchanges stay synchronous."""
    if syncer is not None:
        await change_passphrase_async(syncer, new_passphrase)
    else:
        await v.change_passphrase_async(new_passphrase)
    words, _ = await recovery.create_kit_async(v)
    if syncer is not None:
        syncer.sync_metadata(SyncReport())
    return words
