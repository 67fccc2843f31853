"""Remember-then-recall round trips through a real MCP server over stdio, as an MCP host
drives one: the SDK's ClientSession launching the server as a subprocess.

Used by area `agent` for ownmem (`ownmem mcp` → `ownmem agent`) and for its anchor, the
ApertoMemory reference's MCP adapter (`python -m amem.mcp_server`), in the same run.
Each round trip stores one new memory and recalls it by a word only it holds; the
recall's text must contain the stored content, so a fast wrong answer cannot pass.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client


@dataclass(frozen=True, slots=True)
class McpSide:
    """One MCP server and how to ask it to remember and recall."""

    label: str
    command: str
    args: tuple[str, ...]
    env: dict[str, str]
    remember: Callable[[str], tuple[str, dict[str, Any]]]   # content -> (tool, arguments)
    recall: Callable[[str], tuple[str, dict[str, Any]]]     # query -> (tool, arguments)


def _text(result: Any) -> str:
    parts = [getattr(c, "text", "") for c in result.content]
    if result.structured_content is not None:
        parts.append(repr(result.structured_content))
    return "\n".join(parts)


def round_trips(side: McpSide, reps: int, *, warmup: int = 3, timeout: float = 600.0) -> list[float]:
    """Seconds per round trip, ``reps`` of them after ``warmup`` untimed ones, one session."""
    params = StdioServerParameters(command=side.command, args=list(side.args), env=side.env)

    async def go() -> list[float]:
        out: list[float] = []
        with open("/dev/null", "w") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    with anyio.fail_after(timeout):
                        for i in range(warmup + reps):
                            word = f"zq{i:05d}{time.monotonic_ns() % 100000:05d}x"
                            content = f"benchmark memory {word}: the user prefers tea after noon"
                            tool, args = side.remember(content)
                            t0 = time.perf_counter()
                            r1 = await s.call_tool(tool, args)
                            tool, args = side.recall(word)
                            r2 = await s.call_tool(tool, args)
                            t1 = time.perf_counter()
                            if r1.is_error or r2.is_error or content not in _text(r2):
                                raise RuntimeError(f"{side.label}: round trip {i} did not recall what it stored: "
                                                   f"{_text(r1)[:200]!r} / {_text(r2)[:200]!r}")
                            if i >= warmup:
                                out.append(t1 - t0)
        return out
    return anyio.run(go)
