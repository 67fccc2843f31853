"""`ownmem agent register uom.json`: validate, verify and keep an agent's manifest (uomp-draft-00
"6. Agent Manifest: `uom.json`", "16.3 Verification Process"; ownmem.uomp.manifest).

Shows what the agent asks for, its retention level (red for long-term or none declared) and its
publisher status ("unverified publisher" per 16.4), then stores the manifest in the vault folder.
Needs no passphrase: a manifest is public, the vault's keys are not touched.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ownmem.cli.common import folder as _folder
from ownmem.errors import VaultError
from ownmem.termsafe import raw, visible
from ownmem.uomp.manifest import ScopeRequest
from ownmem.uomp.registered import Registered, register_manifest
from ownmem.vault import Vault

RED, RESET = "\033[31m", "\033[0m"


def _scope_line(kind: str, s: ScopeRequest | None) -> str:
    if s is None:
        return f"  {kind}: nothing"
    parts = [f"tags {', '.join(s.tags) or '-'}", f"keys {', '.join(s.keys) or '-'}"]
    if s.deny_tags or s.deny_keys:
        parts.append(f"denies {', '.join(s.deny_tags + s.deny_keys)}")
    if s.allowed_fields is not None:
        parts.append(f"fields {', '.join(s.allowed_fields)}")
    why = f"  ({s.description})" if s.description else ""
    return visible(f"  {kind}: " + "; ".join(parts) + why)


def render(r: Registered, *, color: bool) -> str:
    m = r.manifest
    a = m.agent
    # every field is the manifest author's text: made visible before our own colour is added
    lines = [visible(f"{a.name} ({a.id} {a.version})" + (f" by {a.publisher}" if a.publisher else "")),
             _scope_line("read", m.requested_scopes.read), _scope_line("write", m.requested_scopes.write)]
    ret = visible(("WARNING: " if r.retention.warning else "") + r.retention.text)
    lines.append("  retention: " + (f"{RED}{ret}{RESET}" if color and r.retention.warning else ret))
    pub = visible(r.status.summary())
    lines.append("  publisher: " + (pub if r.status.verified or not color else f"{RED}{pub}{RESET}"))
    for res in r.status.results:
        if res.outcome != "absent":
            lines.append(visible(f"    {res.method}: {res.outcome}" + (f" {res.signer}" if res.signer else "")
                                 + (f" ({res.detail})" if res.detail else "")))
    return "\n".join(lines)


def as_json(r: Registered) -> dict[str, Any]:
    return {"agent_id": r.manifest.agent.id, "retention": r.retention.level.name.lower(),
            "retention_warning": r.retention.warning, "publisher_verified": r.status.verified,
            "methods": [{"method": x.method, "outcome": x.outcome, "signer": x.signer, "detail": x.detail}
                        for x in r.status.results]}


def cmd_register(args: argparse.Namespace) -> int:
    v = Vault(_folder(args))
    if not v.exists():
        raise VaultError(f"no vault at {v.folder} (create one with `ownmem init`)")
    r = register_manifest(v.folder, args.manifest)
    if args.json:
        print(json.dumps(as_json(r), indent=2))
    else:
        # render made each field visible; the raw stream keeps its colour
        print(render(r, color=sys.stdout.isatty()), file=raw(sys.stdout))
        print(f"registered {visible(r.manifest.agent.id)}", file=sys.stderr)
    return 0


def register(asub: Any) -> None:
    """Called with the `agent` subcommand's subparsers (py/ownmem/cli/agent.py)."""
    rg = asub.add_parser("register", help="validate and verify an agent's uom.json and keep it in the vault")
    rg.add_argument("manifest", help="path of uom.json (or of the agent's package root)")
    rg.add_argument("--json", action="store_true")
    rg.set_defaults(fn=cmd_register)
