"""uom.json manifests (uomp-draft-00 sections 6 and 16): schema problems one per line, retention
levels, publisher verification by did:key, X.509 chain and GPG with good and forged signatures,
the trust list, enterprise mode, and `ownmem agent register` through the real CLI."""
from __future__ import annotations

import base64
import copy
import datetime as dt
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import base58
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ownmem.uomp.manifest import (
    AgentUnverified,
    DeletionMethod,
    ManifestForged,
    ManifestInvalid,
    RetentionLevel,
    RetentionPolicy,
    parse_manifest,
    retention_level,
    signing_document,
)
from ownmem.uomp.publisher import TrustList, did_key_of, did_proof_input, jcs, load_trust, save_trust, verify_publisher
from ownmem.uomp.registered import register_manifest, registered
from tests.sync.synckit import cli_env, ownmem

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def base() -> dict[str, Any]:
    return {"uomp_version": "1.0",
            "agent": {"id": "calendar_agent", "name": "Calendar Assistant", "version": "1.2.0",
                      "publisher": "example-org"},
            "requested_scopes": {"read": {"tags": ["preference"], "keys": [], "deny_tags": ["financial"]}},
            "data_retention_policy": {"max_retention_seconds": 300, "deletion_method": "process_termination"}}


def raw(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode()


def did_signed(doc: dict[str, Any], key: ed25519.Ed25519PrivateKey) -> dict[str, Any]:
    pub = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    did = did_key_of(pub)
    d = copy.deepcopy(doc)
    d["identity"] = {"did": did, "verification_methods": ["did"],
                     "proof": {"type": "Ed25519Signature2020", "created": "2026-07-12T10:00:00Z",
                               "verificationMethod": did + "#" + did[len("did:key:"):],
                               "proofPurpose": "assertionMethod", "proofValue": "z1"}}
    d["identity"]["proof"]["proofValue"] = "z" + base58.b58encode(key.sign(did_proof_input(d))).decode()
    return d


# --- schema ----------------------------------------------------------------------------------

def test_the_spec_example_shape_parses_into_typed_fields() -> None:
    m = parse_manifest(raw(base()))
    assert m.agent.id == "calendar_agent" and m.requested_scopes.read is not None
    assert m.requested_scopes.read.deny_tags == ("financial",) and m.requested_scopes.write is None
    assert m.data_retention_policy == RetentionPolicy(300.0, "process_termination")


def test_every_problem_is_reported_once_and_all_at_once() -> None:
    d = base()
    d["uomp_version"] = "2.0"
    d["agent"]["id"] = "Not An Id"
    d["agent"]["version"] = "1.2"
    del d["agent"]["name"]
    d["requested_scopes"]["read"] = {"tags": ["ok", 3]}
    d["data_retention_policy"]["deletion_method"] = "shred"
    d["surprise"] = True
    with pytest.raises(ManifestInvalid) as e:
        parse_manifest(raw(d))
    probs = e.value.problems
    assert len(probs) == 8, probs
    joined = "\n".join(probs)
    for where in ("$.uomp_version", "$.agent.id", "$.agent.version", "$.agent: 'name'",
                  "$.requested_scopes.read: 'keys'", "$.requested_scopes.read.tags[1]",
                  "$.data_retention_policy.deletion_method", "'surprise' was unexpected"):
        assert where in joined, where
    assert e.value.code == "manifest_invalid"


@pytest.mark.parametrize("data, problem", [
    (b"\xff\xfe", "not UTF-8"),
    (b'{"uomp_version": "1.0",', "not JSON"),
    (b'{"uomp_version": "1.0", "uomp_version": "1.0"}', "duplicate member"),
    (b"[]", "is not of type 'object'"),
    (b" " * (300 * 1024), "more than"),
])
def test_malformed_and_oversized_manifests_are_refused(data: bytes, problem: str) -> None:
    with pytest.raises(ManifestInvalid) as e:
        parse_manifest(data)
    assert problem in str(e.value)


def test_a_proof_time_that_is_not_a_time_is_a_problem() -> None:
    d = did_signed(base(), ed25519.Ed25519PrivateKey.generate())
    d["identity"]["proof"]["created"] = "2026-13-45T10:00:00Z"
    with pytest.raises(ManifestInvalid, match="identity.proof.created"):
        parse_manifest(raw(d))


# --- retention -------------------------------------------------------------------------------

@pytest.mark.parametrize("seconds, method, session, level, red", [
    (0, "process_termination", None, RetentionLevel.ZERO, False),
    (300, "process_termination", None, RetentionLevel.SHORT, False),
    (1800, "secure_wipe", 1800, RetentionLevel.SESSION, False),
    (1800, "process_termination", 1800, RetentionLevel.LONG_TERM, True),
    (86400 * 30, "secure_wipe", 1800, RetentionLevel.LONG_TERM, True),
])
def test_retention_levels_and_the_red_warning(
        seconds: int, method: DeletionMethod, session: int | None, level: RetentionLevel, red: bool) -> None:
    v = retention_level(RetentionPolicy(seconds, method), session)
    assert (v.level, v.warning) == (level, red)


def test_no_policy_and_third_party_sharing_are_red() -> None:
    assert retention_level(None).warning
    assert retention_level(RetentionPolicy(0, "process_termination", third_party_sharing=True)).warning


# --- did:key ---------------------------------------------------------------------------------

def test_did_key_good_signature_is_verified_only_when_the_did_is_trusted() -> None:
    d = did_signed(base(), ed25519.Ed25519PrivateKey.generate())
    m = parse_manifest(raw(d))
    untrusted = verify_publisher(m, TrustList(), now=NOW)
    assert not untrusted.verified and untrusted.summary() == "unverified publisher"
    trusted = verify_publisher(m, TrustList(dids=(d["identity"]["did"],)), now=NOW)
    assert trusted.verified and trusted.verified_by() == ("did",)


@pytest.mark.parametrize("tamper", ["scope", "retention", "proof_created", "other_did", "signature", "vm"])
def test_did_key_forged_or_altered_manifests_are_refused(tamper: str) -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    d = did_signed(base(), key)
    if tamper == "scope":           # widen what is asked after signing
        d["requested_scopes"]["read"]["deny_tags"] = []
    elif tamper == "retention":
        d["data_retention_policy"]["max_retention_seconds"] = 0
    elif tamper == "proof_created":
        d["identity"]["proof"]["created"] = "2027-01-01T00:00:00Z"
    elif tamper == "other_did":     # claim a trusted publisher's DID over one's own signature
        other = ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        d["identity"]["did"] = did_key_of(other)
        d["identity"]["proof"].pop("verificationMethod")
    elif tamper == "signature":
        d["identity"]["proof"]["proofValue"] = "z" + base58.b58encode(os.urandom(64)).decode()
    else:
        d["identity"]["proof"]["verificationMethod"] = "did:key:z6Mkother#z6Mkother"
    with pytest.raises(ManifestForged) as e:
        verify_publisher(parse_manifest(raw(d)), TrustList(dids=(d["identity"]["did"],)), now=NOW)
    assert e.value.method == "did"


def test_other_did_methods_are_reported_unsupported_not_verified() -> None:
    d = base()
    d["identity"] = {"did": "did:ethr:0xabc123", "verification_methods": ["did"],
                     "proof": {"type": "Ed25519Signature2020", "created": "2026-07-12T10:00:00Z", "proofValue": "z1"}}
    s = verify_publisher(parse_manifest(raw(d)), TrustList(dids=("did:ethr:0xabc123",)), now=NOW)
    assert not s.verified and s.results[0].outcome == "unsupported"


# --- X.509 -----------------------------------------------------------------------------------

def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn), x509.NameAttribute(NameOID.ORGANIZATION_NAME,
                                                                                     "example-org")])


