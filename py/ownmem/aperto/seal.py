"""Sealing and opening memory objects (draft-02 §4 "Encoding and Cryptographic Envelope",
§5 "The Two Bindings", §6 "Trust Is Derived, Never Declared", §12 "Legacy Objects (format_version 1)").

    envelope-aad  = CBOR [format_version, id, scope_id]      (never transmitted)
    payload       = deterministic CBOR memory-payload
    signed        = COSE_Sign1(EdDSA, kid = author_key_id, external_aad = envelope-aad)
    sealed-object = {1: id, 2: scope_id, 3: format_version,
                     4: COSE_Encrypt0(A256GCM, DEK, external_aad = envelope-aad)(signed)}

The envelope itself (its CBOR, its parser, the envelope-aad) is ``envelope.py``, which
the blind server shares.  ``open_sealed`` verifies in numbered steps that mirror the
spec and is fail-closed: any authentication failure raises ``AuthenticationFailed``
unless the caller opts in with ``allow_unverified=True``, and then the result says
``unverified``.
"""
from __future__ import annotations

from typing import Any

# envelope_aad and parse_sealed re-exported, as before: the envelope is parsed and bound in envelope.py alone
from ownmem.aperto.envelope import encode_envelope, envelope_aad as envelope_aad, parse_sealed as parse_sealed
from ownmem.aperto.keys import SigningKey, key_id
from ownmem.aperto.model import FORMAT_VERSION, ID_LEN, LEGACY_VERSION, Memory, OpenedMemory, SealedObject, Trust
from ownmem.aperto.payload import DecodedPayload, decode_payload, encode_payload
from ownmem.aperto.trust import Keyring, derive
from ownmem.crypto import CryptoProvider, cose, random_bytes
from ownmem.errors import AuthenticationFailed, MalformedInput, OwnmemError


async def seal_unchecked(p: CryptoProvider, payload: bytes, *, signer: SigningKey, kid: bytes,
                         object_id: bytes, scope_id: bytes, dek: bytes, nonce: bytes,
                         format_version: int = FORMAT_VERSION) -> SealedObject:
    """UNSAFE: seals arbitrary payload bytes under an arbitrary kid, with no Producer check.

    Exists to rebuild the spec's refusal vectors and to write attack tests; the
    product seals only through ``seal``.  format_version 1 gets no bindings (empty AAD),
    which is exactly the defect v2 closes.
    """
    aad = envelope_aad(format_version, object_id, scope_id) if format_version >= 2 else b""
    protected = cose.sign1_protected(kid)
    sig = await p.ed25519_sign(signer.seed, cose.sig_structure(protected, aad, payload))
    signed = cose.encode_sign1(protected, payload, sig)
    enc = await cose.encrypt0(p, dek, nonce, signed, aad)
    encoded = encode_envelope(object_id, scope_id, format_version, enc)
    return SealedObject(object_id=object_id, scope_id=scope_id, format_version=format_version,
                        encrypt0=enc, encoded=encoded)


async def seal(p: CryptoProvider, memory: Memory, *, signer: SigningKey, scope_id: bytes,
               dek: bytes, object_id: bytes | None = None,
               nonce: bytes | None = None) -> SealedObject:
    """Seal one memory as format_version 2.  The DEK must be fresh: one DEK, one object
    (§15.5 "Nonce Management and AEAD Limits").

    object_id and nonce default to fresh randomness; they are parameters only for vectors.
    """
    if len(scope_id) != ID_LEN:
        raise MalformedInput("scope_id must be 16 bytes")
    if len(dek) != 32:
        raise MalformedInput("DEK must be 32 bytes")
    fresh = random_bytes(ID_LEN + 12)   # one call for the id and the nonce
    oid = object_id if object_id is not None else fresh[:ID_LEN]
    if len(oid) != ID_LEN:
        raise MalformedInput("object id must be 16 bytes")
    payload = encode_payload(memory, signer.key_id)
    return await seal_unchecked(p, payload, signer=signer, kid=signer.key_id, object_id=oid,
                                scope_id=scope_id, dek=dek, nonce=nonce if nonce is not None else fresh[ID_LEN:])


