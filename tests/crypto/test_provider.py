"""The CPython crypto provider against published known-answer tests.

RFC 8032 (Ed25519), RFC 7748 (X25519), RFC 5869 (HKDF), RFC 3394 (AES-KW), the
NIST GCM test cases (AES-256-GCM), FIPS 204 ML-DSA-65 (cross-checked against the
independent dilithium-py implementation, and the SAIHM example holderId).
Every authentication failure must surface as ``AuthenticationFailed``.
"""
from __future__ import annotations

import json

import pytest
from dilithium_py.ml_dsa import ML_DSA_65

from ownmem.crypto import provider, run_sync, sha256
from ownmem.errors import AuthenticationFailed, MalformedInput
from tests.ownmem_testpaths import SAIHM_EXAMPLE

P = provider()
h = bytes.fromhex


def test_provider_is_cpython() -> None:
    assert P.name == "cpython"
    assert provider() is P


# ---------------------------------------------------------------- Ed25519, RFC 8032 §7.1

ED_VECTORS = [
    # TEST 1 (empty message) and TEST 2 (one byte)
    ("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
     "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
    ("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
     "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
]


@pytest.mark.parametrize(("seed", "public", "message", "signature"), ED_VECTORS)
def test_ed25519_rfc8032(seed: str, public: str, message: str, signature: str) -> None:
    assert run_sync(P.ed25519_public(h(seed))).hex() == public
    assert run_sync(P.ed25519_sign(h(seed), h(message))).hex() == signature
    assert run_sync(P.ed25519_verify(h(public), h(signature), h(message))) is True


def test_ed25519_verify_says_no_instead_of_raising() -> None:
    seed, public, _, signature = ED_VECTORS[0]
    sig = bytearray(h(signature))
    sig[0] ^= 1
    assert run_sync(P.ed25519_verify(h(public), bytes(sig), b"")) is False
    assert run_sync(P.ed25519_verify(h(public), h(signature), b"x")) is False
    assert run_sync(P.ed25519_verify(h(public), h(signature)[:63], b"")) is False
    assert run_sync(P.ed25519_verify(h(public)[:31], h(signature), b"")) is False
    assert run_sync(P.ed25519_verify(h(ED_VECTORS[1][1]), h(signature), b"")) is False


def test_ed25519_bad_seed_length_is_malformed() -> None:
    with pytest.raises(MalformedInput):
        run_sync(P.ed25519_public(b"\x00" * 31))


# ---------------------------------------------------------------- X25519, RFC 7748

ALICE_SEED = h("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
ALICE_PUB = h("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
BOB_SEED = h("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")
BOB_PUB = h("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
SHARED_SECRET = h("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")


def test_x25519_rfc7748_diffie_hellman() -> None:
    """§6.1."""
    assert run_sync(P.x25519_public(ALICE_SEED)) == ALICE_PUB
    assert run_sync(P.x25519_public(BOB_SEED)) == BOB_PUB
    assert run_sync(P.x25519_shared(ALICE_SEED, BOB_PUB)) == SHARED_SECRET
    assert run_sync(P.x25519_shared(BOB_SEED, ALICE_PUB)) == SHARED_SECRET


def test_x25519_rfc7748_scalar_multiplication() -> None:
    """§5.2, first vector."""
    scalar = h("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4")
    u = h("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c")
    assert run_sync(P.x25519_shared(scalar, u)).hex() == (
        "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552")


@pytest.mark.parametrize("peer", [
    "00" * 32,                                                              # u = 0
    "01" + "00" * 31,                                                       # u = 1
    "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",     # order-8 point
])
def test_x25519_low_order_peer_is_refused(peer: str) -> None:
    with pytest.raises(AuthenticationFailed):
        run_sync(P.x25519_shared(ALICE_SEED, h(peer)))


def test_x25519_wrong_length_peer_is_refused() -> None:
    with pytest.raises(AuthenticationFailed):
        run_sync(P.x25519_shared(ALICE_SEED, BOB_PUB[:31]))


# ---------------------------------------------------------------- HKDF-SHA256, RFC 5869

def test_hkdf_rfc5869_case_1() -> None:
    okm = run_sync(P.hkdf_sha256(b"\x0b" * 22, h("f0f1f2f3f4f5f6f7f8f9"), 42,
                                 h("000102030405060708090a0b0c")))
    assert okm.hex() == ("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
                         "34007208d5b887185865")


def test_hkdf_rfc5869_case_3_default_salt() -> None:
    """No salt = HashLen zero bytes: the form every ownmem key derivation uses."""
    okm = run_sync(P.hkdf_sha256(b"\x0b" * 22, b"", 42))
    assert okm.hex() == ("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d"
                         "9d201395faa4b61a96c8")
    assert run_sync(P.hkdf_sha256(b"\x0b" * 22, b"", 42, b"")) == okm


# ---------------------------------------------------------------- AES-KW, RFC 3394

KW_KEK = h("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
KW_KEY = h("00112233445566778899aabbccddeeff000102030405060708090a0b0c0d0e0f")
KW_WRAPPED = h("28c9f404c4b810f4cbccb35cfb87f8263f5786e2d80ed326"
               "cbc7f0e71a99f43bfb988b9b7a02dd21")


def test_aes_kw_rfc3394_4_6() -> None:
    """§4.6: wrap 256 bits of key data with a 256-bit KEK."""
    assert run_sync(P.aes_kw_wrap(KW_KEK, KW_KEY)) == KW_WRAPPED
    assert run_sync(P.aes_kw_unwrap(KW_KEK, KW_WRAPPED)) == KW_KEY


@pytest.mark.parametrize("index", [0, 7, 8, 20, 39])
def test_aes_kw_tampered_wrap_is_refused(index: int) -> None:
    wrapped = bytearray(KW_WRAPPED)
    wrapped[index] ^= 0x01
    with pytest.raises(AuthenticationFailed):
        run_sync(P.aes_kw_unwrap(KW_KEK, bytes(wrapped)))


@pytest.mark.parametrize(("kek", "wrapped"), [
    (bytes(32), KW_WRAPPED),                  # wrong KEK
    (KW_KEK, KW_WRAPPED[:-8]),                # truncated by a block
    (KW_KEK, KW_WRAPPED[:-1]),                # not a multiple of 8
    (KW_KEK, b""),
])
def test_aes_kw_wrong_kek_or_shape_is_refused(kek: bytes, wrapped: bytes) -> None:
    with pytest.raises(AuthenticationFailed):
        run_sync(P.aes_kw_unwrap(kek, wrapped))


# ---------------------------------------------------------------- AES-256-GCM

def test_aes_gcm_nist_test_cases_13_and_14() -> None:
    key, iv = bytes(32), bytes(12)
    assert run_sync(P.aes_gcm_encrypt(key, iv, b"", b"")).hex() == "530f8afbc74536b9a963b4f1c4cb738b"
    ct = run_sync(P.aes_gcm_encrypt(key, iv, bytes(16), b""))
    assert ct.hex() == "cea7403d4d606b6e074ec5d3baf39d18" "d0d1c8a799996bf0265b98b5d48ab919"
    assert run_sync(P.aes_gcm_decrypt(key, iv, ct, b"")) == bytes(16)


GCM_KEY = bytes(range(32))
GCM_IV = bytes(range(12))


def _gcm() -> bytes:
    return run_sync(P.aes_gcm_encrypt(GCM_KEY, GCM_IV, b"a memory", b"aad"))


@pytest.mark.parametrize("bit", [0, 7, 8 * 4 + 3, 8 * 8, 8 * 23 + 7])
def test_aes_gcm_flipped_bit_is_refused(bit: int) -> None:
    ct = bytearray(_gcm())
    ct[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(AuthenticationFailed):
        run_sync(P.aes_gcm_decrypt(GCM_KEY, GCM_IV, bytes(ct), b"aad"))


@pytest.mark.parametrize(("key", "iv", "ct", "aad"), [
    (GCM_KEY, GCM_IV, None, b"AAD"),           # other associated data
    (GCM_KEY, GCM_IV, None, b""),
    (bytes(32), GCM_IV, None, b"aad"),         # other key
    (GCM_KEY, bytes(12), None, b"aad"),        # other nonce
    (GCM_KEY, GCM_IV, b"", b"aad"),            # shorter than a tag
    (GCM_KEY, GCM_IV, b"\x00" * 15, b"aad"),
    (GCM_KEY[:16], GCM_IV, None, b"aad"),      # AES-128 key: not what the format allows
    (GCM_KEY, GCM_IV[:8], None, b"aad"),       # short nonce
])
def test_aes_gcm_wrong_inputs_are_refused(key: bytes, iv: bytes, ct: bytes | None, aad: bytes) -> None:
    with pytest.raises(AuthenticationFailed):
        run_sync(P.aes_gcm_decrypt(key, iv, _gcm() if ct is None else ct, aad))


# ---------------------------------------------------------------- ML-DSA-65, FIPS 204

SEED = bytes(range(32))
CONTEXT = b"ownmem-test"
MESSAGE = b"a message worth signing"


def test_mldsa65_seeded_keygen_is_deterministic() -> None:
    pub = run_sync(P.mldsa65_public(SEED))
    assert len(pub) == 1952
    assert run_sync(P.mldsa65_public(SEED)) == pub
    assert run_sync(P.mldsa65_public(bytes(32))) != pub
    assert ML_DSA_65.key_derive(SEED)[0] == pub          # same key from an independent implementation


def test_mldsa65_saihm_example_holder_id() -> None:
    """SAIHM "Example values": holderId = SHA-256 of the ML-DSA-65 public key generated
    from the first 32 bytes of identityKey (tests/vectors/saihm/example-values.json)."""
    example = json.loads(SAIHM_EXAMPLE.read_text())
    pub = run_sync(P.mldsa65_public(bytes.fromhex(example["identityKey"])[:32]))
    assert sha256(pub).hex() == example["holderId"]


def test_mldsa65_bad_seed_length_is_malformed() -> None:
    with pytest.raises(MalformedInput):
        run_sync(P.mldsa65_public(b"\x00" * 31))


def test_mldsa65_hedged_signature_verifies() -> None:
    pub = run_sync(P.mldsa65_public(SEED))
    a = run_sync(P.mldsa65_sign(SEED, MESSAGE, CONTEXT))
    b = run_sync(P.mldsa65_sign(SEED, MESSAGE, CONTEXT))
    assert len(a) == 3309
    assert a != b                                           # hedged: fresh randomness each time
    assert run_sync(P.mldsa65_verify(pub, MESSAGE, a, CONTEXT))
    assert run_sync(P.mldsa65_verify(pub, MESSAGE, b, CONTEXT))


def test_mldsa65_deterministic_signature_is_deterministic_and_interoperable() -> None:
    pub = run_sync(P.mldsa65_public(SEED))
    a = run_sync(P.mldsa65_sign(SEED, MESSAGE, CONTEXT, deterministic=True))
    b = run_sync(P.mldsa65_sign(SEED, MESSAGE, CONTEXT, deterministic=True))
    assert a == b and len(a) == 3309
    # dilithium-py's deterministic signature verifies under pyca/cryptography ...
    assert run_sync(P.mldsa65_verify(pub, MESSAGE, a, CONTEXT))
    assert ML_DSA_65.verify(pub, MESSAGE, a, ctx=CONTEXT)
    # ... and pyca/cryptography's hedged signature verifies under dilithium-py
    hedged = run_sync(P.mldsa65_sign(SEED, MESSAGE, CONTEXT))
    assert ML_DSA_65.verify(pub, MESSAGE, hedged, ctx=CONTEXT)


def test_mldsa65_context_matters() -> None:
    pub = run_sync(P.mldsa65_public(SEED))
    det = run_sync(P.mldsa65_sign(SEED, MESSAGE, CONTEXT, deterministic=True))
    hedged = run_sync(P.mldsa65_sign(SEED, MESSAGE, CONTEXT))
    for sig in (det, hedged):
        assert not run_sync(P.mldsa65_verify(pub, MESSAGE, sig, b"other-context"))
        assert not run_sync(P.mldsa65_verify(pub, MESSAGE, sig, b""))
        assert not ML_DSA_65.verify(pub, MESSAGE, sig, ctx=b"other-context")
    # and a different context gives a different deterministic signature
    assert run_sync(P.mldsa65_sign(SEED, MESSAGE, b"other", deterministic=True)) != det


def test_mldsa65_tampering_fails_without_raising() -> None:
    pub = run_sync(P.mldsa65_public(SEED))
    sig = run_sync(P.mldsa65_sign(SEED, MESSAGE, CONTEXT))
    flipped = bytearray(sig)
    flipped[100] ^= 1
    assert not run_sync(P.mldsa65_verify(pub, MESSAGE, bytes(flipped), CONTEXT))
    assert not run_sync(P.mldsa65_verify(pub, MESSAGE + b"!", sig, CONTEXT))
    assert not run_sync(P.mldsa65_verify(pub, MESSAGE, sig[:-1], CONTEXT))
    assert not run_sync(P.mldsa65_verify(pub[:-1], MESSAGE, sig, CONTEXT))
    other = run_sync(P.mldsa65_public(bytes(32)))
    assert not run_sync(P.mldsa65_verify(other, MESSAGE, sig, CONTEXT))


def test_mldsa65_context_longer_than_255_bytes() -> None:
    """FIPS 204 caps the context at 255 bytes; a longer one never verifies."""
    pub = run_sync(P.mldsa65_public(SEED))
    sig = run_sync(P.mldsa65_sign(SEED, MESSAGE, CONTEXT))
    assert not run_sync(P.mldsa65_verify(pub, MESSAGE, sig, b"x" * 256))
