"""Requests with no valid token, counted rather than audited one by one (UOMP draft-00 "Access
Control": a failed check is audited; issue 19, "Strangers write nothing").

    refused request (no token, a forged, foreign or expired one)
      -> Tally.note(code, now)                 in memory: a count per error code
      -> at the end of each WINDOW with any:  one audit entry, action "unauthenticated",
         "N requests without a valid token refused (CODE n, ...)", no key, no session

Before, each was an audit entry of its own: 53,097 credential-less GETs in 20 s made 74 audit
batches, 14.7 MB of the vault's quota and 148 log receipts, and any web page can send them to
127.0.0.1.  A summary entry never seals a batch on its own account (audit_sync.AuditSync._next):
it rides with the next batch that an agent's own requests make.  Nothing a stranger sent (its
path, key or token) is kept.  Pure but for the lock: the clock is the caller's.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

ACTION = "unauthenticated"
WINDOW = 60          # seconds per summary entry
WINDOW_ENV = "OWNMEM_UOMP_STRANGER_WINDOW"


@dataclass(frozen=True, slots=True)
class Summary:
    start: int                   # the window's first refusal (unix seconds)
    end: int                     # its last
    counts: tuple[tuple[str, int], ...]   # (error code, how many), by code

    @property
    def total(self) -> int:
        return sum(n for _, n in self.counts)

    @property
    def reason(self) -> str:
        n = self.total
        codes = ", ".join(f"{c} {k}" for c, k in self.counts)
        return f"{n} request{'s' if n != 1 else ''} without a valid token refused ({codes})"


class Tally:
    """The refusals of the current window; ``due`` hands the window over once it has ended."""

    def __init__(self, window: int = WINDOW) -> None:
        self.window = max(1, window)
        self._lock = threading.Lock()
        self._start: int | None = None
        self._end = 0
        self._counts: dict[str, int] = {}

    def note(self, code: str, now: int) -> None:
        with self._lock:
            if self._start is None:
                self._start = now
            self._end = max(self._end, now)
            self._counts[code] = self._counts.get(code, 0) + 1

    def due(self, now: int, *, final: bool = False) -> Summary | None:
        """The window's summary if it has ended (or ``final``: the service is stopping), and a
        new window begun; else None."""
        with self._lock:
            if self._start is None or (not final and now < self._start + self.window):
                return None
            s = Summary(self._start, self._end, tuple(sorted(self._counts.items())))
            self._start, self._end, self._counts = None, 0, {}
            return s
