"""A server's log as a hostile server would show it: the real receipts, edited (one rewritten,
one dropped), as a Merkle tree of its own, its checkpoints signed with the server's real log
key (taken from the store, as whoever runs the server could).  ``ForgedLog.install(proxy)``
makes a ``HostileProxy`` answer the log's routes from it: checkpoint, consistency and
inclusion proofs, entries.  Everything it signs verifies under the key devices pinned; only
memory of an earlier checkpoint, or another device's view, can tell it from the real log.
"""
from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import httpx

from ownmem.saihm import notes, tlog
from ownmem.saihm.receipt import parse_receipt
from server.tlog_routes import LogKey
from tests.sync.hostile import Answer, HostileProxy, Seen

TEXT = {"content-type": "text/plain; charset=utf-8"}
JSONH = {"content-type": "application/json"}


class MemTree:
    """Stored hashes in a list (the order of ``tlog.stored_hash_index``)."""

    def __init__(self, entries: Sequence[bytes]) -> None:
        self.hashes: list[bytes] = []
        self.entries = list(entries)
        for i, e in enumerate(entries):
            self.hashes += tlog.stored_hashes(i, tlog.leaf_hash(e), self)

    @property
    def size(self) -> int:
        return len(self.entries)

    def read_hashes(self, indexes: Sequence[int]) -> list[bytes]:
        return [self.hashes[i] for i in indexes]

    def root(self, size: int | None = None) -> bytes:
        return tlog.tree_hash(self.size if size is None else size, self)


def log_key(seed: bytes) -> LogKey:
    return LogKey.load(SimpleNamespace(log_key=lambda _candidate: seed))


def real_entries(upstream: str) -> list[bytes]:
    """Every receipt of the real log, in leaf order."""
    out: list[bytes] = []
    with httpx.Client(timeout=30.0) as c:
        while True:
            page = c.get(f"{upstream}/v1/log/entries", params={"start": len(out), "limit": 1000}).json()["entries"]
            if not page:
                return out
            out += [bytes.fromhex(e["receipt"]) for e in page]


class ForgedLog:
    """The log a lying server shows: ``edit`` applied to the real receipts, signed with ``key``."""

    def __init__(self, upstream: str, key: LogKey, edit: Callable[[list[bytes]], list[bytes]]) -> None:
        self.upstream, self.key, self.edit = upstream, key, edit

    def tree(self) -> MemTree:
        return MemTree(self.edit(real_entries(self.upstream)))

    def note(self, t: MemTree | None = None) -> str:
        t = t or self.tree()
        return self.key.sign(notes.Checkpoint(self.key.verifier.name, t.size, t.root()))

    def checkpoint(self, seen: Seen, ans: Answer) -> Answer:
        return Answer(200, TEXT, self.note().encode())

    def consistency(self, seen: Seen, ans: Answer) -> Answer:
        q = urllib.parse.parse_qs(seen.query)
        t = self.tree()
        old, new = int(q["from"][0]), int(q.get("to", [str(t.size)])[0])
        if new > t.size or old > new:
            return _refused(400, "beyond_log")
        proof = tlog.prove_consistency(old, new, t) if old else []
        return Answer(200, JSONH, json.dumps({"from": old, "to": new, "proof": [h.hex() for h in proof]}).encode())

    def inclusion(self, seen: Seen, ans: Answer) -> Answer:
        q = urllib.parse.parse_qs(seen.query)
        t = self.tree()
        size = int(q.get("size", [str(t.size)])[0])
        ids = [parse_receipt(e).receipt_id.hex() if _parses(e) else "" for e in t.entries]
        if "receipt" not in q or q["receipt"][0] not in ids:
            return _refused(404, "not_found")
        index = ids.index(q["receipt"][0])
        if index >= size or size > t.size:
            return _refused(400, "beyond_log")
        proof = tlog.prove_inclusion(size, index, t)
        return Answer(200, JSONH, json.dumps({"index": index, "size": size,
                                              "proof": [h.hex() for h in proof]}).encode())

    def install(self, proxy: HostileProxy) -> None:
        proxy.on("GET", r"^/v1/log/checkpoint$", self.checkpoint)
        proxy.on("GET", r"^/v1/log/proof/consistency$", self.consistency)
        proxy.on("GET", r"^/v1/log/proof/inclusion$", self.inclusion)


def swapped_key(seed: bytes) -> tuple[LogKey, Callable[[Seen, Answer], Answer], Callable[[Seen, Answer], Answer]]:
    """Another log key and two rules: /v1/log/key names it, and the real tree's checkpoint is
    signed by it instead (the server's key "rotated", or another log put in its place)."""
    other = log_key(seed)

    def key_rule(seen: Seen, ans: Answer) -> Answer:
        k = other.verifier
        return ans.with_json({"origin": k.name, "vkey": str(k), "public_key": k.public_key.hex(),
                              "key_id": f"{k.key_id:08x}"})

    def checkpoint_rule(seen: Seen, ans: Answer) -> Answer:
        cp = notes.parse_checkpoint(notes.parse_note(ans.body).text)
        return replace(ans, body=other.sign(notes.Checkpoint(other.verifier.name, cp.size, cp.root_hash)).encode())

    return other, key_rule, checkpoint_rule


def bad_proof(seen: Seen, ans: Answer) -> Answer:
    """A proof with its first hash changed (or, if it has none, one hash too many)."""
    if ans.status != 200:
        return ans
    body: dict[str, Any] = ans.json()
    proof = body["proof"]
    body["proof"] = ([("00" if proof[0][:2] != "00" else "11") + proof[0][2:]] + proof[1:]) if proof else ["00" * 32]
    return ans.with_json(body)


def _parses(e: bytes) -> bool:
    try:
        parse_receipt(e)
    except Exception:  # noqa: BLE001 - a rewritten entry may be any bytes
        return False
    return True


def _refused(status: int, code: str) -> Answer:
    return Answer(status, JSONH, json.dumps({"error": code, "message": code}).encode())
