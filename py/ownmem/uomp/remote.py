"""The pure rules of the remote profile's OAuth door (UOMP draft-00 "15. Remote Profile"; issue 21):
which network addresses a Client ID Metadata Document may be fetched from, which redirect URIs
a client may register, what a CIMD URL is, the consent's choices, and the consent form's token.

    address_allowed(ip)   False for every address that is not plainly public (SSRF: the fetch
                          of a client's metadata must never reach this machine or its network)
    redirect_uri_ok(s)    https, or http on the loopback host only (RFC 8252 native clients)
    cimd_url(s)           an https URL with a path: a client id that names its own metadata
    form_token(k, id)     HMAC of the pending request id: the consent form's CSRF token
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
from urllib.parse import urlsplit

# Networks that embed or front another address (a v4 address behind a v6 prefix), or that
# the ipaddress module counts as global although they are not one host's public address.
_REFUSED = tuple(ipaddress.ip_network(n) for n in (
    "100.64.0.0/10",       # CGNAT (RFC 6598): a provider's inside
    "64:ff9b::/96",        # NAT64 (RFC 6052): any v4 address, the private ones included
    "64:ff9b:1::/48",      # local-use NAT64 (RFC 8215)
    "2002::/16",           # 6to4: embeds a v4 address
    "2001::/32",           # Teredo: embeds a v4 address
    "fc00::/7",            # ULA
    "fe80::/10",           # link-local
    "fec0::/10",           # site-local (deprecated, still routed inside some networks)
))
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
MAX_URI = 2048
LIFETIMES = {"3600": "1 hour", "86400": "1 day", "2592000": "30 days", "7776000": "90 days"}
_FORM_LABEL = b"ownmem-oauth-consent-form-v1|"
_SLUG = re.compile(r"[^a-z0-9]+")


def address_allowed(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """May a CIMD fetch connect to ``ip``?  Only a global unicast address: never loopback,
    private (RFC 1918, ULA), link-local, multicast, unspecified, CGNAT, reserved, nor a v6
    address that carries a v4 one (mapped, NAT64, 6to4, Teredo)."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return address_allowed(ip.ipv4_mapped)
    if any(ip.version == n.version and ip in n for n in _REFUSED):
        return False
    return bool(ip.is_global and not (ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_multicast
                                      or ip.is_unspecified or ip.is_reserved))


def redirect_uri_ok(uri: str) -> bool:
    """A redirect URI a client may register: https with a host, or http to the loopback host
    (a native client's local listener); no fragment (RFC 6749 3.1.2), no userinfo."""
    if not isinstance(uri, str) or not 0 < len(uri) <= MAX_URI or not uri.isprintable() or " " in uri:
        return False
    try:
        u = urlsplit(uri)
        u.port    # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        return False
    if u.fragment or "#" in uri or u.username is not None or u.password is not None or not u.hostname:
        return False
    if u.scheme == "https":
        return True
    host = u.netloc.rsplit(":", 1)[0] if not u.netloc.endswith("]") else u.netloc
    return u.scheme == "http" and host in LOOPBACK_HOSTS


def cimd_url(client_id: str) -> bool:
    """Is ``client_id`` a Client ID Metadata Document URL (https, a host, a path other than "/",
    no fragment, no userinfo)?  Any other client id is one this server registered (DCR)."""
    if not isinstance(client_id, str) or not 0 < len(client_id) <= MAX_URI or not client_id.isprintable():
        return False
    try:
        u = urlsplit(client_id)
        u.port    # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        return False
    return (u.scheme == "https" and bool(u.hostname) and u.path not in ("", "/") and not u.fragment
            and "#" not in client_id and u.username is None and u.password is None)


def origin_of(url: str) -> str:
    """scheme://host[:port] of a URL, as a browser's Origin header spells it."""
    u = urlsplit(url)
    return f"{u.scheme}://{u.netloc}"


def form_token(key: bytes, request_id: str) -> str:
    """The consent form's token: bound to its pending request by an HMAC (a cookie cannot be
    bound on http loopback), so a page of another origin cannot forge a valid form."""
    return hmac.new(key, _FORM_LABEL + request_id.encode(), hashlib.sha256).hexdigest()


def form_token_ok(key: bytes, request_id: str, token: str) -> bool:
    return hmac.compare_digest(form_token(key, request_id).encode(), token.encode())


def grant_name(client_name: str | None) -> str:
    """The credential name of a consented grant: the client's name slugged, a short random
    suffix (two grants to one host are two credentials)."""
    slug = _SLUG.sub("-", (client_name or "").lower()).strip("-")[:40].strip("-") or "remote"
    return f"{slug}-{secrets.token_hex(3)}"


def backoff(failures: int) -> int:
    """Seconds every passphrase check waits after ``failures`` wrong ones in a row (global)."""
    return 0 if failures <= 0 else min(2 ** (failures - 1), 60)
