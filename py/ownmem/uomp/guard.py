"""The Memory Guard's decision, a pure function (UOMP draft-00 "Access Control",
"Aggregation Query", "Data Retention & Deletion Proof"; DESIGN.md "Agent access").

    decide(claims, state, request, item) -> Decision(allowed, code, reason)

in the order of "Access Control" (steps 1-2, signature and expiry, are tokens.verify's):
  3. the session is active (not created, closed, revoked, expired) and this is its token (one
     it never issued is INVALID_TOKEN: never issued, so never revoked)
  4. the token is not on the persistent blacklist
  4a. profile matches the deployment; 4b. audience matches this endpoint
  5. quota: ``limits.max_read_queries`` counts every read request of the session that got
     this far, allowed or denied (probing the scope is not free); writes likewise
  5b. aggregation_only: only /v1/memory/aggregate
  -- writes: WRITE_NOT_AVAILABLE on the UOMP routes (PUT/DELETE: staging is not served there);
     a SAIHM binding credential's acts (stage a write, forget, share, revoke a share) need a
     write grant (``*`` in scopes.write.tags), and forget and share name an item that must pass
     the read rules below as a ranked query's item would (ownmem.agent.guarded)
  6. the target key or tag is within the granted scope for the action
  7. deny_keys / deny_tags win over allow lists (the item's own tags too)
  8. sensitivity=high only by exact key (never through a tag, nor the ranked query)
With ``item`` given the same checks re-filter each item of a tag query by key-level rules.
``project`` applies allowed_fields; ``aggregate`` refuses what would reveal one value.
Nothing here reads a clock, a file or the network: the HTTP layer (ownmem.agent.uomp_api) passes
them in; every refusal's code is ownmem.uomp.errors', and so is its status.
"""
from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ownmem.uomp.errors import ErrorCode, ErrorCode as E
from ownmem.uomp.items import Item
from ownmem.uomp.tokens import Claims, parse_iso

PATHS = ("key", "tag", "aggregate", "query", "write", "delete", "session",   # session: lifecycle calls
         "stage", "forget", "share", "unshare")                              # the SAIHM binding's acts
WRITES = ("write", "delete", "stage", "forget", "share", "unshare")
# in a scope's tags: every tag, and memories with none (the default grant of `ownmem agent connect`,
# docs/decisions.md); deny lists and the sensitivity rule still apply to every item
ANY_TAG = "*"
OPS = ("sum", "avg", "count", "min", "max")
# sum and avg over fewer items than this are refused: over one item they are its value, over
# two they give one value to anyone who knows the other (docs/decisions.md)
MIN_AGGREGATE = 3
# the distinct item sets one agent (agent_id, over all its sessions) may sum or average over
# (see determines_few)
MAX_AGGREGATE_SETS = 16
_P = (1 << 61) - 1


@dataclass(frozen=True, slots=True)
class Request:
    path: str                     # one of PATHS
    key: str | None = None
    tag: str | None = None
    op: str | None = None
    field: str | None = None
    profile: str = "local"        # the deployment the request reached
    audience: str = ""            # this Guard's endpoint, e.g. http://127.0.0.1:9374
    limit: int | None = None      # a ranked query's page: how many, from where (ownmem.recall.ranking)
    cursor: str | None = None

    @property
    def action(self) -> str:
        if self.path == "session":
            return "session"
        return "write" if self.path in WRITES else "read"


@dataclass(frozen=True, slots=True)
class SessionState:
    """What the Guard needs of the session bound to the token, as of the request."""

    status: str                   # Session.state(now), or "missing"
    current_token: bool           # the token presented is the one this session was granted
    blacklisted: bool
    reads_used: int
    writes_used: int


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    code: ErrorCode | None        # the "Error Format" code when refused
    reason: str

    @property
    def status(self) -> int:
        return 200 if self.code is None else ErrorCode(self.code).status


ALLOW = Decision(True, None, "scope matched")

OUT_OF_SCOPE = "key not within granted scope"
# refusals that are only reached when the key exists and is out of the token's sight (a high
# item or a denied tag behind a granted tag): the token is told what it is told of any key
# outside its scope, the person's audit keeps the precise reason (docs/decisions.md, issue 19)
_HIDDEN = frozenset({"high-sensitivity item outside an exact-key read", "item carries a denied tag"})


