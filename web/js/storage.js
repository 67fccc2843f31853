// Whether the browser keeps this site's storage (the vault in IndexedDB) until the person
// deletes it.  WebKit (Safari, every browser on iPhone and iPad) may delete the
// script-writable storage of a site not used for 7 days, and every engine may evict
// "best-effort" storage under pressure; navigator.storage.persist() asks for an exemption.
// It is asked once a vault exists on this device (create, login); Settings show the answer
// and, when storage is not persistent, a warning with a one-tap export and sync.

/** @type {Promise<boolean | null> | null} */
let request = null;    // this page's persist() request: a promise of true, false or null
let waiting = false;   // it has no answer yet

/** Ask the browser to keep this site's storage; resolves to the answer (null: no API). */
export function requestPersistence() {
  const storage = navigator.storage;
  if (!storage?.persist || !storage.persisted) return Promise.resolve(null);
  if (!request) {
    // Firefox asks the person with a prompt, so the answer may take long: nobody awaits it
    waiting = true;
    request = storage.persisted()
      .then((yes) => yes || storage.persist())
      .catch(() => null)
      .finally(() => { waiting = false; });
  }
  return request;
}

/**
 * What Settings say: `persisted` (true, false; null where the browser has no
 * StorageManager), and `waiting` while this page's request has no answer yet.
 */
export async function persistence() {
  const storage = navigator.storage;
  if (!storage?.persisted) return { persisted: null, waiting: false };
  const persisted = await storage.persisted().catch(() => null);
  return { persisted, waiting: waiting && !persisted };
}
