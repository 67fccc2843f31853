// The settings screen: the sync server link and keeping this vault (storage.js: what the
// browser, the server and an installed app mean for it; the Install button; an iPhone's "Add to
// Home Screen" tip), backup and transfer (views/transfer.js), records import with a preview
// (views/records.js), import from ChatGPT, Claude or Gemini (views/import_from.js), the public
// log as this device last verified it (in a sentence; the checkpoint and its root behind
// Details; a warning when the server's log failed a check: ownmem.vault.logwatch), auto-lock
// minutes, and what this device holds (how it encrypts and signs behind "Advanced").

import { el, errorText, focusTitle, main, mount, notice, q, refuse, role, setBusy, showError, showProgress, tpl } from '../dom.js';
import { NAME_RE, dateTime, plural, serverUrl, thisDeviceLabel } from '../format.js';
import { defineScreen, showView } from '../nav.js';
import {
  bootInfo, currentSession, currentView, entries, idleMinutes, isCurrent, isLinked, on, rememberName, rememberedName,
  setIdleMinutes, syncStatus, vaultName,
} from '../state.js';
import {
  canInstall, install, isAppleMobile, isInstalled, onInstallChange, persistence, storageMessage,
} from '../storage.js';
import { call, refreshStatus } from '../vault.js';
import { renderHeader, syncNow } from './syncstatus.js';
import { wireImportFrom } from './import_from.js';
import { wireRecords } from './records.js';
import { wireTransfer } from './transfer.js';
import { passkeysPanel } from './passkeys.js';
import { recoverySheet } from './recovery.js';
import { signOutPanel } from './signout.js';
import { passphrasePanel } from './passphrase.js';
import { devicesPanel } from './devices.js';

/** @import { Provider } from '../../types/protocol' */

function showSettings() {
  const node = mount(tpl('tpl-settings'));
  role(node, 'back').addEventListener('click', () => showView('memories'));
  wireTransfer(node);
  wireRecords(role(node, 'records'));
  wireImportFrom(role(node, 'import-from'));
  wireLink(node);
  wireIdle(role(node, 'idle-form'));
  role(node, 'idle-form').closest('section')?.after(passkeysPanel());   // beside auto-lock: how this device unlocks
  showFacts(role(node, 'facts'));
  showLog(role(node, 'log'));
  showStorage(node, role(node, 'storage'));
  if (isLinked()) role(node, 'facts').closest('section')?.before(devicesPanel());   // views/devices.js
  // last on the screen, after "This device": the passphrase, the recovery sheet, then leaving this browser
  role(node, 'facts').closest('section')?.after(passphrasePanel(), recoverySheet({ name: vaultName(), server: syncStatus().server, newKit: true }),
    signOutPanel({ memories: () => entries().length, onExport: () => role(node, 'export').click() }));
  focusTitle(node);
}

// Keeping the vault (storage.js storageMessage): whether this browser keeps it, whether the
// server has a copy, the app installed or not.  At risk (the only copy, and the browser may
// delete it) it is the screen's first panel, with Export; otherwise it follows the sync server's.
// The Install button shows while the browser offers to install the app (Chromium), and the
// "Add to Home Screen" tip on an iPhone or iPad's Safari.
/**
 * @param {HTMLElement} node
 * @param {HTMLElement} panel
 */
async function showStorage(node, panel) {
  const line = role(panel, 'storage-state');
  const warning = role(panel, 'storage-warning');
  role(warning, 'storage-export').onclick = () => {
    role(node, 'export').click();
    role(node, 'export-progress').scrollIntoView({ block: 'nearest' });
  };
  const sync = role(warning, 'storage-sync');
  sync.hidden = !isLinked();
  sync.onclick = () => syncNow('manual').then(
    (/** @type {unknown} */ r) => r && notice('Synced: the server holds a sealed copy of this vault.'),
    (/** @type {unknown} */ ex) => notice(`The sync failed: ${errorText(ex)} Export a copy, or try Sync again later.`, { persist: true }));
  wireInstall(panel);
  const session = currentSession();
  const { persisted, waiting } = await persistence();
  if (!isCurrent(session) || !panel.isConnected) return;
  const m = storageMessage({ persisted, waiting, linked: isLinked(), installed: isInstalled(), apple: isAppleMobile() });
  line.dataset.persisted = String(persisted);
  line.dataset.level = m.level;
  line.replaceChildren(el('strong', { text: m.line }));
  role(warning, 'storage-detail').textContent = m.detail;
  warning.hidden = m.level === 'kept';
  warning.classList.toggle('callout-warn', m.level === 'at-risk');
  role(panel, 'home-screen-tip').hidden = !m.homeScreenTip;
  if (m.level !== 'at-risk') q(node, '[data-role="link-form"]')?.closest('section')?.after(panel);
}

