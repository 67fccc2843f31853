"""A vault's devices over HTTP (ApertoMemory "Device and Key Revocation"; docs/decisions.md
"15.7. Device and Key Revocation").

    POST /v1/vaults/{name}/session                  (vault_routes.py) with ``device``: ``admit`` below
    GET  /v1/vaults/{name}/devices                  ``wire.devices.DeviceList``
    POST /v1/vaults/{name}/devices/{id}/remove      ``wire.devices.DeviceRemoval`` -> the list left

Why a device key: the sync key derives from the vault root, which every device holds and which
survives a passphrase change, so a lost device could always prove it.  A device key is random,
made on the device, and enrolled by the owner key in force; once a vault has an enrolled device,
a login must carry an enrolled device's signature as well as the sync key's.  Removing a device
ends its credentials at once, lists its key as removed (it never enrols again), and closes
enrolment under the owner key in force, which the removed device holds too, until a passphrase
change replaces it (the device that removes does that next: vault/devices.py).
"""
from __future__ import annotations

import enum
import hashlib
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ownmem.wire import signed
from ownmem.wire.codec import Hex
from ownmem.wire.devices import (
    DEVICE_ID_LEN,
    DeviceEnrolment,
    DeviceInfo,
    DeviceList,
    DeviceLogin,
    DeviceRemoval,
    device_id,
)
from ownmem.wire.errors import ErrorCode as E
from server.context import ApiError, Context, parsed
from server.storage.base import VaultRecord
from server.storage.devices import DeviceRecord, Enrolled
from server.verify import ed25519_valid

TOUCH_EVERY = 60.0     # seconds between two notes of one credential's sync (a pull is many requests)


class Admission(enum.Enum):
    """What a login's device part comes to (``admission``)."""

    LEGACY = enum.auto()            # no device enrolled in the vault yet: the sync key alone, as before
    DEVICE = enum.auto()            # an enrolled device
    ENROL = enum.auto()             # a device the owner key in force enrols now
    BAD_PROOF = enum.auto()
    REMOVED = enum.auto()
    DEVICE_REQUIRED = enum.auto()
    BAD_ENROLMENT = enum.auto()


def admission(*, proof: bool | None, enrolled: bool, removed: bool, vault_has_devices: bool,
              enrolment: bool | None) -> Admission:
    """The rule, keys in and verdict out.  ``proof``: None without a device part, else whether the
    device key signed this challenge; ``enrolment``: None without one, else whether the owner key
    in force signed it.  Checked after the sync key's signature and the challenge's single use."""
    if proof is None:
        return Admission.DEVICE_REQUIRED if vault_has_devices else Admission.LEGACY
    if not proof:
        return Admission.BAD_PROOF
    if removed:
        return Admission.REMOVED
    if enrolled:
        return Admission.DEVICE
    if enrolment is None:
        return Admission.DEVICE_REQUIRED if vault_has_devices else Admission.LEGACY
    return Admission.ENROL if enrolment else Admission.BAD_ENROLMENT


_REFUSALS = {
    Admission.BAD_PROOF: (E.UNAUTHENTICATED, "could not authenticate"),
    Admission.REMOVED: (E.DEVICE_REMOVED, "this device was removed from the vault"),
    Admission.DEVICE_REQUIRED: (E.DEVICE_REQUIRED, "this vault takes logins only from its enrolled devices"),
    Admission.BAD_ENROLMENT: (E.BAD_SIGNATURE, "the enrolment is not signed by the vault's owner key in force"),
}
_ENROL_REFUSALS = {
    Enrolled.REMOVED: (E.DEVICE_REMOVED, "this device was removed from the vault"),
    Enrolled.CLOSED: (E.ENROLMENT_CLOSED, "a device was removed and the vault's keys have not changed since: "
                                          "change the passphrase on an enrolled device first"),
    Enrolled.STALE_OWNER: (E.BAD_SIGNATURE, "the vault's owner key changed during this login: log in again"),
    Enrolled.FULL: (E.TOO_MANY_DEVICES, "this vault has as many devices as the server allows: remove one first"),
}


