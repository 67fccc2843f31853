"""saihm_remember's client checks and result (SAIHM "saihm_remember", "Client checks")."""
from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ownmem.binding.fields import boolean, bracket, details, ident, member, printable, uint
from ownmem.binding.transport import Answer, Failure, Prepared, failed_lines, ready, refuse, result_json


class RememberOutcome(str, enum.Enum):
    REMEMBERED = "remembered"
    STAGED = "staged"                  # stored, with ownmemStaged: it waits for the person to confirm it
    UNCONFIRMED = "unconfirmed"
    FAILED = "failed"


# ownmem's operator extension (docs/decisions.md "saihm_remember"): every agent write waits for the
# person.  The words are the client's own, never the operator's notice (hostile text).  A staged
# claim is weaker than a plain REMEMBERED (fewer will see the memory), so a false one makes the
# agent expect less, never more.  It is on the report's first line: a model that reads only
# "REMEMBERED" expects another host to recall the memory, and none will before the person confirms.
REMEMBER_STAGED = ("STAGED: saved, but it waits for the person's confirmation (in `ownmem staged` or on the "
                   "Agents screen of the ownmem app). Until the person confirms it, only this agent (this "
                   "credential) recalls it; other agents and hosts will not see it, and the person may "
                   "discard it instead.")


@dataclass(frozen=True, slots=True)
class RememberResult:
    outcome: RememberOutcome
    cell_id: str | None = None
    cell_nonce: str | None = None
    tier: str | None = None
    kek_version: int | None = None
    epoch: int | None = None
    signature_prefix: str | None = None
    receipt_id: str | None = None
    failure: Failure | None = None

    @property
    def ok(self) -> bool:
        return self.outcome in (RememberOutcome.REMEMBERED, RememberOutcome.STAGED)

    @property
    def staged(self) -> bool:
        return self.outcome is RememberOutcome.STAGED

    def report(self) -> str:
        if self.ok:
            d = details([("tier", self.tier), ("kekVersion", self.kek_version), ("epoch", self.epoch),
                          ("cellNonce", bracket(self.cell_nonce)),
                          ("signaturePrefix", bracket(self.signature_prefix)),
                          ("receiptId", bracket(self.receipt_id))])
            head = f"REMEMBERED [{self.cell_id}]" + (f", {REMEMBER_STAGED}" if self.staged else "")
            return head + (f"\n  {d}" if d else "")
        if self.outcome is RememberOutcome.UNCONFIRMED:
            return ("REMEMBER UNCONFIRMED: the operator's answer carries no valid cellId. The memory may or "
                    "may not be stored, and without a cellId it could not be erased by id; saihm_recall "
                    "shows what is stored.")
        assert self.failure is not None
        return failed_lines("REMEMBER FAILED", self.failure,
                             "" if self.failure.nothing_sent or self.failure.operator_failed else
                             "If it was stored, saihm_recall finds it; calling again may store it twice.")

    def to_json(self) -> dict[str, Any]:
        return result_json("saihm_remember", self.outcome.value, self.failure, cellId=self.cell_id,
                     cellNonce=self.cell_nonce, tier=self.tier, kekVersion=self.kek_version, epoch=self.epoch,
                     signaturePrefix=self.signature_prefix, receiptId=self.receipt_id,
                     staged=True if self.staged else None, notice=REMEMBER_STAGED if self.staged else None)


def _finish_remember(a: Answer | Failure) -> RememberResult:
    if isinstance(a, Failure):
        return RememberResult(RememberOutcome.FAILED, failure=a)
    v = a.value
    cell_id = ident(member(v, "cellId"))
    if cell_id is None:
        return RememberResult(RememberOutcome.UNCONFIRMED)
    outcome = RememberOutcome.STAGED if boolean(member(v, "ownmemStaged")) is True else RememberOutcome.REMEMBERED
    return RememberResult(outcome, cell_id=cell_id, cell_nonce=ident(member(v, "cellNonce")),
                          tier=printable(member(v, "tier"), 64), kek_version=uint(member(v, "kekVersion")),
                          epoch=uint(member(v, "epoch")), signature_prefix=ident(member(v, "signaturePrefix")),
                          receipt_id=ident(member(v, "receiptId")))


def prepare_remember(args: Mapping[str, object]) -> Prepared:
    content = args.get("content")
    if not isinstance(content, str):
        return refuse("REMEMBER needs `content`, a string", _finish_remember)
    if not content.strip():
        return refuse("The content is empty or only white space", _finish_remember)
    return ready("saihm_remember", {"content": content}, _finish_remember)
