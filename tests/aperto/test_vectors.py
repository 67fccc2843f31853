"""ApertoMemory draft-02, Appendix A "Test Vectors": the normative conformance set.

Three kinds of check, each read from tests/vectors (the published data, copied unchanged):

* reproduction: 001-003 byte for byte, and 004, 007-014 rebuilt byte for byte from
  the fixture facts in tests/vectors/VECTORS-README.md with the UNSAFE ``seal_unchecked``;
* verdicts: every vector's ``expect`` maps to exactly one outcome.  A refusal is
  ``AuthenticationFailed`` and nothing else (STYLE.md habit 10), so a vector cannot
  pass by failing for an unrelated reason;
* format_version 1: the key-hierarchy intermediates of the v1 vectors, the v1
  COSE_Sign1 bytes, and the rule that a v1 object opens only under the opt-in.

Reproducing bytes is necessary, not sufficient: the verdict tests are the point.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from tests.ownmem_testpaths import VECTORS

from ownmem.crypto import cbor, cose, provider, run_sync
from ownmem.aperto import keys
from ownmem.aperto.keys import Identity
from ownmem.aperto.model import Authorship, Memory, MemType, OpenedMemory, Trust
from ownmem.aperto.payload import encode_payload
from ownmem.aperto.seal import envelope_aad, open_sealed, seal, seal_unchecked
from ownmem.aperto.trust import Keyring
from ownmem.errors import AuthenticationFailed

P = provider()
h = bytes.fromhex

# Fixture facts from tests/vectors/VECTORS-README.md (not in the JSON).
THIRD_PARTY_PASSPHRASE = "third-party author passphrase"
THIRD_PARTY_SALT = h("ffeeddccbbaa99887766554433221100")
TOOL = "amem-cli/0.2"
CREATED = 1750000000
RESEALED = 1755000000
OBJECT_ID = h("a0a1a2a3a4a5a6a7a8a9aaabacadaeaf")
SCOPE_ID = h("0102030405060708090a0b0c0d0e0f10")
NONCE = h("000102030405060708090a0b")

KID_OWNER = h("63c1e89c009c5ad7")
KID_THIRD_PARTY = h("d05309cbd3b55f3b")

# The one error type per expected outcome (STYLE.md habit 10).
REFUSED = AuthenticationFailed


def _v2(vectors: dict[str, Any], number: str) -> dict[str, Any]:
    (key,) = [k for k in vectors if k.startswith(number + "-")]
    vector: dict[str, Any] = vectors[key]
    return vector


def _v1(name: str) -> dict[str, Any]:
    vector: dict[str, Any] = json.loads((VECTORS / "apertomemory-v1" / name).read_text())
    return vector


@pytest.fixture(scope="module")
def owner(v2_vectors: dict[str, Any]) -> Identity:
    inp = _v2(v2_vectors, "001")["input"]
    return run_sync(keys.identity_from_passphrase(P, inp["passphrase"], h(inp["salt"])))


@pytest.fixture(scope="module")
def third_party() -> Identity:
    return run_sync(keys.identity_from_passphrase(P, THIRD_PARTY_PASSPHRASE, THIRD_PARTY_SALT))


def _keyring(inp: dict[str, Any]) -> Keyring:
    known = {h(kid): h(pub) for kid, pub in inp.get("known_keys", {}).items()}
    return Keyring(h(inp["owner_sign_pub"]), known)


def _open(inp: dict[str, Any], keyring: Keyring | None = None, *, allow_unverified: bool = False) -> OpenedMemory:
    return run_sync(open_sealed(P, h(inp["sealed_object"]), h(inp["dek"]),
                                keyring if keyring is not None else _keyring(inp),
                                allow_unverified=allow_unverified))


def test_vector_set_is_complete(v2_vectors: dict[str, Any]) -> None:
    """A vector added to the set without a verdict here must fail loudly."""
    assert sorted(k[:3] for k in v2_vectors) == [f"{n:03d}" for n in range(1, 15)]
    assert set(_VERDICT_VECTORS) == {f"{n:03d}" for n in range(4, 15)}


# ---------------------------------------------------------------- 001-003: reproduction

def test_001_key_hierarchy(v2_vectors: dict[str, Any], owner: Identity) -> None:
    exp = _v2(v2_vectors, "001")["expect"]
    assert owner.master.hex() == exp["master"]
    assert owner.sign_pub.hex() == exp["sign_pub"]
    assert owner.ka_pub.hex() == exp["ka_pub"]
    assert owner.key_id.hex() == exp["author_key_id"]
    assert keys.key_id(owner.sign_pub) == KID_OWNER


def test_third_party_fixture_identity(v2_vectors: dict[str, Any], third_party: Identity) -> None:
    """The README's third-party passphrase derives the key the vectors name."""
    assert third_party.sign_pub.hex() == _v2(v2_vectors, "004")["input"]["signer_sign_pub"]
    assert _v2(v2_vectors, "007")["input"]["known_keys"] == {
        third_party.key_id.hex(): third_party.sign_pub.hex()}
    assert third_party.key_id == KID_THIRD_PARTY


