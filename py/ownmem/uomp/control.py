"""Control records: memories that carry UOMP bookkeeping rather than memory (a session's
revocation, the confirmation of a staged agent write or request, an agent's staged forget or
share request, a published session or agent record), each kind a typed record with one ``make``
(its payload extension) and one ``parse`` (from an opened memory), and the one predicate that
decides what is control.

They travel as ordinary sealed objects so that any of the person's devices can make them
and every device (and the agent service) receives them through the blind server; only the
owner's signature gives a revocation, a confirmation or a session record effect (``parse``
returns None for any other signer); a request counts only under its agent's own key, which
ownmem.usecases.requests checks.  One predicate decides what is control, so every view (SAIHM
recall, the Guard, the CLI list, the PWA) leaves the same records out.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ownmem.aperto.model import OpenedMemory, Trust
from ownmem.uomp.agents import valid_agent_id

REVOCATION = "uomp_revocation"      # a session revoked from one of the person's devices
SESSION_RECORD = "uomp_session"     # a session or agent record the agent service publishes
AUDIT = "uomp_audit"                # a batch of the UOMP audit (ownmem.agent.audit_sync)
REQUEST = "uomp_request"            # an agent's staged forget or share
ITEM = "uomp"                       # the item extension; "confirms" inside it is a confirmation

# payload extensions that make a memory a control record, whoever signed it: an unsigned or
# foreign one has no effect, and is still not memory to show
CONTROL_EXTENSIONS = (REVOCATION, SESSION_RECORD, AUDIT, REQUEST)


def is_control(extensions: Mapping[str, Any]) -> bool:
    """Whether a memory with these payload extensions is a control record."""
    if any(k in extensions for k in CONTROL_EXTENSIONS):
        return True
    u = extensions.get(ITEM)
    return isinstance(u, dict) and "confirms" in u


# control records whose only effect is to be read (an audit batch, a session record for the
# other devices, an agent's staged request: it acts only once the person confirms it, and the
# confirmation is not bookkeeping): they change no head, no staged write, no session here
BOOKKEEPING_EXTENSIONS = (SESSION_RECORD, AUDIT, REQUEST)


def is_bookkeeping(extensions: Mapping[str, Any]) -> bool:
    """Whether a memory with these payload extensions is a control record with no effect on
    other memories (see BOOKKEEPING_EXTENSIONS): not a revocation, not a confirmation."""
    return (any(k in extensions for k in BOOKKEEPING_EXTENSIONS)
            and not any(k in extensions for k in CONTROL_EXTENSIONS if k not in BOOKKEEPING_EXTENSIONS)
            and ITEM not in extensions)


def _owners(o: OpenedMemory, name: str) -> dict[str, Any] | None:
    """The body of extension ``name`` when the memory is the owner's own (Trust.SELF: signed by
    the owner key; the blind server or an agent's key cannot make one), else None."""
    body = o.extensions.get(name)
    return body if o.trust is Trust.SELF and isinstance(body, dict) else None


@dataclass(frozen=True, slots=True)
class Revocation:
    """An owner-signed revocation of a UOMP session, for the agent service to apply when its
    sync brings it (`ownmem agent revoke` on another device, the PWA's Agents screen)."""

    session_id: str
    revoked_at: int | None = None

    TAG = "uomp-revocation"

    def make(self) -> dict[str, object]:
        return {REVOCATION: {"session_id": self.session_id, "revoked_at": self.revoked_at}}

    def content(self) -> str:
        return f"UOMP session {self.session_id} revoked"

    @staticmethod
    def parse(o: OpenedMemory) -> Revocation | None:
        r = _owners(o, REVOCATION)
        if r is None or not isinstance(r.get("session_id"), str):
            return None
        at = r.get("revoked_at")
        return Revocation(r["session_id"], at if isinstance(at, int) and not isinstance(at, bool) else None)


@dataclass(frozen=True, slots=True)
class Confirmation:
    """The person's confirmation of a staged agent write or request (``target``: its object id):
    "uomp": {"confirms": "<object id hex>"}; only the owner's counts."""

    target: bytes

    def make(self) -> dict[str, object]:
        return {ITEM: {"confirms": self.target.hex()}}

    @staticmethod
    def parse(o: OpenedMemory) -> Confirmation | None:
        u = _owners(o, ITEM)
        c = u.get("confirms") if u is not None else None
        if not isinstance(c, str):
            return None
        try:
            return Confirmation(bytes.fromhex(c))
        except ValueError:
            return None

    @staticmethod
    def claimed(o: OpenedMemory) -> bool:
        """Whether the memory claims to be a confirmation, whoever signed it (bookkeeping either
        way: never recalled)."""
        u = o.extensions.get(ITEM)
        return isinstance(u, dict) and "confirms" in u


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A session or agent record the agent service publishes (ownmem.agent.published documents
    its fields): ``doc["kind"]`` "session" or "agent"; only the owner's counts."""

    doc: dict[str, Any]

    STATUSES = ("created", "active", "closed", "revoked", "expired")

    def make(self) -> dict[str, object]:
        return {SESSION_RECORD: self.doc}

    @staticmethod
    def parse(o: OpenedMemory) -> SessionRecord | None:
        d = _owners(o, SESSION_RECORD)
        if d is None:
            return None
        kind = d.get("kind")
        if kind == "session" and isinstance(d.get("session_id"), str) and d.get("status") in SessionRecord.STATUSES \
                and isinstance(d.get("expires_at"), int) and isinstance(d.get("agent_id"), str):
            return SessionRecord(d)
        if kind == "agent" and isinstance(d.get("agent_id"), str):
            return SessionRecord(d)
        return None


