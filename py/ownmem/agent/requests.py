"""Staged agent requests: an agent's forget of a memory it did not write, and any share it asks
for, wait for the person (issue 19 build 2; uomp-draft-00 "20.4 Agent Write Restrictions";
SAIHM "saihm_forget", "saihm_share").  A memory planted by a web page or a document can ask an
agent for exactly these two calls; neither may erase nor send out the person's memory on the
agent's word alone.

    the agent service (agent/operator.py) seals a control record under the agent's author key
    (the key staged writes are signed with, so the request is bound to that agent):
        "uomp_request": {"kind": "forget" | "share", "agent_id": NAME,
                         "objects": [object id hex, ...], "cells": [cellId hex, ...],
                         "share": {"grantees": [holderId hex, ...], "type": "temporary" | ...,
                                   "scope": "read", "expiryEpoch": "<digits>" | null}}
    and applies nothing.  It syncs to every device, is never recalled (ownmem.uomp.control) and
    waits until the person, on one of their devices (`ownmem staged`, the PWA's Agents screen):
        confirm   performs the act there (vault.forget, or sharing.share_cells), then seals the
                  owner-signed confirmation record "uomp": {"confirms": "<request id>"}, as for a
                  staged write (staging.confirms: only the owner's count)
        discard   forgets the request record (erased everywhere at the next sync)

A request counts only when its signer is the key this vault derives for the agent it names
(``request_of``): one signed by any other key, or by a key the keyring no longer accepts, is
shown to nobody and does nothing.  The decisions are pure functions over a vault listing; the
use cases ``confirm`` and ``discard`` are the one place both front ends call.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ownmem.agent.credentials import valid_agent_id
from ownmem.aperto.model import Trust
from ownmem.errors import NotFound, VaultError
from ownmem.vault.vault import Entry, UnlockedVault
from ownmem.agent import staging
from ownmem.uomp.control import is_control

if TYPE_CHECKING:
    from ownmem.vault.sharing import ShareCreated
    from ownmem.vault.sync import Syncer

REQUEST = "uomp_request"
KINDS = ("forget", "share")
MAX_TARGETS = 64          # memories one request names (the operator asks for one forget at a time)
MAX_GRANTEES = 64
SHARE_TYPES = ("temporary", "permanent", "syndicate")


@dataclass(frozen=True, slots=True)
class ShareTerms:
    grantees: tuple[bytes, ...]
    mode: str                   # temporary | permanent | syndicate
    scope: str                  # read (SAIHM reserves the others)
    expires: int | None         # expiryEpoch; None: the mode's default, counted from the confirmation

    def to_json(self) -> dict[str, Any]:
        return {"grantees": [g.hex() for g in self.grantees], "type": self.mode, "scope": self.scope,
                "expiryEpoch": None if self.expires is None else str(self.expires)}


@dataclass(frozen=True, slots=True)
class AgentRequest:
    id: bytes                   # the request record's object id (what `ownmem staged` names)
    agent_id: str
    kind: str                   # forget | share
    objects: tuple[bytes, ...]
    cells: tuple[bytes, ...]
    share: ShareTerms | None
    created: int

    def extension(self) -> dict[str, Any]:
        return extension(self.kind, self.agent_id, self.objects, self.cells, self.share)


def extension(kind: str, agent_id: str, objects: Iterable[bytes], cells: Iterable[bytes],
              share: ShareTerms | None) -> dict[str, Any]:
    """The payload extension of a request record (the agent's key signs it)."""
    body: dict[str, Any] = {"kind": kind, "agent_id": agent_id, "objects": [o.hex() for o in objects],
                            "cells": [c.hex() for c in cells]}
    if share is not None:
        body["share"] = share.to_json()
    return {REQUEST: body}


def _hexes(v: object, size: int, most: int) -> tuple[bytes, ...] | None:
    if not isinstance(v, list) or not 0 < len(v) <= most:
        return None
    out = []
    for x in v:
        if not isinstance(x, str) or len(x) != 2 * size or any(c not in "0123456789abcdef" for c in x):
            return None
        out.append(bytes.fromhex(x))
    return tuple(out)


def _terms(v: object) -> ShareTerms | None:
    if not isinstance(v, dict):
        return None
    grantees = _hexes(v.get("grantees"), 32, MAX_GRANTEES)
    mode, scope, exp = v.get("type"), v.get("scope"), v.get("expiryEpoch")
    if grantees is None or mode not in SHARE_TYPES or scope != "read":
        return None
    if exp is not None and not (isinstance(exp, str) and exp.isascii() and exp.isdigit() and len(exp) < 20):
        return None
    return ShareTerms(grantees, str(mode), "read", None if exp is None else int(exp))


def request_of(e: Entry, keys: staging.AgentKeys) -> AgentRequest | None:
    """The agent request ``e`` carries, when its signer is the author key of the agent it names;
    None for anything else (no request, a malformed one, another key's)."""
    body, o = e.opened.extensions.get(REQUEST), e.opened
    if not isinstance(body, dict):
        return None
    name, kind = body.get("agent_id"), body.get("kind")
    if not isinstance(name, str) or not valid_agent_id(name) or kind not in KINDS:
        return None
    # bound by the key, as staging.bound_agent: trusted (the keyring accepts it), verified, and
    # the very key this vault derives for that agent's name
    if o.trust is not Trust.TRUSTED or not o.signature_verified or o.signer_key_id != keys.key_id(name):
        return None
    objects, cells = _hexes(body.get("objects"), 16, MAX_TARGETS), _hexes(body.get("cells"), 32, MAX_TARGETS)
    share = _terms(body.get("share")) if kind == "share" else None
    if objects is None or cells is None or (kind == "share") != (share is not None):
        return None
    return AgentRequest(e.id, name, str(kind), objects, cells, share, o.created or 0)


def pending(entries: Iterable[Entry], keys: staging.AgentKeys) -> list[AgentRequest]:
    """The agent requests still waiting for the person: bound to their agent, not confirmed."""
    entries = list(entries)
    done = staging.confirmed_ids(entries)
    out = [r for r in (request_of(e, keys) for e in entries if REQUEST in e.opened.extensions)
           if r is not None and r.id not in done]
    return sorted(out, key=lambda r: (r.created, r.id))


def _memory(oid: bytes, by_id: Mapping[bytes, Entry]) -> Entry | None:
    """The person's memory a request names; never a control record (no agent may have one
    erased or shared through a request), else None."""
    e = by_id.get(oid)
    return None if e is None or is_control(e.opened.extensions) else e


def _quoted(e: Entry | None, width: int = 80) -> str:
    """The memory's text on one line for the person's terminal: white space folded, and every
    other control or format character (an escape sequence, a bidi override) shown as its code,
    since the text may be a page's or an agent's."""
    if e is None:
        return "(no longer in this vault)"
    text = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in " ".join(e.opened.content.split()))
    return '"' + (text if len(text) <= width else text[: width - 1] + "…") + '"'


