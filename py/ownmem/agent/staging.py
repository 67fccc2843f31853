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
(docs/decisions.md "20.4 Agent Write Restrictions").  The decisions here are pure functions over a
vault listing; the I/O is in the CLI (``ownmem staged``) and the agent operator.

Every agent write attempt is an entry of the one UOMP audit (ownmem.agent.audit: encrypted under
the ``ownmem/v1/audit`` key, batched, anchored and synced by audit_sync, shown in the PWA), made
by ``WriteAudit`` (one place) and on disk before anything is written:

    write_attempt    saihm_remember called (key: none yet); if it cannot be recorded: no write
    write_staged     sealed, receipted and staged (key: the object id, as `ownmem staged` names it)
    write_refused    refused: high sensitivity, empty, too large, or the public log unavailable
    write_failed     the store failed
    write_confirmed  the person confirmed it (a confirmation record reached the agent service)
    write_discarded  the person discarded it (the staged memory is erased)

An agent's staged forget or share request (ownmem.agent.requests) is audited the same way,
``request_attempt``, ``request_staged`` (key: the request's id), ``request_refused``,
``request_failed``, ``request_confirmed``, ``request_discarded``; a call over its credential's
quota (agent/quota.py) is one ``write_refused`` / ``request_refused`` entry per run of refusals.

Entries name the agent, the object id and the reason only, never the content (as for reads);
``session_id`` is the credential's session (ownmem.agent.guarded; empty in entries made before
issue 19).  The JSON-lines file of older
versions (``uomp-write-audit.jsonl``) is imported once into the audit and removed.
"""
from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ownmem.agent.credentials import valid_agent_id
from ownmem.aperto import keys as aperto_keys
from ownmem.aperto.model import Trust
from ownmem.crypto import run_sync
from ownmem.errors import OwnmemError, StoreError
from ownmem.vault.vault import Entry, UnlockedVault
from ownmem.purposes import AGENT_AUTHOR_PREFIX, AgentAuthor

if TYPE_CHECKING:
    from ownmem.agent.audit import AuditEntry

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


AGENT_INFO = AGENT_AUTHOR_PREFIX


def agent_info(agent_id: str) -> AgentAuthor:
    """The purpose of an agent's author key: the one derivation (the operator signs with it,
    AgentKeys and the PWA check signers against it).  ``agent_id`` is a credential's agent id
    (credentials.Credential.agent: "<name>.<credential id>", or the bare name of an older one)."""
    return AgentAuthor(agent_id)


def author_key(v: UnlockedVault, agent_id: str) -> aperto_keys.SigningKey:
    return run_sync(aperto_keys.signing_key(v.crypto, v.purpose_key(agent_info(agent_id))))


class AgentKeys:
    """agent_id -> the key id of that agent's author key in this vault (``author_key``), which
    `ownmem agent` signs the agent's writes with.  Derived once per agent id."""

    def __init__(self, v: UnlockedVault) -> None:
        self._v = v
        self._kids: dict[str, bytes] = {}

    def key_id(self, agent_id: str) -> bytes:
        kid = self._kids.get(agent_id)
        if kid is None:
            kid = self._kids[agent_id] = author_key(self._v, agent_id).key_id
        return kid


def bound_agent(e: Entry, keys: AgentKeys) -> str | None:
    """The agent that wrote ``e``, proven by its key: the payload's ``agent_id`` claim, only when
    the key whose signature verified is the one this vault derives for that name.  A claim by any
    other key (an accepted third-party author, an unverified memory) names no agent."""
    u, o = uomp_of(e), e.opened
    name = u.get("agent_id")
    if u.get("source") != "agent" or not isinstance(name, str) or not valid_agent_id(name):
        return None
    if o.trust is not Trust.TRUSTED or not o.signature_verified or o.signer_key_id is None:
        return None
    return name if o.signer_key_id == keys.key_id(name) else None


# the owner of a staged write whose signer is not the agent it names: no credential can have
# this agent id (credentials.valid_agent_id), so no agent recalls it, and nobody is asked to confirm it
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
        ok = isinstance(name, str) and valid_agent_id(name) and o.claimed_author_key_id == keys.key_id(name)
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


class AuditSink(Protocol):
    """What the write audit needs of audit.AuditLog (its public ``record``)."""

    def record(self, e: AuditEntry) -> None: ...


def write_entry(agent_id: str, action: str, object_id: str | None, allowed: bool, reason: str,
                now: float | None = None, session_id: str = "") -> AuditEntry:
    from ownmem.agent.audit import AuditEntry, new_id     # not at import: this module runs in the browser too

    return AuditEntry(new_id(), int(time.time() if now is None else now), session_id, agent_id, action, object_id,
                      None, (), allowed, reason)


