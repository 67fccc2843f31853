"""`ownmem passphrase change|update`: change the vault's passphrase (vault/rekey.py), and take a
change made on another device (vault/rekey_sync.py).

The current passphrase comes from OWNMEM_PASSPHRASE or a prompt, the new one from
OWNMEM_NEW_PASSPHRASE or a prompt (twice), never from an argument.
"""
from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Any

from ownmem.cli.common import CliError, folder as _folder, unlock as _unlock
from ownmem.passphrase import strength
from ownmem.vault.rekey_sync import catch_up, change_passphrase
from ownmem.vault.sync import Syncer, SyncReport, syncer_for

# Said after every change, because it is the limit people would not guess (docs/decisions.md
# "Key Rotation"): the identity keys come from the vault root, which the old passphrase opened.
WHAT_IT_DOES = (
    "The old passphrase opens nothing written from now on, on this device, in a new export or on the "
    "server. What was written before stays readable by whoever already knew the old passphrase and kept "
    "a copy (an export, an old device), and the vault's identity keys (sync, receipts, agent credentials) "
    "are the same as before, so someone who knew the old passphrase and kept the old files can still "
    "derive them: changing the passphrase protects what you write next, it does not evict them.")


AGENTS_AFTER = ("Agent credentials and sessions issued before now are revoked (the running `ownmem agent` ends "
                "them within a second): connect your agents again.")


def _new_passphrase(args: argparse.Namespace, *, confirm: bool) -> str:
    pw = os.environ.get("OWNMEM_NEW_PASSPHRASE")
    if not pw:
        if not sys.stdin.isatty():
            raise CliError("no new passphrase: set OWNMEM_NEW_PASSPHRASE or run in a terminal")
        try:
            pw = getpass.getpass("new passphrase: ")
            if confirm and getpass.getpass("new passphrase (again): ") != pw:
                raise CliError("the two passphrases differ")
        except (EOFError, KeyboardInterrupt):
            raise CliError("no new passphrase given") from None
    if not pw:
        raise CliError("the passphrase must not be empty")
    return pw


def cmd_change(args: argparse.Namespace) -> int:
    v = _unlock(args)
    try:
        pw = _new_passphrase(args, confirm=True)
        judged = strength(pw, ("ownmem", os.path.basename(_folder(args).rstrip("/"))))
        if not judged.acceptable and not args.weak_passphrase:
            why = f" ({judged.warning.rstrip('.')})" if judged.warning else ""
            raise CliError(f"that passphrase is too easy to guess{why}: use four or more random words, "
                           "or give --weak-passphrase to accept the risk")
        linked = Syncer.linked(v.store)
        if linked is not None:
            done = change_passphrase(syncer_for(v), pw)
            where = f"here and on {linked[0]} (the other devices ask for it at their next sync)"
        else:
            done = v.change_passphrase(pw)
            where = "on this device (it is not linked to a server)"
        print(f"passphrase changed {where}; {len(done.scopes)} scope key(s) re-wrapped, no memory touched; "
              f"new owner key {done.ident.key_id.hex()}")
        print(WHAT_IT_DOES)
        print(AGENTS_AFTER)
    finally:
        v.close()
    return 0


def cmd_update(args: argparse.Namespace) -> int:
    v = _unlock(args)
    try:
        s = syncer_for(v)
        catch_up(s, _new_passphrase(args, confirm=False))
        s.sync_metadata(SyncReport())
        print("this device now uses the new passphrase; run `ownmem sync`")
    finally:
        v.close()
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("passphrase", help="change the vault's passphrase, or take one changed on another device")
    ps = p.add_subparsers(dest="passphrase_cmd", required=True, metavar="ACTION")
    ch = ps.add_parser("change", help="a new passphrase: new keys for everything written from now on")
    ch.add_argument("--weak-passphrase", action="store_true",
                    help="accept a passphrase below the strength floor (anyone holding a copy can guess it offline)")
    ch.set_defaults(fn=cmd_change)
    up = ps.add_parser("update", help="the passphrase was changed on another device: enter the new one")
    up.set_defaults(fn=cmd_update)