def describe(r: AgentRequest, by_id: Mapping[bytes, Entry]) -> str:
    """What confirming ``r`` would do, in one line for the person:
    forget "<memory>", or share "<memory>" with <holderId> (mode, expiry)."""
    what = "; ".join(_quoted(_memory(o, by_id)) for o in r.objects)
    if r.kind == "forget":
        return f"forget {what}"
    t = r.share
    assert t is not None
    if t.expires is not None:
        until = "until " + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t.expires))
    elif t.mode == "temporary":
        until = "for 24 h from your confirmation"
    else:
        until = "no expiry"
    return f"share {what} with {', '.join(g.hex() for g in t.grantees)} ({t.mode}, {until})"


def to_json(r: AgentRequest, by_id: Mapping[bytes, Entry]) -> dict[str, Any]:
    return {"id": r.id.hex(), "agent_id": r.agent_id, "kind": r.kind, "created": r.created,
            "objects": [o.hex() for o in r.objects], "cells": [c.hex() for c in r.cells],
            "share": r.share.to_json() if r.share else None, "description": describe(r, by_id)}


# ------------------------------------------------------------------ the person's answer (I/O)

def find(v: UnlockedVault, ident: str, entries: list[Entry]) -> AgentRequest | None:
    """The pending request ``ident`` (its id or a unique prefix) names; None when ``ident``
    names no request at all (it may name a staged write); NotFound when ambiguous."""
    t = ident.strip().lower()
    got = [r for r in pending(entries, staging.AgentKeys(v)) if t and r.id.hex().startswith(t)]
    if len(got) > 1:
        raise NotFound(f"id prefix {ident!r} is ambiguous ({len(got)} requests)")
    return got[0] if got else None


@dataclass(frozen=True, slots=True)
class Confirmed:
    request: AgentRequest
    erased: int                         # objects erased here (forget)
    share: ShareCreated | None          # the contract made (share)
    confirmation: bytes                 # the confirmation record's object id


def confirm(v: UnlockedVault, r: AgentRequest, entries: list[Entry], syncer: Callable[[], Syncer],
            *, now: int | None = None) -> Confirmed:
    """Do what ``r`` asks, on this device, then record the person's confirmation.  A share that
    fails (no server, an unknown grantee, an expiry now past) raises and records nothing: the
    request still waits, to be confirmed again or discarded."""
    by_id = {e.id: e for e in entries}
    erased, made = 0, None
    if r.kind == "forget":
        for oid in r.objects:
            if _memory(oid, by_id) is not None and oid in v.store.object_ids():
                erased += len(v.forget(oid.hex()))
    else:
        from ownmem.vault.sharing import share_cells

        t = r.share
        assert t is not None
        if any(_memory(o, by_id) is None for o in r.objects):
            raise VaultError("a memory this share names is no longer in this vault: discard the request")
        made = share_cells(syncer(), r.cells, t.grantees, t.mode, scope=t.scope, expires=t.expires, now=now)
    oid = v.add(f"(confirms the {r.kind} request {r.id.hex()[:12]} of agent {r.agent_id})",
                extensions={"uomp": {"confirms": r.id.hex()}})
    return Confirmed(r, erased, made, oid)


def discard(v: UnlockedVault, r: AgentRequest) -> int:
    """Drop ``r``: the request record is erased (everywhere at the next sync); nothing it asked
    for happens."""
    return len(v.forget(r.id.hex()))
