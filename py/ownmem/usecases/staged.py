"""Staged agent writes waiting for the person (uomp-draft-00 "11.3 Sensitivity Rules", "20.4 Agent
Write Restrictions", "22. Future Work": Milestone 2 staging): which memory is whose staged write,
which are confirmed, which an agent's recall must not see.

An agent's write is sealed under the agent's own author key (ownmem.usecases.authors) with the
payload extension ``"uomp": {"source": "agent", "agent_id": NAME, "staged": true}``: the flag is
inside what the agent signs, so neither the agent nor the server can take it off.  It stays
staged, out of other agents' recall and not the person's memory, until the person confirms it
(an owner-signed control.Confirmation) or discards it (the staged memory is forgotten); both are
ownmem.usecases.answers, the one place every front end calls.  A staged flag its signer cannot
prove is held back from every agent and offered to nobody (``NO_AGENT``).

Pure functions over a vault listing; the write audit of the agent service is ownmem.agent.staging.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ownmem.aperto.model import Trust
from ownmem.uomp.agents import valid_agent_id
from ownmem.uomp.control import Confirmation
from ownmem.usecases.authors import AgentKeys, bound_agent, uomp_of
from ownmem.vault.vault import Entry

# the owner of a staged write whose signer is not the agent it names: no credential can have
# this agent id (uomp.agents.valid_agent_id), so no agent recalls it, and nobody is asked to confirm it
NO_AGENT = "(no agent)"


def confirms(e: Entry) -> bytes | None:
    """The staged object a confirmation record confirms; only the owner's records count."""
    c = Confirmation.parse(e.opened)
    return None if c is None else c.target


def is_confirmation(e: Entry) -> bool:
    """Whether ``e`` claims to confirm something, whoever signed it (never memory to recall)."""
    return Confirmation.claimed(e.opened)


def staged_agent(e: Entry, keys: AgentKeys) -> str | None:
    """The agent whose staged write this is; None for anything else (the owner's own memory,
    or an agent memory that is not flagged, i.e. written before staging).  A staged flag whose
    agent_id its key does not match is NO_AGENT: held back from every agent.  An unverified
    memory (its agent's key revoked since, say) is matched on the key it claims: that claim
    only narrows who recalls it to the agent named, and it still reads as unverified."""
    u, o = uomp_of(e), e.opened
    if u.get("source") != "agent" or u.get("staged") is not True or o.trust is Trust.SELF:
        return None
    if o.trust is Trust.UNVERIFIED:
        name = u.get("agent_id")
        ok = isinstance(name, str) and valid_agent_id(name) and o.claimed_author_key_id == keys.key_id(name)
        return str(name) if ok else NO_AGENT
    return bound_agent(e, keys) or NO_AGENT


@dataclass(frozen=True)
class StagedWrite:
    entry: Entry
    agent_id: str


def confirmed_ids(entries: Iterable[Entry]) -> frozenset[bytes]:
    """The object ids the person's confirmation records name (staged writes and requests)."""
    return frozenset(c for c in (confirms(e) for e in entries) if c is not None)


def pending(entries: list[Entry], keys: AgentKeys) -> list[StagedWrite]:
    """The staged writes still waiting for the person: flagged by a proven agent, not
    confirmed, not superseded."""
    done = confirmed_ids(entries)
    out = []
    for e in entries:
        a = staged_agent(e, keys)
        if a is not None and a != NO_AGENT and e.id not in done and e.is_head:
            out.append(StagedWrite(e, a))
    return sorted(out, key=lambda s: (s.entry.opened.created, s.entry.id))


def hidden_from(e: Entry, caller: str | None, confirmed: frozenset[bytes], keys: AgentKeys) -> bool:
    """Whether recall by agent ``caller`` must not see ``e``: a confirmation record (bookkeeping,
    not memory), or another agent's staged write the person has not confirmed."""
    if is_confirmation(e):
        return True
    a = staged_agent(e, keys)
    return a is not None and e.id not in confirmed and a != caller
