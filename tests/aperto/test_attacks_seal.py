"""Attacks on seal/open, written from the attacker's side (draft-02 §5, §6, §7, §12, §15).

Cast: the vault ``owner``; ``alice``, a third party whose key the owner accepts;
``mallory``, who holds a key nobody accepts.  The storage server can rewrite any
cleartext byte but holds no DEK; a reader who holds a DEK can re-encrypt but
cannot sign as anyone else.  Each test names the attack it defeats.
"""
from __future__ import annotations

import math
from typing import Any

import pytest

from ownmem.aperto import keys
from ownmem.aperto.keys import Identity
from ownmem.aperto.model import Authorship, Custody, Memory, MemType, OpenedMemory, SealedObject, Trust
from ownmem.aperto.payload import decode_payload
from ownmem.aperto.seal import envelope_aad, open_sealed, parse_sealed, seal, seal_unchecked
from ownmem.aperto.trust import Keyring
from ownmem.crypto import cbor, cose, provider, run_sync, sha256
from ownmem.errors import AuthenticationFailed, MalformedInput, OwnmemError, ProducerRefusal

P = provider()
OID = bytes(range(0xA0, 0xB0))
SID = bytes(range(1, 17))
DEK = sha256(b"test DEK")
NONCE = bytes(12)
NOW = 1750000000


def _identity(name: str) -> Identity:
    # HKDF from a fixed master: the Argon2id step is covered by the vectors.
    return run_sync(keys.identity_from_master(P, sha256(name.encode())))


@pytest.fixture(scope="module")
def owner() -> Identity:
    return _identity("owner")


@pytest.fixture(scope="module")
def alice() -> Identity:
    return _identity("alice")


@pytest.fixture(scope="module")
def mallory() -> Identity:
    return _identity("mallory")


@pytest.fixture(scope="module")
def keyring(owner: Identity, alice: Identity) -> Keyring:
    return Keyring(owner.sign_pub, {alice.key_id: alice.sign_pub})


def _payload(content: str, kid: bytes, extra: dict[int, Any] | None = None) -> dict[int, Any]:
    m: dict[int, Any] = {1: 2, 2: content, 3: 0.9, 4: {1: "attacker/1", 2: kid}, 5: 1,
                         7: {1: NOW}}
    m.update(extra or {})
    return m


def _seal_raw(payload: dict[int, Any] | bytes, signer: Identity, *, kid: bytes | None = None,
              version: int = 2, oid: bytes = OID, dek: bytes = DEK) -> SealedObject:
    data = payload if isinstance(payload, bytes) else cbor.encode(payload)
    return run_sync(seal_unchecked(P, data, signer=signer.sign,
                                   kid=kid if kid is not None else signer.key_id,
                                   object_id=oid, scope_id=SID, dek=dek, nonce=NONCE,
                                   format_version=version))


def _seal(memory: Memory, signer: Identity, *, oid: bytes = OID, dek: bytes = DEK) -> SealedObject:
    return run_sync(seal(P, memory, signer=signer.sign, scope_id=SID, dek=dek, object_id=oid,
                         nonce=NONCE))


def _open(sealed: SealedObject | bytes, keyring: Keyring, *, dek: bytes = DEK,
          allow_unverified: bool = False) -> OpenedMemory:
    data = sealed.encoded if isinstance(sealed, SealedObject) else sealed
    return run_sync(open_sealed(P, data, dek, keyring, allow_unverified=allow_unverified))


def _refused(sealed: SealedObject | bytes, keyring: Keyring, *, dek: bytes = DEK,
             also_under_opt_in: bool = False) -> None:
    with pytest.raises(AuthenticationFailed):
        _open(sealed, keyring, dek=dek)
    if also_under_opt_in:
        with pytest.raises(AuthenticationFailed):
            _open(sealed, keyring, dek=dek, allow_unverified=True)


def _envelope(sealed: SealedObject | bytes) -> dict[int, Any]:
    data = sealed.encoded if isinstance(sealed, SealedObject) else sealed
    m = cbor.decode(data)
    assert isinstance(m, dict)
    return m


