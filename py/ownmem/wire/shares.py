"""Sharing between people on the sync server (SAIHM "Sharing contracts"): the holder
directory, contracts offered, answered and revoked, and the shared cells a grantee fetches.

  HolderRecord      GET  /v1/holders/{holderId}                       <- JSON (any vault's credential)
  HolderProof       POST /v1/vaults/{name}/holder                     -> JSON (answer: the HolderRecord)
  ShareOffer        POST /v1/vaults/{name}/shares                     -> JSON
  ShareOffered           its answer (201)                             <- JSON
  ShareList         GET  /v1/vaults/{name}/shares                     <- JSON
  ShareAnswer       POST /v1/vaults/{name}/shares/{id}/accept|decline|withdraw   <- JSON
  RevokeRequest     POST /v1/vaults/{name}/shares/{id}/revoke         -> JSON
  RevokeResult           its answer                                   <- JSON
  SharedPage        GET  /v1/vaults/{name}/shared?after=              <- CBOR {1: [[contractId, cellId,
                                                                          cell, shareKey]], 2: more}
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from ownmem.crypto import cbor, sha256
from ownmem.errors import WireError
from ownmem.saihm.receipt import MAX_RECEIPT
from ownmem.wire.codec import Flag, Hex, HexList, Id, JsonMessage, Key, MessageList, Name, Salt, Text, blob, load_cbor
from ownmem.wire.limits import HOLDER_PUB_LEN, HOLDER_SIG_LEN, ID_LEN, MAX_BATCH, MAX_PAGE
from ownmem.wire.signed import register_message

SHARE_KEY_LEN = 32 + 40           # ephemeral X25519 public key || AES-KW of the 32-byte DEK
SHARE_ITEM_LEN = 32 + 32 + SHARE_KEY_LEN   # granteeId || cellId || share key, as an offer carries it
MAX_SHARE_KEYS = MAX_BATCH        # grantees x cells per offer: 2000 items stay well under the JSON body limit
SHARE_STATES = ("offered", "accepted", "declined", "withdrawn")
_STATE = re.compile("|".join(SHARE_STATES))


@dataclass(frozen=True, slots=True)
class HolderRecord(JsonMessage):
    """The directory's answer: what the server keeps of a vault's registration, so that a
    sharer checks the grantee's X25519 key itself (``holder_proof`` over ``message()``)."""

    name: Name
    salt: Salt
    owner_pub: Key
    sync_pub: Key
    ka_pub: Key
    holder_pub: Annotated[bytes, Hex(HOLDER_PUB_LEN)]
    holder_id: Id
    holder_proof: Annotated[bytes, Hex(HOLDER_SIG_LEN)]

    def message(self) -> bytes:
        return register_message(self.name, self.salt, self.owner_pub, self.sync_pub, self.ka_pub, self.holder_pub)

    def check(self) -> None:
        if sha256(self.holder_pub) != self.holder_id:
            raise WireError("holder_id is not the SHA-256 of holder_pub")


@dataclass(frozen=True, slots=True)
class HolderProof(JsonMessage):
    """POST /v1/vaults/{name}/holder: a vault registered before the directory publishes its
    holder's signature over its registration (the server checks it against what it keeps)."""

    holder_proof: Annotated[bytes, Hex(HOLDER_SIG_LEN)]


@dataclass(frozen=True, slots=True)
class ShareItem:
    """One cell's DEK re-wrapped to one grantee's X25519 key."""

    grantee: bytes
    cell_id: bytes
    key: bytes             # SHARE_KEY_LEN bytes

    def encode(self) -> bytes:
        return self.grantee + self.cell_id + self.key

    @classmethod
    def parse(cls, raw: bytes) -> ShareItem:
        if len(raw) != SHARE_ITEM_LEN:
            raise WireError(f"a share item is {SHARE_ITEM_LEN} bytes")
        return cls(raw[:32], raw[32:64], raw[64:])


