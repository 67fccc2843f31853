"""COSE structures (RFC 9052) that ownmem assembles byte by byte for speed: each must equal
the deterministic CBOR encoding of the structure it names."""
from __future__ import annotations

from hypothesis import given, strategies as st

from ownmem.crypto import cbor, cose

blobs = st.binary(max_size=300)


@given(st.binary(min_size=8, max_size=8))
def test_sign1_protected_header_is_the_cbor_map(kid: bytes) -> None:
    assert cose.sign1_protected(kid) == cbor.encode({cose.ALG: cose.ALG_EDDSA, cose.KID: kid})


@given(blobs, blobs, blobs)
def test_sig_structure_is_the_cbor_array(protected: bytes, aad: bytes, payload: bytes) -> None:
    assert cose.sig_structure(protected, aad, payload) == cbor.encode(["Signature1", protected, aad, payload])


@given(blobs, blobs)
def test_enc_structure_is_the_cbor_array(protected: bytes, aad: bytes) -> None:
    assert cose.enc_structure(protected, aad) == cbor.encode(["Encrypt0", protected, aad])


@given(blobs, blobs, st.binary(min_size=64, max_size=64))
def test_sign1_is_the_tagged_cbor_array(protected: bytes, payload: bytes, signature: bytes) -> None:
    assert cose.encode_sign1(protected, payload, signature) == cbor.encode(
        cbor.Tag(18, [protected, {}, payload, signature]))
