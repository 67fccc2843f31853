"""Log witnesses over HTTP: each device of a vault publishes the checkpoint it verified, and
reads the others' (ownmem.vault.logwatch; docs/decisions.md "Log witnesses").

    POST /v1/vaults/{name}/witnesses    a ``wire.publiclog.Witness``: this device's current record
    GET  /v1/vaults/{name}/witnesses    ``wire.publiclog.WitnessList``: every device's, newest first

Vault-authenticated, like every vault route.  The server checks a record's signature under
the vault's sync key before it keeps it (so nobody fills a vault's slots with garbage), and
keeps one record per device id, at most ``publiclog.MAX_WITNESSES`` a vault.  Devices verify the
signature again: the server holds no key that makes one, so it cannot forge a device's view;
what it can do is withhold one, the residual risk written down in docs/decisions.md.
"""
from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ownmem.wire import codec, publiclog
from ownmem.wire.errors import ErrorCode as E
from server.context import ApiError, Context, parsed
from server.verify import ed25519_valid


def witness_routes(ctx: Context) -> list[Route]:
    """The route, over the server's ``Context``."""
    storage, call = ctx.storage, ctx.call

    async def witnesses(request: Request) -> Response:
        v, _ = await ctx.authed(request)
        if request.method == "POST":
            w = parsed(publiclog.Witness.parse, await ctx.json_body(request))
            if not ed25519_valid(v.sync_pub, w.signature, w.message(v.name)):
                raise ApiError(E.BAD_SIGNATURE, "the witness is not signed by this vault's sync key")
            await call(storage.put_witness, v.id, w.device_id, codec.dump_json(w.encode()), time.time(),
                       publiclog.MAX_WITNESSES)
            return JSONResponse({"stored": True})
        rows = await call(storage.witnesses, v.id, publiclog.MAX_WITNESSES)
        return JSONResponse({"witnesses": [codec.load_json(r) for r in rows]})

    return [Route("/v1/vaults/{name}/witnesses", witnesses, methods=["GET", "POST"])]
