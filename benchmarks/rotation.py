"""Area `rotation` (also part of `core`): the cost of keys that change (ApertoMemory §15.6 "Key
Rotation"; issue 24).

    passphrase change, 10,000 memories in 5 scopes   target: < 1 s + one Argon2id (measured in the
                                                     same run, on the same machine, as the anchor)
    passphrase change, 1 scope and 50 scopes         O(scopes): the cost beyond Argon2id grows with
                                                     scopes, not with memories
    scope rotation, 10,000 memories in the scope     target: <= 2 s (local: the new KEK and every DEK
                                                     re-wrapped in one transaction, the old KEK destroyed)

Each repetition runs on a fresh copy of the vault folder (a change or a rotation alters the
vault it ran on), the copy made outside the clock; medians of the repetitions.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ownmem.aperto import keys as K
from ownmem.aperto.model import Memory
from ownmem.aperto.seal import seal
from ownmem.crypto import provider, run_sync
from ownmem.vault import UnlockedVault, Vault, rotate
from ownmem.vault.store import StoredObject

from .corpus import CREATED, TOOL, memories
from .report import FAIL, PASS, AreaResult, Check
from .timing import repeat, timed

PASSPHRASE = "correct horse battery staple / ownmem bench"
CHANGE_TARGET = 1.0        # seconds beyond one Argon2id
ROTATE_TARGET = 2.0        # seconds


@dataclass(frozen=True, slots=True)
class Sizes:
    vault: int = 10_000
    scopes: int = 5
    wide: int = 50
    reps: int = 3


FULL = Sizes()
QUICK = Sizes(vault=500, reps=2)


def _say(msg: str) -> None:
    print(f"  {msg}", flush=True)


def _fill(v: UnlockedVault, n: int, scopes: list[str]) -> None:
    """``n`` memories spread over ``scopes``, sealed as ``add`` seals them, stored in one
    transaction (``add`` commits each one, which only slows the building down)."""
    p, rows = v.crypto, []
    entries = [v.scope(s) for s in scopes]
    for i, (content, tags) in enumerate(memories(n, seed=11)):
        scope = entries[i % len(entries)]
        dek = K.new_key()
        so = run_sync(seal(p, Memory(content=content, tags=tuple(tags), created=CREATED, tool=TOOL),
                           signer=v.identity.sign, scope_id=scope.scope_id, dek=dek))
        rows.append(StoredObject(so.object_id, so.scope_id, so.format_version, so.encoded,
                                 run_sync(K.wrap_dek(p, dek, v.kek(scope)))))
    with v.store.transaction():
        v.store.put_objects(rows)


def _vault(folder: Path, n: int, scopes: int) -> Path:
    v = Vault.create(folder, PASSPHRASE)
    names = ["default", *(f"scope-{i}" for i in range(1, scopes))]
    for name in names[1:]:
        v.add_scope(name)
    _fill(v, n, names)
    v.close()
    return folder


def _on_a_copy(src: Path, tmp: Path, i: int) -> Path:
    dst = tmp / f"copy-{i}"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst


def _change_times(src: Path, tmp: Path, reps: int, *, argon: bool) -> tuple[float, ...]:
    """Seconds of ``change_passphrase`` on fresh copies: with its Argon2id (``argon``), or with the
    new master derived before the clock starts (the part of the change beyond Argon2id)."""
    out = []
    p = provider()
    for i in range(reps + 1):                    # the first is the warm-up
        v = Vault(_on_a_copy(src, tmp, i)).unlock(PASSPHRASE)
        new = f"{PASSPHRASE} / changed {i}"
        salt = os.urandom(16)
        master = None if argon else run_sync(K.master_from_passphrase(p, new, salt))
        try:
            def once(v: UnlockedVault = v) -> None:
                run_sync(v.change_passphrase_async(new, salt=salt, master=master))   # noqa: B023 (run at once)
            t = timed(once)
        finally:
            v.close()
        if i:
            out.append(t)
    return tuple(out)


def _rotate_times(src: Path, tmp: Path, reps: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Seconds of a whole local rotation of scope "default" (rotate.start + rotate.finish_here):
    wall-clock, and the CPU time of this process (what the rotation costs when it is not waiting
    for a CPU other processes hold)."""
    out, cpu = [], []
    for i in range(reps + 1):
        v = Vault(_on_a_copy(src, tmp, i)).unlock(PASSPHRASE)
        try:
            def once(v: UnlockedVault = v) -> None:
                sid, _ = rotate.start(v, "default")
                if not rotate.finish_here(v, sid.scope_id):
                    raise RuntimeError("the rotation did not finish")
            c0 = time.process_time()
            t = timed(once)
            c = time.process_time() - c0
            if len(v.open_all().entries) == 0:
                raise RuntimeError("nothing opens after the rotation")
        finally:
            v.close()
        if i:
            out.append(t)
            cpu.append(c)
    return tuple(out), tuple(cpu)


def _median(xs: tuple[float, ...]) -> float:
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def _argon() -> tuple[float, ...]:
    salt, p = os.urandom(16), provider()
    return repeat(lambda _: timed(lambda: run_sync(K.master_from_passphrase(p, PASSPHRASE, salt))), reps=5).seconds


