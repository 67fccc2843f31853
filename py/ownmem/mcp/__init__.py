"""`ownmem mcp`: the keyless SAIHM client as a stdio MCP server (server.py), over the checks
of ownmem.binding and the HTTPS binding of transport.py.  It imports no key material
and no vault."""
