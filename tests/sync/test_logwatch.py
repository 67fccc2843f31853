"""A device's watch over the public log (ownmem.vault.logwatch; DESIGN.md "The public log").

From the attacker's side: a real server, and a ``HostileProxy`` before it that holds every
byte the server holds, the log key included (``logkit.ForgedLog`` signs with it).  Each lie
-- a rewritten entry, a dropped one, a swapped log key, a bad or missing proof, a checkpoint
that does not verify, a forked view for one device, a forged witness -- must be caught by
a device's sync: a refusal in the report, the kept checkpoint unchanged, the problem
remembered (``log_status``) until a later check passes.  The decisions themselves are pure
functions, tested first on in-memory trees.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ownmem.crypto import provider, run_sync
from ownmem.saihm import notes, tlog
from ownmem.vault import logrules as LR, logwatch as LW
from ownmem.vault.logwatch import log_status
from ownmem.wire import publiclog, signed
from tests.sync.hostile import Answer, HostileProxy, Seen
from tests.sync.logkit import ForgedLog, MemTree, bad_proof, log_key, real_entries, swapped_key
from tests.sync.synckit import Backend, Device, Devices, ServerProcess

P = provider()
WITNESSES = r"/witnesses$"


# ------------------------------------------------------------------ the decisions, pure

def _cp(t: MemTree, size: int | None = None, origin: str = "ownmem.log/test") -> notes.Checkpoint:
    n = t.size if size is None else size
    return notes.Checkpoint(origin, n, t.root(n))


def _proof(t: MemTree, old: int, new: int) -> publiclog.LogConsistency:
    return publiclog.LogConsistency(old, new, tuple(tlog.prove_consistency(old, new, t)))


ENTRIES = [f"receipt {i}".encode() for i in range(20)]


def test_a_grown_log_with_its_proof_advances() -> None:
    t = MemTree(ENTRIES)
    assert LR.consistency_needed(_cp(t, 7), _cp(t)) == (7, 20)
    assert LR.advance_problem(_cp(t, 7), _cp(t), _proof(t, 7, 20)) is None
    assert LR.advance_problem(None, _cp(t), None) is None                      # nothing kept: first use
    assert LR.advance_problem(_cp(t, 20), _cp(t), None) is None                # no growth, same head
    empty = notes.Checkpoint("ownmem.log/test", 0, tlog.EMPTY_HASH)
    assert LR.consistency_needed(empty, _cp(t)) is None and LR.advance_problem(empty, _cp(t), None) is None


def test_what_must_not_advance_the_kept_checkpoint() -> None:
    t = MemTree(ENTRIES)
    rewritten = MemTree(ENTRIES[:3] + [b"another receipt"] + ENTRIES[4:])
    dropped = MemTree(ENTRIES[:3] + ENTRIES[4:])
    kept = _cp(t, 10)
    assert "shrank" in (LR.advance_problem(kept, _cp(t, 9), None) or "")
    assert "different root at the same size" in (LR.advance_problem(kept, _cp(rewritten, 10), None) or "")
    assert "no consistency proof" in (LR.advance_problem(kept, _cp(t), None) or "")
    assert "other tree sizes" in (LR.advance_problem(kept, _cp(t), _proof(t, 9, 20)) or "")
    # a rewritten or dropped history can only offer proofs of its own tree: none leads to the kept head
    assert "does not extend" in (LR.advance_problem(kept, _cp(rewritten), _proof(rewritten, 10, 20)) or "")
    assert "does not extend" in (LR.advance_problem(kept, _cp(dropped), _proof(dropped, 10, 19)) or "")
    good = _proof(t, 10, 20)
    broken = publiclog.LogConsistency(10, 20, (bytes(32),) + good.proof[1:])
    assert "does not extend" in (LR.advance_problem(kept, _cp(t), broken) or "")
    assert "another log" in (LR.advance_problem(kept, _cp(t, origin="ownmem.log/other"), good) or "")


def test_a_pinned_key_is_never_replaced() -> None:
    a, b = log_key(b"\x01" * 32).verifier, log_key(b"\x02" * 32).verifier
    assert LR.key_change(None, a) is None and LR.key_change(a, a) is None
    assert "changed" in (LR.key_change(a, b) or "")


def test_two_devices_views_are_one_log_only_if_one_extends_the_other() -> None:
    t = MemTree(ENTRIES)
    fork = MemTree([b"forked"] + ENTRIES[1:])
    assert LR.witness_proof_needed(_cp(t, 12), _cp(t, 5)) == (5, 12)
    assert LR.witness_proof_needed(_cp(t, 5), _cp(t, 5)) is None
    assert LR.witness_problem(_cp(t, 12), _cp(t, 5), _proof(t, 5, 12), "dev") is None
    assert LR.witness_problem(_cp(t, 5), _cp(t, 12), _proof(t, 5, 12), "dev") is None
    assert "forked" in (LR.witness_problem(_cp(t, 8), _cp(fork, 8), None, "dev") or "")
    # the server can prove its real tree, or the forked one, but not one against the other
    assert "forked" in (LR.witness_problem(_cp(t, 12), _cp(fork, 5), _proof(t, 5, 12), "dev") or "")
    assert "forked" in (LR.witness_problem(_cp(t, 12), _cp(fork, 5), _proof(fork, 5, 12), "dev") or "")
    assert "no consistency proof" in (LR.witness_problem(_cp(t, 12), _cp(t, 5), None, "dev") or "")


def test_an_inclusion_proof_must_lead_to_the_kept_head() -> None:
    t = MemTree(ENTRIES)
    cp = _cp(t)
    proof = publiclog.LogInclusion(4, 20, tuple(tlog.prove_inclusion(20, 4, t)))
    assert LR.inclusion_problem(cp, ENTRIES[4], proof) is None
    assert LR.inclusion_problem(cp, b"another receipt", proof) is not None
    assert LR.inclusion_problem(cp, ENTRIES[4], publiclog.LogInclusion(5, 20, proof.proof)) is not None
    assert LR.inclusion_problem(cp, ENTRIES[4], publiclog.LogInclusion(4, 19, proof.proof)) is not None
    assert LR.inclusion_problem(cp, ENTRIES[4], None) is not None


# ------------------------------------------------------------------ servers, proxies, devices

@pytest.fixture(scope="module")
def server(sqlite_backend: Backend) -> Iterator[ServerProcess]:
    s = ServerProcess(sqlite_backend, label="logwatch")
    try:
        yield s.start()
    finally:
        s.stop()


@pytest.fixture(scope="module")
def any_server(backend: Backend) -> Iterator[ServerProcess]:
    """The server on each backend in turn (the witness routes store on both)."""
    s = ServerProcess(backend, label="logwatch-any")
    try:
        yield s.start()
    finally:
        s.stop()


@pytest.fixture
def proxies(server: ServerProcess) -> Iterator[list[HostileProxy]]:
    made: list[HostileProxy] = []
    yield made
    for p in made:
        p.stop()


def _proxy(made: list[HostileProxy], upstream: str) -> HostileProxy:
    p = HostileProxy(upstream).start()
    made.append(p)
    return p


_n = iter(range(10 ** 6))


def _name() -> str:
    return f"logwatch-{time.monotonic_ns() % 10 ** 9}-{next(_n)}"


def _seed(backend: Backend, server: ServerProcess) -> bytes:
    """The server's log key, read from its store as whoever runs it could (made on first use)."""
    httpx.get(server.url + "/v1/log/key").raise_for_status()
    (seed,), = backend.rows("SELECT seed FROM tlog_key")
    return bytes(seed)


