"""`ownmem agent` on a vault linked to no sync server (docs/decisions.md, SAIHM "Order of effect and
receipt", "Receipt semantics"; issue 22): the receipts go to a local receipts log until the vault
is linked, then to the public log before anything else.

    not linked (local):
      LocalLog      (ownmem.vault.local_receipts) ``agent-receipts.jsonl`` in the vault folder:
                    every receipt the operator would log publicly (REMEMBER of an agent write or
                    of the person's memory first made a cell, FORGET, an audit batch's anchor),
                    on disk (fsync) before the effect it receipts
      LocalRemote   the Remote the operator holds: receipts to and from the LocalLog; every
                    other request fails as a server out of reach does (SyncError), so shared
                    cells and contracts are simply none
      LocalSyncer   the sync loop: no server; the vault's objects get their cells and REMEMBER
                    receipts (as a push would make them, but nothing is marked pushed), erasures
                    have their FORGET receipt written to the LocalLog; run again whenever
                    another process (the CLI, `ownmem add`) changed the vault

    linked later (`ownmem login`; the running agent notices it within a second, ``join``, and a
    restarted one starts linked):
      PublishingRemote  before its first push or erasure, every receipt of the LocalLog goes to
                    the public log (local_receipts.publish: REMEMBER and anchors by /receipts,
                    FORGET by /erase), and the file is renamed ``agent-receipts.published.jsonl``:
                    no cell made locally reaches the server before its REMEMBER receipt is
                    public.  Until the server answers, pushes fail and are retried, as for any
                    outage.  (Every Syncer publishes it first too, the CLI's `ownmem sync`'s.)

What the local log proves is less than the public log: it is the person's own file, so it keeps
the order of effect and receipt on this machine, but nobody else can check it was not rewritten
before it is published.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

from ownmem.agent.operator import AgentSyncer, Operator
from ownmem.errors import SyncError
from ownmem.vault import local_receipts
from ownmem.vault.local_receipts import LocalLog
from ownmem.vault.remote import Remote
from ownmem.vault.sharing import Received, SharedReader
from ownmem.vault.store import StoredObject
from ownmem.vault.sync import Syncer, SyncReport
from ownmem.vault.vault import UnlockedVault
from ownmem.wire import messages

_log = logging.getLogger("ownmem.agent")

NOT_LINKED = "this vault is not linked to a sync server (ownmem agent runs local-only)"
POLL = 1.0          # seconds between looks at whether another process changed the vault


class LocalRemote(Remote):
    """The Remote of a vault linked to no server: receipts in the LocalLog, nothing else."""

    def __init__(self, log: LocalLog) -> None:       # no URL, no HTTP client: nothing to reach
        self.base, self.name = "local:", ""
        self.http = None  # type: ignore[assignment]  # nothing here speaks HTTP (_exchange, events)
        self.token = "local"       # never logs in (Syncer.ensure_login)
        self.log = log

    def _exchange(self, method: str, url: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        raise SyncError(NOT_LINKED)

    def events(self) -> Iterator[int]:
        raise SyncError(NOT_LINKED)

    def post_receipts(self, receipts: list[bytes]) -> tuple[bytes, ...]:
        return self.log.append(receipts)

    def get_receipt(self, receipt_id: bytes) -> bytes | None:
        return self.log.get(receipt_id)


class LocalSyncer(AgentSyncer):
    """The operator's syncer with no server (see the module's docstring)."""

    remote: LocalRemote

    def __init__(self, v: UnlockedVault, remote: Remote, lock: threading.RLock,
                 after: Callable[[], None]) -> None:
        super().__init__(v, remote, lock, after)
        self._seen_version: int | None = None

    def ensure_login(self) -> None:
        pass

    def sync_metadata(self, report: SyncReport) -> None:
        pass          # the metadata (the agents' keys in the keyring) is on this machine already

    def push_rows(self, rows: list[StoredObject]) -> list[messages.PushResult]:
        """The cells and REMEMBER receipts a push would make (``Syncer._cell_for``,
        ``_log_remembers``: to the LocalLog), nothing marked pushed: a later link pushes them."""
        now = int(time.time())
        cells = [self._cell_for(r, now) for r in rows]
        with self.store.transaction():
            for r, (cid, cell) in zip(rows, cells, strict=True):
                self.store.put_cell(r.object_id, cid, cell, pushed=False)
        self._log_remembers([cid for cid, _ in cells], now)
        return []

    def push(self, report: SyncReport, progress: Callable[[int, int], None] | None = None) -> None:
        # only what has no cell yet: everything stays "unpushed" here, so the count is no guide
        rows = [r for r in self.store.unpushed(max(1, self.store.unpushed_count()))
                if self.store.cell_of(r.object_id) is None]
        if rows:
            self.push_rows(rows)
        self.push_erasures(report)

    def push_erasures(self, report: SyncReport) -> bool:
        """Each FORGET receipt of the outbox into the LocalLog, then out of the outbox: the erasure
        is done here and nothing else holds the cell; the receipt goes public at the link."""
        outbox = self.store.erase_outbox()
        if outbox:
            self.remote.post_receipts([r for _, r in outbox])
            with self.store.transaction():
                self.store.clear_erasures(c for c, _ in outbox)
        self.erasures_waiting = False
        return True

    def sync_once(self, progress: Callable[[int, int], None] | None = None) -> SyncReport:
        report = SyncReport()
        with self.lock:
            self.push(report)
            self.after()
        return report

    def _changed(self) -> bool:
        """Whether another connection committed to the vault's store since the last look (SQLite's
        data_version: cheap, and blind to this connection's own writes, which the operator indexes)."""
        version = int(self.store.db.execute("PRAGMA data_version").fetchone()[0])
        changed, self._seen_version = version != self._seen_version, version
        return changed

    def watch(self, on_report: Callable[[SyncReport], None], *, stop: Callable[[], bool] = lambda: False) -> None:
        """Until ``stop``, or until the vault is linked (`ownmem login` in another process): then
        it returns, and the service's sync thread joins the server (``join``)."""
        while not stop():
            with self.lock:
                changed = self._changed()
            if changed:
                on_report(self.sync_once())
                if Syncer.linked(self.store) is not None:
                    return
            time.sleep(POLL)


