"""UOMP agent manifests (`uom.json`): parse, validate, verify the publisher, keep the registered ones.

Spec: uomp-draft-00 "6. Agent Manifest: `uom.json`" (6.2 Format, 6.3 Fields, 6.4 Scope Object,
6.5 Data Retention Policy) and "16. Agent Identity Verification" (16.2 Supported Methods,
16.3 Verification Process, 16.4 Trust Policy).

Validation is a JSON Schema (``uom.schema.json`` beside this file, checked with ``jsonschema``)
reported as one message per problem, all of them at once (``ManifestInvalid.problems``), so a
publisher fixes a manifest in one round.

Publisher verification (docs/decisions.md "16.2 Supported Methods", "16.4 Trust Policy"):

* ``did``: only ``did:key`` (Ed25519, multicodec 0xed01) is resolvable offline.  The proof is an
  Ed25519Signature2020-shaped Data Integrity proof whose canonicalisation is RFC 8785 JCS (the
  ``rfc8785`` package) instead of RDF URDNA2015, as the manifest is plain JSON, not JSON-LD:
  signature over SHA-256(JCS(proof options without proofValue)) || SHA-256(JCS(document)).
* ``x509``: ``identity.x509.chain`` (PEM, leaf first) and ``identity.x509.signature`` (base64url)
  over JCS(document) by the leaf's key; the chain is verified with ``cryptography.x509.verification``
  against the CAs of the trust list, the leaf must carry the codeSigning extended key usage.
* ``gpg``: a detached signature ``uom.json.asc`` (or ``.sig``) beside the manifest, over its exact
  bytes, verified by ``gpg`` (python-gnupg) when it is installed; skipped with a stated reason when not.

"document" is the manifest with ``identity.proof`` and ``identity.x509.signature`` removed, so the
two embedded signatures never cover each other.  A signature that is present but does not verify
refuses the manifest in every mode (it was altered or forged); a valid signature by a signer not
on the trust list leaves the publisher "unverified" (anyone can mint a did:key).  Enterprise mode
(``enterprise_methods`` in the trust list) refuses an agent that no listed method verifies.
"""
from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from ownmem.errors import AuthenticationFailed, MalformedInput, OwnmemError, VaultError

MAX_MANIFEST_BYTES = 256 * 1024
TRUST_FILE = "uomp-trust.json"
AGENTS_DIR = "uomp-agents"
DeletionMethod = Literal["process_termination", "secure_wipe", "ephemeral_storage"]
Field = Literal["key", "value", "tags", "sensitivity", "source", "created_at", "updated_at", "description"]
ED25519_MULTICODEC = b"\xed\x01"


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


def _schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files("ownmem.uomp").joinpath("uom.schema.json").read_text("utf-8"))
    return data


_VALIDATOR: Any = None


def _validator() -> Any:
    global _VALIDATOR
    if _VALIDATOR is None:
        from jsonschema import Draft202012Validator

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
            rp.get("description"), bool(rp.get("third_party_sharing", False)), bool(rp.get("encryption_at_rest", False))),
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


# --- the trust list (16.4) -------------------------------------------------------------------

@dataclass(frozen=True)
class TrustList:
    dids: tuple[str, ...] = ()
    gpg_fingerprints: tuple[str, ...] = ()     # upper-case hex, no spaces
    x509_cas: tuple[str, ...] = ()             # PEM
    enterprise_methods: tuple[str, ...] = ()   # non-empty: enterprise mode

    @property
    def enterprise(self) -> bool:
        return bool(self.enterprise_methods)


def _fpr(s: str) -> str:
    return s.replace(" ", "").upper()