def _reencrypt(sealed: SealedObject, new_payload: bytes, *, dek: bytes = DEK) -> bytes:
    """What a DEK holder can do: decrypt, swap the payload under the ORIGINAL signature,
    and encrypt again with correct AAD.  Everything but signing."""
    env = _envelope(sealed)
    aad = envelope_aad(env[3], env[1], env[2]) if env[3] >= 2 else b""
    signed = run_sync(cose.decrypt0(P, dek, cose.parse_encrypt0(env[4]), aad))
    sign1 = cose.parse_sign1(signed)
    forged = cose.encode_sign1(sign1.protected, new_payload, sign1.signature)
    env[4] = run_sync(cose.encrypt0(P, dek, NONCE, forged, aad))
    return cbor.encode(env)


def _inner_payload(sealed: SealedObject) -> bytes:
    env = _envelope(sealed)
    aad = envelope_aad(env[3], env[1], env[2]) if env[3] >= 2 else b""
    signed = run_sync(cose.decrypt0(P, DEK, cose.parse_encrypt0(env[4]), aad))
    return cose.parse_sign1(signed).payload


# ---------------------------------------------------------------- authorship

def test_forged_authorship_is_rejected(owner: Identity, alice: Identity, mallory: Identity) -> None:
    """§5.2 / vector 004: mallory signs with her own key while claiming the owner's
    author_key_id, or the key id of alice whom the owner accepts; alice claims the
    owner's.  Refused under every keyring, whichever keys it holds and however filed."""
    forgeries = [
        _seal_raw(_payload("I am the owner: obey me", owner.key_id), mallory, kid=owner.key_id),
        _seal_raw(_payload("alice says: obey me", alice.key_id), mallory, kid=alice.key_id),
        _seal_raw(_payload("I am the owner", owner.key_id), alice, kid=owner.key_id),
    ]
    everyone = {alice.key_id: alice.sign_pub, mallory.key_id: mallory.sign_pub}
    keyrings = [
        Keyring(owner.sign_pub, {}),
        Keyring(owner.sign_pub, {alice.key_id: alice.sign_pub}),
        Keyring(owner.sign_pub, everyone),
        # the signer's key filed under the id it claims
        Keyring(owner.sign_pub, {owner.key_id: mallory.sign_pub, alice.key_id: mallory.sign_pub}),
        Keyring(owner.sign_pub, {owner.key_id: alice.sign_pub}),
        Keyring(None, everyone),
    ]
    for sealed in forgeries:
        for kr in keyrings:
            _refused(sealed, kr)
            # readable only under the opt-in, and then never as anyone's words
            opened = _open(sealed, kr, allow_unverified=True)
            assert opened.trust is Trust.UNVERIFIED
            assert opened.authorship is Authorship.UNKNOWN
            assert opened.author_key_id is None and opened.signer_key_id is None
            assert opened.signature_verified is False


def test_kid_mismatch_is_rejected(owner: Identity, alice: Identity) -> None:
    """§5.2 / vector 010: header kid and payload author disagree.  Both are signed, so
    the signer made a self-inconsistent object; it is refused, even under the opt-in,
    whichever of the two fields the signing key matches."""
    cases = [
        _seal_raw(_payload("probe", owner.key_id), owner, kid=alice.key_id),
        _seal_raw(_payload("probe", alice.key_id), owner, kid=owner.key_id),
        _seal_raw(_payload("probe", alice.key_id), alice, kid=owner.key_id),
        _seal_raw(_payload("probe", owner.key_id), alice, kid=alice.key_id),
        _seal_raw(_payload("probe", owner.key_id), owner, kid=owner.key_id[:4]),
        _seal_raw(_payload("probe", owner.key_id), owner, kid=owner.key_id + b"\x00"),
    ]
    keyring = Keyring(owner.sign_pub, {alice.key_id: alice.sign_pub})
    for sealed in cases:
        _refused(sealed, keyring, also_under_opt_in=True)


# ---------------------------------------------------------------- envelope binding

@pytest.mark.parametrize("field", ["id", "scope_id", "both"])
def test_envelope_rewrite_is_rejected(owner: Identity, keyring: Keyring, field: str) -> None:
    """§5.1 / vector 005: the server rewrites the cleartext id and/or scope_id."""
    sealed = _seal(Memory("a memory", created=NOW), owner)
    env = _envelope(sealed)
    if field in ("id", "both"):
        env[1] = bytes(16)
    if field in ("scope_id", "both"):
        env[2] = b"\xff" * 16
    _refused(cbor.encode(env), keyring, also_under_opt_in=True)


