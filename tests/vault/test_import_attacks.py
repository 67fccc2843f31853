"""Attacks on the ONE import path, ``ownmem.vault.import_file`` (draft-02 §8.2 "Import", §10).

The attacker controls the `.amem` file: it arrives over an untrusted channel.  Each test
names the attack, asserts the refusal, and asserts what was (not) written: a refused
import leaves the vault folder exactly as it was, or creates no vault at all.

Worst case assumed for the per-object attacks: the attacker also knows a scope KEK
(store compromise), so objects are refused by the signature and binding checks, not
merely because their DEK would not unwrap.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from ownmem.aperto import keys as K
from ownmem.aperto.container import SIGNATURE_KEY
from ownmem.aperto.model import Authorship, Custody, Memory, Trust
from ownmem.aperto.payload import encode_payload
from ownmem.aperto.seal import seal_unchecked
from ownmem.crypto import cbor, random_bytes, run_sync
from ownmem.errors import ImportRefused, MalformedInput, VaultError, WrongPassphrase
from ownmem.vault import DEFAULT_SCOPE, UnlockedVault, Vault, export_vault, import_file
from ownmem.vault.transfer import MAX_FILE
from tests.vault.vaultkit import (  # noqa: F401  (fixtures)
    OTHER_PASSPHRASE,
    PASSPHRASE,
    close,
    folder_of,
    store_state,
    stranger,
    third_party,
    vault,
)

# ------------------------------------------------------------------ the attacker's toolkit


def export_bytes(v: UnlockedVault, path: Path) -> bytes:
    export_vault(v, path)
    return path.read_bytes()


def rewrite(data: bytes, edit: Callable[[dict[Any, Any]], None]) -> bytes:
    top = cbor.decode(data)
    edit(top)
    return cbor.encode(top)


def both(*edits: Callable[[dict[Any, Any]], None]) -> Callable[[dict[Any, Any]], None]:
    """One edit made of several, in order."""
    def edit(top: dict[Any, Any]) -> None:
        for e in edits:
            e(top)
    return edit


def strip_signature(top: dict[Any, Any]) -> None:
    top.pop(SIGNATURE_KEY, None)


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def seal_as(v: UnlockedVault, signer: K.SigningKey, claimed: bytes, content: str, scope_id: bytes, kek: bytes,
            *, object_id: bytes | None = None, custody: Custody | None = None,
            format_version: int = 2) -> tuple[bytes, bytes, bytes]:
    """An object sealed by ``signer`` claiming ``claimed``, DEK wrapped under ``kek`` -> (id, sealed, wrap)."""
    dek = K.new_key()
    payload = encode_payload(Memory(content=content, created=1700000000, custody=custody), claimed)
    so = run_sync(seal_unchecked(v.crypto, payload, signer=signer, kid=claimed, object_id=object_id or random_bytes(16),
                                 scope_id=scope_id, dek=dek, nonce=random_bytes(12),
                                 format_version=format_version))
    return so.object_id, so.encoded, run_sync(K.wrap_dek(v.crypto, dek, kek))


def add_objects(top: dict[Any, Any], objs: list[tuple[bytes, bytes, bytes]]) -> None:
    for oid, sealed, wrapped in objs:
        top[3].append(sealed)
        top[4][oid] = wrapped


def ids_of(folder: Path) -> set[bytes]:
    st = store_state(folder)
    return {o.object_id for o in st.objects} if st else set()


@pytest.fixture
def victim(vault: UnlockedVault, third_party: K.SigningKey) -> UnlockedVault:
    """The owner's vault: two scopes, an accepted friend, a few memories in each scope."""
    vault.add_scope("work")
    vault.trust_add(third_party.public)
    for i in range(4):
        vault.add(f"home memory {i}", tags=("home",), now=1700000000 + i)
        vault.add(f"work memory {i}", scope="work", now=1700000100 + i)
    return vault


# ------------------------------------------------------------------ the passphrase gate


def test_wrong_passphrase_refused_before_any_write(tmp_path: Path, victim: UnlockedVault) -> None:
    f = write(tmp_path, "x.amem", export_bytes(victim, tmp_path / "e.amem"))
    fresh = tmp_path / "new-device"
    with pytest.raises(WrongPassphrase):
        import_file(fresh, f, "not the passphrase")
    assert not fresh.exists()                        # not even an empty vault folder

    folder = folder_of(victim)
    before = store_state(folder)
    with pytest.raises(WrongPassphrase):
        import_file(folder, f, PASSPHRASE + "x")
    assert store_state(folder) == before


