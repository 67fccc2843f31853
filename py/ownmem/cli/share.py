"""`ownmem share ...` and `ownmem whoami`: sharing memories with another person's vault
(SAIHM "Sharing contracts"; ownmem.vault.sharing does the work).

    ownmem whoami                       this vault's holderId (give it to whoever shares with you)
    ownmem share id                     the same
    ownmem share create --to HOLDERID[,HOLDERID..] --memory ID [--memory ID..]
                        --mode temporary|permanent|syndicate [--expires EPOCH]
    ownmem share list [--json]          contracts offered by me and to me, with their state
    ownmem share accept|decline|withdraw CONTRACT
    ownmem share revoke CONTRACT
    ownmem share received [--json]      the memories shared with me, marked with their owner

Another person's text reaches this terminal only after it verified against that person's
published keys, and with every control character replaced: it cannot move the cursor,
recolour the screen or forge a line of this output.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from ownmem.cli.common import unlock as _unlock
from ownmem.errors import OwnmemError
from ownmem.termsafe import visible
from ownmem.vault import sharing
from ownmem.vault.sharing import Offers, ShareRefused, ShareView, offers as list_offers, publish_holder
from ownmem.vault.sync import Syncer, syncer_for

MORE_OFFERS = ("the server listed only part of the contracts (active ones first, then the newest): "
               "decline offers you do not want to see the rest")


def _syncer(args: argparse.Namespace) -> Syncer:
    return syncer_for(_unlock(args))


def _safe(text: str) -> str:
    """Another holder's text as one line, its controls shown (termsafe)."""
    return visible(text.replace("\n", " "))


def _contract_id(s: Syncer, text: str, offers: Offers | None = None) -> bytes:
    """A contractId, or a unique prefix of one this vault offered or was offered."""
    t = text.strip().lower()
    if len(t) == 64:
        try:
            return bytes.fromhex(t)
        except ValueError:
            pass
    if not t or any(ch not in "0123456789abcdef" for ch in t):
        raise ShareRefused(f"a contract id is hex digits, not {text!r}")
    got = offers or list_offers(s)
    ids = {v.contract_id for v in (*got.offered, *got.received) if v.contract_id.hex().startswith(t)}
    if len(ids) != 1:
        raise ShareRefused(f"no contract with id {text!r}" if not ids else f"contract id {text!r} is ambiguous")
    return ids.pop()


def _expiry(c: Any) -> str:
    return "no expiry" if c.expires_at == 0 else "expires " + time.strftime("%Y-%m-%d %H:%M",
                                                                             time.localtime(c.expires_at))


def _view_state(v: ShareView) -> str:
    return "revoked" if v.revoked else "expired" if v.expired else v.state


def cmd_whoami(args: argparse.Namespace) -> int:
    """The holderId; on a linked vault also published in the server's directory (with the
    holder's proof), so that others can share with it."""
    v = _unlock(args)
    try:
        print(v.holder().holder_id.hex())
        if Syncer.linked(v.store) is not None:
            try:
                publish_holder(syncer_for(v))
            except OwnmemError as e:
                print(f"warning: not published in the server's directory ({e})", file=sys.stderr)
    finally:
        v.close()
    return 0


def cmd_share(args: argparse.Namespace) -> int:
    if args.action == "id":
        return cmd_whoami(args)
    s = _syncer(args)
    try:
        if args.action == "create":
            return _create(s, args)
        if args.action == "list":
            return _list(s, args)
        if args.action == "received":
            return _received(s, args)
        if args.contract is None:
            raise sharing.ShareRefused(f"`ownmem share {args.action}` takes a contract id")
        cid = _contract_id(s, args.contract)
        if args.action == "revoke":
            r = sharing.revoke(s, cid)
            print(f"contract {cid.hex()}: " + ("already revoked" if r.already else "revoked")
                  + f" (REVOKE receipt {r.receipt_id.hex()}); it governs future reads only")
            return 0
        act = {"accept": sharing.accept, "decline": sharing.decline, "withdraw": sharing.withdraw}[args.action]
        state = act(s, cid)
        print(f"contract {cid.hex()}: {state}")
        return 0
    finally:
        s.v.close()


