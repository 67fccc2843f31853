"""`ownmem mcp` is keyless (SAIHM "Client conformance" 2; DESIGN.md "Layout": mcp/ imports no key
material and no vault): a fresh interpreter that imports the server and runs a call through
it, framed recall included, has loaded no vault, no key derivation, no crypto provider, and
never made one."""
from __future__ import annotations

import json
import subprocess
import sys

PROBE = r"""
import asyncio, json, sys
import ownmem.mcp.server as server
from ownmem.binding.recall import finish_recall
from ownmem.binding.transport import Answer

session = server.Session.from_env({"SAIHM_ENDPOINT_URL": "http://127.0.0.1:9/saihm", "OWNMEM_MCP_TIMEOUT": "2"})
asyncio.run(session.call("saihm_recall", {}))
r = finish_recall(Answer(200, [{"cellId": "c" * 64, "plaintext": "x", "holderIdHex": "ab", "ownmemTrust": "self",
                                "ownmemAuthorship": {"authorship": "signed", "authorKey": "Y8HonACcWtc",
                                                     "custody": False}}]), query=None, holder_id="ab")
assert r.cells[0].frame is not None
import ownmem.crypto
print(json.dumps({"modules": sorted(sys.modules), "provider_made": ownmem.crypto._provider is not None}))
"""

# What the keyless client may load of ownmem: itself, the client checks (ownmem.binding), the frame profile
# (whose model and the CBOR/provider *interfaces* come along; no implementation, no key).
ALLOWED = {"ownmem", "ownmem.errors", "ownmem.mcp", "ownmem.mcp.server", "ownmem.mcp.tools", "ownmem.mcp.transport",
           "ownmem.binding", *(f"ownmem.binding.{m}" for m in ("fields", "transport", "remember", "recall", "forget",
                                                               "status", "share", "revoke", "governance", "tools")),
           "ownmem.saihm", "ownmem.saihm.errors", "ownmem.aperto", "ownmem.aperto.frame", "ownmem.aperto.model",
           "ownmem.crypto", "ownmem.crypto.interface", "ownmem.crypto.cbor",
           # a recall page's limit and cursor, checked before they are sent (not the ranking)
           "ownmem.recall", "ownmem.recall.pages"}
FORBIDDEN = ("ownmem.vault", "ownmem.aperto.keys", "ownmem.aperto.seal", "ownmem.aperto.container",
             "ownmem.crypto.cpython", "ownmem.crypto.cose", "ownmem.saihm.identity", "ownmem.saihm.cell",
             "ownmem.saihm.receipt", "ownmem.web", "ownmem.cli", "ownmem.passphrase", "nacl", "argon2", "dilithium_py",
             "ownmem.recall.ranking", "ownmem.recall.words", "snowballstemmer")


def test_the_mcp_server_loads_no_vault_no_keys_and_no_crypto_provider() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    modules = set(seen["modules"])
    ours = {m for m in modules if m == "ownmem" or m.startswith("ownmem.")}
    assert ours <= ALLOWED, ours - ALLOWED
    assert not [m for m in modules if m.startswith(FORBIDDEN)]
    assert seen["provider_made"] is False
    assert {"ownmem.mcp.server", "ownmem.binding.tools", "ownmem.aperto.frame"} <= ours    # the probe is real
