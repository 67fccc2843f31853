// DOM helpers every view uses: templates of index.html, elements built without innerHTML,
// error and progress lines, the notice, busy forms, passphrase fields.
//
// No innerHTML with data anywhere: content is set with textContent only, and the CSP
// forbids inline script and style, so state shows through classes and `hidden`.

import { percent } from './format.js';

// An element index.html's templates hold, found by a selector or its data-role: what kind of
// element it is (an input, a button, a form, ...) is written in index.html, where the type
// checker cannot look, so it is `any` to the code that knows which it asked for.
/** @typedef {any} Found */

// index.html has both, and loads this module after them
export const main = /** @type {HTMLElement} */ (document.getElementById('main'));
export const topbar = /** @type {HTMLElement} */ (document.getElementById('topbar'));

/**
 * A copy of the element template `id` of index.html holds.
 * @param {string} id
 * @returns {Found}
 */
export function tpl(id) {
  const t = /** @type {HTMLTemplateElement} */ (document.getElementById(id));
  return /** @type {Element} */ (t.content.firstElementChild).cloneNode(true);
}

/**
 * @param {ParentNode} root
 * @param {string} sel
 * @returns {Found}
 */
export function q(root, sel) {
  return root.querySelector(sel);
}

/**
 * @param {ParentNode} root
 * @param {string} name
 * @returns {Found}
 */
export function role(root, name) {
  return root.querySelector(`[data-role="${name}"]`);
}

/**
 * A new element: props are its class, text, on<event> listeners, properties and attributes.
 * @param {string} tag
 * @param {Record<string, any>} [props]
 * @param {...(Node | string | null | undefined)} children
 * @returns {Found}
 */
export function el(tag, props = {}, ...children) {
  /** @type {Record<string, any> & HTMLElement} */
  const node = /** @type {any} */ (document.createElement(tag));
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') node.className = v;
    else if (k === 'text') node.textContent = v;
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else if (k in node && typeof v !== 'string') node[k] = v;
    else node.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

/**
 * Only one screen is in the document at a time.
 * @template {Node} N
 * @param {N} node
 * @returns {N}
 */
export function mount(node) {
  main.replaceChildren(node);
  return node;
}

/**
 * A screen's title takes the focus, so a screen reader starts there.
 * @param {ParentNode} node
 */
export function focusTitle(node) {
  const h1 = q(node, 'h1');
  h1.setAttribute('tabindex', '-1');
  h1.focus();
}

/** @param {unknown} message */
export function oneLine(message) {
  const s = String(message || 'Something went wrong').split('\n')[0].trim();
  const t = s.length > 220 ? s.slice(0, 217) + '…' : s;
  return t.charAt(0).toUpperCase() + t.slice(1);
}

/**
 * What an error says to the person: a VaultError's message, a wrong passphrase in words.
 * @param {any} err anything thrown
 * @returns {string}
 */
export function errorText(err) {
  if (!err) return 'Something went wrong';
  if (err.code === 'wrong_passphrase') return 'Wrong passphrase for this vault.';
  if (err.code === 'no_such_vault') return 'No vault with this name on this server. Check the name and the server address.';
  const m = String(err.message || err);
  if (m.startsWith('Traceback')) {
    // an unexpected Python exception: its last line says what it was
    const lines = m.trim().split('\n');
    return `Internal error: ${lines[lines.length - 1].trim()}`;
  }
  return m;
}

/**
 * @param {HTMLElement | null | undefined} node
 * @param {unknown} message
 */
export function showError(node, message) {
  if (!node) return;
  if (!message) {
    node.textContent = '';
    node.hidden = true;
    return;
  }
  node.textContent = oneLine(message);
  node.hidden = false;
}

/**
 * A form's check failed: say why in its error line and put the cursor where to fix it.
 * @param {HTMLElement | null | undefined} err
 * @param {HTMLElement | null | undefined} field
 * @param {string} message
 */
export function refuse(err, field, message) {
  showError(err, message);
  field?.focus();
}

// A progress line: a spinner while `busy`, a plain result line once it is done.
/**
 * @param {HTMLElement | null | undefined} node
 * @param {string} text
 * @param {boolean} [busy]
 */
export function showProgress(node, text, busy = true) {
  if (!node) return;
  node.textContent = text || '';
  node.hidden = !text;
  node.classList.toggle('done', !busy);
}

// The notice at the foot of the screen.  Plain information fades after 5 s; a message that
// asks the person to act (`persist`) stays, with a Dismiss button, until dismissed: a plain
// notice shown meanwhile takes its place for its 5 s, then the message comes back.
/** @type {ReturnType<typeof setTimeout> | undefined} */
let noticeTimer;
/** @type {string} the message that waits for Dismiss, '' for none */
let pinned = '';

/**
 * @param {string} text
 * @param {{ persist?: boolean }} [options] persist: it asks the person to act, so it stays until dismissed
 */
export function notice(text, { persist = false } = {}) {
  clearTimeout(noticeTimer);
  if (persist || !text) pinned = text;   // '' clears everything (a lock)
  showNotice(text, persist);
  if (text && !persist) noticeTimer = setTimeout(() => showNotice(pinned, true), 5000);
}

/**
 * @param {string} text
 * @param {boolean} persist
 */
function showNotice(text, persist) {
  const n = /** @type {HTMLElement} */ (document.getElementById('notice'));
  n.replaceChildren();
  n.hidden = !text;
  n.classList.toggle('notice-persist', Boolean(text && persist));
  if (!text) return;
  n.append(el('span', { text }));
  if (!persist) return;
  n.append(el('button', {
    type: 'button', class: 'btn btn-small notice-dismiss', 'data-testid': 'notice-dismiss', text: 'Dismiss',
    'aria-label': 'Dismiss this message',
    onclick: () => {
      pinned = '';
      showNotice('', false);
    },
  }));
}

/**
 * @param {HTMLFormElement} form
 * @param {boolean} busy
 */
export function setBusy(form, busy) {
  /** @type {NodeListOf<HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement | HTMLButtonElement>} */
  const controls = form.querySelectorAll('input, select, textarea, button');
  for (const c of controls) c.disabled = busy;
  form.setAttribute('aria-busy', String(busy));
}

// Ctrl+Enter (⌘+Enter on a Mac) saves; a plain Enter is a new line, as in any text field
// (the add and edit forms' textareas: a memory may run over several lines).
/** @param {HTMLTextAreaElement} textarea */
export function enterSubmits(textarea) {
  textarea.setAttribute('aria-keyshortcuts', 'Control+Enter Meta+Enter');
  textarea.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey) && !e.isComposing) {
      e.preventDefault();
      /** @type {HTMLFormElement} */ (textarea.form).requestSubmit();
    }
  });
}

