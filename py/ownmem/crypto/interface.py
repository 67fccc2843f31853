"""The crypto provider interface (DESIGN.md "Crypto provider").

Every operation that touches a key is ``async`` so that one body of Python runs
both in CPython (where the provider finishes synchronously inside the coroutine)
and under Pyodide (where it awaits WebCrypto).  Hashing and randomness are
synchronous: hashlib and os.urandom exist in both worlds.

Failures of authenticated decryption and key unwrapping raise
``AuthenticationFailed``; verification returns a bool, because "did not verify"
is an ordinary answer, not an accident.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import Protocol

ARGON2_MEMORY_KIB = 64 * 1024
ARGON2_ITERATIONS = 3
ARGON2_PARALLELISM = 4


class CryptoProvider(Protocol):
    name: str

    async def argon2id(self, secret: bytes, salt: bytes, *, memory_kib: int = ARGON2_MEMORY_KIB,
                       iterations: int = ARGON2_ITERATIONS, parallelism: int = ARGON2_PARALLELISM,
                       length: int = 32) -> bytes: ...

    async def hkdf_sha256(self, ikm: bytes, info: bytes, length: int = 32,
                          salt: bytes | None = None) -> bytes: ...

    async def aes_gcm_encrypt(self, key: bytes, nonce: bytes, plaintext: bytes, aad: bytes) -> bytes: ...

    async def aes_gcm_decrypt(self, key: bytes, nonce: bytes, ciphertext: bytes, aad: bytes) -> bytes: ...

    async def aes_kw_wrap(self, kek: bytes, key: bytes) -> bytes: ...

    async def aes_kw_unwrap(self, kek: bytes, wrapped: bytes) -> bytes: ...

    async def ed25519_public(self, seed: bytes) -> bytes: ...

    async def ed25519_sign(self, seed: bytes, message: bytes) -> bytes: ...

    async def ed25519_verify(self, public: bytes, signature: bytes, message: bytes) -> bool: ...

    async def x25519_public(self, seed: bytes) -> bytes: ...

    async def x25519_shared(self, seed: bytes, peer_public: bytes) -> bytes: ...

    async def mldsa65_public(self, seed: bytes) -> bytes: ...

    async def mldsa65_sign(self, seed: bytes, message: bytes, context: bytes, *,
                           deterministic: bool = False) -> bytes: ...

    async def mldsa65_verify(self, public: bytes, message: bytes, signature: bytes,
                             context: bytes) -> bool: ...

    # Batches: one call for many objects.  In the browser each call crosses into
    # JavaScript and costs far more than the operation, so opening a vault makes one
    # call per step instead of one per object; CPython loops.  A failure is that
    # item's ``None`` / ``False``, never an exception for the whole batch.

    async def aes_gcm_decrypt_many(self, keys: Sequence[bytes], nonces: Sequence[bytes],
                                   ciphertexts: Sequence[bytes], aads: Sequence[bytes]) -> list[bytes | None]: ...

    async def aes_kw_unwrap_many(self, kek: bytes, wrapped: Sequence[bytes]) -> list[bytes | None]: ...

    async def ed25519_verify_many(self, publics: Sequence[bytes], signatures: Sequence[bytes],
                                  messages: Sequence[bytes]) -> list[bool]: ...

    def forget_secrets(self) -> None:
        """Drop every cached private key (the vault calls it on lock)."""


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def random_bytes(n: int) -> bytes:
    return os.urandom(n)
