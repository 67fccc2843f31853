"""Pure decisions of a device about the sync server's public log (DESIGN.md "The public log"):
whether a served log key may be used, whether a new checkpoint may replace the kept one,
whether two devices' views can be the one log, whether a witness was signed by a device of
the vault, whether a receipt is proven in a tree.  Each answers why not, or None.
``ownmem.vault.logwatch`` does the I/O around them."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ownmem.crypto import CryptoProvider, run_sync
from ownmem.errors import WireError
from ownmem.saihm import notes, tlog
from ownmem.saihm.notes import Checkpoint, VerifierKey
from ownmem.saihm.tlog import ProofFailed
from ownmem.wire import publiclog


def served_key(info: publiclog.LogKeyInfo) -> VerifierKey:
    """The verifier key a /v1/log/key answer names (its fields agree: ``LogKeyInfo.check``)."""
    return notes.parse_verifier_key(info.vkey)


def key_change(pinned: VerifierKey | None, served: VerifierKey) -> str | None:
    """Why the served key cannot be used, or None: a pinned key is never replaced."""
    if pinned is None or pinned == served:
        return None
    return (f"the server's log key changed (pinned {pinned.name}+{pinned.key_id:08x}, now "
            f"{served.name}+{served.key_id:08x}): another log, or a rewritten one; kept the old checkpoint")


def consistency_needed(kept: Checkpoint | None, new: Checkpoint) -> tuple[int, int] | None:
    """The consistency proof (from, to) to ask for before ``new`` may replace ``kept``; None
    when none can help (nothing kept, an empty tree kept, or no growth)."""
    if kept is None or kept.size == 0 or new.size <= kept.size:
        return None
    return kept.size, new.size


def advance_problem(kept: Checkpoint | None, new: Checkpoint, proof: publiclog.LogConsistency | None) -> str | None:
    """Why ``new`` must not replace ``kept``, or None (RFC 9162 consistency, decision 39 for
    an empty kept tree)."""
    if kept is None:
        return None
    if new.origin != kept.origin:
        return f"the server's checkpoint is for another log ({new.origin}, kept {kept.origin})"
    if new.size < kept.size:
        return (f"the server's log shrank from {kept.size} to {new.size} receipts: history was dropped; "
                "kept the old checkpoint")
    if new.size == kept.size:
        if new.root_hash != kept.root_hash:
            return (f"the server shows another log of {new.size} receipts than this device kept (a different "
                    "root at the same size): history was rewritten; kept the old checkpoint")
        return None
    if kept.size == 0:
        return _consistent(kept, new, ())
    if proof is None:
        return (f"the server gave no consistency proof from {kept.size} to {new.size} receipts: "
                "kept the old checkpoint")
    if (proof.old_size, proof.new_size) != (kept.size, new.size):
        return "the server's consistency proof is for other tree sizes than asked: kept the old checkpoint"
    return _consistent(kept, new, proof.proof)


def _consistent(old: Checkpoint, new: Checkpoint, proof: Sequence[bytes]) -> str | None:
    try:
        notes.check_checkpoint_consistency(old, new, proof)
    except ProofFailed as e:
        return (f"the server's log of {new.size} receipts does not extend the one of {old.size} this device "
                f"kept ({e}): history was rewritten or dropped; kept the old checkpoint")
    return None


def witness_proof_needed(mine: Checkpoint, theirs: Checkpoint) -> tuple[int, int] | None:
    """The proof (from, to) that relates two devices' views: the smaller to the larger."""
    lo, hi = sorted((mine.size, theirs.size))
    return None if lo == hi or lo == 0 else (lo, hi)


def witness_problem(mine: Checkpoint, theirs: Checkpoint, proof: publiclog.LogConsistency | None,
                    device: str) -> str | None:
    """Why another device's view and this one's cannot both be the one log, or None."""
    if mine.origin != theirs.origin:
        return f"device {device} of this vault sees another log ({theirs.origin}): a forked view"
    small, large = (mine, theirs) if mine.size <= theirs.size else (theirs, mine)
    if small.size == large.size:
        if small.root_hash != large.root_hash:
            return (f"device {device} of this vault saw another log of {small.size} receipts than this device "
                    "(a different root at the same size): the server shows the devices forked histories")
        return None
    if small.size != 0:
        if proof is None:
            return (f"the server gave no consistency proof between this device's view and device {device}'s: "
                    "a forked view cannot be ruled out")
        if (proof.old_size, proof.new_size) != (small.size, large.size):
            return "the server's consistency proof between two devices' views is for other sizes than asked"
    try:
        notes.check_checkpoint_consistency(small, large, proof.proof if proof is not None else ())
    except ProofFailed as e:
        return (f"device {device} of this vault saw a log ({theirs.size} receipts) that is not consistent with "
                f"this device's ({mine.size}): the server shows the devices forked histories ({e})")
    return None


def witness_forgery(p: CryptoProvider, name: str, sync_pub: bytes, w: publiclog.Witness) -> str | None:
    """Why a witness record is not one a device of this vault signed, or None."""
    if not run_sync(p.ed25519_verify(sync_pub, w.signature, w.message(name))):
        return (f"the server offered a log witness for device {w.device_id.hex()[:8]} that no device of this "
                "vault signed: ignored")
    return None


def parse_witnesses(value: Any) -> tuple[list[publiclog.Witness], int]:
    """The well-formed witnesses of a /witnesses answer, and how many were not: one bad record
    must not hide the others."""
    if not isinstance(value, dict) or not isinstance(value.get("witnesses"), list):
        raise WireError("a witness list is {witnesses: [...]}")
    if len(value["witnesses"]) > publiclog.MAX_WITNESSES:
        raise WireError(f"at most {publiclog.MAX_WITNESSES} witnesses a vault")
    good, bad = [], 0
    for w in value["witnesses"]:
        try:
            good.append(publiclog.Witness.parse(w))
        except WireError:
            bad += 1
    return good, bad


def inclusion_problem(cp: Checkpoint, receipt: bytes, proof: publiclog.LogInclusion | None) -> str | None:
    """Why ``receipt`` (its bytes, as logged) is not proven in the tree of ``cp``, or None."""
    if proof is None:
        return "the server gave no inclusion proof"
    if proof.size != cp.size:
        return "the server's inclusion proof is for another tree size than asked"
    try:
        tlog.check_inclusion(proof.proof, cp.size, cp.root_hash, proof.index, tlog.leaf_hash(receipt))
    except ProofFailed as e:
        return f"its inclusion proof fails ({e})"
    return None


def open_served_checkpoint(p: CryptoProvider, note: bytes, key: VerifierKey) -> Checkpoint:
    return run_sync(notes.open_checkpoint(p, note, key))