def _grow(d: Device, n: int = 1) -> None:
    """Receipts appended to the log: ``n`` memories added and forgotten by device ``d``."""
    ids = [d.v.add(f"to forget {i} {time.monotonic_ns()}") for i in range(n)]
    d.sync()
    for oid in ids:
        d.v.forget(oid.hex())
    d.sync()


def _kept(d: Device) -> bytes | None:
    return d.v.store.sync_get(LW.CHECKPOINT)


def _kept_size(d: Device) -> int:
    """The size of the checkpoint the device keeps (it has checked the log at least once)."""
    cp = LW.kept_checkpoint(d.v.store)
    assert cp is not None, "no checkpoint kept"
    return cp.size


def _problem(d: Device) -> str | None:
    """The device's log problem, if any (it has checked the log at least once)."""
    status = log_status(d.v.store)
    assert status is not None, "the log was never checked"
    return status.problem


def _pair(devices: Devices, server: ServerProcess, proxy: HostileProxy) -> tuple[Device, Device]:
    """A straight to the server, B joined through the proxy: both synced, both checked."""
    name = _name()
    a = devices.first(server.url, name)
    a.v.add("first memory")
    _grow(a, 3)                     # a log of a few receipts at least, whatever ran before
    b = devices.join(proxy.url, name)
    return a, b


