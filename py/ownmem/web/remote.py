"""The sync client's HTTP under Pyodide: the same Remote, speaking through fetch.

Only ``Remote._exchange`` touches the network; here it awaits ``fetch`` (through JSPI,
like every other wait in the browser) and hands back the status and the body.  Everything
else -- the wire messages, their parsing, the refusals -- is the CPython client's own.
"""
from __future__ import annotations

from .. import syncwire as W
from ..crypto import run_sync
from ..errors import SyncError, WireError
from ..vault.sync import Remote


class FetchRemote(Remote):
    def __init__(self, base_url: str, name: str) -> None:
        super().__init__(base_url, name, client=None)

    def _exchange(self, method: str, url: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        import js
        from pyodide.ffi import to_js

        init = to_js({"method": method, "headers": headers, "body": to_js(body) if body is not None else None,
                      "redirect": "error", "cache": "no-store"}, dict_converter=js.Object.fromEntries)
        try:
            resp = run_sync(js.fetch(url, init))
            declared = resp.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > W.MAX_ANSWER:
                raise WireError(f"the server's answer is over {W.MAX_ANSWER} bytes")
            data = bytes(run_sync(resp.arrayBuffer()).to_bytes())
        except WireError:
            raise
        except Exception:  # noqa: BLE001 - a JS TypeError: offline, refused, CORS, a redirect
            raise SyncError(f"cannot reach the server at {self.base}") from None
        if len(data) > W.MAX_ANSWER:
            raise WireError(f"the server's answer is over {W.MAX_ANSWER} bytes")
        return int(resp.status), data
