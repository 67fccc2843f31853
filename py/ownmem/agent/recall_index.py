"""Ranked recall for the operator (SAIHM "saihm_recall": "Matching is operator-defined; keyword
containment is the baseline").

    plaintext of each visible head --> SQLite FTS5 table in ":memory:" (never on disk)
    query --> words (Unicode letters and digits) --> "w1"* OR "w2"* ... --> ordered by BM25
    empty query --> every cell, newest first

The index holds decrypted text, so it lives only in this process's memory: a private
in-memory SQLite connection, dropped with ``close()``.  Query text is never parsed as FTS5
syntax (an agent's query is data): each word is quoted, so ``NEAR``, ``*`` or ``"`` in it are
only words or nothing.  A query with no word at all (punctuation only) falls back to the
baseline, substring containment.

Every element carries ownmem's operator extension (docs/decisions.md, "ownmem's operator
extension on recalled cells"): ``ownmemTrust`` self | trusted | agent | unverified | shared and
``ownmemAuthorship``.
"""
from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from ownmem.aperto.frame import b64url

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_QUERY_WORDS = 64


@dataclass(frozen=True, slots=True)
class RecallEntry:
    """One recallable cell with its plaintext, as saihm_recall answers it."""

    cell_id: bytes
    plaintext: str
    holder_id: bytes          # the owner's holderId: differs from the caller's for a shared cell
    cell_nonce: bytes
    kek_version: int
    timestamp: int
    tier: str
    signature_prefix: bytes
    trust: str                # self | trusted | agent | unverified | shared
    authorship: str           # signed | attested | unknown
    author_key_id: bytes | None
    custody: bool

    def to_json(self) -> dict[str, Any]:
        return {"cellId": self.cell_id.hex(), "plaintext": self.plaintext, "holderIdHex": self.holder_id.hex(),
                "cellNonce": self.cell_nonce.hex(), "kekVersion": self.kek_version,
                "timestamp": str(self.timestamp), "tier": self.tier,
                "holderSignaturePrefix": self.signature_prefix.hex(),
                "ownmemTrust": self.trust,
                "ownmemAuthorship": {"authorship": self.authorship,
                                     "authorKey": b64url(self.author_key_id) if self.author_key_id else None,
                                     "custody": self.custody}}


def fts_query(query: str) -> str | None:
    """The FTS5 MATCH expression for an agent's query, or None if it has no word."""
    words = _WORD.findall(query.lower())[:MAX_QUERY_WORDS]
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"*' for w in words)


class RecallIndex:
    """The in-memory index of recallable cells, keyed by cellId.  Thread-safe."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute("CREATE VIRTUAL TABLE fts USING fts5(plaintext, tokenize='unicode61 remove_diacritics 2')")
        self._entries: dict[int, RecallEntry] = {}
        self._rowid: dict[bytes, int] = {}
        self._shared: set[bytes] = set()
        self._next = 1
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()
            self._entries.clear()
            self._rowid.clear()

    def __len__(self) -> int:
        return len(self._rowid)

    def cell_ids(self) -> set[bytes]:
        with self._lock:
            return set(self._rowid)

    def own_cell_ids(self) -> set[bytes]:
        """The cellIds of the vault's own cells (every cell but the shared ones)."""
        with self._lock:
            return set(self._rowid) - self._shared

    def get(self, cell_id: bytes) -> RecallEntry | None:
        with self._lock:
            rid = self._rowid.get(cell_id)
            return self._entries[rid] if rid is not None else None

    def is_shared(self, cell_id: bytes) -> bool:
        with self._lock:
            return cell_id in self._shared

    def put(self, entries: Iterable[RecallEntry]) -> None:
        """Add or replace cells of the caller's own vault."""
        self._put(entries, shared=False)

    def put_shared(self, entries: Iterable[RecallEntry]) -> None:
        """Add or replace cells another holder shares with this one (SAIHM "Sharing contracts"):
        they recall marked ``shared`` whatever label they carry, and saihm_forget answers
        not_holder for them.  ``remove`` takes them out again (revocation, expiry, erasure)."""
        self._put((replace(e, trust="shared") for e in entries), shared=True)

    def _put(self, entries: Iterable[RecallEntry], *, shared: bool) -> None:
        with self._lock, self._db:
            for e in entries:
                old = self._rowid.pop(e.cell_id, None)
                if old is not None:
                    self._db.execute("DELETE FROM fts WHERE rowid = ?", (old,))
                    del self._entries[old]
                rid = self._next
                self._next += 1
                self._db.execute("INSERT INTO fts (rowid, plaintext) VALUES (?, ?)", (rid, e.plaintext))
                self._entries[rid] = e
                self._rowid[e.cell_id] = rid
                if shared:
                    self._shared.add(e.cell_id)
                else:
                    self._shared.discard(e.cell_id)

    def remove(self, cell_ids: Iterable[bytes]) -> list[RecallEntry]:
        """Withdraw cells from recall -> the entries removed (so a failed erasure can put them back)."""
        out = []
        with self._lock, self._db:
            for cid in cell_ids:
                rid = self._rowid.pop(cid, None)
                if rid is None:
                    continue
                self._db.execute("DELETE FROM fts WHERE rowid = ?", (rid,))
                out.append(self._entries.pop(rid))
                self._shared.discard(cid)
        return out

    def search(self, query: str | None) -> list[RecallEntry]:
        """Ranked matches (BM25, best first); every cell, newest first, for an absent or empty query."""
        with self._lock:
            if query is None or not query.strip():
                return sorted(self._entries.values(), key=lambda e: (-e.timestamp, e.cell_id))
            expr = fts_query(query)
            if expr is None:
                needle = query.strip().lower()
                return [e for e in sorted(self._entries.values(), key=lambda e: (-e.timestamp, e.cell_id))
                        if needle in e.plaintext.lower()]
            rows = self._db.execute("SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY bm25(fts), rowid",
                                    (expr,)).fetchall()
            return [self._entries[r[0]] for r in rows]
