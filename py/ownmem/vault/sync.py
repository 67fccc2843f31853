"""The sync client: one vault, many devices, a server that sees only ciphertext
(DESIGN.md "Sync").

    login (new device):  GET salt + public keys by vault name -> derive keys from the
                         passphrase -> owner key must match -> prove the sync key on a
                         server challenge -> verify the owner-signed metadata -> create
                         the local vault -> pull
    login (this device): register the vault under a name (keys, owner-signed
                         metadata, the holder's KEY receipt)
    sync:                metadata (compare-and-swap) -> push new cells -> push erasures
                         (FORGET receipts) -> pull the change feed from the last position

Every step is idempotent and each page of the feed is committed with its position,
so a sync that dies anywhere resumes where it stopped and stores nothing twice.
"""
from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

try:
    import httpx
except ImportError:  # pragma: no cover - under Pyodide, where ownmem.web.remote speaks fetch instead
    httpx = None  # type: ignore[assignment]

from .. import syncwire as W
from ..aperto import keys as K
from ..aperto.container import ScopeEntry, VaultPublic, parse_vault_public, sign_metadata
from ..crypto import CryptoProvider, cbor, run_sync
from ..errors import MalformedInput, OwnmemError, SyncError, VaultError, WrongPassphrase
from ..saihm.cell import CellRefused, check_cell, make_cell
from ..saihm.receipt import make_receipt
from .store import PublicIdentity, Store, StoredObject
from .vault import SYNC_INFO, UnlockedVault, Vault

T = TypeVar("T")

TIER = "STANDARD"
KEK_VERSION = 1
PUSH_BATCH = 1000
# Requests are bounded by size as well as count: a sealed object may be up to 1 MiB, so 1000
# cells can be far over the server's 32 MiB body limit, and 2000 hex FORGET receipts (~7 KB
# each) far over its 1 MiB JSON limit; a 413 there used to stop every later sync of the vault.
PUSH_BYTES = W.MAX_BODY // 2
ERASE_BYTES = 1 << 19
PULL_PAGE = 5000
TIMEOUT = 30.0


# ---------------------------------------------------------------- the metadata document

@dataclass(frozen=True, slots=True)
class Metadata:
    """The owner-signed, versioned vault metadata the server stores (public, not secret)."""

    vault_public: VaultPublic
    revoked: frozenset[bytes]
    sync_pub: bytes
    holder_pub: bytes
    amem_sig: bytes

    def encode(self) -> bytes:
        return cbor.encode({"vault_public": self.vault_public.to_cbor(), "revoked": sorted(self.revoked),
                            "sync_pub": self.sync_pub, "holder_pub": self.holder_pub, "amem_sig": self.amem_sig})


def parse_metadata(data: bytes) -> Metadata:
    try:
        m = cbor.decode(data)
        revoked = m["revoked"]
        if not isinstance(revoked, list) or not all(isinstance(k, bytes) and len(k) == 8 for k in revoked):
            raise MalformedInput("bad revoked list")
        return Metadata(parse_vault_public(m["vault_public"]), frozenset(revoked), m["sync_pub"], m["holder_pub"],
                        m["amem_sig"])
    except (KeyError, TypeError):
        raise MalformedInput("malformed vault metadata") from None


