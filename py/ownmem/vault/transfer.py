"""Export to and import from `.amem` (draft-02 §8.2 "Import", §10 "Portable Export Container"), the ONE import path.

Import, in an order such that nothing is written until every check has passed:

 1. Parse the container; a file that cannot be read at all is one clean error.
 2. Proof of holdership: derive the identity from the passphrase and the container's
    salt; it must equal the container's sign_pub and ka_pub.
 3. Metadata authenticity (ownmem, beyond the reference): a signed container's
    metadata must verify under that derived key, or the import is refused whole.  An
    unsigned one (the reference writes no signature) cannot plant anything: its
    accepted keys are held back unless the caller opts in, and a scope new to this
    vault is adopted only once an object in it opens as the owner's own through its KEK.
 4. Identity separation: a vault with another identity refuses; an empty one adopts
    the container's identity (the new-device flow).
 5. Merge without overwrite: existing scope names and objects are kept.
 6. Per object: well-formed, known scope, DEK present and unwrapping, and it opens
    under the ordinary fail-closed rules (full verification; import never assigns
    trust).  One bad object is reported and skipped; the rest go on.
 7. One transaction writes everything.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ownmem.aperto import keys as aperto_keys
from ownmem.aperto.container import (
    Container,
    ScopeEntry,
    build_container,
    metadata_signature_valid,
    parse_container,
    sign_metadata,
)
from ownmem.aperto.model import FORMAT_VERSION, LEGACY_VERSION, Trust
from ownmem.aperto.seal import open_sealed, parse_sealed
from ownmem.aperto.trust import Keyring
from ownmem.crypto import CryptoProvider, cbor, cose, provider, run_sync
from ownmem.errors import AuthenticationFailed, ImportRefused, MalformedInput, OwnmemError, VaultError, WrongPassphrase
from ownmem.vault import rekey
from ownmem.vault.store import PublicIdentity, Store, StoredObject
from ownmem.vault.unlock import Vault
from ownmem.vault.vault import DEFAULT_SCOPE, Progress, UnlockedVault

MAX_FILE = 1 << 30


@dataclass
class ImportReport:
    imported: int = 0
    imported_ids: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)    # (id hex, why)
    refused: list[tuple[str, str]] = field(default_factory=list)    # (id hex or '#index', why)
    scopes_added: list[str] = field(default_factory=list)
    scopes_refused: list[tuple[str, str]] = field(default_factory=list)
    keys_added: list[str] = field(default_factory=list)
    keys_held_back: list[str] = field(default_factory=list)
    # authentic under a key of the file that this vault does not accept (yet): kept sealed,
    # listed as unverified until `trust add` of that key makes them trusted (no re-import)
    kept_unverified: list[tuple[str, str]] = field(default_factory=list)    # (id hex, author key id hex)
    identity_adopted: bool = False
    metadata_signed: bool = False
    # the file's identity was adopted but not its "default" scope: a fresh one (a new key)
    # was made so the vault can take new memories
    default_scope_created: bool = False


def export_bytes(v: UnlockedVault, *, progress: Progress | None = None) -> tuple[bytes, int]:
    """The vault as `.amem` bytes (deterministic) and the number of objects in it."""
    meta = v.public()
    rows = v.store.objects()
    if progress is not None:
        progress(0, len(rows))
    sig = run_sync(sign_metadata(v.crypto, v.identity, meta))
    wrap = v.store.root_wrap()
    # after a passphrase change: what a fresh import needs to be this vault again (its root, so its
    # holder and sync identity; the succession records, so older objects open as self)
    root = None if wrap is None else {"root_wrap": wrap, "successions": [r.encode() for r in v.successions()]}
    return build_container(meta, ((r.object_id, r.sealed, r.dek_wrapped) for r in rows), sig, root), len(rows)


def export_vault(v: UnlockedVault, path: str | Path, *, progress: Progress | None = None) -> int:
    """Write every stored object to ``path`` atomically; returns the number of objects."""
    data, n = export_bytes(v, progress=progress)
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    try:
        # owner-only: an export is an offline passphrase oracle (§15.8 "Offline Verification Oracle")
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as e:
        # a half-written or orphaned copy is still an offline passphrase oracle (§15.8 "Offline Verification Oracle")
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise VaultError(f"cannot write {target}: {e.strerror or e}") from None
    if progress is not None:
        progress(n, n)
    return n


def _read(path: str | Path) -> bytes:
    p = Path(path)
    try:
        if p.stat().st_size > MAX_FILE:
            raise ImportRefused("the .amem file is larger than ownmem accepts (1 GiB)")
        return p.read_bytes()
    except OSError as e:
        raise VaultError(f"cannot read {p}: {e.strerror or e}") from None


def import_file(folder: str | Path, path: str | Path, passphrase: str, *,
                accept_container_keys: bool = False, progress: Progress | None = None,
                crypto: CryptoProvider | None = None) -> tuple[ImportReport, UnlockedVault]:
    """Import ``path`` into the vault at ``folder`` (created if absent or empty)."""
    vault = Vault(folder, crypto=crypto)
    data = _read(path)
    return import_bytes(lambda: Store(vault.folder), data, passphrase, accept_container_keys=accept_container_keys,
                        progress=progress, crypto=vault.crypto)


# ---------------------------------------------------------------- import, step by step
# Each step is a function whose result is a frozen value: what it decided, nothing written.


@dataclass(frozen=True, slots=True)
class _Metadata:
    """Step 3: how far the container's metadata is believed."""

    signed: bool            # owner-signed: its accepted keys and its new scopes are vouched for
    keys_vouched: bool      # its accepted keys may be added (signed, or the caller opted in)


