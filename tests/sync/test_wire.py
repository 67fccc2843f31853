"""The sync wire (ownmem.wire) as the device sees it: a hostile server at every field.

A real HTTP server on 127.0.0.1 (``http.server`` in a thread) answers each client call with
a malformed body -- a missing field, a wrong type, bad or upper-case hex, a wrong length, a
negative or huge integer, truncated CBOR, a body that is not JSON -- and the call raises the
one typed error, ``WireError`` (a ``SyncError``, code "bad_server_answer"), never a
KeyError, ValueError, TypeError or AttributeError.  Then the round trip of every message:
``parse(encode(x)) == x``.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import httpx
import hypothesis
import hypothesis.strategies as st
import pytest

from ownmem.aperto import keys as K
from ownmem.crypto import cbor, provider, run_sync
from ownmem.errors import SyncError, WireError
from ownmem.saihm import notes
from ownmem.vault import Vault
from ownmem.vault.remote import Remote
from ownmem.vault.sync import Syncer, SyncReport
from ownmem.wire import codec, errors, limits, messages, publiclog, shares
from ownmem.wire.limits import HOLDER_PUB_LEN, HOLDER_SIG_LEN, MAX_JSON, MAX_PAGE

NAME = "wired"
TOKEN = "A" * 43


# ------------------------------------------------------------------ the test server

@dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeServer:
    """Answers (method, path) with what the test put in ``routes``; records every request."""

    url: str
    routes: dict[tuple[str, str], Answer] = field(default_factory=dict)
    seen: list[tuple[str, str]] = field(default_factory=list)

    def answer(self, method: str, path: str, body: Any = b"", status: int = 200, **kw: Any) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.routes[(method, f"/v1/vaults/{NAME}{path}" if not path.startswith("/v1/") else path)] = \
            Answer(status, raw, **kw)


@pytest.fixture(scope="module")
def _httpd() -> Iterator[tuple[ThreadingHTTPServer, list[FakeServer]]]:
    current: list[FakeServer] = []

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("?", 1)[0]
            srv = current[-1]
            srv.seen.append((self.command, path))
            a = srv.routes.get((self.command, path), Answer(404, b'{"error":"not_found","message":"no route"}'))
            self.send_response(a.status)
            self.send_header("Content-Type", a.content_type)
            self.send_header("Content-Length", str(len(a.body)))
            for k, v in a.headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(a.body)

        do_GET = do_POST = do_PUT = _serve

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield httpd, current
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def server(_httpd: tuple[ThreadingHTTPServer, list[FakeServer]]) -> FakeServer:
    httpd, current = _httpd
    s = FakeServer(f"http://127.0.0.1:{httpd.server_address[1]}")
    current.append(s)
    return s


@pytest.fixture
def remote(server: FakeServer) -> Iterator[Remote]:
    with httpx.Client(timeout=10.0, follow_redirects=False) as c:
        r = Remote(server.url, NAME, client=c)
        r.token = TOKEN
        yield r


def refused(call: Callable[[], Any]) -> WireError:
    """The call fails with the wire's one typed error (anything else propagates and fails the test)."""
    with pytest.raises(WireError) as e:
        call()
    assert isinstance(e.value, SyncError) and e.value.code == "bad_server_answer"
    return e.value


# ------------------------------------------------------------------ valid answers, and how to break them

def _holder() -> tuple[bytes, bytes]:
    pub = os.urandom(HOLDER_PUB_LEN)
    return pub, hashlib.sha256(pub).digest()


HOLDER_PUB, HOLDER_ID = _holder()

_LOG_KEY = notes.VerifierKey.for_ed25519("ownmem.log/0123456789abcdef", os.urandom(32))
_LOG_NOTE = notes.signed_note(notes.Checkpoint(_LOG_KEY.name, 12, os.urandom(32)).body(),
                             [notes.NoteSignature(_LOG_KEY.name, _LOG_KEY.key_id, os.urandom(64))]).encode()
