"""The sync client: one vault, many devices, a server that sees only ciphertext
(DESIGN.md "Sync").

    login (new device):  GET salt + public keys by vault name -> derive keys from the
                         passphrase -> owner key must match -> prove the sync key on a
                         server challenge -> verify the owner-signed metadata -> create
                         the local vault -> pull
    login (this device): register the vault under a name (keys, owner-signed
                         metadata, the holder's KEY receipt)
    sync:                metadata (compare-and-swap) -> push new cells -> push erasures
                         (FORGET receipts; each kept until the server's answer names its cell
                         and its receipt is proven in the verified log) -> check the log ->
                         pull the change feed from the last position -> apply this holder's
                         FORGETs the log lists but the feed left out

Every step is idempotent and each page of the feed is committed with its position,
so a sync that dies anywhere resumes where it stopped and stores nothing twice.
"""
from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

try:
    import httpx
except ImportError:  # pragma: no cover - under Pyodide, where ownmem.web.remote speaks fetch instead
    httpx = None  # type: ignore[assignment]

from ownmem.aperto import keys as aperto_keys
from ownmem.aperto.container import sign_metadata
from ownmem.aperto.model import LEGACY_VERSION
from ownmem.crypto import CryptoProvider, cbor, random_bytes, run_sync
from ownmem.errors import (
    MalformedInput,
    NoSuchVault,
    OwnmemError,
    PassphraseChanged,
    SyncError,
    VaultError,
    WireError,
    WrongPassphrase,
)
from ownmem.purposes import Purpose
from ownmem.saihm.cell import Cell, CellRefused, check_cell, make_cell, verify_cell
from ownmem.saihm.receipt import coarse_time, make_receipt, parse_receipt
from ownmem.vault import local_receipts, recovery, rekey, rotate
from ownmem.vault.devicekey import DEVICE_KEY, DEVICE_LABEL, DeviceAuth, clean_label, default_label, device_auth
from ownmem.vault.logwatch import LogWatch, forget_log
from ownmem.vault.metadata import (
    Metadata,
    check_metadata_seen,
    merge_metadata,
    note_metadata_seen,
    parse_metadata,
    take_successions,
)
from ownmem.vault.remote import Remote
from ownmem.vault.store import PublicIdentity, Store, StoredObject
from ownmem.vault.syncrules import erasure_answer, erasure_refusal, runs
from ownmem.vault.unlock import Vault
from ownmem.vault.vault import SYNC_INFO, UnlockedVault
from ownmem.wire import messages, signed
from ownmem.wire.errors import ErrorCode
from ownmem.wire.limits import MAX_BODY, MAX_RECEIPTS

T = TypeVar("T")

TIER = "STANDARD"
KEK_VERSION = 1        # a scope's first KEK generation; a rotation counts up (vault/rotate.py)
PUSH_BATCH = 1000
REWRAP_BATCH = 1000    # new wrapped DEKs of a scope rotation per request (vault/rotate.py)
# Requests are bounded by size as well as count: a sealed object may be up to 1 MiB, so 1000
# cells can be far over the server's 32 MiB body limit, and 2000 hex FORGET receipts (~7 KB
# each) far over its 1 MiB JSON limit; a 413 there used to stop every later sync of the vault.
PUSH_BYTES = MAX_BODY // 2
ERASE_BYTES = 1 << 19
# while an erasure waits for the server's confirmation, ``watch`` asks again this often rather
# than only at the server's next event (a server that swallowed it sends none)
ERASE_RETRY = 5.0
# inclusion proofs that may fail in one push before the rest wait for the next sync: each proof is
# a request, and a log that cannot prove three will not prove a thousand (nor should it cost them);
# also how many unconfirmed cells of one answer are named one by one (the rest are counted)
MAX_UNPROVEN = 3


# ---------------------------------------------------------------- the client

@dataclass
class SyncReport:
    pushed: int = 0
    pulled: int = 0
    erased_remote: int = 0
    erased_here: int = 0
    metadata_version: int = 0
    scope_conflicts: list[str] = field(default_factory=list)
    # what the server sent that this device did not apply, one sentence each, for the person
    # (an erasure the owner did not sign, a cell that is not what it claims): never silent
    refusals: list[str] = field(default_factory=list)


