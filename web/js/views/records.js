// The settings' "Import records (CSV or JSON)" panel (UOMP draft-00 section 12; issue 10 item 8):
// pick a file, then a preview of what `ownmem records import` would write from it, record by
// record with every problem (the worker's `records_preview`: the CLI's own parser and 12.9
// check, no second parser here).  The choices the CLI takes as flags are asked here, as a
// terminal asks: the format, where each field goes (--map), the sensitivity of records that
// give none (12.8: explicit, never guessed) and --replace.  Each change previews again; nothing
// is written until Import is pressed, and then only what the preview showed (its digest).

import { el, errorText, role, showError, showProgress } from '../dom.js';
import { plural } from '../format.js';
import { currentSession, isCurrent } from '../state.js';
import { call, onWorkerEvent, refreshList } from '../vault.js';
import { afterWrite } from './syncstatus.js';

/** @import { RecordRow, RecordsPreview, Result } from '../../types/protocol' */
/** @typedef {Record<string, string>} FieldMap a file's field -> where it goes */

const RESERVED = ['key', 'tags', 'sensitivity', 'source', 'description', 'created_at', 'updated_at'];
const VALUE_CHARS = 120;      // of a value's JSON in a preview cell; the whole in its title

/**
 * Wire the records panel (`panel`, inside the settings screen).
 * @param {HTMLElement} panel
 */
export function wireRecords(panel) {
  const form = role(panel, 'records-form');
  const input = role(panel, 'records-input');
  const progress = role(panel, 'records-progress');
  const err = role(panel, 'records-error');
  // the file as read, the person's choices, the preview on screen (null: none current)
  /** @type {{ name: string, data: Uint8Array } | null} */
  let file = null;
  /** @type {FieldMap} */
  let map = {};
  /** @type {FieldMap} */
  let auto = {};               // field -> where it goes unmapped (the first preview's answer)
  /** @type {RecordsPreview | null} */
  let shown = null;
  let asked = 0;               // the latest preview asked; older answers are dropped

  // only while a file is read (`file` is set)
  const args = () => ({
    data: /** @type {NonNullable<typeof file>} */ (file).data, name: /** @type {NonNullable<typeof file>} */ (file).name, format: form.elements.format.value,
    map: Object.entries(map).map(([src, dst]) => `${src}=${dst}`),
    sensitivity: form.elements.sensitivity.value, replace: form.elements.replace.checked,
  });

  async function preview() {
    const n = ++asked;
    const session = currentSession();
    shown = null;
    role(form, 'records-confirm').disabled = true;
    showError(err, '');
    showProgress(progress, `Checking ${/** @type {NonNullable<typeof file>} */ (file).name}…`);
    try {
      const r = await call('records_preview', args());
      if (n !== asked || !isCurrent(session) || !panel.isConnected) return;
      if (!Object.keys(auto).length) auto = Object.fromEntries(r.fields);
      shown = r;
      render(form, /** @type {NonNullable<typeof file>} */ (file).name, r, map, auto, (src, dst) => {
        if (dst === auto[src]) delete map[src];
        else map[src] = dst;
        preview();
      });
      showProgress(progress, '');
    } catch (ex) {
      if (n !== asked || !isCurrent(session)) return;
      showProgress(progress, '');
      showError(err, errorText(ex));
    }
  }

  function reset() {
    asked++;
    file = null;
    shown = null;
    map = {};
    auto = {};
    form.reset();
    form.hidden = true;
    input.value = '';
  }

  input.addEventListener('change', async () => {
    const f = input.files && input.files[0];
    if (!f) return;
    reset();
    showProgress(progress, `Reading ${f.name}…`);
    file = { name: f.name, data: new Uint8Array(await f.arrayBuffer()) };
    preview();
  });
  for (const name of ['format', 'sensitivity', 'replace']) {
    form.elements[name].addEventListener('change', () => {
      if (name === 'format') { map = {}; auto = {}; }   // another format, other fields
      if (file) preview();
    });
  }
  role(form, 'records-cancel').addEventListener('click', () => {
    reset();
    showProgress(progress, '');
    showError(err, '');
  });
  form.addEventListener('submit', async (/** @type {SubmitEvent} */ e) => {
    e.preventDefault();
    if (!shown || shown.refused || !shown.total) return;
    const session = currentSession();
    const total = shown.valid;
    const controls = [...form.querySelectorAll('input, select, button'), input];
    for (const c of controls) c.disabled = true;
    showError(err, '');
    showProgress(progress, `Sealing ${plural(total, 'record')}…`);
    const off = onWorkerEvent('progress', (p) => {
      if (p.op === 'records_import' && isCurrent(session)) showProgress(progress, `Sealed ${p.done} of ${plural(p.total, 'record')}…`);
    });
    try {
      const r = await call('records_import', { ...args(), digest: shown.digest });
      if (!isCurrent(session)) return;
      reset();
      showProgress(progress, doneText(r), false);
      refreshList();
      afterWrite();
    } catch (ex) {
      if (!isCurrent(session)) return;
      if (file) await preview();       // what the vault holds now; then why nothing was written
      if (!isCurrent(session)) return;
      showProgress(progress, '');
      showError(err, `Nothing was written: ${errorText(ex)}`);
    } finally {
      off();
      for (const c of controls) c.disabled = false;
      role(form, 'records-confirm').disabled = !shown || shown.refused || !shown.total;
    }
  });
}

