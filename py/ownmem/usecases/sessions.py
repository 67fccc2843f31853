"""Revoking a UOMP session from one of the person's devices: the owner-signed revocation record
(control.Revocation) that the sync server carries to the agent service, which revokes the session
when its sync brings it (ownmem.agent.uomp_api).  The CLI (`ownmem agent revoke` without the
admin credential) and the PWA's Agents screen both seal it here, then sync."""
from __future__ import annotations

import time

from ownmem.uomp.control import Revocation
from ownmem.vault.vault import UnlockedVault


def revoke_session(v: UnlockedVault, session_id: str, *, now: int | None = None) -> bytes:
    """Seal the revocation of ``session_id`` into the vault -> the record's object id; it takes
    effect once a sync brings it to the agent service."""
    r = Revocation(session_id, int(time.time()) if now is None else now)
    return v.add(r.content(), tags=(Revocation.TAG,), extensions=r.make())
