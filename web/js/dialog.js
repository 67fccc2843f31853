// The one confirm dialog of the app: every "are you sure?" (forget a memory, keep a
// version) is a <dialog> of index.html driven by this class.  Its words stay in the page;
// its form (method=dialog) holds a quote of what it is about ([data-role="quote"]), an
// error line ([data-role="error"]), Cancel, and the confirm button (value="confirm").
//
//   const forget = new ConfirmDialog('forget-dialog');
//   forget.ask(e.content, button, () => call('forget', { id: e.id }), (r) => notice(...));
//
// ask(quote, trigger, run, done): `run` does the work with the dialog busy, `done` gets its
// result once the dialog closed.  `run` failing shows its error in the dialog, which stays open for another try or Cancel.
// Cancelled, the focus goes back to the trigger.  A lock closes every dialog and empties
// its quote (decrypted text), and an answer of an older session is dropped.

import { errorText, role, setBusy, showError } from './dom.js';
import { excerpt } from './format.js';
import { currentSession, isCurrent, on } from './state.js';

const QUOTE_MAX = 280;
/** @type {ConfirmDialog[]} */
const dialogs = [];

/** @typedef {{ trigger: HTMLElement | null | undefined, run: () => Promise<any>, done: (result: any) => unknown }} Request */

export class ConfirmDialog {
  /** @type {HTMLDialogElement} */
  #dialog;
  /** @type {HTMLFormElement} */
  #form;
  /** @type {Request | null} */
  #request = null;   // {trigger, run, done} while it asks

  /** @param {string} id the <dialog> of index.html */
  constructor(id) {
    this.#dialog = /** @type {HTMLDialogElement} */ (document.getElementById(id));
    this.#form = /** @type {HTMLFormElement} */ (this.#dialog.querySelector('form'));
    this.#form.addEventListener('submit', (ev) => this.#submit(ev));
    this.#dialog.addEventListener('close', () => this.#closed());
    dialogs.push(this);
  }

  get open() {
    return this.#dialog.open;
  }

  /**
   * @template R
   * @param {string} quote what it is about
   * @param {HTMLElement | null | undefined} trigger the focus goes back to it when cancelled
   * @param {() => Promise<R>} run
   * @param {(result: R) => unknown} done
   */
  ask(quote, trigger, run, done) {
    this.#request = { trigger, run, done };
    this.#dialog.returnValue = '';
    role(this.#dialog, 'quote').textContent = excerpt(quote, QUOTE_MAX);
    showError(role(this.#dialog, 'error'), '');
    setBusy(this.#form, false);
    this.#dialog.showModal();
  }

  /** Close without an answer and forget what it was about (the vault is being locked). */
  dismiss() {
    this.#request = null;
    if (this.#dialog.open) this.#dialog.close('locked');
    role(this.#dialog, 'quote').textContent = '';
  }

  /** @param {SubmitEvent} ev */
  async #submit(ev) {
    if (/** @type {HTMLButtonElement | null} */ (ev.submitter)?.value !== 'confirm') return;   // Cancel: the dialog closes itself
    ev.preventDefault();
    const request = this.#request;
    if (!request) return;
    const session = currentSession();
    setBusy(this.#form, true);
    try {
      const result = await request.run();
      if (!isCurrent(session)) return;
      this.#request = null;
      this.#dialog.close('done');
      await request.done(result);
    } catch (ex) {
      if (!isCurrent(session)) return;
      setBusy(this.#form, false);
      showError(role(this.#dialog, 'error'), errorText(ex));
    }
  }

  #closed() {
    role(this.#dialog, 'quote').textContent = '';
    if (this.#request && this.#dialog.returnValue !== 'done') this.#request.trigger?.focus();
    this.#request = null;
  }
}

export const anyDialogOpen = () => dialogs.some((d) => d.open);

on('lock', () => {
  for (const d of dialogs) d.dismiss();
});
