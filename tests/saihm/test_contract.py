"""SAIHM sharing contracts (SAIHM "Sharing contracts", "Signed messages", "Wire formats"): the
map, its deterministic encoding cross-checked with an independent CBOR library (cbor2), the
contractId and signature, every MUST-reject rule; the share key that carries a DEK to a
grantee (ownmem docs/decisions.md "Sharing between people"); the grantee state machine the
server applies."""
from __future__ import annotations

import hashlib
from typing import Any

import cbor2
import pytest

from ownmem.aperto import keys as aperto_keys
from ownmem.crypto import cbor, provider, random_bytes, run_sync
from ownmem.errors import AuthenticationFailed
from ownmem.saihm.contract import (
    CONTRACT_CONTEXT,
    ContractRefused,
    contract_rules,
    make_contract,
    parse_contract,
    verify_contract,
)
from ownmem.saihm.identity import holder_from_seed
from ownmem.vault.sharing import ShareRefused, unwrap_share_dek, wrap_share_dek
from server.storage.shares import transition

P = provider()
TS = 1747526400                      # the spec's example timestamp
HOLDER = run_sync(holder_from_seed(P, hashlib.sha256(b"contract tests: holder").digest()))
OTHER = run_sync(holder_from_seed(P, hashlib.sha256(b"contract tests: someone else").digest()))
G1, G2 = hashlib.sha256(b"grantee 1").digest(), hashlib.sha256(b"grantee 2").digest()
CELL1, CELL2 = hashlib.sha256(b"cell 1").digest(), hashlib.sha256(b"cell 2").digest()


def make(**kw: Any) -> Any:
    args: dict[str, Any] = {"xi": HOLDER.xi, "holder_id": HOLDER.holder_id, "grantee_ids": [G1], "shard_ids": [CELL1],
                            "mode": "TEMPORARY", "scope": "read", "expires_at": TS + 86400, "timestamp": TS}
    args.update(kw)
    return run_sync(make_contract(P, **args))


def code_of(fn: Any) -> str:
    with pytest.raises(ContractRefused) as e:
        fn()
    return e.value.code


def test_the_spec_example_shape_round_trips_and_matches_an_independent_encoder() -> None:
    nonce = bytes(range(16))
    c = make(grantee_ids=[G1, G2], shard_ids=[CELL1, CELL2], nonce=nonce)
    # The signed bytes: the map without keys 1 and 9, key 10 included, deterministic CBOR;
    # cbor2's canonical mode is RFC 8949 section 4.2.1's core deterministic encoding.
    body = cbor2.dumps({2: HOLDER.holder_id, 3: [G1, G2], 4: [CELL1, CELL2], 5: "TEMPORARY", 6: "read",
                        7: TS + 86400, 8: TS, 10: nonce}, canonical=True)
    assert c.body() == body
    assert c.contract_id == hashlib.sha256(body).digest()
    full = cbor2.loads(c.to_cbor())
    assert sorted(full) == list(range(1, 11)) and full[1] == c.contract_id and full[9] == c.signature
    assert cbor2.dumps(full, canonical=True) == c.to_cbor()
    again = parse_contract(c.to_cbor())
    assert again == c
    run_sync(verify_contract(P, again, HOLDER.public))
    assert run_sync(P.mldsa65_verify(HOLDER.public, body, c.signature, CONTRACT_CONTEXT))
    # another context does not verify: a contract signature is no receipt's or cell's
    assert not run_sync(P.mldsa65_verify(HOLDER.public, body, c.signature, b"SAIHM-RECEIPT-v1"))


def test_two_contracts_of_the_same_terms_have_different_ids() -> None:
    assert make().contract_id != make().contract_id        # contractNonce: 16 random bytes


@pytest.mark.parametrize("mode, expires, ok", [
    ("TEMPORARY", TS + 86400, True),        # exactly 24 h: "no later than the timestamp plus 86400"
    ("TEMPORARY", TS + 1, True),
    ("TEMPORARY", TS + 86401, False),       # beyond 24 h
    ("TEMPORARY", TS, False),               # "later than the contract timestamp"
    ("TEMPORARY", TS - 1, False),
    ("TEMPORARY", 0, False),                # "the sentinel 0 is not permitted"
    ("PERMANENT", 0, True),
    ("PERMANENT", TS + 10, False),          # "MUST be the sentinel 0"
    ("SYNDICATE", 0, True),
    ("SYNDICATE", TS + 10 * 86400, True),   # no 24 h bound
    ("SYNDICATE", TS, False),
])
def test_mode_expiry_rules(mode: str, expires: int, ok: bool) -> None:
    if ok:
        c = make(mode=mode, expires_at=expires)
        assert parse_contract(c.to_cbor()).expires_at == expires
    else:
        assert code_of(lambda: make(mode=mode, expires_at=expires)) == "invalid_expiry"
        assert code_of(lambda: parse_contract(_forged(mode=mode, expires=expires))) == "invalid_expiry"


