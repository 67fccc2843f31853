"""COSE_Sign1 (EdDSA) and COSE_Encrypt0 (AES-256-GCM), RFC 9052 / RFC 9053.

    COSE_Sign1    = #6.18([protected: bstr, unprotected: {}, payload: bstr, signature: bstr])
    Sig_structure = ["Signature1", protected, external_aad, payload]   -> Ed25519 input
    COSE_Encrypt0 = #6.16([protected: bstr, unprotected: {5: iv}, ciphertext: bstr])
    Enc_structure = ["Encrypt0", protected, external_aad]              -> AES-GCM AAD

Only the algorithms ApertoMemory uses are accepted: EdDSA (-8) and A256GCM (3).
Parsing checks shape and algorithm; it never decides trust.
"""
from __future__ import annotations

from dataclasses import dataclass

from ownmem.crypto import cbor
from ownmem.crypto.interface import CryptoProvider
from ownmem.errors import MalformedInput

TAG_SIGN1 = 18
TAG_ENCRYPT0 = 16
ALG = 1
KID = 4
IV = 5
ALG_EDDSA = -8
ALG_A256GCM = 3

_ENC_PROTECTED = cbor.encode({ALG: ALG_A256GCM})


@dataclass(frozen=True, slots=True)
class Sign1:
    protected: bytes          # the serialized protected header, as signed
    alg: int | None
    kid: bytes | None
    payload: bytes
    signature: bytes


@dataclass(frozen=True, slots=True)
class Encrypt0:
    protected: bytes
    iv: bytes
    ciphertext: bytes


def _bstr(b: bytes) -> bytes:
    return cbor.head(2, len(b)) + b


# Canonical encodings assembled directly: these run once per object sealed or opened,
# and each equals cbor.encode of the structure it names (tests/crypto/test_cose.py).
_SIG1_PREFIX = b"\x84\x6aSignature1"   # ["Signature1", ...
_ENC0_PREFIX = b"\x83\x68Encrypt0"     # ["Encrypt0", ...


def sign1_protected(kid: bytes) -> bytes:
    if len(kid) == 8:
        return b"\xa2\x01\x27\x04\x48" + kid       # {1: -8, 4: h'kid'}
    return cbor.encode({ALG: ALG_EDDSA, KID: kid})


def sig_structure(protected: bytes, external_aad: bytes, payload: bytes) -> bytes:
    return _SIG1_PREFIX + _bstr(protected) + _bstr(external_aad) + _bstr(payload)


def encode_sign1(protected: bytes, payload: bytes, signature: bytes) -> bytes:
    return b"\xd2\x84" + _bstr(protected) + b"\xa0" + _bstr(payload) + _bstr(signature)


def _header_map(raw: bytes) -> dict[object, object]:
    if raw == b"":
        return {}
    h = cbor.decode(raw, max_items=64)
    if not isinstance(h, dict):
        raise MalformedInput("COSE header is not a map")
    return h


def _bstr_at(data: bytes, pos: int) -> tuple[int, int]:
    """(start, end) of the byte string whose head is at ``pos``; (-1, -1) if it is not one."""
    if pos >= len(data):
        return -1, -1
    ib = data[pos]
    if 0x40 <= ib <= 0x57:
        start, n = pos + 1, ib - 0x40
    elif 0x58 <= ib <= 0x5A:
        size = 1 << (ib - 0x58)
        start = pos + 1 + size
        n = int.from_bytes(data[pos + 1:start], "big")
    else:
        return -1, -1
    end = start + n
    return (start, end) if end <= len(data) else (-1, -1)


def _fast_sign1(data: bytes) -> Sign1 | None:
    """The canonical layout every ApertoMemory producer writes:
    d2 84 4d a2 01 27 04 48 <kid 8> a0 <bstr payload> 58 40 <sig 64>."""
    if data[:8] != b"\xd2\x84\x4d\xa2\x01\x27\x04\x48" or data[16:17] != b"\xa0":
        return None
    ps, pe = _bstr_at(data, 17)
    if ps < 0 or data[pe:pe + 2] != b"\x58\x40" or len(data) != pe + 66:
        return None
    return Sign1(protected=data[3:16], alg=ALG_EDDSA, kid=data[8:16], payload=data[ps:pe], signature=data[pe + 2:])


