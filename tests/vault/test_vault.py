"""The local vault (ownmem.vault.vault): unlock once, immutable memories, erasure, keyring, scopes.

Properties:

* the passphrase is checked against the stored identity; Argon2id runs once per
  unlock, never per object (the reference re-derives on every call);
* memories added by the owner open as ``self``; an edit is a new object that
  supersedes the old one, and concurrent edits are a visible conflict, never a lost write;
* ``forget`` is cryptographic erasure: no version's sealed bytes or wrapped DEK survive
  in the SQLite file or its WAL;
* trust is derived at read time from the keyring (add/remove takes effect at once);
* ``lock()`` drops every key, and a locked vault answers with a clean error.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from ownmem.aperto import keys as K
from ownmem.aperto.model import Authorship, Memory, MemType, Trust
from ownmem.aperto.payload import encode_payload
from ownmem.aperto.seal import seal_unchecked
from ownmem.crypto import random_bytes, run_sync
from ownmem.crypto.cpython import CPythonProvider
from ownmem.errors import MalformedInput, NotFound, ProducerRefusal, VaultError, WrongPassphrase
from ownmem.vault import DEFAULT_SCOPE, UnlockedVault, Vault, export_vault, import_file
from ownmem.vault.store import Store, StoredObject
from tests.vault.vaultkit import PASSPHRASE, close, folder_of, store_state, third_party, vault  # noqa: F401  (fixtures)


class CountingProvider:
    """The CPython provider, counting Argon2id derivations."""

    name = "counting"

    def __init__(self) -> None:
        self.inner = CPythonProvider()
        self.argon2_calls = 0
        self.forgot = 0

    async def argon2id(self, *args: Any, **kwargs: Any) -> bytes:
        self.argon2_calls += 1
        return await self.inner.argon2id(*args, **kwargs)

    def forget_secrets(self) -> None:
        self.forgot += 1
        self.inner.forget_secrets()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _third_party_memory(v: UnlockedVault, signer: K.SigningKey, content: str) -> bytes:
    """A memory written by another author key into this vault (how an agent writes)."""
    memory = Memory(content=content, created=1700000000, tool="agent/1")
    return v._seal_into(memory, v.scope(DEFAULT_SCOPE), signer=signer).object_id


# ------------------------------------------------------------------ create / unlock


def test_create_then_unlock_derives_the_same_identity(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", PASSPHRASE)
    sign_pub, ka_pub = v.identity.sign_pub, v.identity.ka_pub
    close(v)
    u = Vault(tmp_path / "v").unlock(PASSPHRASE)
    try:
        assert (u.identity.sign_pub, u.identity.ka_pub) == (sign_pub, ka_pub)
        assert list(u.scopes()) == [DEFAULT_SCOPE]
    finally:
        close(u)


def test_wrong_passphrase_is_refused(vault: UnlockedVault) -> None:
    folder = folder_of(vault)
    vault.add("something to protect")
    before = store_state(folder)
    for wrong in ["", "owner passphrase", PASSPHRASE + " ", PASSPHRASE.upper()]:
        with pytest.raises(WrongPassphrase):
            Vault(folder).unlock(wrong)
    assert store_state(folder) == before


def test_create_refuses_to_overwrite_a_vault(vault: UnlockedVault) -> None:
    folder = folder_of(vault)
    before = store_state(folder)
    with pytest.raises(VaultError):
        Vault.create(folder, "another passphrase")
    assert store_state(folder) == before


def test_create_refuses_an_empty_passphrase(tmp_path: Path) -> None:
    with pytest.raises(VaultError):
        Vault.create(tmp_path / "v", "")
    assert store_state(tmp_path / "v") is None


def test_unlock_of_an_absent_vault_is_a_clean_error(tmp_path: Path) -> None:
    with pytest.raises(VaultError):
        Vault(tmp_path / "nothing here").unlock(PASSPHRASE)


def test_argon2id_runs_once_per_unlock(tmp_path: Path, third_party: K.SigningKey) -> None:
    cp = CountingProvider()
    v = Vault.create(tmp_path / "v", PASSPHRASE, crypto=cp)
    assert cp.argon2_calls == 1
    ids = [v.add(f"memory {i}", now=1700000000 + i) for i in range(100)]
    close(v)
    assert cp.argon2_calls == 1

    u = Vault(tmp_path / "v", crypto=cp).unlock(PASSPHRASE)
    assert cp.argon2_calls == 2
    listing = u.open_all()
    assert len(listing.entries) == 100 and not listing.refused
    u.add_scope("work")
    u.add("in work", scope="work")
    u.edit(ids[0].hex(), content="edited")
    u.search("memory 5")
    u.trust_add(third_party.public)
    u.forget(ids[1].hex())
    u.open_all()
    assert cp.argon2_calls == 2          # opening 100 objects, editing, searching: no re-derivation
    close(u)


# ------------------------------------------------------------------ add / open / list


def test_added_memories_open_as_self(vault: UnlockedVault) -> None:
    vault.add_scope("work")
    cases: list[dict[str, Any]] = [
        dict(content="prefers formal B2B emails", tags=("preferences",), mem_type=MemType.SEMANTIC,
             confidence=0.9, scope=DEFAULT_SCOPE),
        dict(content="met Ana at the café\nsecond line 🧠", tags=(), mem_type=MemType.EPISODIC,
             confidence=0.0, scope="work"),
        dict(content="deploy: run build.py test", tags=("ops", "ünïcode"), mem_type=MemType.PROCEDURAL,
             confidence=1.0, scope="work"),
    ]
    ids = [vault.add(**c, now=1700000000 + i) for i, c in enumerate(cases)]
    listing = vault.open_all()
    assert listing.refused == []
    by_id = {e.id: e for e in listing.entries}
    for oid, c, i in zip(ids, cases, range(3), strict=False):
        e = by_id[oid]
        o = e.opened
        assert (o.content, o.tags, o.mem_type, o.confidence, e.scope) == (
            c["content"], c["tags"], c["mem_type"], c["confidence"], c["scope"])
        assert o.created == 1700000000 + i and o.format_version == 2
        assert (o.trust, o.authorship, o.author_key_id) == (Trust.SELF, Authorship.SIGNED, vault.identity.key_id)
        assert e.is_head and e.supersedes is None


def test_add_defaults_created_to_now(vault: UnlockedVault) -> None:
    before = int(time.time())
    oid = vault.add("now")
    created = vault.resolve(oid.hex()).opened.created
    assert created is not None and before <= created <= int(time.time())


@pytest.mark.parametrize("kwargs", [dict(content=""), dict(content="x", confidence=1.5),
                                    dict(content="x", confidence=float("nan")), dict(content="x", mem_type=9),
                                    dict(content="\ud800 lone surrogate")])
def test_add_refuses_what_a_producer_must_not_write(vault: UnlockedVault, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ProducerRefusal):
        vault.add(**kwargs)
    assert vault.store.count() == 0


def test_add_to_an_unknown_scope_is_not_found(vault: UnlockedVault) -> None:
    with pytest.raises(NotFound):
        vault.add("x", scope="nope")


def test_resolve_by_unique_prefix(vault: UnlockedVault) -> None:
    ids = [vault.add(f"m{i}") for i in range(3)]
    assert vault.resolve(ids[1].hex()[:12]).id == ids[1]
    assert vault.resolve(ids[1].hex().upper()).id == ids[1]
    with pytest.raises(NotFound):
        vault.resolve("")
    with pytest.raises(NotFound):
        vault.resolve("zz")


def test_one_corrupt_object_does_not_stop_the_listing(vault: UnlockedVault) -> None:
    good = [vault.add(f"m{i}") for i in range(3)]
    s = vault.scope(DEFAULT_SCOPE)
    with vault.store.transaction():
        vault.store.put_object(StoredObject(b"\x01" * 16, s.scope_id, 2, b"\xa0garbage", b"\x00" * 40))
        vault.store.put_object(StoredObject(b"\x02" * 16, b"\x09" * 16, 2, b"\xa0", b"\x00" * 40))
    listing = vault.open_all()
    assert sorted(e.id for e in listing.entries) == sorted(good)
    assert sorted(oid for oid, _ in listing.refused) == [b"\x01" * 16, b"\x02" * 16]
    assert all(why for _, why in listing.refused)


# ------------------------------------------------------------------ edits


def test_edit_supersedes_and_keeps_the_old_version(vault: UnlockedVault) -> None:
    old = vault.add("tea", tags=("drinks",), confidence=0.4, now=1700000000)
    new = vault.edit(old.hex(), content="coffee", now=1700000100)
    listing = vault.open_all()
    by_id = {e.id: e for e in listing.entries}
    assert set(by_id) == {old, new}
    assert by_id[old].superseded_by == (new,) and not by_id[old].is_head
    assert by_id[new].supersedes == old
    (head,) = listing.heads()
    o = head.opened
    assert (o.content, o.tags, o.confidence, o.created, o.updated) == ("coffee", ("drinks",), 0.4, 1700000000,
                                                                       1700000100)
    assert o.trust is Trust.SELF
    assert by_id[old].opened.content == "tea"              # immutable: the old object is intact
    assert listing.conflicts() == []


def test_edit_chain_has_one_head(vault: UnlockedVault) -> None:
    a = vault.add("v1")
    b = vault.edit(a.hex(), content="v2")
    c = vault.edit(b.hex(), content="v3", tags=("final",))
    listing = vault.open_all()
    assert [e.id for e in listing.heads()] == [c]
    assert listing.conflicts() == []


def test_concurrent_edits_are_a_conflict_never_a_lost_write(vault: UnlockedVault) -> None:
    base = vault.add("meeting on Monday")
    mine = vault.edit(base.hex(), content="meeting on Tuesday")
    theirs = vault.edit(base.hex(), content="meeting on Wednesday")      # edited from the same version
    listing = vault.open_all()
    heads = {e.id for e in listing.heads()}
    assert heads == {mine, theirs}
    (group,) = listing.conflicts()
    assert sorted(e.id for e in group) == sorted([mine, theirs])
    assert {e.opened.content for e in group} == {"meeting on Tuesday", "meeting on Wednesday"}


def test_edits_on_two_devices_merge_into_a_visible_conflict(tmp_path: Path, vault: UnlockedVault) -> None:
    base = vault.add("the wifi password is on the fridge")
    export_vault(vault, tmp_path / "a.amem")
    _, laptop = import_file(tmp_path / "laptop", tmp_path / "a.amem", PASSPHRASE)   # new device
    try:
        phone_edit = vault.edit(base.hex(), content="the wifi password is in the drawer")
        laptop_edit = laptop.edit(base.hex(), content="the wifi password changed")
        export_vault(laptop, tmp_path / "b.amem")
    finally:
        close(laptop)
    report, _ = import_file(folder_of(vault), tmp_path / "b.amem", PASSPHRASE)
    assert report.imported == 1
    listing = vault.open_all()
    (group,) = listing.conflicts()
    assert sorted(e.id for e in group) == sorted([phone_edit, laptop_edit])
    assert base in {e.id for e in listing.entries}


def test_unverified_memory_cannot_be_edited(vault: UnlockedVault, third_party: K.SigningKey) -> None:
    oid = _third_party_memory(vault, third_party, "from someone not accepted")
    with pytest.raises(VaultError):
        vault.edit(oid.hex(), content="laundered into self")
    assert vault.store.count() == 1


# ------------------------------------------------------------------ forget: cryptographic erasure


def _disk_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.glob(Store.FILENAME + "*")))


def test_forget_erases_every_version_from_disk(vault: UnlockedVault) -> None:
    keep = [vault.add(f"keep {i}") for i in range(5)]
    a = vault.add("my old address is 12 Rose Lane")
    b = vault.edit(a.hex(), content="my address is 4 Oak Street")
    c = vault.edit(b.hex(), content="my address is 9 Elm Road")
    rows = {r.object_id: r for r in vault.store.objects()}
    secrets = [x for oid in (a, b, c) for x in (rows[oid].sealed, rows[oid].dek_wrapped)]
    folder = folder_of(vault)
    disk = _disk_bytes(folder)
    assert all(s in disk for s in secrets)              # the search can find them before erasure

    gone = vault.forget(b.hex()[:10])                   # any version names the whole memory
    assert sorted(gone) == sorted([a, b, c])
    disk = _disk_bytes(folder)
    for s in secrets:
        assert s not in disk
    assert {e.id for e in vault.open_all().entries} == set(keep)
    assert all(rows[k].sealed in disk for k in keep)    # erasure is precise


def test_forget_survives_reopening(vault: UnlockedVault) -> None:
    a = vault.add("to forget")
    vault.forget(a.hex())
    folder = folder_of(vault)
    close(vault)
    u = Vault(folder).unlock(PASSPHRASE)
    try:
        assert u.open_all().entries == []
        assert u.store.erased_ids() == {a}
        with pytest.raises(NotFound):
            u.forget(a.hex())
    finally:
        close(u)


# ------------------------------------------------------------------ keyring: trust derived at read time


def test_trust_add_and_remove(vault: UnlockedVault, third_party: K.SigningKey) -> None:
    oid = _third_party_memory(vault, third_party, "an agent's note")
    assert [r for r, _ in vault.open_all().refused] == [oid]      # fail closed: not accepted yet

    kid = vault.trust_add(third_party.public)
    assert kid == third_party.key_id
    (e,) = vault.open_all().entries
    assert (e.opened.trust, e.opened.authorship, e.opened.author_key_id) == (
        Trust.TRUSTED, Authorship.SIGNED, third_party.key_id)

    vault.trust_remove(kid)
    listing = vault.open_all()
    assert listing.entries == [] and [r for r, _ in listing.refused] == [oid]
    (u,) = vault.open_all(allow_unverified=True).entries
    assert (u.opened.trust, u.opened.authorship, u.opened.author_key_id) == (
        Trust.UNVERIFIED, Authorship.UNKNOWN, None)
    assert u.opened.claimed_author_key_id == third_party.key_id


def test_trust_add_refuses_the_owner_key_and_bad_keys(vault: UnlockedVault) -> None:
    with pytest.raises(VaultError):
        vault.trust_add(vault.identity.sign_pub)
    with pytest.raises(MalformedInput):
        vault.trust_add(b"\x01" * 31)
    assert vault.store.known_keys() == {}


def test_trust_remove_of_an_unknown_key_is_not_found(vault: UnlockedVault) -> None:
    with pytest.raises(NotFound):
        vault.trust_remove(b"\x00" * 8)


def test_a_key_cannot_vouch_for_the_owner(vault: UnlockedVault, third_party: K.SigningKey) -> None:
    """An accepted author signing under the owner's key id is refused, not read as self (§5.2)."""
    vault.trust_add(third_party.public)
    s = vault.scope(DEFAULT_SCOPE)
    owner_kid = vault.identity.key_id
    dek = K.new_key()
    so = run_sync(seal_unchecked(vault.crypto, encode_payload(Memory(content="I am you", created=1), owner_kid),
                                 signer=third_party, kid=owner_kid, object_id=random_bytes(16),
                                 scope_id=s.scope_id, dek=dek, nonce=random_bytes(12)))
    with vault.store.transaction():
        vault.store.put_object(StoredObject(so.object_id, s.scope_id, 2, so.encoded,
                                            run_sync(K.wrap_dek(vault.crypto, dek, vault.kek(s)))))
    listing = vault.open_all()
    assert [r for r, _ in listing.refused] == [so.object_id]
    (u,) = vault.open_all(allow_unverified=True).entries
    assert u.opened.trust is Trust.UNVERIFIED


