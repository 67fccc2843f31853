// DOM helpers every view uses: templates of index.html, elements built without innerHTML,
// error and progress lines, the notice, busy forms, passphrase fields.
//
// No innerHTML with data anywhere: content is set with textContent only, and the CSP
// forbids inline script and style, so state shows through classes and `hidden`.

import { percent } from './format.js';

export const main = document.getElementById('main');
export const topbar = document.getElementById('topbar');

export function tpl(id) {
  return document.getElementById(id).content.firstElementChild.cloneNode(true);
}

export function q(root, sel) {
  return root.querySelector(sel);
}

export function role(root, name) {
  return root.querySelector(`[data-role="${name}"]`);
}

export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
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

/** Only one screen is in the document at a time. */
export function mount(node) {
  main.replaceChildren(node);
  return node;
}

/** A screen's title takes the focus, so a screen reader starts there. */
export function focusTitle(node) {
  const h1 = q(node, 'h1');
  h1.setAttribute('tabindex', '-1');
  h1.focus();
}

export function oneLine(message) {
  const s = String(message || 'Something went wrong').split('\n')[0].trim();
  const t = s.length > 220 ? s.slice(0, 217) + '…' : s;
  return t.charAt(0).toUpperCase() + t.slice(1);
}

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

/** A form's check failed: say why in its error line and put the cursor where to fix it. */
export function refuse(err, field, message) {
  showError(err, message);
  field?.focus();
}

// A progress line: a spinner while `busy`, a plain result line once it is done.
export function showProgress(node, text, busy = true) {
  if (!node) return;
  node.textContent = text || '';
  node.hidden = !text;
  node.classList.toggle('done', !busy);
}

let noticeTimer = 0;
export function notice(text) {
  const n = document.getElementById('notice');
  clearTimeout(noticeTimer);
  n.textContent = text;
  n.hidden = !text;
  if (text) noticeTimer = setTimeout(() => { n.hidden = true; n.textContent = ''; }, 5000);
}

export function setBusy(form, busy) {
  for (const c of form.querySelectorAll('input, select, textarea, button')) c.disabled = busy;
  form.setAttribute('aria-busy', String(busy));
}

// Enter submits, Shift+Enter starts a new line (textareas of the add and edit forms).
export function enterSubmits(textarea) {
  textarea.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      textarea.form.requestSubmit();
    }
  });
}

/** A range input and the <output> that shows it as a percentage. */
export function showsPercent(range, out) {
  out.textContent = percent(range.value);
  range.addEventListener('input', () => { out.textContent = percent(range.value); });
}

export function wireReveal(root) {
  for (const btn of root.querySelectorAll('[data-role="reveal"]')) {
    const input = document.getElementById(btn.getAttribute('aria-controls'));
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

export function concealPassphrases(root) {
  for (const input of root.querySelectorAll('input[name^="passphrase"]')) {
    input.value = '';
    input.type = 'password';
  }
  for (const btn of root.querySelectorAll('[data-role="reveal"]')) {
    btn.textContent = 'Show';
    btn.setAttribute('aria-pressed', 'false');
  }
}
