"""Client ID Metadata Documents over real https on 127.0.0.1 (tlskit), from the attacker's side:
loopback and private addresses, a redirect, a 50 MB document, a client_id that is not the URL
(issue 21 Build item 2; the SSRF rules in ownmem.uomp.remote)."""
from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from ownmem.agent.cimd import MAX_BYTES, CimdFetcher, CimdRefused
from ownmem.uomp.remote import address_allowed, cimd_url, redirect_uri_ok
from ownmem.vault.vault import UnlockedVault
from tests.agent.oauthkit import (
    REDIRECT,
    Door,
    authorize,
    consent_form,
    decide,
    exchange,
    open_door,
    pkce,
    query,
    vault,  # noqa: F401 - fixture
)
from tests.agent.tlskit import Served, Tls, make_tls

SENT = {"big": 0}


def app() -> Starlette:
    async def doc(request: Request) -> Response:
        return JSONResponse({"client_id": str(request.url), "client_name": "Test Host", "redirect_uris": [REDIRECT],
                             "logo_uri": "https://host.example/logo.png", "token_endpoint_auth_method": "none"})

    async def mismatch(request: Request) -> Response:
        return JSONResponse({"client_id": "https://claude.ai/oauth/client.json", "redirect_uris": [REDIRECT]})

    async def no_redirects(request: Request) -> Response:
        return JSONResponse({"client_id": str(request.url)})

    async def hop(request: Request) -> Response:
        return RedirectResponse(str(request.url).replace("/hop/client.json", "/good/client.json"), status_code=302)

    async def big(request: Request) -> Response:
        async def chunks() -> AsyncIterator[bytes]:
            block = b" " * 65536
            for _ in range(800):               # 50 MiB
                SENT["big"] += len(block)
                yield block
                await asyncio.sleep(0.002)     # a real network's pace: the server sees the hang-up
        return StreamingResponse(chunks(), media_type="application/json")

    return Starlette(routes=[Route("/good/client.json", doc), Route("/mismatch/client.json", mismatch),
                             Route("/bare/client.json", no_redirects), Route("/hop/client.json", hop),
                             Route("/big/client.json", big)])


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return make_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def host(tls: Tls) -> Iterator[str]:
    with Served(app(), tls) as s:
        yield s.url


def allowed(tls: Tls) -> CimdFetcher:
    return CimdFetcher(allow_hosts=["127.0.0.1"], ca_file=str(tls.ca))


def fetch(f: CimdFetcher, url: str) -> object:
    return asyncio.run(f.fetch(url))


def test_the_address_rule() -> None:
    for bad in ("127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
                "224.0.0.1", "240.0.0.1", "255.255.255.255", "::1", "::", "fc00::1", "fd12::1", "fe80::1", "ff02::1",
                "::ffff:10.0.0.1", "::ffff:127.0.0.1", "64:ff9b::a00:1", "2002:a00:1::1", "2001:0:a00:1::1",
                "192.0.2.1", "198.18.0.1"):
        assert not address_allowed(ipaddress.ip_address(bad)), bad
    for good in ("1.1.1.1", "93.184.215.14", "2606:4700:4700::1111", "::ffff:1.1.1.1"):
        assert address_allowed(ipaddress.ip_address(good)), good
    assert cimd_url("https://claude.ai/oauth/client.json")
    for no in ("http://claude.ai/c.json", "https://claude.ai", "https://claude.ai/", "https://u@claude.ai/c",
               "https://claude.ai/c#f", "0b4a5c1e-uuid"):
        assert not cimd_url(no), no
    assert redirect_uri_ok("http://localhost:8080/cb") and redirect_uri_ok("http://[::1]:8080/cb")
    assert not redirect_uri_ok("http://127.0.0.1.evil.example/cb") and not redirect_uri_ok("http://evil/cb")


def test_a_good_document_is_fetched_cached_and_its_client_can_be_granted(
        host: str, tls: Tls, vault: UnlockedVault, tmp_path: Path) -> None:
    url = host + "/good/client.json"
    f = allowed(tls)
    c = fetch(f, url)
    assert c.client_id == url and c.client_name == "Test Host"                 # type: ignore[attr-defined]
    for d in open_door(vault, tmp_path, fetcher=f):
        verifier, challenge = pkce()
        r = authorize(d, url, challenge)
        assert r.status_code == 302
        rid, tok = consent_form(d, r.headers["location"])
        assert 'src="https://host.example/logo.png"' in d.http.get(r.headers["location"]).text
        code = query(decide(d, rid, tok).headers["location"])["code"]
        t = exchange(d, url, code, verifier)
        assert t.status_code == 200, t.text
        assert asyncio.run(d.server.verify_token(t.json()["access_token"])) is not None
        check(d)


def check(d: Door) -> None:
    (cred,) = d.creds.all()
    assert cred.client_id.endswith("/good/client.json")


def test_loopback_and_private_addresses_are_refused_without_the_test_allowance(host: str, tls: Tls) -> None:
    f = CimdFetcher(ca_file=str(tls.ca))                           # the CA, but no allow_hosts
    for url in (host + "/good/client.json", host.replace("127.0.0.1", "localhost") + "/good/client.json",
                "https://10.0.0.1/client.json", "https://[::1]/client.json", "https://169.254.169.254/latest/x"):
        t = time.monotonic()
        with pytest.raises(CimdRefused, match="non-public"):
            fetch(f, url)
        assert time.monotonic() - t < 1.0                           # refused before any connection


def test_a_redirect_is_never_followed(host: str, tls: Tls) -> None:
    with pytest.raises(CimdRefused, match="redirect"):
        fetch(allowed(tls), host + "/hop/client.json")


def test_a_50_mb_document_is_stopped_at_the_cap(host: str, tls: Tls) -> None:
    SENT["big"] = 0
    t = time.monotonic()
    with pytest.raises(CimdRefused, match="over"):
        fetch(allowed(tls), host + "/big/client.json")
    assert time.monotonic() - t < 5
    time.sleep(0.2)
    assert SENT["big"] < 100 * MAX_BYTES, SENT["big"]              # far from 50 MiB: it hung up early


def test_a_document_whose_client_id_is_not_its_url_or_without_redirects_is_refused(host: str, tls: Tls) -> None:
    with pytest.raises(CimdRefused, match="client_id"):
        fetch(allowed(tls), host + "/mismatch/client.json")
    with pytest.raises(CimdRefused, match="redirect_uris"):
        fetch(allowed(tls), host + "/bare/client.json")


def test_an_untrusted_certificate_is_refused(host: str) -> None:
    with pytest.raises(CimdRefused, match="could not fetch"):
        fetch(CimdFetcher(allow_hosts=["127.0.0.1"]), host + "/good/client.json")
