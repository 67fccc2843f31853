"""The sync client's HTTP under Pyodide: the same Remote, speaking through fetch.

Only ``Remote._exchange`` touches the network; here it awaits ``fetch`` (through JSPI,
like every other wait in the browser) and hands back the status and the body; where the
engine has no JSPI, it makes one synchronous XMLHttpRequest instead (a worker may).  Everything
else -- the wire messages, their parsing, the refusals -- is the CPython client's own.
"""
from __future__ import annotations

from typing import Any

from ownmem.crypto import run_sync
from ownmem.errors import SyncError, WireError
from ownmem.vault.remote import Remote
from ownmem.wire.limits import MAX_ANSWER

# seconds one exchange may take before it counts as a failed sync (the CLI's read timeout): a
# server that accepts and never answers must not hold the worker, and with it the app, forever
TIMEOUT_S = 60


class FetchRemote(Remote):
    def __init__(self, base_url: str, name: str) -> None:
        super().__init__(base_url, name, client=None)

    def _exchange(self, method: str, url: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        # Pyodide-only modules (the worker's js, its registerJsModule): this module imports under CPython
        import js
        import ownmem_js
        from pyodide.ffi import to_js

        if not getattr(ownmem_js, "JSPI", True):
            return self._exchange_sync(ownmem_js, method, url, body, headers)
        init = to_js({"method": method, "headers": headers, "body": to_js(body) if body is not None else None,
                      "redirect": "error", "cache": "no-store", "signal": js.AbortSignal.timeout(TIMEOUT_S * 1000)},
                     dict_converter=js.Object.fromEntries)
        try:
            resp = run_sync(js.fetch(url, init))
            declared = resp.headers.get("content-length")     # JS null (not None) when absent: a stream
            if isinstance(declared, str) and declared.isdigit() and int(declared) > MAX_ANSWER:
                raise WireError(f"the server's answer is over {MAX_ANSWER} bytes")
            data = bytes(run_sync(resp.arrayBuffer()).to_bytes())
        except WireError:
            raise
        except Exception:  # noqa: BLE001 - a JS TypeError: offline, refused, CORS, a redirect; a timeout
            raise SyncError(f"cannot reach the server at {self.base}") from None
        if len(data) > MAX_ANSWER:
            raise WireError(f"the server's answer is over {MAX_ANSWER} bytes")
        return int(resp.status), data

    def _exchange_sync(self, glue: Any, method: str, url: str, body: bytes | None,
                       headers: dict[str, str]) -> tuple[int, bytes]:
        """Without JSPI: one synchronous XMLHttpRequest (web/js/glue-sync.js ``http``)."""
        # Pyodide-only modules, as above
        import js
        from pyodide.ffi import to_js

        try:
            resp = glue.http(method, url, to_js(headers, dict_converter=js.Object.fromEntries),
                             to_js(body) if body is not None else None, TIMEOUT_S * 1000)
            data = bytes(resp.body.to_bytes())
        except Exception:  # noqa: BLE001 - a JS NetworkError or TypeError: offline, refused, a redirect, a timeout
            raise SyncError(f"cannot reach the server at {self.base}") from None
        if len(data) > MAX_ANSWER:
            raise WireError(f"the server's answer is over {MAX_ANSWER} bytes")
        return int(resp.status), data
