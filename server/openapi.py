"""The OpenAPI 3.1 description of every route of the blind server (tested against the running server).

Error answers are documented from the registry ``ownmem.wire.errors.ERRORS``: the ``Error``
schema enumerates every code with its status and meaning, and each documented status of an
operation admits exactly the codes of that status.
"""
from __future__ import annotations

from typing import Any

from ownmem.saihm.receipt import OPERATIONS
from ownmem.wire.errors import ERRORS
from ownmem.wire.limits import MAX_BATCH

HEX = {"type": "string", "pattern": "^(?:[0-9a-f]{2})*$"}


def _hexn(n: int) -> dict[str, Any]:
    return {"type": "string", "pattern": f"^[0-9a-f]{{{2 * n}}}$"}




def _error(status: int | None = None) -> dict[str, Any]:
    """The error body; with a status, only the codes of that status."""
    codes = [str(c) for c, (s, _) in ERRORS.items() if status in (None, s)]
    return {"type": "object", "required": ["error", "message"],
            "properties": {"error": {"type": "string", "enum": codes}, "message": {"type": "string"}}}


ERROR = {**_error(), "description": "Every answer that is not 2xx. `error` is one of: "
         + "; ".join(f"`{c}` ({s}): {d}" for c, (s, d) in ERRORS.items()) + "."}
NAME = {"name": "name", "in": "path", "required": True,
        "schema": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]{0,63}$"}}
AUTH: list[dict[str, list[str]]] = [{"bearer": []}]
COUNTER = {"type": "integer", "minimum": 0, "maximum": 10 ** 18 - 1}     # at most 18 digits
# page sizes are clamped by the server (to 1..5000 for changes, 1..1000 for the log, 1..10000 for erasures)
LIMIT = {"name": "limit", "in": "query", "description": "page size; clamped to the server's range",
         "schema": COUNTER}


def _err(*statuses: int) -> dict[str, Any]:
    text = {400: "malformed request", 401: "no or bad credential",
            403: "credential of another vault, or a key set with as many vaults as allowed",
            404: "not a vault name", 408: "the request body did not arrive in time", 409: "conflict",
            413: "too large, or over the vault's quota", 429: "rate limited (see Retry-After)",
            503: "busy: retry after the time Retry-After names"}
    return {str(s): {"description": text[s], "content": {"application/json": {"schema": _error(s)}}}
            for s in statuses}


def _json(schema: dict[str, Any], desc: str = "ok") -> dict[str, Any]:
    return {"description": desc, "content": {"application/json": {"schema": schema}}}


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required if required is not None else list(props)}


LOG_ENTRY = _obj({"index": {"type": "integer"}, "receipt_id": _hexn(32), "subject_id": _hexn(32),
                  "operation": {"type": "string"}, "holder_id": _hexn(32), "timestamp": {"type": "integer"},
                  "receipt": HEX})

OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "ownmem blind sync server", "version": "1",
             "description": "Stores SAIHM cells around ApertoMemory sealed objects, wrapped DEKs, owner-signed "
                            "metadata, the public receipt log and the erasure list. It cannot decrypt anything. "
                            "A well-formed vault name it does not hold is answered as a vault (decoy keys); "
                            "public routes are rate limited per client address, a vault's routes per vault. "
                            "Any connection may be refused at once, before its request is read, with 503 `busy` "
                            "(too many connections) or 429 `rate_limited` (too many from one address), or "
                            "closed with 408 `timeout` when its request headers take too long."},
    "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
                   "schemas": {"Error": ERROR}},
    "paths": {
        "/health": {"get": {"operationId": "health", "responses": {
            "200": _json(_obj({"status": {"type": "string"}, "backend": {"type": "string"}}))}}},
        "/openapi.json": {"get": {"operationId": "openapi", "responses": {"200": _json({"type": "object"})}}},
        "/v1/vaults": {"post": {
            "operationId": "register",
            "requestBody": {"required": True, "content": {"application/json": {"schema": _obj({
                "name": NAME["schema"], "salt": _hexn(16), "owner_pub": _hexn(32), "sync_pub": _hexn(32),
                "ka_pub": _hexn(32), "holder_pub": _hexn(1952), "metadata": HEX, "metadata_sig": _hexn(64),
                "key_receipt": HEX, "proof": _hexn(64), "holder_proof": _hexn(3309),
                "another_name": {"type": "boolean"}}, required=["name", "salt", "owner_pub", "sync_pub", "ka_pub",
                "holder_pub", "metadata", "metadata_sig", "key_receipt", "proof", "holder_proof"])}}},
            "responses": {"201": _json(_obj({"name": {"type": "string"}, "holder_id": _hexn(32),
                                             "key_receipt_id": _hexn(32)}), "registered"),
                          **_err(400, 403, 408, 409, 413, 429)}}},
        "/v1/vaults/{name}": {"get": {
            "operationId": "lookup", "parameters": [NAME],
            "responses": {"200": _json(_obj({"name": {"type": "string"}, "salt": _hexn(16), "owner_pub": _hexn(32),
                                             "sync_pub": _hexn(32), "ka_pub": _hexn(32), "holder_pub": HEX,
                                             "holder_id": _hexn(32), "root_wrap": _hexn(40)})),
                          **_err(404, 429)}}},
        "/v1/names/{name}": {"get": {
            "operationId": "nameTaken", "parameters": [NAME],
            "responses": {"200": _json(_obj({"name": {"type": "string"}, "taken": {"type": "boolean"}})),
                          **_err(404, 429)}}},
        "/v1/vaults/{name}/challenge": {"post": {
            "operationId": "challenge", "parameters": [NAME],
            "responses": {"200": _json(_obj({"challenge": _hexn(32), "expires_at": {"type": "integer"}})),
                          **_err(404, 429)}}},
        "/v1/vaults/{name}/session": {"post": {
            "operationId": "session", "parameters": [NAME],
            "description": "A login: the sync key's signature over CBOR [\"ownmem/v1/sync-auth\", name, "
                           "challenge]; and `device`, the device key's over [\"ownmem/v1/device-auth\", name, "
                           "challenge, device_pub], required once the vault has an enrolled device. A device not "
                           "enrolled yet adds `enrol`: the owner key in force's signature over "
                           "[\"ownmem/v1/device-enrol\", name, challenge, device_pub, label].",
            "requestBody": {"required": True, "content": {"application/json": {"schema": _obj({
                "challenge": _hexn(32), "signature": _hexn(64),
                "device": _obj({"device_pub": _hexn(32), "signature": _hexn(64),
                                "enrol": _obj({"label": {"type": "string", "maxLength": 64},
                                               "owner_sig": _hexn(64)})}, ["device_pub", "signature"])},
                ["challenge", "signature"])}}},
            "responses": {"200": _json(_obj({"token": {"type": "string"}, "expires_at": {"type": "integer"}})),
                          **_err(400, 401, 403, 404, 408, 409, 413, 429)}}},
        "/v1/vaults/{name}/metadata": {
            "get": {"operationId": "getMetadata", "parameters": [NAME], "security": AUTH,
                    "responses": {"200": _json(_obj({"version": {"type": "integer"}, "metadata": HEX,
                                                     "signature": _hexn(64)})), **_err(401, 403, 429)}},
            "put": {"operationId": "putMetadata", "parameters": [NAME], "security": AUTH,
                    "requestBody": {"required": True, "content": {"application/json": {"schema": _obj({
                        "expected_version": {"type": "integer", "minimum": 1, "maximum": (1 << 62) - 1},
                        "metadata": HEX, "signature": _hexn(64)})}}},
                    "responses": {"200": _json(_obj({"version": {"type": "integer"}})),
                                  **_err(400, 401, 403, 408, 409, 413, 429)}}},
        "/v1/vaults/{name}/recovery": {"get": {
            "operationId": "recoveryRecord", "parameters": [NAME],
            "description": "The recovery kit's public record from the vault's owner-signed metadata (slot id, "
                           "public key, ephemeral key, the master wrapped to it, the kit's root check, its time), "
                           "or a seeded decoy of the same shape for a vault without a kit and for a name nobody "
                           "holds. Only the kit's words open it.",
            "responses": {"200": _json(_obj({"record": _hexn(160)})), **_err(404, 429)}}},
        "/v1/vaults/{name}/rekey": {"post": {
            "operationId": "rekey", "parameters": [NAME], "security": AUTH,
            "description": "A passphrase change: compare-and-swap of the metadata with the vault's salt, owner and "
                           "key-agreement keys and root wrap replaced. old_owner_sig is the current owner key's over "
                           "[\"ownmem/v1/rekey\", name, version, salt, owner_pub, ka_pub, root_wrap, metadata]; "
                           "metadata_sig the new owner key's over the metadata of that version; proof and "
                           "holder_proof the sync and holder keys' over the new registration message.",
            "requestBody": {"required": True, "content": {"application/json": {"schema": _obj({
                "expected_version": {"type": "integer", "minimum": 1, "maximum": (1 << 62) - 1},
                "salt": _hexn(16), "owner_pub": _hexn(32), "ka_pub": _hexn(32), "root_wrap": _hexn(40),
                "metadata": HEX, "metadata_sig": _hexn(64), "old_owner_sig": _hexn(64), "proof": _hexn(64),
                "holder_proof": HEX})}}},
            "responses": {"200": _json(_obj({"version": {"type": "integer"}})),
                          **_err(400, 401, 403, 408, 409, 413, 429)}}},
        "/v1/vaults/{name}/cells": {"post": {
            "operationId": "push", "parameters": [NAME], "security": AUTH,
            "description": "CBOR array of [cell, wrapped DEK]; every cell is verified (cellId, holder signature, "
                           "deterministic CBOR) once per cellId, and none the vault holds already (counted as "
                           "duplicates); idempotent by cellId; all or nothing; held to the vault's quota.",
            "requestBody": {"required": True, "content": {"application/cbor": {"schema": {"type": "string",
                                                                                        "format": "binary"}}}},
            "responses": {"200": _json(_obj({"stored": {"type": "integer"}, "duplicates": {"type": "integer"},
                                             "erased": {"type": "integer"}, "last_seq": {"type": "integer"}})),
                          **_err(400, 401, 403, 408, 413, 429)}}},
        "/v1/vaults/{name}/rewrap": {"post": {
            "operationId": "rewrap", "parameters": [NAME], "security": AUTH,
            "description": "A scope-KEK rotation: each cell's wrapped DEK replaced by the one at the same index; the "
                           "cells are never touched; a wrap that changed is a 'wrap' change of the feed. All or "
                           "nothing: unknown_cell if the vault does not hold every cell named.",
            "requestBody": {"required": True, "content": {"application/json": {"schema": _obj({
                "cell_ids": {"type": "array", "items": _hexn(32), "minItems": 1, "maxItems": MAX_BATCH},
                "wrapped_deks": {"type": "array", "items": _hexn(40), "minItems": 1, "maxItems": MAX_BATCH}})}}},
            "responses": {"200": _json(_obj({"replaced": {"type": "integer"}, "last_seq": {"type": "integer"}})),
                          **_err(400, 401, 403, 408, 409, 413, 429)}}},
        "/v1/vaults/{name}/changes": {"get": {
            "operationId": "changes", "parameters": [
                NAME, {"name": "since", "in": "query", "schema": COUNTER},
                LIMIT],
            "security": AUTH,
            "description": "CBOR {1: [[seq, kind, cellId, cell, wrappedDek]], 2: next since, 3: last seq, 4: more}",
            "responses": {"200": {"description": "a page of the change feed",
                                  "content": {"application/cbor": {"schema": {"type": "string", "format": "binary"}}}},
                          **_err(400, 401, 403, 429)}}},
        "/v1/vaults/{name}/events": {"get": {
            "operationId": "events", "parameters": [NAME], "security": AUTH,
            "responses": {"200": {"description": "server-sent events: `changes` with the last sequence number",
                                  "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                          **_err(401, 403, 429)}}},
        "/v1/vaults/{name}/erase": {"post": {
            "operationId": "erase", "parameters": [NAME], "security": AUTH,
            "description": "FORGET receipts signed by the vault's holder, one per cell; the answer names every "
                           "cell erased now or before. A cell that is another holder's (another holder's vault "
                           "holds or held it, or another holder logged a receipt about it) is refused "
                           "(wrong_holder), nothing erased; an unknown cellId is erased, so that a push still on "
                           "its way cannot bring it back.",
            "requestBody": {"required": True, "content": {"application/json": {"schema": _obj({
                "receipts": {"type": "array", "items": HEX, "minItems": 1}})}}},
            "responses": {"200": _json(_obj({"erased": {"type": "array", "items": _hexn(32)},
                                             "already": {"type": "array", "items": _hexn(32)},
                                             "pending": {"type": "boolean", "description":
                                                         "erased bytes of this vault may still be on the "
                                                         "server's disk; send the receipts again to ask"}})),
                          **_err(400, 401, 403, 408, 413, 429)}}},
        "/v1/vaults/{name}/receipts": {"post": {
            "operationId": "logReceipts", "parameters": [NAME], "security": AUTH,
            "description": "REMEMBER, RECALL or STATUS receipts signed by the vault's holder, appended to the "
                           "public log in one transaction, idempotently by receiptId (at most 128 per request)",
            "requestBody": {"required": True, "content": {"application/json": {"schema": _obj({
                "receipts": {"type": "array", "items": HEX, "minItems": 1}})}}},
            "responses": {"200": _json(_obj({"logged": {"type": "array", "items": _hexn(32)}})),
                          **_err(400, 401, 403, 408, 413, 429)}}},
        "/v1/vaults/{name}/export.amem": {"get": {
            "operationId": "export", "parameters": [NAME], "security": AUTH,
            "responses": {"200": {"description": "the vault as an ApertoMemory .amem container",
                                  "content": {"application/amem+cbor": {"schema": {"type": "string",
                                                                                    "format": "binary"}}}},
                          **_err(401, 403, 409, 429, 503)}}},
        "/v1/log": {"get": {
            "operationId": "logList", "parameters": [
                {"name": "holder", "in": "query", "schema": _hexn(32)},
                {"name": "subject", "in": "query", "schema": _hexn(32)},
                {"name": "operation", "in": "query", "schema": {"type": "string", "enum": list(OPERATIONS)}},
                {"name": "after", "in": "query", "schema": COUNTER},
                LIMIT],
            "responses": {"200": _json(_obj({"entries": {"type": "array", "items": LOG_ENTRY}})), **_err(400, 429)}}},
        "/v1/log/{receipt_id}": {"get": {
            "operationId": "logGet",
            "parameters": [{"name": "receipt_id", "in": "path", "required": True, "schema": {"type": "string"}}],
            "responses": {"200": _json(LOG_ENTRY), "404": {"description": "no such receipt", "content": {
                "application/json": {"schema": _error(404)}}}, **_err(429)}}},
        "/v1/erasures": {"get": {
            "operationId": "erasures", "parameters": [
                {"name": "after", "in": "query", "schema": COUNTER},
                LIMIT],
            "responses": {"200": _json(_obj({"entries": {"type": "array", "items": _obj({
                "index": {"type": "integer"}, "cell_id": _hexn(32), "holder_id": _hexn(32),
                "at": {"type": "integer"}})}})), **_err(400, 429)}}},
        "/": {"get": {"operationId": "app", "responses": {"200": {"description": "the web app",
                                                                   "content": {"text/html": {}}}}}},
    },
}

# ---------------------------------------------------------------- the verifiable log (server/tlog_routes.py)

_PROOF = {"type": "array", "items": _hexn(32), "maxItems": 128}
TREE_ENTRY = _obj({"leaf_index": {"type": "integer", "minimum": 0}, "receipt_id": _hexn(32),
                   "subject_id": _hexn(32), "operation": {"type": "string"}, "holder_id": _hexn(32),
                   "timestamp": {"type": "integer"}, "receipt": HEX})


def _refused(status: int, description: str) -> dict[str, Any]:
    return {str(status): {"description": description, "content": {"application/json": {"schema": _error(status)}}}}


OPENAPI["paths"].update({
    "/v1/log/key": {"get": {
        "operationId": "logKey",
        "description": "The log's origin and its Ed25519 checkpoint key (C2SP signed-note verifier key). The key "
                       "authenticates the server's own view only: devices keep the last checkpoint and check "
                       "consistency with each new one, which is what catches a rewritten or forked log.",
        "responses": {"200": _json(_obj({"origin": {"type": "string"}, "vkey": {"type": "string"},
                                         "public_key": _hexn(32), "key_id": _hexn(4)}))}}},
    "/v1/log/checkpoint": {"get": {
        "operationId": "logCheckpoint",
        "description": "The signed tree head: a C2SP tlog-checkpoint (origin, tree size, base64 RFC 6962 root) "
                       "in a C2SP signed note, signed by the log key. Leaf i is the i-th receipt's CBOR.",
        "responses": {"200": {"description": "a signed checkpoint",
                              "content": {"text/plain; charset=utf-8": {"schema": {"type": "string"}}}}}}},
    "/v1/log/proof/inclusion": {"get": {
        "operationId": "logInclusionProof",
        "description": "RFC 9162 inclusion proof (audit path, leaf side first) of one receipt, by receiptId or by "
                       "leaf index (exactly one), in the tree of `size` entries (default: the current tree).",
        "parameters": [{"name": "receipt", "in": "query", "schema": _hexn(32)},
                       {"name": "index", "in": "query", "schema": COUNTER},
                       {"name": "size", "in": "query", "schema": COUNTER}],
        "responses": {"200": _json(_obj({"index": {"type": "integer"}, "size": {"type": "integer"},
                                         "proof": _PROOF})),
                      **_refused(400, "malformed, or a size or index beyond the log"),
                      **_refused(404, "no such receipt in the log")}}},
    "/v1/log/proof/consistency": {"get": {
        "operationId": "logConsistencyProof",
        "description": "RFC 9162 consistency proof that the tree of `to` entries (default: the current tree) extends "
                       "the tree of `from` entries; empty when from is 0 or equals to.",
        "parameters": [{"name": "from", "in": "query", "required": True, "schema": COUNTER},
                       {"name": "to", "in": "query", "schema": COUNTER}],
        "responses": {"200": _json(_obj({"from": {"type": "integer"}, "to": {"type": "integer"},
                                         "proof": _PROOF})),
                      **_refused(400, "malformed, or a size beyond the log")}}},
    "/v1/log/entries": {"get": {
        "operationId": "logEntries",
        "parameters": [{"name": "start", "in": "query", "schema": COUNTER}, LIMIT],
        "responses": {"200": _json(_obj({"entries": {"type": "array", "items": TREE_ENTRY}})), **_err(400)}}},
    "/v1/log/entries/{index}": {"get": {
        "operationId": "logEntry",
        "parameters": [{"name": "index", "in": "path", "required": True, "schema": {"type": "string"}}],
        "responses": {"200": _json(TREE_ENTRY), **_refused(404, "no such entry")}}},
})

# ---------------------------------------------------------------- log witnesses (server/witness_routes.py)

_WITNESS = _obj({"device_id": _hexn(16), "vkey": {"type": "string", "maxLength": 512},
                 "note": {"type": "string", "pattern": "^(?:[0-9a-f]{2})+$", "maxLength": 8192},
                 "signed_at": COUNTER, "signature": _hexn(64)})
OPENAPI["paths"]["/v1/vaults/{name}/witnesses"] = {
    "get": {"operationId": "witnesses", "parameters": [NAME], "security": AUTH,
            "description": "Every device's current log witness (newest first): the checkpoint note it verified "
                           "last, signed by the vault's sync key over CBOR [\"ownmem/v1/log-witness\", name, "
                           "device_id, vkey, note, signed_at].",
            "responses": {"200": _json(_obj({"witnesses": {"type": "array", "items": _WITNESS,
                                                              "maxItems": 32}})),
                          **_err(401, 403, 429)}},
    "post": {"operationId": "putWitness", "parameters": [NAME], "security": AUTH,
             "description": "This device's current log witness; one record a device id, 32 a vault (the least "
                            "recently updated goes first).",
             "requestBody": {"required": True, "content": {"application/json": {"schema": _WITNESS}}},
             "responses": {"200": _json(_obj({"stored": {"type": "boolean"}})),
                           **_err(400, 401, 403, 408, 413, 429)}},
}

# ---------------------------------------------------------------- devices (server/device_routes.py)

_DEVICES = _obj({"devices": {"type": "array", "maxItems": 32, "items": _obj({
    "device_id": _hexn(16), "label": {"type": "string", "maxLength": 64}, "added_at": COUNTER,
    "last_sync": COUNTER})}})
OPENAPI["paths"]["/v1/vaults/{name}/devices"] = {
    "get": {"operationId": "devices", "parameters": [NAME], "security": AUTH,
            "description": "The vault's enrolled devices (a device's id: the first 16 bytes of SHA-256 of its key).",
            "responses": {"200": _json(_DEVICES), **_err(401, 403, 429)}}}
OPENAPI["paths"]["/v1/vaults/{name}/devices/{device_id}/remove"] = {
    "post": {"operationId": "removeDevice", "security": AUTH,
             "parameters": [NAME, {"name": "device_id", "in": "path", "required": True, "schema": _hexn(16)}],
             "description": "Remove a device, signed by the owner key in force over CBOR "
                            "[\"ownmem/v1/device-remove\", name, device_id]: its credentials end at once, its key "
                            "never logs in or enrols again, and no device enrols until the owner key changes "
                            "(a passphrase change). Answers the devices left.",
             "requestBody": {"required": True, "content": {"application/json": {"schema": _obj({
                 "signature": _hexn(64)})}}},
             "responses": {"200": _json(_DEVICES), **_err(400, 401, 403, 404, 408, 413, 429)}}}

# The verifiable log's routes are public too: paid for by the client's address.
for _path, _item in OPENAPI["paths"].items():
    if _path.startswith("/v1/log/") and _path != "/v1/log/{receipt_id}":
        _item["get"]["responses"].update(_err(429))

# ---------------------------------------------------------------- sharing between people (server/share_routes.py)

CONTRACT_ID = {"name": "contract_id", "in": "path", "required": True, "schema": _hexn(32)}
SHARE_ENTRY = _obj({"contract": HEX, "grantee": _hexn(32),
                    "state": {"type": "string", "enum": ["offered", "accepted", "declined", "withdrawn"]},
                    "revoked": {"type": "boolean"}, "expired": {"type": "boolean"}})
_BINARY = {"type": "string", "format": "binary"}

OPENAPI["paths"].update({
    "/v1/holders/{holder_id}": {"get": {
        "operationId": "holder",
        "description": "The directory: what the server keeps of the registration of the first vault of this "
                       "holder, with the holder's ML-DSA-65 signature over it (context ownmem-register-v1), so "
                       "that a sharer checks the grantee's X25519 key itself: SHA-256(holder_pub) = holder_id and "
                       "holder_proof verifies over [\"ownmem/v1/register\", name, salt, owner_pub, sync_pub, "
                       "ka_pub, holder_pub]. To a bearer credential of any vault of this server (no vault is named, so "
                       "no 403), paid by that vault; "
                       "without one, 401 for every holder_id, held or free (no stranger probes names).",
        "parameters": [{"name": "holder_id", "in": "path", "required": True, "schema": _hexn(32)}],
        "responses": {"200": _json(_obj({"name": NAME["schema"], "salt": _hexn(16), "owner_pub": _hexn(32),
                                         "sync_pub": _hexn(32), "ka_pub": _hexn(32), "holder_pub": _hexn(1952),
                                         "holder_id": _hexn(32), "holder_proof": _hexn(3309)})),
                      **_err(400, 401, 429),
                      **_refused(404, "no vault of that holder published its registration")}}},
    "/v1/vaults/{name}/holder": {"post": {
        "operationId": "publishHolder", "parameters": [NAME], "security": AUTH,
        "description": "A vault registered before the directory publishes its holder proof: the holder's "
                       "ML-DSA-65 signature (context ownmem-register-v1) over the registration the server keeps. "
                       "Idempotent: the first proof kept stays. Answers the directory record.",
        "requestBody": {"required": True, "content": {"application/json": {"schema": _obj({
            "holder_proof": _hexn(3309)})}}},
        "responses": {"200": _json(_obj({"name": NAME["schema"], "salt": _hexn(16), "owner_pub": _hexn(32),
                                         "sync_pub": _hexn(32), "ka_pub": _hexn(32), "holder_pub": _hexn(1952),
                                         "holder_id": _hexn(32), "holder_proof": _hexn(3309)})),
                      **_err(400, 401, 403, 408, 413, 429)}}},
    "/v1/vaults/{name}/shares": {
        "post": {"operationId": "shareOffer", "parameters": [NAME], "security": AUTH,
                 "description": "Offer a SAIHM sharing contract (deterministic CBOR, signed by this vault's holder, "
                                "context SAIHM-CONTRACT-v1) with its SHARE receipt (subject: the contractId) and, per "
                                "grantee and covered cell, granteeId || cellId || the cell's DEK wrapped to the "
                                "grantee's X25519 key (72 bytes). Stored with the receipt in one transaction; "
                                "nothing is released before a grantee accepts.",
                 "requestBody": {"required": True, "content": {"application/json": {"schema": _obj({
                     "contract": {**HEX, "maxLength": 2 * 65536}, "receipt": {**HEX, "maxLength": 2 * 16384},
                     "items": {"type": "array", "items": _hexn(136), "minItems": 1, "maxItems": MAX_BATCH}})}}},
                 "responses": {"201": _json(_obj({"contract_id": _hexn(32), "receipt_id": _hexn(32)}), "offered"),
                               **_err(400, 401, 403, 408, 409, 413, 429)}},
        "get": {"operationId": "shareList", "parameters": [NAME], "security": AUTH,
                "description": "The contracts this vault offered (one entry per grantee) and those naming its "
                               "holder, with each grantee's state.",
                "responses": {"200": _json(_obj({"offered": {"type": "array", "items": SHARE_ENTRY},
                                                 "received": {"type": "array", "items": SHARE_ENTRY}})),
                              **_err(401, 403, 429)}}},
    "/v1/vaults/{name}/shares/{contract_id}/{action}": {"post": {
        "operationId": "shareAct",
        "parameters": [NAME, CONTRACT_ID, {"name": "action", "in": "path", "required": True, "schema": {
            "type": "string", "enum": ["accept", "decline", "withdraw", "revoke"]}}],
        "security": AUTH,
        "description": "accept, decline, withdraw: as a grantee (no body); declined and withdrawn are final and "
                       "delete the grantee's keys. revoke: as the contract's holder, with the body {receipt: a "
                       "REVOKE receipt of the contract}; every grantee's keys are deleted and the contract marked "
                       "revoked before the receipt is logged; a repeated revoke answers revoked = true with the "
                       "receipt logged first, and logs no other.",
        "requestBody": {"required": False, "content": {"application/json": {"schema": _obj({
            "receipt": {**HEX, "maxLength": 2 * 16384}})}}},
        "responses": {"200": _json({"oneOf": [
            _obj({"contract_id": _hexn(32), "state": {"type": "string"}}),
            _obj({"revoked": {"type": "boolean"}, "receipt_id": _hexn(32), "already": {"type": "boolean"}})]}),
            **_err(400, 401, 403, 408, 409, 413, 429), **_refused(404, "no such contract for this vault")}}},
    "/v1/vaults/{name}/shared": {"get": {
        "operationId": "shared", "parameters": [
            NAME, {"name": "after", "in": "query", "schema": _hexn(64),
                   "description": "the last row's contractId || cellId"}],
        "security": AUTH,
        "description": "CBOR {1: [[contractId, cellId, cell, shareKey]], 2: more}: the cells of every contract "
                       "active for this vault's holder (accepted, not revoked, not expired, the cell not erased), "
                       "in ascending (contractId, cellId).",
        "responses": {"200": {"description": "shared cells", "content": {"application/cbor": {"schema": _BINARY}}},
                      **_err(400, 401, 403, 429)}}},
})

# Every operation can fail unexpectedly: the same JSON body, never a traceback.
for _item in OPENAPI["paths"].values():
    for _op in _item.values():
        _op["responses"]["500"] = {"description": "the server failed",
                                   "content": {"application/json": {"schema": _error(500)}}}
