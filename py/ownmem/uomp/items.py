"""The UOMP memory item (the vault side, which reads and writes items as memories, is
ownmem.usecases.items) as ApertoMemory memories (UOMP draft-00 "Memory Item"; DESIGN.md "One
memory, three views", "Objects are immutable").

    ApertoMemory memory-payload
      content        the text (what SAIHM recall and the PWA show and search)
      tags           the item's tags
      created/updated
      extensions["uomp"] = {key, value, sensitivity, description?, source?}
    --> Item (key, value, tags, sensitivity, source, created_at, updated_at, description)

An imported record's ``created_at``/``updated_at`` ("Memory Import Format": "Field Mapping") are
kept in the extension as given and are the item's times (``stated_times``); the memory's own
times (when it was sealed) stay ``sealed_at``, which alone orders two heads of one key, so a
stated time far in the future cannot make an old version win.

Trust is derived, never declared: ``source`` is "user" for a memory that opens as the
owner's own (Trust.SELF) and "agent" for any other trusted author, whatever the payload
claims; a memory that opens unverified is no item at all.  A missing or unknown sensitivity
reads as "high" (fail closed: reachable only by exact key).  One live head per key: when
two heads carry one key (a conflict not yet resolved), the newest ``updated`` wins, then
the greater object id, so every view picks the same one (docs/decisions.md).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

EXTENSION = "uomp"
SENSITIVITIES = ("low", "medium", "high")
FIELDS = ("key", "value", "tags", "sensitivity", "source", "created_at", "updated_at", "description")
MAX_KEY = 256


@dataclass(frozen=True, slots=True)
class Item:
    key: str
    value: Any
    tags: tuple[str, ...]
    sensitivity: str
    source: str
    created_at: int
    updated_at: int
    description: str | None
    object_id: bytes
    sealed_at: int = 0        # the memory's own updated (or created) time: orders heads of one key

    def to_json(self) -> dict[str, Any]:
        # not at the top: tokens imports PyJWT and cryptography, and this module stays importable
        # without them (the web worker's Pyodide has neither; usecases reads items there too)
        from ownmem.uomp.tokens import iso

        d: dict[str, Any] = {"key": self.key, "value": self.value, "tags": list(self.tags),
                             "sensitivity": self.sensitivity, "source": self.source,
                             "created_at": iso(self.created_at), "updated_at": iso(self.updated_at)}
        if self.description is not None:
            d["description"] = self.description
        return d


def search_label(extensions: Mapping[str, Any]) -> str:
    """What search reads of a memory's UOMP item besides its text: the key and the description
    (ownmem.recall weighs them as a label)."""
    ext = extensions.get(EXTENSION)
    if not isinstance(ext, dict):
        return ""
    parts = [ext.get("key"), ext.get("description")]
    return " ".join(p for p in parts if isinstance(p, str))[:2 * MAX_KEY + 4096]


def stated_time(v: object) -> int | None:
    """An ISO 8601 time an import stated (a zone-less one is UTC, as `records` reads it) ->
    Unix seconds, or None when it is absent or no time (the memory's own time is used)."""
    if not isinstance(v, str) or len(v) > 64:
        return None
    try:
        d = datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return None
    if d.tzinfo is None:
        d = d.replace(tzinfo=UTC)
    return int(d.timestamp())


def stated_times(ext: dict[str, Any], created: int, updated: int) -> tuple[int, int]:
    """(created_at, updated_at) of an item: the times its extension states (an imported record's),
    else the memory's own.  One stated alone stands for both (a record imported as it was: never
    changed since); updated_at is never before created_at."""
    c, u = stated_time(ext.get("created_at")), stated_time(ext.get("updated_at"))
    if c is None and u is None:
        return created, updated
    c = c if c is not None else u
    u = u if u is not None else c
    assert c is not None and u is not None
    return c, max(c, u)
