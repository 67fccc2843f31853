"""`ownmem records import FILE [--replace] [--format csv|json] [--map SRC=FIELD]... [--sensitivity LEVEL]`
(uomp-draft-00 "12. Memory Import Format"; the pure parts are ownmem.uomp.records).

12.8: a record without a sensitivity takes the one the person states with ``--sensitivity``
(announced, with the count); on a terminal without it the person is asked; with neither the
import is refused.  Nothing is written unless every record passes 12.9.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from ownmem.cli.common import unlock as _unlock
from ownmem.aperto.model import Memory
from ownmem.vault.vault import DEFAULT_SCOPE, SUPERSEDES, TOOL, Entry, Listing, UnlockedVault
from ownmem.uomp.records import SENSITIVITIES, Record, Sensitivity, format_of, missing_sensitivity, parse, parse_map, validate


def live_keys(v: UnlockedVault, listing: Listing | None = None) -> dict[str, Entry]:
    """The live head of each UOMP key in the vault (``listing``: one already opened, as the PWA's
    worker holds it with its verified cache)."""
    out: dict[str, Entry] = {}
    for e in (listing or v.open_all()).heads():
        u = e.opened.extensions.get("uomp")
        if isinstance(u, dict) and isinstance(u.get("key"), str):
            out[u["key"]] = e
    return out


def write_records(v: UnlockedVault, records: list[Record], heads: dict[str, Entry], *,
                  now: int | None = None) -> list[bytes]:
    at = int(time.time()) if now is None else now
    scope = v.scope(DEFAULT_SCOPE)
    out = []
    for r in records:
        exts: dict[str, object] = {"uomp": r.extension()}
        old = heads.get(r.key)
        if old is not None:
            exts[SUPERSEDES] = old.id          # --replace: the new version supersedes the live head
        m = Memory(content=r.content(), mem_type=2, confidence=1.0, tags=r.tags, created=at, tool=TOOL,
                   extensions=exts)
        out.append(v._seal_into(m, scope).object_id)
    return out


def _ask_sensitivity(count: int) -> Sensitivity | None:
    if not sys.stdin.isatty():
        return None
    ans = input(f"{count} record(s) give no sensitivity; apply which (low, medium, high; empty refuses)? ").strip()
    for s in SENSITIVITIES:
        if ans == s:
            return s
    return None


def cmd_import(args: argparse.Namespace) -> int:
    # imported here, not at the top: the PWA's worker imports this module under Pyodide, which
    # has none of what ownmem.cli needs (zxcvbn)

    fmt = format_of(args.file, args.format)
    with open(args.file, "rb") as f:
        data = f.read()
    raw = parse(data, fmt, parse_map(args.map or []))
    default: Sensitivity | None = args.sensitivity
    missing = missing_sensitivity(raw)
    if missing and default is None:
        default = _ask_sensitivity(len(missing))
    v = _unlock(args)
    heads = live_keys(v)
    records = validate(raw, default_sensitivity=default, existing_keys=frozenset(heads), replace=args.replace)
    if missing:
        print(f"applied the stated sensitivity {default!r} to {len(missing)} record(s) that gave none: "
              + ", ".join(map(str, missing[:20])) + (" ..." if len(missing) > 20 else ""), file=sys.stderr)
    ids = write_records(v, records, {k: e for k, e in heads.items() if args.replace})
    replaced = sum(1 for r in records if r.key in heads)
    print(f"imported {len(ids)} record(s)" + (f", {replaced} superseding the live one of their key" if replaced else ""))
    return 0


def register(sub: Any) -> None:
    rc = sub.add_parser("records", help="import UOMP memory records (CSV or JSON, uomp-draft-00 section 12)")
    rsub = rc.add_subparsers(dest="records_cmd", required=True, metavar="ACTION")
    im = rsub.add_parser("import", help="import a CSV or JSON file of records; nothing is written if any is invalid")
    im.add_argument("file")
    im.add_argument("--replace", action="store_true", help="supersede the live memory of a key already in the vault")
    im.add_argument("--format", choices=("csv", "json"), help="default: from the file name (.csv, else json)")
    im.add_argument("--map", action="append", metavar="SRC=FIELD",
                    help="read column/field SRC as FIELD (key, tags, sensitivity, ..., value.NAME); repeatable")
    im.add_argument("--sensitivity", choices=SENSITIVITIES,
                    help="the sensitivity of records that give none (12.8); announced with their count")
    im.set_defaults(fn=cmd_import)
