"""The receipt log's Merkle tree in storage, for both backends (DESIGN.md "The public log").

    tlog_leaves (leaf, receipt_id)   leaf i of the tree is the receipt of that id; its leaf hash
                                     is SHA-256(0x00 || the receipt's deterministic CBOR)
    tlog_hashes (idx, hash)          every complete subtree's hash at its stored-hash index
                                     (``ownmem.saihm.tlog.stored_hash_index``), so a tree head or
                                     a proof is O(log n) rows, never a walk over the leaves
    tlog_head   (id = 1, size)       the tree's size; its row lock is the one lock for appending
    tlog_key    (id = 1, seed)       the log key: an Ed25519 seed, generated once

Leaves are appended in the transaction that inserts the receipt, under one lock for the
whole log (SQLite's write lock; on PostgreSQL the head row's, taken before the receipts are
inserted), so leaf indexes are dense, commit in order, and follow the log's own order.
Receipts logged before the tree existed are appended, in log order, when the storage opens.
The tables only grow: a proof for size n reads rows that committed with the n-th leaf and
never change, so readers need no snapshot.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from ownmem.saihm import tlog

SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS tlog_leaves (leaf INTEGER PRIMARY KEY, receipt_id BLOB NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS tlog_hashes (idx INTEGER PRIMARY KEY, hash BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS tlog_key (id INTEGER PRIMARY KEY CHECK (id = 1), seed BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS tlog_head (id INTEGER PRIMARY KEY CHECK (id = 1), size INTEGER NOT NULL);
INSERT OR IGNORE INTO tlog_head SELECT 1, COALESCE(MAX(leaf) + 1, 0) FROM tlog_leaves;
"""

POSTGRES_SCHEMA = """
CREATE TABLE IF NOT EXISTS tlog_leaves (leaf BIGINT PRIMARY KEY, receipt_id BYTEA NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS tlog_hashes (idx BIGINT PRIMARY KEY, hash BYTEA NOT NULL);
CREATE TABLE IF NOT EXISTS tlog_key (id INTEGER PRIMARY KEY CHECK (id = 1), seed BYTEA NOT NULL);
CREATE TABLE IF NOT EXISTS tlog_head (id INTEGER PRIMARY KEY CHECK (id = 1), size BIGINT NOT NULL);
INSERT INTO tlog_head SELECT 1, COALESCE(MAX(leaf) + 1, 0) FROM tlog_leaves ON CONFLICT (id) DO NOTHING;
"""

# receipts the log holds and the tree does not (logged before the tree existed), in log order
UNTREED = ("SELECT l.receipt_id, l.receipt FROM log l LEFT JOIN tlog_leaves t ON t.receipt_id = l.receipt_id "
           "WHERE t.leaf IS NULL ORDER BY l.idx")
TREE_SIZE = "SELECT size FROM tlog_head WHERE id = 1"


class _Reader:
    def __init__(self, read: Callable[[Sequence[int]], list[bytes]]) -> None:
        self.read = read

    def read_hashes(self, indexes: Sequence[int]) -> list[bytes]:
        return self.read(indexes)


def new_rows(size: int, receipts: Sequence[tuple[bytes, bytes]],
             read: Callable[[Sequence[int]], list[bytes]]) -> tuple[list[tuple[int, bytes]], list[tuple[int, bytes]]]:
    """The rows that append ``receipts`` ((receipt id, receipt CBOR), in order) to a tree of ``size``:
    (leaf, receipt id) for tlog_leaves and (idx, hash) for tlog_hashes."""
    hashes = tlog.append_leaves(size, [tlog.leaf_hash(r) for _, r in receipts], _Reader(read))
    base = tlog.stored_hash_count(size)
    return ([(size + i, rid) for i, (rid, _) in enumerate(receipts)],
            [(base + i, h) for i, h in enumerate(hashes)])


def in_order(indexes: Sequence[int], found: dict[int, bytes]) -> list[bytes]:
    """The hashes at ``indexes``, in that order; a missing one is a broken store, not a client error."""
    missing = [i for i in indexes if i not in found]
    if missing:
        raise RuntimeError(f"the log's hash storage lacks {len(missing)} stored hashes (first: {missing[0]})")
    return [found[i] for i in indexes]
