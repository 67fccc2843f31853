// The memories screen: the add form (on a phone closed to one line until tapped: the list
// comes first), search and filters (tag, type, trust, scope), the "Show unverified" toggle,
// the list of cards (views/card.js) a page at a time, the summary line, the empty state, and
// the banner that leads to the conflicts view.  Filters run in the page over the decrypted
// list; a search query goes to the vault worker's `search` (ownmem's one ranking: stemmed words, best first), with the filters, and the list shows its order;
// nothing of either reaches storage.  Memories that cannot be authenticated are listed only while the toggle is on
// (ApertoMemory "Opening a sealed object"): the worker is asked for them then only, so
// search and filters never see them otherwise.

import {
  el, enterSubmits, errorText, main, mount, notice, oneLine, q, role, setSaving, showError, showsPercent, tpl,
} from '../dom.js';
import { isAgentWritten, parseTags, typeLabel } from '../format.js';
import { defineScreen, showView } from '../nav.js';
import {
  conflictGroups, currentSession, currentView, entries, entryById, isCurrent, isLoaded, on, refusedCount, scopeNames,
  setShowUnverified, showsUnverified,
} from '../state.js';
import { call, refreshList, showAdded } from '../vault.js';
import { cardFor } from './card.js';
import { afterWrite } from './syncstatus.js';

/** @import { Entry } from '../../types/protocol' */

const PAGE = 100;
/** @type {('tag' | 'type' | 'trust' | 'scope')[]} */
const FILTERS = ['tag', 'type', 'trust', 'scope'];
const noFilters = () => ({ q: '', tag: '', type: '', trust: '', scope: '' });

let filters = noFilters();
let limit = PAGE;

function showMemories() {
  const node = mount(tpl('tpl-vault'));
  const form = q(node, '#add-form');
  enterSubmits(form.elements.content);
  showsPercent(form.elements.confidence, role(form, 'confidence-out'));
  form.addEventListener('submit', (/** @type {SubmitEvent} */ e) => { e.preventDefault(); addMemory(form); });
  wireAddOpen(form);

  const search = q(node, '#search');
  search.value = filters.q;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let t;
  search.addEventListener('input', () => {
    clearTimeout(t);
    t = setTimeout(() => { filters.q = search.value; limit = PAGE; renderList(); }, 120);
  });
  search.addEventListener('keydown', (/** @type {KeyboardEvent} */ e) => {
    if (e.key === 'Escape' && search.value) {
      e.preventDefault();
      search.value = '';
      filters.q = '';
      renderList();
    }
  });
  for (const key of FILTERS) {
    const sel = q(node, `#filter-${key}`);
    sel.addEventListener('change', () => { filters[key] = sel.value; limit = PAGE; renderList(); });
  }
  const toggle = role(node, 'filters-toggle');
  toggle.addEventListener('click', () => {
    const open = toggle.getAttribute('aria-expanded') !== 'true';
    toggle.setAttribute('aria-expanded', String(open));
    q(node, '.toolbar').classList.toggle('filters-open', open);
    if (open) q(node, '#filters select')?.focus();
  });
  const unverified = q(node, '#show-unverified');
  unverified.checked = showsUnverified();
  unverified.addEventListener('change', () => toggleUnverified(unverified.checked));
  role(node, 'open-conflicts').addEventListener('click', () => showView('conflicts'));
  role(node, 'show-more').addEventListener('click', () => {
    limit += PAGE;
    renderList();
  });
  fillOptions();
  renderList();
}

// A phone's add form is closed to its text field ("+ Add a memory…"; CSS hides the rest and
// keeps it open on a wider screen): a tap on it, or typing in it, opens the whole form; Cancel or
// Escape closes it again, the focus staying in the field and what was typed kept, so nothing is
// lost by closing it by mistake.  Focus alone does not open it: Cancel and Escape leave the focus
// there.
const CLOSED_HINT = '+ Add a memory…';
const OPEN_HINT = 'Something your agents should remember…';
// the width under which css/app.css closes the form ("small screens")
const PHONE = matchMedia('(max-width: 720px)');

