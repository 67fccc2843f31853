"""The audit journal (py/ownmem/agent/audit.py): every answered entry is on disk before its
answer, a killed process loses none of them, a torn tail is dropped, what was ingested and
pruned never comes back, and the journal is sealed like audit.db."""
from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ownmem.agent import audit
from ownmem.agent.audit import JOURNAL_NAME, AuditEntry, AuditLog, new_id
from ownmem.errors import AuthenticationFailed

KEY = b"\x07" * 32

# a writer that never ingests on its own (so every answered entry is in the journal alone when
# it dies), recording from 4 threads at once and printing each id once record() returned
CHILD = r"""
import sys, threading
from pathlib import Path
from ownmem.agent import audit
from ownmem.agent.audit import AuditEntry, AuditLog
audit.INGEST_INTERVAL = 3600.0
audit.INGEST_ENTRIES = 10 ** 9
log = AuditLog(Path(sys.argv[1]), b"\x07" * 32)
out = threading.Lock()
def run(t):
    i = 0
    while True:
        e = AuditEntry(f"log_{t}_{i}", 1000 + i, "sess_a", "cal", "read", "preference.theme", None,
                       ("preference",), True, "scope matched")
        log.record(e)
        with out:
            sys.stdout.write(e.id + "\n")
            sys.stdout.flush()
        i += 1
for t in range(4):
    threading.Thread(target=run, args=(t,), daemon=True).start()
threading.Event().wait()
"""


def entry(sid: str, ts: int = 1000, key: str = "preference.theme") -> AuditEntry:
    return AuditEntry(new_id(), ts, sid, "cal", "read", key, None, ("preference",), True, "scope matched")


