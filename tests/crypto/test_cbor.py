"""Deterministic CBOR (RFC 8949 §4.2.1, "Core Deterministic Encoding Requirements").

Expected bytes are the RFC 8949 Appendix A examples, written out by hand; the
properties are the round trips ``decode(encode(x)) == x`` and, for canonical
input, ``encode(decode(b)) == b``; the refusals are the strict-decoding and
work-capping rules of ``ownmem.crypto.cbor``.  cbor2 (a dependency of the
reference implementation) is the independent encoder we must agree with.
"""
from __future__ import annotations

import math
import struct
import tracemalloc
from typing import Any

import cbor2
import pytest
from hypothesis import given, settings, strategies as st

from ownmem.crypto import cbor
from ownmem.crypto.cbor import MAX_DEPTH, Raw, Tag
from ownmem.errors import LimitExceeded, MalformedInput

h = bytes.fromhex
CBOR_SETTINGS = settings(max_examples=300, deadline=None, database=None)

# ---------------------------------------------------------------- RFC 8949 Appendix A

APPENDIX_A: list[tuple[Any, str]] = [
    # unsigned integers, including every head-size boundary
    (0, "00"), (1, "01"), (10, "0a"), (23, "17"), (24, "1818"), (25, "1819"), (100, "1864"),
    (255, "18ff"), (256, "190100"), (1000, "1903e8"), (65535, "19ffff"), (65536, "1a00010000"),
    (1000000, "1a000f4240"), (2**32 - 1, "1affffffff"), (2**32, "1b0000000100000000"),
    (1000000000000, "1b000000e8d4a51000"), (18446744073709551615, "1bffffffffffffffff"),
    # negative integers
    (-1, "20"), (-10, "29"), (-24, "37"), (-25, "3818"), (-100, "3863"), (-256, "38ff"),
    (-257, "390100"), (-1000, "3903e7"), (-(2**32), "3affffffff"),
    (-18446744073709551616, "3bffffffffffffffff"),
    # floats: the shortest of half / single / double that is exact
    (0.0, "f90000"), (-0.0, "f98000"), (1.0, "f93c00"), (1.1, "fb3ff199999999999a"),
    (1.5, "f93e00"), (65504.0, "f97bff"), (100000.0, "fa47c35000"),
    (3.4028234663852886e38, "fa7f7fffff"), (1.0e300, "fb7e37e43c8800759c"),
    (5.960464477539063e-8, "f90001"), (0.00006103515625, "f90400"), (-4.0, "f9c400"),
    (-4.1, "fbc010666666666666"), (float("inf"), "f97c00"), (float("-inf"), "f9fc00"),
    (0.9, "fb3feccccccccccccd"), (42.0, "f95140"), (65505.0, "fa477fe100"),
    # simple values
    (False, "f4"), (True, "f5"), (None, "f6"),
    # byte and text strings
    (b"", "40"), (h("01020304"), "4401020304"), ("", "60"), ("a", "6161"),
    ("IETF", "6449455446"), ('"\\', "62225c"), ("\u00fc", "62c3bc"), ("\u6c34", "63e6b0b4"),
    ("\U00010151", "64f0908591"),
    ("a" * 23, "77" + "61" * 23), ("a" * 24, "7818" + "61" * 24),
    (b"\x00" * 255, "58ff" + "00" * 255), (b"\x00" * 256, "590100" + "00" * 256),
    # arrays and maps, nested
    ([], "80"), ([1, 2, 3], "83010203"), ([1, [2, 3], [4, 5]], "8301820203820405"),
    (list(range(1, 26)), "98190102030405060708090a0b0c0d0e0f101112131415161718181819"),
    ({}, "a0"), ({1: 2, 3: 4}, "a201020304"), ({"a": 1, "b": [2, 3]}, "a26161016162820203"),
    (["a", {"b": "c"}], "826161a161626163"),
    ({"a": "A", "b": "B", "c": "C", "d": "D", "e": "E"},
     "a56161614161626142616361436164614461656145"),
    # tags (ownmem never tags times, but tags must encode)
    (Tag(1, 1363896240), "c11a514b67b0"), (Tag(24, h("6449455446")), "d818456449455446"),
    (Tag(32, "http://www.example.com"), "d82076687474703a2f2f7777772e6578616d706c652e636f6d"),
]


def _same(a: Any, b: Any) -> bool:
    """Equality that also distinguishes -0.0 from 0.0 and int from float."""
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack(">d", a) == struct.pack(">d", b) or (math.isnan(a) and math.isnan(b))
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, Tag):
        return a.number == b.number and _same(a.value, b.value)
    return bool(a == b)


