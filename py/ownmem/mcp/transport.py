"""The HTTPS binding's transport, as thin as it can be (SAIHM "HTTPS binding", "Transport
requirements", "Credential handling").

    POST <endpoint>  Content-Type: application/json  Authorization: <credential, verbatim>
         {"method": <tool>, "params": {...}}
    -> status, reason phrase, Content-Type, body   (ownmem.binding.transport.interpret judges them)

What this layer holds to:

* the endpoint is https, or http to 127.0.0.1 / localhost only; it carries no userinfo; its
  query is sent but never printed, its fragment never sent; a value that does not parse is
  refused without being quoted;
* redirects are never followed (``follow_redirects=False``): a 3xx is a failure, so the
  request body, for saihm_remember the memory itself, never reaches a host nobody checked;
* the server certificate is validated against the default trust store (the environment's
  proxy and certificate settings are not read: ``trust_env=False``);
* the whole call, connect to last byte, is bounded by one deadline (30 s by default): a
  server that trickles its answer cannot hold the agent;
* the body is read as a stream, bounded at 16 MiB by counting bytes, whatever
  Content-Length says (a chunked answer has none); no content-coding is asked for or
  decoded, so a small compressed body cannot become a large one;
* no error text is ever made from an exception: httpx's messages can quote the URL or a
  header, so an exception only selects one of the client's own sentences.
"""
from __future__ import annotations

import functools
import ssl
import urllib.parse
from dataclasses import dataclass

import anyio
import httpx

from ownmem.binding.transport import DEFAULT_TIMEOUT, LOCAL_HOSTS, MAX_BODY, Answer, Call, Failure, Kind, interpret
from ownmem.errors import OwnmemError

_PRINTABLE_ASCII = frozenset(range(0x21, 0x7F))


class ConfigRefused(OwnmemError):
    """The endpoint or the credential cannot be used.  The message never quotes either."""

    code = "config_refused"


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str        # what is requested: scheme://host[:port]/path[?query]; never printed
    origin: str     # scheme://host[:port]: the only part of it a message may name

    def __repr__(self) -> str:       # a traceback or a log line shows the origin, never the query
        return f"Endpoint({self.origin!r})"

    @classmethod
    def parse(cls, value: str | None) -> Endpoint:
        if not value:
            raise ConfigRefused("SAIHM_ENDPOINT_URL is not set")
        if any(ord(c) not in _PRINTABLE_ASCII for c in value):
            raise ConfigRefused("SAIHM_ENDPOINT_URL is not a URL (it holds spaces, control or non-ASCII "
                                "characters)")
        try:
            u = urllib.parse.urlsplit(value)
            host, port = u.hostname, u.port
        except ValueError:
            raise ConfigRefused("SAIHM_ENDPOINT_URL does not parse as a URL") from None
        scheme = u.scheme.lower()
        if scheme not in ("https", "http") or not host:
            raise ConfigRefused("SAIHM_ENDPOINT_URL must be an https URL with a host")
        if scheme == "http" and host not in LOCAL_HOSTS:
            raise ConfigRefused("SAIHM_ENDPOINT_URL must use https (http only to 127.0.0.1 or localhost)")
        if u.username is not None or u.password is not None or "@" in u.netloc:
            raise ConfigRefused("SAIHM_ENDPOINT_URL must not carry userinfo: the credential goes in "
                                "SAIHM_AUTH_HEADER")
        hostport = f"[{host}]" if ":" in host else host
        if port is not None:
            hostport += f":{port}"
        origin = f"{scheme}://{hostport}"
        url = origin + (u.path or "/") + (f"?{u.query}" if u.query else "")
        return cls(url=url, origin=origin)


def credential(value: str | None) -> str | None:
    """The Authorization value, sent verbatim; None (no header) when unset or empty.

    A value HTTP cannot carry is refused here, because the HTTP library's own error for it
    would quote it."""
    if not value:
        return None
    if any(not (0x20 <= ord(c) <= 0x7E or c == "\t") for c in value) or value != value.strip(" \t"):
        raise ConfigRefused("SAIHM_AUTH_HEADER holds a character an HTTP header cannot carry "
                            "(a line break, a control or non-ASCII character, or surrounding white space)")
    return value


@functools.cache
def default_tls() -> ssl.SSLContext:
    """The default trust store, loaded once (not from the environment)."""
    return httpx.create_ssl_context(trust_env=False)


def _cause_chain(e: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = e
    while cur is not None and cur not in seen and len(seen) < 16:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def _certificate_failed(e: BaseException) -> bool:
    return any(isinstance(x, ssl.SSLCertVerificationError) for x in _cause_chain(e))


class Transport:
    """One operator endpoint and its credential; each call is one POST on a fresh connection."""

    def __init__(self, endpoint: Endpoint, authorization: str | None, *, timeout: float = DEFAULT_TIMEOUT,
                 max_body: int = MAX_BODY, verify: ssl.SSLContext | None = None) -> None:
        self.endpoint = endpoint
        self._authorization = authorization
        self.timeout = timeout
        self.max_body = max_body
        # `verify` exists for tests that trust their own CA; the product always uses the default
        self._ssl = verify if verify is not None else default_tls()

    def __repr__(self) -> str:
        return f"Transport({self.endpoint.origin!r})"      # never the credential

    async def send(self, call: Call) -> Answer | Failure:
        try:
            with anyio.fail_after(self.timeout):
                return await self._post(call)
        except TimeoutError:
            return Failure(Kind.TIMEOUT, seconds=self.timeout)
        except httpx.TimeoutException:
            return Failure(Kind.TIMEOUT, seconds=self.timeout)
        except httpx.ConnectError as e:
            if _certificate_failed(e):
                return Failure(Kind.CERTIFICATE)
            return Failure(Kind.NOT_DELIVERED, origin=self.endpoint.origin)
        except (httpx.HTTPError, httpx.StreamError, httpx.InvalidURL, OSError, ssl.SSLError):
            return Failure(Kind.BROKEN)

    async def _post(self, call: Call) -> Answer | Failure:
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "Accept-Encoding": "identity"}
        if self._authorization is not None:
            headers["Authorization"] = self._authorization
        async with httpx.AsyncClient(follow_redirects=False, verify=self._ssl, trust_env=False,
                                     timeout=httpx.Timeout(self.timeout)) as client:
            async with client.stream("POST", self.endpoint.url, content=call.body(), headers=headers) as r:
                if 300 <= r.status_code < 400:              # never read, never followed
                    return Failure(Kind.REDIRECT, status=r.status_code)
                declared = r.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self.max_body:
                    return Failure(Kind.TOO_LARGE)
                body = bytearray()
                async for chunk in r.aiter_raw():
                    body += chunk
                    if len(body) > self.max_body:
                        return Failure(Kind.TOO_LARGE)
                reason = r.extensions.get("reason_phrase", b"")
                return interpret(r.status_code, reason if isinstance(reason, bytes) else b"",
                                 r.headers.get("content-type"), bytes(body))
