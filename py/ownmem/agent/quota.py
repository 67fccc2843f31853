"""Per-credential write quotas of `ownmem agent` (issue 19 build 2; SAIHM "saihm_remember",
error "rate_limited"; DESIGN.md "Agent access").

One credential once staged 1,053 writes of 256 Ki characters in 20 s (281 MB): every write is
sealed, receipted in the public log, pushed to the server and kept until the person answers, so
the person pays for what an agent (or a page that talks it into a loop) asks.  Two limits per
credential, decided by one pure function over what the caller already did:

    per minute   at most ``writes_per_minute`` calls that store something (saihm_remember, a
                 staged forget or share request) and ``bytes_per_minute`` bytes of content,
                 over the sliding last 60 s                        -> 429 "rate_limited"
    staged       at most ``staged_count`` writes and requests waiting for the person, and
                 ``staged_bytes`` bytes of staged content          -> 429 "quota_exceeded"

The per-minute window lives in the service's memory (a restart forgets it: at most one more
minute's worth); the staged totals are derived from the vault, so confirming or discarding frees
them on every device's answer.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass

from ownmem.saihm.errors import B, BindingError

RATE_LIMITED = B.RATE_LIMITED       # SAIHM's own code for saihm_remember
QUOTA_EXCEEDED = B.QUOTA_EXCEEDED   # the staged total (the blind server's name for its own quota)
WINDOW = 60.0
MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class Limits:
    writes_per_minute: int = 30
    bytes_per_minute: int = 4 * MIB
    staged_count: int = 200
    staged_bytes: int = 32 * MIB


@dataclass(frozen=True, slots=True)
class Usage:
    """What one credential did in the last WINDOW seconds and has waiting for the person."""

    recent_count: int
    recent_bytes: int
    staged_count: int
    staged_bytes: int


@dataclass(frozen=True, slots=True)
class Refusal:
    code: BindingError
    message: str


def decide(limits: Limits, usage: Usage, size: int) -> Refusal | None:
    """Whether one more write of ``size`` bytes is refused; None: allowed."""
    if usage.recent_count + 1 > limits.writes_per_minute:
        return Refusal(RATE_LIMITED, f"at most {limits.writes_per_minute} writes per minute per credential")
    if usage.recent_bytes + size > limits.bytes_per_minute:
        return Refusal(RATE_LIMITED, f"at most {limits.bytes_per_minute} bytes of writes per minute per credential")
    if usage.staged_count + 1 > limits.staged_count:
        return Refusal(QUOTA_EXCEEDED, f"{usage.staged_count} writes and requests already wait for the person "
                                       f"(at most {limits.staged_count}): ask them to confirm or discard")
    if usage.staged_bytes + size > limits.staged_bytes:
        return Refusal(QUOTA_EXCEEDED, f"{usage.staged_bytes} bytes of staged writes already wait for the person "
                                       f"(at most {limits.staged_bytes}): ask them to confirm or discard")
    return None


class Window:
    """The sliding minute of one credential's writes: (time, bytes) of each, oldest first."""

    def __init__(self) -> None:
        self._events: collections.deque[tuple[float, int]] = collections.deque()
        self.refused_since: float | None = None    # the first refusal of the current run, audited

    def counts(self, now: float) -> tuple[int, int]:
        while self._events and self._events[0][0] <= now - WINDOW:
            self._events.popleft()
        return len(self._events), sum(b for _, b in self._events)

    def add(self, now: float, size: int) -> None:
        self._events.append((now, size))


def parse_size(text: str) -> int:
    """A byte count as a person types it: 1048576, 512KiB, 4MiB."""
    t = text.strip()
    for suffix, mult in (("KiB", 1024), ("MiB", MIB), ("GiB", 1024 * MIB)):
        if t.endswith(suffix):
            return int(t[: -len(suffix)]) * mult
    return int(t)
