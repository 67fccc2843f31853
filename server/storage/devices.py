"""A vault's enrolled devices in storage, for both backends (server/device_routes.py;
docs/decisions.md "15.7. Device and Key Revocation").

    devices         (vault_id, device_id) -> device_pub, label, added_at, last_sync
    removed_devices (vault_id, device_id)          a removed device's key never enrols again
    retired_owners  (vault_id, owner_pub)          owner keys in force when a device was removed:
                                                   they enrol nothing (until a passphrase change
                                                   replaces the key, a removed device holds it too)
    device_tokens   token_hash -> vault_id, device_id   which device a session credential is for

Created with the other tables when the storage opens (``CREATE TABLE IF NOT EXISTS``).  Every
decision that reads and writes is one transaction; on PostgreSQL the vault's row is locked
first, so an enrolment, a removal and a passphrase change of one vault happen one at a time.
"""
from __future__ import annotations

import enum
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from ownmem.wire.devices import MAX_DEVICES

_TABLES = """
CREATE TABLE IF NOT EXISTS devices (
  vault_id {int} NOT NULL, device_id {blob} NOT NULL, device_pub {blob} NOT NULL, label TEXT NOT NULL,
  added_at {int} NOT NULL, last_sync {int} NOT NULL, PRIMARY KEY (vault_id, device_id));
CREATE TABLE IF NOT EXISTS removed_devices (
  vault_id {int} NOT NULL, device_id {blob} NOT NULL, removed_at {int} NOT NULL, PRIMARY KEY (vault_id, device_id));
CREATE TABLE IF NOT EXISTS retired_owners (
  vault_id {int} NOT NULL, owner_pub {blob} NOT NULL, PRIMARY KEY (vault_id, owner_pub));
CREATE TABLE IF NOT EXISTS device_tokens (
  token_hash {blob} NOT NULL PRIMARY KEY, vault_id {int} NOT NULL, device_id {blob} NOT NULL);
CREATE INDEX IF NOT EXISTS device_tokens_device ON device_tokens (vault_id, device_id);
"""
SQLITE_SCHEMA = _TABLES.format(int="INTEGER", blob="BLOB")
POSTGRES_SCHEMA = _TABLES.format(int="BIGINT", blob="BYTEA")


@dataclass(frozen=True, slots=True)
class DeviceRecord:
    device_id: bytes
    device_pub: bytes
    label: str
    added_at: int
    last_sync: int


class Enrolled(enum.Enum):
    """What an enrolment came to."""

    ADDED = enum.auto()
    KNOWN = enum.auto()            # enrolled before: nothing changed
    REMOVED = enum.auto()          # this device key was removed: never again
    CLOSED = enum.auto()           # the owner key in force was in force at a removal
    STALE_OWNER = enum.auto()      # the owner key changed since the signature was checked
    FULL = enum.auto()


Tx = Callable[[], AbstractContextManager[Any]]


