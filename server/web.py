"""The built PWA (web/dist) as the blind server serves it: the page at "/", its files under a
mount that takes GET and HEAD outside /v1/ only, every one with the security headers."""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.staticfiles import NotModifiedResponse, StaticFiles


def web_dir(configured: str | None) -> Path | None:
    if configured:
        return Path(configured)
    built = Path(__file__).resolve().parent.parent / "web" / "dist"
    return built if built.exists() else None


def web_routes(configured: str | None) -> list[BaseRoute]:
    """The page at "/" and, when a bundle is built, its files (last: the mount matches every path)."""
    web = web_dir(configured)

    async def index(request: Request) -> Response:
        web = web_dir(configured)     # per request, as a bundle may be built while the server runs
        if web is not None and (web / "index.html").exists():
            # as the mount sends index.html: compressed by Accept-Encoding, ETag and 304
            return await WebFiles(directory=str(web), check_dir=False).get_response("index.html", request.scope)
        return Response("<!doctype html><title>ownmem</title><p>ownmem blind sync server. "
                        "The web app is not built: run <code>python3 build.py build</code>.</p>",
                        media_type="text/html", headers=_security_headers())

    routes: list[BaseRoute] = [Route("/", index)]
    if web is not None:
        routes.append(WebMount("/", app=WebFiles(directory=str(web)), name="web"))
    return routes


def _security_headers() -> dict[str, str]:
    # No remote script, no eval; 'wasm-unsafe-eval' only lets Pyodide and hash-wasm compile
    # their WebAssembly.  Workers (Pyodide's, the service worker) load from the app's own origin.
    return {"Content-Security-Policy": "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; "
                                       "worker-src 'self'; connect-src 'self'; img-src 'self' data:; "
                                       "style-src 'self'; manifest-src 'self'; object-src 'none'; "
                                       "base-uri 'none'; frame-ancestors 'none'",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


def _web_headers(immutable: bool = False) -> dict[str, str]:
    # no-cache: revalidate every time (ETag, so usually a 304): the service worker keeps the
    # offline copy, and a stale HTTP-cached file must never mix into a newer bundle.  A
    # content-addressed name never changes its bytes, so it may be kept for good.
    cache = "public, max-age=31536000, immutable" if immutable else "no-cache"
    return {**_security_headers(), "Cache-Control": cache, "Vary": "Accept-Encoding"}


# esbuild's chunks (build.py `_bundle_vendor`, --chunk-names=chunk-[hash]): named by their content
_HASHED = re.compile(r"(?:^|/)vendor/chunk-[A-Z0-9]{8}\.js$")

# The precompressed copies build.py writes beside a file (FILE.br, FILE.gz), best first.
_ENCODINGS = (("br", ".br"), ("gzip", ".gz"))


def accepted_encodings(accept_encoding: str) -> set[str]:
    """The content codings an Accept-Encoding header admits (RFC 9110 12.5.3): listed with no
    q or a q above 0; "*" admits every coding not listed with q=0."""
    admitted: set[str] = set()
    refused: set[str] = set()
    for item in accept_encoding.split(","):
        name, _, params = item.strip().partition(";")
        name = name.strip().lower()
        if not name:
            continue
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        (admitted if q > 0 else refused).add(name)
    if "*" in admitted:
        admitted |= {coding for coding, _ in _ENCODINGS} - refused
    return admitted - refused


# The content types the bundle needs, whatever the host's mime.types says: none knows .whl,
# and WebAssembly streaming compilation refuses anything but application/wasm.
_WEB_TYPES = {".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript",
              ".css": "text/css", ".json": "application/json", ".webmanifest": "application/manifest+json",
              ".wasm": "application/wasm", ".zip": "application/zip", ".whl": "application/zip",
              ".png": "image/png", ".svg": "image/svg+xml", ".ico": "image/x-icon"}


class WebMount(Mount):
    """The bundle at "/" takes GET and HEAD outside /v1/ only.  A Mount at "/" matches every
    path fully, and Starlette prefers a full match to a route's partial (wrong-method) one, so
    with a built bundle `TRACE /health` or `GET /v1/vaults/x/cells` answered 404 instead of the
    API's 405 with Allow; they now reach the API routes as they do without a bundle."""

    def matches(self, scope: Any) -> tuple[Match, Any]:
        path = scope["path"][len(scope.get("root_path", "")):]
        if scope.get("method") not in ("GET", "HEAD") or path.startswith("/v1/"):
            return Match.NONE, {}
        return super().matches(scope)


class WebFiles(StaticFiles):
    """The built PWA (web/dist).  Every file carries the security headers, not only the
    page: a worker's CSP is the one its own script was served with."""

    async def get_response(self, path: str, scope: Any) -> Response:
        # Only the app's files live here.  A request no API route took (another method, a
        # /v1/ path) is not found, as it is without a bundle, rather than "405: use GET".
        # A precompressed copy is an encoding of a bundle file, never a file of its own.
        if scope["method"] not in ("GET", "HEAD") or Path(path).parts[:1] == ("v1",) \
                or any(path.endswith(ext) for _, ext in _ENCODINGS):
            raise HTTPException(status_code=404)
        return await super().get_response(path, scope)

    def file_response(self, full_path: Any, stat_result: os.stat_result, scope: Any,
                      status_code: int = 200) -> Response:
        # full_path is a bundle file StaticFiles found (inside the directory, a regular file):
        # its precompressed copy, when the request admits one, is sent in its place.
        full_path = str(full_path)
        media_type = _WEB_TYPES.get(Path(full_path).suffix.lower())
        headers = _web_headers(immutable=_HASHED.search(full_path.replace(os.sep, "/")) is not None)
        request = Headers(scope=scope)
        encoded = None if "range" in request else _precompressed(full_path, request.get("accept-encoding", ""))
        if encoded is not None:
            coding, full_path, stat_result = encoded
            headers["Content-Encoding"] = coding
        response = FileResponse(full_path, status_code=status_code, stat_result=stat_result,
                                media_type=media_type, headers=headers)
        if self.is_not_modified(response.headers, request):
            return NotModifiedResponse(response.headers)
        return response


def _precompressed(full_path: str, accept_encoding: str) -> tuple[str, str, os.stat_result] | None:
    """The best precompressed copy of ``full_path`` the request admits: (coding, path, stat), or
    None.  A Range request gets the file itself (ranges of an encoding are not what it asks)."""
    admitted = accepted_encodings(accept_encoding)
    for coding, ext in _ENCODINGS:
        if coding not in admitted:
            continue
        try:
            st = os.lstat(full_path + ext)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):       # never a link the build did not write
            return coding, full_path + ext, st
    return None
