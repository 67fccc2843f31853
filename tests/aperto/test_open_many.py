"""open_many (the batched path the browser and the vault use) gives exactly open_sealed's
verdicts, and reopen_verified (the device cache) re-derives trust from today's keyring."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ownmem.aperto import keys as K
from ownmem.aperto.model import Memory, Trust
from ownmem.aperto.seal import open_many, open_sealed, reopen_verified, seal
from ownmem.aperto.trust import Keyring
from ownmem.crypto import provider, run_sync
from ownmem.errors import AuthenticationFailed, OwnmemError
from ownmem.vault import Vault

P = provider()


def _keyring(v: dict[str, Any]) -> Keyring:
    i = v["input"]
    return Keyring(bytes.fromhex(i["owner_sign_pub"]),
                   {bytes.fromhex(k): bytes.fromhex(x) for k, x in i.get("known_keys", {}).items()})


@pytest.mark.parametrize("allow", [False, True])
def test_open_many_matches_open_sealed_on_every_vector(v2_vectors: dict[str, Any], allow: bool) -> None:
    cases = [(n, v) for n, v in v2_vectors.items() if "sealed_object" in v.get("input", {})]
    items = [(bytes.fromhex(v["input"]["sealed_object"]), bytes.fromhex(v["input"]["dek"])) for _, v in cases]
    owner = cases[0][1]["input"]["owner_sign_pub"]
    assert all(v["input"]["owner_sign_pub"] == owner for _, v in cases)
    for (name, v), (sealed, dek) in zip(cases, items, strict=False):
        kr = _keyring(v)
        many = run_sync(open_many(P, [(sealed, dek), (b"garbage", dek)], kr, allow_unverified=allow))
        assert isinstance(many[1], OwnmemError), "one bad item must not affect its neighbour"
        try:
            one = run_sync(open_sealed(P, sealed, dek, kr, allow_unverified=allow))
        except OwnmemError as e:
            assert type(many[0]) is type(e), name
            continue
        assert many[0] == one, name


def test_reopen_verified_follows_todays_keyring() -> None:
    owner = run_sync(K.signing_key(P, b"\x01" * 32))
    friend = run_sync(K.signing_key(P, b"\x02" * 32))
    dek, scope = bytes(32), bytes(16)
    so = run_sync(seal(P, Memory(content="from a friend", created=1), signer=friend, scope_id=scope, dek=dek))
    accepted = Keyring(owner.public, {friend.key_id: friend.public})
    first = run_sync(open_sealed(P, so, dek, accepted))
    assert first.trust is Trust.TRUSTED
    again = reopen_verified(so, first.payload, friend.public, accepted)
    assert again == first
    with pytest.raises(AuthenticationFailed):   # revoked since: the cache no longer vouches
        reopen_verified(so, first.payload, friend.public, Keyring(owner.public, {}))
    with pytest.raises(AuthenticationFailed):   # a cached key that is not the payload's author
        reopen_verified(so, first.payload, owner.public, accepted)


class DictCache:
    def __init__(self) -> None:
        self.d: dict[bytes, tuple[bytes, bytes, bytes]] = {}
        self.puts = 0

    def get(self, oid: bytes, sealed: bytes) -> tuple[bytes, bytes] | None:
        hit = self.d.get(oid)
        return (hit[1], hit[2]) if hit and hit[0] == sealed else None

    def put(self, oid: bytes, sealed: bytes, payload: bytes, signer_pub: bytes) -> None:
        self.d[oid] = (sealed, payload, signer_pub)
        self.puts += 1


def test_vault_listing_with_a_cache_skips_verification_but_not_revocation(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", "pw")
    friend = run_sync(K.signing_key(P, b"\x03" * 32))
    v.trust_add(friend.public)
    for i in range(5):
        v.add(f"mine {i}")
    s = v.scope("default")
    dek = K.new_key()
    so = run_sync(seal(P, Memory(content="friend's", created=1), signer=friend, scope_id=s.scope_id, dek=dek))
    from ownmem.vault.store import StoredObject
    with v.store.transaction():
        v.store.put_object(StoredObject(so.object_id, so.scope_id, 2, so.encoded,
                                        run_sync(K.wrap_dek(P, dek, v.kek(s)))))
    cache = DictCache()
    plain = v.open_all()
    cached = v.open_all(cache=cache)
    assert cache.puts == 6 and plain.entries == cached.entries
    again = v.open_all(cache=cache)
    assert cache.puts == 6 and again.entries == plain.entries        # nothing re-verified
    v.trust_remove(friend.key_id)
    after = v.open_all(cache=cache)
    assert len(after.entries) == 5 and len(after.refused) == 1


from hypothesis import given, settings, strategies as st  # noqa: E402

from ownmem.aperto.payload import decode_payload, decode_payload_generic, encode_payload  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(content=st.text(min_size=1, max_size=300), tags=st.lists(st.text(max_size=30), max_size=25),
       conf=st.floats(min_value=0.0, max_value=1.0), mem_type=st.sampled_from([1, 2, 3]),
       created=st.integers(min_value=0, max_value=2**64 - 1), tool=st.text(max_size=40),
       cut=st.integers(min_value=0, max_value=400))
def test_fast_payload_path_equals_the_generic_decoder(content: str, tags: list[str], conf: float, mem_type: int,
                                                      created: int, tool: str, cut: int) -> None:
    try:
        data = encode_payload(Memory(content=content, tags=tuple(tags), confidence=conf, mem_type=mem_type,
                                     created=created, tool=tool), bytes(range(8)))
    except OwnmemError:
        return   # e.g. lone surrogates: nothing to decode
    for blob in (data, data[:cut], data[:-1] + b"\x00"):
        try:
            generic = decode_payload_generic(blob)
        except OwnmemError as e:
            with pytest.raises(type(e)):
                decode_payload(blob)
            continue
        assert decode_payload(blob) == generic
