// The passphrase (issue 24): Settings' "Change passphrase" and the question a device asks when
// its passphrase was changed on another one.  The keys are the worker's (ownmem.web.api
// op_passphrase_change, op_passphrase_update: the CLI's `ownmem passphrase change|update`).
//
//   - Change: a dialog with the current passphrase (typed again and checked before anything
//     changes: whoever finds the app unlocked must not be able to change it), the new one with
//     the create form's strength meter and floor, and the new one again.  Argon2id of both runs
//     on a helper thread (client.js).  Linked, the change is made here and on the server, both
//     or neither.  Its result says what it does and does not do, as the CLI's does.
//   - Asked: a sync that stops with `passphrase_changed` (syncstatus.js emits
//     'passphrase-changed') opens a dialog with one field; a wrong passphrase changes nothing;
//     the right one makes this device sync again, and its next unlock takes the new passphrase.
//
// Both are <dialog>s made here: Escape closes them (and only them: not the screen behind),
// Ctrl/⌘+Enter submits from any field, a lock closes them and empties their fields.

import { concealPassphrases, el, errorText, notice, refuse, setBusy, showError, showProgress, wireReveal } from '../dom.js';
import { describe, judge, MIN_SCORE, prepare, refusal, release } from '../passphrase.js';
import { currentSession, isCurrent, isLinked, on, setOnline, syncStatus, vaultName } from '../state.js';
import { call, refreshList, refreshStatus } from '../vault.js';

/** @import { Verdict } from '../passphrase.js' */
/** @typedef {HTMLFormElement & { elements: Record<string, any> }} Form */

/** @type {Set<HTMLDialogElement>} the dialogs open now */
const open = new Set();

/**
 * What a change does and does not do, in the CLI's meaning (py/ownmem/cli/passwd.py
 * WHAT_IT_DOES; docs/decisions.md "Key Rotation"): pure, for the result and its test.
 * @param {string | null} server the server it was changed on too, null: this device only
 * @returns {string[]} sentences
 */
export function changedText(server) {
  return [
    server ? `Your passphrase is changed here and on ${server}. Your other devices ask for the new one at their next sync.`
      : 'Your passphrase is changed on this device (it is not linked to a server).',
    'From now on the old passphrase opens nothing you write: not here, not in a new export, not on the server.',
    'It does not lock out someone who already knew the old passphrase: with an old copy (an export, another device) they '
      + 'can still read what was written before. Agents connected before now are disconnected: connect them again.',
  ];
}

// ------------------------------------------------------------------ the dialog frame

/**
 * A modal dialog of the page's style, removed from the document once closed.
 * @param {string} testid
 * @param {string} title
 * @param {HTMLElement} body
 * @param {() => void} [onClose]
 */
function modal(testid, title, body, onClose) {
  const heading = el('h2', { id: `${testid}-title`, text: title });
  const dialog = /** @type {HTMLDialogElement} */ (el('dialog', { 'data-testid': testid, 'aria-labelledby': heading.id },
    el('div', { class: 'dialog-body' }, heading, body)));
  // Escape closes this dialog only: the Settings screen behind it stays (app.js leaves it on
  // an Escape that nothing took)
  // an answer under way (a busy form) is waited for: it may have changed the keys already
  const busy = () => dialog.querySelector('[aria-busy="true"]') !== null;
  dialog.addEventListener('keydown', (e) => {
    if (e.key !== 'Escape') return;
    e.preventDefault();
    e.stopPropagation();
    if (!busy()) dialog.close('cancel');
  });
  dialog.addEventListener('cancel', (e) => {
    e.preventDefault();
    if (!busy()) dialog.close('cancel');
  });
  dialog.addEventListener('close', () => {
    concealPassphrases(dialog);
    open.delete(dialog);
    dialog.remove();
    onClose?.();
  });
  document.body.append(dialog);
  open.add(dialog);
  dialog.showModal();
  return dialog;
}

