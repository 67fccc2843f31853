"""A scope-KEK rotation and the sync server (vault/rotate.py has the keys and the local store;
docs/decisions.md "Key Rotation"):

    rotate_scope   sync -> the local rotation (one transaction) -> the metadata with the new
                   generation and the retiring KEK -> push every cell -> the queued new wraps in
                   batches (POST .../rewrap) -> pull (old wraps pushed meanwhile are re-wrapped
                   and queued) -> the rest of the queue -> the retiring KEK destroyed here, then
                   in the metadata
"""
from __future__ import annotations

from collections.abc import Callable

from ownmem.aperto.keys import WrappedKek
from ownmem.vault import rotate
from ownmem.vault.sync import REWRAP_BATCH, Syncer, SyncReport
from ownmem.vault.vault import UnlockedVault


def rotate_scope(v: UnlockedVault, name: str, s: Syncer | None = None, *, batch: int = REWRAP_BATCH,
                 after_batch: Callable[[int], None] | None = None) -> rotate.Rotated:
    """The whole rotation of scope ``name`` (or the rest of one under way).  ``s``: the vault's
    sync, when it is linked; the old KEK is destroyed only once the server holds every new wrap."""
    # a rotation started here (now, or before a kill) may lose the race to the server to another
    # device's: the scope entry then changes under it as the sync takes that one (rotate.follow)
    before = _rotating_entry(v, name)
    if s is not None:
        s.sync_once()                       # the other devices' scope keys and cells first
    joined = before is not None and before != _entry(v, name)
    # joined: that rotation is this one (its KEK is as new); it is finished here, not begun again
    scope, rewrapped = (v.store.scopes()[name], 0) if joined else rotate.start(v, name)
    sent, refusals = 0, list[str]()
    if s is not None:
        report = SyncReport()
        s.sync_metadata(report)             # the new entry, its generation and the retiring KEK
        rotate.sweep(v, scope.scope_id)
        s.push(report)                      # every cell on the server: each queued wrap can go
        sent = s.push_rewraps(report, batch=batch, after_batch=after_batch)
        s.pull(report)                      # old wraps another device pushed meanwhile, re-wrapped
        rotate.sweep(v, scope.scope_id)
        sent += s.push_rewraps(report, batch=batch, after_batch=after_batch)
        refusals = report.refusals
    joined = joined or _entry(v, name) != scope.wrapped
    finished = rotate.finish_here(v, scope.scope_id)
    if finished and s is not None:
        s.sync_metadata(SyncReport())       # the retiring KEK leaves the metadata: every device drops it
    return rotate.Rotated(name, v.store.kek_gen(scope.scope_id), rewrapped, sent, finished, refusals, joined)


def _entry(v: UnlockedVault, name: str) -> WrappedKek | None:
    e = v.store.scopes().get(name)
    return None if e is None else e.wrapped


def _rotating_entry(v: UnlockedVault, name: str) -> WrappedKek | None:
    """The scope's entry, if a rotation of it is under way on this device."""
    e = v.store.scopes().get(name)
    if e is None or v.store.kek_gens().get(e.scope_id, (1, None))[1] is None:
        return None
    return e.wrapped
