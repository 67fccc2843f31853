// Passkeys on screen (issue 24 item 7; the WebAuthn side is ../passkeys.js): "Unlock with a
// passkey" on the unlock screen, and the Settings panel that lists this device's passkeys,
// removes one, and adds one.
//
// Never weaker than the passphrase (docs/decisions.md "15.6. Key Rotation"): a passkey is
// added only from an unlocked vault AND with the passphrase typed again in the same form
// (someone at an unlocked, unattended phone cannot add a passkey of their own); every
// WebAuthn call requires user verification; nothing unlocks until the person presses the
// button (no conditional or automatic prompt).  A person who wants the passphrase at every
// unlock keeps no passkey on this device: a removed passkey's wrap is deleted, so the path is
// gone, not hidden.  The passphrase form always stays.

import { el, errorText, notice, refuse, setBusy, showError, showProgress } from '../dom.js';
import { dateTime } from '../format.js';
import { PasskeyError, createPasskey, getSecret, hex, prfSupport, unhex } from '../passkeys.js';
import { currentSession, isCurrent, vaultName } from '../state.js';
import { call, healAfterRefusal } from '../vault.js';

/** @import { UnlockSlot } from '../../types/protocol' */

/** -> this vault's passkey slots (public: also while locked) */
async function passkeySlots() {
  return (await call('slots')).slots.filter((s) => s.kind === 'passkey');
}

/**
 * @param {unknown} ex
 * @returns {string}
 */
function passkeyText(ex) {
  if (ex instanceof PasskeyError) return ex.message;
  const code = /** @type {{ code?: string }} */ (ex)?.code;
  if (code === 'not_found') return 'This passkey was removed from this vault: it no longer unlocks it. Enter your passphrase.';
  if (code === 'wrong_passphrase') return 'This passkey no longer opens this vault. Enter your passphrase.';
  return errorText(ex);
}

/**
 * The unlock screen's passkey button, atop the passphrase form: hidden until this vault is
 * known to hold a passkey and this browser may compute PRF.
 * @param {HTMLFormElement} form the passphrase form (its error line shows a passkey's error too)
 * @param {() => Promise<void>} onUnlocked
 */
export function passkeyUnlock(form, onUnlocked) {
  const err = /** @type {HTMLElement} */ (form.querySelector('[data-role="error"]'));
  const button = el('button', { type: 'button', class: 'btn btn-primary btn-wide', 'data-testid': 'passkey-unlock', text: 'Unlock with a passkey' });
  const box = el('div', { class: 'passkey-unlock', 'data-testid': 'passkey-unlock-box', hidden: true },
    button, el('p', { class: 'muted', text: 'Or enter your passphrase:' }));
  form.prepend(box);   // inside the form: whatever replaces the form (the recovery kit's) takes it along
  const session = currentSession();
  Promise.all([prfSupport(), passkeySlots()]).then(([{ support }, slots]) => {
    if (!isCurrent(session) || !box.isConnected) return;
    box.hidden = support === 'no' || slots.length === 0;
    box.dataset.answered = 'true';
  }, () => { box.dataset.answered = 'true'; });
  button.addEventListener('click', async () => {
    showError(err, '');
    const progress = /** @type {HTMLElement} */ (form.querySelector('[data-role="progress"]'));
    setBusy(form, true);
    button.disabled = true;
    showProgress(progress, 'Waiting for your passkey…');
    try {
      const slots = await passkeySlots();   // read again: one may have been removed meanwhile
      if (!slots.length) {
        box.hidden = true;
        throw new PasskeyError('unknown_passkey', 'No passkey unlocks this vault on this device any more (it was removed). Enter your passphrase.');
      }
      const { ref, secret } = await getSecret(slots.map((s) => unhex(s.ref)));
      const slot = slots.find((s) => s.ref === hex(ref));
      if (!slot) throw new PasskeyError('unknown_passkey', 'This passkey was not added to this vault on this device. Enter your passphrase.');
      showProgress(progress, 'Unlocking…');
      await call('unlock_slot', { slot_id: slot.id, secret });
      await onUnlocked();
    } catch (ex) {
      if (/** @type {{ code?: string }} */ (ex)?.code === 'wrong_passphrase') await healAfterRefusal();
      if (!form.isConnected) return;
      showProgress(progress, '');
      setBusy(form, false);
      button.disabled = false;
      showError(err, passkeyText(ex));
    }
  });
}