SAMPLES: dict[type[codec.JsonMessage], codec.JsonMessage] = {
    messages.VaultInfo: messages.VaultInfo(NAME, os.urandom(16), os.urandom(32), os.urandom(32), os.urandom(32),
                                           HOLDER_PUB, HOLDER_ID, os.urandom(40)),
    messages.Registration: messages.Registration(NAME, os.urandom(16), os.urandom(32), os.urandom(32), os.urandom(32),
                                   HOLDER_PUB, b"\xa0" * 300, os.urandom(64), os.urandom(700), os.urandom(64),
                                   os.urandom(HOLDER_SIG_LEN)),
    messages.Registered: messages.Registered(NAME, HOLDER_ID, os.urandom(32)),
    messages.Challenge: messages.Challenge(os.urandom(32), 1_700_000_060),
    messages.SessionRequest: messages.SessionRequest(os.urandom(32), os.urandom(64)),
    messages.Session: messages.Session(TOKEN, 1_700_000_900),
    messages.MetadataVersion: messages.MetadataVersion(7, os.urandom(500), os.urandom(64)),
    messages.MetadataUpdate: messages.MetadataUpdate(7, os.urandom(500), os.urandom(64)),
    messages.Rekey: messages.Rekey(7, os.urandom(16), os.urandom(32), os.urandom(32), os.urandom(40), os.urandom(500),
                                   os.urandom(64), os.urandom(64), os.urandom(64), os.urandom(HOLDER_SIG_LEN)),
    messages.MetadataAccepted: messages.MetadataAccepted(8),
    messages.RecoveryRecord: messages.RecoveryRecord(os.urandom(limits.RECOVERY_RECORD_LEN)),
    messages.PushResult: messages.PushResult(3, 1, 0, 41),
    messages.EraseRequest: messages.EraseRequest((os.urandom(3000), os.urandom(3000))),
    messages.EraseResult: messages.EraseResult((os.urandom(32),), (os.urandom(32), os.urandom(32)), True),
    messages.RewrapRequest: messages.RewrapRequest((os.urandom(32), os.urandom(32)), (os.urandom(40), os.urandom(40))),
    messages.RewrapResult: messages.RewrapResult(2, 17),
    messages.ReceiptsRequest: messages.ReceiptsRequest((os.urandom(3000), os.urandom(3000))),
    messages.ReceiptsLogged: messages.ReceiptsLogged((os.urandom(32), os.urandom(32))),
    messages.LiveEvent: messages.LiveEvent(41),
    messages.ErrorBody: messages.ErrorBody("stale_version", "the metadata changed; pull and retry"),
    publiclog.LogKeyInfo: publiclog.LogKeyInfo(_LOG_KEY.name, str(_LOG_KEY), _LOG_KEY.public_key,
                                               f"{_LOG_KEY.key_id:08x}"),
    publiclog.LogInclusion: publiclog.LogInclusion(5, 12, (os.urandom(32), os.urandom(32))),
    publiclog.Witness: publiclog.Witness(os.urandom(16), str(_LOG_KEY), _LOG_NOTE, 1_700_000_000, os.urandom(64)),
}
# sharing between people (server/share_routes.py)
_SHARE = shares.ShareEntry(b"\xaa" * 200, os.urandom(32), "accepted", True, True)
SAMPLES.update({
    shares.HolderRecord: shares.HolderRecord(NAME, os.urandom(16), os.urandom(32), os.urandom(32), os.urandom(32),
                                             HOLDER_PUB, HOLDER_ID, os.urandom(HOLDER_SIG_LEN)),
    shares.ShareOffer: shares.ShareOffer(os.urandom(400), os.urandom(300), (os.urandom(shares.SHARE_ITEM_LEN),)),
    shares.HolderProof: shares.HolderProof(os.urandom(HOLDER_SIG_LEN)),
    shares.ShareOffered: shares.ShareOffered(os.urandom(32), os.urandom(32)),
    shares.ShareEntry: _SHARE,
    # entries are ShareEntry, sampled on their own (the mutator takes flat lists)
    shares.ShareList: shares.ShareList((), (), False),
    shares.ShareAnswer: shares.ShareAnswer(os.urandom(32), "withdrawn"),
    shares.RevokeRequest: shares.RevokeRequest(os.urandom(300)),
    shares.RevokeResult: shares.RevokeResult(True, os.urandom(32), True),
})

