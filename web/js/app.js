// ownmem web app: the page.  Plain DOM and ES modules, no framework; every vault operation
// goes to the module worker through VaultClient (docs/web.md "Worker operations").
//
// This module starts the page (boot screen, then welcome or unlock), locks it (the Lock
// button, auto-lock after idle minutes) and holds the keys of the top bar.  The rest:
//   state.js           the page's state behind accessors, and its events
//   vault.js           the one VaultClient, and the list and status read through it
//   nav.js             which screen of the open vault shows; entering the vault
//   dom.js, format.js  DOM helpers; how values read
//   dialog.js          the one confirm dialog (forget, keep a version)
//   passphrase.js      the create form's strength estimate
//   views/welcome.js   welcome (create, or use a vault from a server) and unlock
//   views/list.js      the memories: add, search, filters, the list; views/card.js one
//                      card (and forget); views/editor.js editing in place
//   views/conflicts.js concurrent versions, keep one
//   views/settings.js  settings; views/transfer.js export and import
//   views/shares.js    sharing between people: offered by and to this vault, shared memories
//   views/agents.js    the agent service's sessions (revoke now), staged agent writes, registered agents
//   views/receipts.js  a memory's receipts in the public log (its card's details)
//   views/syncstatus.js the top bar: vault name, sync status, syncs the page starts
//
// Rules the page keeps:
//   - the passphrase is read from its field, sent to the worker once, and the field is
//     emptied; it is never stored (localStorage holds settings only), logged or rendered;
//   - decrypted text is only in state.js's listing and the DOM of the unlocked screens;
//     lock() drops both before it asks the worker to drop its keys;
//   - no innerHTML with data: content is set with textContent only;
//   - no inline script or style (the CSP forbids both): classes and the `hidden` attribute.

import { anyDialogOpen } from './dialog.js';
import { main, mount, notice, role, showError, tpl, topbar } from './dom.js';
import { plural } from './format.js';
import { showView } from './nav.js';
import {
  bootInfo, currentView, endSession, idleMinutes, isUnlocked, on,
} from './state.js';
import { watchInstall } from './storage.js';
import { call, connect } from './vault.js';
import './views/list.js';
import './views/conflicts.js';
import './views/settings.js';
import './views/shares.js';
import './views/agents.js';
import { onOnline, onSynced } from './views/syncstatus.js';
import { showUnlock, showWelcome } from './views/welcome.js';

// ------------------------------------------------------------------ boot

function showBoot() {
  topbar.hidden = true;
  const node = mount(tpl('tpl-boot'));
  const slow = setTimeout(() => {
    const d = role(node, 'boot-detail');
    if (d.isConnected) {
      d.textContent = 'Still preparing: the first start loads the vault engine; later starts are quick and work offline.';
    }
  }, 8000);
  return () => clearTimeout(slow);
}

/** @param {string} message */
function bootFailed(message) {
  // the welcome or unlock form may be showing already (they do not wait for the engine)
  if (!role(main, 'boot-error')) mount(tpl('tpl-boot'));
  const err = role(main, 'boot-error');
  /** @type {HTMLElement} */ (main.querySelector('#boot-title')).textContent = 'The secure workspace could not start';
  role(main, 'boot-detail').textContent = 'Reload the page to try again. If it keeps failing, this browser may lack a feature ownmem needs (module workers, WebAssembly, IndexedDB).';
  showError(err, message);
}

// The vault engine's files arriving (the worker's `loading` events): one bar, above whichever
// screen shows (the boot screen, then the welcome or unlock form, usable meanwhile), gone
// once the engine is ready.  Its numbers are the engine's files' bytes as sent (worker.js).
const loading = /** @type {HTMLElement} */ (document.getElementById('engine-progress'));
const loadingBar = /** @type {HTMLProgressElement} */ (document.getElementById('engine-progress-bar'));
const loadingText = /** @type {HTMLElement} */ (document.getElementById('engine-progress-text'));

let engineReady = false;

/** @param {{ loaded: number, total: number }} e */
function showLoading({ loaded, total }) {
  if (!(total > 0) || engineReady) return;
  loading.hidden = false;
  loadingBar.max = total;
  loadingBar.value = Math.min(loaded, total);
  // every byte in: what is left is Pyodide's own start (compiling, then starting CPython)
  loadingText.textContent = loaded < total
    ? `Loading the vault engine: ${megabytes(loaded)} of ${megabytes(total)} MB`
    : 'Starting the vault engine…';
}

