"""How the sync wire is spelled: a ``Codec`` per kind of JSON field (hex, integers, flags,
text, lists), the field types messages annotate with them, ``JsonMessage`` (encode and parse
from those annotations), JSON bodies, and the checks of CBOR bodies and their byte strings."""
from __future__ import annotations

import json
import re
import typing
from dataclasses import dataclass, fields
from typing import Annotated, Any, Self

from ownmem.crypto import cbor
from ownmem.errors import MalformedInput, WireError
from ownmem.wire.limits import (
    ED25519_SIG_LEN,
    ID_LEN,
    KEY_LEN,
    MAX_BATCH,
    MAX_BODY,
    MAX_COUNTER,
    MAX_JSON,
    SALT_LEN,
    VAULT_NAME,
)

_HEX = re.compile(r"(?:[0-9a-f]{2})*")


class Codec:
    """How one JSON field is spelled on the wire and checked when read."""

    def load(self, value: Any, name: str) -> Any:
        raise NotImplementedError

    def dump(self, value: Any) -> Any:
        return value


@dataclass(frozen=True, slots=True)
class Hex(Codec):
    """Bytes as lower-case hex pairs: one value, one spelling (bytes.fromhex alone would also
    take upper case and whitespace).  ``size`` is exact; ``limit`` caps a field of any size,
    by default at the JSON body limit, which bounds it anyway (a cap of 64 Ki digits once
    refused metadata over 32 KiB, under the 1 MiB the routes allow)."""

    size: int | None = None
    limit: int = MAX_JSON

    def load(self, value: Any, name: str) -> bytes:
        if not isinstance(value, str) or len(value) > 2 * self.limit or not _HEX.fullmatch(value):
            raise WireError(f"{name} must be a lower-case hex string")
        b = bytes.fromhex(value)
        if self.size is not None and len(b) != self.size:
            raise WireError(f"{name} must be {self.size} bytes")
        return b

    def dump(self, value: Any) -> str:
        return str(value.hex())


@dataclass(frozen=True, slots=True)
class Int(Codec):
    """An integer in [lo, hi]; never a bool, a float or a numeric string."""

    lo: int = 0
    hi: int = MAX_COUNTER

    def load(self, value: Any, name: str) -> int:
        if type(value) is not int or not self.lo <= value <= self.hi:
            raise WireError(f"{name} must be an integer from {self.lo} to {self.hi}")
        return value


@dataclass(frozen=True, slots=True)
class Flag(Codec):
    """A JSON true or false; never 0/1 or a string."""

    def load(self, value: Any, name: str) -> bool:
        if not isinstance(value, bool):
            raise WireError(f"{name} must be true or false")
        return value


@dataclass(frozen=True, slots=True)
class Text(Codec):
    """A string that matches ``pattern``, or else any printable text up to ``limit`` characters."""

    pattern: re.Pattern[str] | None = None
    limit: int = 200

    def load(self, value: Any, name: str) -> str:
        if (not isinstance(value, str) or len(value) > self.limit
                or not (self.pattern.fullmatch(value) if self.pattern else value.isprintable())):
            raise WireError(f"{name} is malformed")
        return value


@dataclass(frozen=True, slots=True)
class HexList(Codec):
    """A list of ``lo`` to ``hi`` hex fields, read as a tuple."""

    item: Hex
    lo: int
    hi: int

    def load(self, value: Any, name: str) -> tuple[bytes, ...]:
        if not isinstance(value, list) or not self.lo <= len(value) <= self.hi:
            raise WireError(f"{name} must be a list of {self.lo} to {self.hi} items")
        return tuple(self.item.load(v, name) for v in value)

    def dump(self, value: Any) -> list[str]:
        return [self.item.dump(v) for v in value]


Name = Annotated[str, Text(VAULT_NAME, 64)]
Salt = Annotated[bytes, Hex(SALT_LEN)]
Key = Annotated[bytes, Hex(KEY_LEN)]
Id = Annotated[bytes, Hex(ID_LEN)]
Signature = Annotated[bytes, Hex(ED25519_SIG_LEN)]
Blob = Annotated[bytes, Hex()]
Counter = Annotated[int, Int()]
Version = Annotated[int, Int(1)]
Ids = Annotated[tuple[bytes, ...], HexList(Hex(ID_LEN), 0, MAX_BATCH)]


def load_json(raw: bytes | str) -> Any:
    """A JSON document of an answer or request body; anything else is ``WireError``."""
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):   # also: an integer of 4300+ digits, deep nesting
        raise WireError("the body is not JSON") from None


def dump_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


_CODECS: dict[type, tuple[tuple[str, Codec], ...]] = {}


def _codecs(cls: type) -> tuple[tuple[str, Codec], ...]:
    """(field name, codec) of a message class, in field order; read once from its annotations."""
    got = _CODECS.get(cls)
    if got is None:
        hints = typing.get_type_hints(cls, include_extras=True)
        got = _CODECS[cls] = tuple((f.name, next(m for m in hints[f.name].__metadata__ if isinstance(m, Codec)))
                                   for f in fields(cls))
    return got


class JsonMessage:
    """A JSON object on the wire; each field's annotation names its ``Codec``.  Keys a
    message does not know are ignored (a newer peer may add some); every known key is
    required."""

    __slots__ = ()

    def encode(self) -> dict[str, Any]:
        return {name: codec.dump(getattr(self, name)) for name, codec in _codecs(type(self))}

    @classmethod
    def parse(cls, value: Any) -> Self:
        if not isinstance(value, dict):
            raise WireError(f"{cls.__name__} must be a JSON object")
        got = {}
        for name, codec in _codecs(cls):
            if name not in value:
                raise WireError(f"{name} is missing")
            got[name] = codec.load(value[name], name)
        out = cls(**got)
        out.check()
        return out

    def check(self) -> None:
        """Invariants across fields, checked by ``parse``; raise ``WireError``."""


@dataclass(frozen=True, slots=True)
class MessageList(Codec):
    """A list of ``lo`` to ``hi`` JSON messages of one class, read as a tuple."""

    cls: type[JsonMessage]
    lo: int
    hi: int

    def load(self, value: Any, name: str) -> tuple[Any, ...]:
        if not isinstance(value, list) or not self.lo <= len(value) <= self.hi:
            raise WireError(f"{name} must be a list of {self.lo} to {self.hi} items")
        return tuple(self.cls.parse(v) for v in value)

    def dump(self, value: Any) -> list[Any]:
        return [v.encode() for v in value]


def load_cbor(raw: bytes, what: str, max_items: int, max_depth: int) -> Any:
    """A CBOR body within the given bounds; anything else is ``WireError``."""
    try:
        return cbor.decode(raw, max_items=max_items, max_depth=max_depth)
    except MalformedInput as e:   # LimitExceeded too
        raise WireError(f"{what} is not valid CBOR ({e})") from None


def blob(v: Any, name: str, size: int | None = None, limit: int = MAX_BODY) -> bytes:
    if not isinstance(v, bytes) or (len(v) != size if size is not None else not 0 < len(v) <= limit):
        raise WireError(f"{name} must be {size if size is not None else f'1 to {limit}'} bytes")
    return v