def _cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: str, issuer_key: ec.EllipticCurvePrivateKey, *,
          ca: bool, eku: x509.ObjectIdentifier | None = ExtendedKeyUsageOID.CODE_SIGNING, path_len: int | None = None,
          issuer_cert: x509.Certificate | None = None) -> x509.Certificate:
    b = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(NOW - dt.timedelta(days=1)).not_valid_after(NOW + dt.timedelta(days=30))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=path_len), critical=True)
         .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
    if issuer_cert is not None:
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                            critical=False)
    if ca:
        b = b.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
    else:
        b = b.add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
        if eku is not None:
            b = b.add_extension(x509.ExtendedKeyUsage([eku]), critical=False)
        b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName("agents.example.org")]), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _pem(c: x509.Certificate) -> str:
    return c.public_bytes(serialization.Encoding.PEM).decode()


@dataclass(frozen=True)
class Pki:
    """A root CA, an intermediate and a code-signing leaf, with the keys the tests sign with."""

    root: x509.Certificate
    inter: x509.Certificate
    inter_k: ec.EllipticCurvePrivateKey
    leaf: x509.Certificate
    leaf_k: ec.EllipticCurvePrivateKey


@pytest.fixture(scope="module")
def pki() -> Pki:
    root_k, inter_k, leaf_k = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    root = _cert("Test Root CA", root_k, "Test Root CA", root_k, ca=True, path_len=1)
    root = _cert("Test Root CA", root_k, "Test Root CA", root_k, ca=True, path_len=1, issuer_cert=root)
    inter = _cert("Test Intermediate", inter_k, "Test Root CA", root_k, ca=True, path_len=0, issuer_cert=root)
    leaf = _cert("Calendar Agent Publisher", leaf_k, "Test Intermediate", inter_k, ca=False, issuer_cert=inter)
    return Pki(root, inter, inter_k, leaf, leaf_k)


