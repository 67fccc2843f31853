"""Per-vault token buckets: a burst, then a steady rate.  A pure decision over a clock."""
from __future__ import annotations

import time
from collections.abc import Callable


class RateLimiter:
    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self._buckets: dict[int, tuple[float, float]] = {}

    def take(self, key: int) -> float:
        """Take one token; returns 0 when allowed, else the seconds until one is available."""
        now = self.clock()
        tokens, at = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        if tokens < 1.0:
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate
        self._buckets[key] = (tokens - 1.0, now)
        return 0.0
