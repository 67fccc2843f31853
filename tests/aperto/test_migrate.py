"""Migration of format_version 1 objects, one object at a time (draft-02 §8.1 "Migration", §12).

Migration is a transfer of trust: every object lands in exactly one of MIGRATE,
ATTRIBUTE, REFUSE (or REFUSE re-sealed under the quarantine opt-in), and nothing
comes out at a higher trust level than its v1 signature proves.  ``classify`` is the
pure decision; ``migrate_object`` does the re-seal under a fresh DEK.
"""
from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from ownmem.aperto import keys as K
from ownmem.aperto.migrate import Outcome, classify, migrate_object, verify_legacy
from ownmem.aperto.model import Authorship, Custody, Memory, OpenedMemory, SealedObject, Trust
from ownmem.aperto.payload import encode_payload
from ownmem.aperto.seal import open_sealed, parse_sealed, seal, seal_unchecked
from ownmem.aperto.trust import Keyring
from ownmem.crypto import cbor, provider, random_bytes, run_sync
from ownmem.errors import AuthenticationFailed, MalformedInput
from tests.ownmem_testpaths import VECTORS  # tests/vectors

P = provider()
h = bytes.fromhex
SCOPE = bytes(range(1, 17))
NOW = 1760000000
MEMORY = Memory(content="v1 memory: prefers tea\nover coffee ☕", mem_type=1, confidence=0.25,
                tags=("drinks", "ünïcode"), created=1600000000, tool="amem-cli/0.1")


@pytest.fixture(scope="module")
def owner() -> K.Identity:
    return run_sync(K.identity_from_master(P, b"\x42" * 32))


@pytest.fixture(scope="module")
def friend() -> K.SigningKey:
    """A third party the owner accepted."""
    return run_sync(K.signing_key(P, b"\x07" * 32))


@pytest.fixture(scope="module")
def stranger() -> K.SigningKey:
    """A key the owner never accepted: whatever it signs stays unproven."""
    return run_sync(K.signing_key(P, b"\x66" * 32))


@pytest.fixture(scope="module")
def keyring(owner: K.Identity, friend: K.SigningKey) -> Keyring:
    return Keyring(owner.sign_pub, {friend.key_id: friend.public})


def v1_object(signer: K.SigningKey, claimed: bytes, memory: Memory = MEMORY) -> tuple[SealedObject, bytes]:
    """A format_version 1 object signed by ``signer`` claiming ``claimed`` as author -> (object, DEK)."""
    dek = K.new_key()
    so = run_sync(seal_unchecked(P, encode_payload(memory, claimed), signer=signer, kid=claimed,
                                 object_id=random_bytes(16), scope_id=SCOPE, dek=dek,
                                 nonce=random_bytes(12), format_version=1))
    return parse_sealed(so.encoded), dek


def migrate(so: SealedObject, dek: bytes, owner: K.Identity, keyring: Keyring, *,
            quarantine: bool = False) -> tuple[Outcome, SealedObject | None, bytes]:
    new_dek = K.new_key()
    res = run_sync(migrate_object(P, so, dek, ident=owner, keyring=keyring, quarantine=quarantine,
                                  now=NOW, new_dek=new_dek))
    return res.outcome, res.sealed, new_dek


def reopen(so: SealedObject, dek: bytes, keyring: Keyring) -> OpenedMemory:
    return run_sync(open_sealed(P, so.encoded, dek, keyring))


# ------------------------------------------------------------------ classify: the pure decision

OWNER_PUB = b"\x01" * 32
OTHER_PUB = b"\x02" * 32


@pytest.mark.parametrize("verifier,quarantine,outcome", [
    (OWNER_PUB, False, Outcome.MIGRATE),
    (OWNER_PUB, True, Outcome.MIGRATE),
    (OTHER_PUB, False, Outcome.ATTRIBUTE),
    (OTHER_PUB, True, Outcome.ATTRIBUTE),
    (None, False, Outcome.REFUSE),
    (None, True, Outcome.QUARANTINE),
])
def test_classify_table(verifier: bytes | None, quarantine: bool, outcome: Outcome) -> None:
    assert classify(verifier, OWNER_PUB, quarantine=quarantine) is outcome


