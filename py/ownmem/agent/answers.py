"""Every answer of the agent port that is not a tool's or a read's result: the one place an error
becomes an answer, in the protocol's own shape (UOMP draft-00 8.4 "Error Format" under /v1;
the SAIHM binding's {"error": code} on its paths), with the status its registry gives
(ownmem.uomp.errors, ownmem.saihm.errors).

    error(code, message, session_id)   UOMP  {"error": {"code", "message", "session_id"}}
    saihm_error(code)                  SAIHM {"error": code}
    refusal(path, uomp, saihm, msg)    either, by the path (the door's, routing's, a failure's)
    HANDLERS                           Starlette's exceptions (no route, wrong method, a store
                                       that failed, anything unexpected) answered so
"""
from __future__ import annotations

import logging
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ownmem.errors import StoreError
from ownmem.saihm.errors import BindingError
from ownmem.uomp.errors import ErrorCode, HttpRefusal, error_body

_log = logging.getLogger("ownmem.agent")
NO_STORE = {"Cache-Control": "no-store"}
UOMP_PREFIX = "/v1/"


def ok(doc: Any, status: int = 200) -> Response:
    return JSONResponse(doc, status_code=status, headers=NO_STORE)


def error(code: ErrorCode, message: str, session_id: str | None = None, *,
          http: HttpRefusal | None = None) -> Response:
    """The "Error Format" answer: ``code``'s status, or ``http``'s for HTTP's own refusals."""
    return JSONResponse(error_body(code, message, session_id), headers=NO_STORE,
                        status_code=code.status if http is None else int(http))


def saihm_error(code: BindingError) -> Response:
    return JSONResponse({"error": code.value}, status_code=code.status, headers=NO_STORE)


def speaks_uomp(path: str) -> bool:
    """Whether an answer on ``path`` is UOMP's (the /v1 API) rather than the SAIHM binding's
    (/saihm, /health, and any other path: the binding's port came first)."""
    return path.startswith(UOMP_PREFIX) or path == UOMP_PREFIX.rstrip("/")


def refusal(path: str, uomp: ErrorCode, saihm: BindingError, message: str, *,
            http: HttpRefusal | None = None) -> Response:
    """A refusal of a request no handler judged, in the shape of the protocol of its path."""
    return error(uomp, message, http=http) if speaks_uomp(path) else saihm_error(saihm)


_ROUTING = {404: (HttpRefusal.NO_ROUTE, BindingError.NOT_FOUND),
            405: (HttpRefusal.WRONG_METHOD, BindingError.METHOD_NOT_ALLOWED)}


async def http_error(r: Request, e: Exception) -> Response:
    """Routing's refusals (no such path, not that method), in the protocol's shape."""
    assert isinstance(e, HTTPException)
    http, saihm = _ROUTING.get(e.status_code, (None, BindingError.INVALID_PARAMS))
    resp = refusal(r.url.path, ErrorCode.INVALID_REQUEST, saihm, str(e.detail), http=http)
    if e.status_code == 405 and e.headers and "Allow" in e.headers:
        resp.headers["Allow"] = e.headers["Allow"]
    return resp


async def store_error(r: Request, e: Exception) -> Response:
    """The session store or the audit log refused a write: nothing is answered but
    STORE_UNAVAILABLE (a decision that could not be audited is not served)."""
    _log.warning("store failure on %s: %s", r.url.path, e)
    return refusal(r.url.path, ErrorCode.STORE_UNAVAILABLE, BindingError.OPERATOR_STORAGE_UNAVAILABLE,
                   "the session store or the audit log is unavailable")


async def internal_error(r: Request, e: Exception) -> Response:
    """Anything unexpected (a bug): logged by Starlette, answered in the protocol's shape."""
    return refusal(r.url.path, ErrorCode.STORE_UNAVAILABLE, BindingError.INTERNAL, "the service failed")


HANDLERS: dict[Any, Any] = {HTTPException: http_error, StoreError: store_error, Exception: internal_error}