/** @param {HTMLFormElement & { elements: Record<string, any> }} form */
function wireAddOpen(form) {
  const text = form.elements.content;
  const open = () => { if (form.classList.contains('add-closed')) setAddOpen(form, true); };
  text.addEventListener('click', open);
  text.addEventListener('input', open);
  role(form, 'add-cancel').addEventListener('click', () => setAddOpen(form, false));
  form.addEventListener('keydown', (/** @type {KeyboardEvent} */ e) => {
    if (e.key === 'Escape' && !e.defaultPrevented && PHONE.matches && !form.classList.contains('add-closed')) {
      e.preventDefault();
      setAddOpen(form, false);
    }
  });
  hint(form);
  PHONE.onchange = () => { if (form.isConnected) hint(form); };
}

/** @param {HTMLFormElement & { elements: Record<string, any> }} form */
function hint(form) {
  form.elements.content.placeholder = PHONE.matches && form.classList.contains('add-closed') ? CLOSED_HINT : OPEN_HINT;
}

/**
 * @param {HTMLFormElement & { elements: Record<string, any> }} form
 * @param {boolean} on
 */
function setAddOpen(form, on) {
  form.classList.toggle('add-closed', !on);
  hint(form);
  const text = form.elements.content;
  if (!on && document.activeElement !== text) text.focus();
}

// On: ask the worker for the list with them.  Off: they leave the screen at once, and the
// list read again leaves the page without their text.
/** @param {boolean} on */
function toggleUnverified(on) {
  setShowUnverified(on);
  if (!on && filters.trust === 'unverified') filters.trust = '';
  limit = PAGE;
  fillOptions();
  renderList();
  refreshList();
}

/** @param {HTMLFormElement & { elements: Record<string, any> }} form */
async function addMemory(form) {
  const err = role(form, 'error');
  showError(err, '');
  const content = form.elements.content.value.trim();
  if (!content) {
    showError(err, 'Write the memory first.');
    form.elements.content.focus();
    return;
  }
  const args = {
    content,
    tags: parseTags(form.elements.tags.value),
    type: form.elements.type.value,
    confidence: Number(form.elements.confidence.value),
    scope: form.elements.scope.value || 'default',
  };
  const session = currentSession();
  if (form.getAttribute('aria-busy') === 'true') return;   // a second Ctrl+Enter during the save
  // the text fields stay editable during the save: what was typed after it stays (dom.js setSaving)
  const sent = { content: form.elements.content.value, tags: form.elements.tags.value };
  setSaving(form, true);
  try {
    const r = await call('add', args);
    if (!isCurrent(session)) return;
    for (const name of /** @type {const} */ (['content', 'tags'])) {
      const now = form.elements[name].value;
      form.elements[name].value = now.startsWith(sent[name]) ? now.slice(sent[name].length).replace(/^\s+/, '') : now;
    }
    notice('Memory added.');
    // the form closes once its memory is in (a phone's: the list, with the new one first, shows;
    // a wider screen shows it open all the same)
    setAddOpen(form, false);
    await showAdded(r);
    afterWrite();
  } catch (ex) {
    if (isCurrent(session)) showError(err, errorText(ex));
  } finally {
    if (isCurrent(session) && form.isConnected) {
      setSaving(form, false);
      form.elements.content.focus();
    }
  }
}

/**
 * @param {HTMLSelectElement | null} select
 * @param {Iterable<string>} values
 * @param {string | null} allLabel the option for every value, if any
 * @param {(v: string) => string} [label]
 */
function setOptions(select, values, allLabel, label = (v) => v) {
  if (!select) return;
  const keep = select.value;
  /** @type {HTMLOptionElement[]} */
  const opts = [];
  if (allLabel !== null) opts.push(el('option', { value: '', text: allLabel }));
  for (const v of values) opts.push(el('option', { value: v, text: label(v) }));
  select.replaceChildren(...opts);
  if ([...select.options].some((o) => o.value === keep)) select.value = keep;
}