def load_trust(folder: str | os.PathLike[str]) -> TrustList:
    """The trust list of a vault folder (``uomp-trust.json``); absent means empty, not enterprise."""
    p = Path(folder) / TRUST_FILE
    if not p.exists():
        return TrustList()
    try:
        d = json.loads(p.read_text("utf-8"))
        if not isinstance(d, dict):
            raise ValueError("not an object")
        lists = {k: d.get(k, []) for k in ("dids", "gpg_fingerprints", "x509_cas", "enterprise_methods")}
        for k, v in lists.items():
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise ValueError(f"{k} is not a list of strings")
        bad = set(lists["enterprise_methods"]) - {"did", "gpg", "x509"}
        if bad:
            raise ValueError(f"unknown enterprise method {sorted(bad)}")
    except (ValueError, UnicodeDecodeError) as e:
        # a damaged trust file must not silently turn enterprise mode off
        raise VaultError(f"the UOMP trust list {p} is damaged ({e}); fix or remove it") from None
    return TrustList(tuple(lists["dids"]), tuple(_fpr(f) for f in lists["gpg_fingerprints"]),
                     tuple(lists["x509_cas"]), tuple(lists["enterprise_methods"]))


def save_trust(folder: str | os.PathLike[str], trust: TrustList) -> None:
    p = Path(folder) / TRUST_FILE
    tmp = p.with_name(p.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"dids": list(trust.dids), "gpg_fingerprints": list(trust.gpg_fingerprints),
                               "x509_cas": list(trust.x509_cas),
                               "enterprise_methods": list(trust.enterprise_methods)}, indent=2))
    os.replace(tmp, p)


# --- verification (16.3) ---------------------------------------------------------------------

Outcome = Literal["verified", "untrusted", "absent", "unsupported", "skipped"]


@dataclass(frozen=True)
class MethodResult:
    method: str           # did | x509 | gpg
    outcome: Outcome
    signer: str = ""      # the DID, the leaf's subject, the key fingerprint
    detail: str = ""


@dataclass(frozen=True)
class PublisherStatus:
    results: tuple[MethodResult, ...]

    @property
    def verified(self) -> bool:
        return any(r.outcome == "verified" for r in self.results)

    def verified_by(self) -> tuple[str, ...]:
        return tuple(r.method for r in self.results if r.outcome == "verified")

    def summary(self) -> str:
        if self.verified:
            return "verified publisher: " + "; ".join(f"{r.method} {r.signer}" for r in self.results
                                                       if r.outcome == "verified")
        return "unverified publisher"


def signing_document(doc: dict[str, Any]) -> dict[str, Any]:
    d = copy.deepcopy(doc)
    ident = d.get("identity")
    if isinstance(ident, dict):
        ident.pop("proof", None)
        if isinstance(ident.get("x509"), dict):
            ident["x509"].pop("signature", None)
    return d


def jcs(value: Any) -> bytes:
    import rfc8785

    return bytes(rfc8785.dumps(value))


def did_key_public(did: str) -> bytes:
    """did:key:z6Mk... -> the 32-byte Ed25519 public key (multibase base58btc, multicodec 0xed01)."""
    import base58

    if not did.startswith("did:key:z"):
        raise MalformedInput("not a did:key with a base58btc multibase key")
    try:
        raw = base58.b58decode(did[len("did:key:z"):])
    except ValueError:
        raise MalformedInput("the did:key is not base58btc") from None
    if raw[:2] != ED25519_MULTICODEC or len(raw) != 34:
        raise MalformedInput("the did:key is not an Ed25519 key")
    return raw[2:]


def did_key_of(public: bytes) -> str:
    import base58

    return "did:key:z" + base58.b58encode(ED25519_MULTICODEC + public).decode()


def did_proof_input(doc: dict[str, Any]) -> bytes:
    """What the Ed25519Signature2020-shaped proof signs (module docstring)."""
    proof = dict(doc["identity"]["proof"])
    proof.pop("proofValue", None)
    return hashlib.sha256(jcs(proof)).digest() + hashlib.sha256(jcs(signing_document(doc))).digest()


