"""An edit re-signs under the owner key, so it may only rewrite the owner's own memories."""
from __future__ import annotations

from pathlib import Path

import pytest

from ownmem.aperto import keys as K
from ownmem.aperto.model import Memory, Trust
from ownmem.aperto.seal import seal
from ownmem.crypto import provider, run_sync
from ownmem.errors import VaultError
from ownmem.vault import Vault
from ownmem.vault.store import StoredObject
from ownmem.vault.vault import UnlockedVault

P = provider()


def test_editing_a_trusted_authors_memory_cannot_launder_it_into_self(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", "pw")
    friend = run_sync(K.signing_key(P, b"\x05" * 32))
    v.trust_add(friend.public)
    s = v.scope("default")
    dek = K.new_key()
    so = run_sync(seal(P, Memory(content="the friend's note", created=1), signer=friend, scope_id=s.scope_id,
                       dek=dek))
    with v.store.transaction():
        v.store.put_object(StoredObject(so.object_id, so.scope_id, 2, so.encoded,
                                        run_sync(K.wrap_dek(P, dek, v.kek(s)))))
    assert v.resolve(so.object_id.hex()).opened.trust is Trust.TRUSTED
    before = v.store.count()
    with pytest.raises(VaultError):
        v.edit(so.object_id.hex(), tags=["mine now"])
    assert v.store.count() == before
    assert all(e.opened.trust is not Trust.SELF or e.opened.content != "the friend's note"
               for e in v.open_all().entries)


def test_resolving_a_conflict_leaves_one_head_and_loses_no_version(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", "pw")
    root = v.add("original")
    a = v.edit(root.hex(), content="version A")
    b = v.edit(root.hex(), content="version B")
    (group,) = v.open_all().conflicts()
    assert {e.id for e in group} == {a, b}
    kept = v.resolve_conflict(b.hex())
    listing = v.open_all()
    assert listing.conflicts() == []
    heads = listing.heads()
    assert [h.opened.content for h in heads] == ["version B"] and heads[0].id == kept
    assert {e.id for e in listing.entries} == {root, a, b, kept}
    with pytest.raises(VaultError):
        v.resolve_conflict(kept.hex())
    assert len(v.forget(kept.hex())) == 4      # forget still reaches every version


def _plant(v: UnlockedVault, signer: K.SigningKey, content: str, extensions: dict[str, object]) -> bytes:
    """An object sealed by ``signer`` (not the owner) into the vault's default scope, as sync
    or an import would store it."""
    s = v.scope("default")
    dek = K.new_key()
    so = run_sync(seal(P, Memory(content=content, created=2, extensions=extensions), signer=signer,
                       scope_id=s.scope_id, dek=dek))
    with v.store.transaction():
        v.store.put_object(StoredObject(so.object_id, so.scope_id, 2, so.encoded,
                                        run_sync(K.wrap_dek(P, dek, v.kek(s)))))
    return so.object_id


def test_a_co_author_cannot_supersede_and_so_hide_the_owners_memory(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", "pw")
    friend = run_sync(K.signing_key(P, b"\x05" * 32))
    v.trust_add(friend.public)
    mine = v.add("the owner's own memory")
    theirs = _plant(v, friend, "replaced by the co-author", {"supersedes": mine})
    listing = v.open_all()
    assert {h.id for h in listing.heads()} == {mine, theirs}          # nothing hidden
    assert listing.ignored_links == [(theirs, mine, "signed by another author than the version it claims to replace")]
    assert listing.conflicts() == []


def test_a_co_author_cannot_merge_away_the_owners_memory(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", "pw")
    friend = run_sync(K.signing_key(P, b"\x05" * 32))
    v.trust_add(friend.public)
    mine = v.add("the owner's own memory")
    theirs = _plant(v, friend, "merged", {"merges": [mine]})
    assert {h.id for h in v.open_all().heads()} == {mine, theirs}


def test_forgetting_a_co_authors_object_does_not_erase_the_owners_memory(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", "pw")
    friend = run_sync(K.signing_key(P, b"\x05" * 32))
    v.trust_add(friend.public)
    mine = v.add("the owner's own memory")
    theirs = _plant(v, friend, "bait", {"supersedes": mine})
    assert v.forget(theirs.hex()) == [theirs]
    assert v.resolve(mine.hex()).opened.content == "the owner's own memory"


def test_a_co_author_may_supersede_their_own_memory_and_the_owner_anyones(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", "pw")
    friend = run_sync(K.signing_key(P, b"\x05" * 32))
    v.trust_add(friend.public)
    first = _plant(v, friend, "friend v1", {})
    second = _plant(v, friend, "friend v2", {"supersedes": first})
    owner_over_friend = _plant(v, v.identity.sign, "owner settles it", {"supersedes": second})
    listing = v.open_all()
    assert [h.id for h in listing.heads()] == [owner_over_friend] and listing.ignored_links == []
    assert set(v.forget(owner_over_friend.hex())) == {first, second, owner_over_friend}
