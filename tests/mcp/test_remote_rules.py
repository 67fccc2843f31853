"""The remote door's pure rules (ownmem.mcp.remote): what a public URL may be, which Host and
Origin reach it, and the per-address rate."""
from __future__ import annotations

import pytest

from ownmem.errors import MalformedInput
from ownmem.mcp.remote import Buckets, PublicUrl, foreign, resource_metadata_url


@pytest.mark.parametrize("value", [
    "http://memory.example.org",           # plain http off loopback: tokens in clear
    "https://memory.example.org/mcp",      # a path: the resource is always /mcp
    "https://user:pw@memory.example.org",  # credentials in the URL
    "https://memory.example.org?x=1", "https://memory.example.org#f", "ftp://memory.example.org",
    "https://", "https://memory.example.org:99999", "memory.example.org"])
def test_a_public_url_that_could_leak_or_mislead_is_refused(value: str) -> None:
    with pytest.raises(MalformedInput):
        PublicUrl.parse(value)


def test_public_url_names_its_resource_and_hosts() -> None:
    u = PublicUrl.parse("https://Memory.Example.org")
    assert (u.origin, u.resource, u.tls) == ("https://memory.example.org", "https://memory.example.org/mcp", True)
    assert u.hosts == {b"memory.example.org", b"memory.example.org:443"}
    assert resource_metadata_url(u) == "https://memory.example.org/.well-known/oauth-protected-resource/mcp"
    p = PublicUrl.parse("https://memory.example.org:8443/")
    assert p.origin == "https://memory.example.org:8443" and p.hosts == {b"memory.example.org:8443"}
    local = PublicUrl.parse("http://127.0.0.1:9400")
    assert not local.tls and local.hosts == {b"127.0.0.1:9400"}


def test_host_and_origin_at_the_public_door() -> None:
    u = PublicUrl.parse("https://memory.example.org:8443")
    ok = [(b"host", b"memory.example.org:8443")]
    assert foreign(ok, u) is None                                                   # a host's server: no Origin
    assert foreign([*ok, (b"origin", b"https://memory.example.org:8443")], u) is None   # the consent page itself
    assert foreign([(b"host", b"attacker.example:8443")], u)                        # DNS rebinding
    assert foreign([(b"host", b"127.0.0.1:8443")], u)
    assert foreign([], u) and foreign([*ok, *ok], u)                                # none, or two
    assert foreign([*ok, (b"origin", b"https://evil.example")], u)                  # another site's page
    assert foreign([*ok, (b"origin", b"null")], u)
    assert foreign([*ok, (b"origin", b"http://memory.example.org:8443")], u)        # not the https origin


def test_buckets_allow_a_burst_then_the_rate_per_address() -> None:
    t = [0.0]
    b = Buckets(rate=2.0, burst=3, now=lambda: t[0])
    assert [b.take("a") for _ in range(3)] == [0, 0, 0]
    wait = b.take("a")
    assert wait == pytest.approx(0.5)
    assert b.take("b") == 0                  # another address has its own bucket
    t[0] += 0.5
    assert b.take("a") == 0 and b.take("a") > 0
    with pytest.raises(ValueError):
        Buckets(rate=0)


def test_the_public_socket_is_tcp_so_answers_are_not_held_back_by_nagle() -> None:
    # asyncio sets TCP_NODELAY on accepted connections only when the listening socket's proto is
    # TCP; without it every /mcp answer waited ~40 ms for a delayed ACK (the remote bench's p50
    # went from 13.7 ms to 50.8 ms)
    import socket

    from ownmem.mcp.remote import _bound
    s = _bound("127.0.0.1", 0)
    try:
        s.listen()
        port = s.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):
            conn, _ = s.accept()
            with conn:
                assert conn.proto == socket.IPPROTO_TCP
    finally:
        s.close()
