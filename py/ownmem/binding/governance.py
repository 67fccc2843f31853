"""saihm_governance_propose and saihm_governance_vote: their client checks and results (SAIHM
"saihm_governance_propose", "saihm_governance_vote")."""
from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ownmem.binding.fields import boolean, bracket, details, ident, member, printable, same_id, uint
from ownmem.binding.forget import ID_RULE, id_argument
from ownmem.binding.transport import Answer, Failure, Prepared, failed_lines, ready, refuse, result_json

GOVERNANCE_SCOPES = ("emission_param", "protocol_upgrade")


class ProposeOutcome(str, enum.Enum):
    PROPOSED = "proposed"
    UNCONFIRMED = "unconfirmed"        # no valid proposalId
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class ProposeResult:
    outcome: ProposeOutcome
    proposal_id: str | None = None
    scope: str | None = None
    param_key: str | None = None
    proposed_value: str | None = None
    snapshot_epoch: int | None = None
    proposer: str | None = None
    receipt_id: str | None = None
    warnings: tuple[str, ...] = ()
    failure: Failure | None = None

    @property
    def ok(self) -> bool:
        return self.outcome is ProposeOutcome.PROPOSED and not self.warnings

    def report(self) -> str:
        if self.outcome is ProposeOutcome.PROPOSED:
            d = details([("scope", self.scope), ("paramKey", self.param_key),
                          ("proposedValue", self.proposed_value), ("snapshotEpoch", self.snapshot_epoch),
                          ("proposer", bracket(self.proposer)), ("receiptId", bracket(self.receipt_id))])
            return "\n".join([*self.warnings, f"PROPOSED [{self.proposal_id}]" + (f": {d}" if d else "")])
        if self.outcome is ProposeOutcome.UNCONFIRMED:
            return ("PROPOSAL UNCONFIRMED: the operator's answer carries no valid proposalId. The proposal may or "
                    "may not be open; saihm_status lists the proposals.")
        f = self.failure
        assert f is not None
        return failed_lines("PROPOSE FAILED", f, "" if f.nothing_sent or f.operator_failed else
                             "saihm_status lists the open proposals.")

    def to_json(self) -> dict[str, Any]:
        return result_json("saihm_governance_propose", self.outcome.value, self.failure, proposalId=self.proposal_id,
                     scope=self.scope, paramKey=self.param_key, proposedValue=self.proposed_value,
                     snapshotEpoch=self.snapshot_epoch, proposerHash=self.proposer, receiptId=self.receipt_id,
                     warnings=list(self.warnings) or None)


def prepare_propose(args: Mapping[str, object]) -> Prepared:
    scope, key, value = args.get("scope"), args.get("paramKey"), args.get("proposedValue")
    sent: dict[str, object] = {"scope": scope, "paramKey": None, "proposedValue": None}

    def finish(a: Answer | Failure) -> ProposeResult:
        return _finish_propose(a, sent)
    if scope not in GOVERNANCE_SCOPES:
        return refuse("`scope` must be emission_param or protocol_upgrade", finish)
    if scope == "emission_param":
        if not (isinstance(key, str) and key.strip() and isinstance(value, str) and value.strip()):
            return refuse("An emission_param proposal needs both `paramKey` and `proposedValue`: "
                           "without them it would open a vote on no change", finish)
        sent.update(paramKey=key, proposedValue=value)
    # protocol_upgrade needs neither field and the operator ignores both: they go as null
    return ready("saihm_governance_propose", dict(sent), finish)


def _finish_propose(a: Answer | Failure, sent: Mapping[str, object]) -> ProposeResult:
    if isinstance(a, Failure):
        return ProposeResult(ProposeOutcome.FAILED, failure=a)
    v = a.value
    pid = ident(member(v, "proposalId"))
    if pid is None:
        return ProposeResult(ProposeOutcome.UNCONFIRMED)
    scope = printable(member(v, "scope"), 64)
    key, value = printable(member(v, "paramKey")), printable(member(v, "proposedValue"))
    warnings = tuple(f"WARNING: the operator reports {name} {got}, not the {name} proposed."
                     for name, got in (("scope", scope), ("paramKey", key), ("proposedValue", value))
                     if got is not None and sent[name] is not None and got != sent[name])
    return ProposeResult(ProposeOutcome.PROPOSED, proposal_id=pid, scope=scope, param_key=key,
                         proposed_value=value, snapshot_epoch=uint(member(v, "snapshotEpoch")),
                         proposer=ident(member(v, "proposerHash")), receipt_id=ident(member(v, "receiptId")),
                         warnings=warnings)


class VoteOutcome(str, enum.Enum):
    RECORDED = "recorded"
    ZERO_WEIGHT = "zero_weight"
    MISMATCH = "mismatch"
    UNCONFIRMED = "unconfirmed"        # neither weight nor castAtEpoch
    UNKNOWN = "unknown"                # no response, or a malformed body: counted or not is unknown
    NOT_COUNTED = "not_counted"        # a failure status, or nothing was sent


