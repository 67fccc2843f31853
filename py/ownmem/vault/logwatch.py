"""A device's watch over the public log (DESIGN.md "The public log"; RFC 9162 "Merkle
Consistency Proofs" and "Merkle Inclusion Proofs"; C2SP tlog-checkpoint; SAIHM "Audit log").

What a signed checkpoint proves is only "the holder of the log key says the log had these n
receipts": the key lives on the server, so a server that rewrites, drops or forks history
signs the new view as readily.  What catches it is memory, kept on the person's devices:

    pin       at link (or the first sync) the device keeps the log's verifier key
              (``GET /v1/log/key``); a different key later is refused, never re-pinned
    advance   on every sync: the checkpoint, its signature under the pinned key, and, when an
              earlier one is kept, the consistency proof from the kept size to the new one;
              only then is the new checkpoint kept
    witness   the device publishes the checkpoint it verified, signed by the vault's sync key
              (which every device of the vault holds and the server does not), and checks
              every other device's against its own: the smaller tree must be a prefix of
              the larger (a consistency proof from the server), or the same head at one size.
              A server that shows device A one history and device B another, each
              consistent on its own, cannot also prove the two consistent with each other.
    include   a FORGET from the change feed is applied only once its receipt is proven in
              the verified tree (inclusion proof): an erasure the public cannot see did not
              happen; it waits (``log_pending_forgets``) and is tried again on each sync.
              The same proof confirms this device's own erasures (``erasure_unproven``): one
              leaves the outbox only once its FORGET is proven, whatever the server answered
    omitted   the log's FORGET receipts of this vault's holder (``/v1/log?holder=&operation=
              FORGET``, from ``log_forgets_after``) whose cell this device still holds after a
              full pull are erasures the change feed left out: applied once proven, and a
              problem (``held_forgets``, ``apply_held_forgets``)

Every failure is a refusal of the sync (``SyncReport.refusals``), never a crash; the kept
checkpoint stays as it was and the problem is remembered until a later check passes.
Decisions are pure functions (ownmem.vault.logrules: ``key_change``, ``advance_problem`` ...);
``LogWatch`` is the thin I/O around them.  A server can withhold a device's witness: that
residual risk, and what a device id is, are in docs/decisions.md ("Log witnesses").

sync_state keys (the PWA reads them through ``log_status``):

    log_key              the pinned verifier key, UTF-8 (``notes.VerifierKey`` text form)
    log_checkpoint       the last verified checkpoint: the signed note's bytes
    log_checked_at       when a check last passed, Unix seconds, decimal ASCII
    log_problem          what the last check found wrong, UTF-8; empty when it passed
    log_compared         how many other devices' witnesses the last check compared, decimal
    log_witness_sent     SHA-256 of the note this device last published as its witness
    log_pending_forgets  CBOR [[cellId, FORGET receipt], ...] waiting for an inclusion proof
    log_forgets_after    the log listing's index of the last FORGET of this holder looked at, decimal
    device_id            16 random bytes naming this device in witness records
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ownmem.crypto import cbor, random_bytes, run_sync, sha256
from ownmem.errors import MalformedInput, OwnmemError, SyncError, WireError
from ownmem.saihm import notes
from ownmem.saihm.notes import Checkpoint, NoteRefused, VerifierKey
from ownmem.saihm.receipt import parse_receipt, verify_receipt
from ownmem.vault.logrules import (
    advance_problem,
    consistency_needed,
    inclusion_problem,
    key_change,
    open_served_checkpoint,
    parse_witnesses,
    served_key,
    witness_forgery,
    witness_problem,
    witness_proof_needed,
)
from ownmem.wire import codec, publiclog, signed
from ownmem.wire.errors import ErrorCode
from ownmem.wire.limits import MAX_JSON

if TYPE_CHECKING:
    from ownmem.vault.remote import Remote
    from ownmem.vault.store import Store
    from ownmem.vault.vault import UnlockedVault

KEY, CHECKPOINT, CHECKED_AT, PROBLEM = "log_key", "log_checkpoint", "log_checked_at", "log_problem"
COMPARED, WITNESS_SENT, PENDING, DEVICE_ID = "log_compared", "log_witness_sent", "log_pending_forgets", "device_id"
FORGETS_AFTER = "log_forgets_after"
MAX_PENDING = 10_000        # FORGETs waiting for their proof; past that the oldest are dropped
LISTING_PAGE = 1000         # entries a /v1/log listing answers at most
MAX_LISTING_PAGES = 20      # pages of this holder's FORGETs read in one sync; the rest at the next
MAX_OTHER_FORGETS = 8       # logged FORGETs of one cell tried when the device's own is not the one logged

Get = Callable[[str], bytes]    # URL -> body of a 2xx answer; anything else raises SyncError


# ---------------------------------------------------------------- what the CLI and the PWA show


@dataclass(frozen=True, slots=True)
class LogStatus:
    """The device's view of the public log: the last checkpoint it verified and kept, when a
    check last passed, and what is wrong (None when nothing is)."""

    origin: str
    size: int
    root_hash: str              # hex
    checked_at: int | None      # Unix seconds
    problem: str | None
    compared_devices: int = 0   # other devices' witnesses the last check compared

    def lines(self) -> list[str]:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.checked_at)) if self.checked_at else "never"
        out = [f"log: {self.origin or '(no checkpoint kept)'}",
               f"checkpoint: {self.size} receipt(s), root {self.root_hash or '-'}",
               f"last passed check: {when}; compared with {self.compared_devices} other device(s)"]
        out.append(f"PROBLEM: {self.problem}" if self.problem else "problem: none")
        return out


def log_status(store: Store) -> LogStatus | None:
    """What this device knows of the log; None when it never checked one (not linked yet)."""
    raw, problem = store.sync_get(CHECKPOINT), _text(store.sync_get(PROBLEM))
    if not raw and not problem:
        return None
    cp = kept_checkpoint(store)
    pinned = _text(store.sync_get(KEY))
    origin = cp.origin if cp is not None else (pinned.partition("+")[0] if pinned else "")
    checked = _text(store.sync_get(CHECKED_AT))
    return LogStatus(origin, cp.size if cp else 0, cp.root_hash.hex() if cp else "",
                     int(checked) if checked and checked.isdigit() else None, problem or None,
                     int(_text(store.sync_get(COMPARED)) or 0))


def kept_checkpoint(store: Store) -> Checkpoint | None:
    """The checkpoint kept (verified when it was stored, so only parsed here)."""
    raw = store.sync_get(CHECKPOINT)
    if not raw:
        return None
    try:
        return notes.parse_checkpoint(notes.parse_note(raw).text)
    except NoteRefused:
        return None


def pinned_key(store: Store) -> VerifierKey | None:
    raw = _text(store.sync_get(KEY))
    try:
        return notes.parse_verifier_key(raw) if raw else None
    except NoteRefused:
        return None


def forget_log(store: Store) -> None:
    """Another server is another log: nothing pinned or kept for the old one applies to it
    (the device id stays: it names the device, not the log).  Within a transaction."""
    for k in (KEY, CHECKPOINT, CHECKED_AT, PROBLEM, COMPARED, WITNESS_SENT, PENDING, FORGETS_AFTER):
        store.sync_set(k, b"")


def device_id(store: Store) -> bytes:
    """This device's id: 16 random bytes made on first use and kept in its store.  Random,
    not derived from the vault's keys: every device holds the same keys."""
    got = store.sync_get(DEVICE_ID)
    if got is not None and len(got) == publiclog.DEVICE_ID_LEN:
        return got
    new = random_bytes(publiclog.DEVICE_ID_LEN)
    with store.transaction():
        store.sync_set(DEVICE_ID, new)
    return new


