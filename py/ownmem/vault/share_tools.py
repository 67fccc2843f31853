"""The SAIHM operator's sharing tools for `ownmem agent` (SAIHM "saihm_share",
"saihm_revoke_share", "saihm_status"): parameters in, result objects out, and every failure as
``ToolRefused`` with the tool's error code (ownmem.saihm.errors); the sharing itself is
ownmem.vault.sharing."""
from __future__ import annotations

import time
from dataclasses import dataclass

from ownmem.errors import OwnmemError, SyncError
from ownmem.saihm.contract import Contract, ContractRefused, contract_rules
from ownmem.saihm.errors import B, BindingError, BindingRefusal
from ownmem.vault.sharing import MODES, ShareRefused, mode_and_expiry, offers, revoke, share_cells
from ownmem.vault.sync import Syncer
from ownmem.wire import shares

# ---------------------------------------------------------------- the SAIHM operator's tools
# saihm_share, saihm_revoke_share and saihm_status's contracts for `ownmem agent` (SAIHM
# "saihm_share", "saihm_revoke_share", "saihm_status"): parameters in, result objects out, and
# every failure as ``ToolRefused`` with the tool's error code and an HTTP status.

class ToolRefused(BindingRefusal):
    """A sharing tool call refused: answer its code's status with {"error": error}."""

    code = "tool_refused"


# the codes a broken sharing rule or a refused contract answers with (ownmem.saihm.errors)
_RULES = frozenset({B.NOT_HOLDER, B.SHARD_NOT_FOUND, B.CONTRACT_NOT_FOUND, B.INVALID_GRANTEE, B.INVALID_MODE,
                    B.INVALID_SCOPE, B.INVALID_EXPIRY})


def _rule(code: object) -> BindingError:
    return B(str(code)) if code in _RULES else B.INVALID_PARAMS


def _tool_error(e: OwnmemError, unavailable: BindingError) -> ToolRefused:
    """``e`` as the tool's error: a rule or check it broke, else ``unavailable``."""
    if isinstance(e, ContractRefused):
        code = _rule(e.code)
    elif isinstance(e, ShareRefused):
        code = _rule(e.reason)
    elif isinstance(e, SyncError) and e.server_code in _RULES:
        code = B(e.server_code)
    else:
        return ToolRefused(unavailable, str(e))
    return ToolRefused(code, str(e))


def _hex32_list(v: object, what: str, code: BindingError) -> list[bytes]:
    if not isinstance(v, list):
        raise ToolRefused(code, f"{what} must be an array of hex strings")
    out = []
    for x in v:
        t = x.lower().removeprefix("0x") if isinstance(x, str) else ""
        if len(t) != 64 or any(ch not in "0123456789abcdef" for ch in t):
            raise ToolRefused(code, f"every entry of {what} is 32 bytes of hex")
        out.append(bytes.fromhex(t))
    return out


@dataclass(frozen=True, slots=True)
class ShareParams:
    """saihm_share's parameters, checked: what a share of cells asks for."""

    cells: tuple[bytes, ...]
    grantees: tuple[bytes, ...]
    mode: str                  # temporary | permanent | syndicate
    scope: str                 # read
    expires: int | None        # expiryEpoch; None: the mode's default


def parse_share_params(params: dict[str, object]) -> ShareParams:
    """{"granteeIdHashesHex", "shardIds", "type", "scope", "expiryEpoch"} -> ShareParams, or
    ToolRefused with the tool's error code."""
    grantees = _hex32_list(params.get("granteeIdHashesHex"), "granteeIdHashesHex", B.INVALID_GRANTEE)
    cells = _hex32_list(params.get("shardIds"), "shardIds", B.SHARD_NOT_FOUND)
    kind, scope, expiry = params.get("type"), params.get("scope"), params.get("expiryEpoch")
    if not isinstance(kind, str) or kind.lower() not in MODES:
        raise ToolRefused(B.INVALID_MODE, "type is temporary, permanent or syndicate")
    if not isinstance(scope, str):
        raise ToolRefused(B.INVALID_SCOPE, "scope is read, write or readwrite")
    if scope != "read":
        # SAIHM: write and readwrite are reserved; an operator MUST reject them with invalid_scope
        raise ToolRefused(B.INVALID_SCOPE, f"scope {scope!r} is not defined: only 'read'")
    digits = isinstance(expiry, str) and (expiry == "" or (expiry.isascii() and expiry.isdigit()))
    if expiry is not None and not digits:
        raise ToolRefused(B.INVALID_EXPIRY, "expiryEpoch is a string of decimal digits, or null")
    expires = int(expiry) if isinstance(expiry, str) and expiry else None
    return ShareParams(tuple(cells), tuple(grantees), kind.lower(), scope, expires)