def shown(d: Decision) -> Decision:
    """``d`` as the token may see it, in its answer and in its own audit entries: a refusal
    that would tell an unseen item exists is told as any key outside the scope."""
    return Decision(d.allowed, d.code, OUT_OF_SCOPE) if not d.allowed and d.reason in _HIDDEN else d


def shown_reason(allowed: bool, reason: str) -> str:
    return OUT_OF_SCOPE if not allowed and reason in _HIDDEN else reason


def served(n: int) -> Decision:
    """A tag or ranked query's audit reason: what it served, nothing of what matched outside the
    scope (issue 19: "N of M items in scope" counted every match, high ones too, and the token
    reads its own audit; 290 queries recovered a high value digit by digit)."""
    return Decision(True, None, f"{n} items in scope")


def _deny(code: ErrorCode, reason: str) -> Decision:
    return Decision(False, code, reason)


def decide(claims: Claims, state: SessionState, request: Request, item: Item | None = None) -> Decision:
    # 3. session state
    if state.status == "missing":
        return _deny(E.SESSION_NOT_FOUND, "the token's session does not exist")
    if state.status != "active":
        return _deny(E.SESSION_REVOKED, f"session {state.status}")
    if not state.current_token:
        # a session is granted one token, once: a validly signed token that is not it was never
        # issued for this session, and it was never revoked either (8.4: INVALID_TOKEN)
        return _deny(E.INVALID_TOKEN, "not a token issued for this session")
    # 4. blacklist
    if state.blacklisted:
        return _deny(E.SESSION_REVOKED, "token blacklisted")
    # 4a/4b. profile, audience ("Validity")
    if claims.profile != request.profile:
        return _deny(E.INVALID_TOKEN, f"profile {claims.profile!r} is not this deployment's")
    if claims.audience is not None and claims.audience != request.audience:
        return _deny(E.INVALID_TOKEN, "audience is another endpoint")
    if claims.profile == "remote" and claims.audience is None:
        return _deny(E.INVALID_TOKEN, "a remote token needs an audience")
    # 5. quota
    if request.action == "read":
        if claims.max_read_queries is not None and state.reads_used >= claims.max_read_queries:
            return _deny(E.QUOTA_EXCEEDED, "max_read_queries reached")
    elif (request.action == "write" and claims.max_write_queries is not None
          and state.writes_used >= claims.max_write_queries):
        return _deny(E.QUOTA_EXCEEDED, "max_write_queries reached")
    # 5b. aggregation_only
    if claims.aggregation_only and request.path in ("key", "tag", "query"):
        return _deny(E.ACCESS_DENIED, "aggregation_only token on a raw-data path")
    if request.action == "write":
        if request.path in ("write", "delete"):
            return _deny(E.WRITE_NOT_AVAILABLE, "agent writes are not served by the Guard")
        if ANY_TAG not in claims.scopes.write.tag_set:
            return _deny(E.ACCESS_DENIED, "writes not within granted scope")
        if request.path in ("stage", "unshare"):
            return ALLOW
        if item is None:
            return _deny(E.NOT_FOUND, "no such memory")
    scope = claims.scopes.read
    every_tag = ANY_TAG in scope.tag_set
    # 6. the request's own target is within scope
    if request.path == "key":
        if item is None and request.key not in scope.key_set:
            return _deny(E.ACCESS_DENIED, OUT_OF_SCOPE)
    elif request.path in ("tag", "aggregate"):
        if request.tag not in scope.tag_set and not every_tag:
            return _deny(E.ACCESS_DENIED, "tag not within granted scope")
        # 7. for the tag itself
        if request.tag in scope.deny_tag_set:
            return _deny(E.ACCESS_DENIED, "tag explicitly denied")
    if item is None:
        if request.path == "key":
            if request.key in scope.deny_key_set:
                return _deny(E.ACCESS_DENIED, "key explicitly denied")
            return _deny(E.NOT_FOUND, "no such key")
        return ALLOW
    # 6 for the item: by exact key or by one of its tags
    by_key = item.key in scope.key_set
    by_tag = every_tag or not scope.tag_set.isdisjoint(item.tags)
    if not by_key and not by_tag:
        return _deny(E.ACCESS_DENIED, OUT_OF_SCOPE)
    # 7. deny over allow
    if item.key in scope.deny_key_set:
        return _deny(E.ACCESS_DENIED, "key explicitly denied")
    if not scope.deny_tag_set.isdisjoint(item.tags):
        return _deny(E.ACCESS_DENIED, "item carries a denied tag")
    # 8. high sensitivity only by exact key, and only on the by-key path
    if item.sensitivity == "high" and not (by_key and request.path == "key"):
        return _deny(E.ACCESS_DENIED, "high-sensitivity item outside an exact-key read")
    return ALLOW