def x509_signed(
        doc: dict[str, Any], leaf_k: ec.EllipticCurvePrivateKey, chain: list[x509.Certificate]) -> dict[str, Any]:
    d = copy.deepcopy(doc)
    d["identity"] = {"verification_methods": ["x509"], "x509": {"chain": [_pem(c) for c in chain], "signature": "A"}}
    sig = leaf_k.sign(jcs(signing_document(d)), ec.ECDSA(hashes.SHA256()))
    d["identity"]["x509"]["signature"] = base64.urlsafe_b64encode(sig).decode().rstrip("=")
    return d


def test_x509_chain_to_a_trusted_ca_verifies(pki: Pki) -> None:
    d = x509_signed(base(), pki.leaf_k, [pki.leaf, pki.inter])
    s = verify_publisher(parse_manifest(raw(d)), TrustList(x509_cas=(_pem(pki.root),)), now=NOW)
    assert s.verified_by() == ("x509",) and "Calendar Agent Publisher" in s.results[0].signer


def test_x509_without_a_trusted_ca_or_with_another_root_is_unverified(pki: Pki) -> None:
    d = x509_signed(base(), pki.leaf_k, [pki.leaf, pki.inter])
    m = parse_manifest(raw(d))
    assert not verify_publisher(m, TrustList(), now=NOW).verified
    other_k = ec.generate_private_key(ec.SECP256R1())
    other = _cert("Other Root", other_k, "Other Root", other_k, ca=True)
    assert not verify_publisher(m, TrustList(x509_cas=(_pem(other),)), now=NOW).verified
    # after the leaf expired
    later = NOW + dt.timedelta(days=60)
    assert not verify_publisher(m, TrustList(x509_cas=(_pem(pki.root),)), now=later).verified


def test_x509_forged_signature_and_altered_manifest_are_refused(pki: Pki) -> None:
    d = x509_signed(base(), pki.leaf_k, [pki.leaf, pki.inter])
    d["agent"]["name"] = "Totally Legit Bank"
    with pytest.raises(ManifestForged):
        verify_publisher(parse_manifest(raw(d)), TrustList(x509_cas=(_pem(pki.root),)), now=NOW)
    # signed by the intermediate's key but presenting the leaf
    d = x509_signed(base(), pki.inter_k, [pki.leaf, pki.inter])
    with pytest.raises(ManifestForged):
        verify_publisher(parse_manifest(raw(d)), TrustList(x509_cas=(_pem(pki.root),)), now=NOW)


def test_x509_leaf_not_issued_for_code_signing_is_unverified(pki: Pki) -> None:
    k = ec.generate_private_key(ec.SECP256R1())
    leaf = _cert("TLS client", k, "Test Intermediate", pki.inter_k, ca=False, eku=ExtendedKeyUsageOID.CLIENT_AUTH,
                 issuer_cert=pki.inter)
    d = x509_signed(base(), k, [leaf, pki.inter])
    s = verify_publisher(parse_manifest(raw(d)), TrustList(x509_cas=(_pem(pki.root),)), now=NOW)
    assert not s.verified and s.results[0].outcome == "untrusted"


# --- GPG -------------------------------------------------------------------------------------

needs_gpg = pytest.mark.skipif(shutil.which("gpg") is None, reason="gpg is not installed")


