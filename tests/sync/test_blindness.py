"""The server is blind (DESIGN.md "Processes" 2, "Sync"; SAIHM "Cell shape").

Two devices sync memories carrying canary strings (in content and in tags) and a
distinctive semantic time through a real server process, on SQLite and on
PostgreSQL.  Then every byte the server could ever see or keep is searched:

  - its store: the SQLite file with its -wal and -shm, or a pg_dump of the database
    plus every row read back as raw bytes;
  - its stdout and stderr;
  - every HTTP request body the devices sent and every response body they received
    (sync, the vault's .amem export, the public log, the erasure list).

None may hold the canary (UTF-8, UTF-16 LE/BE), the semantic time (decimal, 4- and
8-byte big-endian, the CBOR uint 1a499602d3), or any key: passphrase, master secret,
Ed25519 owner seed, X25519 seed, sync seed, scope KEKs, DEKs, the holder's ML-DSA
seed.  Every needle is also searched hex-encoded (JSON bodies and pg_dump carry bytes
as hex).  A positive control proves the search sees what the server does store.
"""
from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from ownmem.aperto import keys as K
from ownmem.crypto import run_sync
from ownmem.vault import UnlockedVault
from tests.sync.synckit import PASSPHRASE, Backend, Devices, Recorder, ServerProcess

CANARY = "CANARY-7f3a9"
SEMANTIC = 1234567891            # 0x499602d3: a memory's created time, never the cell's


def _text_forms(s: str) -> list[bytes]:
    return [s.encode("utf-8"), s.encode("utf-16-le"), s.encode("utf-16-be")]


def _semantic_forms(t: int) -> list[bytes]:
    assert t < 1 << 32
    return [str(t).encode(), struct.pack(">I", t), struct.pack(">Q", t), b"\x1a" + struct.pack(">I", t)]


@dataclass
class Needles:
    """name -> the byte strings that must never reach the server."""

    by_name: dict[str, list[bytes]]

    def forms(self) -> Iterator[tuple[str, bytes]]:
        for name, values in self.by_name.items():
            for v in values:
                yield name, v
                yield f"{name} (hex)", v.hex().encode()
                yield f"{name} (HEX)", v.hex().upper().encode()

    def found_in(self, sources: dict[str, bytes]) -> list[str]:
        return sorted({f"{what} in {src}" for src, data in sources.items() for what, n in self.forms() if n in data})


def _key_material(v: UnlockedVault) -> dict[str, list[bytes]]:
    ident = v.identity
    scopes = v.scopes()
    keks = {s.scope_id: v.kek(s) for s in scopes.values()}
    deks = [run_sync(K.unwrap_dek(v.crypto, o.dek_wrapped, keks[o.scope_id])) for o in v.store.objects()]
    return {
        "passphrase": _text_forms(PASSPHRASE),
        "master secret": [ident.master],
        "owner Ed25519 seed": [ident.sign.seed],
        "X25519 seed": [ident.ka_seed],
        "sync key seed": [v.sync_key().seed],
        "scope KEK": list(keks.values()),
        "DEK": deks,
        "holder ML-DSA seed": [v.holder().xi],
    }


@dataclass
class Seen:
    """Everything the server saw and kept in one run, and what must not be in it."""

    backend: Backend
    store_live: dict[str, bytes]       # the store while the server runs (SQLite: with its WAL)
    store_at_rest: dict[str, bytes]    # the store after a clean stop
    logs: dict[str, bytes]
    http: dict[str, bytes]
    needles: Needles
    public: dict[str, bytes]           # what the server legitimately stores: the positive control
    opened_on_b: set[str]


