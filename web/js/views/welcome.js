// The screens before a vault is open: welcome (three tabs: create a vault, use one from a
// server, or import a .amem backup into this empty browser) and unlock.  Each form sends its passphrase to the worker once and empties the
// field whatever the answer; the passphrase is never stored (localStorage holds the vault
// name only), logged or rendered.

import {
  concealPassphrases, el, errorText, main, mount, notice, oneLine, q, refuse, role, setBusy, showError, showProgress, tpl,
  topbar, wireReveal,
} from '../dom.js';
import { NAME_RE, serverUrl, thisDeviceLabel } from '../format.js';
import { enterVault } from '../nav.js';
import { describe, judge, MIN_SCORE, prepare, refusal, release } from '../passphrase.js';
import { bootInfo, entries, noteRefusals, rememberName, rememberedName, setBootInfo, vaultName } from '../state.js';
import { requestPersistence } from '../storage.js';
import { call, healAfterRefusal } from '../vault.js';
import { passkeyUnlock } from './passkeys.js';
import { recoverySheet } from './recovery.js';
import { justSignedOut, memoryCount, signOutPanel } from './signout.js';

/** @import { Args, OpName, Result } from '../../types/protocol' */
/** @import { Verdict } from '../passphrase.js' */
/** @typedef {HTMLFormElement & { elements: Record<string, any> }} Form */

/**
 * @param {'create' | 'login' | 'restore'} tab
 * @param {string} [held] the vault this browser holds ("Not you? Use another vault"): the
 *   welcome says so, with the way back to its unlock and its sign-out, a step of its own
 */
export function showWelcome(tab, held) {
  topbar.hidden = true;
  const node = mount(tpl('tpl-welcome'));
  if (held) q(node, '[role="tablist"]').before(heldVault(held));
  if (justSignedOut()) notice('Signed out: this browser no longer holds the vault.');
  const body = role(node, 'welcome-body');
  const tabs = [...node.querySelectorAll('[role="tab"]')];
  /** @type {(name: string, focus: boolean) => void} */
  const select = (name, focus) => {
    for (const t of tabs) {
      const on = t.dataset.tab === name;
      t.setAttribute('aria-selected', String(on));
      t.tabIndex = on ? 0 : -1;
      if (on) body.setAttribute('aria-labelledby', t.id);
      if (on && focus) t.focus();
    }
    body.replaceChildren(name === 'create' ? createForm() : name === 'login' ? loginForm() : restoreForm());
  };
  for (const t of tabs) {
    t.addEventListener('click', () => select(t.dataset.tab, false));
    t.addEventListener('keydown', (/** @type {KeyboardEvent} */ e) => {
      if (e.key !== 'ArrowLeft' && e.key !== 'ArrowRight' && e.key !== 'Home' && e.key !== 'End') return;
      e.preventDefault();
      const i = tabs.indexOf(t);
      const next = e.key === 'Home' ? 0 : e.key === 'End' ? tabs.length - 1
        : (i + (e.key === 'ArrowRight' ? 1 : -1) + tabs.length) % tabs.length;
      select(tabs[next].dataset.tab, true);
    });
  }
  select(tab, false);
  body.querySelector('input')?.focus();
}

// One operation with the form's passphrase: the form is busy meanwhile and its passphrase
// fields are emptied whatever the answer; a refusal shows in the form, which is usable
// again.  -> the operation's result, or null if it failed.
/**
 * @template {OpName} K
 * @param {Form} form
 * @param {string} progressText
 * @param {K} op
 * @param {Args<K>} args
 * @param {{ heal?: boolean, say?: (ex: unknown) => string }} [options] heal: a worker that refused the passphrase
 *   is made usable again; say: how a refusal is worded (errorText by default)
 * @returns {Promise<Result<K> | null>}
 */
