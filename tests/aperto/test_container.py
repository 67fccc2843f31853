"""The `.amem` container (draft-02 §10 "Portable Export Container"): parse and build.

Properties pinned here:

* a container that cannot be read at all is ONE clean ``MalformedInput`` (§10: "a
  clean, single error rather than leak parser internals"), whatever the bytes;
* objects are kept as given, never judged by the parser (one bad object must not
  sink the container; the importer checks them one by one);
* ``build_container`` is deterministic: the same vault gives the same bytes, objects
  in ascending id order;
* round trip: ``parse(build(x)) == x`` and ``build(parse(b)) == b``.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ownmem.aperto.container import (
    EXPORT_VERSION,
    SIGNATURE_KEY,
    Container,
    ScopeEntry,
    VaultPublic,
    build_container,
    metadata_message,
    parse_container,
)
from ownmem.aperto.keys import WrappedKek, key_id
from ownmem.crypto import cbor
from ownmem.errors import LimitExceeded, MalformedInput
from ownmem.vault import Vault, export_vault

# ------------------------------------------------------------------ fixtures


def _rand(n: int, rng: random.Random) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(n))


def _sealed(oid: bytes, sid: bytes, body: bytes = b"ciphertext") -> bytes:
    """A structurally valid sealed-object envelope (the parser never decrypts)."""
    return cbor.encode({1: oid, 2: sid, 3: 2, 4: body})


def _meta(rng: random.Random, *, scopes: int = 2, keys: int = 2) -> VaultPublic:
    entries = {}
    for i in range(scopes):
        name = ["default", "work", "ünïcode", "personal/health"][i % 4] + ("" if i < 4 else str(i))
        entries[name] = ScopeEntry(name, _rand(16, rng), WrappedKek(_rand(40, rng), _rand(32, rng)))
    known = {}
    for _ in range(keys):
        pub = _rand(32, rng)
        known[key_id(pub)] = pub
    return VaultPublic(salt=_rand(16, rng), sign_pub=_rand(32, rng), ka_pub=_rand(32, rng),
                       scopes=entries, known_keys=known)


def _objects(meta: VaultPublic, n: int, rng: random.Random) -> list[tuple[bytes, bytes, bytes]]:
    sids = [s.scope_id for s in meta.scopes.values()]
    out = []
    for i in range(n):
        oid = _rand(16, rng)
        out.append((oid, _sealed(oid, sids[i % len(sids)], _rand(20 + i, rng)), _rand(40, rng)))
    return out


# a container's metadata, its objects (id, sealed bytes, wrapped key) and the container's bytes
Sample = tuple[VaultPublic, list[tuple[bytes, bytes, bytes]], bytes]
# the parts a container is built from: metadata, objects, a signature or none
Parts = tuple[VaultPublic, list[tuple[bytes, bytes, bytes]], bytes | None]


@pytest.fixture(scope="module")
def sample() -> Sample:
    rng = random.Random(1)
    meta = _meta(rng)
    objs = _objects(meta, 6, rng)
    return meta, objs, build_container(meta, objs, _rand(64, rng))


def _top(data: bytes) -> dict[Any, Any]:
    top = cbor.decode(data)
    assert isinstance(top, dict)
    return top


# ------------------------------------------------------------------ corrupt input: one clean error

INTERNALS = ("Error", "Traceback", "File ", "struct", "object has no attribute", "unpack",
             "index out of range", "codec", "<", "0x")


def assert_clean(e: pytest.ExceptionInfo[MalformedInput]) -> None:
    """A single, human-sized message that says the file is corrupt and nothing about the parser."""
    assert type(e.value) in (MalformedInput, LimitExceeded)
    msg = str(e.value)
    assert msg.startswith("corrupt .amem"), msg
    assert "\n" not in msg and len(msg) < 160, msg
    for leak in INTERNALS:
        assert leak not in msg, msg
    assert e.value.__cause__ is None   # no chained third-party exception to print


def _expect_corrupt(data: bytes) -> None:
    with pytest.raises(MalformedInput) as e:
        parse_container(data)
    assert_clean(e)


@pytest.mark.parametrize("data", [
    b"", b"\x00", b"\xff" * 8, b"not an amem file at all", b"\xa0",
    cbor.encode([1, 2, 3, 4]), cbor.encode("amem"), b"\x9f\x01\xff",   # indefinite array
    b"\x81" * 100 + b"\x00",                                            # nesting bomb
    b"\x5b\xff\xff\xff\xff\xff\xff\xff\xff",                            # 2^64-byte string claim
    b"\xa5\x01\x01",                                                    # 5-pair map, 1 pair given
], ids=lambda d: d[:12].hex() or "empty")
def test_garbage_is_one_clean_error(data: bytes) -> None:
    _expect_corrupt(data)


def test_random_bytes_are_one_clean_error() -> None:
    rng = random.Random(7)
    for n in list(range(1, 64)) + [256, 4096]:
        _expect_corrupt(_rand(n, rng))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_never_raise_anything_but_malformed(data: bytes) -> None:
    try:
        parse_container(data)
    except MalformedInput as e:
        assert str(e).startswith("corrupt .amem")


def test_every_truncation_is_one_clean_error(sample: Sample) -> None:
    _, _, data = sample
    for cut in range(len(data)):
        _expect_corrupt(data[:cut])


def test_trailing_bytes_are_refused(sample: Sample) -> None:
    _expect_corrupt(sample[2] + b"\x00")


def test_every_single_byte_flip_parses_or_is_one_clean_error(sample: Sample) -> None:
    _, _, data = sample
    for i in range(len(data)):
        for bit in (0x01, 0x80):
            mutated = data[:i] + bytes([data[i] ^ bit]) + data[i + 1:]
            try:
                parse_container(mutated)
            except MalformedInput as e:
                assert str(e).startswith("corrupt .amem")


@pytest.mark.parametrize("version", [0, 2, -1, 1.0, True, "1", b"\x01", None, [1]],
                         ids=repr)
def test_wrong_export_version_is_refused(sample: Sample, version: Any) -> None:
    top = _top(sample[2])
    top[1] = version
    _expect_corrupt(cbor.encode(top))


@pytest.mark.parametrize("missing", [1, 2, 3, 4])
def test_container_missing_a_key_is_refused(sample: Sample, missing: int) -> None:
    top = _top(sample[2])
    del top[missing]
    _expect_corrupt(cbor.encode(top))


@pytest.mark.parametrize("missing", ["salt", "sign_pub", "ka_pub", "scopes"])
def test_metadata_missing_a_key_is_refused(sample: Sample, missing: str) -> None:
    top = _top(sample[2])
    del top[2][missing]
    _expect_corrupt(cbor.encode(top))


@pytest.mark.parametrize("field", ["scope_id", "kek_wrapped", "eph_pub"])
def test_scope_entry_missing_a_key_is_refused(sample: Sample, field: str) -> None:
    top = _top(sample[2])
    del top[2]["scopes"]["default"][field]
    _expect_corrupt(cbor.encode(top))


@pytest.mark.parametrize("path,value", [
    (("salt",), b"\x00" * 15), (("salt",), "0011"), (("sign_pub",), b"\x00" * 31),
    (("ka_pub",), b"\x00" * 33), (("scopes",), []), (("scopes", "default"), b"entry"),
    (("scopes", "default", "scope_id"), b"\x00" * 8), (("scopes", "default", "kek_wrapped"), b"\x00" * 32),
    (("scopes", "default", "eph_pub"), 7), (("known_keys",), [b"\x00" * 32]),
], ids=lambda x: "/".join(x) if isinstance(x, tuple) else type(x).__name__)
def test_metadata_of_the_wrong_shape_is_refused(sample: Sample, path: tuple[str, ...], value: Any) -> None:
    top = _top(sample[2])
    node = top[2]
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    _expect_corrupt(cbor.encode(top))


def test_scope_name_that_is_not_text_is_refused(sample: Sample) -> None:
    top = _top(sample[2])
    top[2]["scopes"][7] = top[2]["scopes"].pop("default")
    _expect_corrupt(cbor.encode(top))


def test_known_key_filed_under_the_wrong_key_id_is_refused(sample: Sample) -> None:
    top = _top(sample[2])
    (kid_a, pub_a), (kid_b, pub_b) = list(top[2]["known_keys"].items())
    top[2]["known_keys"] = {kid_a: pub_b, kid_b: pub_a}
    _expect_corrupt(cbor.encode(top))


def test_known_key_filed_under_a_non_hex_id_is_refused(sample: Sample) -> None:
    top = _top(sample[2])
    kid, pub = next(iter(top[2]["known_keys"].items()))
    top[2]["known_keys"] = {kid.upper(): pub}
    _expect_corrupt(cbor.encode(top))


def test_two_scopes_with_one_scope_id_are_refused(sample: Sample) -> None:
    top = _top(sample[2])
    scopes = top[2]["scopes"]
    scopes["work"]["scope_id"] = scopes["default"]["scope_id"]
    _expect_corrupt(cbor.encode(top))


@pytest.mark.parametrize("key,value", [(3, {b"x": b"y"}), (3, b"objects"), (4, [b"dek"]), (4, 4),
                                       (SIGNATURE_KEY, "signature"), (SIGNATURE_KEY, 0)])
def test_container_parts_of_the_wrong_type_are_refused(sample: Sample, key: int, value: Any) -> None:
    top = _top(sample[2])
    top[key] = value
    _expect_corrupt(cbor.encode(top))


def test_oversized_count_claims_are_refused_without_allocating() -> None:
    # a map header claiming 2^32 pairs in a 20-byte file
    _expect_corrupt(b"\xba\xff\xff\xff\xff" + b"\x01" * 15)


# ------------------------------------------------------------------ objects are kept, not judged


def test_objects_are_kept_verbatim_for_per_object_checks(sample: Sample) -> None:
    """Garbage objects and stray DEK entries do not sink the container (§10 isolation)."""
    top = _top(sample[2])
    top[3] = top[3] + [b"\x00garbage", 42, {"not": "bytes"}, b""]
    top[4] = {**top[4], b"short": b"x", 7: b"y", b"\x01" * 16: 99}
    c = parse_container(cbor.encode(top))
    assert c.objects[-4:] == (b"\x00garbage", 42, {"not": "bytes"}, b"")
    assert b"short" in c.deks                   # kept: the importer looks DEKs up by object id
    keys: set[object] = set(c.deks)           # typed wider: the check is for keys of the wrong type
    assert 7 not in keys and b"\x01" * 16 not in keys   # entries of the wrong type dropped


def test_unsigned_container_parses_with_no_signature(sample: Sample) -> None:
    top = _top(sample[2])
    del top[SIGNATURE_KEY]
    assert parse_container(cbor.encode(top)).signature is None


def test_absent_known_keys_is_an_empty_keyring(sample: Sample) -> None:
    top = _top(sample[2])
    del top[2]["known_keys"]
    assert dict(parse_container(cbor.encode(top)).meta.known_keys) == {}


# ------------------------------------------------------------------ build: deterministic, ordered


def test_build_orders_objects_by_ascending_id(sample: Sample) -> None:
    meta, objs, _ = sample
    shuffled = list(objs)
    random.Random(3).shuffle(shuffled)
    data = build_container(meta, shuffled, None)
    top = _top(data)
    ids = [cbor.decode(s)[1] for s in top[3]]
    assert ids == sorted(o for o, _, _ in objs)
    assert list(top[4]) == ids
    assert data == build_container(meta, reversed(objs), None)


def test_build_is_deterministic_for_the_same_vault(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", "pw for determinism")
    try:
        v.add_scope("work")
        for i in range(25):
            v.add(f"memory {i}", tags=("t",), scope="work" if i % 2 else "default", now=1700000000 + i)
        v.trust_add(bytes(range(32)))
        export_vault(v, tmp_path / "a.amem")
        export_vault(v, tmp_path / "b.amem")
        a = (tmp_path / "a.amem").read_bytes()
        assert a == (tmp_path / "b.amem").read_bytes()
        top = _top(a)
        ids = [cbor.decode(s)[1] for s in top[3]]
        assert ids == sorted(ids) and len(ids) == 25
        assert list(top[4]) == ids
        assert top[1] == EXPORT_VERSION and isinstance(top[SIGNATURE_KEY], bytes)
    finally:
        v.lock()


def test_metadata_message_is_domain_separated(sample: Sample) -> None:
    meta, _, _ = sample
    msg = metadata_message(EXPORT_VERSION, cbor.encode(meta.to_cbor()))
    assert cbor.decode(msg) == ["ownmem/v1/amem-metadata", 1, meta.to_cbor()]


# ------------------------------------------------------------------ round trip


def _rebuild(c: Container) -> bytes:
    objs = [(cbor.decode(s)[1], s, c.deks[cbor.decode(s)[1]]) for s in c.objects]
    return build_container(c.meta, objs, c.signature)


def test_round_trip(sample: Sample) -> None:
    meta, objs, data = sample
    c = parse_container(data)
    assert c.meta == meta
    assert c.meta_encoded == cbor.encode(meta.to_cbor())
    assert sorted(c.objects) == sorted(s for _, s, _ in objs)
    assert dict(c.deks) == {o: w for o, _, w in objs}
    assert _rebuild(c) == data


@st.composite
def _containers(draw: st.DrawFn) -> Parts:
    rng = random.Random(draw(st.integers(0, 2**32)))
    names = draw(st.lists(st.text(min_size=1, max_size=12), min_size=0, max_size=4, unique=True))
    scopes = {n: ScopeEntry(n, _rand(16, rng), WrappedKek(_rand(40, rng), _rand(32, rng))) for n in names}
    pubs = [_rand(32, rng) for _ in range(draw(st.integers(0, 3)))]
    meta = VaultPublic(salt=_rand(16, rng), sign_pub=_rand(32, rng), ka_pub=_rand(32, rng),
                       scopes=scopes, known_keys={key_id(p): p for p in pubs})
    objs = []
    for _ in range(draw(st.integers(0, 8))):
        oid = _rand(16, rng)
        sid = _rand(16, rng) if not scopes else list(scopes.values())[rng.randrange(len(scopes))].scope_id
        objs.append((oid, _sealed(oid, sid, draw(st.binary(max_size=64))), _rand(40, rng)))
    sig = draw(st.one_of(st.none(), st.binary(min_size=64, max_size=64)))
    return meta, objs, sig


@settings(max_examples=100, deadline=None)
@given(_containers())
def test_parse_build_round_trip_property(x: Parts) -> None:
    meta, objs, sig = x
    data = build_container(meta, objs, sig)
    c = parse_container(data)
    assert c.meta == meta and c.signature == sig and c.export_version == EXPORT_VERSION
    assert list(c.objects) == [s for _, s, _ in sorted(objs)]
    assert dict(c.deks) == {o: w for o, _, w in objs}
    assert _rebuild(c) == data

