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
                  staged write (control.Confirmation: only the owner's count)
        discard   forgets the request record (erased everywhere at the next sync)

A request counts only when its signer is the key this vault derives for the agent it names
(``request_of``): one signed by any other key, or by a key the keyring no longer accepts, is
shown to nobody and does nothing.  The decisions are pure functions over a vault listing (the record's
form is ownmem.uomp.control.Request); the person's answer is ownmem.usecases.answers' ``confirm``
and ``discard``, the one place every front end calls.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ownmem.aperto.model import Trust
from ownmem.uomp.control import KINDS, REQUEST, Request, ShareTerms, is_control
from ownmem.usecases.authors import AgentKeys
from ownmem.usecases.staged import confirmed_ids
from ownmem.vault.vault import Entry

__all__ = ["KINDS", "REQUEST", "AgentRequest", "ShareTerms", "describe", "extension", "named_memory", "pending",
           "request_of", "to_json"]


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
    return dict(Request.of(kind, agent_id, objects, cells, share).make())


def request_of(e: Entry, keys: AgentKeys) -> AgentRequest | None:
    """The agent request ``e`` carries, when its signer is the author key of the agent it names;
    None for anything else (no request, a malformed one, another key's)."""
    o = e.opened
    r = Request.parse(o)
    # bound by the key, as authors.bound_agent: trusted (the keyring accepts it), verified, and
    # the very key this vault derives for that agent's name
    if (r is None or o.trust is not Trust.TRUSTED or not o.signature_verified
            or o.signer_key_id != keys.key_id(r.agent_id)):
        return None
    return AgentRequest(e.id, r.agent_id, r.kind, r.objects, r.cells, r.share, o.created or 0)


def pending(entries: Iterable[Entry], keys: AgentKeys) -> list[AgentRequest]:
    """The agent requests still waiting for the person: bound to their agent, not confirmed."""
    entries = list(entries)
    done = confirmed_ids(entries)
    out = [r for r in (request_of(e, keys) for e in entries if REQUEST in e.opened.extensions)
           if r is not None and r.id not in done]
    return sorted(out, key=lambda r: (r.created, r.id))


def named_memory(oid: bytes, by_id: Mapping[bytes, Entry]) -> Entry | None:
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
    what = "; ".join(_quoted(named_memory(o, by_id)) for o in r.objects)
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