class NoShares(SharedReader):
    """What other holders share with a vault that has no server: nothing, said without asking
    (and without a warning in the log at every recall)."""

    def read(self, *, now: int | None = None) -> Received:
        return Received((), ())


def join(op: Operator) -> bool:
    """The vault of a local-only service was linked meanwhile: from now on the operator syncs with
    that server, through a PublishingRemote (the local receipts are public before its first push).
    -> whether it joined.  Under the operator's lock, so no tool call sees half of the change; the
    sync loop and the audit's batches read ``op.syncer`` afresh each time."""
    linked = Syncer.linked(op.v.store)
    syncer = op.syncer
    if linked is None or not isinstance(syncer, LocalSyncer):
        return False
    with op.lock:
        op.syncer = AgentSyncer(op.v, PublishingRemote(linked[0], linked[1], syncer.remote.log), op.lock,
                                op.catch_up)
        op.shared = SharedReader(op.syncer)
    _log.warning("this vault is now linked to %s as %r: ownmem agent syncs with it (the receipts written "
                 "meanwhile are published first)", linked[0], linked[1])
    return True


class PublishingRemote(Remote):
    """The Remote of a linked vault whose agent once ran local-only: the LocalLog is published
    before the first push or erasure (once; until it is, they fail and are retried)."""

    def __init__(self, base_url: str, name: str, log: LocalLog) -> None:
        super().__init__(base_url, name)
        self.log = log
        self._published = not log.path.exists()

    def _publish(self) -> None:
        if not self._published:
            n = local_receipts.publish(self.log.path.parent, super().post_receipts, super().erase)
            self._published = True
            if n:
                _log.info("the local receipts log (%d receipts) is published to the server's public log", n)

    def get_receipt(self, receipt_id: bytes) -> bytes | None:
        """A receipt of the LocalLog not yet published counts as logged: it will be public before
        any push (a write pending at a crash while local-only is completed, not dropped)."""
        if not self._published:
            mine = self.log.get(receipt_id)
            if mine is not None:
                return mine
        return super().get_receipt(receipt_id)

    def push(self, req: messages.PushRequest) -> messages.PushResult:
        self._publish()
        return super().push(req)

    def erase(self, receipts: list[bytes]) -> messages.EraseResult:
        self._publish()
        return super().erase(receipts)