# ---------------------------------------------------------------- the public endpoints


class PublicLog:
    """The log's public routes, over any ``get`` (the device's Remote, the CLI's client)."""

    def __init__(self, base: str, get: Get) -> None:
        self.base, self.get = base.rstrip("/"), get

    def key(self) -> publiclog.LogKeyInfo:
        return publiclog.LogKeyInfo.parse(codec.load_json(self.get(self.base + "/v1/log/key")))

    def checkpoint(self) -> bytes:
        return self.get(self.base + "/v1/log/checkpoint")

    def consistency(self, old: int, new: int) -> publiclog.LogConsistency:
        return publiclog.LogConsistency.parse(codec.load_json(
            self.get(self.base + f"/v1/log/proof/consistency?from={old}&to={new}")))

    def inclusion(self, receipt_id: bytes, size: int) -> publiclog.LogInclusion:
        return publiclog.LogInclusion.parse(codec.load_json(
            self.get(self.base + f"/v1/log/proof/inclusion?receipt={receipt_id.hex()}&size={size}")))

    def receipt(self, receipt_id: bytes) -> bytes:
        """The receipt's bytes as the log holds them (``GET /v1/log/{id}``)."""
        got = codec.load_json(self.get(self.base + f"/v1/log/{receipt_id.hex()}"))
        return _hex_field(got, "receipt")

    def receipts(self, **query: str) -> list[bytes]:
        """Every receipt ``/v1/log`` lists for the query (one page of up to 1000)."""
        return [r for _, r in self.listing(**query)]

    def listing(self, **query: str) -> list[tuple[int, bytes]]:
        """(the listing's index, the receipt) of every entry ``/v1/log`` lists for the query (one
        page of up to 1000; ``after=N`` pages on)."""
        q = "&".join(f"{k}={v}" for k, v in query.items())
        got = codec.load_json(self.get(self.base + f"/v1/log?{q}&limit={LISTING_PAGE}"))
        if not isinstance(got, dict) or not isinstance(got.get("entries"), list):
            raise WireError("a log listing is {entries: [...]}")
        if len(got["entries"]) > LISTING_PAGE:
            raise WireError(f"a log listing answers at most {LISTING_PAGE} entries")
        out = []
        for e in got["entries"]:
            index = e.get("index") if isinstance(e, dict) else None
            if type(index) is not int or index < 0:
                raise WireError("a log listing's entry has no index")
            out.append((index, _hex_field(e, "receipt")))
        return out


