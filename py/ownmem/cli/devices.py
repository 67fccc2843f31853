"""`ownmem devices [list] | remove ID [--new-passphrase]`: the vault's enrolled devices, and
removing a lost one (vault/devices.py; docs/decisions.md "15.7. Device and Key Revocation").

Removing asks for the passphrase (OWNMEM_PASSPHRASE or a prompt): the same one again renews the
vault's keys; with --new-passphrase, a new one (OWNMEM_NEW_PASSPHRASE or a prompt, twice).
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Any

from ownmem.cli.common import CliError, folder, passphrase
from ownmem.cli.passwd import _new_passphrase
from ownmem.errors import OwnmemError, VaultError
from ownmem.passphrase import strength
from ownmem.vault.devices import WHAT_IT_KEEPS, find_device, list_devices, remove_device
from ownmem.vault.sync import Syncer, syncer_for
from ownmem.vault.unlock import Vault


def _when(t: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "never"


def _open(args: argparse.Namespace) -> tuple[Syncer, str]:
    v = Vault(folder(args))
    if not v.exists():
        raise VaultError(f"no vault at {v.folder} (create one with `ownmem init`)")
    pw = passphrase()
    u = v.unlock(pw)
    if Syncer.linked(u.store) is None:
        u.close()
        raise CliError("this vault is not linked to a server, so it has no other devices "
                       "(run `ownmem login --server URL --vault-name NAME`)")
    return syncer_for(u), pw


def cmd_list(args: argparse.Namespace) -> int:
    s, _ = _open(args)
    try:
        found = list_devices(s)
        print(f"{'ID':<10}  {'ADDED':<16}  {'LAST SYNC':<16}  NAME")
        for d in found:
            mark = "  (this device)" if d.this_device else ""
            print(f"{d.device_id.hex()[:8]:<10}  {_when(d.added_at):<16}  {_when(d.last_sync):<16}  {d.label}{mark}")
        print(f"{len(found)} device(s). Remove a lost one with `ownmem devices remove ID`.")
    finally:
        s.v.close()
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    s, pw = _open(args)
    try:
        d = find_device(list_devices(s), args.id)
        new = pw
        if args.new_passphrase:
            new = _new_passphrase(args, confirm=True)
            judged = strength(new, ("ownmem", os.path.basename(folder(args).rstrip("/"))))
            if not judged.acceptable and not args.weak_passphrase:
                raise CliError("that passphrase is too easy to guess: use four or more random words, "
                               "or give --weak-passphrase to accept the risk")
        try:
            remove_device(s, d.device_id, new)
        except OwnmemError as e:
            raise CliError(f"removed {d.label!r} from the server, but the vault's keys could not be renewed ({e}); "
                           "no device can be added until you run `ownmem passphrase change`") from None
        changed = "a new passphrase" if args.new_passphrase else "the same passphrase"
        print(f"removed {d.label!r}; the vault's keys are renewed under {changed}. "
              "Your other devices ask for the passphrase at their next sync.")
        print(WHAT_IT_KEEPS)
    finally:
        s.v.close()
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("devices", help="list the vault's devices, or remove a lost one")
    p.set_defaults(fn=cmd_list)
    ds = p.add_subparsers(dest="devices_cmd", metavar="ACTION")
    ls = ds.add_parser("list", help="the devices: name, added, last sync")
    ls.set_defaults(fn=cmd_list)
    rm = ds.add_parser("remove", help="remove a lost device: it can no longer sync, and the vault's keys are renewed")
    rm.add_argument("id", help="the device's id, or its first characters (from `ownmem devices`)")
    rm.add_argument("--new-passphrase", action="store_true",
                    help="also change the passphrase (recommended if someone may know it)")
    rm.add_argument("--weak-passphrase", action="store_true",
                    help="accept a new passphrase below the strength floor")
    rm.set_defaults(fn=cmd_remove)
