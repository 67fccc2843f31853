"""The sync client's HTTP under Pyodide: the same Remote, speaking through fetch.

Only ``Remote._req`` touches the network; here it awaits ``fetch`` (through JSPI,
like every other wait in the browser) and hands back a response with the three
things Remote reads: ``status_code``, ``content`` and ``json()``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..crypto import run_sync
from ..errors import SyncError
from ..vault.sync import Remote, check_status


@dataclass(frozen=True, slots=True)
class FetchResponse:
    status_code: int
    content: bytes
    reason_phrase: str

    def json(self) -> Any:
        return json.loads(self.content)


class FetchRemote(Remote):
    def __init__(self, base_url: str, name: str) -> None:
        super().__init__(base_url, name, client=None)

    def _req(self, method: str, url: str, *, auth: bool = False, **kw: Any) -> FetchResponse:  # type: ignore[override]
        import js
        from pyodide.ffi import to_js

        headers = dict(kw.pop("headers", {}))
        body: Any = None
        if "json" in kw:
            body = json.dumps(kw.pop("json"))
            headers["Content-Type"] = "application/json"
        elif "content" in kw:
            body = to_js(kw.pop("content"))
        if auth:
            headers["Authorization"] = f"Bearer {self.token}"
        init = to_js({"method": method, "headers": headers, "body": body, "redirect": "error",
                      "cache": "no-store"}, dict_converter=js.Object.fromEntries)
        try:
            resp = run_sync(js.fetch(url, init))
            data = bytes(run_sync(resp.arrayBuffer()).to_bytes())
        except Exception:  # noqa: BLE001 - a JS TypeError: offline, refused, CORS
            raise SyncError(f"cannot reach the server at {self.base}") from None
        r = FetchResponse(int(resp.status), data, str(resp.statusText))
        check_status(r.status_code, r.content, r.reason_phrase)
        return r
