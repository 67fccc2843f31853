"""What a real sync publishes of a save's time (saihm.receipt.coarse_time; docs/decisions.md,
SAIHM "The public log tells the hour of a save, not the second"): every REMEMBER receipt the
public log lists for a vault carries the start of its hour, and still verifies by the checks
anyone runs on it: its signature under the holder key the log's KEY receipt publishes
(saihm.receipt.verify_receipt) and the PWA's check of a memory's receipts
(ownmem.web.receipts.check_entry)."""
from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from ownmem.crypto import run_sync
from ownmem.saihm.receipt import parse_receipt, verify_receipt
from ownmem.web.receipts import check_entry
from tests.sync.synckit import Backend, Devices, ServerProcess


def test_the_log_lists_each_save_at_its_hour_and_it_verifies(sqlite_backend: Backend,
                                                             servers: Callable[..., ServerProcess],
                                                             devices: Devices) -> None:
    srv = servers(sqlite_backend)
    d = devices.first(srv.url, "hours", label="a")
    before = int(time.time())
    ids = [d.v.add(f"saved at some second {i}") for i in range(3)]
    d.sync()
    after = int(time.time())
    holder = d.v.holder()
    log = httpx.get(f"{srv.url}/v1/log", params={"holder": holder.holder_id.hex()}, timeout=30).json()["entries"]
    key = [e for e in log if e["operation"] == "KEY"]
    saves = [e for e in log if e["operation"] == "REMEMBER"]
    assert len(key) == 1 and len(saves) == 3
    public = parse_receipt(bytes.fromhex(key[0]["receipt"])).detail
    assert public == holder.public
    for e in saves:
        r = parse_receipt(bytes.fromhex(e["receipt"]))
        assert e["timestamp"] == r.timestamp, "the log's listing and the signed receipt disagree"
        assert r.timestamp % 3600 == 0, f"a REMEMBER receipt tells the second: {r.timestamp}"
        assert before - 3600 < r.timestamp <= after
        run_sync(verify_receipt(d.v.crypto, r, public))
    # the PWA's own check of a memory's receipts accepts them
    for oid in ids:
        cell = d.v.store.cell_of(oid)
        assert cell is not None
        rows = httpx.get(f"{srv.url}/v1/log", params={"subject": cell[0].hex()}, timeout=30).json()["entries"]
        views = [run_sync(check_entry(d.v.crypto, row, cell[0], oid, holder.public)) for row in rows]
        assert [(v.operation, v.verified, v.timestamp is not None and v.timestamp % 3600) for v in views] == \
            [("REMEMBER", True, 0)]
