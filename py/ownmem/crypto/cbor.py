"""Deterministic CBOR (RFC 8949, "Core Deterministically Encoded CBOR", §4.2 "Deterministically Encoded CBOR").

Encoding follows §4.2.1 "Core Deterministic Encoding Requirements": shortest-form integers and
lengths, definite lengths only, map keys in bytewise lexicographic order of their encodings, and floats in the
shortest of half/single/double precision that represents the value exactly.
Times are bare integers (ApertoMemory §3 "epoch-seconds"), never tag 1.

Decoding is strict where strictness costs nothing (no indefinite lengths, no
duplicate map keys, no trailing bytes) and capped for hostile input: total
size, nesting depth and item count are bounded so that a few bytes cannot ask
for gigabytes.  ``Raw`` carries an already-encoded item through a re-encode byte
for byte, which is how unknown payload keys survive a rewrite (§13 "Versioning and Extensibility").
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any

from ownmem.errors import LimitExceeded, MalformedInput

MAX_DEPTH = 32
MAX_ITEMS = 1_000_000
MAX_SIZE = 1 << 30


@dataclass(frozen=True, slots=True)
class Tag:
    number: int
    value: Any


@dataclass(frozen=True, slots=True)
class Raw:
    """One complete CBOR item, kept as its original bytes."""

    encoded: bytes


# ---------------------------------------------------------------- encoding

_SMALL_HEADS = [[bytes((m << 5 | n,)) if n < 24 else bytes((m << 5 | 24, n)) for n in range(256)]
                for m in range(8)]


def head(major: int, n: int) -> bytes:
    """The head of a CBOR item: major type and argument, shortest form (for streaming encoders)."""
    if n < 256:
        return _SMALL_HEADS[major][n]
    mt = major << 5
    if n < 0x10000:
        return bytes((mt | 25,)) + n.to_bytes(2, "big")
    if n < 0x100000000:
        return bytes((mt | 26,)) + n.to_bytes(4, "big")
    if n < 0x10000000000000000:
        return bytes((mt | 27,)) + n.to_bytes(8, "big")
    raise MalformedInput("integer too large for CBOR")


def _float(x: float) -> bytes:
    if math.isnan(x):
        return b"\xf9\x7e\x00"
    # Shortest exact representation: half, then single, then double.
    try:
        h = struct.pack(">e", x)
        if struct.unpack(">e", h)[0] == x:
            return b"\xf9" + h
    except OverflowError:
        pass
    s = struct.pack(">f", x) if abs(x) <= 3.4028234663852886e38 or math.isinf(x) else None
    if s is not None and struct.unpack(">f", s)[0] == x:
        return b"\xfa" + s
    return b"\xfb" + struct.pack(">d", x)


def _enc(obj: Any, out: list[bytes]) -> None:
    t = type(obj)
    if t is int:
        out.append(head(0, obj) if obj >= 0 else head(1, -1 - obj))
    elif t is bytes:
        out.append(head(2, len(obj)))
        out.append(obj)
    elif t is str:
        b = obj.encode("utf-8")
        out.append(head(3, len(b)))
        out.append(b)
    elif t is list or t is tuple:
        out.append(head(4, len(obj)))
        for item in obj:
            _enc(item, out)
    elif t is dict:
        pairs = sorted((encode(k), v) for k, v in obj.items()) if len(obj) > 1 else (
            [(encode(k), v) for k, v in obj.items()])
        out.append(head(5, len(pairs)))
        for ek, v in pairs:
            out.append(ek)
            _enc(v, out)
    elif t is Raw:
        out.append(obj.encoded)
    elif t is bool:
        out.append(b"\xf5" if obj else b"\xf4")
    elif obj is None:
        out.append(b"\xf6")
    elif t is float:
        out.append(_float(obj))
    elif t is Tag:
        out.append(head(6, obj.number))
        _enc(obj.value, out)
    elif isinstance(obj, (bytearray, memoryview)):
        _enc(bytes(obj), out)
    else:
        raise TypeError(f"cannot encode {t.__name__} as CBOR")


def encode(obj: Any) -> bytes:
    out: list[bytes] = []
    _enc(obj, out)
    return b"".join(out)


# ---------------------------------------------------------------- decoding

class _Decoder:
    __slots__ = ("data", "pos", "items", "max_items", "max_depth")

    def __init__(self, data: bytes, max_items: int, max_depth: int) -> None:
        self.data = data
        self.pos = 0
        self.items = 0
        self.max_items = max_items
        self.max_depth = max_depth

    def item(self, depth: int) -> Any:
        # One function with the head parsed inline: this runs for every item of every
        # object opened, so attribute lookups and calls are kept to a minimum.
        data = self.data
        pos = self.pos
        n_data = len(data)
        if pos >= n_data:
            raise MalformedInput("truncated CBOR")
        if depth > self.max_depth:
            raise LimitExceeded("CBOR nesting too deep")
        self.items += 1
        if self.items > self.max_items:
            raise LimitExceeded("too many CBOR items")
        ib = data[pos]
        pos += 1
        major = ib >> 5
        ai = ib & 0x1F
        if ai < 24:
            arg = ai
        elif ai < 28:
            end = pos + (1 << (ai - 24))
            if end > n_data:
                raise MalformedInput("truncated CBOR")
            arg = int.from_bytes(data[pos:end], "big")
            pos = end
        else:
            raise MalformedInput("indefinite or reserved CBOR length")
        self.pos = pos
        if major == 0:
            return arg
        if major == 2 or major == 3:
            end = pos + arg
            if end > n_data:
                raise MalformedInput("truncated CBOR")
            self.pos = end
            if major == 2:
                return data[pos:end]
            try:
                return data[pos:end].decode("utf-8")
            except UnicodeDecodeError:
                raise MalformedInput("invalid UTF-8 in CBOR text") from None
        if major == 5:
            if 2 * arg > n_data - pos:
                raise MalformedInput("truncated CBOR")
            m: dict[Any, Any] = {}
            item = self.item
            d1 = depth + 1
            for _ in range(arg):
                k = item(d1)
                # type(), not isinstance(): True == 1 in Python, but not in CBOR
                tk = type(k)
                if tk is not int and tk is not str and tk is not bytes:
                    raise MalformedInput("unsupported CBOR map key type")
                if k in m:
                    raise MalformedInput("duplicate CBOR map key")
                m[k] = item(d1)
            return m
        if major == 4:
            if arg > n_data - pos:  # each item is at least one byte
                raise MalformedInput("truncated CBOR")
            item = self.item
            d1 = depth + 1
            return [item(d1) for _ in range(arg)]
        if major == 1:
            return -1 - arg
        if major == 6:
            return Tag(arg, self.item(depth + 1))
        # major 7: simple values and floats (the float's bits were read as the argument)
        if ai == 20:
            return False
        if ai == 21:
            return True
        if ai == 22:
            return None
        if ai == 25:
            return struct.unpack(">e", data[pos - 2:pos])[0]
        if ai == 26:
            return struct.unpack(">f", data[pos - 4:pos])[0]
        if ai == 27:
            return struct.unpack(">d", data[pos - 8:pos])[0]
        raise MalformedInput("unsupported CBOR simple value")


def decode(data: bytes, *, max_items: int = MAX_ITEMS, max_depth: int = MAX_DEPTH) -> Any:
    """Decode exactly one CBOR item; anything malformed is ``MalformedInput``."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise MalformedInput("CBOR input must be bytes")
    data = bytes(data)
    if len(data) > MAX_SIZE:
        raise LimitExceeded("CBOR input too large")
    d = _Decoder(data, max_items, max_depth)
    try:
        value = d.item(0)
    except RecursionError:
        raise LimitExceeded("CBOR nesting too deep") from None
    if d.pos != len(data):
        raise MalformedInput("trailing bytes after CBOR item")
    return value


