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
DEVICE_AUTH_CONTEXT = "ownmem/v1/device-auth"
DEVICE_ENROL_CONTEXT = "ownmem/v1/device-enrol"
DEVICE_REMOVE_CONTEXT = "ownmem/v1/device-remove"


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


def device_auth_message(name: str, challenge: bytes, device_pub: bytes) -> bytes:
    """What a device's own key signs at each login (server/device_routes.py): the one challenge,
    so a login proof is good once, for this vault only."""
    return cbor.encode([DEVICE_AUTH_CONTEXT, name, challenge, device_pub])


def device_enrol_message(name: str, challenge: bytes, device_pub: bytes, label: str) -> bytes:
    """What the owner key in force signs to enrol a device: bound to one login's challenge, so an
    enrolment cannot be replayed, and to the owner key the server holds now, so a key replaced by
    a passphrase change can enrol nothing."""
    return cbor.encode([DEVICE_ENROL_CONTEXT, name, challenge, device_pub, label])


def device_remove_message(name: str, device_id: bytes) -> bytes:
    """What the owner key in force signs to remove a device (idempotent: a replay removes it again)."""
    return cbor.encode([DEVICE_REMOVE_CONTEXT, name, device_id])