async function withPassphrase(form, progressText, op, args, { heal = false, say = errorText } = {}) {
  const progress = role(form, 'progress');
  setBusy(form, true);
  showProgress(progress, progressText);
  let ok = false;
  let result = null;
  /** @type {string | undefined} */
  let failure;
  let said = '';
  try {
    result = await call(op, /** @type {any} */ (args));
    ok = true;
  } catch (ex) {
    failure = /** @type {{ code?: string }} */ (ex).code;
    said = say(ex);
    if (heal && failure === 'wrong_passphrase') await healAfterRefusal();
  } finally {
    concealPassphrases(form);
  }
  if (!ok) {
    // the refusal shows only once the form takes input again: a person (or a test) who reads
    // it and types at once is never typing into a form still busy with the worker's repair
    setBusy(form, false);
    showProgress(progress, '');
    showError(role(form, 'error'), said);
    (failure === 'no_such_vault' ? form.elements.name : form.elements.passphrase).focus();
  }
  return ok ? result ?? {} : null;
}

function createForm() {
  const form = tpl('tpl-create');
  wireReveal(form);
  role(form, 'origin').textContent = location.host || location.origin;
  const name = form.elements.name;
  const pass = form.elements.passphrase;
  const pass2 = form.elements.passphrase2;
  const err = role(form, 'error');
  name.value = rememberedName() || '';
  const meter = strengthMeter(form);
  pass.addEventListener('input', () => meter.changed(true));
  name.addEventListener('input', () => meter.changed(false));
  form.addEventListener('submit', async (/** @type {SubmitEvent} */ e) => {
    e.preventDefault();
    showError(err, '');
    const vname = name.value.trim();
    if (!NAME_RE.test(vname)) return refuse(err, name, 'Give the vault a name: lower-case letters, digits, dot, dash or underscore, starting with a letter or digit.');
    if (!pass.value) return refuse(err, pass, 'Choose a passphrase.');
    const verdict = await meter.now();
    // an Error (cannot tell) has no score: below the floor
    if (!(/** @type {any} */ (verdict).score >= MIN_SCORE) && !form.elements.weak.checked) return refuse(err, pass, refusal(verdict));
    if (pass.value !== pass2.value) {
      pass2.value = '';
      return refuse(err, pass2, 'The two passphrases differ.');
    }
    const link = form.elements.link.checked;
    // a name taken on the server is said here, before any key is derived or sealed
    if (link) {
      const free = await nameFree(form, vname);
      if (free !== true) return refuse(err, name, free);
    }
    if (!await withPassphrase(form, 'Creating your vault: deriving its keys…', 'create', { passphrase: pass.value })) return;
    release();
    rememberName(vname);
    requestPersistence();   // a vault now lives in this browser: ask that it be kept (Settings show the answer)
    let linkError = '';
    if (link) {
      showProgress(role(form, 'progress'), 'Registering the vault on the server…');
      try {
        await call('link', { server: location.origin, name: vname, label: thisDeviceLabel() });
      } catch (ex) {
        linkError = errorText(ex);
      }
    }
    // the recovery kit, made now (and published with the vault's metadata when linked): shown once
    /** @type {string[] | null} */
    let kit = null;
    try {
      kit = (await call('recovery_create', {})).words;
    } catch {
      // the sheet then says nothing of a kit; Settings makes one
    }
    await enterVault();
    const sheet = recoverySheet({ name: vname, server: link && !linkError ? location.origin : null, created: true,
      onClose: () => sheet.remove(), kit });
    main.prepend(sheet);
    if (linkError) notice(`Your vault was created but is not synced yet: ${oneLine(linkError)} Link it in Settings.`, { persist: true });
  });
  return form;
}

// Whether `vname` is free on this server (GET /v1/names, paid from this address's
// registration budget: docs/decisions.md, issue 23).  -> true, or why the form cannot go on.
/**
 * @param {Form} form
 * @param {string} vname
 * @returns {Promise<true | string>}
 */
