"""What the blind server keeps of sharing between people (SAIHM "Sharing contracts", "Order
of effect and receipt"), on both backends: one SQL text, ``?`` placeholders turned into
``%s`` for PostgreSQL.

    holder_proofs      the holder's ML-DSA-65 signature over its vault's registration, so
                       the directory (GET /v1/holders/{id}) serves what a sharer verifies
    contracts          each offered contract, signed, with its sharer's vault and expiry
    contract_grantees  each grantee's state: offered, accepted, declined, withdrawn
    share_keys         per contract, grantee and cell: the cell's DEK wrapped to the grantee

Nothing here decrypts: a share key is wrapped to the grantee's X25519 key.  Every way a
grant ends deletes its share keys: revocation (before the REVOKE receipt is logged, in a
transaction of its own, so a failed log write never restores access), a grantee's decline
or withdrawal, expiry (``sweep``, run on every sharing request), and erasure of the cell
(the backends' ``erase`` deletes them in the erasing transaction).
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from server.storage.base import LogEntry, StorageConflict, StorageError, StorageQuota

SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS holder_proofs (
  vault_id INTEGER PRIMARY KEY, holder_id BLOB NOT NULL, proof BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS holder_proofs_holder ON holder_proofs (holder_id, vault_id);
CREATE TABLE IF NOT EXISTS contracts (
  contract_id BLOB PRIMARY KEY, vault_id INTEGER NOT NULL, holder_id BLOB NOT NULL, contract BLOB NOT NULL,
  expires_at INTEGER NOT NULL, revoked INTEGER NOT NULL DEFAULT 0, created INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS contracts_vault ON contracts (vault_id);
CREATE TABLE IF NOT EXISTS contract_grantees (
  contract_id BLOB NOT NULL, grantee_id BLOB NOT NULL, state TEXT NOT NULL, PRIMARY KEY (contract_id, grantee_id));
CREATE INDEX IF NOT EXISTS contract_grantees_grantee ON contract_grantees (grantee_id);
CREATE TABLE IF NOT EXISTS share_keys (
  contract_id BLOB NOT NULL, grantee_id BLOB NOT NULL, cell_id BLOB NOT NULL, vault_id INTEGER NOT NULL,
  share_key BLOB NOT NULL, PRIMARY KEY (contract_id, grantee_id, cell_id));
CREATE INDEX IF NOT EXISTS share_keys_cell ON share_keys (vault_id, cell_id);
CREATE INDEX IF NOT EXISTS share_keys_grantee ON share_keys (grantee_id, contract_id, cell_id);
"""
POSTGRES_SCHEMA = (SQLITE_SCHEMA.replace("INTEGER PRIMARY KEY", "BIGINT PRIMARY KEY")
                   .replace("INTEGER NOT NULL", "BIGINT NOT NULL").replace("BLOB", "BYTEA"))

# what erasing a cell deletes of its shares (run by the backends' erase, in its transaction)
ERASE_SHARE_KEYS = "DELETE FROM share_keys WHERE vault_id = ? AND cell_id = ?"
PUT_PROOF = "INSERT INTO holder_proofs (vault_id, holder_id, proof) VALUES (?,?,?)"

STATES = ("offered", "accepted", "declined", "withdrawn")
MAX_LIVE_CONTRACTS = 1000     # per sharing vault: contracts neither revoked nor expired
MAX_LISTED = 2000             # entries per side of a listing (the route bounds its bytes too)
# a listing's order: contracts in force and accepted first (a flood of strangers' unanswered
# offers must not push out what a grantee reads), then the newest (its ? is now)
_ACTIVE_FIRST = ("CASE WHEN g.state = 'accepted' AND co.revoked = 0 AND (co.expires_at = 0 OR co.expires_at > ?) "
                 "THEN 0 ELSE 1 END")
ACTIONS = ("accept", "decline", "withdraw")


class ContractMissing(StorageError):
    code = "storage_no_contract"


class NotContractHolder(StorageError):
    code = "storage_other_holder"


class ContractClosed(StorageError):
    code = "storage_contract_closed"


class ShardsMissing(StorageError):
    code = "storage_no_cell"


