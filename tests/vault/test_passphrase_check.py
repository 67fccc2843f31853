"""The passphrase typed again before a passkey is added (vault/unlock.py check_passphrase_async,
web op ``passphrase_check``): from the side of someone at an unlocked, unattended device, who
does not know the passphrase and wants a passkey of their own to open the vault later."""
from __future__ import annotations

from pathlib import Path

import pytest

from ownmem.crypto import provider, run_sync
from ownmem.errors import WrongPassphrase
from ownmem.vault import Vault
from ownmem.vault.unlock import check_passphrase_async

PASS = "correct horse battery staple 42"
NEW = "a brand new passphrase for the vault 7"
P = provider()


def test_a_guess_at_an_unlocked_device_is_refused_and_the_passphrase_accepted(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", PASS)
    with pytest.raises(WrongPassphrase):
        run_sync(check_passphrase_async(v.store, "not the passphrase", P))
    with pytest.raises(WrongPassphrase):
        run_sync(check_passphrase_async(v.store, "", P))
    run_sync(check_passphrase_async(v.store, PASS, P))


def test_after_a_change_only_the_new_passphrase_passes(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", PASS)
    run_sync(v.change_passphrase_async(NEW))
    with pytest.raises(WrongPassphrase):
        run_sync(check_passphrase_async(v.store, PASS, P))
    run_sync(check_passphrase_async(v.store, NEW, P))