def test_import_identity_replacement_refused(tmp_path: Path, victim: UnlockedVault) -> None:
    """Another identity's file, opened with that identity's own passphrase, never replaces ours."""
    other = Vault.create(tmp_path / "other", OTHER_PASSPHRASE)
    try:
        other.add("the other person's memory")
        f = write(tmp_path, "other.amem", export_bytes(other, tmp_path / "o.amem"))
    finally:
        close(other)
    folder = folder_of(victim)
    before = store_state(folder)
    with pytest.raises(ImportRefused):
        import_file(folder, f, OTHER_PASSPHRASE)
    assert store_state(folder) == before
    close(victim)
    with pytest.raises(WrongPassphrase):
        Vault(folder).unlock(OTHER_PASSPHRASE)
    u = Vault(folder).unlock(PASSPHRASE)                # identity unchanged: our passphrase still opens it
    close(u)


def test_cross_identity_import_refused(tmp_path: Path, victim: UnlockedVault) -> None:
    """Memories of another identity never enter this vault, however the container is dressed up."""
    other = Vault.create(tmp_path / "other", OTHER_PASSPHRASE)
    try:
        theirs = {other.add(f"their memory {i}") for i in range(3)}
        other_data = export_bytes(other, tmp_path / "o.amem")
        # the other party re-wraps THEIR scope KEK to OUR public ka key: anyone can do that
        o_scope = other.scope(DEFAULT_SCOPE)
        rewrapped = run_sync(K.wrap_kek(other.crypto, other.kek(o_scope), victim.identity.ka_pub, o_scope.scope_id))
        other_pub = other.identity.sign_pub
    finally:
        close(other)
    folder = folder_of(victim)
    before = store_state(folder)

    # 1. their file with our passphrase: no proof of holdership
    with pytest.raises(WrongPassphrase):
        import_file(folder, write(tmp_path, "their.amem", other_data), PASSPHRASE)
    assert store_state(folder) == before

    # 2. our metadata, their objects, their scope (KEK wrapped to them): nothing opens
    ours = export_bytes(victim, tmp_path / "ours.amem")
    o_top = cbor.decode(other_data)

    def graft(top: dict[Any, Any], wrapped: K.WrappedKek | None) -> None:
        strip_signature(top)
        entry = dict(o_top[2]["scopes"][DEFAULT_SCOPE])
        if wrapped is not None:
            entry.update(kek_wrapped=wrapped.kek_wrapped, eph_pub=wrapped.eph_pub)
        top[2]["scopes"]["theirs"] = entry
        top[2].setdefault("known_keys", {})[K.key_id(other_pub).hex()] = other_pub
        top[3].extend(o_top[3])
        top[4].update(o_top[4])

    for wrapped, accept in [(None, False), (rewrapped, False), (rewrapped, True)]:
        f = write(tmp_path, "graft.amem", rewrite(ours, partial(graft, wrapped=wrapped)))
        report, uv = import_file(folder, f, PASSPHRASE, accept_container_keys=accept)
        close(uv)
        assert report.imported == 0
        assert "theirs" in {name for name, _ in report.scopes_refused}
        assert {bytes.fromhex(i) for i, _ in report.refused} == theirs
        after = store_state(folder)
        assert after is not None and before is not None
        assert (after.identity, after.scopes, after.objects) == (before.identity, before.scopes, before.objects)
        # their key lands only through the loudly named opt-in, and vouches for nothing here
        assert (K.key_id(other_pub) in after.known_keys) == accept


# ------------------------------------------------------------------ metadata: scopes and keys


