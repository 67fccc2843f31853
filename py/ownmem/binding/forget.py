"""saihm_forget's client checks and result (SAIHM "saihm_forget", "Order of effect and
receipt"), and the words of a staged act shared with saihm_share and saihm_revoke_share."""
from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ownmem.binding.fields import boolean, bracket, details, ident, member, same_id, uint
from ownmem.binding.transport import Answer, Failure, Prepared, failed_lines, ready, refuse, result_json
from ownmem.saihm.errors import BindingError


class ForgetOutcome(str, enum.Enum):
    FORGOTTEN = "forgotten"
    NOT_FOUND = "not_found"            # success false: not found, or already erased
    STAGED = "staged"                  # success false with ownmemStaged: held for the person to confirm
    UNCONFIRMED = "unconfirmed"        # success absent or not a boolean
    NOT_REPORTED = "not_reported"      # success true without a valid cellId
    MISMATCH = "mismatch"              # success true for another cellId than the one requested
    FAILED = "failed"


MAY_STILL_BE_STORED = "The erasure is not confirmed: the cell may still be stored."
# ownmem's operator extension (docs/decisions.md, issue 19): an act the person must confirm first.
# The words are the client's own, never the operator's notice: a claim of "staged" is weaker than
# the result it stands in for (nothing done), so believing it can mislead no one into trusting more
FORGET_STAGED = ("FORGET STAGED [{id}]: not erased. The operator holds this erasure for the person to "
                 "confirm; until they do, the cell stays stored and recallable. Do not ask again: the request "
                 "is waiting{request}.")
SHARE_STAGED = ("SHARE STAGED: no contract yet. The operator holds this share for the person to confirm; "
                "nothing is shared until they do{request}.")


def staged_request(v: object) -> str | None:
    """The request id an operator names with ownmemStaged, or None when it claims no staging."""
    if boolean(member(v, "ownmemStaged")) is not True:
        return None
    return ident(member(v, "ownmemRequest")) or ""


def request_words(request: str | None) -> str:
    return f" (request [{request}])" if request else ""

LOG_PENDING = ("Access may already be withdrawn while the operator's receipt is pending; "
               "repeating the call shows the outcome.")


@dataclass(frozen=True, slots=True)
class ForgetResult:
    outcome: ForgetOutcome
    requested: str
    cell_id: str | None = None
    destruction_anchor: str | None = None
    epoch: int | None = None
    failure: Failure | None = None
    request: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome in (ForgetOutcome.FORGOTTEN, ForgetOutcome.NOT_FOUND, ForgetOutcome.STAGED)

    def report(self) -> str:
        o = self.outcome
        if o is ForgetOutcome.FORGOTTEN:
            d = details([("destructionAnchor", bracket(self.destruction_anchor)), ("epoch", self.epoch)])
            return (f"FORGOTTEN [{self.cell_id}] erased: the operator reports that it no longer serves this "
                    "cell to you or to any grantee." + (f"\n  {d}" if d else ""))
        if o is ForgetOutcome.NOT_FOUND:
            return f"FORGET: the operator found no cell [{self.requested}]: it was not found or already erased."
        if o is ForgetOutcome.STAGED:
            return FORGET_STAGED.format(id=self.requested, request=request_words(self.request))
        if o is ForgetOutcome.UNCONFIRMED:
            return f"FORGET UNCONFIRMED: the answer does not say whether it succeeded. {MAY_STILL_BE_STORED}"
        if o is ForgetOutcome.NOT_REPORTED:
            return ("FORGET NOT REPORTED: the operator says success but names no valid cellId. "
                    + MAY_STILL_BE_STORED)
        if o is ForgetOutcome.MISMATCH:
            return (f"FORGET MISMATCH: the operator reports erasing [{self.cell_id}], not the requested "
                    f"[{self.requested}]. {MAY_STILL_BE_STORED}")
        f = self.failure
        assert f is not None
        return failed_lines("FORGET FAILED", f, "" if f.nothing_sent else MAY_STILL_BE_STORED,
                             LOG_PENDING if f.code == BindingError.OPERATOR_LOG_UNAVAILABLE else "")

    def to_json(self) -> dict[str, Any]:
        return result_json("saihm_forget", self.outcome.value, self.failure, requested=self.requested,
                     cellId=self.cell_id, destructionAnchor=self.destruction_anchor, epoch=self.epoch,
                     request=self.request or None)


def id_argument(args: Mapping[str, object], name: str) -> str | None:
    return ident(args.get(name))


ID_RULE = "1 to 256 printable ASCII characters without spaces"


def prepare_forget(args: Mapping[str, object]) -> Prepared:
    requested = id_argument(args, "id")

    def finish(a: Answer | Failure) -> ForgetResult:
        return _finish_forget(a, requested or "")
    if requested is None:
        return refuse(f"FORGET needs `id`, the cellId to erase ({ID_RULE})", finish)
    return ready("saihm_forget", {"id": requested}, finish)


def _finish_forget(a: Answer | Failure, requested: str) -> ForgetResult:
    if isinstance(a, Failure):
        return ForgetResult(ForgetOutcome.FAILED, requested, failure=a)
    v = a.value
    success = boolean(member(v, "success"))
    if success is None:
        return ForgetResult(ForgetOutcome.UNCONFIRMED, requested)
    if not success:
        staged = staged_request(v)
        if staged is not None:
            return ForgetResult(ForgetOutcome.STAGED, requested, request=staged)
        return ForgetResult(ForgetOutcome.NOT_FOUND, requested)
    cell_id = ident(member(v, "cellId"))
    if cell_id is None:
        return ForgetResult(ForgetOutcome.NOT_REPORTED, requested)
    if not same_id(cell_id, requested):
        return ForgetResult(ForgetOutcome.MISMATCH, requested, cell_id=cell_id)
    return ForgetResult(ForgetOutcome.FORGOTTEN, requested, cell_id=cell_id,
                        destruction_anchor=ident(member(v, "destructionAnchor")), epoch=uint(member(v, "epoch")))
