"""The receipt log as a verifiable log, on SQLite and on PostgreSQL alike (server/tlog_routes.py,
server/storage/tree.py).

Receipts reach the log through the real routes (registration writes a KEY receipt, /erase
FORGET receipts); what the server answers is then checked as a device would, with nothing
but the pure functions of ``ownmem.saihm.tlog``: the checkpoint's signature under the key
the server published, each receipt's inclusion proof against that checkpoint, and each new
checkpoint's consistency with the one kept before.  A server whose stored receipts are then
changed or dropped behind its back (the database edited directly, the tree rebuilt to match)
is caught by the checkpoint the device kept.
"""
from __future__ import annotations

import secrets
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from ownmem.crypto import provider, run_sync
from ownmem.saihm.notes import (
    Checkpoint,
    VerifierKey,
    check_checkpoint_consistency,
    open_checkpoint,
    parse_verifier_key,
)
from ownmem.saihm.receipt import make_receipt, parse_receipt
from ownmem.saihm.tlog import ProofFailed, check_inclusion, leaf_hash, stored_hashes, tree_hash
from ownmem.vault import UnlockedVault
from ownmem.vault.store import Store
from ownmem.vault.sync import Syncer, link
from tests.server.conftest import Backend, LinkedVault

P = provider()


# ---------------------------------------------------------------- a device's side, pure functions only


@dataclass
class LogClient:
    """What a device does with the public log: pin the key, keep checkpoints, check proofs."""

    http: httpx.Client
    base: str

    def key(self) -> VerifierKey:
        k = self.http.get(self.base + "/v1/log/key").json()
        key = parse_verifier_key(k["vkey"])
        assert (key.name, key.public_key.hex(), f"{key.key_id:08x}") == (k["origin"], k["public_key"], k["key_id"])
        return key

    def checkpoint(self, key: VerifierKey) -> Checkpoint:
        r = self.http.get(self.base + "/v1/log/checkpoint")
        assert r.status_code == 200 and r.headers["content-type"] == "text/plain; charset=utf-8", r.text
        return run_sync(open_checkpoint(P, r.text, key))

    def check_included(self, cp: Checkpoint, receipt_id: bytes) -> bytes:
        """The receipt's bytes, once its inclusion in ``cp``'s tree is proven."""
        r = self.http.get(self.base + "/v1/log/proof/inclusion", params={"receipt": receipt_id.hex(), "size": cp.size})
        assert r.status_code == 200, r.text
        p = r.json()
        e = self.http.get(self.base + f"/v1/log/entries/{p['index']}")
        assert e.status_code == 200, e.text
        receipt = bytes.fromhex(e.json()["receipt"])
        check_inclusion([bytes.fromhex(x) for x in p["proof"]], cp.size, cp.root_hash, p["index"], leaf_hash(receipt))
        assert e.json()["receipt_id"] == receipt_id.hex() and parse_receipt(receipt).receipt_id == receipt_id
        return receipt

    def check_consistent(self, old: Checkpoint, new: Checkpoint) -> None:
        r = self.http.get(self.base + "/v1/log/proof/consistency", params={"from": old.size, "to": new.size})
        proof = [bytes.fromhex(x) for x in r.json()["proof"]] if r.status_code == 200 else []
        check_checkpoint_consistency(old, new, proof)


def forget_all(lv: Any, http: httpx.Client, base: str, name: str, token: str, cell_ids: list[bytes]) -> None:
    """FORGET receipts for ``cell_ids`` through POST /erase."""
    h = lv.holder()
    receipts = [run_sync(make_receipt(lv.crypto, xi=h.xi, holder_id=h.holder_id, operation="FORGET", subject_id=c,
                                      timestamp=int(time.time()))).to_cbor().hex() for c in cell_ids]
    r = http.post(f"{base}/v1/vaults/{name}/erase", headers={"Authorization": f"Bearer {token}"},
                  json={"receipts": receipts})
    assert r.status_code == 200 and len(r.json()["erased"]) == len(cell_ids), r.text


def pushed(http: httpx.Client, syncer: Syncer, base: str, name: str) -> list[bytes]:
    from ownmem.crypto import cbor

    syncer.ensure_login()
    r = http.get(f"{base}/v1/vaults/{name}/changes?since=0&limit=5000",
                 headers={"Authorization": f"Bearer {syncer.remote.token}"})
    return [cid for _, kind, cid, cell, _ in cbor.decode(r.content)[1] if kind == "cell" and cell is not None]


# ---------------------------------------------------------------- on the shared servers