def checks(s: Sizes = FULL) -> list[Check]:
    tmp = Path(tempfile.mkdtemp(prefix="ownmem-bench-rotation-"))
    try:
        _say(f"building a {s.vault:,}-memory vault in {s.scopes} scopes, a {s.vault:,}-memory one-scope vault, "
             f"and empty vaults of 1 and {s.wide} scopes ...")
        five = _vault(tmp / "five", s.vault, s.scopes)
        one_big = _vault(tmp / "one-big", s.vault, 1)
        one = _vault(tmp / "one", 0, 1)
        wide = _vault(tmp / "wide", 0, s.wide)
        _say("timing Argon2id, passphrase changes and a rotation ...")
        a = _median(_argon())
        full5 = _change_times(five, tmp / "f5", s.reps, argon=True)
        ch5 = _change_times(five, tmp / "c5", s.reps, argon=False)
        ch1 = _change_times(one, tmp / "c1", s.reps, argon=False)
        ch50 = _change_times(wide, tmp / "c50", s.reps, argon=False)
        rot, rot_cpu = _rotate_times(one_big, tmp / "rot", s.reps)
        argon_after = _median(_argon())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    m5, m1, m50, mr, f5 = _median(ch5), _median(ch1), _median(ch50), _median(rot), _median(full5)

    def runs(xs: tuple[float, ...]) -> str:
        return ", ".join(f"{x:.3f}" for x in xs)

    change = Check(
        f"passphrase change, {s.vault:,} memories in {s.scopes} scopes",
        PASS if m5 < CHANGE_TARGET else FAIL,
        (f"`UnlockedVault.change_passphrase` on a vault of {s.vault:,} memories spread over {s.scopes} scopes "
         "(not linked to a server): a new salt and one Argon2id (m=64 MiB, t=3, p=4), the owner keys that "
         "follow, every scope KEK re-wrapped and a fresh KEK per scope (vault/rekey.py), one transaction; no "
         f"memory is touched.  Each of {s.reps} repetitions on a fresh copy of the vault (copied outside the "
         "clock), after one warm-up.  The part beyond Argon2id is timed on its own: the same change with the "
         "new master derived before the clock starts (`change_passphrase_async(master=...)`), since on a "
         "shared machine the Argon2id of one run varies by more than the rest of the change.  The anchor, "
         "Argon2id alone, is timed in the same run (5 runs before the changes and 5 after), and so is the "
         "whole change, Argon2id included."),
        (("Argon2id alone (median, before / after)", f"{a:.3f} s / {argon_after:.3f} s"),
         ("the change beyond Argon2id (median)", f"{m5:.3f} s"),
         ("runs", runs(ch5)),
         ("the whole change, Argon2id included (median)", f"{f5:.3f} s (runs {runs(full5)})")),
        figure=f"{m5:.3f} s + Argon2id", target=f"< {CHANGE_TARGET:.0f} s + Argon2id")
    per_scope = (m50 - m1) / (s.wide - 1)
    scopes = Check(
        f"passphrase change is O(scopes): 1 scope against {s.wide}",
        PASS if m1 < CHANGE_TARGET and m50 < CHANGE_TARGET else FAIL,
        (f"The part of the change beyond Argon2id (timed as above) on empty vaults of 1 and of {s.wide} scopes, "
         f"and on {s.vault:,} memories in {s.scopes} scopes: what grows is the number of scopes (an X25519 "
         "unwrap, two wraps and a new KEK each), not the number of memories."),
        (("1 scope, no memories (median)", f"{m1:.3f} s (runs {runs(ch1)})"),
         (f"{s.wide} scopes, no memories (median)", f"{m50:.3f} s (runs {runs(ch50)})"),
         (f"{s.scopes} scopes, {s.vault:,} memories (median)", f"{m5:.3f} s"),
         ("cost per scope", f"{per_scope * 1000:.2f} ms")),
        figure=f"{per_scope * 1000:.2f} ms/scope", target=f"both < {CHANGE_TARGET:.0f} s + Argon2id")
    rotation = Check(
        f"scope rotation, {s.vault:,} memories in the scope",
        PASS if mr <= ROTATE_TARGET else FAIL,
        (f"`rotate.start` + `rotate.finish_here` (what `ownmem scope rotate` does on a vault not linked to a "
         f"server) on a scope of {s.vault:,} memories: a new KEK under the same scope id, every DEK unwrapped "
         "(one batched call) and re-wrapped under it, in one transaction, then the old KEK destroyed (the store "
         "overwrites what it deletes, and the write-ahead log is checkpointed).  No sealed object is touched.  "
         f"Each of {s.reps} repetitions on a fresh copy, after one warm-up.  A linked vault adds the new wraps' "
         "upload (POST /rewrap, 1,000 per request), not timed here.  The verdict is on wall-clock time; the "
         "CPU time of the process is shown beside it, as other work on a shared machine (see the load "
         "average) holds the CPUs for part of the wall-clock time."),
        (("rotation (median, wall-clock)", f"{mr:.3f} s"), ("runs", runs(rot)),
         ("CPU time of the process (median)", f"{_median(rot_cpu):.3f} s (runs {runs(rot_cpu)})")),
        figure=f"{mr:.3f} s", target=f"≤ {ROTATE_TARGET:.0f} s")
    return [change, scopes, rotation]


INTRO = ("Keys that change (issue 24): a passphrase change and a scope-KEK rotation on vaults of "
         "10,000 memories, to absolute targets, with Argon2id measured in the same run as the anchor.")


def run(quick: bool = False) -> AreaResult:
    r = AreaResult("rotation", INTRO)
    r.checks.extend(checks(QUICK if quick else FULL))
    return r