/**
 * The Settings panel: this device's passkeys, Remove on each, and adding one (the passphrase
 * typed again, then the browser's passkey prompt).
 * @returns {HTMLElement}
 */
export function passkeysPanel() {
  const list = el('ul', { class: 'passkey-list', 'data-testid': 'passkey-list' });
  const state = el('p', { class: 'muted', 'data-testid': 'passkeys-state', text: 'Reading this device’s passkeys…' });
  const pass = el('input', { id: 'passkey-pass', name: 'passphrase', type: 'password', autocomplete: 'current-password',
    'data-testid': 'passkey-passphrase', spellcheck: 'false', autocapitalize: 'off', required: true });
  const err = el('p', { class: 'error', 'data-role': 'error', role: 'alert', hidden: true });
  const progress = el('p', { class: 'progress', 'data-role': 'progress', role: 'status', 'aria-live': 'polite', hidden: true });
  const form = el('form', { class: 'form', 'data-testid': 'passkey-form', novalidate: true, hidden: true },
    el('div', { class: 'field' }, el('label', { for: 'passkey-pass', text: 'Your passphrase, to add a passkey' }), pass),
    err,
    el('div', { class: 'actions' }, el('button', { type: 'submit', class: 'btn', 'data-testid': 'passkey-add', text: 'Add a passkey' })),
    progress);
  const panel = el('section', { class: 'panel', 'aria-labelledby': 'passkeys-title', 'data-testid': 'passkeys-panel' },
    el('h2', { id: 'passkeys-title', class: 'panel-title', text: 'Passkeys' }),
    el('p', { text: 'A passkey (your fingerprint, face or screen lock, or a security key) can unlock this vault on this device instead of your passphrase. Your passphrase keeps working, and is needed to add a passkey. Remove every passkey to always be asked for the passphrase here.' }),
    state, list, form);

  const session = currentSession();
  const show = async () => {
    const [{ support, why }, slots] = await Promise.all([prfSupport(), passkeySlots()]);
    if (!isCurrent(session) || !panel.isConnected) return;
    list.replaceChildren(...slots.map((s) => passkeyRow(s, show)));
    form.hidden = support === 'no';
    state.textContent = support === 'no' ? `${why} Your passphrase works as always.`
      : slots.length ? '' : 'No passkey unlocks this vault on this device yet.';
    state.hidden = !state.textContent;
  };
  show().catch((ex) => { state.textContent = `Could not read the passkeys: ${errorText(ex)}`; });

  form.addEventListener('submit', async (/** @type {SubmitEvent} */ e) => {
    e.preventDefault();
    showError(err, '');
    if (!pass.value) return refuse(err, pass, 'Enter your passphrase to add a passkey.');
    setBusy(form, true);
    showProgress(progress, 'Checking your passphrase…');
    try {
      try {
        await call('passphrase_check', { passphrase: pass.value });
      } catch (ex) {
        throw new PasskeyError('failed', errorText(ex));   // "Wrong passphrase for this vault."
      } finally {
        pass.value = '';
      }
      showProgress(progress, 'Follow your browser’s passkey prompt…');
      const made = await createPasskey(vaultName());
      showProgress(progress, 'Adding the passkey…');
      await call('slot_add', { kind: 'passkey', label: made.label, ref: made.ref, secret: made.secret });
      if (!panel.isConnected) return;
      showProgress(progress, '');
      notice('Passkey added: “Unlock with a passkey” now opens this vault on this device.');
      await show();
    } catch (ex) {
      if (!panel.isConnected) return;
      showProgress(progress, '');
      showError(err, passkeyText(ex));
      pass.focus();
    } finally {
      if (form.isConnected) setBusy(form, false);
    }
  });
  return panel;
}

/**
 * @param {UnlockSlot} s
 * @param {() => Promise<void>} refresh
 */
function passkeyRow(s, refresh) {
  const remove = el('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'passkey-remove',
    'aria-label': `Remove ${s.label}, added ${dateTime(s.created)}`, text: 'Remove' });
  remove.addEventListener('click', async () => {
    remove.disabled = true;
    try {
      await call('slot_remove', { slot_id: s.id });
      notice('Passkey removed: it no longer unlocks this vault.');
    } catch (ex) {
      notice(`Could not remove the passkey: ${errorText(ex)}`);
    }
    await refresh();
  });
  return el('li', { class: 'passkey-row', 'data-testid': 'passkey-row' },
    el('span', {}, el('strong', { text: s.label }), el('span', { class: 'muted', text: ` added ${dateTime(s.created)}` })),
    remove);
}