@pytest.mark.parametrize(("value", "expected"), APPENDIX_A, ids=[e[:24] for _, e in APPENDIX_A])
def test_encode_appendix_a(value: Any, expected: str) -> None:
    assert cbor.encode(value).hex() == expected


@pytest.mark.parametrize(("value", "encoded"), APPENDIX_A, ids=[e[:24] for _, e in APPENDIX_A])
def test_decode_appendix_a(value: Any, encoded: str) -> None:
    assert _same(cbor.decode(h(encoded)), value)


def test_nan_is_canonical_half() -> None:
    assert cbor.encode(float("nan")).hex() == "f97e00"
    # any NaN payload, either sign, encodes as the one canonical NaN
    for bits in ("7ff0000000000001", "fff8000000000000", "7fffffffffffffff"):
        assert cbor.encode(struct.unpack(">d", h(bits))[0]).hex() == "f97e00"
    assert math.isnan(cbor.decode(h("f97e00")))


def test_integers_are_never_tagged_and_never_floats() -> None:
    """Times are bare unsigned integers (draft-02 §3), never tag 1 or a float."""
    assert cbor.encode(1750000000).hex() == "1a684ee180"
    assert cbor.encode({7: {1: 1750000000}}).hex() == "a107a1011a684ee180"
    assert cbor.encode(2.0).hex() == "f94000" and cbor.encode(2).hex() == "02"
    assert type(cbor.decode(h("1a684ee180"))) is int


def test_tuples_bytearrays_and_raw() -> None:
    assert cbor.encode((1, 2)) == cbor.encode([1, 2])
    assert cbor.encode(bytearray(b"ab")) == cbor.encode(b"ab") == h("426162")
    assert cbor.encode(memoryview(b"ab")) == h("426162")
    # Raw carries an encoded item through verbatim, even a non-shortest one
    assert cbor.encode([Raw(h("1800")), 1]).hex() == "82180001"


def test_encode_refuses_what_cbor_cannot_carry() -> None:
    with pytest.raises(MalformedInput):
        cbor.encode(2**64)
    with pytest.raises(MalformedInput):
        cbor.encode(-(2**64) - 1)
    with pytest.raises(TypeError):
        cbor.encode({1, 2})
    with pytest.raises(TypeError):
        cbor.encode(object())


# ---------------------------------------------------------------- map key order

def test_map_keys_sorted_bytewise_by_encoding() -> None:
    """§4.2.1: keys sorted by the bytewise lexicographic order of their encodings:
    01 < 0a < 1864 < 20 < 617a < 626161."""
    m = {10: 0, 1: 1, 100: 2, -1: 3, "z": 4, "aa": 5}
    assert cbor.encode(m).hex() == "a6" "0101" "0a00" "186402" "2003" "617a04" "62616105"


def test_map_order_ignores_insertion_order() -> None:
    a = {"b": 1, "a": 2, 3: 3, b"\x00": 4}
    b = dict(reversed(list(a.items())))
    assert cbor.encode(a) == cbor.encode(b)
    assert cbor.encode({2: 0, 1: 0}).hex() == "a201000200"


def test_map_order_is_rfc8949_not_rfc7049_length_first() -> None:
    """Deliberate divergence from cbor2's canonical=True, which sorts length first
    (RFC 7049 §3.9).  The two agree whenever a map's keys share one major type,
    which holds for every map ApertoMemory defines; they differ across types."""
    m = {100: 0, -1: 0}
    assert cbor.encode(m).hex() == "a2" "186400" "2000"            # 0x18 < 0x20
    assert cbor2.dumps(m, canonical=True).hex() == "a2" "2000" "186400"   # shorter first


# ---------------------------------------------------------------- decode refusals

@pytest.mark.parametrize("encoded", [
    "", "18", "19", "1901", "1a000100", "1b00000000000000", "38", "f9", "f93c", "fa47c350",
    "fb3ff1999999", "41", "4201", "6261", "7818", "81", "830102", "a1", "a101", "a20102",
    "c1", "d818", "5801",
])
def test_truncated_is_malformed(encoded: str) -> None:
    with pytest.raises(MalformedInput):
        cbor.decode(h(encoded))


def test_every_proper_prefix_is_malformed() -> None:
    data = cbor.encode({1: [b"\x00" * 30, "text", -300, 1.1, {"k": None}], 2: Tag(5, 0.9)})
    for n in range(len(data)):
        with pytest.raises(MalformedInput):
            cbor.decode(data[:n])


