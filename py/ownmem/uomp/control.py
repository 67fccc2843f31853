"""Control records: memories that carry UOMP bookkeeping rather than memory (a session's
revocation, the confirmation of a staged agent write, an agent's staged forget or share request
(ownmem.agent.requests), and what later kinds join them).

They travel as ordinary sealed objects so that any of the person's devices can make them
and every device (and the agent service) receives them through the blind server; only the
owner's signature gives one effect (see agent.uomp_mount.revocation_of, staging.confirms).  One predicate
decides what is control, so every view (SAIHM recall, the Guard, the CLI list, the PWA)
leaves the same records out.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# payload extensions that make a memory a control record, whoever signed it: an unsigned or
# foreign one has no effect, and is still not memory to show
CONTROL_EXTENSIONS = ("uomp_revocation", "uomp_session", "uomp_audit", "uomp_request")


def is_control(extensions: Mapping[str, Any]) -> bool:
    """Whether a memory with these payload extensions is a control record."""
    if any(k in extensions for k in CONTROL_EXTENSIONS):
        return True
    u = extensions.get("uomp")
    return isinstance(u, dict) and "confirms" in u


# control records whose only effect is to be read (an audit batch, a session record for the
# other devices, an agent's staged request: it acts only once the person confirms it, and the
# confirmation is not bookkeeping): they change no head, no staged write, no session here
BOOKKEEPING_EXTENSIONS = ("uomp_session", "uomp_audit", "uomp_request")


def is_bookkeeping(extensions: Mapping[str, Any]) -> bool:
    """Whether a memory with these payload extensions is a control record with no effect on
    other memories (see BOOKKEEPING_EXTENSIONS): not a revocation, not a confirmation."""
    return (any(k in extensions for k in BOOKKEEPING_EXTENSIONS)
            and not any(k in extensions for k in CONTROL_EXTENSIONS if k not in BOOKKEEPING_EXTENSIONS)
            and "uomp" not in extensions)
