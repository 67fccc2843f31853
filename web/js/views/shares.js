// The shares screen: sharing between people (SAIHM "Sharing contracts"; ownmem
// py/ownmem/vault/sharing.py).  This vault's holderId (what another person needs to share
// with it), the contracts offered by this vault and to it, each with its state (offered,
// accepted, declined, withdrawn; revoked; expired) and what can be done with it (Revoke for
// the sharer; Accept, Decline, Withdraw for the grantee), and the memories shared with this
// vault, each badged with its owner's holderId.  Every contract and shared memory is checked
// in the vault worker before it is listed; what does not verify is said, never shown.
// Shared memories are read from the server each time the screen shows and kept nowhere:
// a revocation governs every later read.  Offering is share-offer.js's form; the holder ID
// shows with its share link and that link's QR code (qr.js).

import { ConfirmDialog } from '../dialog.js';
import { el, errorText, focusTitle, mount, notice, oneLine, role, showError, tpl } from '../dom.js';
import { dateTime, excerpt, PUBLIC_LOG_NOTE, shortId, typeLabel } from '../format.js';
import { defineScreen, showView } from '../nav.js';
import { currentSession, entryById, isCurrent, isLinked } from '../state.js';
import { call } from '../vault.js';
import { drawQr } from '../qr.js';
import { shareLink, takePendingHolder, wireOffer } from './share-offer.js';

/** @import { Result, Share, Shared } from '../../types/protocol' */
/** @typedef {{ op: 'share_revoke', args: { id: string } }
 *           | { op: 'share_answer', args: { id: string, action: 'accept' | 'decline' | 'withdraw' } }} Answer */

/** @type {Record<string, string>} */
const STATE = { offered: 'Waiting for an answer', accepted: 'Accepted', declined: 'Declined', withdrawn: 'Withdrawn' };
/** @type {Record<string, string>} */
const MODE = { TEMPORARY: 'Temporary', PERMANENT: 'Permanent', SYNDICATE: 'Syndicate' };

function showShares() {
  const node = mount(tpl('tpl-shares'));
  role(node, 'back').addEventListener('click', () => showView('memories'));
  role(node, 'refresh').addEventListener('click', () => load(node));
  role(node, 'log-note').textContent = PUBLIC_LOG_NOTE;
  const offer = wireOffer(node, () => {
    notice('Offered. They see nothing until they accept.');
    load(node);
  });
  const linked = takePendingHolder();
  if (linked !== null) offer.open(linked); else focusTitle(node);
  load(node);
}

/** @param {HTMLElement} node */
async function load(node) {
  const state = role(node, 'shares-state');
  const err = role(node, 'error');
  showError(err, '');
  if (!isLinked()) {
    state.textContent = 'Sharing goes through a sync server: link this vault first (Settings).';
    return;
  }
  node.setAttribute('aria-busy', 'true');
  state.textContent = 'Reading the shares from the server…';
  const session = currentSession();
  try {
    const [offers, shared] = await Promise.all([call('shares'), call('shared')]);
    if (!isCurrent(session) || !node.isConnected) return;
    render(node, offers, shared);
    state.textContent = '';
  } catch (ex) {
    if (!isCurrent(session) || !node.isConnected) return;
    state.textContent = '';
    showError(err, `Could not read the shares: ${oneLine(errorText(ex))}`);
  } finally {
    node.setAttribute('aria-busy', 'false');
  }
}

/**
 * @param {HTMLElement} node
 * @param {Result<'shares'>} offers
 * @param {Result<'shared'>} shared
 */
