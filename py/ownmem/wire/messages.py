"""The sync messages (DESIGN.md "Sync"): a vault's lookup and registration, login, metadata,
pushed cells, erasure, receipts for the public log, and the change feed a device pulls.

    message           route                                  body
    VaultInfo         GET  /v1/vaults/{name}              <- JSON
    Registration      POST /v1/vaults                     -> JSON
    Registered             its answer (201)               <- JSON
    Challenge         POST /v1/vaults/{name}/challenge    <- JSON
    SessionRequest    POST /v1/vaults/{name}/session      -> JSON
    Session                its answer                     <- JSON
    MetadataVersion   GET  /v1/vaults/{name}/metadata     <- JSON
    MetadataUpdate    PUT  /v1/vaults/{name}/metadata     -> JSON
    Rekey             POST /v1/vaults/{name}/rekey        -> JSON (answered by MetadataAccepted)
    MetadataAccepted       its answer                     <- JSON
    PushRequest       POST /v1/vaults/{name}/cells        -> CBOR [[cell, wrapped DEK], ...]
    PushResult             its answer                     <- JSON
    EraseRequest      POST /v1/vaults/{name}/erase        -> JSON
    RewrapRequest     POST /v1/vaults/{name}/rewrap       -> JSON (a scope rotation's new wrapped DEKs)
    RewrapResult           its answer                     <- JSON
    EraseResult            its answer                     <- JSON
    ChangesPage       GET  /v1/vaults/{name}/changes      <- CBOR {1: [change], 2: next, 3: last, 4: more}
    LiveEvent         GET  /v1/vaults/{name}/events       <- the data of each server-sent event, JSON
    ErrorBody         every answer that is not 2xx        <- JSON {"error": ErrorCode, "message": text}
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

from ownmem.crypto import cbor, sha256
from ownmem.errors import WireError
from ownmem.saihm.receipt import MAX_RECEIPT
from ownmem.wire.codec import (
    Blob,
    Counter,
    Flag,
    Hex,
    HexList,
    Id,
    Ids,
    Int,
    JsonMessage,
    Key,
    Name,
    Salt,
    Signature,
    Text,
    Version,
    blob,
    load_cbor,
)
from ownmem.wire.limits import (
    HOLDER_PUB_LEN,
    HOLDER_SIG_LEN,
    ID_LEN,
    MAX_BATCH,
    MAX_PAGE,
    MAX_RECEIPTS,
    MAX_VERSION,
    RECOVERY_RECORD_LEN,
    ROOT_WRAP_LEN,
    WRAPPED_DEK_LEN,
)
from ownmem.wire.signed import register_message

_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,128}")       # it goes into a header: no space, no CR/LF
_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")


@dataclass(frozen=True, slots=True)
class VaultInfo(JsonMessage):
    """What a new device needs to derive and prove its keys: the lookup answer."""

    name: Name
    salt: Salt
    owner_pub: Key
    sync_pub: Key
    ka_pub: Key
    holder_pub: Annotated[bytes, Hex(HOLDER_PUB_LEN)]
    holder_id: Id
    # the vault root wrapped under the master secret (AES-KW, 40 bytes), public like the salt: a
    # new device needs it before it can prove its sync key.  Every lookup carries 40 bytes (a
    # vault whose passphrase never changed, and a decoy, seeded ones that unwrap under no key),
    # so the answer does not tell which vaults changed their passphrase (vault/rekey.py)
    root_wrap: Annotated[bytes, Hex(ROOT_WRAP_LEN)]

    def check(self) -> None:
        if sha256(self.holder_pub) != self.holder_id:
            raise WireError("holder_id is not the SHA-256 of holder_pub")


@dataclass(frozen=True, slots=True)
class RecoveryRecord(JsonMessage):
    """The recovery kit's public record from the vault's owner-signed metadata (vault/recovery.py),
    or a seeded decoy of the same length for a vault without one and for a name nobody holds."""

    record: Annotated[bytes, Hex(RECOVERY_RECORD_LEN)]


@dataclass(frozen=True, slots=True)
class Registration(JsonMessage):
    """A vault's keys, its first owner-signed metadata and the holder's KEY receipt, proven
    by the sync key (``proof``) and the holder key (``holder_proof``) over ``message()``."""

    name: Name
    salt: Salt
    owner_pub: Key
    sync_pub: Key
    ka_pub: Key
    holder_pub: Annotated[bytes, Hex(HOLDER_PUB_LEN)]
    metadata: Blob
    metadata_sig: Signature
    key_receipt: Blob
    proof: Signature
    holder_proof: Annotated[bytes, Hex(HOLDER_SIG_LEN)]

    def message(self) -> bytes:
        return register_message(self.name, self.salt, self.owner_pub, self.sync_pub, self.ka_pub, self.holder_pub)


@dataclass(frozen=True, slots=True)
class Registered(JsonMessage):
    name: Name
    holder_id: Id
    key_receipt_id: Id


@dataclass(frozen=True, slots=True)
class Challenge(JsonMessage):
    challenge: Annotated[bytes, Hex(32)]
    expires_at: Counter


@dataclass(frozen=True, slots=True)
class SessionRequest(JsonMessage):
    challenge: Annotated[bytes, Hex(32)]
    signature: Signature


@dataclass(frozen=True, slots=True)
class Session(JsonMessage):
    token: Annotated[str, Text(_TOKEN, 128)]
    expires_at: Counter

    def __repr__(self) -> str:   # a bearer credential never reaches a log line
        return f"Session(expires_at={self.expires_at})"


@dataclass(frozen=True, slots=True)
class MetadataVersion(JsonMessage):
    """The vault metadata the server holds: owner-signed over (name, version, metadata)."""

    version: Version
    metadata: Blob
    signature: Signature


@dataclass(frozen=True, slots=True)
class MetadataUpdate(JsonMessage):
    """Compare-and-swap: ``metadata`` becomes version ``expected_version + 1``, signed as that."""

    expected_version: Annotated[int, Int(1, MAX_VERSION)]
    metadata: Blob
    signature: Signature


@dataclass(frozen=True, slots=True)
class Rekey(JsonMessage):
    """A passphrase change (vault/rekey.py): compare-and-swap like ``MetadataUpdate``, and the
    vault's public keys replaced.  ``metadata_sig`` is the NEW owner key's over
    ``metadata_message(name, expected_version + 1, metadata)`` (what later reads verify);
    ``old_owner_sig`` the CURRENT owner key's over ``rekey_message`` (the change is authorised by
    the keys in force); ``proof``/``holder_proof`` the sync and holder keys' over the new
    ``register_message`` (the published holder record stays provable)."""

    expected_version: Annotated[int, Int(1, MAX_VERSION)]
    salt: Salt
    owner_pub: Key
    ka_pub: Key
    root_wrap: Annotated[bytes, Hex(ROOT_WRAP_LEN)]
    metadata: Blob
    metadata_sig: Signature
    old_owner_sig: Signature
    proof: Signature
    holder_proof: Annotated[bytes, Hex(HOLDER_SIG_LEN)]


@dataclass(frozen=True, slots=True)
class MetadataAccepted(JsonMessage):
    version: Version


@dataclass(frozen=True, slots=True)
class PushResult(JsonMessage):
    stored: Counter
    duplicates: Counter
    erased: Counter        # refused because the cellId was erased before
    last_seq: Counter


@dataclass(frozen=True, slots=True)
class EraseRequest(JsonMessage):
    """FORGET receipts signed by the vault's holder, one per cell to erase."""

    receipts: Annotated[tuple[bytes, ...], HexList(Hex(), 1, MAX_BATCH)]