class Syncer:
    def __init__(self, v: UnlockedVault, remote: Remote) -> None:
        self.v, self.remote = v, remote
        self.store: Store = v.store
        self._log: LogWatch | None = None
        self.erasures_waiting = False    # the last push left an erasure the server has not confirmed

    # ----------------------------------------------------------- state
    @staticmethod
    def linked(store: Store) -> tuple[str, str] | None:
        url, name = store.sync_get("server"), store.sync_get("name")
        return (url.decode(), name.decode()) if url and name else None

    def _seq(self) -> int:
        raw = self.store.sync_get("pull_seq")
        return int(raw.decode()) if raw else 0

    def ensure_login(self) -> None:
        if self.remote.token is None:
            self.remote.login(self.v.sync_key(), device_auth(self.store, self.v.identity.sign.seed,
                                                             self.v.purpose_key(Purpose.DEVICE_LABEL), self.v.crypto))

    def _call(self, fn: Callable[[], T]) -> T:
        """One retry after re-authenticating: credentials are short-lived."""
        self.ensure_login()
        try:
            return fn()
        except SyncError as e:
            if e.status != 401:
                raise
            self.remote.token = None
            self.ensure_login()
            return fn()

    # ----------------------------------------------------------- metadata
    def metadata_doc(self, ident: aperto_keys.Identity | None = None) -> Metadata:
        """This device's view, signed by ``ident`` (the vault's keys; a passphrase change passes
        the new ones while the store already holds them)."""
        ident = ident or self.v.identity
        pub = self.v.public()
        kit = recovery.recovery_slot(self.store)
        return Metadata(pub, frozenset(self.store.revoked_keys()), self.v.sync_key().public, self.v.holder().public,
                        run_sync(sign_metadata(self.v.crypto, ident, pub)), tuple(self.v.successions()),
                        None if kit is None else recovery.record(kit),
                        {sid: g for sid, g in self.store.kek_gens().items() if g[0] > 1 or g[1] is not None})

    def _signed(self, version: int, doc: bytes, ident: aperto_keys.Identity | None = None) -> bytes:
        return run_sync(self.v.crypto.ed25519_sign((ident or self.v.identity).sign.seed,
                                              signed.metadata_message(self.remote.name, version, doc)))

    def _revoked_base(self) -> frozenset[bytes]:
        """The revocation list this device and the server last agreed on (empty if never)."""
        raw = self.store.sync_get("revoked_base")
        return frozenset(cbor.decode(raw)) if raw else frozenset()

    def _set_revoked_base(self, revoked: frozenset[bytes]) -> None:
        with self.store.transaction():
            self.store.sync_set("revoked_base", cbor.encode(sorted(revoked)))

    def sync_metadata(self, report: SyncReport) -> None:
        for _ in range(8):  # compare-and-swap: retry on a concurrent update
            held = self._call(self.remote.get_metadata)
            version, doc = held.version, held.metadata
            if not run_sync(self.v.crypto.ed25519_verify(self.v.identity.sign_pub, held.signature,
                                                    signed.metadata_message(self.remote.name, version, doc))):
                check_metadata_seen(self.store, version, doc)    # a replay from before a change: refused as such
                info = self.remote.lookup()
                if info is not None and info.owner_pub in self.v.superseded().values():
                    raise SyncError("the server shows this vault's keys from before its passphrase change: "
                                    "refused, nothing changed (a rollback, or another server)")
                if info is not None and info.owner_pub != self.v.identity.sign_pub:
                    raise PassphraseChanged()   # proven only with the new passphrase (vault/rekey_sync.py)
                raise SyncError("the server's vault metadata is not signed by this vault's owner key")
            check_metadata_seen(self.store, version, doc)
            remote = parse_metadata(doc)
            take_successions(self.v, remote.successions)
            scopes, keys, revoked, conflicts = merge_metadata(self.v.public(), self.store.revoked_keys(), remote,
                                                              self._revoked_base())
            report.scope_conflicts = sorted(set(report.scope_conflicts) | set(conflicts))
            kit = recovery.merge_kit(recovery.recovery_slot(self.store), remote.recovery)
            with self.store.transaction():
                if kit is not None and kit != recovery.recovery_slot(self.store):
                    recovery.set_kit(self.store, kit)
                have = {s.scope_id: name for name, s in self.store.scopes().items()}
                for name, s in scopes.items():   # renames first: one may free a name for the scope that keeps it
                    if have.get(s.scope_id, name) != name:
                        self.store.rename_scope(s.scope_id, name)
                for s in scopes.values():
                    if s.scope_id not in have:
                        self.store.add_scope(s)
                for kid in set(self.store.known_keys()) - set(keys):
                    self.store.remove_known_key(kid)
                for kid, pub in keys.items():
                    self.store.add_known_key(kid, pub)
                for kid in revoked:
                    self.store.add_revoked(kid)
                for kid in self.store.revoked_keys() - revoked:
                    self.store.unrevoke(kid)
                note_metadata_seen(self.store, version, doc)
            rotate.follow(self.v, remote.generations, {s.scope_id: s for s in remote.vault_public.scopes.values()})
            mine = self.metadata_doc()
            if (set(mine.vault_public.scopes) == set(remote.vault_public.scopes)
                    and mine.generations == remote.generations
                    and mine.successions == remote.successions
                    and dict(mine.vault_public.known_keys) == dict(remote.vault_public.known_keys)
                    and mine.revoked == remote.revoked and mine.amem_sig == remote.amem_sig
                    and mine.recovery == remote.recovery):
                report.metadata_version = version
                self._set_revoked_base(mine.revoked)
                return
            new = mine.encode()
            try:
                update = messages.MetadataUpdate(version, new, self._signed(version + 1, new))
                report.metadata_version = self._call(lambda: self.remote.put_metadata(update))  # noqa: B023 (run at once)
                with self.store.transaction():
                    note_metadata_seen(self.store, report.metadata_version, new)
                self._set_revoked_base(mine.revoked)
                return
            except SyncError as e:
                if e.server_code != ErrorCode.STALE_VERSION:
                    raise
        raise SyncError("the vault metadata keeps changing on the server; try again")

    # ----------------------------------------------------------- push
    def _cell_for(self, row: StoredObject, now: int) -> tuple[bytes, bytes]:
        have = self.store.cell_of(row.object_id)
        if have is not None:
            return have
        h = self.v.holder()
        # the KEK generation the DEK is wrapped under now (SAIHM: a later re-wrap leaves the cell as it is)
        c = run_sync(make_cell(self.v.crypto, xi=h.xi, holder_id=h.holder_id,
                               kek_version=self.store.kek_gen(row.scope_id), tier=TIER,
                               cell_nonce=row.object_id, ciphertext=row.sealed, timestamp=now))
        return c.cell_id, c.to_cbor()

    def _publish_local(self) -> None:
        """The receipts `ownmem agent` wrote while this vault had no server, public before any push
        (vault/local_receipts.py): SyncError until they are."""
        local_receipts.publish(self.store.folder,
                               lambda rs: self._call(functools.partial(self.remote.post_receipts, rs)),
                               lambda rs: self._call(functools.partial(self.remote.erase, rs)))

    def push_rows(self, rows: list[StoredObject]) -> list[messages.PushResult]:
        """These objects' cells to the server, each REMEMBER receipt logged first -> the
        server's answers (one per request)."""
        self._publish_local()
        now = int(time.time())
        cells = [self._cell_for(r, now) for r in rows]
        with self.store.transaction():   # cells are kept, so a retry re-sends identical bytes
            for r, (cid, cell) in zip(rows, cells, strict=True):
                self.store.put_cell(r.object_id, cid, cell, pushed=False)
        self._log_remembers([cid for cid, _ in cells], now)
        items = [messages.PushItem(cell, r.dek_wrapped) for r, (_, cell) in zip(rows, cells, strict=True)]
        out = [self._call(functools.partial(self.remote.push, messages.PushRequest(tuple(part))))
               for part in runs(items, lambda it: len(it.cell) + len(it.wrapped_dek) + 16, PUSH_BYTES)]
        with self.store.transaction():
            self.store.mark_pushed(r.object_id for r in rows)
        return out

    def push(self, report: SyncReport, progress: Callable[[int, int], None] | None = None) -> None:
        total = self.store.unpushed_count()
        while True:
            rows = self.store.unpushed(PUSH_BATCH)
            if not rows:
                break
            self.push_rows(rows)
            report.pushed += len(rows)
            if progress is not None:
                progress(report.pushed, total)
        self.push_erasures(report)

    def push_erasures(self, report: SyncReport) -> bool:
        """Send the outbox's FORGET receipts (SAIHM "Erasure").  An erasure leaves the outbox only
        once the server's answer names its cell (erased now, or before) AND its FORGET receipt is
        proven in a checkpoint this device verified: an answer that parses proves nothing, and a
        server that swallows an erasure is asked again at every sync, each time a refusal the
        person sees.  -> whether every erasure is confirmed (the outbox is empty)."""
        self._publish_local()
        outbox = self.store.erase_outbox()
        unproven = unchecked = 0
        for chunk in runs(outbox, lambda e: 2 * len(e[1]) + 4, ERASE_BYTES):
            res = self._call(functools.partial(self.remote.erase, [r for _, r in chunk]))
            named, omitted = erasure_answer([c for c, _ in chunk], res)
            report.refusals.extend(
                f"the server did not confirm the erasure of cell {c.hex()[:12]} (its answer does not name it): "
                "kept here, asked again at the next sync" for c in omitted[:MAX_UNPROVEN])
            if len(omitted) > MAX_UNPROVEN:
                report.refusals.append(f"nor of {len(omitted) - MAX_UNPROVEN} more cell(s): kept here, asked again "
                                       "at the next sync")
            confirmed = []
            for cid, receipt in chunk:
                if cid not in named:
                    continue
                if unproven >= MAX_UNPROVEN:
                    unchecked += 1
                    continue
                why = self.log_watch().erasure_unproven(cid, receipt)
                if why is not None:
                    unproven += 1
                    report.refusals.append(f"the server's erasure of cell {cid.hex()[:12]} is not proven in the "
                                           f"public log ({why}): kept here, asked again at the next sync")
                    continue
                confirmed.append(cid)
            report.erased_remote += len(set(res.erased) & set(confirmed))    # what this device could confirm
            with self.store.transaction():
                self.store.clear_erasures(confirmed)
        if unchecked:
            report.refusals.append(f"{unchecked} more erasure(s) the server answered were not checked against the "
                                   "public log this time: kept here, asked again at the next sync")
        self.erasures_waiting = bool(self.store.erase_outbox())
        return not self.erasures_waiting

    def push_rewraps(self, report: SyncReport, *, batch: int = REWRAP_BATCH,
                     after_batch: Callable[[int], None] | None = None) -> int:
        """A scope rotation's queued new wraps to the server (vault/rotate.py), ``batch`` at a time,
        each batch dequeued in the transaction after the server's yes.  -> wraps the server took."""
        sent = n = 0
        while True:
            rows = self.store.rewrap_outbox(batch)
            if not rows:
                return sent
            try:
                self._call(lambda: self.remote.rewrap([c for _, c, _ in rows], [w for _, _, w in rows]))  # noqa: B023
            except SyncError as e:
                if e.server_code != ErrorCode.UNKNOWN_CELL:
                    raise
                # one of them was erased meanwhile (by another device): the rest one by one
                for _, cid, w in rows:
                    try:
                        self._call(lambda: self.remote.rewrap([cid], [w]))   # noqa: B023
                    except SyncError as e1:
                        if e1.server_code != ErrorCode.UNKNOWN_CELL:
                            raise
                        report.refusals.append(f"the server no longer holds cell {cid.hex()[:12]}: its new key "
                                               "was not sent")
            with self.store.transaction():
                self.store.clear_rewraps(o for o, _, _ in rows)
            sent += len(rows)
            n += 1
            if after_batch is not None:
                after_batch(n)

    def _log_remembers(self, cell_ids: list[bytes], now: int) -> None:
        """SAIHM "Order of effect and receipt", "Receipt semantics": each cell's REMEMBER receipt
        (subject = cellId, holder-signed, no plaintext) is in the public log before the cell is
        pushed, so before any other device can see it.  A receipt is kept once signed and marked
        once logged: a retry re-sends the same bytes (logged idempotently) and never signs twice."""
        have = self.store.remember_receipts(cell_ids)
        new = [cid for cid in cell_ids if cid not in have]
        if new:
            h = self.v.holder()
            # the hour only (saihm.receipt.coarse_time): the log shows when a memory was saved, not the second
            made = [(cid, run_sync(make_receipt(self.v.crypto, xi=h.xi, holder_id=h.holder_id, operation="REMEMBER",
                                                subject_id=cid, timestamp=coarse_time(now))).to_cbor()) for cid in new]
            with self.store.transaction():
                for cid, r in made:
                    self.store.put_remember_receipt(cid, r)
            have.update((cid, (r, False)) for cid, r in made)
        todo = [(cid, have[cid][0]) for cid in cell_ids if not have[cid][1]]
        for chunk in runs(todo, lambda e: 2 * len(e[1]) + 4, ERASE_BYTES, MAX_RECEIPTS):
            logged = set(self._call(functools.partial(self.remote.post_receipts, [r for _, r in chunk])))
            if any(parse_receipt(r).receipt_id not in logged for _, r in chunk):
                raise WireError("the server did not log every REMEMBER receipt it was sent")
            with self.store.transaction():
                self.store.mark_remember_logged(c for c, _ in chunk)

    # ----------------------------------------------------------- pull
    def pull(self, report: SyncReport, progress: Callable[[int, int], None] | None = None) -> bool:
        """Apply the change feed from the stored position.  -> whether metadata changed."""
        meta_changed = False
        since = self._seq()
        holder = self.v.holder()
        holder_id = holder.holder_id
        while True:
            page = self._call(lambda: self.remote.changes(since))  # noqa: B023 (run at once, in this turn)
            nxt, last = page.next_since, page.last_seq
            present = self.store.object_ids()
            erased = self.store.erased_ids()
            new_objects: list[StoredObject] = []
            replaced: list[StoredObject] = []
            new_cells: list[tuple[bytes, bytes, bytes]] = []
            # cellIds as the store will map them once this page's cells are in (a replacement
            # cell takes its object over from the old cellId, whose erasure follows in the feed)
            cell_of: dict[bytes, bytes | None] = {}
            gone: list[bytes] = []
            wraps: list[messages.WrapChange] = []
            # scopes in the middle of a rotation: a cell's wrap may be under their retiring KEK
            retiring = {sid for sid, (_, r) in self.store.kek_gens().items() if r is not None}
            requeue: list[bytes] = []       # pulled under a retiring KEK: re-wrapped here, for the server too
            refused_cells = 0
            for row in page.rows:
                if isinstance(row, messages.MetaChange):
                    meta_changed = True
                elif isinstance(row, messages.WrapChange):
                    wraps.append(row)
                elif isinstance(row, messages.EraseChange):
                    why = erasure_refusal(self.v.crypto, row, holder.public)
                    if why is not None:
                        report.refusals.append(why)
                        continue
                    oid = cell_of[row.cell_id] if row.cell_id in cell_of else self.store.object_of_cell(row.cell_id)
                    if oid is not None:
                        # only once the public can see it: its receipt proven in the verified tree
                        assert row.receipt is not None
                        why = self.log_watch().forget_refusal(row.cell_id, row.receipt)
                        if why is not None:
                            report.refusals.append(why)
                            continue
                        gone.append(oid)
                elif isinstance(row, messages.CellChange):   # an ErasedCell has nothing to store
                    cell, wrapped = row.cell, row.wrapped_dek
                    try:
                        # the server's checks except the signature, so a lying server cannot
                        # mislabel a cell; the object itself is authenticated when opened
                        checked = run_sync(check_cell(cell, holder_id, verify_signature=None))
                    except CellRefused:
                        refused_cells += 1
                        continue
                    so = checked.sealed
                    if so.object_id in erased:
                        continue
                    if so.scope_id in retiring:
                        wrapped, again = rotate.adopt_wrap(self.v, so.scope_id, wrapped)
                        if again:
                            requeue.append(so.object_id)
                    stored = StoredObject(so.object_id, so.scope_id, so.format_version, so.encoded, wrapped)
                    if so.object_id in present:
                        if not self._is_replacement(stored, checked.cell, holder.public):
                            continue
                        old = self.store.cell_of(so.object_id)
                        if old is not None:
                            cell_of[old[0]] = None
                        replaced.append(stored)
                    else:
                        present.add(so.object_id)
                        new_objects.append(stored)
                    cell_of[checked.cell.cell_id] = so.object_id
                    new_cells.append((so.object_id, checked.cell.cell_id, cell))
            if refused_cells:
                report.refusals.append(f"{refused_cells} cell(s) from the server were not what they claim "
                                       "(another holder's, or altered): not stored")
            with self.store.transaction():
                self.store.put_objects(new_objects)
                for r in replaced:
                    self.store.replace_object(r)
                for oid, cid, cell in new_cells:
                    self.store.put_cell(oid, cid, cell, pushed=True)
                if gone:
                    self.store.erase(gone)
                self.store.queue_rewraps(requeue)
                if wraps:
                    report.refusals.extend(self._take_wraps(wraps))
                self.store.sync_set("pull_seq", str(nxt).encode())
            if gone:
                self.store.checkpoint()
            report.pulled += len(new_objects)
            report.erased_here += len(gone)
            if progress is not None:
                progress(nxt, last)
            since = nxt
            # an empty page that says "more" is a change committing as the server read the feed;
            # it is pulled on the next sync, and a server cannot keep this loop spinning
            if not page.more or not page.rows:
                return meta_changed

    def _take_wraps(self, wraps: list[messages.WrapChange]) -> list[str]:
        """Within the page's transaction: the new wrapped DEKs of a scope rotation another device
        made, each only if it opens under the scope's KEK in force to the DEK held here (an old
        wrap handed back, or a forged one, is refused and the wrap held here kept).  -> refusals."""
        take: list[tuple[bytes, bytes]] = []
        refused = 0
        scopes = {s.scope_id: s for s in self.store.scopes().values()}
        gens = self.store.kek_gens()
        for w in wraps:
            oid = self.store.object_of_cell(w.cell_id)
            have = self.store.get_object(oid) if oid is not None else None
            if w.wrapped_dek is None or have is None or have.dek_wrapped == w.wrapped_dek:
                continue
            scope = scopes.get(have.scope_id)
            if scope is None:
                continue
            retiring = gens.get(have.scope_id, (1, None))[1]
            old = None if retiring is None else rotate.retiring_kek(self.v, have.scope_id, retiring)
            if run_sync(rotate.wrap_accepted(self.v.crypto, w.wrapped_dek, have.dek_wrapped, self.v.kek(scope), old)):
                take.append((have.object_id, w.wrapped_dek))
            else:
                refused += 1
        self.store.set_wraps(take)
        return [f"{refused} new key wrap(s) from the server do not open under the scope's key in force to the "
                "memory's key: refused, the key held here kept"] if refused else []

    def _is_replacement(self, new: StoredObject, cell: Cell, holder_public: bytes) -> bool:
        """A cell for an object this device holds replaces it only as migration makes one: a
        format_version 2 object in place of a version 1 object, in a cell the vault's own
        holder signed (the one check of the cell's signature a device makes: the server could
        otherwise swap any object's contents for another authentic one)."""
        have = self.store.get_object(new.object_id)
        if have is None or have.format_version != LEGACY_VERSION or new.format_version == LEGACY_VERSION:
            return False
        try:
            run_sync(verify_cell(self.v.crypto, cell, holder_public))
        except OwnmemError:
            return False
        return True

    def log_watch(self) -> LogWatch:
        """The public log's checks for this sync (ownmem.vault.logwatch)."""
        if self._log is None:
            self._log = LogWatch(self.v, self.remote, self._call)
        return self._log

    def sync_once(self, progress: Callable[[int, int], None] | None = None) -> SyncReport:
        report = SyncReport()
        self.sync_metadata(report)
        self.push(report)
        self.push_rewraps(report)
        self._log = None                 # each sync verifies the checkpoint afresh
        checked = self.log_watch().check()
        report.refusals.extend(checked.refusals)
        report.erased_here += checked.erased
        if self.pull(report, progress):
            self.sync_metadata(report)
        self.apply_logged_forgets(report)
        return report

    def apply_logged_forgets(self, report: SyncReport) -> None:
        """SAIHM "Erasure": a FORGET receipt of this vault's holder, in the verified log, for a cell
        this device still holds after pulling the whole feed is an erasure the server's feed
        left out (dropped, or replaced by another row): applied here, and reported."""
        lw = self.log_watch()
        try:
            found = lw.held_forgets()
        except (SyncError, MalformedInput) as e:
            if isinstance(e, SyncError) and e.status is None and not isinstance(e, WireError):
                raise        # the server went away: the sync fails here as at any other step
            report.refusals.append(f"could not read this vault's FORGET receipts in the public log ({e})")
            return
        if found.forgets:
            self.pull(report)        # the feed, read after the log, carries every FORGET the log lists
        checked = lw.apply_held_forgets(found)
        report.refusals.extend(checked.refusals)
        report.erased_here += checked.erased

    def wants_sync(self, last_seq: int) -> bool:
        """Whether an event naming the server's ``last_seq`` calls for a sync (a subclass that
        knows the change is its own may say no)."""
        return True

    def watch(self, on_report: Callable[[SyncReport], None], *, stop: Callable[[], bool] = lambda: False) -> None:
        """Sync, then follow the server's live event stream; local changes are pushed as they appear."""
        on_report(self.sync_once())
        while not stop():
            try:
                if self.erasures_waiting:
                    time.sleep(ERASE_RETRY)
                    on_report(self.sync_once())
                    continue
                self.ensure_login()
                for seq in self.remote.events():
                    if self.wants_sync(seq):
                        on_report(self.sync_once())
                    if stop() or self.erasures_waiting:
                        break
            except SyncError as e:
                if e.status == 401:
                    self.remote.token = None
                time.sleep(1.0)


