"""Bringing memory in from ChatGPT, Claude and Gemini (issue 22 item 5): `ownmem import-from
SOURCE FILE` and the PWA's "Import from ChatGPT / Claude / Gemini" both go through here.

    bytes --read()--> [Found] --plan(vault's texts)--> Plan(new, skipped) --write()--> object ids
          refuses the whole file                         pure                one store transaction

``read`` and ``plan`` are pure (no vault, clock or file): the file is checked as a whole first,
and any problem refuses it with one ``ImportFromRefused`` naming the line or item and the reason
(not UTF-8, too large, not a shape we read, a memory too long), so nothing is written.  The
shapes read, whatever the source (docs/decisions.md "Importing from ChatGPT, Claude and Gemini"):
a JSON list of strings or of objects with a ``content`` / ``text`` / ``memory`` / ``value`` field
(ChatGPT's ``memory.json``; an object wrapping the list under ``memories`` and the like), an HTML
list (``<li>``, Google Takeout's pages) and plain text or Markdown, one memory per line or bullet
(ChatGPT's "Manage memories" list pasted, Claude's memory export).

Each memory is the person's own, sealed under the owner key like ``ownmem add``: the payload's
provenance tool names the source (ApertoMemory draft-02 §3 "Data Model", provenance key 1,
"producing tool"), and the tag ``imported:SOURCE`` shows it in the list, in search and to agent
grants.  A memory whose text, whitespace normalised, is already in the vault or earlier in the
file is skipped and reported.
"""
from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from html.parser import HTMLParser
from typing import Any, Literal

from ownmem.aperto import keys as aperto_keys
from ownmem.aperto.model import Memory, MemType
from ownmem.aperto.seal import seal
from ownmem.crypto import run_sync
from ownmem.errors import MalformedInput
from ownmem.vault.store import StoredObject
from ownmem.vault.vault import DEFAULT_SCOPE, TOOL, Listing, UnlockedVault

Source = Literal["chatgpt", "claude", "gemini"]
SOURCES: tuple[Source, ...] = ("chatgpt", "claude", "gemini")
NAMES: dict[str, str] = {"chatgpt": "ChatGPT", "claude": "Claude", "gemini": "Gemini"}
Shape = Literal["json", "html", "text"]

MAX_FILE_BYTES = 16 << 20          # far above any memory list (ChatGPT keeps a few hundred)
MAX_MEMORIES = 100_000
# Bytes of UTF-8 per memory: with its payload around it, a sealed memory stays well below the
# 1 MiB payload every reader accepts (aperto.payload.MAX_PAYLOAD), as an agent's does.
MAX_MEMORY_BYTES = 256 * 1024
MAX_JSON_DEPTH = 32                # nesting a file may have before we look at it
# the fields of a JSON object that hold a memory's text, in order of preference
TEXT_FIELDS = ("content", "text", "memory", "value")
# the fields of a JSON object that wrap the list of memories
LIST_FIELDS = ("memories", "memory", "saved_info", "savedInfo", "items", "entries", "data")
TIME_FIELDS = ("created_at", "create_time", "created", "createdAt", "timestamp", "date", "updated_at",
               "update_time")
WRITE_CHUNK = 100                  # memories sealed between two progress reports

Progress = Callable[[int, int], None]


class ImportFromRefused(MalformedInput):
    """The file is refused as a whole and nothing was written; ``where`` names the line or item
    ("" for the whole file) and ``reason`` says why."""

    code = "import_from_refused"

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"import refused, nothing written: {where}: {reason}" if where
                         else f"import refused, nothing written: {reason}")
        self.where = where
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Found:
    """One memory as read from the file."""

    where: str              # "line 3", "item 4": for messages and the preview
    text: str               # trimmed of surrounding whitespace
    created: int | None     # when the source saved it, if the file says (epoch seconds)
    enabled: bool = True    # False: the person turned it off at the source (ChatGPT's "enabled")


@dataclass(frozen=True, slots=True)
class Skipped:
    where: str
    text: str
    why: str


@dataclass(frozen=True, slots=True)
class Plan:
    """What an import would write: ``new`` in file order, and what it skips and why."""

    source: Source
    shape: Shape
    new: tuple[Found, ...]
    skipped: tuple[Skipped, ...]


def source_of(name: str) -> Source:
    for s in SOURCES:
        if name == s:
            return s
    raise MalformedInput(f"import from chatgpt, claude or gemini, not {name!r}")


def normalise(text: str) -> str:
    """The text duplicates are judged by: runs of whitespace as one space, none at the ends."""
    return " ".join(text.split())


def tag_of(source: Source) -> str:
    return f"imported:{source}"


def tool_of(source: Source) -> str:
    """The payload's provenance tool (draft-02 §3 "Data Model", provenance key 1): ownmem, and where from."""
    return f"{TOOL} import-from:{source}"


# ------------------------------------------------------------------ reading (pure)