@pytest.mark.parametrize("encoded", ["0000", "a0ff", "800100", "f600", "6161" "61"])
def test_trailing_bytes_are_malformed(encoded: str) -> None:
    with pytest.raises(MalformedInput):
        cbor.decode(h(encoded))


@pytest.mark.parametrize("encoded", [
    "5f42010243030405ff",                    # indefinite byte string
    "7f657374726561646d696e67ff",            # indefinite text string
    "9fff", "9f018202039f0405ffff",          # indefinite arrays
    "bf61610161629f0203ffff",                # indefinite map
    "ff",                                    # a lone "break"
    "1c", "3d", "5e", "7e", "9c", "bd", "de",  # reserved additional information 28-30
])
def test_indefinite_and_reserved_lengths_are_malformed(encoded: str) -> None:
    with pytest.raises(MalformedInput):
        cbor.decode(h(encoded))


@pytest.mark.parametrize("encoded", [
    "a201000101",                            # {1: 0, 1: 1}
    "a2616101616102",                        # {"a": 1, "a": 2}
    "a3010002000100",                        # 1 ... then 1 again after another key
    "a2410000410001",                        # {h'00': 0, h'00': 1}
])
def test_duplicate_map_keys_are_malformed(encoded: str) -> None:
    with pytest.raises(MalformedInput):
        cbor.decode(h(encoded))


@pytest.mark.parametrize("encoded", ["62c328", "61ff", "63eda080", "62c0af", "64f4908080"])
def test_invalid_utf8_is_malformed(encoded: str) -> None:
    with pytest.raises(MalformedInput):
        cbor.decode(h(encoded))


@pytest.mark.parametrize("encoded", [
    "a1f93c0000",    # float key
    "a1800000",      # array key
    "a1a00000",      # map key
    "a1f600",        # null key
    "a1c10100",      # tagged key
    "a1f500",        # boolean key: must not be confused with the integer 1
])
def test_unsupported_map_key_types_are_malformed(encoded: str) -> None:
    with pytest.raises(MalformedInput):
        cbor.decode(h(encoded))


def test_boolean_and_integer_keys_are_not_conflated() -> None:
    """``True == 1`` in Python; in CBOR they are different keys.  A map keyed by
    ``true`` must not be read as if it had key 1."""
    with pytest.raises(MalformedInput):
        cbor.decode(h("a2" "0100" "f501"))
    with pytest.raises(MalformedInput):
        cbor.decode_map_raw(h("a1f500"))


@pytest.mark.parametrize("encoded", ["f7", "f0", "f818", "f8ff", "fc", "fd", "fe"])
def test_unsupported_simple_values_are_malformed(encoded: str) -> None:
    with pytest.raises(MalformedInput):
        cbor.decode(h(encoded))


@pytest.mark.parametrize("opener", ["81", "a101", "c6"])
def test_nesting_is_capped_at_max_depth(opener: str) -> None:
    at_limit = h(opener * MAX_DEPTH + "00")
    assert cbor.decode(at_limit) is not None
    with pytest.raises(LimitExceeded):
        cbor.decode(h(opener * (MAX_DEPTH + 1) + "00"))
    with pytest.raises(LimitExceeded):                    # far past the limit: no RecursionError
        cbor.decode(h(opener * 100_000 + "00"))


def test_item_count_is_capped() -> None:
    data = cbor.encode([0] * 100)
    assert cbor.decode(data, max_items=101) == [0] * 100
    with pytest.raises(LimitExceeded):
        cbor.decode(data, max_items=100)


@pytest.mark.parametrize("encoded", [
    "5bffffffffffffffff", "7bffffffffffffffff", "9bffffffffffffffff", "bbffffffffffffffff",
    "5a7fffffff00", "7a7fffffff00", "9a7fffffff00", "ba7fffffff0000",
    "5b0000000100000000", "9b000000010000000001",
])
def test_huge_declared_lengths_fail_without_allocation(encoded: str) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(MalformedInput):
            cbor.decode(h(encoded))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_decode_refuses_non_bytes() -> None:
    with pytest.raises(MalformedInput):
        cbor.decode("a0")  # type: ignore[arg-type]  # a str where bytes belong, on purpose


# ---------------------------------------------------------------- decode_map_raw

