"""`ownmem identity rotate` (a passphrase change with the SAME passphrase and a new salt:
vault/rekey.py; docs/decisions.md "Key Rotation"), through a real server process and the CLI:
a new owner signing and key-agreement key; what the old key signed still opens as ``self`` here
and as an accepted author in the reference, none forged; what is written afterwards is signed by
the new key only; the server takes nothing signed by the old key any more; the other device
catches up with the same passphrase; the holder and sync identity stay."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import amem.vault
import pytest

from ownmem.aperto import keys as K
from ownmem.aperto.container import parse_container
from ownmem.vault import Vault
from tests.sync.synckit import PASSPHRASE, Backend, ServerProcess, cli_env, ownmem


@pytest.fixture(scope="module")
def url(sqlite_backend: Backend) -> Iterator[str]:
    s = ServerProcess(sqlite_backend, label="identity")
    try:
        yield s.start().url
    finally:
        s.stop()


def test_identity_rotation_keeps_the_past_and_signs_the_future_with_the_new_key(url: str, tmp_path: Path) -> None:
    env_a = cli_env(tmp_path / "a", tmp_path / "a" / "vault")
    env_b = cli_env(tmp_path / "b", tmp_path / "b" / "vault")

    def run(*args: str, env: dict[str, str], code: int = 0) -> str:
        r = ownmem(*args, env=env)
        assert r.returncode == code, r.stdout + r.stderr
        return r.stdout + r.stderr

    run("init", env=env_a)
    run("add", "signed by the first key", env=env_a)
    run("login", "--server", url, "--vault-name", "identity-one", env=env_a)
    run("sync", env=env_a)
    run("login", "--server", url, "--vault-name", "identity-one", env=env_b)
    v = Vault(tmp_path / "a" / "vault").unlock(PASSPHRASE)
    old_pub, holder, sync_pub = v.identity.sign_pub, v.holder().holder_id, v.sync_key().public
    v.close()

    out = run("identity", "rotate", env=env_a)
    assert f"owner key {K.key_id(old_pub).hex()} replaced by" in out and "holder identity" in out
    run("add", "signed by the new key", env=env_a)
    run("sync", env=env_a)

    v = Vault(tmp_path / "a" / "vault").unlock(PASSPHRASE)   # the same passphrase opens it
    try:
        new_pub = v.identity.sign_pub
        assert new_pub != old_pub
        assert (v.holder().holder_id, v.sync_key().public) == (holder, sync_pub)
        by_content = {e.opened.content: e.opened for e in v.open_all().entries}
        before, after = by_content["signed by the first key"], by_content["signed by the new key"]
        assert before.signer_key_id == K.key_id(old_pub) and after.signer_key_id == K.key_id(new_pub)
        assert before.trust.value == after.trust.value == "self"
        assert v.superseded() == {K.key_id(old_pub): old_pub}     # verify-only, never the owner key again
    finally:
        v.close()

    # the other device: told its passphrase no longer unlocks the new keys, takes the same one again
    assert "changed on another device" in run("sync", env=env_b, code=1)
    run("passphrase", "update", env={**env_b, "OWNMEM_NEW_PASSPHRASE": PASSPHRASE})
    run("sync", env=env_b)
    listed = json.loads(run("list", "--json", env=env_b))
    assert {m["content"]: m["trust"] for m in listed} == {"signed by the first key": "self",
                                                          "signed by the new key": "self"}
    # an export carries what a reader needs for the older objects: the old key as an accepted
    # author (known_keys) and key 6 (the root wrap and the succession record)
    run("export", str(tmp_path / "after.amem"), env=env_b)
    data = (tmp_path / "after.amem").read_bytes()
    c = parse_container(data)
    assert c.meta.sign_pub == new_pub and c.meta.known_keys[K.key_id(old_pub)] == old_pub
    amem.vault.Vault.import_file(tmp_path / "after.amem", tmp_path / "ref", PASSPHRASE)
    ok, bad = amem.vault.Vault(tmp_path / "ref").open_all(PASSPHRASE)
    assert bad == []
    trust = {o["content"]: o["trust"] for o in ok}
    assert trust["signed by the new key"] == "self" and trust["signed by the first key"] in {"self", "trusted"}
