"""The sync client against a hostile server (DESIGN.md "The public log": a device applies an
erasure only with a FORGET receipt signed by its own holder and never lets the server lower
a metadata version).

Each test scripts one lie through ``hostile.HostileProxy``, which stands between device B
and a real server and holds every byte the real server holds.  The properties, for every
behaviour: nothing the vault's owner did not sign changes what B holds (no silent loss, no
silent un-revocation), and every refusal is visible: a typed ``SyncError`` for an answer
that cannot be used, a line in ``SyncReport.refusals`` for what was ignored.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from ownmem.aperto import keys as K
from ownmem.crypto import cbor, provider, run_sync
from ownmem.errors import SyncError, WrongPassphrase
from ownmem.saihm.cell import parse_cell
from ownmem.saihm.identity import holder_from_seed
from ownmem.saihm.receipt import make_receipt, parse_receipt
from ownmem.vault import Vault
from ownmem.vault.sync import login_new_device
from ownmem.wire import signed
from tests.sync.hostile import Answer, HostileProxy, Seen
from tests.sync.synckit import Backend, Device, Devices, ServerProcess

P = provider()
CHANGES = r"/changes$"
METADATA = r"/metadata$"


@pytest.fixture(scope="module")
def server(sqlite_backend: Backend) -> Iterator[ServerProcess]:
    s = ServerProcess(sqlite_backend, label="hostile")
    try:
        yield s.start()
    finally:
        s.stop()


@pytest.fixture
def proxy(server: ServerProcess) -> Iterator[HostileProxy]:
    p = HostileProxy(server.url).start()
    try:
        yield p
    finally:
        p.stop()


_names = iter(range(10 ** 6))


def _name() -> str:
    return f"hostile-{time.monotonic_ns() % 10 ** 9}-{next(_names)}"


def _pair(devices: Devices, server: ServerProcess, proxy: HostileProxy, *contents: str,
          timeout: float = 30.0) -> tuple[Device, Device, list[bytes]]:
    """A (straight to the real server) with ``contents`` synced; B joined through the proxy."""
    name = _name()
    a = devices.first(server.url, name)
    ids = [a.v.add(c) for c in contents]
    a.sync()
    b = devices.join(proxy.url, name, client=httpx.Client(timeout=timeout))
    assert b.contents() == set(contents)
    return a, b, ids


def _state(d: Device) -> tuple[frozenset[bytes], frozenset[bytes], frozenset[bytes], bytes | None]:
    st = d.v.store
    return (frozenset(st.object_ids()), frozenset(st.erased_ids()), frozenset(st.revoked_keys()),
            st.sync_get("pull_seq"))


def _inject(rows: list[list[object]]) -> Callable[[Seen, Answer], Answer]:
    """A rule that appends ``rows`` to the next non-empty-or-not page B pulls, once."""
    def rule(seen: Seen, ans: Answer) -> Answer:
        page = ans.page()
        last = max(page[3], page[2]) + len(rows)
        numbered = [[page[2] + i + 1, *r[1:]] for i, r in enumerate(rows)]
        return ans.with_page(rows=page[1] + numbered, next=page[2] + len(rows), last=last, more=False)
    return rule


def _cell_row(a: Device, oid: bytes) -> tuple[bytes, bytes, bytes]:
    """(cell id, cell bytes, wrapped DEK) of A's pushed object ``oid``."""
    got = a.v.store.cell_of(oid)
    assert got is not None
    row = a.v.store.get_object(oid)
    assert row is not None
    return got[0], got[1], row.dek_wrapped


def _foreign_holder_receipt(cell_id: bytes) -> bytes:
    h = run_sync(holder_from_seed(P, b"\x77" * 32))
    return run_sync(make_receipt(P, xi=h.xi, holder_id=h.holder_id, operation="FORGET", subject_id=cell_id,
                                 timestamp=int(time.time()))).to_cbor()


# ------------------------------------------------------------------ erasures the owner did not sign