function render(node, offers, shared) {
  const me = role(node, 'holder-id');
  me.textContent = offers.holder_id;
  me.title = offers.holder_id;
  role(node, 'copy-holder').onclick = () => copy(offers.holder_id, 'Holder ID copied.');
  const link = shareLink(offers.holder_id);
  const box = role(node, 'share-link');
  role(box, 'link-text').textContent = link;
  role(box, 'copy-link').onclick = () => copy(link, 'Share link copied.');
  box.hidden = false;
  const qr = /** @type {HTMLCanvasElement} */ (role(box, 'qr'));
  if (qr.dataset.text !== link) drawQr(qr, link).catch(() => { qr.hidden = true; });

  const refused = role(node, 'refused');
  const bad = [...offers.refused, ...shared.refused.map(([cell, why]) => `Shared cell ${shortId(cell)}…: ${why}`)];
  if (offers.more) {
    bad.push('The server listed only part of the contracts (active ones first, then the newest): '
      + 'decline offers you do not want to see the rest.');
  }
  refused.hidden = bad.length === 0;
  role(refused, 'refused-line').textContent = bad.length
    ? `${bad.length === 1 ? '1 entry' : `${bad.length} entries`} from the server did not verify and ${bad.length === 1 ? 'is' : 'are'} not shown.` : '';
  role(refused, 'refused-list').replaceChildren(...bad.map((s) => el('li', { text: s })));

  list(role(node, 'offered'), offers.offered, (s) => contractRow(node, s, 'offered'),
    'You have not shared any memory yet: use Share memories above.');
  list(role(node, 'received'), offers.received, (s) => contractRow(node, s, 'received'),
    'Nobody has offered to share memories with you.');
  list(role(node, 'shared'), shared.memories, sharedCard, 'No memory is shared with you right now.');
}

const memoryCount = (/** @type {number} */ n) => (n === 1 ? '1 memory' : `${n} memories`);

/**
 * @template T
 * @param {HTMLElement} ul
 * @param {T[]} items
 * @param {(item: T) => HTMLElement} row
 * @param {string} empty what the list says when it has no item
 */
function list(ul, items, row, empty) {
  ul.replaceChildren(...(items.length ? items.map(row) : [el('li', { class: 'muted', text: empty })]));
}

/** @param {Share} s */
function stateText(s) {
  if (s.revoked) return 'Revoked';
  if (s.expired) return 'Expired';
  return STATE[s.state] || s.state;
}

/**
 * @param {HTMLElement} node
 * @param {Share} s
 * @param {'offered' | 'received'} side
 */
function contractRow(node, s, side) {
  const who = side === 'offered' ? s.grantee : s.holder_id;
  const li = el('li', {
    class: `share ${s.active ? 'share-active' : ''}`, 'data-testid': `share-${side}`, 'data-contract': s.contract_id,
    'data-state': s.revoked ? 'revoked' : s.expired ? 'expired' : s.state,
  });
  const covered = side === 'offered'
    ? /** @type {string[]} */ (s.memories.map((id) => entryById(id)?.content).filter(Boolean)) : [];
  li.append(...[
    el('div', { class: 'share-head' },
      el('span', { class: `badge share-state share-state-${s.revoked ? 'revoked' : s.expired ? 'expired' : s.state}`, text: stateText(s) }),
      el('span', { class: 'share-mode', text: `${MODE[s.mode] || s.mode} · read only` }),
      s.expires_at ? el('span', { class: 'muted', text: `until ${dateTime(s.expires_at)}` }) : null),
    el('p', { class: 'share-who' },
      side === 'offered' ? 'With ' : 'From ',
      s.holder_name && side === 'received' ? el('strong', { text: `${s.holder_name} ` }) : null,
      el('code', { title: who, text: `${shortId(who)}…` }),
      ` · ${memoryCount(s.cells.length)}`),
    covered.length ? el('ul', { class: 'share-memories', 'aria-label': 'Memories it covers' },
      ...covered.map((t) => el('li', { text: excerpt(t, 80) }))) : null,
    el('p', { class: 'muted small', text: `Contract ${shortId(s.contract_id)}… · offered ${dateTime(s.timestamp)}` }),
  ].filter(Boolean));
  const actions = el('div', { class: 'actions' });
  const label = side === 'offered' ? `with ${shortId(who)}` : `from ${s.holder_name || shortId(who)}`;
  /** @type {(text: string, op: Answer['op'], args: Answer['args'], cls: string, quote?: string) => void} */
  const act = (text, op, args, cls, quote) => actions.append(el('button', {
    type: 'button', class: `btn btn-small ${cls}`, text, 'data-testid': `share-${text.toLowerCase()}`,
    'aria-label': `${text} the share ${label}`,
    onclick: (/** @type {MouseEvent} */ ev) => answer(node, /** @type {HTMLButtonElement} */ (ev.currentTarget), op, args, quote),
  }));
  if (side === 'offered' && !s.revoked && !s.expired && s.state !== 'declined' && s.state !== 'withdrawn') {
    act('Revoke', 'share_revoke', { id: s.contract_id }, 'btn-danger-ghost',
      `Shared with holder ${shortId(who)}… · ${memoryCount(s.cells.length)}`);
  }
  if (side === 'received' && !s.revoked && !s.expired) {
    if (s.state === 'offered') {
      act('Accept', 'share_answer', { id: s.contract_id, action: 'accept' }, 'btn-primary');
      act('Decline', 'share_answer', { id: s.contract_id, action: 'decline' }, '');
    } else if (s.state === 'accepted') {
      act('Withdraw', 'share_answer', { id: s.contract_id, action: 'withdraw' }, '',
        `Shared by ${s.holder_name || 'holder'} ${shortId(who)}… · ${memoryCount(s.cells.length)}`);
    }
  }
  if (actions.childElementCount) li.append(actions);
  return li;
}

