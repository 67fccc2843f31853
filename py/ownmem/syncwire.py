"""The sync protocol's wire: every message between a device and the blind server, typed
(DESIGN.md "Sync"), the messages devices sign, names, limits and the server's error codes.

Shared by the blind server and the sync client, and deliberately free of any code that
decrypts (the server imports it).  Each message is a frozen dataclass: ``encode()`` gives
what the wire carries (a JSON object, or CBOR bytes), ``parse()`` takes it back and refuses
anything malformed with one error, ``WireError``: a missing field, a wrong type, hex that is
not lower-case pairs, a wrong length, an integer out of range, a feed that goes backwards.
A device treats the server as hostile at every field (STYLE.md 15); the server answers a
request that fails its parse with 400 ``malformed``.

    message           route                                  body
    VaultInfo         GET  /v1/vaults/{name}              <- JSON
    Registration      POST /v1/vaults                     -> JSON
    Registered             its answer (201)               <- JSON
    Challenge         POST /v1/vaults/{name}/challenge    <- JSON
    SessionRequest    POST /v1/vaults/{name}/session      -> JSON
    Session                its answer                     <- JSON
    MetadataVersion   GET  /v1/vaults/{name}/metadata     <- JSON
    MetadataUpdate    PUT  /v1/vaults/{name}/metadata     -> JSON
    MetadataAccepted       its answer                     <- JSON
    PushRequest       POST /v1/vaults/{name}/cells        -> CBOR [[cell, wrapped DEK], ...]
    PushResult             its answer                     <- JSON
    EraseRequest      POST /v1/vaults/{name}/erase        -> JSON
    EraseResult            its answer                     <- JSON
    ChangesPage       GET  /v1/vaults/{name}/changes      <- CBOR {1: [change], 2: next, 3: last, 4: more}
    LiveEvent         GET  /v1/vaults/{name}/events       <- the data of each server-sent event, JSON
    ErrorBody         every answer that is not 2xx        <- JSON {"error": ErrorCode, "message": text}

Every signed message is a CBOR array that starts with its own context string, so no
signature can be replayed as another kind.
"""
from __future__ import annotations

import enum
import json
import re
import typing
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Annotated, Any, Self

from ownmem.crypto import cbor, sha256
from ownmem.errors import MalformedInput, WireError
from ownmem.saihm import tlog
from ownmem.saihm.receipt import MAX_RECEIPT

REGISTER_CONTEXT = "ownmem/v1/register"
REGISTER_HOLDER_CONTEXT = b"ownmem-register-v1"   # ML-DSA-65 context of the holder's registration proof
AUTH_CONTEXT = "ownmem/v1/sync-auth"
METADATA_CONTEXT = "ownmem/v1/vault-metadata"

VAULT_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
MAX_BATCH = 2000            # cells per push, receipts per erase
MAX_RECEIPTS = 128          # receipts per POST /receipts: 128 hex receipts (~7 KB each) fit in MAX_JSON
MAX_BODY = 32 << 20         # bytes per request body
MAX_JSON = 1 << 20          # bytes per JSON request body; it also bounds every hex field in one
MAX_ANSWER = MAX_BODY + (1 << 20)   # bytes a device reads of one answer (a page holds cells of pushes)
MAX_PAGE = 5000             # changes per pull page
MAX_PAGE_BYTES = 24 << 20   # bytes of cells per pull page
MAX_COUNTER = (1 << 63) - 1  # sequence numbers, versions, counts, times: 64-bit database integers
MAX_VERSION = (1 << 62) - 1  # a metadata version a device may expect (the next one still fits)
TOKEN_TTL = 900             # seconds a session credential lives
CHALLENGE_TTL = 60          # seconds a login challenge lives

SALT_LEN, KEY_LEN, ID_LEN, ED25519_SIG_LEN = 16, 32, 32, 64
HOLDER_PUB_LEN, HOLDER_SIG_LEN = 1952, 3309   # ML-DSA-65 public key and signature
WRAPPED_DEK_LEN = 40        # AES-KW of a 32-byte DEK


def valid_vault_name(name: str) -> bool:
    return bool(VAULT_NAME.fullmatch(name))   # not match(): "$" also matches before a final newline