NOT_JSON: list[tuple[str, bytes]] = [("html", b"<html>502 Bad Gateway</html>"), ("empty", b""),
                                     ("truncated", b'{"version": 1'), ("array", b"[]"), ("null", b"null"),
                                     ("not utf-8", b"\xff\xfe\x00"), ("huge number", b"9" * 5000),
                                     ("deep", b"[" * 100_000 + b"]" * 100_000)]


def _bad_values(v: Any) -> list[tuple[str, Any]]:
    """Wrong values for a field that holds ``v``: of another type, and wrong in its own type."""
    out: list[tuple[str, Any]] = [("null", None), ("list", [v]), ("object", {"v": v})]
    if isinstance(v, bool):             # a flag: the other flag is as valid, a number or text is not
        out += [("number", int(v)), ("string", str(v).lower())]
    elif isinstance(v, int):
        out += [("negative", -1), ("huge", 2 ** 64), ("float", float(v)), ("bool", True), ("string", str(v))]
    elif isinstance(v, list):
        out += [("string", "00"), ("item not hex", ["zz"]), ("item number", [1]), ("too many", ["00" * 32] * 2001)]
        if v:
            out += [("item too short", [v[0][:-2]]), ("item upper", [v[0].upper()])]
    elif isinstance(v, str):
        out += [("number", 12), ("upper", v.upper() if v.upper() != v else v + "X"), ("spaced", f" {v}"),
                ("odd", v + "0"), ("one byte short", v[:-2]), ("one byte more", v + "00"), ("not hex", "zz" + v[2:]),
                ("newline", v + "\n"), ("control", v[:1] + "\x1b[2J"), ("huge", "ab" * (MAX_JSON + 1))]
    return out


M = TypeVar("M", bound=codec.JsonMessage)


def _sample(cls: type[M]) -> M:
    """SAMPLES[cls], typed as that class."""
    msg = SAMPLES[cls]
    assert isinstance(msg, cls)
    return msg


def _mutations(msg: codec.JsonMessage) -> Iterator[tuple[str, bytes]]:
    good = msg.encode()
    for k in good:
        yield f"{k} missing", json.dumps({x: y for x, y in good.items() if x != k}).encode()
    for k, v in good.items():
        for what, bad in _bad_values(v):
            if bad != v:
                yield f"{k} {what}", json.dumps({**good, k: bad}).encode()
    yield from NOT_JSON


def _cases(cls: type[codec.JsonMessage]) -> list[Any]:
    """The breakages of one message that its parse must refuse (a few spellings stay valid: a
    vault name of upper case is not one, so only the mutations that really break are kept)."""
    out = []
    for what, body in _mutations(SAMPLES[cls]):
        try:
            cls.parse(codec.load_json(body))
        except WireError:
            out.append(pytest.param(body, id=what))
    return out


# Text fields take other text of their shape (a name of "wired0", a token one character
# longer), and hex fields of no fixed length take other lengths: these mutations leave a
# message valid.  Every other mutation must be refused.
STILL_VALID = ({f"{k} {what}" for k in ("name", "token", "error", "message")
                for what in ("upper", "spaced", "odd", "one byte short", "one byte more", "not hex")}
               | {f"{k} {what}" for k in ("metadata", "key_receipt") for what in ("one byte short", "one byte more")}
               | {"receipts item too short"})
