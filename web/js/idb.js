// IndexedDB for the vault store (docs/web.md "Storage"): one object store per table of
// the vault's SQLite schema, one record per row (CBOR bytes, opaque here), plus the
// encrypted verified-plaintext cache.  Every write is one readwrite transaction with
// strict durability, so a crash loses at most the operation in flight.

const NAME = "ownmem";
const VERSION = 1;
export const STORES = ["meta", "scopes", "known_keys", "revoked_keys", "objects", "erased", "cells",
  "erase_outbox", "sync_state", "cache"];

let opening = null;

function db() {
  if (!opening) {
    opening = new Promise((resolve, reject) => {
      const req = indexedDB.open(NAME, VERSION);
      req.onupgradeneeded = () => {
        for (const s of STORES) {
          if (!req.result.objectStoreNames.contains(s)) req.result.createObjectStore(s);
        }
      };
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
  }
  return opening;
}

function done(tx) {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error || new Error("IndexedDB transaction aborted"));
  });
}

function request(req) {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

// -> {table: [[key, Uint8Array], ...]} for every table of the vault store
export async function idb_load_all() {
  const d = await db();
  const tables = STORES.filter((s) => s !== "cache");
  const tx = d.transaction(tables, "readonly");
  const out = {};
  await Promise.all(tables.map(async (t) => {
    const store = tx.objectStore(t);
    const [keys, values] = await Promise.all([request(store.getAllKeys()), request(store.getAll())]);
    out[t] = keys.map((k, i) => [k, values[i]]);
  }));
  return out;
}

// Parallel arrays: values[i] null deletes keys[i] from tables[i].
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

export async function idb_get(table, key) {
  const d = await db();
  const v = await request(d.transaction([table], "readonly").objectStore(table).get(key));
  return v === undefined ? null : v;
}

export async function idb_put(table, key, value) {
  const d = await db();
  const tx = d.transaction([table], "readwrite", { durability: "strict" });
  tx.objectStore(table).put(value, key);
  await done(tx);
}

// Removes every record: the "remove this vault from this browser" setting.
export async function idb_clear() {
  const d = await db();
  const tx = d.transaction(STORES, "readwrite", { durability: "strict" });
  for (const s of STORES) tx.objectStore(s).clear();
  await done(tx);
}
