"""Log witnesses in storage, for both backends (ownmem.vault.logwatch; docs/decisions.md "Log witnesses").

    witnesses (vault_id, device_id) -> record, updated_at

One current record per device of a vault: the last checkpoint that device verified, signed by
the vault's sync key (the route checks the signature; the server cannot make one).  A vault
keeps at most ``keep`` records: a new device's record pushes out the least recently updated,
so devices that come and go cannot grow the table without bound.  Created with the other
tables when the storage opens (``CREATE TABLE IF NOT EXISTS``: a store made before witnesses
existed gains the table, and nothing else changes).
"""
from __future__ import annotations

SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS witnesses (
  vault_id INTEGER NOT NULL, device_id BLOB NOT NULL, record BLOB NOT NULL, updated_at REAL NOT NULL,
  PRIMARY KEY (vault_id, device_id));
"""

POSTGRES_SCHEMA = """
CREATE TABLE IF NOT EXISTS witnesses (
  vault_id BIGINT NOT NULL, device_id BYTEA NOT NULL, record BYTEA NOT NULL, updated_at DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (vault_id, device_id));
"""

# ``{p}``: the backend's placeholder
UPSERT = ("INSERT INTO witnesses VALUES ({p},{p},{p},{p}) ON CONFLICT (vault_id, device_id) "
          "DO UPDATE SET record = excluded.record, updated_at = excluded.updated_at")
EVICT = ("DELETE FROM witnesses WHERE vault_id = {p} AND device_id NOT IN (SELECT device_id FROM witnesses "
         "WHERE vault_id = {p} ORDER BY updated_at DESC, device_id LIMIT {p})")
LIST = "SELECT record FROM witnesses WHERE vault_id = {p} ORDER BY updated_at DESC, device_id LIMIT {p}"
