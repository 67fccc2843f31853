// One memory's receipts in the public log, inside its card's details: read from the server
// by the vault worker (op `receipts`) each time the details open, and checked there, in the
// worker's Python, against this vault's holder key (ownmem.web.receipts).  Each receipt
// shows its operation, time and receiptId (short; the full id on hover and by Copy), and
// whether its signature verifies; one that does not is a warning, never dropped: a server
// that forges or rewrites receipts should be seen.

import { el, errorText, notice, oneLine, role } from '../dom.js';
import { dateTime, plural, shortId } from '../format.js';
import { currentSession, isCurrent } from '../state.js';
import { call } from '../vault.js';

/** @import { Entry, Receipt, Result } from '../../types/protocol' */

/** @type {Record<string, string>} */
const OPERATION = {
  REMEMBER: 'Remembered', FORGET: 'Forgotten', SHARE: 'Shared', REVOKE: 'Share revoked',
  RECALL: 'Recalled', STATUS: 'Status read', KEY: 'Key published',
};

/**
 * Read and show the receipts of entry `e` in `box` (the card's [data-role="receipts"]).
 * @param {HTMLElement} box
 * @param {Entry} e
 */
export async function showReceipts(box, e) {
  const state = role(box, 'receipts-state');
  const list = role(box, 'receipts-list');
  const warn = role(box, 'receipts-warning');
  box.setAttribute('aria-busy', 'true');
  state.textContent = 'Reading the public log…';
  const session = currentSession();
  let r;
  try {
    r = await call('receipts', { id: e.id });
  } catch (ex) {
    if (!isCurrent(session)) return;
    box.setAttribute('aria-busy', 'false');
    state.textContent = `Could not read the public log: ${oneLine(errorText(ex))}`;
    return;
  }
  if (!isCurrent(session) || !box.isConnected) return;
  box.setAttribute('aria-busy', 'false');
  list.replaceChildren(...r.receipts.map((x) => receiptRow(x, e)));
  list.hidden = r.receipts.length === 0;
  const bad = r.receipts.filter((x) => !x.verified).length;
  warn.hidden = bad === 0;
  warn.textContent = bad === 0 ? ''
    : `${bad === 1 ? '1 receipt does' : `${bad} receipts do`} not verify against this vault's holder key. `
      + 'The server or its log may be faulty or tampered with.';
  state.textContent = summary(r);
}

/** @param {Result<'receipts'>} r */
function summary(r) {
  if (r.cells === 0) return 'Not on the server yet: the log has no receipt for this memory.';
  if (r.receipts.length === 0) return 'The public log holds no receipt for this memory.';
  const ok = r.receipts.filter((x) => x.verified).length;
  let s = `${plural(r.receipts.length, 'receipt')} in the public log, ${ok} verified against this vault's holder key.`;
  if (r.truncated) s += ' Only the first ones are shown.';
  return s;
}

/**
 * @param {Receipt} x
 * @param {Entry} e
 */
function receiptRow(x, e) {
  const id = x.receipt_id || '';
  const li = el('li', {
    class: `receipt ${x.verified ? 'receipt-ok' : 'receipt-bad'}`, 'data-testid': 'receipt',
    'data-receipt-id': id, 'data-operation': x.operation, 'data-verified': String(x.verified),
  });
  const head = el('div', { class: 'receipt-head' },
    el('span', { class: 'receipt-op', text: OPERATION[x.operation] || x.operation || 'Unreadable' }),
    x.timestamp ? el('time', { datetime: new Date(x.timestamp * 1000).toISOString(), text: dateTime(x.timestamp) }) : null,
    x.object_id !== e.id ? el('span', { class: 'muted', text: 'an earlier version' }) : null);
  li.append(head);
  if (id) {
    li.append(el('div', { class: 'receipt-id' },
      el('code', { title: id, text: `${shortId(id)}…` }),
      el('button', {
        type: 'button', class: 'btn btn-small btn-ghost', text: 'Copy', 'aria-label': `Copy receipt ID ${id}`,
        onclick: () => copy(id),
      })));
  }
  li.append(x.verified
    ? el('p', { class: 'receipt-status', 'data-role': 'receipt-status', text: '✓ Signature verified (this vault\'s holder key)' })
    : el('p', { class: 'receipt-status receipt-warn', 'data-role': 'receipt-status', text: `⚠ Does not verify: ${x.problem}` }));
  return li;
}

/** @param {string} id */
async function copy(id) {
  try {
    await navigator.clipboard.writeText(id);
    notice('Receipt ID copied.');
  } catch {
    notice(`Receipt ID: ${id}`);
  }
}