def test_an_erase_row_without_a_receipt_erases_nothing(devices: Devices, server: ServerProcess,
                                                       proxy: HostileProxy) -> None:
    a, b, (m,) = _pair(devices, server, proxy, "keep me")
    cid, _, _ = _cell_row(a, m)
    proxy.on("GET", CHANGES, _inject([[0, "erase", cid, None, None]]), once=True)
    report = b.sync()
    assert b.contents() == {"keep me"} and m not in b.v.store.erased_ids()
    assert any("erase" in r for r in report.refusals)


@pytest.mark.parametrize("kind", ["foreign_holder", "other_cell", "not_forget", "garbage"])
def test_an_erase_row_with_a_receipt_the_holder_did_not_sign_for_that_cell_erases_nothing(
        devices: Devices, server: ServerProcess, proxy: HostileProxy, kind: str) -> None:
    a, b, (m, other) = _pair(devices, server, proxy, "keep me", "and me")
    cid, _, _ = _cell_row(a, m)
    other_cid, _, _ = _cell_row(a, other)
    h = a.v.holder()
    receipts: dict[str, Callable[[], bytes]] = {
        "foreign_holder": lambda: _foreign_holder_receipt(cid),
        "other_cell": lambda: a.v.forget_receipt(other_cid, int(time.time())),
        "not_forget": lambda: run_sync(make_receipt(P, xi=h.xi, holder_id=h.holder_id, operation="REMEMBER",
                                                    subject_id=cid, timestamp=int(time.time()))).to_cbor(),
        "garbage": lambda: b"\xa1\x01\x02",
    }
    receipt = receipts[kind]()
    proxy.on("GET", CHANGES, _inject([[0, "erase", cid, receipt, None]]), once=True)
    report = b.sync()
    assert b.contents() == {"keep me", "and me"}
    assert any("erase" in r for r in report.refusals)


def test_a_real_forget_still_erases_through_the_proxy(devices: Devices, server: ServerProcess,
                                                      proxy: HostileProxy) -> None:
    a, b, (m, _) = _pair(devices, server, proxy, "forget me", "keep me")
    a.v.forget(m.hex())
    a.sync()
    report = b.sync()
    assert b.contents() == {"keep me"} and m in b.v.store.erased_ids() and report.refusals == []


# ------------------------------------------------------------------ erasures the server swallows or hides

ERASE = r"/erase$"


def _eraser_behind_proxy(devices: Devices, server: ServerProcess, proxy: HostileProxy,
                         *contents: str) -> tuple[Device, Device, list[bytes]]:
    """A (the device that forgets) through the proxy, B straight to the real server."""
    name = _name()
    a = devices.first(proxy.url, name, client=httpx.Client(timeout=30.0))
    ids = [a.v.add(c) for c in contents]
    a.sync()
    b = devices.join(server.url, name, label="b")
    assert b.contents() == set(contents)
    return a, b, ids


def _cells_on_server(server: ServerProcess, cell_id: bytes) -> int:
    (n,), = server.backend.rows("SELECT count(*) FROM cells WHERE cell_id = ?", (cell_id,))
    return int(n)


def _says(refusals: list[str], cell_id: bytes, words: str) -> bool:
    return any(cell_id.hex()[:12] in r and words in r for r in refusals)


@pytest.mark.parametrize("lie", [
    {"erased": [], "already": [], "pending": False},      # nothing named: the swallowed erasure
    "names every cell",                                   # named as erased, but never logged
], ids=["answer names nothing", "answer names it but nothing is logged"])
def test_a_swallowed_erasure_stays_in_the_outbox_is_reported_and_retried_until_done(
        devices: Devices, server: ServerProcess, proxy: HostileProxy, lie: object) -> None:
    a, b, (m, _) = _eraser_behind_proxy(devices, server, proxy, "forget me", "keep me")
    cid, _, _ = _cell_row(a, m)

    def swallow(seen: Seen, ans: Answer) -> Answer:
        if lie == "names every cell":
            asked = [parse_receipt(bytes.fromhex(r)).subject_id for r in json.loads(seen.body)["receipts"]]
            return ans.with_json({"erased": [c.hex() for c in asked], "already": [], "pending": False})
        return ans.with_json(lie)

    proxy.on("POST", ERASE, swallow, forward=False)
    a.v.forget(m.hex())
    for attempt in (1, 2):
        report = a.sync()
        words = "did not confirm the erasure" if lie != "names every cell" else "not proven in the public log"
        assert _says(report.refusals, cid, words), report.refusals
        assert report.erased_remote == 0
        assert a.v.store.erase_receipt(cid) is not None, "the erasure must stay in the outbox"
        assert _cells_on_server(server, cid) == 1      # the server really did nothing
        assert sum(1 for x in proxy.seen if x.path.endswith("/erase")) == attempt   # asked again
    b.sync()
    assert b.contents() == {"forget me", "keep me"}    # the harm the refusal reports: still elsewhere

    # positive control: the next honest sync erases it on the server and on every device
    proxy.clear()
    report = a.sync()
    assert report.refusals == [] and report.erased_remote == 1
    assert a.v.store.erase_outbox() == [] and _cells_on_server(server, cid) == 0
    b.sync()
    assert b.contents() == {"keep me"} and m in b.v.store.erased_ids()
    assert a.contents() == {"keep me"}


