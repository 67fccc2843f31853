"""One ranking for every search of ownmem: ``ownmem search``, the web app's search, SAIHM's
``saihm_recall`` and UOMP's ``POST /v1/memory/query`` (docs/decisions.md, "One ranking for every
search").  Pure: it holds decrypted text only in this process's memory and does no I/O.

    query --> words.query_words (stop words out, stemmed)
          --> the matching memories the caller may see; BM25 over their fields, weighted:
              content 1, tags 2, label 2 (a UOMP item's key and description)
          --> temporal neighbours: of the matching memories in time order, one written within
              EPISODE_SECONDS of another, up to NEIGHBOURS places away, gains a share of its
              score (memories written together are about the same thing: the answer to a
              question is often the turn after the one that names it)
          --> the relevance floor: scores under FLOOR x the best are dropped
          --> ties: higher confidence, then newer, then key
    empty query --> every memory, newest first
    a query with no word (punctuation, or stop words only) --> the memories whose text or tags
          contain it, newest first (SAIHM's baseline, keyword containment)

A caller pages through the result (``Ranking.page``; ownmem.recall.pages): a cap (DEFAULT_LIMIT,
at most MAX_LIMIT) and an opaque cursor for the next page.  A cursor is an offset into the same
query's ranking; a memory written between two pages may shift it by one place (decided:
docs/decisions.md).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice

from ownmem.recall.pages import clamp_limit, cursor_at, parse_cursor
from ownmem.recall.words import query_words, words

FLOOR = 0.2                 # a hit scoring under this share of the best one is not relevant enough
K1, B = 1.2, 0.4            # BM25; a low B because memories are short and of similar length
FIELD_WEIGHTS = (1.0, 2.0, 2.0)   # content, tags, label
NEIGHBOURS = 2              # how many places away in time a neighbour may be
# the share of a neighbour's score gained, divided by the distance: more from the memory written
# just before (what this one answers or goes on with) than from the one just after
SHARE_OF_EARLIER, SHARE_OF_LATER = 0.5, 0.2
EPISODE_SECONDS = 1800      # neighbours are written at most this far apart


@dataclass(frozen=True, slots=True)
class Doc:
    """What the ranking knows of one memory."""

    key: bytes
    content: str
    tags: tuple[str, ...] = ()
    label: str = ""             # a UOMP item's key and description
    timestamp: int = 0          # seconds since the epoch
    confidence: float = 1.0


@dataclass(frozen=True, slots=True)
class _Indexed:
    doc: Doc
    terms: dict[str, float]   # weighted term frequencies over the fields
    length: float


class Ranking:
    """The index of one vault's searchable memories, keyed by ``Doc.key``.  Not thread-safe:
    the caller holds its own lock."""

    def __init__(self) -> None:
        self._docs: dict[bytes, _Indexed] = {}
        self._postings: dict[str, dict[bytes, float]] = {}
        self._total_length = 0.0
        self._order: list[bytes] | None = None        # keys by time, built on demand
        self._place: dict[bytes, int] | None = None   # each key's place in _order

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, key: object) -> bool:
        return key in self._docs

    def put(self, docs: Iterable[Doc]) -> None:
        """Add or replace memories."""
        for d in docs:
            self._drop(d.key)
            terms: dict[str, float] = {}
            for weight, text in zip(FIELD_WEIGHTS, (d.content, " ".join(d.tags), d.label), strict=True):
                if text:
                    for w in words(text):
                        terms[w] = terms.get(w, 0.0) + weight
            ix = _Indexed(d, terms, float(sum(terms.values())))
            self._docs[d.key] = ix
            self._total_length += ix.length
            for w, tf in terms.items():
                self._postings.setdefault(w, {})[d.key] = tf
        self._order = self._place = None

    def remove(self, keys: Iterable[bytes]) -> None:
        for k in keys:
            self._drop(k)
        self._order = self._place = None

    def _drop(self, key: bytes) -> None:
        old = self._docs.pop(key, None)
        if old is None:
            return
        self._total_length -= old.length
        for w in old.terms:
            p = self._postings.get(w)
            if p is not None:
                p.pop(key, None)
                if not p:
                    del self._postings[w]

    def _by_time(self) -> list[bytes]:
        if self._order is None:
            self._order = sorted(self._docs, key=lambda k: (self._docs[k].doc.timestamp, k))
        return self._order

    def search(self, query: str | None, visible: Callable[[bytes], bool] | None = None,
               tie: Callable[[bytes], str] | None = None) -> list[bytes]:
        """The keys of the memories that answer ``query``, best first; for an absent or empty
        query (or one of stop words only), every memory, newest first.

        ``visible``: the memories the caller may see; the others are not ranked.  Word rarity
        and average length are taken from the matching memories the caller may see alone, so
        the order of what a caller is shown says nothing of what it may not see (issue 19, "No
        oracle"), and a vault's size does not change how two memories compare.

        ``tie``: for records whose write times must not order them (UOMP items, whose served
        order must come from what is served: issue 19): no temporal neighbours, and ties (an
        empty query: all) in the order of ``tie`` instead of confidence and recency."""
        return list(self.ranked(query, visible, tie))

    def page(self, query: str | None, visible: Callable[[bytes], bool] | None = None,
             limit: int | None = None, cursor: str | None = None,
             tie: Callable[[bytes], str] | None = None) -> tuple[list[bytes], str | None]:
        """One page of ``search`` -> (its keys, the cursor of the next page or None).  The
        newest-first listing of an empty query stops at the page's end."""
        start, n = parse_cursor(cursor), clamp_limit(limit)
        got = list(islice(self.ranked(query, visible, tie), start, start + n + 1))
        return got[:n], (cursor_at(start + n) if len(got) > n else None)

    def ranked(self, query: str | None, visible: Callable[[bytes], bool] | None = None,
               tie: Callable[[bytes], str] | None = None) -> Iterator[bytes]:
        terms = query_words(query) if query else []
        docs = self._docs
        if not terms:
            every: Iterator[bytes] = reversed(self._by_time())
            if visible is not None:
                every = filter(visible, every)
            needle = (query or "").strip().lower()
            if needle:
                every = (k for k in every if needle in docs[k].doc.content.lower()
                         or any(needle in t.lower() for t in docs[k].doc.tags))
            return every if tie is None else iter(sorted(every, key=lambda k: (tie(k), k)))
        scores = self._bm25(terms, visible)
        if not scores:
            return iter(())
        if tie is None:
            self._neighbours(scores)
        floor = FLOOR * max(scores.values())
        if tie is not None:
            by_tie = sorted(((-round(s, 9), tie(k), k) for k, s in scores.items() if s >= floor))
            return (row[2] for row in by_tie)
        kept = [(-round(s, 9), -docs[k].doc.confidence, -docs[k].doc.timestamp, k) for k, s in scores.items()
                if s >= floor]
        kept.sort()
        return (row[3] for row in kept)

    def _bm25(self, terms: Sequence[str], visible: Callable[[bytes], bool] | None) -> dict[bytes, float]:
        """BM25 over the matching memories the caller may see, with their statistics only."""
        postings = [p for p in (self._postings.get(w) for w in terms) if p]
        matching = {k for p in postings for k in p}
        if visible is not None:
            matching = {k for k in matching if visible(k)}
        if not matching:
            return {}
        docs = self._docs
        n = len(matching)
        length = {k: docs[k].length for k in matching}
        avg = sum(length.values()) / n or 1.0
        norm = {k: K1 * (1 - B + B * ln / avg) for k, ln in length.items()}
        scores = dict.fromkeys(matching, 0.0)
        for posting in postings:
            hits = posting if visible is None else {k: tf for k, tf in posting.items() if k in matching}
            if not hits:
                continue
            idf = math.log(1 + (n - len(hits) + 0.5) / (len(hits) + 0.5)) * (K1 + 1)
            for k, tf in hits.items():
                scores[k] += idf * tf / (tf + norm[k])
        return scores

    def _neighbours(self, scores: dict[bytes, float]) -> None:
        """Among the matching memories put in time order, each gains SHARE_OF_EARLIER (or
        SHARE_OF_LATER) / distance of the score of each one up to NEIGHBOURS places before (or
        after) it and written within EPISODE_SECONDS of it, but not in the same second: memories
        written at once (an import, a batch) have no order to go by.  Only matching memories
        take part, so what did not match (or may not be seen) never moves a result."""
        if len(scores) < 2:
            return
        place = self._places()
        docs = self._docs
        order = sorted(scores, key=place.__getitem__)
        base = [scores[k] for k in order]
        times = [docs[k].doc.timestamp for k in order]
        last = len(order)
        for i, k in enumerate(order):
            t = times[i]
            for d in range(1, NEIGHBOURS + 1):
                j = i - d
                if j >= 0 and 0 < t - times[j] <= EPISODE_SECONDS:
                    scores[k] += SHARE_OF_EARLIER * base[j] / d
                j = i + d
                if j < last and 0 < times[j] - t <= EPISODE_SECONDS:
                    scores[k] += SHARE_OF_LATER * base[j] / d

    def _places(self) -> dict[bytes, int]:
        if self._place is None:
            self._place = {k: i for i, k in enumerate(self._by_time())}
        return self._place