async def open_sealed(p: CryptoProvider, sealed: SealedObject | bytes, dek: bytes, keyring: Keyring,
                      *, allow_unverified: bool = False) -> OpenedMemory:
    """Decrypt, authenticate and decode one object; derive its trust from ``keyring``.

    Raises AuthenticationFailed (refusal) or MalformedInput; never returns content
    that failed authentication unless ``allow_unverified`` (and then labels it so).
    """
    so, aad, enc = _prepare(sealed)
    # 2. Decrypt under the single-use DEK.
    signed = await cose.decrypt0(p, dek, enc, aad)
    sign1, decoded, candidates, tbs = _inspect(so, aad, signed)
    verified_as: Trust | None = None
    for pub, level in keyring.candidates(candidates):
        if await p.ed25519_verify(pub, sign1.signature, tbs):
            verified_as = level
            break
    return _conclude(so, sign1, decoded, verified_as, keyring, allow_unverified)


def _prepare(sealed: SealedObject | bytes) -> tuple[SealedObject, bytes, cose.Encrypt0]:
    # 0. Parse the cleartext envelope.
    so = sealed if isinstance(sealed, SealedObject) else parse_sealed(sealed)
    ver = so.format_version
    if ver not in (LEGACY_VERSION, FORMAT_VERSION):
        raise MalformedInput(f"unsupported format_version {ver}")
    # 1. Envelope binding (§5.1 "Envelope Binding"): rebuild the AAD from the cleartext envelope.  A
    #    rewritten id/scope_id/version (vectors 005, 006) fails the AEAD tag in step 2.
    aad = envelope_aad(ver, so.object_id, so.scope_id) if ver >= 2 else b""
    return so, aad, cose.parse_encrypt0(so.encrypt0)


def _inspect(so: SealedObject, aad: bytes, signed: bytes) -> tuple[cose.Sign1, DecodedPayload, bytes | None, bytes]:
    """Steps 3-5 up to the signature check -> (sign1, payload, claimed author to try, bytes signed).
    The claimed author is None when no key may be tried (format_version 1)."""
    # 3. Parse the COSE_Sign1 and the payload it carries.
    sign1 = cose.parse_sign1(signed)
    if sign1.alg != cose.ALG_EDDSA:
        raise AuthenticationFailed("signature algorithm is not EdDSA")
    decoded = decode_payload(sign1.payload)
    claimed = decoded.claimed_author
    if so.format_version < 2:
        return sign1, decoded, None, b""
    # 4. kid consistency (§5.2 "Author Binding", vector 010): both fields are signed, so a
    #    disagreement is self-inconsistent and refused, not resolved.
    if sign1.kid is not None and sign1.kid != claimed:
        raise AuthenticationFailed("header kid != payload author_key_id")
    # 5. Author binding (§5.2 "Author Binding", vector 004): only a key whose key_id equals the claimed
    #    author is tried (Keyring.candidates), so a signer cannot claim another identity.
    return sign1, decoded, claimed, cose.sig_structure(sign1.protected, aad, sign1.payload)


def _conclude(so: SealedObject, sign1: cose.Sign1, decoded: DecodedPayload, verified_as: Trust | None,
              keyring: Keyring, allow_unverified: bool) -> OpenedMemory:
    # 6. Fail closed (§6 "Trust Is Derived, Never Declared", §12 "Legacy Objects (format_version
    # 1)"): v1 objects and unauthenticated v2 objects are
    #    refused unless the caller explicitly opts in.
    if verified_as is None and not allow_unverified:
        if so.format_version < 2:
            raise AuthenticationFailed("format_version 1 cannot be authenticated")
        raise AuthenticationFailed("no accepted key verifies this object as its claimed author")
    # 7. Derive trust and authorship (§6 "Trust Is Derived, Never Declared", §7 "Custody Records", Tables 1 and 2).
    signer_kid = decoded.claimed_author if verified_as is not None else None
    return _opened(so, decoded, sign1.payload, verified_as, signer_kid, keyring)