/** @param {HTMLElement} panel */
function wireInstall(panel) {
  const box = role(panel, 'install');
  box.hidden = !canInstall();
  role(box, 'install-button').onclick = async () => {
    const outcome = await install();
    if (outcome === 'accepted') notice('Installed: open ownmem from your home screen or app list.');
    box.hidden = !canInstall();
  };
}

// the offer may come (or go: installed) while Settings show
onInstallChange(() => {
  const box = currentView() === 'settings' && role(main, 'install');
  if (box) box.hidden = !canInstall();
});

/** @param {HTMLElement} panel */
async function showLog(panel) {
  const facts = role(panel, 'log-facts');
  const problem = role(panel, 'log-problem');
  const state = role(panel, 'log-state');
  const session = currentSession();
  let st;
  try {
    st = (await call('log')).status;
  } catch (ex) {
    if (isCurrent(session) && panel.isConnected) state.textContent = `Could not read the log status: ${errorText(ex)}`;
    return;
  }
  if (!isCurrent(session) || !panel.isConnected) return;
  problem.hidden = !st?.problem;
  // a log that failed a check is the first thing the screen shows
  if (st?.problem) q(/** @type {HTMLElement} */ (panel.parentElement), '.screen-head').after(panel);
  problem.textContent = st?.problem
    ? `The server's public log failed a check: ${st.problem}. Your memories on this device are unchanged; the server may be faulty or tampered with.`
    : '';
  if (!st) {
    state.textContent = isLinked() ? 'Not checked yet: this device checks the server\'s log at its next sync.'
      : 'Not linked: there is no public log to check.';
    return;
  }
  // in words first; the checkpoint, its root hash and the rest behind Details
  state.textContent = `Every sync checks that the server's record of your changes was only added to, never rewritten. ${
    st.checked_at ? `Last check passed ${dateTime(st.checked_at)}.` : 'No check has passed yet.'}`;
  role(panel, 'log-details').hidden = false;
  /** @type {[string, HTMLElement][]} */
  const rows = [
    ['Log', el('dd', { text: st.origin || 'unknown' })],
    ['Checkpoint (receipts in the log)', el('dd', { 'data-role': 'log-size', 'data-size': String(st.size), text: plural(st.size, 'receipt') })],
    ['Root hash', el('dd', {}, el('code', { 'data-role': 'log-root', title: st.root_hash, text: st.root_hash ? `${st.root_hash.slice(0, 16)}…` : '—' }))],
    ['Last passed check', el('dd', { 'data-role': 'log-checked', text: st.checked_at ? dateTime(st.checked_at) : 'never' })],
    ['Other devices compared', el('dd', { text: String(st.compared_devices ?? 0) })],
  ];
  facts.replaceChildren(...rows.flatMap(([k, dd]) => [el('dt', { text: k }), dd]));
}

/** @param {HTMLElement} node */
function wireLink(node) {
  const link = role(node, 'link-form');
  link.elements.server.value = syncStatus().server || location.origin;
  link.elements.name.value = syncStatus().name || rememberedName() || '';
  describeLink(node);
  link.addEventListener('submit', async (/** @type {SubmitEvent} */ e) => {
    e.preventDefault();
    const err = role(link, 'error');
    showError(err, '');
    const server = serverUrl(link.elements.server.value);
    const name = link.elements.name.value.trim();
    if (!server) return showError(err, 'Enter the server address, for example https://memory.example.org');
    if (!NAME_RE.test(name)) return showError(err, 'The vault name is lower-case letters, digits, dot, dash or underscore, starting with a letter or digit.');
    const progress = role(link, 'progress');
    const session = currentSession();
    setBusy(link, true);
    showProgress(progress, 'Linking…');
    try {
      // a restored backup's keys may hold a vault of another name there: linked back to it
      const linked = (await call('link', { server, name, label: thisDeviceLabel() })).name || name;
      if (!isCurrent(session)) return;
      rememberName(linked);
      link.elements.name.value = linked;
      await refreshStatus();
      showProgress(progress, 'Linked. Syncing…');
      await syncNow('link');
      showProgress(progress, linked === name ? 'Linked and synced.'
        : `This vault is “${linked}” on this server already: linked back to it and synced (no second copy made).`, false);
      describeLink(node);
      showLog(role(node, 'log'));
      renderHeader();
    } catch (ex) {
      if (!isCurrent(session)) return;
      showProgress(progress, '');
      showError(err, errorText(ex));
    } finally {
      if (link.isConnected) setBusy(link, false);
    }
  });
}

