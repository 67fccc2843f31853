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

from ..errors import MalformedInput
from . import cbor
from .provider import CryptoProvider

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


def sign1_protected(kid: bytes) -> bytes:
    return cbor.encode({ALG: ALG_EDDSA, KID: kid})


def sig_structure(protected: bytes, external_aad: bytes, payload: bytes) -> bytes:
    return cbor.encode(["Signature1", protected, external_aad, payload])


def encode_sign1(protected: bytes, payload: bytes, signature: bytes) -> bytes:
    return cbor.encode(cbor.Tag(TAG_SIGN1, [protected, {}, payload, signature]))


def _header_map(raw: bytes) -> dict:
    if raw == b"":
        return {}
    h = cbor.decode(raw, max_items=64)
    if not isinstance(h, dict):
        raise MalformedInput("COSE header is not a map")
    return h


def parse_sign1(data: bytes) -> Sign1:
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
    return cbor.encode(["Encrypt0", protected, external_aad])


def parse_encrypt0(data: bytes) -> Encrypt0:
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
    return cbor.encode(cbor.Tag(TAG_ENCRYPT0, [_ENC_PROTECTED, {IV: iv}, ct]))


async def decrypt0(p: CryptoProvider, key: bytes, msg: Encrypt0, external_aad: bytes) -> bytes:
    """Raises AuthenticationFailed when the tag (and so the AAD) does not verify."""
    return await p.aes_gcm_decrypt(key, msg.iv, msg.ciphertext,
                                   enc_structure(msg.protected, external_aad))