async function nameFree(form, vname) {
  showProgress(role(form, 'progress'), 'Checking the name on the server…');
  try {
    const r = await fetch(`/v1/names/${encodeURIComponent(vname)}`, { cache: 'no-store' });
    if (r.ok) {
      const { taken } = await r.json();
      if (taken === false) return true;
      if (taken === true) return `The name “${vname}” is taken on this server. Choose another name.`;
    }
    if (r.status === 429) return 'Too many name checks from this address: try again later, or untick “Sync this vault through this server”.';
    return 'The server could not check the name: try again, or untick “Sync this vault through this server”.';
  } catch {
    return 'The server cannot be reached to check the name: try again, or untick “Sync this vault through this server”.';
  } finally {
    showProgress(role(form, 'progress'), '');
  }
}

// The create form's meter: the bars, the line under them and the "I accept" box, following
// zxcvbn's verdict on what is typed (the latest question wins; a slower answer to an older
// one is dropped).  The box shows only below the floor, and unticked again after every
// change of the passphrase: accepting the risk is for the passphrase in the field.
/** @param {Form} form */
function strengthMeter(form) {
  const { name, passphrase: pass, weak } = form.elements;
  const bar = role(form, 'strength');
  const text = q(form, '#strength-text');
  const accept = role(form, 'weak-accept');
  let asked = 0;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  // the meter's dictionaries (~0.55 MB) load at the first key typed, not with the form: on a
  // first visit they would compete with the vault engine's download
  pass.addEventListener('input', prepare, { once: true });
  /** @param {Verdict | Error | null} verdict */
  const show = (verdict) => {
    bar.dataset.score = String(verdict && !(verdict instanceof Error) ? verdict.score : -1);
    text.textContent = describe(verdict);
    accept.hidden = verdict === null || /** @type {any} */ (verdict).score >= MIN_SCORE;
  };
  const now = async () => {
    const n = ++asked;
    clearTimeout(timer);
    /** @type {Verdict | Error} */
    const verdict = await judge(pass.value, name.value.trim()).catch((ex) => ex);
    if (n === asked && form.isConnected) show(pass.value ? verdict : null);
    return verdict;
  };
  return {
    now,
    /** @param {boolean} passphraseChanged */
    changed(passphraseChanged) {
      if (passphraseChanged) weak.checked = false;
      clearTimeout(timer);
      if (!pass.value) {
        asked++;
        show(null);
        return;
      }
      timer = setTimeout(now, 120);
    },
  };
}

function loginForm() {
  const form = tpl('tpl-login');
  wireReveal(form);
  const err = role(form, 'error');
  form.elements.server.value = location.origin;
  form.elements.name.value = rememberedName() || '';
  form.addEventListener('submit', async (/** @type {SubmitEvent} */ e) => {
    e.preventDefault();
    showError(err, '');
    const server = serverUrl(form.elements.server.value);
    const name = form.elements.name.value.trim();
    const pass = form.elements.passphrase;
    if (!server) return refuse(err, form.elements.server, 'Enter the server address, for example https://memory.example.org');
    if (!name) return refuse(err, form.elements.name, 'Enter the vault name.');
    if (!pass.value) return refuse(err, pass, 'Enter your passphrase.');
    const args = { server, name, passphrase: pass.value, label: thisDeviceLabel() };
    const r = await withPassphrase(form, 'Fetching your vault and deriving its keys…', 'login', args);
    if (!r) return;
    rememberName(name);
    requestPersistence();
    setBootInfo({ ...bootInfo(), vault: { name, server, count: 0 } });
    await enterVault();
    noteRefusals(r.refusals);   // the login's own sync, which sends no 'synced' event
  });
  // a lost phone and a forgotten passphrase: the vault's name and the kit's words open it here
  form.append(el('p', { class: 'not-you' }, el('button', {
    type: 'button', class: 'btn btn-ghost btn-small', 'data-testid': 'forgot', text: 'Forgot your passphrase? Use your recovery kit',
    onclick: () => form.replaceWith(recoveryForm({
      server: serverUrl(form.elements.server.value) || location.origin, name: form.elements.name.value.trim() })),
  })));
  return form;
}

