"""Migration of format_version 1 objects (draft-02 §8.1 "Migration", §12 "Legacy Objects (format_version 1)").

Re-sealing changes the signer, so migration transfers trust; it is never a mere
format conversion.  Every object lands in exactly one outcome:

    MIGRATE    v1 signature verifies under the owner key  -> re-sealed by the owner, no custody, self
    ATTRIBUTE  verifies under an accepted third-party key -> re-sealed with custody naming the proven author
    REFUSE     authorship unprovable                      -> left untouched and reported; with the
                                                             quarantine opt-in, re-sealed with custody
                                                             and no proven author (opens unverified)

Accepted risk (§8.1 "Migration", §15.9 "Residual and Accepted Risks"): v1 has no envelope
binding, so a verified v1 signature proves authorship of the content, not of its (id, scope) placement.  Nothing here
claims placement authenticity.  Each object is re-sealed under a fresh DEK: the
reference re-uses the old one, which §15.5 "Nonce Management and AEAD Limits" forbids.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from ownmem.aperto.keys import Identity, key_id
from ownmem.aperto.model import LEGACY_VERSION, Custody, SealedObject
from ownmem.aperto.payload import decode_payload
from ownmem.aperto.seal import seal
from ownmem.aperto.trust import Keyring
from ownmem.crypto import CryptoProvider, cose
from ownmem.errors import MalformedInput


class Outcome(str, enum.Enum):
    MIGRATE = "migrate"
    ATTRIBUTE = "attribute"
    REFUSE = "refuse"
    QUARANTINE = "quarantine"   # REFUSE, re-sealed under the explicit opt-in


def classify(verifier: bytes | None, owner_pub: bytes, *, quarantine: bool) -> Outcome:
    """The pure decision of §8.1 "Migration" from which key (if any) verified the v1 signature."""
    if verifier is not None and verifier == owner_pub:
        return Outcome.MIGRATE
    if verifier is not None:
        return Outcome.ATTRIBUTE
    return Outcome.QUARANTINE if quarantine else Outcome.REFUSE


@dataclass(frozen=True, slots=True)
class Migrated:
    outcome: Outcome
    sealed: SealedObject | None    # the v2 object to write in place of the v1 one, if any


async def verify_legacy(p: CryptoProvider, so: SealedObject, dek: bytes,
                        keyring: Keyring) -> tuple[bytes | None, bytes]:
    """Decrypt a v1 object and find the accepted key that verifies its signature.

    -> (verifying public key or None, the signed payload).  Authentication errors of
    the ciphertext itself propagate: such an object is corrupt, not merely unproven.
    """
    if so.format_version != LEGACY_VERSION:
        raise MalformedInput("not a format_version 1 object")
    signed = await cose.decrypt0(p, dek, cose.parse_encrypt0(so.encrypt0), b"")
    sign1 = cose.parse_sign1(signed)
    claimed = decode_payload(sign1.payload).claimed_author
    tbs = cose.sig_structure(sign1.protected, b"", sign1.payload)
    if sign1.alg == cose.ALG_EDDSA:
        for pub, _ in keyring.candidates(claimed):
            if await p.ed25519_verify(pub, sign1.signature, tbs):
                return pub, sign1.payload
    return None, sign1.payload


async def migrate_object(p: CryptoProvider, so: SealedObject, dek: bytes, *, ident: Identity,
                         keyring: Keyring, quarantine: bool, now: int, new_dek: bytes) -> Migrated:
    verifier, payload = await verify_legacy(p, so, dek, keyring)
    outcome = classify(verifier, ident.sign_pub, quarantine=quarantine)
    if outcome is Outcome.REFUSE:
        return Migrated(outcome, None)
    decoded = decode_payload(payload)
    memory = decoded.memory
    if decoded.custody_present and memory.custody is None:
        # A custody record that does not decode still says "not the signer's own words"
        # (§7 "Custody Records": it degrades trust).  Re-sealing without it would turn that object into
        # the owner's own (self); with a fresh record it would name a claim it cannot
        # read.  Neither is faithful, so the object stays as it is, refused and reported.
        return Migrated(Outcome.REFUSE, None)
    if outcome is not Outcome.MIGRATE:
        claimed = decoded.claimed_author or b""
        if len(claimed) != 8:
            # A custody record must name the claimed author; an object that claims
            # nobody cannot be quarantined faithfully, so it stays refused.
            return Migrated(Outcome.REFUSE, None)
        memory = replace(memory, custody=Custody(
            original_version=so.format_version, claimed_author=claimed, resealed_at=now,
            proven_author=key_id(verifier) if verifier is not None else None))
    if decoded.confidence is None:
        memory = replace(memory, confidence=0.8)   # the reference's default for an absent value
    sealed = await seal(p, memory, signer=ident.sign, scope_id=so.scope_id, dek=new_dek,
                        object_id=so.object_id)
    return Migrated(outcome, sealed)