@dataclass(frozen=True, slots=True)
class _Target:
    """Step 4: the vault store to import into, and the identity it already has (None: adopt)."""

    store: Store
    existing: PublicIdentity | None


@dataclass(frozen=True, slots=True)
class _Keys:
    """Step 5, keys: the container's accepted keys to add, those held back (hex), and the
    keyring that step 6 opens objects under."""

    new: Mapping[bytes, bytes]              # key_id -> Ed25519 public key
    held_back: tuple[str, ...]
    keyring: Keyring
    held: Mapping[bytes, bytes] = field(default_factory=dict)   # the held-back keys themselves


@dataclass(frozen=True, slots=True)
class _Scopes:
    """Step 5, scopes: this vault's scopes with their KEKs, and the container's new scopes
    whose KEK unwrapped (once) under this identity."""

    keks: Mapping[bytes, bytes]                               # scope_id -> KEK, this vault's scopes
    candidates: Mapping[bytes, tuple[ScopeEntry, bytes]]      # scope_id -> (entry, KEK), new scopes
    refused: tuple[tuple[str, str], ...]                      # (scope name, why)

    def kek(self, scope_id: bytes) -> bytes | None:
        """The KEK an object of ``scope_id`` opens under, if its scope is usable."""
        kek = self.keks.get(scope_id)
        if kek is None and scope_id in self.candidates:
            kek = self.candidates[scope_id][1]
        return kek


@dataclass(frozen=True, slots=True)
class _Objects:
    """Step 6: the objects that passed, in file order, and what each other one became."""

    staged: Mapping[bytes, StoredObject]    # object id -> object
    proven_scopes: frozenset[bytes]         # new scopes in which an object opened as the owner's own
    skipped: tuple[tuple[str, str], ...]    # (id hex, why)
    refused: tuple[tuple[str, str], ...]    # (id hex or '#index', why)
    unverified: tuple[tuple[str, str], ...] = ()   # (id hex, author key id hex): staged, not accepted


@dataclass(frozen=True, slots=True)
class _Plan:
    """What step 7 writes, built by checks alone, and what the plan left out."""

    identity: PublicIdentity | None
    scopes: tuple[ScopeEntry, ...]
    keys: Mapping[bytes, bytes]
    objects: tuple[StoredObject, ...]
    scopes_refused: tuple[tuple[str, str], ...]     # new scopes nothing vouched for
    refused: tuple[tuple[str, str], ...]            # the objects in those scopes


