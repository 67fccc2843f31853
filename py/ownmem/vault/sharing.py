"""Sharing memories between people: SAIHM sharing contracts between two ownmem vaults over
the blind server (SAIHM "Sharing contracts", "Signed messages", "Order of effect and
receipt"; ApertoMemory §9 "Key Hierarchy" for the X25519 wrapping it mirrors; ownmem
docs/decisions.md "Sharing between people").

    share(sharer)      memories -> their cellIds; each grantee's directory record VERIFIED
                       (holderId = SHA-256(holder_pub), holder_proof over the registration),
                       so a server that substitutes its own X25519 key is caught; a signed
                       contract; each covered DEK re-wrapped to each grantee; a SHARE receipt
    offers()           contracts offered by me and to me, each verified against its holder
    accept/decline/withdraw (grantee), revoke (sharer, with a REVOKE receipt)
    received(grantee)  the cells of every active contract, each checked (cellId, the sharer's
                       holder signature, covered by a verified contract naming me), its DEK
                       unwrapped, the object opened and verified against the sharer's owner
                       key; what fails is refused and reported, never shown

The share-key construction (one per grantee and cell):

    eph             fresh X25519 key pair
    wk              HKDF-SHA256(X25519(eph, grantee ka_pub),
                                info "ownmem/v1/share-dek" || contractId || cellId || eph_pub || ka_pub)
    share key       eph_pub || AES-KW(wk, DEK)                                  (72 bytes)

Binding contractId and cellId into the info means the server cannot move a key to another
cell or contract: it would not unwrap.  Nothing of a shared memory is kept by the grantee:
each ``received()`` fetches again, so revocation governs every later read.
"""
from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ownmem.aperto import keys as aperto_keys
from ownmem.aperto.model import Trust
from ownmem.aperto.seal import open_sealed
from ownmem.aperto.trust import Keyring
from ownmem.crypto import CryptoProvider, run_sync, sha256
from ownmem.errors import OwnmemError, SyncError, WireError
from ownmem.saihm.cell import Cell, CellRefused, check_cell
from ownmem.saihm.contract import (
    Contract,
    ContractRefused,
    contract_rules,
    make_contract,
    parse_contract,
    verify_contract,
)
from ownmem.saihm.errors import B
from ownmem.saihm.receipt import make_receipt
from ownmem.vault.sync import Syncer, SyncReport
from ownmem.wire import shares, signed
from ownmem.wire.errors import ErrorCode

SHARE_DEK_INFO = b"ownmem/v1/share-dek"
MODES = {"temporary": "TEMPORARY", "permanent": "PERMANENT", "syndicate": "SYNDICATE"}
TEMPORARY_DEFAULT = 86400


class ShareRefused(OwnmemError):
    """A sharing step refused: a grantee whose published key does not verify, a contract or
    cell that is not what it claims, a memory that cannot be shared.  Nothing was sent or used.
    ``reason`` names the SAIHM error it amounts to (invalid_grantee, shard_not_found, ...)."""

    code = "share_refused"

    def __init__(self, message: str, reason: str = "share_refused") -> None:
        super().__init__(message)
        self.reason = reason


# ---------------------------------------------------------------- the share key (pure crypto)

async def wrap_share_dek(p: CryptoProvider, dek: bytes, ka_pub: bytes, contract_id: bytes, cell_id: bytes,
                         eph_seed: bytes | None = None) -> bytes:
    eph = eph_seed if eph_seed is not None else aperto_keys.new_key()
    eph_pub = await p.x25519_public(eph)
    wk = await p.hkdf_sha256(await p.x25519_shared(eph, ka_pub),
                             SHARE_DEK_INFO + contract_id + cell_id + eph_pub + ka_pub)
    return eph_pub + await p.aes_kw_wrap(wk, dek)


async def unwrap_share_dek(p: CryptoProvider, key: bytes, ident: aperto_keys.Identity, contract_id: bytes,
                           cell_id: bytes) -> bytes:
    """Raises AuthenticationFailed if the key was altered, or moved to another cell or contract."""
    if len(key) != shares.SHARE_KEY_LEN:
        raise ShareRefused("a share key is 72 bytes")
    eph_pub = key[:32]
    wk = await p.hkdf_sha256(await p.x25519_shared(ident.ka_seed, eph_pub),
                             SHARE_DEK_INFO + contract_id + cell_id + eph_pub + ident.ka_pub)
    return await p.aes_kw_unwrap(wk, key[32:])


