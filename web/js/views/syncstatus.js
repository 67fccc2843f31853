// The top bar: the vault's name, the sync status line (this device only, online, offline,
// syncing, pending changes, last sync) and its Sync button, the Settings button's pressed
// state, and the warning of what a sync did not apply (the worker's `refusals`: an erasure
// the owner did not sign, a cell that is not what it claims), with its sentences behind a
// disclosure.  Also the syncs the page starts: after every change (scheduleSync), on the
// Sync button (manual), from the settings' link form (syncNow), and back online.  The
// worker's live loop syncs on its own and reports with 'synced' and 'online' events.
//
// The warning stays until dismissed or until a clean sync the person asked for (the Sync
// button): the automatic syncs that follow every write and every server event would
// otherwise clear it before it is read.

import { el, errorText, main, notice, oneLine, q } from '../dom.js';
import { clockTime } from '../format.js';
import { showView } from '../nav.js';
import { call, refreshList, refreshStatus } from '../vault.js';
import {
  clearRefusals, currentSession, currentView, editingId, emit, isCurrent, isLinked, isOnline, isSyncing, isUnlocked,
  noteRefusals, noteSynced, offlineReason, on, setOnline, setSyncing, syncRefusals, syncStatus, vaultName,
} from '../state.js';

/** @import { Events, SyncResult } from '../../types/protocol' */

// the top bar's sync status, in index.html
const dot = /** @type {HTMLElement} */ (document.getElementById('sync-dot'));
const text = /** @type {HTMLElement} */ (document.getElementById('sync-text'));
const box = /** @type {HTMLElement} */ (document.getElementById('sync-status'));
const button = /** @type {HTMLButtonElement} */ (document.getElementById('sync-button'));
const warning = /** @type {HTMLElement} */ (document.getElementById('sync-warning'));
// why the sync stopped when the passphrase was changed on another device (the status line says so)
const PASSPHRASE_CHANGED = 'your passphrase was changed on another device';

export function renderHeader() {
  /** @type {HTMLElement} */ (document.getElementById('vault-title')).textContent = vaultName();
  document.title = `${vaultName()} · ownmem`;
  const sb = /** @type {HTMLElement} */ (document.getElementById('settings-button'));
  sb.setAttribute('aria-pressed', String(currentView() === 'settings'));
  /** @type {HTMLElement} */ (document.getElementById('shares-button')).setAttribute('aria-pressed', String(currentView() === 'shares'));
  /** @type {HTMLElement} */ (document.getElementById('agents-button')).setAttribute('aria-pressed', String(currentView() === 'agents'));
  renderSync();
}

function renderSync() {
  const s = syncStatus();
  let mode;
  let parts;
  if (!isLinked()) {
    mode = 'local';
    parts = ['This device only'];
    if (s.pending) parts.push(`${s.pending} not synced`);
  } else {
    const offline = isOnline() === false || navigator.onLine === false;
    mode = isSyncing() ? 'syncing' : offline ? 'offline' : isOnline() ? 'online' : 'connecting';
    parts = [{ syncing: 'Syncing…', offline: 'Offline', online: 'Online', connecting: 'Connecting…' }[mode]];
    // short: a phone's top bar has room for a word or two; the title and the dialog say why
    if (mode === 'offline' && offlineReason() === PASSPHRASE_CHANGED) parts = ['Paused'];
    if (s.pending) parts.push(`${s.pending} pending`);
    if (s.last_sync) parts.push(`synced ${clockTime(s.last_sync)}`);
    else if (!s.pending) parts.push('not synced yet');
  }
  const line = parts.join(' · ');
  if (text.textContent !== line) text.textContent = line;
  dot.className = `dot dot-${mode}`;
  box.dataset.state = mode;
  box.dataset.pending = String(s.pending || 0);
  box.title = offlineReason() === PASSPHRASE_CHANGED ? `Sync paused: ${PASSPHRASE_CHANGED}`
    : mode === 'offline' && offlineReason() ? `Offline: ${offlineReason()}` : line;
  button.disabled = isSyncing();
  button.textContent = isLinked() ? 'Sync' : 'Link…';
  button.setAttribute('aria-label', isLinked() ? 'Sync now' : 'Link this vault to a sync server');
}

function renderRefusals() {
  const { count, sentences } = syncRefusals();
  warning.hidden = count === 0;
  const list = /** @type {HTMLElement} */ (document.getElementById('sync-warning-list'));
  if (!count) {
    list.replaceChildren();
    /** @type {HTMLDetailsElement} */ (warning.querySelector('details')).open = false;
    return;
  }
  /** @type {HTMLElement} */ (document.getElementById('sync-warning-line')).textContent = count === 1
    ? 'The server sent 1 change this device did not apply.'
    : `The server sent ${count} changes this device did not apply.`;
  list.replaceChildren(...sentences.map((t) => el('li', { text: oneLine(t) })));
}

