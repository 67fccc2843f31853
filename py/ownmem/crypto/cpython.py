"""CPython crypto provider: pyca/cryptography (>= 47), argon2-cffi, and PyNaCl for Ed25519.

Ed25519 goes through libsodium (PyNaCl, also pyca) because it signs and verifies
about twice as fast as OpenSSL here, and opening a vault is one verification per
object; both follow RFC 8032 and produce identical (deterministic) signatures.

Key objects are cached by their raw bytes because constructing them (point
decompression, seed expansion) costs more than the operation itself on a hot
path like opening 10,000 objects.  The private-key cache holds secrets, so
``forget_secrets`` empties it: the vault calls it on lock.
"""
from __future__ import annotations

from collections.abc import Sequence

from argon2.low_level import Type, hash_secret_raw
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, keywrap
from cryptography.hazmat.primitives.asymmetric.mldsa import MLDSA65PrivateKey, MLDSA65PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from nacl import bindings as sodium
from nacl.exceptions import BadSignatureError

from ownmem.crypto.interface import ARGON2_ITERATIONS, ARGON2_MEMORY_KIB, ARGON2_PARALLELISM
from ownmem.errors import AuthenticationFailed, MalformedInput

_CACHE_LIMIT = 4096


class CPythonProvider:
    name = "cpython"

    def __init__(self) -> None:
        self._sign_keys: dict[bytes, tuple[bytes, bytes]] = {}
        self._mldsa_keys: dict[bytes, MLDSA65PrivateKey] = {}

    def forget_secrets(self) -> None:
        self._sign_keys.clear()
        self._mldsa_keys.clear()

    async def argon2id(self, secret: bytes, salt: bytes, *, memory_kib: int = ARGON2_MEMORY_KIB,
                       iterations: int = ARGON2_ITERATIONS, parallelism: int = ARGON2_PARALLELISM,
                       length: int = 32) -> bytes:
        return hash_secret_raw(secret, salt, time_cost=iterations, memory_cost=memory_kib,
                               parallelism=parallelism, hash_len=length, type=Type.ID)

    async def hkdf_sha256(self, ikm: bytes, info: bytes, length: int = 32,
                          salt: bytes | None = None) -> bytes:
        return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(ikm)

    async def aes_gcm_encrypt(self, key: bytes, nonce: bytes, plaintext: bytes, aad: bytes) -> bytes:
        return AESGCM(key).encrypt(nonce, plaintext, aad)

    async def aes_gcm_decrypt(self, key: bytes, nonce: bytes, ciphertext: bytes, aad: bytes) -> bytes:
        if len(key) != 32 or len(nonce) != 12:
            raise AuthenticationFailed("bad AES-GCM key or nonce length")
        try:
            return AESGCM(key).decrypt(nonce, ciphertext, aad)
        except InvalidTag:
            raise AuthenticationFailed("AEAD tag mismatch") from None

    async def aes_kw_wrap(self, kek: bytes, key: bytes) -> bytes:
        return keywrap.aes_key_wrap(kek, key)

    async def aes_kw_unwrap(self, kek: bytes, wrapped: bytes) -> bytes:
        try:
            return keywrap.aes_key_unwrap(kek, wrapped)
        except (keywrap.InvalidUnwrap, ValueError):
            raise AuthenticationFailed("key unwrap failed") from None

    async def aes_gcm_decrypt_many(self, keys: Sequence[bytes], nonces: Sequence[bytes],
                                   ciphertexts: Sequence[bytes], aads: Sequence[bytes]) -> list[bytes | None]:
        out: list[bytes | None] = []
        for key, nonce, ct, aad in zip(keys, nonces, ciphertexts, aads, strict=True):
            try:
                out.append(await self.aes_gcm_decrypt(key, nonce, ct, aad))
            except AuthenticationFailed:
                out.append(None)
        return out

    async def aes_kw_unwrap_many(self, kek: bytes, wrapped: Sequence[bytes]) -> list[bytes | None]:
        out: list[bytes | None] = []
        for w in wrapped:
            try:
                out.append(await self.aes_kw_unwrap(kek, w))
            except AuthenticationFailed:
                out.append(None)
        return out

    async def ed25519_verify_many(self, publics: Sequence[bytes], signatures: Sequence[bytes],
                                  messages: Sequence[bytes]) -> list[bool]:
        return [await self.ed25519_verify(pub, sig, msg) for pub, sig, msg in zip(publics, signatures, messages,
                                                                                   strict=True)]

    def _ed_private(self, seed: bytes) -> tuple[bytes, bytes]:
        """(public key, libsodium's 64-byte secret key) for a seed."""
        pair = self._sign_keys.get(seed)
        if pair is None:
            if not isinstance(seed, bytes) or len(seed) != 32:
                raise MalformedInput("Ed25519 seed must be 32 bytes")
            if len(self._sign_keys) >= _CACHE_LIMIT:
                self._sign_keys.clear()
            pair = self._sign_keys[seed] = sodium.crypto_sign_seed_keypair(seed)
        return pair

    async def ed25519_public(self, seed: bytes) -> bytes:
        return self._ed_private(seed)[0]

    async def ed25519_sign(self, seed: bytes, message: bytes) -> bytes:
        return sodium.crypto_sign(message, self._ed_private(seed)[1])[:64]

    async def ed25519_verify(self, public: bytes, signature: bytes, message: bytes) -> bool:
        if len(public) != 32 or len(signature) != 64:
            return False
        try:
            sodium.crypto_sign_open(signature + message, public)
            return True
        except (BadSignatureError, ValueError, TypeError):
            return False

    async def x25519_public(self, seed: bytes) -> bytes:
        return X25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()

    async def x25519_shared(self, seed: bytes, peer_public: bytes) -> bytes:
        try:
            peer = X25519PublicKey.from_public_bytes(peer_public)
            return X25519PrivateKey.from_private_bytes(seed).exchange(peer)
        except ValueError:
            # wrong length or a low-order point (all-zero shared secret)
            raise AuthenticationFailed("bad X25519 public key") from None

    def _mldsa_private(self, seed: bytes) -> MLDSA65PrivateKey:
        key = self._mldsa_keys.get(seed)
        if key is None:
            if len(seed) != 32:
                raise MalformedInput("ML-DSA seed must be 32 bytes")
            if len(self._mldsa_keys) >= _CACHE_LIMIT:
                self._mldsa_keys.clear()
            key = self._mldsa_keys[seed] = MLDSA65PrivateKey.from_seed_bytes(seed)
        return key

    async def mldsa65_public(self, seed: bytes) -> bytes:
        return self._mldsa_private(seed).public_key().public_bytes_raw()

    async def mldsa65_sign(self, seed: bytes, message: bytes, context: bytes, *,
                           deterministic: bool = False) -> bytes:
        if not deterministic:
            return self._mldsa_private(seed).sign(message, context)
        # OpenSSL only signs hedged; FIPS 204 deterministic signing (rnd = 0^32)
        # comes from dilithium-py, which is slow but only needed for vectors.
        from dilithium_py.ml_dsa import ML_DSA_65

        _, sk = ML_DSA_65.key_derive(seed)
        return bytes(ML_DSA_65.sign(sk, message, ctx=context, deterministic=True))

    async def mldsa65_verify(self, public: bytes, message: bytes, signature: bytes,
                             context: bytes) -> bool:
        try:
            MLDSA65PublicKey.from_public_bytes(public).verify(signature, message, context)
            return True
        except (InvalidSignature, ValueError):
            return False
