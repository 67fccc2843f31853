"""`ownmem staged list [--json] | confirm ID | discard ID`: the person's side of staged agent writes
(ownmem.usecases.staged; uomp-draft-00 "20.4 Agent Write Restrictions") and of the agents' staged
forget and share requests (ownmem.usecases.requests; issue 19); what confirm and discard do is
ownmem.usecases.answers, shared with the PWA.

A write: confirm seals an owner-signed confirmation record; discard forgets the staged memory.
A request: confirm does what it asks here (the forget, or the share through vault/sharing.py)
and seals the confirmation record; discard forgets the request.  Everything reaches the other
devices and the agent service with the next `ownmem sync` (a share is offered on the server at once).
"""
from __future__ import annotations

import argparse
import json
from typing import Any

from ownmem.cli.common import unlock as _unlock, when as _when
from ownmem.termsafe import visible
from ownmem.usecases import answers, requests as agent_requests
from ownmem.usecases.authors import AgentKeys
from ownmem.usecases.staged import StagedWrite, pending
from ownmem.vault.sync import syncer_for


def cmd_list(args: argparse.Namespace) -> int:
    v = _unlock(args)
    entries = v.open_all(allow_unverified=True).entries
    keys = AgentKeys(v)
    items = pending(entries, keys)
    asks = agent_requests.pending(entries, keys)
    by_id = {e.id: e for e in entries}
    if args.json:
        print(json.dumps([{**s.entry.to_json(), "agent_id": s.agent_id} for s in items]
                         + [{**agent_requests.to_json(r, by_id), "request": True} for r in asks], indent=2))
        return 0
    if not items and not asks:
        print("no staged agent writes or requests")
    for s in items:
        o = s.entry.opened
        print(f"{o.object_id.hex()[:12]}  {visible(s.agent_id):<20} {_when(o.created)}  "
              f"{visible(o.content.replace(chr(10), ' ')[:80])}  ({o.trust.value})")
    for r in asks:
        print(f"{r.id.hex()[:12]}  {visible(r.agent_id):<20} {_when(r.created)}  asks to "
              f"{visible(agent_requests.describe(r, by_id))}")
    return 0


def cmd_confirm(args: argparse.Namespace) -> int:
    v = _unlock(args)
    listing = v.open_all(allow_unverified=True)
    w = answers.find(v, args.id, listing)
    done = answers.confirm(v, w, listing.entries, lambda: syncer_for(v))
    if isinstance(w, StagedWrite):
        print(f"confirmed {w.entry.id.hex()[:12]} ({w.agent_id}); run `ownmem sync` to tell your other devices")
    elif done.share is not None:
        print(f"confirmed {w.id.hex()[:12]} ({w.agent_id}): shared as contract {done.share.contract_id.hex()}, "
              "offered to each grantee; run `ownmem sync` to tell your other devices")
    else:
        print(f"confirmed {w.id.hex()[:12]} ({w.agent_id}): erased {done.erased} object(s) here; "
              "run `ownmem sync` to erase them everywhere")
    return 0


def cmd_discard(args: argparse.Namespace) -> int:
    v = _unlock(args)
    w = answers.find(v, args.id, v.open_all(allow_unverified=True))
    answers.discard(v, w)
    if isinstance(w, StagedWrite):
        print(f"discarded {w.entry.id.hex()[:12]} ({w.agent_id}); run `ownmem sync` to erase it everywhere")
    else:
        print(f"discarded the {w.kind} request {w.id.hex()[:12]} ({w.agent_id}): nothing was done; "
              "run `ownmem sync` to drop it everywhere")
    return 0


def register(sub: Any) -> None:
    st = sub.add_parser("staged",
                        help="agent writes, forgets and shares waiting for you: list, confirm or discard them")
    ssub = st.add_subparsers(dest="staged_cmd", required=True, metavar="ACTION")
    ls = ssub.add_parser("list", help="staged agent writes and requests not yet confirmed")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(fn=cmd_list)
    cf = ssub.add_parser("confirm", help="accept a staged write as your memory (it stays the agent's, signed by "
                                         "it), or do what a staged request asks (forget, share)")
    cf.add_argument("id")
    cf.set_defaults(fn=cmd_confirm)
    dc = ssub.add_parser("discard", help="erase a staged write, or drop a staged request")
    dc.add_argument("id")
    dc.set_defaults(fn=cmd_discard)