def merge_metadata(local: VaultPublic, local_revoked: set[bytes], remote: Metadata,
                   base_revoked: frozenset[bytes] | set[bytes] = frozenset(),
                   ) -> tuple[dict[str, ScopeEntry], dict[bytes, bytes], set[bytes], list[str]]:
    """Pure merge: scopes are added by name and never overwritten; keys are the union of both
    keyrings less every revocation either side made (revocation wins: it is the safe side).
    The revocation list is merged three-way against ``base_revoked``, the list this device
    last agreed with the server: a revocation that either side lifted since then (the key
    was explicitly trusted again) stays lifted; every new revocation is kept.
    One name given to two different scopes (created on two devices while apart) is settled
    the same way on every device, so sync converges and every memory stays readable: the
    lower scope id keeps the name, the other becomes ``name~<first 8 hex digits of its id>``.
    -> (scopes, known keys, revoked, conflicts)."""
    scopes = dict(local.scopes)
    conflicts = []
    have = {s.scope_id for s in scopes.values()}
    for name, s in remote.vault_public.scopes.items():
        if s.scope_id in have:          # known here, perhaps already under its settled name
            continue
        if name not in scopes:
            scopes[name] = s
        elif scopes[name].scope_id != s.scope_id:
            conflicts.append(name)
            keep, other = sorted((scopes[name], s), key=lambda x: x.scope_id)
            renamed = f"{name}~{other.scope_id.hex()[:8]}"
            scopes[name] = keep
            scopes[renamed] = replace(other, name=renamed)
    revoked = {k for k in set(local_revoked) | set(remote.revoked)
               if k not in base_revoked or (k in local_revoked and k in remote.revoked)}
    keys = {k: v for k, v in {**remote.vault_public.known_keys, **local.known_keys}.items() if k not in revoked}
    return scopes, keys, revoked, conflicts


# ---------------------------------------------------------------- the server, over HTTP

def check_status(status: int, body: bytes, reason: str) -> None:
    """A 4xx/5xx answer as one SyncError carrying the server's stable error code."""
    if status < 400:
        return
    try:
        b = json.loads(body)
        code, msg = b.get("error"), b.get("message")
    except (ValueError, AttributeError):
        code, msg = None, reason
    raise SyncError(f"server refused: {msg or status}", code, status)