def decode_map_raw(data: bytes, *, max_items: int = MAX_ITEMS) -> dict[Any, tuple[Any, bytes]]:
    """Decode a top-level map, keeping each value's exact bytes beside its value.

    Used for memory-payload, whose unrecognised keys must be re-emitted byte for
    byte (ApertoMemory §13 "Versioning and Extensibility") even if their original encoding was not the shortest.
    """
    data = bytes(data)
    d = _Decoder(data, max_items, MAX_DEPTH)
    if not data or data[0] >> 5 != 5:
        raise MalformedInput("expected a CBOR map")
    ai = data[0] & 0x1F
    if ai < 24:
        n, d.pos = ai, 1
    elif ai < 28:
        size = 1 << (ai - 24)
        if len(data) < 1 + size:
            raise MalformedInput("truncated CBOR")
        n, d.pos = int.from_bytes(data[1:1 + size], "big"), 1 + size
    else:
        raise MalformedInput("indefinite or reserved CBOR length")
    out: dict[Any, tuple[Any, bytes]] = {}
    try:
        for _ in range(n):
            k = d.item(1)
            if type(k) not in (int, str, bytes):
                raise MalformedInput("unsupported CBOR map key type")
            if k in out:
                raise MalformedInput("duplicate CBOR map key")
            start = d.pos
            v = d.item(1)
            out[k] = (v, data[start:d.pos])
    except RecursionError:
        raise LimitExceeded("CBOR nesting too deep") from None
    if d.pos != len(data):
        raise MalformedInput("trailing bytes after CBOR item")
    return out
