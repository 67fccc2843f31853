"""UOMP capability tokens (UOMP draft-00 "Capability Token": "Format", "Claims", "Validity").

    claims (every claim of "Claims", plus iat/exp)
      --PyJWT, alg EdDSA, header kid--> compact JWT
    signing key = Ed25519 seed = the vault's purpose key "ownmem/v1/uomp-auth" (DESIGN.md "Keys")
    kid = the first 16 bytes of SHA-256(public key), hex

``verify`` does the first two checks of "Access Control" and nothing else, in that order:
1. the signature (an allowlist of exactly EdDSA; a kid we do not hold is a bad signature),
2. ``exp`` and ``expires_at``, each checked on its own.
Session state, blacklist, profile and audience are the Guard's (guard.py), because they
need state this module must not touch.
"""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ownmem.purposes import Purpose
from ownmem.uomp.errors import InvalidToken, TokenExpired

AUTH_INFO = Purpose.UOMP_AUTH
VERSION = "1.0"
MAX_TOKEN = 16 * 1024      # bytes of a bearer token we parse at all


@functools.lru_cache(maxsize=1 << 14)
def _iso(t: int) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso(t: float) -> str:
    """ISO 8601 UTC to the second; remembered (every item read formats two of these)."""
    return _iso(int(t))


def parse_iso(s: object) -> int:
    if not isinstance(s, str) or len(s) > 40:
        raise ValueError("not an ISO 8601 time")
    d = datetime.fromisoformat(s.replace("Z", "+00:00"))
    if d.tzinfo is None:
        raise ValueError("an ISO 8601 time without a zone")
    return int(d.timestamp())


def _strings(v: object, name: str) -> tuple[str, ...]:
    if v is None:
        return ()
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v) or len(v) > 1000:
        raise ValueError(f"{name} must be a list of strings")
    return tuple(v)


@dataclass(frozen=True, slots=True)
class Scope:
    """A Scope Object ("Agent Manifest": "Scope Object") as granted."""

    tags: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    deny_tags: tuple[str, ...] = ()
    deny_keys: tuple[str, ...] = ()
    # the same as sets, for the Guard's membership tests (a scope may list 1,000 of each, and a
    # tag query tests every item's tags)
    tag_set: frozenset[str] = field(init=False, repr=False, compare=False)
    key_set: frozenset[str] = field(init=False, repr=False, compare=False)
    deny_tag_set: frozenset[str] = field(init=False, repr=False, compare=False)
    deny_key_set: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tag_set", frozenset(self.tags))
        object.__setattr__(self, "key_set", frozenset(self.keys))
        object.__setattr__(self, "deny_tag_set", frozenset(self.deny_tags))
        object.__setattr__(self, "deny_key_set", frozenset(self.deny_keys))

    @classmethod
    def from_json(cls, d: object) -> Scope:
        if d is None:
            return cls()
        if not isinstance(d, dict):
            raise ValueError("a scope must be an object")
        return cls(_strings(d.get("tags"), "tags"), _strings(d.get("keys"), "keys"),
                   _strings(d.get("deny_tags"), "deny_tags"), _strings(d.get("deny_keys"), "deny_keys"))

    def to_json(self) -> dict[str, list[str]]:
        return {"tags": list(self.tags), "keys": list(self.keys), "deny_tags": list(self.deny_tags),
                "deny_keys": list(self.deny_keys)}


@dataclass(frozen=True, slots=True)
class Scopes:
    read: Scope = field(default_factory=Scope)
    write: Scope = field(default_factory=Scope)

    @classmethod
    def from_json(cls, d: object) -> Scopes:
        if d is None:
            return cls()
        if not isinstance(d, dict):
            raise ValueError("scopes must be an object")
        return cls(Scope.from_json(d.get("read")), Scope.from_json(d.get("write")))

    def to_json(self) -> dict[str, Any]:
        return {"read": self.read.to_json(), "write": self.write.to_json()}


def _limit(v: object) -> int | None:
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ValueError("a limit must be a non-negative integer")
    return v


