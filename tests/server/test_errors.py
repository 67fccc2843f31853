"""Every answer of the blind server that is not 2xx has one shape, ``{"error": code, "message":
text}``, with a code from the one registry (``ownmem.wire.errors.ERRORS``) and that code's status:
refusals, an unknown route, a wrong method, a body too large, a rate limit, an unexpected
failure (STYLE.md 5, 12).  The OpenAPI document enumerates the registry; no error code is
spelled out anywhere else; a 500 never shows the client a traceback and is logged once."""
from __future__ import annotations

import ast
import logging
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from ownmem.crypto import cbor
from ownmem.wire.errors import ERRORS, ErrorCode
from ownmem.wire.limits import MAX_JSON
from server.app import create_app
from server.context import Config
from server.openapi import OPENAPI
from tests.server.conftest import Backend, LinkedVault

ROOT = Path(__file__).resolve().parents[2]
REGISTERED = {str(c) for c in ErrorCode}


def error_of(r: httpx.Response) -> str:
    """The answer's code, once its shape is checked: JSON, exactly error + message, a registered
    code whose status is the answer's, no traceback."""
    assert r.headers["content-type"].startswith("application/json"), (r.status_code, r.headers, r.text)
    body = r.json()
    assert set(body) == {"error", "message"} and isinstance(body["message"], str), body
    assert body["error"] in REGISTERED, body
    assert ErrorCode(body["error"]).status == r.status_code, (r.status_code, body)
    assert "Traceback" not in r.text and 'File "' not in r.text
    return str(body["error"])


# ---------------------------------------------------------------- the registry and its documentation

def test_registry_names_every_code_once_with_one_status() -> None:
    assert set(ERRORS) == set(ErrorCode)
    for code, (status, description) in ERRORS.items():
        assert 400 <= status < 600 and description and code.status == status and code.description == description
        assert code.value == code.value.lower() and code.value.isidentifier()


def test_openapi_enumerates_the_registry() -> None:
    error = OPENAPI["components"]["schemas"]["Error"]
    assert error["properties"]["error"]["enum"] == [str(c) for c in ErrorCode]
    for code, (status, description) in ERRORS.items():
        assert f"`{code}` ({status}): {description}" in error["description"]
    documented: set[int] = set()
    for path, item in OPENAPI["paths"].items():
        for method, op in item.items():
            assert "500" in op["responses"], (path, method)
            for status, resp in op["responses"].items():
                if status.startswith("2"):
                    continue
                documented.add(int(status))
                enum = resp["content"]["application/json"]["schema"]["properties"]["error"]["enum"]
                assert enum == [str(c) for c, (s, _) in ERRORS.items() if s == int(status)], (path, method, status)
    # every status of the registry but 405 (no operation documents a method it does not take) is
    # documented on some operation
    assert {s for s, _ in ERRORS.values()} - documented == {405}


