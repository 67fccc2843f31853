"""Who wrote this memory: an agent's author key (the one derivation: the agent service signs the
agent's writes with it, every view checks signers against it) and the one decision "written by
agent N" that the agent's recall, the staged writes, the CLI and the PWA all show.

Whose write it is comes from the key, not the payload: ``agent_id`` is a claim inside the signed
payload that any key the keyring accepts could make, so it names an agent for sure only when the
signer is the key this vault derives for that name.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ownmem.aperto import keys as aperto_keys
from ownmem.aperto.model import Trust
from ownmem.crypto import run_sync
from ownmem.purposes import AGENT_AUTHOR_PREFIX, AgentAuthor
from ownmem.uomp.agents import valid_agent_id
from ownmem.uomp.control import ITEM
from ownmem.vault.vault import Entry, UnlockedVault

AGENT_INFO = AGENT_AUTHOR_PREFIX


def agent_info(agent_id: str) -> AgentAuthor:
    """The purpose of an agent's author key (ownmem.purposes).  ``agent_id`` is a credential's agent
    id (credentials.Credential.agent: "<name>.<credential id>", or the bare name of an older one)."""
    return AgentAuthor(agent_id)


def author_key(v: UnlockedVault, agent_id: str) -> aperto_keys.SigningKey:
    """The key agent ``agent_id`` signs its memories with in this vault."""
    return run_sync(aperto_keys.signing_key(v.crypto, v.purpose_key(agent_info(agent_id))))


class AgentKeys:
    """agent_id -> the key id of that agent's author key in this vault (``author_key``), derived
    once per agent id."""

    def __init__(self, v: UnlockedVault) -> None:
        self._v = v
        self._kids: dict[str, bytes] = {}

    def key_id(self, agent_id: str) -> bytes:
        kid = self._kids.get(agent_id)
        if kid is None:
            kid = self._kids[agent_id] = author_key(self._v, agent_id).key_id
        return kid


def uomp_of(e: Entry) -> dict[str, Any]:
    """The memory's "uomp" payload extension ({} when it has none)."""
    u = e.opened.extensions.get(ITEM)
    return u if isinstance(u, dict) else {}


@dataclass(frozen=True, slots=True)
class Author:
    """The agent a memory says wrote it, and whether its signer proves it (``confirmed``: the key
    whose signature verified is the one this vault derives for that agent id)."""

    agent_id: str
    confirmed: bool


def written_by(e: Entry, keys: AgentKeys) -> Author | None:
    """The agent that claims ``e`` (payload "uomp": {"source": "agent", "agent_id"}, a valid
    agent id), with whether its key proves it; None for the person's own memory, an unverified
    one (nothing of it is authenticated) or a claim that names no valid agent id."""
    u, o = uomp_of(e), e.opened
    name = u.get("agent_id")
    if u.get("source") != "agent" or o.trust is Trust.UNVERIFIED or not valid_agent_id(name):
        return None
    assert isinstance(name, str)
    proven = (o.trust is Trust.TRUSTED and o.signature_verified and o.signer_key_id is not None
              and o.signer_key_id == keys.key_id(name))
    return Author(name, proven)


def bound_agent(e: Entry, keys: AgentKeys) -> str | None:
    """The agent that wrote ``e``, proven by its key (``written_by`` and confirmed); a claim by
    any other key (an accepted third-party author, an unverified memory) names no agent."""
    a = written_by(e, keys)
    return a.agent_id if a is not None and a.confirmed else None
