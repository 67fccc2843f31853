"""The recovery kit and the sync server (vault/recovery.py has the kit; docs/decisions.md "Key
Rotation"):

    recover_new_device   a device with the vault name and the kit's words only: the server's
                         public kit record, opened by the words and proven by its root check,
                         gives the master; then the same adoption as a passphrase login (the
                         keys must be the lookup's, the metadata signed by them)
    use_kit              after an unlock with the words (here or on a new device): the forced
                         new passphrase (on the server too when linked), then a new kit in place
                         of the used one, published in the owner-signed metadata
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from ownmem.crypto import CryptoProvider, run_sync
from ownmem.errors import SyncError, VaultError
from ownmem.vault import recovery
from ownmem.vault.rekey_sync import change_passphrase
from ownmem.vault.remote import Remote
from ownmem.vault.store import Store
from ownmem.vault.sync import Syncer, SyncReport, adopt_from_server_async
from ownmem.vault.unlock import Vault
from ownmem.vault.vault import UnlockedVault


async def recover_new_device_async(open_store: Callable[[], Store] | Store, remote: Remote, words: str,
                                   p: CryptoProvider) -> Syncer:
    """BadRecoveryWords before any request; WrongPassphrase if the server's kit is not one these
    words open for this vault (a decoy, another vault's, one a server made); nothing is written
    locally until the keys are proven as a passphrase login proves them."""
    recovery.from_words(words)
    info = remote.lookup()
    if info is None:
        raise SyncError(f"no vault named {remote.name!r} on {remote.base}")
    master = await recovery.open_remote_kit(p, words, remote.recovery_record(), info.root_wrap)
    return await adopt_from_server_async(open_store, remote, "", p, master=master)


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
    if syncer is not None:
        change_passphrase(syncer, new_passphrase)
    else:
        v.change_passphrase(new_passphrase)
    words, _ = run_sync(recovery.create_kit_async(v))
    if syncer is not None:
        syncer.sync_metadata(SyncReport())
    return words