# ---------------------------------------------------------------- the directory

@dataclass(frozen=True, slots=True)
class VerifiedHolder:
    """A holder's published keys, checked: its holder key hashes to its holderId and signed
    the registration that names its X25519 (ka) and owner (Ed25519) keys."""

    holder_id: bytes
    holder_pub: bytes
    ka_pub: bytes
    owner_pub: bytes
    name: str


def verify_holder_record(p: CryptoProvider, rec: shares.HolderRecord, holder_id: bytes) -> VerifiedHolder:
    """The checks that keep a server from giving a sharer its own X25519 key for a grantee."""
    if rec.holder_id != holder_id or sha256(rec.holder_pub) != holder_id:
        raise ShareRefused(f"the server's directory answered for holder {holder_id.hex()} with another holder",
                           B.INVALID_GRANTEE)
    if not run_sync(p.mldsa65_verify(rec.holder_pub, rec.message(), rec.holder_proof, signed.REGISTER_HOLDER_CONTEXT)):
        raise ShareRefused(f"the keys the server publishes for holder {holder_id.hex()} are not signed by that "
                           "holder (a substituted key?): refused, nothing shared", B.INVALID_GRANTEE)
    return VerifiedHolder(holder_id, rec.holder_pub, rec.ka_pub, rec.owner_pub, rec.name)


# ---------------------------------------------------------------- the server's sharing routes

class ShareRemote:
    """The sharing routes of the blind server, through a Syncer's Remote and its login."""

    def __init__(self, syncer: Syncer) -> None:
        self.s = syncer
        self.r = syncer.remote

    def holder(self, holder_id: bytes) -> shares.HolderRecord | None:
        try:
            # the directory answers this server's vaults only (a stranger cannot probe names with it)
            return shares.HolderRecord.parse(self.s._call(  # noqa: SLF001 - the sharing routes go through the sync's own Remote
                lambda: self.r._json("GET", f"{self.r.base}/v1/holders/{holder_id.hex()}", auth=True)))  # noqa: SLF001 - the sharing routes go through the sync's own Remote
        except SyncError as e:
            if e.server_code == ErrorCode.NOT_FOUND:
                return None
            raise

    def publish(self, proof: bytes) -> shares.HolderRecord:
        return shares.HolderRecord.parse(self.s._call(lambda: self.r._json("POST", self.r._url("/holder"),  # noqa: SLF001 - the sharing routes go through the sync's own Remote
                                                                          shares.HolderProof(proof), auth=True)))

    def offer(self, offer: shares.ShareOffer) -> shares.ShareOffered:
        return shares.ShareOffered.parse(self.s._call(lambda: self.r._json("POST", self.r._url("/shares"), offer,  # noqa: SLF001 - the sharing routes go through the sync's own Remote
                                                                          auth=True)))

    def listing(self) -> shares.ShareList:
        return shares.ShareList.parse(self.s._call(lambda: self.r._json("GET", self.r._url("/shares"), auth=True)))  # noqa: SLF001 - the sharing routes go through the sync's own Remote

    def answer(self, contract_id: bytes, action: str) -> shares.ShareAnswer:
        got = shares.ShareAnswer.parse(self.s._call(  # noqa: SLF001 - the sharing routes go through the sync's own Remote
            lambda: self.r._json("POST", self.r._url(f"/shares/{contract_id.hex()}/{action}"), auth=True)))  # noqa: SLF001 - the sharing routes go through the sync's own Remote
        if got.contract_id != contract_id:
            raise WireError("the server answered for another contract")
        return got

    def revoke(self, contract_id: bytes, receipt: bytes) -> shares.RevokeResult:
        return shares.RevokeResult.parse(self.s._call(  # noqa: SLF001 - the sharing routes go through the sync's own Remote
            lambda: self.r._json("POST", self.r._url(f"/shares/{contract_id.hex()}/revoke"),  # noqa: SLF001 - the sharing routes go through the sync's own Remote
                                 shares.RevokeRequest(receipt), auth=True)))

    def shared(self, after: bytes = b"") -> shares.SharedPage:
        q = f"?after={after.hex()}" if after else ""
        return shares.SharedPage.parse(self.s._call(lambda: self.r._req("GET", self.r._url(f"/shared{q}"), auth=True)))  # noqa: SLF001 - the sharing routes go through the sync's own Remote