def import_bytes(open_store: Callable[[], Store], data: bytes, passphrase: str, *,
                 accept_container_keys: bool = False, progress: Progress | None = None,
                 crypto: CryptoProvider | None = None,
                 ident: aperto_keys.Identity | None = None) -> tuple[ImportReport, UnlockedVault]:
    """The one import implementation (every entry point comes here), in the steps of this
    module's docstring.  ``open_store`` is called only once the passphrase is proven, so a
    refused file creates nothing.  ``ident`` lets a caller that already derived the identity
    for this salt skip Argon2id."""
    p = crypto or provider()
    c: Container = parse_container(data)                                    # 1.
    ident = _prove_holdership(p, c, passphrase, ident)                      # 2.
    meta = _check_metadata(p, c, ident, accept_container_keys)              # 3.
    target = _open_target(open_store, c)                                    # 4.
    root = _root(p, c, ident) if target.existing is None else None
    if root is not None:
        ident = root[0]
    unlocked = UnlockedVault(target.store, ident, p)
    keys = _merge_keys(target.store, c, ident, meta)                        # 5. keys and scopes
    scopes = _merge_scopes(unlocked, c)
    objects = _check_objects(p, target.store, c, scopes, keys, progress)          # 6.
    plan = _plan(c, target, meta, keys, scopes, objects)
    _write(target.store, plan)                                              # 7.
    if root is not None:
        with target.store.transaction():
            target.store.replace_identity(PublicIdentity(c.meta.salt, ident.sign_pub, ident.ka_pub), root[1])
            if root[2]:
                target.store.set_successions(cbor.encode([r.encode() for r in root[2]]))
    # An identity adopted without its "default" scope (refused: a swapped KEK, unsigned
    # metadata with nothing to prove it) would leave a vault where `add` fails: a fresh one.
    fresh = target.existing is None and DEFAULT_SCOPE not in target.store.scopes()
    if fresh:
        unlocked.add_scope(DEFAULT_SCOPE)
    kept = {oid.hex() for oid in (o.object_id for o in plan.objects)}
    report = ImportReport(
        imported=len(plan.objects), imported_ids=[o.object_id.hex() for o in plan.objects],
        skipped=list(objects.skipped), refused=[*objects.refused, *plan.refused],
        scopes_added=[s.name for s in plan.scopes], scopes_refused=[*scopes.refused, *plan.scopes_refused],
        keys_added=[k.hex() for k in plan.keys], keys_held_back=list(keys.held_back),
        kept_unverified=[u for u in objects.unverified if u[0] in kept],
        identity_adopted=target.existing is None, metadata_signed=meta.signed, default_scope_created=fresh)
    return report, unlocked


def _prove_holdership(p: CryptoProvider, c: Container, passphrase: str,
                      ident: aperto_keys.Identity | None) -> aperto_keys.Identity:
    """2. Proof of holdership, before anything else happens: the identity derived from the
    passphrase and the container's salt is the container's."""
    meta = c.meta
    if ident is None or ident.sign_pub != meta.sign_pub:
        ident = run_sync(aperto_keys.identity_from_passphrase(p, passphrase, meta.salt))
    if ident.sign_pub != meta.sign_pub or ident.ka_pub != meta.ka_pub:
        raise WrongPassphrase("wrong passphrase for this .amem file")
    return ident


def _root(p: CryptoProvider, c: Container, ident: aperto_keys.Identity,
          ) -> tuple[aperto_keys.Identity, bytes, list[rekey.Succession]] | None:
    """Key 6 of a file exported after a passphrase change, into a fresh vault: the vault root
    (only if it unwraps under this passphrase's master) and the succession records (only those
    that verify and lead to the proven owner key; else none).  Anything else in it: ignored,
    the import goes on as for a vault that never changed its passphrase."""
    r = c.root
    if not isinstance(r, dict) or not isinstance(r.get("root_wrap"), bytes):
        return None
    try:
        full = run_sync(rekey.identity_for(p, ident.master, r["root_wrap"]))
        recs = [rekey.parse_succession(x) for x in r.get("successions", [])]
    except (WrongPassphrase, MalformedInput, TypeError):
        return None
    ok = all(run_sync(rekey.succession_valid(p, x)) for x in recs) and rekey.chain_to(recs, ident.sign_pub) is not None
    return full, r["root_wrap"], recs if ok else []


