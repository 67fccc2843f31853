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
