// "Your devices" in Settings (docs/decisions.md "15.7. Device and Key Revocation"): every device
// that opens this vault has a key of its own (made on it, added at its first sync); the list shows
// each one's name, when it was added and last synced, and which is this browser. Removing a lost
// one asks for the passphrase again (the vault's keys are renewed under it, so a typo is refused
// before anything changes), offers "also change the passphrase", and says plainly what the removed
// device keeps. The worker's ops: `devices`, `device_remove` (ownmem.web.api).

import { el, errorText, showError, showProgress } from '../dom.js';
import { dateTime } from '../format.js';
import { call } from '../vault.js';

/** @import { DeviceRow } from '../../types/protocol' */

/**
 * One device's line of facts (pure).
 * @param {DeviceRow} d
 * @returns {string}
 */
export function deviceFacts(d) {
  const synced = d.last_sync ? `last synced ${dateTime(d.last_sync)}` : 'never synced';
  return `ID ${d.id.slice(0, 8)} · added ${dateTime(d.added_at)}, ${synced}`;
}

/**
 * The panel: the list, each other device with its Remove button, and the removal's confirmation.
 * @returns {HTMLElement}
 */
export function devicesPanel() {
  const list = el('ul', { class: 'device-list', 'data-testid': 'devices-list' });
  const state = el('p', { class: 'muted', 'data-testid': 'devices-state', text: 'Loading the devices…' });
  const err = el('p', { class: 'error', role: 'alert', 'data-testid': 'devices-error', hidden: true });
  const progress = el('p', { class: 'progress', role: 'status', 'aria-live': 'polite', hidden: true });
  const keeps = el('p', { 'data-testid': 'device-keeps' });
  const target = el('p', { 'data-testid': 'device-remove-target' });
  const pass = el('input', { id: 'device-pass', type: 'password', autocomplete: 'current-password', required: true,
    spellcheck: 'false', autocapitalize: 'off', 'data-testid': 'device-passphrase' });
  const also = el('input', { type: 'checkbox', 'data-testid': 'device-new-passphrase-check' });
  const newPass = el('input', { id: 'device-new-pass', type: 'password', autocomplete: 'new-password',
    spellcheck: 'false', autocapitalize: 'off', 'data-testid': 'device-new-passphrase' });
  const newPass2 = el('input', { id: 'device-new-pass2', type: 'password', autocomplete: 'new-password',
    spellcheck: 'false', autocapitalize: 'off', 'data-testid': 'device-new-passphrase2' });
  const newFields = el('div', { hidden: true },
    el('div', { class: 'field' }, el('label', { for: 'device-new-pass', text: 'New passphrase' }), newPass),
    el('div', { class: 'field' }, el('label', { for: 'device-new-pass2', text: 'New passphrase again' }), newPass2));
  also.addEventListener('change', () => { newFields.hidden = !also.checked; });
  /** @type {DeviceRow | null} */
  let chosen = null;
  const cancel = el('button', { type: 'button', class: 'btn btn-ghost', text: 'Cancel', 'data-testid': 'device-remove-cancel',
    onclick: () => close() });
  const confirm = el('form', { class: 'callout callout-warn', 'data-testid': 'device-remove-confirm', hidden: true,
    novalidate: true, onsubmit: (/** @type {SubmitEvent} */ e) => { e.preventDefault(); remove(); } },
  target, keeps,
  el('div', { class: 'field' }, el('label', { for: 'device-pass', text: 'Your passphrase (to renew the vault\'s keys)' }), pass),
  el('label', { class: 'check' }, also,
    el('span', { text: 'Also change the passphrase (do this if someone may know it)' })),
  newFields,
  el('div', { class: 'actions' },
    el('button', { type: 'submit', class: 'btn btn-danger', text: 'Remove the device', 'data-testid': 'device-remove-confirm-button' }),
    cancel),
  progress);
  const panel = el('section', { class: 'panel devices-panel', 'aria-labelledby': 'devices-title', 'data-testid': 'devices-panel' },
    el('h2', { id: 'devices-title', class: 'panel-title', text: 'Your devices' }),
    el('p', { class: 'muted', text: 'Every device that opens this vault is listed here. Remove one you lost or no longer use: it can no longer sync.' }),
    state, list, err, confirm);

  /** @param {string} [message] said above the list (after a removal) */
  async function load(message = '') {
    let r;
    try {
      r = await call('devices');
    } catch (ex) {
      state.textContent = `Could not read the devices: ${errorText(ex)}`;
      return;
    }
    keeps.textContent = r.keeps;
    state.textContent = message || (r.devices.length ? '' : 'No device has synced yet.');
    state.hidden = !state.textContent;
    list.replaceChildren(...r.devices.map((d) => el('li', { class: 'device', 'data-testid': 'device', 'data-device': d.id },
      el('div', { class: 'device-text' },
        el('strong', { text: d.label }),
        d.this_device ? el('span', { class: 'badge', 'data-testid': 'this-device', text: 'This device' }) : null,
        el('p', { class: 'hint', text: deviceFacts(d) })),
      d.this_device ? null : el('button', { type: 'button', class: 'btn', text: 'Remove…', 'data-testid': 'device-remove',
        'aria-label': `Remove ${d.label}`, onclick: () => open(d) }))));
  }

  /** @param {DeviceRow} d */
  function open(d) {
    chosen = d;
    showError(err, '');
    target.replaceChildren(el('strong', { text: `Remove ${d.label}?` }));
    pass.value = newPass.value = newPass2.value = '';
    also.checked = false;
    newFields.hidden = true;
    confirm.hidden = false;
    pass.focus();
  }

  function close() {
    confirm.hidden = true;
    chosen = null;
    showProgress(progress, '');
  }

  async function remove() {
    const d = chosen;
    if (!d) return;
    showError(err, '');
    if (!pass.value) return showError(err, 'Type your passphrase: the vault\'s keys are renewed under it.');
    if (also.checked && !newPass.value) return showError(err, 'Type the new passphrase, or untick "Also change the passphrase".');
    if (also.checked && newPass.value !== newPass2.value) return showError(err, 'The two new passphrases differ.');
    for (const b of confirm.querySelectorAll('button')) b.disabled = true;
    showProgress(progress, `Removing ${d.label} and renewing the vault's keys…`);
    try {
      await call('device_remove', { id: d.id, passphrase: pass.value, new_passphrase: also.checked ? newPass.value : '' });
    } catch (ex) {
      showProgress(progress, '');
      showError(err, errorText(ex));
      return;
    } finally {
      for (const b of confirm.querySelectorAll('button')) b.disabled = false;
      pass.value = newPass.value = newPass2.value = '';
    }
    close();
    await load(`Removed ${d.label}. Your other devices ask for the passphrase at their next sync. ${keeps.textContent}`);
  }

  load();
  return panel;
}
