"""Terminal safety: text that came from someone else is printed inert.

A memory an agent wrote, a tag, an agent name, an audit key (the path of a stranger's
request), a server's error message: any of them can carry bytes a terminal obeys rather
than shows. ESC starts an escape sequence (colours, cursor moves, OSC 52 "write this to
the clipboard", OSC 8 links); BEL ends an OSC; CR and LF forge rows; C1 controls
(U+0080-U+009F, CSI is U+009B) act like ESC sequences on some terminals; bidi overrides
and isolates (Trojan Source, CVE-2021-42574) reorder what the eye reads.

``visible`` writes each such character as its ``\\uXXXX`` escape: readable, copyable, and
valid inside a JSON string, so `--json` output passed through it still parses to the same
text. ``SafeStream`` applies it (newlines and tabs kept) to every write of the CLI's stdout
and stderr, so no command can forget it; row printers call ``visible`` per field as well,
newlines included, so one field is one row.

Accepted ambiguity: a text holding the six characters ``\\u001b`` prints like one holding
ESC. Both are inert; the escape is what a person needs to see that something is there.
"""
from __future__ import annotations

import io
import re
from typing import TextIO, cast

# C0 and DEL and C1 (Unicode category Cc); bidi embeddings, overrides, isolates and marks;
# line and paragraph separators (some terminals and editors break lines on them); lone
# surrogates (text decoded with surrogateescape/surrogatepass; unprintable as UTF-8).
_OTHERS = "\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff"
_ROW = re.compile(f"[\x00-\x1f{_OTHERS}]")
_BLOCK = re.compile(f"[\x00-\x08\x0b-\x1f{_OTHERS}]")     # TAB and LF kept


def _escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def visible(s: str, *, newlines: bool = False) -> str:
    """`s` with every control, bidi and separator character written as ``\\uXXXX``.

    ``newlines=True`` keeps LF and TAB (a memory's own lines, in `show`); by default they are
    escaped too, so a field printed in a one-line row cannot start a forged row."""
    return (_BLOCK if newlines else _ROW).sub(_escape, s)


class SafeStream(io.TextIOBase):
    """A text stream that passes every write through ``visible(..., newlines=True)``.

    ``raw`` is the stream underneath, for the CLI's own deliberate sequences (the progress
    counter's CR, the consent panel's colour) and nothing that came from anyone else."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    def write(self, s: str) -> int:
        self.raw.write(visible(s, newlines=True))
        return len(s)

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:      # libraries ask (uvicorn, argparse's help): the terminal's own
        return str(getattr(self.raw, "encoding", None) or "utf-8")

    @encoding.setter
    def encoding(self, value: str) -> None:
        raise AttributeError("a SafeStream's encoding is its raw stream's")


def guarded(stream: TextIO) -> TextIO:
    return stream if isinstance(stream, SafeStream) else cast(TextIO, SafeStream(stream))


def raw(stream: TextIO) -> TextIO:
    """The stream under a ``SafeStream`` (itself when it is none)."""
    return stream.raw if isinstance(stream, SafeStream) else stream
