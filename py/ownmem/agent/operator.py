"""The custodial SAIHM operator over the person's unlocked vault (SAIHM "Tool surface",
"Order of effect and receipt", "Receipt semantics", "Erasure"; DESIGN.md "Agent access").

    saihm_remember  seal the content as an ApertoMemory memory signed by the agent's own
                    author key (HKDF info ownmem/v1/agent/<name>; in the keyring, so it opens
                    as trusted, never self; payload extension "uomp": {source: agent, agent_id})
                    1. store it durably but invisibly (pending_writes: sync does not push it,
                       recall does not show it), with its cell and REMEMBER receipt
                    2. write the receipt to the public log; on failure or doubt look it up by
                       receiptId: absent, or the log unreachable -> discard,
                       operator_log_unavailable (and it never completes later)
                    3. make it visible (an object with its cell), index it, push its cell
                    the answer carries ownmemStaged / ownmemNotice: the write awaits the
                    person's confirmation
                    after a restart (the process died mid-write, no answer was given):
                    pending writes whose receipt is logged are completed, the others discarded
    saihm_recall, saihm_forget, saihm_share, saihm_revoke_share, saihm_status: ownmem.agent.tools
    every call that stores something (a write, a request) counts against its credential's quota
    (agent/quota.py): 429 rate_limited / quota_exceeded
    governance      403 governance_disabled (docs/decisions.md)

A cell is visible to agents once its REMEMBER receipt is logged or it came from the server
(``Store.recallable_cells``): the owner's own memories, added on a device, appear here once
synced, which is when their receipt is written.  Every call runs under one lock shared with the
sync loop (``AgentSyncer``), so no transaction of one interleaves with the other's on the one
store connection.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ownmem.agent import quota, staging
from ownmem.agent.audit import AUDIT_INFO, AuditLog
from ownmem.agent.credentials import Credential
from ownmem.agent.recall_index import RecallEntry, RecallIndex
from ownmem.agent.tools import STAGED_NOTICE, OperatorError, Tools, text_param
from ownmem.aperto import keys as aperto_keys
from ownmem.aperto.model import Memory, Trust
from ownmem.aperto.seal import seal
from ownmem.crypto import run_sync
from ownmem.errors import OwnmemError, StoreError, SyncError
from ownmem.saihm.cell import make_cell, parse_cell, verify_cell
from ownmem.saihm.errors import B
from ownmem.saihm.receipt import make_receipt, parse_receipt
from ownmem.uomp.control import is_bookkeeping, is_control
from ownmem.uomp.items import search_label
from ownmem.usecases import requests as agent_requests, staged
from ownmem.usecases.authors import AgentKeys, author_key, bound_agent
from ownmem.usecases.listing import memories
from ownmem.usecases.requests import AgentRequest
from ownmem.vault.remote import Remote
from ownmem.vault.sharing import SharedReader
from ownmem.vault.store import PendingWrite, StoredObject
from ownmem.vault.sync import TIER, Syncer, SyncReport
from ownmem.vault.vault import DEFAULT_SCOPE, TOOL, Entry, UnlockedVault, honour_links
from ownmem.wire import messages

_log = logging.getLogger("ownmem.agent")
__all__ = ["MAX_CONTENT", "AgentSyncer", "Operator", "OperatorError", "recall_entry", "trust_label"]

LOOKUP_TRIES = 3
LOOKUP_WAIT = 1.0
STAGED_STATE = "uomp-staged-writes"   # vault store (sync_state): the staged writes at the last refresh
REQUESTS_STATE = "uomp-staged-requests"   # ... and the agents' requests waiting for the person
MAX_CONTENT = 256 * 1024      # characters of one memory an agent may write


def trust_label(e: Entry, agents: AgentKeys) -> str:
    """ownmemTrust: the derived trust, with agent-written memories named as such: "agent" only
    when the signer is the author key of the agent the payload names (bound_agent);
    another accepted key claiming an agent's name is just "trusted"."""
    o = e.opened
    if o.trust is Trust.TRUSTED and bound_agent(e, agents) is not None:
        return "agent"
    return o.trust.value


