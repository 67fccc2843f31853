"""Tests of `ownmem mcp`: the stdio MCP server."""