def transition(state: str, action: str, *, revoked: bool, expired: bool) -> str | None:
    """A grantee's next state, or None when ``action`` cannot apply (SAIHM: a grantee MUST be
    able to decline, or later withdraw its acceptance).  Declined and withdrawn are final:
    their keys are deleted, so only a new contract can grant again.  A repeated action
    answers the state it reached (a retry after a timeout shows the outcome)."""
    if action == "accept":
        if state == "accepted":
            return "accepted" if not (revoked or expired) else None
        return "accepted" if state == "offered" and not (revoked or expired) else None
    if action == "decline":
        return "declined" if state in ("offered", "declined") else None
    if action == "withdraw":
        return "withdrawn" if state in ("accepted", "withdrawn") else None
    raise ValueError(f"unknown action {action!r}")


@dataclass(frozen=True, slots=True)
class HolderRow:
    name: str
    salt: bytes
    owner_pub: bytes
    sync_pub: bytes
    ka_pub: bytes
    holder_pub: bytes
    holder_id: bytes
    proof: bytes


@dataclass(frozen=True, slots=True)
class ShareRow:
    contract: bytes
    grantee: bytes
    state: str
    revoked: bool
    expired: bool


@dataclass(frozen=True, slots=True)
class NewContract:
    contract_id: bytes
    holder_id: bytes
    contract: bytes
    expires_at: int
    grantees: tuple[bytes, ...]
    shard_ids: tuple[bytes, ...]
    keys: tuple[tuple[bytes, bytes, bytes], ...]    # (grantee, cellId, share key)
    receipt: LogEntry


def _b(v: Any) -> bytes:
    return bytes(v)