async def open_many(p: CryptoProvider, items: list[tuple[SealedObject | bytes, bytes]], keyring: Keyring,
                    *, allow_unverified: bool = False) -> list[OpenedMemory | OwnmemError]:
    """``open_sealed`` for many objects, each in isolation (a failure is its result:
    §2 "Conformance: Who This Specification Binds"),
    with one provider call per step where the provider batches (the browser: each
    WebCrypto call costs far more than the operation)."""
    out: list[OpenedMemory | OwnmemError] = [OwnmemError("not opened")] * len(items)
    prepared: list[tuple[int, SealedObject, bytes, cose.Encrypt0, bytes]] = []
    for i, (sealed, dek) in enumerate(items):
        try:
            so, aad, enc = _prepare(sealed)
            prepared.append((i, so, aad, enc, dek))
        except OwnmemError as e:
            out[i] = e
    plains = await p.aes_gcm_decrypt_many([d for *_, d in prepared], [e.iv for *_, e, _ in prepared],
                                          [e.ciphertext for *_, e, _ in prepared],
                                          [cose.enc_structure(e.protected, a) for _, _, a, e, _ in prepared])
    inspected = []
    for (i, so, aad, _, _), signed in zip(prepared, plains, strict=True):
        if signed is None:
            out[i] = AuthenticationFailed("AEAD tag mismatch")
            continue
        try:
            sign1, decoded, claimed, tbs = _inspect(so, aad, signed)
            inspected.append((i, so, sign1, decoded, keyring.candidates(claimed), tbs))
        except OwnmemError as e:
            out[i] = e
    # one batch for every object's first candidate key (there is almost always one)
    firsts = [(c[0][0], s1.signature, tbs) for _, _, s1, _, c, tbs in inspected if c]
    oks = await p.ed25519_verify_many([f[0] for f in firsts], [f[1] for f in firsts], [f[2] for f in firsts])
    k = 0
    for i, so, sign1, decoded, cands, tbs in inspected:
        verified_as: Trust | None = None
        if cands:
            if oks[k]:
                verified_as = cands[0][1]
            else:
                for pub, level in cands[1:]:
                    if await p.ed25519_verify(pub, sign1.signature, tbs):
                        verified_as = level
                        break
            k += 1
        try:
            out[i] = _conclude(so, sign1, decoded, verified_as, keyring, allow_unverified)
        except OwnmemError as e:
            out[i] = e
    return out


def _opened(so: SealedObject, decoded: DecodedPayload, payload: bytes, verified_as: Trust | None,
            signer_kid: bytes | None, keyring: Keyring) -> OpenedMemory:
    d = derive(verified_as=verified_as, signer_kid=signer_kid, claimed_kid=decoded.claimed_author,
               custody_present=decoded.custody_present, custody=decoded.memory.custody, keyring=keyring)
    m = decoded.memory
    return OpenedMemory(
        object_id=so.object_id, scope_id=so.scope_id, format_version=so.format_version, content=m.content,
        mem_type=m.mem_type, confidence=decoded.confidence, tags=m.tags,
        created=m.created if m.created else None, updated=m.updated, tool=m.tool or None,
        session=m.session, trust=d.trust, authorship=d.authorship, author_key_id=d.author_key_id,
        signer_key_id=signer_kid, claimed_author_key_id=d.claimed_author_key_id,
        signature_verified=verified_as is not None, custody_present=decoded.custody_present,
        custody=m.custody, extensions=dict(m.extensions or {}),
        schema_violations=decoded.violations, payload=payload, memory=m)


def reopen_verified(so: SealedObject, payload: bytes, signer_pub: bytes, keyring: Keyring) -> OpenedMemory:
    """An object this device already decrypted and verified (a local cache of verified
    plaintext holds ``payload`` and the key that verified it).  The signature is not
    checked again, but trust is derived again from the keyring in force now (§6 "Trust Is Derived,
    Never Declared"): a key revoked since then no longer verifies anything, and the object is refused."""
    decoded = decode_payload(payload)
    kid = key_id(signer_pub)
    if decoded.claimed_author != kid:
        raise AuthenticationFailed("cached signer is not the payload's author")
    for pub, level in keyring.candidates(kid):
        if pub == signer_pub:
            return _opened(so, decoded, payload, level, kid, keyring)
    raise AuthenticationFailed("the key that verified this object is no longer accepted")


def _hex_or_none(b: bytes | None) -> str | None:
    return b.hex() if b is not None else None


def opened_summary(o: OpenedMemory) -> dict[str, Any]:
    """A JSON-ready view (hex for bytes) for CLIs and tests; never holds key material."""
    return {
        "id": o.object_id.hex(), "scope_id": o.scope_id.hex(), "format_version": o.format_version,
        "content": o.content, "type": o.type_name, "confidence": o.confidence,
        "tags": list(o.tags), "created": o.created, "updated": o.updated, "trust": o.trust.value,
        "authorship": o.authorship.value, "author_key_id": _hex_or_none(o.author_key_id),
        "signer_key_id": _hex_or_none(o.signer_key_id), "claimed_author_key_id": _hex_or_none(o.claimed_author_key_id),
        "signature_verified": o.signature_verified, "custody_present": o.custody_present,
        "schema_violations": list(o.schema_violations),
    }
