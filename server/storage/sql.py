"""What the SQLite and PostgreSQL backends share: the statements both run, written once, and
the rules of a push and an erasure over what either backend read.

A statement's text is the same on both but for the placeholder (``{p}``: SQLite's ``?``,
PostgreSQL's ``%s``, as witness.py and export.py spell it); ``Sql(p)`` holds them filled in
for one backend.  What differs stays in the backend: the schema's types, locks (SQLite's
write lock, PostgreSQL's row and advisory locks), bulk writes (COPY), ``IN`` lists against
``ANY``, ``length`` against ``octet_length``, NOTIFY.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from server.storage import shares
from server.storage.base import LogEntry, PushCell, PushResult, StorageQuota

VAULT_COLS = ("id, name, salt, owner_pub, sync_pub, ka_pub, holder_pub, holder_id, last_seq, meta_version, "
              "stored_bytes")
LOG_COLS = "idx, receipt_id, subject_id, operation, holder_id, ts, receipt"


class Sql:
    """The shared statements, with the backend's placeholder ``p``."""

    def __init__(self, p: str) -> None:
        # a key of this registration (owner, sync or holder) in how many vaults already
        self.same_keys = f"SELECT count(*) FROM vaults WHERE owner_pub = {p} OR sync_pub = {p} OR holder_id = {p}"
        self.insert_vault = ("INSERT INTO vaults (name, salt, owner_pub, sync_pub, ka_pub, holder_pub, holder_id, "
                             f"meta_version, metadata, metadata_sig) VALUES ({p},{p},{p},{p},{p},{p},{p},1,{p},{p})")
        self.put_proof = shares.PUT_PROOF.replace("?", p)
        self.vault_by_name = f"SELECT {VAULT_COLS} FROM vaults WHERE name = {p}"
        self.name_of_owner = f"SELECT name FROM vaults WHERE owner_pub = {p} ORDER BY id LIMIT 1"
        self.vault_by_id = f"SELECT {VAULT_COLS} FROM vaults WHERE id = {p}"
        self.expire_challenges = f"DELETE FROM challenges WHERE expires_at < {p}"
        self.expire_tokens = f"DELETE FROM tokens WHERE expires_at < {p}"
        self.insert_token = f"INSERT INTO tokens VALUES ({p},{p},{p})"
        self.token_vault = f"SELECT vault_id, expires_at FROM tokens WHERE token_hash = {p} AND expires_at >= {p}"
        self.metadata = f"SELECT meta_version, metadata, metadata_sig FROM vaults WHERE id = {p}"
        # compare-and-swap: no row when the expected version is stale
        self.cas_metadata = (f"UPDATE vaults SET meta_version = meta_version + 1, metadata = {p}, metadata_sig = {p}, "
                             f"last_seq = last_seq + 1 WHERE id = {p} AND meta_version = {p} RETURNING last_seq")
        self.meta_change = f"INSERT INTO changes VALUES ({p},{p},'meta',NULL)"
        # a passphrase change (vault/rekey.py): compare-and-swap as above, and the public keys replaced
        self.rekey = (f"UPDATE vaults SET salt = {p}, owner_pub = {p}, ka_pub = {p}, meta_version = meta_version + 1, "
                      f"metadata = {p}, metadata_sig = {p}, last_seq = last_seq + 1 "
                      f"WHERE id = {p} AND meta_version = {p} RETURNING last_seq")
        self.put_root = (f"INSERT INTO vault_roots (vault_id, root_wrap) VALUES ({p},{p}) "
                         "ON CONFLICT (vault_id) DO UPDATE SET root_wrap = excluded.root_wrap")
        self.root_wrap = f"SELECT root_wrap FROM vault_roots WHERE vault_id = {p}"
        self.renew_proof = f"UPDATE holder_proofs SET proof = {p} WHERE vault_id = {p}"
        self.add_cells = f"UPDATE vaults SET last_seq = {p}, stored_bytes = stored_bytes + {p} WHERE id = {p}"
        # an erasure carries the FORGET receipt that asked for it, in the cell's place
        self.changes = (
            "SELECT ch.seq, ch.kind, ch.cell_id, coalesce(CASE WHEN ch.kind = 'cell' THEN ce.cell END, lg.receipt), "
            "ce.wrapped_dek FROM changes ch "
            "LEFT JOIN cells ce ON ce.vault_id = ch.vault_id AND ce.cell_id = ch.cell_id "
            "AND ch.kind IN ('cell', 'wrap') "
            "LEFT JOIN log lg ON ch.kind = 'erase' AND lg.subject_id = ch.cell_id AND lg.operation = 'FORGET' "
            "AND lg.holder_id = (SELECT holder_id FROM vaults WHERE id = ch.vault_id) "
            f"WHERE ch.vault_id = {p} AND ch.seq > {p} ORDER BY ch.seq LIMIT {p}")
        self.last_seq = f"SELECT last_seq FROM vaults WHERE id = {p}"
        self.holder_of = f"SELECT holder_id FROM vaults WHERE id = {p}"
        self.server_secret = "SELECT secret FROM server_secret WHERE id = 1"
        # another holder's cell: a vault of another holder has it in its feed, or another holder
        # logged a receipt about it (changes_cell and log_subject make both one index probe)
        self.foreign_cell = (f"SELECT 1 FROM changes ch JOIN vaults v ON v.id = ch.vault_id WHERE ch.cell_id = {p} "
                             f"AND v.holder_id <> {p} UNION ALL SELECT 1 FROM log WHERE subject_id = {p} "
                             f"AND holder_id <> {p} LIMIT 1")
        # erasure, in the order ``erase_cells`` runs it
        self.is_erased = f"SELECT 1 FROM erased WHERE vault_id = {p} AND cell_id = {p}"
        self.free_bytes = f"UPDATE vaults SET stored_bytes = stored_bytes - {p} WHERE id = {p}"
        self.insert_erased = f"INSERT INTO erased VALUES ({p},{p})"
        self.erase_share_keys = shares.ERASE_SHARE_KEYS.replace("?", p)
        self.list_erasure = f"INSERT INTO erasure_list (cell_id, holder_id, at) VALUES ({p},{p},{p})"
        self.erase_change = f"INSERT INTO changes VALUES ({p},{p},'erase',{p})"
        self.set_last_seq = f"UPDATE vaults SET last_seq = {p} WHERE id = {p}"
        # a scope rotation: the wrap replaced (the cell never), and a change when it differs
        self.rewrap = (f"UPDATE cells SET wrapped_dek = {p} WHERE vault_id = {p} AND cell_id = {p} "
                       f"AND wrapped_dek <> {p}")
        self.wrap_change = f"INSERT INTO changes VALUES ({p},{p},'wrap',{p})"
        self.erase_pending = f"INSERT INTO erase_pending (vault_id) VALUES ({p})"
        self.is_erase_pending = f"SELECT 1 FROM erase_pending WHERE vault_id = {p} LIMIT 1"
        # the public log
        self.log_leaves = ("SELECT t.leaf, l.receipt_id, l.subject_id, l.operation, l.holder_id, l.ts, l.receipt "
                           f"FROM tlog_leaves t JOIN log l ON l.receipt_id = t.receipt_id WHERE t.leaf >= {p} "
                           f"ORDER BY t.leaf LIMIT {p}")
        self.leaf_index = f"SELECT leaf FROM tlog_leaves WHERE receipt_id = {p}"
        self.log_key = "SELECT seed FROM tlog_key WHERE id = 1"
        self.log_get = f"SELECT {LOG_COLS} FROM log WHERE receipt_id = {p}"
        self.erasure_list = (f"SELECT idx, cell_id, holder_id, at FROM erasure_list WHERE idx > {p} "
                             f"ORDER BY idx LIMIT {p}")
        self._p = p

    def log_list(self, holder_id: bytes | None, subject_id: bytes | None, operation: str | None,
                 after: int, limit: int) -> tuple[str, tuple[object, ...]]:
        """The log's entries after ``after`` that match every filter given: (statement, arguments)."""
        p = self._p
        where: list[str] = [f"idx > {p}"]
        args: list[object] = [after]
        for col, val in (("holder_id", holder_id), ("subject_id", subject_id), ("operation", operation)):
            if val is not None:
                where.append(f"{col} = {p}")
                args.append(val)
        return f"SELECT {LOG_COLS} FROM log WHERE " + " AND ".join(where) + f" ORDER BY idx LIMIT {p}", (*args, limit)


