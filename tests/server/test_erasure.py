"""Erasure that really erases (DESIGN.md "One memory, three views"; server/storage/scrub.py).

The attacker here takes the server's disk after a memory was forgotten and looks for the
wrapped DEK and the cell anywhere in the database's files: SQLite's file, -wal and -shm;
PostgreSQL's files of that database (heap, TOAST, indexes).  A reader holds a read
transaction open across the erase, the case that left the DEK in ``ownmem.db-wal`` and
stalled every vault's writers for 30 s.  While the bytes may still be on disk the erase
answer says ``pending``; once it says otherwise, none of them is left.  pg_wal is not
searched: docs/decisions.md ("What the server cannot erase") says what it keeps and why.
"""
from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from ownmem.crypto import cbor
from server.storage.postgres import PostgresStorage
from tests.server.conftest import Backend, LinkedVault
from tests.server.storekit import Needles, Store, cell_windows, forget, random_cells, registration, stocked, wait_until

FAST = 2.0      # seconds: "does not wait" (the busy timeout was 30 s)


def _erase(http: httpx.Client, lv: Any, cell_id: bytes) -> dict[str, Any]:
    """POST a FORGET receipt for ``cell_id``: the first time it erases, later it asks whether bytes are pending."""
    r = http.post(lv.url("/erase"), headers=lv.auth(), json={"receipts": [lv.receipt("FORGET", cell_id).hex()]})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def _traces(cell: bytes, wrapped_dek: bytes) -> Needles:
    return Needles({"wrapped DEK": [wrapped_dek], "cell": cell_windows(cell)})


def test_forgotten_memory_leaves_no_byte_in_any_database_file(
        backend: Backend, linked_vault: Callable[..., LinkedVault], http: httpx.Client) -> None:
    lv = linked_vault(12)
    lv.sync()
    store = Store.of(backend)
    oid, kept_oid = sorted(lv.v.store.object_ids())[5:7]
    cell_id, cell = lv.v.store.cell_of(oid) or (b"", b"")
    doomed = _traces(cell, (lv.v.store.get_object(oid) or pytest.fail("no object")).dek_wrapped)
    kept = Needles({"kept wrapped DEK": [(lv.v.store.get_object(kept_oid) or pytest.fail("no object")).dek_wrapped]})
    # positive control: the search sees the bytes where the server keeps them
    before = doomed.found_in(store.files())
    assert any(h.startswith("wrapped DEK in") for h in before) and sum(h.startswith("cell in") for h in before)

    with store.reader():
        lv.v.forget(oid.hex())
        started = time.monotonic()
        assert lv.sync().erased_remote == 1
        assert time.monotonic() - started < FAST
        status = _erase(http, lv, cell_id)
        assert status["already"] == [cell_id.hex()] and status["pending"] is True
        # pending is no formality: the old bytes are still there while the reader holds them
        assert doomed.found_in(store.files())

    assert wait_until(lambda: _erase(http, lv, cell_id)["pending"] is False), "physical erasure never finished"
    after = store.files()
    assert doomed.found_in(after) == []
    assert kept.found_in(after), "the search must still see what the server keeps"