def test_a_partial_erase_answer_keeps_what_it_left_out(devices: Devices, server: ServerProcess,
                                                       proxy: HostileProxy) -> None:
    """The server erases both, but its answer names one: the other is not taken on its word."""
    a, b, (m1, m2, _) = _eraser_behind_proxy(devices, server, proxy, "forget one", "forget two", "keep me")
    c1, c2 = _cell_row(a, m1)[0], _cell_row(a, m2)[0]

    def partial(seen: Seen, ans: Answer) -> Answer:
        got = ans.json()
        return ans.with_json({**got, "erased": [c for c in got["erased"] if c == c1.hex()],
                              "already": [c for c in got["already"] if c == c1.hex()]})

    proxy.on("POST", ERASE, partial, once=True)
    a.v.forget(m1.hex())
    a.v.forget(m2.hex())
    report = a.sync()
    assert _says(report.refusals, c2, "did not confirm the erasure") and not _says(report.refusals, c1, "erasure")
    assert [c for c, _ in a.v.store.erase_outbox()] == [c2]
    report = a.sync()                   # asked again: the server answers "already", the log proves it
    assert report.refusals == [] and a.v.store.erase_outbox() == []
    b.sync()
    assert b.contents() == {"keep me"}


def test_many_swallowed_erasures_cost_a_bounded_number_of_proofs_and_lines(
        devices: Devices, server: ServerProcess, proxy: HostileProxy) -> None:
    """Eight erasures answered "erased" and never logged: three are tried against the log and
    named, the other five are one counted line, and all eight stay in the outbox."""
    from ownmem.vault.sync import MAX_UNPROVEN

    a, _, ids = _eraser_behind_proxy(devices, server, proxy, *(f"memory {i}" for i in range(8)))

    def names_all(seen: Seen, ans: Answer) -> Answer:
        asked = [parse_receipt(bytes.fromhex(r)).subject_id.hex() for r in json.loads(seen.body)["receipts"]]
        return ans.with_json({"erased": asked, "already": [], "pending": False})

    proxy.on("POST", ERASE, names_all, forward=False)
    for m in ids:
        a.v.forget(m.hex())
    before = len(proxy.seen)
    report = a.sync()
    proofs = [x for x in proxy.seen[before:] if x.path.endswith("/proof/inclusion")]
    assert sum("not proven in the public log" in r for r in report.refusals) == MAX_UNPROVEN == 3
    assert any(r.startswith("5 more erasure(s)") for r in report.refusals), report.refusals
    assert len(proofs) <= 2 * MAX_UNPROVEN and len(a.v.store.erase_outbox()) == 8
    assert report.erased_remote == 0