def read(source: Source, data: bytes) -> tuple[Shape, list[Found]]:
    """Every memory of the file, or ImportFromRefused naming the first problem."""
    # 1. size, before any work
    if len(data) > MAX_FILE_BYTES:
        raise ImportFromRefused("", f"the file is too large ({len(data)} bytes; at most {MAX_FILE_BYTES})")
    # 2. UTF-8, the line of the first bad byte named
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ImportFromRefused(f"line {line}", "not UTF-8 text") from None
    text = text.removeprefix("\ufeff")
    # 3. the shape, from the first character that is not whitespace
    head = text.lstrip()[:1]
    shape: Shape = "json" if head in ("[", "{") else "html" if head == "<" else "text"
    found = _json(text) if shape == "json" else _html(text) if shape == "html" else _text(text)
    # 4. each memory within the vault's limits
    if not found:
        raise ImportFromRefused("", f"no memories found (expected {_EXPECTED[shape]})")
    if len(found) > MAX_MEMORIES:
        raise ImportFromRefused("", f"more than {MAX_MEMORIES} memories")
    for f in found:
        try:
            size = len(f.text.encode("utf-8"))
        except UnicodeEncodeError:
            raise ImportFromRefused(f.where, "not valid text (a lone surrogate escape)") from None
        if size > MAX_MEMORY_BYTES:
            raise ImportFromRefused(f.where, f"a memory too long for the vault ({size} bytes; at most "
                                             f"{MAX_MEMORY_BYTES})")
    return shape, found


_EXPECTED: dict[Shape, str] = {
    "json": "a list of strings or of objects with a content, text, memory or value field",
    "html": "an HTML list, one <li> per memory",
    "text": "one memory per line or bullet",
}


def _when(v: Any) -> int | None:
    """Epoch seconds from a number or an ISO 8601 date; None for anything else (a time is
    welcome, never required)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)) and 0 <= v < 1 << 40:
        return int(v / 1000) if v > 1e11 else int(v)        # milliseconds, as JavaScript writes them
    if isinstance(v, str) and v.strip():
        try:
            d = datetime.fromisoformat(v.strip())
        except ValueError:
            return None
        d = d if d.tzinfo is not None else d.replace(tzinfo=UTC)
        t = int(d.timestamp())
        return t if t >= 0 else None
    return None


def _depth(text: str) -> int:
    """How deep the brackets of a JSON text nest (strings skipped): checked before json.loads,
    whose recursion a hostile file could exhaust."""
    depth = deepest = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _json(text: str) -> list[Found]:
    if _depth(text) > MAX_JSON_DEPTH:
        raise ImportFromRefused("", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ImportFromRefused(f"line {e.lineno}", f"not JSON ({e.msg})") from None
    items: Any = doc
    if isinstance(doc, dict):
        items = next((doc[k] for k in LIST_FIELDS if isinstance(doc.get(k), list)), None)
        if items is None:
            raise ImportFromRefused("", "a JSON object without a list of memories (under "
                                        + ", ".join(LIST_FIELDS[:4]) + ", ...)")
    if not isinstance(items, list):
        raise ImportFromRefused("", f"not the format: expected {_EXPECTED['json']}")
    out = []
    for n, item in enumerate(items, 1):
        where = f"item {n}"
        if isinstance(item, str):
            if item.strip():
                out.append(Found(where, item.strip(), None))
            continue
        if not isinstance(item, dict):
            raise ImportFromRefused(where, f"not the format: a {type(item).__name__}, expected a string or an "
                                           "object with a content, text, memory or value field")
        value = next((item[k] for k in TEXT_FIELDS if k in item), None)
        if not isinstance(value, str):
            raise ImportFromRefused(where, "not the format: no content, text, memory or value field holding text")
        if not value.strip():
            continue
        created = next((t for t in (_when(item.get(k)) for k in TIME_FIELDS) if t is not None), None)
        out.append(Found(where, value.strip(), created, item.get("enabled") is not False))
    return out


class _ListItems(HTMLParser):
    """The text of each <li>, with the line it starts on; a list nested in an item is items of
    its own.  <script> and <style> contents are never text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.items: list[tuple[int, list[str]]] = []
        self.open: list[int] = []       # indexes into items of the <li>s open now
        self.lists: list[int] = []      # len(open) when each <ul>/<ol> open now began
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "template"):
            self.hidden += 1
        elif tag in ("ul", "ol"):
            self.lists.append(len(self.open))
        elif tag == "li":
            if self.lists and len(self.open) > self.lists[-1]:
                self.open.pop()         # an <li> closes the one before it in its list (HTML's optional </li>)
            self.items.append((self.getpos()[0], []))
            self.open.append(len(self.items) - 1)
        elif tag == "br" and self.open:
            self.items[self.open[-1]][1].append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "template"):
            self.hidden = max(0, self.hidden - 1)
        elif tag == "li" and len(self.open) > (self.lists[-1] if self.lists else 0):
            self.open.pop()
        elif tag in ("ul", "ol") and self.lists:
            del self.open[self.lists.pop():]

    def handle_data(self, data: str) -> None:
        if self.open and not self.hidden:
            self.items[self.open[-1]][1].append(data)


