// Editing a memory in place: the form that replaces a card's actions (views/card.js).
// Saving sends only the fields that changed; the vault seals a new version that
// supersedes this one, and the list is read again to show it.

import { el, enterSubmits, errorText, main, q, role, setSaving, showError, showsPercent, tpl } from '../dom.js';
import { parseTags } from '../format.js';
import { currentSession, isCurrent, setEditing } from '../state.js';
import { call } from '../vault.js';
import { saved } from './syncstatus.js';

const FIELDS = [['content', 'label-content'], ['tags', 'label-tags'], ['type', 'label-type'],
  ['confidence', 'label-confidence']];

/** @import { Entry } from '../../types/protocol' */

let editSeq = 0;
// An edit form typed into while its save was under way, by the id of the version that save
// made: the form opens again on that version with the old field's text as it is when the
// card renders again (keys typed until then included), and the focus, so nothing typed is lost.
/** @type {Map<string, { field: HTMLTextAreaElement, sent: string }>} */
const typedDuringSave = new Map();

/**
 * The edit form for entry `e`; `close()` ends the edit without saving.
 * @param {Entry} e
 * @param {() => void} close
 * @returns {HTMLFormElement}
 */
export function editForm(e, close) {
  const form = tpl('tpl-edit');
  const n = ++editSeq;
  for (const [name, lab] of FIELDS) {
    const id = `edit-${n}-${name}`;
    form.elements[name].id = id;
    role(form, lab).setAttribute('for', id);
  }
  const typed = typedDuringSave.get(e.id);
  typedDuringSave.delete(e.id);
  form.elements.content.value = typed ? typed.field.value : e.content;
  if (typed) {
    // The card is swapped in this same task.  Nothing typed since the save: the edit is done
    // (the form closes, as after any save).  Else the new field takes the focus before the
    // next key arrives, with what was typed.
    queueMicrotask(() => {
      if (typed.field.value === typed.sent) return close();
      const t = form.elements.content;
      t.focus();
      t.setSelectionRange(t.value.length, t.value.length);
    });
  }
  form.elements.tags.value = e.tags.join(', ');
  const typeSel = form.elements.type;
  if (![...typeSel.options].some((/** @type {HTMLOptionElement} */ o) => o.value === e.type)) typeSel.append(el('option', { value: e.type, text: e.type }));
  typeSel.value = e.type;
  const conf = form.elements.confidence;
  conf.value = String(e.confidence ?? 0.8);
  showsPercent(conf, role(form, 'confidence-out'));
  enterSubmits(form.elements.content);
  form.addEventListener('keydown', (/** @type {KeyboardEvent} */ ev) => {
    if (ev.key === 'Escape') {
      ev.preventDefault();
      close();
    }
  });
  role(form, 'cancel').addEventListener('click', () => close());
  form.addEventListener('submit', (/** @type {SubmitEvent} */ ev) => {
    ev.preventDefault();
    save(form, e, close);
  });
  return form;
}

/**
 * @param {HTMLFormElement & { elements: Record<string, any> }} form
 * @param {Entry} e
 * @param {() => void} close
 */
async function save(form, e, close) {
  const err = role(form, 'error');
  showError(err, '');
  const content = form.elements.content.value.trim();
  if (!content) {
    showError(err, 'A memory cannot be empty. To remove it, use Forget.');
    return;
  }
  /** @type {import('../../types/protocol').Args<'edit'>} */
  const args = { id: e.id };
  const tags = parseTags(form.elements.tags.value);
  const type = form.elements.type.value;
  const confidence = Number(form.elements.confidence.value);
  if (content !== e.content) args.content = content;
  if (tags.join('\u0000') !== e.tags.join('\u0000')) args.tags = tags;
  if (type !== e.type) args.type = type;
  if (confidence !== Number(e.confidence ?? 0.8)) args.confidence = confidence;
  if (Object.keys(args).length === 1) {
    close();
    return;
  }
  const session = currentSession();
  if (form.getAttribute('aria-busy') === 'true') return;   // a second Ctrl+Enter during the save
  const sent = form.elements.content.value;
  setSaving(form, true);
  try {
    const r = await call('edit', args);
    if (!isCurrent(session)) return;
    // typed after the save began: the form stays open on the new version with that text
    // the new version opens in the form again, which closes at once unless something was
    // typed since the save began (read when the card renders again: editForm above)
    typedDuringSave.set(r.id, { field: form.elements.content, sent });
    setEditing(r.id);
    await saved('Saved as a new version.');
    if (typedDuringSave.delete(r.id)) {   // its card did not render (another page of the list)
      setEditing(null);
      q(main, `li[data-id="${r.id}"] [data-role="edit"]`)?.focus();
    }
  } catch (ex) {
    if (!isCurrent(session)) return;
    setSaving(form, false);
    showError(err, errorText(ex));
  }
}
