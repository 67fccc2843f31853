"""The work a request can demand is capped, and a bad request is refused with a stable code
(STYLE.md 7, 12): body size, batch size, request rate, malformed JSON, names and parameters."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from ownmem.crypto import cbor
from ownmem.wire.limits import MAX_BATCH, MAX_BODY, MAX_PAGE_BYTES
from tests.server.conftest import Backend, LinkedVault
from tests.server.storekit import registered


def refused(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, (r.status_code, r.text)
    assert r.json()["error"] == code, r.text


def _chunks(total: int, size: int = 1 << 20) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        n = min(size, total - sent)
        sent += n
        yield b"\x00" * n


# ---------------------------------------------------------------- size

@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "streamed"])
def test_body_over_limit_refused(declared: bool, linked_vault: Callable[..., LinkedVault], http: httpx.Client) -> None:
    lv = linked_vault(1)
    before = lv.snapshot()
    size = MAX_BODY + 1
    headers = {**lv.auth(), "Content-Type": "application/cbor"}
    # the server may answer before it has read everything: the refusal is what it says, or,
    # if it closed the connection under a body it will not read, a dropped upload
    try:
        if declared:
            r = http.post(lv.url("/cells"), content=b"\x00" * size, headers=headers)
        else:
            r = http.post(lv.url("/cells"), content=_chunks(size), headers=headers)   # chunked, no Content-Length
    except (httpx.WriteError, httpx.RemoteProtocolError, httpx.ReadError) as e:   # pragma: no cover
        pytest.fail(f"the server dropped the connection instead of answering 413: {e!r}")
    assert declared == ("content-length" in r.request.headers)
    refused(r, 413, "too_large")
    assert lv.snapshot() == before


def test_body_at_limit_is_read(linked_vault: Callable[..., LinkedVault], http: httpx.Client) -> None:
    """Exactly MAX_BODY bytes is allowed through to the parser (here: not CBOR, so 400, not 413)."""
    lv = linked_vault(0)
    r = http.post(lv.url("/cells"), content=b"\xff" * MAX_BODY,
                  headers={**lv.auth(), "Content-Type": "application/cbor"})
    refused(r, 400, "malformed")


def test_json_body_over_limit_refused(linked_vault: Callable[..., LinkedVault], http: httpx.Client) -> None:
    lv = linked_vault(0)
    before = lv.snapshot()
    big = {"expected_version": 1, "metadata": "00" * (1 << 20), "signature": "00" * 64}
    refused(http.put(lv.url("/metadata"), headers=lv.auth(), json=big), 413, "too_large")
    refused(http.post(f"{lv.base}/v1/vaults", json={"name": "big", "metadata": "00" * (1 << 20)}), 413, "too_large")
    assert lv.snapshot() == before


def test_metadata_up_to_the_body_limit_accepted(linked_vault: Callable[..., LinkedVault], http: httpx.Client) -> None:
    """Large metadata (many scopes and accepted keys) is stored, however large, up to the JSON body limit."""
    lv = linked_vault(0)
    doc = lv.syncer.metadata_doc().encode()
    big = doc + b"\x00" * (200_000 - len(doc))   # signed as is: the server stores it opaquely
    sig = lv.syncer._signed(2, big)
    r = http.put(lv.url("/metadata"), headers=lv.auth(),
                 json={"expected_version": 1, "metadata": big.hex(), "signature": sig.hex()})
    assert r.status_code == 200 and r.json() == {"version": 2}, r.text
    got = http.get(lv.url("/metadata"), headers=lv.auth()).json()
    assert bytes.fromhex(got["metadata"]) == big


@pytest.mark.parametrize("n", [MAX_BATCH + 1, 5000])
def test_batch_over_limit_refused(n: int, linked_vault: Callable[..., LinkedVault]) -> None:
    lv = linked_vault(0)
    before = lv.snapshot()
    refused(lv.push([[b"", b""]] * n), 413, "batch_too_large")
    assert lv.snapshot() == before


def test_batch_at_limit_is_checked_item_by_item(linked_vault: Callable[..., LinkedVault]) -> None:
    lv = linked_vault(0)
    refused(lv.push([[b"", b""]] * MAX_BATCH), 400, "malformed_cell")


# ---------------------------------------------------------------- rate

def test_rate_limited(
        backend: Backend, linked_vault: Callable[..., LinkedVault], start_server: Callable[..., str],
        http: httpx.Client) -> None:
    """Public routes are limited per client address, a vault's own routes per vault once its
    credential checked (test_abuse.py: a stranger cannot spend a vault's budget)."""
    one, two = linked_vault(0), linked_vault(0)
    # a slow refill (one request per 2 s): on a loaded machine the burst's requests can take long
    # enough that a faster one had already refilled a token before the fourth (a flaky pass)
    url = start_server(backend.env, OWNMEM_ADDRESS_RATE_PER_SECOND="0.5", OWNMEM_ADDRESS_BURST="3",
                       OWNMEM_RATE_PER_SECOND="0.5", OWNMEM_RATE_BURST="3")
    lookup = f"{url}/v1/vaults/{one.name}"
    for _ in range(3):
        assert http.get(lookup).status_code == 200
    r = http.get(lookup)
    refused(r, 429, "rate_limited")
    retry = int(r.headers["Retry-After"])
    assert 1 <= retry <= 2
    # per address: another name, or another public route, is no way around it
    refused(http.get(f"{url}/v1/vaults/{two.name}"), 429, "rate_limited")
    for path in ("/v1/log", "/v1/erasures", "/v1/log/checkpoint", "/v1/log/entries", "/v1/log/key",
                 f"/v1/holders/{'00' * 32}"):
        refused(http.get(url + path), 429, "rate_limited")
    # the vault's own routes are charged to the vault, not to the address
    metadata = f"{url}/v1/vaults/{one.name}/metadata"
    for _ in range(3):
        assert http.get(metadata, headers=one.auth()).status_code == 200
    refused(http.get(metadata, headers=one.auth()), 429, "rate_limited")
    refused(http.post(f"{url}/v1/vaults/{one.name}/cells", headers=one.auth(), content=cbor.encode([])), 429,
            "rate_limited")
    # per vault
    assert http.get(f"{url}/v1/vaults/{two.name}/metadata", headers=two.auth()).status_code == 200
    time.sleep(retry)
    assert http.get(lookup).status_code == 200


# ---------------------------------------------------------------- malformed input

BAD_JSON = [b"{", b"[]", b'"text"', b"1", b"null", b"\xff\xfe", b"[" * 100_000 + b"]" * 100_000,
            b'{"a": ' * 50_000 + b"1" + b"}" * 50_000, b""]


@pytest.mark.parametrize("body", BAD_JSON, ids=["truncated", "array", "string", "number", "null", "not utf-8",
                                                  "deep array", "deep object", "empty"])
def test_malformed_json_refused(body: bytes, linked_vault: Callable[..., LinkedVault], http: httpx.Client) -> None:
    lv = linked_vault(0)
    before = lv.snapshot()
    for method, url, auth in (("POST", f"{lv.base}/v1/vaults", False), ("POST", lv.url("/session"), False),
                              ("PUT", lv.url("/metadata"), True), ("POST", lv.url("/erase"), True)):
        r = http.request(method, url, content=body,
                         headers={"Content-Type": "application/json", **(lv.auth() if auth else {})})
        assert r.status_code == 400 and r.json()["error"] == "malformed", (method, url, r.status_code, r.text)
    assert lv.snapshot() == before


def _registration_fields() -> dict[str, str]:
    return {"name": "fields", "salt": "00" * 16, "owner_pub": "00" * 32, "sync_pub": "00" * 32,
            "ka_pub": "00" * 32, "holder_pub": "00" * 1952, "metadata": "a0", "metadata_sig": "00" * 64,
            "key_receipt": "a0", "proof": "00" * 64, "holder_proof": "00" * 3309}


# non-canonical spellings too ("AB", "0 0"): the OpenAPI document says lower-case pairs only
NOT_HEX: list[Any] = ["zz", "0x00", "abc", " 00", "00 ", "0 0", "AB", "Ab", 12, None, ["00"], {"a": "00"},
                      "\u0660\u0660", "ab" * 40_000 + "z"]


@pytest.mark.parametrize("field", ["salt", "owner_pub", "sync_pub", "ka_pub", "holder_pub", "metadata",
                                   "metadata_sig", "key_receipt", "proof", "holder_proof"])
def test_registration_non_hex_refused(field: str, backend: Backend, http: httpx.Client) -> None:
    for bad in NOT_HEX:
        r = http.post(f"{backend.url}/v1/vaults", json={**_registration_fields(), field: bad})
        assert r.status_code == 400 and r.json()["error"] == "malformed", (field, bad if len(str(bad)) < 50 else "long",
                                                                           r.text)
    assert not registered(backend, "fields")


def test_fields_non_hex_or_wrong_type_refused(linked_vault: Callable[..., LinkedVault], http: httpx.Client) -> None:
    lv = linked_vault(0)
    before = lv.snapshot()
    auth = lv.auth()
    good_meta = {"expected_version": 1, "metadata": "a0", "signature": "00" * 64}
    for bad in NOT_HEX:
        refused(http.post(lv.url("/session"), json={"challenge": bad, "signature": "00" * 64}), 400, "malformed")
        refused(http.post(lv.url("/session"), json={"challenge": "00" * 32, "signature": bad}), 400, "malformed")
        refused(http.put(lv.url("/metadata"), headers=auth, json={**good_meta, "metadata": bad}), 400, "malformed")
        refused(http.put(lv.url("/metadata"), headers=auth, json={**good_meta, "signature": bad}), 400, "malformed")
        refused(http.post(lv.url("/erase"), headers=auth, json={"receipts": [bad]}), 400, "malformed")
    for version in ("1", 0, -1, 1.0, True, None, [1], 2 ** 80):
        r = http.put(lv.url("/metadata"), headers=auth, json={**good_meta, "expected_version": version})
        assert r.status_code == 400 and r.json()["error"] == "malformed", (version, r.text)
    for receipts in (None, "a0", [], {"0": "a0"}, ["a0"] * (MAX_BATCH + 1)):
        refused(http.post(lv.url("/erase"), headers=auth, json={"receipts": receipts}), 400, "malformed")
    for missing in ({}, {"challenge": "00" * 32}, {"signature": "00" * 64}):
        refused(http.post(lv.url("/session"), json=missing), 400, "malformed")
    assert lv.snapshot() == before


# ---------------------------------------------------------------- names and parameters

BAD_NAMES = ["UPPER", "-dash", ".dot", "_under", "a" * 65, "a%20b", "%C3%A9", "a..b%00", "a%2Fb"]


def test_bad_vault_names(backend: Backend, http: httpx.Client) -> None:
    for name in BAD_NAMES:
        for method, path in (("GET", ""), ("POST", "/challenge"), ("POST", "/session")):
            r = http.request(method, f"{backend.url}/v1/vaults/{name}{path}")
            assert r.status_code == 404, (name, path, r.status_code, r.text)
    for bad in ("", "UPPER", "-dash", ".dot", "a" * 65, "a b", "a/b", "é", "a\u0000", 5, None, ["a"]):
        r = http.post(f"{backend.url}/v1/vaults", json={**_registration_fields(), "name": bad})
        refused(r, 400, "bad_name")


@pytest.mark.parametrize("query", ["since=abc", "since=-1", "since=1.5", "since=1e3", "since=" + "9" * 19,
                                   "since=", "limit=abc", "limit=-5", "since=%EF%BC%91", "since=%C2%B2",
                                   "limit=%C2%B2"])
def test_changes_bad_parameters_refused(
        query: str, linked_vault: Callable[..., LinkedVault], http: httpx.Client) -> None:
    lv = linked_vault(0)
    refused(http.get(lv.url(f"/changes?{query}"), headers=lv.auth()), 400, "malformed")


@pytest.mark.parametrize("query", ["after=abc", "after=-1", "limit=x", "holder=zz", "holder=00", "subject=" + "g" * 64,
                                   "operation=BOGUS", "operation=key"])
def test_log_bad_parameters_refused(query: str, backend: Backend, http: httpx.Client) -> None:
    refused(http.get(f"{backend.url}/v1/log?{query}"), 400, "malformed")


@pytest.mark.parametrize("query", ["after=abc", "limit=-1", "after=1.0"])
def test_erasures_bad_parameters_refused(query: str, backend: Backend, http: httpx.Client) -> None:
    refused(http.get(f"{backend.url}/v1/erasures?{query}"), 400, "malformed")


@pytest.mark.parametrize("rid", ["zz", "00", "A" * 64, "0" * 63, "0" * 65])
def test_log_entry_bad_id_is_not_found(rid: str, backend: Backend, http: httpx.Client) -> None:
    refused(http.get(f"{backend.url}/v1/log/{rid}"), 404, "not_found")


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_client_push_stays_under_the_body_limit(backend: Backend, linked_vault: Callable[..., LinkedVault]) -> None:
    """Large memories: a push of many must be split by size, not only by count, or the
    server's 413 stops every later sync of that vault."""
    lv = linked_vault(0)
    big = "x" * 900_000
    n = MAX_BODY // len(big) + 4                   # together well over one request body
    for i in range(n):
        lv.v.add(f"{i} {big}")
    report = lv.sync()
    assert report.pushed == n
    cells, since, pages = [], 0, 0
    while True:                                     # the feed is paged by bytes too
        page = lv.changes(since)
        cells += [c for _, kind, _, c, _ in page[1] if kind == "cell"]
        since, pages = page[2], pages + 1
        assert sum(len(c) for c in cells[-len(page[1]):]) <= MAX_PAGE_BYTES + 1_000_000
        if not page[4]:
            break
    assert len(cells) == n and pages > 1


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_client_erase_stays_under_the_json_limit(backend: Backend, linked_vault: Callable[..., LinkedVault]) -> None:
    """Forgetting many memories at once: their FORGET receipts (~7 KB of hex each) go out in
    requests under the server's 1 MiB JSON limit."""
    lv = linked_vault(200, key="c")   # its own holder: 200 erasures stay out of the others' lists
    lv.sync()
    store = lv.v.store
    cells = store.cell_ids_of(store.object_ids())
    assert len(cells) == 200
    # what UnlockedVault.forget does, for 200 memories without opening the vault 200 times
    receipts = [(cid, lv.receipt("FORGET", cid)) for cid in cells.values()]
    with store.transaction():
        store.erase(list(cells), int(time.time()))
        for cid, r in receipts:
            store.queue_erasure(cid, r)
    report = lv.sync()
    assert report.erased_remote == 200
    erased = {cid for _, kind, cid, _, _ in lv.changes()[1] if kind == "erase"}
    assert erased == set(cells.values())