def _verify_did(m: Manifest, doc: dict[str, Any], trust: TrustList) -> MethodResult:
    import base58
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    ident = m.identity
    if ident is None or ident.proof is None or ident.did is None:
        return MethodResult("did", "absent")
    if not ident.did.startswith("did:key:"):
        return MethodResult("did", "unsupported", ident.did, "only did:key resolves without a network")
    try:
        public = did_key_public(ident.did)
    except MalformedInput as e:
        raise ManifestForged("did", str(e)) from None
    vm = ident.proof.verification_method
    if vm is not None and vm != ident.did + "#" + ident.did[len("did:key:"):]:
        raise ManifestForged("did", "the proof names another verification method than the manifest's did:key")
    try:
        sig = base58.b58decode(ident.proof.proof_value[1:])
        Ed25519PublicKey.from_public_bytes(public).verify(sig, did_proof_input(doc))
    except (InvalidSignature, ValueError):
        raise ManifestForged("did", "Ed25519 signature mismatch") from None
    if ident.did not in trust.dids:
        return MethodResult("did", "untrusted", ident.did, "signed by a DID that is not on the trust list")
    return MethodResult("did", "verified", ident.did)


class _CodeSigning:
    """The leaf must be issued for code signing: a TLS client certificate is not a publisher's."""

    def __call__(self, policy: Any, cert: Any, eku: Any) -> None:
        from cryptography.x509.oid import ExtendedKeyUsageOID

        if eku is None or ExtendedKeyUsageOID.CODE_SIGNING not in eku:
            raise ValueError("the leaf certificate is not issued for code signing")


def _verify_x509(m: Manifest, doc: dict[str, Any], trust: TrustList, now: datetime) -> MethodResult:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
    from cryptography.x509 import verification as xv

    ident = m.identity
    if ident is None or ident.x509 is None:
        return MethodResult("x509", "absent")
    try:
        chain = [x509.load_pem_x509_certificate(p.encode()) for p in ident.x509.chain]
        sig = base64.urlsafe_b64decode(ident.x509.signature + "=" * (-len(ident.x509.signature) % 4))
    except ValueError:
        raise ManifestForged("x509", "a certificate or the signature does not decode") from None
    leaf = chain[0]
    data = jcs(signing_document(doc))
    key = leaf.public_key()
    try:
        if isinstance(key, ed25519.Ed25519PublicKey):
            key.verify(sig, data)
        elif isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(sig, data, ec.ECDSA(hashes.SHA256()))
        elif isinstance(key, rsa.RSAPublicKey):
            key.verify(sig, data, padding.PSS(padding.MGF1(hashes.SHA256()), padding.PSS.AUTO), hashes.SHA256())
        else:
            return MethodResult("x509", "unsupported", leaf.subject.rfc4514_string(), "unsupported key type")
    except (InvalidSignature, UnsupportedAlgorithm):
        raise ManifestForged("x509", "the leaf certificate's key did not sign this manifest") from None
    subject = leaf.subject.rfc4514_string()
    roots = []
    for pem in trust.x509_cas:
        try:
            roots.append(x509.load_pem_x509_certificate(pem.encode()))
        except ValueError:
            continue
    if not roots:
        return MethodResult("x509", "untrusted", subject, "no CA on the trust list")
    ee = xv.ExtensionPolicy.webpki_defaults_ee().may_be_present(
        x509.ExtendedKeyUsage, xv.Criticality.AGNOSTIC, _CodeSigning())
    verifier = (xv.PolicyBuilder().store(xv.Store(roots)).time(now)
                .extension_policies(ca_policy=xv.ExtensionPolicy.webpki_defaults_ca(), ee_policy=ee)
                .build_client_verifier())
    try:
        verifier.verify(leaf, chain[1:])
    except xv.VerificationError as e:
        return MethodResult("x509", "untrusted", subject, f"the chain does not lead to a trusted CA ({e})")
    return MethodResult("x509", "verified", subject)


def gpg_signature_path(manifest_path: Path) -> Path | None:
    for suffix in (".asc", ".sig"):
        p = manifest_path.with_name(manifest_path.name + suffix)
        if p.exists():
            return p
    return None