def publish_holder(syncer: Syncer) -> VerifiedHolder:
    """Make this vault findable as a grantee: its holder's proof over its registration in the
    server's directory (a vault registered before the directory has none there)."""
    v, r = syncer.v, syncer.remote
    me = v.holder()
    rec = ShareRemote(syncer).holder(me.holder_id)
    if rec is None:
        pub = v.store.identity()
        assert pub is not None
        msg = signed.register_message(r.name, pub.salt, v.identity.sign_pub, v.sync_key().public, v.identity.ka_pub,
                                    me.public)
        proof = run_sync(v.crypto.mldsa65_sign(me.xi, msg, signed.REGISTER_HOLDER_CONTEXT))
        rec = ShareRemote(syncer).publish(proof)
    got = verify_holder_record(v.crypto, rec, me.holder_id)
    if got.ka_pub != v.identity.ka_pub or got.owner_pub != v.identity.sign_pub:
        raise ShareRefused("the server's directory shows other keys for this vault's holder")
    return got


def lookup_holder(syncer: Syncer, holder_id: bytes) -> VerifiedHolder:
    rec = ShareRemote(syncer).holder(holder_id)
    if rec is None:
        raise ShareRefused(f"no ownmem vault of holder {holder_id.hex()} is registered on this server",
                           B.INVALID_GRANTEE)
    return verify_holder_record(syncer.v.crypto, rec, holder_id)


# ---------------------------------------------------------------- the sharer

@dataclass(frozen=True, slots=True)
class ShareCreated:
    contract_id: bytes
    receipt_id: bytes
    mode: str
    expires_at: int
    grantee_ids: tuple[bytes, ...]
    cell_ids: tuple[bytes, ...]


def parse_holder_id(text: str) -> bytes:
    """A holderId as a person types it: 64 hex digits (an optional 0x), never decoded to another identity."""
    t = text.strip().lower().removeprefix("0x")
    if len(t) != 64 or any(ch not in "0123456789abcdef" for ch in t):
        raise ShareRefused(f"a holderId is 64 hex digits, not {text!r}")
    return bytes.fromhex(t)


def mode_and_expiry(mode: str, expires: int | None, at: int) -> tuple[str, int]:
    """The contract's mode (either spelling) and expiresAt: TEMPORARY defaults to 24 h (the
    spec lets the operator choose within the bound), PERMANENT and SYNDICATE to 0."""
    m = mode.upper() if mode.upper() in MODES.values() else MODES.get(mode.lower())
    if m is None:
        raise ContractRefused(B.INVALID_MODE, "mode is temporary, permanent or syndicate")
    if expires is None:
        return m, at + TEMPORARY_DEFAULT if m == "TEMPORARY" else 0
    return m, expires


def share(syncer: Syncer, memories: Sequence[str], grantees: Sequence[bytes], mode: str, *, scope: str = "read",
          expires: int | None = None, now: int | None = None) -> ShareCreated:
    """Share ``memories`` (ids or unique prefixes) with ``grantees`` (holderIds)."""
    v = syncer.v
    if not memories:
        raise ShareRefused("name at least one memory to share", B.SHARD_NOT_FOUND)
    listing = v.open_all(allow_unverified=True)
    oids: list[bytes] = []
    for ident in memories:
        e = v.resolve(ident, listing)
        if e.id not in oids:
            oids.append(e.id)
    return share_objects(syncer, oids, grantees, mode, scope=scope, expires=expires, now=now)


def share_cells(syncer: Syncer, cell_ids: Sequence[bytes], grantees: Sequence[bytes], mode: str, *,
                scope: str = "read", expires: int | None = None, now: int | None = None) -> ShareCreated:
    """Share the memories of ``cell_ids`` (SAIHM shardIds; what saihm_share names)."""
    store = syncer.v.store
    oids: list[bytes] = []
    for cid in cell_ids:
        oid = store.object_of_cell(cid)
        if oid is None or store.get_object(oid) is None:
            raise ShareRefused(f"no cell {cid.hex()} of this holder", B.SHARD_NOT_FOUND)
        if oid not in oids:
            oids.append(oid)
    if not oids:
        raise ShareRefused("name at least one cell to share", B.SHARD_NOT_FOUND)
    return share_objects(syncer, oids, grantees, mode, scope=scope, expires=expires, now=now)