# ------------------------------------------------------------------ an honest server

def test_devices_pin_the_key_keep_the_checkpoint_and_compare_each_other(devices: Devices,
                                                                        any_server: ServerProcess) -> None:
    name = _name()
    a = devices.first(any_server.url, name)
    key = httpx.get(any_server.url + "/v1/log/key").json()
    assert a.v.store.sync_get(LW.KEY) == key["vkey"].encode()           # pinned at link
    b = devices.join(any_server.url, name)
    assert b.v.store.sync_get(LW.KEY) == key["vkey"].encode()
    a.v.add("a memory")
    report = a.sync()
    assert report.refusals == []
    st = log_status(a.v.store)
    assert st is not None and st.problem is None and st.compared_devices == 1
    served = notes.parse_checkpoint(notes.parse_note(httpx.get(any_server.url + "/v1/log/checkpoint").text).text)
    assert (st.origin, st.size, st.root_hash) == (served.origin, served.size, served.root_hash.hex())
    assert st.checked_at is not None and abs(st.checked_at - time.time()) < 60
    _grow(a, 2)
    assert b.sync().refusals == [] and b.contents() == {"a memory"}
    sb = log_status(b.v.store)
    assert sb is not None and sb.problem is None and sb.compared_devices == 1 and sb.size >= st.size + 2
    # each device published one current witness, under its own random id
    b.syncer.ensure_login()
    got = publiclog.WitnessList.parse(httpx.get(any_server.url + f"/v1/vaults/{name}/witnesses",
                                        headers={"Authorization": f"Bearer {b.remote.token}"}).json())
    ids = {w.device_id for w in got.witnesses}
    assert ids == {LW.device_id(a.v.store), LW.device_id(b.v.store)} and len(ids) == 2


def test_a_vault_never_synced_has_no_log_status(tmp_path: Path) -> None:
    from ownmem.vault.store import Store

    assert log_status(Store(tmp_path / "v")) is None


# ------------------------------------------------------------------ a server that lies about its log

def _assert_refused(d: Device, before: bytes | None, *words: str) -> str:
    report = d.sync()
    hits = [r for r in report.refusals if all(w in r for w in words)]
    assert hits, report.refusals
    assert _kept(d) == before, "the kept checkpoint must not move on a failed check"
    st = log_status(d.v.store)
    assert st is not None and st.problem is not None and all(w in st.problem for w in words)
    return hits[0]


def _assert_recovers(d: Device, proxy: HostileProxy) -> None:
    proxy.clear()
    report = d.sync()
    assert report.refusals == [], report.refusals
    st = log_status(d.v.store)
    assert st is not None and st.problem is None


def test_a_rewritten_entry_is_caught_by_the_kept_checkpoint(devices: Devices, server: ServerProcess,
                                                            sqlite_backend: Backend,
                                                            proxies: list[HostileProxy]) -> None:
    proxy = _proxy(proxies, server.url)
    a, b = _pair(devices, server, proxy)
    before = _kept(b)
    victim = _kept_size(b) - 2

    def rewrite(es: list[bytes]) -> list[bytes]:
        return es[:victim] + [es[victim] + b"\x00"] + es[victim + 1:]
    ForgedLog(server.url, log_key(_seed(sqlite_backend, server)), rewrite).install(proxy)
    _assert_refused(b, before, "different root at the same size")           # same size, another root
    _grow(a)
    _assert_refused(b, before, "does not extend")                            # grown on: no proof reaches the kept head
    _assert_recovers(b, proxy)