def check_share_rules(p: ShareParams, me: bytes, at: int) -> None:
    """The contract rules a share of ``p`` must keep, before anything is made (ToolRefused)."""
    try:
        m, expires_at = mode_and_expiry(p.mode, p.expires, at)
        if len(set(p.grantees)) != len(p.grantees):
            raise ContractRefused(B.INVALID_GRANTEE, "a grantee is listed twice")
        if me in p.grantees:
            raise ContractRefused(B.INVALID_GRANTEE, "a holder does not share with itself")
        if len(p.grantees) * len(set(p.cells)) > shares.MAX_SHARE_KEYS:
            raise ShareRefused(f"one offer carries at most {shares.MAX_SHARE_KEYS} keys (grantees x memories)",
                               B.INVALID_PARAMS)
        contract_rules(list(p.grantees), list(p.cells) or [b"\x00" * 32], m, p.scope, expires_at, at)
    except OwnmemError as e:
        raise _tool_error(e, B.OPERATOR_STORAGE_UNAVAILABLE) from None


def tool_share(syncer: Syncer, params: dict[str, object], *, now: int | None = None) -> dict[str, object]:
    """saihm_share: {"granteeIdHashesHex", "shardIds", "type", "scope", "expiryEpoch"} ->
    {"contractId", "type", "granteeCount", "epoch", "receiptId"}."""
    at = int(time.time()) if now is None else now
    p = parse_share_params(params)
    try:
        made = share_cells(syncer, p.cells, p.grantees, p.mode, scope=p.scope, expires=p.expires, now=at)
    except OwnmemError as e:
        raise _tool_error(e, B.OPERATOR_STORAGE_UNAVAILABLE) from None
    return {"contractId": made.contract_id.hex(), "type": made.mode.lower(), "granteeCount": len(made.grantee_ids),
            "epoch": str(at), "receiptId": made.receipt_id.hex()}


def tool_revoke_share(syncer: Syncer, params: dict[str, object], *, now: int | None = None) -> dict[str, object]:
    """saihm_revoke_share: {"contractId"} -> {"revoked": true, "epoch", "receiptId"}; a contract
    revoked before answers revoked = true as well (a retry shows the true state)."""
    at = int(time.time()) if now is None else now
    ident = params.get("contractId")
    t = ident.lower() if isinstance(ident, str) else ""
    if len(t) != 64 or any(ch not in "0123456789abcdef" for ch in t):
        raise ToolRefused(B.CONTRACT_NOT_FOUND, "a contractId is 64 hex digits")
    try:
        r = revoke(syncer, bytes.fromhex(t), now=at)
    except OwnmemError as e:
        # the server withdraws access before it logs the receipt; one that did not answer may
        # have done either: repeating the call shows the outcome
        raise _tool_error(e, B.OPERATOR_STORAGE_UNAVAILABLE) from None
    return {"revoked": True, "epoch": str(at), "receiptId": r.receipt_id.hex()}


def tool_contracts(syncer: Syncer, *, now: int | None = None) -> list[dict[str, object]]:
    """saihm_status's contracts: this holder's contracts, revoked ones left out (SAIHM: they
    MUST NOT be included; expired ones MAY be)."""
    by_id: dict[bytes, Contract] = {}
    revoked: set[bytes] = set()
    for view in offers(syncer).offered:
        by_id[view.contract_id] = view.contract
        if view.revoked:
            revoked.add(view.contract_id)
    return [{"contractId": c.contract_id.hex(), "mode": c.mode, "granteeIds": [g.hex() for g in c.grantee_ids],
             "expiresAt": str(c.expires_at)} for cid, c in by_id.items() if cid not in revoked]