def _forged(*, grantees: Any = None, shards: Any = None, mode: Any = "PERMANENT", scope: Any = "read",
            expires: Any = 0, ts: Any = TS, extra: dict[int, Any] | None = None, drop: int | None = None) -> bytes:
    """A signed contract map of any content, bypassing make_contract's refusals (an attacker's)."""
    body: dict[int, Any] = {2: HOLDER.holder_id, 3: [G1] if grantees is None else grantees,
                            4: [CELL1] if shards is None else shards, 5: mode, 6: scope, 7: expires, 8: ts,
                            10: b"\x01" * 16}
    raw = cbor.encode(body)
    m = {**body, 1: hashlib.sha256(raw).digest(), 9: run_sync(P.mldsa65_sign(HOLDER.xi, raw, CONTRACT_CONTEXT)),
         **(extra or {})}
    if drop is not None:
        del m[drop]
    return cbor.encode(m)


@pytest.mark.parametrize("label, kw, code", [
    ("no grantee", {"grantees": []}, "invalid_grantee"),
    ("a 31-byte grantee", {"grantees": [G1[:31]]}, "invalid_grantee"),
    ("a 33-byte grantee", {"grantees": [G1 + b"\x00"]}, "invalid_grantee"),
    ("a grantee as text", {"grantees": [G1.hex()]}, "invalid_grantee"),
    ("a grantee twice", {"grantees": [G1, G2, G1]}, "invalid_grantee"),
    ("grantees not a list", {"grantees": G1}, "invalid_grantee"),
    ("no cell", {"shards": []}, "malformed_contract"),
    ("a short cellId", {"shards": [CELL1[:16]]}, "malformed_contract"),
    ("a cell twice", {"shards": [CELL1, CELL1]}, "malformed_contract"),
    ("scope write", {"scope": "write"}, "invalid_scope"),
    ("scope readwrite", {"scope": "readwrite"}, "invalid_scope"),
    ("scope admin", {"scope": "admin"}, "malformed_contract"),
    ("scope READ", {"scope": "READ"}, "malformed_contract"),
    ("mode lower case on the wire", {"mode": "permanent"}, "invalid_mode"),
    ("mode unknown", {"mode": "FOREVER"}, "invalid_mode"),
    ("a negative expiry", {"expires": -1}, "invalid_expiry"),
    ("a float timestamp", {"ts": float(TS)}, "malformed_contract"),
    ("a boolean expiry", {"mode": "SYNDICATE", "expires": True}, "invalid_expiry"),
    ("an extra key", {"extra": {11: 0}}, "malformed_contract"),
    ("no nonce", {"drop": 10}, "malformed_contract"),
    ("no signature", {"drop": 9}, "malformed_contract"),
    ("a short nonce", {"extra": {10: b"\x01" * 15}}, "malformed_contract"),
])
def test_parse_refuses(label: str, kw: dict[str, Any], code: str) -> None:
    assert code_of(lambda: parse_contract(_forged(**kw))) == code, label


def test_make_refuses_what_parse_refuses() -> None:
    assert code_of(lambda: make(grantee_ids=[G1, G1])) == "invalid_grantee"
    assert code_of(lambda: make(grantee_ids=[])) == "invalid_grantee"
    assert code_of(lambda: make(shard_ids=[])) == "malformed_contract"
    assert code_of(lambda: make(scope="write")) == "invalid_scope"
    assert code_of(lambda: make(mode="PERMANENT", expires_at=TS + 1)) == "invalid_expiry"


def test_one_byte_form_only() -> None:
    c = make(mode="PERMANENT", expires_at=0)
    good = c.to_cbor()
    # the same map with the timestamp as a non-minimal (8-byte) integer: the same contract by
    # value, another byte string; refused, so the log and the server keep one form
    m = cbor2.loads(good)
    longer = good.replace(b"\x08\x1a" + TS.to_bytes(4, "big"), b"\x08\x1b" + TS.to_bytes(8, "big"))
    assert longer != good and cbor2.loads(longer) == m
    assert code_of(lambda: parse_contract(longer)) == "malformed_contract"
    # keys out of deterministic order
    unordered = cbor2.dumps(dict(sorted(m.items(), reverse=True)))
    assert code_of(lambda: parse_contract(unordered)) == "malformed_contract"
    assert code_of(lambda: parse_contract(b"\xff")) == "malformed_contract"
    assert code_of(lambda: parse_contract(cbor.encode([1, 2]))) == "malformed_contract"


