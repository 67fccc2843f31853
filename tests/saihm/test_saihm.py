"""SAIHM holder identity, cells and receipts: the spec's "Example values" reproduced in full,
and cross-checks between the production ML-DSA-65 provider and an independent FIPS 204
implementation (dilithium-py)."""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest
from dilithium_py.ml_dsa import ML_DSA_65

from ownmem.crypto import provider, run_sync
from ownmem.errors import AuthenticationFailed, MalformedInput
from ownmem.saihm.cell import CELL_CONTEXT, Cell, make_cell, parse_cell, signed_message, verify_cell
from ownmem.saihm.identity import Holder, holder_from_master, holder_from_seed, identity_key
from ownmem.saihm.receipt import RECEIPT_CONTEXT, make_receipt, parse_receipt, verify_receipt

P = provider()

# SAIHM "Example values" (printed at the end of tests/vectors/specs/saihm-custodial.txt)
SEED_LABEL = b"SAIHM-TEST-VECTOR-001-DO-NOT-USE-IN-PRODUCTION"
HOLDER_SEED = "f068b8db8484d33bdbedd154bf5bf28e11fba330b79469e23595d6f738d7f5c6"
IDENTITY_KEY = ("fdf786da8cb1f074393f9ad6dec1671e08085540e95c8463c9f2e15f437bbc5a"
                "2c267aeaf355e79d8968cc21846cdff7e16f498437de3d6b1fd290703eeed9c2")
HOLDER_ID = "ab4f746fd1520d2736854559d6751969ae9127f5dbc607d7298acbf1afb1f588"
CELL_NONCE = bytes.fromhex("25bd74b827789faacad8ffb7593c2359")
DEK = bytes.fromhex("a1e54f730c6c7a1048ae436c9d2b179821c6eddd7841f41e36215285f3ffd07a")
PLAINTEXT = bytes.fromhex("48656c6c6f2c20534149484d2e205468697320697320612074657374206d656d"
                          "6f72792063656c6c2e")
CIPHERTEXT = ("595b0b9f77a8d95f29c5affa151bbcc18fdc3f7e5223792627919ee2d52f2bf2"
              "4933c35de4c1755559bee818ef54b48a388bcdd2e4a30fbde8")
CELL_ID = "d851960a5b7754c5884c96bef5d615e666c8ad006e4ceebe028cd85aae8e7c2f"
TIMESTAMP = 1747526400
SIG_PREFIX = "8b7466cd59b30c38cdacdf2a55fff14ba39dff905ad20a3fdffe9018f5bacf38"


@pytest.fixture(scope="module")
def holder() -> Holder:
    seed = hashlib.sha256(SEED_LABEL).digest()
    assert seed.hex() == HOLDER_SEED
    return run_sync(holder_from_seed(P, seed))


@pytest.fixture(scope="module")
def example_cell(holder: Holder) -> Cell:
    ct = run_sync(P.aes_gcm_encrypt(DEK, CELL_NONCE[:12], PLAINTEXT, b""))
    return run_sync(make_cell(P, xi=holder.xi, holder_id=holder.holder_id, kek_version=1, tier="STANDARD",
                              cell_nonce=CELL_NONCE, ciphertext=ct, timestamp=TIMESTAMP, deterministic=True))


def test_identity_key_and_holder_id_reproduced(holder: Holder) -> None:
    assert run_sync(identity_key(P, bytes.fromhex(HOLDER_SEED))).hex() == IDENTITY_KEY
    assert holder.holder_id.hex() == HOLDER_ID
    assert len(holder.public) == 1952


def test_example_cell_reproduced(example_cell: Cell) -> None:
    assert example_cell.ciphertext.hex() == CIPHERTEXT
    assert example_cell.cell_id.hex() == CELL_ID
    assert len(example_cell.signature) == 3309
    assert example_cell.signature[:32].hex() == SIG_PREFIX