# ------------------------------------------------------------------ scopes


def test_scopes(vault: UnlockedVault) -> None:
    work = vault.add_scope("work")
    assert set(vault.scopes()) == {DEFAULT_SCOPE, "work"}
    assert work.scope_id != vault.scope(DEFAULT_SCOPE).scope_id
    assert vault.kek(work) != vault.kek(vault.scope(DEFAULT_SCOPE))        # one KEK per scope (§9.1)
    with pytest.raises(VaultError):
        vault.add_scope("work")
    with pytest.raises(VaultError):
        vault.add_scope("")
    with pytest.raises(NotFound):
        vault.scope("nope")
    a = vault.add("at work", scope="work")
    b = vault.add("at home")
    scope_of = {e.id: e.scope for e in vault.open_all().entries}
    assert scope_of == {a: "work", b: DEFAULT_SCOPE}
    # an edit stays in its memory's scope
    c = vault.edit(a.hex(), content="still at work")
    assert {e.id: e.scope for e in vault.open_all().entries}[c] == "work"


def test_scope_kek_is_stored_only_wrapped(vault: UnlockedVault) -> None:
    vault.add_scope("work")
    vault.add("x", scope="work")
    disk = _disk_bytes(folder_of(vault))
    for s in vault.scopes().values():
        assert vault.kek(s) not in disk
    assert vault.identity.master not in disk and vault.identity.sign.seed not in disk
    assert vault.identity.ka_seed not in disk