def test_a_dropped_entry_is_caught_by_the_kept_checkpoint(devices: Devices, server: ServerProcess,
                                                          sqlite_backend: Backend, proxies: list[HostileProxy]) -> None:
    proxy = _proxy(proxies, server.url)
    a, b = _pair(devices, server, proxy)
    before = _kept(b)
    victim = _kept_size(b) - 3
    ForgedLog(server.url, log_key(_seed(sqlite_backend, server)),
              lambda es: es[:victim] + es[victim + 1:]).install(proxy)
    _assert_refused(b, before, "shrank")                                     # a smaller tree
    _grow(a, 2)
    _assert_refused(b, before, "does not extend")                            # larger again, but not an extension
    _assert_recovers(b, proxy)


def test_a_swapped_log_key_is_refused_and_never_pinned(devices: Devices, server: ServerProcess,
                                                       proxies: list[HostileProxy]) -> None:
    proxy = _proxy(proxies, server.url)
    _, b = _pair(devices, server, proxy)
    before, pinned = _kept(b), b.v.store.sync_get(LW.KEY)
    _, key_rule, checkpoint_rule = swapped_key(b"\x42" * 32)
    proxy.on("GET", r"^/v1/log/key$", key_rule)
    proxy.on("GET", r"^/v1/log/checkpoint$", checkpoint_rule)
    _assert_refused(b, before, "log key changed")
    assert b.v.store.sync_get(LW.KEY) == pinned
    proxy.clear()
    proxy.on("GET", r"^/v1/log/checkpoint$", checkpoint_rule)                # the right key named, another signing
    _assert_refused(b, before, "does not verify under the pinned log key")
    _assert_recovers(b, proxy)


@pytest.mark.parametrize("lie", ["bad_proof", "no_proof", "garbled_note", "malformed_proof"])
def test_a_bad_or_missing_proof_or_note_is_refused(devices: Devices, server: ServerProcess,
                                                   proxies: list[HostileProxy], lie: str) -> None:
    proxy = _proxy(proxies, server.url)
    a, b = _pair(devices, server, proxy)
    before = _kept(b)
    _grow(a)
    if lie == "bad_proof":
        proxy.on("GET", r"^/v1/log/proof/consistency$", bad_proof)
        words: tuple[str, ...] = ("does not extend",)
    elif lie == "no_proof":
        proxy.on("GET", r"^/v1/log/proof/consistency$",
                 lambda s, ans: Answer(404, {"content-type": "application/json"},
                                       b'{"error":"not_found","message":"no"}'))
        words = ("no consistency proof",)
    elif lie == "malformed_proof":
        proxy.on("GET", r"^/v1/log/proof/consistency$", lambda s, ans: ans.with_json({"from": 1, "proof": "x"}))
        words = ("no consistency proof",)
    else:
        proxy.on("GET", r"^/v1/log/checkpoint$",
                 lambda s, ans: Answer(200, ans.headers, ans.body.replace(b"\n\n\xe2\x80\x94 ", b"\n\n\xe2\x80\x94 x")))
        words = ("does not verify",)
    _assert_refused(b, before, *words)
    _assert_recovers(b, proxy)


def test_a_forget_is_applied_only_once_proven_in_the_log(devices: Devices, server: ServerProcess,
                                                         proxies: list[HostileProxy]) -> None:
    proxy = _proxy(proxies, server.url)
    name = _name()
    a = devices.first(server.url, name)
    m = a.v.add("forget me")
    a.v.add("keep me")
    a.sync()
    b = devices.join(proxy.url, name)
    assert b.contents() == {"forget me", "keep me"}
    a.v.forget(m.hex())
    a.sync()
    proxy.on("GET", r"^/v1/log/proof/inclusion$", bad_proof)
    report = b.sync()
    assert b.contents() == {"forget me", "keep me"} and m not in b.v.store.erased_ids()
    assert any("not proven in the public log" in r for r in report.refusals), report.refusals
    assert "not proven" in (_problem(b) or "")
    report = b.sync()                                                       # still lying: still waiting
    assert m not in b.v.store.erased_ids() and any("still not proven" in r for r in report.refusals)
    proxy.clear()
    report = b.sync()                                                       # proven now: applied
    assert report.refusals == [] and report.erased_here == 1
    assert b.contents() == {"keep me"} and m in b.v.store.erased_ids()
    assert _problem(b) is None


