"""What the PWA's shares screen reads, as JSON (ownmem.vault.sharing; SAIHM "Sharing
contracts").  Every contract and shared memory here was checked by vault.sharing before it
reached these functions (contracts against their holder's published key, shared cells
against the sharer's holder and owner keys); this module only names the fields for the page.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ownmem.aperto.model import type_name
from ownmem.vault import sharing
from ownmem.vault.sharing import ShareCreated, SharedMemory, ShareRefused, ShareView, VerifiedHolder
from ownmem.vault.store import Store
from ownmem.vault.sync import Syncer

# How long a share made from the app may last, in seconds from now, per mode: SAIHM bounds a
# TEMPORARY contract to 24 h and a PERMANENT one to none (expiresAt 0); SYNDICATE may have
# either.  The page offers these choices; the worker takes no other (0: no end).
EXPIRY_CHOICES: dict[str, tuple[int, ...]] = {
    "temporary": (3600, 8 * 3600, 86400),
    "permanent": (0,),
    "syndicate": (0, 7 * 86400, 30 * 86400),
}


@dataclass(frozen=True, slots=True)
class OfferRequest:
    """What the Offer form asks, checked: the memories (object ids), one grantee, mode, and
    how long from now (0: no end)."""
    memories: tuple[str, ...]
    grantee: bytes
    mode: str
    expires_in: int


def offer_request(memories: list[str], to: str, mode: str, expires_in: int | None) -> OfferRequest:
    """The Offer form's fields as the vault's sharing code takes them, or ShareRefused with
    what to fix (a malformed holder ID first: it is the field a person pastes)."""
    grantee = sharing.parse_holder_id(to)
    m = mode.strip().lower()
    if m not in EXPIRY_CHOICES:
        raise ShareRefused("a share is temporary, permanent or syndicate")
    ids = tuple(dict.fromkeys(x.strip().lower() for x in memories if x.strip()))
    if not ids:
        raise ShareRefused("choose at least one memory to share")
    span = EXPIRY_CHOICES[m][-1] if expires_in is None and m == "temporary" else (expires_in or 0)
    if span not in EXPIRY_CHOICES[m]:
        raise ShareRefused(f"a {m} share cannot last {span} seconds")
    return OfferRequest(ids, grantee, m, span)


def make_offer(syncer: Syncer, req: OfferRequest, now: int) -> ShareCreated:
    """The offer, made by the vault's one sharing code (vault.sharing.share: the same as
    `ownmem share create`)."""
    return sharing.share(syncer, list(req.memories), [req.grantee], req.mode,
                         expires=now + req.expires_in if req.expires_in else None, now=now)


def offer_json(made: ShareCreated) -> dict[str, Any]:
    return {"contract_id": made.contract_id.hex(), "receipt_id": made.receipt_id.hex(), "mode": made.mode,
            "expires_at": made.expires_at, "grantee": made.grantee_ids[0].hex(), "cells": len(made.cell_ids)}


def share_json(s: ShareView, sharers: dict[bytes, VerifiedHolder], store: Store) -> dict[str, Any]:
    """One contract as one side sees it; ``memories``: the covered cells this device holds
    as its own objects (a sharer's view), by object id."""
    c = s.contract
    holder = sharers.get(c.holder_id)
    mine = [store.object_of_cell(cell) for cell in c.shard_ids]
    return {"contract_id": c.contract_id.hex(), "holder_id": c.holder_id.hex(),
            "holder_name": holder.name if holder is not None else None, "grantee": s.grantee.hex(),
            "state": s.state, "revoked": s.revoked, "expired": s.expired, "active": s.active, "mode": c.mode,
            "expires_at": c.expires_at, "timestamp": c.timestamp, "cells": [x.hex() for x in c.shard_ids],
            "memories": [oid.hex() for oid in mine if oid is not None]}


def shared_json(m: SharedMemory) -> dict[str, Any]:
    return {"cell_id": m.cell_id.hex(), "object_id": m.object_id.hex(), "content": m.content, "tags": list(m.tags),
            "type": type_name(m.mem_type), "created": m.created, "owner_holder_id": m.owner_holder_id.hex(),
            "owner_name": m.owner_name, "contract_id": m.contract_id.hex()}