def register_message(name: str, salt: bytes, owner_pub: bytes, sync_pub: bytes, ka_pub: bytes,
                     holder_pub: bytes) -> bytes:
    return cbor.encode([REGISTER_CONTEXT, name, salt, owner_pub, sync_pub, ka_pub, holder_pub])


def auth_message(name: str, challenge: bytes) -> bytes:
    return cbor.encode([AUTH_CONTEXT, name, challenge])


def metadata_message(name: str, version: int, metadata: bytes) -> bytes:
    return cbor.encode([METADATA_CONTEXT, name, version, metadata])


# ---------------------------------------------------------------- the server's error codes

class ErrorCode(enum.StrEnum):
    """The stable ``error`` of every answer the blind server gives that is not 2xx."""

    MALFORMED = "malformed"
    BAD_NAME = "bad_name"
    BAD_SIGNATURE = "bad_signature"
    MALFORMED_CELL = "malformed_cell"
    WRONG_HOLDER = "wrong_holder"
    BAD_CELL_ID = "bad_cell_id"
    MALFORMED_RECEIPT = "malformed_receipt"
    BEYOND_LOG = "beyond_log"
    UNAUTHENTICATED = "unauthenticated"
    WRONG_VAULT = "wrong_vault"
    UNKNOWN_VAULT = "unknown_vault"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    NAME_TAKEN = "name_taken"
    STALE_VERSION = "stale_version"
    NO_EXPORT = "no_export"
    TOO_LARGE = "too_large"
    BATCH_TOO_LARGE = "batch_too_large"
    RATE_LIMITED = "rate_limited"
    TOO_MANY_VAULTS = "too_many_vaults"
    QUOTA_EXCEEDED = "quota_exceeded"
    TIMEOUT = "timeout"
    INTERNAL = "internal"
    BUSY = "busy"
    TOO_MANY_RECEIPTS = "too_many_receipts"
    # sharing between people (SAIHM "Sharing contracts"; routes under /shares, /shared, /v1/holders)
    MALFORMED_CONTRACT = "malformed_contract"
    INVALID_GRANTEE = "invalid_grantee"
    INVALID_SCOPE = "invalid_scope"
    INVALID_MODE = "invalid_mode"
    INVALID_EXPIRY = "invalid_expiry"
    SHARD_NOT_FOUND = "shard_not_found"
    CONTRACT_NOT_FOUND = "contract_not_found"
    NOT_HOLDER = "not_holder"
    CONTRACT_EXISTS = "contract_exists"
    CONTRACT_CLOSED = "contract_closed"

    @property
    def status(self) -> int:
        return ERRORS[self][0]

    @property
    def description(self) -> str:
        return ERRORS[self][1]


