// The recovery sheet shown once a vault is created (views/welcome.js) and on demand in
// Settings: what the person needs to open the vault again elsewhere (its name, its server)
// and plain advice on where to keep the passphrase, which no one can reset.  Printable: the
// page prints the sheet alone (app.css, body.printing-sheet).  Never the passphrase itself.
// With it, the recovery kit (ownmem.vault.recovery): 12 words and their QR code, shown once
// after the vault is made, after the kit is used, and when Settings makes a new kit.

import { el, errorText, showError } from '../dom.js';
import { isoDate, PUBLIC_LOG_NOTE } from '../format.js';
import { drawQr } from '../qr.js';
import { call } from '../vault.js';

/**
 * @param {{ name: string, server: string | null, created?: boolean, onClose?: () => void, kit?: string[] | null,
 *   newKit?: boolean }} vault
 *   created: the vault was made just now (the sheet then says the day); kit: the words of a kit
 *   made just now, shown this once; newKit: offer to make a new kit (Settings)
 * @returns {HTMLElement}
 */
export function recoverySheet({ name, server, created = false, onClose, kit = null, newKit = false }) {
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
    // the recovery kit, printed on this same sheet
    el('div', { 'data-role': 'recovery-kit', hidden: true }),
    newKit ? newKitOffer() : null,
    el('div', { class: 'actions no-print' },
      el('button', { type: 'button', class: 'btn', 'data-testid': 'recovery-print', text: 'Print', onclick: () => printSheet() }),
      onClose ? el('button', { type: 'button', class: 'btn btn-ghost', 'data-testid': 'recovery-close', text: 'Done', onclick: onClose }) : null));
  if (kit) showKit(sheet, kit);
  return sheet;
}

// The kit's words, numbered, and their QR code (the words as text: a phone's camera reads them
// back), shown in the sheet's kit section; the page never keeps them anywhere else.
/**
 * @param {HTMLElement} sheet
 * @param {string[]} words
 */
export function showKit(sheet, words) {
  const box = /** @type {HTMLElement} */ (sheet.querySelector('[data-role="recovery-kit"]'));
  const canvas = el('canvas', { class: 'kit-qr', 'data-testid': 'recovery-qr', role: 'img', 'aria-label': 'QR code of the 12 words' });
  box.replaceChildren(
    el('h3', { text: 'Your recovery kit' }),
    el('p', { text: 'If you forget your passphrase, these 12 words open your vault, on this device or a new one. '
      + 'Write them down or print this page now, and keep it somewhere safe at home: they are shown only this once. '
      + 'Whoever holds them can open your vault.' }),
    el('ol', { class: 'kit-words', 'data-testid': 'recovery-words' },
      ...words.map((w) => el('li', { 'data-testid': 'recovery-word', text: w }))),
    canvas,
    el('p', { class: 'muted', text: 'Using the kit asks you for a new passphrase and then gives you a new kit: this one then stops working.' }));
  box.hidden = false;
  drawQr(/** @type {HTMLCanvasElement} */ (canvas), words.join(' '), 3).catch(() => { canvas.hidden = true; });
}

// Settings: a new kit on demand (the last one stops working), asked once more before it is made.
function newKitOffer() {
  const err = el('p', { class: 'error', role: 'alert', hidden: true });
  const confirm = el('button', { type: 'button', class: 'btn', 'data-testid': 'recovery-create-confirm', hidden: true,
    text: 'Make the new kit', onclick: async () => {
      confirm.disabled = true;
      showError(err, '');
      try {
        const { words } = await call('recovery_create', {});
        const sheet = /** @type {HTMLElement} */ (offer.closest('.recovery-sheet'));
        showKit(sheet, words);
        offer.hidden = true;
      } catch (ex) {
        showError(err, errorText(ex));
        confirm.disabled = false;
      }
    } });
  const offer = el('div', { class: 'no-print', 'data-testid': 'recovery-new-kit' },
    el('p', { text: 'Lost your recovery kit, or someone may have seen it? Make a new one: the old words then stop opening your vault.' }),
    el('button', { type: 'button', class: 'btn btn-ghost', 'data-testid': 'recovery-create', text: 'Make a new recovery kit…',
      onclick: () => { confirm.hidden = false; confirm.focus(); } }),
    confirm, err);
  return offer;
}

function printSheet() {
  document.body.classList.add('printing-sheet');
  const done = () => document.body.classList.remove('printing-sheet');
  globalThis.addEventListener('afterprint', done, { once: true });
  globalThis.print();
}