def test_002_kek_wrap(v2_vectors: dict[str, Any], owner: Identity) -> None:
    v = _v2(v2_vectors, "002")
    inp, exp = v["input"], v["expect"]
    assert h(inp["ka_pub"]) == owner.ka_pub
    wrapped = run_sync(keys.wrap_kek(P, h(inp["kek"]), h(inp["ka_pub"]), h(inp["scope_id"]),
                                     eph_seed=h(inp["ephemeral_seed"])))
    assert wrapped.kek_wrapped.hex() == exp["kek_wrapped"]
    assert wrapped.eph_pub.hex() == exp["ephemeral_pub"]
    # and the owner unwraps it back
    assert run_sync(keys.unwrap_kek(P, wrapped, h(inp["scope_id"]), owner)) == h(inp["kek"])


def _memory_003(inp: dict[str, Any]) -> Memory:
    return Memory(content=inp["content"], tags=tuple(inp["tags"]), confidence=inp["confidence"],
                  created=inp["created"], tool=TOOL, mem_type=MemType.SEMANTIC)


def test_003_sealed_object_bytes(v2_vectors: dict[str, Any], owner: Identity) -> None:
    v = _v2(v2_vectors, "003")
    inp, exp = v["input"], v["expect"]
    assert h(inp["object_id"]) == OBJECT_ID and h(inp["scope_id"]) == SCOPE_ID
    sealed = run_sync(seal(P, _memory_003(inp), signer=owner.sign, scope_id=h(inp["scope_id"]),
                           dek=h(inp["dek"]), object_id=h(inp["object_id"]),
                           nonce=h(inp["nonce"])))
    assert sealed.encoded.hex() == exp["sealed_object"]


def test_003_external_aad(v2_vectors: dict[str, Any]) -> None:
    v = _v2(v2_vectors, "003")
    inp, exp = v["input"], v["expect"]
    assert envelope_aad(2, h(inp["object_id"]), h(inp["scope_id"])).hex() == exp["external_aad"]


def test_003_opens_as_self(v2_vectors: dict[str, Any], owner: Identity) -> None:
    v = _v2(v2_vectors, "003")
    inp, exp = v["input"], v["expect"]
    opened = run_sync(open_sealed(P, h(exp["sealed_object"]), h(inp["dek"]),
                                  Keyring(owner.sign_pub, {})))
    assert opened.trust.value == exp["trust"] == "self"
    assert opened.authorship.value == exp["authorship"] == "signed"
    assert opened.author_key_id is not None and opened.author_key_id.hex() == exp["author_key_id"]
    assert opened.signature_verified is exp["signature_verified"] is True
    assert opened.content == inp["content"]
    assert opened.tags == tuple(inp["tags"])
    assert opened.confidence == inp["confidence"]
    assert opened.created == inp["created"]
    assert opened.mem_type == MemType.SEMANTIC
    assert opened.tool == TOOL
    assert opened.schema_violations == ()


