"""Crypto for ownmem: one async provider interface, deterministic CBOR and COSE.

``provider()`` returns the provider for this runtime (CPython here; the browser
installs its own with ``set_provider``).  ``run_sync`` drives a coroutine that
never suspends, which is how CPython code calls the async format functions
without paying for an event loop on every object.  ``sync_depth()`` says whether such a
drive is under way: the browser provider then answers from its synchronous JavaScript, as
a coroutine driven by ``send(None)`` cannot wait for a promise (docs/web.md "Without JSPI").
"""
from __future__ import annotations

import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

from ownmem.crypto.interface import CryptoProvider, random_bytes, sha256

__all__ = ["CryptoProvider", "provider", "random_bytes", "run_sync", "set_provider", "sha256", "sync_depth"]

T = TypeVar("T")

_provider: CryptoProvider | None = None
_depth = 0   # run_sync drives under way (nested: a sync wrapper called from an awaited path)


def provider() -> CryptoProvider:
    global _provider
    if _provider is None:
        # CPython only: the browser installs its own provider first (set_provider), and its
        # Pyodide has neither cryptography nor PyNaCl, which cpython.py imports
        from ownmem.crypto.cpython import CPythonProvider

        _provider = CPythonProvider()
    return _provider


def set_provider(p: CryptoProvider) -> None:
    global _provider
    _provider = p


def sync_depth() -> int:
    """How many ``run_sync`` drives enclose the caller (0: awaited by an event loop, or none)."""
    return _depth


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion, provided it never has to wait."""
    global _depth
    _depth += 1
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    finally:
        _depth -= 1
    coro.close()
    raise RuntimeError("operation suspended: this provider needs an event loop")


if sys.platform == "emscripten":  # pragma: no cover - exercised by the browser tests
    # Under Pyodide the browser provider blocks on each WebCrypto promise itself (JSPI),
    # so its coroutines never suspend and the plain driver above serves them; a bare
    # JavaScript promise (fetch, IndexedDB) is waited for through JSPI here.  Where the
    # engine has no JSPI (WebKit) the worker's JS module answers synchronously
    # (web/js/glue-sync.js): a value that is not a promise is the answer itself; the
    # operations the worker awaits there never come through here (ownmem.web.provider).
    import inspect

    from pyodide.ffi import run_sync as _jspi_run_sync

    _drive = run_sync

    def run_sync(coro: Coroutine[Any, Any, T]) -> T:  # type: ignore[misc]
        if inspect.iscoroutine(coro):
            return _drive(coro)
        if not hasattr(coro, "then"):
            return coro  # type: ignore[return-value]
        return _jspi_run_sync(coro)  # type: ignore[no-any-return]
