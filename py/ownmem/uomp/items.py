"""The UOMP memory item (the vault side, which reads and writes items as memories, is
ownmem.usecases.items) as ApertoMemory memories (UOMP draft-00 "Memory Item"; DESIGN.md "One
memory, three views", "Objects are immutable").

    ApertoMemory memory-payload
      content        the text (what SAIHM recall and the PWA show and search)
      tags           the item's tags
      created/updated
      extensions["uomp"] = {key, value, sensitivity, description?, source?}
    --> Item (key, value, tags, sensitivity, source, created_at, updated_at, description)

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