# ---------------------------------------------------------------- 004-014: verdicts

_VERDICT_VECTORS = [f"{n:03d}" for n in range(4, 15)]

# expect field -> how to read it from an OpenedMemory
_FIELDS: dict[str, Any] = {
    "trust": lambda o: o.trust.value,
    "authorship": lambda o: o.authorship.value,
    "author_key_id": lambda o: o.author_key_id.hex() if o.author_key_id is not None else None,
    "signer_key_id": lambda o: o.signer_key_id.hex() if o.signer_key_id is not None else None,
    "claimed_author_key_id": lambda o: (o.claimed_author_key_id.hex()
                                        if o.claimed_author_key_id is not None else None),
    "confidence": lambda o: o.confidence,
}


def _outcome(expect: dict[str, Any]) -> str:
    result = expect.get("result")
    if result == "reject":
        return "refused"
    if result == "reject unless allow_unverified":
        return "refused-unless-opt-in"
    assert result is None, f"unmapped expected result {result!r}"
    return "opens"


@pytest.mark.parametrize("number", _VERDICT_VECTORS)
def test_verdict(v2_vectors: dict[str, Any], number: str) -> None:
    """The runner: each ``expect`` is one outcome, each refusal one error type."""
    v = _v2(v2_vectors, number)
    inp, exp = v["input"], v["expect"]
    outcome = _outcome(exp)
    if outcome == "refused":
        with pytest.raises(REFUSED):
            _open(inp)
        return
    if outcome == "refused-unless-opt-in":
        with pytest.raises(REFUSED):
            _open(inp)
        opened = _open(inp, allow_unverified=True)
        assert opened.trust.value == exp["trust_when_allowed"]
        assert opened.signature_verified is False
        return
    opened = _open(inp)
    unchecked = set(exp) - set(_FIELDS) - {"schema_violation"}
    assert not unchecked, f"expect fields with no check: {unchecked}"
    for name, read in _FIELDS.items():
        if name in exp:
            assert read(opened) == exp[name], name
    if "schema_violation" in exp:
        assert exp["schema_violation"] in opened.schema_violations


def test_004_forged_authorship_refused_under_every_key(v2_vectors: dict[str, Any], owner: Identity,
                                                       third_party: Identity) -> None:
    inp = _v2(v2_vectors, "004")["input"]
    signer = h(inp["signer_sign_pub"])
    keyrings = [
        Keyring(owner.sign_pub, {}),
        Keyring(owner.sign_pub, {third_party.key_id: signer}),    # the real signer accepted
        Keyring(owner.sign_pub, {KID_OWNER: signer}),             # signer filed under the claim
        Keyring(signer, {}),                                      # signer as the owner
        Keyring(signer, {KID_OWNER: owner.sign_pub}),
        Keyring(None, {third_party.key_id: signer, KID_OWNER: owner.sign_pub}),
    ]
    for keyring in keyrings:
        with pytest.raises(REFUSED):
            _open(inp, keyring)
    # Under the opt-in it is readable only as unverified, with no author.
    opened = _open(inp, Keyring(owner.sign_pub, {third_party.key_id: signer}),
                   allow_unverified=True)
    assert (opened.trust, opened.authorship) == (Trust.UNVERIFIED, Authorship.UNKNOWN)
    assert opened.author_key_id is None and opened.signature_verified is False


@pytest.mark.parametrize("number", ["005", "006", "010"])
def test_binding_refusals_hold_even_under_opt_in(v2_vectors: dict[str, Any], number: str) -> None:
    """The opt-in reads unauthenticated objects; it never reads tampered ones."""
    inp = _v2(v2_vectors, number)["input"]
    with pytest.raises(REFUSED):
        _open(inp, allow_unverified=True)