# The registry: code -> (HTTP status, what it means).  One status per code, so a client may
# rely on either; server/openapi.py documents exactly these.
ERRORS: dict[ErrorCode, tuple[int, str]] = {
    ErrorCode.MALFORMED: (400, "the request does not parse as the message the route takes"),
    ErrorCode.BAD_NAME: (400, "vault names are 1-64 of a-z 0-9 . _ - and start with a letter or digit"),
    ErrorCode.BAD_SIGNATURE: (400, "a signature does not verify under the key it must"),
    ErrorCode.MALFORMED_CELL: (400, "a pushed cell is not a well-formed SAIHM cell around a sealed object, "
                                    "or not deterministic CBOR"),
    ErrorCode.WRONG_HOLDER: (400, "a cell or receipt belongs to another holder"),
    ErrorCode.BAD_CELL_ID: (400, "a cellId does not match the cell's contents"),
    ErrorCode.MALFORMED_RECEIPT: (400, "a receipt is malformed, of the wrong operation, or not deterministic CBOR"),
    ErrorCode.BEYOND_LOG: (400, "a tree size or leaf index beyond the receipt log's current tree"),
    ErrorCode.UNAUTHENTICATED: (401, "no credential, or one that is unknown or expired, or a failed login"),
    ErrorCode.WRONG_VAULT: (403, "the credential is for another vault"),
    ErrorCode.UNKNOWN_VAULT: (404, "no vault can have that name (a well-formed name answers as a vault does)"),
    ErrorCode.NOT_FOUND: (404, "no such route, file or receipt"),
    ErrorCode.METHOD_NOT_ALLOWED: (405, "the route does not take that method (see Allow)"),
    ErrorCode.NAME_TAKEN: (409, "a vault of that name exists"),
    ErrorCode.STALE_VERSION: (409, "the metadata changed since the expected version; pull and retry"),
    ErrorCode.NO_EXPORT: (409, "the vault's metadata carries no export header"),
    ErrorCode.TOO_LARGE: (413, "the request body is over the limit"),
    ErrorCode.BATCH_TOO_LARGE: (413, f"more than {MAX_BATCH} cells in one push"),
    ErrorCode.RATE_LIMITED: (429, "too many requests from this address or for this vault (see Retry-After)"),
    ErrorCode.TOO_MANY_VAULTS: (403, "this key set (owner, sync or holder key) registered as many vaults as the "
                                     "server allows"),
    ErrorCode.QUOTA_EXCEEDED: (413, "the vault's storage quota (bytes of cells and wrapped DEKs) would be "
                                    "exceeded; nothing of the push was stored"),
    ErrorCode.TIMEOUT: (408, "the request was not received in time"),
    ErrorCode.INTERNAL: (500, "the server failed; nothing of the request was stored"),
    ErrorCode.BUSY: (503, "the server is busy: too many connections or exports open (see Retry-After)"),
    ErrorCode.TOO_MANY_RECEIPTS: (413, f"more than {MAX_RECEIPTS} receipts in one POST /receipts"),
    ErrorCode.MALFORMED_CONTRACT: (400, "a sharing contract is malformed, not deterministic CBOR, or its keys do "
                                        "not match its grantees and cells"),
    ErrorCode.INVALID_GRANTEE: (400, "a grantee is not a 32-byte holderId, is listed twice, is the sharer, or "
                                     "has no verified registration on this server"),
    ErrorCode.INVALID_SCOPE: (400, "only the scope 'read' is defined; 'write' and 'readwrite' are reserved"),
    ErrorCode.INVALID_MODE: (400, "a contract's mode is TEMPORARY, PERMANENT or SYNDICATE"),
    ErrorCode.INVALID_EXPIRY: (400, "the expiry breaks the mode's rule (TEMPORARY: within 24 h; PERMANENT: 0), "
                                    "is past, or the contract's timestamp is too far from the server's time"),
    ErrorCode.SHARD_NOT_FOUND: (400, "a contract covers a cell this vault does not hold (or erased)"),
    ErrorCode.CONTRACT_NOT_FOUND: (404, "no contract by that id for this vault (as sharer or as grantee)"),
    ErrorCode.NOT_HOLDER: (403, "this vault's holder is not the contract's holder"),
    ErrorCode.CONTRACT_EXISTS: (409, "a contract with that id was offered before (a replayed offer)"),
    ErrorCode.CONTRACT_CLOSED: (409, "the contract was revoked, has expired, or this grantee declined or "
                                     "withdrew: it cannot be accepted again"),
}


# ---------------------------------------------------------------- JSON fields

_HEX = re.compile(r"(?:[0-9a-f]{2})*")
_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,128}")       # it goes into a header: no space, no CR/LF
_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")


class Codec:
    """How one JSON field is spelled on the wire and checked when read."""

    def load(self, value: Any, name: str) -> Any:
        raise NotImplementedError

    def dump(self, value: Any) -> Any:
        return value


@dataclass(frozen=True, slots=True)
class Hex(Codec):
    """Bytes as lower-case hex pairs: one value, one spelling (bytes.fromhex alone would also
    take upper case and whitespace).  ``size`` is exact; ``limit`` caps a field of any size,
    by default at the JSON body limit, which bounds it anyway (a cap of 64 Ki digits once
    refused metadata over 32 KiB, under the 1 MiB the routes allow)."""

    size: int | None = None
    limit: int = MAX_JSON

    def load(self, value: Any, name: str) -> bytes:
        if not isinstance(value, str) or len(value) > 2 * self.limit or not _HEX.fullmatch(value):
            raise WireError(f"{name} must be a lower-case hex string")
        b = bytes.fromhex(value)
        if self.size is not None and len(b) != self.size:
            raise WireError(f"{name} must be {self.size} bytes")
        return b

    def dump(self, value: Any) -> str:
        return str(value.hex())