def test_decode_map_raw_keeps_value_bytes() -> None:
    # {1: 0 as 18 00, 2: 1 as 19 0001, 3: {2: 0, 1: 0} out of order, 4: "x"}
    data = h("a4" "01" "1800" "02" "190001" "03" "a202000100" "04" "6178")
    raw = cbor.decode_map_raw(data)
    assert raw[1] == (0, h("1800"))
    assert raw[2] == (1, h("190001"))
    assert raw[3] == ({1: 0, 2: 0}, h("a202000100"))
    assert raw[4] == ("x", h("6178"))
    # re-emitted through Raw, every value survives byte for byte
    assert cbor.encode({k: Raw(r) for k, (_, r) in raw.items()}) == data
    # whereas a plain re-encode would normalise them
    assert cbor.encode(cbor.decode(data)) != data


@pytest.mark.parametrize("encoded", [
    "", "80", "00", "a1", "a101", "a2010001 01".replace(" ", ""), "a10000" "00", "bf0000ff",
    "a1" "01" "81" * (MAX_DEPTH + 1) + "00",
])
def test_decode_map_raw_refusals(encoded: str) -> None:
    with pytest.raises(MalformedInput):
        cbor.decode_map_raw(h(encoded))


# ---------------------------------------------------------------- properties

_ints = st.integers(min_value=-(2**64), max_value=2**64 - 1)
_scalars = (st.none() | st.booleans() | _ints | st.floats(allow_nan=False)
            | st.text(max_size=40) | st.binary(max_size=40))
_keys = _ints | st.text(max_size=12) | st.binary(max_size=12)
values = st.recursive(
    _scalars,
    lambda inner: (st.lists(inner, max_size=6)
                   | st.dictionaries(_keys, inner, max_size=6)
                   | st.builds(Tag, st.integers(min_value=0, max_value=2**64 - 1), inner)),
    max_leaves=30,
)


@CBOR_SETTINGS
@given(values)
def test_decode_encode_roundtrip(x: Any) -> None:
    assert _same(cbor.decode(cbor.encode(x)), x)


@CBOR_SETTINGS
@given(values)
def test_encode_decode_roundtrip_on_canonical_bytes(x: Any) -> None:
    b = cbor.encode(x)
    assert cbor.encode(cbor.decode(b)) == b


@CBOR_SETTINGS
@given(st.floats(allow_nan=False))
def test_floats_take_the_shortest_exact_width(x: float) -> None:
    b = cbor.encode(x)
    assert struct.pack(">d", cbor.decode(b)) == struct.pack(">d", x)
    widths = {0xF9: ">e", 0xFA: ">f", 0xFB: ">d"}
    chosen = list(widths).index(b[0])
    for head in list(widths)[:chosen]:        # no narrower width holds x exactly
        try:
            narrow = struct.unpack(widths[head], struct.pack(widths[head], x))[0]
        except OverflowError:
            continue
        assert narrow != x or struct.pack(">d", narrow) != struct.pack(">d", x)


@CBOR_SETTINGS
@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_refuse(data: bytes) -> None:
    """decode is total: a value or MalformedInput; a decoded value re-encodes to a fixed point."""
    try:
        x = cbor.decode(data)
    except MalformedInput:
        return
    b = cbor.encode(x)
    assert cbor.encode(cbor.decode(b)) == b


# cbor2 sorts map keys length-first (see test_map_order_is_rfc8949_not_rfc7049_length_first);
# the orders coincide when all keys of a map share a major type, so the generated maps do.
_same_type_keys = st.sampled_from([
    st.integers(min_value=0, max_value=2**64 - 1),
    st.integers(min_value=-(2**64), max_value=-1),
    st.text(max_size=30),
    st.binary(max_size=30),
])
_cbor2_scalars = (st.none() | st.booleans() | _ints | st.floats()
                  | st.text(max_size=40) | st.binary(max_size=300))
cbor2_values = st.recursive(
    _cbor2_scalars,
    lambda inner: (st.lists(inner, max_size=6)
                   | _same_type_keys.flatmap(lambda k: st.dictionaries(k, inner, max_size=6))),
    max_leaves=30,
)


@CBOR_SETTINGS
@given(cbor2_values)
def test_agrees_with_cbor2_canonical(x: Any) -> None:
    assert cbor.encode(x) == cbor2.dumps(x, canonical=True)


@CBOR_SETTINGS
@given(cbor2_values)
def test_decodes_what_cbor2_encodes(x: Any) -> None:
    assert _same(cbor.decode(cbor2.dumps(x, canonical=True)), x)