def _html(text: str) -> list[Found]:
    p = _ListItems()
    p.feed(text)
    p.close()
    out = []
    for line, parts in p.items:
        t = normalise("".join(parts))
        if t:
            out.append(Found(f"line {line}", t, None))
    return out


_BULLET = re.compile(r"^(?:[-*+\u2022\u2023\u25e6]|\d{1,4}[.)])\s+(?:\[[ xX]\]\s+)?")
_DATED = re.compile(r"^\[(\d{4}-\d{2}-\d{2})\]\s*[-\u2013\u2014:]\s*")
_RULE = re.compile(r"^(?:[-*_]\s*){3,}$")
_BOLD_ONLY = re.compile(r"^(\*\*|__)[^*_]+\1:?$")


def _text(text: str) -> list[Found]:
    """One memory per non-blank line; Markdown's bullets and numbers are stripped, its headings
    (``#``, a bold-only line, a short line ending in ``:``), rules and code fences are structure,
    not memories.  A ``[YYYY-MM-DD] - `` prefix (what the export prompts of Claude and Gemini ask
    the other assistant to write) is the date the memory was saved."""
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "```", "~~~")) or _RULE.match(line) or _BOLD_ONLY.match(line):
            continue
        bullet = _BULLET.match(line)
        if bullet is None and line.endswith(":") and len(line) <= 80:
            continue
        line = line[bullet.end():].strip() if bullet else line
        created = None
        dated = _DATED.match(line)
        if dated:
            created = _when(dated.group(1))
            line = line[dated.end():].strip()
        if line:
            out.append(Found(f"line {n}", line, created))
    return out


def plan(source: Source, shape: Shape, found: Iterable[Found], existing: Iterable[str]) -> Plan:
    """Which memories are new: one already in the vault (``existing``: the texts of its memories)
    or earlier in the file, whitespace normalised, is skipped; so is one turned off at the source."""
    have = {normalise(t) for t in existing}
    first: dict[str, str] = {}
    new, skipped = [], []
    for f in found:
        key = normalise(f.text)
        if not f.enabled:
            skipped.append(Skipped(f.where, f.text, f"turned off in {NAMES[source]}"))
        elif key in have:
            skipped.append(Skipped(f.where, f.text, "already in the vault"))
        elif key in first:
            skipped.append(Skipped(f.where, f.text, f"repeated ({first[key]})"))
        else:
            first[key] = f.where
            new.append(f)
    return Plan(source, shape, tuple(new), tuple(skipped))


def digest(p: Plan) -> str:
    """What a preview showed, as one hash: the PWA writes a plan only when the one it computes
    again at Import has the preview's digest (the file, the source and the vault unchanged)."""
    h = hashlib.sha256(json.dumps([p.source, [[f.where, f.text, f.created] for f in p.new],
                                   [[s.where, s.why] for s in p.skipped]]).encode())
    return h.hexdigest()


def memory_of(source: Source, f: Found, now: int) -> Memory:
    # A time the source gives must not be in the future of this device (it would sort first forever).
    created = f.created if f.created is not None and f.created <= now else now
    return Memory(content=f.text, mem_type=MemType.SEMANTIC, confidence=0.8, tags=(tag_of(source),),
                  created=created, tool=tool_of(source))


# ------------------------------------------------------------------ the vault (thin I/O)

def vault_texts(listing: Listing) -> list[str]:
    """The texts duplicates are judged against: the memories the vault lists now (the head of
    each; an older version the person edited away is not "in the vault")."""
    return [e.opened.content for e in listing.heads()]


def prepare(source: Source, data: bytes, listing: Listing) -> Plan:
    shape, found = read(source, data)
    return plan(source, shape, found, vault_texts(listing))


async def write_async(v: UnlockedVault, p: Plan, *, now: int | None = None,
                      progress: Progress | None = None) -> list[bytes]:
    """Seal every new memory of ``p`` under the owner key, then store them all in one
    transaction: a crash or a failure part way leaves the vault as it was."""
    at = int(time.time()) if now is None else now
    scope = v.scope(DEFAULT_SCOPE)
    kek = await v.kek_async(scope)
    rows: list[StoredObject] = []
    for i, f in enumerate(p.new, 1):
        dek = aperto_keys.new_key()
        so = await seal(v.crypto, memory_of(p.source, f, at), signer=v.identity.sign, scope_id=scope.scope_id,
                        dek=dek)
        wrapped = await aperto_keys.wrap_dek(v.crypto, dek, kek)
        rows.append(StoredObject(so.object_id, so.scope_id, so.format_version, so.encoded, wrapped))
        if progress is not None and (i % WRITE_CHUNK == 0 or i == len(p.new)):
            progress(i, len(p.new))
    with v.store.transaction():
        for r in rows:
            v.store.put_object(r)
    return [r.object_id for r in rows]


def write(v: UnlockedVault, p: Plan, *, now: int | None = None, progress: Progress | None = None) -> list[bytes]:
    return run_sync(write_async(v, p, now=now, progress=progress))
