"""What an agent's manifest binds its sessions to, and whether it may have one at all (uomp-draft-00
"9.6 Deletion Proof", "19.3 Deletion Proof", "19.4 Submission & Audit Integration", "16.4 Trust
Policy").  Pure: the caller reads the registered manifest and the trust list.

    terms_of(manifest)               -> Terms(proof_required, deletion_method, identity_key)
    session_terms(asked, registered) -> the session's Terms: the registered manifest's, which a
                                        create request may add to (proof_required) but not
                                        contradict (another method or identity key: refused)
    admission(status, trust)         -> None, or why the agent may not receive a token

The identity key that verifies a deletion proof is the manifest's ``did:key`` (Ed25519), as
base64url of its 32 bytes.  A session created through the Auth Service API for a registered
agent takes these terms whatever the request says, so a proof owed is owed however the session
was made.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass

from ownmem.errors import MalformedInput
from ownmem.uomp.errors import InvalidRequest
from ownmem.uomp.manifest import Manifest
from ownmem.uomp.publisher import PublisherStatus, TrustList, did_key_public

UNVERIFIED = "unverified publisher"     # 16.4's words, on the panel and in a refusal


@dataclass(frozen=True, slots=True)
class Terms:
    proof_required: bool = False
    deletion_method: str | None = None
    identity_key: str | None = None      # Ed25519 public key, base64url without padding


def identity_key(m: Manifest) -> str | None:
    """The agent's Ed25519 identity key for deletion proofs: its manifest's did:key, or None."""
    did = m.identity.did if m.identity is not None else None
    if not did or not did.startswith("did:key:"):
        return None
    try:
        return base64.urlsafe_b64encode(did_key_public(did)).rstrip(b"=").decode()
    except MalformedInput:
        return None


def terms_of(m: Manifest) -> Terms:
    p = m.data_retention_policy
    return Terms(bool(p.proof_required) if p is not None else False,
                 p.deletion_method if p is not None else None, identity_key(m))


def session_terms(asked: Terms, registered: Terms | None) -> Terms:
    """The terms of a new session: ``asked`` (the create request's own fields) when the agent has
    no registered manifest; else the manifest's, ``proof_required`` if either says so, and a
    method or identity key the request names must be the manifest's (InvalidRequest: a session
    must not verify proofs by another key than the one the person registered)."""
    if registered is None:
        return asked
    for name in ("deletion_method", "identity_key"):
        mine, theirs = getattr(asked, name), getattr(registered, name)
        if mine is not None and mine != theirs:
            raise InvalidRequest(f"{name} is not the registered manifest's (register its uom.json again "
                                 "to change it)")
    return Terms(asked.proof_required or registered.proof_required, registered.deletion_method,
                 registered.identity_key)


def admission(status: PublisherStatus | None, trust: TrustList) -> str | None:
    """16.4: in enterprise mode an agent that no required method verifies (or with no registered
    manifest to verify: ``status`` None) MUST NOT receive a token -> the reason, or None."""
    if not trust.enterprise:
        return None
    methods = " or ".join(trust.enterprise_methods)
    if status is None:
        return f"{UNVERIFIED}: enterprise mode needs the agent registered (`ownmem agent register uom.json`) " \
               f"and verified by {methods}"
    if not set(status.verified_by()) & set(trust.enterprise_methods):
        return f"{UNVERIFIED}: enterprise mode needs it verified by {methods}; it may not receive a token"
    return None
