"""SAIHM "Transport requirements", "Credential handling" and the HTTPS binding, against servers
the test runs on 127.0.0.1 (plain and TLS): the scheme rule, redirects, the 16 MiB bound,
timeouts, certificate validation, and error text that never carries the endpoint's secrets,
the credential, or anything the HTTP library said."""
from __future__ import annotations

import asyncio
import gzip
import json
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ownmem.binding.transport import DEFAULT_TIMEOUT, MAX_BODY, Answer, Call, Failure, Kind
from ownmem.mcp.server import Session
from ownmem.mcp.transport import ConfigRefused, Endpoint, Transport, credential
from tests.mcp.mcpkit import HOLDER, TEST_TIMEOUT, TOKEN, Operator, Reply, TestServer, call, make_session

MIB = 1024 * 1024
STATUS = Call("saihm_status", {})


def send(transport: Transport, c: Call = STATUS) -> Answer | Failure:
    return asyncio.run(transport.send(c))


def transport(url: str, **kw: Any) -> Transport:
    kw.setdefault("timeout", TEST_TIMEOUT)
    return Transport(Endpoint.parse(url), TOKEN, **kw)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------ the scheme rule


@pytest.mark.parametrize("url,origin", [
    ("https://op.example/saihm", "https://op.example"), ("https://op.example:8443/a/b", "https://op.example:8443"),
    ("http://127.0.0.1:9374/saihm", "http://127.0.0.1:9374"), ("http://localhost:9374", "http://localhost:9374"),
    ("HTTP://LocalHost:1/x", "http://localhost:1"), ("https://[2001:db8::1]:443/", "https://[2001:db8::1]:443")])
def test_https_and_local_http_endpoints_are_accepted(url: str, origin: str) -> None:
    assert Endpoint.parse(url).origin == origin


@pytest.mark.parametrize("url", ["http://example.test/saihm", "http://127.0.0.2/", "http://[::1]:8/",
                                 "http://localhost.example/", "http://127.0.0.1.example/", "ftp://op.example/",
                                 "file:///etc/passwd", "op.example/saihm", "https://", "//op.example/x",
                                 "ws://localhost/", ""])
def test_every_other_endpoint_is_refused(url: str) -> None:
    with pytest.raises(ConfigRefused):
        Endpoint.parse(url)


def test_http_to_localhost_and_127_0_0_1_reach_the_operator(server: TestServer) -> None:
    for host in ("127.0.0.1", "localhost"):
        r = call(make_session(f"http://{host}:{server.port}/saihm"), "saihm_status")
        assert r.ok and r.holder_id == HOLDER


@pytest.mark.parametrize("url", ["https://alice:SECRET@op.example/", "https://SECRET@op.example/",
                                 "http://localhost:1@SECRET.example/", "https://:SECRET@op.example/"])
def test_userinfo_is_refused_without_being_quoted(url: str) -> None:
    with pytest.raises(ConfigRefused) as e:
        Endpoint.parse(url)
    assert "SECRET" not in str(e.value) and "alice" not in str(e.value)


@pytest.mark.parametrize("url", ["https://[::1/SECRET", "http://localhost:99999/SECRET", "https://op.example:x/SECRET",
                                 "https://op.example/\nSECRET", "https://op.exämple/SECRET", " https://op.example/SECRET",
                                 "https://op.example/SECRET\x00", "https://op.example/\u202eSECRET"])
def test_an_endpoint_that_does_not_parse_is_never_quoted(url: str) -> None:
    with pytest.raises(ConfigRefused) as e:
        Endpoint.parse(url)
    assert "SECRET" not in str(e.value)
    s = Session.from_env({"SAIHM_ENDPOINT_URL": url, "SAIHM_AUTH_HEADER": TOKEN})
    r = asyncio.run(s.call("saihm_remember", {"content": "x"}))
    assert "SECRET" not in r.report() and "nothing was sent" in r.report()
    assert "SECRET" not in json.dumps(r.to_json())


