"""`ownmem log verify` from a third party's point of view, and `ownmem log status` (py/ownmem/cli/log.py).

The CLI runs for real, as a subprocess with no vault and no passphrase, against a real server
and, for the lies, a ``HostileProxy`` that holds the server's log key (``logkit.ForgedLog``).
A third party verifies a FORGET receipt's signature and inclusion, then two checkpoints'
consistency across runs; every lie ends in exit status 1 and one clear line.
"""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ownmem.saihm.receipt import parse_receipt
from tests.sync.hostile import Answer, HostileProxy, Seen
from tests.sync.logkit import ForgedLog, bad_proof, log_key, swapped_key
from tests.sync.synckit import Backend, Device, Devices, ServerProcess, cli_env, ownmem


@pytest.fixture(scope="module")
def server(sqlite_backend: Backend) -> Iterator[ServerProcess]:
    s = ServerProcess(sqlite_backend, label="log-cli")
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


def _stranger(tmp_path: Path) -> dict[str, str]:
    """A third machine: no vault, no passphrase, its own cache folder."""
    env = cli_env(tmp_path / "stranger", tmp_path / "stranger" / "no-vault", passphrase=None)
    env["XDG_CACHE_HOME"] = str(tmp_path / "stranger" / "cache")
    return env


def _forget(devices: Devices, server: ServerProcess) -> tuple[Device, bytes]:
    """A vault that forgot a memory: the FORGET receipt's id."""
    d = devices.first(server.url, f"logcli-{time.monotonic_ns() % 10 ** 9}")
    oid = d.v.add("forget me")
    d.v.add("keep me")
    d.sync()
    got = d.v.store.cell_of(oid)
    assert got is not None
    d.v.forget(oid.hex())
    d.sync()
    entries = httpx.get(server.url + "/v1/log", params={"subject": got[0].hex(), "operation": "FORGET"}).json()
    (e,) = entries["entries"]
    return d, bytes.fromhex(e["receipt_id"])


def _verify(env: dict[str, str], url: str, *extra: str) -> tuple[int, str]:
    r = ownmem("log", "verify", "--server", url, *extra, env=env)
    if r.returncode:
        assert not r.stdout.endswith("\nverified\n")
        assert r.stderr.startswith("ownmem: log verify failed: ") and r.stderr.count("\n") == 1, r.stderr
        return r.returncode, r.stderr
    return 0, r.stdout


def test_a_third_party_verifies_a_forget_and_two_checkpoints(devices: Devices, server: ServerProcess,
                                                             tmp_path: Path) -> None:
    d, rid = _forget(devices, server)
    env = _stranger(tmp_path)
    rc, out = _verify(env, server.url, "--receipt", rid.hex())
    assert rc == 0, out
    holder = d.v.holder().holder_id.hex()
    assert f"receipt {rid.hex()}: FORGET of " in out and f"signed by holder {holder}" in out
    assert "the receipt at leaf" in out and "and the KEY receipt at leaf" in out and out.endswith("verified\n")
    assert "pinned now, on first use" in out and "no earlier checkpoint saved" in out
    state = list((tmp_path / "stranger" / "cache" / "ownmem").glob("log-*.json"))
    assert len(state) == 1 and json.loads(state[0].read_text())["server"] == server.url
    size_before = json.loads(state[0].read_text())["checkpoint"].split("\n")[1]
    # the log grows; the next run proves the new checkpoint extends the one it saved
    oid = d.v.add("another")
    d.sync()
    d.v.forget(oid.hex())
    d.sync()
    rc, out = _verify(env, server.url)
    assert rc == 0, out
    assert f"extends the one of {size_before} saved by the previous run" in out and "(pinned in " in out
    # the same with the key given on the command line
    vkey = httpx.get(server.url + "/v1/log/key").json()["vkey"]
    rc, out = _verify(env, server.url, "--log-key", vkey, "--receipt", rid.hex())
    assert rc == 0 and "given with --log-key" in out


def test_a_wrong_pinned_key_or_an_unknown_receipt_fails(devices: Devices, server: ServerProcess,
                                                        tmp_path: Path) -> None:
    _, rid = _forget(devices, server)
    env = _stranger(tmp_path)
    other, _, _ = swapped_key(b"\x09" * 32)
    rc, err = _verify(env, server.url, "--log-key", str(other.verifier))
    assert rc == 1 and "is not the one given with --log-key" in err
    rc, err = _verify(env, server.url, "--receipt", "ab" * 32)
    assert rc == 1 and "did not give receipt" in err
    rc, err = _verify(env, server.url, "--receipt", "not-hex")
    assert rc == 1 and "64 lower-case hex digits" in err


def _saved_state(env: dict[str, str], server: ServerProcess, tmp_path: Path) -> str:
    """An honest run's state file, for the runs through the proxy."""
    state = str(tmp_path / "state.json")
    rc, out = _verify(env, server.url, "--state", state)
    assert rc == 0, out
    return state