/** @param {Result<'records_import'>} r */
function doneText(r) {
  let t = `Imported ${plural(r.imported, 'record')}`;
  if (r.replaced) t += `, ${r.replaced} superseding the memory of their key`;
  t += '.';
  if (r.defaulted.length) t += ` The sensitivity “${r.sensitivity}” you chose went to ${plural(r.defaulted.length, 'record')} that gave none.`;
  return t;
}

// The preview `r` of records_preview into the form: the fields' mapping, the sensitivity
// question when some record gives none, the refusal with the file's own problems, the rows.
/**
 * @param {HTMLFormElement & { elements: Record<string, any> }} form
 * @param {string} filename
 * @param {RecordsPreview} r
 * @param {FieldMap} map the person's choices
 * @param {FieldMap} auto where each field goes unmapped
 * @param {(src: string, dst: string) => void} remap
 */
function render(form, filename, r, map, auto, remap) {
  form.hidden = false;
  role(form, 'records-file').textContent = `${filename} (${r.format.toUpperCase()})`;
  renderFields(form, r.fields, map, auto, remap);

  const missing = r.missing_sensitivity;
  const chosen = form.elements.sensitivity.value;
  role(form, 'records-sensitivity-field').hidden = !missing.length && !chosen;
  const gives = `${plural(missing.length, 'record')} of this file give${missing.length === 1 ? 's' : ''} no sensitivity (${numbers(missing)})`;
  role(form, 'records-sensitivity-hint').textContent = !missing.length ? 'Every record gives its own sensitivity.'
    : chosen ? `${gives}: ${missing.length === 1 ? 'it takes' : 'they take'} “${chosen}”, your choice, shown as such below.`
      : `${gives}. UOMP requires an explicit one: choose it here, or the import is refused.`;

  const bad = r.rows.filter((row) => row.problems.length).length;
  const box = role(form, 'records-refused');
  box.hidden = !r.refused;
  const fileProblems = r.problems.filter(([n]) => n === 0);
  role(box, 'records-file-problems').replaceChildren(...fileProblems.map(([, m]) => el('li', { text: m })));
  const summary = role(form, 'records-summary');
  summary.textContent = r.total
    ? `${plural(r.total, 'record')}: ${r.valid} ready (${r.valid - r.replacing} new, ${r.replacing} replacing), ${bad} with problems.`
      + (r.rows.length < r.total ? ` Listed: every record with a problem and the first ${r.rows.length - bad} others.` : '')
    : 'No record could be read from this file.';
  role(form, 'records-rows').replaceChildren(...r.rows.map(rowOf));
  /** @type {HTMLElement} */ (form.querySelector('.records-preview')).hidden = !r.rows.length;
  const confirm = role(form, 'records-confirm');
  confirm.disabled = r.refused || !r.total;
  confirm.hidden = r.refused;
  confirm.textContent = `Import ${plural(r.valid, 'record')}`;
}

