"""The person's approval of a UOMP request that widens access (create a session, grant one,
prune the audit): the X-Ownmem-Approval MAC over this very request checked (ownmem.uomp.approval)
and its nonce admitted once; else the refusal, audited when the admin file was shown without it
(DESIGN.md "Agent access": the admin file is no proof of the person)."""
from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request as HttpRequest
from starlette.responses import Response

from ownmem.agent.answers import error
from ownmem.agent.audit import AuditEntry, AuditLog, new_id
from ownmem.agent.sessions import ADMIN_HEADER, AdminCredential, SessionStore
from ownmem.uomp import approval
from ownmem.uomp.errors import ErrorCode as E, UompError


class Approvals:
    """The approval key (None: no request is ever approved), the replay cache, and where a
    refusal is recorded."""

    def __init__(self, key: bytes | None, audience: str, admin_secret: str, sessions: SessionStore, audit: AuditLog,
                 now: Callable[[], int]) -> None:
        self.key, self.audience, self.admin_secret = key, audience, admin_secret
        self.sessions, self.audit, self.now = sessions, audit, now
        self._nonces = approval.Nonces()

    def is_admin(self, r: HttpRequest) -> bool:
        return AdminCredential.matches(self.admin_secret, r.headers.get(ADMIN_HEADER))

    async def body(self, r: HttpRequest, what: str,
                   read: Callable[[HttpRequest], Awaitable[bytes]]) -> bytes | Response:
        """The body of a request the person approved (``read`` reads it, bounded), or the answer
        refusing it (a caller with neither header is refused before its body is read)."""
        if approval.APPROVAL_HEADER not in r.headers and not self.is_admin(r):
            return error(E.INVALID_TOKEN, "admin credential required")
        try:
            raw = await read(r)
        except UompError as e:
            return error(E.INVALID_REQUEST, str(e))
        refused = await self.refuse_unapproved(r, raw, what)
        return raw if refused is None else refused

    async def refuse_unapproved(self, r: HttpRequest, raw: bytes, what: str) -> Response | None:
        """None when the person approved exactly this request (approval.check, then the replay
        cache); else the answer.  No approval header and no admin secret: 401, as before, and
        not audited (a stranger writes nothing).  The admin secret without a valid approval (a
        process of the person's OS user that read uomp-admin) or a bad approval: 403, and a
        refused entry in the audit, so the person sees the attempt."""
        header = r.headers.get(approval.APPROVAL_HEADER)
        now = self.now()
        try:
            if self.key is None:
                raise approval.ApprovalRefused("no approval key on this service")
            a = approval.check(self.key, header, self.audience, r.method, r.scope["path"], raw, now)
            self._nonces.admit(a, now)
            return None
        except approval.ApprovalRefused as e:
            reason = f"{what} refused: {e} (the admin file is no proof of the person)"
        sid = r.path_params.get("sid")
        if not self.is_admin(r):
            if header is None:
                return error(E.INVALID_TOKEN, "admin credential required")
            return error(E.ACCESS_DENIED, f"{what} needs the person's approval", sid)
        s = self.sessions.get(sid) if isinstance(sid, str) else None
        await self.audit.arecord(AuditEntry(new_id(), now, s.session_id if s else "", s.agent_id if s else "",
                                            "approval_refused", None, None, (), False, reason))
        return error(E.ACCESS_DENIED, f"{what} needs the person's approval (their passphrase), "
                                           "not the admin file", sid)