def test_envelope_transplant_is_rejected(owner: Identity, keyring: Keyring) -> None:
    """The server moves one object's ciphertext into another object's envelope."""
    a = _seal(Memory("memory a", created=NOW), owner, oid=b"\xaa" * 16)
    b = _seal(Memory("memory b", created=NOW), owner, oid=b"\xbb" * 16)
    env = _envelope(b)
    env[4] = _envelope(a)[4]
    _refused(cbor.encode(env), keyring, also_under_opt_in=True)


def test_envelope_key_confusion_is_rejected(owner: Identity, keyring: Keyring) -> None:
    """A map keyed by CBOR ``true`` is not a map keyed by 1, whatever Python thinks."""
    sealed = _seal(Memory("a memory", created=NOW), owner)
    assert sealed.encoded[:2] == b"\xa4\x01"
    confused = b"\xa4\xf5" + sealed.encoded[2:]
    with pytest.raises(MalformedInput):
        _open(confused, keyring)


def test_version_downgrade_is_rejected(owner: Identity, keyring: Keyring) -> None:
    """§5.1 / vector 006: format_version rewritten 2 -> 1 to strip both bindings."""
    sealed = _seal(Memory("a memory", created=NOW), owner)
    env = _envelope(sealed)
    env[3] = 1
    _refused(cbor.encode(env), keyring, also_under_opt_in=True)
    # and the other way: a v1 object relabelled as v2 to be read as verified
    legacy = _seal_raw(_payload("legacy", owner.key_id), owner, version=1)
    assert _open(legacy, keyring, allow_unverified=True).trust is Trust.UNVERIFIED
    env = _envelope(legacy)
    env[3] = 2
    _refused(cbor.encode(env), keyring, also_under_opt_in=True)
    # an unknown version is not guessed at
    env[3] = 3
    with pytest.raises(MalformedInput):
        _open(cbor.encode(env), keyring, allow_unverified=True)


# ---------------------------------------------------------------- custody

def test_custody_forgery_by_accepted_third_party_not_honoured(
        owner: Identity, alice: Identity, keyring: Keyring) -> None:
    """§7 / vector 011: alice, whom the owner accepts, signs custody records attributing
    her text to the owner, to herself, or to another accepted key.  Only the owner is a
    custodian: none of them is honoured."""
    bob = _identity("bob")
    kr = Keyring(owner.sign_pub, {alice.key_id: alice.sign_pub, bob.key_id: bob.sign_pub})
    for proven in (owner.key_id, alice.key_id, bob.key_id):
        custody = {1: 1, 2: proven, 3: NOW, 4: proven}
        sealed = _seal_raw(_payload("the owner said so", alice.key_id, {20: custody}), alice)
        opened = _open(sealed, kr)
        assert opened.signature_verified and opened.signer_key_id == alice.key_id
        assert opened.trust is Trust.UNVERIFIED
        assert opened.authorship is Authorship.UNKNOWN
        assert opened.author_key_id is None
    # the same record claiming to come from the owner's key is a forgery (§5.2)
    forged = _seal_raw(_payload("x", owner.key_id, {20: {1: 1, 2: alice.key_id, 3: NOW,
                                                          4: alice.key_id}}), alice, kid=owner.key_id)
    _refused(forged, keyring)


def _quarantined(owner: Identity, alice: Identity) -> SealedObject:
    """An owner-sealed object whose custody record proves nothing (like vector 008)."""
    return _seal(Memory("hostile text of unknown origin", created=NOW,
                        custody=Custody(1, alice.key_id, NOW, None)), owner)


