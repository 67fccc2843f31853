"""``import_bytes`` step by step (ownmem.vault.transfer): the work each step does, counted.

The attacks on the import path are in test_import_attacks.py; here, that a container's
scope key is unwrapped once per import (it was twice), whether its scope is adopted
through the file's signature or through an owner-signed object opened with its KEK."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ownmem.aperto.container import SIGNATURE_KEY
from ownmem.crypto import cbor
from ownmem.crypto.cpython import CPythonProvider
from ownmem.vault import Vault
from ownmem.vault.store import Store
from ownmem.vault.transfer import export_bytes, import_bytes
from tests.vault.vaultkit import PASSPHRASE, close


class CountingProvider:
    """The CPython provider, counting X25519 agreements: one per scope KEK unwrapped."""

    name = "counting"

    def __init__(self) -> None:
        self.inner = CPythonProvider()
        self.agreements = 0

    async def x25519_shared(self, *args: Any) -> bytes:
        self.agreements += 1
        return await self.inner.x25519_shared(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize("signed", [True, False], ids=["signed file", "unsigned file"])
def test_each_scope_key_is_unwrapped_once(tmp_path: Path, signed: bool) -> None:
    v = Vault.create(tmp_path / "source", PASSPHRASE)
    for name in ("work", "health"):
        v.add_scope(name)
        v.add(f"a memory in {name}", scope=name)
    v.add("a memory in the default scope")
    data, _ = export_bytes(v)
    ident = v.identity
    close(v)
    if not signed:
        top = cbor.decode(data)
        del top[SIGNATURE_KEY]
        data = cbor.encode(top)

    cp = CountingProvider()
    report, uv = import_bytes(lambda: Store(tmp_path / "new device"), data, PASSPHRASE, crypto=cp, ident=ident)
    try:
        assert (report.metadata_signed, report.identity_adopted) == (signed, True)
        assert sorted(report.scopes_added) == ["default", "health", "work"] and not report.scopes_refused
        assert report.imported == 3 and not report.refused
        assert cp.agreements == 3, "a container's scope KEK was unwrapped more than once"
    finally:
        close(uv)
