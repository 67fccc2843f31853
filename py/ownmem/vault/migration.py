"""Migrating a vault's format_version 1 objects (draft-02 §8.1 "Migration"), one object at a time.

Each object is classified and, if re-sealed, written in its own transaction together
with its new DEK wrap, so a crash or a hostile object leaves no half-migrated vault;
a failure is reported and the next object goes on.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from ownmem.aperto import keys as aperto_keys
from ownmem.aperto.migrate import Outcome, migrate_object
from ownmem.aperto.model import LEGACY_VERSION
from ownmem.aperto.seal import parse_sealed
from ownmem.crypto import run_sync
from ownmem.errors import AuthenticationFailed, OwnmemError
from ownmem.vault.store import StoredObject
from ownmem.vault.vault import Progress, UnlockedVault


@dataclass
class MigrationReport:
    migrated: list[str] = field(default_factory=list)
    attributed: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    already_v2: int = 0


def migrate_vault(v: UnlockedVault, *, quarantine: bool = False, now: int | None = None,
                  progress: Progress | None = None) -> MigrationReport:
    report = MigrationReport()
    at = int(time.time()) if now is None else now
    scopes = {s.scope_id: s for s in v.scopes().values()}
    keyring = v.keyring()
    rows = v.store.objects()
    for i, row in enumerate(rows):
        if progress is not None:
            progress(i + 1, len(rows))
        if row.format_version != LEGACY_VERSION:
            report.already_v2 += 1
            continue
        oid = row.object_id.hex()
        try:
            scope = scopes.get(row.scope_id)
            if scope is None:
                raise OwnmemError("object in an unknown scope")
            kek = v.kek(scope)
            dek = run_sync(aperto_keys.unwrap_dek(v.crypto, row.dek_wrapped, kek))
            new_dek = aperto_keys.new_key()
            res = run_sync(migrate_object(v.crypto, parse_sealed(row.sealed), dek, ident=v.identity,
                                          keyring=keyring, quarantine=quarantine, now=at, new_dek=new_dek))
            if res.sealed is None:
                report.refused.append((oid, "authorship cannot be proven under any accepted key; "
                                            "`ownmem migrate --quarantine` keeps it as unverified"))
                continue
            wrapped = run_sync(aperto_keys.wrap_dek(v.crypto, new_dek, kek))
            with v.store.transaction():
                v.store.replace_object(StoredObject(row.object_id, row.scope_id, res.sealed.format_version,
                                                    res.sealed.encoded, wrapped))
                # The v1 cell no longer matches the object: the next sync pushes a cell of the
                # v2 object (same cellNonce, new cellId) and erases the old one, v1 ciphertext
                # and DEK wrap included, so every device converges on the v2 object.
                old = v.store.drop_cell(row.object_id)
                if old is not None and old[1]:
                    v.store.queue_erasure(old[0], v.forget_receipt(old[0], at))
            {Outcome.MIGRATE: report.migrated, Outcome.ATTRIBUTE: report.attributed,
             Outcome.QUARANTINE: report.quarantined}[res.outcome].append(oid)
        except AuthenticationFailed:
            report.failed.append((oid, "could not authenticate (corrupt object or DEK)"))
        except OwnmemError as e:
            report.failed.append((oid, str(e)))
    return report