# ---------------------------------------------------------------- login

def link(v: UnlockedVault, server: str, name: str, *, client: httpx.Client | None = None,
         remote: Remote | None = None, another_name: bool = False, follow: bool = False) -> Syncer:
    """Register this device's vault under ``name`` (or re-link it if it is already there).

    If its keys hold a vault of another name on that server (a backup restored under a new
    name), the server refuses a second one (``keys_registered``, naming it): with ``follow``
    the vault is linked to that name instead (the Syncer's ``remote.name`` says which), else
    the refusal names it.  ``another_name`` registers the second name anyway."""
    remote = remote if remote is not None else Remote(server, name, client=client)
    try:
        return _link(v, remote, another_name)
    except SyncError as e:
        if e.server_code != ErrorCode.KEYS_REGISTERED or e.vault is None:
            raise
        if not follow:
            raise SyncError(f"this vault is on this server already, named {e.vault!r}: link it under that name",
                            e.server_code, e.status, e.vault) from None
        remote.name = e.vault
        return _link(v, remote, False)


def _link(v: UnlockedVault, remote: Remote, another_name: bool) -> Syncer:
    name = remote.name
    s = Syncer(v, remote)
    info = remote.lookup()
    ident = v.identity
    # A name this vault holds already is re-linked.  Any other is registered: a server answers
    # every name with keys (decoys for the names it does not hold), so that a name is free is
    # learnt only by registering it, and a taken one answers name_taken.
    if info is None or info.owner_pub != ident.sign_pub:
        h, sync = v.holder(), v.sync_key()
        pub = v.store.identity()
        assert pub is not None
        doc = s.metadata_doc().encode()
        key_receipt = run_sync(make_receipt(v.crypto, xi=h.xi, holder_id=h.holder_id, operation="KEY",
                                            subject_id=h.holder_id, timestamp=int(time.time()), detail=h.public))
        reg = signed.register_message(name, pub.salt, ident.sign_pub, sync.public, ident.ka_pub, h.public)
        proof = run_sync(v.crypto.ed25519_sign(sync.seed, reg))
        holder_proof = run_sync(v.crypto.mldsa65_sign(h.xi, reg, signed.REGISTER_HOLDER_CONTEXT))
        try:
            remote.register(messages.Registration(name, pub.salt, ident.sign_pub, sync.public, ident.ka_pub, h.public,
                                              doc, s._signed(1, doc),  # noqa: SLF001 (this module's own Syncer)
                                              key_receipt.to_cbor(), proof, holder_proof),
                            another_name=another_name)
        except SyncError as e:
            if e.server_code == ErrorCode.NAME_TAKEN:
                raise SyncError(f"the vault name {name!r} is taken on this server by another identity",
                                e.server_code, e.status) from None
            raise
    with v.store.transaction():
        if v.store.sync_get("server") not in (None, remote.base.encode()):
            forget_log(v.store)           # linked to another server: another log
        v.store.sync_set("server", remote.base.encode())
        v.store.sync_set("name", name.encode())
    _pin_log_key(s)
    return s