/**
 * One sync now; a manual or link sync throws its failure, the others only show it.
 * @param {'manual' | 'link' | 'auto'} reason
 * @returns {Promise<SyncResult | null>} null: not linked, failed quietly, or another session's
 */
export async function syncNow(reason) {
  if (!isLinked()) return null;
  const session = currentSession();
  setSyncing(true);
  renderSync();
  try {
    const r = await call('sync');
    if (!isCurrent(session)) return null;
    setOnline(true);
    // its refusals came with its 'synced' event (onSynced); clean, it clears the warning
    if (reason === 'manual' && !(r.refusals && r.refusals.length)) clearRefusals();
    return r;
  } catch (ex) {
    if (!isCurrent(session)) return null;
    const err = /** @type {{ code?: string, message?: string }} */ (ex);
    if (err.code === 'sync') setOnline(false, oneLine(err.message));
    if (err.code === 'passphrase_changed') passphraseChanged();
    if (reason === 'manual' || reason === 'link') throw ex;
    return null;
  } finally {
    if (isCurrent(session)) {
      setSyncing(false);
      await refreshStatus();
      renderSync();
    }
  }
}

/** @type {ReturnType<typeof setTimeout> | undefined} */
let syncTimer;
function scheduleSync() {
  if (!isLinked()) return;
  clearTimeout(syncTimer);
  syncTimer = setTimeout(() => { if (isUnlocked()) syncNow('auto'); }, 800);
}

/** The vault changed here: send it soon, and show the pending count meanwhile. */
export function afterWrite() {
  scheduleSync();
  refreshStatus();
}

/**
 * A change was saved: say so, show the list as it is now, and send it soon.
 * @param {string} message
 */
export async function saved(message) {
  notice(message);
  await refreshList();
  afterWrite();
}

/** @param {Events['synced']} e the worker's event */
export function onSynced(e) {
  if (!isUnlocked()) return;
  noteRefusals(e.refusals);
  setOnline(true);
  noteSynced(e.pending);
  renderSync();
  if (e.pulled || e.erased_here) {
    // another device changed something: show it, but never under an open edit form
    if (editingId() === null) refreshList();
    refreshStatus();
  }
}

/** @param {Events['online']} e the worker's event */
export function onOnline(e) {
  if (!isUnlocked()) return;
  setOnline(Boolean(e.online), e.online ? '' : oneLine(e.message || 'the server cannot be reached'));
  renderSync();
  if (e.code === 'passphrase_changed') passphraseChanged();
}

// The sync stopped because the passphrase was changed on another device (issue 24): the
// status line says so, and views/passphrase.js asks for the new one.
function passphraseChanged() {
  setOnline(false, PASSPHRASE_CHANGED);
  renderSync();
  emit('passphrase-changed');
}

button.addEventListener('click', async () => {
  if (!isLinked()) {
    showView('settings');
    q(main, '#link-server')?.focus();
    return;
  }
  try {
    const r = await syncNow('manual');
    if (!r) return;
    /** @type {string[]} */
    const bits = [];
    if (r.pushed) bits.push(`${r.pushed} sent`);
    if (r.pulled) bits.push(`${r.pulled} received`);
    if (r.erased_here || r.erased_remote) bits.push(`${(r.erased_here || 0) + (r.erased_remote || 0)} erased`);
    if (r.refusals && r.refusals.length) bits.push(`${r.refusals.length} not applied (see above)`);
    notice(bits.length ? `Synced: ${bits.join(', ')}.` : 'Synced: nothing new.');
    if (r.pulled || r.erased_here) refreshList();
  } catch (ex) {
    // a changed passphrase is asked for (views/passphrase.js), not reported as a failure; a removed
    // device stays removed: that is said until dismissed, not for five seconds
    const code = /** @type {{ code?: string }} */ (ex)?.code;
    if (code !== 'passphrase_changed') notice(`Sync failed: ${oneLine(errorText(ex))}`, { persist: code === 'device_removed' });
  }
});

// Back online: send what was written meanwhile now, not at the next change or event.
window.addEventListener('online', () => {
  renderSync();
  if (isUnlocked()) scheduleSync();
});
window.addEventListener('offline', renderSync);

/** @type {HTMLElement} */ (document.getElementById('sync-warning-dismiss')).addEventListener('click', () => {
  clearRefusals();
  button.focus();
});

on('view', renderHeader);
on('refusals', renderRefusals);
on('status', renderHeader);
on('lock', () => {
  clearTimeout(syncTimer);
  renderRefusals();
});
