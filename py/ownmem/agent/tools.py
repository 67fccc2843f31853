"""The SAIHM tool calls of the custodial operator that read, share and erase (SAIHM "Tool surface":
saihm_recall, saihm_share, saihm_forget, saihm_revoke_share, saihm_status), with the staged
requests they make for the person (ownmem.usecases.requests), and the tool calls' one error.
The operator's index, its writes (saihm_remember) and its audit are ownmem.agent.operator, whose
``Operator`` carries these as ``Tools``.

    saihm_recall    the caller's visible heads (and shared cells), ranked (recall_index.py), one
                    page (default 10) with a cursor for the next; no control record, no other
                    agent's unconfirmed staged write
    saihm_forget    holder check (not_holder for another holder's cell; success false for what
                    the caller's recall cannot show, ``agent_may_see``).  The caller's own write
                    still staged: withdraw access first (out of the index, erased locally with its
                    FORGET receipt queued), then the erasure is pushed; unreachable ->
                    operator_log_unavailable, retried by sync.  Any other memory (the person's):
                    a staged request (ownmem.usecases.requests), nothing erased until the person
                    confirms; the answer is success false with ownmemStaged / ownmemNotice
    saihm_status    agentIdHashHex = holderId, custody, shards per tier, contracts
    saihm_share     checked (vault/share_tools.py parse_share_params, the contract rules, every cell
                    the person's own and visible to the caller), then a staged request: no
                    contract, no key leaves until the person confirms; the answer carries no
                    contractId, and ownmemStaged / ownmemNotice / ownmemRequest
    saihm_revoke_share  vault/share_tools.py tool_revoke_share (narrows what is shared: not staged)
"""
from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from ownmem.agent import staging
from ownmem.agent.credentials import Credential
from ownmem.agent.recall_index import RecallEntry, RecallIndex
from ownmem.aperto.model import Trust
from ownmem.errors import OwnmemError, SyncError
from ownmem.recall.pages import MAX_LIMIT, CursorError, is_limit
from ownmem.saihm.errors import B, BindingRefusal
from ownmem.saihm.receipt import parse_receipt
from ownmem.uomp.control import is_control
from ownmem.usecases import requests as agent_requests, staged
from ownmem.usecases.authors import AgentKeys
from ownmem.usecases.requests import AgentRequest, ShareTerms
from ownmem.vault.share_tools import (
    ToolRefused,
    check_share_rules,
    parse_share_params,
    tool_contracts,
    tool_revoke_share,
)
from ownmem.vault.sharing import SharedReader
from ownmem.vault.store import PendingWrite
from ownmem.vault.sync import Syncer, SyncReport
from ownmem.vault.vault import Entry, UnlockedVault

_log = logging.getLogger("ownmem.agent")

# operator extension on saihm_recall's last element when more cells answer than one page holds
# (SAIHM "Fields not defined here are operator extensions"; docs/decisions.md)
NEXT_CURSOR = "ownmemNextCursor"

# operator extension fields of saihm_remember's result (SAIHM "saihm_remember": "An operator MAY
# add extension fields"; docs/decisions.md): every agent write is staged (ownmem.usecases.staged)
STAGED_NOTICE = {"ownmemStaged": True,
                 "ownmemNotice": "staged: stored and receipted, recalled by this agent only until the person "
                                 "confirms it; other agents do not see it before then"}
# operator extension fields of saihm_forget's and saihm_share's result when the act waits for the person
# (as STAGED_NOTICE above, of saihm_remember's; docs/decisions.md, issue 19)
FORGET_STAGED = {"ownmemStaged": True,
                 "ownmemNotice": "staged: nothing is erased until the person confirms this erasure in ownmem "
                                 "(`ownmem staged` or the Agents screen); it may be discarded"}
SHARE_STAGED = {"ownmemStaged": True,
                "ownmemNotice": "staged: no contract is made and nothing is shared until the person confirms "
                                "this share in ownmem (`ownmem staged` or the Agents screen); it may be discarded"}


class OperatorError(BindingRefusal):
    """A tool call's failure: answered with its code's status and {"error": code}."""

    code = "operator"


def agent_may_see(e: Entry, agent: str, confirmed: frozenset[bytes], keys: AgentKeys) -> bool:
    """Whether agent ``agent`` may recall (and so erase) the vault's own memory ``e``: not a
    control record (ownmem.uomp.control), not another agent's staged write the person has
    not confirmed (ownmem.usecases.staged)."""
    return not is_control(e.opened.extensions) and not staged.hidden_from(e, agent, confirmed, keys)