# the sharing messages' contract and receipt are CBOR of any length
STILL_VALID |= {f"{k} {what}" for k in ("contract", "receipt") for what in ("one byte short", "one byte more")}


def test_every_mutation_of_a_message_is_refused_by_its_parse() -> None:
    """The cases below are the mutations that parse refuses; none is dropped but a still-valid text."""
    for cls, msg in SAMPLES.items():
        kept = {what for what, body in _mutations(msg)} - {p.id for p in _cases(cls)}
        assert kept <= STILL_VALID, (cls.__name__, kept - STILL_VALID)


# ------------------------------------------------------------------ each client call, against the server

@pytest.mark.parametrize("body", _cases(messages.VaultInfo))
def test_lookup_refuses_a_malformed_answer(body: bytes, server: FakeServer, remote: Remote) -> None:
    server.answer("GET", "", body)
    refused(remote.lookup)


def test_lookup_refuses_an_answer_for_another_vault(server: FakeServer, remote: Remote) -> None:
    other = SAMPLES[messages.VaultInfo].encode() | {"name": "another"}
    server.answer("GET", "", other)
    refused(remote.lookup)


def test_lookup_refuses_a_holder_id_that_is_not_the_holder_keys(server: FakeServer, remote: Remote) -> None:
    server.answer("GET", "", SAMPLES[messages.VaultInfo].encode() | {"holder_id": os.urandom(32).hex()})
    assert "holder_id" in str(refused(remote.lookup))


def test_lookup_unknown_vault_is_none_but_another_404_is_refused(server: FakeServer, remote: Remote) -> None:
    server.answer("GET", "", {"error": "unknown_vault", "message": "no such vault"}, status=404)
    assert remote.lookup() is None
    server.answer("GET", "", b"<html>not here</html>", status=404, content_type="text/html")   # a wrong base URL
    with pytest.raises(SyncError) as e:
        remote.lookup()
    assert e.value.status == 404 and e.value.server_code is None


@pytest.mark.parametrize("body", _cases(messages.Registered))
def test_register_refuses_a_malformed_answer(body: bytes, server: FakeServer, remote: Remote) -> None:
    server.answer("POST", "/v1/vaults", body, status=201)
    refused(lambda: remote.register(_sample(messages.Registration)))


@pytest.fixture(scope="module")
def sync_key() -> K.SigningKey:
    return run_sync(K.signing_key(provider(), b"\x07" * 32))


@pytest.mark.parametrize("body", _cases(messages.Challenge))
def test_login_refuses_a_malformed_challenge(
        body: bytes, server: FakeServer, remote: Remote, sync_key: K.SigningKey) -> None:
    server.answer("POST", "/challenge", body)
    server.answer("POST", "/session", SAMPLES[messages.Session].encode())
    remote.token = None
    refused(lambda: remote.login(sync_key))
    assert remote.token is None and ("POST", f"/v1/vaults/{NAME}/session") not in server.seen


@pytest.mark.parametrize("body", _cases(messages.Session) + [
    pytest.param(json.dumps({"token": "x" * 20 + "\r\nX-Injected: 1", "expires_at": 1}).encode(),
                 id="header injection"),
    pytest.param(json.dumps({"token": "short", "expires_at": 1}).encode(), id="token too short")])
def test_login_refuses_a_malformed_session(
        body: bytes, server: FakeServer, remote: Remote, sync_key: K.SigningKey) -> None:
    server.answer("POST", "/challenge", SAMPLES[messages.Challenge].encode())
    server.answer("POST", "/session", body)
    remote.token = None
    err = refused(lambda: remote.login(sync_key))
    assert remote.token is None
    assert "Injected" not in str(err) and "xxxx" not in str(err)     # a credential is never echoed


@pytest.mark.parametrize("body", _cases(messages.MetadataVersion))
def test_get_metadata_refuses_a_malformed_answer(body: bytes, server: FakeServer, remote: Remote) -> None:
    server.answer("GET", "/metadata", body)
    refused(remote.get_metadata)