def share_objects(syncer: Syncer, object_ids: Sequence[bytes], grantees: Sequence[bytes], mode: str, *,
                  scope: str = "read", expires: int | None = None, now: int | None = None) -> ShareCreated:
    v, p = syncer.v, syncer.v.crypto
    at = int(time.time()) if now is None else now
    m, expires_at = mode_and_expiry(mode, expires, at)
    if not grantees:
        raise ContractRefused(B.INVALID_GRANTEE, "name at least one grantee")
    if len(set(grantees)) != len(grantees):
        raise ContractRefused(B.INVALID_GRANTEE, "a grantee is listed twice")
    if len(grantees) * len(object_ids) > shares.MAX_SHARE_KEYS:
        # one re-wrapped key per grantee and cell: the server takes at most this many per offer,
        # so say so before opening, pushing or asking the directory anything
        raise ShareRefused(f"one offer carries at most {shares.MAX_SHARE_KEYS} keys (grantees x memories), not "
                           f"{len(grantees) * len(object_ids)}: share fewer memories at once", B.INVALID_PARAMS)
    me = v.holder()
    if me.holder_id in grantees:
        raise ContractRefused(B.INVALID_GRANTEE, "you cannot share with yourself")
    # the rules before any work or request: a contract that breaks one is never made
    contract_rules(list(grantees), [b"\x00" * 32], m, scope, expires_at, at)
    scopes_by_id = {s.scope_id: s for s in v.scopes().values()}
    keyring = v.keyring()
    rows = []
    for oid in object_ids:
        row = v.store.get_object(oid)
        if row is None:
            raise ShareRefused(f"no memory {oid.hex()} in this vault", B.SHARD_NOT_FOUND)
        if v.open_stored(row, scopes_by_id, keyring, allow_unverified=True).opened.trust is not Trust.SELF:
            # the grantee verifies every shared object against the sharer's owner key
            raise ShareRefused(f"memory {oid.hex()} was not written by you (an agent's or another author's): "
                               "only your own memories can be shared", B.SHARD_NOT_FOUND)
        rows.append(row)
    # the memories must be on the server as cells: push what is not
    if any(v.store.cell_of(r.object_id) is None for r in rows) or v.store.unpushed_count():
        syncer.push(SyncReport())
    cells: list[bytes] = []
    for r in rows:
        have = v.store.cell_of(r.object_id)
        if have is None:
            raise ShareRefused(f"memory {r.object_id.hex()} is not on the server yet: run `ownmem sync`",
                               B.SHARD_NOT_FOUND)
        cells.append(have[0])
    holders = [lookup_holder(syncer, g) for g in grantees]
    contract = run_sync(make_contract(p, xi=me.xi, holder_id=me.holder_id, grantee_ids=list(grantees),
                                      shard_ids=cells, mode=m, scope=scope, expires_at=expires_at, timestamp=at))
    items: list[bytes] = []
    for r, cid in zip(rows, cells, strict=False):
        dek = run_sync(aperto_keys.unwrap_dek(p, r.dek_wrapped, v.kek(scopes_by_id[r.scope_id])))
        for h in holders:
            key = run_sync(wrap_share_dek(p, dek, h.ka_pub, contract.contract_id, cid))
            items.append(shares.ShareItem(h.holder_id, cid, key).encode())
    receipt = run_sync(make_receipt(p, xi=me.xi, holder_id=me.holder_id, operation="SHARE",
                                    subject_id=contract.contract_id, timestamp=at))
    got = ShareRemote(syncer).offer(shares.ShareOffer(contract.to_cbor(), receipt.to_cbor(), tuple(items)))
    if got.contract_id != contract.contract_id or got.receipt_id != receipt.receipt_id:
        raise WireError("the server confirmed another contract or receipt than the one offered")
    return ShareCreated(contract.contract_id, receipt.receipt_id, m, expires_at, tuple(grantees), tuple(cells))


@dataclass(frozen=True, slots=True)
class Revocation:
    revoked: bool
    receipt_id: bytes
    already: bool


