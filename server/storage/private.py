"""The server's data folder is the server's alone: folder 0700, files 0600.

The SQLite file holds every vault's ciphertext, the sessions' token hashes, the server secret
and the seed of the public log's signing key (tlog_key): a reader of the file can sign
checkpoints as this server. The folder is made 0700 and the database, its write-ahead log and
shared-memory file 0600 whatever the umask; a folder or file left wider by an older server or a
copy is tightened at start, and the log says so (an operator learns their backup was readable).

A folder named by an OWNMEM_DATABASE_URL `sqlite:///` path may be shared (a home folder, /srv):
only the files are tightened there, never the folder.
"""
from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

FOLDER_MODE = 0o700
FILE_MODE = 0o600
SIDE_FILES = ("-wal", "-shm", "-journal")

_log = logging.getLogger("ownmem.server")


def _tighten(path: Path, mode: int) -> None:
    was = stat.S_IMODE(path.stat().st_mode)
    if was & ~mode:
        os.chmod(path, mode)
        _log.warning("tightened %s from %04o to %04o: it holds the vaults' data and the log key seed",
                     path, was, mode)


def private_folder(folder: Path) -> None:
    """Create ``folder`` 0700, or tighten it."""
    folder.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)   # mkdir's mode is masked by umask
    _tighten(folder, FOLDER_MODE)


def private_file(db: Path) -> None:
    """Create ``db`` empty 0600 before SQLite opens it (SQLite gives its -wal and -shm the mode of
    the database file), or tighten it and any side file an earlier run left."""
    if not db.exists():
        os.close(os.open(db, os.O_CREAT | os.O_WRONLY, FILE_MODE))
    for p in [db] + [db.with_name(db.name + s) for s in SIDE_FILES]:
        if p.exists():
            _tighten(p, FILE_MODE)