/** @param {HTMLElement} node */
function describeLink(node) {
  const s = syncStatus();
  role(node, 'link-state').textContent = isLinked()
    ? `Linked to ${s.server} as “${s.name}”. Changes sync to your other devices.`
    : 'Not linked: this vault lives only in this browser. Link it to a server to use it on your other devices and keep a sealed copy.';
}

/** @param {HTMLFormElement & { elements: Record<string, any> }} idle */
function wireIdle(idle) {
  idle.elements.minutes.value = String(idleMinutes());
  idle.addEventListener('submit', (/** @type {SubmitEvent} */ e) => {
    e.preventDefault();
    const err = role(idle, 'error');
    const v = Number(idle.elements.minutes.value);
    if (!Number.isInteger(v) || v < 1 || v > 1440) {
      return refuse(err, idle.elements.minutes, 'Enter a whole number of minutes from 1 to 1440.');
    }
    showError(err, '');
    setIdleMinutes(v);
    notice(`This vault now locks after ${plural(v, 'idle minute')}.`);
  });
}

/** @param {HTMLElement} facts */
function showFacts(facts) {
  const crypto = role(/** @type {HTMLElement} */ (facts.parentElement), 'crypto-facts');
  /** @type {Provider} */
  const p = bootInfo()?.provider || {};
  const s = syncStatus();
  /** @type {[string, string | null, string?][]} */
  const rows = [
    ['Vault', vaultName()],
    ['Memories', String(entries().length), 'memory-count'],
    ['Stored', 'in this browser, encrypted; readable only while unlocked'],
    ['Sync server', s.server ? `${s.server} (as ${s.name})` : 'not linked'],
  ];
  /** @type {[string, string | null][]} */
  const advanced = [
    ['Storage', 'IndexedDB, each memory sealed with AES-256-GCM under a key of its own'],
    ['Signatures', p.mldsa ? `Ed25519 + ML-DSA-65 (${p.mldsa === 'webcrypto' ? 'built into the browser' : 'JavaScript'})` : null],
    ['Crypto', cryptoLine(p)],
  ];
  for (const [k, v, name] of rows) {
    if (v) facts.append(el('dt', { text: k }), el('dd', { text: v, ...(name ? { 'data-role': name, 'data-testid': name } : {}) }));
  }
  for (const [k, v] of advanced) if (v) crypto.append(el('dt', { text: k }), el('dd', { text: v }));
}

defineScreen('settings', showSettings);
// the count follows the list read again after an import here (or a sync) while Settings show
on('listing', () => {
  const count = currentView() === 'settings' && role(main, 'memory-count');
  if (count) count.textContent = String(entries().length);
});

// Which implementation does each primitive (the worker's feature detection, `boot`'s provider).
/** @param {Provider} p */
function cryptoLine(p) {
  if (!p.aes) return null;
  const by = (/** @type {unknown} */ v) => (v === 'webcrypto' ? 'built into the browser' : 'JavaScript');
  return `${p.jspi ? 'with' : 'without'} WebAssembly JSPI; AES-GCM, AES-KW, HKDF: ${by(p.aes)}; `
    + `Ed25519: ${by(p.ed25519)}; X25519: ${by(p.x25519)}; ML-DSA-65: ${by(p.mldsa)}; Argon2id: hash-wasm (WebAssembly)`
    // without JSPI only the awaited operations use the above; the synchronous rest, JavaScript
    + (p.sync_steps ? '; sync, import, export, sharing: JavaScript' : '');
}
