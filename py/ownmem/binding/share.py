"""saihm_share's client checks and result (SAIHM "saihm_share", "Sharing contracts")."""
from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ownmem.binding.fields import HEX, UINT_TEXT, bracket, details, ident, member, printable, uint
from ownmem.binding.forget import SHARE_STAGED, request_words, staged_request
from ownmem.binding.transport import Answer, Failure, Prepared, failed_lines, ready, refuse, result_json
from ownmem.saihm.errors import BindingError

# ownmem's operator's refusal of an agent-written cell (docs/decisions.md, "Sharing contracts",
# issue 22), in the client's own words: the code alone would not tell the agent what to do next
NOT_SHAREABLE = ("Nothing was shared: only memories the person wrote themselves can be shared, and a listed cell "
                 "was written by an agent or another author (an agent's memory stays the agent's, staged or "
                 "confirmed), while a grantee verifies every shared memory against the person's own key. To share "
                 "it, ask the person to add it in ownmem as their own memory and share that one.")
SHARE_TYPES = ("temporary", "permanent", "syndicate")
SCOPES = ("read", "write", "readwrite")


class ShareOutcome(str, enum.Enum):
    SHARED = "shared"
    STAGED = "staged"                  # no contractId, ownmemStaged: held for the person to confirm
    UNCONFIRMED = "unconfirmed"        # no valid contractId
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class ShareResult:
    outcome: ShareOutcome
    requested_grantees: int
    requested_type: str
    contract_id: str | None = None
    type: str | None = None
    grantee_count: int | None = None
    epoch: int | None = None
    receipt_id: str | None = None
    failure: Failure | None = None
    request: str | None = None

    @property
    def warnings(self) -> tuple[str, ...]:
        out = []
        if self.grantee_count is not None and self.grantee_count != self.requested_grantees:
            out.append(f"WARNING: the operator reports {self.grantee_count} grantees, but "
                       f"{self.requested_grantees} were requested.")
        if self.type is not None and self.type != self.requested_type:
            out.append(f"WARNING: the operator reports type {self.type}, but {self.requested_type} was requested.")
        return tuple(out)

    @property
    def ok(self) -> bool:
        return self.outcome in (ShareOutcome.SHARED, ShareOutcome.STAGED) and not self.warnings

    def report(self) -> str:
        if self.outcome is ShareOutcome.SHARED:
            d = details([("type", self.type), ("granteeCount", self.grantee_count), ("epoch", self.epoch),
                          ("receiptId", bracket(self.receipt_id))])
            return "\n".join([*self.warnings, f"SHARED [{self.contract_id}]" + (f": {d}" if d else ""),
                              "  A contract takes effect for each grantee once that grantee has accepted it; "
                              "saihm_revoke_share ends it."])
        if self.outcome is ShareOutcome.STAGED:
            return "\n".join([*self.warnings, SHARE_STAGED.format(request=request_words(self.request))])
        if self.outcome is ShareOutcome.UNCONFIRMED:
            return ("SHARE UNCONFIRMED: the operator's answer carries no valid contractId. A contract may or may "
                    "not be in force; saihm_status lists the contracts.")
        f = self.failure
        assert f is not None
        return failed_lines("SHARE FAILED", f, "" if f.nothing_sent or f.operator_failed else
                             "saihm_status lists the contracts in force.",
                             NOT_SHAREABLE if f.code == BindingError.NOT_SHAREABLE else "")

    def to_json(self) -> dict[str, Any]:
        return result_json("saihm_share", self.outcome.value, self.failure, contractId=self.contract_id, type=self.type,
                     granteeCount=self.grantee_count, requestedGrantees=self.requested_grantees,
                     epoch=self.epoch, receiptId=self.receipt_id, warnings=list(self.warnings) or None,
                     request=self.request or None)


def _grantee(g: object) -> str | None:
    """A grantee as lowercase hex without "0x" (an optional prefix is allowed), or None."""
    if not isinstance(g, str):
        return None
    h = g[2:] if g[:2] in ("0x", "0X") else g
    return h.lower() if HEX.fullmatch(h) else None


def prepare_share(args: Mapping[str, object]) -> Prepared:
    grantees, shards = args.get("granteeIdHashesHex"), args.get("shardIds")
    kind, scope, expiry = args.get("type"), args.get("scope"), args.get("expiryEpoch")
    n = len(grantees) if isinstance(grantees, list) else 0
    requested_type = kind if isinstance(kind, str) and kind in SHARE_TYPES else ""

    def finish(a: Answer | Failure) -> ShareResult:
        return _finish_share(a, n, requested_type)

    if not isinstance(grantees, list) or not grantees:
        return refuse("SHARE needs `granteeIdHashesHex`, a non-empty list", finish)
    hexes = [_grantee(g) for g in grantees]
    if None in hexes:
        return refuse("Every grantee must be even-length hexadecimal (an optional 0x prefix is allowed)",
                       finish)
    if len(set(hexes)) != len(hexes):
        return refuse("A grantee is listed twice", finish)
    if not isinstance(shards, list) or not shards:
        return refuse("SHARE needs `shardIds`, a non-empty list of cellIds", finish)
    if not all(isinstance(s, str) and s for s in shards):
        return refuse("Every shardId must be a non-empty string", finish)
    if not requested_type:
        return refuse("`type` must be temporary, permanent or syndicate", finish)
    if scope not in SCOPES:
        return refuse("`scope` must be read, write or readwrite", finish)
    if expiry is not None and (not isinstance(expiry, str) or (expiry and not UINT_TEXT.fullmatch(expiry))):
        return refuse("`expiryEpoch` must be a string of decimal digits (UNIX epoch seconds)", finish)
    return ready("saihm_share", {"granteeIdHashesHex": hexes, "shardIds": list(shards), "type": requested_type,
                                  "scope": scope, "expiryEpoch": expiry or None}, finish)


def _finish_share(a: Answer | Failure, requested: int, requested_type: str) -> ShareResult:
    if isinstance(a, Failure):
        return ShareResult(ShareOutcome.FAILED, requested, requested_type, failure=a)
    v = a.value
    cid = ident(member(v, "contractId"))
    if cid is None:
        staged = staged_request(v)
        if staged is not None:
            return ShareResult(ShareOutcome.STAGED, requested, requested_type, type=printable(member(v, "type"), 64),
                               grantee_count=uint(member(v, "granteeCount")), request=staged)
        return ShareResult(ShareOutcome.UNCONFIRMED, requested, requested_type)
    return ShareResult(ShareOutcome.SHARED, requested, requested_type, contract_id=cid,
                       type=printable(member(v, "type"), 64), grantee_count=uint(member(v, "granteeCount")),
                       epoch=uint(member(v, "epoch")), receipt_id=ident(member(v, "receiptId")))