def test_receipts_are_proven_in_the_checkpointed_tree(
        linked_vault: Callable[..., LinkedVault], http: httpx.Client) -> None:
    lv = linked_vault(4)
    lv.sync()
    log = LogClient(http, lv.base)
    key = log.key()
    before = log.checkpoint(key)
    # the vault's registration logged its KEY receipt (its pushes, a REMEMBER receipt per cell); the
    # identity is shared by other vaults of the session's server, each registration with its own
    keys = http.get(lv.base + "/v1/log", params={"holder": lv.v.holder().holder_id.hex(),
                                                  "operation": "KEY", "limit": 1000}).json()["entries"]
    assert keys
    for k in keys:
        key_receipt = bytes.fromhex(k["receipt_id"])
        assert parse_receipt(log.check_included(before, key_receipt)).subject_id == lv.v.holder().holder_id

    cells = pushed(http, lv.syncer, lv.base, lv.name)[:3]
    forget_all(lv.v, http, lv.base, lv.name, lv.token, cells)
    after = log.checkpoint(key)
    assert after.size == before.size + 3 and after.origin == before.origin == key.name
    log.check_consistent(before, after)
    forgets = [bytes.fromhex(http.get(lv.base + "/v1/log", params={"subject": c.hex(), "operation": "FORGET"})
                             .json()["entries"][0]["receipt_id"])
               for c in cells]
    for rid in [key_receipt, *forgets]:
        log.check_included(after, rid)
    assert [parse_receipt(log.check_included(after, rid)).operation for rid in forgets] == ["FORGET"] * 3
    # the older head still proves the KEY receipt, and nothing logged after it
    log.check_included(before, key_receipt)
    r = http.get(lv.base + "/v1/log/proof/inclusion", params={"receipt": forgets[-1].hex(), "size": before.size})
    assert r.status_code == 400 and r.json()["error"] == "beyond_log"


def test_the_log_key_is_kept_and_the_same_for_every_request(backend: Backend, http: httpx.Client) -> None:
    log = LogClient(http, backend.url)
    assert log.key() == log.key()
    st = backend.storage()
    try:
        seed = st.log_key(secrets.token_bytes(32))
        assert st.log_key(secrets.token_bytes(32)) == seed          # generated once, then kept
    finally:
        st.close()


def test_entries_by_leaf_index_are_the_tree_in_order(
        linked_vault: Callable[..., LinkedVault], http: httpx.Client) -> None:
    lv = linked_vault(1)
    log = LogClient(http, lv.base)
    cp = log.checkpoint(log.key())
    page = http.get(lv.base + "/v1/log/entries", params={"start": max(0, cp.size - 5), "limit": 1000}).json()
    assert [e["leaf_index"] for e in page["entries"]] == list(range(max(0, cp.size - 5), cp.size))
    last = page["entries"][-1]
    assert http.get(lv.base + f"/v1/log/entries/{cp.size - 1}").json() == last
    assert http.get(lv.base + f"/v1/log/entries/{cp.size + 10}").status_code == 404


@pytest.mark.parametrize("query,code", [
    ({"index": "0", "receipt": "00" * 32}, "malformed"),
    ({}, "malformed"),
    ({"receipt": "zz"}, "malformed"),
    ({"receipt": "00" * 32}, "not_found"),
    ({"index": "-1"}, "malformed"),
    ({"index": "0", "size": "999999999999"}, "beyond_log"),
])
def test_inclusion_requests_that_cannot_be_answered(backend: Backend, http: httpx.Client, query: dict[str, str],
                                                    code: str) -> None:
    r = http.get(backend.url + "/v1/log/proof/inclusion", params=query)
    assert r.status_code in (400, 404) and r.json()["error"] == code, r.text


@pytest.mark.parametrize("query,code", [
    ({}, "malformed"), ({"from": "x"}, "malformed"), ({"from": "999999999999"}, "beyond_log"),
    ({"from": "2", "to": "1"}, "beyond_log"),
])
def test_consistency_requests_that_cannot_be_answered(backend: Backend, http: httpx.Client, query: dict[str, str],
                                                      code: str) -> None:
    r = http.get(backend.url + "/v1/log/proof/consistency", params=query)
    assert r.status_code == 400 and r.json()["error"] == code, r.text


def test_consistency_from_the_empty_tree_needs_no_proof(backend: Backend, http: httpx.Client) -> None:
    r = http.get(backend.url + "/v1/log/proof/consistency", params={"from": 0})
    assert r.status_code == 200 and r.json()["proof"] == []


# ---------------------------------------------------------------- a server of its own, tampered with