@given(verifier=st.one_of(st.none(), st.binary(min_size=32, max_size=32)),
       owner_pub=st.binary(min_size=32, max_size=32), quarantine=st.booleans())
def test_classify_never_migrates_what_the_owner_key_did_not_verify(
        verifier: bytes | None, owner_pub: bytes, quarantine: bool) -> None:
    out = classify(verifier, owner_pub, quarantine=quarantine)
    assert (out is Outcome.MIGRATE) == (verifier == owner_pub)
    assert (out in (Outcome.REFUSE, Outcome.QUARANTINE)) == (verifier is None)
    assert out is classify(verifier, owner_pub, quarantine=quarantine)       # pure: same in, same out
    assert out in (Outcome.MIGRATE, Outcome.ATTRIBUTE, Outcome.REFUSE, Outcome.QUARANTINE)


# ------------------------------------------------------------------ verify_legacy


def test_verify_legacy_finds_the_key_that_verifies(owner: K.Identity, friend: K.SigningKey,
                                                   stranger: K.SigningKey, keyring: Keyring) -> None:
    for signer, claimed, expected in [
        (owner.sign, owner.key_id, owner.sign_pub),
        (friend, friend.key_id, friend.public),
        (stranger, stranger.key_id, None),       # not accepted
        (stranger, owner.key_id, None),          # forged authorship (the v1 defect, §1.2)
        (stranger, friend.key_id, None),
    ]:
        so, dek = v1_object(signer, claimed)
        verifier, payload = run_sync(verify_legacy(P, so, dek, keyring))
        assert verifier == expected
        assert cbor.decode(payload)[2] == MEMORY.content


def test_verify_legacy_refuses_a_v2_object(owner: K.Identity, keyring: Keyring) -> None:
    dek = K.new_key()
    so = run_sync(seal(P, MEMORY, signer=owner.sign, scope_id=SCOPE, dek=dek))
    with pytest.raises(MalformedInput):
        run_sync(verify_legacy(P, so, dek, keyring))


def test_verify_legacy_of_a_corrupt_object_is_an_authentication_error(owner: K.Identity,
                                                                       keyring: Keyring) -> None:
    so, _ = v1_object(owner.sign, owner.key_id)
    with pytest.raises(AuthenticationFailed):
        run_sync(verify_legacy(P, so, K.new_key(), keyring))


# ------------------------------------------------------------------ migrate_object: the four outcomes


def test_owner_object_migrates_to_self_without_custody(owner: K.Identity, keyring: Keyring) -> None:
    so, dek = v1_object(owner.sign, owner.key_id)
    outcome, new, new_dek = migrate(so, dek, owner, keyring)
    assert outcome is Outcome.MIGRATE and new is not None
    assert (new.object_id, new.scope_id, new.format_version) == (so.object_id, so.scope_id, 2)
    o = reopen(new, new_dek, keyring)
    assert (o.trust, o.authorship, o.author_key_id) == (Trust.SELF, Authorship.SIGNED, owner.key_id)
    assert not o.custody_present and o.custody is None
    assert (o.content, o.mem_type, o.confidence, o.tags, o.created) == (
        MEMORY.content, MEMORY.mem_type, MEMORY.confidence, MEMORY.tags, MEMORY.created)


def test_third_party_object_is_attributed_with_custody(owner: K.Identity, friend: K.SigningKey,
                                                       keyring: Keyring) -> None:
    so, dek = v1_object(friend, friend.key_id)
    outcome, new, new_dek = migrate(so, dek, owner, keyring)
    assert outcome is Outcome.ATTRIBUTE and new is not None
    o = reopen(new, new_dek, keyring)
    assert (o.trust, o.authorship) == (Trust.TRUSTED, Authorship.ATTESTED)
    assert o.author_key_id == friend.key_id          # the proven author, not the signer
    assert o.signer_key_id == owner.key_id           # the owner re-sealed it: custody
    assert o.custody == Custody(original_version=1, claimed_author=friend.key_id, resealed_at=NOW,
                                proven_author=friend.key_id)
    assert o.content == MEMORY.content