/**
 * A form busy saving whose text fields stay editable: what is typed meanwhile stays in them.
 * Its buttons, selects and checkboxes are disabled (no second submit); Ctrl+Enter does
 * nothing while `aria-busy` is true (see the forms' submit handlers).
 * @param {HTMLFormElement} form
 * @param {boolean} busy
 */
export function setSaving(form, busy) {
  /** @type {NodeListOf<HTMLInputElement | HTMLSelectElement | HTMLButtonElement>} */
  const controls = form.querySelectorAll('button, select, input[type="checkbox"], input[type="range"]');
  for (const c of controls) c.disabled = busy;
  form.setAttribute('aria-busy', String(busy));
}

/**
 * A range input and the <output> that shows it as a percentage.
 * @param {HTMLInputElement} range
 * @param {HTMLOutputElement} out
 */
export function showsPercent(range, out) {
  out.textContent = percent(range.value);
  range.addEventListener('input', () => { out.textContent = percent(range.value); });
}

/** @param {ParentNode} root */
export function wireReveal(root) {
  for (const btn of root.querySelectorAll('[data-role="reveal"]')) {
    const input = /** @type {HTMLInputElement} */ (document.getElementById(/** @type {string} */ (btn.getAttribute('aria-controls'))));
    btn.addEventListener('click', () => {
      const show = input.type === 'password';
      input.type = show ? 'text' : 'password';
      btn.textContent = show ? 'Hide' : 'Show';
      btn.setAttribute('aria-pressed', String(show));
      btn.setAttribute('aria-label', show ? 'Hide passphrase' : 'Show passphrase');
    });
    btn.setAttribute('aria-label', 'Show passphrase');
  }
}

/** @param {ParentNode} root */
export function concealPassphrases(root) {
  /** @type {NodeListOf<HTMLInputElement>} */
  const inputs = root.querySelectorAll('input[name^="passphrase"]');
  for (const input of inputs) {
    input.value = '';
    input.type = 'password';
  }
  for (const btn of root.querySelectorAll('[data-role="reveal"]')) {
    btn.textContent = 'Show';
    btn.setAttribute('aria-pressed', 'false');
  }
}
