"""Client ID Metadata Documents: fetching the document a client id URL names, with SSRF
protection (issue 21 Build item 3; MCP authorization "Client ID Metadata Documents").

    client_id (https URL with a path)
      --resolve the host once--> every address must pass remote.address_allowed
      --connect to the address checked (no second lookup), TLS to the host's name-->
      GET, no redirect followed (a 3xx is a refusal), 200 only, at most MAX_BYTES read
      (streamed, stopped early), everything within TIMEOUT seconds
      --> the document: JSON, its client_id equal to the URL, redirect_uris each remote.redirect_uri_ok
    cached CACHE_SECONDS (a refusal is not cached: the next authorize tries again)

Tests serve a document over https on 127.0.0.1: the fetcher's ``allow_hosts`` (host names whose
addresses are not checked) and ``ca_file`` (the CA it trusts instead of the system's) are a
test-only allowance; the service takes them only from OWNMEM_CIMD_ALLOW_HOSTS and OWNMEM_CIMD_CA
(docs/decisions.md, UOMP "15.2 Security Requirements").
"""
from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import socket
import ssl
import time
import typing
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

import httpcore
from mcp.shared.auth import OAuthClientInformationFull
from pydantic import AnyHttpUrl, AnyUrl, ValidationError

from ownmem.errors import OwnmemError
from ownmem.uomp.remote import address_allowed, cimd_url, redirect_uri_ok

_log = logging.getLogger("ownmem.agent")
MAX_BYTES = 64 * 1024
TIMEOUT = 5.0
CACHE_SECONDS = 3600
MAX_CACHED = 256
MAX_REDIRECT_URIS = 20
ALLOW_HOSTS_ENV = "OWNMEM_CIMD_ALLOW_HOSTS"    # test-only: comma-separated host names not address-checked
CA_ENV = "OWNMEM_CIMD_CA"                      # test-only: the CA file trusted for CIMD fetches


class CimdRefused(OwnmemError):
    """The client id's document could not be used; the reason is for the log, never the client."""

    code = "cimd_refused"