/**
 * A password field with its Show button.
 * @param {string} id
 * @param {string} name
 * @param {string} label
 * @param {string} autocomplete
 * @param {Record<string, string>} [extra] more attributes of the input
 */
function passField(id, name, label, autocomplete, extra = {}) {
  return el('div', { class: 'field' },
    el('label', { for: id, text: label }),
    el('div', { class: 'pass-wrap' },
      el('input', { id, name, type: 'password', autocomplete, required: true, spellcheck: 'false', autocapitalize: 'off',
        'data-testid': id, ...extra }),
      el('button', { type: 'button', class: 'btn btn-ghost btn-small reveal', 'data-role': 'reveal', 'aria-controls': id,
        'aria-pressed': 'false', text: 'Show' })));
}

/** @param {Form} form Ctrl/⌘+Enter submits from any of its fields (Enter does too, in a one-line field) */
function ctrlEnterSubmits(form) {
  form.setAttribute('aria-keyshortcuts', 'Control+Enter Meta+Enter');
  form.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey) && !e.isComposing) {
      e.preventDefault();
      if (form.getAttribute('aria-busy') !== 'true') form.requestSubmit();
    }
  });
}

const errorLine = () => el('p', { class: 'error', 'data-role': 'error', role: 'alert', hidden: true });
const progressLine = () => el('p', { class: 'progress', 'data-role': 'progress', role: 'status', 'aria-live': 'polite', hidden: true });

// ------------------------------------------------------------------ Settings: change it

/** Settings' "Passphrase" panel: what a change is for, and its button. */
export function passphrasePanel() {
  const button = el('button', { type: 'button', class: 'btn', 'data-testid': 'passphrase-change-open', text: 'Change passphrase…' });
  button.addEventListener('click', () => openChange(button));
  return el('section', { class: 'panel', 'aria-labelledby': 'passphrase-panel-title', 'data-testid': 'passphrase-panel' },
    el('h2', { id: 'passphrase-panel-title', class: 'panel-title', text: 'Passphrase' }),
    el('p', { class: 'muted', text: 'Change it if someone may have seen it or guessed it. What you write afterwards is sealed '
      + 'under new keys; your memories stay as they are.' }),
    el('div', { class: 'actions' }, button));
}