# ------------------------------------------------------------------ search


def test_search(vault: UnlockedVault) -> None:
    a = vault.add("Prefers formal emails to clients", tags=("Work",))
    b = vault.add("likes formal dinners", tags=("home",))
    old = vault.add("email signature: Dr. Rossi")
    new = vault.edit(old.hex(), content="email signature: Prof. Rossi")

    def ids(q: str) -> list[bytes]:
        return [e.id for e in vault.search(q)[0]]

    assert sorted(ids("formal")) == sorted([a, b])
    assert ids("FORMAL work")[0] == a                           # both words first; content or tags; any case
    assert ids("rossi") == [new]                                # heads only
    assert sorted(ids("formal nothing")) == sorted([a, b])      # any word (ownmem.recall)
    assert ids("emailing") == [a, new] or ids("emailing") == [new, a]   # stemmed: "emails", "email"
    assert sorted(ids("")) == sorted([a, b, new])


def test_entry_json_is_the_view_the_cli_and_the_pwa_show(vault: UnlockedVault) -> None:
    """One JSON view of a listed memory (``ownmem list --json`` and the PWA's list): hex for
    bytes, the chain links, the UOMP source; it serialises as JSON as it is."""
    old = vault.add("first", tags=("a", "b"), mem_type=MemType.EPISODIC, now=1700000000,
                    extensions={"uomp": {"source": "agent"}})
    new = vault.edit(old.hex(), content="second", now=1700000100)
    by_id = {e.id: e for e in vault.open_all().entries}
    j_old, j_new = by_id[old].to_json(), by_id[new].to_json()
    assert list(j_new) == ["id", "content", "tags", "type", "confidence", "scope", "trust", "authorship",
                           "author_key_id", "created", "updated", "supersedes", "superseded_by", "source",
                           "schema_violations"]
    assert j_old == {"id": old.hex(), "content": "first", "tags": ["a", "b"], "type": "episodic", "confidence": 0.8,
                     "scope": DEFAULT_SCOPE, "trust": "self", "authorship": "signed",
                     "author_key_id": vault.identity.key_id.hex(), "created": 1700000000, "updated": None,
                     "supersedes": None, "superseded_by": [new.hex()], "source": "agent", "schema_violations": []}
    assert (j_new["supersedes"], j_new["superseded_by"], j_new["updated"]) == (old.hex(), [], 1700000100)
    assert json.loads(json.dumps(j_new)) == j_new


# ------------------------------------------------------------------ lock


def test_lock_clears_keys(tmp_path: Path) -> None:
    cp = CountingProvider()
    v = Vault.create(tmp_path / "v", PASSPHRASE, crypto=cp)
    oid = v.add("secret")
    v.open_all()
    assert v._keks and cp.inner._sign_keys
    v.lock()
    assert v.ident is None and v._keks == {}
    assert cp.forgot == 1 and cp.inner._sign_keys == {}
    for call in (lambda: v.identity, lambda: v.add("after lock"), lambda: v.open_all(),
                 lambda: v.keyring(), lambda: v.scopes(), lambda: v.forget(oid.hex())):
        with pytest.raises(VaultError, match="locked"):
            call()
    u = Vault(tmp_path / "v", crypto=cp).unlock(PASSPHRASE)
    try:
        assert [e.opened.content for e in u.open_all().entries] == ["secret"]
    finally:
        close(u)

