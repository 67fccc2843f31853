"""The person's listing: their memories, with the control records (ownmem.uomp.control: session
records, revocations, confirmations, audit batches, agents' requests) left out by construction,
so no view (the CLI's list, the PWA's, an agent's recall) can show bookkeeping as memory."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ownmem.uomp.control import is_control
from ownmem.vault.vault import Entry, Listing


def memories(entries: Iterable[Entry]) -> list[Entry]:
    """The entries that are memory (every control record left out), in their order."""
    return [e for e in entries if not is_control(e.opened.extensions)]


def shown(listing: Listing) -> Listing:
    """``listing`` as the person sees it: the same listing (refused objects, ignored links) with
    only the entries that are memory, so its heads and conflicts are of memories only."""
    return replace(listing, entries=memories(listing.entries))
