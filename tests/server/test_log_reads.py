"""The public log's reads on PostgreSQL run in autocommit (one round trip each, no BEGIN and
COMMIT around them: server/storage/postgres.py ``_read``).  The pool's connections must come
back as they went out, so that every transaction after a read, on whichever connection, is
still one transaction."""
from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

from server.storage.base import LogEntry
from tests.server.storekit import Store


def _entry() -> LogEntry:
    return LogEntry(secrets.token_bytes(32), secrets.token_bytes(32), "FORGET", secrets.token_bytes(32), 1,
                    secrets.token_bytes(64))


def test_log_reads_hand_back_connections_that_still_make_transactions(tmp_path: Path, request: Any) -> None:
    st = Store.fresh("postgres", tmp_path, request).open()
    try:
        st.log_receipts([_entry(), _entry()])
        size = st.log_tree_size()
        assert len(st.read_hashes([0, 1])) == 2
        assert st.log_leaf_index(secrets.token_bytes(32)) is None
        with pytest.raises(RuntimeError, match="lacks"):
            st.read_hashes([10 ** 9])            # a failed read hands its connection back too
        # the PostgreSQL store's own pool and transaction, below the Storage protocol
        conns = [st.pool.getconn() for _ in range(st.pool.max_size)]   # type: ignore[attr-defined]
        try:
            assert not any(c.autocommit for c in conns)
        finally:
            for c in conns:
                st.pool.putconn(c)               # type: ignore[attr-defined]
        # a transaction that fails after its first statement leaves nothing: still atomic
        with pytest.raises(RuntimeError):
            with st._tx() as c:                  # type: ignore[attr-defined]
                c.execute("UPDATE tlog_head SET size = size + 100 WHERE id = 1")
                raise RuntimeError("abort")
        assert st.log_tree_size() == size
    finally:
        st.close()