// A new browser holding only a backup: `import` into the empty store adopts the file's
// identity once its passphrase opens the file's own objects (ownmem.vault.transfer), so this
// browser then holds the very vault the file came from, unlocked.  Nothing is kept when the
// passphrase or the file is refused.
function restoreForm() {
  const form = tpl('tpl-restore');
  wireReveal(form);
  const err = role(form, 'error');
  const { file, name, passphrase: pass } = form.elements;
  name.value = rememberedName() || '';
  form.addEventListener('submit', async (/** @type {SubmitEvent} */ e) => {
    e.preventDefault();
    showError(err, '');
    const chosen = file.files && file.files[0];
    const vname = name.value.trim();
    if (!chosen) return refuse(err, file, 'Choose the .amem file to open.');
    if (!NAME_RE.test(vname)) return refuse(err, name, 'Give the vault a name: lower-case letters, digits, dot, dash or underscore, starting with a letter or digit.');
    if (!pass.value) return refuse(err, pass, 'Enter the passphrase of the backup.');
    const data = new Uint8Array(await chosen.arrayBuffer());
    const r = await withPassphrase(form, `Checking ${chosen.name} and deriving its keys…`, 'import', { data, passphrase: pass.value });
    if (!r) return;
    rememberName(vname);
    requestPersistence();
    setBootInfo({ ...bootInfo(), vault: { name: vname, server: null, count: r.imported } });
    await enterVault();
    // it asks the person to act (link, or keep the file): it stays until dismissed
    notice(importedLine(chosen.name, r, entries().length), { persist: true });
  });
  return form;
}

/**
 * @param {string} filename
 * @param {Result<'import'>} r
 * @param {number} memories what the list shows now
 */
function importedLine(filename, r, memories) {
  const refused = (r.refused || []).length;
  const skipped = (r.skipped || []).length;
  const extra = [refused ? `${refused} refused` : '', skipped ? `${skipped} skipped` : ''].filter(Boolean).join(', ');
  return `Opened ${filename}: ${memoryCount(memories)} imported${extra ? ` (${extra})` : ''}.`
    + ' Link the vault to a server in Settings to sync it.';
}

// "Not you? Use another vault": the vault this browser holds stays as it is; unlocking it
// again, or signing out of it (asked first, views/signout.js), are the person's next steps.
/** @param {string} held */
function heldVault(held) {
  const signOut = signOutPanel({ memories: () => null, headingLevel: 'h2' });
  signOut.hidden = true;
  return el('div', { class: 'callout', 'data-testid': 'held-vault' },
    el('p', { text: `This browser holds the vault “${held}”. To create or open another vault here, sign out of “${held}” first: that removes it from this browser.` }),
    el('div', { class: 'actions' },
      el('button', { type: 'button', class: 'btn', 'data-testid': 'back-to-unlock', text: `Unlock “${held}”`, onclick: () => showUnlock() }),
      el('button', { type: 'button', class: 'btn btn-ghost', 'data-testid': 'held-signout', text: `Sign out of “${held}”…`,
        onclick: () => { signOut.hidden = false; /** @type {HTMLElement} */ (signOut.querySelector('[data-testid="signout-button"]')).click(); } })),
    signOut);
}

/** @param {string} [message] why it is locked */
export function showUnlock(message) {
  topbar.hidden = true;
  const node = mount(tpl('tpl-unlock'));
  wireReveal(node);
  role(node, 'unlock-name').textContent = vaultName();
  if (message) role(node, 'unlock-detail').textContent = message;
  const form = q(node, 'form');
  const err = role(form, 'error');
  const pass = form.elements.passphrase;
  form.elements.username.value = vaultName();
  form.after(el('p', { class: 'not-you' }, el('button', {
    type: 'button', class: 'btn btn-ghost btn-small', 'data-testid': 'not-you', text: 'Not you? Use another vault',
    onclick: () => showWelcome('create', vaultName()),
  })), el('p', { class: 'not-you' }, el('button', {
    type: 'button', class: 'btn btn-ghost btn-small', 'data-testid': 'forgot', text: 'Forgot your passphrase? Use your recovery kit',
    onclick: (/** @type {MouseEvent} */ e) => {
      /** @type {HTMLElement} */ (/** @type {HTMLElement} */ (e.currentTarget).parentElement).hidden = true;
      form.replaceWith(recoveryForm(null));
    },
  })));
  passkeyUnlock(form, enterVault);   // shown only where this vault has a passkey and the browser PRF
  form.addEventListener('submit', async (/** @type {SubmitEvent} */ e) => {
    e.preventDefault();
    showError(err, '');
    if (!pass.value) return refuse(err, pass, 'Enter your passphrase.');
    const args = { passphrase: pass.value };
    if (!await withPassphrase(form, 'Unlocking: deriving your key (about a second)…', 'unlock', args, { heal: true })) return;
    await enterVault();
  });
  pass.focus();
}

