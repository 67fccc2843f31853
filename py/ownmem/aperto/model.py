"""The typed vocabulary of the ApertoMemory format (draft-02 §3 "Data Model").

Objects here are frozen: once you hold a ``SealedObject`` or an ``OpenedMemory``
its invariants were checked at the boundary that built it.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from ownmem.crypto import cbor
from ownmem.errors import MalformedInput

FORMAT_VERSION = 2
LEGACY_VERSION = 1
ID_LEN = 16
KEY_ID_LEN = 8


class MemType(enum.IntEnum):
    EPISODIC = 1
    SEMANTIC = 2
    PROCEDURAL = 3

    @classmethod
    def parse(cls, name: object) -> MemType:
        """A type by name, as a person or a form gives it; anything else is ``MalformedInput``."""
        if isinstance(name, str) and name.upper() in cls.__members__:
            return cls[name.upper()]
        shown = repr(name)[:40] if isinstance(name, str) else type(name).__name__
        raise MalformedInput(f"unknown memory type {shown} (episodic, semantic, procedural)")


def type_name(value: int) -> str:
    """Consumers report an unrecognised type verbatim rather than refusing (§3.2 "What a Producer
    Must Refuse to Write")."""
    try:
        return MemType(value).name.lower()
    except ValueError:
        return str(value)


class Trust(str, enum.Enum):
    SELF = "self"
    TRUSTED = "trusted"
    UNVERIFIED = "unverified"


class Authorship(str, enum.Enum):
    SIGNED = "signed"
    ATTESTED = "attested"
    UNKNOWN = "unknown"


# Wire values of the informational payload field 5 (never read as authoritative).
WIRE_TRUST_SELF = 1


@dataclass(frozen=True, slots=True)
class Custody:
    """A Custody Record (payload key 20), well-formed by construction (§7 "Custody Records")."""

    original_version: int
    claimed_author: bytes        # author_key_id the original object claimed (8 bytes)
    resealed_at: int
    proven_author: bytes | None  # author_key_id proven at re-seal time; None = not proven

    def to_cbor(self) -> dict[int, Any]:
        m: dict[int, Any] = {1: self.original_version, 2: self.claimed_author, 3: self.resealed_at}
        if self.proven_author is not None:
            m[4] = self.proven_author
        return m


@dataclass(frozen=True, slots=True)
class Memory:
    """What a Producer writes: the cleartext memory-payload before sealing."""

    content: str
    mem_type: int = MemType.SEMANTIC
    confidence: float = 0.8
    tags: tuple[str, ...] = ()
    created: int = 0
    updated: int | None = None
    tool: str = "ownmem/0.1"
    session: str | None = None
    extensions: dict[str, Any] | None = None    # payload key 10 (ownmem puts "uomp", "supersedes" here)
    custody: Custody | None = None               # set only by migration / quarantine
    preserved: dict[int, cbor.Raw] = field(default_factory=dict)  # unknown and reserved keys, verbatim
    # key 10 as read: re-emitted verbatim while unchanged (§3.1 "Reserved Fields")
    extensions_raw: cbor.Raw | None = None


@dataclass(frozen=True, slots=True)
class SealedObject:
    """A parsed sealed-object envelope (the cleartext a Blind Server may see)."""

    object_id: bytes
    scope_id: bytes
    format_version: int
    encrypt0: bytes
    encoded: bytes                  # the exact bytes it was parsed from / sealed to
    dek_wrap_ref: bytes | None = None


@dataclass(frozen=True, slots=True)
class OpenedMemory:
    """An opened object with its trust derived at read time (§6 "Trust Is Derived, Never Declared",
    §7 "Custody Records")."""

    object_id: bytes
    scope_id: bytes
    format_version: int
    content: str
    mem_type: int
    confidence: float | None        # None when absent or out of range (§8.3 "The AI Boundary")
    tags: tuple[str, ...]
    created: int | None
    updated: int | None
    tool: str | None
    session: str | None
    trust: Trust
    authorship: Authorship
    author_key_id: bytes | None     # the author reported (proven author for attested objects)
    signer_key_id: bytes | None     # the key that verified the signature, if any
    claimed_author_key_id: bytes | None  # an unproven claim, exposed separately
    signature_verified: bool
    custody_present: bool
    custody: Custody | None         # None when absent or malformed
    extensions: dict[str, Any]
    schema_violations: tuple[str, ...]
    payload: bytes                  # the signed payload, verbatim, for lossless re-encoding
    memory: Memory                  # the payload as a Producer value (unknown keys preserved)

    @property
    def type_name(self) -> str:
        return type_name(self.mem_type)