@pytest.mark.parametrize("body", _cases(messages.MetadataAccepted) + [
    pytest.param(b'{"version": 7}', id="not the next version"),
    pytest.param(b'{"version": 9}', id="skipped a version")])
def test_put_metadata_refuses_a_malformed_answer(body: bytes, server: FakeServer, remote: Remote) -> None:
    server.answer("PUT", "/metadata", body)
    refused(lambda: remote.put_metadata(_sample(messages.MetadataUpdate)))


PUSH = messages.PushRequest((messages.PushItem(b"cell", os.urandom(40)),))


@pytest.mark.parametrize("body", _cases(messages.PushResult))
def test_push_refuses_a_malformed_answer(body: bytes, server: FakeServer, remote: Remote) -> None:
    server.answer("POST", "/cells", body)
    refused(lambda: remote.push(PUSH))


@pytest.mark.parametrize("body", _cases(messages.EraseResult))
def test_erase_refuses_a_malformed_answer(body: bytes, server: FakeServer, remote: Remote) -> None:
    server.answer("POST", "/erase", body)
    refused(lambda: remote.erase([b"receipt"]))


def test_an_erase_answer_confirms_only_the_cells_it_names_that_were_asked() -> None:
    """The pure decision of Syncer.push_erasures: a cell the answer leaves out is not confirmed,
    whatever else it says; a cell it names that was not asked confirms nothing."""
    from ownmem.vault.syncrules import erasure_answer

    one, two, three, stranger = (bytes([i]) * 32 for i in (1, 2, 3, 9))
    asked = [one, two, three]
    assert erasure_answer(asked, messages.EraseResult((), (), False)) == (set(), asked)
    assert erasure_answer(asked, messages.EraseResult((one,), (three,), True)) == ({one, three}, [two])
    assert erasure_answer(asked, messages.EraseResult((stranger,), (stranger,), False)) == (set(), asked)
    assert erasure_answer(asked, messages.EraseResult((three, two), (one,), False)) == ({one, two, three}, [])


def _events(*data: str) -> bytes:
    return b"".join(f"event: changes\ndata: {d}\n\n".encode() for d in data)


@pytest.mark.parametrize("data", ["{}", '{"last_seq": -1}', '{"last_seq": "5"}', '{"last_seq": 1.5}',
                                  '{"last_seq": 99999999999999999999}', "[5]", "5", "not json", ""])
def test_events_refuse_a_malformed_event(data: str, server: FakeServer, remote: Remote) -> None:
    server.answer("GET", "/events", _events('{"last_seq": 4}', data), content_type="text/event-stream")
    it = remote.events()
    assert next(it) == 4
    refused(lambda: next(it))


# ------------------------------------------------------------------ the changes page (CBOR)

CID = bytes(range(32))
GOOD_ROWS = [[3, "cell", CID, b"\x84cell", b"\x01" * 40], [4, "cell", CID[::-1], None, None],
             [5, "erase", CID, None, None], [6, "meta", None, None, None]]


def _page(rows: Any = None, nxt: Any = 6, last: Any = 9, more: Any = True, **extra: Any) -> bytes:
    return cbor.encode({1: GOOD_ROWS if rows is None else rows, 2: nxt, 3: last, 4: more, **extra})


def _row(i: int, v: Any) -> list[Any]:
    rows = [list(r) for r in GOOD_ROWS]
    rows[0][i] = v
    return rows