def revoke(syncer: Syncer, contract_id: bytes, *, now: int | None = None) -> Revocation:
    v = syncer.v
    me = v.holder()
    at = int(time.time()) if now is None else now
    r = run_sync(make_receipt(v.crypto, xi=me.xi, holder_id=me.holder_id, operation="REVOKE", subject_id=contract_id,
                              timestamp=at))
    got = ShareRemote(syncer).revoke(contract_id, r.to_cbor())
    if not got.revoked:
        raise ShareRefused("the server did not confirm the revocation: treat access as still in force")
    if not got.already and got.receipt_id != r.receipt_id:
        # as share_objects checks its SHARE receipt: a first revocation names the receipt sent,
        # or the server did not log it (the log is how anyone else learns of the revocation)
        raise WireError("the server confirmed the revocation with another REVOKE receipt than the one sent")
    return Revocation(got.revoked, got.receipt_id, got.already)


# ---------------------------------------------------------------- both sides: the contracts

@dataclass(frozen=True, slots=True)
class ShareView:
    """One grantee's view of a verified contract."""

    contract: Contract
    grantee: bytes
    state: str
    revoked: bool
    expired: bool

    @property
    def contract_id(self) -> bytes:
        return self.contract.contract_id

    @property
    def active(self) -> bool:
        return self.state == "accepted" and not self.revoked and not self.expired


@dataclass(frozen=True, slots=True)
class Offers:
    offered: tuple[ShareView, ...]          # by me
    received: tuple[ShareView, ...]         # to me
    refused: tuple[str, ...]                # entries that did not verify, one sentence each
    sharers: dict[bytes, VerifiedHolder]    # holderId -> verified record, of every received contract
    more: bool = False                      # the server left some out (its byte budget): not all are here


def offers(syncer: Syncer, known: dict[bytes, VerifiedHolder] | None = None) -> Offers:
    """Contracts by and to this vault's holder, each verified.  ``known``: directory records
    verified before (a holder's registration never changes), kept across calls by a reader."""
    v, p = syncer.v, syncer.v.crypto
    me = v.holder()
    got = ShareRemote(syncer).listing()
    refused: list[str] = []
    mine: list[ShareView] = []
    for e in got.offered:
        try:
            c = parse_contract(e.contract)
            run_sync(verify_contract(p, c, me.public))
            if e.grantee not in c.grantee_ids:
                raise ShareRefused("the server lists a grantee the contract does not name")
        except (ContractRefused, ShareRefused) as err:
            refused.append(f"an offered contract from the server is not one you signed ({err}): ignored")
            continue
        mine.append(ShareView(c, e.grantee, e.state, e.revoked, e.expired))
    theirs: list[ShareView] = []
    sharers: dict[bytes, VerifiedHolder] = {}
    for e in got.received:
        try:
            c = parse_contract(e.contract)
            if e.grantee != me.holder_id or me.holder_id not in c.grantee_ids:
                raise ShareRefused("the contract does not name you")
            h = sharers.get(c.holder_id) or (known or {}).get(c.holder_id)
            if h is None:
                h = lookup_holder(syncer, c.holder_id)
                if known is not None:
                    known[c.holder_id] = h
            sharers[c.holder_id] = h
            run_sync(verify_contract(p, c, h.holder_pub))
        except (ContractRefused, ShareRefused) as err:
            refused.append(f"a contract offered to you is not what it claims ({err}): ignored")
            continue
        theirs.append(ShareView(c, e.grantee, e.state, e.revoked, e.expired))
    return Offers(tuple(mine), tuple(theirs), tuple(refused), sharers, got.more)


def _received_offer(syncer: Syncer, contract_id: bytes) -> ShareView:
    got = offers(syncer)
    for s in got.received:
        if s.contract_id == contract_id:
            return s
    raise ShareRefused(f"no verified contract {contract_id.hex()} is offered to you")


def accept(syncer: Syncer, contract_id: bytes) -> str:
    """Accept a contract offered to you, once it verifies against its holder's published key."""
    _received_offer(syncer, contract_id)
    return ShareRemote(syncer).answer(contract_id, "accept").state


def decline(syncer: Syncer, contract_id: bytes) -> str:
    return ShareRemote(syncer).answer(contract_id, "decline").state


def withdraw(syncer: Syncer, contract_id: bytes) -> str:
    return ShareRemote(syncer).answer(contract_id, "withdraw").state


# ---------------------------------------------------------------- the grantee: what was shared

