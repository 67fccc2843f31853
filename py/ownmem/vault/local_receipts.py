"""The local receipts log of a vault that `ownmem agent` served before it was linked to a sync
server (docs/decisions.md, SAIHM "Order of effect and receipt", issue 22), and its publication.

    agent-receipts.jsonl   in the vault folder: {"op", "receipt"} (hex) per line, appended and
                           fsynced before the effect it receipts (ownmem.agent.local)
    publish(folder, ...)   REMEMBER and anchors by the server's /receipts, FORGET by /erase, then
                           the file is renamed agent-receipts.published.jsonl

Here, in the vault layer, because every push from this folder must publish it first, the CLI's
`ownmem sync` as much as the agent service: the cells made while local-only have their REMEMBER
receipts marked logged (so that the agent could recall them), so no ordinary push would post
them, and a cell must not reach the server before its receipt is public.
"""
from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

from ownmem.errors import OwnmemError, SyncError
from ownmem.saihm.receipt import parse_receipt

LOG_NAME = "agent-receipts.jsonl"
PUBLISHED_NAME = "agent-receipts.published.jsonl"
PART = 100          # receipts per request (the /receipts route takes 128)


class LocalLog:
    """The local receipts log: one JSON line per receipt, appended and fsynced; read back whole
    (it holds only what was receipted while no server was linked)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.path = Path(folder) / LOG_NAME
        self._lock = threading.Lock()
        self._ids: set[bytes] | None = None

    def receipts(self) -> list[bytes]:
        if not self.path.exists():
            return []
        return [bytes.fromhex(json.loads(line)["receipt"]) for line in self.path.read_text().splitlines()
                if line.strip()]

    def append(self, receipts: list[bytes]) -> tuple[bytes, ...]:
        """Each receipt on disk (once: a receipt already here is not written twice) -> their ids."""
        with self._lock:
            if self._ids is None:
                self._ids = {parse_receipt(r).receipt_id for r in self.receipts()}
            parsed = [(parse_receipt(r), r) for r in receipts]
            new = [(p, r) for p, r in parsed if p.receipt_id not in self._ids]
            if new:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                with os.fdopen(fd, "a") as f:
                    for p, r in new:
                        f.write(json.dumps({"op": p.operation, "receipt": r.hex()}) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
                self._ids.update(p.receipt_id for p, _ in new)
            return tuple(p.receipt_id for p, _ in parsed)

    def get(self, receipt_id: bytes) -> bytes | None:
        return next((r for r in self.receipts() if parse_receipt(r).receipt_id == receipt_id), None)


def publish(folder: str | os.PathLike[str] | None, post: Callable[[list[bytes]], tuple[bytes, ...]],
            erase: Callable[[list[bytes]], object]) -> int:
    """Every receipt of the folder's local log to the public log (``post``: the server's
    /receipts; ``erase``: its /erase, which logs the FORGET of a cell it never had too), then the
    file renamed -> how many.  Nothing to do (no folder, no file): 0.  SyncError when the server
    does not take them all: the file stays, and the push that asked is not made."""
    if folder is None:
        return 0
    log = LocalLog(folder)
    if not log.path.exists():
        return 0
    receipts = log.receipts()
    forgets = [r for r in receipts if parse_receipt(r).operation == "FORGET"]
    others = [r for r in receipts if parse_receipt(r).operation != "FORGET"]
    try:
        for i in range(0, len(others), PART):
            part = others[i:i + PART]
            logged = set(post(part))
            if any(parse_receipt(r).receipt_id not in logged for r in part):
                raise SyncError("the server did not log every receipt of the local receipts log")
        for i in range(0, len(forgets), PART):
            erase(forgets[i:i + PART])
    except OwnmemError as e:
        raise SyncError(f"the local receipts log is not published yet ({e}); retried") from None
    try:
        os.replace(log.path, log.path.with_name(PUBLISHED_NAME))
    except FileNotFoundError:
        pass             # another process (the CLI, the agent) published it at the same time
    return len(receipts)