def recall_entry(e: Entry, cell: bytes, agents: AgentKeys) -> RecallEntry:
    c = parse_cell(cell)
    o = e.opened
    return RecallEntry(c.cell_id, o.content, c.holder_id, c.cell_nonce, c.kek_version, c.timestamp, c.tier,
                       c.signature[:8], trust_label(e, agents), o.authorship.value, o.author_key_id,
                       o.custody_present, tags=o.tags, confidence=o.confidence,
                       label=search_label(o.extensions))


class AgentSyncer(Syncer):
    """The sync loop of the service: every sync runs under the operator's lock, and the
    operator catches up with what it brought (pulled cells, erasures, pending writes).

    The operator pushes each agent write's cell itself; the server's event for that push is
    this service's own change, and a sync for it (metadata, log check, pull, catch-up, all
    under the lock the next tool call waits for) would bring nothing.  ``own_push`` notes a
    push whose sequence numbers follow, with no gap, everything this service already has
    (pulled, or pushed itself): an event naming such a sequence number is skipped, once.  A
    gap (another device's change in between) means a sync; a keep-alive event repeating it
    later syncs as before."""

    def __init__(self, v: UnlockedVault, remote: Remote, lock: threading.RLock,
                 after: Callable[[], None]) -> None:
        super().__init__(v, remote)
        self.lock, self.after = lock, after
        self._own_upto = 0          # every change up to this seq is pulled or this service's own push
        self._armed = False         # an event up to _own_upto is still to be skipped

    def sync_once(self, progress: Callable[[int, int], None] | None = None) -> SyncReport:
        with self.lock:
            report = super().sync_once(progress)
            self.after()
        return report

    def own_push(self, stored: int, last_seq: int) -> None:
        """Under the lock: the server stored ``stored`` cells of this service's own push, the
        last at ``last_seq``."""
        if stored and last_seq - stored == max(self._seq(), self._own_upto):
            self._own_upto, self._armed = last_seq, True

    def wants_sync(self, last_seq: int) -> bool:
        with self.lock:
            if self._armed and last_seq <= self._own_upto:
                self._armed = last_seq < self._own_upto
                return False
            return True


DEFAULT_LIMITS = quota.Limits()      # frozen: one default shared by every operator


