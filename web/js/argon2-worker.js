// Argon2id of an unlock's or a create's passphrase on a thread of its own (client.js), started
// the moment the passphrase is submitted: the vault worker's thread may still be booting Pyodide.
// Takes a create's salt with the passphrase, reads an unlock's from IndexedDB itself; answers {master} (null: no vault here) or
// {error}, once, then closes, and with it the memory that held the passphrase.
import { ARGON2, argon2id } from "./glue.js";
import { idb_salt } from "./idb.js";

self.onmessage = async (e) => {
  try {
    // a create's fresh salt comes with the passphrase; an unlock's is the vault's
    const salt = e.data.salt instanceof Uint8Array ? e.data.salt : await idb_salt();
    // a copy of its own, so that transferring it moves nothing else
    const master = salt ? (await argon2id(new TextEncoder().encode(e.data.passphrase), salt, ARGON2)).slice() : null;
    self.postMessage({ master }, master ? [master.buffer] : []);
  } catch (/** @type {any} */ err) {
    self.postMessage({ error: String(err.message || err) });
  }
  self.close();
};
