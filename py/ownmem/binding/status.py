"""saihm_status's client checks and result (SAIHM "saihm_status"): contracts, proposals and
the operator's figures, each field checked."""
from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ownmem.binding.fields import compact, details, ident, number, printable, uint
from ownmem.binding.transport import Answer, Failure, Prepared, failed_lines, ready, result_json

MODES = ("TEMPORARY", "PERMANENT", "SYNDICATE")


@dataclass(frozen=True, slots=True)
class Contract:
    contract_id: str
    mode: str | None
    grantee_ids: tuple[str, ...] | None     # None: absent or not a list of identifiers
    expires_at: int | None

    def line(self) -> str:
        grantees = None if self.grantee_ids is None else " ".join(f"[{g}]" for g in self.grantee_ids)
        return f"  contract [{self.contract_id}]" + "".join(
            f"; {k} {v}" for k, v in (("mode", self.mode), ("grantees", grantees),
                                      ("expiresAt", self.expires_at)) if v is not None)

    def to_json(self) -> dict[str, Any]:
        return compact({"contractId": self.contract_id, "mode": self.mode,
                         "granteeIds": list(self.grantee_ids) if self.grantee_ids is not None else None,
                         "expiresAt": self.expires_at})


@dataclass(frozen=True, slots=True)
class Proposal:
    proposal_id: str
    scope: str | None
    opens_ts: int | None
    closes_ts: int | None
    tally_for: int | None
    tally_against: int | None
    tally_abstain: int | None

    def line(self) -> str:
        return f"  proposal [{self.proposal_id}]" + "".join(
            f"; {k} {v}" for k, v in (("scope", self.scope), ("opens_ts", self.opens_ts),
                                      ("closes_ts", self.closes_ts), ("tally_for", self.tally_for),
                                      ("tally_against", self.tally_against),
                                      ("tally_abstain", self.tally_abstain)) if v is not None)

    def to_json(self) -> dict[str, Any]:
        return compact({"propId": self.proposal_id, "scope": self.scope, "opens_ts": self.opens_ts,
                         "closes_ts": self.closes_ts, "tally_for": self.tally_for,
                         "tally_against": self.tally_against, "tally_abstain": self.tally_abstain})


class StatusOutcome(str, enum.Enum):
    REPORTED = "reported"
    MALFORMED = "malformed"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class StatusResult:
    outcome: StatusOutcome
    holder_id: str | None = None
    custody: str | None = None
    prs: float | None = None
    bfsi_window_start_ts: int | None = None
    bfsi_r: int | None = None
    shards: tuple[tuple[str, int], ...] | None = None
    contracts: tuple[Contract, ...] | None = None
    governance: tuple[Proposal, ...] | None = None
    unusable: tuple[str, ...] = ()            # fields present but not usable, and entries left out
    failure: Failure | None = None

    @property
    def ok(self) -> bool:
        return self.outcome is StatusOutcome.REPORTED

    def report(self) -> str:
        if self.outcome is StatusOutcome.FAILED:
            assert self.failure is not None
            return failed_lines("STATUS FAILED", self.failure)
        if self.outcome is StatusOutcome.MALFORMED:
            return "STATUS MALFORMED: the operator's answer is not an object; nothing is reported from it."
        out = ["STATUS", f"  holderId [{self.holder_id}]" if self.holder_id else "  identity: not reported"]
        d = details([("custody", self.custody), ("prs", self.prs),
                      ("bfsi_window_start_ts", self.bfsi_window_start_ts), ("bfsi_R", self.bfsi_r)])
        if d:
            out.append(f"  {d}")
        if self.shards is not None:
            out.append(f"  shards: {len(self.shards)} tier{'s' if len(self.shards) != 1 else ''}"
                       + "".join(f"; {t} {n}" for t, n in self.shards))
        if self.contracts is not None:
            out.append(f"  contracts: {len(self.contracts)}")
            out += [c.line() for c in self.contracts]
        if self.governance is not None:
            out.append(f"  governance: {len(self.governance)} proposal{'s' if len(self.governance) != 1 else ''}")
            out += [g.line() for g in self.governance]
        if self.unusable:
            out.append(f"  present but unusable, so not reported: {', '.join(self.unusable)}")
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        return result_json("saihm_status", self.outcome.value, self.failure, agentIdHashHex=self.holder_id,
                     custody=self.custody, prs=self.prs, bfsi_window_start_ts=self.bfsi_window_start_ts,
                     bfsi_R=self.bfsi_r, shards=dict(self.shards) if self.shards is not None else None,
                     contracts=[c.to_json() for c in self.contracts] if self.contracts is not None else None,
                     governance=[g.to_json() for g in self.governance] if self.governance is not None else None,
                     unusable=list(self.unusable) or None)