def test_query_is_sent_fragment_is_not_and_neither_is_ever_printed(operator: Operator, server: TestServer) -> None:
    url = f"{server.url}?tenant=QSECRET#FSECRET"
    assert call(make_session(url), "saihm_status").ok
    assert operator.seen[0].path == "/saihm?tenant=QSECRET"
    assert repr(Endpoint.parse(url)) == f"Endpoint('http://127.0.0.1:{server.port}')"
    # every failure on that endpoint: not delivered, timed out, redirected, refused, intermediary
    dead = make_session(f"http://127.0.0.1:{closed_port()}/s?token=QSECRET#FSECRET")
    outcomes = [call(dead, "saihm_remember", content="x")]
    for reply in (Reply(delay=5), Reply(status=307, headers=((b"Location", b"http://127.0.0.1:1/QSECRET"),)),
                  Reply.of({"error": "unauthenticated"}, 401, reason=b"Unauthorized"), Reply(body=b"<html>QSECRET")):
        operator.overrides["saihm_remember"] = reply
        outcomes.append(call(make_session(url), "saihm_remember", content="x"))
    assert [r.failure.kind for r in outcomes] == [Kind.NOT_DELIVERED, Kind.TIMEOUT, Kind.REDIRECT, Kind.STATUS,
                                                  Kind.INTERMEDIARY]
    for r in outcomes:
        assert "SECRET" not in r.report() + json.dumps(r.to_json())


# ------------------------------------------------------------------ the credential


def test_the_credential_is_sent_verbatim_and_only_as_authorization(operator: Operator, server: TestServer) -> None:
    raw = "Custom  realm=x,\ttoken=\"a b\""
    call(make_session(server.url, auth=raw), "saihm_status")
    req = operator.seen[0]
    assert req.method == "POST" and req.headers["authorization"] == raw
    assert req.headers["content-type"] == "application/json"
    assert req.headers["accept-encoding"] == "identity"
    assert req.json == {"method": "saihm_status", "params": {}}
    call(make_session(server.url, auth=None), "saihm_status")
    assert "authorization" not in operator.seen[1].headers


@pytest.mark.parametrize("bad", ["Bearer SECRET\r\nX-Injected: 1", "Bearer SECRET\n", "Bearer \x00SECRET",
                                 "Bearer SECRÉT", " Bearer SECRET", "Bearer SECRET ", "Bearer\x7fSECRET"])
def test_a_credential_http_cannot_carry_is_refused_without_being_quoted(bad: str) -> None:
    with pytest.raises(ConfigRefused) as e:
        credential(bad)
    assert "SECRET" not in str(e.value) and "SECR" not in str(e.value)
    s = Session.from_env({"SAIHM_ENDPOINT_URL": "http://127.0.0.1:9/", "SAIHM_AUTH_HEADER": bad})
    r = asyncio.run(s.call("saihm_status", {}))
    assert "SECRET" not in r.report() and "SAIHM_AUTH_HEADER" in r.report()


def test_the_credential_never_reaches_a_report(operator: Operator, server: TestServer) -> None:
    operator.token = "the real one"
    s = make_session(server.url)
    texts = [call(s, "saihm_status").report(), repr(s.transport)]
    operator.overrides["saihm_status"] = Reply(delay=5)
    texts.append(call(s, "saihm_status").report())
    assert all(TOKEN not in t and "test-credential" not in t for t in texts)
    assert texts[0] == "STATUS FAILED: The operator answered HTTP 401 Unauthorized (error unauthenticated)."


# ------------------------------------------------------------------ redirects


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirects_are_refused_and_never_followed(operator: Operator, server: TestServer, status: int) -> None:
    elsewhere = Operator()
    with TestServer(elsewhere) as other:
        operator.overrides["saihm_remember"] = Reply(status=status, reason=b"Moved",
                                                     headers=((b"Location", other.url.encode()),))
        r = call(make_session(server.url), "saihm_remember", content="the memory itself")
    assert r.failure.kind is Kind.REDIRECT and r.failure.status == status
    assert elsewhere.seen == []                       # the plaintext never left for the other host
    assert r.report() == (f"REMEMBER FAILED: The endpoint answered HTTP {status}, a redirect, which this client "
                          "never follows; nothing was sent anywhere else and the call did not complete.\n"
                          "If it was stored, saihm_recall finds it; calling again may store it twice.")
    assert str(other.port) not in r.report()