class Remote:
    def __init__(self, base_url: str, name: str, *, client: httpx.Client | None = None) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise SyncError("the server URL must start with http:// or https://")
        if not W.valid_vault_name(name):
            raise SyncError("vault names are 1-64 of a-z 0-9 . _ - and start with a letter or digit")
        self.base = base_url.rstrip("/")
        self.name = name
        self.http = client if client is not None else (
            httpx.Client(timeout=TIMEOUT, follow_redirects=False) if httpx is not None else None)
        self.token: str | None = None

    def _url(self, path: str) -> str:
        return f"{self.base}/v1/vaults/{self.name}{path}"

    def _req(self, method: str, url: str, *, auth: bool = False, **kw: Any) -> httpx.Response:
        headers = kw.pop("headers", {})
        if auth:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            r = self.http.request(method, url, headers=headers, **kw)
        except httpx.HTTPError as e:
            raise SyncError(f"cannot reach the server at {self.base} ({type(e).__name__})") from None
        check_status(r.status_code, r.content, r.reason_phrase)
        return r

    def lookup(self) -> dict[str, Any] | None:
        try:
            return self._req("GET", self._url("")).json()  # type: ignore[no-any-return]
        except SyncError as e:
            if e.status == 404:
                return None
            raise

    def register(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._req("POST", f"{self.base}/v1/vaults", json=body).json()  # type: ignore[no-any-return]

    def login(self, sync_key: K.SigningKey) -> None:
        from ..crypto import provider

        c = bytes.fromhex(self._req("POST", self._url("/challenge")).json()["challenge"])
        sig = run_sync(provider().ed25519_sign(sync_key.seed, W.auth_message(self.name, c)))
        self.token = self._req("POST", self._url("/session"),
                               json={"challenge": c.hex(), "signature": sig.hex()}).json()["token"]

    def get_metadata(self) -> tuple[int, bytes, bytes]:
        b = self._req("GET", self._url("/metadata"), auth=True).json()
        return int(b["version"]), bytes.fromhex(b["metadata"]), bytes.fromhex(b["signature"])

    def put_metadata(self, expected: int, meta: bytes, sig: bytes) -> int:
        b = self._req("PUT", self._url("/metadata"), auth=True,
                      json={"expected_version": expected, "metadata": meta.hex(), "signature": sig.hex()}).json()
        return int(b["version"])

    def push(self, items: list[list[bytes]]) -> dict[str, Any]:
        return self._req("POST", self._url("/cells"), auth=True, content=cbor.encode(items),  # type: ignore[no-any-return]
                         headers={"Content-Type": "application/cbor"}).json()

    def changes(self, since: int, limit: int = PULL_PAGE) -> dict[int, Any]:
        r = self._req("GET", self._url(f"/changes?since={since}&limit={limit}"), auth=True)
        return cbor.decode(r.content)  # type: ignore[no-any-return]

    def erase(self, receipts: list[bytes]) -> dict[str, Any]:
        return self._req("POST", self._url("/erase"), auth=True,  # type: ignore[no-any-return]
                         json={"receipts": [r.hex() for r in receipts]}).json()

    def events(self) -> Iterator[int]:
        """Yields the server's last sequence number whenever it changes (server-sent events)."""
        try:
            with self.http.stream("GET", self._url("/events"), headers={"Authorization": f"Bearer {self.token}"},
                                  timeout=httpx.Timeout(TIMEOUT, read=60.0)) as r:
                if r.status_code >= 400:
                    raise SyncError("the server refused the event stream", None, r.status_code)
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        yield int(json.loads(line[6:])["last_seq"])
        except httpx.HTTPError as e:
            raise SyncError(f"lost the event stream ({type(e).__name__})") from None


# ---------------------------------------------------------------- the client

def _runs(items: list[T], size: Callable[[T], int], budget: int, cap: int = W.MAX_BATCH) -> Iterator[list[T]]:
    """Consecutive runs of ``items``, each at most ``cap`` items and ``budget`` bytes by ``size``
    (an item over the budget alone still goes, as a run of one)."""
    run: list[T] = []
    used = 0
    for it in items:
        n = size(it)
        if run and (len(run) >= cap or used + n > budget):
            yield run
            run, used = [], 0
        run.append(it)
        used += n
    if run:
        yield run


@dataclass
class SyncReport:
    pushed: int = 0
    pulled: int = 0
    erased_remote: int = 0
    erased_here: int = 0
    metadata_version: int = 0
    scope_conflicts: list[str] = field(default_factory=list)
    # what the server sent that this device did not apply, one sentence each, for the person
    # (an erasure the owner did not sign, a cell that is not what it claims): never silent
    refusals: list[str] = field(default_factory=list)


class Syncer:
    def __init__(self, v: UnlockedVault, remote: Remote) -> None:
        self.v, self.remote = v, remote
        self.store: Store = v.store

    # ----------------------------------------------------------- state
    @staticmethod
    def linked(store: Store) -> tuple[str, str] | None:
        url, name = store.sync_get("server"), store.sync_get("name")
        return (url.decode(), name.decode()) if url and name else None

    def _seq(self) -> int:
        raw = self.store.sync_get("pull_seq")
        return int(raw.decode()) if raw else 0

    def ensure_login(self) -> None:
        if self.remote.token is None:
            self.remote.login(self.v.sync_key())

    def _call(self, fn: Callable[[], Any]) -> Any:
        """One retry after re-authenticating: credentials are short-lived."""
        self.ensure_login()
        try:
            return fn()
        except SyncError as e:
            if e.status != 401:
                raise
            self.remote.token = None
            self.ensure_login()
            return fn()

    # ----------------------------------------------------------- metadata
    def metadata_doc(self) -> Metadata:
        pub = self.v.public()
        return Metadata(pub, frozenset(self.store.revoked_keys()), self.v.sync_key().public, self.v.holder().public,
                        run_sync(sign_metadata(self.v.p, self.v.identity, pub)))

    def _signed(self, version: int, doc: bytes) -> bytes:
        return run_sync(self.v.p.ed25519_sign(self.v.identity.sign.seed,
                                              W.metadata_message(self.remote.name, version, doc)))

    def _revoked_base(self) -> frozenset[bytes]:
        """The revocation list this device and the server last agreed on (empty if never)."""
        raw = self.store.sync_get("revoked_base")
        return frozenset(cbor.decode(raw)) if raw else frozenset()

    def _set_revoked_base(self, revoked: frozenset[bytes]) -> None:
        with self.store.transaction():
            self.store.sync_set("revoked_base", cbor.encode(sorted(revoked)))

    def sync_metadata(self, report: SyncReport) -> None:
        for _ in range(8):  # compare-and-swap: retry on a concurrent update
            version, doc, sig = self._call(self.remote.get_metadata)
            if not run_sync(self.v.p.ed25519_verify(self.v.identity.sign_pub, sig,
                                                    W.metadata_message(self.remote.name, version, doc))):
                raise SyncError("the server's vault metadata is not signed by this vault's owner key")
            remote = parse_metadata(doc)
            scopes, keys, revoked, conflicts = merge_metadata(self.v.public(), self.store.revoked_keys(), remote,
                                                              self._revoked_base())
            report.scope_conflicts = sorted(set(report.scope_conflicts) | set(conflicts))
            with self.store.transaction():
                have = {s.scope_id: name for name, s in self.store.scopes().items()}
                for name, s in scopes.items():   # renames first: one may free a name for the scope that keeps it
                    if have.get(s.scope_id, name) != name:
                        self.store.rename_scope(s.scope_id, name)
                for name, s in scopes.items():
                    if s.scope_id not in have:
                        self.store.add_scope(s)
                for kid in set(self.store.known_keys()) - set(keys):
                    self.store.remove_known_key(kid)
                for kid, pub in keys.items():
                    self.store.add_known_key(kid, pub)
                for kid in revoked:
                    self.store.add_revoked(kid)
                for kid in self.store.revoked_keys() - revoked:
                    self.store.unrevoke(kid)
            mine = self.metadata_doc()
            if (set(mine.vault_public.scopes) == set(remote.vault_public.scopes)
                    and dict(mine.vault_public.known_keys) == dict(remote.vault_public.known_keys)
                    and mine.revoked == remote.revoked and mine.amem_sig == remote.amem_sig):
                report.metadata_version = version
                self._set_revoked_base(mine.revoked)
                return
            new = mine.encode()
            try:
                report.metadata_version = self._call(
                    lambda: self.remote.put_metadata(version, new, self._signed(version + 1, new)))
                self._set_revoked_base(mine.revoked)
                return
            except SyncError as e:
                if e.status != 409:
                    raise
        raise SyncError("the vault metadata keeps changing on the server; try again")

    # ----------------------------------------------------------- push
    def _cell_for(self, row: StoredObject, now: int) -> tuple[bytes, bytes]:
        have = self.store.cell_of(row.object_id)
        if have is not None:
            return have
        h = self.v.holder()
        c = run_sync(make_cell(self.v.p, xi=h.xi, holder_id=h.holder_id, kek_version=KEK_VERSION, tier=TIER,
                               cell_nonce=row.object_id, ciphertext=row.sealed, timestamp=now))
        return c.cell_id, c.to_cbor()

    def push(self, report: SyncReport, progress: Callable[[int, int], None] | None = None) -> None:
        total = self.store.unpushed_count()
        while True:
            rows = self.store.unpushed(PUSH_BATCH)
            if not rows:
                break
            now = int(time.time())
            cells = [self._cell_for(r, now) for r in rows]
            with self.store.transaction():   # cells are kept, so a retry re-sends identical bytes
                for r, (cid, cell) in zip(rows, cells):
                    self.store.put_cell(r.object_id, cid, cell, pushed=False)
            items = [[cell, r.dek_wrapped] for r, (_, cell) in zip(rows, cells)]
            for part in _runs(items, lambda it: len(it[0]) + len(it[1]) + 16, PUSH_BYTES):
                self._call(functools.partial(self.remote.push, part))
            with self.store.transaction():
                self.store.mark_pushed(r.object_id for r in rows)
            report.pushed += len(rows)
            if progress is not None:
                progress(report.pushed, total)
        outbox = self.store.erase_outbox()
        for chunk in _runs(outbox, lambda e: 2 * len(e[1]) + 4, ERASE_BYTES):
            res = self._call(functools.partial(self.remote.erase, [r for _, r in chunk]))
            report.erased_remote += len(res["erased"])
            with self.store.transaction():
                self.store.clear_erasures(c for c, _ in chunk)

    # ----------------------------------------------------------- pull
    def pull(self, report: SyncReport, progress: Callable[[int, int], None] | None = None) -> bool:
        """Apply the change feed from the stored position.  -> whether metadata changed."""
        meta_changed = False
        since = self._seq()
        holder_id = self.v.holder().holder_id
        while True:
            page = self._call(lambda: self.remote.changes(since))
            rows, nxt, last = page[1], page[2], page[3]
            present = self.store.object_ids()
            erased = self.store.erased_ids()
            new_objects: list[StoredObject] = []
            new_cells: list[tuple[bytes, bytes, bytes]] = []
            gone: list[bytes] = []
            for seq, kind, cell_id, cell, wrapped in rows:
                if kind == "meta":
                    meta_changed = True
                elif kind == "erase" and isinstance(cell_id, bytes):
                    oid = self.store.object_of_cell(cell_id)
                    if oid is not None:
                        gone.append(oid)
                elif kind == "cell" and isinstance(cell, bytes) and isinstance(wrapped, bytes):
                    try:
                        # the server's checks except the signature, so a lying server cannot
                        # mislabel a cell; the object itself is authenticated when opened
                        checked = run_sync(check_cell(cell, holder_id, verify_signature=None))
                    except CellRefused:
                        continue
                    so = checked.sealed
                    if so.object_id in present or so.object_id in erased:
                        continue
                    present.add(so.object_id)
                    new_objects.append(StoredObject(so.object_id, so.scope_id, so.format_version, so.encoded, wrapped))
                    new_cells.append((so.object_id, checked.cell.cell_id, cell))
            with self.store.transaction():
                self.store.put_objects(new_objects)
                for oid, cid, cell in new_cells:
                    self.store.put_cell(oid, cid, cell, pushed=True)
                if gone:
                    self.store.erase(gone)
                self.store.sync_set("pull_seq", str(nxt).encode())
            if gone:
                self.store.checkpoint()
            report.pulled += len(new_objects)
            report.erased_here += len(gone)
            if progress is not None:
                progress(nxt, last)
            since = nxt
            if not page[4]:
                return meta_changed

    def sync_once(self, progress: Callable[[int, int], None] | None = None) -> SyncReport:
        report = SyncReport()
        self.sync_metadata(report)
        self.push(report)
        if self.pull(report, progress):
            self.sync_metadata(report)
        return report

    def watch(self, on_report: Callable[[SyncReport], None], *, stop: Callable[[], bool] = lambda: False) -> None:
        """Sync, then follow the server's live event stream; local changes are pushed as they appear."""
        on_report(self.sync_once())
        while not stop():
            try:
                self.ensure_login()
                for _ in self.remote.events():
                    on_report(self.sync_once())
                    if stop():
                        return
            except SyncError as e:
                if e.status == 401:
                    self.remote.token = None
                time.sleep(1.0)


# ---------------------------------------------------------------- login

def link(v: UnlockedVault, server: str, name: str, *, client: httpx.Client | None = None,
         remote: Remote | None = None) -> Syncer:
    """Register this device's vault under ``name`` (or re-link it if it is already there)."""
    remote = remote if remote is not None else Remote(server, name, client=client)
    s = Syncer(v, remote)
    info = remote.lookup()
    ident = v.identity
    if info is None:
        h, sync = v.holder(), v.sync_key()
        pub = v.store.identity()
        assert pub is not None
        doc = s.metadata_doc().encode()
        key_receipt = run_sync(make_receipt(v.p, xi=h.xi, holder_id=h.holder_id, operation="KEY",
                                            subject_id=h.holder_id, timestamp=int(time.time()), detail=h.public))
        reg = W.register_message(name, pub.salt, ident.sign_pub, sync.public, ident.ka_pub, h.public)
        proof = run_sync(v.p.ed25519_sign(sync.seed, reg))
        holder_proof = run_sync(v.p.mldsa65_sign(h.xi, reg, W.REGISTER_HOLDER_CONTEXT))
        remote.register({"name": name, "salt": pub.salt.hex(), "owner_pub": ident.sign_pub.hex(),
                         "sync_pub": sync.public.hex(), "ka_pub": ident.ka_pub.hex(), "holder_pub": h.public.hex(),
                         "metadata": doc.hex(), "metadata_sig": s._signed(1, doc).hex(),
                         "key_receipt": key_receipt.to_cbor().hex(), "proof": proof.hex(),
                         "holder_proof": holder_proof.hex()})
    elif bytes.fromhex(info["owner_pub"]) != ident.sign_pub:
        raise SyncError(f"the vault name {name!r} is taken on this server by another identity")
    with v.store.transaction():
        v.store.sync_set("server", remote.base.encode())
        v.store.sync_set("name", name.encode())
    return s


def login_new_device(folder: str | Path, server: str, name: str, passphrase: str, *,
                     client: httpx.Client | None = None) -> Syncer:
    """A device with no local vault: derive the keys from the passphrase and the server's
    salt, prove them, check the owner-signed metadata, create the local vault."""
    vault = Vault(folder)
    if vault.exists():
        raise VaultError(f"a vault already exists at {vault.folder}")
    return adopt_from_server(lambda: Store(vault.folder), Remote(server, name, client=client), passphrase, vault.p)


def adopt_from_server(open_store: Callable[[], Store] | Store, remote: Remote, passphrase: str, p: CryptoProvider,
                      *, master: bytes | None = None) -> Syncer:
    """The new-device flow over any store; the store is touched only once the keys are proven."""
    name = remote.name
    info = remote.lookup()
    if info is None:
        raise SyncError(f"no vault named {name!r} on {remote.base}")
    salt, owner_pub = bytes.fromhex(info["salt"]), bytes.fromhex(info["owner_pub"])
    if master is None:
        master = run_sync(K.master_from_passphrase(p, passphrase, salt))
    ident = run_sync(K.identity_from_master(p, master))
    if ident.sign_pub != owner_pub or ident.ka_pub != bytes.fromhex(info["ka_pub"]):
        raise WrongPassphrase("wrong passphrase for this vault (or the server serves another vault's keys)")
    # prove the sync key and read the metadata before creating anything locally
    sync_seed = run_sync(K.derive_purpose_key(p, master, SYNC_INFO))
    remote.login(run_sync(K.signing_key(p, sync_seed)))
    version, doc, sig = remote.get_metadata()
    if not run_sync(p.ed25519_verify(ident.sign_pub, sig, W.metadata_message(name, version, doc))):
        raise SyncError("the server's vault metadata is not signed by this vault's owner key")
    meta = parse_metadata(doc)
    store = open_store() if callable(open_store) else open_store
    with store.transaction():
        store.set_identity(PublicIdentity(salt, ident.sign_pub, ident.ka_pub))
        for s in meta.vault_public.scopes.values():
            store.add_scope(s)
        for kid, pub in meta.vault_public.known_keys.items():
            store.add_known_key(kid, pub)
        for kid in meta.revoked:
            store.add_revoked(kid)
        store.sync_set("revoked_base", cbor.encode(sorted(meta.revoked)))
        store.sync_set("server", remote.base.encode())
        store.sync_set("name", name.encode())
    return Syncer(UnlockedVault(store, ident, p), remote)


def syncer_for(v: UnlockedVault, *, client: httpx.Client | None = None) -> Syncer:
    linked = Syncer.linked(v.store)
    if linked is None:
        raise VaultError("this vault is not linked to a server (run `ownmem login --server URL --vault-name NAME`)")
    return Syncer(v, Remote(linked[0], linked[1], client=client))