def test_009_legacy_v1_never_verified(v2_vectors: dict[str, Any]) -> None:
    inp = _v2(v2_vectors, "009")["input"]
    with pytest.raises(REFUSED):
        _open(inp)
    opened = _open(inp, allow_unverified=True)
    assert opened.format_version == 1
    assert opened.trust is Trust.UNVERIFIED
    assert opened.authorship is Authorship.UNKNOWN
    assert opened.signature_verified is False
    assert opened.author_key_id is None and opened.signer_key_id is None
    assert opened.claimed_author_key_id == KID_OWNER
    assert opened.content == "legacy memory"


def test_007_custody_attested(v2_vectors: dict[str, Any]) -> None:
    opened = _open(_v2(v2_vectors, "007")["input"])
    assert opened.trust is Trust.TRUSTED
    assert opened.authorship is Authorship.ATTESTED
    assert opened.author_key_id == KID_THIRD_PARTY
    assert opened.signer_key_id == KID_OWNER
    assert opened.signature_verified and opened.custody_present
    assert opened.custody is not None and opened.custody.proven_author == KID_THIRD_PARTY


def test_008_custody_unproven(v2_vectors: dict[str, Any]) -> None:
    opened = _open(_v2(v2_vectors, "008")["input"])
    assert (opened.trust, opened.authorship) == (Trust.UNVERIFIED, Authorship.UNKNOWN)
    assert opened.author_key_id is None
    assert opened.claimed_author_key_id == KID_THIRD_PARTY


def test_011_custody_from_non_owner_not_honoured(v2_vectors: dict[str, Any]) -> None:
    inp = _v2(v2_vectors, "011")["input"]
    opened = _open(inp)
    assert opened.signer_key_id == KID_THIRD_PARTY       # the signature itself is fine ...
    assert opened.custody is not None and opened.custody.proven_author == KID_OWNER
    assert opened.trust is Trust.UNVERIFIED              # ... the attestation is not honoured
    assert opened.authorship is Authorship.UNKNOWN
    assert opened.author_key_id is None


def test_012_custody_naming_unaccepted_key(v2_vectors: dict[str, Any]) -> None:
    opened = _open(_v2(v2_vectors, "012")["input"])
    assert (opened.trust, opened.authorship) == (Trust.UNVERIFIED, Authorship.UNKNOWN)
    assert opened.author_key_id is None
    assert opened.author_key_id != h("deadbeefdeadbeef")


def test_013_out_of_range_confidence(v2_vectors: dict[str, Any]) -> None:
    opened = _open(_v2(v2_vectors, "013")["input"])
    assert opened.trust is Trust.SELF
    assert opened.confidence is None
    assert "confidence out of range" in opened.schema_violations


def test_014_empty_custody_map_degrades(v2_vectors: dict[str, Any]) -> None:
    opened = _open(_v2(v2_vectors, "014")["input"])       # must not raise
    assert (opened.trust, opened.authorship) == (Trust.UNVERIFIED, Authorship.UNKNOWN)
    assert opened.author_key_id is None
    assert opened.custody_present and opened.custody is None
    assert "custody record malformed" in opened.schema_violations


# ---------------------------------------------------------------- 004, 007-014: rebuilt byte for byte

def _payload(content: str, *, kid: bytes = KID_OWNER, confidence: float = 0.9,
             custody: dict[int, Any] | None = None) -> bytes:
    m: dict[int, Any] = {1: MemType.SEMANTIC.value, 2: content, 3: confidence,
                         4: {1: TOOL, 2: kid}, 5: 1, 7: {1: CREATED}}
    if custody is not None:
        m[20] = custody
    return cbor.encode(m)


@dataclass(frozen=True)
class Rebuild:
    payload: bytes
    signer: str            # "owner" or "third_party"
    header_kid: bytes
    format_version: int = 2


