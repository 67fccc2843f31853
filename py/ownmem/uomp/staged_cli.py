"""`ownmem staged list [--json] | confirm ID | discard ID`: the person's side of staged agent writes
(ownmem.uomp.staging; uomp-draft-00 "20.4 Agent Write Restrictions").

Confirm seals an owner-signed confirmation record; discard forgets the staged memory.  Both reach
the other devices and the agent service with the next `ownmem sync`.
"""
from __future__ import annotations

import argparse
import json
from typing import Any

from ..cli import _unlock, _when
from ..errors import NotFound
from ..termsafe import visible
from ..vault.vault import UnlockedVault
from . import staging


def _find(v: UnlockedVault, ident: str) -> staging.StagedWrite:
    listing = v.open_all(allow_unverified=True)
    e = v.resolve(ident, listing)
    for s in staging.pending(listing.entries, staging.AgentKeys(v)):
        if s.entry.id == e.id:
            return s
    raise NotFound(f"{e.id.hex()[:12]} is not a staged agent write waiting for you")


def cmd_list(args: argparse.Namespace) -> int:
    v = _unlock(args)
    items = staging.pending(v.open_all(allow_unverified=True).entries, staging.AgentKeys(v))
    if args.json:
        print(json.dumps([{**s.entry.to_json(), "agent_id": s.agent_id} for s in items], indent=2))
        return 0
    if not items:
        print("no staged agent writes")
    for s in items:
        o = s.entry.opened
        print(f"{o.object_id.hex()[:12]}  {visible(s.agent_id):<20} {_when(o.created)}  "
              f"{visible(o.content.replace(chr(10), ' ')[:80])}  ({o.trust.value})")
    return 0


def cmd_confirm(args: argparse.Namespace) -> int:
    v = _unlock(args)
    s = _find(v, args.id)
    v.add(f"(confirms the staged write {s.entry.id.hex()[:12]} of agent {s.agent_id})",
          extensions={"uomp": {"confirms": s.entry.id.hex()}})
    print(f"confirmed {s.entry.id.hex()[:12]} ({s.agent_id}); run `ownmem sync` to tell your other devices")
    return 0


def cmd_discard(args: argparse.Namespace) -> int:
    v = _unlock(args)
    s = _find(v, args.id)
    v.forget(s.entry.id.hex())
    print(f"discarded {s.entry.id.hex()[:12]} ({s.agent_id}); run `ownmem sync` to erase it everywhere")
    return 0


def register(sub: Any) -> None:
    st = sub.add_parser("staged", help="agent writes waiting for you: list, confirm or discard them")
    ssub = st.add_subparsers(dest="staged_cmd", required=True, metavar="ACTION")
    ls = ssub.add_parser("list", help="staged agent writes not yet confirmed")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(fn=cmd_list)
    cf = ssub.add_parser("confirm", help="accept a staged write as your memory (it stays the agent's, signed by it)")
    cf.add_argument("id")
    cf.set_defaults(fn=cmd_confirm)
    dc = ssub.add_parser("discard", help="erase a staged write")
    dc.add_argument("id")
    dc.set_defaults(fn=cmd_discard)