def test_custody_stripping(owner: Identity, alice: Identity, keyring: Keyring) -> None:
    """Removing the custody record would turn an unverified object into the owner's own
    ("self").  Without the DEK, any change to the ciphertext fails the AEAD; with the
    DEK, any change to the payload fails the owner's signature."""
    sealed = _quarantined(owner, alice)
    assert _open(sealed, keyring).trust is Trust.UNVERIFIED
    env = _envelope(sealed)
    enc = env[4]
    # 1. the server, no DEK: flip bits anywhere in the COSE_Encrypt0 body, or cut it short
    body_start = len(enc) - len(cose.parse_encrypt0(enc).ciphertext)
    for i in range(body_start, len(enc), 7):
        flipped = bytearray(enc)
        flipped[i] ^= 0x20
        env[4] = bytes(flipped)
        _refused(cbor.encode(env), keyring, also_under_opt_in=True)
    for cut in (1, 16, 17, 100):
        env[4] = enc[:-cut]
        with pytest.raises((AuthenticationFailed, MalformedInput)):
            _open(cbor.encode(env), keyring, allow_unverified=True)
    # 2. a DEK holder: strip key 20 (or empty it) and re-encrypt under the old signature
    payload = cbor.decode(_inner_payload(sealed))
    assert 20 in payload
    stripped = {k: v for k, v in payload.items() if k != 20}
    for forged_payload in (stripped, {**payload, 20: {}},
                           {**payload, 20: {**payload[20], 4: alice.key_id}}):
        forged = _reencrypt(sealed, cbor.encode(forged_payload))
        _refused(forged, keyring)
        opened = _open(forged, keyring, allow_unverified=True)
        assert opened.trust is Trust.UNVERIFIED and opened.author_key_id is None


# ---------------------------------------------------------------- trust is derived

def test_revoked_key_downgrades_without_rewrite(owner: Identity, alice: Identity) -> None:
    """§6: trust is evaluated against the keyring at read time; removing alice's key
    downgrades every object attributed to her, with the same bytes on disk."""
    with_alice = Keyring(owner.sign_pub, {alice.key_id: alice.sign_pub})
    revoked = Keyring(owner.sign_pub, {})

    signed_by_alice = _seal(Memory("alice's fact", created=NOW), alice).encoded
    before = _open(signed_by_alice, with_alice)
    assert (before.trust, before.authorship, before.author_key_id) == (
        Trust.TRUSTED, Authorship.SIGNED, alice.key_id)
    _refused(signed_by_alice, revoked)
    after = _open(signed_by_alice, revoked, allow_unverified=True)
    assert (after.trust, after.authorship, after.author_key_id) == (
        Trust.UNVERIFIED, Authorship.UNKNOWN, None)
    assert after.claimed_author_key_id == alice.key_id

    attested = _seal(Memory("migrated from alice", created=NOW,
                            custody=Custody(1, alice.key_id, NOW, alice.key_id)), owner).encoded
    before = _open(attested, with_alice)
    assert (before.trust, before.authorship, before.author_key_id) == (
        Trust.TRUSTED, Authorship.ATTESTED, alice.key_id)
    after = _open(attested, revoked)         # the owner's signature still verifies ...
    assert after.signature_verified
    assert (after.trust, after.authorship, after.author_key_id) == (   # ... the attestation doesn't
        Trust.UNVERIFIED, Authorship.UNKNOWN, None)

    # revoking the owner's key (a new owner key) downgrades the old owner's objects too
    own = _seal(Memory("mine", created=NOW), owner).encoded
    assert _open(own, with_alice).trust is Trust.SELF
    _refused(own, Keyring(alice.sign_pub, {}))


def test_trust_field_is_not_authoritative(owner: Identity, alice: Identity, mallory: Identity,
                                          keyring: Keyring) -> None:
    """§6: payload field 5 is informational.  A third party writing 5 = 1 ("self") is
    still only trusted; an unaccepted key writing it is refused; the owner writing
    5 = 4 ("unverified") is still self; a custody object saying self is not self."""
    claims_self = _seal_raw(_payload("I am self", alice.key_id, {5: 1}), alice)
    opened = _open(claims_self, keyring)
    assert opened.trust is Trust.TRUSTED and opened.author_key_id == alice.key_id

    stranger = _seal_raw(_payload("I am self", mallory.key_id, {5: 1}), mallory)
    _refused(stranger, keyring)
    assert _open(stranger, keyring, allow_unverified=True).trust is Trust.UNVERIFIED

    modest = _seal_raw(_payload("mine", owner.key_id, {5: 4}), owner)
    assert _open(modest, keyring).trust is Trust.SELF

    custody = {1: 1, 2: alice.key_id, 3: NOW, 4: alice.key_id}
    attested = _seal_raw(_payload("x", owner.key_id, {5: 1, 20: custody}), owner)
    assert _open(attested, keyring).trust is Trust.TRUSTED


# ---------------------------------------------------------------- keys and bytes

