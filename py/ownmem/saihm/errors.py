"""The SAIHM HTTPS binding's one error registry: every ``{"error": code}`` an operator answers,
with its HTTP status (SAIHM custodial profile, "HTTPS binding" and each tool's "Errors"), and
the refusal that carries one.  Pure.

The spec's codes are spelled as the spec spells them; ownmem's operator (`ownmem agent`) adds a
few of its own, marked below.  One status per code, so the operator (ownmem.agent.operator and
.service), the sharing tools (ownmem.vault.sharing) and the MCP client's checks
(ownmem.binding) read the same table.
"""
from __future__ import annotations

import enum

from ownmem.errors import OwnmemError


class BindingError(enum.StrEnum):
    """The ``error`` of every SAIHM binding answer that is not 2xx."""

    # the spec's, per tool
    UNAUTHENTICATED = "unauthenticated"
    EMPTY_CONTENT = "empty_content"
    RATE_LIMITED = "rate_limited"
    OPERATOR_STORAGE_UNAVAILABLE = "operator_storage_unavailable"
    OPERATOR_LOG_UNAVAILABLE = "operator_log_unavailable"
    NOT_HOLDER = "not_holder"
    SHARD_NOT_FOUND = "shard_not_found"
    INVALID_GRANTEE = "invalid_grantee"
    INVALID_MODE = "invalid_mode"
    INVALID_SCOPE = "invalid_scope"
    INVALID_EXPIRY = "invalid_expiry"
    CONTRACT_NOT_FOUND = "contract_not_found"
    GOVERNANCE_DISABLED = "governance_disabled"
    INELIGIBLE_PROPOSER = "ineligible_proposer"
    UNKNOWN_SCOPE = "unknown_scope"
    INELIGIBLE_VOTER = "ineligible_voter"
    PROPOSAL_NOT_FOUND = "proposal_not_found"
    PROPOSAL_CLOSED = "proposal_closed"
    # ownmem's operator's own
    INVALID_PARAMS = "invalid_params"
    UNKNOWN_METHOD = "unknown_method"
    NOT_ENABLED = "not_enabled"
    REQUEST_TOO_LARGE = "request_too_large"
    CONTENT_TOO_LARGE = "content_too_large"
    WRITE_REFUSED = "write_refused"
    QUOTA_EXCEEDED = "quota_exceeded"
    NOT_SHAREABLE = "not_shareable"
    FORBIDDEN = "forbidden"
    TIMEOUT = "timeout"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    INTERNAL = "internal"

    @property
    def status(self) -> int:
        return ERRORS[self][0]

    @property
    def description(self) -> str:
        return ERRORS[self][1]


B = BindingError
# The registry: code -> (HTTP status, what it means).
ERRORS: dict[BindingError, tuple[int, str]] = {
    B.UNAUTHENTICATED: (401, "no credential, or one that is unknown, expired or revoked"),
    B.EMPTY_CONTENT: (400, "saihm_remember's content is empty or only white space"),
    B.RATE_LIMITED: (429, "too many writes, or bytes of writes, this minute for this credential"),
    B.OPERATOR_STORAGE_UNAVAILABLE: (503, "the operator could not store or withdraw; nothing changed"),
    B.OPERATOR_LOG_UNAVAILABLE: (503, "the receipt could not be written (forget, revoke_share: access is "
                                      "withdrawn and the receipt pending; other tools: nothing took effect)"),
    B.NOT_HOLDER: (403, "a named cell or contract is another holder's"),
    B.SHARD_NOT_FOUND: (404, "a named cell is none of the holder's own"),
    B.INVALID_GRANTEE: (400, "a grantee is not a 32-byte holderId, is listed twice, or is unknown"),
    B.INVALID_MODE: (400, "type is temporary, permanent or syndicate"),
    B.INVALID_SCOPE: (400, "only the scope 'read' is defined; 'write' and 'readwrite' are reserved"),
    B.INVALID_EXPIRY: (400, "the expiry breaks its mode's rule, or is not decimal digits"),
    B.CONTRACT_NOT_FOUND: (404, "no contract by that id"),
    B.GOVERNANCE_DISABLED: (403, "this operator does not enable governance"),
    B.INELIGIBLE_PROPOSER: (403, "the holder may not propose"),
    B.UNKNOWN_SCOPE: (400, "a proposal's scope is not one the operator permits"),
    B.INELIGIBLE_VOTER: (403, "the holder may not vote"),
    B.PROPOSAL_NOT_FOUND: (404, "no proposal by that id"),
    B.PROPOSAL_CLOSED: (409, "the proposal's voting window has closed"),
    B.INVALID_PARAMS: (400, "the body is not {\"method\", \"params\"} JSON, or a parameter is out of shape"),
    B.UNKNOWN_METHOD: (400, "method names no SAIHM tool"),
    B.NOT_ENABLED: (501, "a SAIHM tool this operator does not serve"),
    B.REQUEST_TOO_LARGE: (413, "the request body is over the limit"),
    B.CONTENT_TOO_LARGE: (413, "a memory over the operator's limit of characters"),
    B.WRITE_REFUSED: (403, "this credential may not write, or the write breaks a rule of the vault"),
    B.QUOTA_EXCEEDED: (429, "writes and requests of this credential already wait for the person"),
    B.NOT_SHAREABLE: (403, "a named cell is the holder's but not the person's own writing (an agent's memory, "
                           "staged or confirmed): a grantee verifies a shared memory against the person's key only"),
    B.FORBIDDEN: (403, "a foreign Host, or an Origin header (a web page's request)"),
    B.TIMEOUT: (408, "the request body did not arrive in time"),
    B.NOT_FOUND: (404, "no such route"),
    B.METHOD_NOT_ALLOWED: (405, "the route does not take that method"),
    B.INTERNAL: (500, "the operator failed unexpectedly; nothing was stored"),
}


class BindingRefusal(OwnmemError):
    """A binding call refused: answered with ``error``'s status and {"error": error}."""

    code = "binding_refused"

    def __init__(self, error: BindingError, message: str = "") -> None:
        super().__init__(message or error.value)
        self.error = error

    @property
    def status(self) -> int:
        return self.error.status