function fillOptions() {
  /** @type {Set<string>} */
  const tags = new Set();
  const types = new Set(['semantic', 'episodic', 'procedural']);
  for (const e of listed()) {
    for (const t of e.tags) tags.add(t);
    types.add(e.type);
  }
  const scopes = scopeNames();
  const byName = (/** @type {string} */ a, /** @type {string} */ b) => a.localeCompare(b, undefined, { sensitivity: 'base' });
  setOptions(q(main, '#filter-tag'), [...tags].sort(byName), 'All tags');
  setOptions(q(main, '#filter-type'), [...types], 'All types', typeLabel);
  setOptions(q(main, '#filter-scope'), [...scopes].sort(byName), 'All scopes');
  const addScope = q(main, '#add-scope');
  if (addScope) {
    const had = addScope.options.length;
    setOptions(addScope, scopes, null);
    if (!had) addScope.value = scopes.includes('default') ? 'default' : scopes[0];
    // one scope: nothing to choose, so no control for it (here and in the filters)
    addScope.closest('.field').hidden = scopes.length < 2;
    q(main, '#filter-scope').closest('.field').hidden = scopes.length < 2;
    q(main, '.filters').classList.toggle('filters-3', scopes.length < 2);
  }
  const onlyUnverified = role(main, 'trust-unverified');
  if (onlyUnverified) {
    onlyUnverified.disabled = !showsUnverified();
    onlyUnverified.textContent = showsUnverified() ? 'Unverified' : 'Unverified (hidden)';
  }
  for (const key of FILTERS) {
    const sel = q(main, `#filter-${key}`);
    if (!sel) continue;
    if ([...sel.options].some((/** @type {HTMLOptionElement} */ o) => o.value === filters[key])) sel.value = filters[key];
    else filters[key] = sel.value = '';
  }
}

// The ranked answer to the current query and filters, as the worker's `search` gave it.  `key`
// says which question it answers (the query, the filters, the listing it ranked); an answer to an
// older question (the person typed on, the list changed) is never shown as the current one.
/** @type {{ key: string, ids: string[] | null, failed: boolean }} */
let ranked = { key: '', ids: null, failed: false };
let asked = 0;          // the number of the newest question: only its answer is taken
let askedKey = '';
let listingVersion = 0; // bumped by every new listing or added memory: the worker then ranks them too
/** @type {Entry[]} what the list showed last, kept on screen while a newer answer is on its way */
let lastShown = [];

function searchKey() {
  const f = filters;
  return JSON.stringify([f.q.trim(), f.tag, f.type, f.scope, f.trust, showsUnverified(), listingVersion]);
}

/** Ask the worker to rank for the current question, unless that is asked already. */
function askRanking() {
  const key = searchKey();
  if (key === askedKey) return;
  askedKey = key;
  const seq = ++asked;
  const session = currentSession();
  const f = filters;
  call('search', { query: f.q, tag: f.tag, type: f.type, scope: f.scope, trust: f.trust,
    include_unverified: showsUnverified() }).then((r) => {
    if (seq !== asked || !isCurrent(session)) return;   // a newer question was asked meanwhile
    ranked = { key, ids: r.ids, failed: false };
    renderList();
  }, (ex) => {
    if (seq !== asked || !isCurrent(session)) return;
    // the list still answers, by the words as typed (the old containment search), and says so
    ranked = { key, ids: null, failed: true };
    notice(`Search could not rank the memories (${oneLine(errorText(ex))}); showing those that contain the words.`);
    renderList();
  });
}

/** @param {Entry} e */
function hay(e) {
  return `${e.content}\n${e.tags.join(' ')}`.toLocaleLowerCase();
}

// What the list may show at all: an unverified memory only while the toggle is on (a list
// read before it was turned off may still hold some until it is read again).
function listed() {
  return showsUnverified() ? entries() : entries().filter((e) => e.trust !== 'unverified');
}

/** @param {Entry} e */
function admitted(e) {
  const f = filters;
  if (!showsUnverified() && e.trust === 'unverified') return false;
  if (f.tag && !e.tags.includes(f.tag)) return false;
  if (f.type && e.type !== f.type) return false;
  if (f.scope && e.scope !== f.scope) return false;
  if (f.trust === 'agent' ? !isAgentWritten(e) : f.trust && e.trust !== f.trust) return false;
  return true;
}

// Without a query: the listing's order (newest first), filtered.  With one: the worker's ranked
// order (the filters applied again here, as the list may have changed since it answered); until
// the answer to the current question is in, what was shown stays (without what left the list).
function visibleEntries() {
  if (!filters.q.trim()) return listed().filter(admitted);
  const key = searchKey();
  if (ranked.key === key && ranked.failed) {
    const terms = filters.q.toLocaleLowerCase().split(/\s+/).filter(Boolean);
    return listed().filter((e) => admitted(e) && terms.every((t) => hay(e).includes(t)));
  }
  if (ranked.key === key && ranked.ids) {
    /** @type {Entry[]} */
    const out = [];
    for (const id of ranked.ids) {
      const e = entryById(id);
      if (e && admitted(e)) out.push(e);
    }
    return out;
  }
  askRanking();
  /** @type {Entry[]} */
  const still = [];
  for (const old of lastShown) {
    const e = entryById(old.id);   // as the listing has it now (a new listing brings new objects)
    if (e && admitted(e)) still.push(e);
  }
  return still;
}