/** @param {number} bytes */
const megabytes = (bytes) => (bytes / 1e6).toFixed(1);

// The service worker is registered once the engine has started and its files are kept in the
// cache the service worker fills (worker.js `kept`): its install takes those, and the page's
// own files from the HTTP cache (sw.js), so each file is downloaded once.  A page it already
// controls registers at once (an update check).
let registered = false;
function registerServiceWorker() {
  if (registered || !('serviceWorker' in navigator) || !window.isSecureContext) return;
  registered = true;
  navigator.serviceWorker.register('/sw.js').catch(() => {
    // offline support unavailable (private mode, unsupported); the app still works online
  });
}

async function start() {
  performance.mark('ownmem:app');   // every module of the page loaded (client.js: start-up marks)
  if (navigator.serviceWorker?.controller) registerServiceWorker();
  const done = showBoot();
  let client;
  try {
    client = connect();
  } catch (err) {
    done();
    bootFailed(/** @type {Error} */ (err).message);
    return;
  }
  client.on('loading', showLoading);
  client.on('ready', () => {
    engineReady = true;
    loading.hidden = true;
  });
  client.on('kept', registerServiceWorker);
  let failed = false;
  client.on('failed', (e) => {
    failed = true;
    loading.hidden = true;
    if (!bootInfo()) bootFailed(e.message);
  });
  client.on('synced', onSynced);
  client.on('online', onOnline);
  // Whether a vault is in this browser is read from IndexedDB without the engine, so its
  // unlock form, or the welcome's create form, shows at once while the engine still loads;
  // a passphrase's Argon2id runs beside it (client.js), and the submit waits for the engine.
  // What `boot` tells is fetched once the vault is open (nav.js enterVault).
  let stored = false;
  try {
    stored = (await call('probe')).vault === true;
  } catch {
    stored = false;
  }
  done();
  if (failed) return;   // the boot screen says why
  if (stored) {
    showUnlock();
    performance.mark('ownmem:unlock-form');
  } else {
    showWelcome('create');
    performance.mark('ownmem:welcome-form');
  }
}

// ------------------------------------------------------------------ lock, auto-lock

/** @param {'button' | 'idle'} reason */
async function lock(reason) {
  // Drop every decrypted byte the page holds: the data, the DOM showing it, open dialogs
  // (state.js endSession, and the views on its 'lock' event).
  if (!endSession()) return;
  notice('');
  main.replaceChildren();
  topbar.hidden = true;
  document.title = 'ownmem';
  showUnlock(reason === 'idle'
    ? `Locked after ${plural(idleMinutes(), 'idle minute')}. Enter your passphrase to open it again.`
    : 'Locked. Enter your passphrase to open it again.');
  try {
    await call('lock');
  } catch {
    // the worker drops its keys with its state either way
  }
}

/** @type {HTMLElement} */ (document.getElementById('lock-button')).addEventListener('click', () => lock('button'));
/** @type {HTMLElement} */ (document.getElementById('settings-button')).addEventListener('click', () => {
  showView(currentView() === 'settings' ? 'memories' : 'settings');
});
/** @type {HTMLElement} */ (document.getElementById('shares-button')).addEventListener('click', () => {
  showView(currentView() === 'shares' ? 'memories' : 'shares');
});
/** @type {HTMLElement} */ (document.getElementById('agents-button')).addEventListener('click', () => {
  showView(currentView() === 'agents' ? 'memories' : 'agents');
});

let lastActivity = Date.now();
for (const type of ['pointerdown', 'keydown', 'wheel', 'touchstart', 'input']) {
  window.addEventListener(type, () => { lastActivity = Date.now(); }, { passive: true, capture: true });
}
on('open', () => { lastActivity = Date.now(); });

function checkIdle() {
  if (isUnlocked() && Date.now() - lastActivity >= idleMinutes() * 60000) lock('idle');
}
setInterval(checkIdle, 10000);
document.addEventListener('visibilitychange', checkIdle);

// Escape leaves the settings, shares, agents and conflicts views (outside a field); <dialog> closes itself.
document.addEventListener('keydown', (e) => {
  const view = currentView();
  if (e.key === 'Escape' && isUnlocked() && ['settings', 'shares', 'agents', 'conflicts'].includes(view)
      && !anyDialogOpen() && !e.defaultPrevented && !/** @type {Element} */ (e.target).closest?.('input, select, textarea')) {
    showView('memories');
  }
});

// ------------------------------------------------------------------ service worker, start

// the browser's install offer (Chromium) may come at any time after load: kept for Settings' Install
watchInstall();

start();
