// Which screen of the open vault shows (memories, conflicts, settings), and entering the
// vault once a welcome or unlock form opened it.  The screens register themselves with
// defineScreen, so that the views can switch screens without importing each other; the top
// bar follows the 'view' event.

import { call, refreshList, refreshStatus } from './vault.js';
import { main, q, topbar } from './dom.js';
import { beginSession, bootInfo, emit, isUnlocked, setBootInfo, setView } from './state.js';

/** @type {Map<string, () => void>} */
const screens = new Map();

/**
 * @param {string} name
 * @param {() => void} show renders the screen into main
 */
export function defineScreen(name, show) {
  screens.set(name, show);
}

/** @param {string} view a screen's name (defineScreen) */
export function showView(view) {
  setView(view);
  /** @type {() => void} */ (screens.get(view))();
  emit('view');
}

export async function enterVault() {
  beginSession();
  topbar.hidden = false;
  emit('view');
  /** @type {() => void} */ (screens.get('memories'))();
  await Promise.all([refreshList(), refreshStatus()]);
  if (!bootInfo()) {
    // the unlock form came before the vault engine's boot (app.js start): what it tells, now
    call('boot').then(setBootInfo, () => {});
  }
  // a touch screen would pop up its keyboard: focus the first field only with a mouse
  if (isUnlocked() && matchMedia('(pointer: fine)').matches) q(main, '#add-content')?.focus();
}
