// "Connect an assistant" on the Agents screen (its template is in index.html, tpl-agents):
// the steps for a remote assistant (the command that serves /mcp over TLS, the URL to paste
// into Claude or ChatGPT) and for one on the person's computer (`ownmem agent connect NAME`
// and the configuration's shape), each with a Copy button.  Nothing here is secret: a local
// credential is printed once by the command on the agent's machine, never held by this page.

import { role } from '../dom.js';

/** @param {HTMLElement} panel the section (data-role="connect") */
export function showConnect(panel) {
  const status = role(panel, 'copy-status');
  for (const button of /** @type {NodeListOf<HTMLButtonElement>} */ (panel.querySelectorAll('[data-role="copy"]'))) {
    button.addEventListener('click', () => copy(button, status));
  }
}

/**
 * Copy the text beside the button; where the clipboard is not offered (a page not in a
 * secure context, a browser that refuses), select it for the person to copy.
 * @param {HTMLButtonElement} button
 * @param {HTMLElement} status
 */
async function copy(button, status) {
  const source = /** @type {HTMLElement} */ (button.parentElement?.querySelector('[data-role="copy-text"]'));
  const text = source.textContent || '';
  try {
    await navigator.clipboard.writeText(text);
    status.textContent = 'Copied.';
    button.textContent = 'Copied';
    setTimeout(() => { button.textContent = 'Copy'; }, 2000);
  } catch {
    const range = document.createRange();
    range.selectNodeContents(source);
    const sel = window.getSelection();
    sel?.removeAllRanges();
    sel?.addRange(range);
    status.textContent = 'Selected: press Ctrl+C (⌘C) to copy.';
  }
}