@dataclass(frozen=True, slots=True)
class SharedMemory:
    """A memory another holder shared with you: opened and verified, never yours."""

    cell_id: bytes
    object_id: bytes
    content: str
    tags: tuple[str, ...]
    mem_type: int
    created: int | None
    owner_holder_id: bytes
    owner_name: str
    contract_id: bytes
    cell: Cell                       # the sharer's cell, checked (tier, kekVersion, timestamp, signature)
    authorship: str = "shared"


@dataclass(frozen=True, slots=True)
class Received:
    memories: tuple[SharedMemory, ...]
    refused: tuple[tuple[bytes, str], ...]      # (cellId, why): never shown as a memory


def received(syncer: Syncer, *, now: int | None = None) -> Received:
    """What is shared with this vault's holder now: every cell of an active contract, checked
    and opened (see the module's docstring); what fails is in ``refused``, never shown."""
    return SharedReader(syncer).read(now=now)


class SharedReader:
    """Reads what is shared with this vault's holder, again and again (the agent service's
    recall).  Each read asks the server anew, so a revocation, withdrawal, expiry or erasure
    governs the very next read; only what verified before is not verified again: directory
    records, and cells that come back byte for byte with the same key under the same contract."""

    def __init__(self, syncer: Syncer) -> None:
        self.syncer = syncer
        self._holders: dict[bytes, VerifiedHolder] = {}
        self._opened: dict[bytes, SharedMemory] = {}

    def read(self, *, now: int | None = None) -> Received:
        at = int(time.time()) if now is None else now
        got = offers(self.syncer, self._holders)
        active = {s.contract_id: s for s in got.received if s.active and s.contract.active_at(at)}
        if not active:
            # no contract is active for this holder: nothing the server serves could be shown,
            # so it is not asked (one request less on every recall of a vault nothing is shared with)
            self._opened = {}
            return Received((), ())
        remote = ShareRemote(self.syncer)
        out: list[SharedMemory] = []
        refused: list[tuple[bytes, str]] = []
        opened: dict[bytes, SharedMemory] = {}
        after = b""
        while True:
            page = remote.shared(after)
            for row in page.rows:
                key = sha256(row.contract_id + row.cell_id + row.key + row.cell)
                hit = self._opened.get(key)
                if hit is not None and row.contract_id in active:
                    out.append(hit)
                    opened[key] = hit
                    continue
                why = _open_shared(self.syncer, row, active, got.sharers, out)
                if why is not None:
                    refused.append((row.cell_id, why))
                else:
                    opened[key] = out[-1]
            if not page.more or not page.rows:
                break
            after = page.rows[-1].contract_id + page.rows[-1].cell_id
        self._opened = opened      # what is no longer served is forgotten here too
        return Received(tuple(out), tuple(refused))


def _open_shared(syncer: Syncer, row: shares.SharedCell, active: dict[bytes, ShareView],
                 sharers: dict[bytes, VerifiedHolder], out: list[SharedMemory]) -> str | None:
    """Check, unwrap and open one shared cell into ``out`` -> None, or why it is refused."""
    p, ident = syncer.v.crypto, syncer.v.identity
    view = active.get(row.contract_id)
    if view is None:
        return "no active contract you accepted covers it"
    c = view.contract
    if row.cell_id not in c.shard_ids:
        return "the contract does not cover this cell"
    sharer = sharers[c.holder_id]
    try:
        checked = run_sync(check_cell(row.cell, sharer.holder_id,
                                      verify_signature=functools.partial(p.mldsa65_verify, sharer.holder_pub)))
    except CellRefused as e:
        return f"the cell is not the sharer's ({e.code})"
    if checked.cell.cell_id != row.cell_id:
        return "the server sent another cell than the one named"
    try:
        dek = run_sync(unwrap_share_dek(p, row.key, ident, c.contract_id, row.cell_id))
        o = run_sync(open_sealed(p, checked.sealed, dek, Keyring(sharer.owner_pub, {})))
    except OwnmemError:
        return "its key or contents do not authenticate"
    if not o.signature_verified or o.trust is not Trust.SELF:
        return "it is not signed by the sharer's owner key"
    out.append(SharedMemory(row.cell_id, o.object_id, o.content, o.tags, o.mem_type, o.created, sharer.holder_id,
                            sharer.name, c.contract_id, checked.cell))
    return None