@dataclass(frozen=True, slots=True)
class AuditBatch:
    """A batch of the UOMP audit the agent service seals for the person's other devices
    (ownmem.agent.audit_sync documents its fields): ``doc`` as readers see it, "entries" a list
    (version 2 carries them as one JSON text: the pure-Python CBOR codec spent more of the agent's
    time on 1,000 small maps than the Guard did; version 1 as a CBOR array); only the owner's counts."""

    doc: dict[str, Any]

    def make(self) -> dict[str, object]:
        return {AUDIT: self.doc}

    @staticmethod
    def parse(o: OpenedMemory) -> AuditBatch | None:
        d = _owners(o, AUDIT)
        if d is not None and d.get("v") == 2 and isinstance(d.get("entries"), str):
            try:
                d = {**d, "entries": json.loads(d["entries"])}
            except (ValueError, RecursionError):
                return None
        try:
            ok = (isinstance(d, dict) and d.get("v") in (1, 2) and isinstance(d.get("stream"), str)
                  and type(d.get("seq")) is int and isinstance(d.get("entries"), list)
                  and isinstance(d.get("sessions"), dict) and len(bytes.fromhex(d["root"])) == 32
                  and isinstance(d.get("anchor"), str) and type(d.get("last")) is int
                  and all(isinstance(x, dict) for x in d["entries"]))
        except (TypeError, ValueError):
            return None
        return AuditBatch(d) if ok and isinstance(d, dict) else None


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

    @staticmethod
    def parse(v: object) -> ShareTerms | None:
        if not isinstance(v, dict):
            return None
        grantees = _hexes(v.get("grantees"), 32, MAX_GRANTEES)
        mode, scope, exp = v.get("type"), v.get("scope"), v.get("expiryEpoch")
        if grantees is None or mode not in SHARE_TYPES or scope != "read":
            return None
        if exp is not None and not (isinstance(exp, str) and exp.isascii() and exp.isdigit() and len(exp) < 20):
            return None
        return ShareTerms(grantees, str(mode), "read", None if exp is None else int(exp))


def _hexes(v: object, size: int, most: int) -> tuple[bytes, ...] | None:
    if not isinstance(v, list) or not 0 < len(v) <= most:
        return None
    out = []
    for x in v:
        if not isinstance(x, str) or len(x) != 2 * size or any(c not in "0123456789abcdef" for c in x):
            return None
        out.append(bytes.fromhex(x))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Request:
    """An agent's staged forget or share, signed by the agent's author key:
    "uomp_request": {"kind", "agent_id", "objects": [hex], "cells": [hex], "share": {...}}.
    ``parse`` reads its form only; whether its signer is that agent's key is
    ownmem.usecases.requests.request_of's to decide."""

    kind: str                   # forget | share
    agent_id: str
    objects: tuple[bytes, ...]
    cells: tuple[bytes, ...]
    share: ShareTerms | None

    def make(self) -> dict[str, object]:
        body: dict[str, Any] = {"kind": self.kind, "agent_id": self.agent_id,
                                "objects": [o.hex() for o in self.objects], "cells": [c.hex() for c in self.cells]}
        if self.share is not None:
            body["share"] = self.share.to_json()
        return {REQUEST: body}

    @staticmethod
    def of(kind: str, agent_id: str, objects: Iterable[bytes], cells: Iterable[bytes],
           share: ShareTerms | None) -> Request:
        return Request(kind, agent_id, tuple(objects), tuple(cells), share)

    @staticmethod
    def parse(o: OpenedMemory) -> Request | None:
        body = o.extensions.get(REQUEST)
        if not isinstance(body, dict):
            return None
        name, kind = body.get("agent_id"), body.get("kind")
        if not isinstance(name, str) or not valid_agent_id(name) or kind not in KINDS:
            return None
        objects, cells = _hexes(body.get("objects"), 16, MAX_TARGETS), _hexes(body.get("cells"), 32, MAX_TARGETS)
        share = ShareTerms.parse(body.get("share")) if kind == "share" else None
        if objects is None or cells is None or (kind == "share") != (share is not None):
            return None
        return Request(str(kind), name, objects, cells, share)
