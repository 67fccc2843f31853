"""Staged agent writes (uomp-draft-00 "11.3 Sensitivity Rules", "20.4 Agent Write Restrictions",
"22. Future Work": Milestone 2 staging).

An agent's write is sealed under the agent's own author key with the payload extension
``"uomp": {"source": "agent", "agent_id": NAME, "staged": true}``: the flag is inside what the
agent signs, so neither the agent nor the server can take it off.  It stays staged, out of other
agents' recall and not the person's memory, until the person

* confirms it: the owner seals a confirmation record, a memory whose extension is
  ``"uomp": {"confirms": "<object id hex>"}`` (owner-signed, so only the person can make one; the
  agent's memory keeps its own signature and opens as trusted, never self), or
* discards it: the staged memory is forgotten (cryptographic erasure, a FORGET receipt to the
  server and through its feed to every device).

Whose write it is comes from the key, not the payload: ``agent_id`` is a claim any key the
keyring accepts could make, so it names an agent only when the signer is the key this vault
derives for that name (``bound_agent``); a staged flag its signer cannot prove is held back
from every agent and offered to nobody (``NO_AGENT``).

Both travel through ordinary sync, so any device (the CLI or the PWA) can confirm or discard
(docs/decisions.md "UOMP staged agent writes").  The decisions here are pure functions over a
vault listing; the I/O is in the CLI (``ownmem staged``) and the agent operator.

Every agent write attempt, allowed or refused, is recorded by ``WriteAudit`` (one place), on
disk before anything is written: an append-only JSON-lines file in the vault folder until the
UOMP audit (ownmem.uomp.audit) takes it over.
"""
from __future__ import annotations

import json
import logging
import os
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..agent.credentials import valid_name
from ..aperto import keys as aperto_keys
from ..aperto.model import Trust
from ..crypto import run_sync
from ..errors import OwnmemError, StoreError
from ..vault.vault import Entry, UnlockedVault

_log = logging.getLogger("ownmem.uomp")
WRITE_AUDIT_FILE = "uomp-write-audit.jsonl"
ATTEMPTED = "attempted"      # the outcome of an attempt whose outcome was never recorded


class WriteRefused(OwnmemError):
    """An agent write UOMP forbids (a high-sensitivity item, 11.3 / 20.4)."""

    code = "write_refused"


def uomp_of(e: Entry) -> dict[str, Any]:
    u = e.opened.extensions.get("uomp")
    return u if isinstance(u, dict) else {}


def confirms(e: Entry) -> bytes | None:
    """The staged object a confirmation record confirms; only the owner's records count."""
    c = uomp_of(e).get("confirms")
    if e.opened.trust is not Trust.SELF or not isinstance(c, str):
        return None
    try:
        return bytes.fromhex(c)
    except ValueError:
        return None


def is_confirmation(e: Entry) -> bool:
    return "confirms" in uomp_of(e)


class AgentKeys:
    """agent_id -> the key id of that agent's author key in this vault: the Ed25519 key seeded by
    ``purpose_key("ownmem/v1/agent/<agent_id>")``, which `ownmem agent` signs the agent's writes
    with (agent/operator.py ``author_key``).  Derived once per name."""

    def __init__(self, v: UnlockedVault) -> None:
        self._v = v
        self._kids: dict[str, bytes] = {}

    def key_id(self, name: str) -> bytes:
        kid = self._kids.get(name)
        if kid is None:
            from ..agent.operator import agent_info    # operator imports this module

            seed = self._v.purpose_key(agent_info(name))
            kid = self._kids[name] = run_sync(aperto_keys.signing_key(self._v.crypto, seed)).key_id
        return kid


def bound_agent(e: Entry, keys: AgentKeys) -> str | None:
    """The agent that wrote ``e``, proven by its key: the payload's ``agent_id`` claim, only when
    the key whose signature verified is the one this vault derives for that name.  A claim by any
    other key (an accepted third-party author, an unverified memory) names no agent."""
    u, o = uomp_of(e), e.opened
    name = u.get("agent_id")
    if u.get("source") != "agent" or not isinstance(name, str) or not valid_name(name):
        return None
    if o.trust is not Trust.TRUSTED or not o.signature_verified or o.signer_key_id is None:
        return None
    return name if o.signer_key_id == keys.key_id(name) else None


# the owner of a staged write whose signer is not the agent it names: no credential can have
# this name (credentials.valid_name), so no agent recalls it, and nobody is asked to confirm it
NO_AGENT = "(no agent)"


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
        ok = isinstance(name, str) and valid_name(name) and o.claimed_author_key_id == keys.key_id(name)
        return str(name) if ok else NO_AGENT
    return bound_agent(e, keys) or NO_AGENT


@dataclass(frozen=True)
class StagedWrite:
    entry: Entry
    agent_id: str


def confirmed_ids(entries: Iterable[Entry]) -> frozenset[bytes]:
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


def check_write(sensitivity: str | None) -> None:
    if sensitivity == "high":
        raise WriteRefused("agents may not write high-sensitivity memory items (UOMP 11.3, 20.4)")


class WriteAudit:
    """The write audit of one attempt: ``begin`` appends it (fsynced) before anything is written,
    ``end`` appends its outcome once it is known.  So every attempt is on disk before it can have
    an effect: an audit that cannot be written refuses the write with StoreError (the service's
    503, nothing sealed), and an outcome that cannot be recorded afterwards is logged, never
    turned into a failure of a write that happened (the attempt reads as "attempted").
    A vault without a folder (the browser's) runs no agent service, so has nothing to audit."""

    def __init__(self, folder: str | os.PathLike[str] | None, agent_id: str, attempt: str) -> None:
        self.folder, self.agent_id, self.attempt = folder, agent_id, attempt

    @classmethod
    def begin(cls, folder: str | os.PathLike[str] | None, agent_id: str, now: float | None = None) -> WriteAudit:
        a = cls(folder, agent_id, secrets.token_hex(8))
        try:
            a._append({"attempt": a.attempt, "at": int(time.time() if now is None else now), "agent_id": agent_id,
                       "action": "write", "outcome": ATTEMPTED, "reason": "", "object_id": None})
        except OSError as e:
            raise StoreError(f"the write audit cannot be written ({e.strerror or e}); nothing was written") from None
        return a

    def end(self, outcome: str, reason: str = "", object_id: bytes | None = None) -> None:
        try:
            self._append({"attempt": self.attempt, "outcome": outcome, "reason": reason,
                          "object_id": object_id.hex() if object_id else None})
        except OSError:
            _log.warning("the outcome %r of write attempt %s was not audited", outcome, self.attempt)

    def _append(self, rec: dict[str, Any]) -> None:
        if self.folder is None:
            return
        fd = os.open(Path(self.folder) / WRITE_AUDIT_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(rec, sort_keys=True) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)


def read_write_audit(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """One record per attempt, in the order they began, with its outcome (ATTEMPTED when none
    was recorded)."""
    p = Path(folder) / WRITE_AUDIT_FILE
    if not p.exists():
        return []
    out: dict[str, dict[str, Any]] = {}
    for line in p.read_text().splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        if rec["attempt"] in out:
            out[rec["attempt"]].update(rec)
        else:
            out[rec["attempt"]] = rec
    return list(out.values())