# ---------------------------------------------------------------- a push

def fresh_cells(cells: list[PushCell], present: set[bytes], erased: set[bytes]) -> list[PushCell]:
    """The cells of a push to store: neither held, nor erased before, nor repeated in the push."""
    new: list[PushCell] = []
    seen: set[bytes] = set()
    for x in cells:
        if x.cell_id in present or x.cell_id in erased or x.cell_id in seen:
            continue
        seen.add(x.cell_id)
        new.append(x)
    return new


def added_bytes(new: list[PushCell], stored: int, quota: int | None) -> int:
    """The bytes ``new`` adds to a vault holding ``stored``; StorageQuota past ``quota``."""
    added = sum(len(x.cell) + len(x.wrapped_dek) for x in new)
    if quota is not None and added and stored + added > quota:
        raise StorageQuota(f"the vault holds {stored} bytes; {added} more would pass its quota of {quota}")
    return added


def push_result(cells: list[PushCell], new: list[PushCell], erased: set[bytes], last: int) -> PushResult:
    n_erased = sum(1 for x in cells if x.cell_id in erased)
    return PushResult(stored=len(new), duplicates=len(cells) - len(new) - n_erased, erased=n_erased, last_seq=last)


# ---------------------------------------------------------------- a scope rotation

def rewrap_cells(c: Any, q: Sql, vault_id: int, last: int, wraps: list[tuple[bytes, bytes]]) -> tuple[int, int]:
    """Inside the backend's transaction, once it checked that the vault holds every cell: each
    wrap replaced where it differs, each replacement a "wrap" change of the feed.
    -> (wraps replaced, the vault's new last sequence number)."""
    replaced = 0
    for cid, wrapped in wraps:
        if c.execute(q.rewrap, (wrapped, vault_id, cid, wrapped)).rowcount:
            replaced += 1
            last += 1
            c.execute(q.wrap_change, (vault_id, last, cid))
    if replaced:
        c.execute(q.set_last_seq, (last, vault_id))
        c.execute(q.erase_pending, (vault_id,))     # the old wraps' bytes are scrubbed as an erasure's
    return replaced, last


