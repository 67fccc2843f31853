"""A remote MCP host as the tests drive it: the official SDK's Streamable HTTP client with its
OAuth client (OAuthClientProvider), talking JSON lines with the test that runs it.

    python -m tests.mcp.oauth_client MCP_URL CA_FILE REDIRECT_URI [CIMD_URL]

    -> {"authorize": URL}            the SDK's redirect: the test approves it in a browser ...
    <- {"callback": URL}             ... and hands back where the consent page sent it
    -> {"connected": true, "tools": [{"name", "read_only", "destructive"}, ...]}
    <- {"call": TOOL, "args": {...}}
    -> {"result": {"error", "text", "structured", "seconds"}}  or {"failed": WHY, "seconds"}
    <- {"tokens": true}              -> {"tokens": {"access_token", "refresh_token", ...}}
    <- {"quit": true}

Registration is by the Client ID Metadata Document at CIMD_URL when given, else by Dynamic
Client Registration.  After the first consent, a second request for consent (the host was cut
off and the SDK starts over) is refused here: the call fails, which is what the tests look for.
"""
from __future__ import annotations

import json
import ssl
import sys
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken


class Memory:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def say(doc: dict[str, Any]) -> None:
    print(json.dumps(doc), flush=True)


async def hear() -> dict[str, Any]:
    line = await anyio.to_thread.run_sync(sys.stdin.readline)
    if not line:
        raise SystemExit(0)
    doc = json.loads(line)
    assert isinstance(doc, dict)
    return doc


async def main(mcp_url: str, ca_file: str, redirect_uri: str, cimd_url: str | None) -> None:
    storage = Memory()
    consents = [0]
    callback: dict[str, AuthorizationCodeResult] = {}

    async def redirect(url: str) -> None:
        consents[0] += 1
        if consents[0] > 1:
            raise RuntimeError("the server asked for consent again: this host's grant is gone")
        say({"authorize": url})
        back = (await hear())["callback"]
        q = parse_qs(urlsplit(back).query)
        if "error" in q:
            raise RuntimeError(f"consent refused: {q['error'][0]}")
        callback["r"] = AuthorizationCodeResult(code=q["code"][0], state=q.get("state", [None])[0],
                                                iss=q.get("iss", [None])[0])

    async def code() -> AuthorizationCodeResult:
        return callback.pop("r")

    meta = OAuthClientMetadata(client_name="Test Assistant", redirect_uris=[redirect_uri],  # type: ignore[list-item]
                               grant_types=["authorization_code", "refresh_token"], response_types=["code"],
                               token_endpoint_auth_method="none")
    auth = OAuthClientProvider(mcp_url, meta, storage, redirect_handler=redirect, callback_handler=code,
                               client_metadata_url=cimd_url)
    tls = ssl.create_default_context(cafile=ca_file)
    async with httpx2.AsyncClient(auth=auth, verify=tls, timeout=60) as http, \
            streamable_http_client(mcp_url, http_client=http) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        tools = await s.list_tools()
        hints = [(t.name, t.annotations) for t in tools.tools]
        say({"connected": True, "tools": [{"name": n, "read_only": bool(a and a.read_only_hint),
                                           "destructive": bool(a and a.destructive_hint)} for n, a in hints]})
        while True:
            cmd = await hear()
            if cmd.get("quit"):
                return
            if cmd.get("tokens"):
                say({"tokens": storage.tokens.model_dump(mode="json") if storage.tokens else None})
                continue
            t0 = time.monotonic()
            try:
                r = await s.call_tool(cmd["call"], cmd.get("args") or {}, read_timeout_seconds=20)
            except Exception as e:  # noqa: BLE001 - the test reads why the call failed
                say({"failed": f"{type(e).__name__}: {e}"[:500], "seconds": time.monotonic() - t0})
                continue
            text = "\n".join(getattr(c, "text", "") for c in r.content)
            say({"result": {"error": r.is_error, "text": text, "structured": r.structured_content,
                            "seconds": time.monotonic() - t0}})


if __name__ == "__main__":
    a = sys.argv[1:]
    try:
        anyio.run(main, a[0], a[1], a[2], a[3] if len(a) > 3 else None)
    except BaseException as e:
        if not isinstance(e, SystemExit):
            leaves = [e]
            while any(isinstance(x, BaseExceptionGroup) for x in leaves):
                leaves = [y for x in leaves for y in (x.exceptions if isinstance(x, BaseExceptionGroup) else [x])]
            say({"fatal": "; ".join(f"{type(x).__name__}: {x}" for x in leaves)[:1000]})
            raise
