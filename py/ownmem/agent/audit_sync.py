"""The UOMP audit of `ownmem agent` sealed in batches, anchored in the public log and synced to
every device of the person (UOMP draft-00 "Audit and Logging": "Storage", "Blockchain
Extension", "Event Types", "Batching Strategy"; DESIGN.md "Agent access"; docs/decisions.md
"UOMP audit batches").

On `ownmem agent` (``AuditSync``), every INTERVAL seconds, or at once when MAX_ENTRIES wait, or
at once when a grant, a revocation or a deletion proof is committed ("Batching Strategy": near
real-time):

    audit.db rows after the last batched one (at most MAX_ENTRIES, MAX_BYTES)
      -> per entry an event of "Event Types" (SessionGranted | SessionRevoked |
         DataDeletionProofSubmitted | GatewayAccess)
         eventHash = keccak256(keccak256(event signature) || its fields, 32-byte ABI words)
         leaf      = eventHash || SHA-256(the entry's canonical JSON)   (64 bytes)
      -> root = the RFC 9162 Merkle tree hash over the leaves (ownmem.saihm.tlog's hashing)
      -> a holder-signed SAIHM RECALL receipt, subjectId = root, no detail: POSTed to the public
         log first (SAIHM's order: the receipt, then the effect)
      -> an owner-signed control record (payload extension "uomp_audit", tag "uomp-audit"):
         {"v": 2, "stream", "seq", "first", "last", "count", "root", "sessions", "entries",
          "anchor": receipt hex}, "entries" the JSON text of an array of the entries' canonical
         JSON (version 1, still read, held a CBOR array), sealed like any memory (its own DEK),
         then pushed alone (Operator.push_own).

The server sees a cell and a receipt naming 32 bytes that are a hash of hashes: no key, no
value, no tag, no session id.  ``stream`` names one audit.db (a machine running the service);
``seq`` counts its batches from 1, so a batch a server withholds or spoils (a spoilt cell does
not pass its signature check and never arrives) leaves a gap.

Retention (ownmem.agent.retention: only past it, by the real clock): ``AuditSync.prune`` (the
service's POST /v1/audit/prune) and, on a device without the service, ``prune_batches`` record
the deletion as an entry of its own (batched, anchored and synced like any), then forget
(cryptographic erasure, FORGET receipts, as `ownmem forget`) every batch whose newest entry is
older than the cut-off.

The batches' format and their reading on any device: audit_batches.py.  Nothing here imports
the agent's HTTP code (uomp_mount.attach_audit mounts the prune route).
"""
from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ownmem.agent.audit_batches import (
    ANCHOR_OPERATION,
    ENTRY_FIELDS,
    RECORD_TAG,
    Batch,
    batch_root,
    canonical,
    read_batches,
)
from ownmem.agent.retention import PRUNED_ACTION, Pruned, check_cutoff, pruned_entry
from ownmem.agent.strangers import ACTION as STRANGER_ACTION
from ownmem.agent.ticker import Ticker
from ownmem.crypto import run_sync
from ownmem.errors import OwnmemError, SyncError
from ownmem.saihm.receipt import make_receipt, parse_receipt
from ownmem.uomp.control import AuditBatch
from ownmem.vault.vault import Entry

if TYPE_CHECKING:       # not imported at run time: the CLI's prune_batches needs neither, nor their HTTP stack
    from ownmem.agent.operator import Operator
    from ownmem.agent.uomp_api import Uomp

_log = logging.getLogger("ownmem.uomp")

INTERVAL = 2.0                       # seconds an entry waits at most before its batch is sealed
INTERVAL_ENV = "OWNMEM_UOMP_BATCH_SECONDS"   # another tick for `ownmem agent` (tests: a long one)
MAX_ENTRIES = 1000                   # entries per batch
MAX_BYTES = 256 * 1024               # JSON bytes of a batch's entries (the payload bound is 1 MiB)
STATE_FILE = "uomp-audit-sync.json"
# entries whose events "SHOULD be anchored near real-time" ("Batching Strategy"): their batch is
# sealed as soon as they are on disk, not after INTERVAL
URGENT_ACTIONS = ("grant", "revoked", "deletion_proof", PRUNED_ACTION)

