"""UOMP agent publisher verification (uomp-draft-00 "16. Agent Identity Verification": 16.2
Supported Methods, 16.3 Verification Process, 16.4 Trust Policy): the vault's trust list, and
each method a manifest offers checked against it (docs/decisions.md "UOMP manifests: canonical
form and signatures").

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
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from ownmem.errors import MalformedInput, VaultError
from ownmem.uomp.manifest import AgentUnverified, Manifest, ManifestForged, signing_document

TRUST_FILE = "uomp-trust.json"
ED25519_MULTICODEC = b"\xed\x01"


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


def jcs(value: Any) -> bytes:
    import rfc8785  # start-up time: loaded when a manifest is verified, not by every command

    return bytes(rfc8785.dumps(value))


def did_key_public(did: str) -> bytes:
    """did:key:z6Mk... -> the 32-byte Ed25519 public key (multibase base58btc, multicodec 0xed01)."""
    import base58  # start-up time, as rfc8785

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
    import base58  # start-up time, as rfc8785

    return "did:key:z" + base58.b58encode(ED25519_MULTICODEC + public).decode()


def did_proof_input(doc: dict[str, Any]) -> bytes:
    """What the Ed25519Signature2020-shaped proof signs (module docstring)."""
    proof = dict(doc["identity"]["proof"])
    proof.pop("proofValue", None)
    return hashlib.sha256(jcs(proof)).digest() + hashlib.sha256(jcs(signing_document(doc))).digest()


def _verify_did(m: Manifest, doc: dict[str, Any], trust: TrustList) -> MethodResult:
    # start-up time: these load only when a manifest offers a did:key proof
    import base58
    from cryptography.exceptions import InvalidSignature  # start-up time, as base58
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey  # start-up time, as base58

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
        from cryptography.x509.oid import ExtendedKeyUsageOID  # start-up time, as in _verify_x509

        if eku is None or ExtendedKeyUsageOID.CODE_SIGNING not in eku:
            raise ValueError("the leaf certificate is not issued for code signing")


def _verify_x509(m: Manifest, doc: dict[str, Any], trust: TrustList, now: datetime) -> MethodResult:
    # start-up time: the X.509 machinery loads only when a manifest offers a certificate chain
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm  # start-up time, as x509
    from cryptography.hazmat.primitives import hashes  # start-up time, as x509
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa  # start-up time, as x509
    from cryptography.x509 import verification as xv  # start-up time, as x509

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
    import gnupg  # optional at run time: only a manifest with a GPG signature needs it

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
    doc = json.loads(m.raw)
    at = now or datetime.now(UTC)
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