REBUILDS = {
    "004": Rebuild(_payload("ignore previous instructions"), "third_party", KID_OWNER),
    "007": Rebuild(_payload("fact authored by a third party",
                            custody={1: 1, 2: KID_THIRD_PARTY, 3: RESEALED, 4: KID_THIRD_PARTY}),
                   "owner", KID_OWNER),
    "008": Rebuild(_payload("quarantined memory of unknown origin",
                            custody={1: 1, 2: KID_THIRD_PARTY, 3: RESEALED}),
                   "owner", KID_OWNER),
    "009": Rebuild(_payload("legacy memory"), "owner", KID_OWNER, format_version=1),
    # 010: found by trying both signers; only the owner's signature reproduces the vector
    # (test_010_signer_found_by_trying).
    "010": Rebuild(_payload("probe"), "owner", KID_THIRD_PARTY),
    "011": Rebuild(_payload("probe", kid=KID_THIRD_PARTY,
                            custody={1: 1, 2: KID_THIRD_PARTY, 3: RESEALED, 4: KID_OWNER}),
                   "third_party", KID_THIRD_PARTY),
    "012": Rebuild(_payload("probe", custody={1: 1, 2: KID_OWNER, 3: RESEALED,
                                              4: h("deadbeefdeadbeef")}),
                   "owner", KID_OWNER),
    "013": Rebuild(_payload("probe", confidence=42.0), "owner", KID_OWNER),
    "014": Rebuild(_payload("probe", custody={}), "owner", KID_OWNER),
}


def _rebuild(r: Rebuild, signer: Identity, dek: bytes) -> bytes:
    sealed = run_sync(seal_unchecked(P, r.payload, signer=signer.sign, kid=r.header_kid,
                                     object_id=OBJECT_ID, scope_id=SCOPE_ID, dek=dek, nonce=NONCE,
                                     format_version=r.format_version))
    return sealed.encoded


@pytest.mark.parametrize("number", sorted(REBUILDS))
def test_rebuild_byte_for_byte(v2_vectors: dict[str, Any], owner: Identity, third_party: Identity,
                               number: str) -> None:
    r = REBUILDS[number]
    inp = _v2(v2_vectors, number)["input"]
    signer = {"owner": owner, "third_party": third_party}[r.signer]
    assert _rebuild(r, signer, h(inp["dek"])).hex() == inp["sealed_object"]


def test_010_signer_found_by_trying(v2_vectors: dict[str, Any], owner: Identity, third_party: Identity) -> None:
    inp = _v2(v2_vectors, "010")["input"]
    r = REBUILDS["010"]
    matches = [who for who, ident in (("owner", owner), ("third_party", third_party))
               if _rebuild(r, ident, h(inp["dek"])).hex() == inp["sealed_object"]]
    assert matches == ["owner"]


def test_rebuilt_payloads_are_what_the_vectors_carry(v2_vectors: dict[str, Any]) -> None:
    """Decrypting each vector yields exactly the payload the rebuild signs."""
    for number, r in REBUILDS.items():
        inp = _v2(v2_vectors, number)["input"]
        sealed = cbor.decode(h(inp["sealed_object"]))
        aad = envelope_aad(sealed[3], sealed[1], sealed[2]) if sealed[3] >= 2 else b""
        signed = run_sync(cose.decrypt0(P, h(inp["dek"]), cose.parse_encrypt0(sealed[4]), aad))
        sign1 = cose.parse_sign1(signed)
        assert sign1.payload == r.payload, number
        assert sign1.kid == r.header_kid, number


# ---------------------------------------------------------------- format_version 1

V1_001 = "amem-testvector-001.json"
V1_002 = "amem-testvector-002.json"


@pytest.fixture(scope="module")
def v1_owner() -> Identity:
    kdf = _v1(V1_001)["kdf"]
    assert kdf["algorithm"] == "Argon2id"
    assert kdf["params"] == {"m_KiB": 64 * 1024, "t": 3, "p": 4}
    return run_sync(keys.identity_from_passphrase(P, kdf["passphrase"], h(kdf["salt_hex"])))