def test_erase_never_makes_another_vault_wait(backend: Backend, linked_vault: Callable[..., LinkedVault]) -> None:
    """With a reader holding the database, vault A's erase and vault B's pushes answer at once."""
    a, b = linked_vault(3), linked_vault(0, key="b")
    a.sync()
    (cell_id, _), = [a.v.store.cell_of(o) or (b"", b"") for o in sorted(a.v.store.object_ids())[:1]]
    receipt, a_auth, b_auth = a.receipt("FORGET", cell_id).hex(), a.auth(), b.auth()
    took: dict[str, float] = {}
    answers: list[httpx.Response] = []

    def erase() -> None:
        with httpx.Client(timeout=60.0) as c:
            t = time.monotonic()
            answers.append(c.post(a.url("/erase"), headers=a_auth, json={"receipts": [receipt]}))
            took["erase"] = time.monotonic() - t

    with Store.of(backend).reader(), httpx.Client(timeout=60.0) as c:
        eraser = threading.Thread(target=erase)
        eraser.start()
        time.sleep(0.2)           # the erase is under way (it used to be, for 30 s)
        for i in range(3):
            b.v.add(f"written while another vault erases, {i}")
            t = time.monotonic()
            r = c.post(b.url("/cells"), content=cbor.encode(b.cells()),
                       headers={**b_auth, "Content-Type": "application/cbor"})
            took[f"push {i}"] = time.monotonic() - t
            assert r.status_code == 200 and r.json()["stored"] == 1, r.text
        eraser.join(60)
    assert answers and answers[0].json()["erased"] == [cell_id.hex()], answers
    assert max(took.values()) < FAST, took


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_erasure_left_pending_by_one_process_is_finished_by_the_next(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A process that stops with an erasure pending does not lose it: the next one finishes it."""
    store = Store.fresh(kind, tmp_path, request)
    st, vault, cells = stocked(store, 6)
    try:
        doomed = _traces(cells[2].cell, cells[2].wrapped_dek)
        assert doomed.found_in(store.files())
        with store.reader():
            assert st.erase(vault.id, [cells[2].cell_id], [forget(vault, cells[2].cell_id)], int(time.time()))
            assert st.erasure_pending(vault.id)
            st.close()
            st = store.open()                 # another process, the reader still holding
            assert st.erasure_pending(vault.id)
        assert wait_until(lambda: not st.erasure_pending(vault.id))
        assert doomed.found_in(store.files()) == []
    finally:
        st.close()


def test_cells_stored_before_partitioning_are_kept_and_erasable(pg_database: str) -> None:
    """A PostgreSQL database made before ``cells`` was partitioned by vault is migrated on open."""
    server = pg_database.rsplit("/", 1)[0]      # the session's database tells where PostgreSQL is
    name = f"ownmem_legacy_{secrets.token_hex(6)}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = f"{server}/{name}"
    try:
        reg = registration()
        cells = random_cells(3)
        with psycopg.connect(url) as c:     # the schema of the release before, as it created it
            c.execute("CREATE TABLE vaults (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE, salt BYTEA NOT NULL, "
                      "owner_pub BYTEA NOT NULL, sync_pub BYTEA NOT NULL, ka_pub BYTEA NOT NULL, "
                      "holder_pub BYTEA NOT NULL, holder_id BYTEA NOT NULL, last_seq BIGINT NOT NULL DEFAULT 0, "
                      "meta_version BIGINT NOT NULL, metadata BYTEA NOT NULL, metadata_sig BYTEA NOT NULL)")
            c.execute("CREATE TABLE cells (vault_id BIGINT NOT NULL, cell_id BYTEA NOT NULL, object_id BYTEA NOT NULL, "
                      "seq BIGINT NOT NULL, cell BYTEA NOT NULL, wrapped_dek BYTEA NOT NULL, "
                      "PRIMARY KEY (vault_id, cell_id))")
            c.execute("CREATE INDEX cells_object ON cells (vault_id, object_id)")
            vid = c.execute("INSERT INTO vaults (name, salt, owner_pub, sync_pub, ka_pub, holder_pub, holder_id, "
                            "last_seq, meta_version, metadata, metadata_sig) VALUES (%s,%s,%s,%s,%s,%s,%s,3,1,%s,%s) "
                            "RETURNING id", (reg.name, reg.salt, reg.owner_pub, reg.sync_pub, reg.ka_pub,
                                             reg.holder_pub, reg.holder_id, reg.metadata, reg.metadata_sig)).fetchone()
            for i, x in enumerate(cells):
                c.execute("INSERT INTO cells VALUES (%s,%s,%s,%s,%s,%s)",
                          (vid[0] if vid else 0, x.cell_id, x.object_id, i + 1, x.cell, x.wrapped_dek))
        st = PostgresStorage(url)
        try:
            vault = st.vault(reg.name)
            assert vault is not None
            with psycopg.connect(url) as c:
                kinds: dict[str, str] = dict(c.execute("SELECT relname, relkind::text FROM pg_class "
                                       "WHERE relname IN ('cells', 'cells_unpartitioned', %s)",
                                       (f"cells_v{vault.id}",)).fetchall())
            assert kinds == {"cells": "p", f"cells_v{vault.id}": "r"}
            snap = st.export_snapshot(vault.id)
            assert snap.count == 3 and {r[0] for r in snap.page(b"", 10)} == {x.object_id for x in cells}
            snap.close()
            doomed = _traces(cells[0].cell, cells[0].wrapped_dek)
            assert st.erase(vault.id, [cells[0].cell_id], [forget(vault, cells[0].cell_id)], int(time.time()))
            assert wait_until(lambda: not st.erasure_pending(vault.id))
            assert doomed.found_in(Store("postgres", url).files()) == []
        finally:
            st.close()
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


# ------------------------------------------------------------------ a FORGET for another vault's cell

def _forget_status(http: httpx.Client, lv: Any, cell_ids: list[bytes]) -> httpx.Response:
    return http.post(lv.url("/erase"), headers=lv.auth(),
                     json={"receipts": [lv.receipt("FORGET", c).hex() for c in cell_ids]})


def _held(lv: Any) -> set[bytes]:
    """The cellIds the server's feed shows ``lv`` still holding."""
    rows = lv.changes()[1]
    gone = {r[2] for r in rows if r[1] == "erase"}
    return {r[2] for r in rows if r[1] == "cell"} - gone


@pytest.mark.parametrize("whose", ["held by the other vault", "erased by the other vault",
                                   "only announced (REMEMBER logged, not pushed yet)"])
def test_a_forget_by_one_vault_for_another_holders_cell_is_refused_and_changes_nothing(
        backend: Backend, linked_vault: Callable[..., LinkedVault], http: httpx.Client, whose: str) -> None:
    """Vault A signs a FORGET for vault B's cell (B's cellIds are public: the log lists B's
    REMEMBER and FORGET receipts): refused with wrong_holder, and nothing of either vault changes,
    not the feed, the log or the public erasure list; A's own cell in the same batch stays too."""
    a, b = linked_vault(2), linked_vault(2, key="b")
    a.sync()
    b.sync()
    own = sorted(_held(a))[0]
    if whose == "held by the other vault":
        target = sorted(_held(b))[0]
    elif whose == "erased by the other vault":
        oid = sorted(b.v.store.object_ids())[0]
        target = (b.v.store.cell_of(oid) or pytest.fail("no cell"))[0]
        b.v.forget(oid.hex())
        assert b.sync().erased_remote == 1
    else:
        target = secrets.token_bytes(32)
        r = http.post(b.url("/receipts"), headers=b.auth(), json={"receipts": [b.receipt("REMEMBER", target).hex()]})
        assert r.status_code == 200, r.text
    before = a.snapshot(), b.snapshot()

    for batch in ([target], [own, target]):
        r = _forget_status(http, a, batch)
        assert r.status_code == 400 and r.json()["error"] == "wrong_holder", r.text
        assert "another holder" in r.json()["message"]

    assert (a.snapshot(), b.snapshot()) == before
    assert own in _held(a)
    assert not [e for e in a.public_list("/v1/log", subject=target.hex()) if e["operation"] == "FORGET"
                and e["holder_id"] == a.v.holder().holder_id.hex()]
    assert not [e for e in a.public_list("/v1/erasures") if e["cell_id"] == target.hex()
                and e["holder_id"] == a.v.holder().holder_id.hex()]


def test_the_refusal_is_narrow_own_cells_unknown_cells_and_a_twin_vaults_cells_are_erased(
        backend: Backend, linked_vault: Callable[..., LinkedVault], http: httpx.Client) -> None:
    """The positive control: a vault erases its own cell, an unknown cellId (a push may still be
    on its way), and a cell of another vault of the same holder (the person's own keys, under two
    names); each answer names the cell and the log holds its FORGET."""
    a, twin = linked_vault(2), linked_vault(1, key="a")
    a.sync()
    twin.sync()
    own, unknown, twins = sorted(_held(a))[0], secrets.token_bytes(32), sorted(_held(twin))[0]
    r = _forget_status(http, a, [own, unknown, twins])
    assert r.status_code == 200, r.text
    assert set(r.json()["erased"]) == {own.hex(), unknown.hex(), twins.hex()}
    assert own not in _held(a) and twins in _held(twin)       # the twin's copy is the twin's to erase
    for cid in (own, unknown, twins):
        assert [e for e in a.public_list("/v1/log", subject=cid.hex()) if e["operation"] == "FORGET"]
