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

/** @type {ReturnType<typeof setTimeout> | undefined} */
let noticeTimer;
/** @param {string} text */
export function notice(text) {
  const n = /** @type {HTMLElement} */ (document.getElementById('notice'));
  clearTimeout(noticeTimer);
  n.textContent = text;
  n.hidden = !text;
  if (text) noticeTimer = setTimeout(() => { n.hidden = true; n.textContent = ''; }, 5000);
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

// Enter submits, Shift+Enter starts a new line (textareas of the add and edit forms).
/** @param {HTMLTextAreaElement} textarea */
export function enterSubmits(textarea) {
  textarea.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      /** @type {HTMLFormElement} */ (textarea.form).requestSubmit();
    }
  });
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
