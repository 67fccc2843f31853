"""UOMP agent manifests (`uom.json`): the typed manifest, parsed and validated, and its data
retention policy as the person is shown it.

Spec: uomp-draft-00 "6. Agent Manifest: `uom.json`" (6.2 Format, 6.3 Fields, 6.4 Scope Object,
6.5 Data Retention Policy).  Publisher verification (16) is ``ownmem.uomp.publisher``; the
manifests registered with a vault, ``ownmem.uomp.registered``.

Validation is a JSON Schema (``uom.schema.json`` beside this file, checked with ``jsonschema``)
reported as one message per problem, all of them at once (``ManifestInvalid.problems``), so a
publisher fixes a manifest in one round.  "document" (``signing_document``) is the manifest with
``identity.proof`` and ``identity.x509.signature`` removed, so the two embedded signatures never
cover each other.
"""
from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from ownmem.errors import AuthenticationFailed, MalformedInput, OwnmemError

MAX_MANIFEST_BYTES = 256 * 1024
DeletionMethod = Literal["process_termination", "secure_wipe", "ephemeral_storage"]
Field = Literal["key", "value", "tags", "sensitivity", "source", "created_at", "updated_at", "description"]


class ManifestInvalid(MalformedInput):
    """A uom.json that does not follow section 6; ``problems`` lists every problem, one line each."""

    code = "manifest_invalid"

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid uom.json:\n  " + "\n  ".join(problems))
        self.problems = tuple(problems)


class ManifestForged(AuthenticationFailed):
    """A signature the manifest carries does not verify: it was altered after signing, or forged."""

    code = "manifest_forged"

    def __init__(self, method: str, reason: str) -> None:
        super().__init__(reason)
        self.method = method
        self.args = (f"the {method} signature of this uom.json does not verify ({reason}): do not run this agent",)


class AgentUnverified(OwnmemError):
    """Enterprise mode (section 16.4): an agent whose publisher no required method verifies gets no token."""

    code = "agent_unverified"


# --- the typed manifest ---------------------------------------------------------------------

@dataclass(frozen=True)
class AgentInfo:
    id: str
    name: str
    version: str
    description: str | None = None
    publisher: str | None = None


@dataclass(frozen=True)
class ScopeRequest:
    """Section 6.4; ``allowed_fields`` None means the full item."""
    tags: tuple[str, ...]
    keys: tuple[str, ...]
    deny_tags: tuple[str, ...] = ()
    deny_keys: tuple[str, ...] = ()
    allowed_fields: tuple[Field, ...] | None = None
    description: str | None = None


@dataclass(frozen=True)
class RequestedScopes:
    read: ScopeRequest | None = None
    write: ScopeRequest | None = None


@dataclass(frozen=True)
class RetentionPolicy:
    max_retention_seconds: float
    deletion_method: DeletionMethod
    proof_required: bool = False
    description: str | None = None
    third_party_sharing: bool = False
    encryption_at_rest: bool = False


@dataclass(frozen=True)
class Proof:
    type: str
    created: str
    proof_value: str
    verification_method: str | None = None
    proof_purpose: str | None = None


@dataclass(frozen=True)
class X509Signature:
    chain: tuple[str, ...]       # PEM, leaf first
    signature: str               # base64url


@dataclass(frozen=True)
class Identity:
    did: str | None = None
    verification_methods: tuple[str, ...] = ()
    proof: Proof | None = None
    x509: X509Signature | None = None


@dataclass(frozen=True)
class Manifest:
    uomp_version: str
    agent: AgentInfo
    requested_scopes: RequestedScopes
    required_capabilities: tuple[str, ...] = ()
    optional_capabilities: tuple[str, ...] = ()
    requires_remote: bool = False
    data_retention_policy: RetentionPolicy | None = None
    identity: Identity | None = None
    raw: bytes = field(default=b"", repr=False, compare=False)   # the exact bytes (a GPG signature covers them)

    def document(self) -> dict[str, Any]:
        """The signed document: the manifest less its embedded signature values."""
        return signing_document(json.loads(self.raw))


def signing_document(doc: dict[str, Any]) -> dict[str, Any]:
    d = copy.deepcopy(doc)
    ident = d.get("identity")
    if isinstance(ident, dict):
        ident.pop("proof", None)
        if isinstance(ident.get("x509"), dict):
            ident["x509"].pop("signature", None)
    return d


def _schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files("ownmem.uomp").joinpath("uom.schema.json").read_text("utf-8"))
    return data


_VALIDATOR: Any = None


def _validator() -> Any:
    global _VALIDATOR
    if _VALIDATOR is None:
        from jsonschema import Draft202012Validator  # start-up time: loaded at the first validation

        _VALIDATOR = Draft202012Validator(_schema())
    return _VALIDATOR


def _where(path: Any) -> str:
    parts = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in path]
    return ("$" + "".join(parts)) if parts else "$"


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            # two values for one name: verifiers and the panel could read different ones
            raise ManifestInvalid([f"duplicate member {k!r}"])
        out[k] = v
    return out


