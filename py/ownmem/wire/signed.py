"""The messages devices sign for the sync server: each a CBOR array that starts with its own
context string, so no signature can be replayed as another kind."""
from __future__ import annotations

from ownmem.crypto import cbor

REGISTER_CONTEXT = "ownmem/v1/register"
REGISTER_HOLDER_CONTEXT = b"ownmem-register-v1"   # ML-DSA-65 context of the holder's registration proof
AUTH_CONTEXT = "ownmem/v1/sync-auth"
METADATA_CONTEXT = "ownmem/v1/vault-metadata"
WITNESS_CONTEXT = "ownmem/v1/log-witness"
REKEY_CONTEXT = "ownmem/v1/rekey"


def register_message(name: str, salt: bytes, owner_pub: bytes, sync_pub: bytes, ka_pub: bytes,
                     holder_pub: bytes) -> bytes:
    return cbor.encode([REGISTER_CONTEXT, name, salt, owner_pub, sync_pub, ka_pub, holder_pub])


def auth_message(name: str, challenge: bytes) -> bytes:
    return cbor.encode([AUTH_CONTEXT, name, challenge])


def metadata_message(name: str, version: int, metadata: bytes) -> bytes:
    return cbor.encode([METADATA_CONTEXT, name, version, metadata])


def witness_message(name: str, device_id: bytes, vkey: str, note: bytes, signed_at: int) -> bytes:
    return cbor.encode([WITNESS_CONTEXT, name, device_id, vkey, note, signed_at])


def rekey_message(name: str, version: int, salt: bytes, owner_pub: bytes, ka_pub: bytes, root_wrap: bytes,
                  metadata: bytes) -> bytes:
    """What the owner key in force signs to hand the vault to the keys of a new passphrase."""
    return cbor.encode([REKEY_CONTEXT, name, version, salt, owner_pub, ka_pub, root_wrap, metadata])
