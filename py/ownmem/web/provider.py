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

The methods are coroutines (the CryptoProvider protocol).  Two ways to run them:

- with JSPI, each blocks on its JS promise with ``pyodide.ffi.run_sync`` and never
  suspends, so the Python stack must have been entered from JavaScript through an async
  call (``callPromising``);
- without JSPI (WebKit, or ``?jspi=0``) the worker registers web/js/glue-sync.js as
  ``ownmem_js`` (synchronous, @noble/*) with glue.js beside it as ``ownmem_js.ASYNC``.
  A method awaited by the event loop (``sync_depth() == 0``: the worker awaits
  ``ownmem.web.api.handle``'s coroutine) awaits glue.js's promise for real: WebCrypto
  where the engine has it.  A method driven by ``ownmem.crypto.run_sync`` (a vault step
  not converted to ``await``) cannot wait, so it takes glue-sync.js's synchronous answer.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyodide.ffi import JsException, jsnull, run_sync, to_js

from ownmem.crypto import sync_depth
from ownmem.crypto.interface import ARGON2_ITERATIONS, ARGON2_MEMORY_KIB, ARGON2_PARALLELISM
from ownmem.errors import AuthenticationFailed, MalformedInput

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


def _bytes(out: Any) -> bytes:
    return bytes(out.to_bytes())


class BrowserProvider:
    """CryptoProvider under Pyodide; see the module docstring for the mapping."""

    name = "browser"

    def __init__(self, glue: Any = None) -> None:
        if glue is None:
            import ownmem_js  # the worker's registerJsModule

            glue = ownmem_js
        self._js = glue
        # glue.js beside glue-sync.js, where the worker has no JSPI (worker.js registration)
        self._async: Any = getattr(glue, "ASYNC", None)
        if self._async is jsnull:
            self._async = None

    async def _do(self, name: str, *args: Any) -> Any:
        """One glue call: awaited (glue.js) when an event loop awaits us and the worker gave us
        glue.js to await; else answered on the spot (JSPI, or glue-sync.js under run_sync)."""
        if self._async is None or sync_depth() > 0:
            return _call(getattr(self._js, name), *args)
        try:
            return await getattr(self._async, name)(*args)
        except JsException as e:
            mapped = _ERRORS.get(e.name)
            if mapped is None:
                raise
            raise mapped(e.message) from None

    def forget_secrets(self) -> None:
        self._js.forgetSecrets()
        if self._async is not None:
            self._async.forgetSecrets()

    async def features(self) -> dict[str, Any]:
        if self._async is None:
            features: dict[str, Any] = _call(self._js.features).to_py()
            return features
        # the awaited steps use glue.js (WebCrypto where present), the synchronous rest glue-sync.js
        awaited: dict[str, Any] = (await self._async.features()).to_py()
        return {**awaited, "jspi": False, "sync_steps": "noble"}

    async def argon2id(self, secret: bytes, salt: bytes, *, memory_kib: int = ARGON2_MEMORY_KIB,
                       iterations: int = ARGON2_ITERATIONS, parallelism: int = ARGON2_PARALLELISM,
                       length: int = 32) -> bytes:
        opts = {"memory_kib": memory_kib, "iterations": iterations, "parallelism": parallelism,
                "length": length}
        return _bytes(await self._do("argon2id", to_js(secret), to_js(salt), to_js(opts)))

    async def hkdf_sha256(self, ikm: bytes, info: bytes, length: int = 32,
                          salt: bytes | None = None) -> bytes:
        return _bytes(await self._do("hkdf_sha256", to_js(ikm), to_js(info), length,
                                     None if salt is None else to_js(salt)))

    async def aes_gcm_encrypt(self, key: bytes, nonce: bytes, plaintext: bytes, aad: bytes) -> bytes:
        return _bytes(await self._do("aes_gcm_encrypt", to_js(key), to_js(nonce), to_js(plaintext), to_js(aad)))

    async def aes_gcm_decrypt(self, key: bytes, nonce: bytes, ciphertext: bytes, aad: bytes) -> bytes:
        return _bytes(await self._do("aes_gcm_decrypt", to_js(key), to_js(nonce), to_js(ciphertext), to_js(aad)))

    async def aes_gcm_decrypt_many(self, keys: Sequence[bytes], nonces: Sequence[bytes],
                                   ciphertexts: Sequence[bytes], aads: Sequence[bytes]) -> list[bytes | None]:
        r = await self._do("aes_gcm_decrypt_many", to_js(list(keys)), to_js(list(nonces)),
                           to_js(list(ciphertexts)), to_js(list(aads)))
        return [_bytes_or_none(x) for x in r]

    async def aes_kw_wrap(self, kek: bytes, key: bytes) -> bytes:
        return _bytes(await self._do("aes_kw_wrap", to_js(kek), to_js(key)))

    async def aes_kw_unwrap(self, kek: bytes, wrapped: bytes) -> bytes:
        return _bytes(await self._do("aes_kw_unwrap", to_js(kek), to_js(wrapped)))

    async def aes_kw_unwrap_many(self, kek: bytes, wrapped: Sequence[bytes]) -> list[bytes | None]:
        return [_bytes_or_none(x) for x in await self._do("aes_kw_unwrap_many", to_js(kek), to_js(list(wrapped)))]

    async def ed25519_public(self, seed: bytes) -> bytes:
        return _bytes(await self._do("ed25519_public", to_js(seed)))

    async def ed25519_sign(self, seed: bytes, message: bytes) -> bytes:
        return _bytes(await self._do("ed25519_sign", to_js(seed), to_js(message)))

    async def ed25519_verify(self, public: bytes, signature: bytes, message: bytes) -> bool:
        return bool(await self._do("ed25519_verify", to_js(public), to_js(signature), to_js(message)))

    async def ed25519_verify_many(self, publics: Sequence[bytes], signatures: Sequence[bytes],
                                  messages: Sequence[bytes]) -> list[bool]:
        r = await self._do("ed25519_verify_many", to_js(list(publics)), to_js(list(signatures)),
                           to_js(list(messages)))
        return [bool(x) for x in r]

    async def x25519_public(self, seed: bytes) -> bytes:
        return _bytes(await self._do("x25519_public", to_js(seed)))

    async def x25519_shared(self, seed: bytes, peer_public: bytes) -> bytes:
        return _bytes(await self._do("x25519_shared", to_js(seed), to_js(peer_public)))

    async def mldsa65_public(self, seed: bytes) -> bytes:
        return _bytes(await self._do("mldsa65_public", to_js(seed)))

    async def mldsa65_sign(self, seed: bytes, message: bytes, context: bytes, *,
                           deterministic: bool = False) -> bytes:
        return _bytes(await self._do("mldsa65_sign", to_js(seed), to_js(message), to_js(context), deterministic))

    async def mldsa65_verify(self, public: bytes, message: bytes, signature: bytes,
                             context: bytes) -> bool:
        return bool(await self._do("mldsa65_verify", to_js(public), to_js(message), to_js(signature),
                                   to_js(context)))