# ------------------------------------------------------------------ the 16 MiB bound


def _chunks(total: int, size: int = MIB) -> list[bytes]:
    return [b"x" * min(size, total - n) for n in range(0, total, size)]


@pytest.mark.parametrize("reply", [
    Reply(body=_chunks(40 * MIB), chunked=True),                      # chunked: no Content-Length at all
    Reply(body=_chunks(40 * MIB), length=None),                       # runs to the close, no length
    Reply(status=500, body=_chunks(40 * MIB), chunked=True),          # a failure body is bounded too
    Reply(body=b"[]", length=1 << 30),                                # a length beyond the bound
], ids=["chunked-40MiB", "close-delimited-40MiB", "error-body-40MiB", "declared-1GiB"])
def test_a_body_past_16_mib_is_not_read(operator: Operator, server: TestServer, reply: Reply) -> None:
    operator.overrides["saihm_status"] = reply
    started = time.monotonic()
    r = send(transport(server.url, timeout=20))
    assert isinstance(r, Failure) and r.kind is Kind.TOO_LARGE
    assert time.monotonic() - started < 15
    assert "may or may not have acted" in r.sentence()


def test_a_content_length_that_lies_small_does_not_widen_the_read(operator: Operator, server: TestServer) -> None:
    operator.overrides["saihm_status"] = Reply(body=_chunks(40 * MIB), length=2)   # claims 2, sends 40 MiB
    r = send(transport(server.url))
    assert isinstance(r, Failure) and r.kind is Kind.INTERMEDIARY      # "xx": 2 bytes read, and no JSON


def test_exactly_16_mib_is_read_and_one_byte_more_is_not(operator: Operator, server: TestServer) -> None:
    head, tail = b'[{"cellId":"' + b"c" * 64 + b'","plaintext":"', b'"}]'
    body = head + b"a" * (MAX_BODY - len(head) - len(tail)) + tail
    assert len(body) == 16 * MIB
    operator.overrides["saihm_recall"] = Reply(body=[body[i:i + MIB] for i in range(0, len(body), MIB)], chunked=True)
    r = send(transport(server.url), Call("saihm_recall", {}))
    assert isinstance(r, Answer) and isinstance(r.value, list)     # the answer is JSON, not yet checked
    assert len(r.value[0]["plaintext"]) == len(body) - len(head) - len(tail)
    operator.overrides["saihm_recall"] = Reply(body=[body, b" "], chunked=True)
    r = send(transport(server.url), Call("saihm_recall", {}))
    assert isinstance(r, Failure) and r.kind is Kind.TOO_LARGE


def test_utf8_split_across_chunks_is_decoded_whole(operator: Operator, server: TestServer) -> None:
    text = "é 🧠 日本語 \u2028 ünïcödé"
    body = json.dumps([{"cellId": "c" * 64, "plaintext": text, "holderIdHex": HOLDER}], ensure_ascii=False).encode()
    operator.overrides["saihm_recall"] = Reply(body=[body[i:i + 1] for i in range(len(body))], chunked=True)
    r = call(make_session(server.url), "saihm_recall")
    assert r.ok and r.cells[0].plaintext == text


def test_a_compressed_body_is_not_inflated(operator: Operator, server: TestServer) -> None:
    operator.overrides["saihm_status"] = Reply(body=gzip.compress(json.dumps({"agentIdHashHex": HOLDER}).encode()),
                                               headers=((b"Content-Type", b"application/json"),
                                                        (b"Content-Encoding", b"gzip")))
    r = send(transport(server.url))
    assert isinstance(r, Failure) and r.kind is Kind.INTERMEDIARY


# ------------------------------------------------------------------ what a 2xx body must be


