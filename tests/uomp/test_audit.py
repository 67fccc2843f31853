"""The audit log (UOMP draft-00 "Audit and Logging": "Storage"): sealed at rest, bound to its
clear columns, durable before record() returns, fsyncs shared by concurrent writers."""
from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from ownmem.agent.audit import AuditEntry, AuditLog, new_id
from ownmem.errors import AuthenticationFailed

KEY = b"\x07" * 32


def entry(sid: str, ts: int = 1000, key: str = "preference.theme") -> AuditEntry:
    return AuditEntry(new_id(), ts, sid, "cal", "read", key, None, ("preference",), True, "scope matched")


def test_entries_are_sealed_and_survive_reopen(tmp_path: Path) -> None:
    a = AuditLog(tmp_path, KEY)
    e = entry("sess_a")
    a.record(e)
    a.close()
    assert b"preference.theme" not in (tmp_path / "audit.db").read_bytes()
    b = AuditLog(tmp_path, KEY)
    try:
        assert b.entries("sess_a") == [e]
        assert b.entries("sess_b") == []
    finally:
        b.close()


def test_an_entry_moved_to_another_session_fails_to_open(tmp_path: Path) -> None:
    a = AuditLog(tmp_path, KEY)
    a.record(entry("sess_a"))
    a.close()
    db = sqlite3.connect(tmp_path / "audit.db")
    with db:
        db.execute("UPDATE audit SET session_id = 'sess_b'")
    db.close()
    b = AuditLog(tmp_path, KEY)
    try:
        with pytest.raises(AuthenticationFailed):
            b.entries("sess_b")
    finally:
        b.close()


def test_concurrent_records_share_commits_and_prune_drops_old(tmp_path: Path) -> None:
    a = AuditLog(tmp_path, KEY)
    try:
        def write(i: int) -> None:
            for _ in range(10):
                a.record(entry("sess_a", ts=i))

        threads = [threading.Thread(target=write, args=(i,)) for i in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(a.entries("sess_a", limit=10_000)) == 320
        assert a.batches < 320          # group commit: fewer transactions than entries
        assert a.prune(before=16) == 160
        assert len(a.entries("sess_a", limit=10_000)) == 160
    finally:
        a.close()


def test_a_batch_waits_for_entries_on_their_way_and_no_longer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry announced by a request (coming) joins the batch being formed instead of paying
    its own fsync; a request that leaves without recording releases the batch at once; nothing
    waits longer than COMMIT_DELAY (2 s here, to make the timing unmistakable)."""
    import time

    from ownmem.agent import audit

    monkeypatch.setattr(audit, "COMMIT_DELAY", 2.0)
    a = AuditLog(tmp_path, KEY)
    try:
        started = threading.Event()

        def later(record: bool) -> None:
            with a.coming():
                started.set()
                time.sleep(0.3)
                if record:
                    a.record(entry("sess_a"))

        for record, batches in ((True, 1), (False, 1)):
            before, started = a.batches, threading.Event()
            t = threading.Thread(target=later, args=(record,))
            t.start()
            started.wait()
            t0 = time.monotonic()
            a.record(entry("sess_b"))             # formed while the other is on its way
            waited = time.monotonic() - t0
            t.join()
            assert 0.2 < waited < 1.5, waited     # waited for it, and no longer than it took
            assert a.batches - before == batches  # both in one fsync / the lone one alone
        t0 = time.monotonic()
        a.record(entry("sess_c"))                 # nobody on the way: no wait at all
        assert time.monotonic() - t0 < 1.0
        assert len(a.entries(limit=100)) == 4
    finally:
        a.close()
