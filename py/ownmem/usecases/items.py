"""UOMP items read from and written to the person's vault: one live item per key (the
item itself, a pure value, is ownmem.uomp.items; UOMP draft-00 "Memory Item")."""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from ownmem.aperto.model import Memory, Trust
from ownmem.errors import MalformedInput
from ownmem.uomp.items import EXTENSION, MAX_KEY, SENSITIVITIES, Item, stated_times
from ownmem.vault.vault import DEFAULT_SCOPE, MERGES, SUPERSEDES, TOOL, Entry, UnlockedVault


def item_of(e: Entry) -> Item | None:
    """The UOMP item a memory carries, or None (no "uomp" key, or not trusted)."""
    o = e.opened
    if o.trust is Trust.UNVERIFIED:
        return None
    ext = o.extensions.get(EXTENSION)
    if not isinstance(ext, dict):
        return None
    key = ext.get("key")
    if not isinstance(key, str) or not key or len(key) > MAX_KEY:
        return None
    sens = ext.get("sensitivity")
    desc = ext.get("description")
    sealed = o.updated or o.created or 0
    # an imported record's stated times are the item's (12.7); the memory's own order the heads
    created_at, updated_at = stated_times(ext, o.created or 0, sealed)
    return Item(key=key, value=ext.get("value"), tags=tuple(o.tags),
                sensitivity=sens if sens in SENSITIVITIES else "high",
                source="user" if o.trust is Trust.SELF else "agent",
                created_at=created_at, updated_at=updated_at,
                description=desc if isinstance(desc, str) else None, object_id=o.object_id, sealed_at=sealed)


def live_items(heads: Iterable[Entry], of: Callable[[Entry], Item | None] = item_of) -> dict[str, Item]:
    """key -> the one live item of each key among these heads (``of``: item_of, or a cache of it)."""
    out: dict[str, Item] = {}
    for e in heads:
        it = of(e)
        if it is None:
            continue
        cur = out.get(it.key)
        if cur is None or (it.sealed_at, it.object_id) > (cur.sealed_at, cur.object_id):
            out[it.key] = it
    return out


def put_item(v: UnlockedVault, key: str, value: Any, *, tags: Iterable[str], sensitivity: str,
             description: str | None = None, now: int | None = None) -> bytes:
    """Write ``key`` as the person's own item: a new memory superseding the live heads of that
    key the person wrote (one live head per key); -> the new object id."""
    if not key or len(key) > MAX_KEY:
        raise MalformedInput(f"a key is 1 to {MAX_KEY} characters")
    if sensitivity not in SENSITIVITIES:
        raise MalformedInput(f"sensitivity must be one of {', '.join(SENSITIVITIES)}")
    tags = tuple(tags)
    if not tags:
        raise MalformedInput("an item needs at least one tag")
    json.dumps(value)        # a JSON value, or TypeError before anything is sealed
    listing = v.open_all(allow_unverified=True)
    mine = [e for e in listing.heads() if e.opened.trust is Trust.SELF
            and (it := item_of(e)) is not None and it.key == key]
    mine.sort(key=lambda e: (e.opened.updated or e.opened.created, e.id))
    ext: dict[str, Any] = {"key": key, "value": value, "sensitivity": sensitivity, "source": "user"}
    if description is not None:
        ext["description"] = description
    exts: dict[str, object] = {EXTENSION: ext}
    at = int(time.time()) if now is None else now
    created = at
    if mine:
        exts[SUPERSEDES] = mine[-1].id
        created = mine[-1].opened.created or at
        was = mine[-1].opened.extensions.get(EXTENSION)
        if isinstance(was, dict) and isinstance(was.get("created_at"), str):
            # an imported item keeps the creation it stated; this edit is its update
            ext["created_at"] = was["created_at"]
            ext["updated_at"] = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if len(mine) > 1:
            exts[MERGES] = [e.id for e in mine[:-1]]
    memory = Memory(content=f"{key}: {json.dumps(value, ensure_ascii=False)}"
                    + (f" ({description})" if description else ""),
                    tags=tags, created=created, updated=at if mine else None, tool=TOOL, extensions=exts)
    return v._seal_into(memory, v.scope(DEFAULT_SCOPE)).object_id  # noqa: SLF001 - an item is sealed into the default scope like any memory