def test_attributed_object_downgrades_when_its_key_is_revoked(owner: K.Identity, friend: K.SigningKey,
                                                             keyring: Keyring) -> None:
    so, dek = v1_object(friend, friend.key_id)
    _, new, new_dek = migrate(so, dek, owner, keyring)
    assert new is not None
    o = reopen(new, new_dek, Keyring(owner.sign_pub, {}))       # same bytes, key no longer accepted
    assert (o.trust, o.authorship, o.author_key_id) == (Trust.UNVERIFIED, Authorship.UNKNOWN, None)
    assert o.claimed_author_key_id == friend.key_id


def test_unproven_object_is_refused_by_default(owner: K.Identity, stranger: K.SigningKey,
                                               keyring: Keyring) -> None:
    so, dek = v1_object(stranger, stranger.key_id)
    outcome, new, _ = migrate(so, dek, owner, keyring)
    assert (outcome, new) == (Outcome.REFUSE, None)


def test_unproven_object_is_quarantined_only_on_opt_in(owner: K.Identity, stranger: K.SigningKey,
                                                       keyring: Keyring) -> None:
    so, dek = v1_object(stranger, stranger.key_id)
    outcome, new, new_dek = migrate(so, dek, owner, keyring, quarantine=True)
    assert outcome is Outcome.QUARANTINE and new is not None
    o = reopen(new, new_dek, keyring)
    assert (o.trust, o.authorship, o.author_key_id) == (Trust.UNVERIFIED, Authorship.UNKNOWN, None)
    assert o.claimed_author_key_id == stranger.key_id
    assert o.custody == Custody(1, stranger.key_id, NOW, None)


@pytest.mark.parametrize("quarantine", [False, True])
@pytest.mark.parametrize("claim", ["owner", "friend", "stranger"])
def test_migration_laundering_is_impossible(owner: K.Identity, friend: K.SigningKey, stranger: K.SigningKey,
                                            keyring: Keyring, quarantine: bool, claim: str) -> None:
    """A v1 object the stranger signed never comes out self (or trusted), whatever it claims (§8.1)."""
    claimed = {"owner": owner.key_id, "friend": friend.key_id, "stranger": stranger.key_id}[claim]
    so, dek = v1_object(stranger, claimed)
    outcome, new, new_dek = migrate(so, dek, owner, keyring, quarantine=quarantine)
    assert outcome is (Outcome.QUARANTINE if quarantine else Outcome.REFUSE)
    if new is not None:
        o = reopen(new, new_dek, keyring)
        assert o.trust is Trust.UNVERIFIED and o.author_key_id is None
        assert o.claimed_author_key_id == claimed


def test_object_that_claims_no_author_stays_refused_even_in_quarantine(owner: K.Identity,
                                                                       stranger: K.SigningKey,
                                                                       keyring: Keyring) -> None:
    payload = cbor.encode({1: 2, 2: "who wrote me?", 3: 0.5, 4: {1: "t"}, 5: 1, 7: {1: 1600000000}})
    dek = K.new_key()
    so = run_sync(seal_unchecked(P, payload, signer=stranger, kid=stranger.key_id, object_id=random_bytes(16),
                                 scope_id=SCOPE, dek=dek, nonce=random_bytes(12), format_version=1))
    outcome, new, _ = migrate(parse_sealed(so.encoded), dek, owner, keyring, quarantine=True)
    assert (outcome, new) == (Outcome.REFUSE, None)


# ------------------------------------------------------------------ what migration preserves and renews


def test_migration_reseals_under_the_fresh_dek_only(owner: K.Identity, keyring: Keyring) -> None:
    so, dek = v1_object(owner.sign, owner.key_id)
    _, new, new_dek = migrate(so, dek, owner, keyring)
    assert new is not None and new_dek != dek
    assert reopen(new, new_dek, keyring).trust is Trust.SELF
    with pytest.raises(AuthenticationFailed):
        reopen(new, dek, keyring)      # §15.5: the old DEK never encrypts a second time


