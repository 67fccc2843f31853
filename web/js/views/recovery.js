// The recovery sheet shown once a vault is created (views/welcome.js) and on demand in
// Settings: what the person needs to open the vault again elsewhere (its name, its server)
// and plain advice on where to keep the passphrase, which no one can reset.  Printable: the
// page prints the sheet alone (app.css, body.printing-sheet).  Never the passphrase itself.

import { el } from '../dom.js';
import { isoDate, PUBLIC_LOG_NOTE } from '../format.js';

/**
 * @param {{ name: string, server: string | null, created?: boolean, onClose?: () => void }} vault
 *   created: the vault was made just now (the sheet then says the day)
 * @returns {HTMLElement}
 */
export function recoverySheet({ name, server, created = false, onClose }) {
  /** @type {[string, string][]} */
  const facts = [['Vault name', name], ['Server', server || 'none: this vault lives only in this browser']];
  if (created) facts.push(['Made on', isoDate()]);
  const sheet = el('section', { class: 'panel recovery-sheet', 'aria-labelledby': 'recovery-title', 'data-testid': 'recovery-sheet' },
    el('h2', { id: 'recovery-title', class: 'panel-title', text: 'Your recovery sheet' }),
    el('dl', { class: 'facts' }, ...facts.flatMap(([k, v]) => [el('dt', { text: k }), el('dd', { text: v })])),
    el('p', { text: 'Your passphrase is the only key. Nobody can reset it, the server included.' }),
    el('ul', {},
      el('li', { text: 'Keep it in a password manager, or written on paper in a safe place at home.' }),
      el('li', { text: 'Do not keep it in this browser, in an email or in a photo on your phone.' }),
      el('li', { text: server ? 'To open this vault on another device: "Use my vault from a server", then this name and your passphrase.'
        : 'Keep an export (.amem file, in Settings) as well: it is the only other copy.' })),
    server ? el('p', { 'data-testid': 'recovery-log-note', text: PUBLIC_LOG_NOTE }) : null,
    // The recovery kit of the keys issue joins here, printed on this same sheet.
    el('div', { 'data-role': 'recovery-kit', hidden: true }),
    el('div', { class: 'actions no-print' },
      el('button', { type: 'button', class: 'btn', 'data-testid': 'recovery-print', text: 'Print', onclick: () => printSheet() }),
      onClose ? el('button', { type: 'button', class: 'btn btn-ghost', 'data-testid': 'recovery-close', text: 'Done', onclick: onClose }) : null));
  return sheet;
}

function printSheet() {
  document.body.classList.add('printing-sheet');
  const done = () => document.body.classList.remove('printing-sheet');
  globalThis.addEventListener('afterprint', done, { once: true });
  globalThis.print();
}
