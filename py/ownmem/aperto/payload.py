"""memory-payload encoding: strict on write, lenient on read (draft-02 §2 "Conformance: Who
This Specification Binds", §3 "Data Model", §3.2 "What a Producer Must Refuse to Write",
§13 "Versioning and Extensibility").

    memory-payload = {1: type, 2: content, 3: confidence, 4: {1: tool, 2: author_key_id, ?3: session},
                      5: trust (informational), ?6: [tags], 7: {1: created, ?2: updated},
                      ?8 embedding, ?9 expires_at, ?10 extensions, ?20 custody, * uint => any}

``encode_payload`` refuses what a Producer must not write.  ``decode_payload``
never refuses an authentic object for a schema violation it can report instead:
out-of-range confidence is reported as absent and flagged; a malformed custody
record degrades trust (the caller sees ``custody_present`` with ``custody=None``).
Keys it does not interpret (8, 9, unknown integers) are kept as raw bytes.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any

from ownmem.aperto.model import KEY_ID_LEN, Custody, Memory, MemType
from ownmem.crypto import cbor
from ownmem.errors import MalformedInput, ProducerRefusal

CUSTODY_KEY = 20
EXTENSIONS_KEY = 10
_INTERPRETED = {1, 2, 3, 4, 5, 6, 7, EXTENSIONS_KEY, CUSTODY_KEY}
MAX_PAYLOAD = 1 << 20
_MEM_TYPES = frozenset(int(t) for t in MemType)


def valid_confidence(c: Any) -> bool:
    return (type(c) in (float, int)) and not math.isnan(c) and not math.isinf(c) and 0.0 <= c <= 1.0


def check_custody(c: Custody) -> None:
    if type(c.original_version) is not int or c.original_version < 0:
        raise ProducerRefusal("custody record: original format_version must be an unsigned integer")
    if not isinstance(c.claimed_author, bytes) or len(c.claimed_author) != KEY_ID_LEN:
        raise ProducerRefusal("custody record: claimed author_key_id must be 8 bytes")
    if type(c.resealed_at) is not int or c.resealed_at < 0:
        raise ProducerRefusal("custody record: re-seal time must be an unsigned integer")
    if c.proven_author is not None and (not isinstance(c.proven_author, bytes)
                                        or len(c.proven_author) != KEY_ID_LEN):
        raise ProducerRefusal("custody record: proven author_key_id must be 8 bytes")


def check_memory(m: Memory) -> None:
    """The Producer refusals of §3.2 "What a Producer Must Refuse to Write", plus the type rules of the schema."""
    if not isinstance(m.content, str) or not m.content:
        raise ProducerRefusal("content must be a non-empty UTF-8 string")
    try:
        m.content.encode("utf-8")
    except UnicodeEncodeError:
        raise ProducerRefusal("content is not valid UTF-8 (lone surrogate)") from None
    if type(m.mem_type) is bool or m.mem_type not in _MEM_TYPES:
        raise ProducerRefusal(f"memory type {m.mem_type!r} is outside the enumeration")
    if not valid_confidence(m.confidence) or type(m.confidence) is bool:
        raise ProducerRefusal(f"confidence must be a number in [0.0, 1.0], got {m.confidence!r}")
    if not all(isinstance(t, str) for t in m.tags):
        raise ProducerRefusal("tags must be strings")
    if type(m.created) is not int or m.created < 0:
        raise ProducerRefusal("created must be epoch seconds (unsigned integer)")
    if m.updated is not None and (type(m.updated) is not int or m.updated < 0):
        raise ProducerRefusal("updated must be epoch seconds (unsigned integer)")
    if not isinstance(m.tool, str):
        raise ProducerRefusal("provenance tool must be a string")
    if m.custody is not None:
        check_custody(m.custody)
    for k in m.preserved:
        # key 10 that decode_payload could not interpret travels verbatim (§3.1 "Reserved Fields")
        verbatim_extensions = k == EXTENSIONS_KEY and m.extensions is None
        if type(k) is not int or k < 0 or (k in _INTERPRETED and not verbatim_extensions):
            raise ProducerRefusal(f"preserved payload key {k!r} collides with a defined field")


def _extensions(m: Memory) -> bytes | None:
    """Key 10: the bytes as read while the map is unchanged (§3.1 "Reserved Fields": reserved fields
    are kept verbatim)."""
    if m.extensions_raw is not None and m.extensions is not None:
        if cbor.encode(cbor.decode(m.extensions_raw.encoded)) == cbor.encode(m.extensions):
            return m.extensions_raw.encoded
    if m.extensions:
        return cbor.encode(m.extensions)
    return None


def encode_payload(m: Memory, author_key_id: bytes) -> bytes:
    """Deterministic CBOR of the payload, assembled field by field (it runs once per seal).

    Keys are unsigned integers, whose canonical order is numeric order; each value is
    encoded by the rules of cbor.encode, so the result equals cbor.encode of the map."""
    check_memory(m)
    head = cbor.head
    content = m.content.encode("utf-8")
    tool = m.tool.encode("utf-8")
    prov = b"\x01" + head(3, len(tool)) + tool + b"\x02" + head(2, len(author_key_id)) + author_key_id
    if m.session is not None:
        sess = m.session.encode("utf-8")
        prov = b"\xa3" + prov + b"\x03" + head(3, len(sess)) + sess
    else:
        prov = b"\xa2" + prov
    times = b"\x01" + head(0, m.created)
    times = (b"\xa2" + times + b"\x02" + head(0, m.updated)) if m.updated is not None else b"\xa1" + times
    fields: list[tuple[int, bytes]] = [
        (1, head(0, int(m.mem_type))), (2, head(3, len(content)) + content),
        (3, cbor.encode(float(m.confidence))), (4, prov), (5, b"\x01"), (7, times)]
    if m.tags:
        fields.append((6, head(4, len(m.tags)) + b"".join(head(3, len(t)) + t for t in
                                                          (x.encode("utf-8") for x in m.tags))))
    ext = _extensions(m)
    if ext is not None:
        fields.append((EXTENSIONS_KEY, ext))
    if m.custody is not None:
        fields.append((CUSTODY_KEY, cbor.encode(m.custody.to_cbor())))
    for k, raw in m.preserved.items():
        if k != EXTENSIONS_KEY or ext is None:
            fields.append((k, raw.encoded))
    fields.sort(key=lambda kv: kv[0])
    return head(5, len(fields)) + b"".join(head(0, k) + v for k, v in fields)


def payload_map(m: Memory, author_key_id: bytes) -> dict[int, Any]:
    """The payload as a map (for tests and tools); ``encode_payload`` is its encoding."""
    decoded = cbor.decode(encode_payload(m, author_key_id))
    assert isinstance(decoded, dict)  # encode_payload always writes a map
    return decoded


@dataclass(frozen=True, slots=True)
class DecodedPayload:
    memory: Memory
    claimed_author: bytes | None
    confidence: float | None
    custody_present: bool
    violations: tuple[str, ...]


def _custody(v: Any) -> Custody | None:
    """A well-formed record, or None: malformed custody degrades, never raises (§7 "Custody Records", vector 014)."""
    if not isinstance(v, dict):
        return None
    ver, claimed, at, proven = v.get(1), v.get(2), v.get(3), v.get(4)
    if type(ver) is not int or ver < 0 or type(at) is not int or at < 0:
        return None
    if not isinstance(claimed, bytes) or len(claimed) not in (0, KEY_ID_LEN):
        return None
    if proven is not None and (not isinstance(proven, bytes) or len(proven) != KEY_ID_LEN):
        return None
    if set(v) - {1, 2, 3, 4}:
        return None
    return Custody(original_version=ver, claimed_author=claimed, resealed_at=at,
                   proven_author=proven)


def _uint_at(data: bytes, pos: int) -> tuple[int, int]:
    """A shortest-form unsigned integer at ``pos`` -> (value, next position); -1 if it is not one."""
    ib = data[pos]
    if ib < 24:
        return ib, pos + 1
    if ib == 24 and data[pos + 1] >= 24:
        return data[pos + 1], pos + 2
    if ib in (25, 26, 27):
        size = 1 << (ib - 24)
        v = int.from_bytes(data[pos + 1:pos + 1 + size], "big")
        if v >= 1 << (4 * size) and pos + 1 + size <= len(data):
            return v, pos + 1 + size
    return -1, pos


def _text_at(data: bytes, pos: int) -> tuple[str | None, int]:
    ib = data[pos]
    if 0x60 <= ib < 0x78:
        start, n = pos + 1, ib - 0x60
    elif ib == 0x78 and data[pos + 1] >= 24:
        start, n = pos + 2, data[pos + 1]
    elif ib == 0x79 and int.from_bytes(data[pos + 1:pos + 3], "big") >= 0x100:
        start, n = pos + 3, int.from_bytes(data[pos + 1:pos + 3], "big")
    else:
        return None, pos
    end = start + n
    if end > len(data):
        return None, pos
    try:
        return data[start:end].decode("utf-8"), end
    except UnicodeDecodeError:
        return None, pos


def _fast_payload(data: bytes) -> DecodedPayload | None:
    """The layout every plain memory has ({1 type, 2 content, 3 confidence, 4 {1 tool, 2 kid},
    5 trust, ?6 [tags], 7 {1 created}}, canonical), read in one pass.  None means "not that
    layout": the generic decoder then decides, so the result is always the same."""
    n0 = data[0]
    if n0 not in (0xA6, 0xA7) or data[1] != 1:
        return None
    mem_type, pos = _uint_at(data, 2)
    if mem_type < 0 or data[pos] != 2:
        return None
    content, pos = _text_at(data, pos + 1)
    if content is None or data[pos] != 3:
        return None
    fb = data[pos + 1]
    if fb == 0xFB:
        conf, pos = struct.unpack(">d", data[pos + 2:pos + 10])[0], pos + 10
    elif fb == 0xFA:
        conf, pos = struct.unpack(">f", data[pos + 2:pos + 6])[0], pos + 6
    elif fb == 0xF9:
        conf, pos = struct.unpack(">e", data[pos + 2:pos + 4])[0], pos + 4
    else:
        return None
    if data[pos:pos + 3] != b"\x04\xa2\x01":
        return None
    tool, pos = _text_at(data, pos + 3)
    if tool is None or data[pos:pos + 2] != b"\x02\x48":
        return None
    claimed, pos = data[pos + 2:pos + 10], pos + 10
    if data[pos] != 5:
        return None
    trust, pos = _uint_at(data, pos + 1)
    if trust < 0:
        return None
    tags: list[str] = []
    if n0 == 0xA7:
        if data[pos] != 6 or not 0x80 <= data[pos + 1] < 0x98:
            return None
        count, pos = data[pos + 1] - 0x80, pos + 2
        for _ in range(count):
            tag, pos = _text_at(data, pos)
            if tag is None:
                return None
            tags.append(tag)
    if data[pos:pos + 3] != b"\x07\xa1\x01":
        return None
    created, pos = _uint_at(data, pos + 3)
    if created < 0 or pos != len(data) or len(claimed) != 8:
        return None
    ok = valid_confidence(conf)
    memory = Memory(content=content, mem_type=mem_type, confidence=float(conf) if ok else 0.0, tags=tuple(tags),
                    created=created, updated=None, tool=tool, session=None, extensions=None, custody=None,
                    preserved={})
    return DecodedPayload(memory=memory, claimed_author=claimed, confidence=float(conf) if ok else None,
                          custody_present=False, violations=() if ok else ("confidence out of range",))


