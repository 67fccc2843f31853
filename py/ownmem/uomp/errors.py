"""UOMP's one error registry: every "Error Format" code (UOMP draft-00 8.4) with its HTTP status,
the exceptions that carry one, and the one JSON shape of an error answer.  Pure.

    {"error": {"code": <ErrorCode>, "message": text, "session_id": id | null}}

The codes are the spec's table, spelled as the spec spells them, plus ``NOT_FOUND`` (an
extension: a write act naming no memory, a key read of no key inside the scope).  One status per
code, so tokens.py, guard.py and the agent's HTTP layer (ownmem.agent.answers) cannot disagree;
the only other statuses are HTTP's own refusals (``HttpRefusal``: no route, not that method, a
body too slow, a session already granted), which carry INVALID_REQUEST.
"""
from __future__ import annotations

import enum
from typing import Any

from ownmem.errors import OwnmemError


class ErrorCode(enum.StrEnum):
    """The ``error.code`` of every UOMP answer that is not 2xx."""

    INVALID_TOKEN = "INVALID_TOKEN"
    TOKEN_EXPIRED = "TOKEN_EXPIRED"
    SESSION_REVOKED = "SESSION_REVOKED"
    ACCESS_DENIED = "ACCESS_DENIED"
    QUOTA_EXCEEDED = "QUOTA_EXCEEDED"
    WRITE_NOT_AVAILABLE = "WRITE_NOT_AVAILABLE"
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
    SESSION_NOT_FOUND = "SESSION_NOT_FOUND"
    INVALID_REQUEST = "INVALID_REQUEST"
    NOT_FOUND = "NOT_FOUND"

    @property
    def status(self) -> int:
        return ERRORS[self][0]

    @property
    def description(self) -> str:
        return ERRORS[self][1]


# The registry: code -> (HTTP status, what it means; the spec's words for its own codes).
ERRORS: dict[ErrorCode, tuple[int, str]] = {
    ErrorCode.INVALID_TOKEN: (401, "Invalid Token signature or format."),
    ErrorCode.TOKEN_EXPIRED: (401, "Token has expired."),
    ErrorCode.SESSION_REVOKED: (401, "Session has been revoked."),
    ErrorCode.ACCESS_DENIED: (403, "Request exceeds authorized scope."),
    ErrorCode.QUOTA_EXCEEDED: (429, "Query quota exhausted."),
    ErrorCode.WRITE_NOT_AVAILABLE: (501, "Write interface not enabled in MVP."),
    ErrorCode.STORE_UNAVAILABLE: (503, "Memory Store unavailable."),
    ErrorCode.SESSION_NOT_FOUND: (404, "Session does not exist or has been deleted."),
    ErrorCode.INVALID_REQUEST: (400, "Request format or parameters are invalid."),
    ErrorCode.NOT_FOUND: (404, "no such memory (an ownmem extension)"),
}


class HttpRefusal(enum.IntEnum):
    """HTTP's own refusals of a request no handler judged: answered with INVALID_REQUEST (the
    request's format is invalid) and HTTP's status, which a client already understands."""

    NO_ROUTE = 404            # no such path
    WRONG_METHOD = 405        # the path does not take that method
    BODY_TIMEOUT = 408        # the body did not arrive in time (ownmem.agent.door)
    ALREADY_GRANTED = 409     # a grant of a session that is already active


# refused before the Guard's quota step (tokens.py, guard.py steps 1-4): such a request
# does not consume the session's quota
UNCOUNTED = frozenset({ErrorCode.SESSION_NOT_FOUND, ErrorCode.SESSION_REVOKED, ErrorCode.INVALID_TOKEN,
                       ErrorCode.QUOTA_EXCEEDED})


def error_body(code: ErrorCode, message: str, session_id: str | None = None) -> dict[str, Any]:
    """The one "Error Format" document."""
    return {"error": {"code": code.value, "message": message, "session_id": session_id}}


class UompError(OwnmemError):
    """A UOMP request refused: its registry ``error_code`` and that code's ``status``."""

    code = "uomp"
    error_code = ErrorCode.INVALID_REQUEST

    def __init__(self, message: str = "", *, reason: str | None = None) -> None:
        super().__init__(message or self.error_code.value)
        self.reason = reason or message or self.error_code.value

    @property
    def status(self) -> int:
        return self.error_code.status


class InvalidToken(UompError):
    error_code, code = ErrorCode.INVALID_TOKEN, "uomp_invalid_token"


class TokenExpired(UompError):
    error_code, code = ErrorCode.TOKEN_EXPIRED, "uomp_token_expired"


class SessionRevoked(UompError):
    error_code, code = ErrorCode.SESSION_REVOKED, "uomp_session_revoked"


class AccessDenied(UompError):
    error_code, code = ErrorCode.ACCESS_DENIED, "uomp_access_denied"


class QuotaExceeded(UompError):
    error_code, code = ErrorCode.QUOTA_EXCEEDED, "uomp_quota_exceeded"


class WriteNotAvailable(UompError):
    error_code, code = ErrorCode.WRITE_NOT_AVAILABLE, "uomp_write_not_available"


class SessionNotFound(UompError):
    error_code, code = ErrorCode.SESSION_NOT_FOUND, "uomp_session_not_found"


class InvalidRequest(UompError):
    error_code, code = ErrorCode.INVALID_REQUEST, "uomp_invalid_request"


class StoreUnavailable(UompError):
    error_code, code = ErrorCode.STORE_UNAVAILABLE, "uomp_store_unavailable"