const revokeDialog = new ConfirmDialog('revoke-dialog');
const withdrawDialog = new ConfirmDialog('withdraw-dialog');

// Revoke and Withdraw ask first (they cannot be undone); Accept and Decline do not: an
// offer is only an answer away, and declining is what doing nothing means anyway.
/**
 * @param {HTMLElement} node
 * @param {HTMLButtonElement} button
 * @param {Answer['op']} op
 * @param {Answer['args']} args
 * @param {string} [quote] what the dialog that asks first quotes (none: no dialog)
 */
async function answer(node, button, op, args, quote) {
  const done = async () => {
    // (share_answer's args have an action)
    notice(op === 'share_revoke' ? 'Share revoked.'
      : `Share ${{ accept: 'accepted', decline: 'declined', withdraw: 'withdrawn' }[/** @type {{ action: 'accept' | 'decline' | 'withdraw' }} */ (args).action]}.`);
    await load(node);
  };
  if (quote) {
    (op === 'share_revoke' ? revokeDialog : withdrawDialog).ask(quote, button, () => call(op, args), done);
    return;
  }
  button.disabled = true;
  try {
    await call(op, args);
    await done();
  } catch (ex) {
    showError(role(node, 'error'), errorText(ex));
    if (button.isConnected) button.disabled = false;
  }
}

/** @param {Shared} m */
function sharedCard(m) {
  return el('li', { class: 'card card-shared', 'data-testid': 'shared-memory', 'data-id': m.object_id },
    el('div', { class: 'card-head' },
      el('span', {
        class: 'badge badge-shared', 'data-testid': 'shared-badge', 'data-owner': m.owner_holder_id,
        title: `Shared with you by holder ${m.owner_holder_id}: another person's memory, signed by their key`,
        text: `shared by ${m.owner_name ? `${m.owner_name} ` : ''}${shortId(m.owner_holder_id)}…`,
      }),
      el('span', { class: 'card-type', text: typeLabel(m.type) })),
    el('p', { class: 'card-content', 'data-role': 'content', text: m.content }),
    m.tags.length ? el('ul', { class: 'chips', 'aria-label': 'Tags' }, ...m.tags.map((/** @type {string} */ t) => el('li', { class: 'chip', text: t }))) : null,
    el('p', { class: 'card-meta', text: [dateTime(m.created), `contract ${shortId(m.contract_id)}…`].filter(Boolean).join(' · ') }));
}

/**
 * @param {string} text
 * @param {string} done what the notice says once it is copied
 */
async function copy(text, done) {
  try {
    await navigator.clipboard.writeText(text);
    notice(done);
  } catch {
    notice(text);
  }
}

defineScreen('shares', showShares);
