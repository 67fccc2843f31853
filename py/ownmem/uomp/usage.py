"""How a session reads to the person: its kind in words, its last use (from the audit), and the
answers `ownmem agent connect` accepts at its grant questions.  Pure rules, no I/O: the CLI
(`ownmem agent sessions`, `connect`) and the PWA's vault worker (the Agents screen) share them;
web/js/audit-text.js keeps the same kind words (tests/browser/agents_text.test.mjs compares).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# a session's kind (agent/sessions.py Session.kind; the published record's "binding")
KIND_WORDS: Mapping[str, str] = {
    "saihm": "Assistant on this computer (MCP)",
    "mcp-remote": "Remote assistant (MCP over the internet)",
    "uomp": "UOMP agent",
}

# audit actions that are no use by the agent: the session's life (granted, ended), the person's
# answers to staged writes and requests, the audit's own pruning
NOT_USE = frozenset({
    "grant", "created", "closed", "revoked", "expired", "deletion_proof_missing", "audit_pruned",
    "write_confirmed", "write_discarded", "request_confirmed", "request_discarded", "unauthenticated",
})


def kind_words(kind: str | None) -> str:
    """A session's kind as the person reads it; a record without one is a UOMP session."""
    return KIND_WORDS.get(kind or "uomp", kind or "UOMP agent")


def last_use(entries: Iterable[tuple[str, str, int]]) -> dict[str, int]:
    """session id -> Unix time of its newest audit entry that is the agent's own act (a read,
    a query, a write, a refused try), from ``entries`` (session_id, action, timestamp)."""
    out: dict[str, int] = {}
    for sid, action, ts in entries:
        if sid and action not in NOT_USE and ts > out.get(sid, -1):
            out[sid] = ts
    return out


@dataclass(frozen=True, slots=True)
class TagChoice:
    """What the person answered to "which tags?": ``tags`` None is every tag and untagged memory."""

    tags: tuple[str, ...] | None
    problem: str | None = None


def parse_tags_answer(answer: str, known: Iterable[str]) -> TagChoice:
    """The answer to "Which tags may it read?": empty or "all" (any case) is every tag; else a
    comma list, each a tag of the vault (a name not in ``known`` is refused: a typo would grant
    nothing and the person would not know)."""
    text = answer.strip()
    if not text or text.lower() in ("all", "*"):
        return TagChoice(None)
    have = set(known)
    tags: list[str] = []
    for part in text.split(","):
        t = part.strip()
        if t and t not in tags:
            tags.append(t)
    if not tags:
        return TagChoice(None, "no tag named: give tags separated by commas, or press Enter for all")
    unknown = [t for t in tags if t not in have]
    if unknown:
        return TagChoice(None, f"no memory carries the tag(s) {', '.join(unknown)}; choose among those listed")
    return TagChoice(tuple(tags))


def parse_mode_answer(answer: str, default: bool = True) -> bool | None:
    """The answer to "read-only or read-write?" -> may write (its writes wait for the person);
    empty is ``default`` (read-write, as without --no-write); None: not understood."""
    a = answer.strip().lower()
    if not a:
        return default
    if a in ("r", "ro", "read", "read-only", "readonly", "1"):
        return False
    if a in ("w", "rw", "write", "read-write", "readwrite", "2"):
        return True
    return None


def tag_counts(tag_lists: Iterable[Iterable[str]]) -> list[tuple[str, int]]:
    """(tag, how many memories carry it), most used first, then by name."""
    counts: dict[str, int] = {}
    for tags in tag_lists:
        for t in set(tags):
            counts[t] = counts.get(t, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