@pytest.mark.parametrize("how", ["dropped", "replaced by a metadata row", "replaced by another cell row"])
def test_an_erase_row_the_feed_hides_is_found_in_the_log_applied_and_reported(
        devices: Devices, server: ServerProcess, proxy: HostileProxy, how: str) -> None:
    from ownmem.vault.logwatch import log_status

    a, b, (m, keep) = _pair(devices, server, proxy, "forget me", "keep me")
    cid, _, _ = _cell_row(a, m)
    keep_cid, keep_cell, keep_dek = _cell_row(a, keep)

    def hide(seen: Seen, ans: Answer) -> Answer:
        rows = []
        for r in ans.page()[1]:
            if r[1] == "erase" and r[2] == cid:
                if how == "dropped":
                    continue
                r = ([r[0], "meta", None, None, None] if how == "replaced by a metadata row"
                     else [r[0], "cell", keep_cid, keep_cell, keep_dek])
            rows.append(r)
        since = int(dict(q.split("=") for q in seen.query.split("&"))["since"])
        end = rows[-1][0] if rows else since      # a page that parses: it ends where its rows do
        return ans.with_page(rows=rows, next=end, last=end, more=False)

    proxy.on("GET", CHANGES, hide)
    a.v.forget(m.hex())
    assert a.sync().refusals == []
    report = b.sync()
    assert _says(report.refusals, cid, "left out the erasure"), report.refusals
    assert b.contents() == {"keep me"} and m in b.v.store.erased_ids() and b.v.store.get_object(m) is None
    assert report.erased_here == 1
    status = log_status(b.v.store)
    assert status is not None and status.problem is not None and cid.hex()[:12] in status.problem
    assert "problem: none" not in status.lines()
    if how == "dropped":        # what the person runs: `ownmem log status` says it, and exits 1
        from tests.sync.synckit import cli_env, ownmem

        shown = ownmem("log", "status", env=cli_env(b.folder.parent, b.folder, None))
        assert shown.returncode == 1 and "PROBLEM:" in shown.stdout and cid.hex()[:12] in shown.stdout
    # the memory is gone on every device and on the server; a later sync finds nothing more
    assert a.contents() == {"keep me"} and _cells_on_server(server, cid) == 0
    again = b.sync()
    assert not _says(again.refusals, cid, "left out") and b.contents() == {"keep me"}


def test_a_server_that_refuses_the_forget_listing_is_reported_every_sync(devices: Devices, server: ServerProcess,
                                                                         proxy: HostileProxy) -> None:
    """Refusing GET /v1/log is no way around the check: each sync says it could not look, and
    the rest of the sync (pushes, the feed) goes on."""
    a, b, _ = _pair(devices, server, proxy, "m")
    proxy.on("GET", r"^/v1/log$", lambda s, ans: replace(ans, status=503, body=b"down for maintenance"))
    for _ in range(2):
        a.v.add(f"written at {time.monotonic_ns()}")
        a.sync()
        report = b.sync()
        assert report.pulled == 1
        assert any("could not read this vault's FORGET receipts" in r for r in report.refusals), report.refusals


# ------------------------------------------------------------------ metadata rollback and forks

def test_replayed_older_metadata_does_not_lift_a_revocation(devices: Devices, server: ServerProcess,
                                                            proxy: HostileProxy) -> None:
    a, b, _ = _pair(devices, server, proxy, "m")
    agent = run_sync(K.signing_key(P, b"\x42" * 32))
    a.v.trust_add(agent.public)
    a.sync()
    b.sync()
    old = proxy.last_answer("GET", METADATA)
    assert agent.key_id in b.v.store.known_keys()
    a.v.trust_remove(agent.key_id)
    a.sync()
    b.sync()
    assert agent.key_id in b.v.store.revoked_keys()
    before = _state(b)
    proxy.on("GET", METADATA, lambda s, ans: old)           # the server replays the older version
    with pytest.raises(SyncError, match="older"):
        b.sync()
    assert _state(b) == before and agent.key_id not in b.v.store.known_keys()


def test_a_second_document_for_a_version_already_seen_is_refused(devices: Devices, server: ServerProcess,
                                                                 proxy: HostileProxy) -> None:
    """A fork: the server shows this device another validly signed document under a version it
    has already seen (as if it had accepted two concurrent writes and shows each device one)."""
    a, b, _ = _pair(devices, server, proxy, "m")
    b.sync()
    seen = proxy.last_answer("GET", METADATA).json()
    version = seen["version"]
    doc = cbor.decode(bytes.fromhex(seen["metadata"]))
    doc["revoked"] = [b"\x01" * 8]                           # another history for the same version
    forked = cbor.encode(doc)
    sig = run_sync(P.ed25519_sign(a.v.identity.sign.seed, signed.metadata_message(b.remote.name, version, forked)))
    before = _state(b)
    proxy.on("GET", METADATA, lambda s, ans: ans.with_json(
        {"version": version, "metadata": forked.hex(), "signature": sig.hex()}))
    with pytest.raises(SyncError, match="fork|another document"):
        b.sync()
    assert _state(b) == before