function renderList() {
  const list = q(main, '#memory-list');
  if (!list) return;
  const shown = visibleEntries();
  lastShown = shown;
  // Cards already in the list stay where they are: only new ones are built and inserted.
  let at = list.firstElementChild;
  for (const node of shown.slice(0, limit).map((e) => cardFor(e, filterTag))) {
    if (node === at) at = at.nextElementSibling;
    else list.insertBefore(node, at);
  }
  while (at) {
    const next = at.nextElementSibling;
    at.remove();
    at = next;
  }
  list.setAttribute('aria-busy', String(!isLoaded()));
  renderAround(shown);
}

// Everything of the screen but the cards: the filters' count, summary, empty state,
// "show more", the conflicts banner.
/** @param {Entry[]} shown */
function renderAround(shown) {
  const all = listed().length;
  const active = FILTERS.filter((k) => filters[k]).length;
  const toggle = role(main, 'filters-toggle');
  if (active) toggle.dataset.active = String(active);
  else delete toggle.dataset.active;
  toggle.setAttribute('aria-label', active ? `Filters (${active} active)` : 'Filters');

  const filtering = Boolean(filters.q || active);
  let s = !isLoaded() ? 'Opening your memories…'
    : filtering ? `${shown.length} of ${all} ${all === 1 ? 'memory matches' : 'memories match'}`
      : `${all} ${all === 1 ? 'memory' : 'memories'}`;
  // Hidden, the unverified ones are among those the vault refused to open.
  const refused = refusedCount();
  const verb = refused === 1 ? 'is' : 'are';
  if (refused && !showsUnverified()) s += ` · ${refused} cannot be authenticated and ${verb} hidden`;
  else if (refused) s += ` · ${refused} could not be opened and ${verb} hidden`;
  role(main, 'summary').textContent = s;

  const empty = role(main, 'empty');
  empty.replaceChildren();
  empty.hidden = !isLoaded() || shown.length > 0;
  if (isLoaded() && !shown.length) {
    if (all === 0 && refused && !showsUnverified()) {
      empty.append(el('p', { class: 'empty-title', text: 'No memory to show.' }),
        el('p', { class: 'muted', text: 'What this vault holds cannot be authenticated. Turn on “Show unverified” to see it, marked as such.' }));
    } else if (all === 0) {
      empty.append(el('p', { class: 'empty-title', text: 'Your vault is empty.' }),
        el('p', { class: 'muted', text: 'Add the first thing your agents should know about you: it is encrypted before it is stored.' }));
    } else {
      empty.append(el('p', { class: 'empty-title', text: 'No memory matches.' }),
        el('button', { type: 'button', class: 'btn btn-small', text: 'Clear search and filters', onclick: clearFilters }));
    }
  }
  const more = role(main, 'more');
  more.hidden = shown.length <= limit;
  if (!more.hidden) role(more, 'show-more').textContent = `Show more (${shown.length - limit} left)`;

  const groups = conflictGroups().length;
  const banner = role(main, 'conflicts-banner');
  banner.hidden = groups === 0;
  role(banner, 'conflicts-count').textContent = groups === 1 ? '1 conflict.' : `${groups} conflicts.`;
}

function clearFilters() {
  filters = noFilters();
  for (const key of FILTERS) q(main, `#filter-${key}`).value = '';
  q(main, '#search').value = '';
  renderList();
  q(main, '#search').focus();
}

/** @param {string} tag */
function filterTag(tag) {
  filters.tag = tag;
  const sel = q(main, '#filter-tag');
  if (sel) sel.value = tag;
  limit = PAGE;
  renderList();
  sel?.focus();
}

function rerender() {
  if (currentView() !== 'memories') return;
  fillOptions();
  renderList();
}

// A new listing or an added memory: the worker ranks what it listed, so the question is asked again.
function listingChanged() {
  listingVersion++;
  rerender();
}

defineScreen('memories', showMemories);
on('open', () => { limit = PAGE; });
on('listing', listingChanged);
on('added', listingChanged);
on('lock', () => {
  filters = noFilters();
  ranked = { key: '', ids: null, failed: false };
  askedKey = '';
  lastShown = [];
});
