// One memory's card in the list: trust and agent badges, a conflict badge that opens the
// conflicts view, content, tag chips (a click filters the list by that tag), meta line,
// schema warnings, details (with the memory's receipts from the public log, read when they
// open: views/receipts.js); Edit turns the card into the edit form (views/editor.js) and
// Forget asks first (the confirm dialog, dialog.js).
//
// Each entry's card is built once and kept while the entry (a new object after every list)
// and its editing and conflict state stay the same, so a list of thousands renders again
// without building them all again.

import { ConfirmDialog } from '../dialog.js';
import { el, main, q, role, tpl } from '../dom.js';
import { agentBadge, confidenceWords, dateTime, excerpt, percent, shortId, trustBadge, typeLabel } from '../format.js';
import { showView } from '../nav.js';
import { editingId, entryById, isInConflict, on, setEditing } from '../state.js';
import { call } from '../vault.js';
import { editForm } from './editor.js';
import { showReceipts } from './receipts.js';
import { saved } from './syncstatus.js';

/** @import { Entry } from '../../types/protocol' */

/** @typedef {(tag: string) => void} OnTag */

/** @type {WeakMap<Entry, { node: HTMLElement, editing: boolean, conflict: boolean, onTag: OnTag }>} */
let cards = new WeakMap();   // entry -> {node, editing, conflict}

/**
 * The card of entry `e`; `onTag(tag)` is what a click on one of its tags does.
 * @param {Entry} e
 * @param {OnTag} onTag
 * @returns {HTMLElement}
 */
export function cardFor(e, onTag) {
  const editing = editingId() === e.id;
  const conflict = isInConflict(e.id);
  const c = cards.get(e);
  if (c && c.editing === editing && c.conflict === conflict) return c.node;
  const node = card(e, onTag);
  cards.set(e, { node, editing, conflict, onTag });
  return node;
}

/**
 * @param {Entry} e
 * @param {OnTag} onTag
 * @returns {HTMLElement}
 */
function card(e, onTag) {
  const li = tpl('tpl-card');
  li.dataset.id = e.id;
  li.dataset.trust = e.trust;
  li.classList.add(`card-${e.trust}`);
  trustBadge(role(li, 'trust'), e);
  agentBadge(role(li, 'agent'), e);
  if (isInConflict(e.id)) {
    const c = role(li, 'conflict');
    c.hidden = false;
    c.setAttribute('aria-label', 'In conflict: review the concurrent versions');
    c.addEventListener('click', () => showView('conflicts'));
  }
  role(li, 'type').textContent = typeLabel(e.type);

  if (editingId() === e.id) {
    for (const r of ['content', 'tags', 'meta', 'violations']) role(li, r).remove();
    li.querySelector('.card-actions').replaceWith(editForm(e, () => stopEdit(e.id)));
    li.classList.add('card-editing');
    return li;
  }

  role(li, 'content').textContent = e.content;
  const tags = role(li, 'tags');
  if (e.tags.length) {
    tags.append(...e.tags.map((/** @type {string} */ t) => el('li', { class: 'chip' }, el('button', {
      type: 'button', class: 'chip-btn', text: t, title: `Show memories tagged ${t}`,
      onclick: () => onTag(t),
    }))));
  } else tags.remove();

  // the scope only where there is a choice of scopes; how sure in a word (the figure in Details)
  const meta = [e.scope !== 'default' ? e.scope : null, confidenceWords(e.confidence),
    dateTime(e.updated || e.created), e.supersedes ? 'edited' : null].filter(Boolean);
  role(li, 'meta').textContent = meta.join(' · ');

  if (e.schema_violations && e.schema_violations.length) {
    const v = role(li, 'violations');
    v.hidden = false;
    v.textContent = `Schema issues: ${e.schema_violations.join('; ')}`;
  }

  const edit = role(li, 'edit');
  const forget = role(li, 'forget');
  const label = excerpt(e.content, 40);
  edit.setAttribute('aria-label', `Edit: ${label}`);
  forget.setAttribute('aria-label', `Forget: ${label}`);
  if (e.trust !== 'self') {
    // an edit would re-sign another author's text (an agent's, a trusted key's) as this
    // vault's own, or launder an unverified one into "self": the vault refuses both
    edit.remove();
  } else {
    edit.addEventListener('click', () => startEdit(e.id));
  }
  forget.addEventListener('click', () => openForget(e, forget));
  details(role(li, 'details'), e);
  const box = q(li, '.card-details');
  box.addEventListener('toggle', () => { if (box.open) showReceipts(role(li, 'receipts'), e); });
  return li;
}

/**
 * @param {HTMLElement} dl
 * @param {Entry} e
 */
function details(dl, e) {
  const rows = [
    ['ID', e.id],
    ['Author', e.trust === 'self' ? 'this vault' : (e.author_key_id ? `key ${e.author_key_id}` : 'unknown')],
    ['Authorship', e.authorship],
    ['Confidence', e.confidence !== null && e.confidence !== undefined ? percent(e.confidence) : null],
    ['Scope', e.scope],
    ['Source', e.source || null],
    ['Agent', e.agent_id ? `${e.agent_id}${e.agent_confirmed ? ' (its own key)' : ' (unconfirmed: signed by another trusted key)'}` : null],
    ['Created', dateTime(e.created)],
    ['Updated', e.updated ? dateTime(e.updated) : null],
    ['Replaces', e.supersedes ? shortId(e.supersedes) : null],
  ];
  for (const [k, v] of rows) {
    if (!v) continue;
    dl.append(el('dt', { text: k }), el('dd', { text: v }));
  }
}

// ------------------------------------------------------------------ edit in place

/** @param {string} id */
function startEdit(id) {
  setEditing(id);
  rerenderCard(id);
  const form = q(main, `li[data-id="${id}"] form`);
  const ta = form?.elements.content;
  if (ta) {
    ta.focus();
    ta.setSelectionRange(ta.value.length, ta.value.length);
  }
}

/** @param {string} id */
function rerenderCard(id) {
  const li = q(main, `li[data-id="${id}"]`);
  const e = entryById(id);
  const c = e && cards.get(e);
  if (li && c) {
    cards.delete(e);
    li.replaceWith(cardFor(e, c.onTag));
  }
}

/** @param {string} id */
function stopEdit(id) {
  setEditing(null);
  rerenderCard(id);
  q(main, `li[data-id="${id}"] [data-role="edit"]`)?.focus();
}

// ------------------------------------------------------------------ forget

const forgetDialog = new ConfirmDialog('forget-dialog');

// Once forgotten, the focus goes where a keyboard user was: the card that took its place in
// the list (the next one, else the one before), or the add field when the list is empty.
/**
 * @param {Entry} e
 * @param {HTMLElement} trigger
 */
function openForget(e, trigger) {
  const li = trigger.closest('li.card');
  const near = [li?.nextElementSibling, li?.previousElementSibling].map((n) => /** @type {HTMLElement | null | undefined} */ (n)?.dataset.id).filter(Boolean);
  forgetDialog.ask(e.content, trigger, () => call('forget', { id: e.id }), async (r) => {
    await saved(r.erased > 1 ? `Forgotten: ${r.erased} versions erased.` : 'Forgotten.');
    const next = near.map((id) => q(main, `li[data-id="${id}"] .card-actions button`)).find(Boolean);
    (next || q(main, '#add-content'))?.focus();
  });
}

on('lock', () => { cards = new WeakMap(); });