// "Forgot your passphrase?": the recovery kit's words, then a new passphrase (twice, held to the
// same strength floor as at creation), then unlocked; the used kit is replaced by a new one,
// shown once on the recovery sheet.  The words and the passphrase fields are emptied whatever
// the answer.  `fetch`: this browser holds no vault (the "Use my vault from a server" tab), so
// the form also asks for the server and the vault's name, and the vault is fetched from there
// (`recovery_login`); else it is this browser's own vault (`recovery_use`).
/** @param {{ server: string, name: string } | null} fetch */
function recoveryForm(fetch) {
  const wordsId = 'recovery-words-input';
  /** @type {(id: string, label: string, attrs: Record<string, any>) => HTMLElement} */
  const field = (id, label, attrs) => el('div', { class: 'field' }, el('label', { for: id, text: label }),
    el('input', { id, spellcheck: 'false', autocapitalize: 'off', ...attrs }));
  const form = /** @type {Form} */ (el('form', { class: 'form', 'data-testid': 'recovery-form', novalidate: true },
    el('p', { text: fetch
      ? 'Enter the server, your vault’s name and the 12 words of your recovery kit, in order. Then choose a new passphrase: the old one stops working on every device.'
      : 'Enter the 12 words of your recovery kit, in order. Then choose a new passphrase: the old one stops working.' }),
    fetch ? field('recovery-server', 'Server', { name: 'server', type: 'url', inputmode: 'url', 'data-testid': 'recovery-server',
      value: fetch.server }) : null,
    fetch ? field('recovery-name', 'Vault name', { name: 'name', maxlength: 64, autocomplete: 'username',
      'data-testid': 'recovery-vault-name', value: fetch.name }) : null,
    el('div', { class: 'field' },
      el('label', { for: wordsId, text: 'Recovery words' }),
      el('textarea', { id: wordsId, name: 'words', rows: 4, 'data-testid': 'recovery-words-input', autocomplete: 'off',
        spellcheck: 'false', autocapitalize: 'off' })),
    field('recovery-pass', 'New passphrase', { name: 'passphrase', type: 'password', 'data-testid': 'recovery-passphrase',
      autocomplete: 'new-password' }),
    field('recovery-pass2', 'New passphrase, again', { name: 'passphrase2', type: 'password',
      'data-testid': 'recovery-passphrase2', autocomplete: 'new-password' }),
    el('p', { class: 'error', 'data-role': 'error', role: 'alert', hidden: true }),
    el('div', { class: 'actions' },
      el('button', { type: 'submit', class: 'btn btn-primary btn-wide', 'data-testid': 'recovery-submit', text: 'Open my vault' }),
      el('button', { type: 'button', class: 'btn btn-ghost', 'data-testid': 'recovery-back', text: 'Back to the passphrase',
        onclick: () => (fetch ? form.replaceWith(loginForm()) : showUnlock()) })),
    el('p', { class: 'progress progress-block', 'data-role': 'progress', role: 'status', 'aria-live': 'polite', hidden: true })));
  const err = role(form, 'error');
  const { words, passphrase: pass, passphrase2: pass2 } = form.elements;
  pass.addEventListener('input', prepare, { once: true });
  form.addEventListener('submit', async (/** @type {SubmitEvent} */ e) => {
    e.preventDefault();
    showError(err, '');
    const server = fetch ? serverUrl(form.elements.server.value) : null;
    const name = fetch ? form.elements.name.value.trim() : vaultName();
    if (fetch && !server) return refuse(err, form.elements.server, 'Enter the server address, for example https://memory.example.org');
    if (fetch && !NAME_RE.test(name)) return refuse(err, form.elements.name, 'Enter the vault name.');
    const typed = words.value.trim();
    if (typed.split(/[^A-Za-z]+/).filter(Boolean).length !== 12) return refuse(err, words, 'Enter the 12 words of your recovery kit.');
    if (!pass.value) return refuse(err, pass, 'Choose a new passphrase.');
    const verdict = await judge(pass.value, name).catch((ex) => ex);
    if (!(/** @type {any} */ (verdict).score >= MIN_SCORE)) return refuse(err, pass, refusal(verdict));
    if (pass.value !== pass2.value) {
      pass2.value = '';
      return refuse(err, pass2, 'The two passphrases differ.');
    }
    const r = fetch && server
      ? await withPassphrase(form, 'Fetching your vault, opening it with the kit and setting the new passphrase…', 'recovery_login',
        { server, name, words: typed, passphrase: pass.value, label: thisDeviceLabel() }, { say: kitRefusal })
      : await withPassphrase(form, 'Opening your vault with the kit and setting the new passphrase…', 'recovery_use',
        { words: typed, passphrase: pass.value }, { say: kitRefusal });
    if (!r) {
      if (fetch && await fetchedButLocked(name, err.textContent ?? '')) return;
      if (err.textContent && /word|check/.test(err.textContent)) words.focus();
      return;
    }
    words.value = '';
    release();
    if (fetch && server) {
      rememberName(name);
      requestPersistence();   // a vault now lives in this browser
      setBootInfo({ ...bootInfo(), vault: { name, server, count: 0 } });
    }
    await enterVault();
    const sheet = recoverySheet({ name, server: fetch ? server : bootInfo()?.vault?.server ?? null, onClose: () => sheet.remove(),
      kit: r.words });
    // said in the sheet, not in a notice: a notice would float over the new words
    sheet.querySelector('h2')?.after(el('p', { class: 'callout', 'data-testid': 'recovery-used',
      text: fetch
        ? 'Your vault is open in this browser with its new passphrase. The old passphrase and the kit you used no longer work: keep the new kit below.'
        : 'Your vault is open with its new passphrase. The kit you used no longer works: keep the new one below.' }));
    const { problem, refusals } = /** @type {{ problem?: string | null, refusals?: string[] }} */ (r);
    if (refusals) noteRefusals(refusals);   // the fetch's own sync, which sends no 'synced' event
    if (problem) sheet.querySelector('[data-testid="recovery-used"]')?.after(el('p', { class: 'callout',
      text: `Your memories have not synced yet: ${oneLine(problem)} They sync when the server can be reached.` }));
    main.prepend(sheet);
  });
  queueMicrotask(() => (fetch && !fetch.name ? form.elements.name : words).focus());
  return form;
}

// A refusal of the kit said as such: "Wrong passphrase" would mislead (the words were refused).
/** @param {unknown} ex */
function kitRefusal(ex) {
  const { code, message } = /** @type {{ code?: string, message?: string }} */ (ex ?? {});
  if (code === 'wrong_passphrase' && message) return `${message.charAt(0).toUpperCase()}${message.slice(1)}.`;
  return errorText(ex);
}

// The fetch succeeded but setting the new passphrase failed (the server went away between the
// two): the vault is in this browser now, locked, and its unlock screen's "Forgot your
// passphrase?" finishes the job with the same words.  -> whether that is what happened.
/**
 * @param {string} name
 * @param {string} why
 */
async function fetchedButLocked(name, why) {
  /** @type {Result<'boot'> | null} */
  const b = await call('boot', {}).catch(() => null);
  if (!b?.vault) return false;
  rememberName(name);
  setBootInfo(b);
  showUnlock(`Your vault was fetched to this browser, but its new passphrase could not be set (${why.replace(/\.$/, '')}). `
    + 'Use your recovery kit again below.');
  return true;
}
