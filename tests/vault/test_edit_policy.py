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
