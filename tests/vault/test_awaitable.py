"""The vault's awaitable twins (docs/decisions.md "Without JSPI the worker awaits the vault's
hot operations"): awaited by an event loop they really wait for the provider, batch by batch,
and answer what the synchronous methods answer; the synchronous methods never wait.

The provider here follows the browser provider's rule on CPython: awaited by an event loop
(``sync_depth() == 0``) each call first gives the loop a turn, as awaiting a WebCrypto promise
does; driven by ``run_sync`` it answers at once.  A synchronous step reached from an awaited
operation therefore still works, and an awaited one reached from ``run_sync`` would fail loudly
("operation suspended").
"""
from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

from ownmem.aperto.model import Trust
from ownmem.crypto import CryptoProvider, provider, sync_depth
from ownmem.vault.store import Store
from ownmem.vault.unlock import create_in, create_in_async, unlock_store_async
from ownmem.vault.vault import UnlockedVault

PASSPHRASE = "owner passphrase: correct horse battery staple"


class SuspendingProvider:
    def __init__(self, inner: CryptoProvider) -> None:
        self.inner = inner
        self.awaited: list[str] = []
        self.at_once: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            if sync_depth() == 0:
                self.awaited.append(name)
                await asyncio.sleep(0)      # a real suspension: run_sync could not drive this
            else:
                self.at_once.append(name)
            return await attr(*args, **kwargs)

        return call


def _vault(tmp_path: Path, n: int) -> tuple[UnlockedVault, SuspendingProvider]:
    p = SuspendingProvider(provider())
    v = create_in(Store(tmp_path), PASSPHRASE, p)
    for i in range(n):
        v.add(f"memory {i}", tags=["t"], now=1_700_000_000 + i)
    assert p.awaited == []          # the synchronous methods never wait
    return v, p


def test_the_awaited_operations_wait_for_the_provider_and_answer_as_the_synchronous_ones(tmp_path: Path) -> None:
    p = SuspendingProvider(provider())

    async def scenario() -> tuple[list[str], list[str], int]:
        v = await create_in_async(Store(tmp_path), PASSPHRASE, p)
        first = await v.add_async("green tea over coffee", tags=["drinks"])
        await v.add_async("walks after lunch")
        edited = await v.edit_async(first.hex(), content="green tea, always")
        listing = await v.open_all_async()
        heads = sorted(e.opened.content for e in listing.heads())
        assert all(e.opened.trust is Trust.SELF for e in listing.entries)
        gone = await v.forget_async(edited.hex())
        again = await unlock_store_async(v.store, PASSPHRASE, p)
        after = sorted(e.opened.content for e in (await again.open_all_async()).heads())
        return heads, after, len(gone)

    heads, after, gone = asyncio.run(scenario())
    assert heads == ["green tea, always", "walks after lunch"]
    assert gone == 2                 # both versions of the edited memory
    assert after == ["walks after lunch"]
    assert {"argon2id", "aes_gcm_decrypt_many", "ed25519_verify_many", "ed25519_sign"} <= set(p.awaited)


def test_opening_many_objects_waits_per_batch_never_per_object(tmp_path: Path) -> None:
    counts = []
    for n in (3, 60):
        v, p = _vault(tmp_path / str(n), n)
        listing = asyncio.run(v.open_all_async())
        assert len(listing.entries) == n and not listing.refused
        counts.append(sorted(p.awaited))
        v.close()
    # one unwrap, one decrypt and one verify call for the batch, whatever its size
    assert counts[0] == counts[1] == ["aes_gcm_decrypt_many", "aes_kw_unwrap_many", "ed25519_verify_many"]


def test_a_synchronous_step_inside_an_awaited_operation_answers_at_once(tmp_path: Path) -> None:
    v, p = _vault(tmp_path, 1)

    async def mixed() -> int:
        await v.add_async("one more")
        return len(v.open_all().entries)   # a synchronous wrapper, called on the event loop

    p.at_once.clear()
    assert asyncio.run(mixed()) == 2
    assert "ed25519_verify_many" in p.at_once and "ed25519_verify_many" not in p.awaited
    v.close()