async def admit(ctx: Context, v: VaultRecord, challenge: bytes, body: dict[str, object]) -> bytes | None:
    """The device a login is for (None: a vault with no enrolled device, logged in by its sync key
    alone), enrolling it if it carries the owner key's enrolment; ApiError when refused."""
    login, enrol = parsed(DeviceLogin.parse_optional, body)
    store = ctx.storage.devices()
    if login is None:
        verdict = admission(proof=None, enrolled=False, removed=False,
                            vault_has_devices=await ctx.call(store.count, v.id) > 0, enrolment=None)
        return _refuse_or(verdict, None)
    did = device_id(login.device_pub)
    held = await ctx.call(store.get, v.id, did)
    verdict = admission(
        proof=ed25519_valid(login.device_pub, login.signature,
                            signed.device_auth_message(v.name, challenge, login.device_pub)),
        enrolled=held is not None and held.device_pub == login.device_pub,
        removed=await ctx.call(store.removed, v.id, did),
        vault_has_devices=await ctx.call(store.count, v.id) > 0,
        enrolment=None if enrol is None else _enrolment_valid(v, challenge, login, enrol))
    if verdict is Admission.ENROL:
        assert enrol is not None
        now = int(time.time())
        got = await ctx.call(store.enrol, v.id, v.owner_pub, DeviceRecord(did, login.device_pub, enrol.label, now,
                                                                          now))
        if got in _ENROL_REFUSALS:
            code, message = _ENROL_REFUSALS[got]
            raise ApiError(code, message)
        return did
    return _refuse_or(verdict, did)


def _enrolment_valid(v: VaultRecord, challenge: bytes, login: DeviceLogin, enrol: DeviceEnrolment) -> bool:
    return ed25519_valid(v.owner_pub, enrol.owner_sig,
                         signed.device_enrol_message(v.name, challenge, login.device_pub, enrol.label))


def _refuse_or(verdict: Admission, did: bytes | None) -> bytes | None:
    if verdict in _REFUSALS:
        code, message = _REFUSALS[verdict]
        raise ApiError(code, message)
    return did if verdict is Admission.DEVICE else None


def _token_hash(request: Request) -> bytes:
    return hashlib.sha256(request.headers.get("authorization", "")[7:].strip().encode()).digest()


_touched: dict[bytes, float] = {}


async def note_sync(ctx: Context, request: Request) -> None:
    """The device of this request's credential synced now (the change feed's route calls this):
    noted at most once a minute per credential, as one pull is many requests."""
    h, now = _token_hash(request), time.time()
    if now - _touched.get(h, 0.0) < TOUCH_EVERY:
        return
    if len(_touched) > 10000:
        _touched.clear()
    _touched[h] = now
    await ctx.call(ctx.storage.devices().touch, h, int(now))


def device_routes(ctx: Context) -> list[Route]:
    """The device routes, over the server's ``Context``."""
    call = ctx.call

    async def listing(v: VaultRecord) -> JSONResponse:
        rows = await call(ctx.storage.devices().listed, v.id)
        return JSONResponse(DeviceList(tuple(DeviceInfo(d.device_id, d.label, d.added_at, d.last_sync)
                                             for d in rows)).encode())

    async def devices(request: Request) -> Response:
        v, _ = await ctx.authed(request)
        return await listing(v)

    async def remove(request: Request) -> Response:
        """Only the owner key in force removes a device, and never the one asking (it would lose
        the session the passphrase change that must follow needs)."""
        v, _ = await ctx.authed(request)
        did = parsed(lambda x: Hex(DEVICE_ID_LEN).load(x, "device_id"), request.path_params["device_id"])
        up = parsed(DeviceRemoval.parse, await ctx.json_body(request))
        if not ed25519_valid(v.owner_pub, up.signature, signed.device_remove_message(v.name, did)):
            raise ApiError(E.BAD_SIGNATURE, "the removal is not signed by the vault's owner key in force")
        store = ctx.storage.devices()
        if await call(store.token_device, _token_hash(request)) == did:
            raise ApiError(E.MALFORMED, "a device cannot remove itself: remove it from another device")
        if not await call(store.remove, v.id, v.owner_pub, did, int(time.time())):
            raise ApiError(E.NOT_FOUND, "no such device in this vault (or the owner key changed meanwhile)")
        return await listing(v)

    return [Route("/v1/vaults/{name}/devices", devices),
            Route("/v1/vaults/{name}/devices/{device_id}/remove", remove, methods=["POST"])]
