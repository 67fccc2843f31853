"""The web bundle as the server sends it (server/web.py): the precompressed copies build.py writes
(web/compress.mjs) by the request's Accept-Encoding, with Vary and the right Content-Encoding; a
year's immutable caching for content-addressed names only; Range, HEAD, ETag/304 as before; and
from the other side: no copy sent for a name outside the bundle, none asked for by its own name,
no way out of the bundle's directory."""
from __future__ import annotations

import gzip
import http.client
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from server.context import Config
from server.web import accepted_encodings
from tests.server.test_errors import serving

ROOT = Path(__file__).resolve().parents[2]
APP_JS = b"// the app\n" + b"export const words = 'ownmem keeps what you tell it';\n" * 400
CHUNK = b"export const dictionary = ['alpha', 'beta', 'gamma'];\n" * 300

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="the build's compression step needs node")


@pytest.fixture()
def bundle(tmp_path: Path) -> Path:
    """A small bundle, compressed by the build's own step (node web/compress.mjs)."""
    web = tmp_path / "web"
    (web / "js").mkdir(parents=True)
    (web / "vendor").mkdir()
    (web / "index.html").write_text("<!doctype html><title>app</title>" + "<p>ownmem</p>" * 200)
    (web / "js" / "app.js").write_bytes(APP_JS)
    (web / "vendor" / "chunk-AB12CD34.js").write_bytes(CHUNK)
    (web / "tiny.json").write_text("{}")                      # too small to be worth a copy
    subprocess.run(["node", str(ROOT / "web" / "compress.mjs"), str(tmp_path / "cache"), str(web)],
                   check=True, capture_output=True)
    assert (web / "js" / "app.js.br").exists() and (web / "js" / "app.js.gz").exists()
    assert not (web / "tiny.json.br").exists()
    return web


def raw(url: str, path: str, **headers: str) -> tuple[int, httpx.Headers, bytes]:
    """One request, the body exactly as sent (no decoding on this side)."""
    with httpx.Client(timeout=10) as client, client.stream("GET", url + path, headers=headers) as r:
        return r.status_code, r.headers, b"".join(r.iter_raw())


def unbrotli(data: bytes) -> bytes:
    return subprocess.run(["node", "-e", "process.stdout.write(require('zlib').brotliDecompressSync("
                           "require('fs').readFileSync(0)))"], input=data, capture_output=True, check=True).stdout


def test_accept_encoding_is_read_with_its_q_values() -> None:
    assert accepted_encodings("gzip, deflate, br, zstd") == {"gzip", "deflate", "br", "zstd"}
    assert accepted_encodings("br;q=0, gzip;q=0.5") == {"gzip"}
    assert accepted_encodings("BR ; Q=1") == {"br"}
    assert accepted_encodings("*;q=0.1, gzip;q=0") == {"*", "br"}
    assert accepted_encodings("br;q=zero") == set()
    assert accepted_encodings("") == set()


def test_each_encoding_by_accept_encoding(tmp_path: Path, bundle: Path) -> None:
    with serving(Config(data_dir=str(tmp_path / "data"), web_dir=str(bundle))) as url:
        status, h, body = raw(url, "/js/app.js", **{"Accept-Encoding": "gzip, deflate, br"})
        assert status == 200 and h["content-encoding"] == "br" and h["vary"] == "Accept-Encoding"
        assert h["content-type"].startswith("text/javascript") and h["cache-control"] == "no-cache"
        assert int(h["content-length"]) == len(body) < len(APP_JS) / 5
        assert unbrotli(body) == APP_JS
        assert "content-security-policy" in h

        status, h, body = raw(url, "/js/app.js", **{"Accept-Encoding": "gzip"})
        assert status == 200 and h["content-encoding"] == "gzip" and h["vary"] == "Accept-Encoding"
        assert gzip.decompress(body) == APP_JS

        for none in ("identity", "br;q=0, gzip;q=0", ""):
            status, h, body = raw(url, "/js/app.js", **{"Accept-Encoding": none})
            assert status == 200 and "content-encoding" not in h and body == APP_JS, none
            assert h["vary"] == "Accept-Encoding"

        # the page at "/" too
        status, h, body = raw(url, "/", **{"Accept-Encoding": "br"})
        assert status == 200 and h["content-encoding"] == "br" and unbrotli(body).startswith(b"<!doctype html>")
        # a file with no copy worth keeping goes as it is
        status, h, body = raw(url, "/tiny.json", **{"Accept-Encoding": "br, gzip"})
        assert status == 200 and "content-encoding" not in h and body == b"{}"