def _entries(v: object, make: Callable[[dict[str, Any]], Any]) -> tuple[Any, ...] | None:
    """An array of objects, each made into an entry; None when it is not an array.  Entries that
    cannot be made (no usable identifier) are left out."""
    if not isinstance(v, list):
        return None
    made = (make(e) for e in v if isinstance(e, dict))
    return tuple(m for m in made if m is not None)


def _contract(e: dict[str, Any]) -> Contract | None:
    cid = ident(e.get("contractId"))
    if cid is None:
        return None
    g = e.get("granteeIds")
    ids = [ident(x) for x in g] if isinstance(g, list) else []
    grantees = tuple(i for i in ids if i is not None)
    mode = e.get("mode")
    return Contract(cid, mode if mode in MODES else None,
                    grantees if isinstance(g, list) and len(grantees) == len(ids) else None,
                    uint(e.get("expiresAt")))


def _proposal(e: dict[str, Any]) -> Proposal | None:
    pid = ident(e.get("propId"))
    if pid is None:
        return None
    return Proposal(pid, printable(e.get("scope"), 64), uint(e.get("opens_ts")), uint(e.get("closes_ts")),
                    uint(e.get("tally_for")), uint(e.get("tally_against")), uint(e.get("tally_abstain")))


def finish_status(a: Answer | Failure) -> StatusResult:
    if isinstance(a, Failure):
        return StatusResult(StatusOutcome.FAILED, failure=a)
    v = a.value
    if not isinstance(v, dict):
        return StatusResult(StatusOutcome.MALFORMED)
    parsed: dict[str, Any] = {
        "agentIdHashHex": ident(v.get("agentIdHashHex")), "custody": printable(v.get("custody"), 64),
        "prs": _unit_interval(number(v.get("prs"))),
        "bfsi_window_start_ts": uint(v.get("bfsi_window_start_ts")), "bfsi_R": uint(v.get("bfsi_R")),
        "shards": _shards(v.get("shards")),
        "contracts": _entries(v.get("contracts"), _contract),
        "governance": _entries(v.get("governance"), _proposal)}
    unusable = [k for k, p in parsed.items() if p is None and v.get(k) is not None]
    for k in ("shards", "contracts", "governance"):     # entries left out of a list are counted, not hidden
        sent, kept = v.get(k), parsed[k]
        if isinstance(sent, (list, dict)) and kept is not None and len(kept) < len(sent):
            unusable.append(f"{k} ({len(sent) - len(kept)} of {len(sent)} entries)")
    return StatusResult(StatusOutcome.REPORTED, holder_id=parsed["agentIdHashHex"], custody=parsed["custody"],
                        prs=parsed["prs"], bfsi_window_start_ts=parsed["bfsi_window_start_ts"],
                        bfsi_r=parsed["bfsi_R"], shards=parsed["shards"], contracts=parsed["contracts"],
                        governance=parsed["governance"], unusable=tuple(unusable))


def _unit_interval(x: float | None) -> float | None:
    return x if x is not None and 0.0 <= x <= 1.0 else None


def _shards(v: object) -> tuple[tuple[str, int], ...] | None:
    if not isinstance(v, dict):
        return None
    out = []
    for tier, n in v.items():
        name, count = printable(tier, 64), uint(n)
        if name is not None and count is not None:
            out.append((name, count))
    return tuple(out)


def prepare_status(args: Mapping[str, object]) -> Prepared:
    return ready("saihm_status", {}, finish_status)
