"""Decoy vaults: what a lookup of a name the server does not hold answers, so that names cannot
be probed by lookup (docs/decisions.md, "Names cannot be probed by lookup").

    k       = the server's secret (32 random bytes made once, kept in its store)
    seed(l) = HMAC-SHA256(k, "ownmem/v1/decoy/" || l || 0x00 || name)
    salt    = seed("salt")[:16]
    owner_pub, sync_pub = the Ed25519 public keys of seed("owner"), seed("sync")
    ka_pub  = the X25519 form (Montgomery u = (1 + y) / (1 - y) mod 2^255 - 19) of the Ed25519
              public key of seed("ka"): a point of the prime-order subgroup, as a real X25519
              public key is, without importing X25519 (the server loads nothing that decrypts)
    holder_pub = SHAKE-256(seed("holder")), 1952 bytes: an ML-DSA-65 public key is rho || t1,
              both indistinguishable from uniform bytes; holder_id = SHA-256(holder_pub)
    root_wrap = SHAKE-256(seed("root")), 40 bytes (also a held vault's before its first
              passphrase change: an AES-KW output is indistinguishable from uniform bytes)
    recovery record (vault/recovery.py, also a held vault's without a kit): an id, two X25519
              points made as ka_pub is, an AES-KW output and a check (uniform bytes), and a
              time in 2023-2026

The same name always gets the same decoy (on every process and after a restart: the secret is
in the store), different names unrelated ones, and nothing but the secret tells a decoy from a
vault by its keys.  The Ed25519 private halves are dropped at once; nothing is ever signed
with them, and a session for a decoy is refused whatever signature it carries (app.py).
"""
from __future__ import annotations

import hashlib
import hmac

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ownmem.wire import messages
from ownmem.wire.limits import HOLDER_PUB_LEN, RECOVERY_RECORD_LEN, ROOT_WRAP_LEN, SALT_LEN

_P = 2 ** 255 - 19


def _ed25519_public(seed: bytes) -> bytes:
    return Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()


def _montgomery_u(ed25519_public: bytes) -> bytes:
    y = int.from_bytes(ed25519_public, "little") & ((1 << 255) - 1)
    u = (1 + y) * pow(1 - y, _P - 2, _P) % _P
    return u.to_bytes(32, "little")


class Decoys:
    def __init__(self, secret: bytes) -> None:
        if len(secret) < 32:
            raise ValueError("the decoy secret is at least 32 bytes")
        self._secret = secret

    def _seed(self, label: bytes, name: str) -> bytes:
        return hmac.digest(self._secret, b"ownmem/v1/decoy/" + label + b"\x00" + name.encode(), "sha256")

    def info(self, name: str) -> messages.VaultInfo:
        holder_pub = hashlib.shake_256(self._seed(b"holder", name)).digest(HOLDER_PUB_LEN)
        return messages.VaultInfo(
            name, self._seed(b"salt", name)[:SALT_LEN], _ed25519_public(self._seed(b"owner", name)),
            _ed25519_public(self._seed(b"sync", name)), _montgomery_u(_ed25519_public(self._seed(b"ka", name))),
            holder_pub, hashlib.sha256(holder_pub).digest(), self.root_wrap(name))

    def root_wrap(self, name: str) -> bytes:
        """40 bytes that unwrap under no key: a decoy's, and a real vault's until its first
        passphrase change, so a lookup does not tell which vaults changed theirs."""
        return hashlib.shake_256(self._seed(b"root", name)).digest(ROOT_WRAP_LEN)

    def recovery_record(self, name: str) -> bytes:
        """What ``GET .../recovery`` answers for a name with no kit (vault/recovery.py ``record``):
        the same length and field kinds as a real one, a kit nobody's words open."""
        def point(label: bytes) -> bytes:
            return _montgomery_u(_ed25519_public(self._seed(label, name)))
        rest = hashlib.shake_256(self._seed(b"recovery", name)).digest(16 + 40 + 32 + 4)
        created = 1_672_531_200 + int.from_bytes(rest[-4:], "big") % 126_230_400     # 2023-01-01 + < 4 years
        out = rest[:16] + point(b"recovery-pub") + point(b"recovery-eph") + rest[16:88] + created.to_bytes(8, "big")
        assert len(out) == RECOVERY_RECORD_LEN
        return out
