"""Ranked recall for the operator (SAIHM "saihm_recall": "Matching is operator-defined; keyword
containment is the baseline"): the cells an agent may recall, ranked by ownmem's one ranking
(ownmem.recall.ranking, the same as ``ownmem search`` and the web app's), ranked among what the
caller may see only.

The index holds decrypted text, so it lives only in this process's memory, dropped with
``close()``.  A query with no word at all (punctuation only) falls back to the baseline,
substring containment (ownmem.recall.ranking).

Every element carries ownmem's operator extension (docs/decisions.md, "ownmem's operator
extension on recalled cells"): ``ownmemTrust`` self | trusted | agent | unverified | shared and
``ownmemAuthorship``.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ownmem.aperto.frame import b64url
from ownmem.recall.ranking import Doc, Ranking


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
    # what the ranking reads besides the plaintext; not part of saihm_recall's answer
    tags: tuple[str, ...] = field(default=(), compare=False)
    confidence: float | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)     # a UOMP item's key and description

    def to_json(self) -> dict[str, Any]:
        return {"cellId": self.cell_id.hex(), "plaintext": self.plaintext, "holderIdHex": self.holder_id.hex(),
                "cellNonce": self.cell_nonce.hex(), "kekVersion": self.kek_version,
                "timestamp": str(self.timestamp), "tier": self.tier,
                "holderSignaturePrefix": self.signature_prefix.hex(),
                "ownmemTrust": self.trust,
                "ownmemAuthorship": {"authorship": self.authorship,
                                     "authorKey": b64url(self.author_key_id) if self.author_key_id else None,
                                     "custody": self.custody}}


class RecallIndex:
    """The in-memory index of recallable cells, keyed by cellId.  Thread-safe."""

    def __init__(self) -> None:
        self._ranking = Ranking()
        self._entries: dict[bytes, RecallEntry] = {}
        self._shared: set[bytes] = set()
        # re-entrant: a recall's `visible` (the Guard's check) asks the index which cells are shared
        self._lock = threading.RLock()

    def close(self) -> None:
        with self._lock:
            self._ranking = Ranking()
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def cell_ids(self) -> set[bytes]:
        with self._lock:
            return set(self._entries)

    def own_cell_ids(self) -> set[bytes]:
        """The cellIds of the vault's own cells (every cell but the shared ones)."""
        with self._lock:
            return set(self._entries) - self._shared

    def get(self, cell_id: bytes) -> RecallEntry | None:
        with self._lock:
            return self._entries.get(cell_id)

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
        with self._lock:
            batch = list(entries)
            self._ranking.put(Doc(e.cell_id, e.plaintext, e.tags, e.label, e.timestamp,
                                  1.0 if e.confidence is None else e.confidence) for e in batch)
            for e in batch:
                self._entries[e.cell_id] = e
                if shared:
                    self._shared.add(e.cell_id)
                else:
                    self._shared.discard(e.cell_id)

    def remove(self, cell_ids: Iterable[bytes]) -> list[RecallEntry]:
        """Withdraw cells from recall -> the entries removed (so a failed erasure can put them back)."""
        out = []
        with self._lock:
            for cid in cell_ids:
                e = self._entries.pop(cid, None)
                if e is None:
                    continue
                out.append(e)
                self._shared.discard(cid)
            self._ranking.remove(e.cell_id for e in out)
        return out

    def search(self, query: str | None, visible: Callable[[RecallEntry], bool] | None = None) -> list[RecallEntry]:
        """The cells that answer ``query``, best first (every cell, newest first, for an absent
        or empty query), ranked among the cells ``visible`` admits only."""
        with self._lock:
            return [self._entries[k] for k in self._ranking.search(query, self._sees(visible))]

    def page(self, query: str | None, visible: Callable[[RecallEntry], bool] | None = None,
             limit: int | None = None, cursor: str | None = None,
             tie: Callable[[RecallEntry], str] | None = None) -> tuple[list[RecallEntry], str | None]:
        """One page of ``search`` (ownmem.recall.ranking.Ranking.page) -> (entries, next cursor)."""
        with self._lock:
            entries = self._entries
            by = None if tie is None else (lambda k: tie(entries[k]))
            keys, nxt = self._ranking.page(query, self._sees(visible), limit, cursor, by)
            return [self._entries[k] for k in keys], nxt

    def _sees(self, visible: Callable[[RecallEntry], bool] | None) -> Callable[[bytes], bool] | None:
        if visible is None:
            return None
        entries = self._entries
        return lambda k: visible(entries[k])