def _check_metadata(p: CryptoProvider, c: Container, ident: aperto_keys.Identity,
                    accept_container_keys: bool) -> _Metadata:
    """3. Metadata authenticity: a signature present must verify under the proven owner key,
    or the whole file is refused."""
    signed = False
    if c.signature is not None:
        if not run_sync(metadata_signature_valid(p, c, ident.sign_pub)):
            raise ImportRefused("the file's vault metadata was altered: its owner signature does not verify")
        signed = True
    return _Metadata(signed=signed, keys_vouched=signed or accept_container_keys)


def _open_target(open_store: Callable[[], Store], c: Container) -> _Target:
    """4. Identity separation: a vault of another identity refuses; an empty one adopts it."""
    store = open_store()
    existing = store.identity()
    if existing is not None and existing.sign_pub != c.meta.sign_pub:
        store.close()
        raise ImportRefused("this file belongs to a different identity; ownmem imports your own memory only")
    if existing is None and store.count() > 0:
        store.close()
        raise VaultError("the vault store holds objects but no identity; refusing to adopt one over them")
    return _Target(store, existing)


def _merge_keys(store: Store, c: Container, ident: aperto_keys.Identity, meta: _Metadata) -> _Keys:
    """5. Accepted keys: the vault's own, plus the container's when they are vouched for; a
    key revoked here after the file was made stays out (only `trust add` brings it back)."""
    keys = dict(store.known_keys())
    new: dict[bytes, bytes] = {}
    held_back: list[str] = []
    revoked = store.revoked_keys()
    for kid, pub in c.meta.known_keys.items():
        if kid in keys or pub == ident.sign_pub:
            continue
        if kid not in revoked and meta.keys_vouched:
            new[kid] = pub
        else:
            held_back.append(kid.hex())
    held = {bytes.fromhex(k): c.meta.known_keys[bytes.fromhex(k)] for k in held_back}
    return _Keys(new, tuple(held_back), Keyring(ident.sign_pub, {**keys, **new}), held)


def _merge_scopes(unlocked: UnlockedVault, c: Container) -> _Scopes:
    """5. Scopes, merged without overwrite: this vault's scopes stay as they are; a new scope
    of the container is a candidate only if its KEK unwraps under this identity (unwrapped
    once, kept for step 6); whether it is adopted is decided after step 6 (``_plan``)."""
    vault_scopes = unlocked.store.scopes()
    keks = {s.scope_id: unlocked.kek(s) for s in vault_scopes.values()}
    candidates: dict[bytes, tuple[ScopeEntry, bytes]] = {}
    refused: list[tuple[str, str]] = []
    for s in c.meta.scopes.values():
        if s.scope_id in keks:
            continue
        if s.name in vault_scopes:
            refused.append((s.name, "this vault has a different scope of that name"))
            continue
        try:
            kek = run_sync(aperto_keys.unwrap_kek(unlocked.crypto, s.wrapped, s.scope_id, unlocked.identity))
            candidates[s.scope_id] = (s, kek)
        except AuthenticationFailed:
            refused.append((s.name, "its key does not unwrap under this identity"))
    return _Scopes(keks, candidates, tuple(refused))