@dataclass(frozen=True, slots=True)
class Int(Codec):
    """An integer in [lo, hi]; never a bool, a float or a numeric string."""

    lo: int = 0
    hi: int = MAX_COUNTER

    def load(self, value: Any, name: str) -> int:
        if type(value) is not int or not self.lo <= value <= self.hi:
            raise WireError(f"{name} must be an integer from {self.lo} to {self.hi}")
        return value


@dataclass(frozen=True, slots=True)
class Flag(Codec):
    """A JSON true or false; never 0/1 or a string."""

    def load(self, value: Any, name: str) -> bool:
        if not isinstance(value, bool):
            raise WireError(f"{name} must be true or false")
        return value


@dataclass(frozen=True, slots=True)
class Text(Codec):
    """A string that matches ``pattern``, or else any printable text up to ``limit`` characters."""

    pattern: re.Pattern[str] | None = None
    limit: int = 200

    def load(self, value: Any, name: str) -> str:
        if (not isinstance(value, str) or len(value) > self.limit
                or not (self.pattern.fullmatch(value) if self.pattern else value.isprintable())):
            raise WireError(f"{name} is malformed")
        return value


@dataclass(frozen=True, slots=True)
class HexList(Codec):
    """A list of ``lo`` to ``hi`` hex fields, read as a tuple."""

    item: Hex
    lo: int
    hi: int

    def load(self, value: Any, name: str) -> tuple[bytes, ...]:
        if not isinstance(value, list) or not self.lo <= len(value) <= self.hi:
            raise WireError(f"{name} must be a list of {self.lo} to {self.hi} items")
        return tuple(self.item.load(v, name) for v in value)

    def dump(self, value: Any) -> list[str]:
        return [self.item.dump(v) for v in value]


Name = Annotated[str, Text(VAULT_NAME, 64)]
Salt = Annotated[bytes, Hex(SALT_LEN)]
Key = Annotated[bytes, Hex(KEY_LEN)]
Id = Annotated[bytes, Hex(ID_LEN)]
Signature = Annotated[bytes, Hex(ED25519_SIG_LEN)]
Blob = Annotated[bytes, Hex()]
Counter = Annotated[int, Int()]
Version = Annotated[int, Int(1)]
Ids = Annotated[tuple[bytes, ...], HexList(Hex(ID_LEN), 0, MAX_BATCH)]


def load_json(raw: bytes | str) -> Any:
    """A JSON document of an answer or request body; anything else is ``WireError``."""
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):   # also: an integer of 4300+ digits, deep nesting
        raise WireError("the body is not JSON") from None


def dump_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


_CODECS: dict[type, tuple[tuple[str, Codec], ...]] = {}


def _codecs(cls: type) -> tuple[tuple[str, Codec], ...]:
    """(field name, codec) of a message class, in field order; read once from its annotations."""
    got = _CODECS.get(cls)
    if got is None:
        hints = typing.get_type_hints(cls, include_extras=True)
        got = _CODECS[cls] = tuple((f.name, next(m for m in hints[f.name].__metadata__ if isinstance(m, Codec)))
                                   for f in fields(cls))
    return got


class JsonMessage:
    """A JSON object on the wire; each field's annotation names its ``Codec``.  Keys a
    message does not know are ignored (a newer peer may add some); every known key is
    required."""

    __slots__ = ()

    def encode(self) -> dict[str, Any]:
        return {name: codec.dump(getattr(self, name)) for name, codec in _codecs(type(self))}

    @classmethod
    def parse(cls, value: Any) -> Self:
        if not isinstance(value, dict):
            raise WireError(f"{cls.__name__} must be a JSON object")
        got = {}
        for name, codec in _codecs(cls):
            if name not in value:
                raise WireError(f"{name} is missing")
            got[name] = codec.load(value[name], name)
        out = cls(**got)
        out.check()
        return out

    def check(self) -> None:
        """Invariants across fields, checked by ``parse``; raise ``WireError``."""


# ---------------------------------------------------------------- JSON messages

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

    def check(self) -> None:
        if sha256(self.holder_pub) != self.holder_id:
            raise WireError("holder_id is not the SHA-256 of holder_pub")


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


# ---------------------------------------------------------------- CBOR messages

