"""SAIHM sharing contracts (SAIHM "Sharing contracts", "Signed messages", "Wire formats").

    contract   = {1: contractId, 2: holderId, 3: [granteeId], 4: [cellId], 5: mode, 6: scope,
                  7: expiresAt, 8: timestamp, 9: signature, 10: contractNonce}
    body       = deterministic CBOR of the contract map without keys 1 and 9 (key 10 included)
    contractId = SHA-256(body)
    signature  = ML-DSA-65(holder, context "SAIHM-CONTRACT-v1", body)

The rules a contract must satisfy are one pure function, ``contract_rules``, run where a
contract is made and where it is read (the blind server on an offer, the grantee on every
fetch), so no party holds a contract the other would refuse:

- granteeIds: non-empty, each 32 bytes (the operator MUST reject any other length), no
  duplicates compared as bytes;
- shardIds: non-empty cellIds, each 32 bytes, no duplicates;
- mode TEMPORARY: timestamp < expiresAt <= timestamp + 86400 (0 not permitted);
  PERMANENT: expiresAt = 0; SYNDICATE: 0 or later than the timestamp;
- scope "read" only: "write" and "readwrite" are reserved and refused with invalid_scope.

A refusal is ``ContractRefused`` with a stable ``code``: malformed_contract,
invalid_grantee, invalid_scope, invalid_mode, invalid_expiry, bad_signature.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ownmem.crypto import CryptoProvider, cbor, random_bytes, sha256
from ownmem.errors import OwnmemError
from ownmem.saihm.errors import B

CONTRACT_CONTEXT = b"SAIHM-CONTRACT-v1"
MODES = ("TEMPORARY", "PERMANENT", "SYNDICATE")
SCOPES = ("read", "write", "readwrite")
RESERVED_SCOPES = ("write", "readwrite")
TEMPORARY_MAX = 86400          # seconds: a TEMPORARY contract lasts at most a day
MAX_GRANTEES = 32              # ownmem's bounds, so one offer stays one bounded request
MAX_SHARDS = 500
MAX_CONTRACT = 64 * 1024
MLDSA65_SIG_LEN = 3309


class ContractRefused(OwnmemError):
    """A contract breaks a rule of SAIHM "Sharing contracts" or does not verify.  ``code`` is
    stable and names the rule (the server answers an offer with it)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Contract:
    contract_id: bytes
    holder_id: bytes
    grantee_ids: tuple[bytes, ...]
    shard_ids: tuple[bytes, ...]
    mode: str
    scope: str
    expires_at: int
    timestamp: int
    signature: bytes
    nonce: bytes

    def body(self) -> bytes:
        return contract_body(self.holder_id, self.grantee_ids, self.shard_ids, self.mode, self.scope,
                             self.expires_at, self.timestamp, self.nonce)

    def to_cbor(self) -> bytes:
        return cbor.encode({1: self.contract_id, 2: self.holder_id, 3: list(self.grantee_ids),
                            4: list(self.shard_ids), 5: self.mode, 6: self.scope, 7: self.expires_at,
                            8: self.timestamp, 9: self.signature, 10: self.nonce})

    def active_at(self, now: int) -> bool:
        """Not expired at ``now`` (acceptance and revocation are the server's state, not the contract's)."""
        return self.expires_at == 0 or self.expires_at > now


def contract_body(holder_id: bytes, grantee_ids: Sequence[bytes], shard_ids: Sequence[bytes], mode: str,
                  scope: str, expires_at: int, timestamp: int, nonce: bytes) -> bytes:
    return cbor.encode({2: holder_id, 3: list(grantee_ids), 4: list(shard_ids), 5: mode, 6: scope,
                        7: expires_at, 8: timestamp, 10: nonce})


