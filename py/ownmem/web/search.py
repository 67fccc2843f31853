"""The web app's search (docs/web.md "Search"): ownmem's one ranking (ownmem.recall.ranking,
docs/decisions.md "One ranking for every search") over the memories the list screen shows.

    list / add          --> ListedSearch.listed / .added: what the page shows, with the facets
                            its filters read (no stemming: the list's answer is not slowed)
    erasure             --> ListedSearch.keep_only: erased text leaves the index at once
    search (query,      --> the Ranking, built on the first query (the stemmer is loaded then),
            filters)        brought up to date with what changed since (not rebuilt per keystroke)
                        --> the ranked keys among the memories the filters admit

The filters are the list screen's (views/list.js): tag, type, scope, trust (or "agent"), and
whether memories that cannot be authenticated are shown.  The ranking reads its statistics
from the memories they admit only, as every caller's search does.  Holds decrypted text in the
worker's memory only, as the listing does; dropped at lock.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass

from ownmem.errors import MalformedInput
from ownmem.recall.ranking import Doc, Ranking

MAX_QUERY = 4096          # characters; a query is typed, and past this it is no search


@dataclass(frozen=True, slots=True)
class Facets:
    """What the list screen's filters read of a memory (its Entry as the page has it)."""

    tags: tuple[str, ...]
    type: str
    scope: str
    trust: str
    agent: bool           # written by an agent: format.js isAgentWritten (source "agent", not unverified)


@dataclass(frozen=True, slots=True)
class Filters:
    """The list screen's filters; "" admits every value."""

    tag: str = ""
    type: str = ""
    scope: str = ""
    trust: str = ""       # a trust value, or "agent"
    include_unverified: bool = False

    def admits(self, f: Facets) -> bool:
        # views/list.js listed() and visibleEntries(), the same tests in the same order
        if not self.include_unverified and f.trust == "unverified":
            return False
        if self.tag and self.tag not in f.tags:
            return False
        if self.type and f.type != self.type:
            return False
        if self.scope and f.scope != self.scope:
            return False
        if self.trust == "agent":
            return f.agent
        return not self.trust or f.trust == self.trust


class ListedSearch:
    """The listed memories and, once a query came, their Ranking kept in step with them."""

    def __init__(self) -> None:
        self._listed: dict[bytes, tuple[Doc, Facets]] = {}
        self._ranking: Ranking | None = None
        self._changed: set[bytes] = set()     # keys whose Doc the ranking does not have yet

    def __len__(self) -> int:
        return len(self._listed)

    @property
    def built(self) -> bool:
        return self._ranking is not None

    def listed(self, items: Iterable[tuple[Doc, Facets]]) -> None:
        """A whole new listing: what differs from the last one is marked for the ranking."""
        new = {d.key: (d, f) for d, f in items}
        if self._ranking is not None:
            old = self._listed
            self._changed |= old.keys() - new.keys()
            self._changed |= {k for k, (d, _) in new.items() if k not in old or old[k][0] != d}
        self._listed = new

    def added(self, doc: Doc, facets: Facets) -> None:
        self._listed[doc.key] = (doc, facets)
        self._changed.add(doc.key)

    def keep_only(self, live: set[bytes]) -> None:
        """Drop every memory the store no longer holds, from the ranking too (an erasure)."""
        gone = [k for k in self._listed if k not in live]
        for k in gone:
            del self._listed[k]
        if self._ranking is not None and gone:
            self._ranking.remove(gone)
            self._changed.difference_update(gone)

    def search(self, query: str, filters: Filters) -> list[bytes]:
        """The keys of the listed memories ``filters`` admits that answer ``query``, best first;
        for a blank query, all of them in the list's order (newest first, then by id)."""
        if len(query) > MAX_QUERY:
            raise MalformedInput(f"a search is at most {MAX_QUERY} characters")
        listed = self._listed
        if not query.strip():
            keys = [k for k, (_, f) in listed.items() if filters.admits(f)]
            return sorted(keys, key=lambda k: (-listed[k][0].timestamp, k))
        return self.ranking().search(query, lambda k: filters.admits(listed[k][1]))

    def ranking(self) -> Ranking:
        """The ranking of what is listed now: built once, then only what changed is put again."""
        if self._ranking is None:
            # the stemmer's files may have been unpacked since Python last listed the directory
            # (web/js/worker.js unpacks its wheel on the first search)
            importlib.invalidate_caches()
            r = Ranking()
            r.put(d for d, _ in self._listed.values())
            self._ranking, self._changed = r, set()
            return r
        if self._changed:
            changed, self._changed = self._changed, set()
            self._ranking.remove(k for k in changed if k not in self._listed)
            self._ranking.put(self._listed[k][0] for k in changed if k in self._listed)
        return self._ranking
