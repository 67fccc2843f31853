"""The blind server's data folder is its own (issue 19 item 8): a real `python -m server` started
with the common umask 022 makes its folder 0700 and the SQLite file, its -wal and -shm 0600 (the
file holds the public log's signing seed), and tightens a folder and file an older run or a copy
left readable by everyone, saying so in its log."""
from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import httpx

from tests.sync.synckit import Backend, ServerProcess


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@contextmanager
def umask(m: int) -> Iterator[None]:
    old = os.umask(m)
    try:
        yield
    finally:
        os.umask(old)


def started(backend: Backend) -> ServerProcess:
    with umask(0o022):       # what a server started from a login shell gets: files 0644 by default
        srv = ServerProcess(backend).start()
    # the log key's seed is generated and stored by the first checkpoint
    assert httpx.get(srv.url + "/v1/log/checkpoint", timeout=10).status_code == 200
    return srv


def stored_files(backend: Backend) -> list[Path]:
    return list(backend.data_dir.iterdir())


def test_a_new_data_folder_is_the_servers_alone(tmp_path: Path) -> None:
    b = Backend("sqlite", tmp_path)
    srv = started(b)
    try:
        with closing(sqlite3.connect(b.sqlite_path)) as c:       # the seed is in this file
            assert len(c.execute("SELECT seed FROM tlog_key").fetchone()[0]) == 32
        assert mode(b.data_dir) == 0o700
        names = {p.name: mode(p) for p in stored_files(b)}
        assert {"ownmem.db", "ownmem.db-wal", "ownmem.db-shm"} <= set(names), names
        assert set(names.values()) == {0o600}, names
        assert b"tightened" not in srv.logs()          # nothing to say about a folder it made
    finally:
        srv.stop()


def test_an_existing_readable_folder_and_file_are_tightened_and_logged(tmp_path: Path) -> None:
    b = Backend("sqlite", tmp_path)
    srv = started(b)
    srv.stop()
    os.chmod(b.data_dir, 0o755)                       # as an older server, or a copy, left them
    for p in stored_files(b):
        os.chmod(p, 0o644)
    srv = started(b)
    try:
        assert mode(b.data_dir) == 0o700
        assert {mode(p) for p in stored_files(b)} == {0o600}
        log = srv.logs().decode()
        assert f"tightened {b.data_dir} from 0755 to 0700" in log, log
        assert f"tightened {b.sqlite_path} from 0644 to 0600" in log, log
    finally:
        srv.stop()