BAD_PAGES = {
    "truncated": _page()[:-3],
    "trailing bytes": _page() + b"\x00",
    "indefinite array": b"\xa4\x01\x9f\xff\x02\x02\x03\x02\x04\xf4",
    "not a map": cbor.encode([GOOD_ROWS, 6, 9, True]),
    "json": b'{"1": [], "2": 0, "3": 0, "4": false}',
    "empty": b"",
    "key missing": cbor.encode({1: GOOD_ROWS, 2: 6, 3: 9}),
    "rows not a list": _page(rows={}),
    "too many rows": _page(rows=[[i + 3, "meta", None, None, None] for i in range(MAX_PAGE + 1)],
                           nxt=MAX_PAGE + 3, last=MAX_PAGE + 9),
    "row too short": _page(rows=[r[:4] for r in GOOD_ROWS]),
    "row not a list": _page(rows=[b"row"]),
    "seq zero": _page(rows=_row(0, 0)),
    "seq negative": _page(rows=_row(0, -3)),
    "seq huge": _page(rows=_row(0, 2 ** 64 - 1)),
    "seq text": _page(rows=_row(0, "3")),
    "seq bool": _page(rows=_row(0, True)),
    "unknown kind": _page(rows=_row(1, "share")),
    "kind bytes": _page(rows=_row(1, b"cell")),
    "cell id short": _page(rows=_row(2, CID[:31])),
    "cell id text": _page(rows=_row(2, CID.hex())),
    "cell text": _page(rows=_row(3, "cell")),
    "cell empty": _page(rows=_row(3, b"")),
    "cell without wrapped DEK": _page(rows=_row(4, None)),
    "wrapped DEK short": _page(rows=_row(4, b"\x01" * 39)),
    "erase carrying a cell": _page(rows=[[3, "erase", CID, b"cell", None]]),
    "meta naming a cell": _page(rows=[[3, "meta", CID, None, None]], nxt=3),
    "seq not increasing": _page(rows=[GOOD_ROWS[1], GOOD_ROWS[0]]),
    "seq repeated": _page(rows=[GOOD_ROWS[0], GOOD_ROWS[0]], nxt=3),
    "next not the last row": _page(nxt=5),
    "next huge": _page(nxt=2 ** 64 - 1, last=2 ** 64 - 1, more=False),
    "last negative": _page(last=-1),
    "more lies": _page(more=False),
    "more not bool": _page(more=1),
    "empty page moves the position": _page(rows=[], nxt=9, last=9, more=False),
    "rows at or before since": _page(rows=[[2, "meta", None, None, None]], nxt=2),
}


@pytest.mark.parametrize("body", BAD_PAGES.values(), ids=BAD_PAGES.keys())
def test_changes_refuses_a_malformed_page(body: bytes, server: FakeServer, remote: Remote) -> None:
    server.answer("GET", "/changes", body, content_type="application/cbor")
    refused(lambda: remote.changes(2))


def test_a_wrap_change_parses_and_a_malformed_one_is_refused() -> None:
    w = messages.WrapChange(7, CID, b"\x02" * 40)
    assert messages.change_row(cbor.decode(w.encode())) == w
    for bad in ([7, "wrap", CID, b"cell", b"\x02" * 40], [7, "wrap", CID, None, b"\x02" * 24],
                [7, "wrap", CID[:5], None, b"\x02" * 40]):
        with pytest.raises(WireError):
            messages.change_row(bad)
    with pytest.raises(WireError, match="of one length"):
        messages.RewrapRequest.parse({"cell_ids": [CID.hex()], "wrapped_deks": ["02" * 40] * 2})


def test_changes_reads_a_good_page(server: FakeServer, remote: Remote) -> None:
    server.answer("GET", "/changes", _page(), content_type="application/cbor")
    page = remote.changes(2)
    assert page.rows == (messages.CellChange(3, CID, b"\x84cell", b"\x01" * 40), messages.ErasedCell(4, CID[::-1]),
                         messages.EraseChange(5, CID, None), messages.MetaChange(6))
    assert (page.next_since, page.last_seq, page.more) == (6, 9, True)