def _cbor(raw: bytes, what: str, max_items: int, max_depth: int) -> Any:
    try:
        return cbor.decode(raw, max_items=max_items, max_depth=max_depth)
    except MalformedInput as e:   # LimitExceeded too
        raise WireError(f"{what} is not valid CBOR ({e})") from None


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
        v = _cbor(raw, "the push body", 4 * MAX_BATCH + 8, 2)
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
class MetaChange:
    seq: int

    def encode(self) -> bytes:
        return cbor.encode([self.seq, "meta", None, None, None])


ChangeRow = CellChange | ErasedCell | EraseChange | MetaChange
_SEQ = Int(1)


def _blob(v: Any, name: str, size: int | None = None, limit: int = MAX_BODY) -> bytes:
    if not isinstance(v, bytes) or (len(v) != size if size is not None else not 0 < len(v) <= limit):
        raise WireError(f"{name} must be {size if size is not None else f'1 to {limit}'} bytes")
    return v


def change_row(v: Any) -> ChangeRow:
    """One change of the feed, ``[seq, kind, cellId, cell, wrappedDek]``, as its typed row.
    A kind this client does not know is refused rather than skipped: the position would
    move past a change it never applied."""
    if not isinstance(v, list) or len(v) != 5:
        raise WireError("a change is [seq, kind, cellId, cell, wrappedDek]")
    seq, kind, cell_id, cell, wrapped = v
    seq = _SEQ.load(seq, "seq")
    if kind == "cell" and cell is None and wrapped is None:
        return ErasedCell(seq, _blob(cell_id, "cellId", ID_LEN))
    if kind == "cell":
        return CellChange(seq, _blob(cell_id, "cellId", ID_LEN), _blob(cell, "cell"),
                          _blob(wrapped, "wrappedDek", WRAPPED_DEK_LEN))
    if kind == "erase" and wrapped is None:
        return EraseChange(seq, _blob(cell_id, "cellId", ID_LEN),
                           None if cell is None else _blob(cell, "FORGET receipt", limit=MAX_RECEIPT))
    if kind == "meta" and cell_id is None and cell is None and wrapped is None:
        return MetaChange(seq)
    raise WireError("a change is a cell, an erasure or a metadata version")


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
        m = _cbor(raw, "the changes page", 6 * MAX_PAGE + 16, 3)
        if not isinstance(m, dict) or not {1, 2, 3, 4} <= m.keys():
            raise WireError("a changes page is a map of keys 1 to 4")
        if not isinstance(m[1], list) or len(m[1]) > MAX_PAGE:
            raise WireError(f"a changes page holds a list of at most {MAX_PAGE} changes")
        page = cls(tuple(change_row(r) for r in m[1]), Int().load(m[2], "next"), Int().load(m[3], "last"))
        seqs = [r.seq for r in page.rows]
        if any(a >= b for a, b in zip(seqs, seqs[1:])) or (since is not None and seqs and seqs[0] <= since):
            raise WireError("the changes are not in sequence after the position asked from")
        if page.next_since != (seqs[-1] if seqs else since if since is not None else page.next_since):
            raise WireError("the next position is not the last change's")
        if m[4] is not page.more:
            raise WireError("'more' must say whether the next position is before the last")
        return page


# ---------------------------------------------------------------- the public log and its witnesses
#
#     LogKeyInfo        GET  /v1/log/key                       <- JSON
#     LogInclusion      GET  /v1/log/proof/inclusion           <- JSON
#     LogConsistency    GET  /v1/log/proof/consistency         <- JSON {"from", "to", "proof"}
#     Witness           POST /v1/vaults/{name}/witnesses       -> JSON (one device's view of the log)
#     WitnessList       GET  /v1/vaults/{name}/witnesses       <- JSON {"witnesses": [Witness, ...]}
#
# A witness is one device's last verified checkpoint, signed by the vault's sync key, which
# every device of the vault holds and the server does not (ownmem.vault.logwatch).

WITNESS_CONTEXT = "ownmem/v1/log-witness"
DEVICE_ID_LEN = 16
MAX_NOTE = 4096             # bytes of a checkpoint note a witness carries (one is ~200)
MAX_VKEY = 512              # characters of a note verifier key
MAX_WITNESSES = 32          # current records per vault: the least recently updated goes first
MAX_PROOF = 128             # hashes of a Merkle proof (tlog refuses longer ones anyway)
_VKEY = re.compile(r"[!-*,-~]{1,255}\+[0-9a-f]{8}\+[A-Za-z0-9+/]{4,}={0,2}")
Proof = Annotated[tuple[bytes, ...], HexList(Hex(32), 0, MAX_PROOF)]