# ---------------------------------------------------------------------------- retention

def erase_objects(v: Any, oids: list[bytes], now: int) -> None:
    """Cryptographic erasure of objects that are no edit chain (audit batches are never
    edited): what `UnlockedVault.forget` does for one chain, for many at once."""
    if not oids:
        return
    receipts = [(cid, v.forget_receipt(cid, now)) for cid in v.store.cell_ids_of(oids).values()]
    with v.store.transaction():
        v.store.erase(oids, now)
        for cid, r in receipts:
            v.store.queue_erasure(cid, r)
    v.store.checkpoint()


def old_batches(entries: Iterable[Entry], before: int) -> list[Batch]:
    """The batches whose newest entry is older than ``before``."""
    return [b for b in read_batches(entries) if int(b.doc["last"]) < before]


def pruning(batches: list[Batch], count: int | None = None, first: int | None = None,
            last: int | None = None) -> Pruned:
    """What forgetting ``batches`` deletes; on the agent's machine also ``count`` audit.db entries
    from ``first`` to ``last`` (the same entries the batches copy: counted once, from audit.db)."""
    streams: dict[str, tuple[int, int]] = {}
    until = 0
    for b in batches:
        s, q = b.key
        lo, hi = streams.get(s, (q, q))
        streams[s] = (min(lo, q), max(hi, q))
        try:
            until = max(until, parse_receipt(bytes.fromhex(b.doc["anchor"])).timestamp)
        except (OwnmemError, ValueError):
            pass
    if batches:
        ts = [int(b.doc.get("first", b.doc["last"])) for b in batches] + [int(b.doc["last"]) for b in batches]
        first = min([t for t in (first, min(ts)) if t is not None])
        last = max([t for t in (last, max(ts)) if t is not None])
        if count is None:
            count = sum(int(b.doc.get("count") or len(b.doc["entries"])) for b in batches)
    return Pruned(count or 0, first, last, streams, until)


def prune_batches(v: Any, syncer: Any | None, before: int, now: int | None = None) -> int:
    """A device without the agent service (its own vault unlocked here): forget every batch older
    than ``before``, after sealing the deletion's own entry as a one-entry batch of a new stream
    (anchored and synced like any batch) -> how many were forgotten.  None forgotten, nothing
    sealed."""
    t = int(time.time()) if now is None else now
    check_cutoff(before, t)
    old = old_batches(v.open_all().entries, before)
    if not old:
        return 0
    if syncer is None:
        raise SyncError("the vault is not linked to a server: the deletion could not be anchored, nothing deleted")
    e = entry_doc(pruned_entry(pruning(old), before, t))
    seal_batch(v, syncer, secrets.token_hex(8), 1, [(e, canonical(e))], {"": session_info(None)}, t)
    erase_objects(v, [b.object_id for b in old], t)
    syncer.sync_once()
    return len(old)


# ---------------------------------------------------------------------------- the writer (agent)