def test_pull_stops_when_a_server_says_more_forever(server: FakeServer, tmp_path: Path) -> None:
    """An empty page that says "more" ends the pull: a server cannot keep a device spinning."""
    v = Vault.create(tmp_path / "v", "wire tests: a passphrase")
    try:
        server.answer("POST", "/challenge", SAMPLES[messages.Challenge].encode())
        server.answer("POST", "/session", SAMPLES[messages.Session].encode())
        server.answer("GET", "/changes", _page(rows=[], nxt=0, last=10 ** 6), content_type="application/cbor")
        with httpx.Client(timeout=10.0) as c:
            s = Syncer(v, Remote(server.url, NAME, client=c))
            assert s.pull(SyncReport()) is False
        assert server.seen.count(("GET", f"/v1/vaults/{NAME}/changes")) == 1
    finally:
        v.lock()


# ------------------------------------------------------------------ refusals, sizes, redirects

@pytest.mark.parametrize("body", [b"", b"<html>oops</html>", b'{"error": 5, "message": "x"}', b'{"error": "x"}',
                                  b'{"error": "Bad Code", "message": "x"}', b'{"error": "x", "message": 7}',
                                  b'{"error": "x", "message": "\\u001b[2Jgone"}', b"[]",
                                  json.dumps({"error": "x", "message": "m" * 501}).encode()],
                         ids=["empty", "html", "code number", "no message", "code spelling", "message number",
                              "terminal escape", "array", "message long"])
def test_a_refusal_with_a_malformed_body_keeps_only_the_status(body: bytes, server: FakeServer, remote: Remote) -> None:
    server.answer("GET", "/metadata", body, status=409)
    with pytest.raises(SyncError) as e:
        remote.get_metadata()
    assert not isinstance(e.value, WireError)
    assert (e.value.status, e.value.server_code) == (409, None)
    assert str(e.value) == "server refused: HTTP 409"


def test_a_refusal_carries_the_servers_code(server: FakeServer, remote: Remote) -> None:
    server.answer("GET", "/metadata", {"error": "rate_limited", "message": "too many requests"}, status=429)
    with pytest.raises(SyncError) as e:
        remote.get_metadata()
    assert (e.value.status, e.value.server_code, str(e.value)) == (429, "rate_limited",
                                                                  "server refused: too many requests")


