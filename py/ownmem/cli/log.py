"""`ownmem log verify` and `ownmem log status`: the public log checked from a third party's
point of view (SAIHM "Audit log"; RFC 9162 "Merkle Inclusion Proofs", "Merkle Consistency
Proofs"; C2SP tlog-checkpoint; DESIGN.md "The public log").

    ownmem log verify --server URL [--receipt ID] [--log-key VKEY] [--state FILE]

needs nothing but the server's public endpoints: no vault, no passphrase.  It pins the
log key (``--log-key``, else the one the state file pinned, else the linked vault's, else
the one the server names, trusted on first use), verifies the checkpoint's signature, and:

  with ``--receipt``  fetches the receipt and its holder's KEY receipt (``/v1/log?holder=&
                      operation=KEY``); checks the KEY receipt names the holder and is signed
                      by the key it carries, the receipt's signature under that key, and the
                      inclusion of both in the checkpoint's tree;
  always              checks the checkpoint extends the one the previous run saved in the
                      state file (default: the user's cache folder, one file per server),
                      then saves it.

Any failure is one line and exit status 1.  ``ownmem log status`` prints what a linked
vault's own sync checks found (``ownmem.vault.logwatch.log_status``); 1 when it found a problem.
"""
from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ownmem.crypto import provider, run_sync, sha256
from ownmem.errors import OwnmemError, SyncError, VaultError, WireError
from ownmem.saihm import notes
from ownmem.saihm.notes import Checkpoint, NoteRefused, VerifierKey
from ownmem.saihm.receipt import Receipt, parse_receipt, verify_receipt
from ownmem.termsafe import visible
from ownmem.vault import Vault
from ownmem.vault.logrules import (
    advance_problem,
    consistency_needed,
    inclusion_problem,
    open_served_checkpoint,
    served_key,
)
from ownmem.vault.logwatch import PublicLog, log_status, pinned_key
from ownmem.vault.remote import refusal
from ownmem.vault.store import Store
from ownmem.wire.limits import MAX_ANSWER

TIMEOUT = 30.0


class LogVerifyFailed(OwnmemError):
    """What the log shows does not verify: a signature, a proof, a pinned key, a receipt."""

    code = "log_verify_failed"

    def __init__(self, message: str) -> None:
        super().__init__(f"log verify failed: {message}")


@dataclass(frozen=True, slots=True)
class ReceiptVerified:
    receipt: Receipt
    key_receipt: Receipt
    leaf: int
    key_leaf: int


# ---------------------------------------------------------------- the checks


def verify_receipt_in_log(log: PublicLog, cp: Checkpoint, receipt_id: bytes) -> ReceiptVerified:
    """The receipt, signed by the holder its KEY receipt names, both proven in ``cp``'s tree."""
    p = provider()
    raw = _answer(lambda: log.receipt(receipt_id), f"receipt {receipt_id.hex()}")
    r = _receipt(raw, "the receipt")
    if r.receipt_id != receipt_id:
        raise LogVerifyFailed("the server answered another receipt than the one asked for")
    key_receipt, key_raw = None, b""
    for kraw in _answer(lambda: log.receipts(holder=r.holder_id.hex(), operation="KEY"), "the holder's KEY receipt"):
        k = _receipt(kraw, "a KEY receipt")
        holder_pub = k.detail
        if (k.operation != "KEY" or k.holder_id != r.holder_id or k.subject_id != r.holder_id
                or not isinstance(holder_pub, bytes) or sha256(holder_pub) != r.holder_id):
            continue
        try:
            run_sync(verify_receipt(p, k, holder_pub))
        except OwnmemError:
            continue
        key_receipt, key_raw = k, kraw
        break
    if key_receipt is None:
        raise LogVerifyFailed(f"no KEY receipt in the log names holder {r.holder_id.hex()} with a key that signed it")
    try:
        run_sync(verify_receipt(p, r, key_receipt.detail))
    except OwnmemError:
        raise LogVerifyFailed("the receipt is not signed by the holder key its KEY receipt publishes") from None
    leaves = []
    for what, rec, data in (("the receipt", r, raw), ("the KEY receipt", key_receipt, key_raw)):
        proof = _answer(lambda rid=rec.receipt_id: log.inclusion(rid, cp.size), f"the inclusion proof of {what}")
        why = inclusion_problem(cp, data, proof)
        if why is not None:
            raise LogVerifyFailed(f"{what} is not proven in the checkpoint's tree: {why}")
        leaves.append(proof.index)
    return ReceiptVerified(r, key_receipt, leaves[0], leaves[1])