def test_scope_overwrite_refused(tmp_path: Path, victim: UnlockedVault) -> None:
    """Two devices create "notes" independently: a merge keeps each vault's own scope and KEK."""
    _, laptop = import_file(tmp_path / "laptop", write(tmp_path, "a.amem", export_bytes(victim, tmp_path / "e")),
                            PASSPHRASE)
    try:
        laptop.add_scope("notes")
        laptop_note = laptop.add("laptop note", scope="notes")
        laptop_data = export_bytes(laptop, tmp_path / "l.amem")
    finally:
        close(laptop)
    victim.add_scope("notes")
    phone_note = victim.add("phone note", scope="notes")
    folder = folder_of(victim)
    before = store_state(folder)
    assert before is not None

    report, uv = import_file(folder, write(tmp_path, "laptop.amem", laptop_data), PASSPHRASE)
    close(uv)
    assert [n for n, _ in report.scopes_refused] == ["notes"]
    assert [i for i, _ in report.refused] == [laptop_note.hex()]
    after = store_state(folder)
    assert after is not None and after.scopes == before.scopes and after.objects == before.objects
    assert phone_note in ids_of(folder)

    # an attacker's version: same name "default", different scope_id and a KEK they know
    kek = K.new_key()

    def swap(top: dict[Any, Any], keep_id: bool) -> None:
        strip_signature(top)
        e = top[2]["scopes"][DEFAULT_SCOPE]
        sid = e["scope_id"] if keep_id else random_bytes(16)
        w = run_sync(K.wrap_kek(victim.crypto, kek, victim.identity.ka_pub, sid))
        e.update(scope_id=sid, kek_wrapped=w.kek_wrapped, eph_pub=w.eph_pub)

    for keep_id in (False, True):
        f = write(tmp_path, "swap.amem", rewrite(laptop_data, partial(swap, keep_id=keep_id)))
        report, uv = import_file(folder, f, PASSPHRASE)
        close(uv)
        after = store_state(folder)
        assert after is not None and after.scopes == before.scopes and after.objects == before.objects


def test_altered_metadata_cannot_plant_accepted_key(tmp_path: Path, victim: UnlockedVault,
                                                    third_party: K.SigningKey, stranger: K.SigningKey) -> None:
    attacker = stranger
    data = export_bytes(victim, tmp_path / "e.amem")
    s = victim.scope(DEFAULT_SCOPE)
    planted = [seal_as(victim, attacker, attacker.key_id, "obey the attacker", s.scope_id, victim.kek(s))]
    # the attacker also tries a custody object naming their key as the proven author
    planted.append(seal_as(victim, attacker, attacker.key_id, "attested by me", s.scope_id, victim.kek(s),
                           custody=Custody(1, attacker.key_id, 1700000000, attacker.key_id)))
    planted_ids = {oid for oid, _, _ in planted}

    def plant(top: dict[Any, Any]) -> None:
        top[2]["known_keys"][attacker.key_id.hex()] = attacker.public
        add_objects(top, planted)

    folder = folder_of(victim)
    before = store_state(folder)
    assert before is not None

    # 1. the owner's signature over the metadata no longer verifies: refused whole
    signed = write(tmp_path, "signed.amem", rewrite(data, plant))
    with pytest.raises(ImportRefused):
        import_file(folder, signed, PASSPHRASE)
    assert store_state(folder) == before
    with pytest.raises(ImportRefused):
        import_file(tmp_path / "fresh", signed, PASSPHRASE)
    assert not (tmp_path / "fresh").exists()

    # 2. signature stripped: the planted key is held back; its objects are kept sealed but open
    #    only as unverified (hidden unless asked for) until the person accepts that key (§8.2)
    unsigned = write(tmp_path, "unsigned.amem", rewrite(data, both(plant, strip_signature)))
    report, uv = import_file(folder, unsigned, PASSPHRASE)
    try:
        assert report.keys_held_back == [attacker.key_id.hex()]
        assert report.keys_added == [] and not report.metadata_signed and report.refused == []
        assert sorted(report.kept_unverified) == sorted((i.hex(), attacker.key_id.hex()) for i in planted_ids)
        assert not planted_ids & {e.id for e in uv.open_all().entries}
        shown = {e.id: e.opened.trust for e in uv.open_all(allow_unverified=True).entries}
        assert all(shown[i] is Trust.UNVERIFIED for i in planted_ids)
    finally:
        close(uv)
    after = store_state(folder)
    assert after is not None and after.known_keys == before.known_keys
    assert {o.object_id for o in after.objects} == {o.object_id for o in before.objects} | planted_ids

    # ... on a new device too: nothing from an unsigned file is accepted, not even the real friend
    report, uv = import_file(tmp_path / "device2", unsigned, PASSPHRASE)
    try:
        assert sorted(report.keys_held_back) == sorted([attacker.key_id.hex(), third_party.key_id.hex()])
        assert uv.store.known_keys() == {}
        assert not planted_ids & {e.id for e in uv.open_all().entries}
        assert report.imported == len(before.objects) + len(planted_ids)
    finally:
        close(uv)