RESEND_IS_SAFE = ("Sending the vote again is safe: it is not counted twice, because the operator answers with "
                  "the vote already recorded, and a direction that differs from the request shows as a mismatch.")


@dataclass(frozen=True, slots=True)
class VoteResult:
    outcome: VoteOutcome
    proposal_id: str
    approve: bool
    returned_proposal_id: str | None = None
    returned_approve: bool | None = None
    voter: str | None = None
    weight: int | None = None
    cast_at_epoch: int | None = None
    receipt_id: str | None = None
    failure: Failure | None = None

    @property
    def ok(self) -> bool:
        return self.outcome in (VoteOutcome.RECORDED, VoteOutcome.ZERO_WEIGHT)

    def _direction(self, approve: bool | None) -> str:
        return {True: "approve", False: "reject", None: "no direction"}[approve]

    def report(self) -> str:
        o = self.outcome
        d = details([("weight", self.weight), ("castAtEpoch", self.cast_at_epoch),
                      ("voter", bracket(self.voter)), ("receiptId", bracket(self.receipt_id))])
        tail = f"\n  {d}" if d else ""
        if o is VoteOutcome.RECORDED:
            return f"VOTED [{self.proposal_id}] {self._direction(self.approve)}: the vote is recorded.{tail}"
        if o is VoteOutcome.ZERO_WEIGHT:
            return (f"VOTE RECORDED WITH ZERO WEIGHT [{self.proposal_id}] {self._direction(self.approve)}: "
                    f"it does not change the tally.{tail}")
        if o is VoteOutcome.MISMATCH:
            named = f"[{self.returned_proposal_id}]" if self.returned_proposal_id else "no valid proposal"
            return (f"VOTE MISMATCH: the operator's answer names {named} with "
                    f"{self._direction(self.returned_approve)}, but the request was [{self.proposal_id}] "
                    f"{self._direction(self.approve)}. A vote recorded earlier for this proposal stands as the "
                    f"operator recorded it.{tail}")
        if o is VoteOutcome.UNCONFIRMED:
            return ("VOTE UNCONFIRMED: the answer carries neither weight nor castAtEpoch, only an echo of the "
                    f"request. {RESEND_IS_SAFE}")
        f = self.failure
        if o is VoteOutcome.NOT_COUNTED:
            assert f is not None
            return f"VOTE NOT COUNTED: {f.sentence()}"
        return ("VOTE OUTCOME UNKNOWN: it is unknown whether the vote was counted. "
                + (f"{f.sentence()} " if f else "The operator's answer is not an object. ") + RESEND_IS_SAFE)

    def to_json(self) -> dict[str, Any]:
        return result_json("saihm_governance_vote", self.outcome.value, self.failure, proposalId=self.proposal_id,
                     approve=self.approve, returnedProposalId=self.returned_proposal_id,
                     returnedApprove=self.returned_approve, voterHash=self.voter, weight=self.weight,
                     castAtEpoch=self.cast_at_epoch, receiptId=self.receipt_id)


def _finish_vote(a: Answer | Failure, pid: str, approve: bool) -> VoteResult:
    if isinstance(a, Failure):
        counted = VoteOutcome.NOT_COUNTED if a.nothing_sent or a.operator_failed else VoteOutcome.UNKNOWN
        return VoteResult(counted, pid, approve, failure=a)
    v = a.value
    if not isinstance(v, dict):
        return VoteResult(VoteOutcome.UNKNOWN, pid, approve)
    got_pid, got_approve = ident(v.get("proposalId")), boolean(v.get("approve"))
    weight, cast = uint(v.get("weight")), uint(v.get("castAtEpoch"))
    if weight is None and cast is None:                                            # 1. unconfirmed
        outcome = VoteOutcome.UNCONFIRMED
    elif got_pid is None or not same_id(got_pid, pid) or got_approve is not approve:   # 2. mismatch
        outcome = VoteOutcome.MISMATCH
    elif weight == 0:                                                               # 3. zero weight
        outcome = VoteOutcome.ZERO_WEIGHT
    else:                                                                           # 4. recorded
        outcome = VoteOutcome.RECORDED
    return VoteResult(outcome, pid, approve, returned_proposal_id=got_pid, returned_approve=got_approve,
                      voter=ident(v.get("voterHash")), weight=weight, cast_at_epoch=cast,
                      receipt_id=ident(v.get("receiptId")))


def prepare_vote(args: Mapping[str, object]) -> Prepared:
    pid, approve = id_argument(args, "proposalId"), boolean(args.get("approve"))

    def finish(a: Answer | Failure) -> VoteResult:
        return _finish_vote(a, pid or "", bool(approve))
    if pid is None:
        return refuse(f"VOTE needs `proposalId` ({ID_RULE})", finish)
    if approve is None:
        return refuse("VOTE needs `approve`, true or false", finish)
    return ready("saihm_governance_vote", {"proposalId": pid, "approve": approve}, finish)