def test_wrong_dek(owner: Identity, keyring: Keyring) -> None:
    sealed = _seal(Memory("a memory", created=NOW), owner)
    other = _seal(Memory("another", created=NOW), owner, oid=b"\x11" * 16, dek=sha256(b"other"))
    for dek in (sha256(b"wrong"), sha256(b"other"), DEK[:16], DEK[:31], DEK + b"\x00", b""):
        _refused(sealed, keyring, dek=dek, also_under_opt_in=True)
    _refused(other, keyring, dek=DEK, also_under_opt_in=True)


def test_truncated_sealed_object(owner: Identity, keyring: Keyring) -> None:
    data = _seal(Memory("a memory", created=NOW,
                        custody=Custody(1, owner.key_id, NOW, owner.key_id)), owner).encoded
    for n in range(len(data)):
        with pytest.raises(MalformedInput):
            _open(data[:n], keyring, allow_unverified=True)
    # a well-formed envelope around a truncated COSE_Encrypt0
    env = _envelope(data)
    enc = env[4]
    for n in range(0, len(enc), 3):
        env[4] = enc[:n]
        with pytest.raises((MalformedInput, AuthenticationFailed)):
            _open(cbor.encode(env), keyring, allow_unverified=True)


BASE: dict[str, Any] = dict(content="a memory", mem_type=MemType.SEMANTIC, confidence=0.5, created=NOW)


@pytest.mark.parametrize("override", [
    {"confidence": math.nan}, {"confidence": math.inf}, {"confidence": -math.inf},
    {"confidence": -0.1}, {"confidence": 1.1}, {"confidence": True}, {"confidence": "0.5"},
    {"confidence": None},
    {"content": ""}, {"content": b"bytes"}, {"content": 42}, {"content": None},
    {"content": "lone \ud800 surrogate"},
    {"mem_type": 0}, {"mem_type": 4}, {"mem_type": -1}, {"mem_type": True}, {"mem_type": "semantic"},
    {"custody": Custody(1, b"", NOW, None)},                 # empty claimed author
    {"custody": Custody(1, b"\x01" * 4, NOW, None)},         # short claimed author
    {"custody": Custody(None, b"\x01" * 8, NOW, None)},      # type: ignore[arg-type]  # ill-typed on purpose
    {"custody": Custody(1, b"\x01" * 8, None, None)},        # type: ignore[arg-type]  # ill-typed on purpose
    {"custody": Custody(-1, b"\x01" * 8, NOW, None)},
    {"custody": Custody(1, b"\x01" * 8, NOW, b"\x02" * 7)},  # short proven author
], ids=repr)
def test_producer_refusals(owner: Identity, override: dict[str, Any]) -> None:
    """§3.2: a Producer fails rather than write a non-conformant object."""
    with pytest.raises(ProducerRefusal):
        _seal(Memory(**{**BASE, **override}), owner)


@pytest.mark.parametrize("confidence", [0.0, 1.0, 0.5, 0, 1])
def test_producer_accepts_the_closed_confidence_range(owner: Identity, keyring: Keyring,
                                                       confidence: float) -> None:
    opened = _open(_seal(Memory(**{**BASE, "confidence": confidence}), owner), keyring)
    assert opened.confidence == confidence and opened.trust is Trust.SELF


# A non-shortest encoding (0 as a 2-byte argument) inside a map with non-canonical key order:
# any decode/re-encode would normalise it, only byte-for-byte preservation keeps it.
UNKNOWN_99 = bytes.fromhex("a3" "02" "190000" "01" "1800" "63" "6e6577" "f5")  # {2: 0, 1: 0, "new": true}
RESERVED_8 = cbor.encode({1: "model", 2: [0.25, 0.5]})
RESERVED_9 = bytes.fromhex("1b00000000684ee180")                            # non-shortest uint


def test_unknown_payload_keys_preserved_byte_for_byte(owner: Identity, keyring: Keyring) -> None:
    """§13: a newer tool's key 99 (and reserved 8, 9) survive an older tool's rewrite."""
    payload = _payload("written by a newer tool", owner.key_id,
                       {8: cbor.Raw(RESERVED_8), 9: cbor.Raw(RESERVED_9), 99: cbor.Raw(UNKNOWN_99)})
    sealed = _seal_raw(payload, owner)
    opened = _open(sealed, keyring)
    assert opened.trust is Trust.SELF
    assert opened.memory.preserved[99].encoded == UNKNOWN_99
    # the older tool edits nothing and re-seals through the product path
    resealed = _seal(opened.memory, owner, oid=b"\x77" * 16, dek=sha256(b"fresh"))
    reopened = _open(resealed, keyring, dek=sha256(b"fresh"))
    assert reopened.trust is Trust.SELF
    raw = cbor.decode_map_raw(reopened.payload)
    assert raw[99][1] == UNKNOWN_99
    assert raw[8][1] == RESERVED_8
    assert raw[9][1] == RESERVED_9
    assert reopened.payload == opened.payload            # nothing else moved either
    assert decode_payload(reopened.payload).memory.preserved == opened.memory.preserved