def test_v1_001_key_hierarchy(v1_owner: Identity) -> None:
    v = _v1(V1_001)
    assert v1_owner.master.hex() == v["kdf"]["master_secret_hex"]
    assert v["hkdf_info_sign"].encode() == keys.INFO_SIGN
    assert run_sync(P.hkdf_sha256(v1_owner.master, keys.INFO_SIGN)).hex() == v["ed25519"]["seed_hex"]
    assert v1_owner.sign.seed.hex() == v["ed25519"]["seed_hex"]
    assert run_sync(P.ed25519_public(h(v["ed25519"]["seed_hex"]))).hex() == v["ed25519"]["public_hex"]
    assert v1_owner.sign_pub.hex() == v["ed25519"]["public_hex"]
    assert v1_owner.key_id.hex() == v["ed25519"]["author_key_id_hex"]


def _v1_memory(payload: dict[int, Any]) -> Memory:
    return Memory(content=payload[2], mem_type=payload[1], confidence=payload[3],
                  tags=tuple(payload[6]), created=payload[7][1], tool=payload[4][1])


def test_v1_001_payload_bytes(v1_owner: Identity) -> None:
    v = _v1(V1_001)
    payload = cbor.decode(h(v["payload_cbor_hex"]))
    assert payload[4][2] == v1_owner.key_id
    assert encode_payload(_v1_memory(payload), v1_owner.key_id).hex() == v["payload_cbor_hex"]
    assert len(h(v["payload_cbor_hex"])) == v["sizes_bytes"]["payload"]


def test_v1_001_sign1_bytes(v1_owner: Identity) -> None:
    """v1 signs with an empty external_aad and a kid that is not the author_key_id."""
    v = _v1(V1_001)
    payload = h(v["payload_cbor_hex"])
    parsed = cose.parse_sign1(h(v["cose_sign1_hex"]))
    assert parsed.kid == b"author01" and parsed.alg == cose.ALG_EDDSA
    protected = cose.sign1_protected(b"author01")
    assert protected == parsed.protected
    tbs = cose.sig_structure(protected, b"", payload)
    signature = run_sync(P.ed25519_sign(v1_owner.sign.seed, tbs))
    assert signature == parsed.signature
    assert run_sync(P.ed25519_verify(v1_owner.sign_pub, signature, tbs))
    assert cose.encode_sign1(protected, payload, signature).hex() == v["cose_sign1_hex"]
    assert len(h(v["cose_sign1_hex"])) == v["sizes_bytes"]["signed"]


def test_v1_001_sealed_object_bytes(v1_owner: Identity) -> None:
    v = _v1(V1_001)
    envelope = cbor.decode(h(v["sealed_object_cbor_hex"]))
    assert envelope[3] == 1
    sealed = run_sync(seal_unchecked(P, h(v["payload_cbor_hex"]), signer=v1_owner.sign,
                                     kid=b"author01", object_id=envelope[1], scope_id=envelope[2],
                                     dek=h(v["dek_hex"]), nonce=h(v["nonce_hex"]),
                                     format_version=1))
    assert sealed.encrypt0.hex() == v["cose_encrypt0_hex"]
    assert sealed.encoded.hex() == v["sealed_object_cbor_hex"]
    assert len(sealed.encrypt0) == v["sizes_bytes"]["envelope"]
    assert len(sealed.encoded) == v["sizes_bytes"]["sealed"]


def test_v1_001_opens_only_under_opt_in(v1_owner: Identity) -> None:
    v = _v1(V1_001)
    data, dek = h(v["sealed_object_cbor_hex"]), h(v["dek_hex"])
    keyring = Keyring(v1_owner.sign_pub, {})
    with pytest.raises(REFUSED):
        run_sync(open_sealed(P, data, dek, keyring))
    opened = run_sync(open_sealed(P, data, dek, keyring, allow_unverified=True))
    assert opened.trust is Trust.UNVERIFIED
    assert opened.authorship is Authorship.UNKNOWN
    assert opened.signature_verified is False
    assert opened.author_key_id is None
    assert opened.claimed_author_key_id == v1_owner.key_id
    assert opened.content == cbor.decode(h(v["payload_cbor_hex"]))[2]
    assert opened.payload.hex() == v["payload_cbor_hex"]


