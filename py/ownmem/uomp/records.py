"""UOMP records import (uomp-draft-00 "12. Memory Import Format": 12.3 Supported Input Formats,
12.4 CSV Format Requirements, 12.5 JSON Format Requirements, 12.6 Reserved Fields, 12.7 Field
Mapping, 12.8 Sensitivity, 12.9 Validation).

Pure functions: ``parse_csv`` / ``parse_json`` turn bytes into ``RawRecord``s (``--map`` first,
then the canonical aliases, then ``value.*`` nesting); ``validate`` turns those into typed
``Record``s or refuses the whole file with every per-record problem (``RecordsRefused``), so
nothing is written when anything is wrong.  ``write_records`` is the thin I/O: one sealed
memory per record, the item fields in the payload extension ``"uomp"``.

Decisions (docs/decisions.md "12. Memory Import Format"): a key is unique in the whole vault, not
only within a tag (one live head per key, issue 10 item 4), so 12.9's "unique within the target
tag" is met a fortiori; ``--replace`` supersedes the live head of that key; a key twice in one
file is refused even with ``--replace`` (which one would win is a guess).  Tags in a CSV cell or
a JSON string are split on ``;``.  ``source`` may only be ``user``: an import is the person's own
writing, sealed under the owner key, and may not pass as an agent's.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from ownmem.errors import MalformedInput

Sensitivity = Literal["low", "medium", "high"]
SENSITIVITIES: tuple[Sensitivity, ...] = ("low", "medium", "high")
RESERVED = ("key", "tags", "sensitivity", "source", "description", "created_at", "updated_at")
ALIASES: dict[str, str] = {
    "key": "key", "id": "key", "item_id": "key", "record_id": "key",
    "tags": "tags", "tag": "tags",
    "sensitivity": "sensitivity", "level": "sensitivity",
    "source": "source", "origin": "source",
    "description": "description", "desc": "description",
    "created_at": "created_at", "created": "created_at",
    "updated_at": "updated_at", "updated": "updated_at",
}
MAX_RECORDS = 100_000
MAX_BYTES = 64 * 1024 * 1024
MAX_NESTING = 16


class RecordsRefused(MalformedInput):
    """The import is refused as a whole; ``problems`` holds (record number, message), 0 for the file."""

    code = "records_refused"

    def __init__(self, problems: list[tuple[int, str]]) -> None:
        lines = [f"record {n}: {m}" if n else m for n, m in problems]
        super().__init__("import refused, nothing written:\n  " + "\n  ".join(lines))
        self.problems = tuple(problems)


@dataclass(frozen=True)
class RawRecord:
    """One input record after mapping: canonical reserved fields as found, and its value."""
    number: int                      # 1-based record (CSV: data row) number, for messages
    fields: tuple[tuple[str, Any], ...]
    value: Any
    problems: tuple[str, ...] = ()

    def get(self, name: str) -> Any:
        return dict(self.fields).get(name)


@dataclass(frozen=True)
class Record:
    number: int
    key: str
    value: Any
    tags: tuple[str, ...]
    sensitivity: Sensitivity
    source: str = "user"
    description: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    sensitivity_defaulted: bool = False

    def extension(self) -> dict[str, Any]:
        """The payload extension "uomp" of this item (section 11.2's fields but the tags, which
        are the memory's own)."""
        out: dict[str, Any] = {"key": self.key, "value": self.value, "sensitivity": self.sensitivity,
                               "source": self.source}
        for name in ("description", "created_at", "updated_at"):
            v = getattr(self, name)
            if v is not None:
                out[name] = v
        return out

    def content(self) -> str:
        """What the memory reads as in the CLI, the PWA and recall."""
        if self.description:
            return f"{self.key}: {self.description}"
        v = self.value if isinstance(self.value, str) else json.dumps(self.value, ensure_ascii=False, sort_keys=True)
        return f"{self.key}: {v}"


def parse_map(pairs: list[str]) -> dict[str, str]:
    """``--map SRC=DST`` arguments -> {SRC: DST}; DST is a reserved field or ``value.PATH``."""
    out: dict[str, str] = {}
    for p in pairs:
        src, sep, dst = p.partition("=")
        if not sep or not src or not dst:
            raise MalformedInput(f"--map takes SOURCE=FIELD, not {p!r}")
        if dst not in RESERVED and not (dst.startswith("value.") and len(dst) > 6) and dst != "value":
            raise MalformedInput(f"--map {p!r}: {dst!r} is not a field (one of {', '.join(RESERVED)}, value.NAME)")
        out[src] = dst
    return out


def _assign(value: dict[str, Any], path: list[str], v: Any) -> str | None:
    cur = value
    for part in path[:-1]:
        nxt = cur.setdefault(part, {})
        if not isinstance(nxt, dict):
            return f"value.{'.'.join(path)} collides with value.{part}"
        cur = nxt
    if path[-1] in cur:
        return f"value.{'.'.join(path)} is given twice"
    cur[path[-1]] = v
    return None


def map_record(number: int, obj: dict[str, Any], mapping: dict[str, str]) -> RawRecord:
    """One input object -> RawRecord: --map, then aliases, then value.* nesting (12.6, 12.7)."""
    fields: dict[str, Any] = {}
    value: dict[str, Any] = {}
    whole_value: Any = None
    has_value = False
    problems: list[str] = []
    for name, v in obj.items():
        target = target_of(name, mapping)
        if target in RESERVED:
            if target in fields:
                problems.append(f"{target} is given twice ({name!r} and another alias)")
            fields[target] = v
        elif target == "value":
            has_value, whole_value = True, v
        else:
            path = target[len("value."):].split(".") if target.startswith("value.") else [target]
            if len(path) > MAX_NESTING or any(not p for p in path):
                problems.append(f"{target!r} is not a value path")
                continue
            err = _assign(value, path, v)
            if err:
                problems.append(err)
    if has_value and value:
        # 12.5: other fields become value.* only when value is omitted; both would lose one silently
        problems.append("has a value and other non-reserved fields: " + ", ".join(sorted(value)))
    return RawRecord(number, tuple(sorted(fields.items())), whole_value if has_value else value, tuple(problems))


def _text(data: bytes) -> str:
    if len(data) > MAX_BYTES:
        raise RecordsRefused([(0, f"the file has more than {MAX_BYTES} bytes")])
    try:
        return data.decode("utf-8-sig")      # 12.4: UTF-8 (a BOM, as spreadsheets write it, is tolerated)
    except UnicodeDecodeError as e:
        raise RecordsRefused([(0, f"the file is not UTF-8 (byte {e.start})")]) from None


def parse_csv(data: bytes, mapping: dict[str, str] | None = None, delimiter: str = ",") -> list[RawRecord]:
    """12.4: a header row, then one record per non-empty row."""
    text = _text(data)
    rows = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        header = next(rows, None)
        if header is None or not any(h.strip() for h in header):
            raise RecordsRefused([(0, "the CSV has no header row")])
        header = [h.strip() for h in header]
        dup = sorted({h for h in header if header.count(h) > 1})
        if dup or "" in header:
            what = "duplicate columns " + ", ".join(dup) if dup else "an empty column name"
            raise RecordsRefused([(0, f"the header has {what}")])
        out: list[RawRecord] = []
        for row in rows:
            if not any(c.strip() for c in row):
                continue                     # 12.4: empty lines are ignored
            n = len(out) + 1
            if len(row) != len(header):
                out.append(RawRecord(n, (), None, (f"has {len(row)} cells, the header {len(header)}",)))
                continue
            # an empty cell is an absent field, so a missing sensitivity is caught, not read as ""
            obj = {h: c for h, c in zip(header, row, strict=True) if c != ""}
            out.append(map_record(n, obj, mapping or {}))
            if len(out) > MAX_RECORDS:
                raise RecordsRefused([(0, f"more than {MAX_RECORDS} records")])
    except csv.Error as e:
        raise RecordsRefused([(0, f"the CSV does not parse ({e})")]) from None
    return out


def parse_json(data: bytes, mapping: dict[str, str] | None = None) -> list[RawRecord]:
    """12.5: a single object or an array of objects."""
    try:
        root = json.loads(_text(data))
    except json.JSONDecodeError as e:
        raise RecordsRefused([(0, f"not JSON ({e.msg} at line {e.lineno})")]) from None
    items = root if isinstance(root, list) else [root]
    if len(items) > MAX_RECORDS:
        raise RecordsRefused([(0, f"more than {MAX_RECORDS} records")])
    out: list[RawRecord] = []
    for i, obj in enumerate(items, 1):
        if not isinstance(obj, dict):
            out.append(RawRecord(i, (), None, ("is not an object",)))
        else:
            out.append(map_record(i, obj, mapping or {}))
    return out


def _iso(s: Any) -> bool:
    if not isinstance(s, str) or len(s) < 10:
        return False
    try:
        datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _tags(v: Any) -> tuple[str, ...] | None:
    if isinstance(v, str):
        v = v.split(";")
    if not isinstance(v, list) or not all(isinstance(t, str) for t in v):
        return None
    return tuple(dict.fromkeys(t.strip() for t in v if t.strip()))


def missing_sensitivity(raw: list[RawRecord]) -> list[int]:
    return [r.number for r in raw if r.get("sensitivity") is None]


@dataclass(frozen=True)
class Checked:
    """One record as 12.9 finds it: ``record`` when it passes, else None and its ``problems``;
    what the PWA's preview shows of it (``exists``: its key has a live memory in the vault)."""
    raw: RawRecord
    record: Record | None
    problems: tuple[str, ...]
    exists: bool = False

    def to_json(self) -> dict[str, Any]:
        r, raw = self.record, self.raw
        tags = r.tags if r else (_tags(raw.get("tags")) or ())
        sens = r.sensitivity if r else raw.get("sensitivity")
        key = r.key if r else raw.get("key")
        return {"number": raw.number, "key": key if isinstance(key, str) else None, "value": raw.value,
                "tags": list(tags), "sensitivity": sens if isinstance(sens, str) else None,
                "sensitivity_defaulted": bool(r and r.sensitivity_defaulted),
                "action": "replace" if self.exists else "new", "problems": list(self.problems)}


def check(raw: list[RawRecord], *, default_sensitivity: Sensitivity | None = None,
          existing_keys: frozenset[str] = frozenset(), replace: bool = False) -> list[Checked]:
    """12.9 on every record, each with its own problems (the PWA's preview); ``validate`` is this
    with a refusal of the whole file when any record has one.

    ``default_sensitivity`` is the one the person stated (12.8) for records that give none."""
    if not raw:
        raise RecordsRefused([(0, "the file holds no records")])
    out: list[Checked] = []
    seen: dict[str, int] = {}
    for r in raw:
        mine = [*r.problems]
        key = r.get("key")
        if not isinstance(key, str) or not key.strip():
            mine.append("key is missing or empty")
            key = None
        else:
            key = key.strip()
            if key in seen:
                mine.append(f"key {key!r} is also record {seen[key]}'s")
            elif key in existing_keys and not replace:
                mine.append(f"key {key!r} is already in the vault (give --replace to supersede it)")
            seen.setdefault(key, r.number)
        sens = r.get("sensitivity")
        defaulted = False
        if sens is None:
            if default_sensitivity is None:
                mine.append("sensitivity is missing (give it per record, or state one with --sensitivity)")
            sens, defaulted = default_sensitivity, True
        elif not isinstance(sens, str) or sens.strip() not in SENSITIVITIES:
            mine.append(f"sensitivity {sens!r} is not one of low, medium, high")
        else:
            sens = sens.strip()
        tags = _tags(r.get("tags"))
        if not tags:
            mine.append("tags is missing or empty")
        for name in ("created_at", "updated_at"):
            v = r.get(name)
            if v is not None and not _iso(v):
                mine.append(f"{name} {v!r} is not an ISO 8601 time")
        source = r.get("source", ) or "user"
        if source != "user":
            mine.append(f"source {source!r}: an import is the person's own (source user)")
        desc = r.get("description")
        if desc is not None and not isinstance(desc, str):
            mine.append("description is not a string")
        exists = key is not None and key in existing_keys
        if mine:
            out.append(Checked(r, None, tuple(mine), exists))
            continue
        assert key is not None and tags and sens in SENSITIVITIES
        out.append(Checked(r, Record(r.number, key, r.value, tags, sens, "user", desc, r.get("created_at"),
                                     r.get("updated_at"), defaulted), (), exists))
    return out


def validate(raw: list[RawRecord], *, default_sensitivity: Sensitivity | None = None,
             existing_keys: frozenset[str] = frozenset(), replace: bool = False) -> list[Record]:
    """12.9 over every record; RecordsRefused with every problem, or the typed records."""
    return accepted(check(raw, default_sensitivity=default_sensitivity, existing_keys=existing_keys, replace=replace))


def accepted(checked: list[Checked]) -> list[Record]:
    """The records to write, or RecordsRefused with every problem of every record (12.9: nothing
    is written when any record fails)."""
    problems = [(c.raw.number, m) for c in checked for m in c.problems]
    if problems:
        raise RecordsRefused(problems)
    return [c.record for c in checked if c.record is not None]


def field_names(data: bytes, fmt: str, delimiter: str = ",") -> list[str]:
    """The input's field names as written, before any mapping: the CSV header, or every top-level
    name of the JSON objects in order of first appearance; [] when the file does not parse (its
    parse says why).  The PWA lists them to choose a mapping (``--map``) for."""
    try:
        text = _text(data)
    except RecordsRefused:
        return []
    if fmt == "csv":
        try:
            header = next(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True), None)
        except csv.Error:
            return []
        return [h.strip() for h in header or [] if h.strip()]
    try:
        root = json.loads(text)
    except json.JSONDecodeError:
        return []
    names: dict[str, None] = {}
    for obj in root if isinstance(root, list) else [root]:
        if isinstance(obj, dict):
            names.update(dict.fromkeys(k for k in obj if isinstance(k, str)))
    return list(names)


def target_of(name: str, mapping: dict[str, str]) -> str:
    """Where input field ``name`` goes (12.7): ``--map`` first, then the canonical aliases; a
    name that is neither a reserved field nor ``value``/``value.PATH`` is one field of the value."""
    return mapping.get(name) or ALIASES.get(name) or name


def format_of(filename: str, given: str | None = None) -> str:
    """The import format: the one given, else from the file name (.csv, else json)."""
    return given or ("csv" if filename.lower().endswith(".csv") else "json")


def parse(data: bytes, fmt: str, mapping: dict[str, str] | None = None) -> list[RawRecord]:
    if fmt == "csv":
        return parse_csv(data, mapping)
    if fmt == "json":
        return parse_json(data, mapping)
    raise MalformedInput(f"unknown import format {fmt!r} (csv or json)")