@dataclass(frozen=True, slots=True)
class EraseResult(JsonMessage):
    erased: Ids
    already: Ids
    # erased bytes may still be on the server's disk (server/storage/scrub.py); sending the
    # same receipts again asks again
    pending: Annotated[bool, Flag()]


@dataclass(frozen=True, slots=True)
class RewrapRequest(JsonMessage):
    """A scope-KEK rotation (vault/rotate.py): the new wrapped DEK of each named cell, in the
    same order.  The cells themselves are not touched (SAIHM: the wrap is kept apart from the
    cell, so re-wrapping changes neither cellId nor the cell signature)."""

    cell_ids: Annotated[tuple[bytes, ...], HexList(Hex(ID_LEN), 1, MAX_BATCH)]
    wrapped_deks: Annotated[tuple[bytes, ...], HexList(Hex(WRAPPED_DEK_LEN), 1, MAX_BATCH)]

    def check(self) -> None:
        if len(self.cell_ids) != len(self.wrapped_deks):
            raise WireError("cell_ids and wrapped_deks must be of one length")
        if len(set(self.cell_ids)) != len(self.cell_ids):
            raise WireError("a cellId is named twice")


@dataclass(frozen=True, slots=True)
class RewrapResult(JsonMessage):
    replaced: Counter      # wraps that changed (one the server held already is not a change)
    last_seq: Counter