def witness_message(name: str, device_id: bytes, vkey: str, note: bytes, signed_at: int) -> bytes:
    return cbor.encode([WITNESS_CONTEXT, name, device_id, vkey, note, signed_at])


@dataclass(frozen=True, slots=True)
class LogKeyInfo(JsonMessage):
    """The log's origin and Ed25519 verifier key, as ``tlog.VerifierKey`` prints it."""

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
            tlog.parse_checkpoint(tlog.parse_note(self.note).text)
        except tlog.NoteRefused as e:
            raise WireError(f"a witness carries a checkpoint note ({e.reason})") from None


def _verifier_key(vkey: str) -> tlog.VerifierKey:
    try:
        return tlog.parse_verifier_key(vkey)
    except tlog.NoteRefused as e:
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
# ---------------------------------------------------------------- sharing between people
#
#   HolderRecord      GET  /v1/holders/{holderId}                       <- JSON (any vault's credential)
#   HolderProof       POST /v1/vaults/{name}/holder                     -> JSON (answer: the HolderRecord)
#   ShareOffer        POST /v1/vaults/{name}/shares                     -> JSON
#   ShareOffered           its answer (201)                             <- JSON
#   ShareList         GET  /v1/vaults/{name}/shares                     <- JSON
#   ShareAnswer       POST /v1/vaults/{name}/shares/{id}/accept|decline|withdraw   <- JSON
#   RevokeRequest     POST /v1/vaults/{name}/shares/{id}/revoke         -> JSON
#   RevokeResult           its answer                                   <- JSON
#   SharedPage        GET  /v1/vaults/{name}/shared?after=              <- CBOR {1: [[contractId, cellId,
#                                                                            cell, shareKey]], 2: more}

SHARE_KEY_LEN = 32 + 40           # ephemeral X25519 public key || AES-KW of the 32-byte DEK
SHARE_ITEM_LEN = 32 + 32 + SHARE_KEY_LEN   # granteeId || cellId || share key, as an offer carries it
MAX_SHARE_KEYS = MAX_BATCH        # grantees x cells per offer: 2000 items stay well under the JSON body limit
SHARE_STATES = ("offered", "accepted", "declined", "withdrawn")
_STATE = re.compile("|".join(SHARE_STATES))


@dataclass(frozen=True, slots=True)
class MessageList(Codec):
    """A list of ``lo`` to ``hi`` JSON messages of one class, read as a tuple."""

    cls: type[JsonMessage]
    lo: int
    hi: int

    def load(self, value: Any, name: str) -> tuple[Any, ...]:
        if not isinstance(value, list) or not self.lo <= len(value) <= self.hi:
            raise WireError(f"{name} must be a list of {self.lo} to {self.hi} items")
        return tuple(self.cls.parse(v) for v in value)

    def dump(self, value: Any) -> list[Any]:
        return [v.encode() for v in value]


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
        m = _cbor(raw, "the shared cells", 5 * MAX_PAGE + 8, 3)
        if not isinstance(m, dict) or set(m) != {1, 2} or not isinstance(m[1], list) or len(m[1]) > MAX_PAGE:
            raise WireError("shared cells are a map {1: [[contractId, cellId, cell, key]], 2: more}")
        if not isinstance(m[2], bool):
            raise WireError("'more' must be true or false")
        rows = []
        for r in m[1]:
            if not isinstance(r, list) or len(r) != 4:
                raise WireError("a shared cell is [contractId, cellId, cell, key]")
            rows.append(SharedCell(_blob(r[0], "contractId", ID_LEN), _blob(r[1], "cellId", ID_LEN),
                                   _blob(r[2], "cell"), _blob(r[3], "key", SHARE_KEY_LEN)))
        keys = [r.contract_id + r.cell_id for r in rows]
        if any(a >= b for a, b in zip(keys, keys[1:])):
            raise WireError("shared cells are in ascending (contractId, cellId) order")
        return cls(tuple(rows), m[2])