def _receipt(raw: bytes, what: str) -> Receipt:
    try:
        return parse_receipt(raw)
    except OwnmemError:
        raise LogVerifyFailed(f"{what} does not parse as a SAIHM receipt") from None


def _answer(fn: Any, what: str) -> Any:
    try:
        return fn()
    except SyncError as e:      # WireError too
        raise LogVerifyFailed(f"the server did not give {what} ({e})") from None


# ---------------------------------------------------------------- HTTP, state


def http_get(base: str) -> tuple[PublicLog, Any]:
    """A PublicLog over httpx: no redirect followed, answers read to at most MAX_ANSWER bytes."""


    if not base.startswith(("http://", "https://")):
        raise LogVerifyFailed("the server URL must start with http:// or https://")
    client = httpx.Client(timeout=TIMEOUT, follow_redirects=False)

    def get(url: str) -> bytes:
        try:
            with client.stream("GET", url) as r:
                data = bytearray()
                for chunk in r.iter_bytes():
                    data += chunk
                    if len(data) > MAX_ANSWER:
                        raise WireError(f"the server's answer is over {MAX_ANSWER} bytes")
        except httpx.HTTPError as e:
            raise SyncError(f"cannot reach the server at {base} ({type(e).__name__})") from None
        if not 200 <= r.status_code < 300:
            raise refusal(r.status_code, bytes(data))
        return bytes(data)

    return PublicLog(base, get), client


def default_state(server: str) -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "ownmem" / f"log-{sha256(server.rstrip('/').encode())[:8].hex()}.json"


def _load_state(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    try:
        got = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise LogVerifyFailed(f"the state file {path} is damaged; remove it to start over") from None
    if not isinstance(got, dict) or not all(isinstance(v, str) for v in got.values()):
        raise LogVerifyFailed(f"the state file {path} is damaged; remove it to start over")
    return got


def _save_state(path: Path, state: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1), encoding="utf-8")
    os.replace(tmp, path)


# ---------------------------------------------------------------- commands


def _vault_store(args: argparse.Namespace) -> Store | None:
    folder = os.path.expanduser(args.vault or os.environ.get("OWNMEM_VAULT") or "~/.ownmem")
    return Store(Path(folder)) if Vault(folder).exists() else None


def cmd_verify(args: argparse.Namespace) -> int:
    # with --server, nothing of a vault is read; without it, the linked vault's server and pinned key
    store = None if args.server else _vault_store(args)
    server = args.server or ((store.sync_get("server") or b"").decode() if store is not None else "")
    if not server:
        raise LogVerifyFailed("no server: give --server URL (or link a vault with `ownmem login`)")
    receipt_id = None
    if args.receipt is not None:
        if len(args.receipt) != 64 or any(c not in "0123456789abcdef" for c in args.receipt):
            raise LogVerifyFailed("a receipt id is 64 lower-case hex digits")
        receipt_id = bytes.fromhex(args.receipt)
    state_path = Path(args.state) if args.state else default_state(server)
    state = _load_state(state_path)
    log, client = http_get(server)
    try:
        return _verify(log, server, args.log_key, store, receipt_id, state_path, state)
    finally:
        client.close()


