"""Cell verification in worker processes (server/verifypool.py) decides exactly what one thread does:
the same cells accepted, the same first refused item named, and it falls back to a thread when the
batch is small, the pool is off, or a worker died."""
from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator

import pytest

from ownmem.crypto import run_sync
from ownmem.saihm.cell import make_cell
from ownmem.vault import UnlockedVault, Vault
from server.storage.base import LogEntry
from server.verify import HolderKey, Refused
from server.verifypool import MIN_BATCH, VerifyPool, check_items

N = 40
# the fixtures' values: (cell batch, holder public key, holder) and (receipts with their cell ids, ...)
Batch = tuple[list[list[bytes]], bytes, HolderKey]
Receipts = tuple[list[tuple[bytes, str]], bytes, HolderKey]



@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Batch]:
    v: UnlockedVault = Vault.create(tmp_path_factory.mktemp("verifypool") / "vault",
                                    "verify pool tests: quiet river stones")
    try:
        for i in range(N):
            v.add(f"memory {i}", tags=("pool",))
        h, now = v.holder(), int(time.time())
        items = []
        for row in v.store.unpushed(N):
            c = run_sync(make_cell(v.crypto, xi=h.xi, holder_id=h.holder_id, kek_version=1, tier="STANDARD",
                                   cell_nonce=row.object_id, ciphertext=row.sealed, timestamp=now))
            items.append([c.to_cbor(), row.dek_wrapped])
        yield items, h.public, HolderKey(h.public, h.holder_id)
    finally:
        v.lock()


@pytest.fixture
def pool() -> Iterator[VerifyPool]:
    p = VerifyPool(2)
    p.start()
    yield p
    p.close()


def _tampered(item: list[bytes]) -> list[bytes]:
    cell = bytearray(item[0])
    cell[-80] ^= 1   # inside the signature or the timestamp: still a cell, no longer a valid one
    return [bytes(cell), item[1]]


def test_pool_accepts_what_one_thread_accepts(batch: Batch, pool: VerifyPool) -> None:
    items, pub, holder = batch
    got = asyncio.run(pool.check(items, holder, pub))
    assert got == check_items(items, holder)
    assert len(got) == N and pool._pool is not None, "a batch this large goes to the worker processes"


@pytest.mark.parametrize("bad", [[0], [N // 2 + 3], [N - 1], [27, 6, 33]])
def test_pool_names_the_first_refused_item(batch: Batch, pool: VerifyPool, bad: list[int]) -> None:
    items, pub, holder = batch
    forged = [(_tampered(it) if i in bad else it) for i, it in enumerate(items)]
    got = asyncio.run(pool.check(forged, holder, pub))
    want = check_items(forged, holder)
    assert isinstance(got, tuple) and isinstance(want, tuple)
    assert got[0] == want[0] == min(bad)
    assert isinstance(got[1], Refused) and (got[1].code, str(got[1])) == (want[1].code, str(want[1]))


def test_small_batches_and_a_disabled_pool_check_in_a_thread(batch: Batch) -> None:
    items, pub, holder = batch
    p = VerifyPool(2)
    try:
        assert asyncio.run(p.check(items[:MIN_BATCH - 1], holder, pub)) == check_items(items[:MIN_BATCH - 1], holder)
        assert p._pool is None, "a small push must not start the worker processes"
    finally:
        p.close()
    off = VerifyPool(0)
    assert asyncio.run(off.check(items, holder, pub)) == check_items(items, holder)
    assert off._pool is None


def test_a_dead_worker_costs_a_fallback_not_a_refusal(batch: Batch, pool: VerifyPool) -> None:
    items, pub, holder = batch
    assert asyncio.run(pool.check(items, holder, pub)) == check_items(items, holder)
    first = pool._pool
    assert first is not None
    for pid in list(first._processes):     # the worker processes die (killed, out of memory, ...)
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not first._broken:
        time.sleep(0.05)
    assert asyncio.run(pool.check(items, holder, pub)) == check_items(items, holder)
    # and a new pool serves the next push
    assert asyncio.run(pool.check(items, holder, pub)) == check_items(items, holder)
    assert pool._pool is not None and pool._pool is not first


# ---------------------------------------------------------------- receipts (POST /receipts, /erase)

@pytest.fixture(scope="module")
def receipts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Receipts]:
    from ownmem.saihm.receipt import make_receipt

    v: UnlockedVault = Vault.create(tmp_path_factory.mktemp("verifypool-receipts") / "vault",
                                    "verify pool tests: quiet river stones")
    try:
        h, now = v.holder(), int(time.time())
        items = [(run_sync(make_receipt(v.crypto, xi=h.xi, holder_id=h.holder_id, operation="REMEMBER",
                                        subject_id=os.urandom(32), timestamp=now)).to_cbor(), "REMEMBER")
                 for _ in range(N)]
        yield items, h.public, HolderKey(h.public, h.holder_id)
    finally:
        v.lock()


def test_pool_logs_the_receipts_one_thread_logs(receipts: Receipts, pool: VerifyPool) -> None:
    from server.verifypool import check_receipts_here

    items, pub, holder = receipts
    got = asyncio.run(pool.check_receipts(items, holder, pub))
    assert got == check_receipts_here(items, holder, pub)
    # anything but a log entry stays in the list and fails the comparison
    assert [e.receipt if isinstance(e, LogEntry) else e for e in got] == [raw for raw, _ in items]
    assert pool._pool is not None, "a batch this large goes to the worker processes"


@pytest.mark.parametrize("bad", [0, MIN_BATCH + 3, N - 1])
def test_pool_names_the_first_forged_receipt_as_one_thread_does(receipts: Receipts, pool: VerifyPool, bad: int) -> None:
    from server.verifypool import check_receipts_here

    items, pub, holder = receipts
    forged = list(items)
    raw = bytearray(forged[bad][0])
    raw[-40] ^= 1          # inside the signature: still a receipt, no longer a valid one
    forged[bad] = (bytes(raw), "REMEMBER")
    wrong_op = list(items)
    wrong_op[bad] = (items[bad][0], "FORGET")   # a REMEMBER receipt offered where a FORGET is due
    for case in (forged, wrong_op):
        got = asyncio.run(pool.check_receipts(case, holder, pub))
        assert isinstance(got, tuple) and got[0] == bad and isinstance(got[1], Refused)
        here = check_receipts_here(case, holder, pub)
        assert isinstance(here, tuple) and here[0] == bad and here[1].code == got[1].code
