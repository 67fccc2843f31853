"""The registry of keys ownmem derives from a vault's root secret (its master secret until the
first passphrase change: vault/rekey.py), one HKDF-SHA256 info string
per purpose (DESIGN.md "Keys"): no key serves two purposes, and every derivation names its
purpose here (aperto.keys.derive_purpose_key takes nothing else; tests/test_purposes.py fails on
an info string spelt anywhere else).  The format's own keys (apertomemory/v1/sign, /ka) are
ApertoMemory §9's and stay in aperto/keys.py."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Purpose(Enum):
    """A fixed purpose: the value is the HKDF info string."""
    SAIHM_HOLDER = b"ownmem/v1/saihm-holder"              # the SAIHM holder seed (ML-DSA-65 identity)
    SYNC = b"ownmem/v1/sync"                              # Ed25519: a device to the blind server
    UOMP_AUTH = b"ownmem/v1/uomp-auth"                    # Ed25519: UOMP capability tokens (EdDSA JWT)
    UOMP_APPROVAL = b"ownmem/v1/uomp-approval"            # HMAC: the person's approval of a widening
    AGENT_CREDENTIALS = b"ownmem/v1/agent-credentials"    # HMAC: the sealed agent credential file
    DEVICE_CACHE = b"ownmem/v1/device-cache"              # AES-256: a device's cache of verified plaintext
    AUDIT = b"ownmem/v1/audit"                            # AES-256: UOMP audit entries
    DEVICE_LABEL = b"ownmem/v1/device-label"              # AES-256-GCM: a device's name, sealed from the server
    # AES-KW: the vault root wrapped under the CURRENT master secret (vault/rekey.py); the one
    # purpose derived from the master itself, every other from the vault root
    ROOT_WRAP = b"ownmem/v1/root-wrap"
    # AES-KW: the current master secret wrapped to an unlock slot's public key (vault/slots.py),
    # the key HKDF(ECDH(ephemeral, slot key), this info || slot_id): derived from a shared
    # secret, never from the root
    UNLOCK_SLOT = b"ownmem/v1/unlock-slot"
    # HKDF as a PRF keyed by a RECOVERY KEY over this info || the vault root: the kit's root check
    # (vault/recovery.py), which a new device verifies so that a server cannot hand it a slot of
    # its own making (anyone can wrap a master to the kit's public key; only the key makes this)
    RECOVERY_CHECK = b"ownmem/v1/recovery-check"

    @property
    def info(self) -> bytes:
        return self.value


AGENT_AUTHOR_PREFIX = b"ownmem/v1/agent/"


@dataclass(frozen=True, slots=True)
class AgentAuthor:
    """The Ed25519 author key of the memories one agent writes: ``agent_id`` is a credential's
    agent id ("<name>.<credential id>", or the bare name of an older credential)."""
    agent_id: str

    @property
    def info(self) -> bytes:
        return AGENT_AUTHOR_PREFIX + self.agent_id.encode()


SLOT_SECRET_PREFIX = b"ownmem/v1/unlock-slot/"


@dataclass(frozen=True, slots=True)
class SlotSecret:
    """The X25519 key of an unlock slot, from the slot's own secret (a recovery key, a passkey's
    PRF output), not from the root: one derivation per slot kind ("recovery", "passkey")."""
    kind: str

    @property
    def info(self) -> bytes:
        return SLOT_SECRET_PREFIX + self.kind.encode()


KeyPurpose = Purpose | AgentAuthor
