"""The items the UOMP API serves from (a view of the operator's heads, rebuilt after each of its
refreshes) and the pure rules of what a read may name and in which order a ranked query answers
(UOMP draft-00 "Memory Guard API"; issue 19, "No oracle")."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ownmem.agent.sessions import MAX_NAME
from ownmem.uomp import guard
from ownmem.uomp.items import MAX_KEY, Item
from ownmem.usecases.items import item_of, live_items


class ItemView:
    """The live items and cellId -> item, rebuilt after each operator refresh."""

    def __init__(self) -> None:
        self.by_key: dict[str, Item] = {}
        self.by_cell: dict[bytes, Item] = {}
        self.by_tag: dict[str, list[Item]] = {}     # a tag query reads its tag's items, not all
        # the operator keeps one OpenedMemory per object until it opens it again (new trust,
        # new cell); item_of reads nothing else of an Entry, so the same OpenedMemory gives the
        # same item: each refresh (one per audit batch sealed, under load) parses only what is new
        self._of: dict[bytes, tuple[Any, Item | None]] = {}

    def _item(self, e: Any) -> Item | None:
        got = self._of.get(e.id)
        if got is not None and got[0] is e.opened:
            return got[1]
        it = item_of(e)
        self._of[e.id] = (e.opened, it)
        return it

    def rebuild(self, heads: Iterable[Any], opened: dict[bytes, tuple[Any, bytes, bytes]]) -> None:
        """``heads``: the operator's heads, links honoured once (Operator.item_heads: agent
        writes the person has not confirmed are no item yet)."""
        heads = list(heads)
        live = live_items(heads, self._item)
        keep = {e.id for e in heads}
        if len(self._of) > 2 * len(keep) + 64:
            self._of = {oid: v for oid, v in self._of.items() if oid in keep}
        cell_of = {oid: cid for oid, (_, cid, _) in opened.items()}
        self.by_cell = {cell_of[it.object_id]: it for it in live.values() if it.object_id in cell_of}
        by_tag: dict[str, list[Item]] = {}
        for it in live.values():
            for t in set(it.tags):
                by_tag.setdefault(t, []).append(it)
        self.by_tag = by_tag
        self.by_key = live          # one assignment each: readers see the old or the new view


MAX_QUERY = 4096          # characters of a ranked query's text (it is audited as the entry's key)


def too_long(req: guard.Request) -> str | None:
    """Why a request's key, tag, op or field is longer than any can be, or None.  Pure."""
    if req.key is not None and len(req.key) > (MAX_QUERY if req.path == "query" else MAX_KEY):
        return f"a key is at most {MAX_KEY} characters" if req.path != "query" else \
            f"query must be a string of at most {MAX_QUERY} characters"
    for name, v in (("tag", req.tag), ("field", req.field), ("op", req.op)):
        if v is not None and len(v) > MAX_NAME:
            return f"{name} is at most {MAX_NAME} characters"
    return None


