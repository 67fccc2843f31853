"""The agent-id rule: how a credential, a staged write, a request and the person's views name an
agent ("<name>.<credential id>", or the bare name of an older credential; agent/credentials.py)."""
from __future__ import annotations

import re

# at most 96 characters of a-z 0-9 . _ - (a name of 64, a dot, a credential id); one rule for
# every reader, so a name the agent service accepts is the name every view shows
AGENT_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,95}")


def valid_agent_id(agent_id: object) -> bool:
    """Whether ``agent_id`` is a string that names an agent."""
    return isinstance(agent_id, str) and bool(AGENT_ID.fullmatch(agent_id))