def _verify_gpg(m: Manifest, sig_path: Path | None, trust: TrustList) -> MethodResult:
    if sig_path is None:
        return MethodResult("gpg", "absent")
    if shutil.which("gpg") is None:
        return MethodResult("gpg", "skipped", "", "gpg is not installed")
    import tempfile

    import gnupg

    g = gnupg.GPG()                      # the person's keyring (GNUPGHOME)
    with tempfile.NamedTemporaryFile(prefix="uom-", suffix=".json") as f:
        # verify the bytes that were parsed, not whatever the file holds by now
        f.write(m.raw)
        f.flush()
        with open(sig_path, "rb") as s:
            v = g.verify_file(s, data_filename=f.name)
    if not v.valid:
        if v.status == "no public key":
            return MethodResult("gpg", "untrusted", str(v.key_id or ""), "the signing key is not in the keyring")
        raise ManifestForged("gpg", str(v.status or "bad signature"))
    fpr = _fpr(str(v.fingerprint or ""))
    if fpr not in trust.gpg_fingerprints:
        return MethodResult("gpg", "untrusted", fpr, "signed by a key that is not on the trust list")
    return MethodResult("gpg", "verified", fpr)


def verify_publisher(m: Manifest, trust: TrustList, *, gpg_signature: Path | None = None,
                     now: datetime | None = None) -> PublisherStatus:
    """Every method the manifest offers, each a MethodResult; ManifestForged when a present signature
    fails.  ``verification_methods`` only orders the results: an offered signature is always checked."""
    from datetime import timezone

    doc = json.loads(m.raw)
    at = now or datetime.now(timezone.utc)
    results = [_verify_did(m, doc, trust), _verify_x509(m, doc, trust, at), _verify_gpg(m, gpg_signature, trust)]
    order = list(m.identity.verification_methods) if m.identity else []
    results.sort(key=lambda r: order.index(r.method) if r.method in order else len(order))
    return PublisherStatus(tuple(results))


def enforce_policy(status: PublisherStatus, trust: TrustList) -> None:
    """Section 16.4: in enterprise mode an agent that no required method verifies MUST NOT get a token.
    Call it before issuing one (and at registration)."""
    if trust.enterprise and not set(status.verified_by()) & set(trust.enterprise_methods):
        raise AgentUnverified("enterprise mode: this agent's publisher is not verified by "
                              + " or ".join(trust.enterprise_methods) + "; it may not receive a token")


# --- registered manifests --------------------------------------------------------------------

@dataclass(frozen=True)
class Registered:
    manifest: Manifest
    status: PublisherStatus
    retention: RetentionView


def _agents_dir(folder: str | os.PathLike[str]) -> Path:
    return Path(folder) / AGENTS_DIR


_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def register_manifest(folder: str | os.PathLike[str], path: str | os.PathLike[str], *,
                      now: datetime | None = None) -> Registered:
    """Validate, verify and keep a manifest (and its GPG signature) in the vault folder."""
    p = Path(path)
    if p.is_dir():
        p = p / "uom.json"
    m = load_manifest(p)
    trust = load_trust(folder)
    sig = gpg_signature_path(p)
    status = verify_publisher(m, trust, gpg_signature=sig, now=now)
    enforce_policy(status, trust)
    d = _agents_dir(folder)
    d.mkdir(mode=0o700, exist_ok=True)
    target = d / f"{m.agent.id}.uom.json"
    tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
    tmp.write_bytes(m.raw)
    os.replace(tmp, target)
    stale = target.with_name(target.name + ".asc")
    if sig is not None:
        stale.write_bytes(sig.read_bytes())
    elif stale.exists():
        stale.unlink()
    return Registered(m, status, retention_level(m.data_retention_policy))


def registered(folder: str | os.PathLike[str], agent_id: str, *, now: datetime | None = None) -> Registered:
    """A registered agent's manifest, verified again against today's trust list."""
    if not _ID.fullmatch(agent_id):
        raise MalformedInput("not an agent id")
    target = _agents_dir(folder) / f"{agent_id}.uom.json"
    if not target.exists():
        from ownmem.errors import NotFound

        raise NotFound(f"no registered agent {agent_id!r} (register it with `ownmem agent register uom.json`)")
    m = load_manifest(target)
    status = verify_publisher(m, load_trust(folder), gpg_signature=gpg_signature_path(target), now=now)
    return Registered(m, status, retention_level(m.data_retention_policy))


def registered_ids(folder: str | os.PathLike[str]) -> list[str]:
    d = _agents_dir(folder)
    if not d.exists():
        return []
    return sorted(p.name[: -len(".uom.json")] for p in d.glob("*.uom.json"))