def problems_of(doc: Any) -> list[str]:
    """Every schema problem of a decoded manifest, one message each, in document order."""
    errors = sorted(_validator().iter_errors(doc), key=lambda e: (list(map(str, e.absolute_path)), e.validator))
    out = [f"{_where(e.absolute_path)}: {e.message}" for e in errors]
    created = ((doc.get("identity") or {}).get("proof") or {}).get("created") if isinstance(doc, dict) else None
    if isinstance(created, str) and not any(".identity.proof.created" in p for p in out):
        try:
            datetime.fromisoformat(created.replace("Z", "+00:00"))
        except ValueError:
            out.append(f"$.identity.proof.created: {created!r} is not a valid ISO 8601 time")
    return out


def _scope(d: dict[str, Any] | None) -> ScopeRequest | None:
    if d is None:
        return None
    af = d.get("allowed_fields")
    return ScopeRequest(tuple(d["tags"]), tuple(d["keys"]), tuple(d.get("deny_tags", ())),
                        tuple(d.get("deny_keys", ())), None if af is None else tuple(af), d.get("description"))


def parse_manifest(data: bytes) -> Manifest:
    """bytes of a uom.json -> Manifest, or ManifestInvalid listing every problem."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestInvalid([f"$: {len(data)} bytes, more than the {MAX_MANIFEST_BYTES} a manifest may have"])
    try:
        doc = json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except UnicodeDecodeError:
        raise ManifestInvalid(["$: not UTF-8"]) from None
    except json.JSONDecodeError as e:
        raise ManifestInvalid([f"$: not JSON ({e.msg} at line {e.lineno} column {e.colno})"]) from None
    problems = problems_of(doc)
    if problems:
        raise ManifestInvalid(problems)
    a, rs = doc["agent"], doc["requested_scopes"]
    rp = doc.get("data_retention_policy")
    ident = doc.get("identity")
    identity = None
    if ident is not None:
        p, x = ident.get("proof"), ident.get("x509")
        identity = Identity(
            ident.get("did"), tuple(ident.get("verification_methods", ())),
            None if p is None else Proof(p["type"], p["created"], p["proofValue"], p.get("verificationMethod"),
                                         p.get("proofPurpose")),
            None if x is None else X509Signature(tuple(x["chain"]), x["signature"]))
    return Manifest(
        doc["uomp_version"],
        AgentInfo(a["id"], a["name"], a["version"], a.get("description"), a.get("publisher")),
        RequestedScopes(_scope(rs.get("read")), _scope(rs.get("write"))),
        tuple(doc.get("required_capabilities", ())), tuple(doc.get("optional_capabilities", ())),
        bool(doc.get("requires_remote", False)),
        None if rp is None else RetentionPolicy(
            float(rp["max_retention_seconds"]), rp["deletion_method"], bool(rp.get("proof_required", False)),
            rp.get("description"), bool(rp.get("third_party_sharing", False)),
            bool(rp.get("encryption_at_rest", False))),
        identity, bytes(data))


def load_manifest(path: str | os.PathLike[str]) -> Manifest:
    p = Path(path)
    if p.is_dir():
        p = p / "uom.json"       # 6.1: the manifest sits in the package root
    try:
        with open(p, "rb") as f:
            data = f.read(MAX_MANIFEST_BYTES + 1)
    except OSError as e:
        raise ManifestInvalid([f"cannot read {p}: {e.strerror}"]) from None
    return parse_manifest(data)


# --- retention (6.5) -------------------------------------------------------------------------

class RetentionLevel(Enum):
    ZERO = "zero retention"
    SHORT = "short retention"
    SESSION = "session retention"
    LONG_TERM = "long-term retention"
    NONE_DECLARED = "no retention policy declared"


@dataclass(frozen=True)
class RetentionView:
    level: RetentionLevel
    warning: bool        # the panel's red warning
    text: str


SHORT_MAX = 600


def retention_level(policy: RetentionPolicy | None, session_seconds: float | None = None) -> RetentionView:
    """Section 6.5's table as a decision.  Up to 600 s is "short" whatever the method (the table's
    300-600 row with process_termination; secure_wipe or ephemeral storage within it are no worse);
    beyond that, "session" only when it is within the session's length and wiped; anything else is
    "long-term" (the table's "no guarantee", red).  No policy at all is red too: nothing is promised."""
    if policy is None:
        return RetentionView(RetentionLevel.NONE_DECLARED, True,
                             "the agent declares no data retention policy: it may keep what it reads forever")
    s, m = policy.max_retention_seconds, policy.deletion_method
    share = "; it shares data with third parties" if policy.third_party_sharing else ""
    if s == 0:
        return RetentionView(RetentionLevel.ZERO, policy.third_party_sharing,
                             f"zero retention: discarded at once ({m}){share}")
    if s <= SHORT_MAX:
        return RetentionView(RetentionLevel.SHORT, policy.third_party_sharing,
                             f"short retention: kept up to {s:g} s after the task ({m}){share}")
    if session_seconds is not None and s <= session_seconds and m == "secure_wipe":
        return RetentionView(RetentionLevel.SESSION, policy.third_party_sharing,
                             f"session retention: cached until the session ends, then wiped{share}")
    return RetentionView(RetentionLevel.LONG_TERM, True,
                         f"long-term retention: kept up to {_duration(s)} after the task ({m}){share}")


def _duration(s: float) -> str:
    for unit, n in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if s >= n:
            return f"{s / n:.1f} {unit}"
    return f"{s:g} s"
