"""`ownmem scope rotate NAME` (vault/rotate.py) and `ownmem identity rotate` (vault/rekey.py with
the same passphrase and a new salt): new keys, for a scope or for the owner's identity."""
from __future__ import annotations

import argparse
import os
import time
from typing import Any

from ownmem.cli.common import passphrase, unlock
from ownmem.vault.rekey_sync import change_passphrase
from ownmem.vault.rotate_sync import rotate_scope
from ownmem.vault.sync import REWRAP_BATCH, Syncer, syncer_for
from ownmem.vault.vault import UnlockedVault

SCOPE_WHAT_IT_DOES = (
    "Every memory of the scope now opens only with its new key; the old key is destroyed on this device{where}. "
    "A copy made before (an export, a device you no longer have) still opens what it already held.")
SCOPE_ELSEWHERE = ", on the server and, at their next sync, on your other devices"

IDENTITY_WHAT_IT_DOES = (
    "Your vault now signs with a new owner key; the old one is kept only to check what it signed before "
    "(those memories still show as yours), and the server no longer takes anything signed by it. New "
    "scope keys are wrapped to the new key, so the old keys open nothing written from now on. Your "
    "holder identity, sync login, shares and receipts are unchanged (so is the passphrase). It does not "
    "take back what the old key already signed or a copy someone already holds.")


def _pause_hook() -> Any:
    """Tests only: OWNMEM_TEST_PAUSE_AFTER_BATCHES=N stops for a minute after N batches of new wraps
    reached the server, saying so on stdout, so that a test can kill the process mid-rotation."""
    raw = os.environ.get("OWNMEM_TEST_PAUSE_AFTER_BATCHES")
    if not raw:
        return None

    def after(n: int) -> None:
        if n == int(raw):
            print(f"paused after {n} batch(es)", flush=True)
            time.sleep(60)
    return after


def cmd_scope_rotate(v: UnlockedVault, name: str) -> int:
    batch = int(os.environ.get("OWNMEM_REWRAP_BATCH") or REWRAP_BATCH)
    linked = Syncer.linked(v.store)
    s = syncer_for(v) if linked is not None else None
    done = rotate_scope(v, name, s, batch=batch, after_batch=_pause_hook())
    where = f"here and on {linked[0]}" if linked is not None else "on this device (it is not linked to a server)"
    print(f"scope {name!r} has a new key (generation {done.generation}) {where}: {done.rewrapped} memory key(s) "
          f"re-wrapped here, {done.sent} sent to the server, no memory's text touched")
    if done.joined:
        print("another of your devices was rotating this scope at the same moment and reached the server first: "
              "this device took that new key instead of its own and finished the rotation with it")
    for r in done.refusals:
        print(f"  {r}")
    if not done.finished:
        print("the server does not hold every new key yet, so the old key is kept for now: "
              f"run `ownmem scope rotate {name}` again when it can be reached")
        return 1
    print(SCOPE_WHAT_IT_DOES.format(where=SCOPE_ELSEWHERE if linked is not None else ""))
    return 0


def cmd_identity_rotate(args: argparse.Namespace) -> int:
    pw = passphrase()
    v = unlock(args)
    try:
        linked = Syncer.linked(v.store)
        old = v.identity.key_id
        # the same passphrase under a new salt: a new master, so new owner keys (ApertoMemory §9 "Key Hierarchy"
        # derives them from it); the vault root, and every ownmem/v1/* key, stays (vault/rekey.py)
        done = change_passphrase(syncer_for(v), pw) if linked is not None else v.change_passphrase(pw)
        print(f"owner key {old.hex()} replaced by {done.ident.key_id.hex()}"
              + (f", here and on {linked[0]} (your other devices ask for the passphrase again)" if linked else ""))
        print(IDENTITY_WHAT_IT_DOES)
    finally:
        v.close()
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("identity", help="rotate the vault's owner signing key (same passphrase)")
    ps = p.add_subparsers(dest="identity_cmd", required=True, metavar="ACTION")
    r = ps.add_parser("rotate", help="a new owner key; the old one only checks what it signed before")
    r.set_defaults(fn=cmd_identity_rotate)