def seal_batch(v: Any, syncer: Any, stream: str, seq: int, entries: list[tuple[dict[str, Any], bytes]],
               sessions: dict[str, Any], now: int, lock: Any = None) -> bytes:
    """Anchor ``entries`` (entry_doc, its canonical JSON) in the public log, then seal them as
    batch ``seq`` of ``stream`` -> the record's object id (not pushed yet)."""
    docs = [d for d, _ in entries]
    root = batch_root(docs, sessions, [c for _, c in entries])
    h = v.holder()
    receipt = run_sync(make_receipt(v.crypto, xi=h.xi, holder_id=h.holder_id, operation=ANCHOR_OPERATION,
                                    subject_id=root, timestamp=now)).to_cbor()
    # SAIHM "Order of effect and receipt": the anchor is in the log before the batch exists
    logged = syncer._call(functools.partial(syncer.remote.post_receipts, [receipt]))  # noqa: SLF001
    if parse_receipt(receipt).receipt_id not in logged:
        raise SyncError("the server did not log the audit anchor")
    doc = {"v": 2, "stream": stream, "seq": seq, "first": min(d["timestamp"] for d in docs),
           "last": max(d["timestamp"] for d in docs), "count": len(docs), "root": root.hex(),
           "sessions": sessions, "entries": "[" + ",".join(c.decode() for _, c in entries) + "]",
           "anchor": receipt.hex()}
    with lock if lock is not None else contextlib.nullcontext():
        return bytes(v.add(f"UOMP audit batch {seq}", tags=(RECORD_TAG,), extensions=AuditBatch(doc).make()))


def entry_doc(e: Any) -> dict[str, Any]:
    """An audit.AuditEntry as a batch carries it (times in Unix seconds)."""
    # by name, not dataclasses.asdict: asdict deep-copies (about 100 us an entry), and the
    # writer makes one per entry it batches, on the GIL the request threads need
    d = {f: getattr(e, f) for f in ENTRY_FIELDS}
    d["tags"] = list(e.tags)
    return d