# ------------------------------------------------------------------ forks between devices, witnesses

def test_a_forked_view_for_one_device_is_caught_through_witnesses(devices: Devices, any_server: ServerProcess,
                                                                  backend: Backend,
                                                                  proxies: list[HostileProxy]) -> None:
    """Device B is shown a history with one receipt rewritten, from its very first sync on:
    consistent on its own, so B's own checks pass; only the two devices' views disagree.
    On both backends: the witnesses are stored by each."""
    server = any_server
    forked = _proxy(proxies, server.url)
    ForgedLog(server.url, log_key(_seed(backend, server)), lambda es: [es[0] + b"\x00"] + es[1:]).install(forked)
    name = _name()
    a = devices.first(server.url, name)
    a.v.add("a memory")
    a.sync()
    b = devices.join(forked.url, name, sync=False)
    report = b.sync()                                     # B compares its view with A's witness
    assert any("forked" in r for r in report.refusals), report.refusals
    assert LW.kept_checkpoint(b.v.store) is not None      # B's own view is consistent on its own ...
    assert notes.parse_note(_kept(b) or b"").text != notes.parse_note(_kept(a) or b"").text
    report = a.sync()                                     # ... and A, on the real server, sees B's witness
    assert any("forked" in r for r in report.refusals), report.refusals
    assert "forked" in (_problem(a) or "")
    _grow(a)                                              # the fork stays a fork as the log grows
    assert any("forked" in r for r in b.sync().refusals)


def test_a_withheld_witness_hides_a_fork_from_that_device_only(devices: Devices, server: ServerProcess,
                                                               sqlite_backend: Backend,
                                                               proxies: list[HostileProxy]) -> None:
    """The residual risk (docs/decisions.md "Log witnesses"): a server can keep A's witness
    from B; B's own path then shows nothing wrong.  A, which reaches B's witness, still sees it."""
    forked = _proxy(proxies, server.url)
    ForgedLog(server.url, log_key(_seed(sqlite_backend, server)), lambda es: [es[0] + b"\x00"] + es[1:]).install(forked)
    forked.on("GET", WITNESSES, lambda s, ans: ans.with_json({"witnesses": []}))
    name = _name()
    a = devices.first(server.url, name)
    a.sync()
    b = devices.join(forked.url, name, sync=False)
    assert b.sync().refusals == []
    assert any("forked" in r for r in a.sync().refusals)


@pytest.mark.parametrize("forgery", ["other_device_id", "other_note", "random_signature", "malformed_note"])
def test_a_forged_witness_is_refused(devices: Devices, server: ServerProcess, proxies: list[HostileProxy],
                                     forgery: str) -> None:
    proxy = _proxy(proxies, server.url)
    a, b = _pair(devices, server, proxy)
    b_id = LW.device_id(b.v.store).hex()

    def forge(seen: Seen, ans: Answer) -> Answer:
        got = ans.json()["witnesses"]
        real = next(w for w in got if w["device_id"] != b_id)
        fake = dict(real)
        if forgery == "other_device_id":
            fake["device_id"] = "ab" * 16
        elif forgery == "other_note":       # another checkpoint put in A's name
            lines = bytes.fromhex(real["note"]).decode().split("\n")
            lines[1] = str(int(lines[1]) + 1)
            fake["note"] = "\n".join(lines).encode().hex()
        elif forgery == "malformed_note":
            fake["note"] = real["note"][:-8] + "00" + real["note"][-6:]
        else:
            fake["signature"] = "11" * 64
        return ans.with_json({"witnesses": [w for w in got if w is not real] + [fake]})
    proxy.on("GET", WITNESSES, forge)
    report = b.sync()
    expect = "malformed log witness" if forgery == "malformed_note" else "no device of this vault signed"
    assert any(expect in r for r in report.refusals), report.refusals
    st = log_status(b.v.store)
    assert st is not None and st.problem is None and st.compared_devices == 0


