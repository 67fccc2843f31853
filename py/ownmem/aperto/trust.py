"""Trust derivation and custody resolution: pure functions (draft-02 §6 "Trust Is Derived,
Never Declared", §7 "Custody Records").

Trust comes from which key verified the signature, evaluated against the keyring
in force at read time, never from the payload's trust field:

    verified by the owner key            -> self
    verified by an accepted keyring key  -> trusted
    no key / a key no longer accepted    -> unverified

A Custody Record overrides that (Table 2): it is an attestation by the custodian,
honoured only when the owner signed the object, and only when its proven author
(field 4) is a key accepted now.  An object carrying one never resolves to self.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ownmem.aperto.keys import key_id
from ownmem.aperto.model import Authorship, Custody, Trust


@dataclass(frozen=True, slots=True)
class Keyring:
    """The owner's key and the third-party author keys accepted now: {key_id: public}."""

    owner_pub: bytes | None
    accepted: Mapping[bytes, bytes]
    # the owner's superseded signing keys (a passphrase change: ownmem.vault.rekey), each linked
    # to its successor by a record both signed: verify-only, what they signed opens as self
    superseded: Mapping[bytes, bytes] = field(default_factory=dict)
    owner_kid: bytes | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        # computed once: candidates() runs for every object opened
        object.__setattr__(self, "owner_kid", key_id(self.owner_pub) if self.owner_pub is not None else None)

    def candidates(self, claimed_kid: bytes | None) -> list[tuple[bytes, Trust]]:
        """The keys worth trying for a claimed author: the author binding (§5.2 "Author Binding") means
        only a key whose key_id equals the claim can ever verify the object."""
        out: list[tuple[bytes, Trust]] = []
        if claimed_kid is None:
            return out
        if self.owner_pub is not None and self.owner_kid == claimed_kid:
            out.append((self.owner_pub, Trust.SELF))
        old = self.superseded.get(claimed_kid)
        if old is not None and key_id(old) == claimed_kid:
            out.append((old, Trust.SELF))
        pub = self.accepted.get(claimed_kid)
        if pub is not None and key_id(pub) == claimed_kid:
            out.append((pub, Trust.TRUSTED))
        return out


@dataclass(frozen=True, slots=True)
class Derivation:
    trust: Trust
    authorship: Authorship
    author_key_id: bytes | None
    claimed_author_key_id: bytes | None


def derive(*, verified_as: Trust | None, signer_kid: bytes | None, claimed_kid: bytes | None,
           custody_present: bool, custody: Custody | None, keyring: Keyring) -> Derivation:
    """Table 1 and Table 2 as one decision.

    verified_as: SELF or TRUSTED when a signature verified, None when the caller opted in
    to read an unauthenticated object.  custody is None when absent or malformed.
    """
    if not custody_present:
        if verified_as is None:
            # Nothing proves who wrote it: report no author, expose the claim separately.
            return Derivation(Trust.UNVERIFIED, Authorship.UNKNOWN, None, claimed_kid)
        return Derivation(verified_as, Authorship.SIGNED, signer_kid, None)

    accepted = set(keyring.accepted)
    if keyring.owner_kid is not None:
        accepted.add(keyring.owner_kid)
    accepted |= set(keyring.superseded)
    honoured = (verified_as is Trust.SELF and custody is not None
                and custody.proven_author is not None and custody.proven_author in accepted)
    if honoured:
        assert custody is not None and custody.proven_author is not None
        return Derivation(Trust.TRUSTED, Authorship.ATTESTED, custody.proven_author, None)
    claimed = custody.claimed_author if custody is not None and custody.claimed_author else None
    return Derivation(Trust.UNVERIFIED, Authorship.UNKNOWN, None, claimed)