def test_a_contract_whose_id_or_signature_does_not_match_is_refused() -> None:
    c = make()
    m = cbor2.loads(c.to_cbor())
    m[8] = TS + 1                                   # the terms changed, the id and signature kept
    assert code_of(lambda: parse_contract(cbor.encode(m))) == "bad_signature"
    raw = cbor.encode({k: v for k, v in m.items() if k not in (1, 9)})
    m[1] = hashlib.sha256(raw).digest()             # the id recomputed: the signature still fails
    moved = parse_contract(cbor.encode(m))
    assert code_of(lambda: run_sync(verify_contract(P, moved, HOLDER.public))) == "bad_signature"
    # another holder's key, and a contract presented as another holder's
    assert code_of(lambda: run_sync(verify_contract(P, c, OTHER.public))) == "bad_signature"
    sig = bytearray(c.signature)
    sig[100] ^= 1
    flipped = parse_contract(cbor.encode({**cbor2.loads(c.to_cbor()), 9: bytes(sig)}))
    assert code_of(lambda: run_sync(verify_contract(P, flipped, HOLDER.public))) == "bad_signature"


def test_contract_rules_is_a_pure_decision() -> None:
    contract_rules([G1], [CELL1], "PERMANENT", "read", 0, TS)
    with pytest.raises(ContractRefused):
        contract_rules([G1], [CELL1], "PERMANENT", "read", 0, -1)


# ---------------------------------------------------------------- the share key

def test_share_key_round_trip_and_binding() -> None:
    ident = run_sync(aperto_keys.identity_from_master(P, random_bytes(32)))
    other = run_sync(aperto_keys.identity_from_master(P, random_bytes(32)))
    dek, cid = random_bytes(32), random_bytes(32)
    key = run_sync(wrap_share_dek(P, dek, ident.ka_pub, cid, CELL1))
    assert len(key) == 72
    assert run_sync(unwrap_share_dek(P, key, ident, cid, CELL1)) == dek
    # moved to another cell or contract, unwrapped by another holder, altered: never the DEK
    for args in [(key, ident, cid, CELL2), (key, ident, random_bytes(32), CELL1), (key, other, cid, CELL1)]:
        with pytest.raises(AuthenticationFailed):
            run_sync(unwrap_share_dek(P, *args))
    bad = bytearray(key)
    bad[-1] ^= 1
    with pytest.raises(AuthenticationFailed):
        run_sync(unwrap_share_dek(P, bytes(bad), ident, cid, CELL1))
    with pytest.raises(ShareRefused):
        run_sync(unwrap_share_dek(P, key[:-1], ident, cid, CELL1))
    # fresh ephemeral keys: two wraps of one DEK differ
    assert run_sync(wrap_share_dek(P, dek, ident.ka_pub, cid, CELL1)) != key


# ---------------------------------------------------------------- the grantee's states (server)

@pytest.mark.parametrize("state, action, revoked, expired, to", [
    ("offered", "accept", False, False, "accepted"),
    ("accepted", "accept", False, False, "accepted"),     # a retry shows the outcome
    ("offered", "accept", True, False, None),             # revoked: nothing to accept
    ("offered", "accept", False, True, None),             # expired
    ("declined", "accept", False, False, None),           # declined is final
    ("withdrawn", "accept", False, False, None),          # so is withdrawn
    ("offered", "decline", False, False, "declined"),
    ("offered", "decline", True, False, "declined"),      # leaving is always possible
    ("declined", "decline", False, False, "declined"),
    ("accepted", "decline", False, False, None),          # an accepted contract is withdrawn, not declined
    ("accepted", "withdraw", False, False, "withdrawn"),
    ("accepted", "withdraw", True, True, "withdrawn"),
    ("withdrawn", "withdraw", False, False, "withdrawn"),
    ("offered", "withdraw", False, False, None),          # nothing accepted to withdraw
])
def test_grantee_transitions(state: str, action: str, revoked: bool, expired: bool, to: str | None) -> None:
    assert transition(state, action, revoked=revoked, expired=expired) == to