@pytest.fixture()
def gnupghome(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("GNUPGHOME", str(home))
    return home


def _gpg(*args: str, inp: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", "", *args],
                          input=inp, capture_output=True, check=True, timeout=60)


def _gpg_key(uid: str) -> str:
    _gpg("--quick-gen-key", uid, "ed25519", "sign", "never")
    out = _gpg("--with-colons", "--list-keys", uid).stdout.decode()
    return next(line.split(":")[9] for line in out.splitlines() if line.startswith("fpr"))


@needs_gpg
def test_gpg_detached_signature_good_and_forged(tmp_path: Path, gnupghome: Path) -> None:
    fpr = _gpg_key("Publisher <pub@example.org>")
    path = tmp_path / "uom.json"
    path.write_bytes(raw(base()))
    _gpg("--local-user", fpr, "--armor", "--detach-sign", "--output", str(path) + ".asc", str(path))
    m = parse_manifest(path.read_bytes())
    sig = Path(str(path) + ".asc")
    assert verify_publisher(m, TrustList(gpg_fingerprints=(fpr,)), gpg_signature=sig, now=NOW).verified_by() == ("gpg",)
    assert not verify_publisher(m, TrustList(), gpg_signature=sig, now=NOW).verified
    altered = base()
    altered["requested_scopes"]["read"]["tags"].append("financial")
    with pytest.raises(ManifestForged):
        verify_publisher(parse_manifest(raw(altered)), TrustList(gpg_fingerprints=(fpr,)), gpg_signature=sig, now=NOW)


# --- trust list, enterprise mode, registration -----------------------------------------------

def test_enterprise_mode_refuses_unverified_and_otherwise_verified_agents(tmp_path: Path, pki: Pki) -> None:
    save_trust(tmp_path, TrustList(x509_cas=(_pem(pki.root),), enterprise_methods=("x509",)))
    assert load_trust(tmp_path).enterprise
    unsigned = tmp_path / "a" / "uom.json"
    unsigned.parent.mkdir()
    unsigned.write_bytes(raw(base()))
    with pytest.raises(AgentUnverified):
        register_manifest(tmp_path, unsigned, now=NOW)
    # a trusted did:key is not the method enterprise mode mandates
    key = ed25519.Ed25519PrivateKey.generate()
    d = did_signed(base(), key)
    t = load_trust(tmp_path)
    save_trust(tmp_path, TrustList(dids=(d["identity"]["did"],), x509_cas=t.x509_cas, enterprise_methods=("x509",)))
    unsigned.write_bytes(raw(d))
    with pytest.raises(AgentUnverified):
        register_manifest(tmp_path, unsigned, now=NOW)
    good = tmp_path / "b" / "uom.json"
    good.parent.mkdir()
    good.write_bytes(raw(x509_signed(base(), pki.leaf_k, [pki.leaf, pki.inter])))
    r = register_manifest(tmp_path, good, now=NOW)
    assert r.status.verified and registered(tmp_path, "calendar_agent", now=NOW).status.verified


def test_a_damaged_trust_list_does_not_turn_enterprise_mode_off(tmp_path: Path) -> None:
    (tmp_path / "uomp-trust.json").write_text('{"enterprise_methods": "x509"}')
    from ownmem.errors import VaultError
    with pytest.raises(VaultError):
        load_trust(tmp_path)


def test_cli_register_shows_retention_and_publisher_and_stores_the_manifest(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    env = cli_env(tmp_path, vault)
    assert ownmem("init", env=env).returncode == 0
    d = base()
    d["data_retention_policy"] = {"max_retention_seconds": 86400 * 90, "deletion_method": "process_termination"}
    path = tmp_path / "uom.json"
    path.write_bytes(raw(d))
    r = ownmem("agent", "register", str(path), env=env)
    assert r.returncode == 0, r.stderr
    assert "WARNING: long-term retention" in r.stdout and "unverified publisher" in r.stdout
    assert (vault / "uomp-agents" / "calendar_agent.uom.json").read_bytes() == path.read_bytes()
    r = ownmem("agent", "register", str(path), "--json", env=env)
    out = json.loads(r.stdout)
    assert out["retention"] == "long_term" and out["retention_warning"] and not out["publisher_verified"]
    path.write_bytes(b'{"uomp_version": "1.0"}')
    r = ownmem("agent", "register", str(path), env=env)
    assert r.returncode != 0 and "$: 'agent' is a required property" in r.stderr


@needs_gpg
def test_gpg_garbage_signature_is_forged_and_an_unknown_key_is_unverified(tmp_path: Path, gnupghome: Path) -> None:
    path = tmp_path / "uom.json"
    path.write_bytes(raw(base()))
    sig = Path(str(path) + ".asc")
    sig.write_bytes(b"-----BEGIN PGP SIGNATURE-----\n\nAAAA\n-----END PGP SIGNATURE-----\n")
    with pytest.raises(ManifestForged):
        verify_publisher(parse_manifest(path.read_bytes()), TrustList(), gpg_signature=sig, now=NOW)
    # signed by a key the person's keyring does not hold: verified by no one
    fpr = _gpg_key("Stranger <x@example.org>")
    _gpg("--local-user", fpr, "--armor", "--yes", "--detach-sign", "--output", str(sig), str(path))
    _gpg("--yes", "--delete-secret-and-public-key", fpr)
    s = verify_publisher(parse_manifest(path.read_bytes()), TrustList(gpg_fingerprints=(fpr,)), gpg_signature=sig,
                         now=NOW)
    assert not s.verified and [r.outcome for r in s.results if r.method == "gpg"] == ["untrusted"]