def contract_rules(grantee_ids: Sequence[Any], shard_ids: Sequence[Any], mode: Any, scope: Any,
                   expires_at: Any, timestamp: Any) -> None:
    """The rules of SAIHM "Sharing contracts", as one decision; raises ContractRefused."""
    if type(timestamp) is not int or not 0 <= timestamp < 1 << 63:
        raise ContractRefused("malformed_contract", "timestamp must be an unsigned integer")
    if type(expires_at) is not int or not 0 <= expires_at < 1 << 63:
        raise ContractRefused(B.INVALID_EXPIRY, "expiresAt must be an unsigned integer")
    if not isinstance(grantee_ids, (list, tuple)) or not grantee_ids:
        raise ContractRefused(B.INVALID_GRANTEE, "a contract names at least one grantee")
    if len(grantee_ids) > MAX_GRANTEES:
        raise ContractRefused(B.INVALID_GRANTEE, f"at most {MAX_GRANTEES} grantees per contract")
    for g in grantee_ids:
        if not isinstance(g, bytes) or len(g) != 32:
            raise ContractRefused(B.INVALID_GRANTEE, "every granteeId is a 32-byte holderId")
    if len(set(grantee_ids)) != len(grantee_ids):
        raise ContractRefused(B.INVALID_GRANTEE, "a grantee is listed twice")
    if not isinstance(shard_ids, (list, tuple)) or not shard_ids:
        raise ContractRefused("malformed_contract", "a contract covers at least one cell")
    if len(shard_ids) > MAX_SHARDS:
        raise ContractRefused("malformed_contract", f"at most {MAX_SHARDS} cells per contract")
    if not all(isinstance(s, bytes) and len(s) == 32 for s in shard_ids):
        raise ContractRefused("malformed_contract", "every shardId is a 32-byte cellId")
    if len(set(shard_ids)) != len(shard_ids):
        raise ContractRefused("malformed_contract", "a cell is listed twice")
    if scope not in SCOPES:
        raise ContractRefused("malformed_contract", "scope is read, write or readwrite")
    if scope in RESERVED_SCOPES:
        # SAIHM: no tool lets a grantee write into another holder's memory
        raise ContractRefused(B.INVALID_SCOPE, f"scope {scope!r} is reserved; only 'read' is defined")
    if mode not in MODES:
        raise ContractRefused(B.INVALID_MODE, "mode is TEMPORARY, PERMANENT or SYNDICATE")
    if mode == "TEMPORARY" and not timestamp < expires_at <= timestamp + TEMPORARY_MAX:
        raise ContractRefused(B.INVALID_EXPIRY, "a TEMPORARY contract expires after its timestamp and "
                                                "within 24 hours of it")
    if mode == "PERMANENT" and expires_at != 0:
        raise ContractRefused(B.INVALID_EXPIRY, "a PERMANENT contract has expiresAt 0")
    if mode == "SYNDICATE" and expires_at != 0 and expires_at <= timestamp:
        raise ContractRefused(B.INVALID_EXPIRY, "a SYNDICATE contract expires after its timestamp, or never (0)")


async def make_contract(p: CryptoProvider, *, xi: bytes, holder_id: bytes, grantee_ids: Sequence[bytes],
                        shard_ids: Sequence[bytes], mode: str, scope: str, expires_at: int, timestamp: int,
                        nonce: bytes | None = None) -> Contract:
    """A signed contract; refuses (ContractRefused) to make one that breaks a rule."""
    contract_rules(list(grantee_ids), list(shard_ids), mode, scope, expires_at, timestamp)
    n = nonce if nonce is not None else random_bytes(16)
    if len(n) != 16:
        raise ContractRefused("malformed_contract", "contractNonce is 16 bytes")
    g, s = tuple(grantee_ids), tuple(shard_ids)
    body = contract_body(holder_id, g, s, mode, scope, expires_at, timestamp, n)
    sig = await p.mldsa65_sign(xi, body, CONTRACT_CONTEXT)
    return Contract(sha256(body), holder_id, g, s, mode, scope, expires_at, timestamp, sig, n)


def parse_contract(data: bytes) -> Contract:
    """Shape and rules; the signature is ``verify_contract``'s.  One byte form only: the
    encoding must be deterministic CBOR (re-encoding gives ``data``)."""
    if not isinstance(data, bytes) or len(data) > MAX_CONTRACT:
        raise ContractRefused("malformed_contract", "contract too large")
    try:
        m = cbor.decode(data, max_items=4 * (MAX_GRANTEES + MAX_SHARDS) + 64, max_depth=3)
    except OwnmemError as e:
        raise ContractRefused("malformed_contract", f"not CBOR ({e})") from None
    if not isinstance(m, dict) or set(m) != {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}:
        raise ContractRefused("malformed_contract", "a contract is a map with keys 1..10")
    cid, hid, sig, nonce = m[1], m[2], m[9], m[10]
    if not isinstance(cid, bytes) or len(cid) != 32 or not isinstance(hid, bytes) or len(hid) != 32:
        raise ContractRefused("malformed_contract", "contractId and holderId are 32 bytes")
    if not isinstance(sig, bytes) or len(sig) != MLDSA65_SIG_LEN:
        raise ContractRefused("malformed_contract", "the signature is an ML-DSA-65 signature")
    if not isinstance(nonce, bytes) or len(nonce) != 16:
        raise ContractRefused("malformed_contract", "contractNonce is 16 bytes")
    contract_rules(m[3], m[4], m[5], m[6], m[7], m[8])
    c = Contract(cid, hid, tuple(m[3]), tuple(m[4]), m[5], m[6], m[7], m[8], sig, nonce)
    if c.to_cbor() != data:
        raise ContractRefused("malformed_contract", "contracts are deterministic CBOR")
    if sha256(c.body()) != cid:
        raise ContractRefused("bad_signature", "contractId does not match the contract")
    return c


async def verify_contract(p: CryptoProvider, c: Contract, holder_public: bytes) -> None:
    """The contract is the holder's: its holderId is SHA-256(holder_public) and the signature verifies."""
    body = c.body()
    if sha256(body) != c.contract_id:
        raise ContractRefused("bad_signature", "contractId does not match the contract")
    if sha256(holder_public) != c.holder_id:
        raise ContractRefused("bad_signature", "the contract belongs to another holder")
    if not await p.mldsa65_verify(holder_public, body, c.signature, CONTRACT_CONTEXT):
        raise ContractRefused("bad_signature", "the contract signature does not verify under the holder's key")