def _witness(d: Device, name: str, device_id: bytes, note: bytes, *, seed: bytes | None = None) -> dict[str, object]:
    vkey = (d.v.store.sync_get(LW.KEY) or b"").decode()
    now = int(time.time())
    sig = run_sync(P.ed25519_sign(seed or d.v.sync_key().seed,
                                  signed.witness_message(name, device_id, vkey, note, now)))
    return publiclog.Witness(device_id, vkey, note, now, sig).encode()


def test_the_server_keeps_only_signed_bounded_witnesses(devices: Devices, any_server: ServerProcess) -> None:
    name = _name()
    d = devices.first(any_server.url, name)
    d.syncer.ensure_login()
    auth = {"Authorization": f"Bearer {d.remote.token}"}
    url = any_server.url + f"/v1/vaults/{name}/witnesses"
    note = _kept(d) or b""
    with httpx.Client(timeout=30.0) as c:
        # not signed by this vault's sync key (another key, another vault's name): refused, nothing kept
        r = c.post(url, headers=auth, json=_witness(d, name, b"\x01" * 16, note, seed=b"\x07" * 32))
        assert r.status_code == 400 and r.json()["error"] == "bad_signature"
        r = c.post(url, headers=auth, json=_witness(d, "another-vault", b"\x01" * 16, note))
        assert r.status_code == 400 and r.json()["error"] == "bad_signature"
        # malformed: a note over the bound, a device id of another length
        big = _witness(d, name, b"\x01" * 16, b"x" * (publiclog.MAX_NOTE + 1))
        assert c.post(url, headers=auth, json=big).json()["error"] == "malformed"
        short = {**_witness(d, name, b"\x01" * 16, note), "device_id": "01" * 8}
        assert c.post(url, headers=auth, json=short).json()["error"] == "malformed"
        # no credential: no witness, either way
        assert c.get(url).status_code == 401
        assert c.post(url, json=_witness(d, name, b"\x01" * 16, note)).status_code == 401
        # one current record per device id; at most MAX_WITNESSES a vault, the least recently updated going first
        for i in range(publiclog.MAX_WITNESSES + 3):
            r = c.post(url, headers=auth, json=_witness(d, name, i.to_bytes(16, "big"), note))
            assert r.status_code == 200, r.text
            time.sleep(0.002)
        again = c.post(url, headers=auth, json=_witness(d, name, (5).to_bytes(16, "big"), note))
        assert again.status_code == 200
        got = publiclog.WitnessList.parse(c.get(url, headers=auth).json()).witnesses
    ids = [w.device_id for w in got]
    assert len(ids) == publiclog.MAX_WITNESSES == len(set(ids))
    assert ids[0] == (5).to_bytes(16, "big")                          # newest first
    assert LW.device_id(d.v.store) not in ids                          # d's own, the oldest, went first
    assert (2).to_bytes(16, "big") not in ids and (3).to_bytes(16, "big") in ids
    # every record the server hands out verifies under the vault's sync key
    assert all(LR.witness_forgery(P, name, d.v.sync_key().public, w) is None for w in got)


def test_real_entries_helper_reads_the_whole_log(server: ServerProcess) -> None:
    es = real_entries(server.url)
    cp = notes.parse_checkpoint(notes.parse_note(httpx.get(server.url + "/v1/log/checkpoint").text).text)
    assert len(es) >= cp.size and MemTree(es[:cp.size]).root() == cp.root_hash


def test_linking_to_another_server_pins_that_servers_log(devices: Devices, server: ServerProcess,
                                                         any_server: ServerProcess) -> None:
    from ownmem.vault.sync import link

    d = devices.first(server.url, _name())
    old = d.v.store.sync_get(LW.KEY)
    d.syncer = link(d.v, any_server.url, _name(), client=d.client)
    new = httpx.get(any_server.url + "/v1/log/key").json()["vkey"].encode()
    assert d.v.store.sync_get(LW.KEY) == new != old
    assert d.sync().refusals == []
    st = log_status(d.v.store)
    assert st is not None and st.problem is None and st.origin == new.decode().partition("+")[0]