def test_immutable_caching_for_content_addressed_names_only(tmp_path: Path, bundle: Path) -> None:
    with serving(Config(data_dir=str(tmp_path / "data"), web_dir=str(bundle))) as url:
        _, h, body = raw(url, "/vendor/chunk-AB12CD34.js", **{"Accept-Encoding": "br"})
        assert h["cache-control"] == "public, max-age=31536000, immutable" and unbrotli(body) == CHUNK
        for path in ("/", "/index.html", "/js/app.js", "/tiny.json"):
            assert raw(url, path)[1]["cache-control"] == "no-cache", path


def test_range_head_and_etag_still_work(tmp_path: Path, bundle: Path) -> None:
    with serving(Config(data_dir=str(tmp_path / "data"), web_dir=str(bundle))) as url:
        # a Range asks for bytes of the file itself: never of an encoding
        status, h, body = raw(url, "/js/app.js", **{"Accept-Encoding": "br, gzip", "Range": "bytes=0-10"})
        assert status == 206 and "content-encoding" not in h and body == APP_JS[:11]
        assert h["content-range"] == f"bytes 0-10/{len(APP_JS)}"
        with httpx.Client(timeout=10) as client:
            head = client.head(url + "/js/app.js", headers={"Accept-Encoding": "br"})
            assert head.status_code == 200 and head.content == b"" and head.headers["content-encoding"] == "br"
            assert int(head.headers["content-length"]) == (bundle / "js" / "app.js.br").stat().st_size
            # one ETag per representation, each answered 304 when it is the one the cache holds
            tags = {}
            for coding in ("br", "gzip", "identity"):
                r = client.get(url + "/js/app.js", headers={"Accept-Encoding": coding})
                tags[coding] = r.headers["etag"]
                again = client.get(url + "/js/app.js", headers={"Accept-Encoding": coding,
                                                                 "If-None-Match": tags[coding]})
                assert again.status_code == 304 and again.content == b"", coding
            assert len(set(tags.values())) == 3, tags
            stale = client.get(url + "/js/app.js", headers={"Accept-Encoding": "br", "If-None-Match": tags["gzip"]})
            assert stale.status_code == 200 and stale.headers["content-encoding"] == "br"


def test_no_copy_outside_the_bundle_nor_by_its_own_name(tmp_path: Path, bundle: Path) -> None:
    # a compressed file whose plain name is not in the bundle: never served under that name
    (bundle / "ghost.js.br").write_bytes((bundle / "js" / "app.js.br").read_bytes())
    secret = tmp_path / "secret.txt"
    secret.write_text("outside the bundle " * 100)
    (tmp_path / "secret.txt.gz").write_bytes(gzip.compress(secret.read_bytes()))
    (bundle / "js" / "linked.js").write_bytes(APP_JS)
    (bundle / "js" / "linked.js.gz").symlink_to(tmp_path / "secret.txt.gz")   # a copy the build did not write
    with serving(Config(data_dir=str(tmp_path / "data"), web_dir=str(bundle))) as url:
        for path in ("/ghost.js", "/ghost.js.br", "/js/app.js.br", "/js/app.js.gz"):
            status, h, body = raw(url, path, **{"Accept-Encoding": "br, gzip"})
            assert status == 404 and "content-encoding" not in h and b"ownmem keeps" not in body, path
        status, h, body = raw(url, "/js/linked.js", **{"Accept-Encoding": "gzip"})
        assert status == 200 and "content-encoding" not in h and body == APP_JS
        # out of the directory, raw (no client-side normalising of the path)
        host = url.removeprefix("http://")
        for path in ("/../secret.txt", "/js/../../secret.txt", "/%2e%2e/secret.txt", "/..%2fsecret.txt"):
            conn = http.client.HTTPConnection(host, timeout=10)
            conn.request("GET", path, headers={"Accept-Encoding": "gzip"})
            resp = conn.getresponse()
            body = resp.read()
            conn.close()
            assert resp.status == 404 and b"outside the bundle" not in body, path
            assert resp.getheader("content-encoding") is None, path