class _Pinned(httpcore.AsyncNetworkBackend):
    """Connects every request to the one address the fetcher checked, whatever host the URL
    names (TLS still verifies the certificate against that host name)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[typing.Any] | None = None) -> httpcore.AsyncNetworkStream:
        return await self._inner.connect_tcp(self.address, port, timeout=timeout, local_address=local_address,
                                             socket_options=socket_options)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[typing.Any] | None = None) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("no unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def client_of(url: str, doc: object) -> OAuthClientInformationFull:
    """The client a fetched document describes, or CimdRefused.  Its redirect URIs are kept as
    written (each must read back the same through the URL parser: compared as exact strings)."""
    if not isinstance(doc, dict):
        raise CimdRefused("the document is not a JSON object")
    if doc.get("client_id") != url:
        raise CimdRefused("the document's client_id is not its URL")
    uris = doc.get("redirect_uris")
    if not isinstance(uris, list) or not 0 < len(uris) <= MAX_REDIRECT_URIS or not all(
            isinstance(u, str) and redirect_uri_ok(u) and str(AnyUrl(u)) == u for u in uris):
        raise CimdRefused("redirect_uris missing, or one is not https or http on loopback")
    method = doc.get("token_endpoint_auth_method", "none")
    if method != "none":
        raise CimdRefused(f"token_endpoint_auth_method {method!r}: only public clients (none)")
    grants = doc.get("grant_types", ["authorization_code", "refresh_token"])
    if not isinstance(grants, list) or "authorization_code" not in grants:
        raise CimdRefused("grant_types without authorization_code")
    name, logo = doc.get("client_name"), doc.get("logo_uri")
    logo_ok = isinstance(logo, str) and logo.startswith("https://") and len(logo) <= 2048
    try:
        return OAuthClientInformationFull(
            client_id=url, redirect_uris=[AnyUrl(u) for u in uris], token_endpoint_auth_method="none",
            grant_types=[g for g in grants if g in ("authorization_code", "refresh_token")],
            response_types=["code"], client_name=name[:200] if isinstance(name, str) else None,
            logo_uri=AnyHttpUrl(logo) if logo_ok and isinstance(logo, str) else None)
    except ValidationError as e:
        raise CimdRefused(f"the document does not validate: {e.error_count()} errors") from None


class CimdFetcher:
    """Fetches and caches Client ID Metadata Documents (module docstring)."""

    def __init__(self, *, allow_hosts: Iterable[str] = (), ca_file: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.allow_hosts = frozenset(h.lower() for h in allow_hosts)
        self._ssl = ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()
        self._ssl.minimum_version = ssl.TLSVersion.TLSv1_2
        self._cache: dict[str, tuple[float, OAuthClientInformationFull]] = {}
        self._clock = clock

    @classmethod
    def from_env(cls) -> CimdFetcher:
        """The service's fetcher: no allowance unless the test-only variables are set."""
        hosts = [h.strip() for h in os.environ.get(ALLOW_HOSTS_ENV, "").split(",") if h.strip()]
        ca = os.environ.get(CA_ENV) or None
        if hosts or ca:
            _log.warning("CIMD test allowance in effect: hosts %s not address-checked, CA %s", hosts, ca)
        return cls(allow_hosts=hosts, ca_file=ca)

    async def fetch(self, url: str) -> OAuthClientInformationFull:
        """The client ``url`` names, from the cache or fetched; CimdRefused for every failure."""
        got = self._cache.get(url)
        if got is not None and got[0] > self._clock():
            return got[1]
        if not cimd_url(url):
            raise CimdRefused("not an https URL with a path")
        try:
            async with asyncio.timeout(TIMEOUT):
                body = await self._get(url)
        except TimeoutError:
            raise CimdRefused(f"no document within {TIMEOUT:g} s") from None
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise CimdRefused("the document is not JSON") from None
        client = client_of(url, doc)
        if len(self._cache) >= MAX_CACHED:
            now = self._clock()
            self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
            if len(self._cache) >= MAX_CACHED:
                self._cache.pop(next(iter(self._cache)))
        self._cache[url] = (self._clock() + CACHE_SECONDS, client)
        return client

    async def _address(self, host: str, port: int) -> str:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            raise CimdRefused("the host does not resolve") from None
        addresses = [str(i[4][0]) for i in infos]
        if not addresses:
            raise CimdRefused("the host does not resolve")
        if host.lower() not in self.allow_hosts:
            for a in addresses:
                if not address_allowed(ipaddress.ip_address(a.split("%", 1)[0])):
                    raise CimdRefused(f"the host resolves to a non-public address ({a})")
        return addresses[0]

    async def _get(self, url: str) -> bytes:
        u = urlsplit(url)
        host = u.hostname or ""
        address = await self._address(host, u.port or 443)
        pool = httpcore.AsyncConnectionPool(ssl_context=self._ssl, network_backend=_Pinned(address),
                                            max_connections=1, retries=0)
        try:
            async with pool.stream("GET", url, headers=[(b"Accept", b"application/json"),
                                                        (b"User-Agent", b"ownmem-agent")]) as r:
                if 300 <= r.status < 400:
                    raise CimdRefused(f"a redirect ({r.status}): never followed")
                if r.status != 200:
                    raise CimdRefused(f"HTTP {r.status}")
                out = bytearray()
                async for chunk in r.aiter_stream():
                    out += chunk
                    if len(out) > MAX_BYTES:
                        raise CimdRefused(f"the document is over {MAX_BYTES} bytes")
                return bytes(out)
        except httpcore.TimeoutException:
            raise CimdRefused("timed out") from None
        except (httpcore.NetworkError, httpcore.ProtocolError, ssl.SSLError) as e:
            raise CimdRefused(f"could not fetch: {type(e).__name__}") from None
        finally:
            await pool.aclose()
