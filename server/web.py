"""The built PWA (web/dist) as the blind server serves it: the page at "/", its files under a
mount that takes GET and HEAD outside /v1/ only, every one with the security headers."""
from __future__ import annotations

import os
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
            return FileResponse(web / "index.html", headers=_web_headers())
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


def _web_headers() -> dict[str, str]:
    # no-cache: revalidate every time (ETag, so usually a 304): the service worker keeps the
    # offline copy, and a stale HTTP-cached file must never mix into a newer bundle.
    return {**_security_headers(), "Cache-Control": "no-cache"}


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
        if scope["method"] not in ("GET", "HEAD") or Path(path).parts[:1] == ("v1",):
            raise HTTPException(status_code=404)
        return await super().get_response(path, scope)

    def file_response(self, full_path: Any, stat_result: os.stat_result, scope: Any,
                      status_code: int = 200) -> Response:
        media_type = _WEB_TYPES.get(Path(full_path).suffix.lower())
        response = FileResponse(full_path, status_code=status_code, stat_result=stat_result,
                                media_type=media_type, headers=_web_headers())
        if self.is_not_modified(response.headers, Headers(scope=scope)):
            return NotModifiedResponse(response.headers)
        return response
