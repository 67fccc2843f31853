"""`ownmem recovery create|use`: the recovery kit (vault/recovery.py, vault/recovery_sync.py).

``create`` makes a new kit (the last one's slot goes) and shows its 12 words once; ``use`` opens
the vault with the words, here or on a new device (``--server`` and ``--vault-name``), sets a new
passphrase at once and shows a new kit in place of the used one.  The words come from
OWNMEM_RECOVERY_WORDS or a prompt, the new passphrase from OWNMEM_NEW_PASSPHRASE or a prompt.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ownmem.cli.common import CliError, folder as _folder, unlock as _unlock
from ownmem.cli.passwd import _new_passphrase
from ownmem.crypto import run_sync
from ownmem.passphrase import strength
from ownmem.vault import Vault, recovery
from ownmem.vault.recovery_sync import recover_new_device, use_kit
from ownmem.vault.store import Store
from ownmem.vault.sync import Syncer, SyncReport, syncer_for
from ownmem.vault.vault import UnlockedVault

# Said with every kit: what it is, and its one limit (docs/decisions.md "Key Rotation")
ABOUT_KIT = (
    "Write these 12 words on paper (or print this) and keep them somewhere safe at home, apart from "
    "your devices. With the vault's name they open the vault if you forget the passphrase, on this "
    "device or a new one; whoever holds them can do the same. They are shown only this once: "
    "`ownmem recovery create` makes a new kit and retires this one.")


def kit_text(words: list[str], where: str) -> str:
    rows = [f"{i:>2}. {w:<9}" for i, w in enumerate(words, 1)]
    grid = "\n".join("   ".join(rows[r::4]).rstrip() for r in range(4))
    return f"Recovery kit for {where}\n\n{grid}\n\n{ABOUT_KIT}"


def _where(v: UnlockedVault, folder: str) -> str:
    linked = Syncer.linked(v.store)
    return f"the vault {linked[1]!r} on {linked[0]}" if linked else f"the vault at {folder}"


def show_new_kit(v: UnlockedVault, folder: str) -> None:
    """A new kit, published when the vault is linked, its words printed once."""
    words, _ = run_sync(recovery.create_kit_async(v))
    if Syncer.linked(v.store) is not None:
        syncer_for(v).sync_metadata(SyncReport())
    print(kit_text(words, _where(v, folder)))


def cmd_create(args: argparse.Namespace) -> int:
    v = _unlock(args)
    try:
        had = recovery.recovery_slot(v.store) is not None
        show_new_kit(v, _folder(args))
        if had:
            print("The previous kit's words no longer open this vault here. Someone who kept them AND a copy of "
                  "the vault's public data from before could still open it until the passphrase changes: if "
                  "the old kit may have been seen, change the passphrase too (`ownmem passphrase change`).")
    finally:
        v.close()
    return 0


def _words() -> str:
    words = os.environ.get("OWNMEM_RECOVERY_WORDS")
    if not words:
        if not sys.stdin.isatty():
            raise CliError("no recovery words: set OWNMEM_RECOVERY_WORDS or run in a terminal")
        try:
            words = input("the 12 words of your recovery kit: ")
        except (EOFError, KeyboardInterrupt):
            raise CliError("no recovery words given") from None
    return words


def cmd_use(args: argparse.Namespace) -> int:
    folder = _folder(args)
    words = _words()
    recovery.from_words(words)              # a mistyped word is said before anything is asked
    pw = _new_passphrase(args, confirm=True)       # asked first: nothing is written before it passes
    judged = strength(pw, ("ownmem", os.path.basename(folder.rstrip("/"))))
    if not judged.acceptable and not args.weak_passphrase:
        why = f" ({judged.warning.rstrip('.')})" if judged.warning else ""
        raise CliError(f"that passphrase is too easy to guess{why}: use four or more random words, "
                       "or give --weak-passphrase to accept the risk")
    if Vault(folder).exists():
        if args.server or args.vault_name:
            raise CliError(f"a vault already exists at {folder}: leave out --server and --vault-name to use "
                           "the kit on it, or choose another folder with --vault")
        vault = Vault(folder)
        v = run_sync(recovery.unlock_with_words_async(Store(vault.folder), vault.crypto, words))
        syncer = syncer_for(v) if Syncer.linked(v.store) is not None else None
    else:
        if not (args.server and args.vault_name):
            raise CliError(f"no vault at {folder}: give --server and --vault-name to open it from a server")
        syncer = recover_new_device(folder, args.server, args.vault_name, words)
        v = syncer.v
    try:
        words_new = use_kit(v, pw, syncer)
        print("The vault is open and has a new passphrase"
              + (" (here and on the server: your other devices ask for it at their next sync)." if syncer else "."))
        print("The kit you used is retired. Here is your new one.\n")
        print(kit_text(words_new, _where(v, folder)))
    finally:
        v.close()
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("recovery", help="the recovery kit: 12 words that open the vault if the passphrase is lost")
    ps = p.add_subparsers(dest="recovery_cmd", required=True, metavar="ACTION")
    cr = ps.add_parser("create", help="make a new recovery kit (the previous one stops working) and show it once")
    cr.set_defaults(fn=cmd_create)
    use = ps.add_parser("use", help="open the vault with the kit's words and set a new passphrase")
    use.add_argument("--server", help="the sync server (on a new device)")
    use.add_argument("--vault-name", help="the vault's name on that server (on a new device)")
    use.add_argument("--weak-passphrase", action="store_true",
                     help="accept a passphrase below the strength floor (anyone holding a copy can guess it offline)")
    use.set_defaults(fn=cmd_use)
