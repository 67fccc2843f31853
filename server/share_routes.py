"""The blind server's routes for sharing between people (SAIHM "Sharing contracts", "Order of
effect and receipt"; ownmem docs/decisions.md "Sharing between people").

    GET  /v1/holders/{holderId}                      the directory: a vault's registration and
                                                     its holder proof (to a vault of this server)
    POST /v1/vaults/{name}/holder                    a vault registered before the directory
                                                     publishes its holder proof
    POST /v1/vaults/{name}/shares                    the sharer offers a contract (+ SHARE receipt,
                                                     + DEKs re-wrapped to each grantee)
    GET  /v1/vaults/{name}/shares                    contracts offered by and to this vault's holder
    POST /v1/vaults/{name}/shares/{id}/accept        the grantee accepts, declines, withdraws
    POST /v1/vaults/{name}/shares/{id}/decline
    POST /v1/vaults/{name}/shares/{id}/withdraw
    POST /v1/vaults/{name}/shares/{id}/revoke        the sharer revokes (+ REVOKE receipt)
    GET  /v1/vaults/{name}/shared?after=             the grantee's cells of every active contract

The server decrypts nothing: it checks the contract (shape, rules, the holder's signature,
that every covered cell is a live cell of this vault), the receipts, and that the offer
carries exactly one re-wrapped key per grantee and cell.  Nothing is released to a grantee
before it accepts; revocation deletes the keys before the REVOKE receipt is logged.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ownmem.errors import WireError
from ownmem.saihm.contract import CONTRACT_CONTEXT, ContractRefused, parse_contract
from ownmem.wire import shares as wire_shares, signed
from ownmem.wire.errors import ErrorCode
from ownmem.wire.limits import MAX_ANSWER, MAX_PAGE, MAX_PAGE_BYTES
from server.context import ApiError, Context, parsed
from server.storage.base import LogEntry, StorageConflict, StorageQuota, VaultRecord
from server.storage.shares import (
    ContractClosed,
    ContractMissing,
    NewContract,
    NotContractHolder,
    ShardsMissing,
    ShareRow,
    shares_of,
)
from server.verify import HolderKey

E = ErrorCode
CLOCK_SKEW = 600     # seconds a contract's timestamp may be from the server's time
CBOR = "application/cbor"
SWEEP_AT_MOST_EVERY = 1.0   # seconds between the sweeps sharing requests make, per process
# bytes of contracts per side of a listing: hex doubles them, so both sides stay under a
# third of MAX_ANSWER
LISTING_BYTES = MAX_ANSWER // 12
ENTRY_OVERHEAD = 200        # the JSON of an entry beside its contract
_log = logging.getLogger("ownmem.server")


def sweep_every() -> float:
    """Seconds between sweeps of expired contracts' keys (OWNMEM_SHARE_SWEEP_SECONDS, default 60)."""
    value = float(os.environ.get("OWNMEM_SHARE_SWEEP_SECONDS") or "60")
    if not value > 0:
        raise ValueError("OWNMEM_SHARE_SWEEP_SECONDS must be a positive number")
    return value


async def sweep_expired(ctx: Context, every: float) -> None:
    """For as long as the server runs: delete the share keys of every expired contract, so an
    expired grant's keys are gone within ``every`` seconds even if nobody asks (every sharing
    request sweeps as well)."""
    shares = shares_of(ctx.storage)
    while True:
        await asyncio.sleep(every)
        try:
            await ctx.call(shares.sweep, int(time.time()))
        except Exception:   # noqa: BLE001 - logged once per round; the next round retries
            _log.exception("the sweep of expired contracts' keys failed; retried in %s s", every)


def within_budget(rows: list[ShareRow]) -> tuple[tuple[wire_shares.ShareEntry, ...], bool]:
    """The entries of one side of a listing that fit LISTING_BYTES, in the storage's order
    (active contracts first, then the newest) -> (entries, whether any were left out).  A
    listing must stay far below what a device reads of one answer (MAX_ANSWER), or
    strangers' unanswered offers of large contracts would stop a grantee listing anything."""
    out: list[wire_shares.ShareEntry] = []
    size = 0
    for r in rows:
        size += len(r.contract) + ENTRY_OVERHEAD
        if size > LISTING_BYTES:
            return tuple(out), True
        out.append(wire_shares.ShareEntry(r.contract, r.grantee, r.state, r.revoked, r.expired))
    return tuple(out), False


