"""SAIHM holder identity (SAIHM "Identity binding (ML-DSA-65)").

    holderSeed  = HKDF-SHA256(master secret, info "ownmem/v1/saihm-holder")       (ownmem, DESIGN.md "Keys")
    identityKey = HKDF-SHA256(salt "MPS-PQC-KEY-GEN-v1", IKM holderSeed,
                              info "MPS-AGENT-IDENTITY-v1", L = 64)
    xi          = identityKey[0:32]  -> ML-DSA-65 KeyGen_internal -> public key
    holderId    = SHA-256(public key)

The remaining 32 bytes of identityKey are reserved by the spec and unused.
"""
from __future__ import annotations

from dataclasses import dataclass

from ownmem.crypto import CryptoProvider, sha256
from ownmem.purposes import Purpose

INFO_HOLDER_SEED = Purpose.SAIHM_HOLDER.info
SALT_IDENTITY = b"MPS-PQC-KEY-GEN-v1"
INFO_IDENTITY = b"MPS-AGENT-IDENTITY-v1"


@dataclass(frozen=True, slots=True)
class Holder:
    xi: bytes            # ML-DSA-65 key-generation seed: secret
    public: bytes        # ML-DSA-65 public key (1952 bytes)

    @property
    def holder_id(self) -> bytes:
        return sha256(self.public)

    def __repr__(self) -> str:  # never print the seed
        return f"Holder(holder_id={self.holder_id.hex()})"


async def identity_key(p: CryptoProvider, holder_seed: bytes) -> bytes:
    return await p.hkdf_sha256(holder_seed, INFO_IDENTITY, 64, salt=SALT_IDENTITY)


async def holder_from_seed(p: CryptoProvider, holder_seed: bytes) -> Holder:
    xi = (await identity_key(p, holder_seed))[:32]
    return Holder(xi=xi, public=await p.mldsa65_public(xi))


async def holder_from_master(p: CryptoProvider, master: bytes) -> Holder:
    return await holder_from_seed(p, await p.hkdf_sha256(master, Purpose.SAIHM_HOLDER.info))
