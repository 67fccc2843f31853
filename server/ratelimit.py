"""Token buckets: a burst, then a steady rate.  A pure decision over a clock.

The server keeps three (app.py): per vault, charged only once a request's credential for
that vault checked, so nobody else can spend a vault's requests; per client address, charged
by every public route and by every failed credential; and per client address for
registrations.  An address is what ``client_key`` makes of the peer (after uvicorn applied
X-Forwarded-For from a trusted proxy): an IPv4 address, or the /64 an IPv6 address is in
(one subscriber commonly holds a whole /64).  The buckets kept are bounded in number: past
``max_keys`` the bucket touched longest ago is forgotten (a forgotten bucket is a full one).
"""
from __future__ import annotations

import ipaddress
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any

MAX_KEYS = 100_000


class RateLimiter:
    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic,
                 max_keys: int = MAX_KEYS) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a rate limit needs a positive rate and a burst of at least 1")
        self.rate, self.burst, self.clock, self.max_keys = rate, burst, clock, max_keys
        self._buckets: OrderedDict[Hashable, tuple[float, float]] = OrderedDict()

    def take(self, key: Hashable) -> float:
        """Take one token; returns 0 when allowed, else the seconds until one is available."""
        now = self.clock()
        tokens, at = self._buckets.pop(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        wait = 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate
        self._buckets[key] = (tokens - 1.0 if not wait else tokens, now)
        if len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return wait


def client_key(scope: Mapping[str, Any]) -> str:
    """The address a request is charged to: IPv4 as it is, IPv6 by its /64."""
    client = scope.get("client")
    host = str(client[0]) if client else ""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host          # a Unix socket, or a proxy's name for the client: as it is
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return f"{ipaddress.IPv6Network((ip, 64), strict=False).network_address}/64"
    return str(ip)
