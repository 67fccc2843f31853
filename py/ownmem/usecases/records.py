"""Importing UOMP memory records into the vault (uomp-draft-00 "12. Memory Import Format"; the
pure parsing and checks are ownmem.uomp.records): the live head of each key, and the sealing of
checked records.  `ownmem records import` and the PWA's import screen both write through here."""
from __future__ import annotations

import time

from ownmem.aperto.model import Memory
from ownmem.uomp.control import ITEM
from ownmem.uomp.records import Record
from ownmem.vault.vault import DEFAULT_SCOPE, SUPERSEDES, TOOL, Entry, Listing, UnlockedVault


def live_keys(v: UnlockedVault, listing: Listing | None = None) -> dict[str, Entry]:
    """The live head of each UOMP key in the vault (``listing``: one already opened, as the PWA's
    worker holds it with its verified cache)."""
    out: dict[str, Entry] = {}
    for e in (listing or v.open_all()).heads():
        u = e.opened.extensions.get(ITEM)
        if isinstance(u, dict) and isinstance(u.get("key"), str):
            out[u["key"]] = e
    return out


def write_records(v: UnlockedVault, records: list[Record], heads: dict[str, Entry], *,
                  now: int | None = None) -> list[bytes]:
    """Seal one memory per record; a record whose key is in ``heads`` supersedes that live head
    (--replace) -> the new object ids."""
    at = int(time.time()) if now is None else now
    scope = v.scope(DEFAULT_SCOPE)
    out = []
    for r in records:
        exts: dict[str, object] = {ITEM: r.extension()}
        old = heads.get(r.key)
        if old is not None:
            exts[SUPERSEDES] = old.id          # --replace: the new version supersedes the live head
        m = Memory(content=r.content(), mem_type=2, confidence=1.0, tags=r.tags, created=at, tool=TOOL,
                   extensions=exts)
        out.append(v._seal_into(m, scope).object_id)  # noqa: SLF001 - records are sealed into the default scope like any memory
    return out