# ---------------------------------------------------------------- an erasure

def erase_cells(c: Any, q: Sql, delete_cell: str, append_log: Callable[[Any, list[LogEntry]], None],
                vault_id: int, holder: bytes, last: int, cell_ids: list[bytes], receipts: list[LogEntry],
                now: int) -> tuple[list[bytes], int]:
    """Inside the backend's erasing transaction: for each cell not erased before, delete it and
    its wrapped DEK (``delete_cell`` returns the bytes freed), mark it erased, delete the share
    keys of it (cryptographic erasure covers shares), list the id, add the erasure to the feed
    and log the FORGET receipt.  -> (the ids erased now, the vault's new last sequence number)."""
    done: list[bytes] = []
    by_subject = {r.subject_id: r for r in receipts}
    for cid in cell_ids:
        if c.execute(q.is_erased, (vault_id, cid)).fetchone():
            continue
        freed = c.execute(delete_cell, (vault_id, cid)).fetchall()
        c.execute(q.free_bytes, (sum(int(r[0]) for r in freed), vault_id))
        c.execute(q.insert_erased, (vault_id, cid))
        c.execute(q.erase_share_keys, (vault_id, cid))
        c.execute(q.list_erasure, (cid, holder, now))
        last += 1
        c.execute(q.erase_change, (vault_id, last, cid))
        append_log(c, [by_subject[cid]])
        done.append(cid)
    c.execute(q.set_last_seq, (last, vault_id))
    return done, last