def test_altered_metadata_cannot_swap_scope_kek(tmp_path: Path, victim: UnlockedVault,
                                                stranger: K.SigningKey) -> None:
    """Replace a scope's wrapped KEK with one the attacker chose, wrapped to the victim's PUBLIC ka key.

    If adopted, everything the victim later writes into that scope would be readable by the
    attacker.  Signed: the file is refused whole.  Unsigned: an existing vault keeps its own
    entry; a new device adopts the scope only if an object opens as the owner's own through that
    KEK -- which the attacker cannot make (the owner's genuine objects have DEKs wrapped under
    the real KEK, so they do not unwrap under the attacker's, and the attacker cannot sign as
    the owner).  So no vault ever holds a KEK the attacker knows.
    """
    attacker = stranger
    data = export_bytes(victim, tmp_path / "e.amem")
    evil_kek = K.new_key()
    home = victim.scope(DEFAULT_SCOPE)
    wrapped = run_sync(K.wrap_kek(victim.crypto, evil_kek, victim.identity.ka_pub, home.scope_id))
    inbox_id = random_bytes(16)
    inbox = run_sync(K.wrap_kek(victim.crypto, evil_kek, victim.identity.ka_pub, inbox_id))
    # objects the attacker can make under their KEK: signed by themselves (key planted), or
    # forging the owner's key id
    bait = [seal_as(victim, attacker, attacker.key_id, "attacker bait", home.scope_id, evil_kek),
            seal_as(victim, attacker, victim.identity.key_id, "forged owner", home.scope_id, evil_kek),
            seal_as(victim, attacker, attacker.key_id, "new scope bait", inbox_id, evil_kek)]
    bait_ids = {oid for oid, _, _ in bait}

    def swap(top: dict[Any, Any]) -> None:
        top[2]["scopes"][DEFAULT_SCOPE].update(kek_wrapped=wrapped.kek_wrapped, eph_pub=wrapped.eph_pub)
        top[2]["scopes"]["inbox"] = {"scope_id": inbox_id, "kek_wrapped": inbox.kek_wrapped,
                                     "eph_pub": inbox.eph_pub}
        top[2]["known_keys"][attacker.key_id.hex()] = attacker.public
        add_objects(top, bait)

    def assert_no_evil_kek(folder: Path) -> None:
        u = Vault(folder).unlock(PASSPHRASE)
        try:
            for s in u.scopes().values():
                assert u.kek(s) != evil_kek
            assert not bait_ids & u.store.object_ids()
        finally:
            close(u)

    folder = folder_of(victim)
    before = store_state(folder)
    assert before is not None

    # signed: refused whole, into the existing vault and onto a new device
    signed = write(tmp_path, "signed.amem", rewrite(data, swap))
    with pytest.raises(ImportRefused):
        import_file(folder, signed, PASSPHRASE)
    assert store_state(folder) == before
    with pytest.raises(ImportRefused):
        import_file(tmp_path / "fresh", signed, PASSPHRASE)
    assert not (tmp_path / "fresh").exists()

    unsigned = write(tmp_path, "unsigned.amem", rewrite(data, both(swap, strip_signature))
)

    # unsigned into the existing vault: its own scope entry stands; the new scope is not proven
    report, uv = import_file(folder, unsigned, PASSPHRASE)
    close(uv)
    assert [n for n, _ in report.scopes_refused] == ["inbox"]
    after = store_state(folder)
    assert after is not None and after.scopes == before.scopes and after.objects == before.objects
    assert_no_evil_kek(folder)

    # unsigned onto a new device, even with the attacker's key accepted by opt-in
    for accept in (False, True):
        dev = tmp_path / f"device-{accept}"
        report, uv = import_file(dev, unsigned, PASSPHRASE, accept_container_keys=accept)
        close(uv)
        assert sorted(n for n, _ in report.scopes_refused) == [DEFAULT_SCOPE, "inbox"]
        assert report.scopes_added == ["work"]            # proven by the owner's genuine objects
        assert report.default_scope_created               # a fresh one: the vault can still add
        dev_state = store_state(dev)
        assert dev_state is not None and set(dev_state.scopes) == {"work", DEFAULT_SCOPE}
        assert dev_state.scopes[DEFAULT_SCOPE].scope_id != home.scope_id
        home_ids = {o.object_id for o in before.objects if o.scope_id == home.scope_id}
        assert {bytes.fromhex(i) for i, _ in report.refused} == home_ids | bait_ids
        assert_no_evil_kek(dev)