def limit_param(params: dict[str, Any]) -> int | None:
    """saihm_recall's ``limit``: a whole number from 1 to MAX_LIMIT, as a JSON number or a
    decimal string (SAIHM: a client MUST accept either; the operator does too)."""
    v = params.get("limit")
    if v is None:
        return None
    if isinstance(v, str) and v.isascii() and v.isdigit() and len(v) <= 9:
        v = int(v)
    if not is_limit(v):
        raise OperatorError(B.INVALID_PARAMS, f"limit must be a whole number from 1 to {MAX_LIMIT}")
    return v


def text_param(params: dict[str, Any], name: str, *, required: bool) -> str | None:
    v = params.get(name)
    if v is None:
        if required:
            raise OperatorError(B.INVALID_PARAMS, f"{name} is required")
        return None
    if not isinstance(v, str):
        raise OperatorError(B.INVALID_PARAMS, f"{name} must be a string")
    return v


class Tools:
    """The tool calls below, as methods of ownmem.agent.operator.Operator: what they use of it is
    declared here (set by Operator.__init__, or its methods)."""

    v: UnlockedVault
    now: Callable[[], int]
    lock: threading.RLock
    index: RecallIndex
    syncer: Syncer
    shared: SharedReader
    agents: AgentKeys
    staged: dict[bytes, str]
    requests: dict[bytes, AgentRequest]
    _opened: dict[bytes, tuple[Entry, bytes, bytes]]
    _confirmed: frozenset[bytes]
    _keyring: tuple[dict[bytes, bytes], set[bytes]] | None

    def refresh(self) -> None:
        raise NotImplementedError      # Operator.refresh

    def _within_quota(self, cred: Credential, size: int, prefix: str) -> None:
        raise NotImplementedError      # Operator._within_quota

    def _write_audit(self) -> staging.AuditSink | None:
        raise NotImplementedError      # Operator._write_audit

    def _store_signed(self, cred: Credential, content: str, extensions: dict[str, Any]) -> PendingWrite:
        raise NotImplementedError      # Operator._store_signed

    def recall(self, cred: Credential, params: dict[str, Any],
               visible: Callable[[RecallEntry], bool] | None = None) -> list[dict[str, Any]]:
        """saihm_recall: one page of the cells this caller may see that answer the query, best
        first (ownmem.recall.ranking): at most ``limit`` (default 10, an operator parameter of
        ownmem's, docs/decisions.md), from ``cursor``; when more answer, the last element
        carries ``ownmemNextCursor``.  ``visible``: what the Guard lets this credential read."""
        query = text_param(params, "query", required=False)
        cursor = text_param(params, "cursor", required=False)
        limit = limit_param(params)
        agent = cred.agent

        def sees(e: RecallEntry) -> bool:
            return self.staged.get(e.cell_id, agent) == agent and (visible is None or visible(e))
        with self.lock:
            # a key revoked in the vault meanwhile (`ownmem trust remove`, on this machine: no
            # sync brings it) downgrades what it signed before this recall answers
            if (self.v.store.known_keys(), self.v.store.revoked_keys()) != self._keyring:
                self.refresh()
            self.refresh_shared()
            try:
                entries, nxt = self.index.page(query, sees, limit, cursor)
            except CursorError as e:
                raise OperatorError(B.INVALID_PARAMS, str(e)) from None
            out = [e.to_json() for e in entries]
            if nxt is not None and out:
                out[-1][NEXT_CURSOR] = nxt
            return out

    def refresh_shared(self) -> None:
        """SAIHM "Sharing contracts": a recall includes the covered cells of every contract
        active for this holder and no other, so each recall asks the server again (only what
        is new is verified: vault/sharing.py SharedReader).  When the server cannot say, no
        shared cell is shown: one whose grant may have ended must not be."""
        try:
            got = self.shared.read(now=self.now())
            memories, refused = got.memories, got.refused
        except OwnmemError as e:
            _log.warning("shared cells left out of recall: %s", type(e).__name__)
            memories, refused = (), ()
        for cid, why in refused:
            _log.warning("shared cell %s omitted from recall: %s", cid.hex()[:12], why)
        entries = [RecallEntry(m.cell_id, m.content, m.owner_holder_id, m.cell.cell_nonce, m.cell.kek_version,
                               m.cell.timestamp, m.cell.tier, m.cell.signature[:8], "shared", "shared", None, False)
                   for m in memories]
        now_shared = {e.cell_id for e in entries}
        self.index.remove({cid for cid in self.index.cell_ids() if self.index.is_shared(cid)} - now_shared)
        new = [e for e in entries if not self.index.is_shared(e.cell_id)]   # a list: the index locks while it puts
        self.index.put_shared(new)

    def share(self, cred: Credential, params: dict[str, Any]) -> dict[str, Any]:
        """saihm_share: checked as a share would be, then staged for the person (no contract, no
        DEK re-wrapped, nothing offered) -> SAIHM's result less the contractId it cannot have
        yet, with ownmemStaged / ownmemNotice / ownmemRequest."""
        with self.lock:
            now = self.now()
            try:
                p = parse_share_params(params)
                if not p.grantees:
                    raise ToolRefused(B.INVALID_GRANTEE, "name at least one grantee")
                if not p.cells:
                    raise ToolRefused(B.SHARD_NOT_FOUND, "name at least one cell to share")
                check_share_rules(p, self.v.holder().holder_id, now)
            except ToolRefused as e:
                raise OperatorError(e.error, str(e)) from None
            cells = tuple(dict.fromkeys(p.cells))
            objects = []
            for cid in cells:
                if self.index.is_shared(cid):
                    # a cell another holder shared with this one: not this holder's to share
                    raise OperatorError(B.NOT_HOLDER, "a listed cell is another holder's")
                oid = self._visible_object(cred, cid)
                if oid is None:
                    raise OperatorError(B.SHARD_NOT_FOUND, "a listed cell is none this caller can recall")
                if self._opened[oid][0].opened.trust is not Trust.SELF:
                    # only the person's own memories can be shared (vault/sharing.py share_objects):
                    # refused now rather than staged for a confirmation that must fail; with its own
                    # code, since the cell is the holder's and recalled (docs/decisions.md, issue 22)
                    raise OperatorError(B.NOT_SHAREABLE, "a listed cell was written by an agent (or another "
                                        "author), not by the person")
                objects.append(oid)
            rid = self._request(cred, "share", tuple(objects), cells,
                                ShareTerms(p.grantees, p.mode, p.scope, p.expires), "saihm_share")
            return {"type": p.mode, "granteeCount": len(p.grantees), "epoch": str(now), **SHARE_STAGED,
                    "ownmemRequest": rid.hex()}

    def _visible_object(self, cred: Credential, cid: bytes) -> bytes | None:
        """The object of cell ``cid`` when this credential's recall may show it, else None."""
        oid = self.v.store.object_of_cell(cid) if cid else None
        seen = self._opened.get(oid) if oid is not None else None
        if oid is None or seen is None or self.v.store.get_object(oid) is None \
                or not agent_may_see(seen[0], cred.agent, self._confirmed, self.agents):
            return None
        return oid

    def _request(self, cred: Credential, kind: str, objects: tuple[bytes, ...], cells: tuple[bytes, ...],
                 share: ShareTerms | None, call: str) -> bytes:
        """Stage an agent's forget or share for the person (ownmem.usecases.requests): a control
        record signed by the agent's author key, stored like a write (receipted, pushed, on every
        device), audited like one -> the request's id.  The same request again, still waiting,
        is that one: an agent that retries adds nothing.  Under the lock."""
        for r in self.requests.values():
            if (r.agent_id, r.kind, r.objects, r.cells, r.share) == (cred.agent, kind, objects, cells, share):
                return r.id
        ext = agent_requests.extension(kind, cred.agent, objects, cells, share)
        self._within_quota(cred, len(json.dumps(ext)), "request")
        audit = staging.WriteAudit.begin(self._write_audit(), cred.agent, prefix="request", call=call,
                                         session_id=cred.session_id)
        try:
            w = self._store_signed(cred, f"(agent {cred.agent} asks you to confirm a {kind})", ext)
        except OperatorError as e:
            audit.end("refused", e.error)
            raise
        except OwnmemError as e:
            audit.end("failed", type(e).__name__)
            raise
        audit.end("staged", f"{call}: waits for the person", w.obj.object_id)
        return w.obj.object_id

    def revoke_share(self, cred: Credential, params: dict[str, Any]) -> dict[str, Any]:
        """saihm_revoke_share: the server withdraws access (keys deleted) before it logs the
        REVOKE receipt; a contract revoked before answers revoked = true."""
        with self.lock:
            try:
                return tool_revoke_share(self.syncer, params, now=self.now())
            except ToolRefused as e:
                raise OperatorError(e.error, str(e)) from None

    def forget(self, cred: Credential, params: dict[str, Any]) -> dict[str, Any]:
        ident = text_param(params, "id", required=True)
        assert ident is not None
        try:
            cid = bytes.fromhex(ident) if len(ident) == 64 else b""
        except ValueError:
            cid = b""
        with self.lock:
            if cid and self.index.is_shared(cid):
                raise OperatorError(B.NOT_HOLDER, "that cell is another holder's")
            store = self.v.store
            oid = self._visible_object(cred, cid)
            if oid is None:
                # what this credential's recall cannot show (another agent's unconfirmed write,
                # a control record, a cell not visible to agents) is not found, for it
                return {"success": False}
            if self.staged.get(cid) != cred.agent:
                # the person's memory (or one the person confirmed): erased only when the person
                # says so. success false is SAIHM's "not erased"; a client that ignores the
                # extension reports no erasure, which is true
                rid = self._request(cred, "forget", (oid,), (cid,), None, "saihm_forget")
                return {"success": False, **FORGET_STAGED, "ownmemRequest": rid.hex()}
            now = self.now()
            # 1. withdraw access: out of recall, then erased here (one transaction) with the
            #    FORGET receipts queued; nothing is restored if the receipt write fails
            chain_cells = self._chain_cells(oid)
            withdrawn = self.index.remove(chain_cells)
            try:
                self.v.forget(oid.hex())       # the next refresh finds its versions gone
            except OwnmemError as e:
                self.index.put(withdrawn)     # nothing changed: the erasure did not happen
                raise OperatorError(B.OPERATOR_STORAGE_UNAVAILABLE, str(e)) from None
            receipt = store.erase_receipt(cid)
            anchor = parse_receipt(receipt).receipt_id.hex() if receipt is not None else None
            self.refresh()
            # 2. the receipt to the log, with the erasure on the server: confirmed only once no
            #    cell of the chain is left in the outbox (Syncer.push_erasures keeps one until the
            #    server's answer names it and its receipt is proven in the verified log)
            try:
                self.syncer.push(SyncReport())
                confirmed = not any(store.erase_receipt(c) is not None for c in chain_cells | {cid})
            except SyncError:
                confirmed = False
            if not confirmed:
                raise OperatorError(B.OPERATOR_LOG_UNAVAILABLE,
                                    "access is withdrawn; the FORGET receipt is pending and retried")
            out: dict[str, Any] = {"success": True, "cellId": ident, "epoch": str(now)}
            if anchor is not None:
                out["destructionAnchor"] = anchor
            return out

    def _chain_cells(self, oid: bytes) -> set[bytes]:
        """The cellIds of every indexed version linked to ``oid`` (what ``forget`` erases)."""
        by_id = {o: e for o, (e, _, _) in self._opened.items()}
        seen, stack = set(), [oid]
        while stack:
            cur = stack.pop()
            if cur in seen:
                continue
            seen.add(cur)
            for o, succ in by_id.items():
                if succ.supersedes == cur or cur in succ.merges:
                    stack.append(o)
            here = by_id.get(cur)
            if here is not None:
                stack.extend(((here.supersedes,) if here.supersedes else ()) + here.merges)
        return {self._opened[o][1] for o in seen if o in self._opened}

    def status(self, cred: Credential, params: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            shards: dict[str, int] = {}
            for cid in self.index.cell_ids():
                e = self.index.get(cid)
                if e is not None and not self.index.is_shared(cid):
                    shards[e.tier] = shards.get(e.tier, 0) + 1
            return {"agentIdHashHex": self.v.holder().holder_id.hex(), "custody": "custodial",
                    "shards": shards, "contracts": self._contracts()}

    def _contracts(self) -> list[dict[str, object]]:
        try:
            return tool_contracts(self.syncer, now=self.now())
        except OwnmemError as e:
            _log.warning("saihm_status without contracts: %s", type(e).__name__)
            return []
