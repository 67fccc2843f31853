"""The agent service's side of staged agent writes and requests (uomp-draft-00 "11.3 Sensitivity
Rules", "20.4 Agent Write Restrictions"): the refusal of a high-sensitivity write, and the write
audit.  Which memory is a staged write, and the person's confirm and discard, are the use cases
ownmem.usecases.staged, .requests and .answers (every front end shares them); whose write it is,
ownmem.usecases.authors.

Every agent write attempt is an entry of the one UOMP audit (ownmem.agent.audit: encrypted under
the ``ownmem/v1/audit`` key, batched, anchored and synced by audit_sync, shown in the PWA), made
by ``WriteAudit`` (one place) and on disk before anything is written:

    write_attempt    saihm_remember called (key: none yet); if it cannot be recorded: no write
    write_staged     sealed, receipted and staged (key: the object id, as `ownmem staged` names it)
    write_refused    refused: high sensitivity, empty, too large, or the public log unavailable
    write_failed     the store failed
    write_confirmed  the person confirmed it (a confirmation record reached the agent service)
    write_discarded  the person discarded it (the staged memory is erased)

An agent's staged forget or share request (ownmem.usecases.requests) is audited the same way,
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
from pathlib import Path
from typing import Any, Protocol

from ownmem.agent.audit import AuditEntry, new_id
from ownmem.errors import OwnmemError, StoreError

_log = logging.getLogger("ownmem.uomp")
WRITE_AUDIT_FILE = "uomp-write-audit.jsonl"
ATTEMPTED = "attempted"      # the outcome of an attempt whose outcome was never recorded


class WriteRefused(OwnmemError):
    """An agent write UOMP forbids (a high-sensitivity item, 11.3 / 20.4)."""

    code = "write_refused"


def check_write(sensitivity: str | None) -> None:
    if sensitivity == "high":
        raise WriteRefused("agents may not write high-sensitivity memory items (UOMP 11.3, 20.4)")


class AuditSink(Protocol):
    """What the write audit needs of audit.AuditLog (its public ``record``)."""

    def record(self, e: AuditEntry) -> None: ...


def write_entry(agent_id: str, action: str, object_id: str | None, allowed: bool, reason: str,
                now: float | None = None, session_id: str = "") -> AuditEntry:
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
        request (ownmem.usecases.requests) the same way: request_attempt, then request_staged
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
