"""The versions of one memory, for the receipts screen: the memory and every version it replaced,
following only the edit links the list honours (vault.link_honoured)."""
from __future__ import annotations

from ownmem.errors import NotFound, OwnmemError
from ownmem.vault.vault import Entry, UnlockedVault, link_honoured

MAX_VERSIONS = 1000          # versions of one memory whose receipts are looked up


def versions(v: UnlockedVault, head: bytes) -> list[bytes]:
    """``head`` and every version it replaced (``supersedes``, ``merges``), following only
    the links the list honours: a stranger's edit cannot pull the owner's versions, and their
    receipts, under its own memory."""
    scopes = {s.scope_id: s for s in v.scopes().values()}
    keyring = v.keyring()
    opened: dict[bytes, Entry | None] = {}

    def open_one(oid: bytes) -> Entry | None:
        if oid not in opened:
            row = v.store.get_object(oid)
            try:
                opened[oid] = None if row is None else v.open_stored(row, scopes, keyring, allow_unverified=True)
            except OwnmemError:
                opened[oid] = None
        return opened[oid]

    first = open_one(head)
    if first is None:
        raise NotFound(f"no memory with id {head.hex()}")
    out, stack = [head], [first]
    while stack and len(out) < MAX_VERSIONS:
        e = stack.pop()
        for parent in ([e.supersedes] if e.supersedes else []) + list(e.merges):
            p = None if parent in out else open_one(parent)
            if p is not None and link_honoured(e.opened, p.opened) is None:
                out.append(parent)
                stack.append(p)
    return out
