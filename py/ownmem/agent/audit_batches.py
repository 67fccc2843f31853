"""The UOMP audit batches: their format and how any device reads and checks them (UOMP draft-00
"Audit and Logging": "Storage", "Blockchain Extension", "Event Types"; docs/decisions.md "UOMP
audit batches").  Written by audit_sync.AuditSync on `ownmem agent`:

    per entry an event of "Event Types" (SessionGranted | SessionRevoked |
    DataDeletionProofSubmitted | GatewayAccess)
      eventHash = keccak256(keccak256(event signature) || its fields, 32-byte ABI words)
      leaf      = eventHash || SHA-256(the entry's canonical JSON)   (64 bytes)
    root = the RFC 9162 Merkle tree hash over the leaves (ownmem.saihm.tlog's hashing)

On any device (``audit_view``): the batches that open as the owner's own; for each shown, the
entries again hashed to the root it names, the receipt checked (RECALL, subject = root, this
holder's signature) and proven included in the log's tree this device verified; a mismatch, a
missing or unproven anchor, a gap in a stream's seq (from 1: below the oldest batch held too,
unless a deletion entry accounts for it), no batch at all while the log holds this holder's
anchors of the last RETENTION_DAYS: a warning on that batch's rows, or on the view.

Nothing here imports the agent's HTTP or JWT code: the reader runs in the browser too, where
keccak256 comes from @noble/hashes through the worker's glue.
"""
from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ownmem.agent.retention import DAY, RETENTION_DAYS, accounted, uncovered
from ownmem.crypto import run_sync, sha256
from ownmem.errors import OwnmemError, SyncError
from ownmem.saihm import tlog
from ownmem.saihm.receipt import parse_receipt, verify_receipt
from ownmem.uomp.control import AuditBatch
from ownmem.vault.vault import Entry
from ownmem.wire import codec

RECORD_TAG = "uomp-audit"
ANCHOR_OPERATION = "RECALL"          # read-only calls' receipts "under operator policy" (SAIHM)
MAX_SHOWN = 500                      # entries a view shows (newest first)
ANCHOR_PAGES = 20                    # pages of 1,000 anchors read when a device holds no batch

EVENT_SIGNATURES = {
    "SessionGranted": "SessionGranted(bytes32,bytes32,uint256)",
    "SessionRevoked": "SessionRevoked(bytes32,bytes32)",
    "GatewayAccess": "GatewayAccess(bytes32,bytes32,bytes32,bool)",
    "DataDeletionProofSubmitted": "DataDeletionProofSubmitted(bytes32,bytes32,bytes32)",
}
ENTRY_FIELDS = ("id", "timestamp", "session_id", "agent_id", "action", "key", "tag", "tags", "allowed", "reason",
                 "request_size", "response_size", "query_count_remaining")

# ---------------------------------------------------------------------------- hashing (pure)

def keccak256(data: bytes) -> bytes:
    """Keccak-256 (Ethereum's, not SHA3-256): pycryptodome; in the browser, @noble/hashes."""
    # an optional dependency: pycryptodome on a device, the worker's glue in the browser
    try:
        from Crypto.Hash import keccak  # optional dependency: pycryptodome, absent under Pyodide
    except ImportError:     # Pyodide: the bundle carries no pycryptodome; the worker's glue does it
        import ownmem_js  # Pyodide-only module: the worker's JavaScript glue
        from pyodide.ffi import to_js  # Pyodide-only module

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
    if action in ("read", "write", "delete") and e.get("key") is not None:
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
    return merkle_root([leaf(e, sessions.get(str(e.get("session_id") or ""), {}), c)
                        for e, c in zip(entries, cs, strict=False)])


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


def read_batches(entries: Iterable[Entry]) -> list[Batch]:
    """The audit batches of a listing: only well-formed records that open as the owner's own
    (an agent's author key or the server cannot make one).  The same batch sealed twice (a
    restart between sealing and noting it) is one."""
    seen: dict[tuple[str, int, str], Batch] = {}
    for e in entries:
        r = AuditBatch.parse(e.opened)
        if r is None:
            continue
        d = r.doc
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
        for prev, cur in zip([0] + held, held, strict=False):
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
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
        d = {k: e.get(k) for k in ENTRY_FIELDS}
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
