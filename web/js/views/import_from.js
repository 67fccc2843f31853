// The settings' "Import from ChatGPT, Claude or Gemini" panel (issue 22 item 5): the source, then
// a file or a pasted list; Preview asks the worker's `import_from` (the CLI's own reader and
// duplicate check, usecases.import_from: no second parser here) for the counts, the first
// memories and the skipped ones; Import writes what that preview showed (its digest), with the
// worker's progress events while it seals, then the counts and the list refreshed.

import { el, errorText, role, showError, showProgress } from '../dom.js';
import { currentSession, isCurrent } from '../state.js';
import { call, onWorkerEvent, refreshList } from '../vault.js';
import { afterWrite } from './syncstatus.js';

/** @import { ImportFromResult } from '../../types/protocol' */

/** @param {number} n */
const memories = (n) => `${n} ${n === 1 ? 'memory' : 'memories'}`;

const NAMES = /** @type {Record<string, string>} */ ({ chatgpt: 'ChatGPT', claude: 'Claude', gemini: 'Gemini' });

/**
 * Wire the panel (`panel`, inside the settings screen).
 * @param {HTMLElement} panel
 */
export function wireImportFrom(panel) {
  const form = /** @type {HTMLFormElement & { elements: Record<string, any> }} */ (role(panel, 'import-from-form'));
  const input = /** @type {HTMLInputElement} */ (role(panel, 'import-from-input'));
  const fileName = role(panel, 'import-from-file-name');
  const progress = role(panel, 'import-from-progress');
  const err = role(panel, 'import-from-error');
  const box = role(panel, 'import-from-preview');
  const confirm = /** @type {HTMLButtonElement} */ (role(panel, 'import-from-confirm'));
  /** @type {{ name: string, data: Uint8Array } | null} the chosen file; null: the pasted text */
  let file = null;
  /** @type {{ source: string, data: Uint8Array, result: ImportFromResult } | null} the preview on screen */
  let shown = null;
  let asked = 0;               // the latest preview asked; older answers are dropped

  const what = () => ({
    source: /** @type {string} */ (form.elements.source.value),
    data: file ? file.data : new TextEncoder().encode(form.elements.text.value),
  });

  function clearPreview() {
    asked++;
    shown = null;
    box.hidden = true;
  }

  async function preview() {
    const n = ++asked;
    const session = currentSession();
    shown = null;
    box.hidden = true;
    showError(err, '');
    const args = what();
    if (!file && !form.elements.text.value.trim()) {
      showError(err, 'Choose a file or paste the list first.');
      return;
    }
    showProgress(progress, 'Reading…');
    try {
      const r = await call('import_from', args);
      if (n !== asked || !isCurrent(session) || !panel.isConnected) return;
      showProgress(progress, '');
      shown = { ...args, result: r };
      render(panel, r);
      box.hidden = false;
      box.focus();
    } catch (ex) {
      if (n !== asked || !isCurrent(session)) return;
      showProgress(progress, '');
      showError(err, errorText(ex));
    }
  }

  input.addEventListener('change', async () => {
    const f = input.files && input.files[0];
    if (!f) return;
    clearPreview();
    file = { name: f.name, data: new Uint8Array(await f.arrayBuffer()) };
    fileName.textContent = f.name;
    form.elements.text.value = '';
    preview();
  });
  form.elements.text.addEventListener('input', () => {
    if (file) {                 // typing replaces the chosen file
      file = null;
      input.value = '';
      fileName.textContent = 'Choose a file…';
    }
    clearPreview();
  });
  form.elements.source.addEventListener('change', clearPreview);
  form.addEventListener('submit', (/** @type {SubmitEvent} */ e) => {
    e.preventDefault();
    preview();
  });
  role(panel, 'import-from-cancel').addEventListener('click', () => {
    clearPreview();
    showProgress(progress, '');
  });

  confirm.addEventListener('click', async () => {
    if (!shown || !shown.result.new) return;
    const { source, data, result } = shown;
    const session = currentSession();
    const controls = [...panel.querySelectorAll('input, select, textarea, button')];
    for (const c of controls) /** @type {HTMLButtonElement} */ (c).disabled = true;
    showError(err, '');
    showProgress(progress, `Sealing ${memories(result.new)}…`);
    const off = onWorkerEvent('progress', (p) => {
      if (p.op === 'import_from' && isCurrent(session)) {
        showProgress(progress, `Sealed ${p.done} of ${memories(p.total)}…`);
      }
    });
    try {
      const r = await call('import_from', { source, data, commit: true, digest: result.digest });
      if (!isCurrent(session)) return;
      clearPreview();
      file = null;
      input.value = '';
      fileName.textContent = 'Choose a file…';
      form.elements.text.value = '';
      showProgress(progress, `Imported ${memories(r.imported)} from ${NAMES[r.source] || r.source}`
        + `, skipped ${r.skipped}. They are tagged ${r.tag}.`, false);
      refreshList();
      afterWrite();
    } catch (ex) {
      if (!isCurrent(session)) return;
      showProgress(progress, '');
      showError(err, `Nothing was written: ${errorText(ex)}`);
    } finally {
      off();
      for (const c of controls) /** @type {HTMLButtonElement} */ (c).disabled = false;
      confirm.disabled = !shown || !shown.result.new;
    }
  });
}

/**
 * The preview `r` into the panel: the counts, the first memories, the skipped ones and why.
 * @param {HTMLElement} panel
 * @param {ImportFromResult} r
 */
function render(panel, r) {
  const name = NAMES[r.source] || r.source;
  const shape = { json: 'JSON', html: 'an HTML list', text: 'a list' }[r.shape];
  role(panel, 'import-from-summary').textContent = r.new
    ? `From ${name} (${shape}): ${`${r.new} new ${r.new === 1 ? 'memory' : 'memories'}`} to import, ${r.skipped} skipped. `
      + `Each will be yours, tagged ${r.tag}.`
    : `From ${name} (${shape}): nothing new to import, ${r.skipped} skipped.`;
  role(panel, 'import-from-first').replaceChildren(...r.first.map(([, text]) => el('li', { text })));
  role(panel, 'import-from-first').hidden = !r.first.length;
  const skipsBox = role(panel, 'import-from-skips-box');
  skipsBox.hidden = !r.skipped;
  role(panel, 'import-from-skips-title').textContent = `Skipped (${r.skipped})`
    + (r.skips.length < r.skipped ? `, the first ${r.skips.length}` : '');
  role(panel, 'import-from-skips').replaceChildren(...r.skips.map(([where, text, why]) => el('li', {},
    `${text} `, el('span', { class: 'why', text: `(${where}: ${why})` }))));
  const confirm = /** @type {HTMLButtonElement} */ (role(panel, 'import-from-confirm'));
  confirm.disabled = !r.new;
  confirm.hidden = !r.new;
  confirm.textContent = `Import ${memories(r.new)}`;
}
