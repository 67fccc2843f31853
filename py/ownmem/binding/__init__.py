"""The SAIHM binding client: the keyless client's checks (SAIHM custodial profile: "HTTPS
binding", "Tool surface (MCP binding)", each tool's "Client checks", "Result identifiers",
"Client conformance").

    agent --MCP tool call--> tools.prepare(tool, arguments) --Call--> HTTP layer (ownmem.mcp.transport)
                                  | refused before sending          | Reply bytes -> transport.interpret()
                                  v                                 v
                             Failure(REFUSED) -----------> finish(Answer | Failure) -> a typed result:
                                                           .report()  the text the agent reads
                                                           .to_json() the structured result

One module per tool's checks (remember, recall, forget, status, share, revoke, governance),
the field rules they share (fields.py), the request and the judging of an answer (transport.py),
the one entry point (tools.py).  No I/O, no clock, no key material; a service-layer package
because its only user is `ownmem mcp`, never the pure SAIHM core.

Whatever answers at the endpoint is treated as hostile input at every field (house style 15): a
value is used only after it parsed as the type the spec gives it, and printed only after it
passed the rule for printing:

* result identifiers (cellId, contractId, proposalId, receiptId, holder ids): a JSON string
  of 1..256 characters in U+0021..U+007E, never truncated (``ident``);
* every other operator string: no control character, line or paragraph separator, or
  bidirectional control (``printable``); recall plaintext alone is exempt, and is framed
  instead, every line of it behind ``BODY`` so that none can start a report entry;
* numbers: a JSON number or a decimal string; booleans: true/false/"true"/"false"/1/0/"1"/"0";
* a field that is absent or unusable is left out, never shown as a placeholder.

Where ownmem's own operator adds its trust labels to a recalled cell (``ownmemTrust``,
``ownmemAuthorship``; docs/decisions.md), the cell is framed in the bytes of the ApertoMemory
Context-Frame Profile v0 (``ownmem.aperto.frame``).
"""