@dataclass(frozen=True, slots=True)
class ShareOffer(JsonMessage):
    """A holder-signed contract, its holder-signed SHARE receipt (subject: the contractId), and
    for every grantee and covered cell that cell's DEK re-wrapped to the grantee."""

    contract: Annotated[bytes, Hex(limit=64 * 1024)]
    receipt: Annotated[bytes, Hex(limit=MAX_RECEIPT)]
    items: Annotated[tuple[bytes, ...], HexList(Hex(SHARE_ITEM_LEN), 1, MAX_SHARE_KEYS)]

    def share_items(self) -> tuple[ShareItem, ...]:
        return tuple(ShareItem.parse(i) for i in self.items)


@dataclass(frozen=True, slots=True)
class ShareOffered(JsonMessage):
    contract_id: Id
    receipt_id: Id


@dataclass(frozen=True, slots=True)
class ShareEntry(JsonMessage):
    """One grantee's view of one contract: the signed contract, that grantee's state, and
    whether the sharer revoked it or it expired (then no key of it is kept any more)."""

    contract: Annotated[bytes, Hex(limit=64 * 1024)]
    grantee: Id
    state: Annotated[str, Text(_STATE, 16)]
    revoked: Annotated[bool, Flag()]
    expired: Annotated[bool, Flag()]


@dataclass(frozen=True, slots=True)
class ShareList(JsonMessage):
    """Active contracts first, then the newest, as many as fit the server's byte budget;
    ``more``: some were left out (a flood of offers, or a great many contracts)."""

    offered: Annotated[tuple[ShareEntry, ...], MessageList(ShareEntry, 0, 100_000)]
    received: Annotated[tuple[ShareEntry, ...], MessageList(ShareEntry, 0, 100_000)]
    more: Annotated[bool, Flag()]


@dataclass(frozen=True, slots=True)
class ShareAnswer(JsonMessage):
    contract_id: Id
    state: Annotated[str, Text(_STATE, 16)]


@dataclass(frozen=True, slots=True)
class RevokeRequest(JsonMessage):
    """The sharer's holder-signed REVOKE receipt (subject: the contractId)."""

    receipt: Annotated[bytes, Hex(limit=MAX_RECEIPT)]


@dataclass(frozen=True, slots=True)
class RevokeResult(JsonMessage):
    revoked: Annotated[bool, Flag()]
    receipt_id: Id           # the REVOKE receipt in the log (the first one, if revoked before)
    already: Annotated[bool, Flag()]


@dataclass(frozen=True, slots=True)
class SharedCell:
    """A cell of an active contract, as its grantee fetches it."""

    contract_id: bytes
    cell_id: bytes
    cell: bytes
    key: bytes               # SHARE_KEY_LEN bytes: the DEK, wrapped to this grantee

    def encode(self) -> bytes:
        return cbor.encode([self.contract_id, self.cell_id, self.cell, self.key])


@dataclass(frozen=True, slots=True)
class SharedPage:
    rows: tuple[SharedCell, ...]
    more: bool               # ask again with after = the last row's contractId || cellId

    def encode(self) -> bytes:
        return cbor.encode({1: [[r.contract_id, r.cell_id, r.cell, r.key] for r in self.rows], 2: self.more})

    @classmethod
    def parse(cls, raw: bytes) -> SharedPage:
        m = load_cbor(raw, "the shared cells", 5 * MAX_PAGE + 8, 3)
        if not isinstance(m, dict) or set(m) != {1, 2} or not isinstance(m[1], list) or len(m[1]) > MAX_PAGE:
            raise WireError("shared cells are a map {1: [[contractId, cellId, cell, key]], 2: more}")
        if not isinstance(m[2], bool):
            raise WireError("'more' must be true or false")
        rows = []
        for r in m[1]:
            if not isinstance(r, list) or len(r) != 4:
                raise WireError("a shared cell is [contractId, cellId, cell, key]")
            rows.append(SharedCell(blob(r[0], "contractId", ID_LEN), blob(r[1], "cellId", ID_LEN),
                                   blob(r[2], "cell"), blob(r[3], "key", SHARE_KEY_LEN)))
        keys = [r.contract_id + r.cell_id for r in rows]
        if any(a >= b for a, b in zip(keys, keys[1:], strict=False)):
            raise WireError("shared cells are in ascending (contractId, cellId) order")
        return cls(tuple(rows), m[2])
