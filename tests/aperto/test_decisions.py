"""Pins for the spec ambiguities recorded in docs/decisions.md (one test per entry)."""
from __future__ import annotations

import pytest

from ownmem.aperto import keys as K
from ownmem.aperto.model import Authorship, Memory, Trust
from ownmem.aperto.seal import open_sealed, seal, seal_unchecked
from ownmem.aperto.trust import Keyring
from ownmem.crypto import cbor, cose, provider, run_sync
from ownmem.errors import AuthenticationFailed, MalformedInput

P = provider()
SCOPE = bytes(range(1, 17))
OID = bytes(range(0xA0, 0xB0))
DEK = bytes(32)
NONCE = bytes(12)


@pytest.fixture(scope="module")
def owner() -> K.SigningKey:
    return run_sync(K.signing_key(P, b"\x11" * 32))


@pytest.fixture(scope="module")
def other() -> K.SigningKey:
    return run_sync(K.signing_key(P, b"\x22" * 32))


def _payload(kid: bytes, extra: dict[int, object] | None = None) -> bytes:
    m: dict[int, object] = {1: 2, 2: "probe", 3: 0.5, 4: {1: "t", 2: kid}, 5: 1, 7: {1: 1750000000}}
    m.update(extra or {})
    return cbor.encode(m)


def _seal_without_kid(signer: K.SigningKey, payload: bytes) -> bytes:
    """A v2 object whose protected header carries only the algorithm."""
    aad = cbor.encode([2, OID, SCOPE])
    protected = cbor.encode({cose.ALG: cose.ALG_EDDSA})
    sig = run_sync(P.ed25519_sign(signer.seed, cose.sig_structure(protected, aad, payload)))
    signed = cose.encode_sign1(protected, payload, sig)
    enc = run_sync(cose.encrypt0(P, DEK, NONCE, signed, aad))
    return cbor.encode({1: OID, 2: SCOPE, 3: 2, 4: enc})


def test_absent_header_kid_is_accepted_when_payload_binds_author(owner: K.SigningKey) -> None:
    sealed = _seal_without_kid(owner, _payload(owner.key_id))
    o = run_sync(open_sealed(P, sealed, DEK, Keyring(owner.public, {})))
    assert o.trust is Trust.SELF and o.author_key_id == owner.key_id


def test_absent_header_kid_still_enforces_author_binding(owner: K.SigningKey, other: K.SigningKey) -> None:
    sealed = _seal_without_kid(other, _payload(owner.key_id))
    with pytest.raises(AuthenticationFailed):
        run_sync(open_sealed(P, sealed, DEK, Keyring(owner.public, {other.key_id: other.public})))


def test_unverified_read_reports_no_author_and_exposes_claim(owner: K.SigningKey, other: K.SigningKey) -> None:
    so = run_sync(seal_unchecked(P, _payload(other.key_id), signer=other, kid=other.key_id, object_id=OID,
                                 scope_id=SCOPE, dek=DEK, nonce=NONCE))
    o = run_sync(open_sealed(P, so.encoded, DEK, Keyring(owner.public, {}), allow_unverified=True))
    assert (o.trust, o.authorship, o.author_key_id) == (Trust.UNVERIFIED, Authorship.UNKNOWN, None)
    assert o.claimed_author_key_id == other.key_id and not o.signature_verified


def test_authentic_object_without_text_content_is_refused_alone(owner: K.SigningKey) -> None:
    payload = cbor.encode({1: 2, 2: 12345, 3: 0.5, 4: {1: "t", 2: owner.key_id}, 5: 1, 7: {1: 1}})
    so = run_sync(seal_unchecked(P, payload, signer=owner, kid=owner.key_id, object_id=OID, scope_id=SCOPE,
                                 dek=DEK, nonce=NONCE))
    with pytest.raises(MalformedInput):
        run_sync(open_sealed(P, so.encoded, DEK, Keyring(owner.public, {})))


def test_wire_trust_field_is_always_written_as_self(owner: K.SigningKey) -> None:
    so = run_sync(seal(P, Memory(content="x", created=1), signer=owner, scope_id=SCOPE, dek=DEK))
    o = run_sync(open_sealed(P, so, DEK, Keyring(owner.public, {})))
    assert cbor.decode(o.payload)[5] == 1


def test_custody_naming_the_owner_is_attested_never_self(owner: K.SigningKey) -> None:
    custody = {1: 1, 2: owner.key_id, 3: 1755000000, 4: owner.key_id}
    so = run_sync(seal_unchecked(P, _payload(owner.key_id, {20: custody}), signer=owner,
                                 kid=owner.key_id, object_id=OID, scope_id=SCOPE, dek=DEK, nonce=NONCE))
    o = run_sync(open_sealed(P, so.encoded, DEK, Keyring(owner.public, {})))
    assert (o.trust, o.authorship, o.author_key_id) == (Trust.TRUSTED, Authorship.ATTESTED, owner.key_id)


def test_indefinite_length_cbor_is_refused() -> None:
    with pytest.raises(MalformedInput):
        cbor.decode(bytes.fromhex("9f0102ff"))
