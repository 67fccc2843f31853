"""The sync protocol's shared vocabulary: the messages devices sign, names, limits.

Shared by the blind server and the sync client, and deliberately free of any code
that decrypts (the server imports it).  Every signed message is a CBOR array that
starts with its own context string, so no signature can be replayed as another kind.
"""
from __future__ import annotations

import re

from .crypto import cbor

REGISTER_CONTEXT = "ownmem/v1/register"
REGISTER_HOLDER_CONTEXT = b"ownmem-register-v1"   # ML-DSA-65 context of the holder's registration proof
AUTH_CONTEXT = "ownmem/v1/sync-auth"
METADATA_CONTEXT = "ownmem/v1/vault-metadata"

VAULT_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
MAX_BATCH = 2000            # cells per push
MAX_BODY = 32 << 20         # bytes per request body
MAX_PAGE = 5000             # changes per pull page
MAX_PAGE_BYTES = 24 << 20   # bytes of cells per pull page
TOKEN_TTL = 900             # seconds a session credential lives
CHALLENGE_TTL = 60          # seconds a login challenge lives


def valid_vault_name(name: str) -> bool:
    return bool(VAULT_NAME.match(name))


def register_message(name: str, salt: bytes, owner_pub: bytes, sync_pub: bytes, ka_pub: bytes,
                     holder_pub: bytes) -> bytes:
    return cbor.encode([REGISTER_CONTEXT, name, salt, owner_pub, sync_pub, ka_pub, holder_pub])


def auth_message(name: str, challenge: bytes) -> bytes:
    return cbor.encode([AUTH_CONTEXT, name, challenge])


def metadata_message(name: str, version: int, metadata: bytes) -> bytes:
    return cbor.encode([METADATA_CONTEXT, name, version, metadata])
