// The page's one VaultClient (client.js) and what the page reads through it: the list
// and the status, each into state.js, which tells the views (its 'listing', 'added' and
// 'status' events).  An answer that comes back for an older session is dropped.

import { VaultClient } from './client.js';
import { errorText, notice, oneLine } from './dom.js';
import {
  currentSession, insertEntry, isCurrent, isLoaded, isUnlocked, setListing, setSyncStatus, showsUnverified,
} from './state.js';

/** @import { Call, Entry, Events } from '../types/protocol' */

/** @type {VaultClient} set by connect(), before anything here is called */
let client = /** @type {any} */ (null);

/** Start the vault worker; throws where the browser cannot (no module workers). */
export function connect() {
  client = new VaultClient();
  return client;
}

/**
 * One worker operation (docs/web.md "Worker operations"; typed in web/types/protocol.d.ts).
 * @type {Call}
 */
export function call(op, args) {
  return client.call(op, /** @type {any} */ (args));   // checked against Call above
}

/**
 * Subscribe to a worker event (e.g. 'progress' of a long operation); returns the unsubscribe.
 * @template {keyof Events} E
 * @param {E} event
 * @param {(data: Events[E]) => void} fn
 */
export function onWorkerEvent(event, fn) {
  return client.on(event, fn);
}

// The vault code closes its store when a passphrase is refused (the CLI's store is one
// per attempt; the worker's is shared), which leaves the worker unable to try again.
// Probe it, and start a fresh worker if it no longer answers.
export async function healAfterRefusal() {
  try {
    await client.call('boot');
  } catch {
    client.restart();
  }
}

// Memories that cannot be authenticated come from the worker only while the person asked
// for them (state.js showsUnverified): otherwise their text never reaches the page.  An
// answer to a question asked before the toggle changed is dropped.
export async function refreshList() {
  const session = currentSession();
  const unverified = showsUnverified();
  try {
    const r = await client.call('list', { include_unverified: unverified });
    if (!isCurrent(session) || !isUnlocked() || unverified !== showsUnverified()) return;
    setListing(r);
  } catch (ex) {
    if (!isCurrent(session)) return;
    notice(`Could not read the vault: ${oneLine(errorText(ex))}`);
  }
}

/**
 * An add's answer: the new memory joins the list without reading the whole vault again.
 * @param {{ entry?: Entry } | null | undefined} r
 */
export async function showAdded(r) {
  if (r && r.entry && isLoaded()) insertEntry(r.entry);
  else await refreshList();
}

export async function refreshStatus() {
  const session = currentSession();
  try {
    const s = await client.call('status');
    if (!isCurrent(session) || !isUnlocked()) return;
    setSyncStatus(s);
  } catch {
    // the next event or action tries again
  }
}
