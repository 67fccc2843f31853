// The settings' "Backup and transfer" panel: export the vault as one sealed .amem file
// (a download made in the page; the contents stay encrypted) and import one, with a
// report of every object imported, skipped or refused and why.

import { el, errorText, role, showError, showProgress } from '../dom.js';
import { isoDate, plural, shortId } from '../format.js';
import { currentSession, isCurrent } from '../state.js';
import { call, refreshList } from '../vault.js';
import { memoryCount } from './signout.js';
import { afterWrite } from './syncstatus.js';

/** @import { ImportResult } from '../../types/protocol' */

/**
 * Wire the panel's export button and import input inside the settings screen `node`.
 * @param {HTMLElement} node
 */
export function wireTransfer(node) {
  const exportBtn = role(node, 'export');
  exportBtn.addEventListener('click', () => exportVault(node, exportBtn));
  const input = role(node, 'import');
  input.addEventListener('change', () => importFile(node, input));
}

// One action of the panel: its error line cleared, its control disabled and a progress
// line while `work` runs; `work` returns the line to leave once done ('' for none).  A
// failure shows in the error line.  The answer of an older session is dropped.
/**
 * @param {HTMLElement} node
 * @param {string} name
 * @param {HTMLInputElement | HTMLButtonElement} control
 * @param {string} text
 * @param {(fresh: () => boolean) => Promise<string>} work `fresh()`: the session is still the one it began in
 */
async function step(node, name, control, text, work) {
  const progress = role(node, `${name}-progress`);
  const err = role(node, `${name}-error`);
  showError(err, '');
  control.disabled = true;
  showProgress(progress, text);
  const session = currentSession();
  const fresh = () => isCurrent(session);
  try {
    const done = await work(fresh);
    if (fresh()) showProgress(progress, done, !done);
  } catch (ex) {
    if (!fresh()) return;
    showProgress(progress, '');
    showError(err, errorText(ex));
  } finally {
    control.disabled = false;
  }
}

/**
 * @param {HTMLElement} node
 * @param {HTMLButtonElement} button
 */
function exportVault(node, button) {
  return step(node, 'export', button, 'Sealing the export…', async (fresh) => {
    const r = await call('export');
    if (!fresh()) return '';
    const blob = new Blob([r.data], { type: 'application/octet-stream' });
    const url = URL.createObjectURL(blob);
    const a = el('a', { href: url, download: `ownmem-${isoDate()}.amem`, class: 'visually-hidden' });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    return exportedLine(r);
  });
}

// Counted as the list counts (issue 23): "Exported 4 memories (with 1 earlier version)";
// the earlier versions are in each memory's history, the other records (agent sessions,
// unverified memories not shown) said apart.
/** @param {{ count: number, memories?: number, versions?: number, other?: number }} r */
export function exportedLine(r) {
  if (r.memories === undefined) return `Exported ${plural(r.count, 'object')}.`;
  const extra = [r.versions ? `with ${plural(r.versions, 'earlier version')}` : '',
    r.other ? `${plural(r.other, 'other record')}` : ''].filter(Boolean).join(', ');
  return `Exported ${memoryCount(r.memories)}${extra ? ` (${extra})` : ''}.`;
}

/**
 * @param {HTMLElement} node
 * @param {HTMLInputElement} input
 */
async function importFile(node, input) {
  const file = input.files && input.files[0];
  if (!file) return;
  role(node, 'import-report').hidden = true;
  await step(node, 'import', input, `Checking ${file.name}…`, async (fresh) => {
    const data = new Uint8Array(await file.arrayBuffer());
    const r = await call('import', { data, accept_container_keys: role(node, 'accept-keys').checked });
    if (!fresh()) return '';
    renderReport(node, file.name, r);
    refreshList();
    afterWrite();
    return '';
  });
  input.value = '';
}

/**
 * @param {HTMLElement} node
 * @param {string} filename
 * @param {ImportResult} r
 */
function renderReport(node, filename, r) {
  const box = role(node, 'import-report');
  /** @type {(result: string, cls: string, object: string, reason: string) => HTMLElement} */
  const tr = (result, cls, object, reason) => el('tr', { class: `row-${cls}` },
    el('td', {}, el('span', { class: `result result-${cls}`, text: result })),
    el('td', { class: 'mono', text: object }), el('td', { text: reason }));
  /** @type {HTMLElement[]} */
  const out = [];
  if (r.imported) out.push(tr('imported', 'ok', plural(r.imported, 'object'), 'verified and added'));
  for (const [id, why] of r.skipped || []) out.push(tr('skipped', 'skip', shortId(id) || id, why));
  for (const [id, why] of r.refused || []) out.push(tr('refused', 'bad', shortId(id) || id, why));
  for (const s of r.scopes_added || []) out.push(tr('scope added', 'ok', s, 'new scope'));
  for (const [s, why] of r.scopes_refused || []) out.push(tr('scope refused', 'bad', s, why));
  for (const k of r.keys_added || []) out.push(tr('key trusted', 'ok', shortId(k), 'author key from the file'));
  for (const k of r.keys_held_back || []) out.push(tr('key not trusted', 'skip', shortId(k), 'listed in the file; not trusted (tick the option to trust it)'));
  if (!out.length) out.push(tr('nothing', 'skip', '—', 'the file holds no objects'));
  role(node, 'report-rows').replaceChildren(...out);
  const skipped = (r.skipped || []).length;
  const refused = (r.refused || []).length;
  role(node, 'report-summary').textContent = `${filename}: ${r.imported} imported, ${skipped} skipped, ${refused} refused.`;
  box.hidden = false;
  box.focus();
}
