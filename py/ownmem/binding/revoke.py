"""saihm_revoke_share's client checks and result (SAIHM "saihm_revoke_share")."""
from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ownmem.binding.fields import boolean, bracket, details, ident, member, uint
from ownmem.binding.forget import ID_RULE, LOG_PENDING, id_argument
from ownmem.binding.transport import Answer, Failure, Prepared, ready, refuse, result_json
from ownmem.saihm.errors import BindingError


class RevokeOutcome(str, enum.Enum):
    REVOKED = "revoked"
    NOT_CONFIRMED = "not_confirmed"
    FAILED = "failed"


NOT_REVOKED = "REVOCATION NOT CONFIRMED: treat access as still in force."


@dataclass(frozen=True, slots=True)
class RevokeResult:
    outcome: RevokeOutcome
    contract_id: str
    epoch: int | None = None
    receipt_id: str | None = None
    failure: Failure | None = None

    @property
    def ok(self) -> bool:
        return self.outcome is RevokeOutcome.REVOKED

    def report(self) -> str:
        if self.outcome is RevokeOutcome.REVOKED:
            d = details([("epoch", self.epoch), ("receiptId", bracket(self.receipt_id))])
            return (f"REVOKED [{self.contract_id}]: every grantee loses access for future reads. Content a "
                    "grantee already received is beyond reach, and the cells remain until erased."
                    + (f"\n  {d}" if d else ""))
        if self.outcome is RevokeOutcome.NOT_CONFIRMED:
            return f"{NOT_REVOKED} The operator's answer does not say revoked = true for [{self.contract_id}]."
        f = self.failure
        assert f is not None
        return "\n".join(x for x in (NOT_REVOKED, f.sentence(),
                                     LOG_PENDING if f.code == BindingError.OPERATOR_LOG_UNAVAILABLE else "") if x)

    def to_json(self) -> dict[str, Any]:
        return result_json("saihm_revoke_share", self.outcome.value, self.failure, contractId=self.contract_id,
                     epoch=self.epoch, receiptId=self.receipt_id)


def prepare_revoke(args: Mapping[str, object]) -> Prepared:
    cid = id_argument(args, "contractId")

    def finish(a: Answer | Failure) -> RevokeResult:
        if isinstance(a, Failure):
            return RevokeResult(RevokeOutcome.FAILED, cid or "", failure=a)
        v = a.value
        if boolean(member(v, "revoked")) is not True:
            return RevokeResult(RevokeOutcome.NOT_CONFIRMED, cid or "")
        return RevokeResult(RevokeOutcome.REVOKED, cid or "", epoch=uint(member(v, "epoch")),
                            receipt_id=ident(member(v, "receiptId")))
    if cid is None:
        return refuse(f"REVOKE needs `contractId` ({ID_RULE})", finish)
    return ready("saihm_revoke_share", {"contractId": cid}, finish)