@dataclass(frozen=True, slots=True)
class Claims:
    """The payload of a capability token, every claim of "Claims" typed."""

    session_id: str
    agent_id: str
    issued_at: int
    expires_at: int
    scopes: Scopes
    max_read_queries: int | None = None
    max_write_queries: int | None = None
    profile: str = "local"
    audience: str | None = None
    allowed_endpoints: tuple[str, ...] = ()
    allowed_fields: tuple[str, ...] | None = None
    aggregation_only: bool = False
    task_bound: bool = False
    version: str = VERSION

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "version": self.version, "session_id": self.session_id, "agent_id": self.agent_id,
            "issued_at": iso(self.issued_at), "expires_at": iso(self.expires_at),
            "iat": self.issued_at, "exp": self.expires_at, "scopes": self.scopes.to_json(),
            "limits": {k: v for k, v in (("max_read_queries", self.max_read_queries),
                                         ("max_write_queries", self.max_write_queries)) if v is not None},
            "profile": self.profile, "allowed_endpoints": list(self.allowed_endpoints),
            "aggregation_only": self.aggregation_only, "task_bound": self.task_bound}
        if self.audience is not None:
            d["audience"] = self.audience
        if self.allowed_fields is not None:
            d["allowed_fields"] = list(self.allowed_fields)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Claims:
        """Parse a verified payload; ValueError for anything out of shape."""
        for name in ("session_id", "agent_id", "version"):
            if not isinstance(d.get(name), str):
                raise ValueError(f"{name} must be a string")
        if not isinstance(d.get("scopes"), dict):
            raise ValueError("scopes must be an object")       # a MUST claim ("Claims")
        limits = d.get("limits") or {}
        if not isinstance(limits, dict):
            raise ValueError("limits must be an object")
        for name in ("aggregation_only", "task_bound"):
            if not isinstance(d.get(name, False), bool):
                raise ValueError(f"{name} must be a boolean")
        profile, audience = d.get("profile", "local"), d.get("audience")
        if not isinstance(profile, str) or (audience is not None and not isinstance(audience, str)):
            raise ValueError("profile and audience must be strings")
        fields = d.get("allowed_fields")
        return cls(d["session_id"], d["agent_id"], parse_iso(d.get("issued_at")), parse_iso(d.get("expires_at")),
                   Scopes.from_json(d.get("scopes")), _limit(limits.get("max_read_queries")),
                   _limit(limits.get("max_write_queries")), profile, audience,
                   _strings(d.get("allowed_endpoints"), "allowed_endpoints"),
                   None if fields is None else _strings(fields, "allowed_fields"),
                   bool(d.get("aggregation_only", False)), bool(d.get("task_bound", False)), d["version"])


@dataclass(frozen=True, slots=True)
class AuthKey:
    """The Auth Service's signing key (from the uomp-auth purpose key) and its kid."""

    private: Ed25519PrivateKey
    public: bytes
    kid: str

    @classmethod
    def from_seed(cls, seed: bytes) -> AuthKey:
        priv = Ed25519PrivateKey.from_private_bytes(seed)
        pub = priv.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return cls(priv, pub, hashlib.sha256(pub).digest()[:16].hex())


def token_hash(token: str) -> str:
    """The session's ``token_hash`` ("Session": "Fields") and the blacklist's key."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def issue(key: AuthKey, claims: Claims) -> str:
    return jwt.encode(claims.to_json(), key.private, algorithm="EdDSA", headers={"kid": key.kid})


@dataclass(frozen=True, slots=True)
class Verified:
    """A token whose signature verified: its claims and its standard ``exp``, each checked
    against the clock on every use (``check_expiry``), however it was remembered."""

    claims: Claims
    exp: int


def verify_signature(token: str, key: AuthKey) -> Verified:
    """Step 1 of "Access Control": the signature, then the claims' shape.  No clock here."""
    if not token or len(token) > MAX_TOKEN:
        raise InvalidToken("malformed token", reason="malformed")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise InvalidToken("malformed token", reason="malformed") from None
    if header.get("kid") != key.kid:
        raise InvalidToken("unknown signing key", reason="unknown kid")
    pub = Ed25519PublicKey.from_public_bytes(key.public)
    try:
        # EdDSA only (no "none", no HMAC with the public key as secret)
        payload = jwt.decode(token, pub, algorithms=["EdDSA"], options={"verify_exp": False,
                                                                        "require": ["iat", "exp"]})
    except jwt.PyJWTError:
        raise InvalidToken("bad signature", reason="bad signature") from None
    try:
        claims = Claims.from_json(payload)
        exp = payload["exp"]
        if not isinstance(exp, int) or isinstance(exp, bool):
            raise ValueError("exp must be an integer")
    except (ValueError, KeyError, TypeError) as e:
        raise InvalidToken("malformed claims", reason=f"malformed claims: {e}") from None
    return Verified(claims, exp)


def check_expiry(v: Verified, now: int) -> Claims:
    """Step 2: both clocks, each on its own ("Claims": the Guard MUST validate both); this
    service always signs them equal, so either one passed alone is never trusted."""
    if now >= v.exp or now >= v.claims.expires_at:
        raise TokenExpired("token expired", reason="expired")
    return v.claims


def verify(token: str, key: AuthKey, now: int) -> Claims:
    """Steps 1 and 2 of "Access Control": signature, then exp and expires_at.  An expired
    token reports TOKEN_EXPIRED only once its signature verified (a forgery is never
    told apart from another forgery)."""
    return check_expiry(verify_signature(token, key), now)