def _verify(log: PublicLog, server: str, log_key: str | None, store: Store | None, receipt_id: bytes | None,
            state_path: Path, state: dict[str, str]) -> int:
    p = provider()
    try:
        served = served_key(_answer(log.key, "its log key"))
    except NoteRefused as e:
        raise LogVerifyFailed(f"the server's log key is malformed ({e.reason})") from None
    pin: VerifierKey | None
    how = ""
    try:
        if log_key:
            pin, how = notes.parse_verifier_key(log_key), "given with --log-key"
        elif state.get("vkey"):
            pin, how = notes.parse_verifier_key(state["vkey"]), f"pinned in {state_path}"
        elif store is not None and (pin := pinned_key(store)) is not None:
            how = "pinned by this vault"
        else:
            pin, how = served, "pinned now, on first use"
    except NoteRefused as e:
        raise LogVerifyFailed(f"the pinned log key is malformed ({e.reason})") from None
    if served != pin:
        raise LogVerifyFailed(f"the server's log key {served} is not the one {how}: {pin}")
    note = _answer(log.checkpoint, "its checkpoint")
    try:
        cp = open_served_checkpoint(p, note, pin)
    except NoteRefused as e:
        raise LogVerifyFailed(f"the checkpoint does not verify under the log key ({e.reason})") from None
    print(f"log {visible(cp.origin)}: key {pin} ({how})")
    print(f"checkpoint: {cp.size} receipt(s), root {cp.root_hash.hex()}, signature verified")
    if receipt_id is not None:
        got = verify_receipt_in_log(log, cp, receipt_id)
        r, k = got.receipt, got.key_receipt
        print(f"receipt {r.receipt_id.hex()}: {r.operation} of {r.subject_id.hex()} at {r.timestamp}, "
              f"signed by holder {r.holder_id.hex()}")
        print(f"holder key: KEY receipt {k.receipt_id.hex()}, self-signed, names that holder")
        print(f"inclusion: the receipt at leaf {got.leaf} and the KEY receipt at leaf {got.key_leaf} are in "
              f"the checkpoint's tree of {cp.size}")
    kept = None
    if state.get("checkpoint"):
        try:
            kept = open_served_checkpoint(p, state["checkpoint"].encode(), pin)
        except NoteRefused as e:
            raise LogVerifyFailed(f"the checkpoint saved in {state_path} does not verify ({e.reason})") from None
        need = consistency_needed(kept, cp)
        proof = _answer(lambda: log.consistency(*need), "a consistency proof") if need is not None else None
        why = advance_problem(kept, cp, proof)
        if why is not None:
            raise LogVerifyFailed(why)
        print(f"consistency: the checkpoint of {cp.size} extends the one of {kept.size} saved by the previous run")
    else:
        print(f"consistency: no earlier checkpoint saved; this one is kept in {state_path} for the next run")
    _save_state(state_path, {"server": server, "vkey": str(pin), "checkpoint": note.decode("utf-8")})
    print("verified")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    store = _vault_store(args)
    if store is None:
        raise VaultError("no vault here (give --vault, or create one with `ownmem init`)")
    st = log_status(store)
    if st is None:
        print("this vault has not checked a log yet: run `ownmem sync`")
        return 0
    print("\n".join(st.lines()))
    return 1 if st.problem else 0


def register(sub: Any) -> None:
    lg = sub.add_parser("log", help="check the public receipt log (inclusion, consistency, this vault's view)")
    lsub = lg.add_subparsers(dest="log_cmd", required=True, metavar="ACTION")
    v = lsub.add_parser("verify", help="verify the log with its public endpoints only (no vault, no passphrase)")
    v.add_argument("--server", help="server URL (default: the linked vault's)")
    v.add_argument("--receipt", metavar="ID", help="a receiptId (hex): its signature and inclusion")
    v.add_argument("--log-key", metavar="VKEY", help="pin this note verifier key instead of trusting the server's")
    v.add_argument("--state", metavar="FILE", help="where the last checkpoint is kept between runs "
                   "(default: one file per server in the user's cache folder)")
    v.set_defaults(fn=cmd_verify)
    s = lsub.add_parser("status", help="what this vault's syncs found of the log (no passphrase needed)")
    s.set_defaults(fn=cmd_status)