def test_an_answer_over_the_size_limit_is_refused_while_read(
        server: FakeServer, remote: Remote, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ownmem.vault.remote.MAX_ANSWER", 1 << 16)
    server.answer("GET", "/changes", b"\x00" * ((1 << 16) + 1), content_type="application/cbor")
    assert "over" in str(refused(lambda: remote.changes(0)))


def test_a_redirect_is_not_followed_even_by_a_client_that_would(server: FakeServer) -> None:
    server.answer("GET", "/metadata", b"", status=302, headers={"Location": f"{server.url}/v1/elsewhere"})
    server.answer("GET", "/v1/elsewhere", SAMPLES[messages.MetadataVersion].encode())
    with httpx.Client(timeout=10.0, follow_redirects=True) as c:
        r = Remote(server.url, NAME, client=c)
        r.token = TOKEN
        with pytest.raises(SyncError) as e:
            r.get_metadata()
    assert e.value.status == 302 and ("GET", "/v1/elsewhere") not in server.seen


# ------------------------------------------------------------------ round trips

@pytest.mark.parametrize("msg", SAMPLES.values(), ids=lambda m: type(m).__name__)
def test_json_message_round_trip(msg: codec.JsonMessage) -> None:
    cls = type(msg)
    assert cls.parse(msg.encode()) == msg
    assert cls.parse(codec.load_json(codec.dump_json(msg.encode()))) == msg
    again = cls.parse(codec.load_json(codec.dump_json(msg.encode())))
    assert codec.dump_json(again.encode()) == codec.dump_json(msg.encode())


def test_every_message_type_is_sampled() -> None:
    found = {c for m in (messages, publiclog, shares) for c in vars(m).values()
             if isinstance(c, type) and issubclass(c, codec.JsonMessage)} - {codec.JsonMessage}
    assert found == set(SAMPLES)


def test_a_share_list_round_trips_its_entries() -> None:
    msg = shares.ShareList((_SHARE,),
                           (_SHARE, shares.ShareEntry(b"\xbb" * 20, os.urandom(32), "offered", False, False)), True)
    assert shares.ShareList.parse(codec.load_json(codec.dump_json(msg.encode()))) == msg
    with pytest.raises(WireError):
        shares.ShareList.parse({"offered": [{**_SHARE.encode(), "state": "stolen"}], "received": [], "more": False})


def test_session_repr_hides_the_token() -> None:
    assert TOKEN not in repr(SAMPLES[messages.Session]) and TOKEN not in str(SAMPLES[messages.Session])


def test_error_body_of_every_registered_code_parses() -> None:
    for code, (status, description) in errors.ERRORS.items():
        assert 400 <= status < 600 and description
        body = messages.ErrorBody(code, description)
        assert messages.ErrorBody.parse(codec.load_json(codec.dump_json(body.encode()))) == body


def test_push_request_round_trip_and_wire_format() -> None:
    req = messages.PushRequest(tuple(messages.PushItem(os.urandom(n + 1), os.urandom(40)) for n in range(5)))
    raw = req.encode()
    assert raw == cbor.encode([[i.cell, i.wrapped_dek] for i in req.items])
    assert messages.PushRequest.parse(raw) == req


@pytest.mark.parametrize("raw", [b"", b"\xa0", cbor.encode([[b"c"]]), cbor.encode([[b"c", "w"]]), cbor.encode([b"c"]),
                                 cbor.encode([[b"c", b"w"]] * (limits.MAX_BATCH + 1)),
                                 cbor.encode([[[b"c"], b"w"]])[:-1]])
def test_push_request_parse_refuses_malformed(raw: bytes) -> None:
    with pytest.raises(WireError):
        messages.PushRequest.parse(raw)


_seq_gaps = st.lists(st.integers(1, 1 << 40), max_size=40)
_row_kind = st.sampled_from(["cell", "gone", "erase", "wrap", "wrap-gone", "meta"])


@hypothesis.given(gaps=_seq_gaps, kinds=st.lists(_row_kind, min_size=40, max_size=40),
                  blobs=st.lists(st.binary(min_size=1, max_size=300), min_size=40, max_size=40),
                  since=st.integers(0, 1 << 20), extra=st.integers(0, 3))
@hypothesis.settings(max_examples=200, deadline=None, database=None)
def test_changes_page_round_trip(gaps: list[int], kinds: list[str], blobs: list[bytes], since: int, extra: int) -> None:
    rows: list[messages.ChangeRow] = []
    seq = since
    for gap, kind, blob in zip(gaps, kinds, blobs, strict=False):
        seq += gap
        cid = hashlib.sha256(blob).digest()
        rows.append(messages.CellChange(seq, cid, blob, blob[:1] * 40) if kind == "cell"
                    else messages.ErasedCell(seq, cid) if kind == "gone"
                    else messages.EraseChange(seq, cid, None) if kind == "erase"
                    else messages.WrapChange(seq, cid, blob[:1] * 40) if kind == "wrap"
                    else messages.WrapChange(seq, cid, None) if kind == "wrap-gone" else messages.MetaChange(seq))
    nxt = rows[-1].seq if rows else since
    page = messages.ChangesPage(tuple(rows), nxt, nxt + extra)
    raw = page.encode()
    assert raw == cbor.encode({1: [cbor.decode(r.encode()) for r in rows], 2: nxt, 3: nxt + extra, 4: extra > 0})
    assert messages.ChangesPage.parse(raw, since) == page
    assert messages.ChangesPage.parse(raw) == page


def test_vault_names_refuse_a_final_newline() -> None:
    assert limits.valid_vault_name("abc") and not limits.valid_vault_name("abc\n") and not limits.valid_vault_name("")
