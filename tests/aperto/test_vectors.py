"""ApertoMemory draft-02, Appendix A "Test Vectors": the format_version 1 vectors.

The format_version 2 set (001-014: reproduction byte for byte, the verdicts, the rebuilds from
the fixture facts of tests/vectors/VECTORS-README.md) has one runner, ownmem.web.selftest, which
the PWA and the browser tests run too; pytest parametrises over it in
tests/web/test_selftest_runner.py.  Here: the key-hierarchy intermediates of the v1 vectors, the
v1 COSE_Sign1 bytes, and the rule that a v1 object opens only under the opt-in.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from ownmem.aperto import keys
from ownmem.aperto.keys import Identity
from ownmem.aperto.model import Authorship, Memory, Trust
from ownmem.aperto.payload import encode_payload
from ownmem.aperto.seal import open_sealed, seal_unchecked
from ownmem.aperto.trust import Keyring
from ownmem.crypto import cbor, cose, provider, run_sync
from ownmem.errors import AuthenticationFailed
from tests.ownmem_testpaths import VECTORS

P = provider()
h = bytes.fromhex

SCOPE_ID = h("0102030405060708090a0b0c0d0e0f10")     # VECTORS-README.md

# The one error type per expected outcome (STYLE.md habit 10).
REFUSED = AuthenticationFailed


def _v1(name: str) -> dict[str, Any]:
    vector: dict[str, Any] = json.loads((VECTORS / "apertomemory-v1" / name).read_text())
    return vector


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