@dataclass
class OwnServer:
    kind: str
    url: str
    env: dict[str, str]

    def sql(self, statement: str, *args: Any) -> None:
        """Edit the database behind the server's back, as whoever runs it could."""
        if self.kind == "sqlite":
            with sqlite3.connect(Path(self.env["OWNMEM_DATA_DIR"]) / "ownmem.db") as c:
                c.execute(statement, args)
        else:
            import psycopg

            with psycopg.connect(self.env["OWNMEM_DATABASE_URL"]) as c:
                c.execute(statement.replace("?", "%s"), args)

    def rebuild_tree(self) -> None:
        """Cover the edit up: drop the tree and let the storage rebuild it from the log as it is now."""
        for table in ("tlog_leaves", "tlog_hashes", "tlog_head"):
            self.sql(f"DELETE FROM {table}")
        from server.storage import open_storage

        st = open_storage(self.env.get("OWNMEM_DATABASE_URL"), self.env.get("OWNMEM_DATA_DIR", "data"))
        st.close()


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    if request.param == "sqlite":
        yield "sqlite", {"OWNMEM_DATA_DIR": str(tmp_path / "data")}
        return
    import psycopg

    base = request.getfixturevalue("pg_database").rsplit("/", 1)[0]     # skips or fails as the suite's rule says
    name = f"ownmem_tlog_{secrets.token_hex(6)}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    try:
        yield "postgres", {"OWNMEM_DATABASE_URL": f"{base}/{name}"}
    finally:
        with psycopg.connect(f"{base}/postgres", autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def own_server(fresh_db: tuple[str, dict[str, str]], start_server: Callable[..., str]) -> OwnServer:
    kind, env = fresh_db
    return OwnServer(kind, start_server(env), env)


@pytest.fixture
def make_vault(own_server: OwnServer, http: httpx.Client, tmp_path: Path,
               _identities: dict[str, tuple[Path, Any]]
               ) -> Iterator[Callable[[str], tuple[UnlockedVault, Syncer, str]]]:
    made: list[UnlockedVault] = []

    def make(key: str) -> tuple[UnlockedVault, Syncer, str]:
        template, ident = _identities[key]
        folder = tmp_path / f"vault-{len(made)}"
        shutil.copytree(template, folder)
        v = UnlockedVault(Store(folder), ident, provider())
        made.append(v)
        for i in range(3):
            v.add(f"memory {i}")
        name = f"t{secrets.token_hex(6)}"
        syncer = link(v, own_server.url, name, client=http)
        syncer.sync_once()
        return v, syncer, name

    yield make
    for v in made:
        v.lock()


def _with_receipts(own_server: OwnServer, http: httpx.Client, make_vault: Any) -> tuple[LogClient, VerifierKey,
                                                                                         Checkpoint, list[bytes]]:
    """Two vaults, three FORGETs: a device's kept checkpoint, and the receipt ids in log order."""
    v, syncer, name = make_vault("a")
    make_vault("b")
    forget_all(v, http, own_server.url, name, syncer.remote.token or "", pushed(http, syncer, own_server.url, name))
    log = LogClient(http, own_server.url)
    key = log.key()
    kept = log.checkpoint(key)
    assert kept.size == 11          # per vault a KEY and three REMEMBER receipts; three FORGETs
    ids = [bytes.fromhex(e["receipt_id"]) for e in http.get(own_server.url + "/v1/log/entries").json()["entries"]]
    for rid in ids:
        log.check_included(kept, rid)
    return log, key, kept, ids


def test_a_rewritten_receipt_fails_its_inclusion_proof(
        own_server: OwnServer, http: httpx.Client,
        make_vault: Callable[[str], tuple[UnlockedVault, Syncer, str]]) -> None:
    log, key, kept, ids = _with_receipts(own_server, http, make_vault)
    victim = ids[2]
    forged = parse_receipt(log.check_included(kept, victim))
    other = bytes.fromhex(http.get(own_server.url + f"/v1/log/{ids[3].hex()}").json()["receipt"])
    own_server.sql("UPDATE log SET receipt = ? WHERE receipt_id = ?", other, forged.receipt_id)
    with pytest.raises(ProofFailed, match="does not lead to the tree head"):
        log.check_included(kept, victim)
    log.check_included(kept, ids[3])                # the others still prove


def test_a_rewritten_history_fails_consistency_with_the_kept_checkpoint(
        own_server: OwnServer, http: httpx.Client,
        make_vault: Callable[[str], tuple[UnlockedVault, Syncer, str]]) -> None:
    log, key, kept, ids = _with_receipts(own_server, http, make_vault)
    other = bytes.fromhex(http.get(own_server.url + f"/v1/log/{ids[3].hex()}").json()["receipt"])
    own_server.sql("UPDATE log SET receipt = ? WHERE receipt_id = ?", other, ids[2])
    own_server.rebuild_tree()
    forked = log.checkpoint(key)                    # validly signed: the key vouches for the server's view only
    assert forked.size == kept.size and forked.root_hash != kept.root_hash
    with pytest.raises(ProofFailed, match="fork"):
        log.check_consistent(kept, forked)
    make_vault("c")                                 # the forked log grows on
    with pytest.raises(ProofFailed):
        log.check_consistent(kept, log.checkpoint(key))


def test_a_dropped_receipt_fails_consistency_with_the_kept_checkpoint(
        own_server: OwnServer, http: httpx.Client,
        make_vault: Callable[[str], tuple[UnlockedVault, Syncer, str]]) -> None:
    log, key, kept, ids = _with_receipts(own_server, http, make_vault)
    own_server.sql("DELETE FROM log WHERE receipt_id = ?", ids[2])
    own_server.rebuild_tree()
    shrunk = log.checkpoint(key)
    assert shrunk.size == kept.size - 1
    with pytest.raises(ProofFailed):
        log.check_consistent(kept, shrunk)
    make_vault("c")                                 # grown back past the kept size, without the dropped receipt
    grown = log.checkpoint(key)
    assert grown.size >= kept.size                  # its KEY and REMEMBER receipts
    with pytest.raises(ProofFailed):
        log.check_consistent(kept, grown)
    r = http.get(own_server.url + "/v1/log/proof/inclusion", params={"receipt": ids[2].hex(), "size": kept.size})
    assert r.status_code == 404                     # and the log no longer even claims it


def test_an_honest_server_stays_consistent_across_restarts_and_receipts(
        own_server: OwnServer, http: httpx.Client,
        make_vault: Callable[[str], tuple[UnlockedVault, Syncer, str]]) -> None:
    log, key, kept, ids = _with_receipts(own_server, http, make_vault)
    own_server.rebuild_tree()                       # rebuilt from an untouched log: the same tree
    assert log.checkpoint(key) == kept
    make_vault("c")
    later = log.checkpoint(key)
    log.check_consistent(kept, later)
    for rid in ids:
        log.check_included(later, rid)


def test_two_server_processes_appending_at_once_keep_one_tree(
        own_server: OwnServer, http: httpx.Client, start_server: Callable[..., str], tmp_path: Path,
        _identities: dict[str, tuple[Path, Any]]) -> None:
    """Registrations and erasures through two processes sharing one database: the tree stays dense,
    in log order, and its head is the one a monitor rebuilds from the entries it is served."""
    urls = [own_server.url, start_server(own_server.env)]
    vaults = []
    for i in range(6):
        template, ident = _identities["abc"[i % 3]]
        folder = tmp_path / f"concurrent-{i}"
        shutil.copytree(template, folder)
        v = UnlockedVault(Store(folder), ident, provider())
        v.add(f"memory of vault {i}")
        vaults.append(v)

    def register_and_forget(i: int) -> None:
        url, name = urls[i % 2], f"c{i}{secrets.token_hex(4)}"
        # copies of one template identity: each vault's own name, asked for
        syncer = link(vaults[i], url, name, client=http, another_name=True)
        syncer.sync_once()
        forget_all(vaults[i], http, url, name, syncer.remote.token or "", pushed(http, syncer, url, name))

    try:
        with ThreadPoolExecutor(6) as pool:
            list(pool.map(register_and_forget, range(6)))
    finally:
        for v in vaults:
            v.lock()
    log = LogClient(http, own_server.url)
    cp = log.checkpoint(log.key())
    assert cp.size == 18 and LogClient(http, urls[1]).checkpoint(log.key()) == cp   # KEY, REMEMBER, FORGET each

    class Monitor:                                  # the tree rebuilt from the served entries alone
        hashes: list[bytes] = []

        def read_hashes(self, indexes: Sequence[int]) -> list[bytes]:
            return [self.hashes[i] for i in indexes]

    m = Monitor()
    entries = http.get(own_server.url + "/v1/log/entries", params={"limit": 1000}).json()["entries"]
    assert [e["leaf_index"] for e in entries] == list(range(18))
    for e in entries:
        m.hashes = m.hashes + stored_hashes(e["leaf_index"], leaf_hash(bytes.fromhex(e["receipt"])), m)
    assert tree_hash(18, m) == cp.root_hash
    listed = http.get(own_server.url + "/v1/log", params={"limit": 1000}).json()["entries"]
    assert [e["receipt_id"] for e in listed] == [e["receipt_id"] for e in entries]    # tree order is log order
