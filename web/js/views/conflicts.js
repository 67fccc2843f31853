// The conflicts screen: each memory changed on two devices at once, with its concurrent
// versions side by side.  "Keep this version" asks first (the confirm dialog, dialog.js),
// then the worker's `resolve` saves that text as one new version, signed by this vault,
// that supersedes every concurrent head.  ownmem never picks a version by itself.

import { ConfirmDialog } from '../dialog.js';
import { el, focusTitle, mount, role, tpl } from '../dom.js';
import { agentBadge, dateTime, trustBadge, typeLabel } from '../format.js';
import { defineScreen, showView } from '../nav.js';
import { conflictGroups, currentView, entryById, on } from '../state.js';
import { call } from '../vault.js';
import { saved } from './syncstatus.js';

/** @import { Entry } from '../../types/protocol' */

function showConflicts() {
  const node = mount(tpl('tpl-conflicts'));
  role(node, 'back').addEventListener('click', () => showView('memories'));
  const groups = role(node, 'groups');
  const all = conflictGroups();
  if (!all.length) {
    groups.append(el('p', { class: 'empty-title', text: 'No conflicts. Every memory has one current version.' }));
  }
  all.forEach((/** @type {string[]} */ ids, /** @type {number} */ gi) => groups.append(group(ids, gi)));
  focusTitle(node);
}

/**
 * @param {string[]} ids
 * @param {number} gi
 */
function group(ids, gi) {
  const versions = /** @type {Entry[]} */ (ids.map((id) => entryById(id)).filter(Boolean));
  const section = el('section', { class: 'panel conflict-group', 'aria-labelledby': `conflict-${gi}` },
    el('h2', { class: 'panel-title', id: `conflict-${gi}`, text: `Memory with ${ids.length} concurrent versions` }));
  const grid = el('div', { class: 'conflict-versions' });
  versions.forEach((e, vi) => grid.append(version(e, vi)));
  if (versions.length < ids.length) {
    grid.append(el('p', { class: 'muted', text: `${ids.length - versions.length} version(s) could not be opened here.` }));
  }
  section.append(grid);
  return section;
}

/**
 * @param {Entry} e
 * @param {number} vi
 */
function version(e, vi) {
  const badge = el('span');
  trustBadge(badge, e);
  const agent = el('span', { class: 'badge badge-agent', 'data-testid': 'agent-badge' });
  agentBadge(agent, e);
  return el('article', { class: 'version', 'data-testid': 'conflict-version', 'aria-label': `Version ${vi + 1}` },
    el('div', { class: 'card-head' }, el('span', { class: 'version-no', text: `Version ${vi + 1}` }), badge,
      agent.hidden ? null : agent),
    el('p', { class: 'card-content', text: e.content }),
    e.tags.length ? el('ul', { class: 'chips', 'aria-label': 'Tags' }, ...e.tags.map((/** @type {string} */ t) => el('li', { class: 'chip', text: t }))) : null,
    el('p', { class: 'card-meta', text: [typeLabel(e.type), e.scope, dateTime(e.updated || e.created)].filter(Boolean).join(' · ') }),
    el('button', { type: 'button', class: 'btn btn-primary btn-small', 'data-testid': 'keep-button',
      text: 'Keep this version', onclick: (/** @type {MouseEvent} */ ev) => keepVersion(e, /** @type {HTMLElement} */ (ev.currentTarget)) }));
}

const keepDialog = new ConfirmDialog('keep-dialog');

// One new version, signed by you, supersedes every concurrent head: one head remains, and
// the history stays until it is forgotten.
/**
 * @param {Entry} e
 * @param {HTMLElement} trigger
 */
function keepVersion(e, trigger) {
  keepDialog.ask(e.content, trigger, () => call('resolve', { id: e.id }),
    () => saved('Conflict resolved: the chosen version is kept.'));
}

defineScreen('conflicts', showConflicts);
on('listing', () => {
  if (currentView() === 'conflicts') showConflicts();
});