def _pin_log_key(s: Syncer) -> None:
    """Pin the log's key at link time; if the server cannot say now, the first sync does."""
    try:
        s.log_watch().pin()
    except OwnmemError:
        pass


def login_new_device(folder: str | Path, server: str, name: str, passphrase: str, *,
                     client: httpx.Client | None = None) -> Syncer:
    """A device with no local vault: derive the keys from the passphrase and the server's
    salt, prove them, check the owner-signed metadata, create the local vault."""
    vault = Vault(folder)
    if vault.exists():
        raise VaultError(f"a vault already exists at {vault.folder}")
    remote = Remote(server, name, client=client)
    try:
        return adopt_from_server(lambda: Store(vault.folder), remote, passphrase, vault.crypto)
    except BaseException:
        if client is None and remote.http is not None:   # ours to close: the login did not happen
            remote.http.close()
        raise


def adopt_from_server(open_store: Callable[[], Store] | Store, remote: Remote, passphrase: str, p: CryptoProvider,
                      *, master: bytes | None = None, label: str | None = None) -> Syncer:
    """The new-device flow over any store; the store is touched only once the keys are proven."""
    return run_sync(adopt_from_server_async(open_store, remote, passphrase, p, master=master, label=label))


async def adopt_from_server_async(open_store: Callable[[], Store] | Store, remote: Remote, passphrase: str,
                                  p: CryptoProvider, *, master: bytes | None = None,
                                  label: str | None = None) -> Syncer:
    """``adopt_from_server`` awaiting its crypto (the browser without JSPI: Argon2id from the
    server's salt in hash-wasm, not in JavaScript); the HTTP exchanges stay synchronous."""
    name = remote.name
    info = remote.lookup()
    if info is None:
        raise SyncError(f"no vault named {name!r} on {remote.base}")
    salt = info.salt
    if master is None:
        master = await aperto_keys.master_from_passphrase(p, passphrase, salt)
    ident = await aperto_keys.identity_from_master(p, master)
    root_wrap = await rekey.real_root_wrap(p, master, info.root_wrap)
    if root_wrap is not None:       # a vault whose passphrase changed: its root is kept wrapped
        ident = await rekey.identity_for(p, master, root_wrap)
    if ident.sign_pub != info.owner_pub or ident.ka_pub != info.ka_pub:
        # A decoy's keys (a name nobody holds) never match either: only the name check, paid
        # from the address's registration budget, tells the two apart (docs/decisions.md, issue 23)
        if remote.name_taken() is False:
            raise NoSuchVault(f"no vault named {name!r} on {remote.base}")
        raise WrongPassphrase("wrong passphrase for this vault (or the server serves another vault's keys)")
    # prove the sync key and read the metadata before creating anything locally
    sync_seed = await aperto_keys.derive_purpose_key(p, ident.root, SYNC_INFO)
    # this device's own key, enrolled by the owner key the passphrase just proved (vault/devicekey.py)
    seed = random_bytes(32)
    device = DeviceAuth(seed, await p.ed25519_public(seed), clean_label(label) if label else default_label(),
                        ident.sign.seed, await aperto_keys.derive_purpose_key(p, ident.root, Purpose.DEVICE_LABEL))
    try:
        remote.login(await aperto_keys.signing_key(p, sync_seed), device)
    except SyncError as e:
        if e.status != 401 or root_wrap is not None:
            raise
        # the owner keys matched, so the passphrase is right; a vault whose passphrase changed keeps
        # its root wrapped, and a wrap that does not open leaves the root unknown: a swapped lookup
        # can only deny, never hand this device keys of the server's choosing
        raise SyncError("the passphrase is right, but the server's copy of this vault's root key does not open "
                        "with it, so this device cannot prove the vault's sync key: nothing was created (the "
                        "server's answer is damaged or not this vault's)", e.server_code, e.status) from None
    held = remote.get_metadata()
    if not await p.ed25519_verify(ident.sign_pub, held.signature, signed.metadata_message(name, held.version,
                                                                                     held.metadata)):
        raise SyncError("the server's vault metadata is not signed by this vault's owner key")
    meta = parse_metadata(held.metadata)
    store = open_store() if callable(open_store) else open_store
    with store.transaction():
        store.set_identity(PublicIdentity(salt, ident.sign_pub, ident.ka_pub))
        if root_wrap is not None:
            store.replace_identity(PublicIdentity(salt, ident.sign_pub, ident.ka_pub), root_wrap)
        if meta.successions:
            store.set_successions(cbor.encode([r.encode() for r in meta.successions]))
        kit = recovery.merge_kit(None, meta.recovery)
        if kit is not None:
            recovery.set_kit(store, kit)
        for s in meta.vault_public.scopes.values():
            store.add_scope(s)
        for sid, (g, retiring) in meta.generations.items():
            store.set_kek_gen(sid, g, retiring)
        for kid, pub in meta.vault_public.known_keys.items():
            store.add_known_key(kid, pub)
        for kid in meta.revoked:
            store.add_revoked(kid)
        store.sync_set("revoked_base", cbor.encode(sorted(meta.revoked)))
        note_metadata_seen(store, held.version, held.metadata)
        store.sync_set("server", remote.base.encode())
        store.sync_set("name", name.encode())
        store.sync_set(DEVICE_KEY, device.seed)
        store.sync_set(DEVICE_LABEL, device.label.encode())
    syncer = Syncer(UnlockedVault(store, ident, p), remote)
    _pin_log_key(syncer)
    return syncer


def syncer_for(v: UnlockedVault, *, client: httpx.Client | None = None) -> Syncer:
    linked = Syncer.linked(v.store)
    if linked is None:
        raise VaultError("this vault is not linked to a server (run `ownmem login --server URL --vault-name NAME`)")
    return Syncer(v, Remote(linked[0], linked[1], client=client))
