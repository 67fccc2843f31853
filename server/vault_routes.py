"""The blind server's vault routes (DESIGN.md "Sync"): registration, lookup, login, metadata,
pushed cells, the change feed and its live events, erasure, receipts for the public log, the
export, and the log's and erasure list's listings.

    POST /v1/vaults                          register a vault (public, paid by the address)
    GET  /v1/vaults/{name}                   its lookup: salt and public keys (a decoy's for a name not held)
    GET  /v1/names/{name}                    whether a vault holds the name (paid from the registration budget)
    POST /v1/vaults/{name}/challenge         a login challenge
    POST /v1/vaults/{name}/session           a session credential for a signed challenge
    GET|PUT /v1/vaults/{name}/metadata       the owner-signed vault metadata (compare-and-swap)
    POST /v1/vaults/{name}/rekey             a passphrase change: new keys and metadata (compare-and-swap)
    POST /v1/vaults/{name}/cells             push cells
    GET  /v1/vaults/{name}/changes           the change feed, a page
    GET  /v1/vaults/{name}/events            its live events (server-sent)
    POST /v1/vaults/{name}/erase             erase cells (holder-signed FORGET receipts)
    POST /v1/vaults/{name}/rewrap            a scope rotation's new wrapped DEKs (the cells untouched)
    POST /v1/vaults/{name}/receipts          log REMEMBER, RECALL and STATUS receipts
    GET  /v1/vaults/{name}/export.amem       the vault as an ApertoMemory container
    GET  /v1/log, /v1/log/{receipt_id}       the receipt log's listing and entries
    GET  /v1/erasures                        the erasure list
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ownmem.crypto import cbor
from ownmem.errors import MalformedInput, OwnmemError
from ownmem.saihm.cell import parse_cell
from ownmem.saihm.receipt import OPERATIONS, parse_receipt
from ownmem.wire import codec, messages, signed
from ownmem.wire.errors import ErrorCode
from ownmem.wire.limits import (
    CHALLENGE_TTL,
    MAX_BATCH,
    MAX_PAGE,
    MAX_PAGE_BYTES,
    MAX_RECEIPTS,
    RECOVERY_RECORD_LEN,
    TOKEN_TTL,
    valid_vault_name,
)
from server import challenge as challenges
from server.context import ApiError, Context, hex_param, int_param, parsed
from server.device_routes import admit, note_sync
from server.ratelimit import client_key
from server.storage import StorageConflict
from server.storage.base import (
    Change,
    ExportSnapshot,
    LogEntry,
    Registration,
    RekeyKeys,
    StorageBusy,
    StorageLimit,
    StorageQuota,
    VaultRecord,
)
from server.verify import HolderKey, Refused, check_receipt, claimed_cell_id, ed25519_valid

CBOR = "application/cbor"
AMEM = "application/amem+cbor"
E = ErrorCode
_log = logging.getLogger("ownmem.server")
# what POST /receipts logs; KEY comes with registration, FORGET with erasure (it withdraws the
# cell in the same transaction), SHARE/REVOKE with their contracts
LOGGED_HERE = frozenset({"REMEMBER", "RECALL", "STATUS"})


@dataclass
class _Turn:
    """One vault's pushes, one at a time: the lock, and how many pushes hold or wait for it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class VaultRoutes:
    """The vault routes' handlers, over the server's ``Context``."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._pushing: dict[int, _Turn] = {}

    async def register(self, request: Request) -> Response:
        self.ctx.limit_address(request)
        b = await self.ctx.json_body(request)
        name = b.get("name")
        if not isinstance(name, str) or not valid_vault_name(name):
            raise ApiError(E.BAD_NAME, E.BAD_NAME.description)
        reg = parsed(messages.Registration.parse, b)
        # before any signature is verified: four verifications (two of them ML-DSA-65) and a
        # vault's storage per attempt
        self.ctx.charge(self.ctx.register_limiter, client_key(request.scope),
                        "too many registrations from this address")
        if not ed25519_valid(reg.sync_pub, reg.proof, reg.message()):
            raise ApiError(E.BAD_SIGNATURE, "the registration is not signed by its sync key")
        if not ed25519_valid(reg.owner_pub, reg.metadata_sig, signed.metadata_message(name, 1, reg.metadata)):
            raise ApiError(E.BAD_SIGNATURE, "the metadata is not signed by the owner key")
        holder_id = hashlib.sha256(reg.holder_pub).digest()
        try:
            hk = HolderKey(reg.holder_pub, holder_id)
            r, entry = check_receipt(reg.key_receipt, hk, reg.holder_pub, "KEY")
        except Refused as e:
            raise ApiError(e.code, str(e)) from None
        except ValueError:
            raise ApiError(E.MALFORMED, "holder_pub is not an ML-DSA-65 public key") from None
        if r.subject_id != holder_id or r.detail != reg.holder_pub:
            raise ApiError(E.MALFORMED_RECEIPT, "a KEY receipt names the holder and carries its public key")
        # The KEY receipt is public (it is in the log), so it proves nothing about who
        # registers; the holder's own signature over this registration does.
        if not hk.valid(reg.message(), reg.holder_proof, signed.REGISTER_HOLDER_CONTEXT):
            raise ApiError(E.BAD_SIGNATURE, "the registration is not signed by its holder key")
        # A second name for keys that hold a vault here already splits one vault into two that
        # never exchange a change (a backup restored under a new name, then linked): refused,
        # naming the vault, unless the request asks for it.  Only the keys' holder, proven by
        # the three signatures above, learns that name (docs/decisions.md, issue 23).
        # (A taken name stays name_taken, whoever holds it.)
        if b.get("another_name") is not True and await self.ctx.call(self.ctx.storage.vault, name) is None:
            held = await self.ctx.call(self.ctx.storage.name_of_owner, reg.owner_pub)
            if held is not None:
                raise ApiError(E.KEYS_REGISTERED, f'these keys hold the vault "{held}" on this server already',
                               vault=held)
        stored = Registration(name, reg.salt, reg.owner_pub, reg.sync_pub, reg.ka_pub, reg.holder_pub, holder_id,
                              reg.metadata, reg.metadata_sig, entry, reg.holder_proof)
        try:
            await self.ctx.call(self.ctx.storage.register, stored, max_per_key=self.ctx.config.vaults_per_key)
        except StorageConflict:
            raise ApiError(E.NAME_TAKEN, "a vault of that name exists") from None
        except StorageLimit:
            raise ApiError(E.TOO_MANY_VAULTS, f"a key of this registration is in {self.ctx.config.vaults_per_key} "
                                              "vaults on this server already") from None
        return JSONResponse(messages.Registered(name, holder_id, r.receipt_id).encode(), status_code=201)

    async def name_taken(self, request: Request) -> Response:
        """Whether a vault holds this name, charged to the registration budget of the address:
        registering already tells a taken name (name_taken), at that rate, so this tells no more
        and no faster; the lookup keeps its decoys (docs/decisions.md, issue 23)."""
        name = self._vault_name(request)
        self.ctx.charge(self.ctx.register_limiter, client_key(request.scope),
                        "too many name checks from this address")
        held = await self.ctx.call(self.ctx.storage.vault, name)
        return JSONResponse({"name": name, "taken": held is not None})

    async def lookup(self, request: Request) -> Response:
        _, info = await self.ctx.named(request)
        return JSONResponse(info.encode())

    async def recovery(self, request: Request) -> Response:
        """The recovery kit's public record from the vault's owner-signed metadata (a new device
        has only the name and the kit's words), else a decoy: public, like the lookup, and it
        does not tell which vaults have a kit.  Nothing here opens anything without the words."""
        v, _ = await self.ctx.named(request)
        record = self.ctx.decoys.recovery_record(request.path_params["name"])
        if v is not None:
            _, meta, _ = await self.ctx.call(self.ctx.storage.metadata, v.id)
            record = _kit_record(meta) or record
        return JSONResponse(messages.RecoveryRecord(record).encode())

    def _vault_name(self, request: Request) -> str:
        name: str = request.path_params["name"]
        if not valid_vault_name(name):
            self.ctx.limit_address(request)
            raise ApiError(E.UNKNOWN_VAULT, "no such vault")
        return name

    async def challenge(self, request: Request) -> Response:
        """Stateless (challenge.py): an HMAC, no row, no read, charged to nobody.  A stranger
        behind the owner's address who floods it spends nothing the owner's login needs."""
        name = self._vault_name(request)
        expires = int(time.time()) + CHALLENGE_TTL
        c = challenges.make(self.ctx.challenge_key, name, expires, secrets.token_bytes(challenges.NONCE_LEN))
        return JSONResponse(messages.Challenge(c, expires).encode())

    async def session(self, request: Request) -> Response:
        """A login that proves the vault's sync key is charged to the vault; one that does not,
        to the address (after the check: charging first would let a stranger's flood refuse
        the owner's login before its proof is even read)."""
        name = self._vault_name(request)
        body = await self.ctx.json_body(request)
        req = parsed(messages.SessionRequest.parse, body)
        now = time.time()
        live_until = challenges.check(self.ctx.challenge_key, name, req.challenge, now, CHALLENGE_TTL)
        if live_until is None:
            self.ctx.limit_address(request)
            raise ApiError(E.UNAUTHENTICATED, "the challenge is unknown, used or expired")
        v, info = await self.ctx.call(self.ctx.find, name)
        # a decoy is checked against its sync key as well, and refused with the very same answer
        valid = ed25519_valid(info.sync_pub, req.signature, signed.auth_message(info.name, req.challenge))
        if v is None or not valid:
            self.ctx.limit_address(request)
            raise ApiError(E.UNAUTHENTICATED, "could not authenticate")
        self.ctx.charge(self.ctx.vault_limiter, v.id, "too many requests for this vault")
        # single use: the row is written only now, by a login that proved the key
        if not await self.ctx.call(self.ctx.storage.use_challenge, v.id, req.challenge, live_until, now):
            raise ApiError(E.UNAUTHENTICATED, "the challenge is unknown, used or expired")
        # and the device's own key, once the vault has enrolled devices (device_routes.py)
        device = await admit(self.ctx, v, req.challenge, body)
        token = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
        expires = time.time() + TOKEN_TTL
        if device is not None:
            await self.ctx.call(self.ctx.storage.devices().bind_token, hashlib.sha256(token.encode()).digest(),
                                v.id, device, int(now))
        await self.ctx.call(self.ctx.storage.add_token, hashlib.sha256(token.encode()).digest(), v.id, expires)
        return JSONResponse(messages.Session(token, int(expires)).encode())

    # ---------------------------------------------------------------- vault routes
    async def metadata(self, request: Request) -> Response:
        # One route for both methods, so a 405 on this path lists all it allows (Allow: GET, HEAD,
        # PUT); two routes on one path answered OPTIONS with the first route's methods only.
        return await (self.put_metadata(request) if request.method == "PUT" else self.get_metadata(request))

    async def get_metadata(self, request: Request) -> Response:
        v, _ = await self.ctx.authed(request)
        version, meta, sig = await self.ctx.call(self.ctx.storage.metadata, v.id)
        return JSONResponse(messages.MetadataVersion(version, meta, sig).encode())

    async def put_metadata(self, request: Request) -> Response:
        v, _ = await self.ctx.authed(request)
        # the expected version is bounded (MAX_VERSION): a version is a 64-bit database integer,
        # and 2**80 used to end in a 500
        up = parsed(messages.MetadataUpdate.parse, await self.ctx.json_body(request))
        if not ed25519_valid(v.owner_pub, up.signature, signed.metadata_message(v.name, up.expected_version + 1,
                                                                            up.metadata)):
            raise ApiError(E.BAD_SIGNATURE, "the metadata is not signed by the owner key for that version")
        try:
            version = await self.ctx.call(self.ctx.storage.cas_metadata, v.id, up.expected_version, up.metadata,
                                          up.signature)
        except StorageConflict:
            raise ApiError(E.STALE_VERSION, "the metadata changed; pull and retry") from None
        self.ctx.live.notify(v.id)
        return JSONResponse(messages.MetadataAccepted(version).encode())

    async def rekey(self, request: Request) -> Response:
        """A passphrase change (vault/rekey.py): taken only when the owner key in force signs the
        hand-over, the new owner key the metadata, and the vault's sync and holder keys the new
        registration; then the lookup answers the new salt and keys, and the old owner key can
        sign nothing the server takes again."""
        v, _ = await self.ctx.authed(request)
        up = parsed(messages.Rekey.parse, await self.ctx.json_body(request))
        version = up.expected_version + 1
        if not ed25519_valid(v.owner_pub, up.old_owner_sig, signed.rekey_message(
                v.name, version, up.salt, up.owner_pub, up.ka_pub, up.root_wrap, up.metadata)):
            raise ApiError(E.BAD_SIGNATURE, "the change is not signed by the vault's current owner key")
        if not ed25519_valid(up.owner_pub, up.metadata_sig, signed.metadata_message(v.name, version, up.metadata)):
            raise ApiError(E.BAD_SIGNATURE, "the metadata is not signed by the new owner key for that version")
        reg = signed.register_message(v.name, up.salt, up.owner_pub, v.sync_pub, up.ka_pub, v.holder_pub)
        if not ed25519_valid(v.sync_pub, up.proof, reg):
            raise ApiError(E.BAD_SIGNATURE, "the new keys are not signed by the vault's sync key")
        if not self.ctx.holder(v).valid(reg, up.holder_proof, signed.REGISTER_HOLDER_CONTEXT):
            raise ApiError(E.BAD_SIGNATURE, "the new keys are not signed by the vault's holder key")
        keys = RekeyKeys(up.salt, up.owner_pub, up.ka_pub, up.root_wrap, up.holder_proof)
        try:
            got = await self.ctx.call(self.ctx.storage.rekey, v.id, up.expected_version, keys, up.metadata,
                                      up.metadata_sig)
        except StorageConflict:
            raise ApiError(E.STALE_VERSION, "the metadata changed; pull and retry") from None
        self.ctx.live.notify(v.id)
        return JSONResponse(messages.MetadataAccepted(got).encode())

    async def push(self, request: Request) -> Response:
        v, _ = await self.ctx.authed(request)
        # One push of a vault at a time (in this process), its body read only when its turn comes:
        # a vault's concurrent pushes queue behind each other, not in front of other vaults' pushes.
        turn = self._pushing.setdefault(v.id, _Turn())
        turn.users += 1
        try:
            async with turn.lock:
                res = await self._push(request, v)
        finally:
            turn.users -= 1
            if not turn.users:
                del self._pushing[v.id]
        if res.stored:
            self.ctx.live.notify(v.id)
        return JSONResponse(res.encode())

    async def _push(self, request: Request, v: VaultRecord) -> messages.PushResult:
        raw = await self.ctx.body(request)
        # the array's declared length first: a batch of 5000 would otherwise trip the item
        # cap of the decoder below and be called malformed instead of too large
        if _cbor_array_len(raw) > MAX_BATCH:
            raise ApiError(E.BATCH_TOO_LARGE, f"at most {MAX_BATCH} cells per push")
        req = parsed(messages.PushRequest.parse, raw)
        # 1. What is worth verifying: each cellId once, and none the vault holds or erased.  The
        #    cellId is read from the cell's head; an item skipped here could never be stored
        #    (the storage keeps the first cell of an id, and never one it holds or erased), so
        #    it is counted as the duplicate (or erased cell) it is, unchecked.
        claims = [claimed_cell_id(it.cell) for it in req.items]
        present, erased = await self.ctx.call(self.ctx.storage.known_cells, v.id, list({c for c in claims if c}))
        todo: list[int] = []
        seen: set[bytes] = set()
        duplicates = gone = 0
        for i, cid in enumerate(claims):
            if cid is not None:
                if cid in present or cid in seen:
                    duplicates += 1
                    continue
                if cid in erased:
                    gone += 1
                    continue
                seen.add(cid)
            todo.append(i)
        # 2. The quota, before any verification (and again in the storage transaction).
        quota = self.ctx.config.vault_quota_bytes
        adding = sum(len(req.items[i].cell) + len(req.items[i].wrapped_dek) for i in todo)
        if adding and v.stored_bytes + adding > quota:
            raise ApiError(E.QUOTA_EXCEEDED, f"this push would take the vault to {v.stored_bytes + adding} bytes, "
                                             f"over its quota of {quota}")
        # 3. Verification is most of the cost, and ML-DSA-65 verification holds the GIL: a large
        #    batch is verified in worker processes, one part per core (verifypool.py).
        items = [[req.items[i].cell, req.items[i].wrapped_dek] for i in todo]
        checked = await self.ctx.verifier.check(items, self.ctx.holder(v), v.holder_pub)
        if isinstance(checked, tuple):
            i, e = checked
            raise ApiError(e.code, f"item {todo[i]}: {e}")
        try:
            res = await self.ctx.call(self.ctx.storage.push, v.id, checked, quota=quota)
        except StorageQuota as e:
            raise ApiError(E.QUOTA_EXCEEDED, str(e)) from None
        return messages.PushResult(res.stored, res.duplicates + duplicates, res.erased + gone, res.last_seq)

    async def changes(self, request: Request) -> Response:
        v, _ = await self.ctx.authed(request)
        since, limit = int_param(request, "since", 0), int_param(request, "limit", 1000)
        await note_sync(self.ctx, request)
        limit = max(1, min(limit, MAX_PAGE))
        rows, last = await self.ctx.call(self.ctx.storage.changes, v.id, since, limit)
        # bounded in bytes as well as in count: one response never grows past MAX_PAGE_BYTES
        size, keep = 0, 0
        for c in rows:
            size += len(c.cell or b"") + 64
            if keep and size > MAX_PAGE_BYTES:
                break
            keep += 1
        rows = rows[:keep]
        page = messages.ChangesPage(tuple(_change(c) for c in rows), rows[-1].seq if rows else since, last)
        # Streamed in slices rather than built whole: a page runs to ~20 MB, and the device
        # starts reading while the rest is encoded (docs/benchmarks.md, area `server`).
        return StreamingResponse(page.chunks(), media_type=CBOR)

    async def events(self, request: Request) -> Response:
        v, expires = await self.ctx.authed(request)

        async def stream() -> AsyncIterator[bytes]:
            last = -1
            # ends when the credential expires: the client logs in again and reconnects
            async for seq in self.ctx.live.watch(v.id, until=expires):
                if await request.is_disconnected():
                    return
                if seq != last:
                    last = seq
                    yield b"event: changes\ndata: " + codec.dump_json(messages.LiveEvent(seq).encode()) + b"\n\n"
                else:
                    yield b": keep-alive\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def erase(self, request: Request) -> Response:
        v, _ = await self.ctx.authed(request)
        req = parsed(messages.EraseRequest.parse, await self.ctx.json_body(request))
        holder = self.ctx.holder(v)
        # off the event loop, the ML-DSA-65 verifications spread over the pool (verifypool.py)
        checked = await self.ctx.verifier.check_receipts([(raw, "FORGET") for raw in req.receipts], holder,
                                                         v.holder_pub)
        if isinstance(checked, tuple):
            i, why = checked
            raise ApiError(why.code, f"receipt {i}: {why}")
        entries, ids = checked, [e.subject_id for e in checked]
        # a FORGET names a cell of this vault: another holder's cell is neither erased, logged
        # nor listed on this vault's word (an unknown cellId is: a push may still be on its way)
        foreign = await self.ctx.call(self.ctx.storage.foreign_cells, v.id, ids)
        if foreign:
            i = next(i for i, cid in enumerate(ids) if cid in foreign)
            raise ApiError(E.WRONG_HOLDER, f"receipt {i}: its cell is another holder's, not this vault's")
        done = await self.ctx.call(self.ctx.storage.erase, v.id, ids, entries, int(time.time()))
        if done:
            self.ctx.live.notify(v.id)
        # pending: erased bytes may still be on the server's disk (storage/scrub.py); sending
        # the same receipts again is how a client asks until it reads false
        pending = await self.ctx.call(self.ctx.storage.erasure_pending, v.id)
        erased = set(done)
        return JSONResponse(messages.EraseResult(tuple(done), tuple(c for c in ids if c not in erased),
                                                 pending).encode())

    async def rewrap(self, request: Request) -> Response:
        """A scope-KEK rotation (vault/rotate.py): new wrapped DEKs for cells this vault holds.  The
        server cannot check a wrap (it holds no KEK), only that each names a cell of this vault:
        a device takes a new wrap only if it unwraps, under the KEK its owner-signed metadata
        names, to the DEK it holds; the old wraps are gone from every answer once replaced."""
        v, _ = await self.ctx.authed(request)
        req = parsed(messages.RewrapRequest.parse, await self.ctx.json_body(request))
        try:
            replaced, last = await self.ctx.call(self.ctx.storage.rewrap, v.id,
                                                 list(zip(req.cell_ids, req.wrapped_deks, strict=True)))
        except StorageConflict:
            raise ApiError(E.UNKNOWN_CELL, "a new wrap names a cell this vault does not hold (never pushed, erased, "
                                           "or another holder's): nothing was replaced") from None
        if replaced:
            self.ctx.live.notify(v.id)
        return JSONResponse(messages.RewrapResult(replaced, last).encode())

    async def receipts(self, request: Request) -> Response:
        """Holder-signed receipts of this vault for the public log (SAIHM "Audit log", "Receipt
        semantics"): REMEMBER before a cell is pushed, and RECALL/STATUS if a device's policy
        writes any.  Every receipt is checked before any is logged, then all are logged in one
        transaction, idempotently by receiptId; the answer names them all."""
        v, _ = await self.ctx.authed(request)
        b = await self.ctx.json_body(request)
        raw = b.get("receipts")
        # the count before the hex of each is decoded: over the cap is its own 413, not "malformed"
        if isinstance(raw, list) and len(raw) > MAX_RECEIPTS:
            raise ApiError(E.TOO_MANY_RECEIPTS, f"at most {MAX_RECEIPTS} receipts per request")
        req = parsed(messages.ReceiptsRequest.parse, b)
        holder = self.ctx.holder(v)
        ops: list[tuple[bytes, str]] = []
        for i, one in enumerate(req.receipts):
            try:
                op = parse_receipt(one).operation
            except OwnmemError as e:
                raise ApiError(E.MALFORMED_RECEIPT, f"receipt {i}: {e}") from None
            if op not in LOGGED_HERE:
                raise ApiError(E.MALFORMED_RECEIPT, f"receipt {i}: {op} receipts are not logged by this route")
            ops.append((one, op))
        # off the event loop, the ML-DSA-65 verifications spread over the pool (verifypool.py)
        checked = await self.ctx.verifier.check_receipts(ops, holder, v.holder_pub)
        if isinstance(checked, tuple):
            i, why = checked
            raise ApiError(why.code, f"receipt {i}: {why}")
        entries: dict[bytes, LogEntry] = {}
        for entry in checked:
            entries.setdefault(entry.receipt_id, entry)
        await self.ctx.call(self.ctx.storage.log_receipts, list(entries.values()))
        return JSONResponse(messages.ReceiptsLogged(tuple(entries)).encode())

    async def export(self, request: Request) -> Response:
        """A streamed `.amem` of the vault, byte-identical to what the owner's device exports."""
        v, _ = await self.ctx.authed(request)
        _, meta, _ = await self.ctx.call(self.ctx.storage.metadata, v.id)
        try:
            doc = cbor.decode(meta)
            vault_public, amem_sig = doc["vault_public"], doc["amem_sig"]
            if not isinstance(vault_public, dict) or not isinstance(amem_sig, bytes):
                raise KeyError
        except (OwnmemError, KeyError, TypeError):
            raise ApiError(E.NO_EXPORT, "this vault's metadata carries no export header") from None
        # a rotation under way (vault/rotate.py): the metadata names a retiring KEK beside the scope's
        # entry, and the wraps still under it would not open from a container that names one KEK
        gens = doc.get("kek_gens", [])
        if isinstance(gens, list) and any(isinstance(g, list) and len(g) > 2 for g in gens):
            raise ApiError(E.ROTATION_UNFINISHED, "a scope's key rotation is not finished, so part of this vault "
                           "would not open from an export: run `ownmem scope rotate NAME` on one of your devices "
                           "to finish it, then export again")
        # key 6 as the owner's device writes it after a passphrase change (vault/transfer.py): the
        # root wrap and the owner-signed successions, so a fresh import is this vault again
        wrap = await self.ctx.call(self.ctx.storage.root_wrap, v.id)
        succ = doc.get("successions", [])
        root = None if wrap is None else {"root_wrap": wrap, "successions": succ if isinstance(succ, list) else []}
        try:
            snap = await self.ctx.call(self.ctx.storage.export_snapshot, v.id)
        except StorageBusy as e:
            raise ApiError(E.BUSY, str(e), {"Retry-After": "10"}) from None
        return StreamingResponse(_amem_stream(snap, vault_public, amem_sig, root), media_type=AMEM,
                                 headers={"Content-Disposition": f'attachment; filename="{v.name}.amem"'})

    # ---------------------------------------------------------------- public log
    async def log_get(self, request: Request) -> Response:
        await self.ctx.limit_reader(request)
        rid = request.path_params["receipt_id"]
        r = await self.ctx.call(self.ctx.storage.log_get, bytes.fromhex(rid)) if _is_hex64(rid) else None
        if r is None:
            raise ApiError(E.NOT_FOUND, "no such receipt")
        return JSONResponse(_log_json(r))

    async def log_list(self, request: Request) -> Response:
        await self.ctx.limit_reader(request)      # a device reads its holder's FORGETs on every sync
        q = request.query_params
        holder = hex_param(q["holder"], "holder") if "holder" in q else None
        subject = hex_param(q["subject"], "subject") if "subject" in q else None
        op = q.get("operation")
        if op is not None and op not in OPERATIONS:
            raise ApiError(E.MALFORMED, "unknown operation")
        rows = await self.ctx.call(self.ctx.storage.log_list, holder_id=holder, subject_id=subject, operation=op,
                               after=int_param(request, "after", 0),
                               limit=max(1, min(int_param(request, "limit", 100), 1000)))
        return JSONResponse({"entries": [_log_json(r) for r in rows]})

    async def erasures(self, request: Request) -> Response:
        await self.ctx.limit_reader(request)
        rows = await self.ctx.call(self.ctx.storage.erasure_list, int_param(request, "after", 0),
                               max(1, min(int_param(request, "limit", 1000), 10000)))
        return JSONResponse({"entries": [{"index": i, "cell_id": c.hex(), "holder_id": h.hex(), "at": at}
                                         for i, c, h, at in rows]})


def _kit_record(meta: bytes) -> bytes | None:
    """The "recovery" record of an owner-signed metadata document, if it holds a well-formed one."""
    try:
        doc = cbor.decode(meta, max_items=100_000)
    except MalformedInput:
        return None
    got = doc.get("recovery") if isinstance(doc, dict) else None
    return got if isinstance(got, bytes) and len(got) == RECOVERY_RECORD_LEN else None


def vault_routes(ctx: Context) -> tuple[list[Route], list[Route]]:
    """The vault routes, and the log's listing routes: those go before and after the public
    log's own (server/tlog_routes.py), as /v1/log/{receipt_id} would take /v1/log/checkpoint."""
    r = VaultRoutes(ctx)
    return [
        Route("/v1/vaults", r.register, methods=["POST"]),
        Route("/v1/vaults/{name}", r.lookup),
        Route("/v1/names/{name}", r.name_taken),
        Route("/v1/vaults/{name}/challenge", r.challenge, methods=["POST"]),
        Route("/v1/vaults/{name}/session", r.session, methods=["POST"]),
        Route("/v1/vaults/{name}/metadata", r.metadata, methods=["GET", "PUT"]),
        Route("/v1/vaults/{name}/rekey", r.rekey, methods=["POST"]),
        Route("/v1/vaults/{name}/recovery", r.recovery),
        Route("/v1/vaults/{name}/cells", r.push, methods=["POST"]),
        Route("/v1/vaults/{name}/changes", r.changes),
        Route("/v1/vaults/{name}/events", r.events),
        Route("/v1/vaults/{name}/erase", r.erase, methods=["POST"]),
        Route("/v1/vaults/{name}/rewrap", r.rewrap, methods=["POST"]),
        Route("/v1/vaults/{name}/receipts", r.receipts, methods=["POST"]),
        Route("/v1/vaults/{name}/export.amem", r.export),
    ], [Route("/v1/log", r.log_list), Route("/v1/log/{receipt_id}", r.log_get), Route("/v1/erasures", r.erasures)]


def _change(c: Change) -> messages.ChangeRow:
    return messages.change_row([c.seq, c.kind, c.cell_id, c.cell, c.wrapped_dek])


def _cbor_array_len(raw: bytes) -> int:
    """The length a definite-length CBOR array declares in its head; -1 if ``raw`` does not start with one."""
    if not raw or raw[0] >> 5 != 4 or raw[0] & 0x1F > 27:
        return -1
    ai = raw[0] & 0x1F
    if ai < 24:
        return ai
    size = 1 << (ai - 24)
    return int.from_bytes(raw[1:1 + size], "big") if len(raw) > size else -1


def _is_hex64(s: str) -> bool:
    return len(s) == 64 and all(ch in "0123456789abcdef" for ch in s)


def _log_json(r: Any) -> dict[str, Any]:
    e = r.entry
    return {"index": r.index, "receipt_id": e.receipt_id.hex(), "subject_id": e.subject_id.hex(),
            "operation": e.operation, "holder_id": e.holder_id.hex(), "timestamp": e.timestamp,
            "receipt": e.receipt.hex()}


async def _amem_stream(snap: ExportSnapshot, vault_public: dict[Any, Any], amem_sig: bytes,
                       root: dict[str, Any] | None = None) -> AsyncIterator[bytes]:
    """{1: 1, 2: vault-public, 3: [n sealed objects], 4: {n id: wrapped}, 5: sig, ?6: root}, in
    deterministic order (6, ownmem's root record, only after a passphrase change).

    Every page comes from the one snapshot the count was taken in (storage/export.py), so the
    count holds whatever is pushed or erased meanwhile.  Objects stream page by page; only the
    56-byte (id, wrapped DEK) pairs are held for key 4."""
    try:
        head = b"\xa6" if root is not None else b"\xa5"
        yield head + b"\x01\x01\x02" + cbor.encode(vault_public) + b"\x03" + cbor.head(4, snap.count)
        deks: list[tuple[bytes, bytes]] = []
        after = b""
        while True:
            page = await run_in_threadpool(snap.page, after, 1000)
            if not page:
                break
            yield b"".join(cbor.encode(parse_cell(cell).ciphertext) for _, cell, _ in page)
            deks.extend((oid, wrapped) for oid, _, wrapped in page)
            after = page[-1][0]
        yield b"\x04" + cbor.head(5, snap.count) + b"".join(cbor.encode(o) + cbor.encode(w) for o, w in deks)
        yield b"\x05" + cbor.encode(amem_sig) + (b"\x06" + cbor.encode(root) if root is not None else b"")
    finally:
        snap.close()     # never waits (a page being read ends it when done)