@dataclass(frozen=True, slots=True)
class ReceiptsRequest(JsonMessage):
    """Holder-signed REMEMBER, RECALL or STATUS receipts for the public log (POST /receipts);
    KEY and FORGET receipts travel with registration and erasure, SHARE/REVOKE with contracts."""

    receipts: Annotated[tuple[bytes, ...], HexList(Hex(), 1, MAX_RECEIPTS)]


@dataclass(frozen=True, slots=True)
class ReceiptsLogged(JsonMessage):
    """The receiptIds of the request, every one now in the log (newly, or logged before)."""

    logged: Annotated[tuple[bytes, ...], HexList(Hex(ID_LEN), 0, MAX_RECEIPTS)]


@dataclass(frozen=True, slots=True)
class LiveEvent(JsonMessage):
    last_seq: Counter


@dataclass(frozen=True, slots=True)
class ErrorBody(JsonMessage):
    """``error`` is an ``ErrorCode`` from this server; a client takes any well-formed code, so
    that a newer server's codes still reach the person."""

    error: Annotated[str, Text(_CODE, 64)]
    message: Annotated[str, Text(limit=500)]


@dataclass(frozen=True, slots=True)
class PushItem:
    cell: bytes            # the SAIHM cell, CBOR: the server checks it whole
    wrapped_dek: bytes


@dataclass(frozen=True, slots=True)
class PushRequest:
    """A batch of cells and their wrapped DEKs; idempotent by cellId, all or nothing."""

    items: tuple[PushItem, ...]

    def encode(self) -> bytes:
        return cbor.encode([[i.cell, i.wrapped_dek] for i in self.items])

    @classmethod
    def parse(cls, raw: bytes) -> PushRequest:
        v = load_cbor(raw, "the push body", 4 * MAX_BATCH + 8, 2)
        if not isinstance(v, list) or len(v) > MAX_BATCH:
            raise WireError(f"the push body must be a CBOR array of at most {MAX_BATCH} [cell, wrapped DEK]")
        items = []
        for it in v:
            if not (isinstance(it, list) and len(it) == 2 and isinstance(it[0], bytes) and isinstance(it[1], bytes)):
                raise WireError("each item is [cell bytes, wrapped DEK bytes]")
            items.append(PushItem(it[0], it[1]))
        return cls(tuple(items))


@dataclass(frozen=True, slots=True)
class CellChange:
    seq: int
    cell_id: bytes
    cell: bytes
    wrapped_dek: bytes

    def encode(self) -> bytes:
        return cbor.encode([self.seq, "cell", self.cell_id, self.cell, self.wrapped_dek])


@dataclass(frozen=True, slots=True)
class ErasedCell:
    """A cell change whose cell was erased since: its bytes are gone, and an erasure of that
    cellId comes later in the feed."""

    seq: int
    cell_id: bytes

    def encode(self) -> bytes:
        return cbor.encode([self.seq, "cell", self.cell_id, None, None])


@dataclass(frozen=True, slots=True)
class EraseChange:
    """An erasure, with the holder-signed FORGET receipt that asked for it (in the cell's
    place): a device applies it only if that receipt verifies under its own holder key, so
    a server cannot erase what the person did not forget (DESIGN.md "The public log")."""

    seq: int
    cell_id: bytes
    receipt: bytes | None

    def encode(self) -> bytes:
        return cbor.encode([self.seq, "erase", self.cell_id, self.receipt, None])


@dataclass(frozen=True, slots=True)
class WrapChange:
    """A cell's DEK re-wrapped (a scope rotation, vault/rotate.py); ``wrapped_dek`` None if the
    cell was erased since (its erasure comes later in the feed).  A device takes it only if it
    unwraps under the scope's KEK in force to the DEK it holds (vault/rotate.py ``take_wrap``)."""

    seq: int
    cell_id: bytes
    wrapped_dek: bytes | None

    def encode(self) -> bytes:
        return cbor.encode([self.seq, "wrap", self.cell_id, None, self.wrapped_dek])


