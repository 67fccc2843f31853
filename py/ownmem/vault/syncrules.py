"""Pure decisions of the sync client: how a push or an erasure is cut into requests the server
takes, what the server's answer to an erasure confirmed, and whether an erasure the change
feed carries may be applied (only with this holder's own FORGET receipt of that cell)."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from ownmem.crypto import CryptoProvider, run_sync
from ownmem.errors import OwnmemError
from ownmem.saihm.receipt import parse_receipt, verify_receipt
from ownmem.wire import messages
from ownmem.wire.limits import MAX_BATCH

T = TypeVar("T")


def runs(items: list[T], size: Callable[[T], int], budget: int, cap: int = MAX_BATCH) -> Iterator[list[T]]:
    """Consecutive runs of ``items``, each at most ``cap`` items and ``budget`` bytes by ``size``
    (an item over the budget alone still goes, as a run of one)."""
    run: list[T] = []
    used = 0
    for it in items:
        n = size(it)
        if run and (len(run) >= cap or used + n > budget):
            yield run
            run, used = [], 0
        run.append(it)
        used += n
    if run:
        yield run


def erasure_refusal(p: CryptoProvider, row: messages.EraseChange, holder_public: bytes) -> str | None:
    """Why an erasure from the feed must not be applied, or None: it needs the FORGET receipt
    of that very cellId, signed by this vault's own holder (SAIHM "Erasure")."""
    refused = f"the server asked to erase the memory of cell {row.cell_id.hex()[:12]}"
    if row.receipt is None:
        return refused + " without a FORGET receipt: ignored"
    try:
        r = parse_receipt(row.receipt)
        if r.operation != "FORGET" or r.subject_id != row.cell_id:
            return refused + " with a receipt for something else: ignored"
        run_sync(verify_receipt(p, r, holder_public))
    except OwnmemError:
        return refused + " with a receipt this vault's holder did not sign: ignored"
    return None


def erasure_answer(asked: list[bytes], res: messages.EraseResult) -> tuple[set[bytes], list[bytes]]:
    """Pure: which of the ``asked`` cells the server's answer to POST /erase names as erased or
    already erased, and which it omits (not confirmed: a refusal, asked again).  Ids the answer
    names that were not asked are nothing."""
    said = set(res.erased) | set(res.already)
    return {c for c in asked if c in said}, [c for c in asked if c not in said]