@pytest.mark.parametrize("body,ctype", [
    (b"<html><body>Welcome to Hotel WiFi. Log in to continue.</body></html>", b"text/html"),
    (b"", b"application/json"), (b"\xff\xfe{}", b"application/json"), (b'{"cellId": "c"', b"application/json"),
    (b"\xef\xbb\xbf{}", b"application/json"), (b"[" * 200_000, b"application/json"),
], ids=["captive-portal", "empty", "not-utf8", "truncated", "bom", "nested-past-the-parser"])
def test_a_2xx_body_that_is_not_json_is_reported_as_a_probable_intermediary(
        operator: Operator, server: TestServer, body: bytes, ctype: bytes) -> None:
    operator.overrides["saihm_remember"] = Reply(body=body, headers=((b"Content-Type", ctype),))
    r = call(make_session(server.url), "saihm_remember", content="x")
    assert r.failure.kind is Kind.INTERMEDIARY and not r.ok
    assert "probably an intermediary (a proxy or captive portal) answered, not the operator" in r.report()
    assert "Hotel" not in r.report() and "REMEMBERED" not in r.report()


def test_the_content_type_of_a_non_json_body_is_printed_only_when_clean(operator: Operator,
                                                                        server: TestServer) -> None:
    operator.overrides["saihm_status"] = Reply(body=b"<html>", headers=((b"Content-Type", b"text/html"),))
    assert "(text/html)" in call(make_session(server.url), "saihm_status").report()
    operator.overrides["saihm_status"] = Reply(body=b"<html>", headers=((b"Content-Type", b"text/html\t\x85x"),))
    report = call(make_session(server.url), "saihm_status").report()
    assert "text/html" not in report and "\x85" not in report and "\t" not in report


@pytest.mark.parametrize("body", [b'{"success": false, "success": true, "cellId": "' + b"c" * 64 + b'"}',
                                  b'{"success": true, "cellId": "c", "epoch": NaN}', b'[Infinity]'])
def test_json_that_repeats_a_member_or_holds_nan_is_malformed(operator: Operator, server: TestServer,
                                                              body: bytes) -> None:
    operator.overrides["saihm_forget"] = Reply(body=body)
    r = call(make_session(server.url), "saihm_forget", id="c" * 64)
    assert r.failure.kind is Kind.MALFORMED_JSON and "FORGOTTEN" not in r.report()
    assert "may still be stored" in r.report()


# ------------------------------------------------------------------ timeouts


def test_the_default_timeout_is_30_seconds() -> None:
    assert DEFAULT_TIMEOUT == 30.0
    assert Transport(Endpoint.parse("https://op.example/"), None).timeout == 30.0
    default = Session.from_env({"SAIHM_ENDPOINT_URL": "https://op.example/"}).transport
    assert isinstance(default, Transport) and default.timeout == 30.0
    set_by_env = Session.from_env({"SAIHM_ENDPOINT_URL": "https://op.example/", "OWNMEM_MCP_TIMEOUT": "2"}).transport
    assert isinstance(set_by_env, Transport) and set_by_env.timeout == 2.0
    for bad in ("soon", "0", "1e9", "-1"):
        assert Session.from_env({"SAIHM_ENDPOINT_URL": "https://op.example/", "OWNMEM_MCP_TIMEOUT": bad}
                                ).config_error


def _trickle(body: bytes) -> list[bytes]:
    return [body[i:i + 1] for i in range(len(body))]


SLOW_BODY = b'{"cellId": "' + b"c" * 64 + b'"}'


@pytest.mark.parametrize("reply", [Reply(delay=8), Reply(body=[b" "] * 40, chunked=True, gap=0.25),
                                   Reply(body=_trickle(SLOW_BODY), length=len(SLOW_BODY), gap=0.2)],
                         ids=["hang", "trickled-chunks", "trickled-bytes"])
def test_hangs_and_trickled_bodies_time_out_and_may_or_may_not_have_acted(operator: Operator, server: TestServer,
                                                                          reply: Reply) -> None:
    operator.overrides["saihm_remember"] = reply
    started = time.monotonic()
    r = call(make_session(server.url), "saihm_remember", content="x")
    elapsed = time.monotonic() - started
    assert r.failure.kind is Kind.TIMEOUT
    assert TEST_TIMEOUT - 0.1 <= elapsed < TEST_TIMEOUT + 1.5         # one deadline, not one per read
    assert r.report().startswith(f"REMEMBER FAILED: The operator did not answer within {TEST_TIMEOUT:g} s; "
                                 "it may or may not have acted.")