@dataclass(frozen=True, slots=True)
class MetaChange:
    seq: int

    def encode(self) -> bytes:
        return cbor.encode([self.seq, "meta", None, None, None])


ChangeRow = CellChange | ErasedCell | EraseChange | WrapChange | MetaChange
_SEQ = Int(1)




def change_row(v: Any) -> ChangeRow:
    """One change of the feed, ``[seq, kind, cellId, cell, wrappedDek]``, as its typed row.
    A kind this client does not know is refused rather than skipped: the position would
    move past a change it never applied."""
    if not isinstance(v, list) or len(v) != 5:
        raise WireError("a change is [seq, kind, cellId, cell, wrappedDek]")
    seq, kind, cell_id, cell, wrapped = v
    seq = _SEQ.load(seq, "seq")
    if kind == "cell" and cell is None and wrapped is None:
        return ErasedCell(seq, blob(cell_id, "cellId", ID_LEN))
    if kind == "cell":
        return CellChange(seq, blob(cell_id, "cellId", ID_LEN), blob(cell, "cell"),
                          blob(wrapped, "wrappedDek", WRAPPED_DEK_LEN))
    if kind == "erase" and wrapped is None:
        return EraseChange(seq, blob(cell_id, "cellId", ID_LEN),
                           None if cell is None else blob(cell, "FORGET receipt", limit=MAX_RECEIPT))
    if kind == "wrap" and cell is None:
        return WrapChange(seq, blob(cell_id, "cellId", ID_LEN),
                          None if wrapped is None else blob(wrapped, "wrappedDek", WRAPPED_DEK_LEN))
    if kind == "meta" and cell_id is None and cell is None and wrapped is None:
        return MetaChange(seq)
    raise WireError("a change is a cell, an erasure, a new wrap or a metadata version")


PAGE_SLICE = 256   # changes per streamed slice of a pull page (~1 MB of cells)


@dataclass(frozen=True, slots=True)
class ChangesPage:
    """A page of the change feed after some position: its rows in sequence order, the
    position to ask from next, and the feed's last sequence number."""

    rows: tuple[ChangeRow, ...]
    next_since: int
    last_seq: int

    @property
    def more(self) -> bool:
        return self.next_since < self.last_seq

    def chunks(self) -> Iterator[bytes]:
        """``encode()`` in slices, so the server streams a page (~20 MB) as it encodes it:
        the deterministic encoding of a map with keys 1..4 is those keys in order."""
        yield b"\xa4\x01" + cbor.head(4, len(self.rows))
        for i in range(0, len(self.rows), PAGE_SLICE):
            yield b"".join(r.encode() for r in self.rows[i:i + PAGE_SLICE])
        yield (b"\x02" + cbor.encode(self.next_since) + b"\x03" + cbor.encode(self.last_seq)
               + b"\x04" + cbor.encode(self.more))

    def encode(self) -> bytes:
        return b"".join(self.chunks())

    @classmethod
    def parse(cls, raw: bytes, since: int | None = None) -> ChangesPage:
        """``since``: the position asked from; every row must then lie after it, and an
        empty page must not move the position."""
        m = load_cbor(raw, "the changes page", 6 * MAX_PAGE + 16, 3)
        if not isinstance(m, dict) or not {1, 2, 3, 4} <= m.keys():
            raise WireError("a changes page is a map of keys 1 to 4")
        if not isinstance(m[1], list) or len(m[1]) > MAX_PAGE:
            raise WireError(f"a changes page holds a list of at most {MAX_PAGE} changes")
        page = cls(tuple(change_row(r) for r in m[1]), Int().load(m[2], "next"), Int().load(m[3], "last"))
        seqs = [r.seq for r in page.rows]
        if (any(a >= b for a, b in zip(seqs, seqs[1:], strict=False))
                or (since is not None and seqs and seqs[0] <= since)):
            raise WireError("the changes are not in sequence after the position asked from")
        if page.next_since != (seqs[-1] if seqs else since if since is not None else page.next_since):
            raise WireError("the next position is not the last change's")
        if m[4] is not page.more:
            raise WireError("'more' must say whether the next position is before the last")
        return page