@pytest.mark.parametrize("lie", ["rewritten", "dropped", "swapped_key", "bad_consistency_proof", "garbled_note"])
def test_log_verify_catches_a_lying_log(devices: Devices, server: ServerProcess, sqlite_backend: Backend,
                                        proxy: HostileProxy, tmp_path: Path, lie: str) -> None:
    d, _ = _forget(devices, server)
    ids = [d.v.add(f"padding {i}") for i in range(6)]      # a log of several receipts, whatever ran before
    d.sync()
    for oid in ids:
        d.v.forget(oid.hex())
    d.sync()
    env = _stranger(tmp_path)
    state = _saved_state(env, server, tmp_path)
    before = Path(state).read_text()
    (seed,), = sqlite_backend.rows("SELECT seed FROM tlog_key")
    stolen = log_key(bytes(seed))
    n = json.loads(before)["checkpoint"].split("\n")[1]
    victim = int(n) - 2
    oid = d.v.add("the log grows")
    d.sync()
    d.v.forget(oid.hex())
    d.sync()
    if lie == "rewritten":
        ForgedLog(server.url, stolen, lambda es: es[:victim] + [es[victim] + b"\x00"] + es[victim + 1:]).install(proxy)
        expect = "does not extend"
    elif lie == "dropped":
        ForgedLog(server.url, stolen, lambda es: es[:victim - 3] + es[victim:]).install(proxy)
        expect = "shrank"
    elif lie == "swapped_key":
        _, key_rule, checkpoint_rule = swapped_key(b"\x42" * 32)
        proxy.on("GET", r"^/v1/log/key$", key_rule)
        proxy.on("GET", r"^/v1/log/checkpoint$", checkpoint_rule)
        expect = "is not the one pinned in"
    elif lie == "bad_consistency_proof":
        proxy.on("GET", r"^/v1/log/proof/consistency$", bad_proof)
        expect = "does not extend"
    else:
        proxy.on("GET", r"^/v1/log/checkpoint$",
                 lambda s, ans: Answer(200, ans.headers, ans.body.replace(b"=\n\n", b"A=\n\n")))
        expect = "does not verify"
    rc, err = _verify(env, proxy.url, "--state", state)
    assert rc == 1 and expect in err, err
    assert Path(state).read_text() == before           # the saved checkpoint is kept as it was
    rc, out = _verify(env, server.url, "--state", state)
    assert rc == 0, out


@pytest.mark.parametrize("lie", ["bad_inclusion_proof", "other_receipt", "bad_signature", "no_key_receipt",
                                 "forged_key_receipt"])
def test_log_verify_catches_a_lying_receipt(devices: Devices, server: ServerProcess, proxy: HostileProxy,
                                            tmp_path: Path, lie: str) -> None:
    d, rid = _forget(devices, server)
    env = _stranger(tmp_path)
    if lie == "bad_inclusion_proof":
        proxy.on("GET", r"^/v1/log/proof/inclusion$", bad_proof)
        expect = "is not proven in the checkpoint's tree"
    elif lie == "other_receipt":
        key_hex = httpx.get(server.url + "/v1/log", params={"holder": d.v.holder().holder_id.hex(),
                                                            "operation": "KEY"}).json()["entries"][0]["receipt"]
        proxy.on("GET", r"^/v1/log/[0-9a-f]{64}$", lambda s, ans: ans.with_json({**ans.json(), "receipt": key_hex}))
        expect = "another receipt than the one asked for"
    elif lie == "bad_signature":
        def flip(seen: Seen, ans: Answer) -> Answer:
            raw = bytearray(bytes.fromhex(ans.json()["receipt"]))
            sig = parse_receipt(bytes(raw)).signature
            at = bytes(raw).index(sig) + 100
            raw[at] ^= 1
            return ans.with_json({**ans.json(), "receipt": bytes(raw).hex()})
        proxy.on("GET", r"^/v1/log/[0-9a-f]{64}$", flip)
        expect = "not signed by the holder key its KEY receipt publishes"
    elif lie == "no_key_receipt":
        proxy.on("GET", r"^/v1/log$", lambda s, ans: ans.with_json({"entries": []}))
        expect = "no KEY receipt in the log names holder"
    else:   # a KEY receipt carrying another holder's key: it cannot name this holder
        other = devices.first(server.url, f"logcli-other-{time.monotonic_ns() % 10 ** 9}")
        theirs = httpx.get(server.url + "/v1/log", params={"holder": other.v.holder().holder_id.hex(),
                                                           "operation": "KEY"}).json()["entries"]
        proxy.on("GET", r"^/v1/log$", lambda s, ans: ans.with_json({"entries": theirs}))
        expect = "no KEY receipt in the log names holder"
    rc, err = _verify(env, proxy.url, "--receipt", rid.hex())
    assert rc == 1 and expect in err, err


def test_log_status_prints_what_the_vaults_syncs_found(devices: Devices, server: ServerProcess,
                                                       tmp_path: Path) -> None:
    d, _ = _forget(devices, server)
    env = cli_env(tmp_path / "owner", d.folder, passphrase=None)       # no passphrase needed
    r = ownmem("log", "status", env=env)
    assert r.returncode == 0, r.stderr
    cp = httpx.get(server.url + "/v1/log/checkpoint").text.split("\n")
    assert f"log: {cp[0]}" in r.stdout and "problem: none" in r.stdout and "receipt(s), root " in r.stdout
    # the vault's own pinned key and server serve `log verify` without --server
    r = ownmem("log", "verify", "--state", str(tmp_path / "s.json"), env=env)
    assert r.returncode == 0 and "pinned by this vault" in r.stdout, r.stderr
    nothing = cli_env(tmp_path / "none", tmp_path / "none" / "vault", passphrase=None)
    r = ownmem("log", "status", env=nothing)
    assert r.returncode == 1 and r.stderr.startswith("ownmem: ") and "no vault" in r.stderr