def _check_objects(p: CryptoProvider, store: Store, c: Container, scopes: _Scopes, keys: _Keys,
                   progress: Progress | None) -> _Objects:
    """6. Per object: well-formed, new here, in a known scope, its DEK present and unwrapping,
    and it opens under the ordinary fail-closed rules (import never assigns trust).  One bad
    object is reported and skipped; the rest go on.  An object that verifies only under a
    key the file names but this vault does not accept is kept, sealed: trust is derived at
    read time against the keyring then in force (ApertoMemory "Import"), so accepting the
    key later makes it trusted without importing again."""
    keyring = keys.keyring
    wider = Keyring(keyring.owner_pub, {**keyring.accepted, **keys.held}) if keys.held else None
    unverified: list[tuple[str, str]] = []
    present = store.object_ids()
    erased = store.erased_ids()
    staged: dict[bytes, StoredObject] = {}
    proven: set[bytes] = set()
    skipped: list[tuple[str, str]] = []
    refused: list[tuple[str, str]] = []
    total = len(c.objects)
    for i, item in enumerate(c.objects):
        if progress is not None and (i % 256 == 0 or i + 1 == total):
            progress(i + 1, total)
        label = f"#{i}"
        try:
            if not isinstance(item, bytes):
                raise ImportRefused("not a sealed-object byte string")
            so = parse_sealed(item)
            label = so.object_id.hex()
            if so.object_id in present or so.object_id in staged:
                skipped.append((label, "already in the vault"))
                continue
            if so.object_id in erased:
                skipped.append((label, "was forgotten in this vault"))
                continue
            kek = scopes.kek(so.scope_id)
            if kek is None:
                raise ImportRefused("object in an unknown or refused scope")
            wrapped = c.deks.get(so.object_id)
            if wrapped is None:
                raise ImportRefused("no wrapped DEK for this object")
            dek = run_sync(aperto_keys.unwrap_dek(p, wrapped, kek))
            if so.format_version == LEGACY_VERSION:
                # Legacy objects cannot be authenticated; keep them for `migrate`, which
                # proves what it can.  They still must decrypt, or they are corrupt.
                run_sync(cose.decrypt0(p, dek, cose.parse_encrypt0(so.encrypt0), b""))
            elif so.format_version == FORMAT_VERSION:
                try:
                    o = run_sync(open_sealed(p, so, dek, keyring))
                except AuthenticationFailed:
                    if wider is None:
                        raise
                    o = run_sync(open_sealed(p, so, dek, wider))     # AuthenticationFailed again: refused
                    assert o.signer_key_id is not None
                    unverified.append((so.object_id.hex(), o.signer_key_id.hex()))
                if o.trust is Trust.SELF and o.scope_id in scopes.candidates:
                    proven.add(o.scope_id)
            else:
                raise ImportRefused(f"unsupported format_version {so.format_version}")
            staged[so.object_id] = StoredObject(so.object_id, so.scope_id, so.format_version, so.encoded, wrapped)
        except AuthenticationFailed:
            refused.append((label, "could not authenticate"))
        except OwnmemError as e:
            refused.append((label, str(e)))
    return _Objects(staged, frozenset(proven), tuple(skipped), tuple(refused), tuple(unverified))


def _plan(c: Container, target: _Target, meta: _Metadata, keys: _Keys, scopes: _Scopes,
          objects: _Objects) -> _Plan:
    """What step 7 writes.  A scope new to this vault is adopted when the signed container
    vouches for it, or an owner-signed object opened through its KEK (step 3); otherwise it
    is refused with every object in it."""
    adopted: list[ScopeEntry] = []
    scopes_refused: list[tuple[str, str]] = []
    dropped: list[bytes] = []
    for sid, (s, _) in scopes.candidates.items():
        if meta.signed or sid in objects.proven_scopes:
            adopted.append(s)
            continue
        scopes_refused.append((s.name, "unsigned metadata and no object of yours proves its key"))
        dropped.extend(oid for oid, so in objects.staged.items() if so.scope_id == sid)
    m, gone = c.meta, set(dropped)
    return _Plan(identity=PublicIdentity(m.salt, m.sign_pub, m.ka_pub) if target.existing is None else None,
                 scopes=tuple(adopted), keys=keys.new,
                 objects=tuple(o for oid, o in objects.staged.items() if oid not in gone),
                 scopes_refused=tuple(scopes_refused),
                 refused=tuple((oid.hex(), "its scope was refused") for oid in dropped))


def _write(store: Store, plan: _Plan) -> None:
    """7. One transaction writes everything, or nothing."""
    with store.transaction():
        if plan.identity is not None:
            store.set_identity(plan.identity)
        for s in plan.scopes:
            store.add_scope(s)
        for kid, pub in plan.keys.items():
            store.add_known_key(kid, pub)
        store.put_objects(list(plan.objects))
