"""The sealed-object envelope: the outer, unauthenticated structure of a sealed object
(draft-02 §4 "Encoding and Cryptographic Envelope", §5.1 "Envelope Binding").

    sealed-object = {1: id, 2: scope_id, 3: format_version, 4: ciphertext (COSE_Encrypt0), ?5: dek_wrap_ref}
    envelope-aad  = CBOR [format_version, id, scope_id]      (never transmitted)

This is the one parser of that structure, shared by the client (``seal.open_sealed``
and import, through ``parse_sealed``) and the blind server (which checks that a cell's
ciphertext is a sealed object whose id is the cellNonce).  It therefore imports only
CBOR and the format's vocabulary, never COSE or a provider: nothing here can decrypt
(tests/server/test_boundary.py).  What it returns is cleartext that the AEAD tag
authenticates only later, when the envelope-aad is rebuilt from it and the object opened.
"""
from __future__ import annotations

from ownmem.aperto.model import ID_LEN, SealedObject
from ownmem.crypto import cbor
from ownmem.errors import LimitExceeded, MalformedInput

MAX_SEALED = 1 << 20  # one memory is text; a megabyte is already generous


def envelope_aad(version: int, object_id: bytes, scope_id: bytes) -> bytes:
    """The external AAD that binds the cleartext envelope to the ciphertext (§5.1 "Envelope Binding")."""
    if 0 <= version < 24 and len(object_id) == 16 and len(scope_id) == 16:
        # [version, h'id', h'scope_id'] assembled directly (equal to cbor.encode of it)
        return bytes((0x83, version, 0x50)) + object_id + b"\x50" + scope_id
    return cbor.encode([version, object_id, scope_id])


def encode_envelope(object_id: bytes, scope_id: bytes, version: int, enc: bytes) -> bytes:
    """The deterministic CBOR of a sealed-object around the COSE_Encrypt0 bytes ``enc``."""
    if 0 <= version < 24 and len(object_id) == 16 and len(scope_id) == 16:
        return (b"\xa4\x01\x50" + object_id + b"\x02\x50" + scope_id + bytes((0x03, version, 0x04))
                + cbor.head(2, len(enc)) + enc)
    return cbor.encode({1: object_id, 2: scope_id, 3: version, 4: enc})


def _fast_envelope(data: bytes) -> SealedObject | None:
    """a4 01 50 <id 16> 02 50 <scope 16> 03 <version> 04 <bstr>: what every producer writes."""
    if (len(data) < 42 or data[:3] != b"\xa4\x01\x50" or data[19:21] != b"\x02\x50"
            or data[37] != 0x03 or data[38] > 23 or data[39] != 0x04):
        return None
    ib = data[40]
    if 0x40 <= ib <= 0x57:
        start, n = 41, ib - 0x40
    elif 0x58 <= ib <= 0x5A:
        start = 41 + (1 << (ib - 0x58))
        n = int.from_bytes(data[41:start], "big")
    else:
        return None
    if start + n != len(data):
        return None
    return SealedObject(object_id=data[3:19], scope_id=data[21:37], format_version=data[38],
                        encrypt0=data[start:], encoded=data)


def parse_sealed(data: bytes) -> SealedObject:
    """Structural check of a sealed-object (the checks import makes per object, §8.2 "Import")."""
    if not isinstance(data, (bytes, bytearray)):
        raise MalformedInput("sealed object must be bytes")
    if len(data) > MAX_SEALED:
        raise LimitExceeded("sealed object too large")
    data = bytes(data)
    fast = _fast_envelope(data)
    if fast is not None:
        return fast
    m = cbor.decode(data, max_items=64)
    if not isinstance(m, dict) or not {1, 2, 3, 4} <= m.keys():
        raise MalformedInput("malformed sealed-object: missing envelope keys")
    oid, sid, ver, enc = m[1], m[2], m[3], m[4]
    if not isinstance(oid, bytes) or len(oid) != ID_LEN:
        raise MalformedInput("malformed sealed-object: id must be 16 bytes")
    if not isinstance(sid, bytes) or len(sid) != ID_LEN:
        raise MalformedInput("malformed sealed-object: scope_id must be 16 bytes")
    if type(ver) is not int or ver < 0:
        raise MalformedInput("malformed sealed-object: format_version must be an unsigned integer")
    if not isinstance(enc, bytes):
        raise MalformedInput("malformed sealed-object: ciphertext must be a byte string")
    ref = m.get(5)
    if ref is not None and (not isinstance(ref, bytes) or len(ref) != ID_LEN):
        raise MalformedInput("malformed sealed-object: dek_wrap_ref must be 16 bytes")
    return SealedObject(object_id=oid, scope_id=sid, format_version=ver, encrypt0=enc,
                        encoded=bytes(data), dek_wrap_ref=ref)
