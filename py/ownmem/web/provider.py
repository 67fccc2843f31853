"""The browser crypto provider: the CryptoProvider protocol over ``web/js/glue.js``.

    Python (this file)                 JavaScript module "ownmem_js" (web/js/glue.js)
    ---------------------------------  ----------------------------------------------
    argon2id(secret, salt, ...)    ->  argon2id(password, salt, {memory_kib, ...})   hash-wasm
    hkdf_sha256(ikm, info, n, salt) -> hkdf_sha256(ikm, info, n, salt)                WebCrypto HKDF
    aes_gcm_encrypt / _decrypt     ->  aes_gcm_encrypt / aes_gcm_decrypt             WebCrypto AES-GCM
    aes_kw_wrap / _unwrap          ->  aes_kw_wrap / aes_kw_unwrap                   WebCrypto AES-KW
    ed25519_public / _sign / _verify -> ed25519_*   (PKCS#8 import of the seed)      WebCrypto Ed25519
    x25519_public / _shared        ->  x25519_*     (PKCS#8 import of the seed)      WebCrypto X25519
    mldsa65_public / _sign / _verify -> mldsa65_*   WebCrypto ML-DSA-65 if present, else noble;
                                                    deterministic signing always noble
    aes_kw_unwrap_many, aes_gcm_decrypt_many, ed25519_verify_many: one JS call for many
    objects (each call is a JSPI round trip, costlier than the operation); failures are
    None / False.
    forget_secrets()               ->  forgetSecrets()   (drops cached private keys)

bytes go to JavaScript as Uint8Array copies (``to_js``) and come back with
``to_bytes()``.  A JS error named ``AuthenticationFailed`` becomes
``ownmem.errors.AuthenticationFailed``, ``MalformedInput`` becomes ``MalformedInput``;
verification answers False, never raises.

The methods are coroutines (the CryptoProvider protocol) that complete without ever
suspending: each blocks on its JS promise with ``pyodide.ffi.run_sync`` (JSPI).  So the
Python stack must have been entered from JavaScript through an async call
(``callPromising``, ``runPythonAsync``, or an async Python function).  Where the engine
has no JSPI (WebKit) the worker registers web/js/glue-sync.js instead, whose functions
answer synchronously (@noble/*): a result that is not a promise is taken as it is.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyodide.ffi import JsException, jsnull, run_sync, to_js

from ..crypto.interface import ARGON2_ITERATIONS, ARGON2_MEMORY_KIB, ARGON2_PARALLELISM
from ..errors import AuthenticationFailed, MalformedInput

_ERRORS: dict[str, type[Exception]] = {
    "AuthenticationFailed": AuthenticationFailed,
    "MalformedInput": MalformedInput,
}


def _bytes_or_none(x: Any) -> bytes | None:
    return None if x is None or x is jsnull else x.to_bytes()


def _call(fn: Any, *args: Any) -> Any:
    # JSPI-suspend on the promise right here instead of ``await``-ing it: the coroutine then
    # never yields, so no asyncio task and WebLoop turn is paid per operation (measured at
    # about twice the JSPI round trip itself), and ownmem.crypto.run_sync could drive it
    # with a bare ``send(None)``.
    try:
        out = fn(*args)
        # Without JSPI the glue answers synchronously (web/js/glue-sync.js): no promise to wait for.
        return run_sync(out) if hasattr(out, "then") else out
    except JsException as e:
        mapped = _ERRORS.get(e.name)
        if mapped is None:
            raise
        raise mapped(e.message) from None


def _bytes(fn: Any, *args: Any) -> bytes:
    return bytes(_call(fn, *args).to_bytes())


class BrowserProvider:
    """CryptoProvider under Pyodide; see the module docstring for the mapping."""

    name = "browser"

    def __init__(self, glue: Any = None) -> None:
        if glue is None:
            import ownmem_js  # the worker's registerJsModule

            glue = ownmem_js
        self._js = glue

    def forget_secrets(self) -> None:
        self._js.forgetSecrets()

    async def features(self) -> dict[str, Any]:
        features: dict[str, Any] = _call(self._js.features).to_py()
        return features

    async def argon2id(self, secret: bytes, salt: bytes, *, memory_kib: int = ARGON2_MEMORY_KIB,
                       iterations: int = ARGON2_ITERATIONS, parallelism: int = ARGON2_PARALLELISM,
                       length: int = 32) -> bytes:
        opts = {"memory_kib": memory_kib, "iterations": iterations, "parallelism": parallelism,
                "length": length}
        return _bytes(self._js.argon2id, to_js(secret), to_js(salt), to_js(opts))

    async def hkdf_sha256(self, ikm: bytes, info: bytes, length: int = 32,
                          salt: bytes | None = None) -> bytes:
        return _bytes(self._js.hkdf_sha256, to_js(ikm), to_js(info), length,
                      None if salt is None else to_js(salt))

    async def aes_gcm_encrypt(self, key: bytes, nonce: bytes, plaintext: bytes, aad: bytes) -> bytes:
        return _bytes(self._js.aes_gcm_encrypt, to_js(key), to_js(nonce), to_js(plaintext), to_js(aad))

    async def aes_gcm_decrypt(self, key: bytes, nonce: bytes, ciphertext: bytes, aad: bytes) -> bytes:
        return _bytes(self._js.aes_gcm_decrypt, to_js(key), to_js(nonce), to_js(ciphertext), to_js(aad))

    async def aes_gcm_decrypt_many(self, keys: Sequence[bytes], nonces: Sequence[bytes],
                                   ciphertexts: Sequence[bytes], aads: Sequence[bytes]) -> list[bytes | None]:
        r = _call(self._js.aes_gcm_decrypt_many, to_js(list(keys)), to_js(list(nonces)),
                  to_js(list(ciphertexts)), to_js(list(aads)))
        return [_bytes_or_none(x) for x in r]

    async def aes_kw_wrap(self, kek: bytes, key: bytes) -> bytes:
        return _bytes(self._js.aes_kw_wrap, to_js(kek), to_js(key))

    async def aes_kw_unwrap(self, kek: bytes, wrapped: bytes) -> bytes:
        return _bytes(self._js.aes_kw_unwrap, to_js(kek), to_js(wrapped))

    async def aes_kw_unwrap_many(self, kek: bytes, wrapped: Sequence[bytes]) -> list[bytes | None]:
        return [_bytes_or_none(x) for x in _call(self._js.aes_kw_unwrap_many, to_js(kek), to_js(list(wrapped)))]

    async def ed25519_public(self, seed: bytes) -> bytes:
        return _bytes(self._js.ed25519_public, to_js(seed))

    async def ed25519_sign(self, seed: bytes, message: bytes) -> bytes:
        return _bytes(self._js.ed25519_sign, to_js(seed), to_js(message))

    async def ed25519_verify(self, public: bytes, signature: bytes, message: bytes) -> bool:
        return bool(_call(self._js.ed25519_verify, to_js(public), to_js(signature), to_js(message)))

    async def ed25519_verify_many(self, publics: Sequence[bytes], signatures: Sequence[bytes],
                                  messages: Sequence[bytes]) -> list[bool]:
        r = _call(self._js.ed25519_verify_many, to_js(list(publics)), to_js(list(signatures)),
                  to_js(list(messages)))
        return [bool(x) for x in r]

    async def x25519_public(self, seed: bytes) -> bytes:
        return _bytes(self._js.x25519_public, to_js(seed))

    async def x25519_shared(self, seed: bytes, peer_public: bytes) -> bytes:
        return _bytes(self._js.x25519_shared, to_js(seed), to_js(peer_public))

    async def mldsa65_public(self, seed: bytes) -> bytes:
        return _bytes(self._js.mldsa65_public, to_js(seed))

    async def mldsa65_sign(self, seed: bytes, message: bytes, context: bytes, *,
                           deterministic: bool = False) -> bytes:
        return _bytes(self._js.mldsa65_sign, to_js(seed), to_js(message), to_js(context), deterministic)

    async def mldsa65_verify(self, public: bytes, message: bytes, signature: bytes,
                             context: bytes) -> bool:
        return bool(_call(self._js.mldsa65_verify, to_js(public), to_js(message), to_js(signature),
                          to_js(context)))