def _hex_field(v: Any, name: str) -> bytes:
    if not isinstance(v, dict):
        raise WireError("a log entry is a JSON object")
    return codec.Hex(limit=MAX_JSON).load(v.get(name), name)


# ---------------------------------------------------------------- the device's I/O


@dataclass(frozen=True, slots=True)
class LogCheck:
    """One sync's log check: what to report (problems first), and FORGETs applied that had waited."""

    refusals: tuple[str, ...]
    problems: tuple[str, ...]
    erased: int = 0


@dataclass(frozen=True, slots=True)
class HeldForgets:
    """FORGET receipts of this vault's holder the log listed, for cells this device still held
    when it looked: (cellId, receipt); ``after`` is where the next look starts."""

    forgets: tuple[tuple[bytes, bytes], ...]
    after: int


@dataclass
class _Findings:
    refusals: list[str]
    problems: list[str]


class LogWatch:
    """The log checks of one synced vault: its store and keys, and the server (``Remote``)."""

    def __init__(self, v: UnlockedVault, remote: Remote, call: Callable[[Callable[[], Any]], Any]) -> None:
        # ``call``: the sync's own way to make an authenticated request (Syncer._call: it logs in
        # again once when the short-lived credential has expired)
        self.v, self.remote, self.call = v, remote, call
        self.store = v.store
        self.p = v.crypto
        # Remote._req is the one place a request is made (the browser's subclass speaks fetch); the
        # vault's credential goes along when the device holds one, so the server charges these
        # reads to the vault's budget, not to an address the person's devices may share
        self.log = PublicLog(remote.base, lambda url: remote._req("GET", url, auth=remote.token is not None))  # noqa: SLF001
        self.verified: Checkpoint | None = None     # verified during this sync

    # ------------------------------------------------------------ pinning
    def pin(self) -> VerifierKey:
        """The pinned key; the served one is pinned if none is (trust on first use)."""
        served = served_key(self.log.key())
        pinned = pinned_key(self.store)
        if pinned is None:
            with self.store.transaction():
                self.store.sync_set(KEY, str(served).encode())
            return served
        why = key_change(pinned, served)
        if why is not None:
            raise LogProblem(why)
        return pinned

    # ------------------------------------------------------------ every sync
    def check(self) -> LogCheck:
        """Advance the kept checkpoint, exchange witnesses, retry waiting FORGETs."""
        out = _Findings([], [])
        try:
            self._advance()
        except LogProblem as e:
            out.problems.append(str(e))
        except (SyncError, MalformedInput, NoteRefused) as e:
            out.problems.append(f"could not check the server's log ({e}): kept the old checkpoint")
        kept = kept_checkpoint(self.store)
        compared = 0
        if kept is not None:
            try:
                compared = self._witnesses(kept, publish=not out.problems, out=out)
            except (SyncError, MalformedInput) as e:
                out.problems.append(f"could not compare this device's view of the log with the other devices' ({e})")
        erased = self._retry_pending(out)
        self._remember(out, compared)
        return LogCheck((*out.problems, *out.refusals), tuple(out.problems), erased)

    def _advance(self) -> None:
        key = self.pin()
        note = self.log.checkpoint()
        try:
            new = open_served_checkpoint(self.p, note, key)
        except NoteRefused as e:
            raise LogProblem(f"the server's checkpoint does not verify under the pinned log key ({e.reason}): "
                             "kept the old checkpoint") from None
        kept = kept_checkpoint(self.store)
        need = consistency_needed(kept, new)
        proof = None
        if need is not None:
            try:
                proof = self.log.consistency(*need)
            except SyncError as e:
                raise LogProblem(f"the server gave no consistency proof from {need[0]} to {need[1]} receipts "
                                 f"({e}): kept the old checkpoint") from None
        why = advance_problem(kept, new, proof)
        if why is not None:
            raise LogProblem(why)
        with self.store.transaction():
            self.store.sync_set(CHECKPOINT, note)
        self.verified = new

    def _remember(self, out: _Findings, compared: int) -> None:
        with self.store.transaction():
            self.store.sync_set(COMPARED, str(compared).encode())
            if out.problems:
                self.store.sync_set(PROBLEM, "; ".join(out.problems).encode())
            else:
                self.store.sync_set(PROBLEM, b"")
                self.store.sync_set(CHECKED_AT, str(int(time.time())).encode())

    # ------------------------------------------------------------ witnesses
    def _witnesses(self, kept: Checkpoint, *, publish: bool, out: _Findings) -> int:
        name = self.remote.name
        mine = device_id(self.store)
        note = self.store.sync_get(CHECKPOINT)
        key = pinned_key(self.store)
        assert note is not None
        if publish and key is not None and self.store.sync_get(WITNESS_SENT) != sha256(note):
            now = int(time.time())
            seed = self.v.sync_key().seed
            sig = run_sync(self.p.ed25519_sign(seed, signed.witness_message(name, mine, str(key), note, now)))
            w = publiclog.Witness(mine, str(key), note, now, sig)
            self.call(lambda: self.remote._json("POST", self.remote._url("/witnesses"), w, auth=True))  # noqa: SLF001
            with self.store.transaction():
                self.store.sync_set(WITNESS_SENT, sha256(note))
        listed = self.call(lambda: self.remote._json("GET", self.remote._url("/witnesses"), auth=True))  # noqa: SLF001
        records, malformed = parse_witnesses(listed)
        if malformed:
            out.refusals.append(f"the server offered {malformed} malformed log witness(es): ignored")
        sync_pub = self.v.sync_key().public
        compared = 0
        for w in records:
            if w.device_id == mine:
                continue
            dev = w.device_id.hex()[:8]
            forged = witness_forgery(self.p, name, sync_pub, w)
            if forged is not None:
                out.refusals.append(forged)
                continue
            if key is None or w.vkey != str(key):
                out.problems.append(f"device {dev} of this vault pins another log key than this device: the server "
                                    "shows the devices different logs")
                continue
            try:
                theirs = open_served_checkpoint(self.p, w.note, key)
            except NoteRefused as e:
                out.problems.append(f"device {dev} of this vault published a checkpoint the log key did not sign "
                                    f"({e.reason})")
                continue
            need = witness_proof_needed(kept, theirs)
            proof = None
            if need is not None:
                try:
                    proof = self.log.consistency(*need)
                except SyncError:
                    proof = None
            why = witness_problem(kept, theirs, proof, dev)
            if why is not None:
                out.problems.append(why)
            compared += 1
        return compared

    # ------------------------------------------------------------ FORGETs from the feed
    def forget_refusal(self, cell_id: bytes, receipt: bytes) -> str | None:
        """Why a holder-signed FORGET from the feed must wait, or None once its receipt is
        proven in the verified tree (the tree is fetched again, and verified, if the receipt
        was logged after the checkpoint this sync verified)."""
        why = self._included(receipt)
        if why is None:
            return None
        self._queue(cell_id, receipt)
        text = (f"the erasure of cell {cell_id.hex()[:12]} is not proven in the public log ({why}): "
                "not applied yet, tried again on the next sync")
        self._add_problem(text)
        return text

    def _add_problem(self, text: str) -> None:
        """A problem found after this sync's check: added to what ``log status`` shows."""
        before = _text(self.store.sync_get(PROBLEM))
        with self.store.transaction():
            self.store.sync_set(PROBLEM, (f"{before}; {text}" if before else text).encode())

    # ------------------------------------------------------------ this device's own erasures
    def erasure_unproven(self, cell_id: bytes, receipt: bytes) -> str | None:
        """Why the server's erasure of ``cell_id`` is not proven public, or None once a FORGET of
        this vault's holder for that cell is proven in a checkpoint this device verified: the one
        this device sent, or, when another device erased the cell first (the server answers
        "already" and logs no second receipt), one the log lists for that cell."""
        why = self._included(receipt)
        if why is None:
            return None
        try:
            logged = self._holder_forgets(cell_id)
        except (SyncError, MalformedInput):
            return why
        for other in logged:
            if other != receipt and self._included(other) is None:
                return None
        return why

    def _holder_forgets(self, cell_id: bytes) -> list[bytes]:
        """The FORGET receipts the log lists for ``cell_id`` that this vault's holder signed."""
        h = self.v.holder()
        got = self.log.receipts(subject=cell_id.hex(), operation="FORGET", holder=h.holder_id.hex())
        return [raw for raw in got[:MAX_OTHER_FORGETS] if self._own_forget(raw, h.holder_id, h.public) == cell_id]

    def _own_forget(self, raw: bytes, holder_id: bytes, holder_public: bytes) -> bytes | None:
        """The cellId a FORGET receipt of this vault's holder names, or None if it is not one."""
        try:
            r = parse_receipt(raw)
            if r.operation != "FORGET" or r.holder_id != holder_id:
                return None
            run_sync(verify_receipt(self.p, r, holder_public))
        except OwnmemError:
            return None
        return r.subject_id

    # ------------------------------------------------------------ erasures the feed left out
    def held_forgets(self) -> HeldForgets:
        """The FORGET receipts of this vault's holder the log lists since the last look whose cell
        this device still holds, and whose erasure is not already waiting for its proof (the
        feed carried those).  The server logs a FORGET and writes its feed row in one
        transaction, so a device that pulls after this look and still holds the cell was
        shown a feed without it (``apply_held_forgets``)."""
        h = self.v.holder()
        raw = _text(self.store.sync_get(FORGETS_AFTER))
        after = int(raw) if raw.isdigit() else 0
        waiting = {c for c, _ in self._pending()}
        found: dict[bytes, bytes] = {}
        for _ in range(MAX_LISTING_PAGES):
            page = self.log.listing(holder=h.holder_id.hex(), operation="FORGET", after=str(after))
            for index, receipt in page:
                after = max(after, index)
                try:
                    cell_id = parse_receipt(receipt).subject_id
                except OwnmemError:
                    continue
                if cell_id in waiting or self.store.object_of_cell(cell_id) is None:
                    continue          # waiting for its proof, or not held here: nothing left out
                if self._own_forget(receipt, h.holder_id, h.public) == cell_id:
                    found[cell_id] = receipt
            if len(page) < LISTING_PAGE:
                break
        return HeldForgets(tuple(found.items()), after)

    def apply_held_forgets(self, found: HeldForgets) -> LogCheck:
        """Each cell of ``found`` still held here (after a full pull) is an erasure the server's
        feed left out: erased here once its receipt is proven in the verified tree (else it waits
        with the feed's FORGETs), and reported as the server's omission."""
        problems: list[str] = []
        gone: list[bytes] = []
        waiting = {c for c, _ in self._pending()}
        for cell_id, receipt in found.forgets:
            oid = self.store.object_of_cell(cell_id)
            if oid is None or cell_id in waiting:
                continue                      # the feed carried it after all
            omitted = (f"the server's change feed left out the erasure of cell {cell_id.hex()[:12]}, whose FORGET "
                       "receipt signed by this vault's holder is in the public log")
            why = self._included(receipt)
            if why is None:
                gone.append(oid)
                problems.append(f"{omitted}: erased here")
            else:
                self._queue(cell_id, receipt)
                problems.append(f"{omitted} (not proven yet: {why}): erased here once proven")
        with self.store.transaction():
            if gone:
                self.store.erase(gone)
            self.store.sync_set(FORGETS_AFTER, str(found.after).encode())
        if gone:
            self.store.checkpoint()
        for text in problems:
            self._add_problem(text)
        return LogCheck(tuple(problems), tuple(problems), len(gone))

    def _included(self, receipt: bytes) -> str | None:
        try:
            rid = parse_receipt(receipt).receipt_id
        except OwnmemError:
            return "its receipt does not parse"
        for fresh in (self.verified is None, True):
            if fresh:
                try:
                    self._advance()
                except (LogProblem, SyncError, MalformedInput, NoteRefused) as e:
                    return f"no verified checkpoint: {e}"
            cp = self.verified
            assert cp is not None
            try:
                proof = self.log.inclusion(rid, cp.size)
            except SyncError as e:
                if e.server_code == ErrorCode.BEYOND_LOG and not fresh:
                    continue            # logged after this sync's checkpoint: verify a newer one
                return f"the server gave no inclusion proof ({e})"
            return inclusion_problem(cp, receipt, proof)
        return "not in the log's verified tree"

    def _pending(self) -> list[tuple[bytes, bytes]]:
        raw = self.store.sync_get(PENDING)
        if not raw:
            return []
        try:
            got = cbor.decode(raw)
        except MalformedInput:
            return []
        if not isinstance(got, list):
            return []
        return [(c, r) for c, r in got if isinstance(c, bytes) and isinstance(r, bytes)]

    def _queue(self, cell_id: bytes, receipt: bytes) -> None:
        have = [x for x in self._pending() if x[0] != cell_id] + [(cell_id, receipt)]
        with self.store.transaction():
            self.store.sync_set(PENDING, cbor.encode([list(x) for x in have[-MAX_PENDING:]]))

    def _retry_pending(self, out: _Findings) -> int:
        waiting = self._pending()
        if not waiting:
            return 0
        left, gone = [], []
        for cell_id, receipt in waiting:
            oid = self.store.object_of_cell(cell_id)
            if oid is None:
                continue                    # erased meanwhile, or never held: nothing to apply
            why = self._included(receipt)
            if why is None:
                gone.append(oid)
            else:
                left.append((cell_id, receipt))
                out.problems.append(f"the erasure of cell {cell_id.hex()[:12]} is still not proven in the public "
                                    f"log ({why}): not applied yet")
        with self.store.transaction():
            if gone:
                self.store.erase(gone)
            self.store.sync_set(PENDING, cbor.encode([list(x) for x in left]) if left else b"")
        if gone:
            self.store.checkpoint()
        return len(gone)


class LogProblem(OwnmemError):
    """A finding about the server's log: it becomes a refusal of the sync and the remembered
    ``log_problem``; the kept checkpoint stays as it was."""

    code = "log_problem"


def _text(raw: bytes | None) -> str:
    return raw.decode("utf-8", "replace") if raw else ""