@pytest.fixture(scope="module")
def seen(backend: Backend) -> Iterator[Seen]:
    server = ServerProcess(backend, label="blind")
    devices = Devices(backend.root / "devices")
    rec_a, rec_b = Recorder(), Recorder()
    try:
        server.start()
        a = devices.first(server.url, f"blind-{backend.kind}", client=rec_a.client(), sync=False)
        a.v.add_scope("work")
        kept = [a.v.add(f"{CANARY} the spare key is under the blue pot", tags=[CANARY, "home"], now=SEMANTIC),
                a.v.add(f"meeting notes {CANARY}", tags=[f"{CANARY}-tag"], scope="work", now=SEMANTIC,
                        extensions={"uomp": {"key": f"{CANARY}-key", "value": f"{CANARY}-value"}})]
        doomed = a.v.add(f"{CANARY} to be forgotten", tags=[CANARY], now=SEMANTIC)
        a.v.edit(kept[0].hex(), content=f"{CANARY} the spare key moved to the shed", now=SEMANTIC)
        secrets_ = _key_material(a.v)          # before the erasure: its DEK too
        a.sync()
        a.v.forget(doomed.hex())
        a.sync()

        b = devices.join(server.url, f"blind-{backend.kind}", client=rec_b.client())
        b.v.add(f"written on the phone {CANARY}", tags=[CANARY], now=SEMANTIC)
        b.sync()
        a.sync()
        for name, values in _key_material(b.v).items():     # B's own DEK
            secrets_[name] = list({*secrets_.get(name, []), *values})
        opened_on_b = b.contents()
        # what else the server hands out: the vault's export, the public log, the erasure list
        auth = {"Authorization": f"Bearer {a.remote.token}"}
        for path, headers in ((f"/v1/vaults/{a.remote.name}/export.amem", auth), ("/v1/log?limit=1000", {}),
                              ("/v1/erasures", {}), (f"/v1/vaults/{a.remote.name}", {})):
            assert a.client.get(server.url + path, headers=headers).status_code == 200, path

        store_live = backend.snapshot()
        public = {"owner public key": a.v.identity.sign_pub,
                  "a wrapped DEK": a.v.store.objects()[0].dek_wrapped,
                  "an object id": a.v.store.objects()[0].object_id}
        devices.close()
        server.stop()
        store_at_rest = backend.snapshot()
        logs = {server.stdout_path.name: server.stdout_path.read_bytes(),
                server.stderr_path.name: server.stderr_path.read_bytes()}
        http = {f"device A request {i}": x for i, x in enumerate(rec_a.sent)}
        http |= {f"device A response {i}": x for i, x in enumerate(rec_a.received)}
        http |= {f"device B request {i}": x for i, x in enumerate(rec_b.sent)}
        http |= {f"device B response {i}": x for i, x in enumerate(rec_b.received)}
        needles = Needles({"canary": _text_forms(CANARY), "semantic time": _semantic_forms(SEMANTIC), **secrets_})
        yield Seen(backend, store_live, store_at_rest, logs, http, needles, public, opened_on_b)
    finally:
        devices.close()
        server.stop()


def test_the_canaries_did_travel_end_to_end(seen: Seen) -> None:
    """Without this the searches below could pass vacuously."""
    assert f"written on the phone {CANARY}" in seen.opened_on_b
    assert f"{CANARY} the spare key moved to the shed" in seen.opened_on_b
    assert f"meeting notes {CANARY}" in seen.opened_on_b
    assert not any("to be forgotten" in c for c in seen.opened_on_b)
    assert len(seen.http) > 20 and all(seen.store_live.values())


def test_the_search_finds_what_the_server_does_store(seen: Seen) -> None:
    """Positive control: public values the server keeps are found, raw or hex-encoded."""
    control = Needles({k: [v] for k, v in seen.public.items()})
    for store in (seen.store_live, seen.store_at_rest):
        hits = control.found_in({"store": b"".join(store.values())})
        assert {h.split(" (")[0].removesuffix(" in store") for h in hits} == set(seen.public)
    assert any("owner public key" in hit for hit in control.found_in(seen.http))


def test_server_store_holds_no_plaintext_time_or_key(seen: Seen) -> None:
    assert seen.needles.found_in(seen.store_live) == []
    assert seen.needles.found_in(seen.store_at_rest) == []


def test_server_logs_hold_no_plaintext_time_or_key(seen: Seen) -> None:
    assert seen.needles.found_in(seen.logs) == []


def test_no_http_body_carries_plaintext_time_or_key(seen: Seen) -> None:
    assert seen.needles.found_in(seen.http) == []


def test_the_needles_cover_every_key(seen: Seen) -> None:
    n = seen.needles.by_name
    assert len(n["scope KEK"]) == 2 and len(n["DEK"]) == 5     # 4 objects on A before the erasure, 1 from B
    assert all(len(k) == 32 for name in ("master secret", "owner Ed25519 seed", "X25519 seed", "sync key seed",
                                         "scope KEK", "DEK", "holder ML-DSA seed") for k in n[name])

