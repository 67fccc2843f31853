"""The public log's messages: its key, its inclusion and consistency proofs, and the
witnesses devices post of it.

    LogKeyInfo        GET  /v1/log/key                       <- JSON
    LogInclusion      GET  /v1/log/proof/inclusion           <- JSON
    LogConsistency    GET  /v1/log/proof/consistency         <- JSON {"from", "to", "proof"}
    Witness           POST /v1/vaults/{name}/witnesses       -> JSON (one device's view of the log)
    WitnessList       GET  /v1/vaults/{name}/witnesses       <- JSON {"witnesses": [Witness, ...]}

A witness is one device's last verified checkpoint, signed by the vault's sync key, which
every device of the vault holds and the server does not (ownmem.vault.logwatch).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

from ownmem.errors import WireError
from ownmem.saihm import notes
from ownmem.wire.codec import Counter, Hex, HexList, Int, JsonMessage, Key, Signature, Text
from ownmem.wire.signed import witness_message

DEVICE_ID_LEN = 16
MAX_NOTE = 4096             # bytes of a checkpoint note a witness carries (one is ~200)
MAX_VKEY = 512              # characters of a note verifier key
MAX_WITNESSES = 32          # current records per vault: the least recently updated goes first
MAX_PROOF = 128             # hashes of a Merkle proof (tlog refuses longer ones anyway)
_VKEY = re.compile(r"[!-*,-~]{1,255}\+[0-9a-f]{8}\+[A-Za-z0-9+/]{4,}={0,2}")
Proof = Annotated[tuple[bytes, ...], HexList(Hex(32), 0, MAX_PROOF)]


@dataclass(frozen=True, slots=True)
class LogKeyInfo(JsonMessage):
    """The log's origin and Ed25519 verifier key, as ``notes.VerifierKey`` prints it."""

    origin: Annotated[str, Text(limit=255)]
    vkey: Annotated[str, Text(_VKEY, MAX_VKEY)]
    public_key: Key
    key_id: Annotated[str, Text(re.compile(r"[0-9a-f]{8}"), 8)]

    def check(self) -> None:
        vk = _verifier_key(self.vkey)
        if vk.name != self.origin or vk.public_key != self.public_key or f"{vk.key_id:08x}" != self.key_id:
            raise WireError("the log key's origin, public key and key ID do not agree with its vkey")


@dataclass(frozen=True, slots=True)
class LogInclusion(JsonMessage):
    index: Counter
    size: Counter
    proof: Proof

    def check(self) -> None:
        if self.index >= self.size:
            raise WireError("an inclusion proof's leaf must be inside its tree")


@dataclass(frozen=True, slots=True)
class LogConsistency:
    """``{"from": m, "to": n, "proof": [hex, ...]}``: ``from`` is a Python keyword, hence the names."""

    old_size: int
    new_size: int
    proof: tuple[bytes, ...]

    def encode(self) -> dict[str, Any]:
        return {"from": self.old_size, "to": self.new_size, "proof": [h.hex() for h in self.proof]}

    @classmethod
    def parse(cls, value: Any) -> LogConsistency:
        if not isinstance(value, dict) or not {"from", "to", "proof"} <= value.keys():
            raise WireError("a consistency proof is {from, to, proof}")
        out = cls(Int().load(value["from"], "from"), Int().load(value["to"], "to"),
                  HexList(Hex(32), 0, MAX_PROOF).load(value["proof"], "proof"))
        if out.old_size > out.new_size:
            raise WireError("a consistency proof goes from a smaller tree to a larger one")
        return out


@dataclass(frozen=True, slots=True)
class Witness(JsonMessage):
    """One device's view of the log: the checkpoint note it verified last (under the log key
    ``vkey`` it pinned), when, signed by the vault's sync key over ``witness_message``."""

    device_id: Annotated[bytes, Hex(DEVICE_ID_LEN)]
    vkey: Annotated[str, Text(_VKEY, MAX_VKEY)]
    note: Annotated[bytes, Hex(limit=MAX_NOTE)]
    signed_at: Counter
    signature: Signature

    def message(self, name: str) -> bytes:
        return witness_message(name, self.device_id, self.vkey, self.note, self.signed_at)

    def check(self) -> None:
        _verifier_key(self.vkey)
        try:      # the syntax only: whether the log key signed it is each device's to check
            notes.parse_checkpoint(notes.parse_note(self.note).text)
        except notes.NoteRefused as e:
            raise WireError(f"a witness carries a checkpoint note ({e.reason})") from None


def _verifier_key(vkey: str) -> notes.VerifierKey:
    try:
        return notes.parse_verifier_key(vkey)
    except notes.NoteRefused as e:
        raise WireError(f"vkey is not a note verifier key ({e.reason})") from None


@dataclass(frozen=True, slots=True)
class WitnessList:
    witnesses: tuple[Witness, ...]

    def encode(self) -> dict[str, Any]:
        return {"witnesses": [w.encode() for w in self.witnesses]}

    @classmethod
    def parse(cls, value: Any) -> WitnessList:
        if not isinstance(value, dict) or not isinstance(value.get("witnesses"), list):
            raise WireError("a witness list is {witnesses: [...]}")
        if len(value["witnesses"]) > MAX_WITNESSES:
            raise WireError(f"at most {MAX_WITNESSES} witnesses a vault")
        return cls(tuple(Witness.parse(w) for w in value["witnesses"]))