def session_info(s: Any, proofs: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What the event hashes need of a session (sessions.Session, or None if unknown), with its
    accepted deletion proofs (deletion_proof_id -> memory_hash: a hash, never a value)."""
    if s is None:
        return {"agent_id": "", "granted_tags": [], "expires_at": 0}
    tags = sorted(s.granted_scopes.read.tags) if s.granted_scopes is not None else []
    out = {"agent_id": s.agent_id, "granted_tags": tags, "expires_at": int(s.expires_at)}
    if proofs:
        out["deletion_proofs"] = dict(sorted(proofs.items()))
    return out


@dataclass
class _State:
    stream: str
    seq: int = 0
    rowid: int = 0

    @classmethod
    def load(cls, path: Path) -> _State:
        try:
            d = json.loads(path.read_text())
            return cls(str(d["stream"]), int(d["seq"]), int(d["rowid"]))
        except FileNotFoundError:
            return cls(secrets.token_hex(8))

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        os.replace(tmp, path)


@dataclass
class AuditSync:
    """Seals the audit of the running service in batches, anchors and syncs them."""

    op: Operator
    u: Uomp
    folder: Path
    interval: float = INTERVAL
    max_entries: int = MAX_ENTRIES
    now: Callable[[], int] = field(default=lambda: int(time.time()))
    sealed: int = 0                          # batches sealed by this process (tests, stats)

    def __post_init__(self) -> None:
        self._path = Path(self.folder) / STATE_FILE
        self.state = _State.load(self._path)
        self._waiting = 0
        # the entries committed by this process and not batched yet, by id: a batch is built
        # from them rather than from audit.db's sealed rows opened again
        self._recent: dict[str, Any] = {}
        self._flush = threading.Lock()
        # a failed tick leaves the entries in audit.db, after the cursor, for the next one
        self._ticker = Ticker("ownmem-uomp-audit-sync", self.interval, self.flush, "audit batch not sealed")

    def start(self) -> AuditSync:
        self._ticker.start()
        return self

    def stop(self) -> None:
        self._ticker.stop()

    def committed(self, entries: Sequence[Any]) -> None:
        """audit.AuditLog.on_commit: these entries are on disk.  A grant, a revocation or a
        deletion proof among them has its batch sealed at once ("Batching Strategy":
        authorization events and deletion proofs near real-time); access events wait for the
        tick, or for MAX_ENTRIES."""
        self._waiting += len(entries)
        if len(self._recent) > 4 * self.max_entries:
            self._recent.clear()          # not batched for long (the log unreachable): _next opens them
        self._recent.update((e.id, e) for e in entries)
        if self._waiting >= self.max_entries or any(e.action in URGENT_ACTIONS for e in entries):
            self._ticker.wake()

    def _next(self) -> list[tuple[int, dict[str, Any], bytes]]:
        """The next batch's rows after the cursor: (rowid, entry_doc, its canonical JSON)."""
        if self.u.audit.last_rowid() < self.state.rowid:
            # every row was pruned: SQLite numbers the next from 1 again, below the cursor
            self.state.rowid = 0
        rows = self.u.audit.after(self.state.rowid, self.max_entries, self._recent)
        size, out = 0, list[tuple[int, dict[str, Any], bytes]]()
        for rowid, e in rows:
            self._recent.pop(e.id, None)
            d = entry_doc(e)
            c = canonical(d)
            size += len(c)
            if out and size > MAX_BYTES:
                break
            out.append((rowid, d, c))
        if len(rows) < self.max_entries and all(d["action"] == STRANGER_ACTION for _, d, _ in out):
            # only counts of unauthenticated requests: they wait for the next batch an agent's
            # own requests make (strangers.py), so a stranger never makes a batch, a receipt or
            # a byte on the server; a window past max_entries of them (16 hours of refusals
            # and nothing else) is sealed, so the cursor can never be stuck behind them
            return []
        return out

    def flush(self) -> int:
        """Seal, anchor and sync every batch that is due -> how many were sealed."""
        done = 0
        with self._flush:
            self._waiting = 0
            while not self._ticker.stopping:
                rows = self._next()
                if not rows:
                    break
                try:
                    self._seal([(d, c) for _, d, c in rows], rows[-1][0])
                except SyncError as e:
                    _log.info("audit batch waits for the log (%s)", e)
                    return done
                done += 1
                if len(rows) < self.max_entries:
                    break
        return done

    def _seal(self, entries: list[tuple[dict[str, Any], bytes]], last_rowid: int) -> None:
        """Seal ``entries`` (entry_doc, its canonical JSON) as the next batch."""
        docs = [d for d, _ in entries]
        store = self.u.sessions
        proved = {d["session_id"] for d in docs if d["action"] == "deletion_proof" and d["allowed"]}
        sessions = {sid: session_info(store.get(sid), store.proofs_of(sid) if sid in proved else None)
                    for sid in sorted({d["session_id"] for d in docs})}
        seq = self.state.seq + 1
        oid = seal_batch(self.op.v, self.op.syncer, self.state.stream, seq, entries, sessions, self.now(),
                         self.op.lock)
        self.state.seq, self.state.rowid = seq, last_rowid
        self.state.save(self._path)
        self.sealed += 1
        try:
            self.op.push_own(oid)
        except SyncError as e:
            _log.info("audit batch %d kept for the next sync (%s)", seq, e)

    def prune(self, before: int) -> tuple[int, int]:
        """The agent's machine: drop audit.db's entries and forget the synced batches older than
        ``before`` -> (entries, batches).  Refused (retention.RetentionRefused) inside the retention
        by this service's clock; the deletion's own entry is on disk before anything is deleted,
        and its batch is sealed at once (an urgent action), before the erasures are synced."""
        op, audit = self.op, self.u.audit
        now = self.now()
        check_cutoff(before, now)
        n, first, last = audit.span(before)
        with op.lock:
            old = old_batches([e for e, _, _ in op._opened.values()], before)  # noqa: SLF001
        if not n and not old:
            return 0, 0
        audit.record(pruned_entry(pruning(old, n, first, last), before, now))
        dropped = audit.prune(before)
        with op.lock:
            erase_objects(op.v, [b.object_id for b in old], now)
            op.refresh()
        self.flush()
        if old:
            try:
                op.syncer.sync_once()
            except SyncError as e:
                _log.info("audit erasures kept for the next sync (%s)", e)
        return dropped, len(old)