class Operator(Tools):
    def __init__(self, v: UnlockedVault, remote: Remote, *, now: Callable[[], int] = lambda: int(time.time()),
                 limits: quota.Limits = DEFAULT_LIMITS, clock: Callable[[], float] = time.monotonic,
                 syncer: type[AgentSyncer] = AgentSyncer) -> None:
        """``syncer``: the sync loop's class (agent/local.py LocalSyncer on a vault with no server)."""
        self.v, self.now = v, now
        self.limits, self.clock = limits, clock
        self._windows: dict[str, quota.Window] = {}        # credential name -> its last minute of writes
        self.lock = threading.RLock()
        self.index = RecallIndex()
        self.syncer: AgentSyncer = syncer(v, remote, self.lock, self.catch_up)
        self.shared = SharedReader(self.syncer)     # what other holders share with this one
        self._opened: dict[bytes, tuple[Entry, bytes, bytes]] = {}   # object id -> (entry, cellId, cell), visible
        self._keyring: tuple[dict[bytes, bytes], set[bytes]] | None = None
        self._meta_dirty = False
        # derived from _opened once per change (``_settle``), read by recall, forget and the
        # UOMP item view: the entries with their edit links honoured (by object id), the
        # object ids any entry links to, the visible heads (by cellId: no control record),
        # the confirmed staged writes, and cellId -> agent of the unconfirmed ones
        self.linked: dict[bytes, Entry] = {}
        self._parents: set[bytes] = set()
        self.heads: dict[bytes, Entry] = {}
        self._confirmed: frozenset[bytes] = frozenset()
        self.staged: dict[bytes, str] = {}
        # counts the changes of heads and staged (the UOMP item view rebuilds only after one),
        # and the objects the last refresh opened (api.mount looks only at those)
        self.version = 0
        self.added: list[bytes] = []
        self.agents = AgentKeys(v)   # whose author key is whose (bound_agent)
        self._admitted: dict[bytes, tuple[bytes, bytes]] | None = None   # this service's own write, to open
        # the UOMP audit every write attempt goes to (``use_audit``: the service's own, api.mount);
        # one of its own, opened at the first write, when none was given (an operator without UOMP)
        self.audit: staging.AuditSink | None = None
        self._own_audit: Any = None
        self._staged_known: dict[bytes, tuple[str, bytes]] | None = None   # see _staged_then
        # the agents' forget and share requests waiting for the person (agent_requests.pending),
        # and those at the last refresh (see _requests_then)
        self.requests: dict[bytes, AgentRequest] = {}
        self._requests_known: dict[bytes, str] | None = None

    # ------------------------------------------------------------------ the write audit
    def use_audit(self, log: staging.AuditSink) -> None:
        """Write attempts go to ``log`` (the UOMP audit of the service); the JSON-lines write
        audit of older versions is imported into it once."""
        if self._own_audit is not None and self._own_audit is not log:
            self._own_audit.close()       # opened before the service gave its own (at catch_up)
            self._own_audit = None
        self.audit = log
        staging.import_write_audit(self.v.store.folder, log)

    def _write_audit(self) -> staging.AuditSink | None:
        if self.audit is None and self.v.store.folder is not None:
            self._own_audit = AuditLog(self.v.store.folder, self.v.purpose_key(AUDIT_INFO))
            self.use_audit(self._own_audit)
        return self.audit

    def _staged_then(self) -> dict[bytes, tuple[str, bytes]]:
        """cellId -> (agent, object id) of the staged writes before this refresh; at the first
        refresh of the process, as the last one before it left them (STAGED_STATE), so an
        answer the person gave while the service was down is audited too."""
        if self._staged_known is None:
            raw = self.v.store.sync_get(STAGED_STATE)
            try:
                doc = json.loads(raw) if raw else {}
                self._staged_known = {bytes.fromhex(c): (str(a), bytes.fromhex(o)) for c, (a, o) in doc.items()}
            except (ValueError, TypeError, AttributeError):
                self._staged_known = {}
        return self._staged_known

    def _audit_settled(self, before: dict[bytes, tuple[str, bytes]]) -> None:
        """Audit the staged writes the person answered since ``before``: confirmed (a
        confirmation record came) or discarded (the memory is gone).  A staged write superseded
        by an edit is not audited here: its new version is a memory of its own.  Then note the
        staged writes now, in the vault store, for the next refresh and the next start."""
        for cid, (agent, oid) in before.items():
            if cid in self.staged:
                continue
            if oid in self._confirmed:
                staging.settled(agent, oid, True, self._write_audit())
            elif oid not in self._opened:
                staging.settled(agent, oid, False, self._write_audit())
        now = {cid: (a, self.heads[cid].id) for cid, a in self.staged.items()
               if cid in self.heads and a != staged.NO_AGENT}
        if now != before:
            self._staged_known = now
            doc = {c.hex(): [a, o.hex()] for c, (a, o) in now.items()}
            self.v.store.sync_set(STAGED_STATE, json.dumps(doc, sort_keys=True).encode())

    def _requests_then(self) -> dict[bytes, str]:
        """request id -> agent of the requests waiting before this refresh (at the first refresh
        of the process: as the last one before it left them, REQUESTS_STATE)."""
        if self._requests_known is None:
            raw = self.v.store.sync_get(REQUESTS_STATE)
            try:
                doc = json.loads(raw) if raw else {}
                self._requests_known = {bytes.fromhex(r): str(a) for r, a in doc.items()}
            except (ValueError, TypeError, AttributeError):
                self._requests_known = {}
        return self._requests_known

    def _audit_answered(self, before: dict[bytes, str]) -> None:
        """Audit the requests the person answered since ``before``: confirmed (a confirmation
        record came) or discarded (the request is gone); then note those waiting now."""
        for rid, agent in before.items():
            if rid not in self.requests:
                staging.settled(agent, rid, rid in self._confirmed, self._write_audit(), prefix="request")
        now = {rid: r.agent_id for rid, r in self.requests.items()}
        if now != before:
            self._requests_known = now
            self.v.store.sync_set(REQUESTS_STATE, json.dumps({r.hex(): a for r, a in now.items()},
                                                             sort_keys=True).encode())

    # ------------------------------------------------------------------ quotas
    def _within_quota(self, cred: Credential, size: int, prefix: str) -> None:
        """Refuse a call that would store ``size`` more bytes beyond the credential's quota
        (agent/quota.py), audited once per run of refusals (a flood of refused calls must not
        become a flood of audit entries, batches and server bytes in turn); count it otherwise."""
        name, at = cred.agent, self.clock()
        w = self._windows.setdefault(name, quota.Window())
        count, size_recent = w.counts(at)
        staged_count, staged_bytes = 0, 0
        for cid, agent in self.staged.items():
            e = self.heads.get(cid)
            if agent == name and e is not None:
                staged_count += 1
                staged_bytes += len(e.opened.content.encode("utf-8", "replace"))
        staged_count += sum(1 for r in self.requests.values() if r.agent_id == name)
        no = quota.decide(self.limits, quota.Usage(count, size_recent, staged_count, staged_bytes), size)
        if no is None:
            w.refused_since = None
            w.add(at, size)
            return
        if w.refused_since is None or at - w.refused_since >= quota.WINDOW:
            w.refused_since = at
            staging.refused(self._write_audit(), name, prefix,
                            f"{no.code}: {no.message} (further refusals within a minute are not audited one by one)",
                            cred.session_id)
        raise OperatorError(no.code, no.message)

    # ------------------------------------------------------------------ the index
    def catch_up(self) -> None:
        """After a sync (or at start): settle pending writes, then index what changed."""
        with self.lock:
            self.recover_pending()
            self.refresh()

    def refresh(self) -> None:
        """Bring the index in line with the store: open only objects not yet opened, drop the
        ones gone (erased here or through the feed), re-derive heads.  Trust is derived at read
        time: a key added re-opens what read as unverified, a key removed or revoked re-opens
        everything.  After this service's own write (``_admitted``) only that object is new,
        and the store is not listed again."""
        with self.lock:
            store = self.v.store
            admitted, self._admitted = self._admitted, None
            ring = (store.known_keys(), store.revoked_keys())
            removed: set[bytes] = set()
            if self._keyring is not None and ring != self._keyring:
                old_keys, old_revoked = self._keyring
                added_only = old_revoked == ring[1] and all(ring[0].get(k) == pub for k, pub in old_keys.items())
                removed.update(o for o, (e, _, _) in self._opened.items()
                               if not added_only or e.opened.trust is Trust.UNVERIFIED)
            self._keyring = ring
            # only this service's write is new, unless the keyring changed too: then every
            # entry taken out above must be opened again from the store's listing
            if admitted is not None and not removed:
                new = dict(admitted)
            else:
                ids = store.recallable_ids()
                # gone, or its cell replaced (a migrated object): opened again from its new cell
                removed.update(o for o, (_, cid, _) in self._opened.items() if ids.get(o) != cid)
                new = {}
                for oid, cid in ids.items():
                    if oid in self._opened and oid not in removed:
                        continue
                    got = store.cell_of(oid)
                    if got is not None and got[0] == cid:
                        new[oid] = got
            # out of the index too, so each goes back in as derived now (its trust, its cell)
            self.index.remove(self._opened[o][1] for o in removed)
            for oid in removed:
                del self._opened[oid]
            added = self._open(list(new), new)
            self.added = added
            before, asked = self._staged_then(), self._requests_then()
            self._settle(added, removed)
            self._audit_settled(before)
            self._audit_answered(asked)

    def _settle(self, added: list[bytes], removed: set[bytes]) -> None:
        """Derive links, heads and staged writes from ``_opened`` after ``added`` came and
        ``removed`` went, and bring the index in line.  Edit links are honoured over every
        entry only when one may have changed (something went, or what came links to or is
        linked from another version, or is a control record that may confirm one); a plain
        new memory is a new head and changes no other entry."""
        if not removed and not added:
            return
        inert = {o for o in added if self._inert(o)}
        rest = [o for o in added if o not in inert]
        if not removed and all(self._plain(o) for o in rest):
            for oid in added:
                self.linked[oid] = self._opened[oid][0]
            for oid in inert:
                r = agent_requests.request_of(self._opened[oid][0], self.agents)
                if r is not None and r.id not in self._confirmed:
                    self.requests[r.id] = r
            if not rest:
                return        # only bookkeeping came (an audit batch, a session record): no head changed
            self.version += 1
            fresh = [(self._opened[o][1], self.linked[o]) for o in rest]
            self.heads.update(fresh)
            self.staged.update((cid, a) for cid, e in fresh
                               if (a := staged.staged_agent(e, self.agents)) is not None
                               and e.id not in self._confirmed)
            self.index.put(recall_entry(e, self._opened[e.id][2], self.agents) for _, e in fresh)
            return
        self.version += 1
        raw = [e for e, _, _ in self._opened.values()]
        entries, _ = honour_links(raw)
        self.linked = {e.id: e for e in entries}
        self._parents = {p for e in raw for p in ((e.supersedes,) if e.supersedes else ()) + e.merges}
        self._confirmed = staged.confirmed_ids(entries)
        self.requests = {r.id: r for r in agent_requests.pending(entries, self.agents)}
        # control records (a session's revocation, a staged write's confirmation ...) are no
        # memory an agent recalls or erases (ownmem.uomp.control); an unconfirmed staged
        # write is recalled by its own agent only (see recall)
        self.heads = {self._opened[e.id][1]: e for e in memories(entries) if e.is_head}
        self.staged = {cid: a for cid, e in self.heads.items()
                       if (a := staged.staged_agent(e, self.agents)) is not None and e.id not in self._confirmed}
        have = self.index.own_cell_ids()
        self.index.remove(have - set(self.heads))
        self.index.put(recall_entry(e, self._opened[e.id][2], self.agents)
                       for cid, e in self.heads.items() if cid not in have)

    def _plain(self, oid: bytes) -> bool:
        e = self._opened[oid][0]
        return (e.supersedes is None and not e.merges and oid not in self._parents
                and not is_control(e.opened.extensions))

    def _inert(self, oid: bytes) -> bool:
        """A control record that links to nothing, is linked from nothing and has no effect on
        heads or staged writes: an audit batch or a session record (not a revocation, not a
        confirmation).  The agent seals one audit batch about every MAX_ENTRIES requests under
        load; each would otherwise re-derive every link and head of the vault."""
        e = self._opened[oid][0]
        return (e.supersedes is None and not e.merges and oid not in self._parents
                and is_bookkeeping(e.opened.extensions))

    def item_heads(self) -> list[Entry]:
        """The heads the UOMP item view lists: what recall lists less the unconfirmed staged
        writes, plus nothing else (control records carry no item)."""
        return [e for cid, e in self.heads.items() if cid not in self.staged]

    def _open(self, oids: list[bytes], visible: dict[bytes, tuple[bytes, bytes]]) -> list[bytes]:
        """Open and check each new visible object: its cell must be this holder's, name this
        very object, and verify (SAIHM "saihm_recall": omit and log a cell that fails).
        -> the object ids opened."""
        store, p = self.v.store, self.v.crypto
        opened: list[bytes] = []
        if not oids:
            return opened
        holder = self.v.holder()
        scopes = {s.scope_id: s for s in store.scopes().values()}
        keyring = self.v.keyring()
        for oid in oids:
            row = store.get_object(oid)
            cell_id, cell_bytes = visible[oid]
            if row is None:
                continue
            try:
                cell = parse_cell(cell_bytes)
                if cell.cell_nonce != oid or cell.ciphertext != row.sealed or cell.cell_id != cell_id:
                    raise OwnmemError("the cell does not carry this object")
                run_sync(verify_cell(p, cell, holder.public))
                entry = self.v.open_stored(row, scopes, keyring, allow_unverified=True)
            except OwnmemError as e:
                _log.warning("cell of object %s omitted from recall: %s", oid.hex()[:12], type(e).__name__)
                continue
            self._opened[oid] = (entry, cell_id, cell_bytes)
            opened.append(oid)
        return opened

    # ------------------------------------------------------------------ pending writes
    def recover_pending(self) -> None:
        """SAIHM "Order of effect and receipt": once the receipt is written the effect is
        completed, including after a restart; a write whose receipt is not in the log is
        discarded.  A pending write whose log cannot be asked now stays pending."""
        with self.lock:
            for w in self.v.store.pending_writes():
                rid = parse_receipt(w.receipt).receipt_id
                try:
                    found = self.syncer.remote.get_receipt(rid)
                except SyncError:
                    continue
                with self.v.store.transaction():
                    if found is not None:
                        self.v.store.complete_pending(w)
                    else:
                        self.v.store.drop_pending(w.obj.object_id)

    # ------------------------------------------------------------------ keys
    def author_key(self, agent_id: str) -> aperto_keys.SigningKey:
        return author_key(self.v, agent_id)

    def _ensure_author(self, key: aperto_keys.SigningKey) -> None:
        store = self.v.store
        if key.key_id in store.revoked_keys():
            # the person revoked this agent's author key (`ownmem trust remove`): the service
            # does not lift that by writing under it again
            raise OperatorError(B.UNAUTHENTICATED, "this agent's author key was revoked in the vault")
        if key.key_id not in store.known_keys():
            self.v.trust_add(key.public)
            self._meta_dirty = True
        if self._meta_dirty:
            # the key reaches the other devices before the memory it signs does (sync_once
            # syncs metadata before it pushes; so does this)
            try:
                self.syncer.sync_metadata(SyncReport())
                self._meta_dirty = False
            except SyncError:
                pass

    # ------------------------------------------------------------------ tools
    def remember(self, cred: Credential, params: dict[str, Any]) -> dict[str, Any]:
        """saihm_remember, a staged agent write (ownmem.agent.staging); every attempt audited,
        durably before anything is written (an audit that fails refuses the write)."""
        # every call counts, the malformed and oversized too: each would still cost two audit entries
        content = params.get("content")
        with self.lock:
            self._within_quota(cred, len(content.encode("utf-8", "replace")) if isinstance(content, str) else 0,
                               "write")
        audit = staging.WriteAudit.begin(self._write_audit(), cred.agent, session_id=cred.session_id)
        try:
            res = self._remember(cred, params)
        except OperatorError as e:
            audit.end("refused", e.error)
            raise
        except OwnmemError as e:
            audit.end("failed", type(e).__name__)
            raise
        # the cell's nonce is the sealed object's id
        audit.end("staged", "", bytes.fromhex(res["cellNonce"]))
        return res

    def _remember(self, cred: Credential, params: dict[str, Any]) -> dict[str, Any]:
        content = text_param(params, "content", required=True)
        assert content is not None
        if not content.strip():
            raise OperatorError(B.EMPTY_CONTENT, "content is empty or only white space")
        if len(content) > MAX_CONTENT:
            raise OperatorError(B.CONTENT_TOO_LARGE, f"at most {MAX_CONTENT} characters per memory")
        sensitivity = params.get("sensitivity")
        try:
            staging.check_write(sensitivity if isinstance(sensitivity, str) else None)
        except staging.WriteRefused as e:
            raise OperatorError(B.WRITE_REFUSED, str(e)) from None
        with self.lock:
            w = self._store_signed(cred, content, {"uomp": {"source": "agent", "agent_id": cred.agent,
                                                            "staged": True}})
            c = parse_cell(w.cell)
            return {"cellId": c.cell_id.hex(), "cellNonce": c.cell_nonce.hex(), "tier": c.tier,
                    "kekVersion": c.kek_version, "epoch": str(c.timestamp),
                    "signaturePrefix": c.signature[:8].hex(), "receiptId": parse_receipt(w.receipt).receipt_id.hex(),
                    **STAGED_NOTICE}

    def _store_signed(self, cred: Credential, content: str, extensions: dict[str, Any]) -> PendingWrite:
        """A memory signed by the caller's author key, stored in SAIHM's order (durably but
        invisibly, the REMEMBER receipt logged, then made visible and pushed) -> the write.
        Under the lock."""
        w = self._write_pending(cred, content, extensions)
        self._log_receipt(w)
        # the receipt is logged: the effect is made visible, to the other devices (the
        # cell pushed) and here, in one commit with "pushed" (a restart in between finds it
        # pending with its receipt logged, completes it and pushes it again: a duplicate)
        pushed = self._push(w)
        with self.v.store.transaction():
            self.v.store.complete_pending(w, pushed=pushed)
        self._admitted = {w.obj.object_id: (w.cell_id, w.cell)}
        self.refresh()
        return w

    def _push(self, w: PendingWrite) -> bool:
        """The write's cell to the server, alone (its receipt is logged): no listing of what
        else is unpushed, which the sync loop pushes.  Not before the agent's key is in the
        vault metadata on the server, so that no device sees a memory whose signer it cannot
        know yet.  -> whether the server has it."""
        if self._meta_dirty:
            return False
        item = messages.PushItem(w.cell, w.obj.dek_wrapped)
        try:
            res = self.syncer._call(lambda: self.syncer.remote.push(messages.PushRequest((item,))))  # noqa: SLF001 - the operator runs its calls under the syncer's own retry
        except SyncError:
            return False     # pushed by the sync loop once the server answers
        self.syncer.own_push(res.stored, res.last_seq)
        return True          # stored, or held already (as Syncer.push, any answer marks it pushed)

    def push_own(self, oid: bytes) -> None:
        """This service's own new object ``oid`` (an audit batch) to the server, alone, and then
        opened alone, as an agent write is: no full sync (metadata, log check, pull, a listing
        of the whole store: under load, one per ~1,000 requests, on the lock and the GIL the
        Guard needs), and the server's event for it skipped (``own_push``).  Raises SyncError
        when the server does not take it: the sync loop pushes it later."""
        with self.lock:
            row = self.v.store.get_object(oid)
            if row is None:
                return
            for res in self.syncer.push_rows([row]):
                self.syncer.own_push(res.stored, res.last_seq)
            cell = self.v.store.cell_of(oid)
            if cell is not None:
                self._admitted = {oid: cell}
                self.refresh()

    def _write_pending(self, cred: Credential, content: str, extensions: dict[str, Any]) -> PendingWrite:
        v = self.v
        key = self.author_key(cred.agent)
        self._ensure_author(key)
        now = self.now()
        scope = v.scope(DEFAULT_SCOPE)
        memory = Memory(content=content, created=now, tool=TOOL, extensions=extensions)
        dek = aperto_keys.new_key()
        so = run_sync(seal(v.crypto, memory, signer=key, scope_id=scope.scope_id, dek=dek))
        wrapped = run_sync(aperto_keys.wrap_dek(v.crypto, dek, v.kek(scope)))
        h = v.holder()
        cell = run_sync(make_cell(v.crypto, xi=h.xi, holder_id=h.holder_id, kek_version=v.store.kek_gen(scope.scope_id),
                                  tier=TIER, cell_nonce=so.object_id, ciphertext=so.encoded, timestamp=now))
        receipt = run_sync(make_receipt(v.crypto, xi=h.xi, holder_id=h.holder_id, operation="REMEMBER",
                                        subject_id=cell.cell_id, timestamp=now))
        w = PendingWrite(StoredObject(so.object_id, so.scope_id, so.format_version, so.encoded, wrapped),
                         cell.cell_id, cell.to_cbor(), receipt.to_cbor())
        try:
            with v.store.transaction():
                v.store.put_pending(w)
        except StoreError as e:
            raise OperatorError(B.OPERATOR_STORAGE_UNAVAILABLE, str(e)) from None
        return w

    def _log_receipt(self, w: PendingWrite) -> None:
        """Write the receipt; if that fails or its outcome is unknown, ask the log.  Found:
        written.  Absent, or the log cannot be asked either: the write is discarded and the
        answer is operator_log_unavailable."""
        rid = parse_receipt(w.receipt).receipt_id
        try:
            if rid in self.syncer._call(lambda: self.syncer.remote.post_receipts([w.receipt])):  # noqa: SLF001 - the operator runs its calls under the syncer's own retry
                return
        except SyncError as e:
            _log.info("the REMEMBER receipt write failed or is uncertain (%s): looking it up", type(e).__name__)
        for attempt in range(LOOKUP_TRIES):
            try:
                found = self.syncer.remote.get_receipt(rid)
            except SyncError:
                if attempt + 1 < LOOKUP_TRIES:
                    time.sleep(LOOKUP_WAIT)
                continue
            if found is not None:
                return
            break
        # Absent, or the log cannot be asked: the answer says no receipt was written and
        # nothing took effect, so nothing may take effect later either.  The write is
        # discarded before the answer; a restart finds nothing pending to complete, even if
        # the receipt turns up in the log (docs/decisions.md, "A remember answered
        # operator_log_unavailable stays undone").  Only a write that got no answer at all
        # (the process died) is settled by ``recover_pending`` from the log.
        with self.v.store.transaction():
            self.v.store.drop_pending(w.obj.object_id)
        raise OperatorError(B.OPERATOR_LOG_UNAVAILABLE, "the receipt could not be written; nothing was stored")

    def close(self) -> None:
        self.index.close()
        if self._own_audit is not None:
            self._own_audit.close()