def test_absent_confidence_gets_the_reference_default(owner: K.Identity, keyring: Keyring) -> None:
    payload = cbor.encode({1: 2, 2: "no confidence", 4: {1: "t", 2: owner.key_id}, 5: 1, 7: {1: 1600000000}})
    dek = K.new_key()
    so = run_sync(seal_unchecked(P, payload, signer=owner.sign, kid=owner.key_id, object_id=random_bytes(16),
                                 scope_id=SCOPE, dek=dek, nonce=random_bytes(12), format_version=1))
    _, new, new_dek = migrate(parse_sealed(so.encoded), dek, owner, keyring)
    assert new is not None
    o = reopen(new, new_dek, keyring)
    assert o.confidence == 0.8 and o.schema_violations == ()


def test_unknown_payload_keys_survive_migration_byte_for_byte(owner: K.Identity, keyring: Keyring) -> None:
    """§13: a newer tool's fields are not destroyed by an older tool's re-seal."""
    raw = cbor.Raw(b"\x19\x00\x07")     # 7 in a non-shortest encoding: must stay exactly these bytes
    memory = Memory(content="with a future field", created=1600000000, preserved={42: raw})
    so, dek = v1_object(owner.sign, owner.key_id, memory)
    _, new, new_dek = migrate(so, dek, owner, keyring)
    assert new is not None
    o = reopen(new, new_dek, keyring)
    assert cbor.decode_map_raw(o.payload)[42][1] == b"\x19\x00\x07"


@pytest.mark.parametrize("signer_name", ["owner", "friend"])
@pytest.mark.parametrize("bad_custody", [b"\x64junk", b"\xa1\x01\x00", b"\x80"])
def test_a_malformed_custody_record_is_not_laundered_into_self(
        owner: K.Identity, friend: K.SigningKey, keyring: Keyring, signer_name: str, bad_custody: bytes) -> None:
    """Payload key 20 that does not decode degrades trust (§7); migration must not drop it
    and re-seal the text as the owner's own (nor invent a record it cannot read)."""
    signer = owner.sign if signer_name == "owner" else friend
    fields = {k: cbor.Raw(v[1]) for k, v in cbor.decode_map_raw(encode_payload(MEMORY, signer.key_id)).items()}
    fields[20] = cbor.Raw(bad_custody)
    so = run_sync(seal_unchecked(P, cbor.encode(fields), signer=signer, kid=signer.key_id,
                                 object_id=random_bytes(16), scope_id=SCOPE, dek=(dek := K.new_key()),
                                 nonce=random_bytes(12), format_version=1))
    outcome, new, _ = migrate(parse_sealed(so.encoded), dek, owner, keyring, quarantine=True)
    assert (outcome, new) == (Outcome.REFUSE, None)


def test_migrating_a_v2_object_is_refused(owner: K.Identity, keyring: Keyring) -> None:
    dek = K.new_key()
    so = run_sync(seal(P, MEMORY, signer=owner.sign, scope_id=SCOPE, dek=dek))
    with pytest.raises(MalformedInput):
        migrate(so, dek, owner, keyring)


def test_reference_v1_vector_migrates_as_the_owners_own() -> None:
    """The reference's own v1 object (vector amem-testvector-001) re-seals as self."""
    vec = json.loads((VECTORS / "apertomemory-v1" / "amem-testvector-001.json").read_text())
    ident = run_sync(K.identity_from_master(P, h(vec["kdf"]["master_secret_hex"])))
    assert ident.sign_pub == h(vec["ed25519"]["public_hex"])
    so = parse_sealed(h(vec["sealed_object_cbor_hex"]))
    keyring = Keyring(ident.sign_pub, {})
    outcome, new, new_dek = migrate(so, h(vec["dek_hex"]), ident, keyring)
    assert outcome is Outcome.MIGRATE and new is not None
    o = reopen(new, new_dek, keyring)
    assert o.trust is Trust.SELF and not o.custody_present
    assert o.content == cbor.decode(h(vec["payload_cbor_hex"]))[2]
    assert o.object_id == so.object_id and o.scope_id == so.scope_id
