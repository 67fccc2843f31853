"""What the PWA's shares screen reads, as JSON (ownmem.vault.sharing; SAIHM "Sharing
contracts").  Every contract and shared memory here was checked by vault.sharing before it
reached these functions (contracts against their holder's published key, shared cells
against the sharer's holder and owner keys); this module only names the fields for the page.
"""
from __future__ import annotations

from typing import Any

from ownmem.aperto.model import type_name
from ownmem.vault.sharing import SharedMemory, ShareView, VerifiedHolder
from ownmem.vault.store import Store


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