def test_metadata_not_signed_by_the_owner_is_refused(devices: Devices, server: ServerProcess,
                                                     proxy: HostileProxy) -> None:
    a, b, _ = _pair(devices, server, proxy, "m")
    def forge(s: Seen, ans: Answer) -> Answer:
        j = ans.json()
        j["signature"] = ("00" * 64)
        return ans.with_json(j)
    proxy.on("GET", METADATA, forge)
    before = _state(b)
    with pytest.raises(SyncError, match="owner key"):
        b.sync()
    assert _state(b) == before


# ------------------------------------------------------------------ the change feed

def test_a_truncated_page_changes_nothing(devices: Devices, server: ServerProcess, proxy: HostileProxy) -> None:
    a, b, _ = _pair(devices, server, proxy, "m")
    a.v.add("new on a")
    a.sync()
    before = _state(b)
    proxy.on("GET", CHANGES, lambda s, ans: replace(ans, body=ans.body[: len(ans.body) // 2]))
    with pytest.raises(SyncError):
        b.sync()
    assert _state(b) == before


@pytest.mark.parametrize("body", [b"<html>502 Bad Gateway</html>", b"", b"\xff\xff", cbor.encode([1, 2, 3]),
                                  cbor.encode({1: "rows", 2: 0, 3: 0, 4: False})])
def test_a_page_that_is_not_a_page_changes_nothing(devices: Devices, server: ServerProcess, proxy: HostileProxy,
                                                   body: bytes) -> None:
    a, b, _ = _pair(devices, server, proxy, "m")
    before = _state(b)
    proxy.on("GET", CHANGES, lambda s, ans: replace(ans, body=body))
    with pytest.raises(SyncError):
        b.sync()
    assert _state(b) == before


def test_a_page_that_goes_backwards_is_refused(devices: Devices, server: ServerProcess,
                                               proxy: HostileProxy) -> None:
    a, b, _ = _pair(devices, server, proxy, "m")
    a.v.add("more")
    a.sync()
    b.sync()
    before = _state(b)
    proxy.on("GET", CHANGES, lambda s, ans: ans.with_page(rows=[], next=0, more=False))
    with pytest.raises(SyncError, match="backwards|position"):
        b.sync()
    assert _state(b) == before


def test_a_feed_that_never_ends_is_cut_off(devices: Devices, server: ServerProcess, proxy: HostileProxy) -> None:
    a, b, _ = _pair(devices, server, proxy, "m")
    # "more is coming", forever, and never a change: no progress
    proxy.on("GET", CHANGES, lambda s, ans: ans.with_page(rows=[], next=ans.page()[2] - len(ans.page()[1])
                                                          if ans.page()[1] else ans.page()[2],
                                                          last=ans.page()[3] + 100, more=True))
    started = time.monotonic()
    b.sync()                                   # returns: an empty page ends the pull
    assert time.monotonic() - started < 20 and b.contents() == {"m"}
    assert sum(1 for x in proxy.seen if x.path.endswith("/changes")) <= 3


def test_a_replayed_whole_feed_is_refused_and_stores_nothing_twice(devices: Devices, server: ServerProcess,
                                                                    proxy: HostileProxy) -> None:
    a, b, _ = _pair(devices, server, proxy, "one", "two")
    before = _state(b)

    def from_zero(s: Seen, ans: Answer) -> Answer:     # ignore `since`: the feed from the start
        with httpx.Client() as c:
            r = c.get(server.url + s.path, params={"since": 0, "limit": 5000},
                      headers={"authorization": s.headers["authorization"]})
        return replace(ans, body=r.content)
    proxy.on("GET", CHANGES, from_zero)
    with pytest.raises(SyncError, match="sequence"):
        b.sync()
    assert _state(b) == before and b.contents() == {"one", "two"}


def test_rows_outside_the_page_range_are_refused(devices: Devices, server: ServerProcess,
                                                 proxy: HostileProxy) -> None:
    a, b, _ = _pair(devices, server, proxy, "m")
    a.v.add("new")
    a.sync()
    before = _state(b)
    def renumber(s: Seen, ans: Answer) -> Answer:
        page = ans.page()
        return ans.with_page(rows=[[10 ** 6, *r[1:]] for r in page[1]])     # seq beyond `next`
    proxy.on("GET", CHANGES, renumber)
    with pytest.raises(SyncError):
        b.sync()
    assert _state(b) == before


# ------------------------------------------------------------------ forged and misplaced cells

def _new_on_a(a: Device, content: str) -> tuple[bytes, bytes, bytes, bytes]:
    oid = a.v.add(content)
    a.sync()
    cid, cell, wrapped = _cell_row(a, oid)
    return oid, cid, cell, wrapped


def test_a_cell_whose_contents_do_not_match_its_id_is_dropped(devices: Devices, server: ServerProcess,
                                                              proxy: HostileProxy) -> None:
    a, b, _ = _pair(devices, server, proxy, "m")
    oid, _, _, _ = _new_on_a(a, "tampered in transit")

    def tamper(s: Seen, ans: Answer) -> Answer:
        rows = []
        for r in ans.page()[1]:
            if r[1] == "cell":
                m = cbor.decode(r[3])
                m[6] = m[6][:-1] + bytes([m[6][-1] ^ 1])
                r = [r[0], r[1], r[2], cbor.encode(m), r[4]]
            rows.append(r)
        return ans.with_page(rows=rows)
    proxy.on("GET", CHANGES, tamper)
    report = b.sync()
    assert oid not in b.v.store.object_ids()
    assert any("cell" in r for r in report.refusals)


def test_a_cell_of_another_vaults_holder_is_dropped(devices: Devices, server: ServerProcess,
                                                    proxy: HostileProxy) -> None:
    a, b, _ = _pair(devices, server, proxy, "m")
    stranger = devices.first(server.url, _name(), label="x")
    oid, cid, cell, wrapped = _new_on_a(stranger, "someone else's")
    proxy.on("GET", CHANGES, _inject([[0, "cell", cid, cell, wrapped]]), once=True)
    report = b.sync()
    assert oid not in b.v.store.object_ids() and any("cell" in r for r in report.refusals)


def test_a_sealed_object_moved_under_another_cell_nonce_is_dropped(devices: Devices, server: ServerProcess,
                                                                   proxy: HostileProxy) -> None:
    """The server rebuilds a cell (it cannot sign, but the client's cheap checks do not verify the
    holder signature) around one of the vault's own authentic objects under a new nonce."""
    a, b, (m,) = _pair(devices, server, proxy, "m")
    _, cell, wrapped = _cell_row(a, m)
    c = parse_cell(cell)
    from ownmem.saihm.cell import compute_cell_id

    nonce = b"\x09" * 16
    moved = cbor.encode({1: compute_cell_id(c.kek_version, nonce, c.ciphertext), 2: c.holder_id, 3: c.kek_version,
                         4: c.tier, 5: nonce, 6: c.ciphertext, 7: c.signature, 8: c.timestamp})
    proxy.on("GET", CHANGES, _inject([[0, "cell", parse_cell(moved).cell_id, moved, wrapped]]), once=True)
    report = b.sync()
    assert nonce not in b.v.store.object_ids() and b.v.store.count() == 1
    assert any("cell" in r for r in report.refusals)


def test_an_erased_memory_is_not_resurrected_by_a_replayed_cell(devices: Devices, server: ServerProcess,
                                                               proxy: HostileProxy) -> None:
    a, b, (m,) = _pair(devices, server, proxy, "gone for good")
    cid, cell, wrapped = _cell_row(a, m)
    a.v.forget(m.hex())
    a.sync()
    b.sync()
    assert b.contents() == set()
    proxy.on("GET", CHANGES, _inject([[0, "cell", cid, cell, wrapped]]), once=True)
    b.sync()
    assert b.contents() == set() and m not in b.v.store.object_ids()


def test_swapped_wrapped_keys_make_objects_refuse_to_open_visibly(devices: Devices, server: ServerProcess,
                                                                  proxy: HostileProxy) -> None:
    name = _name()
    a = devices.first(server.url, name)
    x, y = a.v.add("x"), a.v.add("y")
    a.sync()
    (_, _, wx), (_, _, wy) = _cell_row(a, x), _cell_row(a, y)

    def swap(s: Seen, ans: Answer) -> Answer:
        rows = [[r[0], r[1], r[2], r[3], {wx: wy, wy: wx}.get(r[4], r[4])] for r in ans.page()[1]]
        return ans.with_page(rows=rows)
    proxy.on("GET", CHANGES, swap)
    b = devices.join(proxy.url, name)
    listing = b.listing()
    assert listing.entries == [] and {oid for oid, _ in listing.refused} == {x, y}


def test_a_replacement_cell_not_made_by_the_holder_does_not_replace_an_object(
        devices: Devices, server: ServerProcess, proxy: HostileProxy) -> None:
    """Same cellNonce, new contents: only a cell the vault's holder signed may replace an object
    (as migration does); a server-built one is dropped."""
    a, b, (m,) = _pair(devices, server, proxy, "original")
    _, cell, wrapped = _cell_row(a, m)
    other = a.v.add("other text")
    a.sync()
    _, ocell, owrapped = _cell_row(a, other)
    oc, c = parse_cell(ocell), parse_cell(cell)
    from ownmem.saihm.cell import compute_cell_id

    forged = cbor.encode({1: compute_cell_id(c.kek_version, c.cell_nonce, oc.ciphertext), 2: c.holder_id,
                          3: c.kek_version, 4: c.tier, 5: c.cell_nonce, 6: oc.ciphertext, 7: c.signature,
                          8: c.timestamp})
    proxy.on("GET", CHANGES, _inject([[0, "cell", parse_cell(forged).cell_id, forged, owrapped]]), once=True)
    b.sync()
    kept = b.v.store.get_object(m)
    assert kept is not None and kept.sealed == parse_cell(cell).ciphertext


# ------------------------------------------------------------------ answers a client must not follow

def test_a_redirect_is_not_followed(devices: Devices, server: ServerProcess, proxy: HostileProxy) -> None:
    a, b, _ = _pair(devices, server, proxy, "m")
    proxy.on("GET", CHANGES, lambda s, ans: Answer(307, {"location": "http://127.0.0.1:9/steal"}, b""))
    before = _state(b)
    with pytest.raises(SyncError):
        b.sync()
    assert _state(b) == before


def test_a_500_with_a_traceback_is_one_sync_error(devices: Devices, server: ServerProcess,
                                                  proxy: HostileProxy) -> None:
    a, b, _ = _pair(devices, server, proxy, "m")
    proxy.on("GET", CHANGES, lambda s, ans: Answer(500, {"content-type": "text/plain"},
                                                   b"Traceback (most recent call last):\n  File ..."))
    with pytest.raises(SyncError) as e:
        b.sync()
    assert "Traceback" not in str(e.value)


def test_a_hanging_server_times_out_and_changes_nothing(devices: Devices, server: ServerProcess,
                                                        proxy: HostileProxy) -> None:
    a, b, _ = _pair(devices, server, proxy, "m", timeout=1.0)

    def hang(s: Seen, ans: Answer) -> Answer:
        time.sleep(3)
        return ans
    proxy.on("GET", CHANGES, hang, once=True)
    before = _state(b)
    with pytest.raises(SyncError, match="reach"):
        b.sync()
    assert _state(b) == before


# ------------------------------------------------------------------ a new device's login

def test_a_lookup_that_serves_another_vaults_keys_fails_the_login(devices: Devices, server: ServerProcess,
                                                                   proxy: HostileProxy, tmp_path: Path) -> None:
    mine, theirs = _name(), _name()
    devices.first(server.url, mine)
    devices.first(server.url, theirs, label="t", passphrase="another vault: eleven quiet herons")
    with httpx.Client() as c:
        other = c.get(f"{server.url}/v1/vaults/{theirs}").json()
    proxy.on("GET", rf"/v1/vaults/{mine}$", lambda s, ans: ans.with_json({**other, "name": mine}))
    with pytest.raises(WrongPassphrase):
        login_new_device(tmp_path / "new", proxy.url, mine, "sync tests: blue walrus sings at dawn 41")
    assert not Vault(tmp_path / "new").exists()


@pytest.mark.parametrize("mangle", ["salt_not_hex", "salt_short", "missing_owner", "not_json"])
def test_a_malformed_lookup_is_one_sync_error_and_creates_nothing(devices: Devices, server: ServerProcess,
                                                                  proxy: HostileProxy, tmp_path: Path,
                                                                  mangle: str) -> None:
    name = _name()
    devices.first(server.url, name)

    def rule(s: Seen, ans: Answer) -> Answer:
        j = ans.json()
        if mangle == "not_json":
            return replace(ans, body=b"<html>")
        if mangle == "salt_not_hex":
            j["salt"] = "zz" * 16
        elif mangle == "salt_short":
            j["salt"] = "00" * 4
        else:
            del j["owner_pub"]
        return ans.with_json(j)
    proxy.on("GET", rf"/v1/vaults/{name}$", rule)
    with pytest.raises(SyncError):
        login_new_device(tmp_path / "new", proxy.url, name, "sync tests: blue walrus sings at dawn 41")
    assert not Vault(tmp_path / "new").exists()


def test_a_migrated_object_reaches_every_device_and_its_v1_cell_is_erased(
        devices: Devices, server: ServerProcess, proxy: HostileProxy) -> None:
    """The counterpart of the refusal above: the holder's own replacement cell (migration re-seals
    an object in place) does replace, on every device, and the v1 cell leaves the server."""
    from ownmem.aperto.model import Memory
    from ownmem.aperto.payload import encode_payload
    from ownmem.aperto.seal import seal_unchecked
    from ownmem.crypto import random_bytes
    from ownmem.vault import migrate_vault
    from ownmem.vault.store import StoredObject

    name = _name()
    a = devices.first(server.url, name)
    s, dek = a.v.scope("default"), K.new_key()
    owner = a.v.identity.sign
    so = run_sync(seal_unchecked(P, encode_payload(Memory(content="written by v0.1", created=1600000000),
                                                   owner.key_id),
                                 signer=owner, kid=owner.key_id, object_id=random_bytes(16), scope_id=s.scope_id,
                                 dek=dek, nonce=random_bytes(12), format_version=1))
    with a.v.store.transaction():
        a.v.store.put_object(StoredObject(so.object_id, s.scope_id, 1, so.encoded,
                                          run_sync(K.wrap_dek(P, dek, a.v.kek(s)))))
    a.sync()
    old_cid = _cell_row(a, so.object_id)[0]
    b = devices.join(proxy.url, name)
    old = b.v.store.get_object(so.object_id)
    assert old is not None and old.format_version == 1
    assert migrate_vault(a.v).migrated == [so.object_id.hex()]
    a.sync()
    report = b.sync()
    got = b.v.store.get_object(so.object_id)
    assert got is not None and got.format_version == 2 and report.refusals == []
    assert b.contents() == {"written by v0.1"} and so.object_id not in b.v.store.erased_ids()
    assert server.backend.rows("SELECT count(*) FROM cells WHERE cell_id = ?", (old_cid,)) == [(0,)]


def test_the_cli_shows_what_it_refused(devices: Devices, server: ServerProcess, proxy: HostileProxy,
                                       tmp_path: Path) -> None:
    from tests.sync.synckit import PASSPHRASE, cli_env, ownmem

    name = _name()
    a = devices.first(server.url, name)
    m = a.v.add("the CLI keeps this")
    a.sync()
    cid, _, _ = _cell_row(a, m)
    env = cli_env(tmp_path, tmp_path / "cli-vault", PASSPHRASE)
    assert ownmem("login", "--server", proxy.url, "--vault-name", name, env=env).returncode == 0
    proxy.on("GET", CHANGES, _inject([[0, "erase", cid, None, None]]), once=True)
    r = ownmem("sync", env=env)
    assert r.returncode == 0 and "warning: the server asked to erase" in r.stdout
    assert "the CLI keeps this" in ownmem("list", env=env).stdout