def parse_sign1(data: bytes) -> Sign1:
    fast = _fast_sign1(data)
    if fast is not None:
        return fast
    msg = cbor.decode(data, max_items=256)
    if not isinstance(msg, cbor.Tag) or msg.number != TAG_SIGN1:
        raise MalformedInput("not a COSE_Sign1")
    body = msg.value
    if (not isinstance(body, list) or len(body) != 4 or not isinstance(body[0], bytes)
            or not isinstance(body[1], dict) or not isinstance(body[2], bytes)
            or not isinstance(body[3], bytes)):
        raise MalformedInput("malformed COSE_Sign1")
    prot = _header_map(body[0])
    alg = prot.get(ALG, body[1].get(ALG))
    kid = prot.get(KID)
    if kid is not None and not isinstance(kid, bytes):
        raise MalformedInput("COSE kid is not a byte string")
    return Sign1(protected=body[0], alg=alg if isinstance(alg, int) else None, kid=kid,
                 payload=body[2], signature=body[3])


def enc_structure(protected: bytes, external_aad: bytes) -> bytes:
    return _ENC0_PREFIX + _bstr(protected) + _bstr(external_aad)


def _fast_encrypt0(data: bytes) -> Encrypt0 | None:
    """d0 83 43 a1 01 03 a1 05 4c <iv 12> <bstr ciphertext>."""
    if data[:9] != b"\xd0\x83\x43\xa1\x01\x03\xa1\x05\x4c":
        return None
    cs, ce = _bstr_at(data, 21)
    if cs < 0 or ce != len(data):
        return None
    return Encrypt0(protected=data[3:6], iv=data[9:21], ciphertext=data[cs:])


def parse_encrypt0(data: bytes) -> Encrypt0:
    fast = _fast_encrypt0(data)
    if fast is not None:
        return fast
    msg = cbor.decode(data, max_items=64)
    if not isinstance(msg, cbor.Tag) or msg.number != TAG_ENCRYPT0:
        raise MalformedInput("not a COSE_Encrypt0")
    body = msg.value
    if (not isinstance(body, list) or len(body) != 3 or not isinstance(body[0], bytes)
            or not isinstance(body[1], dict) or not isinstance(body[2], bytes)):
        raise MalformedInput("malformed COSE_Encrypt0")
    prot = _header_map(body[0])
    alg = prot.get(ALG, body[1].get(ALG))
    if alg != ALG_A256GCM:
        raise MalformedInput(f"unsupported COSE content-encryption algorithm {alg!r}")
    iv = body[1].get(IV, prot.get(IV))
    if not isinstance(iv, bytes) or len(iv) != 12:
        raise MalformedInput("COSE_Encrypt0 IV must be 12 bytes")
    return Encrypt0(protected=body[0], iv=iv, ciphertext=body[2])


async def encrypt0(p: CryptoProvider, key: bytes, iv: bytes, plaintext: bytes,
                   external_aad: bytes) -> bytes:
    ct = await p.aes_gcm_encrypt(key, iv, plaintext, enc_structure(_ENC_PROTECTED, external_aad))
    if len(iv) == 12:
        return b"\xd0\x83\x43\xa1\x01\x03\xa1\x05\x4c" + iv + _bstr(ct)
    return cbor.encode(cbor.Tag(TAG_ENCRYPT0, [_ENC_PROTECTED, {IV: iv}, ct]))


async def decrypt0(p: CryptoProvider, key: bytes, msg: Encrypt0, external_aad: bytes) -> bytes:
    """Raises AuthenticationFailed when the tag (and so the AAD) does not verify."""
    return await p.aes_gcm_decrypt(key, msg.iv, msg.ciphertext,
                                   enc_structure(msg.protected, external_aad))
