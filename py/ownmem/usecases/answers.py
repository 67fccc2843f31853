"""The person's answer to what an agent staged: find the staged write or request an id names,
confirm it, or discard it (ownmem.usecases.staged, ownmem.usecases.requests): the one place the
CLI (`ownmem staged`) and the PWA's Agents screen both call.

A write: confirm seals an owner-signed confirmation record (control.Confirmation); discard
forgets the staged memory.  A request: confirm does what it asks here (the forget, or the share
through vault/sharing.py) and seals the confirmation record; discard forgets the request.
Everything reaches the other devices and the agent service with the next sync.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ownmem.errors import NotFound, VaultError
from ownmem.uomp.control import Confirmation
from ownmem.usecases.authors import AgentKeys
from ownmem.usecases.requests import AgentRequest, named_memory, pending as pending_requests
from ownmem.usecases.staged import StagedWrite, pending as pending_writes
from ownmem.vault.sharing import ShareCreated, share_cells
from ownmem.vault.sync import Syncer
from ownmem.vault.vault import Entry, Listing, UnlockedVault

ID_DIGITS = 32


def find_request(v: UnlockedVault, ident: str, entries: list[Entry]) -> AgentRequest | None:
    """The pending request ``ident`` (its id or a unique prefix) names; None when ``ident``
    names no request at all (it may name a staged write); NotFound when ambiguous."""
    t = ident.strip().lower()
    got = [r for r in pending_requests(entries, AgentKeys(v)) if t and r.id.hex().startswith(t)]
    if len(got) > 1:
        raise NotFound(f"id prefix {ident!r} is ambiguous ({len(got)} requests)")
    return got[0] if got else None


def find(v: UnlockedVault, ident: str, listing: Listing, *,
         whole_id: bool = False) -> StagedWrite | AgentRequest:
    """The staged write or request waiting for the person that ``ident`` names: its id or a
    unique prefix of it (the CLI), or only its whole id (``whole_id``: the PWA names what it
    listed).  NotFound for anything else."""
    t = ident.strip().lower()
    if not whole_id or len(t) == ID_DIGITS:
        r = find_request(v, t, listing.entries)
        if r is not None:
            return r
    writes = pending_writes(listing.entries, AgentKeys(v))
    if whole_id:
        for w in writes:
            if w.entry.id.hex() == t:
                return w
        raise NotFound("that is not an agent write waiting for you")
    e = v.resolve(ident, listing)
    for w in writes:
        if w.entry.id == e.id:
            return w
    raise NotFound(f"{e.id.hex()[:12]} is not a staged agent write or request waiting for you")


@dataclass(frozen=True, slots=True)
class Confirmed:
    """What a confirmation did: ``request`` the request confirmed (None: a staged write),
    ``erased`` the objects its forget erased here, ``share`` the contract its share made."""

    confirmation: bytes                 # the confirmation record's object id
    request: AgentRequest | None = None
    erased: int = 0
    share: ShareCreated | None = None


def confirm(v: UnlockedVault, waiting: StagedWrite | AgentRequest, entries: list[Entry],
            syncer: Callable[[], Syncer], *, now: int | None = None) -> Confirmed:
    """Accept a staged write as the person's (it stays the agent's, signed by it), or do what a
    request asks, on this device, then record the person's confirmation.  A share that fails (no
    server, an unknown grantee, an expiry now past) raises and records nothing: the request
    still waits, to be confirmed again or discarded."""
    if isinstance(waiting, StagedWrite):
        oid = waiting.entry.id
        return Confirmed(v.add(f"(confirms the staged write {oid.hex()[:12]} of agent {waiting.agent_id})",
                               extensions=Confirmation(oid).make()))
    r = waiting
    by_id = {e.id: e for e in entries}
    erased, made = 0, None
    if r.kind == "forget":
        for oid in r.objects:
            if named_memory(oid, by_id) is not None and oid in v.store.object_ids():
                erased += len(v.forget(oid.hex()))
    else:
        t = r.share
        assert t is not None
        if any(named_memory(o, by_id) is None for o in r.objects):
            raise VaultError("a memory this share names is no longer in this vault: discard the request")
        made = share_cells(syncer(), r.cells, t.grantees, t.mode, scope=t.scope, expires=t.expires, now=now)
    oid = v.add(f"(confirms the {r.kind} request {r.id.hex()[:12]} of agent {r.agent_id})",
                extensions=Confirmation(r.id).make())
    return Confirmed(oid, r, erased, made)


def discard(v: UnlockedVault, waiting: StagedWrite | AgentRequest) -> int:
    """Drop a staged write (the memory is erased) or a request (the record is erased; nothing it
    asked for happens), everywhere at the next sync -> how many objects went here."""
    oid = waiting.entry.id if isinstance(waiting, StagedWrite) else waiting.id
    return len(v.forget(oid.hex()))