# ------------------------------------------------------------------ unreadable files


def _corruptions(data: bytes) -> list[bytes]:
    rng = random.Random(5)
    return [
        b"", bytes(rng.getrandbits(8) for _ in range(2048)), data[: len(data) // 2], data[:-1],
        b'{"export_version": 1}', rewrite(data, lambda t: t.__setitem__(1, 2)),
        rewrite(data, lambda t: t.pop(2)), rewrite(data, lambda t: t[2].pop("salt")),
        rewrite(data, lambda t: t[2]["scopes"]["work"].__setitem__(
            "scope_id", t[2]["scopes"][DEFAULT_SCOPE]["scope_id"])),
    ]


def test_corrupt_container_single_clean_error(tmp_path: Path, victim: UnlockedVault) -> None:
    data = export_bytes(victim, tmp_path / "e.amem")
    folder = folder_of(victim)
    before = store_state(folder)
    for i, bad in enumerate(_corruptions(data)):
        f = write(tmp_path, f"bad{i}.amem", bad)
        with pytest.raises(MalformedInput) as e:
            import_file(folder, f, PASSPHRASE)
        assert str(e.value).startswith("corrupt .amem") and "\n" not in str(e.value)
        assert e.value.__cause__ is None
        assert store_state(folder) == before
        with pytest.raises(MalformedInput):
            import_file(tmp_path / f"fresh{i}", f, PASSPHRASE)
        assert not (tmp_path / f"fresh{i}").exists()


def test_missing_file_is_a_clean_error(tmp_path: Path) -> None:
    with pytest.raises(VaultError):
        import_file(tmp_path / "v", tmp_path / "no such file.amem", PASSPHRASE)
    assert not (tmp_path / "v").exists()


def test_oversized_container_refused_without_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.amem"
    with open(big, "wb") as fh:
        fh.truncate(MAX_FILE + 1)          # sparse: costs no disk
    with pytest.raises(ImportRefused):
        import_file(tmp_path / "v", big, PASSPHRASE)
    assert not (tmp_path / "v").exists()


# ------------------------------------------------------------------ per-object isolation


def test_one_hostile_object_in_many(tmp_path: Path, vault: UnlockedVault, stranger: K.SigningKey) -> None:
    v = vault
    good = {v.add(f"good memory {i}", tags=(f"t{i % 5}",), now=1700000000 + i) for i in range(50)}
    s = v.scope(DEFAULT_SCOPE)
    kek = v.kek(s)
    owner = v.identity.sign
    data = export_bytes(v, tmp_path / "e.amem")
    top = cbor.decode(data)
    a_genuine_id = sorted(good)[0]

    hostile: dict[str, Any] = {}
    # signed by the stranger, claiming the owner's key id (vector 004's attack)
    hostile["wrong signer"] = seal_as(v, stranger, owner.key_id, "I am the owner", s.scope_id, kek)
    # a genuine object with its id rewritten, its DEK copied under the new id (vector 005)
    oid, sealed, wrapped = seal_as(v, owner, owner.key_id, "moved", s.scope_id, kek)
    new_id = random_bytes(16)
    env = cbor.decode(sealed)
    env[1] = new_id
    hostile["rewritten envelope"] = (new_id, cbor.encode(env), wrapped)
    # version downgrade to strip the bindings (vector 006)
    oid, sealed, wrapped = seal_as(v, owner, owner.key_id, "downgraded", s.scope_id, kek)
    env = cbor.decode(sealed)
    env[3] = 1
    hostile["version downgrade"] = (oid, cbor.encode(env), wrapped)
    # truncated bytes, and items that are not byte strings at all
    oid, sealed, wrapped = seal_as(v, owner, owner.key_id, "truncated", s.scope_id, kek)
    hostile["truncated"] = (oid, sealed[:-7], wrapped)
    hostile["not bytes: int"] = (None, 42, None)
    hostile["not bytes: map"] = (None, {1: b"x"}, None)
    # a genuine owner object in a scope this vault never had
    other_kek = K.new_key()
    hostile["unknown scope"] = seal_as(v, owner, owner.key_id, "elsewhere", random_bytes(16), other_kek)
    # a genuine owner object whose DEK is missing, and one whose DEK wrap was tampered with
    oid, sealed, _ = seal_as(v, owner, owner.key_id, "no dek", s.scope_id, kek)
    hostile["missing DEK"] = (oid, sealed, None)
    oid, sealed, wrapped = seal_as(v, owner, owner.key_id, "tampered dek", s.scope_id, kek)
    hostile["tampered DEK wrap"] = (oid, sealed, wrapped[:-1] + bytes([wrapped[-1] ^ 1]))
    # squatting a genuine id with a forgery placed BEFORE the genuine object
    hostile["id squatting"] = seal_as(v, stranger, owner.key_id, "shadow", s.scope_id, kek,
                                      object_id=a_genuine_id)
    # an unsupported format_version
    hostile["future version"] = seal_as(v, owner, owner.key_id, "v3", s.scope_id, kek, format_version=3)

    items: list[Any] = [hostile["id squatting"][1]] + list(top[3])
    for name, (oid, sealed, wrapped) in hostile.items():
        if name == "id squatting":
            continue
        items.insert(random.Random(name).randrange(len(items) + 1), sealed)
        if oid is not None and wrapped is not None:
            top[4][oid] = wrapped
    top[3] = items
    f = write(tmp_path, "hostile.amem", cbor.encode(top))     # metadata untouched: still signed

    report, uv = import_file(tmp_path / "device2", f, PASSPHRASE)
    try:
        assert report.metadata_signed
        assert report.imported == 50
        assert uv.store.object_ids() == good
        assert len(report.refused) == len(hostile)
        assert all(why for _, why in report.refused)
        labelled = {label for label, _ in report.refused}
        for name in ("wrong signer", "rewritten envelope", "version downgrade", "unknown scope",
                     "missing DEK", "tampered DEK wrap", "future version"):
            assert hostile[name][0].hex() in labelled, name
        assert a_genuine_id.hex() in labelled                       # the squatter, refused
        assert sum(lab.startswith("#") for lab in labelled) == 3    # truncated + two non-bytes, by position
        listing = uv.open_all()
        assert not listing.refused
        assert {e.opened.trust for e in listing.entries} == {Trust.SELF}
        assert {e.opened.content for e in listing.entries} == {f"good memory {i}" for i in range(50)}
    finally:
        close(uv)


# ------------------------------------------------------------------ merge


def test_merge_without_overwrite(tmp_path: Path, victim: UnlockedVault) -> None:
    old_export = write(tmp_path, "old.amem", export_bytes(victim, tmp_path / "e.amem"))
    folder = folder_of(victim)
    before = store_state(folder)
    assert before is not None

    report, uv = import_file(folder, old_export, PASSPHRASE)
    close(uv)
    assert report.imported == 0 and report.refused == [] and report.scopes_added == []
    assert len(report.skipped) == len(before.objects)
    assert {why for _, why in report.skipped} == {"already in the vault"}
    assert store_state(folder) == before

    # forget a memory (and its edit); the old export must not bring it back
    u = Vault(folder).unlock(PASSPHRASE)
    try:
        target = next(e for e in u.open_all().entries if e.opened.content == "home memory 2")
        edit = u.edit(target.id.hex(), content="home memory 2, edited")
        edited_export = write(tmp_path, "edited.amem", export_bytes(u, tmp_path / "e2.amem"))
        gone = set(u.forget(target.id.hex()))
        assert gone == {target.id, edit}
    finally:
        close(u)
    for f in (old_export, edited_export):
        report, uv = import_file(folder, f, PASSPHRASE)
        close(uv)
        assert report.imported == 0
        assert {bytes.fromhex(i) for i, why in report.skipped if why == "was forgotten in this vault"} == (
            gone & {bytes.fromhex(i) for i, _ in report.skipped})
        assert not gone & ids_of(folder)


def test_merge_adds_only_what_is_new(tmp_path: Path, victim: UnlockedVault) -> None:
    _, laptop = import_file(tmp_path / "laptop", write(tmp_path, "a.amem", export_bytes(victim, tmp_path / "e")),
                            PASSPHRASE)
    try:
        laptop.add_scope("travel")
        new = {laptop.add("packed the charger", scope="travel"), laptop.add("new at home")}
        data = export_bytes(laptop, tmp_path / "l.amem")
    finally:
        close(laptop)
    folder = folder_of(victim)
    before = store_state(folder)
    assert before is not None
    report, uv = import_file(folder, write(tmp_path, "l2.amem", data), PASSPHRASE)
    close(uv)
    assert report.imported == 2 and report.scopes_added == ["travel"] and report.metadata_signed
    after = store_state(folder)
    assert after is not None
    assert {o.object_id for o in after.objects} == {o.object_id for o in before.objects} | new
    assert {k: v for k, v in after.scopes.items() if k != "travel"} == before.scopes
    assert after.identity == before.identity


def test_old_export_cannot_resurrect_a_revoked_key(tmp_path: Path, victim: UnlockedVault,
                                                   third_party: K.SigningKey) -> None:
    """Revocation rollback: the friend's key is removed, then an export made before that is imported."""
    old = write(tmp_path, "old.amem", export_bytes(victim, tmp_path / "e.amem"))    # signed, lists the key
    victim.trust_remove(third_party.key_id)
    report, uv = import_file(folder_of(victim), old, PASSPHRASE)
    close(uv)
    after = store_state(folder_of(victim))
    assert after is not None and third_party.key_id not in after.known_keys


# ------------------------------------------------------------------ import never assigns trust


def test_import_moves_ciphertext_never_assigns_trust(tmp_path: Path, victim: UnlockedVault,
                                                     third_party: K.SigningKey) -> None:
    """A custody record signed by an accepted third party is not an attestation (§7, vector 011)."""
    s = victim.scope(DEFAULT_SCOPE)
    kek = victim.kek(s)
    owner_kid = victim.identity.key_id
    forged_attestations = {
        seal_as(victim, third_party, third_party.key_id, "the owner said this", s.scope_id, kek,
                custody=Custody(1, owner_kid, 1700000000, owner_kid)),
        seal_as(victim, third_party, third_party.key_id, "I vouch for myself", s.scope_id, kek,
                custody=Custody(1, third_party.key_id, 1700000000, third_party.key_id)),
    }
    plain = seal_as(victim, third_party, third_party.key_id, "plain note from the friend", s.scope_id, kek)
    legacy = seal_as(victim, victim.identity.sign, owner_kid, "a v1 memory", s.scope_id, kek, format_version=1)
    data = rewrite(export_bytes(victim, tmp_path / "e.amem"),
                   lambda t: add_objects(t, [*forged_attestations, plain, legacy]))
    # a signed container: the friend's key travels authenticated, so it is accepted on the new device
    report, uv = import_file(tmp_path / "device2", write(tmp_path, "x.amem", data), PASSPHRASE)
    try:
        assert report.keys_added == [third_party.key_id.hex()]
        assert report.refused == []                    # all of it moves: import stores ciphertext ...
        by_id = {e.id: e.opened for e in uv.open_all(allow_unverified=True).entries}
        for oid, _, _ in forged_attestations:          # ... and trust is derived at read time
            o = by_id[oid]
            assert (o.trust, o.authorship, o.author_key_id) == (Trust.UNVERIFIED, Authorship.UNKNOWN, None)
            assert o.signature_verified and o.signer_key_id == third_party.key_id
        p = by_id[plain[0]]
        assert (p.trust, p.authorship, p.author_key_id) == (Trust.TRUSTED, Authorship.SIGNED, third_party.key_id)
        lg = by_id[legacy[0]]
        assert (lg.format_version, lg.trust, lg.signature_verified) == (1, Trust.UNVERIFIED, False)
        assert legacy[0] in {oid for oid, _ in uv.open_all().refused}      # v1: only under the opt-in
        assert all(o.trust is not Trust.SELF for oid, o in by_id.items()
                   if oid in {x[0] for x in (*forged_attestations, plain, legacy)})
    finally:
        close(uv)