def test_a_vote_that_times_out_is_of_unknown_outcome(operator: Operator, server: TestServer) -> None:
    operator.overrides["saihm_governance_vote"] = Reply(delay=8)
    r = call(make_session(server.url), "saihm_governance_vote", proposalId="f" * 64, approve=True)
    assert r.report().startswith("VOTE OUTCOME UNKNOWN: it is unknown whether the vote was counted. "
                                 "The operator did not answer")


# ------------------------------------------------------------------ the reason phrase, and what the HTTP library says


@pytest.mark.parametrize("reason", [b"Bad\tGateway", b"Bad \x1b[31mGateway", b"Bad \x85Gateway",
                                    b"Bad \xe2\x80\xaeGateway", b"Bad \xc2\x9bGateway", b"Bad \xe2\x80\xa8Gateway",
                                    b"\xff"],
                         ids=["TAB", "ESC", "NEL-byte", "RLO-utf8", "CSI-utf8", "LS-utf8", "obs-text"])
def test_a_reason_phrase_with_control_or_bidi_characters_is_left_out(operator: Operator, server: TestServer,
                                                                     reason: bytes) -> None:
    operator.overrides["saihm_status"] = Reply.of({"error": "operator_storage_unavailable"}, 502, reason=reason)
    r = call(make_session(server.url), "saihm_status")
    assert r.report() == "STATUS FAILED: The operator answered HTTP 502 (error operator_storage_unavailable)."
    assert "reason" not in r.to_json()["failure"]


@pytest.mark.parametrize("head", [b"HTTP/1.1 abc SECRET\r\n\r\n", b"SECRET garbage\r\n\r\n",
                                  b"HTTP/1.1 200 OK\r\nX-\x00SECRET: 1\r\n\r\n",
                                  b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n[SECRET"],
                         ids=["bad-status", "not-http", "NUL-in-header", "short-body"])
def test_protocol_errors_report_the_clients_own_sentence_not_the_librarys(head: bytes) -> None:
    with _RawServer(head) as port:
        r = call(make_session(f"http://127.0.0.1:{port}/s"), "saihm_status")
    assert r.report() == ("STATUS FAILED: The connection failed before a complete answer arrived; "
                          "the operator may or may not have acted.")
    assert "SECRET" not in json.dumps(r.to_json())


class _RawServer:
    """Answers every connection with fixed bytes, then closes."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.sock.settimeout(5)

    def __enter__(self) -> int:
        def serve() -> None:
            try:
                conn, _ = self.sock.accept()
                with conn:
                    conn.recv(65536)
                    conn.sendall(self.data)
            except OSError:
                pass
        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        return int(self.sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self.thread.join(6)
        self.sock.close()


def test_an_endpoint_nobody_listens_on_was_not_delivered() -> None:
    port = closed_port()
    r = call(make_session(f"http://127.0.0.1:{port}/saihm"), "saihm_forget", id="c" * 64)
    assert r.report() == (f"FORGET FAILED: ownmem agent is not running at http://127.0.0.1:{port} (nothing answers "
                          "there); the call was not delivered. To use this memory, start it with `ownmem agent` in a "
                          "terminal (and keep it running), then call again. If it runs on another port, "
                          "SAIHM_ENDPOINT_URL must name that port (`ownmem agent connect NAME` prints the "
                          "configuration).")
    assert r.to_json()["failure"] == {"kind": "not_delivered", "origin": f"http://127.0.0.1:{port}"}


# ------------------------------------------------------------------ certificate validation


def test_a_self_signed_certificate_is_refused(operator: Operator, tls_server: TestServer) -> None:
    r = call(make_session(tls_server.url), "saihm_remember", content="the memory itself")
    assert r.failure.kind is Kind.CERTIFICATE
    assert r.report() == "REMEMBER FAILED: The operator's TLS certificate could not be validated; nothing was sent."
    assert operator.seen == []


def test_the_same_server_is_reached_once_its_certificate_is_trusted(operator: Operator, tls_server: TestServer,
                                                                    self_signed: tuple[Path, Path]) -> None:
    trusted = ssl.create_default_context(cafile=str(self_signed[0]))
    r = call(make_session(tls_server.url, verify=trusted), "saihm_remember", content="over TLS")
    assert r.ok and list(operator.cells.values()) == ["over TLS"]
