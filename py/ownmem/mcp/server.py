"""`ownmem mcp`: a keyless SAIHM client served to an MCP host over stdio (DESIGN.md "Processes"
4, "Agent access"; SAIHM "Client conformance").

    MCP host --stdio--> Server (official MCP SDK, low-level) --> Session.call(tool, arguments)
                                                                   prepare  (ownmem.binding)
                                                                   send     (ownmem.mcp.transport)
                                                                   finish   (ownmem.binding)
                        <-- CallToolResult: the report as text, the result as structuredContent

Configured only by its environment: SAIHM_ENDPOINT_URL, SAIHM_AUTH_HEADER (the Authorization
value, sent verbatim, never echoed) and, for tests, OWNMEM_MCP_TIMEOUT (seconds, default 30).
It holds no key, opens no vault and performs no cryptography but TLS: nothing here imports
ownmem.vault, ownmem.aperto.keys or a crypto provider (tests/mcp/test_keyless_boundary.py).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from ownmem import __version__
from ownmem.binding.status import StatusResult
from ownmem.binding.tools import TOOLS, prepare
from ownmem.binding.transport import DEFAULT_TIMEOUT, Answer, Call, Failure, Kind, Result
from ownmem.mcp.tools import BOOTSTRAP, BOOTSTRAP_DESCRIPTION, BOOTSTRAP_TEXT, SPECS, ToolSpec
from ownmem.mcp.transport import ConfigRefused, Endpoint, Transport, credential

TIMEOUT_RANGE = (0.1, 300.0)


class Sender(Protocol):
    """What carries a call to the operator: Transport (HTTPS, `ownmem mcp`) or, in the agent
    service itself, the remote door's in-process dispatch (ownmem.mcp.remote.InProcess)."""

    async def send(self, call: Call) -> Answer | Failure: ...


class Session:
    """One MCP connection: the operator it reaches, and the caller's holderId once learned."""

    def __init__(self, transport: Sender | None, config_error: str | None = None) -> None:
        self.transport = transport
        self.config_error = config_error
        self.holder_id: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Session:
        try:
            endpoint = Endpoint.parse(env.get("SAIHM_ENDPOINT_URL"))
            auth = credential(env.get("SAIHM_AUTH_HEADER"))
            timeout = _timeout(env.get("OWNMEM_MCP_TIMEOUT"))
        except ConfigRefused as e:
            return cls(None, str(e))
        return cls(Transport(endpoint, auth, timeout=timeout))

    async def _send(self, tool: str, args: Mapping[str, object]) -> Result:
        prepared = prepare(tool, args, holder_id=self.holder_id)
        if prepared.call is None:
            return prepared.refused_result()
        if self.transport is None:
            return prepared.finish(Failure(Kind.UNCONFIGURED, detail=self.config_error))
        result = prepared.finish(await self.transport.send(prepared.call))
        if isinstance(result, StatusResult) and result.ok:
            self.holder_id = result.holder_id      # None again if the operator stops reporting it
        return result

    async def call(self, tool: str, args: Mapping[str, object]) -> Result:
        # The conformance list: a client SHOULD call saihm_status before it reports a recall,
        # because it marks as shared every cell whose owner it cannot compare with the caller.
        if tool == "saihm_recall" and self.holder_id is None and self.transport is not None:
            await self._send("saihm_status", {})
        return await self._send(tool, args)


def _timeout(value: str | None) -> float:
    if not value:
        return DEFAULT_TIMEOUT
    try:
        t = float(value)
    except ValueError:
        raise ConfigRefused("OWNMEM_MCP_TIMEOUT is not a number of seconds") from None
    if not TIMEOUT_RANGE[0] <= t <= TIMEOUT_RANGE[1]:
        raise ConfigRefused(f"OWNMEM_MCP_TIMEOUT must be between {TIMEOUT_RANGE[0]:g} and {TIMEOUT_RANGE[1]:g}")
    return t


def _tool(spec: ToolSpec) -> types.Tool:
    h = spec.hints
    return types.Tool(name=spec.name, title=spec.title, description=spec.description,
                      input_schema=spec.input_schema,
                      annotations=types.ToolAnnotations(title=spec.title, read_only_hint=h.read_only,
                                                        destructive_hint=h.destructive,
                                                        idempotent_hint=h.idempotent,
                                                        open_world_hint=h.open_world))


def build_server(session: Session | Callable[[ServerRequestContext[Any]], Session]) -> Server[Any]:
    """The eight tools and the session prompt.  ``session``: the one of this stdio connection, or
    (the remote door, ownmem.mcp.remote) a function giving the caller's for each request."""
    def session_of(ctx: ServerRequestContext[Any]) -> Session:
        return session if isinstance(session, Session) else session(ctx)

    async def list_tools(ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_tool(s) for s in SPECS])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in TOOLS:
            raise MCPError(types.INVALID_PARAMS, "unknown tool: this server has exactly the eight SAIHM tools")
        try:
            result = await session_of(ctx).call(params.name, params.arguments or {})
        except Exception as e:  # noqa: BLE001 - the type only, never its message: it could quote anything
            text = (f"{params.name} FAILED: unexpected error in the client ({type(e).__name__}); "
                    "the operator may or may not have acted.")
            return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
        return types.CallToolResult(content=[types.TextContent(text=result.report())],
                                    structured_content=result.to_json(), is_error=not result.ok)

    async def list_prompts(ctx: ServerRequestContext[Any],
                           params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(name=BOOTSTRAP, description=BOOTSTRAP_DESCRIPTION)])

    async def get_prompt(ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != BOOTSTRAP:
            raise MCPError(types.INVALID_PARAMS, f"unknown prompt: the one prompt is {BOOTSTRAP}")
        return types.GetPromptResult(description=BOOTSTRAP_DESCRIPTION, messages=[
            types.PromptMessage(role="user", content=types.TextContent(text=BOOTSTRAP_TEXT))])

    return Server("ownmem-saihm", version=__version__, title="ownmem SAIHM client",
                  instructions=BOOTSTRAP_TEXT, on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_prompts=list_prompts, on_get_prompt=get_prompt)


async def serve(env: Mapping[str, str]) -> None:
    session = Session.from_env(env)
    if session.config_error:
        # stderr reaches the host's log, never the model; the message quotes no value either way
        print(f"ownmem mcp: {session.config_error}; every tool call will say so", file=sys.stderr, flush=True)
    server = build_server(session)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> int:
    anyio.run(serve, dict(os.environ))
    return 0