/**
 * @param {HTMLFormElement} form
 * @param {[string, string][]} fields
 * @param {FieldMap} map
 * @param {FieldMap} auto
 * @param {(src: string, dst: string) => void} remap
 */
function renderFields(form, fields, map, auto, remap) {
  role(form, 'records-fields-box').hidden = !fields.length;
  role(form, 'records-fields').replaceChildren(...fields.map(([name, target]) => {
    const base = auto[name] ?? target;
    const targets = [...new Set([base, ...RESERVED, 'value', ...(isPlain(base) ? [] : [`value.${name}`])])];
    const select = el('select', { 'aria-label': `Read ${name} as`, 'data-field': name },
      ...targets.map((t) => el('option', { value: t, text: describe(t, t === base), selected: t === target })));
    select.addEventListener('change', () => remap(name, select.value));
    return el('tr', {}, el('td', { class: 'mono', text: name }), el('td', {}, select));
  }));
  // a mapping the person chose stays visible
  if (Object.keys(map).length) role(form, 'records-fields-box').open = true;
}

// A target that is no reserved field and no value path is one field of the value, as named.
/** @param {string} t */
function isPlain(t) {
  return !RESERVED.includes(t) && t !== 'value' && !t.startsWith('value.');
}

/**
 * @param {string} t
 * @param {boolean} asNamed
 */
function describe(t, asNamed) {
  const label = t === 'value' ? 'value (the whole value)' : isPlain(t) ? `value["${t}"]` : t;
  return asNamed ? `${label} (default)` : label;
}

/** @param {RecordRow} row */
function rowOf(row) {
  const ok = !row.problems.length;
  const value = row.value === undefined || row.value === null ? '' : JSON.stringify(row.value);
  const sens = row.sensitivity ? `${row.sensitivity}${row.sensitivity_defaulted ? ' (your choice)' : ''}` : '—';
  const write = !ok ? 'nothing' : row.action === 'replace' ? 'replaces' : 'new';
  return el('tr', { class: ok ? 'row-ok' : 'row-bad', 'data-number': String(row.number), 'data-key': row.key ?? '' },
    // data-label: the column's name, which a phone shows before each cell of a row stacked
    el('td', { 'data-label': '#', text: String(row.number) }),
    el('td', { 'data-label': 'Key', class: 'mono', text: row.key ?? '—' }),
    el('td', { 'data-label': 'Value', class: 'mono records-value', title: value, text: value.length > VALUE_CHARS ? `${value.slice(0, VALUE_CHARS - 1)}…` : value }),
    el('td', { 'data-label': 'Tags', text: row.tags.join(', ') || '—' }),
    el('td', { 'data-label': 'Sensitivity', text: sens }),
    el('td', { 'data-label': 'Write' }, el('span', { class: `result result-${ok ? (row.action === 'replace' ? 'skip' : 'ok') : 'bad'}`, text: write })),
    el('td', { 'data-label': 'Problems', class: ok ? 'records-no-problem' : null },
      ...(ok ? [] : [el('ul', { class: 'records-problems' }, ...row.problems.map((/** @type {string} */ m) => el('li', { text: m })))])));
}

/** @param {number[]} list */
function numbers(list) {
  const head = list.slice(0, 12).map((n) => `#${n}`).join(', ');
  return list.length > 12 ? `${head}, …` : head;
}