def test_example_cell_verifies_and_round_trips(holder: Holder, example_cell: Cell) -> None:
    run_sync(verify_cell(P, example_cell, holder.public))
    assert parse_cell(example_cell.to_cbor()) == example_cell


def test_production_signature_verifies_under_independent_implementation(holder: Holder, example_cell: Cell) -> None:
    hedged = run_sync(P.mldsa65_sign(holder.xi, b"cell message", CELL_CONTEXT))
    assert ML_DSA_65.verify(holder.public, b"cell message", hedged, ctx=CELL_CONTEXT)
    assert not ML_DSA_65.verify(holder.public, b"cell message", hedged, ctx=RECEIPT_CONTEXT)


def test_independent_signature_verifies_under_production_provider(holder: Holder) -> None:
    pk, sk = ML_DSA_65.key_derive(holder.xi)
    assert pk == holder.public
    sig = ML_DSA_65.sign(sk, b"receipt body", ctx=RECEIPT_CONTEXT)
    assert run_sync(P.mldsa65_verify(holder.public, b"receipt body", sig, RECEIPT_CONTEXT))
    assert not run_sync(P.mldsa65_verify(holder.public, b"receipt body!", sig, RECEIPT_CONTEXT))


def test_holder_key_derives_from_master_with_its_own_info() -> None:
    a = run_sync(holder_from_master(P, b"\x01" * 32))
    b = run_sync(holder_from_master(P, b"\x02" * 32))
    assert a.holder_id != b.holder_id and len(a.holder_id) == 32
    assert "xi" not in repr(a) and a.xi.hex() not in repr(a)


@pytest.mark.parametrize("field,value", [
    ("cell_id", bytes(32)), ("kek_version", 2), ("timestamp", TIMESTAMP + 1),
    ("ciphertext", bytes.fromhex(CIPHERTEXT)[:-1] + b"\x00"), ("cell_nonce", bytes(16)),
])
def test_forged_cell_is_refused(holder: Holder, example_cell: Cell, field: str, value: Any) -> None:
    from dataclasses import replace

    with pytest.raises(AuthenticationFailed):
        run_sync(verify_cell(P, replace(example_cell, **{field: value}), holder.public))


def test_cell_of_another_holder_is_refused(example_cell: Cell) -> None:
    other = run_sync(holder_from_seed(P, b"\x09" * 32))
    with pytest.raises(AuthenticationFailed):
        run_sync(verify_cell(P, example_cell, other.public))


def test_signed_message_layout() -> None:
    msg = signed_message(bytes(range(32)), bytes(range(32, 64)), 1, TIMESTAMP)
    assert msg == bytes(range(64)) + b"\x00\x00\x00\x01" + TIMESTAMP.to_bytes(8, "big")


@pytest.mark.parametrize("mutate", [
    lambda b: b[:-1], lambda b: b + b"\x00", lambda b: b"\xa0", lambda b: b"\x00" * 10,
])
def test_malformed_cell_bytes_refused(example_cell: Cell, mutate: Callable[[bytes], bytes]) -> None:
    with pytest.raises(MalformedInput):
        parse_cell(mutate(example_cell.to_cbor()))


def test_key_receipt_round_trip_and_forgery(holder: Holder) -> None:
    r = run_sync(make_receipt(P, xi=holder.xi, holder_id=holder.holder_id, operation="KEY",
                              subject_id=holder.holder_id, timestamp=TIMESTAMP, detail=holder.public))
    parsed = parse_receipt(r.to_cbor())
    assert parsed == r and parsed.detail == holder.public
    run_sync(verify_receipt(P, parsed, holder.public))
    from dataclasses import replace

    for forged in (replace(r, operation="FORGET"), replace(r, timestamp=r.timestamp + 1),
                   replace(r, subject_id=bytes(32))):
        with pytest.raises(AuthenticationFailed):
            run_sync(verify_receipt(P, forged, holder.public))
