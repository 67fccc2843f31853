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

Both travel through ordinary sync, so any device (the CLI or the PWA) can confirm or discard
(docs/decisions.md "UOMP staged agent writes").  The decisions here are pure functions over a
vault listing; the I/O is in the CLI (``ownmem staged``) and the agent operator.

Every agent write attempt, allowed or refused, is recorded by ``audit_write`` (one place):
an append-only JSON-lines file in the vault folder until the UOMP audit (ownmem.uomp.audit)
takes it over.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..aperto.model import Trust
from ..errors import OwnmemError
from ..vault.vault import Entry

WRITE_AUDIT_FILE = "uomp-write-audit.jsonl"


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


def staged_agent(e: Entry) -> str | None:
    """The agent whose staged write this is; None for anything else (an agent memory that is
    not flagged, i.e. written before staging, is not staged)."""
    u = uomp_of(e)
    if u.get("source") == "agent" and u.get("staged") is True and isinstance(u.get("agent_id"), str) \
            and e.opened.trust is not Trust.SELF:
        return str(u["agent_id"])
    return None


@dataclass(frozen=True)
class StagedWrite:
    entry: Entry
    agent_id: str


def confirmed_ids(entries: Iterable[Entry]) -> frozenset[bytes]:
    return frozenset(c for c in (confirms(e) for e in entries) if c is not None)


def pending(entries: list[Entry]) -> list[StagedWrite]:
    """The staged writes still waiting for the person: flagged, not confirmed, not superseded."""
    done = confirmed_ids(entries)
    out = []
    for e in entries:
        a = staged_agent(e)
        if a is not None and e.id not in done and e.is_head:
            out.append(StagedWrite(e, a))
    return sorted(out, key=lambda s: (s.entry.opened.created, s.entry.id))


def hidden_from(e: Entry, caller: str | None, confirmed: frozenset[bytes]) -> bool:
    """Whether recall by agent ``caller`` must not see ``e``: a confirmation record (bookkeeping,
    not memory), or another agent's staged write the person has not confirmed."""
    if is_confirmation(e):
        return True
    a = staged_agent(e)
    return a is not None and e.id not in confirmed and a != caller


def check_write(sensitivity: str | None) -> None:
    if sensitivity == "high":
        raise WriteRefused("agents may not write high-sensitivity memory items (UOMP 11.3, 20.4)")


def audit_write(folder: str | os.PathLike[str] | None, agent_id: str, outcome: str, reason: str = "",
                object_id: bytes | None = None, now: float | None = None) -> None:
    """Append one write attempt to the vault folder's write audit (fsynced: on disk before the answer).
    A vault without a folder (the browser's) runs no agent service, so has nothing to audit."""
    if folder is None:
        return
    rec = {"at": int(time.time() if now is None else now), "agent_id": agent_id, "action": "write",
           "outcome": outcome, "reason": reason, "object_id": object_id.hex() if object_id else None}
    p = Path(folder) / WRITE_AUDIT_FILE
    fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps(rec, sort_keys=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read_write_audit(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    p = Path(folder) / WRITE_AUDIT_FILE
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
