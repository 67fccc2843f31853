"""The AI boundary (draft-02 §8.3 "The AI Boundary") in the bytes of the ApertoMemory Context-Frame Profile v0.

    fragment = "[ApertoMemory trust=<t> authorship=<a> author_key=<b64url|none> custody=<true|false>]\\n"
               + body (verbatim) + "\\n" + "[/ApertoMemory]\\n"

The profile inserts the body verbatim, so a body can contain text that looks like a
closing delimiter and a second header.  The profile's answer is that fragments are
length- and digest-committed; ownmem makes that concrete: a projection starts with a
manifest line giving the number of fragments, how many objects were excluded
(§8.3 "The AI Boundary": exclusion must be reported) and each fragment's byte length, then a SHA-256 over
those fields and all the fragments.  ``parse_projection`` splits by those lengths, never by delimiters, so
content cannot forge a frame.
"""
from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ownmem.aperto.model import OpenedMemory
from ownmem.crypto import sha256
from ownmem.errors import MalformedInput

CLOSE = b"[/ApertoMemory]\n"
_HEADER = re.compile(
    rb"\[ApertoMemory trust=(self|trusted|unverified) authorship=(signed|attested|unknown) "
    rb"author_key=([A-Za-z0-9_-]{11}|none) custody=(true|false)\]\n")
_MANIFEST = re.compile(
    rb"\[ApertoMemory-Projection v0 fragments=(\d+) excluded=(\d+) lengths=([\d,]*) "
    rb"digest=sha256:([0-9a-f]{64})\]\n")


def b64url(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode("ascii")


def fragment(trust: str, authorship: str, author_key_id: bytes | None, custody_present: bool,
             body: str) -> bytes:
    author = b64url(author_key_id) if author_key_id is not None else "none"
    header = (f"[ApertoMemory trust={trust} authorship={authorship} author_key={author} "
              f"custody={'true' if custody_present else 'false'}]\n")
    return header.encode("utf-8") + body.encode("utf-8") + b"\n" + CLOSE


def frame(o: OpenedMemory) -> bytes:
    """One opened object as one context fragment; the labels are the native result, verbatim."""
    return fragment(o.trust.value, o.authorship.value, o.author_key_id, o.custody_present, o.content)


@dataclass(frozen=True, slots=True)
class Fragment:
    trust: str
    authorship: str
    author_key: str
    custody: bool
    body: str
    encoded: bytes


def projection(memories: Sequence[OpenedMemory], *, excluded: int) -> bytes:
    """Frame many objects for a context window, with the commitments that make them unforgeable."""
    frags = [frame(o) for o in memories]
    joined = b"".join(frags)
    committed = (f"[ApertoMemory-Projection v0 fragments={len(frags)} excluded={excluded} "
                 f"lengths={','.join(str(len(f)) for f in frags)} ").encode("ascii")
    return committed + f"digest=sha256:{sha256(committed + joined).hex()}]\n".encode("ascii") + joined


def parse_fragment(b: bytes) -> Fragment:
    m = _HEADER.match(b)
    if m is None or not b.endswith(b"\n" + CLOSE):
        raise MalformedInput("not a context fragment")
    body = b[m.end():len(b) - len(CLOSE) - 1]
    return Fragment(trust=m[1].decode(), authorship=m[2].decode(), author_key=m[3].decode(),
                    custody=m[4] == b"true", body=body.decode("utf-8"), encoded=b)


def parse_projection(data: bytes) -> tuple[list[Fragment], int]:
    """-> (fragments, excluded).  Splits by the committed lengths and checks the digest."""
    m = _MANIFEST.match(data)
    if m is None:
        raise MalformedInput("projection manifest missing")
    n, excluded = int(m[1]), int(m[2])
    lengths = [int(x) for x in m[3].split(b",")] if m[3] else []
    rest = data[m.end():]
    committed = data[:m.start(4) - len(b"digest=sha256:")]
    if len(lengths) != n or sum(lengths) != len(rest) or sha256(committed + rest).hex().encode() != m[4]:
        raise MalformedInput("projection does not match its commitments")
    out, pos = [], 0
    for ln in lengths:
        out.append(parse_fragment(rest[pos:pos + ln]))
        pos += ln
    return out, excluded
