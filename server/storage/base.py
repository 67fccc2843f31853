"""What the blind server stores, and the one interface both backends implement.

Everything here is opaque to the server: cells (SAIHM envelopes around sealed
objects), wrapped DEKs, owner-signed metadata, public receipts.  The backends keep
one change feed per vault, numbered by a per-vault sequence that is assigned
under a row lock, so sequence numbers always commit in order and a reader paging
by ``since`` can never skip a change that commits later.

Erasure has two halves.  ``erase`` withdraws a cell and deletes its row and wrapped DEK
in one transaction: from then on nothing the server answers holds them.  Their bytes can
outlive the row on disk (SQLite: in the write-ahead log; PostgreSQL: in the heap pages of
dead tuples), so each backend also scrubs them (scrub.py) without making anyone wait, and
``erasure_pending`` says whether that is still to happen for a vault.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ownmem.errors import OwnmemError

if TYPE_CHECKING:
    from server.storage.devices import Devices


class StorageError(OwnmemError):
    """The root of what the storage layer raises on purpose."""

    code = "storage"


class StorageConflict(StorageError):
    """A uniqueness or compare-and-swap precondition failed."""

    code = "storage_conflict"


class StorageLimit(StorageError):
    """A registration over the number of vaults one key set may have."""

    code = "storage_limit"


class StorageQuota(StorageError):
    """A push that would take the vault over its storage quota: nothing of it was stored."""

    code = "storage_quota"


class StorageBusy(StorageError):
    """Too much is held open right now (export snapshots): the caller can retry later."""

    code = "storage_busy"


class SnapshotClosed(StorageError):
    """The export snapshot was closed (its time ran out, or the storage closed): the export ends unfinished."""

    code = "snapshot_closed"


@dataclass(frozen=True, slots=True)
class RekeyKeys:
    """What a passphrase change replaces in a vault's record (server/vault_routes.py ``rekey``)."""

    salt: bytes
    owner_pub: bytes
    ka_pub: bytes
    root_wrap: bytes
    holder_proof: bytes


@dataclass(frozen=True, slots=True)
class VaultRecord:
    id: int
    name: str
    salt: bytes
    owner_pub: bytes
    sync_pub: bytes
    ka_pub: bytes
    holder_pub: bytes
    holder_id: bytes
    last_seq: int
    meta_version: int
    stored_bytes: int         # of its cells and wrapped DEKs, counted against its quota


@dataclass(frozen=True, slots=True)
class Registration:
    name: str
    salt: bytes
    owner_pub: bytes
    sync_pub: bytes
    ka_pub: bytes
    holder_pub: bytes
    holder_id: bytes
    metadata: bytes
    metadata_sig: bytes
    key_receipt: LogEntry
    holder_proof: bytes = b""     # the holder's signature over the registration: the directory serves it


@dataclass(frozen=True, slots=True)
class PushCell:
    cell_id: bytes
    object_id: bytes          # the cellNonce: the sealed object's id
    cell: bytes               # the whole cell, CBOR
    wrapped_dek: bytes


@dataclass(frozen=True, slots=True)
class PushResult:
    stored: int
    duplicates: int
    erased: int               # refused because the cellId was erased before
    last_seq: int


@dataclass(frozen=True, slots=True)
class Change:
    seq: int
    kind: str                 # "cell" | "erase" | "wrap" | "meta"
    cell_id: bytes | None
    cell: bytes | None        # of an erasure: the FORGET receipt that asked for it
    wrapped_dek: bytes | None


@dataclass(frozen=True, slots=True)
class LogEntry:
    receipt_id: bytes
    subject_id: bytes
    operation: str
    holder_id: bytes
    timestamp: int
    receipt: bytes            # the signed receipt, CBOR


@dataclass(frozen=True, slots=True)
class LoggedReceipt:
    index: int
    entry: LogEntry


class ExportSnapshot(Protocol):
    """One vault's cells as they were at one moment (export.py): one object per object id."""

    @property
    def count(self) -> int: ...

    def page(self, after: bytes, limit: int) -> list[tuple[bytes, bytes, bytes]]:
        """(object id, cell, wrapped DEK) after ``after`` in ascending object id."""
        ...

    def close(self) -> None: ...


