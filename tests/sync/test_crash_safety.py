"""A server killed mid-push loses nothing and stores nothing twice (DESIGN.md "Sync":
"Devices push batches of cells + wrapped DEKs (idempotent by cellId)"; server/storage:
"a SIGKILL ... loses at most the transaction in flight, never half of one").

One device pushes 10,000 memories; the server process is SIGKILLed once it has
committed ~3,000 and the next batch is on its way, restarted on the same store, and
the device syncs again.  Then: every cell is stored exactly once, the change feed
lists 10,000 distinct cells in gap-free order, a fresh device pulls all 10,000 and
every one opens, and SQLite's integrity check passes, both on the file the crash
left behind and after the resumed run.  A lost response (the server committed, the
device never heard) is replayed on purpose: the re-sent cells are duplicates.
"""
from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import closing
from typing import Any

import pytest

from ownmem.errors import SyncError
from ownmem.vault.sync import PUSH_BATCH, SyncReport
from ownmem.wire import messages
from tests.sync.synckit import Backend, Devices, ServerProcess, feed

pytestmark = pytest.mark.slow

N = 10_000
KILL_AFTER = 3_000


def _server_counts(backend: Backend, name: str) -> dict[str, int]:
    vid = backend.rows("SELECT id FROM vaults WHERE name = ?", (name,))[0][0]
    cells = backend.rows("SELECT count(*), count(DISTINCT cell_id) FROM cells WHERE vault_id = ?", (vid,))[0]
    ch = backend.rows("SELECT count(*), count(DISTINCT cell_id), coalesce(min(seq), 0), coalesce(max(seq), 0) "
                      "FROM changes WHERE vault_id = ? AND kind = 'cell'", (vid,))[0]
    every = backend.rows("SELECT count(*), coalesce(max(seq), 0) FROM changes WHERE vault_id = ?", (vid,))[0]
    return {"cells": cells[0], "distinct_cells": cells[1], "cell_changes": ch[0], "distinct_changed": ch[1],
            "changes": every[0], "max_seq": every[1], "last_seq": backend.last_seq(name)}


def _unsent_cells(folder: Any) -> int:
    """Cells the device made and stored but has not seen acknowledged: a batch about to go out."""
    with closing(sqlite3.connect(folder / "vault.db", timeout=30)) as c:
        return int(c.execute("SELECT count(*) FROM cells WHERE pushed = 0").fetchone()[0])


def test_server_killed_mid_push_resumes_with_every_cell_stored_once(
        backend: Backend, servers: Callable[..., ServerProcess], devices: Devices) -> None:
    server = servers(backend, label="crash")
    name = f"crash-{backend.kind}"
    a = devices.first(server.url, name, sync=False)

    # 10,000 memories, fast: one fsync at the end instead of one per memory (test setup only).
    a.v.store.db.execute("PRAGMA synchronous=OFF")
    for i in range(N):
        a.v.add(f"memory {i}: crash-safety filler", tags=[f"t{i % 7}"], now=1_700_000_000 + i)
    a.v.store.db.execute("PRAGMA synchronous=FULL")
    assert a.v.store.unpushed_count() == N

    # Push in a thread; kill the server once ~3,000 are committed and the next batch is out.
    failure: list[BaseException] = []

    def push() -> None:
        try:
            a.syncer.push(SyncReport())
        except BaseException as e:  # noqa: BLE001 - reported to the test below
            failure.append(e)

    pusher = threading.Thread(target=push, name="pusher")
    pusher.start()
    deadline = time.monotonic() + 120
    while backend.last_seq(name) < KILL_AFTER or _unsent_cells(a.folder) == 0:
        assert pusher.is_alive(), f"the push ended before the crash: {failure}"
        assert time.monotonic() < deadline, "the push made no progress"
        time.sleep(0.01)
    time.sleep(0.05)           # the batch is being encoded, sent or verified
    server.kill()
    pusher.join(60)
    assert not pusher.is_alive()
    assert len(failure) == 1 and isinstance(failure[0], SyncError), failure

    # What the crash left: whole batches only (each push is one transaction), no orphan.
    at_crash = _server_counts(backend, name)
    assert KILL_AFTER <= at_crash["cells"] < N
    assert at_crash["cells"] % PUSH_BATCH == 0, at_crash
    assert at_crash["cells"] == at_crash["cell_changes"] == at_crash["changes"] == at_crash["last_seq"]
    if backend.kind == "sqlite":
        assert backend.integrity_ok() == "ok"

    # A response lost in the crash: the device forgets that 500 committed cells were acknowledged.
    with a.v.store.transaction():
        a.v.store.db.execute("UPDATE cells SET pushed = 0 WHERE object_id IN "
                             "(SELECT object_id FROM cells WHERE pushed = 1 ORDER BY object_id LIMIT 500)")

    server.start()
    answers: list[messages.PushResult] = []
    send = a.remote.push

    def recording_push(req: messages.PushRequest) -> messages.PushResult:
        answers.append(send(req))
        return answers[-1]

    a.remote.push = recording_push  # type: ignore[method-assign]  # the test's spy on this one remote
    report = a.sync()
    assert a.v.store.unpushed_count() == 0
    assert report.pushed == N - at_crash["cells"] + 500
    assert sum(r.stored for r in answers) == N - at_crash["cells"]
    assert sum(r.duplicates for r in answers) >= 500

    # Stored exactly once, and a gap-free feed of 10,000 distinct cells.
    after = _server_counts(backend, name)
    assert after == {"cells": N, "distinct_cells": N, "cell_changes": N, "distinct_changed": N,
                     "changes": N, "max_seq": N, "last_seq": N}
    device_cells = {r[0] for r in a.v.store.db.execute("SELECT cell_id FROM cells")}
    vid = backend.rows("SELECT id FROM vaults WHERE name = ?", (name,))[0][0]
    assert {bytes(r[0]) for r in backend.rows("SELECT cell_id FROM cells WHERE vault_id = ?", (vid,))} == device_cells

    # A fresh device pulls all 10,000 and every one opens.
    c = devices.join(server.url, name, label="fresh", sync=False)
    pulled = c.sync()
    assert pulled.pulled == N
    listing = c.listing()
    assert (len(listing.entries), len(listing.refused)) == (N, 0)
    assert {e.opened.content for e in listing.entries} == {f"memory {i}: crash-safety filler" for i in range(N)}
    changes = feed(c.remote, page=5000)
    seqs = [s for s, _, _ in changes]
    assert seqs == list(range(1, N + 1))
    assert len({cid for _, _, cid in changes}) == N and {cid for _, _, cid in changes} == device_cells

    server.stop()
    if backend.kind == "sqlite":
        assert backend.integrity_ok() == "ok"
