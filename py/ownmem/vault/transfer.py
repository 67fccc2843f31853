"""Export to and import from `.amem` (draft-02 §8.2 "Import", §10), the ONE import path.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..aperto import keys as K
from ..aperto.container import (
    Container, ScopeEntry, build_container, metadata_signature_valid, parse_container,
    sign_metadata,
)
from ..aperto.model import FORMAT_VERSION, LEGACY_VERSION, Trust
from ..aperto.seal import open_sealed, parse_sealed
from ..aperto.trust import Keyring
from ..crypto import CryptoProvider, cose, provider, run_sync
from ..errors import AuthenticationFailed, ImportRefused, OwnmemError, VaultError, WrongPassphrase
from .store import PublicIdentity, Store, StoredObject
from .vault import Progress, UnlockedVault, Vault

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
    identity_adopted: bool = False
    metadata_signed: bool = False


def export_bytes(v: UnlockedVault, *, progress: Progress | None = None) -> tuple[bytes, int]:
    """The vault as `.amem` bytes (deterministic) and the number of objects in it."""
    meta = v.public()
    rows = v.store.objects()
    if progress is not None:
        progress(0, len(rows))
    sig = run_sync(sign_metadata(v.p, v.identity, meta))
    return build_container(meta, ((r.object_id, r.sealed, r.dek_wrapped) for r in rows), sig), len(rows)


def export_vault(v: UnlockedVault, path: str | Path, *, progress: Progress | None = None) -> int:
    """Write every stored object to ``path`` atomically; returns the number of objects."""
    data, n = export_bytes(v, progress=progress)
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    try:
        # owner-only: an export is an offline passphrase oracle (§15.8)
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as e:
        try:  # a half-written or orphaned copy is still an offline passphrase oracle (§15.8)
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


@dataclass
class _Plan:
    """What import will write, built by checks alone; committed in one transaction."""

    identity: PublicIdentity | None
    scopes: list[ScopeEntry]
    keys: dict[bytes, bytes]
    objects: list[StoredObject]


def import_file(folder: str | Path, path: str | Path, passphrase: str, *,
                accept_container_keys: bool = False, progress: Progress | None = None,
                crypto: CryptoProvider | None = None) -> tuple[ImportReport, UnlockedVault]:
    """Import ``path`` into the vault at ``folder`` (created if absent or empty)."""
    vault = Vault(folder, crypto=crypto)
    data = _read(path)
    return import_bytes(lambda: Store(vault.folder), data, passphrase, accept_container_keys=accept_container_keys,
                        progress=progress, crypto=vault.p)


def import_bytes(open_store: Callable[[], Store], data: bytes, passphrase: str, *,
                 accept_container_keys: bool = False, progress: Progress | None = None,
                 crypto: CryptoProvider | None = None,
                 ident: K.Identity | None = None) -> tuple[ImportReport, UnlockedVault]:
    """The one import implementation (every entry point comes here).  ``open_store`` is
    called only once the passphrase is proven, so a refused file creates nothing.
    ``ident`` lets a caller that already derived the identity for this salt skip Argon2id."""
    p = crypto or provider()
    report = ImportReport()

    # 1. parse
    c: Container = parse_container(data)
    meta = c.meta

    # 2. proof of holdership, before anything else happens
    if ident is None or ident.sign_pub != meta.sign_pub:
        ident = run_sync(K.identity_from_passphrase(p, passphrase, meta.salt))
    if ident.sign_pub != meta.sign_pub or ident.ka_pub != meta.ka_pub:
        raise WrongPassphrase("wrong passphrase for this .amem file")

    # 3. metadata authenticity
    if c.signature is not None:
        if not run_sync(metadata_signature_valid(p, c, ident.sign_pub)):
            raise ImportRefused("the file's vault metadata was altered: its owner signature does not verify")
        report.metadata_signed = True
    signed = report.metadata_signed

    # 4. identity separation
    store = open_store()
    existing = store.identity()
    if existing is not None and existing.sign_pub != meta.sign_pub:
        store.close()
        raise ImportRefused("this file belongs to a different identity; ownmem imports your own memory only")
    if existing is None and store.count() > 0:
        store.close()
        raise VaultError("the vault store holds objects but no identity; refusing to adopt one over them")
    report.identity_adopted = existing is None
    uv = UnlockedVault(store, ident, p)

    # keys: the vault's own, plus the container's when they are authenticated or opted in
    keys = dict(store.known_keys())
    new_keys: dict[bytes, bytes] = {}
    revoked = store.revoked_keys()
    for kid, pub in meta.known_keys.items():
        if kid in keys or pub == ident.sign_pub:
            continue
        if kid in revoked:
            # removed here after the file was made: only `trust add` brings a key back
            report.keys_held_back.append(kid.hex())
            continue
        if signed or accept_container_keys:
            new_keys[kid] = pub
        else:
            report.keys_held_back.append(kid.hex())
    keyring = Keyring(ident.sign_pub, {**keys, **new_keys})

    # 5. scopes: merge without overwrite; a container KEK must unwrap under our identity
    vault_scopes = store.scopes()
    usable: dict[bytes, tuple[ScopeEntry, bytes]] = {}        # scope_id -> (entry, KEK)
    for s in vault_scopes.values():
        usable[s.scope_id] = (s, uv.kek(s))
    candidates: dict[bytes, ScopeEntry] = {}
    for s in meta.scopes.values():
        if s.scope_id in usable:
            continue
        if s.name in vault_scopes:
            report.scopes_refused.append((s.name, "this vault has a different scope of that name"))
            continue
        try:
            run_sync(K.unwrap_kek(p, s.wrapped, s.scope_id, ident))
        except AuthenticationFailed:
            report.scopes_refused.append((s.name, "its key does not unwrap under this identity"))
            continue
        candidates[s.scope_id] = s
    cand_keks = {sid: run_sync(K.unwrap_kek(p, s.wrapped, sid, ident)) for sid, s in candidates.items()}

    # 6. per object
    present = store.object_ids()
    erased = store.erased_ids()
    staged: dict[bytes, StoredObject] = {}
    proven_scopes: set[bytes] = set()
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
                report.skipped.append((label, "already in the vault"))
                continue
            if so.object_id in erased:
                report.skipped.append((label, "was forgotten in this vault"))
                continue
            if so.scope_id in usable:
                kek = usable[so.scope_id][1]
            elif so.scope_id in cand_keks:
                kek = cand_keks[so.scope_id]
            else:
                raise ImportRefused("object in an unknown or refused scope")
            wrapped = c.deks.get(so.object_id)
            if wrapped is None:
                raise ImportRefused("no wrapped DEK for this object")
            dek = run_sync(K.unwrap_dek(p, wrapped, kek))
            if so.format_version == LEGACY_VERSION:
                # Legacy objects cannot be authenticated; keep them for `migrate`, which
                # proves what it can.  They still must decrypt, or they are corrupt.
                run_sync(cose.decrypt0(p, dek, cose.parse_encrypt0(so.encrypt0), b""))
            elif so.format_version == FORMAT_VERSION:
                o = run_sync(open_sealed(p, so, dek, keyring))
                if o.trust is Trust.SELF and o.scope_id in cand_keks:
                    proven_scopes.add(o.scope_id)
            else:
                raise ImportRefused(f"unsupported format_version {so.format_version}")
            staged[so.object_id] = StoredObject(so.object_id, so.scope_id, so.format_version, so.encoded, wrapped)
        except AuthenticationFailed:
            report.refused.append((label, "could not authenticate"))
        except OwnmemError as e:
            report.refused.append((label, str(e)))

    # scopes new to this vault: a signed container vouches for them; an unsigned one
    # must show an owner-signed object opened through that KEK
    adopted: list[ScopeEntry] = []
    for sid, s in candidates.items():
        if signed or sid in proven_scopes:
            adopted.append(s)
        else:
            report.scopes_refused.append((s.name, "unsigned metadata and no object of yours proves its key"))
            for oid in [o for o, so in staged.items() if so.scope_id == sid]:
                del staged[oid]
                report.refused.append((oid.hex(), "its scope was refused"))

    plan = _Plan(identity=PublicIdentity(meta.salt, meta.sign_pub, meta.ka_pub) if existing is None else None,
                 scopes=adopted, keys=new_keys, objects=list(staged.values()))

    # 7. write, all or nothing
    with store.transaction():
        if plan.identity is not None:
            store.set_identity(plan.identity)
        for s in plan.scopes:
            store.add_scope(s)
        for kid, pub in plan.keys.items():
            store.add_known_key(kid, pub)
        store.put_objects(plan.objects)
    report.imported = len(plan.objects)
    report.imported_ids = [o.object_id.hex() for o in plan.objects]
    report.scopes_added = [s.name for s in plan.scopes]
    report.keys_added = [k.hex() for k in plan.keys]
    return report, uv