def decode_payload(data: bytes) -> DecodedPayload:
    """Parse a signed payload.  Raises MalformedInput only when there is no memory to report."""
    if len(data) > MAX_PAYLOAD:
        raise MalformedInput("payload too large")
    try:
        fast = _fast_payload(data)
    except (IndexError, struct.error):   # truncated: the generic decoder says how
        fast = None
    if fast is not None:
        return fast
    return decode_payload_generic(data)


def decode_payload_generic(data: bytes) -> DecodedPayload:
    """Any payload: each field checked and reported on, unknown keys kept verbatim."""
    if len(data) > MAX_PAYLOAD:
        raise MalformedInput("payload too large")
    raw = cbor.decode_map_raw(data, max_items=100_000)
    violations: list[str] = []

    content = raw.get(2, (None, b""))[0]
    if not isinstance(content, str):
        raise MalformedInput("payload content is not text")
    mem_type = raw.get(1, (None, b""))[0]
    if type(mem_type) is not int:
        raise MalformedInput("payload memory type is not an integer")

    conf = raw.get(3, (None, b""))[0]
    confidence: float | None = float(conf) if valid_confidence(conf) and type(conf) is not bool else None
    if confidence is None:
        violations.append("confidence out of range" if 3 in raw else "confidence absent")

    prov = raw.get(4, ({}, b""))[0]
    if not isinstance(prov, dict):
        prov = {}
        violations.append("provenance malformed")
    claimed = prov.get(2)
    claimed = claimed if isinstance(claimed, bytes) and len(claimed) == KEY_ID_LEN else None
    tool = prov.get(1) if isinstance(prov.get(1), str) else None
    session = prov.get(3) if isinstance(prov.get(3), str) else None

    tags_v = raw.get(6, ([], b""))[0]
    if isinstance(tags_v, list) and all(isinstance(t, str) for t in tags_v):
        tags = tuple(tags_v)
    else:
        tags = ()
        violations.append("tags malformed")

    times = raw.get(7, ({}, b""))[0]
    times = times if isinstance(times, dict) else {}
    created = times.get(1) if type(times.get(1)) is int else None
    updated = times.get(2) if type(times.get(2)) is int else None
    if created is None:
        violations.append("created time absent")

    ext_v = raw.get(EXTENSIONS_KEY, (None, b""))[0]
    extensions = ext_v if isinstance(ext_v, dict) and all(isinstance(k, str) for k in ext_v) else None
    extensions_raw = cbor.Raw(raw[EXTENSIONS_KEY][1]) if extensions is not None else None
    preserved = {k: cbor.Raw(r) for k, (_, r) in raw.items() if k not in _INTERPRETED}
    if EXTENSIONS_KEY in raw and extensions is None:
        # not ours to interpret; keep it verbatim
        preserved[EXTENSIONS_KEY] = cbor.Raw(raw[EXTENSIONS_KEY][1])

    custody_present = CUSTODY_KEY in raw
    custody = _custody(raw[CUSTODY_KEY][0]) if custody_present else None
    if custody_present and custody is None:
        violations.append("custody record malformed")

    memory = Memory(content=content, mem_type=mem_type,
                    confidence=confidence if confidence is not None else 0.0,
                    tags=tags, created=created or 0, updated=updated, tool=tool or "",
                    session=session, extensions=extensions, custody=custody, extensions_raw=extensions_raw,
                    preserved={k: v for k, v in preserved.items() if type(k) is int})
    return DecodedPayload(memory=memory, claimed_author=claimed, confidence=confidence,
                          custody_present=custody_present, violations=tuple(violations))
