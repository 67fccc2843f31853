"""Pages of a ranking: how many a search answers at once and the cursor of the next page.  Apart
from the ranking so that a client that only checks a page (ownmem mcp, keyless: it ranks
nothing) loads only this."""
from __future__ import annotations

import re

from ownmem.errors import MalformedInput

DEFAULT_LIMIT = 10
MAX_LIMIT = 100

_CURSOR_PREFIX = "o"
# what a cursor looks like: "o" and an offset in ASCII digits (str.isdigit takes "１" and "²" too)
CURSOR_SHAPE = re.compile(r"o[0-9]{1,9}")


class CursorError(MalformedInput):
    """A cursor no search handed out."""

    code = "bad_cursor"


def is_limit(v: object) -> bool:
    """Whether ``v`` is a page size a caller may ask for: a whole number from 1 to MAX_LIMIT."""
    return isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_LIMIT


def clamp_limit(limit: int | None) -> int:
    """A caller's ``limit``: DEFAULT_LIMIT when absent, at least 1, at most MAX_LIMIT."""
    if limit is None:
        return DEFAULT_LIMIT
    return max(1, min(int(limit), MAX_LIMIT))


def cursor_at(offset: int) -> str:
    return f"{_CURSOR_PREFIX}{offset}"


def parse_cursor(cursor: str | None) -> int:
    """The offset a cursor names; CursorError for anything no search handed out."""
    if cursor is None or cursor == "":
        return 0
    if not CURSOR_SHAPE.fullmatch(cursor):
        raise CursorError("this cursor was not handed out by a search")
    return int(cursor[len(_CURSOR_PREFIX):])
