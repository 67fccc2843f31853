"""Stateless login challenges (docs/decisions.md, issue 19: "Blind server, who pays for a login: a
stranger behind the person's own address").

    challenge (32 bytes) = expires_at (4, big-endian unix seconds) || nonce (12) || tag (16)
    tag = HMAC-SHA256(k, "ownmem/v1/challenge" || 0 || vault name || 0 || expires_at || nonce)[:16]
    k   = HMAC-SHA256(server secret, "ownmem/v1/challenge-key")

Issuing one stores nothing and reads nothing (not even whether the name is held, so a held name
and a free one are answered alike); checking one needs only the key, the name and the clock.
What makes a challenge single-use is the row written when a login with it succeeded
(``Storage.use_challenge``): a row only a valid signature of the vault's sync key can make, kept
until the challenge expires.  Before, every challenge asked for was a row, and asking was charged
to the address, so a stranger behind the person's address (a carrier's NAT, a café) locked the
person's devices out of their own vault.  Pure: the secret, the clock and the nonce are
parameters.
"""
from __future__ import annotations

import hmac
import struct

CONTEXT = b"ownmem/v1/challenge"
TAG_LEN = 16
NONCE_LEN = 12
_EXPIRES = struct.Struct(">I")


def challenge_key(server_secret: bytes) -> bytes:
    return hmac.digest(server_secret, CONTEXT + b"-key", "sha256")


def _tag(key: bytes, name: str, head: bytes) -> bytes:
    return hmac.digest(key, CONTEXT + b"\x00" + name.encode() + b"\x00" + head, "sha256")[:TAG_LEN]


def make(key: bytes, name: str, expires_at: int, nonce: bytes) -> bytes:
    if len(nonce) != NONCE_LEN:
        raise ValueError(f"a challenge nonce is {NONCE_LEN} bytes")
    head = _EXPIRES.pack(expires_at) + nonce
    return head + _tag(key, name, head)


def check(key: bytes, name: str, challenge: bytes, now: float, ttl: int) -> int | None:
    """The challenge's expiry if this server issued it for ``name`` and it is live (not past its
    expiry, and not claiming more than ``ttl`` seconds ahead), else None."""
    if len(challenge) != _EXPIRES.size + NONCE_LEN + TAG_LEN:
        return None
    head, tag = challenge[:-TAG_LEN], challenge[-TAG_LEN:]
    if not hmac.compare_digest(tag, _tag(key, name, head)):
        return None
    (expires_at,) = _EXPIRES.unpack(head[:_EXPIRES.size])
    if not now <= expires_at <= now + ttl + 1:
        return None
    return int(expires_at)