def share_routes(ctx: Context) -> list[Route]:
    """The sharing routes, over the server's ``Context``."""
    shares = shares_of(ctx.storage)

    async def checked_receipt(raw: bytes, hk: HolderKey, holder_pub: bytes, operation: str) -> LogEntry:
        # an ML-DSA-65 verification: in the pool, as a push's cells and the erase route's
        # receipts are, never on the event loop every other request waits on
        got = await ctx.verifier.check_receipts([(raw, operation)], hk, holder_pub)
        if isinstance(got, tuple):
            raise ApiError(got[1].code, str(got[1]))
        return got[0]

    last_sweep = [float("-inf")]

    async def sweep_soon(now: int) -> None:
        # a sharing request deletes expired contracts' keys too, but at most once a second per
        # process: a write per request would let any caller turn reads into write load
        t = time.monotonic()
        if t - last_sweep[0] >= SWEEP_AT_MOST_EVERY:
            last_sweep[0] = t
            await ctx.call(shares.sweep, now)

    async def caller_vault(request: Request) -> None:
        """A live credential of any vault here, charged to that vault; else the address pays and
        the answer is 401, whatever the path names (the same as `Context.authed` without a vault)."""
        auth = request.headers.get("authorization", "")
        found = None
        if auth.startswith("Bearer ") and len(auth) <= 200:
            found = await ctx.call(ctx.storage.token_vault, hashlib.sha256(auth[7:].strip().encode()).digest(),
                                   time.time())
        if found is None:
            ctx.limit_address(request)
            raise ApiError(E.UNAUTHENTICATED, "the credential is missing, unknown or expired")
        await ctx.limit_reader(request)          # a vault's credential: its vault's budget pays

    def cid_param(request: Request) -> bytes:
        v = request.path_params["contract_id"]
        if len(v) != 64 or any(ch not in "0123456789abcdef" for ch in v):
            raise ApiError(E.MALFORMED, "a contractId is 64 lower-case hex digits")
        return bytes.fromhex(v)

    async def holder(request: Request) -> Response:
        # The directory answers vaults of this server only (a sharer and a grantee are both logged
        # in). To anyone else every holderId, held or free, answers the same 401: a vault lookup
        # gives a held name's holderId and a free name's decoy's, so a public 200/404 here told a
        # held name from a free one, and the log's holderIds listed every published name.
        await caller_vault(request)
        v = request.path_params["holder_id"]
        if len(v) != 64 or any(ch not in "0123456789abcdef" for ch in v):
            raise ApiError(E.MALFORMED, "a holderId is 64 lower-case hex digits")
        row = await ctx.call(shares.holder, bytes.fromhex(v))
        if row is None:
            raise ApiError(E.NOT_FOUND, "no vault of that holder published its registration here")
        return JSONResponse(wire_shares.HolderRecord(row.name, row.salt, row.owner_pub, row.sync_pub, row.ka_pub,
                                              row.holder_pub, row.holder_id, row.proof).encode())

    async def publish(request: Request) -> Response:
        v, _ = await ctx.authed(request)
        req = parsed(wire_shares.HolderProof.parse, await ctx.json_body(request))
        msg = signed.register_message(v.name, v.salt, v.owner_pub, v.sync_pub, v.ka_pub, v.holder_pub)
        if not ctx.holder(v).valid(msg, req.holder_proof, signed.REGISTER_HOLDER_CONTEXT):
            raise ApiError(E.BAD_SIGNATURE, "the proof is not the holder's signature over this vault's registration")
        await ctx.call(shares.publish, v.id, v.holder_id, req.holder_proof)
        row = await ctx.call(shares.holder, v.holder_id)
        assert row is not None
        return JSONResponse(wire_shares.HolderRecord(row.name, row.salt, row.owner_pub, row.sync_pub, row.ka_pub,
                                              row.holder_pub, row.holder_id, row.proof).encode())

    async def offer(request: Request) -> Response:
        v, _ = await ctx.authed(request)
        req = parsed(wire_shares.ShareOffer.parse, await ctx.json_body(request))
        now = int(time.time())
        try:
            c = parse_contract(req.contract)
        except ContractRefused as e:
            raise ApiError(E(e.code), str(e)) from None
        if c.holder_id != v.holder_id:
            raise ApiError(E.WRONG_HOLDER, "the contract is another holder's")
        hk = ctx.holder(v)
        if not hk.valid(c.body(), c.signature, CONTRACT_CONTEXT):
            raise ApiError(E.BAD_SIGNATURE, "the contract is not signed by this vault's holder key")
        if abs(c.timestamp - now) > CLOCK_SKEW:
            raise ApiError(E.INVALID_EXPIRY, f"the contract's timestamp is more than {CLOCK_SKEW} s from the "
                                             "server's time")
        if not c.active_at(now):
            raise ApiError(E.INVALID_EXPIRY, "the contract has expired already")
        if v.holder_id in c.grantee_ids:
            raise ApiError(E.INVALID_GRANTEE, "a holder does not share with itself")
        known = await ctx.call(shares.known_holders, list(c.grantee_ids))
        unknown = [g for g in c.grantee_ids if g not in known]
        if unknown:
            raise ApiError(E.INVALID_GRANTEE, f"no vault of holder {unknown[0].hex()} published its registration "
                                              "here")
        try:
            items = req.share_items()
        except WireError as e:
            raise ApiError(E.MALFORMED, str(e)) from None
        pairs = [(i.grantee, i.cell_id) for i in items]
        wanted = {(g, s) for g in c.grantee_ids for s in c.shard_ids}
        if len(set(pairs)) != len(pairs) or set(pairs) != wanted:
            raise ApiError(E.MALFORMED_CONTRACT, "an offer carries exactly one key per grantee and covered cell")
        entry = await checked_receipt(req.receipt, hk, v.holder_pub, "SHARE")
        if entry.subject_id != c.contract_id:
            raise ApiError(E.MALFORMED_RECEIPT, "a SHARE receipt names the contract as its subject")
        new = NewContract(c.contract_id, c.holder_id, req.contract, c.expires_at, c.grantee_ids, c.shard_ids,
                          tuple((i.grantee, i.cell_id, i.key) for i in items), entry)
        try:
            await ctx.call(shares.offer, v.id, new, now)
        except StorageConflict:
            raise ApiError(E.CONTRACT_EXISTS, "that contract was offered before") from None
        except ShardsMissing as e:
            raise ApiError(E.SHARD_NOT_FOUND, str(e)) from None
        except StorageQuota as e:
            raise ApiError(E.QUOTA_EXCEEDED, str(e)) from None
        return JSONResponse(wire_shares.ShareOffered(c.contract_id, entry.receipt_id).encode(), status_code=201)

    async def listing(request: Request) -> Response:
        v, _ = await ctx.authed(request)
        now = int(time.time())
        await sweep_soon(now)
        offered = await ctx.call(shares.offered, v.id, now)
        received = await ctx.call(shares.received, v.holder_id, now)

        mine, more_mine = within_budget(offered)
        theirs, more_theirs = within_budget(received)
        return JSONResponse(wire_shares.ShareList(mine, theirs, more_mine or more_theirs).encode())

    async def act(request: Request) -> Response:
        v, _ = await ctx.authed(request)
        cid, action = cid_param(request), request.path_params["action"]
        now = int(time.time())
        if action == "revoke":
            return await revoke(request, v, cid)
        if action not in ("accept", "decline", "withdraw"):
            raise ApiError(E.NOT_FOUND, "a contract is accepted, declined, withdrawn or revoked")
        await sweep_soon(now)
        try:
            state = await ctx.call(shares.answer, v.holder_id, cid, action, now)
        except ContractMissing as e:
            raise ApiError(E.CONTRACT_NOT_FOUND, str(e)) from None
        except ContractClosed as e:
            raise ApiError(E.CONTRACT_CLOSED, str(e)) from None
        return JSONResponse(wire_shares.ShareAnswer(cid, state).encode())

    async def revoke(request: Request, v: VaultRecord, cid: bytes) -> Response:
        req = parsed(wire_shares.RevokeRequest.parse, await ctx.json_body(request))
        entry = await checked_receipt(req.receipt, ctx.holder(v), v.holder_pub, "REVOKE")
        if entry.subject_id != cid:
            raise ApiError(E.MALFORMED_RECEIPT, "a REVOKE receipt names the contract as its subject")
        # SAIHM "Order of effect and receipt": access is withdrawn (committed) first; the receipt
        # after, so a failed log write never restores access, and a repeated revoke logs it then
        try:
            already = await ctx.call(shares.revoke, v.id, cid)
        except ContractMissing as e:
            raise ApiError(E.CONTRACT_NOT_FOUND, str(e)) from None
        except NotContractHolder as e:
            raise ApiError(E.NOT_HOLDER, str(e)) from None
        rid = await ctx.call(shares.log_revoke, v.holder_id, cid, entry)
        assert rid is not None
        return JSONResponse(wire_shares.RevokeResult(True, rid, already).encode())

    async def shared(request: Request) -> Response:
        v, _ = await ctx.authed(request)
        after_hex = request.query_params.get("after")
        if after_hex is not None and (len(after_hex) != 128 or any(ch not in "0123456789abcdef" for ch in after_hex)):
            raise ApiError(E.MALFORMED, "after is a contractId and a cellId, 128 lower-case hex digits")
        after = bytes.fromhex(after_hex) if after_hex is not None else b"\x00" * 64
        now = int(time.time())
        await sweep_soon(now)
        rows = await ctx.call(shares.shared, v.holder_id, now, after, MAX_PAGE + 1)
        keep: list[wire_shares.SharedCell] = []
        size = 0
        for row in rows[:MAX_PAGE]:
            size += len(row[2]) + 200
            if keep and size > MAX_PAGE_BYTES:
                break
            keep.append(wire_shares.SharedCell(*row))
        page = wire_shares.SharedPage(tuple(keep), len(keep) < len(rows))
        return Response(page.encode(), media_type=CBOR)

    async def contracts(request: Request) -> Response:
        # one route for both methods, so a 405 lists both (as the metadata route does)
        return await (offer(request) if request.method == "POST" else listing(request))

    return [
        Route("/v1/holders/{holder_id}", holder),
        Route("/v1/vaults/{name}/holder", publish, methods=["POST"]),
        Route("/v1/vaults/{name}/shares", contracts, methods=["GET", "POST"]),
        Route("/v1/vaults/{name}/shares/{contract_id}/{action}", act, methods=["POST"]),
        Route("/v1/vaults/{name}/shared", shared),
    ]
