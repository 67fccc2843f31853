// IndexedDB for the vault store (docs/web.md "Storage"): one object store per table of
// the vault's SQLite schema, one record per row (CBOR bytes, opaque here), plus the
// encrypted verified-plaintext cache.  Every write is one readwrite transaction with
// strict durability, so a crash loses at most the operation in flight.

export const NAME = "ownmem";
const VERSION = 1;
export const STORES = ["meta", "scopes", "known_keys", "revoked_keys", "objects", "erased", "cells",
  "erase_outbox", "sync_state", "cache"];

/** @typedef {Uint8Array<ArrayBuffer>} Bytes a record: CBOR bytes, opaque here */

/** @type {Promise<IDBDatabase> | null} */
let opening = null;

/** @returns {Promise<IDBDatabase>} */
function db() {
  if (!opening) {
    opening = new Promise((resolve, reject) => {
      const req = indexedDB.open(NAME, VERSION);
      req.onupgradeneeded = () => {
        for (const s of STORES) {
          if (!req.result.objectStoreNames.contains(s)) req.result.createObjectStore(s);
        }
      };
      req.onsuccess = () => {
        // Another context deletes the database (sign-out, views/signout.js): let it, rather
        // than block it for as long as this worker lives; a later call opens it again.
        req.result.onversionchange = () => {
          req.result.close();
          opening = null;
        };
        resolve(req.result);
      };
      req.onerror = () => reject(req.error);
    });
  }
  return opening;
}

/**
 * @param {IDBTransaction} tx
 * @returns {Promise<void>}
 */
function done(tx) {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error || new Error("IndexedDB transaction aborted"));
  });
}

/**
 * @template T
 * @param {IDBRequest<T>} req
 * @returns {Promise<T>}
 */
function request(req) {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

// The whole vault store, read ahead: the worker asks for it as it starts (worker.js), so
// IndexedDB reads while Pyodide boots, and the first idb_load_all (the store's load, before
// anything is written) takes it.
/** @type {Promise<Record<string, Bytes>> | null} */
let early = null;
let taken = false;
export function idb_prefetch() {
  if (taken) return;   // the store was loaded already: a copy read now would only be held
  early ??= loadAll();
  early.catch(() => {});
}

// -> {table: Uint8Array} for every table of the vault store: its records (each one CBOR item,
// the row) as one CBOR array, so Python receives and decodes one buffer per table, not one
// object per row.
/** @returns {Promise<Record<string, Bytes>>} */
export async function idb_load_all() {
  const ahead = early;
  early = null;
  taken = true;
  if (ahead) {
    try {
      return await ahead;
    } catch {
      // read it again below
    }
  }
  return loadAll();
}

async function loadAll() {
  const d = await db();
  const tables = STORES.filter((s) => s !== "cache");
  const tx = d.transaction(tables, "readonly");
  /** @type {Record<string, Bytes>} */
  const out = {};
  await Promise.all(tables.map(async (t) => {
    out[t] = cborArray(await request(tx.objectStore(t).getAll()));
  }));
  return out;
}

/** @param {Uint8Array[]} items each one CBOR item */
function cborArray(items) {
  const n = items.length;
  const head = n < 24 ? [0x80 | n] : n < 0x100 ? [0x98, n] : n < 0x10000 ? [0x99, n >> 8, n & 0xff]
    : [0x9a, (n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff];
  const out = new Uint8Array(items.reduce((sum, v) => sum + v.length, head.length));
  out.set(head);
  let at = head.length;
  for (const v of items) {
    out.set(v, at);
    at += v.length;
  }
  return out;
}

// Parallel arrays: values[i] null deletes keys[i] from tables[i].
/**
 * @param {ArrayLike<string> & Iterable<string>} tables
 * @param {ArrayLike<string>} keys
 * @param {ArrayLike<Uint8Array | null | undefined>} values
 */
export async function idb_apply(tables, keys, values) {
  const d = await db();
  const names = [...new Set(tables)];
  const tx = d.transaction(names, "readwrite", { durability: "strict" });
  for (let i = 0; i < tables.length; i++) {
    const store = tx.objectStore(tables[i]);
    if (values[i] === null || values[i] === undefined) store.delete(keys[i]);
    else store.put(values[i], keys[i]);
  }
  await done(tx);
}

// The vault's salt (public), straight from the "salt" row of the meta table, CBOR
// {"k": "salt", "v": h'<16 bytes>'}; null when there is no vault here.
export async function idb_salt() {
  const row = await idb_get("meta", "salt");
  if (!row || row.length < 17 || row[row.length - 17] !== 0x50) return null;
  return row.slice(row.length - 16);
}

/**
 * @param {string} table
 * @param {string} key
 * @returns {Promise<Bytes | null>}
 */
export async function idb_get(table, key) {
  const d = await db();
  const v = await request(d.transaction([table], "readonly").objectStore(table).get(key));
  return v === undefined ? null : v;
}

/**
 * @param {string} table
 * @param {string} key
 * @param {Uint8Array} value
 */
export async function idb_put(table, key, value) {
  const d = await db();
  const tx = d.transaction([table], "readwrite", { durability: "strict" });
  tx.objectStore(table).put(value, key);
  await done(tx);
}

// Removes every record of every store: sign-out ("Sign out of this browser",
// views/signout.js), first, so nothing is left even if the database's deletion below waits.
export async function idb_clear() {
  const d = await db();
  const tx = d.transaction(STORES, "readwrite", { durability: "strict" });
  for (const s of STORES) tx.objectStore(s).clear();
  await done(tx);
}

// Then the database itself, this context's connection closed first.  -> true once deleted;
// false when another context still holds it open after `waitMs` (its records are cleared).
export async function idb_delete(waitMs = 5000) {
  if (opening) {
    const d = await opening.catch(() => null);
    d?.close();
    opening = null;
  }
  return new Promise((resolve) => {
    const req = indexedDB.deleteDatabase(NAME);
    const timer = setTimeout(() => resolve(false), waitMs);
    req.onsuccess = () => { clearTimeout(timer); resolve(true); };
    req.onerror = () => { clearTimeout(timer); resolve(false); };
  });
}
