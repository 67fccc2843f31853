"""The SAIHM binding client's field rules (SAIHM custodial profile, "HTTPS binding": numbers,
booleans, identifiers; "Client conformance": what may be printed).  Pure: whatever answers at the
endpoint is hostile input at every field, used only after it parsed as its type."""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

_IDENT = re.compile(r"[!-~]{1,256}")
# C0, DEL and C1 controls, line/paragraph separators, bidi embeddings/overrides/isolates, and
# (beyond the spec's list, as cheap insurance) the bidi marks and lone surrogates, which no
# UTF-8 transcript can carry.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e"
                          "\u2066-\u2069\ud800-\udfff]")
SURROGATE = re.compile("[\ud800-\udfff]")
# Every line break the conformance list names (CR, LF, VT, FF, NEL, LS, PS), and the
# file/group/record separators that str.splitlines also honours.
_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
UINT_TEXT = re.compile(r"[0-9]{1,40}")
_DECIMAL_TEXT = re.compile(r"-?[0-9]{1,40}(?:\.[0-9]{1,40})?")
HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")
_B64URL_KEY_ID = re.compile(r"[A-Za-z0-9_-]{11}")
_EXACT_FLOAT = 2 ** 53


def ident(v: object) -> str | None:
    """A result identifier as the spec allows it to be printed, else None (never shortened)."""
    return v if isinstance(v, str) and _IDENT.fullmatch(v) else None


def printable(v: object, limit: int = 256) -> str | None:
    """An operator string that may appear in a report: non-empty, at most ``limit`` long, and
    free of every character the control-character rule names; else None (omitted)."""
    if isinstance(v, str) and 0 < len(v) <= limit and not _UNPRINTABLE.search(v):
        return v
    return None


def uint(v: object) -> int | None:
    """A non-negative integer sent as a JSON number or a decimal string."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if v >= 0 else None
    if isinstance(v, float):
        return int(v) if v.is_integer() and 0 <= v <= _EXACT_FLOAT else None
    if isinstance(v, str) and UINT_TEXT.fullmatch(v):
        return int(v)
    return None


def number(v: object) -> float | None:
    """A finite number sent as a JSON number or a decimal string."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return float(v) if abs(v) <= _EXACT_FLOAT else None
    if isinstance(v, float):
        return v if v == v and abs(v) != float("inf") else None
    if isinstance(v, str) and _DECIMAL_TEXT.fullmatch(v):
        return float(v)
    return None


def boolean(v: object) -> bool | None:
    """true, false, "true", "false", 1, 0, "1" or "0"; anything else is not a boolean."""
    if v is True or v == "true" or v == "1" or (type(v) is int and v == 1):
        return True
    if v is False or v == "false" or v == "0" or (type(v) is int and v == 0):
        return False
    return None


def lines(text: str) -> list[str]:
    """Plaintext split at every line break, so that each piece can be framed on its own line."""
    return _LINE_BREAK.split(text)


def same_id(a: str, b: str) -> bool:
    return a.lower() == b.lower()    # identifiers are ASCII; hex compares without regard to case


def compact(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def details(pairs: Sequence[tuple[str, object]]) -> str:
    """'tier STANDARD, kekVersion 1': the fields that are present, in order; nothing for absent ones."""
    return ", ".join(f"{k} {v}" for k, v in pairs if v is not None)


def bracket(v: str | None) -> str | None:
    return None if v is None else f"[{v}]"


def member(obj: object, key: str) -> object:
    return obj.get(key) if isinstance(obj, dict) else None