class WriteAudit:
    """The audit of one write attempt: ``begin`` records it (durably: AuditLog.record returns once
    it is on disk) before anything is written, ``end`` records its outcome once it is known.  An
    audit that cannot be written refuses the write with StoreError (the service's 503, nothing
    sealed); an outcome that cannot be recorded afterwards is logged, never turned into a failure
    of a write that happened (the attempt then stands alone, as after a crash).  ``log`` None:
    a vault without a folder (the browser's) runs no agent service, so has nothing to audit."""

    def __init__(self, log: AuditSink | None, agent_id: str, attempt: str, prefix: str = "write",
                 session_id: str = "") -> None:
        self.log, self.agent_id, self.attempt, self.prefix, self.session_id = log, agent_id, attempt, prefix, session_id

    @classmethod
    def begin(cls, log: AuditSink | None, agent_id: str, now: float | None = None, *, prefix: str = "write",
              call: str = "saihm_remember", session_id: str = "") -> WriteAudit:
        """``prefix`` "request" (with ``call`` saihm_forget / saihm_share) audits an agent's staged
        request (ownmem.agent.requests) the same way: request_attempt, then request_staged
        (key: the request's id), request_refused or request_failed."""
        e = write_entry(agent_id, prefix + "_attempt", None, False, f"{call} called; its outcome follows", now,
                        session_id)
        a = cls(log, agent_id, e.id, prefix, session_id)
        if log is not None:
            try:
                log.record(e)
            except StoreError as x:
                raise StoreError(f"the write audit cannot be written ({x}); nothing was written") from None
        return a

    def end(self, outcome: str, reason: str = "", object_id: bytes | None = None) -> None:
        """``outcome``: staged | refused | failed."""
        if self.log is None:
            return
        why = f"{reason or outcome} (attempt {self.attempt})"
        try:
            self.log.record(write_entry(self.agent_id, f"{self.prefix}_{outcome}",
                                        object_id.hex() if object_id else None, outcome == "staged", why,
                                        session_id=self.session_id))
        except StoreError:
            _log.warning("the outcome %r of write attempt %s was not audited", outcome, self.attempt)


def refused(log: AuditSink | None, agent_id: str, prefix: str, reason: str, session_id: str = "") -> None:
    """One entry for a call refused before it began (over quota): ``<prefix>_refused``."""
    if log is None:
        return
    try:
        log.record(write_entry(agent_id, prefix + "_refused", None, False, reason, session_id=session_id))
    except StoreError:
        _log.warning("a refusal (%s) of %s was not audited", reason[:40], agent_id)


def settled(agent_id: str, object_id: bytes, confirmed: bool, log: AuditSink | None, prefix: str = "write") -> None:
    """Audit the person's answer to a staged write (``prefix`` "request": to a staged request),
    as the agent service learns it (through sync)."""
    if log is None:
        return
    what = "staged write" if prefix == "write" else "staged request"
    action, why = ((f"{prefix}_confirmed", f"the person confirmed the {what}") if confirmed else
                   (f"{prefix}_discarded", f"the {what} was erased (discarded)"))
    try:
        log.record(write_entry(agent_id, action, object_id.hex(), confirmed, why))
    except StoreError:
        _log.warning("%s of %s was not audited", action, object_id.hex()[:12])


def import_write_audit(folder: str | os.PathLike[str] | None, log: AuditSink) -> int:
    """The JSON-lines write audit of older versions into the UOMP audit, once: renamed first (so a
    second start does not import it again), recorded, then removed -> how many records.  A crash
    in between leaves the renamed file, imported again at the next start (its entries twice,
    under new ids: duplicates, never a loss)."""
    if folder is None:
        return 0
    p, moving = Path(folder) / WRITE_AUDIT_FILE, Path(folder) / (WRITE_AUDIT_FILE + ".importing")
    if p.exists():
        os.replace(p, moving)
    if not moving.exists():
        return 0
    try:
        recs = read_write_audit(folder, moving.name)
    except (ValueError, KeyError, TypeError):
        _log.warning("%s does not parse: left as %s, not imported", WRITE_AUDIT_FILE, moving.name)
        return 0
    for r in recs:
        outcome = str(r.get("outcome") or ATTEMPTED)
        action = "write_attempt" if outcome == ATTEMPTED else "write_" + outcome
        log.record(write_entry(str(r.get("agent_id") or ""), action, r.get("object_id"), outcome == "staged",
                               f"{r.get('reason') or outcome} (imported from {WRITE_AUDIT_FILE})",
                               now=int(r.get("at") or 0)))
    moving.unlink()
    return len(recs)


def read_write_audit(folder: str | os.PathLike[str], name: str = WRITE_AUDIT_FILE) -> list[dict[str, Any]]:
    """The old JSON-lines file: one record per attempt, in the order they began, with its outcome
    (ATTEMPTED when none was recorded)."""
    p = Path(folder) / name
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