class Devices:
    """The device tables over a backend's write transaction ``tx`` and placeholder ``p``."""

    def __init__(self, tx: Tx, p: str, *, postgres: bool) -> None:
        self._tx, self._p = tx, p
        self._lock = f"SELECT owner_pub FROM vaults WHERE id = {p}" + (" FOR UPDATE" if postgres else "")

    def _q(self, sql: str) -> str:
        return sql.replace("?", self._p)

    def _rows(self, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._tx() as c:
            return list(c.execute(self._q(sql), args).fetchall())

    def count(self, vault_id: int) -> int:
        return int(self._rows("SELECT count(*) FROM devices WHERE vault_id = ?", (vault_id,))[0][0])

    def get(self, vault_id: int, device_id: bytes) -> DeviceRecord | None:
        for r in self._rows("SELECT device_id, device_pub, label, added_at, last_sync FROM devices "
                            "WHERE vault_id = ? AND device_id = ?", (vault_id, device_id)):
            return _record(r)
        return None

    def removed(self, vault_id: int, device_id: bytes) -> bool:
        return any(self._rows("SELECT 1 FROM removed_devices WHERE vault_id = ? AND device_id = ?",
                              (vault_id, device_id)))

    def listed(self, vault_id: int) -> list[DeviceRecord]:
        return [_record(r) for r in self._rows(
            "SELECT device_id, device_pub, label, added_at, last_sync FROM devices WHERE vault_id = ? "
            "ORDER BY added_at, device_id", (vault_id,))]

    def enrol(self, vault_id: int, owner_pub: bytes, device: DeviceRecord) -> Enrolled:
        """Enrol ``device`` on the word of ``owner_pub`` (whose signature the route checked),
        if that is still the vault's owner key and no device was removed under it."""
        with self._tx() as c:
            row = c.execute(self._lock, (vault_id,)).fetchone()
            if row is None or bytes(row[0]) != owner_pub:
                return Enrolled.STALE_OWNER
            q = self._q
            if c.execute(q("SELECT 1 FROM devices WHERE vault_id = ? AND device_id = ?"),
                         (vault_id, device.device_id)).fetchone():
                return Enrolled.KNOWN
            if c.execute(q("SELECT 1 FROM removed_devices WHERE vault_id = ? AND device_id = ?"),
                         (vault_id, device.device_id)).fetchone():
                return Enrolled.REMOVED
            if c.execute(q("SELECT 1 FROM retired_owners WHERE vault_id = ? AND owner_pub = ?"),
                         (vault_id, owner_pub)).fetchone():
                return Enrolled.CLOSED
            if int(c.execute(q("SELECT count(*) FROM devices WHERE vault_id = ?"), (vault_id,)).fetchone()[0]) \
                    >= MAX_DEVICES:
                return Enrolled.FULL
            c.execute(q("INSERT INTO devices VALUES (?,?,?,?,?,?)"),
                      (vault_id, device.device_id, device.device_pub, device.label, device.added_at,
                       device.last_sync))
            return Enrolled.ADDED

    def bind_token(self, token_hash: bytes, vault_id: int, device_id: bytes, now: int) -> None:
        """Note which device a new credential is for (before the credential exists), and its sync."""
        q = self._q
        with self._tx() as c:
            c.execute(q("DELETE FROM device_tokens WHERE vault_id = ? AND device_id = ? AND token_hash NOT IN "
                        "(SELECT token_hash FROM tokens)"), (vault_id, device_id))
            c.execute(q("INSERT INTO device_tokens VALUES (?,?,?)"), (token_hash, vault_id, device_id))
            c.execute(q("UPDATE devices SET last_sync = ? WHERE vault_id = ? AND device_id = ?"),
                      (now, vault_id, device_id))

    def token_device(self, token_hash: bytes) -> bytes | None:
        for r in self._rows("SELECT device_id FROM device_tokens WHERE token_hash = ?", (token_hash,)):
            return bytes(r[0])
        return None

    def touch(self, token_hash: bytes, now: int) -> None:
        """The device of this credential synced now (a pull of the change feed)."""
        with self._tx() as c:
            c.execute(self._q("UPDATE devices SET last_sync = ? WHERE (vault_id, device_id) IN "
                              "(SELECT vault_id, device_id FROM device_tokens WHERE token_hash = ?)"),
                      (now, token_hash))

    def remove(self, vault_id: int, owner_pub: bytes, device_id: bytes, now: int) -> bool:
        """Remove the device on the word of ``owner_pub`` (checked by the route): its row goes, its
        key is listed as removed, ``owner_pub`` enrols nothing more, and every credential of the
        vault that is not a remaining device's ends now (its own, and any from before devices).
        False if the device is not enrolled or the owner key changed meanwhile (nothing done)."""
        q = self._q
        with self._tx() as c:
            row = c.execute(self._lock, (vault_id,)).fetchone()
            if row is None or bytes(row[0]) != owner_pub:
                return False
            if not c.execute(q("DELETE FROM devices WHERE vault_id = ? AND device_id = ? RETURNING device_id"),
                             (vault_id, device_id)).fetchall():
                return False
            c.execute(q("INSERT INTO removed_devices VALUES (?,?,?) ON CONFLICT DO NOTHING"),
                      (vault_id, device_id, now))
            c.execute(q("INSERT INTO retired_owners VALUES (?,?) ON CONFLICT DO NOTHING"), (vault_id, owner_pub))
            c.execute(q("DELETE FROM tokens WHERE vault_id = ? AND token_hash NOT IN (SELECT t.token_hash FROM "
                        "device_tokens t JOIN devices d ON d.vault_id = t.vault_id AND d.device_id = t.device_id "
                        "WHERE t.vault_id = ?)"), (vault_id, vault_id))
            c.execute(q("DELETE FROM device_tokens WHERE vault_id = ? AND device_id = ?"), (vault_id, device_id))
            return True


def _record(r: tuple[Any, ...]) -> DeviceRecord:
    return DeviceRecord(bytes(r[0]), bytes(r[1]), str(r[2]), int(r[3]), int(r[4]))
