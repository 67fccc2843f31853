"""The UOMP audit on every device of the person, anchored in the public log (UOMP draft-00
"Audit and Logging": "Storage", "Blockchain Extension", "Event Types", "Batching Strategy";
DESIGN.md "Agent access"; docs/decisions.md "UOMP audit batches").

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

On any device (``audit_view``): the batches that open as the owner's own; for each shown, the
entries again hashed to the root it names, the receipt checked (RECALL, subject = root, this
holder's signature) and proven included in the log's tree this device verified; a mismatch, a
missing or unproven anchor, a gap in a stream's seq (from 1: below the oldest batch held too,
unless a deletion entry accounts for it), no batch at all while the log holds this holder's
anchors of the last RETENTION_DAYS: a warning on that batch's rows, or on the view.

Retention (ownmem.agent.retention: only past it, by the real clock): ``AuditSync.prune`` (the
service's POST /v1/audit/prune) and, on a device without the service, ``prune_batches`` record
the deletion as an entry of its own (batched, anchored and synced like any), then forget
(cryptographic erasure, FORGET receipts, as `ownmem forget`) every batch whose newest entry is
older than the cut-off.

Nothing here imports the agent's HTTP or JWT code at module level: the reader runs in the
browser too, where keccak256 comes from @noble/hashes through the worker's glue.
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
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ownmem.aperto.model import Trust
from ownmem.crypto import run_sync, sha256
from ownmem.errors import OwnmemError, SyncError
from ownmem.saihm import tlog
from ownmem.saihm.receipt import make_receipt, parse_receipt, verify_receipt
from ownmem.vault.vault import Entry
from ownmem.agent.retention import DAY, PRUNED_ACTION, RETENTION_DAYS, Pruned, accounted, check_cutoff, pruned_entry, uncovered
from ownmem.agent.strangers import ACTION as STRANGER_ACTION
from ownmem.agent.ticker import Ticker

_log = logging.getLogger("ownmem.uomp")

AUDIT_RECORD = "uomp_audit"          # one of control.CONTROL_EXTENSIONS
RECORD_TAG = "uomp-audit"
ANCHOR_OPERATION = "RECALL"          # read-only calls' receipts "under operator policy" (SAIHM)
INTERVAL = 2.0                       # seconds an entry waits at most before its batch is sealed
INTERVAL_ENV = "OWNMEM_UOMP_BATCH_SECONDS"   # another tick for `ownmem agent` (tests: a long one)
MAX_ENTRIES = 1000                   # entries per batch
MAX_BYTES = 256 * 1024               # JSON bytes of a batch's entries (the payload bound is 1 MiB)
STATE_FILE = "uomp-audit-sync.json"
MAX_SHOWN = 500                      # entries a view shows (newest first)
ANCHOR_PAGES = 20                    # pages of 1,000 anchors read when a device holds no batch

EVENT_SIGNATURES = {
    "SessionGranted": "SessionGranted(bytes32,bytes32,uint256)",
    "SessionRevoked": "SessionRevoked(bytes32,bytes32)",
    "GatewayAccess": "GatewayAccess(bytes32,bytes32,bytes32,bool)",
    "DataDeletionProofSubmitted": "DataDeletionProofSubmitted(bytes32,bytes32,bytes32)",
}
# entries whose events "SHOULD be anchored near real-time" ("Batching Strategy"): their batch is
# sealed as soon as they are on disk, not after INTERVAL
URGENT_ACTIONS = ("grant", "revoked", "deletion_proof", PRUNED_ACTION)
_ENTRY_FIELDS = ("id", "timestamp", "session_id", "agent_id", "action", "key", "tag", "tags", "allowed", "reason",
                 "request_size", "response_size", "query_count_remaining")


# ---------------------------------------------------------------------------- hashing (pure)

def keccak256(data: bytes) -> bytes:
    """Keccak-256 (Ethereum's, not SHA3-256): pycryptodome; in the browser, @noble/hashes."""
    try:
        from Crypto.Hash import keccak
    except ImportError:     # Pyodide: the bundle carries no pycryptodome; the worker's glue does it
        import ownmem_js
        from pyodide.ffi import to_js

        return bytes(ownmem_js.keccak256(to_js(data)).to_bytes())
    return bytes(keccak.new(digest_bits=256, data=data).digest())


def _word(v: int | bool) -> bytes:
    return int(v).to_bytes(32, "big")


@functools.lru_cache(maxsize=4096)
def _text_hash(s: str) -> bytes:
    """keccak256 of a text that repeats (event signatures, agent ids, paths): in the browser each
    hash is a call into JavaScript, so a batch's few distinct ones are made once."""
    return keccak256(s.encode())


@functools.lru_cache(maxsize=1024)
def session_hash(session_id: str, agent_id: str, granted_tags: tuple[str, ...]) -> bytes:
    """sessionHash = keccak256(session_id || agent_id || granted_tags_json); the JSON is the
    granted read tags as a compact array, in the order the batch lists them."""
    tags = json.dumps(list(granted_tags), separators=(",", ":"), ensure_ascii=False)
    return keccak256(session_id.encode() + agent_id.encode() + tags.encode())


def request_path(e: Mapping[str, Any]) -> str:
    """The path of the request an entry records (endpointHash's input).  Entries no request
    made (a deletion proof found missing at expiry) name the endpoint the request was owed to."""
    action, sid = e.get("action"), e.get("session_id") or ""
    if action in ("write_confirmed", "write_discarded"):
        return "staged/" + str(action)[6:]        # the person's answer (`ownmem staged`, the PWA)
    if isinstance(action, str) and action.startswith("write_"):
        return "/saihm"                           # saihm_remember on the SAIHM binding (staging.WriteAudit)
    if action in ("read", "write") and e.get("key") is not None:
        return "/v1/memory/" + str(e["key"])
    return {"read": "/v1/memory", "aggregate": "/v1/memory/aggregate", "query": "/v1/memory/query",
            "closed": f"/v1/sessions/{sid}/close", "deletion_proof": f"/v1/sessions/{sid}/deletion-proof",
            "deletion_proof_missing": f"/v1/sessions/{sid}/deletion-proof",
            "grant": f"/v1/sessions/{sid}/grant"}.get(str(action), f"/v1/sessions/{sid}/{action}")


def deletion_proof_hash(proof_id: str, session_id: str, memory_hash: str) -> bytes:
    """deletionProofHash = keccak256(deletion_proof_id || session_id || memory_hash), each as the
    UTF-8 of the string the proof carried ("sha256:..." for memory_hash)."""
    return keccak256(proof_id.encode() + session_id.encode() + memory_hash.encode())


def event_hash(e: Mapping[str, Any], session: Mapping[str, Any]) -> bytes:
    """The "Event Types" event of an entry, hashed as the EVM would see it: keccak256 of the
    event's topic (keccak256 of its signature) followed by each field as a 32-byte word."""
    agent = str(e.get("agent_id") or "")
    sh = session_hash(str(e.get("session_id") or ""), agent, tuple(str(t) for t in session.get("granted_tags") or ()))
    ah = _text_hash(agent)
    action = e.get("action")
    proofs = session.get("deletion_proofs") or {}
    if action == "grant" and e.get("allowed"):
        name, words = "SessionGranted", sh + ah + _word(int(session.get("expires_at") or 0))
    elif action == "revoked":
        name, words = "SessionRevoked", sh + ah
    elif action == "deletion_proof" and e.get("allowed") and isinstance(proofs, dict) \
            and isinstance(e.get("key"), str) and e["key"] in proofs:
        name, words = "DataDeletionProofSubmitted", sh + ah + deletion_proof_hash(
            str(e["key"]), str(e.get("session_id") or ""), str(proofs[e["key"]]))
    else:
        # a refused or replayed deletion proof is an access refused: GatewayAccess, allowed false
        name, words = "GatewayAccess", sh + ah + _text_hash(request_path(e)) + _word(bool(e.get("allowed")))
    return keccak256(_text_hash(EVENT_SIGNATURES[name]) + words)


def canonical(e: Mapping[str, Any]) -> bytes:
    return json.dumps(dict(e), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def leaf(e: Mapping[str, Any], session: Mapping[str, Any], canon: bytes | None = None) -> bytes:
    """The Merkle leaf of an entry: its event's hash, then SHA-256 of the whole entry, so that
    the root also covers what the event leaves out (time, key, reason): altering any field of
    an entry changes the root.  SHA-256, not keccak256, for the entry: the draft asks keccak of
    the events only, and one keccak per entry is what the writer pays at ~1,800 entries/s."""
    return event_hash(e, session) + sha256(canonical(e) if canon is None else canon)


def merkle_root(leaves: list[bytes]) -> bytes:
    """RFC 9162 section 2.1.1 MTH over the leaves (the public log's own hashing)."""
    def mth(lo: int, hi: int) -> bytes:
        if hi - lo == 1:
            return tlog.leaf_hash(leaves[lo])
        k = 1 << ((hi - lo - 1).bit_length() - 1)
        return tlog.node_hash(mth(lo, lo + k), mth(lo + k, hi))
    return mth(0, len(leaves)) if leaves else tlog.EMPTY_HASH


def batch_root(entries: Sequence[Mapping[str, Any]], sessions: Mapping[str, Mapping[str, Any]],
               canons: Sequence[bytes] | None = None) -> bytes:
    """``canons``: each entry's canonical JSON when the caller made it already (the writer)."""
    cs: Sequence[bytes | None] = canons if canons is not None else [None] * len(entries)
    return merkle_root([leaf(e, sessions.get(str(e.get("session_id") or ""), {}), c) for e, c in zip(entries, cs)])


# ---------------------------------------------------------------------------- reading (pure + log)

@dataclass(frozen=True, slots=True)
class Batch:
    doc: dict[str, Any]
    object_id: bytes

    @property
    def key(self) -> tuple[str, int]:
        return (str(self.doc["stream"]), int(self.doc["seq"]))

    @property
    def root(self) -> bytes:
        return bytes.fromhex(self.doc["root"])


def _normal(d: Any) -> Any:
    """A batch document as readers see it: version 2 carries its entries as one JSON text (the
    pure-Python CBOR codec spent more of the agent's time on 1,000 small maps than the Guard
    did), version 1 as a CBOR array; either way, "entries" a list after this."""
    if isinstance(d, dict) and d.get("v") == 2 and isinstance(d.get("entries"), str):
        try:
            return {**d, "entries": json.loads(d["entries"])}
        except (ValueError, RecursionError):
            return None
    return d


def _valid(d: Any) -> bool:
    try:
        return (isinstance(d, dict) and d.get("v") in (1, 2) and isinstance(d.get("stream"), str)
                and type(d.get("seq")) is int and isinstance(d.get("entries"), list)
                and isinstance(d.get("sessions"), dict) and len(bytes.fromhex(d["root"])) == 32
                and isinstance(d.get("anchor"), str) and type(d.get("last")) is int
                and all(isinstance(x, dict) for x in d["entries"]))
    except (TypeError, ValueError):
        return False


def read_batches(entries: Iterable[Entry]) -> list[Batch]:
    """The audit batches of a listing: only well-formed records that open as the owner's own
    (an agent's author key or the server cannot make one).  The same batch sealed twice (a
    restart between sealing and noting it) is one."""
    seen: dict[tuple[str, int, str], Batch] = {}
    for e in entries:
        if e.opened.trust is not Trust.SELF:
            continue
        d = _normal(e.opened.extensions.get(AUDIT_RECORD))
        if not _valid(d):
            continue
        assert isinstance(d, dict)
        b = Batch(d, e.id)
        seen.setdefault((b.key[0], b.key[1], d["root"]), b)
    return sorted(seen.values(), key=lambda b: (int(b.doc["last"]), b.key))


def gaps(batches: list[Batch]) -> dict[tuple[str, int], str]:
    """Per batch, what the seq numbers of its stream say is wrong around it: a batch missing
    before it (withheld, spoilt so it did not arrive, or deleted), or another batch with its seq.
    Seqs start at 1: a missing one is retention's only if a deletion entry in a batch held names
    it (retention.pruned_entry); otherwise it is reported, below the oldest batch held too."""
    by_stream: dict[str, dict[int, set[str]]] = {}
    for b in batches:
        by_stream.setdefault(b.key[0], {}).setdefault(b.key[1], set()).add(b.doc["root"])
    pruned, _ = accounted(e for b in batches for e in b.doc.get("entries") or ())
    out: dict[tuple[str, int], str] = {}
    for stream, seqs in by_stream.items():
        held = sorted(seqs)
        for prev, cur in zip([0] + held, held):
            missing = uncovered(prev + 1, cur - 1, pruned.get(stream, ()))
            if missing:
                n, lo, hi = sum(h - lo + 1 for lo, h in missing), missing[0][0], missing[-1][1]
                out[(stream, cur)] = (f"{n} earlier batch{'es' if n > 1 else ''} of this audit "
                                      f"({lo}{'-' + str(hi) if hi != lo else ''}) did not reach this device"
                                      + ("" if prev else " and no deletion in this audit accounts for them"))
        for s, roots in seqs.items():
            if len(roots) > 1:
                twice = "two different batches carry this batch's number"
                out[(stream, s)] = f"{out[(stream, s)]}; {twice}" if (stream, s) in out else twice
    return out


def structure_problem(b: Batch, holder_id: bytes) -> str | None:
    """Why a batch does not match itself or its anchor receipt (no signature, no log)."""
    if batch_root(b.doc["entries"], b.doc["sessions"]) != b.root:
        return "its entries do not hash to the root it names: an entry was altered, added or dropped"
    try:
        r = parse_receipt(bytes.fromhex(b.doc["anchor"]))
    except (OwnmemError, ValueError):
        return "its anchor receipt does not parse"
    if r.operation != ANCHOR_OPERATION or r.subject_id != b.root or r.holder_id != holder_id:
        return "its anchor receipt does not name this batch's root for this vault"
    return None


# structure_problem's verdicts, by what they depend on (the batch document's hash, the holder):
# a view read again (the PWA reads on every sync) recomputes only the batches that are new,
# instead of every shown batch's root (in the browser, a call into JavaScript per keccak)
_STRUCTURE: dict[tuple[bytes, bytes], str | None] = {}
_STRUCTURE_MAX = 4096


def checked_structure(b: Batch, holder_id: bytes) -> str | None:
    k = (sha256(canonical(b.doc)), holder_id)
    if k not in _STRUCTURE:
        if len(_STRUCTURE) >= _STRUCTURE_MAX:
            _STRUCTURE.clear()
        _STRUCTURE[k] = structure_problem(b, holder_id)
    return _STRUCTURE[k]


def _iso(t: int) -> str:
    """As tokens.iso, which the browser cannot import (it pulls in PyJWT)."""
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class AuditView:
    entries: list[dict[str, Any]]           # newest first: the 18.1 fields + "batch" {seq, stream, problem}
    warnings: list[str]
    batches: int
    anchored: int                           # batches shown whose anchor was proven in the log

    def to_json(self) -> dict[str, Any]:
        return {"entries": self.entries, "warnings": self.warnings, "batches": self.batches,
                "anchored": self.anchored}


def audit_view(entries: Iterable[Entry], *, holder_id: bytes,
               anchor_check: Callable[[Batch], str | None] | None = None,
               newer_anchors: Callable[[list[Batch]], list[str]] | None = None,
               session: str | None = None, limit: int = MAX_SHOWN) -> AuditView:
    """The synced audit as a device shows it.  ``anchor_check(batch)`` -> why the batch's
    receipt is not proven in the public log (None: proven); without one (offline) anchors are
    left unchecked, never reported as good.  ``newer_anchors(batches)`` -> a warning for each
    batch the log anchors after the newest one held that has not arrived."""
    batches = read_batches(entries)
    gap = gaps(batches)
    # newest first; within one second, in the order the service recorded them
    rows: list[tuple[int, int, int, dict[str, Any]]] = []
    for b in batches:
        for i, e in enumerate(b.doc["entries"]):
            if session is None or e.get("session_id") == session:
                rows.append((int(e.get("timestamp") or 0), b.key[1], i, e))
    rows.sort(key=lambda r: r[:3], reverse=True)
    shown = rows[:limit]
    by_entry = {id(e): b for b in batches for e in b.doc["entries"]}
    problems: dict[tuple[str, int], str | None] = {}
    checked: set[tuple[str, int]] = set()
    for *_, e in shown:
        b = by_entry[id(e)]
        if b.key in problems:
            continue
        why = checked_structure(b, holder_id) or gap.get(b.key)
        if why is None and anchor_check is not None:
            try:
                why = anchor_check(b)
                checked.add(b.key)
            except SyncError:
                pass          # the log cannot be reached now: unchecked, which is no verdict
            except OwnmemError as x:
                why = f"its anchor could not be checked ({x})"
        problems[b.key] = why
    out = []
    for *_, e in shown:
        b = by_entry[id(e)]
        d = {k: e.get(k) for k in _ENTRY_FIELDS}
        d["timestamp"] = _iso(int(e.get("timestamp") or 0))
        d["batch"] = {"stream": b.key[0], "seq": b.key[1], "problem": problems[b.key],
                      "anchor_checked": b.key in checked}
        out.append(d)
    warnings = sorted({f"audit batch {k[1]}: {w}" for k, w in problems.items() if w})
    if newer_anchors is not None:
        try:
            warnings += newer_anchors(batches)
        except SyncError:
            pass              # the log cannot be reached now: no verdict
    return AuditView(out, warnings, len(batches), sum(1 for k in checked if problems[k] is None))


def log_anchor_check(syncer: Any) -> Callable[[Batch], str | None]:
    """The anchor check of a linked device: the receipt's signature under this vault's holder
    key, then its inclusion in the tree this device verified (vault.logwatch, which fetches and
    verifies a newer checkpoint when the receipt is newer than the one it holds)."""
    v = syncer.v
    holder_public = v.holder().public
    watch = syncer.log_watch()

    def check(b: Batch) -> str | None:
        if watch.verified is None:
            watch._advance()         # noqa: SLF001 - a server out of reach raises SyncError: unchecked
        raw = bytes.fromhex(b.doc["anchor"])
        try:
            run_sync(verify_receipt(v.crypto, parse_receipt(raw), holder_public))
        except OwnmemError as e:
            return f"its anchor receipt does not verify ({e})"
        why = watch._included(raw)   # noqa: SLF001 - the log check a FORGET from the feed gets
        return None if why is None else f"its anchor is not proven in the public log ({why})"
    return check


def log_newer_anchors(syncer: Any, *, grace: int = 60,
                      now: Callable[[], int] = lambda: int(time.time())) -> Callable[[list[Batch]], list[str]]:
    """The newest batch withheld, which no later batch's gap shows yet: the anchors this holder
    logged after the newest batch held (``/v1/log?holder=&operation=RECALL&after=``), signed by
    this holder, naming a root no batch here has, and older than ``grace`` seconds (a batch is
    anchored a moment before it is sealed and synced).  A vault holding no batch: its anchors of
    the last RETENTION_DAYS, which no deletion can have forgotten (every batch deleted at once, or
    withheld: the audit shown is empty, never silently)."""
    from ownmem.wire import codec

    v = syncer.v
    holder = v.holder()
    log = syncer.log_watch().log

    def anchors(after: int) -> list[tuple[int, Any]]:
        """This holder's verified anchors after log index ``after`` (one page): (index, receipt)."""
        page = codec.load_json(log.get(f"{log.base}/v1/log?holder={holder.holder_id.hex()}&operation=RECALL"
                                      f"&after={after}&limit=1000"))
        out = []
        for row in (page.get("entries") or []) if isinstance(page, dict) else []:
            try:
                r = parse_receipt(bytes.fromhex(row["receipt"]))
                run_sync(verify_receipt(v.crypto, r, holder.public))
                out.append((int(row["index"]), r))
            except (OwnmemError, ValueError, KeyError, TypeError):
                continue       # not this holder's: a server cannot make an anchor appear
        return out

    def none_held() -> list[str]:
        young, newest_at, after = 0, 0, 0
        for _ in range(ANCHOR_PAGES):          # bounded: the log is the server's to make long
            page = anchors(after)
            if not page:
                break
            after = max(i for i, _ in page)
            for _, r in page:
                if r.subject_id != holder.holder_id and now() - RETENTION_DAYS * DAY < r.timestamp <= now() - grace:
                    young, newest_at = young + 1, max(newest_at, r.timestamp)
        if not young:
            return []
        return [f"{young} audit batch{'es' if young > 1 else ''} anchored in the public log in the last "
                f"{RETENTION_DAYS} days (the newest at {_iso(newest_at)}) {'have' if young > 1 else 'has'} not "
                "reached this device: no deletion can have removed them, the audit shown is incomplete"]

    def newer(batches: list[Batch]) -> list[str]:
        if not batches:
            return none_held()
        newest = batches[-1]
        found = codec.load_json(log.get(f"{log.base}/v1/log?subject={newest.root.hex()}&operation=RECALL&limit=10"))
        rows = found.get("entries") if isinstance(found, dict) else None
        idx = [r["index"] for r in rows or [] if isinstance(r, dict) and type(r.get("index")) is int]
        if not idx:
            return []          # its own anchor is not listed: anchor_check says so on its rows
        held = {b.root for b in batches}
        out: set[str] = set()
        for _, r in anchors(min(idx)):
            if r.subject_id in held or r.subject_id == holder.holder_id or r.timestamp > now() - grace:
                continue
            out.add(f"an audit batch anchored in the public log at {_iso(r.timestamp)} has not reached this device")
        return sorted(out)
    return newer


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
        return bytes(v.add(f"UOMP audit batch {seq}", tags=(RECORD_TAG,), extensions={AUDIT_RECORD: doc}))


def entry_doc(e: Any) -> dict[str, Any]:
    """An audit.AuditEntry as a batch carries it (times in Unix seconds)."""
    # by name, not dataclasses.asdict: asdict deep-copies (about 100 us an entry), and the
    # writer makes one per entry it batches, on the GIL the request threads need
    d = {f: getattr(e, f) for f in _ENTRY_FIELDS}
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

    op: Any                                  # agent.operator.Operator
    u: Any                                   # api.Uomp
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


def attach(u: Any, op: Any, folder: Path, app: Any) -> AuditSync:
    """Start batching the audit of ``u`` (api.Uomp) over operator ``op``, whose agent write
    attempts it records too; mount the admin route ``POST /v1/audit/prune {"before": unix
    seconds}`` on ``app``."""
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from ownmem.agent.uomp_api import error, ok
    from ownmem.agent.retention import RetentionRefused

    # the batch tick ("every N minutes or every M events"): INTERVAL unless the environment says
    interval = float(os.environ.get(INTERVAL_ENV) or INTERVAL)
    s = AuditSync(op, u, Path(folder), interval=interval if interval > 0 else INTERVAL, now=u.now)
    u.audit.on_commit = s.committed
    op.use_audit(u.audit)         # agent write attempts are entries of this audit too (staging.WriteAudit)
    inner_close = u.close

    def close() -> None:
        s.stop()
        inner_close()
    u.close = close

    async def prune(r: Request) -> Response:
        raw = await r.body()
        refused: Response | None = await u.refuse_unapproved(r, raw, "pruning the audit")   # the person's proof, not the file
        if refused is not None:
            return refused
        try:
            d = json.loads(raw or b"{}")
            before = d.get("before") if isinstance(d, dict) else None
            if type(before) is not int or before < 0:
                raise ValueError
        except ValueError:
            return error(400, "INVALID_REQUEST", "before must be a non-negative integer (Unix seconds)")
        try:
            pruned, forgotten = await run_in_threadpool(s.prune, before)
        except RetentionRefused as e:     # inside the retention by this service's clock: nothing deleted
            return error(400, "INVALID_REQUEST", str(e))
        return ok({"pruned": pruned, "forgotten": forgotten})

    app.router.routes.append(Route("/v1/audit/prune", prune, methods=["POST"]))
    return s.start()
