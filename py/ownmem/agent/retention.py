"""Deleting the UOMP audit: only past retention, and never without a trace (uomp-draft-00
"18.3 Storage": "Audit log retention MUST be configurable, default 90 days"; issue 19).

    prune_cutoff(now, as_of, days)   -> before: entries and batches older than it may go
        refused: an as_of after now (the real clock: "as of 2099" was "delete everything"),
                 a retention shorter than RETENTION_DAYS (configurable upwards only: shortening
                 it is widening what can be erased, which waits for the person's proof)
    check_cutoff(before, now)        the same floor for a raw ``before`` (the service's route)
    pruned_entry(...)                the deletion's own audit entry: how many entries, their
                                     time range, which synced batches (stream, seq range) and
                                     the newest anchor among them; no key, no content
    accounted(entries)               stream -> seq ranges that deletion entries account for, so
                                     a reader tells retention's gap from a withheld batch

The service prunes by itself too: at its start and then every RETENTION_PERIOD (a day), with the
retention the person configured for it (``OWNMEM_UOMP_AUDIT_RETENTION_DAYS``, 90 by default and
at least; ``retention_days``), through the same cut-off (uomp_mount.attach_audit).
``OWNMEM_UOMP_RETENTION_PERIOD`` (seconds) shortens the period for tests.

Every prune (the service's POST /v1/audit/prune and its timer, `ownmem agent audit prune` on a
device without the service) passes through ``prune_cutoff``/``check_cutoff`` here and records ``pruned_entry``
before it deletes; a proof of the person can be required at these two entry points alone.
Pure: the clock is a parameter.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ownmem.errors import VaultError

if TYPE_CHECKING:       # audit.py (AES-GCM, the journal) is the service's; the browser reads batches only
    from ownmem.agent.audit import AuditEntry

RETENTION_DAYS = 90                  # section 18.3's default, and the floor
RETENTION_PERIOD = 86400             # the service prunes daily (and at its start)
RETENTION_DAYS_ENV = "OWNMEM_UOMP_AUDIT_RETENTION_DAYS"
RETENTION_PERIOD_ENV = "OWNMEM_UOMP_RETENTION_PERIOD"
PRUNED_ACTION = "audit_pruned"
DAY = 86400
MAX_DAYS = 36500


class RetentionRefused(VaultError):
    """A deletion of audit entries younger than the retention: nothing was deleted."""

    code = "retention_refused"


def _iso(t: int) -> str:
    try:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, OverflowError, OSError):     # past year 9999: a raw request's number
        return f"{t} (Unix seconds)"


def check_cutoff(before: int, now: int) -> None:
    """Refuse a cut-off that would delete an entry younger than RETENTION_DAYS by ``now``."""
    floor = now - RETENTION_DAYS * DAY
    if before > floor:
        raise RetentionRefused(f"the audit keeps every entry for {RETENTION_DAYS} days: a deletion of entries newer "
                               f"than {_iso(floor)} is refused (asked: older than {_iso(before)})")


def prune_cutoff(now: int, *, as_of: int | None = None, days: float = RETENTION_DAYS) -> int:
    """-> ``before``: the time entries older than which may be deleted."""
    if as_of is not None and as_of > now:
        raise RetentionRefused(f"--as-of {_iso(as_of)} is in the future (now {_iso(now)}): a deletion is judged "
                               "by the real clock, nothing was deleted")
    if not RETENTION_DAYS <= days <= MAX_DAYS:
        raise RetentionRefused(f"the retention is {RETENTION_DAYS} to {MAX_DAYS} days (asked {days:g}): "
                               "a shorter one is refused, nothing was deleted")
    before = (now if as_of is None else as_of) - int(days * DAY)
    check_cutoff(before, now)
    return before


def retention_days(text: str | None) -> float:
    """The service's retention in days from its configuration (None or empty: the default);
    RetentionRefused for one under the floor or not a number (the service does not start with
    a retention it would not keep)."""
    if not text:
        return RETENTION_DAYS
    try:
        days = float(text)
    except ValueError:
        raise RetentionRefused(f"{RETENTION_DAYS_ENV}={text!r} is not a number of days") from None
    if not RETENTION_DAYS <= days <= MAX_DAYS:
        raise RetentionRefused(f"{RETENTION_DAYS_ENV}: the retention is {RETENTION_DAYS} to {MAX_DAYS} days "
                               f"(asked {days:g})")
    return days


def retention_period(text: str | None) -> float:
    """Seconds between the service's own prunes (None, empty or not positive: RETENTION_PERIOD)."""
    try:
        period = float(text or RETENTION_PERIOD)
    except ValueError:
        return RETENTION_PERIOD
    return period if period > 0 else RETENTION_PERIOD


@dataclass(frozen=True, slots=True)
class Pruned:
    """What a prune deletes, counted before it deletes."""

    entries: int
    first: int | None                      # oldest and newest entry time deleted
    last: int | None
    batches: Mapping[str, tuple[int, int]]  # stream -> (lowest, highest) seq of the batches forgotten
    anchored_until: int                    # the newest anchor receipt time among them (0: none)


def pruned_entry(p: Pruned, before: int, now: int) -> AuditEntry:
    """The deletion's own entry, synced like any other: counts and ranges, never content."""
    # not at the top: audit.py imports cryptography (AES-GCM, the journal), which the web worker's
    # Pyodide lacks, and the worker reads synced batches through audit_sync, which imports this module
    from ownmem.agent.audit import AuditEntry, new_id

    span = f" ({_iso(p.first)} to {_iso(p.last)})" if p.first is not None and p.last is not None else ""
    nb = sum(hi - lo + 1 for lo, hi in p.batches.values())
    key = json.dumps({"batches": {s: list(r) for s, r in sorted(p.batches.items())},
                      "anchored_until": p.anchored_until}, separators=(",", ":"))
    return AuditEntry(new_id(), now, "", "", PRUNED_ACTION, key, None, (), True,
                      f"retention: {p.entries} entries{span} and up to {nb} synced batches older than "
                      f"{_iso(before)} deleted")


def _ranges(e: Mapping[str, Any]) -> tuple[dict[str, tuple[int, int]], int]:
    try:
        d = json.loads(e.get("key") or "")
        out = {str(s): (int(r[0]), int(r[1])) for s, r in d["batches"].items()}
        return out, int(d.get("anchored_until") or 0)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return {}, 0


def accounted(entries: Iterable[Mapping[str, Any]]) -> tuple[dict[str, list[tuple[int, int]]], int]:
    """-> (stream -> the seq ranges deletion entries name, the newest anchor time they name)."""
    seqs: dict[str, list[tuple[int, int]]] = {}
    until = 0
    for e in entries:
        if e.get("action") != PRUNED_ACTION or not e.get("allowed"):
            continue
        ranges, t = _ranges(e)
        for s, r in ranges.items():
            seqs.setdefault(s, []).append(r)
        until = max(until, t)
    return seqs, until


def uncovered(lo: int, hi: int, ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of [lo, hi] no range covers, in order (interval arithmetic: a seq is owner-signed
    but may be large, so nothing is enumerated)."""
    out, at = [], lo
    for a, b in sorted(ranges):
        if b < at or a > hi:
            continue
        if a > at:
            out.append((at, a - 1))
        at = max(at, b + 1)
        if at > hi:
            break
    if at <= hi:
        out.append((at, hi))
    return out
