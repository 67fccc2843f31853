"""The person's approval of a widening request to `ownmem agent` (UOMP draft-00 "Auth Service
API"; issue 19; docs/decisions.md "Widening needs the person's proof, not a file").

    approval key = HKDF purpose key "ownmem/v1/uomp-approval" of the vault's master secret
                   (only the passphrase, or the keyring entry the person opted into, opens it)
    header       X-Ownmem-Approval: v1.<unix seconds>.<nonce, base64url 16 bytes>.<mac, base64url>
    mac          HMAC-SHA256(key, "ownmem-uomp-approval-v1" LF audience LF METHOD LF path LF
                                  hex SHA-256(body) LF seconds LF nonce)

The service holds the unlocked vault and derives the same key.  It accepts a header whose mac
verifies for this exact request (audience, method, path and body: an approval for one grant
authorizes no other), made within WINDOW seconds of its clock, and whose nonce it has not seen
(``Nonces``, bounded: only approvals that verified enter it, and each leaves after the window).
The uomp-admin file proves only that a process runs as the person's OS user; this proves the
person (or a process holding the unlocked vault).

Pure: the clock and the nonce are parameters.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from ownmem.purposes import Purpose
from ownmem.uomp.errors import AccessDenied

APPROVAL_INFO = Purpose.UOMP_APPROVAL
APPROVAL_HEADER = "X-Ownmem-Approval"
WINDOW = 120            # seconds either side of the service's clock
MAX_NONCES = 4096       # approvals within one window; more are refused until older ones leave
_LABEL = b"ownmem-uomp-approval-v1"
_MAX_HEADER = 200


class ApprovalRefused(AccessDenied):
    """The request carries no approval this service accepts (403 ACCESS_DENIED); the message says
    why, shown to the person in the audit, never to the caller."""

    code = "uomp_approval_refused"


@dataclass(frozen=True, slots=True)
class Approval:
    at: int
    nonce: str


def _b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def _mac(key: bytes, audience: str, method: str, path: str, body: bytes, at: int, nonce: str) -> bytes:
    msg = b"\n".join([_LABEL, audience.encode(), method.upper().encode(), path.encode(),
                      hashlib.sha256(body).hexdigest().encode(), str(at).encode(), nonce.encode()])
    return hmac.new(key, msg, hashlib.sha256).digest()


def sign(key: bytes, audience: str, method: str, path: str, body: bytes, now: int, nonce: str | None = None) -> str:
    """The header value approving exactly this request."""
    n = nonce if nonce is not None else _b64(secrets.token_bytes(16))
    return f"v1.{now}.{n}.{_b64(_mac(key, audience, method, path, body, now, n))}"


def check(key: bytes, header: str | None, audience: str, method: str, path: str, body: bytes,
          now: int) -> Approval:
    """The approval ``header`` carries for this request, or ApprovalRefused: 1. present and well
    formed; 2. made within WINDOW of ``now``; 3. its mac verifies over this audience, method,
    path and body.  The replay check is the caller's (``Nonces.admit``), after this one."""
    if header is None:
        raise ApprovalRefused("no approval")
    parts = header.split(".") if len(header) <= _MAX_HEADER else []
    if len(parts) != 4 or parts[0] != "v1" or not parts[1].isdigit() or not 16 <= len(parts[2]) <= 64:
        raise ApprovalRefused("a malformed approval")
    at = int(parts[1])
    if abs(now - at) > WINDOW:
        raise ApprovalRefused("an approval outside its time window")
    try:
        mac = base64.urlsafe_b64decode(parts[3] + "=" * (-len(parts[3]) % 4))
    except (ValueError, binascii.Error):
        raise ApprovalRefused("a malformed approval") from None
    if not hmac.compare_digest(mac, _mac(key, audience, method, path, body, at, parts[2])):
        raise ApprovalRefused("an approval that does not verify for this request")
    return Approval(at, parts[2])


class Nonces:
    """The nonces of the approvals accepted within the window (the replay cache).  Bounded by
    MAX_NONCES: only verified approvals enter, so filling it takes the key; when full, a new
    approval is refused (fail closed) until the oldest leave."""

    def __init__(self, limit: int = MAX_NONCES) -> None:
        self.limit = limit
        self._seen: dict[str, int] = {}

    def admit(self, a: Approval, now: int) -> None:
        if len(self._seen) >= self.limit:
            self._seen = {n: t for n, t in self._seen.items() if abs(now - t) <= WINDOW}
        if a.nonce in self._seen:
            raise ApprovalRefused("a replayed approval")
        if len(self._seen) >= self.limit:
            raise ApprovalRefused("too many approvals within the window")
        self._seen[a.nonce] = a.at