/** @param {HTMLElement} trigger the focus goes back to it */
function openChange(trigger) {
  const meterBar = el('div', { class: 'strength', 'data-role': 'strength', 'data-score': '-1', 'aria-hidden': 'true' },
    el('span'), el('span'), el('span'), el('span'));
  const meterText = el('p', { class: 'hint strength-text', id: 'change-strength', 'data-testid': 'change-strength', 'aria-live': 'polite',
    text: describe(null) });
  const weakBox = el('label', { class: 'check weak-accept', 'data-role': 'weak-accept', hidden: true },
    el('input', { type: 'checkbox', name: 'weak', 'data-testid': 'change-weak-accept' }),
    el('span', { text: 'I accept that this passphrase is easy to guess' }));
  const newField = passField('change-new', 'passphrase_new', 'New passphrase', 'new-password', { 'aria-describedby': 'change-strength' });
  newField.append(meterBar, meterText, weakBox);
  const err = errorLine();
  const progress = progressLine();
  const submit = el('button', { type: 'submit', class: 'btn btn-primary', 'data-testid': 'change-submit', text: 'Change passphrase' });
  const cancel = el('button', { type: 'button', class: 'btn', 'data-testid': 'change-cancel', text: 'Cancel' });
  const form = /** @type {Form} */ (el('form', { class: 'form', 'data-testid': 'change-form', novalidate: true },
    el('p', { text: isLinked()
      ? `The change is made here and on ${syncStatus().server} together: if the server cannot be reached, nothing changes. `
        + 'Your other devices ask for the new passphrase at their next sync.'
      : 'This vault is only in this browser: the change is made here.' }),
    passField('change-current', 'passphrase_current', 'Current passphrase', 'current-password'),
    newField,
    passField('change-new2', 'passphrase_new2', 'New passphrase again', 'new-password'),
    err,
    el('div', { class: 'actions actions-end' }, cancel, submit),
    progress));
  wireReveal(form);
  ctrlEnterSubmits(form);
  const dialog = modal('change-dialog', 'Change your passphrase', form, () => {
    release();
    if (trigger.isConnected) trigger.focus();
  });
  cancel.addEventListener('click', () => dialog.close('cancel'));
  const { passphrase_current: current, passphrase_new: pass, passphrase_new2: pass2, weak } = form.elements;
  const meter = strengthMeter(pass, meterBar, meterText, weakBox, weak);
  pass.addEventListener('input', () => meter.changed());

  form.addEventListener('submit', async (/** @type {SubmitEvent} */ e) => {
    e.preventDefault();
    if (form.getAttribute('aria-busy') === 'true') return;
    showError(err, '');
    if (!current.value) return refuse(err, current, 'Enter your current passphrase.');
    if (!pass.value) return refuse(err, pass, 'Choose a new passphrase.');
    if (pass.value === current.value) return refuse(err, pass, 'The new passphrase is the same as the current one: choose another.');
    const verdict = await meter.now();
    // an Error (cannot tell) has no score: below the floor
    if (!(/** @type {any} */ (verdict).score >= MIN_SCORE) && !weak.checked) return refuse(err, pass, refusal(verdict));
    if (pass.value !== pass2.value) {
      pass2.value = '';
      return refuse(err, pass2, 'The two new passphrases differ.');
    }
    const session = currentSession();
    setBusy(form, true);
    showProgress(progress, isLinked() ? 'Checking your current passphrase, deriving the new keys, then telling the server…'
      : 'Checking your current passphrase and deriving the new keys…');
    let r;
    try {
      r = await call('passphrase_change', { current: current.value, new: pass.value });
    } catch (ex) {
      if (!isCurrent(session) || !dialog.open) return;
      concealPassphrases(form);
      meter.changed();
      setBusy(form, false);
      showProgress(progress, '');
      const wrong = /** @type {{ code?: string }} */ (ex).code === 'wrong_passphrase';
      showError(err, wrong ? 'That is not your current passphrase. Nothing changed.' : `Nothing changed: ${errorText(ex)}`);
      (wrong ? current : pass).focus();
      return;
    }
    concealPassphrases(form);
    if (!isCurrent(session) || !dialog.open) return;
    release();
    showChanged(dialog, form, r.server);
  });
  current.focus();
}

/**
 * The dialog's form gives way to the result: what the change did and did not do.
 * @param {HTMLDialogElement} dialog
 * @param {HTMLFormElement} form
 * @param {string | null} server
 */
function showChanged(dialog, form, server) {
  const done = el('button', { type: 'button', class: 'btn btn-primary', 'data-testid': 'changed-done', text: 'Done',
    onclick: () => dialog.close('done') });
  const [first, ...rest] = changedText(server);
  form.replaceWith(el('div', { 'data-testid': 'changed-result', role: 'status' },
    el('p', {}, el('strong', { text: first })),
    ...rest.map((t) => el('p', { text: t })),
    el('div', { class: 'actions actions-end' }, done)));
  /** @type {HTMLElement} */ (dialog.querySelector('h2')).textContent = 'Passphrase changed';
  done.focus();
  refreshStatus();
}

// The create form's meter (views/welcome.js) for the new passphrase: zxcvbn's verdict, the
// latest question winning; the "I accept" box only below the floor, unticked at every change.
/**
 * @param {HTMLInputElement} pass
 * @param {HTMLElement} bar
 * @param {HTMLElement} text
 * @param {HTMLElement} accept
 * @param {HTMLInputElement} weak
 */
