// Whether the browser keeps this site's storage (the vault in IndexedDB) until the person
// deletes it, whether the app is installed, and what Settings say about both.  WebKit (Safari,
// every browser on iPhone and iPad) may delete the script-writable storage of a site not used
// for 7 days (a web app opened from the Home Screen is kept out of that), and every engine may
// evict "best-effort" storage under pressure; navigator.storage.persist() asks for an
// exemption.  It is asked once a vault exists on this device (create, login).
//
// The install offer: Chromium fires `beforeinstallprompt` when the app can be installed;
// watchInstall() keeps the event so that Settings' Install button can show the browser's
// prompt.  Other browsers never fire it, and there the button stays hidden.

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
 * What the browser answers now: `persisted` (true, false; null where the browser has no
 * StorageManager), and `waiting` while this page's request has no answer yet.
 */
export async function persistence() {
  const storage = navigator.storage;
  if (!storage?.persisted) return { persisted: null, waiting: false };
  const persisted = await storage.persisted().catch(() => null);
  return { persisted, waiting: waiting && !persisted };
}

// ------------------------------------------------------------------ install

/**
 * Chromium's install prompt event (not in TypeScript's DOM library).
 * @typedef {Event & { prompt(): Promise<void>, userChoice: Promise<{ outcome: 'accepted' | 'dismissed' }> }} InstallPromptEvent
 */

/** @type {InstallPromptEvent | null} */
let offer = null;
let installedHere = false;   // `appinstalled` fired on this page
/** @type {Set<() => void>} */
const listeners = new Set();
const changed = () => { for (const f of listeners) f(); };

/** Keep the browser's install offer (called once, at start: the event may come early). */
export function watchInstall() {
  window.addEventListener('beforeinstallprompt', (e) => {
    e.preventDefault();      // no mini-infobar: the offer is Settings' Install button
    offer = /** @type {InstallPromptEvent} */ (e);
    changed();
  });
  window.addEventListener('appinstalled', () => {
    offer = null;
    installedHere = true;
    changed();
  });
}

/** @param {() => void} f called when the offer comes or goes; returns the unsubscribe */
export function onInstallChange(f) {
  listeners.add(f);
  return () => listeners.delete(f);
}

/** The app runs installed: in a window of its own, or from an iPhone's Home Screen. */
export function isInstalled() {
  return installedHere || matchMedia('(display-mode: standalone)').matches
    || /** @type {{ standalone?: boolean }} */ (navigator).standalone === true;
}

/** The browser offers to install the app now. */
export function canInstall() {
  return offer !== null && !isInstalled();
}

/** Show the browser's install prompt; its answer, or null when there is no offer. */
export async function install() {
  const e = offer;
  if (!e) return null;
  offer = null;              // a prompt can be shown once
  await e.prompt();
  const { outcome } = await e.userChoice;
  changed();
  return outcome;
}

/** iPhone or iPad (an iPad's Safari says "Macintosh", with touch): WebKit's 7-day rule, and
 * "Add to Home Screen" as the way out of it. */
export function isAppleMobile() {
  const ua = navigator.userAgent;
  return /iPhone|iPad|iPod/.test(ua) || (/Macintosh/.test(ua) && navigator.maxTouchPoints > 1);
}

// ------------------------------------------------------------------ what Settings say

/**
 * @typedef {object} StorageFacts
 * @property {boolean | null} persisted the browser's answer (null: it cannot say)
 * @property {boolean} waiting this page asked and the person has not answered yet
 * @property {boolean} linked the vault syncs to a server, which keeps a sealed copy
 * @property {boolean} installed the app runs installed (standalone)
 * @property {boolean} apple an iPhone or iPad
 */

/**
 * @typedef {object} StorageMessage
 * @property {'kept' | 'synced' | 'at-risk'} level kept: the browser keeps it; synced: it may not,
 *   but the server has a copy; at-risk: this browser holds the only copy and may delete it
 * @property {string} line the first sentence
 * @property {string} detail what it means and what to do ('' when kept)
 * @property {boolean} homeScreenTip show the iPhone "Add to Home Screen" tip
 */

/**
 * What Settings say about keeping the vault: pure, from the facts (tests/browser/agents_text.test.mjs).
 * @param {StorageFacts} f
 * @returns {StorageMessage}
 */
export function storageMessage(f) {
  // Home Screen apps on iPhone are kept out of Safari's 7-day deletion: the tip is for Safari only
  const homeScreenTip = f.apple && !f.installed;
  const safari = f.apple && !f.installed ? ' Safari also deletes a website\'s data after 7 days without a visit.' : '';
  if (f.persisted === true) {
    return {
      level: 'kept',
      line: f.linked ? 'This browser keeps the vault until you delete it, and the server keeps a sealed copy.'
        : 'This browser keeps the vault until you delete it.',
      detail: '',
      homeScreenTip: false,
    };
  }
  const asked = f.waiting ? ' The browser is asking you whether to keep it.' : '';
  if (f.linked) {
    return {
      level: 'synced',
      line: 'The server keeps a sealed copy of this vault.',
      detail: `This browser may clear its copy to free space.${safari} If it does, open the vault again from the server with its name and your passphrase; sync first so the server has everything.${asked}`,
      homeScreenTip,
    };
  }
  return {
    level: 'at-risk',
    line: 'This browser may delete this vault.',
    detail: `The vault lives only in this browser, which may clear it to free space.${safari} Keep a copy: export it, or link it to a sync server below.${asked}`,
    homeScreenTip,
  };
}