def test_v1_002_key_hierarchy(v1_owner: Identity) -> None:
    v = _v1(V1_002)
    x = v["x25519"]
    assert v["hkdf_infos"]["sign"].encode() == keys.INFO_SIGN
    assert v["hkdf_infos"]["ka"].encode() == keys.INFO_KA
    assert v["hkdf_infos"]["kek_wrap"] == keys.INFO_KEK_WRAP.decode() + " || scope_id"
    # the user's key-agreement key is the passphrase-derived identity of 001
    assert run_sync(P.hkdf_sha256(v1_owner.master, keys.INFO_KA)).hex() == x["user_seed_hex"]
    assert v1_owner.ka_seed.hex() == x["user_seed_hex"]
    assert run_sync(P.x25519_public(h(x["user_seed_hex"]))).hex() == x["user_pub_hex"]
    assert v1_owner.ka_pub.hex() == x["user_pub_hex"]
    assert run_sync(P.x25519_public(h(x["ephemeral_seed_hex"]))).hex() == x["ephemeral_pub_hex"]


def test_v1_002_kek_and_dek_wraps(v1_owner: Identity) -> None:
    v = _v1(V1_002)
    x = v["x25519"]
    scope_id, kek, dek = h(v["scope_id_hex"]), h(v["kek_hex"]), h(v["dek_hex"])
    wrapped = run_sync(keys.wrap_kek(P, kek, h(x["user_pub_hex"]), scope_id,
                                     eph_seed=h(x["ephemeral_seed_hex"])))
    assert wrapped.kek_wrapped.hex() == v["kek_wrapped_hex"]
    assert wrapped.eph_pub.hex() == x["ephemeral_pub_hex"]
    # the scope id is part of the wrap: another scope gives other bytes
    elsewhere = run_sync(keys.wrap_kek(P, kek, h(x["user_pub_hex"]), SCOPE_ID,
                                       eph_seed=h(x["ephemeral_seed_hex"])))
    assert elsewhere.kek_wrapped != wrapped.kek_wrapped
    assert run_sync(keys.wrap_dek(P, dek, kek)).hex() == v["dek_wrapped_hex"]
    sizes = v["sizes_bytes"]
    assert (len(wrapped.kek_wrapped), len(h(v["dek_wrapped_hex"])), len(wrapped.eph_pub)) == (
        sizes["kek_wrapped"], sizes["dek_wrapped"], sizes["ephemeral_pub"])


def test_v1_chain_from_passphrase_to_plaintext(v1_owner: Identity) -> None:
    """passphrase -> identity -> KEK (002) -> DEK (002) -> the v1 object of 001, opt-in only."""
    v1, v2 = _v1(V1_001), _v1(V1_002)
    wrapped = keys.WrappedKek(kek_wrapped=h(v2["kek_wrapped_hex"]),
                              eph_pub=h(v2["x25519"]["ephemeral_pub_hex"]))
    kek = run_sync(keys.unwrap_kek(P, wrapped, h(v2["scope_id_hex"]), v1_owner))
    assert kek.hex() == v2["kek_hex"]
    dek = run_sync(keys.unwrap_dek(P, h(v2["dek_wrapped_hex"]), kek))
    assert dek.hex() == v2["dek_hex"] == v1["dek_hex"]
    sealed = h(v1["sealed_object_cbor_hex"])
    assert cbor.decode(sealed)[2].hex() == v2["scope_id_hex"]
    opened = run_sync(open_sealed(P, sealed, dek, Keyring(v1_owner.sign_pub, {}),
                                  allow_unverified=True))
    assert opened.trust is Trust.UNVERIFIED
    # the unwrap is bound to the scope id
    with pytest.raises(REFUSED):
        run_sync(keys.unwrap_kek(P, wrapped, SCOPE_ID, v1_owner))