class Shares:
    """The sharing tables of one backend.  ``tx`` opens a write transaction (SQLite: BEGIN
    IMMEDIATE; PostgreSQL: a pooled connection that commits on success); ``append_log``
    appends receipts to the Merkle log inside it; ``lock_vault`` serialises with that vault's
    erasures (PostgreSQL's row lock; SQLite's write lock already does)."""

    def __init__(self, tx: Callable[[], AbstractContextManager[Any]], append_log: Callable[[Any, list[LogEntry]], None],
                 *, postgres: bool, read: Callable[[], AbstractContextManager[Any]] | None = None) -> None:
        self._txf, self._append_log, self._pg = tx, append_log, postgres
        self._readf = read or tx     # SQLite reads need no write lock

    def _q(self, sql: str) -> str:
        return sql.replace("?", "%s") if self._pg else sql

    def _x(self, c: Any, sql: str, args: tuple[Any, ...] = ()) -> Any:
        return c.execute(self._q(sql), args)

    def _tx(self) -> AbstractContextManager[Any]:
        return self._txf()

    def _read(self) -> AbstractContextManager[Any]:
        return self._readf()

    def _in(self, n: int) -> str:
        return ",".join("?" * n)

    # ---------------------------------------------------------------- the directory
    def holder(self, holder_id: bytes) -> HolderRow | None:
        """The first vault registered with this holder key that published its holder proof."""
        with self._read() as c:
            r = self._x(c, "SELECT v.name, v.salt, v.owner_pub, v.sync_pub, v.ka_pub, v.holder_pub, v.holder_id, "
                           "p.proof FROM vaults v JOIN holder_proofs p ON p.vault_id = v.id WHERE v.holder_id = ? "
                           "ORDER BY v.id LIMIT 1", (holder_id,)).fetchone()
        return HolderRow(str(r[0]), *(_b(x) for x in r[1:])) if r else None

    def publish(self, vault_id: int, holder_id: bytes, proof: bytes) -> bool:
        """Keep a vault's holder proof (a vault registered before the directory) -> whether it is new."""
        with self._tx() as c:
            if self._x(c, "SELECT 1 FROM holder_proofs WHERE vault_id = ?", (vault_id,)).fetchone():
                return False
            self._x(c, PUT_PROOF, (vault_id, holder_id, proof))
            return True

    def known_holders(self, holder_ids: list[bytes]) -> set[bytes]:
        if not holder_ids:
            return set()
        with self._read() as c:
            return {_b(r[0]) for r in self._x(c, f"SELECT DISTINCT holder_id FROM holder_proofs WHERE holder_id IN "
                                                 f"({self._in(len(holder_ids))})", tuple(holder_ids)).fetchall()}

    # ---------------------------------------------------------------- the sharer
    def offer(self, vault_id: int, new: NewContract, now: int) -> None:
        """Contract, grantees, share keys and the SHARE receipt, in one transaction.  Raises
        StorageConflict for a contractId offered before, ShardsMissing when a covered cell is
        not (or no longer) the vault's, StorageQuota past MAX_LIVE_CONTRACTS in force."""
        with self._tx() as c:
            if self._pg:
                self._x(c, "SELECT 1 FROM vaults WHERE id = ? FOR UPDATE", (vault_id,))
            if self._x(c, "SELECT 1 FROM contracts WHERE contract_id = ?", (new.contract_id,)).fetchone():
                raise StorageConflict("that contract was offered before")
            in_force = int(self._x(c, "SELECT count(*) FROM contracts WHERE vault_id = ? AND revoked = 0 AND "
                                      "(expires_at = 0 OR expires_at > ?)", (vault_id, now)).fetchone()[0])
            if in_force >= MAX_LIVE_CONTRACTS:
                raise StorageQuota(f"this vault has {in_force} contracts in force; revoke some first")
            live = {_b(r[0]) for r in self._x(
                c, f"SELECT cell_id FROM cells WHERE vault_id = ? AND cell_id IN ({self._in(len(new.shard_ids))})",
                (vault_id, *new.shard_ids)).fetchall()}
            missing = [s for s in new.shard_ids if s not in live]
            if missing:
                raise ShardsMissing(f"{len(missing)} covered cell(s) are not this vault's: {missing[0].hex()}")
            self._x(c, "INSERT INTO contracts (contract_id, vault_id, holder_id, contract, expires_at, revoked, "
                       "created) VALUES (?,?,?,?,?,0,?)",
                    (new.contract_id, vault_id, new.holder_id, new.contract, new.expires_at, now))
            for g in new.grantees:
                self._x(c, "INSERT INTO contract_grantees VALUES (?,?,'offered')", (new.contract_id, g))
            for g, cell_id, key in new.keys:
                self._x(c, "INSERT INTO share_keys VALUES (?,?,?,?,?)", (new.contract_id, g, cell_id, vault_id, key))
            self._append_log(c, [new.receipt])

    def offered(self, vault_id: int, now: int) -> list[ShareRow]:
        with self._read() as c:
            rows = self._x(c, "SELECT co.contract, g.grantee_id, g.state, co.revoked, co.expires_at FROM contracts co "
                              "JOIN contract_grantees g ON g.contract_id = co.contract_id WHERE co.vault_id = ? "
                              f"ORDER BY {_ACTIVE_FIRST}, co.created DESC, co.contract_id DESC, g.grantee_id DESC "
                              "LIMIT ?",
                    (vault_id, now, MAX_LISTED)).fetchall()
        return [_share_row(r, now) for r in rows]

    def revoke(self, vault_id: int, contract_id: bytes) -> bool:
        """Withdraw access for every grantee: the contract marked revoked and its share keys
        deleted, committed before any receipt is written.  -> whether it was revoked before."""
        with self._tx() as c:
            r = self._x(c, "SELECT vault_id, revoked FROM contracts WHERE contract_id = ?", (contract_id,)).fetchone()
            if r is None:
                raise ContractMissing("no such contract")
            if int(r[0]) != vault_id:
                raise NotContractHolder("the contract is another holder's")
            self._x(c, "UPDATE contracts SET revoked = 1 WHERE contract_id = ?", (contract_id,))
            self._x(c, "DELETE FROM share_keys WHERE contract_id = ?", (contract_id,))
            return bool(r[1])

    def log_revoke(self, holder_id: bytes, contract_id: bytes, receipt: LogEntry | None) -> bytes | None:
        """The REVOKE receipt of the contract in the log: the one logged before, else ``receipt``
        (appended now); None if there is none and none was given."""
        with self._tx() as c:
            r = self._x(c, "SELECT receipt_id FROM log WHERE subject_id = ? AND operation = 'REVOKE' AND holder_id = ? "
                           "ORDER BY idx LIMIT 1", (contract_id, holder_id)).fetchone()
            if r is not None:
                return _b(r[0])
            if receipt is None:
                return None
            self._append_log(c, [receipt])
            return receipt.receipt_id

    # ---------------------------------------------------------------- the grantee
    def received(self, grantee_id: bytes, now: int) -> list[ShareRow]:
        with self._read() as c:
            rows = self._x(c, "SELECT co.contract, g.grantee_id, g.state, co.revoked, co.expires_at FROM "
                              "contract_grantees g JOIN contracts co ON co.contract_id = g.contract_id "
                              f"WHERE g.grantee_id = ? ORDER BY {_ACTIVE_FIRST}, co.created DESC, co.contract_id DESC "
                              "LIMIT ?",
                    (grantee_id, now, MAX_LISTED)).fetchall()
        return [_share_row(r, now) for r in rows]

    def answer(self, grantee_id: bytes, contract_id: bytes, action: str, now: int) -> str:
        """Accept, decline or withdraw as the grantee -> the state reached.  Leaving a contract
        deletes this grantee's share keys of it."""
        with self._tx() as c:
            r = self._x(c, "SELECT g.state, co.revoked, co.expires_at FROM contract_grantees g JOIN contracts co "
                           "ON co.contract_id = g.contract_id WHERE g.contract_id = ? AND g.grantee_id = ?",
                        (contract_id, grantee_id)).fetchone()
            if r is None:
                raise ContractMissing("no contract by that id names this holder")
            expires = int(r[2])
            state = transition(str(r[0]), action, revoked=bool(r[1]), expired=expires != 0 and expires <= now)
            if state is None:
                raise ContractClosed(f"cannot {action} a contract that is {_closed(str(r[0]), bool(r[1]))}")
            self._x(c, "UPDATE contract_grantees SET state = ? WHERE contract_id = ? AND grantee_id = ?",
                    (state, contract_id, grantee_id))
            if state in ("declined", "withdrawn"):
                self._x(c, "DELETE FROM share_keys WHERE contract_id = ? AND grantee_id = ?",
                        (contract_id, grantee_id))
            return state

    def shared(self, grantee_id: bytes, now: int, after: bytes, limit: int) -> list[tuple[bytes, bytes, bytes, bytes]]:
        """(contractId, cellId, cell, share key) of every active contract naming the grantee:
        accepted by it, not revoked, not expired, the cell not erased; after ``after``
        (contractId || cellId), in that order."""
        a_contract, a_cell = after[:32], after[32:]
        with self._read() as c:
            rows = self._x(
                c, "SELECT k.contract_id, k.cell_id, ce.cell, k.share_key FROM share_keys k "
                   "JOIN contract_grantees g ON g.contract_id = k.contract_id AND g.grantee_id = k.grantee_id "
                   "AND g.state = 'accepted' "
                   "JOIN contracts co ON co.contract_id = k.contract_id AND co.revoked = 0 "
                   "AND (co.expires_at = 0 OR co.expires_at > ?) "
                   "JOIN cells ce ON ce.vault_id = k.vault_id AND ce.cell_id = k.cell_id "
                   "WHERE k.grantee_id = ? AND (k.contract_id > ? OR (k.contract_id = ? AND k.cell_id > ?)) "
                   "ORDER BY k.contract_id, k.cell_id LIMIT ?",
                (now, grantee_id, a_contract, a_contract, a_cell, limit)).fetchall()
        return [(_b(a), _b(b), _b(d), _b(k)) for a, b, d, k in rows]

    def sweep(self, now: int) -> int:
        """Delete the share keys of every expired contract -> how many."""
        with self._tx() as c:
            return int(self._x(c, "DELETE FROM share_keys WHERE contract_id IN (SELECT contract_id FROM contracts "
                                  "WHERE expires_at <> 0 AND expires_at <= ?)", (now,)).rowcount or 0)

    def key_count(self, contract_id: bytes) -> int:
        with self._read() as c:
            return int(self._x(c, "SELECT count(*) FROM share_keys WHERE contract_id = ?",
                               (contract_id,)).fetchone()[0])


def _share_row(r: Any, now: int) -> ShareRow:
    expires = int(r[4])
    return ShareRow(_b(r[0]), _b(r[1]), str(r[2]), bool(r[3]), expires != 0 and expires <= now)


def _closed(state: str, revoked: bool) -> str:
    return "revoked" if revoked else state if state in ("declined", "withdrawn") else "expired"


def shares_of(storage: Any) -> Shares:
    """The sharing tables of a storage backend (SqliteStorage or PostgresStorage): each builds
    its ``Shares`` over its own transactions (``sharing()``), so this module imports neither."""
    got: Shares = storage.sharing()
    return got


__all__ = ["ContractClosed", "ContractMissing", "HolderRow", "NewContract", "NotContractHolder",
           "ShareRow", "Shares", "ShardsMissing", "shares_of", "transition"]