def project(claims: Claims, item: Item) -> dict[str, Any]:
    """allowed_fields ("Data Exposure Controls"): only those fields; all when absent, except
    that a high-sensitivity item's sensitivity and source are withheld by default."""
    full = item.to_json()
    if claims.allowed_fields is not None:
        return {k: v for k, v in full.items() if k in claims.allowed_fields}
    if item.sensitivity == "high":
        full.pop("sensitivity", None)
        full.pop("source", None)
    return full


def _number_at(item: Item, path: str) -> float | None:
    parts = path.split(".")
    if parts[0] != "value":
        return None
    cur: Any = item.value
    for p in parts[1:]:
        if not isinstance(cur, dict) or p not in cur:
            return None
        cur = cur[p]
    if isinstance(cur, bool) or not isinstance(cur, (int, float)) or not math.isfinite(cur):
        return None
    return float(cur)


Basis = frozenset[tuple[str, bytes]]     # (field, object id) of each value a sum or avg covered


@dataclass(frozen=True, slots=True)
class Aggregate:
    decision: Decision
    result: float | int | None = None
    basis: Basis | None = None           # a sum or avg answered: what it covered


def determines_few(sets: Sequence[Basis]) -> bool:
    """Would sums over all of ``sets`` together give away the total of fewer than MIN_AGGREGATE
    values (one value, or two that give each other away), e.g. sum(a, b, c, d) - sum(a, b, c)?

    The values in exactly the same sets form a class; a class's total is determined iff its
    unit vector is in the row space of the sets-by-classes 0/1 matrix, i.e. is a row of its
    reduced row echelon form.  Worked mod a 61-bit prime: with at most MAX_AGGREGATE_SETS + 1
    rows every nonzero minor of a 0/1 matrix is far below it (Hadamard's bound), so the ranks,
    and the answer, are those over the rationals."""
    union: set[tuple[str, bytes]] = set().union(*sets)
    size: dict[tuple[bool, ...], int] = {}
    for v in union:
        sig = tuple(v in s for s in sets)
        size[sig] = size.get(sig, 0) + 1
    sigs = list(size)
    rows = [[1 if sig[i] else 0 for sig in sigs] for i in range(len(sets))]
    r = 0
    for c in range(len(sigs)):
        if r == len(rows):
            break
        piv = next((i for i in range(r, len(rows)) if rows[i][c]), None)
        if piv is None:
            continue
        rows[r], rows[piv] = rows[piv], rows[r]
        inv = pow(rows[r][c], _P - 2, _P)
        rows[r] = [x * inv % _P for x in rows[r]]
        for i in range(len(rows)):
            if i != r and rows[i][c]:
                f = rows[i][c]
                rows[i] = [(a - f * b) % _P for a, b in zip(rows[i], rows[r], strict=False)]
        r += 1
    for row in rows[:r]:
        nz = [c for c, x in enumerate(row) if x]
        if len(nz) == 1 and size[sigs[nz[0]]] < MIN_AGGREGATE:
            return True
    return False