def _create(s: Syncer, args: argparse.Namespace) -> int:
    if not args.to or not args.memory or not args.mode:
        raise sharing.ShareRefused("`ownmem share create` needs --to, --memory and --mode")
    grantees = [sharing.parse_holder_id(h) for part in args.to for h in part.split(",") if h.strip()]
    expires = None
    if args.expires is not None:
        if not (args.expires.isascii() and args.expires.isdigit()):
            raise sharing.ShareRefused("--expires is a UNIX time in seconds (decimal digits)")
        expires = int(args.expires)
    made = sharing.share(s, args.memory, grantees, args.mode, expires=expires)
    print(f"offered contract {made.contract_id.hex()} ({made.mode.lower()}, {_expiry(made)}): "
          f"{len(made.cell_ids)} memory(ies) to {len(made.grantee_ids)} holder(s); SHARE receipt "
          f"{made.receipt_id.hex()}. Nothing is released until a grantee accepts.")
    return 0


def _list(s: Syncer, args: argparse.Namespace) -> int:
    got = sharing.offers(s)
    if args.json:
        def view(v: ShareView, who: str) -> dict[str, Any]:
            c = v.contract
            return {"contract_id": c.contract_id.hex(), "mode": c.mode.lower(), "expires_at": c.expires_at,
                    who: (v.grantee if who == "grantee" else c.holder_id).hex(), "state": v.state,
                    "revoked": v.revoked, "expired": v.expired, "cells": [x.hex() for x in c.shard_ids]}
        print(json.dumps({"offered": [view(v, "grantee") for v in got.offered],
                          "received": [view(v, "owner") for v in got.received],
                          "refused": list(got.refused), "more": got.more}, indent=2))
        return 0
    print("offered by me:" if got.offered else "offered by me: none")
    for v in got.offered:
        print(f"  {v.contract_id.hex()}  {v.contract.mode.lower():<9}  to {v.grantee.hex()}  {_view_state(v):<9}  "
              f"{len(v.contract.shard_ids)} memory(ies), {_expiry(v.contract)}")
    print("offered to me:" if got.received else "offered to me: none")
    for v in got.received:
        owner = got.sharers[v.contract.holder_id]
        print(f"  {v.contract_id.hex()}  {v.contract.mode.lower():<9}  "
              f"from {owner.holder_id.hex()} ({_safe(owner.name)})  {_view_state(v):<9}  "
              f"{len(v.contract.shard_ids)} memory(ies), {_expiry(v.contract)}")
    for why in got.refused:
        print(f"warning: {_safe(why)}")
    if got.more:
        print(f"warning: {MORE_OFFERS}")
    return 0


def _received(s: Syncer, args: argparse.Namespace) -> int:
    got = sharing.received(s)
    if args.json:
        print(json.dumps({"memories": [{"cell_id": m.cell_id.hex(), "content": m.content, "tags": list(m.tags),
                                        "owner_holder_id": m.owner_holder_id.hex(), "owner_name": m.owner_name,
                                        "contract_id": m.contract_id.hex(), "authorship": m.authorship,
                                        "created": m.created} for m in got.memories],
                          "refused": [{"cell_id": c.hex(), "reason": why} for c, why in got.refused]}, indent=2))
        return 0
    if not got.memories:
        print("no memories are shared with you")
    for m in got.memories:
        tags = f" [{_safe(', '.join(m.tags))}]" if m.tags else ""
        print(f"{m.cell_id.hex()[:12]}  shared by {m.owner_holder_id.hex()[:16]} ({_safe(m.owner_name)})  "
              f"{_safe(m.content)}{tags}")
    for cid, why in got.refused:
        print(f"warning: a shared cell {cid.hex()[:12]} was refused: {_safe(why)}")
    return 0


def register(sub: Any) -> None:
    """The `whoami` and `share` subcommands, on the CLI's subparsers."""
    who = sub.add_parser("whoami", help="print this vault's holderId (what others share with)")
    who.set_defaults(fn=cmd_whoami)
    sh = sub.add_parser("share", help="share memories with another person's vault, or see what was shared with you")
    sh.add_argument("action", choices=["id", "create", "list", "accept", "decline", "withdraw", "revoke", "received"])
    sh.add_argument("contract", nargs="?", help="accept/decline/withdraw/revoke: the contract id (or a unique prefix)")
    sh.add_argument("--to", action="append", metavar="HOLDERID[,HOLDERID..]", help="create: the grantees' holderIds")
    sh.add_argument("--memory", action="append", metavar="ID", help="create: a memory to share (repeatable)")
    sh.add_argument("--mode", choices=["temporary", "permanent", "syndicate"], help="create: the contract's mode")
    sh.add_argument("--expires", metavar="EPOCH", help="create: UNIX time it ends (temporary: within 24 h; "
                                                       "default 24 h)")
    sh.add_argument("--json", action="store_true", help="list/received: print JSON")
    sh.set_defaults(fn=cmd_share)