@pytest.fixture
def no_ingest(monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries stay in the journal until a read, a prune or close ingests them."""
    monkeypatch.setattr(audit, "INGEST_INTERVAL", 3600.0)
    monkeypatch.setattr(audit, "INGEST_ENTRIES", 10 ** 9)


def _killed_writer(folder: Path, answers: int) -> list[str]:
    """CHILD in ``folder``, killed once it has answered ``answers`` entries: their ids."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(folder)], stdout=subprocess.PIPE, text=True)
    answered: list[str] = []
    try:
        assert child.stdout is not None
        while len(answered) < answers:
            line = child.stdout.readline()
            assert line, "the writer died on its own"
            answered.append(line.strip())
    finally:
        child.send_signal(signal.SIGKILL)       # no close, no ingest, mid-batch
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    return answered


def test_a_process_killed_after_its_answers_loses_no_answered_entry(tmp_path: Path) -> None:
    answered = _killed_writer(tmp_path, 400)
    con = sqlite3.connect(tmp_path / "audit.db")
    try:
        in_db = con.execute("SELECT count(*) FROM audit").fetchone()[0]
    finally:
        con.close()
    assert in_db == 0                           # all of them were in the journal alone
    log = AuditLog(tmp_path, KEY)
    try:
        have = {e.id for e in log.entries(limit=1_000_000)}
        assert set(answered) <= have
    finally:
        log.close()


def test_a_reader_beside_a_dead_service_sees_the_journal_too_and_writes_nothing(tmp_path: Path) -> None:
    """audit.read_on_disk (``ownmem agent audit`` while the service does not answer): what
    audit.db holds and what the killed writer's journal alone holds, each entry once, newest
    first; neither file changes under it, and the recovery that follows finds the same log."""
    a = AuditLog(tmp_path, KEY)
    before = [entry("sess_b", ts=500 + i) for i in range(3)]
    for e in before:
        a.record(e)
    a.close()                                    # ingested: in audit.db
    answered = _killed_writer(tmp_path, 200)     # in the journal alone
    files = {n: (tmp_path / n).read_bytes() for n in ("audit.db", JOURNAL_NAME)}

    got = audit.read_on_disk(tmp_path, KEY, limit=10_000)
    ids = [e.id for e in got]
    assert len(ids) == len(set(ids))
    assert set(answered) <= set(ids) and {e.id for e in before} <= set(ids)
    assert [e.timestamp for e in got] == sorted((e.timestamp for e in got), reverse=True)
    assert [e.id for e in audit.read_on_disk(tmp_path, KEY, "sess_b")] == [e.id for e in reversed(before)]
    assert len(audit.read_on_disk(tmp_path, KEY, limit=5)) == 5
    assert {n: (tmp_path / n).read_bytes() for n in files} == files
    # another key opens none of it
    with pytest.raises(AuthenticationFailed):
        audit.read_on_disk(tmp_path, b"\x08" * 32)

    b = AuditLog(tmp_path, KEY)                   # the service's recovery: the same entries
    try:
        assert {e.id for e in b.entries(limit=10_000)} == set(ids)
    finally:
        b.close()
    # a crash between the ingest's commit and the journal's reset: audit.db and the journal
    # both hold the entries; each is read once
    (tmp_path / JOURNAL_NAME).write_bytes(files[JOURNAL_NAME])
    assert sorted(e.id for e in audit.read_on_disk(tmp_path, KEY, limit=10_000)) == sorted(ids)


def _torn_copy(src: Path, dst: Path, tail: bytes) -> None:
    """dst: src's audit files as they are on disk now (the writer still running), with ``tail``
    written where the next record would go: a write the crash tore."""
    dst.mkdir()
    for name in ("audit.db", JOURNAL_NAME):
        shutil.copy(src / name, dst / name)
    j = (dst / JOURNAL_NAME).read_bytes()
    off = 16
    while True:
        n = struct.unpack_from("<I", j, off)[0]
        if n == 0:
            break
        off += 8 + n
    with open(dst / JOURNAL_NAME, "r+b") as f:
        f.seek(off)
        f.write(tail)


def test_a_torn_tail_is_dropped_and_what_precedes_it_kept(tmp_path: Path, no_ingest: None) -> None:
    src = tmp_path / "src"
    src.mkdir()
    a = AuditLog(src, KEY)
    try:
        kept = [entry("sess_a", ts=i) for i in range(3)]
        for e in kept:
            a.record(e)
        # a length that promises more than was written, then half a record, then a record
        # whose crc does not check
        for name, tail in (("short", struct.pack("<II", 400, 0) + b"\x01" * 40),
                           ("badcrc", struct.pack("<II", 40, 12345) + b"\x02" * 40)):
            copy = tmp_path / name
            _torn_copy(src, copy, tail)
            b = AuditLog(copy, KEY)
            try:
                assert sorted(e.id for e in b.entries()) == sorted(e.id for e in kept)
                later = entry("sess_a", ts=99)
                b.record(later)                # after the torn bytes, in a new generation
            finally:
                b.close()
            c = AuditLog(copy, KEY)
            try:
                assert len(c.entries()) == 4
            finally:
                c.close()
    finally:
        a.close()


def test_pruned_entries_do_not_come_back_from_the_journal(tmp_path: Path, no_ingest: None) -> None:
    """The journal is reset (a new generation) whenever audit.db took its entries: the old
    records still in the file are void, so a prune is not undone by a replay on open."""
    a = AuditLog(tmp_path, KEY)
    for i in range(5):
        a.record(entry("sess_a", ts=10 + i))
    assert a.prune(before=1_000) == 5
    a.close()
    raw = (tmp_path / JOURNAL_NAME).read_bytes()
    assert struct.unpack_from("<I", raw, 16)[0] != 0          # the old records are still there
    b = AuditLog(tmp_path, KEY)
    try:
        assert b.entries() == []
    finally:
        b.close()


def test_the_journal_is_sealed_and_private(tmp_path: Path, no_ingest: None) -> None:
    a = AuditLog(tmp_path, KEY)
    try:
        a.record(AuditEntry(new_id(), 1000, "sess_a", "calendar-agent", "read", "preference.theme", None,
                            ("preference",), True, "scope matched"))
        raw = (tmp_path / JOURNAL_NAME).read_bytes()
        for clear in (b"preference.theme", b"calendar-agent", b"scope matched"):
            assert clear not in raw
        assert os.stat(tmp_path / JOURNAL_NAME).st_mode & 0o777 == 0o600
    finally:
        a.close()


def test_without_group_commit_each_entry_pays_its_own_sync(tmp_path: Path) -> None:
    """group=False, the bench's anchor (the uomp-core MVP's discipline): one journal write and
    fdatasync per entry, however many writers wait."""
    a = AuditLog(tmp_path, KEY, group=False)
    try:
        def write() -> None:
            for _ in range(5):
                a.record(entry("sess_a"))

        threads = [threading.Thread(target=write) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert a.batches == 80
        assert len(a.entries(limit=1000)) == 80
    finally:
        a.close()


def test_entries_larger_than_the_journal_grow_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit, "JOURNAL_SIZE", 64 << 10)
    a = AuditLog(tmp_path, KEY)
    try:
        big = [AuditEntry(new_id(), 1000, "sess_a", "cal", "query", "q" * 100_000, None, (), True, "ok")
               for _ in range(3)]
        for e in big:
            a.record(e)
        assert sorted(e.id for e in a.entries()) == sorted(e.id for e in big)
    finally:
        a.close()