def aggregate(claims: Claims, request: Request, items: Iterable[Item], answered: Sequence[Basis] = ()) -> Aggregate:
    """Over the items that passed ``decide`` one by one.  count is always answered (it says
    how many, never which); min and max are always refused (each is one item's value);
    sum and avg need MIN_AGGREGATE numeric values, and must not, with the sums and averages
    this agent was already answered in any of its sessions (``answered``), determine fewer than that many values
    (differencing; an average is a sum, the count being free); the field must be a value.*
    path, and "value" must be among allowed_fields when the token lists them."""
    op, fld = request.op, request.field
    if op not in OPS:
        return Aggregate(_deny(E.INVALID_REQUEST, "op must be one of sum, avg, count, min, max"))
    items = list(items)
    if op == "count":
        return Aggregate(ALLOW, len(items))
    if op in ("min", "max"):
        return Aggregate(_deny(E.ACCESS_DENIED, f"{op} reveals a single item's value"))
    if not fld or not (fld == "value" or fld.startswith("value.")):
        return Aggregate(_deny(E.INVALID_REQUEST, "field must be value or value.<path>"))
    if claims.allowed_fields is not None and "value" not in claims.allowed_fields:
        return Aggregate(_deny(E.ACCESS_DENIED, "value is not among allowed_fields"))
    pairs = [(i, n) for i, n in ((i, _number_at(i, fld)) for i in items) if n is not None]
    nums = [n for _, n in pairs]
    if len(nums) < MIN_AGGREGATE:
        return Aggregate(_deny(E.ACCESS_DENIED, f"fewer than {MIN_AGGREGATE} values would reveal single values"))
    basis: Basis = frozenset((fld, i.object_id) for i, _ in pairs)
    if basis not in answered:
        if len(set(answered)) >= MAX_AGGREGATE_SETS:
            return Aggregate(_deny(E.ACCESS_DENIED, f"this agent has had {MAX_AGGREGATE_SETS} distinct aggregates"))
        if determines_few([*dict.fromkeys(answered), basis]):
            return Aggregate(_deny(E.ACCESS_DENIED, "with this agent's earlier aggregates it would reveal "
                                                    "single values"))
    total = sum(nums)
    res: float | int = total if op == "sum" else total / len(nums)
    if isinstance(res, float) and res.is_integer():
        res = int(res)
    return Aggregate(ALLOW, res, basis)


# ---------------------------------------------------------------- deletion proofs
PROOF_FIELDS = ("deletion_proof_id", "session_id", "agent_id", "deleted_at", "memory_hash", "method")
MAX_PROOF_ID = 128


def proof_message(doc: dict[str, Any]) -> bytes:
    """What the agent signs: the proof without proof_value, as JSON with sorted keys and no
    spaces (docs/decisions.md "9.6 Deletion Proof")."""
    body = {k: v for k, v in doc.items() if k != "proof_value"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _b64(s: str) -> bytes:
    s = s.strip()
    return base64.urlsafe_b64decode(s.replace("+", "-").replace("/", "_") + "=" * (-len(s) % 4))


def check_deletion_proof(claims: Claims, path_session: str, identity_key: str | None, deletion_method: str | None,
                         seen: bool, doc: object, now: int) -> Decision:
    """"Submission & Audit Integration", in order: shape, session_id matches the path and the
    token, agent_id, not a replay, method matches the manifest's, deleted_at <= expires_at
    (and not in the future), the signature by the agent's identity key."""
    if not isinstance(doc, dict) or not all(isinstance(doc.get(f), str) for f in PROOF_FIELDS) \
            or not isinstance(doc.get("proof_value"), str):
        return _deny(E.INVALID_REQUEST, "a deletion proof needs " + ", ".join(PROOF_FIELDS) + ", proof_value")
    if doc["session_id"] != path_session or path_session != claims.session_id:
        return _deny(E.ACCESS_DENIED, "session_id does not match the path and the token")
    if doc["agent_id"] != claims.agent_id:
        return _deny(E.ACCESS_DENIED, "agent_id is not the token's")
    if len(doc["deletion_proof_id"]) > MAX_PROOF_ID or not doc["deletion_proof_id"]:
        return _deny(E.INVALID_REQUEST, "deletion_proof_id is 1 to 128 characters")
    if seen:
        return _deny(E.ACCESS_DENIED, "deletion proof replayed")
    if deletion_method is not None and doc["method"] != deletion_method:
        return _deny(E.ACCESS_DENIED, "method does not match the manifest's deletion_method")
    try:
        deleted_at = parse_iso(doc["deleted_at"])
    except ValueError:
        return _deny(E.INVALID_REQUEST, "deleted_at is not an ISO 8601 time")
    if deleted_at > claims.expires_at:
        return _deny(E.ACCESS_DENIED, "deleted_at is after the token's expires_at")
    if deleted_at > now + 60:
        return _deny(E.ACCESS_DENIED, "deleted_at is in the future")
    if identity_key is None:
        return _deny(E.ACCESS_DENIED, "no identity key registered for this agent")
    try:
        Ed25519PublicKey.from_public_bytes(_b64(identity_key)).verify(_b64(doc["proof_value"]), proof_message(doc))
    except (InvalidSignature, ValueError):
        return _deny(E.ACCESS_DENIED, "proof_value does not verify under the agent's identity key")
    return Decision(True, None, "deletion proof accepted")
