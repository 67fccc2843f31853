// "Sign out of this browser": remove every store of the vault from this browser (its
// IndexedDB database, the settings in localStorage, Cache Storage other than the app's own
// files), after saying plainly what would be lost: what is not synced, or, unlinked, the
// whole vault unless an export is kept.  "Lock" (app.js) keeps the vault here, closed.
// Offered in Settings and, locked, from "Not you? Use another vault" (views/welcome.js).

import { el, errorText, showError, showProgress } from '../dom.js';
import { idb_clear, idb_delete } from '../idb.js';
import { plural } from '../format.js';
import { call } from '../vault.js';

const SHELL_CACHE = 'ownmem-';         // sw.js's PREFIX: the app's own files, which may stay
const SIGNED_OUT = 'ownmem.signed-out'; // sessionStorage, for the welcome screen's one line

/**
 * What signing out would lose, in words (pure).
 * @param {{ server: string | null, pending: number, memories: number | null }} s
 *   memories: the list's count, null while locked (then the count is unknown)
 * @returns {{ text: string, loses: boolean }}
 */
export function lossText({ server, pending, memories }) {
  if (!server) {
    const what = memories === null ? 'everything in it' : `its ${memoryCount(memories)}`;
    return { loses: true, text: `This vault is only in this browser: ${what} would be lost unless you keep an export (.amem file).` };
  }
  if (pending > 0) {
    return { loses: true, text: `${plural(pending, 'change')} made in this browser (new, edited or forgotten memories) `
      + `${pending === 1 ? 'has' : 'have'} not reached ${server} yet and would be lost. Sync or export first.` };
  }
  return { loses: false, text: `Everything is synced to ${server}: open it again there with the vault's name and passphrase. `
    + 'This browser will no longer hold it.' };
}

/**
 * The sign-out panel: a button, then the confirmation saying what is lost, with Export first
 * (when `onExport` is given: the vault is unlocked), Sign out and Cancel.
 * @param {{ memories: () => number | null, onExport?: () => void, headingLevel?: 'h2' | 'h3' }} options
 * @returns {HTMLElement}
 */
export function signOutPanel({ memories, onExport, headingLevel = 'h2' }) {
  const loss = el('p', { 'data-testid': 'signout-loss' });
  const err = el('p', { class: 'error', 'data-role': 'error', role: 'alert', hidden: true });
  const progress = el('p', { class: 'progress', 'data-role': 'progress', role: 'status', 'aria-live': 'polite', hidden: true });
  const exportBtn = onExport ? el('button', { type: 'button', class: 'btn', 'data-testid': 'signout-export', text: 'Export .amem first', onclick: onExport }) : null;
  const cancel = el('button', { type: 'button', class: 'btn btn-ghost', 'data-testid': 'signout-cancel', text: 'Cancel',
    onclick: () => { confirm.hidden = true; open.focus(); } });
  const confirm = el('div', { class: 'callout callout-warn', 'data-testid': 'signout-confirm', hidden: true },
    loss,
    el('div', { class: 'actions' },
      exportBtn,
      el('button', { type: 'button', class: 'btn btn-danger', 'data-testid': 'signout-confirm-button', text: 'Sign out and remove from this browser', onclick: () => go() }),
      cancel),
    err, progress);
  const open = el('button', { type: 'button', class: 'btn', 'data-testid': 'signout-button', text: 'Sign out of this browser…', onclick: () => ask() });
  const panel = el('section', { class: 'panel', 'aria-labelledby': 'signout-title', 'data-testid': 'signout-panel' },
    el(headingLevel, { id: 'signout-title', class: 'panel-title', text: 'Leave this browser' }),
    el('p', { class: 'muted', text: 'Lock keeps the vault here, closed. Signing out removes it from this browser: use it after borrowing a computer, or to start over.' }),
    el('div', { class: 'actions' }, open),
    confirm);

  async function ask() {
    showError(err, '');
    let st;
    try {
      st = await call('status');
    } catch (ex) {
      showError(err, `Could not tell what is synced: ${errorText(ex)}`);
      confirm.hidden = false;
      loss.textContent = 'This browser cannot say what is synced: what is not synced or exported would be lost.';
      return;
    }
    const { text, loses } = lossText({ server: st.server, pending: st.pending, memories: memories() });
    loss.textContent = text;
    confirm.hidden = false;
    // where losing something is possible, the safe step has the focus
    (exportBtn && loses ? exportBtn : cancel).focus();
  }

  async function go() {
    showError(err, '');
    for (const b of confirm.querySelectorAll('button')) b.disabled = true;
    showProgress(progress, 'Removing the vault from this browser…');
    try {
      await signOut();
    } catch (ex) {
      for (const b of confirm.querySelectorAll('button')) b.disabled = false;
      showProgress(progress, '');
      showError(err, `Sign-out did not finish: ${errorText(ex)}`);
      return;
    }
    location.replace(location.pathname + location.search);   // a fresh start: the welcome screen
  }
  return panel;
}

// The removal itself: the worker locked (its live sync stopped), every IndexedDB record
// cleared and the database deleted, the vault's settings in localStorage and sessionStorage
// gone, and Cache Storage but the app's own files.  The page is loaded again after it.
export async function signOut() {
  try {
    await call('lock');
  } catch {
    // a worker that does not answer holds nothing the steps below leave behind
  }
  await idb_clear();
  await idb_delete();
  for (const store of [localStorage, sessionStorage]) {
    for (const k of Object.keys(store)) if (k.startsWith('ownmem')) store.removeItem(k);
  }
  if (globalThis.caches) {
    for (const name of await caches.keys()) if (!name.startsWith(SHELL_CACHE)) await caches.delete(name);
  }
  sessionStorage.setItem(SIGNED_OUT, '1');
}

/** @param {number} n */
export function memoryCount(n) {
  return n === 1 ? '1 memory' : `${n} memories`;
}

/** Whether the page was just loaded again by a sign-out (asked once: the mark goes). */
export function justSignedOut() {
  const was = sessionStorage.getItem(SIGNED_OUT) === '1';
  sessionStorage.removeItem(SIGNED_OUT);
  return was;
}
