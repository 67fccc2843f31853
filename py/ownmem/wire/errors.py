"""The blind server's error codes: ``ErrorCode`` and its registry ``ERRORS`` (code -> HTTP
status and meaning), the ``error`` of every answer that is not 2xx."""
from __future__ import annotations

import enum

from ownmem.wire.limits import MAX_BATCH, MAX_RECEIPTS


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
    KEYS_REGISTERED = "keys_registered"
    STALE_VERSION = "stale_version"
    NO_EXPORT = "no_export"
    ROTATION_UNFINISHED = "rotation_unfinished"
    TOO_LARGE = "too_large"
    BATCH_TOO_LARGE = "batch_too_large"
    RATE_LIMITED = "rate_limited"
    TOO_MANY_VAULTS = "too_many_vaults"
    QUOTA_EXCEEDED = "quota_exceeded"
    TIMEOUT = "timeout"
    INTERNAL = "internal"
    BUSY = "busy"
    TOO_MANY_RECEIPTS = "too_many_receipts"
    UNKNOWN_CELL = "unknown_cell"
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
    # devices (server/device_routes.py; docs/decisions.md "15.7. Device and Key Revocation")
    DEVICE_REMOVED = "device_removed"
    DEVICE_REQUIRED = "device_required"
    ENROLMENT_CLOSED = "enrolment_closed"
    TOO_MANY_DEVICES = "too_many_devices"

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
    ErrorCode.KEYS_REGISTERED: (409, "the keys of this registration hold a vault on this server already (its name in "
                                     "`vault`); send `another_name: true` to register a second name anyway"),
    ErrorCode.STALE_VERSION: (409, "the metadata changed since the expected version; pull and retry"),
    ErrorCode.NO_EXPORT: (409, "the vault's metadata carries no export header"),
    ErrorCode.ROTATION_UNFINISHED: (409, "a scope's key rotation is under way: part of the wraps held here open only "
                                         "under its old key, which an export cannot carry; finish it on a device "
                                         "(`ownmem scope rotate NAME`) and export again"),
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
    ErrorCode.UNKNOWN_CELL: (409, "a new wrap names a cell this vault does not hold (never pushed, erased, or "
                                  "another holder's): nothing was replaced"),
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
    ErrorCode.DEVICE_REMOVED: (403, "this device was removed from the vault: it can no longer log in or enrol"),
    ErrorCode.DEVICE_REQUIRED: (401, "this vault takes logins only from its enrolled devices (a device proof, "
                                     "or an enrolment signed by the owner key in force)"),
    ErrorCode.ENROLMENT_CLOSED: (409, "a device was removed and the vault's keys have not changed since: no device "
                                      "can be enrolled until they do (a passphrase change)"),
    ErrorCode.TOO_MANY_DEVICES: (409, "the vault has as many enrolled devices as the server allows"),
}