function strengthMeter(pass, bar, text, accept, weak) {
  let asked = 0;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  pass.addEventListener('input', prepare, { once: true });
  /** @param {Verdict | Error | null} verdict */
  const show = (verdict) => {
    bar.dataset.score = String(verdict && !(verdict instanceof Error) ? verdict.score : -1);
    text.textContent = describe(verdict);
    accept.hidden = verdict === null || /** @type {any} */ (verdict).score >= MIN_SCORE;
  };
  const now = async () => {
    const n = ++asked;
    clearTimeout(timer);
    /** @type {Verdict | Error} */
    const verdict = await judge(pass.value, vaultName()).catch((ex) => ex);
    if (n === asked && pass.isConnected) show(pass.value ? verdict : null);
    return verdict;
  };
  return {
    now,
    changed() {
      weak.checked = false;
      clearTimeout(timer);
      if (!pass.value) {
        asked++;
        show(null);
        return;
      }
      timer = setTimeout(now, 120);
    },
  };
}

// ------------------------------------------------------------------ another device changed it

let asking = false;

/** The sync stopped with passphrase_changed: ask for the new passphrase (once at a time). */
export function askNewPassphrase() {
  if (asking) return;
  asking = true;
  const err = errorLine();
  const progress = progressLine();
  const later = el('button', { type: 'button', class: 'btn', 'data-testid': 'update-later', text: 'Not now' });
  const form = /** @type {Form} */ (el('form', { class: 'form', 'data-testid': 'update-form', novalidate: true },
    el('p', {}, el('strong', { text: 'Your passphrase was changed on another device. Enter the new passphrase to keep syncing.' })),
    el('p', { class: 'muted', text: 'Until then this device keeps what it holds but does not sync. Once the new passphrase is in, '
      + 'it is the one that unlocks this device.' }),
    passField('update-new', 'passphrase', 'New passphrase', 'current-password'),
    err,
    el('div', { class: 'actions actions-end' }, later,
      el('button', { type: 'submit', class: 'btn btn-primary', 'data-testid': 'update-submit', text: 'Keep syncing' })),
    progress));
  wireReveal(form);
  ctrlEnterSubmits(form);
  const dialog = modal('update-dialog', 'Enter your new passphrase', form, () => { asking = false; });
  later.addEventListener('click', () => {
    dialog.close('cancel');
    notice('Not syncing: your passphrase was changed on another device. Press Sync to enter the new one.', { persist: true });
  });
  const pass = form.elements.passphrase;
  form.addEventListener('submit', async (/** @type {SubmitEvent} */ e) => {
    e.preventDefault();
    if (form.getAttribute('aria-busy') === 'true') return;
    showError(err, '');
    if (!pass.value) return refuse(err, pass, 'Enter the new passphrase.');
    const session = currentSession();
    setBusy(form, true);
    showProgress(progress, 'Checking the new passphrase against the server…');
    /** @type {import('../../types/protocol').Result<'passphrase_update'>} */
    let r;
    try {
      r = await call('passphrase_update', { new: pass.value });
    } catch (ex) {
      if (!isCurrent(session) || !dialog.open) return;
      concealPassphrases(form);
      setBusy(form, false);
      showProgress(progress, '');
      const wrong = /** @type {{ code?: string }} */ (ex).code === 'wrong_passphrase';
      showError(err, wrong ? 'That is not the new passphrase of this vault. Nothing changed: try again.' : `Nothing changed: ${errorText(ex)}`);
      pass.focus();
      return;
    }
    concealPassphrases(form);
    if (!isCurrent(session)) return;
    dialog.close('done');
    setOnline(Boolean(r.synced), r.synced ? '' : r.problem || '');
    notice('');        // the "Not now" reminder, if it showed
    notice(r.synced ? 'This device now uses the new passphrase and is syncing again.'
      : `This device now uses the new passphrase; the sync did not finish: ${r.problem}`, { persist: !r.synced });
    await Promise.all([refreshList(), refreshStatus()]);
  });
  pass.focus();
}

on('passphrase-changed', askNewPassphrase);
on('lock', () => {
  for (const d of [...open]) d.close('locked');
});