class Storage(Protocol):
    def close(self) -> None: ...

    def register(self, reg: Registration, *, max_per_key: int | None = None) -> VaultRecord:
        """Raises StorageConflict for a taken name, StorageLimit when a key of ``reg`` (owner,
        sync or holder) is already in ``max_per_key`` vaults; counted and inserted in one
        transaction, registrations one at a time."""
        ...

    def vault(self, name: str) -> VaultRecord | None: ...

    def vault_by_id(self, vault_id: int) -> VaultRecord | None: ...

    def name_of_owner(self, owner_pub: bytes) -> str | None:
        """The first vault registered with this owner key, if any."""
        ...

    def use_challenge(self, vault_id: int, challenge: bytes, expires_at: float, now: float) -> bool:
        """Note a challenge a login succeeded with (server/challenge.py) -> False if it was used
        before (a replay).  Rows past their expiry are dropped: the table holds only challenges
        of logins that proved a vault's key within the last CHALLENGE_TTL seconds."""
        ...

    def add_token(self, token_hash: bytes, vault_id: int, expires_at: float) -> None: ...

    def token_vault(self, token_hash: bytes, now: float) -> tuple[int, float] | None:
        """(vault id, expiry) of a live credential."""
        ...

    def metadata(self, vault_id: int) -> tuple[int, bytes, bytes]: ...

    def cas_metadata(self, vault_id: int, expected: int, metadata: bytes, sig: bytes) -> int: ...

    def root_wrap(self, vault_id: int) -> bytes | None:
        """The vault root wrapped under the master secret; None before its first passphrase change."""
        ...

    def rekey(self, vault_id: int, expected: int, keys: RekeyKeys, metadata: bytes, sig: bytes) -> int:
        """A passphrase change: compare-and-swap of the metadata (StorageConflict if stale) with the
        vault's salt, owner and key-agreement keys, root wrap and holder proof replaced at once."""
        ...

    def known_cells(self, vault_id: int, cell_ids: list[bytes]) -> tuple[set[bytes], set[bytes]]:
        """Which of ``cell_ids`` the vault holds, and which it erased."""
        ...

    def push(self, vault_id: int, cells: list[PushCell], *, quota: int | None = None) -> PushResult:
        """Raises StorageQuota, storing nothing, when the new cells would take the vault's
        stored bytes over ``quota``."""
        ...

    def changes(self, vault_id: int, since: int, limit: int) -> tuple[list[Change], int]: ...

    def rewrap(self, vault_id: int, wraps: list[tuple[bytes, bytes]]) -> tuple[int, int]:
        """A scope rotation: each (cellId, wrapped DEK) replaces the wrap the vault holds for that
        cell, never the cell; one that changed is a "wrap" change in the feed and the old bytes
        are scrubbed as an erasure's are.  StorageConflict, nothing replaced, if the vault does not
        hold every cell named.  -> (wraps replaced, the vault's last sequence number)."""
        ...

    def foreign_cells(self, vault_id: int, cell_ids: list[bytes]) -> set[bytes]:
        """Of ``cell_ids``, those this vault neither holds nor erased that are another holder's:
        a vault of another holder holds or held them (its feed names them), or the log holds
        another holder's receipt about them (a REMEMBER is logged before its cell is pushed)."""
        ...

    def erase(self, vault_id: int, cell_ids: list[bytes], receipts: list[LogEntry], now: int) -> list[bytes]: ...

    def erasure_pending(self, vault_id: int) -> bool:
        """Whether bytes of a cell or wrapped DEK this vault erased may still be on the server's disk."""
        ...

    def export_snapshot(self, vault_id: int) -> ExportSnapshot:
        """Raises StorageBusy when too many exports are open at once."""
        ...

    def log_get(self, receipt_id: bytes) -> LoggedReceipt | None: ...

    def log_receipts(self, receipts: list[LogEntry]) -> None:
        """Append checked receipts to the log, in one transaction; one already logged (same
        receiptId) is no new entry and no new leaf."""
        ...

    def log_list(self, *, holder_id: bytes | None, subject_id: bytes | None, operation: str | None,
                 after: int, limit: int) -> list[LoggedReceipt]: ...

    def erasure_list(self, after: int, limit: int) -> list[tuple[int, bytes, bytes, int]]: ...

    def last_seq(self, vault_id: int) -> int: ...

    # the log's Merkle tree (storage/tree.py): leaf i is the i-th receipt logged
    def log_tree_size(self) -> int: ...

    def read_hashes(self, indexes: Sequence[int]) -> list[bytes]: ...   # an ownmem.saihm.tlog.HashReader

    def log_leaves(self, start: int, limit: int) -> list[LoggedReceipt]: ...   # index = leaf index

    def log_leaf_index(self, receipt_id: bytes) -> int | None: ...

    def log_key(self, candidate: bytes) -> bytes: ...   # the log key's seed: ``candidate`` if none was kept

    def server_secret(self) -> bytes:
        """32 random bytes, made once per store and kept in it (decoy lookups, app.py)."""
        ...

    def devices(self) -> Devices:
        """A vault's enrolled devices (devices.py)."""
        ...

    # log witnesses (witness.py): one current record per device of a vault
    def put_witness(self, vault_id: int, device_id: bytes, record: bytes, now: float, keep: int) -> None:
        """Store ``record`` as the device's current witness; the vault keeps its ``keep`` most recent."""
        ...

    def witnesses(self, vault_id: int, limit: int) -> list[bytes]:
        """The vault's witness records, most recently updated first."""
        ...