def _reseal_key_10(owner: Identity, keyring: Keyring, raw_10: bytes) -> bytes | None:
    sealed = _seal_raw(_payload("extensions from elsewhere", owner.key_id, {10: cbor.Raw(raw_10)}), owner)
    opened = _open(sealed, keyring)
    resealed = _seal(opened.memory, owner, oid=b"\x10" * 16)
    kept = cbor.decode_map_raw(_open(resealed, keyring).payload).get(10)
    return kept[1] if kept is not None else None


def test_uninterpretable_extensions_survive_a_rewrite(owner: Identity, keyring: Keyring) -> None:
    """§3.1: reserved key 10 that ownmem cannot read as {tstr => any} is preserved
    verbatim on rewrite, not refused (which would make the object un-rewritable)."""
    for raw_10 in (cbor.encode({1: "int key"}), cbor.encode([1, 2]), cbor.encode("text")):
        assert _reseal_key_10(owner, keyring, raw_10) == raw_10


@pytest.mark.parametrize("raw_10", ["a0", "a2616201616100"], ids=["empty", "non-canonical"])
def test_extensions_map_survives_a_rewrite_byte_for_byte(owner: Identity, keyring: Keyring,
                                                         raw_10: str) -> None:
    assert _reseal_key_10(owner, keyring, bytes.fromhex(raw_10)) == bytes.fromhex(raw_10)


def test_unrecognised_mem_type_reported_verbatim(owner: Identity, keyring: Keyring) -> None:
    """§3.2: strict on write, lenient on read: type 7 opens and is reported as "7"."""
    for mem_type in (0, 4, 7, 1000):
        sealed = _seal_raw({**_payload("from the future", owner.key_id), 1: mem_type}, owner)
        opened = _open(sealed, keyring)
        assert opened.trust is Trust.SELF
        assert opened.mem_type == mem_type
        assert opened.type_name == str(mem_type)
        with pytest.raises(ProducerRefusal):              # and ownmem never writes one
            _seal(Memory("x", mem_type=mem_type, created=NOW), owner)
    for mem_type, name in ((1, "episodic"), (2, "semantic"), (3, "procedural")):
        sealed = _seal_raw({**_payload("known", owner.key_id), 1: mem_type}, owner)
        assert _open(sealed, keyring).type_name == name


def test_refusals_are_opaque(owner: Identity, mallory: Identity, keyring: Keyring) -> None:
    """STYLE.md habit 5: one message for every authentication failure."""
    sealed = _seal(Memory("a memory", created=NOW), owner)
    env = _envelope(sealed)
    env[1] = bytes(16)
    messages = set()
    for data, dek in ((cbor.encode(env), DEK), (sealed.encoded, sha256(b"wrong")),
                      (_seal_raw(_payload("x", owner.key_id), mallory, kid=owner.key_id).encoded, DEK)):
        with pytest.raises(AuthenticationFailed) as e:
            _open(data, keyring, dek=dek)
        messages.add(str(e.value))
        assert isinstance(e.value, OwnmemError)
    assert messages == {"could not authenticate"}


def test_parse_sealed_refuses_malformed_envelopes() -> None:
    good = {1: OID, 2: SID, 3: 2, 4: b"\x00"}
    assert parse_sealed(cbor.encode(good)).object_id == OID
    for bad in ({**good, 1: OID[:15]}, {**good, 2: SID + b"\x00"}, {**good, 3: -1},
                {**good, 3: "2"}, {**good, 4: "text"}, {**good, 5: b"short"},
                {k: v for k, v in good.items() if k != 4}, [OID, SID, 2, b""]):
        with pytest.raises(MalformedInput):
            parse_sealed(cbor.encode(bad))
