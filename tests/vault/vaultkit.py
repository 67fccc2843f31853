"""Helpers for the vault tests: a fresh vault per test and a snapshot of what a store holds.

A plain module, not a conftest: the fixtures are imported by name where they are used.

Every vault, unlock and import costs one Argon2id derivation (0.1-0.5 s), so tests
create only the vaults they need.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ownmem.aperto import keys as K
from ownmem.aperto.container import ScopeEntry
from ownmem.crypto import provider, run_sync
from ownmem.vault import UnlockedVault, Vault
from ownmem.vault.store import PublicIdentity, Store, StoredObject

PASSPHRASE = "owner passphrase: correct horse battery staple"
OTHER_PASSPHRASE = "someone else entirely"


@dataclass(frozen=True)
class StoreState:
    """Everything a vault folder holds, for "nothing was written" assertions."""

    identity: PublicIdentity | None
    scopes: dict[str, ScopeEntry]
    known_keys: dict[bytes, bytes]
    objects: tuple[StoredObject, ...]
    erased: frozenset[bytes]


def folder_of(v: UnlockedVault) -> Path:
    """The folder of a vault the tests made on disk (a store may also live in memory, folder None)."""
    folder = v.store.folder
    assert folder is not None, "the vault lives in memory"
    return folder


def store_state(folder: Path) -> StoreState | None:

    """None when no vault store exists at all (checked without creating one)."""
    if not (folder / Store.FILENAME).exists():
        return None
    s = Store(folder)
    try:
        return StoreState(identity=s.identity(), scopes=s.scopes(), known_keys=s.known_keys(),
                          objects=tuple(s.objects()), erased=frozenset(s.erased_ids()))
    finally:
        s.close()


def close(v: UnlockedVault) -> None:
    v.close()       # locked or not: the store is closed too


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[UnlockedVault]:
    v = Vault.create(tmp_path / "vault", PASSPHRASE)
    yield v
    close(v)


@pytest.fixture(scope="session")
def third_party() -> K.SigningKey:
    """An author key that is not the owner's (an agent, a friend)."""
    return run_sync(K.signing_key(provider(), bytes(range(32))))


@pytest.fixture(scope="session")
def stranger() -> K.SigningKey:
    """A key nobody accepted."""
    return run_sync(K.signing_key(provider(), bytes(range(100, 132))))
