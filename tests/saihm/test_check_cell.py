"""``check_cell``: the one sequence of checks that the blind server runs on every pushed
cell and every device on every pulled one.  Each attack is refused at its own step, with
the stable code the server answers with; skipping the signature skips nothing else."""
from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import pytest

from ownmem.aperto.envelope import encode_envelope
from ownmem.crypto import cbor, provider, run_sync, sha256
from ownmem.errors import AuthenticationFailed
from ownmem.saihm.cell import CellRefused, CheckedCell, check_cell, make_cell, parse_cell, verify_cell
from ownmem.saihm.identity import Holder, holder_from_seed

P = provider()
OID, SCOPE = bytes(range(16)), bytes(range(16, 32))
SEALED = encode_envelope(OID, SCOPE, 2, b"an opaque COSE_Encrypt0: never decrypted here")


@pytest.fixture(scope="module")
def holder() -> Holder:
    return run_sync(holder_from_seed(P, b"\x01" * 32))


@pytest.fixture(scope="module")
def other() -> Holder:
    return run_sync(holder_from_seed(P, b"\x02" * 32))


def _cell(h: Holder, **kw: Any) -> bytes:
    args: dict[str, Any] = dict(xi=h.xi, holder_id=h.holder_id, kek_version=1, tier="STANDARD", cell_nonce=OID,
                                ciphertext=SEALED, timestamp=1747526400)
    args.update(kw)
    return run_sync(make_cell(P, **args)).to_cbor()


def _edited(data: bytes, **fields: Any) -> bytes:
    """The cell with some CBOR keys replaced after signing (k1 = cellId ... k8 = timestamp)."""
    m = cbor.decode(data)
    return cbor.encode({**m, **{int(k[1:]): v for k, v in fields.items()}})


def _check(data: bytes, h: Holder, *, signature: bool = True) -> CheckedCell:
    verify = functools.partial(P.mldsa65_verify, h.public) if signature else None
    return run_sync(check_cell(data, h.holder_id, verify_signature=verify))


def _refused(code: str, f: Callable[[], object]) -> None:
    with pytest.raises(CellRefused) as e:
        f()
    assert e.value.code == code, str(e.value)


def test_a_good_cell_passes_with_its_sealed_object(holder: Holder) -> None:
    data = _cell(holder)
    c = _check(data, holder)
    assert c.cell.to_cbor() == data and c.cell.holder_id == holder.holder_id
    assert (c.sealed.object_id, c.sealed.scope_id, c.sealed.format_version) == (OID, SCOPE, 2)
    assert c.sealed.encoded == SEALED and c.sealed.object_id == c.cell.cell_nonce


@pytest.mark.parametrize("attack,code", [
    ("truncated bytes", "malformed_cell"),
    ("not a cell map", "malformed_cell"),
    ("short signature", "malformed_cell"),
    ("cell of another holder", "wrong_holder"),
    ("cellId of other contents", "bad_cell_id"),
    ("ciphertext swapped after signing", "bad_cell_id"),
    ("kekVersion rewritten", "bad_cell_id"),
    ("timestamp rewritten", "bad_signature"),
    ("signature of another holder under this holderId", "bad_signature"),
    ("ciphertext that is not a sealed object", "malformed_cell"),
    ("sealed object moved under another cellNonce", "malformed_cell"),
])
def test_each_forgery_is_refused_at_its_step(holder: Holder, other: Holder, attack: str, code: str) -> None:
    good = _cell(holder)
    m = cbor.decode(good)
    forged = {
        "truncated bytes": lambda: good[:-5],
        "not a cell map": lambda: cbor.encode({1: m[1]}),
        "short signature": lambda: _edited(good, k7=m[7][:-1]),
        "cell of another holder": lambda: _cell(other),
        "cellId of other contents": lambda: _edited(good, k1=sha256(b"another cell")),
        "ciphertext swapped after signing": lambda: _edited(good, k6=encode_envelope(OID, SCOPE, 2, b"other")),
        "kekVersion rewritten": lambda: _edited(good, k3=2),
        "timestamp rewritten": lambda: _edited(good, k8=m[8] + 1),
        "signature of another holder under this holderId": lambda: _cell(holder, xi=other.xi),
        "ciphertext that is not a sealed object": lambda: _cell(holder, ciphertext=b"opaque but not sealed"),
        "sealed object moved under another cellNonce": lambda: _cell(holder, cell_nonce=os.urandom(16)),
    }[attack]()
    _refused(code, lambda: _check(forged, holder))


def test_without_the_signature_step_every_other_step_still_runs(holder: Holder, other: Holder) -> None:
    """A device pulling skips only step 4 (it authenticates the object when it opens it)."""
    good = _cell(holder)
    m = cbor.decode(good)
    assert _check(_edited(good, k7=bytes(len(m[7]))), holder, signature=False).sealed.object_id == OID
    _refused("malformed_cell", lambda: _check(good[:-1], holder, signature=False))
    _refused("wrong_holder", lambda: _check(_cell(other), holder, signature=False))
    _refused("bad_cell_id", lambda: _check(_edited(good, k3=7), holder, signature=False))
    _refused("malformed_cell", lambda: _check(_cell(holder, cell_nonce=bytes(16)), holder, signature=False))


def test_skipping_the_signature_is_never_a_default(holder: Holder) -> None:
    with pytest.raises(TypeError):
        # the missing keyword is the point: the call itself raises, no coroutine is made
        check_cell(_cell(holder), holder.holder_id)  # type: ignore[call-arg, unused-coroutine]


def test_steps_run_in_the_spec_order(holder: Holder, other: Holder) -> None:
    """Another holder's cell with a rewritten cellId is refused for its holder (step 2), and a
    cell with a bad cellId is refused before its signature is checked (step 3, not 4)."""
    calls: list[bytes] = []

    async def verify(message: bytes, signature: bytes, context: bytes) -> bool:
        calls.append(message)
        return True

    _refused("wrong_holder", lambda: run_sync(check_cell(_edited(_cell(other), k1=bytes(32)), holder.holder_id,
                                                         verify_signature=verify)))
    _refused("bad_cell_id", lambda: run_sync(check_cell(_edited(_cell(holder), k3=9), holder.holder_id,
                                                        verify_signature=verify)))
    assert calls == []


def test_verify_cell_is_the_same_checks_for_any_ciphertext(holder: Holder, other: Holder) -> None:
    """SAIHM's own primitive (steps 2-4, the provider's ML-DSA-65) accepts a raw-ciphertext
    cell, as in the spec's example, and refuses what those steps refuse."""
    raw = parse_cell(_cell(holder, ciphertext=b"raw AEAD output, no sealed object"))
    run_sync(verify_cell(P, raw, holder.public))
    with pytest.raises(AuthenticationFailed):
        run_sync(verify_cell(P, parse_cell(_cell(other)), holder.public))
    with pytest.raises(AuthenticationFailed):
        run_sync(verify_cell(P, raw, other.public))
