"""Agent credentials and sessions after a key change (issue 24 item 8; docs/decisions.md "15.7").

    keys changed at T  (vault/devicekey.py ``keys_changed_at``: a passphrase change made or taken
                        on this device, which is also how a device removal ends)
    every credential created before T, and every live session created before T
        -> revoked: the session ends ("revoked", its token blacklisted), the credential is deleted
           from the credentials file, one audit entry each saying why

Revoked, never silently kept: whoever held the old passphrase or the removed device may have
copied a token, and a token outlives the keys it was issued under.  The agents connect again
(`ownmem agent connect`, or the host's OAuth flow).  ``stale`` is the rule, pure; ``end_stale``
applies it, from the guard's reconciliation (at start, then every second).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ownmem.agent.credentials import Credential, CredentialFile
from ownmem.agent.sessions import Session, SessionStore
from ownmem.errors import NotFound

REASON = "ended by the passphrase change (or a removed device): connect the agent again"
LIVE = ("created", "active")


def issued_before(issued_at: int, keys_changed_at: int) -> bool:
    """Whether something issued at ``issued_at`` predates the key change (0: there was none).
    A token issued in the very second of the change counts as after it: the change is what the
    person just did, and a token of that same second is almost surely the agent reconnecting."""
    return keys_changed_at > 0 and issued_at < keys_changed_at


@dataclass(frozen=True, slots=True)
class Stale:
    credentials: tuple[Credential, ...]
    sessions: tuple[Session, ...]


def stale(creds: Iterable[Credential], sessions: Iterable[Session], keys_changed_at: int) -> Stale:
    """What a key change at ``keys_changed_at`` revokes: credentials and live sessions issued before it."""
    return Stale(tuple(c for c in creds if issued_before(c.created, keys_changed_at)),
                 tuple(s for s in sessions if s.status in LIVE and issued_before(s.created_at, keys_changed_at)))


def end_stale(sessions: SessionStore, creds: CredentialFile, keys_changed_at: int, now: int,
              record: Callable[[Session, str], None]) -> Stale:
    """Revoke what ``stale`` names: each session first (with its audit entry, through ``record``),
    then each credential (the guard's reconciliation then finds its session ended already)."""
    found = stale(creds.all(), sessions.all(), keys_changed_at)
    for s in found.sessions:
        sessions.end(s, "revoked", now)
        record(s, REASON)
    for c in found.credentials:
        try:
            creds.revoke(c.name)
        except NotFound:
            pass          # revoked meanwhile (another process): what was wanted
    return found
