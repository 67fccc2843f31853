"""The records import screen's checks: the CLI's own parse and 12.9 check (ownmem.uomp.records,
ownmem.usecases.records) over the file the page read, and the digest that binds an import to the
preview the person saw (uomp-draft-00 "12. Memory Import Format")."""
from __future__ import annotations

import json
from typing import Any

from ownmem.crypto import sha256
from ownmem.errors import MalformedInput
from ownmem.uomp.records import SENSITIVITIES, Checked, check, format_of, parse, parse_map
from ownmem.usecases.records import live_keys
from ownmem.vault.vault import Entry, Listing, UnlockedVault


def checked_file(v: UnlockedVault, listing: Listing, data: Any, name: str, format: str, map: list[str] | None,
                 sensitivity: str, replace: bool) -> tuple[str, dict[str, Entry], list[Checked]]:
    """-> (format, live heads by key, checked records)."""
    stated = next((s for s in SENSITIVITIES if s == sensitivity), None)   # 12.8: the person's choice
    if sensitivity and stated is None:
        raise MalformedInput(f"sensitivity {sensitivity!r} is not one of low, medium, high")
    raw_bytes = bytes(data)
    fmt = format_of(name, format or None)
    mapping = parse_map(list(map or []))
    heads = live_keys(v, listing)
    checked = check(parse(raw_bytes, fmt, mapping), default_sensitivity=stated,
                    existing_keys=frozenset(heads), replace=replace)
    return fmt, heads, checked


def records_digest(checked: list[Checked], replace: bool) -> str:
    """What the preview showed, as one hash: the import writes only that (a sync that brought
    a key in between, or other choices, make another preview first)."""
    rows = [c.to_json() for c in checked]
    return sha256(json.dumps([rows, replace], sort_keys=True, ensure_ascii=True).encode()).hex()