def _string_constants(tree: ast.AST) -> Iterator[tuple[ast.Constant, ast.Call | None]]:
    """Every string constant, with the call it is the first argument of (if it is)."""
    first_args = {id(n.args[0]): n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node, first_args.get(id(node))


# The cell and receipt checks of server/verify.py still name their codes as strings: that file's
# checks are moving into saihm/ (a parallel change).  Refused() turns each into the registry's
# ErrorCode at once, so an unregistered one fails on the spot; this test checks them statically.
SPELLED_OUT_IN = {"server/verify.py": "Refused"}
SCANNED = sorted([*ROOT.glob("server/*.py"), *ROOT.glob("server/storage/*.py"),
                  ROOT / "py/ownmem/vault/sync.py", ROOT / "py/ownmem/vault/remote.py",
                  ROOT / "py/ownmem/web/remote.py"])


@pytest.mark.parametrize("path", SCANNED, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_error_code_is_spelled_out_outside_the_registry(path: Path) -> None:
    rel = str(path.relative_to(ROOT))
    tree = ast.parse(path.read_text())
    for node, call in _string_constants(tree):
        if node.value not in REGISTERED:
            continue
        caller = call.func.id if call is not None and isinstance(call.func, ast.Name) else None
        assert caller is not None and SPELLED_OUT_IN.get(rel) == caller, \
            f"{rel}:{node.lineno}: the error code {node.value!r} is spelled out; use wire.errors.ErrorCode"
    for n in ast.walk(tree):   # the error body is built by wire.messages.ErrorBody only (openapi.py describes it)
        if isinstance(n, ast.Dict) and rel != "server/openapi.py":
            keys = {k.value for k in n.keys if isinstance(k, ast.Constant)}
            assert "error" not in keys, f"{rel}:{n.lineno}: an error body built by hand"


def test_refused_takes_registered_codes_only() -> None:
    from server.verify import Refused

    assert Refused("wrong_holder", "x").code is ErrorCode.WRONG_HOLDER
    with pytest.raises(ValueError):
        Refused("no_such_code", "x")


# ---------------------------------------------------------------- the running server

WRONG_METHODS = [("PUT", "/health"), ("POST", "/openapi.json"), ("GET", "/v1/vaults"), ("DELETE", "/v1/vaults/{n}"),
                 ("GET", "/v1/vaults/{n}/challenge"), ("PUT", "/v1/vaults/{n}/session"),
                 ("DELETE", "/v1/vaults/{n}/metadata"), ("GET", "/v1/vaults/{n}/cells"),
                 ("POST", "/v1/vaults/{n}/changes"), ("POST", "/v1/vaults/{n}/events"), ("GET", "/v1/vaults/{n}/erase"),
                 ("POST", "/v1/vaults/{n}/export.amem"), ("POST", "/v1/log"), ("DELETE", "/v1/log/{r}"),
                 ("PATCH", "/v1/erasures"), ("POST", "/")]
UNKNOWN_PATHS = ["/nope", "/v1", "/v1/nope", "/v1/vaults/{n}/nope", "/v1/vaults/{n}/cells/1", "/v1/log/x/y",
                 "/v1/vaults/a%2Fb/challenge", "/no-such-file.js"]   # (the session server may serve web/dist)


def test_every_refusal_has_one_shape_and_a_registered_code(
        backend: Backend, linked_vault: Callable[..., LinkedVault], http: httpx.Client) -> None:
    lv, other = linked_vault(1, key="a"), linked_vault(0, key="b")
    n, base = lv.name, lv.base
    auth, cbor_auth = lv.auth(), {**lv.auth(), "Content-Type": "application/cbor"}
    zero_reg = {"name": "zeros", "salt": "00" * 16, "owner_pub": "00" * 32, "sync_pub": "00" * 32,
                "ka_pub": "00" * 32, "holder_pub": "00" * 1952, "metadata": "a0", "metadata_sig": "00" * 64,
                "key_receipt": "a0", "proof": "00" * 64, "holder_proof": "00" * 3309}
    cases: list[tuple[str, str, dict[str, Any], str]] = [
        ("POST", "/v1/vaults", {"content": b"{"}, "malformed"),
        ("POST", "/v1/vaults", {"json": {**zero_reg, "name": "Bad Name"}}, "bad_name"),
        ("POST", "/v1/vaults", {"json": {**zero_reg, "salt": "00"}}, "malformed"),
        ("POST", "/v1/vaults", {"json": zero_reg}, "bad_signature"),
        ("POST", "/v1/vaults", {"content": b" " * (MAX_JSON + 1)}, "too_large"),
        ("GET", "/v1/vaults/UPPER", {}, "unknown_vault"),
        ("GET", "/v1/vaults/no-such-vault/metadata", {"headers": auth}, "wrong_vault"),
        ("POST", f"/v1/vaults/{n}/session", {"json": {}}, "malformed"),
        ("POST", f"/v1/vaults/{n}/session", {"json": {"challenge": "00" * 32, "signature": "00" * 64}},
         "unauthenticated"),
        ("GET", f"/v1/vaults/{n}/metadata", {}, "unauthenticated"),
        ("GET", f"/v1/vaults/{n}/metadata", {"headers": other.auth()}, "wrong_vault"),
        ("PUT", f"/v1/vaults/{n}/metadata", {"headers": auth, "json": {"expected_version": 0}}, "malformed"),
        ("PUT", f"/v1/vaults/{n}/metadata",
         {"headers": auth, "json": {"expected_version": 1, "metadata": "a0", "signature": "00" * 64}}, "bad_signature"),
        ("POST", f"/v1/vaults/{n}/cells", {"headers": cbor_auth, "content": b"\xff"}, "malformed"),
        ("POST", f"/v1/vaults/{n}/cells", {"headers": cbor_auth, "content": cbor.encode([[b"", b""]])},
         "malformed_cell"),
        ("POST", f"/v1/vaults/{n}/cells", {"headers": cbor_auth, "content": cbor.encode([[b"", b""]] * 2001)},
         "batch_too_large"),
        ("GET", f"/v1/vaults/{n}/changes?since=x", {"headers": auth}, "malformed"),
        ("POST", f"/v1/vaults/{n}/erase", {"headers": auth, "json": {"receipts": []}}, "malformed"),
        ("POST", f"/v1/vaults/{n}/erase", {"headers": auth, "json": {"receipts": ["a0"]}}, "malformed_receipt"),
        ("GET", f"/v1/vaults/{n}/events", {}, "unauthenticated"),
        ("GET", f"/v1/vaults/{n}/export.amem", {"headers": other.auth()}, "wrong_vault"),
        ("GET", "/v1/log?holder=zz", {}, "malformed"),
        ("GET", "/v1/log?operation=NOPE", {}, "malformed"),
        ("GET", "/v1/log/" + "00" * 32, {}, "not_found"),
        ("GET", "/v1/log/xyz", {}, "not_found"),
        ("GET", "/v1/erasures?after=-1", {}, "malformed"),
    ]
    cases += [(m, p.replace("{n}", n).replace("{r}", "00" * 32), {}, "method_not_allowed") for m, p in WRONG_METHODS]
    cases += [(m, p.replace("{n}", n), {}, "not_found") for p in UNKNOWN_PATHS for m in ("GET", "POST", "HEAD")]
    seen = set()
    for method, path, kw, want in cases:
        r = http.request(method, base + path, **kw)
        if method == "HEAD":      # no body to read: the status is the code's, the type is JSON
            assert r.status_code == ErrorCode(want).status and r.headers["content-type"] == "application/json"
            continue
        got = error_of(r)
        assert got == want, (method, path, r.status_code, r.text)
        if want == "method_not_allowed":
            assert r.headers["allow"], (method, path)
        seen.add(got)
    assert seen == {c for *_, c in cases}


def test_rate_limit_answer_has_the_shape(
        backend: Backend, linked_vault: Callable[..., LinkedVault], start_server: Callable[..., str],
        http: httpx.Client) -> None:
    lv = linked_vault(0)
    url = start_server(backend.env, OWNMEM_RATE_PER_SECOND="1", OWNMEM_RATE_BURST="1",
                       OWNMEM_ADDRESS_RATE_PER_SECOND="1", OWNMEM_ADDRESS_BURST="1")
    for path, headers in (("", {}), ("/metadata", lv.auth())):     # by address, and by vault
        http.get(f"{url}/v1/vaults/{lv.name}{path}", headers=headers)
        r = http.get(f"{url}/v1/vaults/{lv.name}{path}", headers=headers)
        assert error_of(r) == "rate_limited" and int(r.headers["retry-after"]) >= 1


# ---------------------------------------------------------------- unexpected failures: a server in this process

@contextmanager
def serving(config: Config) -> Iterator[str]:
    """The real app under uvicorn in a thread of this process (so its log is this test's)."""
    app = create_app(config)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    t = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    t.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert t.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        t.join(20)
        sock.close()


def _ours(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "ownmem.server" and r.levelno >= logging.ERROR]


def test_unexpected_failure_is_a_json_500_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with serving(Config(data_dir=str(tmp_path))) as url, httpx.Client(timeout=10) as http:
        with closing(sqlite3.connect(tmp_path / "ownmem.db")) as db:   # the store breaks under the server
            db.execute("DROP TABLE vaults")
        # a challenge reads no store since issue 19 (stateless): the login it is for does
        c = http.post(url + "/v1/vaults/someone/challenge").json()["challenge"]
        caplog.clear()
        login = {"challenge": c, "signature": "00" * 64}
        for method, path, body in (("GET", "/v1/vaults/someone", None), ("POST", "/v1/vaults/someone/session", login)):
            r = http.request(method, url + path, json=body)
            assert r.status_code == 500 and error_of(r) == "internal"
            assert r.json()["message"] == ErrorCode.INTERNAL.description    # nothing of the exception
            assert "vaults" not in r.text and "sqlite" not in r.text.lower()
    logged = _ours(caplog)
    assert len(logged) == 2 and all(rec.exc_info for rec in logged), [rec.getMessage() for rec in logged]
    assert "no such table" in "".join(logging.Formatter().formatException(rec.exc_info) for rec in logged
                                      if rec.exc_info)
    assert not [r for r in caplog.records if r.name.startswith("uvicorn") and r.levelno >= logging.ERROR]


def test_web_mount_answers_json_for_what_it_lacks(tmp_path: Path) -> None:
    web = tmp_path / "web"
    web.mkdir()
    (web / "index.html").write_text("<!doctype html><title>app</title>")
    with serving(Config(data_dir=str(tmp_path / "data"), web_dir=str(web))) as url, httpx.Client(timeout=10) as http:
        assert http.get(url + "/").status_code == 200
        for method, path in (("GET", "/missing.js"), ("GET", "/v1/nope"), ("POST", "/index.html"),
                             ("GET", "/../secret")):
            assert error_of(http.request(method, url + path)) == "not_found", (method, path)
        assert error_of(http.request("TRACE", url + "/health")) == "method_not_allowed"


def test_failure_inside_a_streamed_answer_is_logged_once_and_cuts_the_stream(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, _identities: dict[str, tuple[Path, Any]]) -> None:
    """Once a streamed answer has begun there is no status left to change: the stream is cut (the
    client sees a truncated body, never a traceback) and the failure is logged once."""
    import shutil

    from ownmem.crypto import provider
    from ownmem.vault import UnlockedVault
    from ownmem.vault.store import Store
    from ownmem.vault.sync import link

    template, ident = _identities["a"]
    shutil.copytree(template, tmp_path / "vault")
    v = UnlockedVault(Store(tmp_path / "vault"), ident, provider())
    try:
        with serving(Config(data_dir=str(tmp_path / "data"))) as url, httpx.Client(timeout=30) as http:
            v.add("one")
            v.add("two")
            s = link(v, url, "streamed", client=http)
            s.sync_once()
            with closing(sqlite3.connect(tmp_path / "data" / "ownmem.db")) as db:   # a stored cell rots
                db.execute("UPDATE cells SET cell = x'00'")
                db.commit()
            caplog.clear()
            got: list[bytes] = []
            with pytest.raises(httpx.RemoteProtocolError):
                with http.stream("GET", f"{url}/v1/vaults/streamed/export.amem",
                                 headers={"Authorization": f"Bearer {s.remote.token}"}) as r:
                    assert r.status_code == 200
                    got.extend(r.iter_bytes())
            assert b"Traceback" not in b"".join(got)
    finally:
        v.lock()
    logged = _ours(caplog)
    assert len(logged) == 1 and logged[0].exc_info, [rec.getMessage() for rec in logged]
    assert not [r for r in caplog.records if r is not logged[0] and r.exc_info]
