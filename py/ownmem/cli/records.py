"""`ownmem records import FILE [--replace] [--format csv|json] [--map SRC=FIELD]... [--sensitivity LEVEL]`
(uomp-draft-00 "12. Memory Import Format"; the pure parts are ownmem.uomp.records, the vault
side ownmem.usecases.records).

12.8: a record without a sensitivity takes the one the person states with ``--sensitivity``
(announced, with the count); on a terminal without it the person is asked; with neither the
import is refused.  Nothing is written unless every record passes 12.9.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from ownmem.cli.common import unlock as _unlock
from ownmem.uomp.records import SENSITIVITIES, Sensitivity, format_of, missing_sensitivity, parse, parse_map, validate
from ownmem.usecases.records import live_keys, write_records


def _ask_sensitivity(count: int) -> Sensitivity | None:
    if not sys.stdin.isatty():
        return None
    ans = input(f"{count} record(s) give no sensitivity; apply which (low, medium, high; empty refuses)? ").strip()
    for s in SENSITIVITIES:
        if ans == s:
            return s
    return None


def cmd_import(args: argparse.Namespace) -> int:
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
    superseding = f", {replaced} superseding the live one of their key" if replaced else ""
    print(f"imported {len(ids)} record(s){superseding}")
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
