// ownmem web app: the page.  Plain DOM, no framework; every vault operation goes to the
// module worker through VaultClient (docs/web.md "Worker operations").
//
// Rules this file keeps:
//   - the passphrase is read from its field, sent to the worker once, and the field is
//     emptied; it is never stored (localStorage holds settings only), logged or rendered;
//   - decrypted text is only in `state.entries` and the DOM of the unlocked screens;
//     lock() drops both before it asks the worker to drop its keys;
//   - no innerHTML with data: content is set with textContent only;
//   - no inline script or style (the CSP forbids both): classes and the `hidden` attribute.

import { VaultClient } from './client.js';

// ------------------------------------------------------------------ settings (never secrets)

const SETTINGS_KEY = 'ownmem.settings';
const DEFAULT_IDLE_MINUTES = 10;

function loadSettings() {
  let s = {};
  try {
    s = JSON.parse(localStorage.getItem(SETTINGS_KEY) || '{}') || {};
  } catch {
    s = {};
  }
  const idle = Number(s.idleMinutes);
  return {
    idleMinutes: Number.isFinite(idle) && idle >= 1 ? Math.min(Math.round(idle), 1440) : DEFAULT_IDLE_MINUTES,
    vaultName: typeof s.vaultName === 'string' ? s.vaultName.slice(0, 64) : '',
  };
}

function saveSettings() {
  const { idleMinutes, vaultName } = settings;
  try {
    localStorage.setItem(SETTINGS_KEY, JSON.stringify({ idleMinutes, vaultName }));
  } catch {
    // storage disabled: the settings last for this page only
  }
}

const settings = loadSettings();

// ------------------------------------------------------------------ state

const state = {
  boot: null,            // result of `boot`
  unlocked: false,
  session: 0,            // bumped by lock/unlock: late answers of an older session are dropped
  view: 'memories',
  entries: [],
  byId: new Map(),
  conflicts: [],
  inConflict: new Set(),
  refused: 0,
  scopes: ['default'],
  loaded: false,
  limit: 100,
  editing: null,
  filters: { q: '', tag: '', type: '', trust: '', scope: '' },
  status: { pending: 0, last_sync: null, server: null, name: null },
  online: null,          // null: not known yet
  offlineReason: '',
  syncing: false,
};

const PAGE = 100;
const TYPE_LABELS = { semantic: 'Fact', episodic: 'Event', procedural: 'How-to' };
const TRUST_TEXT = {
  self: 'self',
  trusted: 'trusted',
  unverified: 'unverified — treat as data, not instructions',
};
const TRUST_TITLE = {
  self: 'Signed with this vault\'s own key',
  trusted: 'Signed by a key this vault trusts',
  unverified: 'No trusted signature: an agent or file may have written this. Treat it as data, not as instructions.',
};

let client = null;
const main = document.getElementById('main');
const topbar = document.getElementById('topbar');

// ------------------------------------------------------------------ small helpers

function tpl(id) {
  return document.getElementById(id).content.firstElementChild.cloneNode(true);
}

function q(root, sel) {
  return root.querySelector(sel);
}

function role(root, name) {
  return root.querySelector(`[data-role="${name}"]`);
}

function el(tag, props = {}, ...children) {
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

function oneLine(message) {
  const s = String(message || 'Something went wrong').split('\n')[0].trim();
  const t = s.length > 220 ? s.slice(0, 217) + '…' : s;
  return t.charAt(0).toUpperCase() + t.slice(1);
}

function showError(node, message) {
  if (!node) return;
  if (!message) {
    node.textContent = '';
    node.hidden = true;
    return;
  }
  node.textContent = oneLine(message);
  node.hidden = false;
}

// A progress line: a spinner while `busy`, a plain result line once it is done.
function showProgress(node, text, busy = true) {
  if (!node) return;
  node.textContent = text || '';
  node.hidden = !text;
  node.classList.toggle('done', !busy);
}

function errorText(err) {
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

// The vault code closes its store when a passphrase is refused (the CLI's store is one
// per attempt; the worker's is shared), which leaves the worker unable to try again.
// Probe it, and start a fresh worker if it no longer answers.
async function healAfterRefusal() {
  try {
    await client.call('boot');
  } catch {
    client.restart();
  }
}

let noticeTimer = 0;
function notice(text) {
  const n = document.getElementById('notice');
  clearTimeout(noticeTimer);
  n.textContent = text;
  n.hidden = !text;
  if (text) noticeTimer = setTimeout(() => { n.hidden = true; n.textContent = ''; }, 5000);
}

// One formatter each: making an Intl.DateTimeFormat costs far more than formatting with it,
// and every card formats two dates.
const formats = new Map();
function formatter(options) {
  const key = JSON.stringify(options);
  let f = formats.get(key);
  if (!f) formats.set(key, f = new Intl.DateTimeFormat(undefined, options));
  return f;
}

function dateTime(seconds) {
  if (!seconds) return '';
  const d = new Date(seconds * 1000);
  return formatter({ dateStyle: 'medium', timeStyle: 'short' }).format(d);
}

function clockTime(seconds) {
  const d = new Date(seconds * 1000);
  const today = new Date();
  const sameDay = d.toDateString() === today.toDateString();
  return formatter(sameDay ? { timeStyle: 'short' } : { dateStyle: 'short', timeStyle: 'short' }).format(d);
}

function isoDate(d = new Date()) {
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
}

function parseTags(text) {
  const out = [];
  for (const t of String(text || '').split(',')) {
    const tag = t.trim();
    if (tag && !out.includes(tag)) out.push(tag);
  }
  return out;
}

function typeLabel(t) {
  return TYPE_LABELS[t] || String(t);
}

function percent(c) {
  return c === null || c === undefined ? '' : `${Math.round(Number(c) * 100)}%`;
}

function shortId(hex) {
  return hex ? hex.slice(0, 12) : '';
}

function vaultName() {
  return state.status.name || state.boot?.vault?.name || settings.vaultName || 'My vault';
}

function isLinked() {
  return Boolean(state.status.server && state.status.name);
}

// Enter submits, Shift+Enter starts a new line (textareas of the add and edit forms).
function enterSubmits(textarea) {
  textarea.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      textarea.form.requestSubmit();
    }
  });
}

function wireReveal(root) {
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

function concealPassphrases(root) {
  for (const input of root.querySelectorAll('input[name^="passphrase"]')) {
    input.value = '';
    input.type = 'password';
  }
  for (const btn of root.querySelectorAll('[data-role="reveal"]')) {
    btn.textContent = 'Show';
    btn.setAttribute('aria-pressed', 'false');
  }
}

function setBusy(form, busy) {
  for (const c of form.querySelectorAll('input, select, textarea, button')) c.disabled = busy;
  form.setAttribute('aria-busy', String(busy));
}

function mount(node) {
  main.replaceChildren(node);
  return node;
}

// ------------------------------------------------------------------ passphrase strength

const COMMON = new Set(('password passwort motdepasse contraseña qwerty qwertz azerty letmein welcome admin iloveyou ' +
  'monkey dragon football baseball sunshine princess secret master shadow superman trustno1 abc123 ownmem login ' +
  'hello freedom whatever starwars changeme default test passphrase correcthorsebatterystaple memory vault ' +
  'summer winter spring autumn love god jesus qazwsx asdf asdfgh zxcvbn').split(' '));
const KEYBOARD = 'qwertyuiopasdfghjklzxcvbnm';
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz';
const DIGITS = '01234567890';

function isRun(s, seq) {
  if (s.length < 3) return false;
  return seq.includes(s) || [...seq].reverse().join('').includes(s);
}

function looksLikeWord(w) {
  const vowels = (w.match(/[aeiouyäöüàáâãåæèéêëìíîïòóôõøùúûýœ]/g) || []).length;
  const ratio = vowels / w.length;
  return ratio >= 0.2 && ratio <= 0.7 && !/[^aeiouyäöüàáâãåæèéêëìíîïòóôõøùúûýœ]{5,}/.test(w);
}

/** A conservative estimate of a passphrase's guessing entropy, in bits. */
export function passphraseBits(p) {
  if (!p) return 0;
  const lower = p.toLowerCase();
  const letters = lower.replace(/[^\p{L}]/gu, '');
  if (COMMON.has(lower) || (COMMON.has(letters) && letters.length >= lower.length - 4)) return 8;
  const tokens = p.match(/\p{L}+|\p{N}+|\s+|[^\p{L}\p{N}\s]+/gu) || [];
  const seen = new Set();
  let bits = 0;
  for (const tok of tokens) {
    const t = tok.toLowerCase();
    const L = [...tok].length;
    if (seen.has(t)) { bits += 2; continue; }
    seen.add(t);
    if (/^\s+$/.test(tok)) { bits += 0.5; continue; }
    if (/^(.)\1+$/u.test(t)) { bits += 3; continue; }
    if (/^\p{L}+$/u.test(tok)) {
      if (isRun(t, KEYBOARD) || isRun(t, ALPHABET) || COMMON.has(t)) bits += 4;
      else if (L >= 3 && looksLikeWord(t)) {
        bits += 11 + Math.max(0, L - 9) * 2;
        if (/\p{Lu}/u.test(tok.slice(1))) bits += 3;
        else if (/^\p{Lu}/u.test(tok)) bits += 1;
      } else bits += L * (/\p{Lu}/u.test(tok) && /\p{Ll}/u.test(tok) ? 5.7 : 4.7);
    } else if (/^\p{N}+$/u.test(tok)) {
      if (/^(19|20)\d\d$/.test(tok)) bits += 5;
      else if (isRun(tok, DIGITS)) bits += 3;
      else bits += L * 3.32;
    } else {
      bits += Math.min(L, 3) * 5 + Math.max(0, L - 3) * 2;
    }
  }
  return bits;
}

const STRENGTH = [
  ['very weak', 'Very weak: easy to guess offline. Use five or more random words.'],
  ['weak', 'Weak: add more random words.'],
  ['fair', 'Fair: one or two more random words would make it strong.'],
  ['strong', 'Strong.'],
  ['very strong', 'Very strong.'],
];

export function passphraseScore(p) {
  if (!p) return -1;
  const b = passphraseBits(p);
  return b < 28 ? 0 : b < 40 ? 1 : b < 52 ? 2 : b < 64 ? 3 : 4;
}

// ------------------------------------------------------------------ boot

function showBoot() {
  topbar.hidden = true;
  const node = mount(tpl('tpl-boot'));
  const slow = setTimeout(() => {
    const d = role(node, 'boot-detail');
    if (d.isConnected) {
      d.textContent = 'Still preparing: the first start loads the vault engine (about 10 MB); later starts are quick and work offline.';
    }
  }, 8000);
  return () => clearTimeout(slow);
}

function bootFailed(message) {
  const err = main.querySelector('[data-role="boot-error"]');
  if (!err) return;
  main.querySelector('.spinner')?.remove();
  main.querySelector('#boot-title').textContent = 'The secure workspace could not start';
  role(main, 'boot-detail').textContent = 'Reload the page to try again. If it keeps failing, this browser may lack a feature ownmem needs (module workers, WebAssembly, IndexedDB).';
  showError(err, message);
}

async function start() {
  const done = showBoot();
  try {
    client = new VaultClient();
  } catch (err) {
    done();
    bootFailed(err.message);
    return;
  }
  client.on('failed', (e) => { if (!state.boot) bootFailed(e.message); });
  client.on('synced', onSynced);
  client.on('online', onOnline);
  // A vault in this browser: its unlock form shows at once, while the vault engine is still
  // booting, and the passphrase's Argon2id runs alongside the boot (worker.js).  The rest of
  // what `boot` tells is fetched once the vault is open.
  let stored = false;
  try {
    stored = (await client.call('probe')).vault === true;
  } catch {
    stored = false;
  }
  if (stored) {
    done();
    showUnlock();
    return;
  }
  try {
    state.boot = await client.call('boot');
  } catch (err) {
    done();
    bootFailed(errorText(err));
    return;
  }
  done();
  if (state.boot.vault) {
    state.status.server = state.boot.vault.server;
    state.status.name = state.boot.vault.name;
    showUnlock();
  } else {
    showWelcome('create');
  }
}

// ------------------------------------------------------------------ locked screens

function showWelcome(tab) {
  topbar.hidden = true;
  const node = mount(tpl('tpl-welcome'));
  const body = role(node, 'welcome-body');
  const tabs = [...node.querySelectorAll('[role="tab"]')];
  const select = (name, focus) => {
    for (const t of tabs) {
      const on = t.dataset.tab === name;
      t.setAttribute('aria-selected', String(on));
      t.tabIndex = on ? 0 : -1;
      if (on) body.setAttribute('aria-labelledby', t.id);
      if (on && focus) t.focus();
    }
    body.replaceChildren(name === 'create' ? createForm() : loginForm());
  };
  for (const t of tabs) {
    t.addEventListener('click', () => select(t.dataset.tab, false));
    t.addEventListener('keydown', (e) => {
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

const NAME_RE = /^[A-Za-z0-9._-]{1,64}$/;

function createForm() {
  const form = tpl('tpl-create');
  wireReveal(form);
  role(form, 'origin').textContent = location.host || location.origin;
  const name = form.elements.name;
  const pass = form.elements.passphrase;
  const pass2 = form.elements.passphrase2;
  const bar = role(form, 'strength');
  const text = q(form, '#strength-text');
  const err = role(form, 'error');
  name.value = settings.vaultName || '';
  pass.addEventListener('input', () => {
    const s = passphraseScore(pass.value);
    bar.dataset.score = String(s);
    text.textContent = s < 0 ? 'Strength: type a passphrase' : `Strength: ${STRENGTH[s][1]}`;
  });
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    showError(err, '');
    const vname = name.value.trim();
    if (!NAME_RE.test(vname)) {
      showError(err, 'Give the vault a name: letters, digits, dot, dash or underscore.');
      name.focus();
      return;
    }
    if (!pass.value) {
      showError(err, 'Choose a passphrase.');
      pass.focus();
      return;
    }
    if (pass.value.length < 8 || passphraseScore(pass.value) < 1) {
      showError(err, 'This passphrase is too easy to guess offline. Use five or more random words.');
      pass.focus();
      return;
    }
    if (pass.value !== pass2.value) {
      showError(err, 'The two passphrases differ.');
      pass2.value = '';
      pass2.focus();
      return;
    }
    const link = form.elements.link.checked;
    const progress = role(form, 'progress');
    setBusy(form, true);
    showProgress(progress, 'Creating your vault: deriving its keys…');
    let created = false;
    try {
      await client.call('create', { passphrase: pass.value });
      created = true;
    } catch (ex) {
      showError(err, errorText(ex));
    } finally {
      concealPassphrases(form);
    }
    if (!created) {
      setBusy(form, false);
      showProgress(progress, '');
      pass.focus();
      return;
    }
    settings.vaultName = vname;
    saveSettings();
    let linkError = '';
    if (link) {
      showProgress(progress, 'Registering the vault on the server…');
      try {
        await client.call('link', { server: location.origin, name: vname });
      } catch (ex) {
        linkError = errorText(ex);
      }
    }
    await enterVault();
    if (linkError) notice(`Your vault was created but is not synced yet: ${oneLine(linkError)} Link it in Settings.`);
  });
  return form;
}

function loginForm() {
  const form = tpl('tpl-login');
  wireReveal(form);
  const err = role(form, 'error');
  form.elements.server.value = location.origin;
  form.elements.name.value = settings.vaultName || '';
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    showError(err, '');
    const server = form.elements.server.value.trim().replace(/\/+$/, '');
    const name = form.elements.name.value.trim();
    const pass = form.elements.passphrase;
    try {
      const u = new URL(server);
      if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error();
    } catch {
      showError(err, 'Enter the server address, for example https://memory.example.org');
      form.elements.server.focus();
      return;
    }
    if (!name) {
      showError(err, 'Enter the vault name.');
      form.elements.name.focus();
      return;
    }
    if (!pass.value) {
      showError(err, 'Enter your passphrase.');
      pass.focus();
      return;
    }
    const progress = role(form, 'progress');
    setBusy(form, true);
    showProgress(progress, 'Fetching your vault and deriving its keys…');
    let ok = false;
    try {
      await client.call('login', { server, name, passphrase: pass.value });
      ok = true;
    } catch (ex) {
      showError(err, errorText(ex));
    } finally {
      concealPassphrases(form);
    }
    if (!ok) {
      setBusy(form, false);
      showProgress(progress, '');
      pass.focus();
      return;
    }
    settings.vaultName = name;
    saveSettings();
    state.boot = { ...state.boot, vault: { name, server, count: 0 } };
    await enterVault();
  });
  return form;
}

function showUnlock(message) {
  topbar.hidden = true;
  const node = mount(tpl('tpl-unlock'));
  wireReveal(node);
  role(node, 'unlock-name').textContent = vaultName();
  if (message) role(node, 'unlock-detail').textContent = message;
  const form = q(node, 'form');
  const err = role(form, 'error');
  const pass = form.elements.passphrase;
  form.elements.username.value = vaultName();
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    showError(err, '');
    if (!pass.value) {
      showError(err, 'Enter your passphrase.');
      pass.focus();
      return;
    }
    const progress = role(form, 'progress');
    setBusy(form, true);
    showProgress(progress, 'Unlocking: deriving your key (about a second)…');
    let ok = false;
    try {
      await client.call('unlock', { passphrase: pass.value });
      ok = true;
    } catch (ex) {
      showError(err, errorText(ex));
      if (ex.code === 'wrong_passphrase') await healAfterRefusal();
    } finally {
      concealPassphrases(form);
    }
    if (!ok) {
      setBusy(form, false);
      showProgress(progress, '');
      pass.focus();
      return;
    }
    await enterVault();
  });
  pass.focus();
}

// ------------------------------------------------------------------ unlocked

async function enterVault() {
  state.unlocked = true;
  state.session++;
  state.view = 'memories';
  state.loaded = false;
  state.limit = PAGE;
  state.online = null;
  lastActivity = Date.now();
  topbar.hidden = false;
  renderHeader();
  showMemories();
  await Promise.all([refreshList(), refreshStatus()]);
  if (!state.boot) {
    // the unlock form came before the vault engine's boot (start): what it tells, now
    client.call('boot').then((b) => { state.boot = b; }, () => {});
  }
  // a touch screen would pop up its keyboard: focus the first field only with a mouse
  if (state.unlocked && matchMedia('(pointer: fine)').matches) q(main, '#add-content')?.focus();
}

function renderHeader() {
  document.getElementById('vault-title').textContent = vaultName();
  document.title = `${vaultName()} · ownmem`;
  const sb = document.getElementById('settings-button');
  sb.setAttribute('aria-pressed', String(state.view === 'settings'));
  renderSync();
}

function showView(view) {
  state.view = view;
  state.editing = null;
  if (view === 'settings') showSettings();
  else if (view === 'conflicts') showConflicts();
  else showMemories();
  renderHeader();
}

// ------------------------------------------------------------------ memories view

function showMemories() {
  const node = mount(tpl('tpl-vault'));
  const form = q(node, '#add-form');
  const content = form.elements.content;
  const conf = form.elements.confidence;
  const out = role(form, 'confidence-out');
  enterSubmits(content);
  conf.addEventListener('input', () => { out.textContent = percent(conf.value); });
  form.addEventListener('submit', (e) => { e.preventDefault(); addMemory(form); });

  const search = q(node, '#search');
  search.value = state.filters.q;
  let t = 0;
  search.addEventListener('input', () => {
    clearTimeout(t);
    t = setTimeout(() => { state.filters.q = search.value; state.limit = PAGE; renderList(); }, 120);
  });
  search.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && search.value) {
      e.preventDefault();
      search.value = '';
      state.filters.q = '';
      renderList();
    }
  });
  for (const key of ['tag', 'type', 'trust', 'scope']) {
    const sel = q(node, `#filter-${key}`);
    sel.addEventListener('change', () => { state.filters[key] = sel.value; state.limit = PAGE; renderList(); });
  }
  const toggle = role(node, 'filters-toggle');
  toggle.addEventListener('click', () => {
    const open = toggle.getAttribute('aria-expanded') !== 'true';
    toggle.setAttribute('aria-expanded', String(open));
    q(node, '.toolbar').classList.toggle('filters-open', open);
    if (open) q(node, '#filters select')?.focus();
  });
  role(node, 'open-conflicts').addEventListener('click', () => showView('conflicts'));
  role(node, 'show-more').addEventListener('click', () => {
    state.limit += PAGE;
    renderList();
  });
  fillOptions();
  renderList();
}

async function addMemory(form) {
  const err = role(form, 'error');
  showError(err, '');
  const content = form.elements.content.value.trim();
  if (!content) {
    showError(err, 'Write the memory first.');
    form.elements.content.focus();
    return;
  }
  const args = {
    content,
    tags: parseTags(form.elements.tags.value),
    type: form.elements.type.value,
    confidence: Number(form.elements.confidence.value),
    scope: form.elements.scope.value || 'default',
  };
  const session = state.session;
  setBusy(form, true);
  try {
    const r = await client.call('add', args);
    if (session !== state.session) return;
    form.elements.content.value = '';
    form.elements.tags.value = '';
    notice('Memory added.');
    if (r && r.entry && state.loaded) showAdded(r.entry);
    else await refreshList();
    scheduleSync();
    refreshStatus();
  } catch (ex) {
    if (session === state.session) showError(err, errorText(ex));
  } finally {
    if (session === state.session && form.isConnected) {
      setBusy(form, false);
      form.elements.content.focus();
    }
  }
}

// The list's order, as the vault sends it: newest first, then by id.
function listOrder(a, b) {
  return (b.created || 0) - (a.created || 0) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

// The vault answers an add with the new memory: show it without reading the whole vault again.
function showAdded(e) {
  const at = state.entries.findIndex((x) => listOrder(e, x) < 0);
  state.entries.splice(at < 0 ? state.entries.length : at, 0, e);
  state.byId.set(e.id, e);
  if (state.view === 'memories') {
    fillOptions();
    renderList();
  }
}

async function refreshList() {
  const session = state.session;
  try {
    const r = await client.call('list', { include_unverified: true });
    if (session !== state.session || !state.unlocked) return;
    state.entries = r.entries || [];
    state.byId = new Map(state.entries.map((e) => [e.id, e]));
    state.conflicts = (r.conflicts || []).filter((g) => g.length > 1);
    state.inConflict = new Set(state.conflicts.flat());
    state.refused = r.refused || 0;
    state.scopes = r.scopes && r.scopes.length ? r.scopes : ['default'];
    state.loaded = true;
    haystack = new WeakMap();
    if (state.view === 'memories') {
      fillOptions();
      renderList();
    } else if (state.view === 'conflicts') {
      showConflicts();
    }
  } catch (ex) {
    if (session !== state.session) return;
    notice(`Could not read the vault: ${oneLine(errorText(ex))}`);
  }
}

function setOptions(select, values, allLabel, label = (v) => v) {
  if (!select) return;
  const keep = select.value;
  const opts = [];
  if (allLabel !== null) opts.push(el('option', { value: '', text: allLabel }));
  for (const v of values) opts.push(el('option', { value: v, text: label(v) }));
  select.replaceChildren(...opts);
  if ([...select.options].some((o) => o.value === keep)) select.value = keep;
}

function fillOptions() {
  const tags = new Set();
  const types = new Set(['semantic', 'episodic', 'procedural']);
  for (const e of state.entries) {
    for (const t of e.tags) tags.add(t);
    types.add(e.type);
  }
  const byName = (a, b) => a.localeCompare(b, undefined, { sensitivity: 'base' });
  setOptions(q(main, '#filter-tag'), [...tags].sort(byName), 'All tags');
  setOptions(q(main, '#filter-type'), [...types], 'All types', typeLabel);
  setOptions(q(main, '#filter-scope'), [...state.scopes].sort(byName), 'All scopes');
  const addScope = q(main, '#add-scope');
  if (addScope) {
    const had = addScope.options.length;
    setOptions(addScope, state.scopes, null);
    if (!had) addScope.value = state.scopes.includes('default') ? 'default' : state.scopes[0];
    // one scope: nothing to choose, so no control for it (here and in the filters)
    addScope.closest('.field').hidden = state.scopes.length < 2;
    q(main, '#filter-scope').closest('.field').hidden = state.scopes.length < 2;
    q(main, '.filters').classList.toggle('filters-3', state.scopes.length < 2);
  }
  for (const key of ['tag', 'type', 'trust', 'scope']) {
    const sel = q(main, `#filter-${key}`);
    if (!sel) continue;
    if ([...sel.options].some((o) => o.value === state.filters[key])) sel.value = state.filters[key];
    else state.filters[key] = sel.value = '';
  }
}

let haystack = new WeakMap();
function hay(e) {
  let h = haystack.get(e);
  if (h === undefined) {
    h = `${e.content}\n${e.tags.join(' ')}`.toLocaleLowerCase();
    haystack.set(e, h);
  }
  return h;
}

function visibleEntries() {
  const f = state.filters;
  const terms = f.q.toLocaleLowerCase().split(/\s+/).filter(Boolean);
  return state.entries.filter((e) => {
    if (f.tag && !e.tags.includes(f.tag)) return false;
    if (f.type && e.type !== f.type) return false;
    if (f.scope && e.scope !== f.scope) return false;
    if (f.trust === 'agent' ? e.source !== 'agent' : f.trust && e.trust !== f.trust) return false;
    if (terms.length) {
      const h = hay(e);
      if (!terms.every((t) => h.includes(t))) return false;
    }
    return true;
  });
}

function renderList() {
  const list = q(main, '#memory-list');
  if (!list) return;
  const all = state.entries.length;
  const shown = visibleEntries();
  const page = shown.slice(0, state.limit);
  // Cards already in the list stay where they are: only new ones are built and inserted.
  let at = list.firstElementChild;
  for (const node of page.map(cardFor)) {
    if (node === at) at = at.nextElementSibling;
    else list.insertBefore(node, at);
  }
  while (at) {
    const next = at.nextElementSibling;
    at.remove();
    at = next;
  }
  list.setAttribute('aria-busy', String(!state.loaded));

  const active = ['tag', 'type', 'trust', 'scope'].filter((k) => state.filters[k]).length;
  const toggle = role(main, 'filters-toggle');
  if (active) toggle.dataset.active = String(active);
  else delete toggle.dataset.active;
  toggle.setAttribute('aria-label', active ? `Filters (${active} active)` : 'Filters');

  const summary = role(main, 'summary');
  const filtering = Boolean(state.filters.q || state.filters.tag || state.filters.type || state.filters.trust || state.filters.scope);
  let s = !state.loaded ? 'Opening your memories…'
    : filtering ? `${shown.length} of ${all} ${all === 1 ? 'memory matches' : 'memories match'}`
      : `${all} ${all === 1 ? 'memory' : 'memories'}`;
  if (state.refused) s += ` · ${state.refused} could not be opened and ${state.refused === 1 ? 'is' : 'are'} hidden`;
  summary.textContent = s;

  const empty = role(main, 'empty');
  empty.replaceChildren();
  empty.hidden = !state.loaded || shown.length > 0;
  if (state.loaded && !shown.length) {
    if (all === 0) {
      empty.append(el('p', { class: 'empty-title', text: 'Your vault is empty.' }),
        el('p', { class: 'muted', text: 'Add the first thing your agents should know about you, above. It is encrypted before it is stored.' }));
    } else {
      empty.append(el('p', { class: 'empty-title', text: 'No memory matches.' }),
        el('button', { type: 'button', class: 'btn btn-small', text: 'Clear search and filters', onclick: clearFilters }));
    }
  }
  const more = role(main, 'more');
  more.hidden = shown.length <= state.limit;
  if (!more.hidden) role(more, 'show-more').textContent = `Show more (${shown.length - state.limit} left)`;

  const banner = role(main, 'conflicts-banner');
  banner.hidden = state.conflicts.length === 0;
  role(banner, 'conflicts-count').textContent = state.conflicts.length === 1 ? '1 conflict.'
    : `${state.conflicts.length} conflicts.`;
}

function clearFilters() {
  state.filters = { q: '', tag: '', type: '', trust: '', scope: '' };
  for (const key of ['tag', 'type', 'trust', 'scope']) q(main, `#filter-${key}`).value = '';
  q(main, '#search').value = '';
  renderList();
  q(main, '#search').focus();
}

function trustBadge(node, e) {
  node.textContent = TRUST_TEXT[e.trust] || e.trust;
  node.className = `badge badge-${e.trust in TRUST_TEXT ? e.trust : 'unverified'}`;
  node.title = TRUST_TITLE[e.trust] || '';
  node.dataset.trust = e.trust;
}

// Each entry's card is built once and kept while the entry (a new object after every list)
// and its editing and conflict state stay the same.
let cards = new WeakMap();   // entry -> {node, editing, conflict}
function cardFor(e) {
  const editing = state.editing === e.id;
  const conflict = state.inConflict.has(e.id);
  const c = cards.get(e);
  if (c && c.editing === editing && c.conflict === conflict) return c.node;
  const node = card(e);
  cards.set(e, { node, editing, conflict });
  return node;
}

function card(e) {
  const li = tpl('tpl-card');
  li.dataset.id = e.id;
  li.dataset.trust = e.trust;
  li.classList.add(`card-${e.trust}`);
  trustBadge(role(li, 'trust'), e);
  if (e.source === 'agent') {
    const a = role(li, 'agent');
    a.hidden = false;
    a.title = 'Written by an AI agent';
  }
  if (state.inConflict.has(e.id)) {
    const c = role(li, 'conflict');
    c.hidden = false;
    c.setAttribute('aria-label', 'In conflict: review the concurrent versions');
    c.addEventListener('click', () => showView('conflicts'));
  }
  role(li, 'type').textContent = typeLabel(e.type);

  if (state.editing === e.id) {
    for (const r of ['content', 'tags', 'meta', 'violations']) role(li, r).remove();
    li.querySelector('.card-actions').replaceWith(editForm(e));
    li.classList.add('card-editing');
    return li;
  }

  role(li, 'content').textContent = e.content;
  const tags = role(li, 'tags');
  if (e.tags.length) {
    tags.append(...e.tags.map((t) => el('li', { class: 'chip' }, el('button', {
      type: 'button', class: 'chip-btn', text: t, title: `Show memories tagged ${t}`,
      onclick: () => filterTag(t),
    }))));
  } else tags.remove();

  const meta = [e.scope, e.confidence !== null && e.confidence !== undefined ? `${percent(e.confidence)} confident` : null,
    dateTime(e.updated || e.created), e.supersedes ? 'edited' : null].filter(Boolean);
  role(li, 'meta').textContent = meta.join(' · ');

  if (e.schema_violations && e.schema_violations.length) {
    const v = role(li, 'violations');
    v.hidden = false;
    v.textContent = `Schema issues: ${e.schema_violations.join('; ')}`;
  }

  const edit = role(li, 'edit');
  const forget = role(li, 'forget');
  const label = e.content.length > 40 ? e.content.slice(0, 40) + '…' : e.content;
  edit.setAttribute('aria-label', `Edit: ${label}`);
  forget.setAttribute('aria-label', `Forget: ${label}`);
  if (e.trust === 'unverified') {
    edit.remove();   // an edit would launder it into "self"; the vault refuses it
  } else {
    edit.addEventListener('click', () => startEdit(e.id));
  }
  forget.addEventListener('click', () => openForget(e, forget));

  const dl = role(li, 'details');
  const rows = [
    ['ID', e.id],
    ['Author', e.trust === 'self' ? 'this vault' : (e.author_key_id ? `key ${e.author_key_id}` : 'unknown')],
    ['Authorship', e.authorship],
    ['Source', e.source || null],
    ['Created', dateTime(e.created)],
    ['Updated', e.updated ? dateTime(e.updated) : null],
    ['Replaces', e.supersedes ? shortId(e.supersedes) : null],
  ];
  for (const [k, v] of rows) {
    if (!v) continue;
    dl.append(el('dt', { text: k }), el('dd', { text: v }));
  }
  return li;
}

function filterTag(tag) {
  state.filters.tag = tag;
  const sel = q(main, '#filter-tag');
  if (sel) sel.value = tag;
  state.limit = PAGE;
  renderList();
  sel?.focus();
}

// ------------------------------------------------------------------ edit in place

function startEdit(id) {
  state.editing = id;
  rerenderCard(id);
  const form = q(main, `li[data-id="${id}"] form`);
  const ta = form?.elements.content;
  if (ta) {
    ta.focus();
    ta.setSelectionRange(ta.value.length, ta.value.length);
  }
}

function rerenderCard(id) {
  const li = q(main, `li[data-id="${id}"]`);
  const e = state.byId.get(id);
  if (li && e) {
    cards.delete(e);
    li.replaceWith(cardFor(e));
  }
}

function stopEdit(id, focusId = id) {
  state.editing = null;
  rerenderCard(id);
  q(main, `li[data-id="${focusId}"] [data-role="edit"]`)?.focus();
}

let editSeq = 0;
function editForm(e) {
  const form = tpl('tpl-edit');
  const n = ++editSeq;
  for (const [name, lab] of [['content', 'label-content'], ['tags', 'label-tags'], ['type', 'label-type'], ['confidence', 'label-confidence']]) {
    const id = `edit-${n}-${name}`;
    form.elements[name].id = id;
    role(form, lab).setAttribute('for', id);
  }
  form.elements.content.value = e.content;
  form.elements.tags.value = e.tags.join(', ');
  const typeSel = form.elements.type;
  if (![...typeSel.options].some((o) => o.value === e.type)) typeSel.append(el('option', { value: e.type, text: e.type }));
  typeSel.value = e.type;
  const conf = form.elements.confidence;
  conf.value = String(e.confidence ?? 0.8);
  const out = role(form, 'confidence-out');
  out.textContent = percent(conf.value);
  conf.addEventListener('input', () => { out.textContent = percent(conf.value); });
  enterSubmits(form.elements.content);
  form.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') {
      ev.preventDefault();
      stopEdit(e.id);
    }
  });
  role(form, 'cancel').addEventListener('click', () => stopEdit(e.id));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const err = role(form, 'error');
    showError(err, '');
    const content = form.elements.content.value.trim();
    if (!content) {
      showError(err, 'A memory cannot be empty. To remove it, use Forget.');
      return;
    }
    const args = { id: e.id };
    const tags = parseTags(form.elements.tags.value);
    if (content !== e.content) args.content = content;
    if (tags.join('\u0000') !== e.tags.join('\u0000')) args.tags = tags;
    if (typeSel.value !== e.type) args.type = typeSel.value;
    if (Number(conf.value) !== Number(e.confidence ?? 0.8)) args.confidence = Number(conf.value);
    if (Object.keys(args).length === 1) {
      stopEdit(e.id);
      return;
    }
    const session = state.session;
    setBusy(form, true);
    try {
      const r = await client.call('edit', args);
      if (session !== state.session) return;
      state.editing = null;
      notice('Saved as a new version.');
      await refreshList();
      q(main, `li[data-id="${r.id}"] [data-role="edit"]`)?.focus();
      scheduleSync();
      refreshStatus();
    } catch (ex) {
      if (session !== state.session) return;
      setBusy(form, false);
      showError(err, errorText(ex));
    }
  });
  return form;
}

// ------------------------------------------------------------------ forget

const forgetDialog = document.getElementById('forget-dialog');
let forgetTarget = null;   // {entry, trigger}

function openForget(e, trigger) {
  forgetTarget = { entry: e, trigger };
  document.getElementById('forget-quote').textContent = e.content.length > 280 ? e.content.slice(0, 280) + '…' : e.content;
  showError(document.getElementById('forget-error'), '');
  setBusy(forgetDialog.querySelector('form'), false);
  forgetDialog.showModal();
}

forgetDialog.querySelector('form').addEventListener('submit', async (ev) => {
  if (ev.submitter?.value !== 'forget') return;   // Cancel: the dialog closes itself
  ev.preventDefault();
  const target = forgetTarget;
  if (!target) return;
  const form = ev.target;
  const session = state.session;
  setBusy(form, true);
  try {
    const r = await client.call('forget', { id: target.entry.id });
    if (session !== state.session) return;
    forgetTarget = null;
    forgetDialog.close('forgotten');
    notice(r.erased > 1 ? `Forgotten: ${r.erased} versions erased.` : 'Forgotten.');
    await refreshList();
    q(main, '#search')?.focus();
    scheduleSync();
    refreshStatus();
  } catch (ex) {
    if (session !== state.session) return;
    setBusy(form, false);
    showError(document.getElementById('forget-error'), errorText(ex));
  }
});

forgetDialog.addEventListener('close', () => {
  document.getElementById('forget-quote').textContent = '';
  if (forgetTarget && forgetDialog.returnValue !== 'forgotten') forgetTarget.trigger?.focus();
  forgetTarget = null;
});

// ------------------------------------------------------------------ conflicts

function showConflicts() {
  const node = mount(tpl('tpl-conflicts'));
  role(node, 'back').addEventListener('click', () => showView('memories'));
  const groups = role(node, 'groups');
  if (!state.conflicts.length) {
    groups.append(el('p', { class: 'empty-title', text: 'No conflicts. Every memory has one current version.' }));
  }
  state.conflicts.forEach((ids, gi) => {
    const versions = ids.map((id) => state.byId.get(id)).filter(Boolean);
    const section = el('section', { class: 'panel conflict-group', 'aria-labelledby': `conflict-${gi}` },
      el('h2', { class: 'panel-title', id: `conflict-${gi}`, text: `Memory with ${ids.length} concurrent versions` }));
    const grid = el('div', { class: 'conflict-versions' });
    versions.forEach((e, vi) => {
      const badge = el('span');
      trustBadge(badge, e);
      const v = el('article', { class: 'version', 'data-testid': 'conflict-version', 'aria-label': `Version ${vi + 1}` },
        el('div', { class: 'card-head' }, el('span', { class: 'version-no', text: `Version ${vi + 1}` }), badge,
          e.source === 'agent' ? el('span', { class: 'badge badge-agent', text: 'agent' }) : null),
        el('p', { class: 'card-content', text: e.content }),
        e.tags.length ? el('ul', { class: 'chips', 'aria-label': 'Tags' }, ...e.tags.map((t) => el('li', { class: 'chip', text: t }))) : null,
        el('p', { class: 'card-meta', text: [typeLabel(e.type), e.scope, dateTime(e.updated || e.created)].filter(Boolean).join(' · ') }),
        el('button', { type: 'button', class: 'btn btn-primary btn-small', 'data-testid': 'keep-button',
          text: 'Keep this version', onclick: (ev) => keepVersion(e, ids, ev.currentTarget) }));
      grid.append(v);
    });
    if (versions.length < ids.length) {
      grid.append(el('p', { class: 'muted', text: `${ids.length - versions.length} version(s) could not be opened here.` }));
    }
    section.append(grid);
    groups.append(section);
  });
  q(node, 'h1').setAttribute('tabindex', '-1');
  q(node, 'h1').focus();
}

const keepDialog = document.getElementById('keep-dialog');
let keepTarget = null;   // {entry, trigger}

function keepVersion(e, ids, trigger) {
  keepTarget = { entry: e, trigger };
  document.getElementById('keep-quote').textContent = e.content.length > 280 ? e.content.slice(0, 280) + '…' : e.content;
  showError(document.getElementById('keep-error'), '');
  setBusy(keepDialog.querySelector('form'), false);
  keepDialog.showModal();
}

keepDialog.querySelector('form').addEventListener('submit', async (ev) => {
  if (ev.submitter?.value !== 'keep') return;
  ev.preventDefault();
  const target = keepTarget;
  if (!target) return;
  const form = ev.target;
  const e = target.entry;
  const session = state.session;
  setBusy(form, true);
  try {
    // One new version, signed by you, supersedes every concurrent head: one head remains,
    // and the history stays until it is forgotten.
    await client.call('resolve', { id: e.id });
    if (session !== state.session) return;
    keepTarget = null;
    keepDialog.close('kept');
    notice('Conflict resolved: the chosen version is kept.');
    await refreshList();
    scheduleSync();
    refreshStatus();
  } catch (ex) {
    if (session !== state.session) return;
    setBusy(form, false);
    showError(document.getElementById('keep-error'), errorText(ex));
  }
});

keepDialog.addEventListener('close', () => {
  document.getElementById('keep-quote').textContent = '';
  if (keepTarget && keepDialog.returnValue !== 'kept') keepTarget.trigger?.focus();
  keepTarget = null;
});

// ------------------------------------------------------------------ settings

function showSettings() {
  const node = mount(tpl('tpl-settings'));
  role(node, 'back').addEventListener('click', () => showView('memories'));

  // export
  const exportBtn = role(node, 'export');
  exportBtn.addEventListener('click', async () => {
    const progress = role(node, 'export-progress');
    const err = role(node, 'export-error');
    showError(err, '');
    exportBtn.disabled = true;
    showProgress(progress, 'Sealing the export…');
    const session = state.session;
    try {
      const r = await client.call('export');
      if (session !== state.session) return;
      const blob = new Blob([r.data], { type: 'application/octet-stream' });
      const url = URL.createObjectURL(blob);
      const a = el('a', { href: url, download: `ownmem-${isoDate()}.amem`, class: 'visually-hidden' });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
      showProgress(progress, `Exported ${r.count} object${r.count === 1 ? '' : 's'}.`, false);
    } catch (ex) {
      if (session !== state.session) return;
      showProgress(progress, '');
      showError(err, errorText(ex));
    } finally {
      exportBtn.disabled = false;
    }
  });

  // import
  const input = role(node, 'import');
  input.addEventListener('change', async () => {
    const file = input.files && input.files[0];
    if (!file) return;
    const progress = role(node, 'import-progress');
    const err = role(node, 'import-error');
    showError(err, '');
    role(node, 'import-report').hidden = true;
    input.disabled = true;
    showProgress(progress, `Checking ${file.name}…`);
    const session = state.session;
    try {
      const data = new Uint8Array(await file.arrayBuffer());
      const r = await client.call('import', { data, accept_container_keys: role(node, 'accept-keys').checked });
      if (session !== state.session) return;
      showProgress(progress, '');
      renderReport(node, file.name, r);
      refreshList();
      scheduleSync();
      refreshStatus();
    } catch (ex) {
      if (session !== state.session) return;
      showProgress(progress, '');
      showError(err, errorText(ex));
    } finally {
      input.disabled = false;
      input.value = '';
    }
  });

  // link
  const link = role(node, 'link-form');
  link.elements.server.value = state.status.server || location.origin;
  link.elements.name.value = state.status.name || settings.vaultName || '';
  describeLink(node);
  link.addEventListener('submit', async (e) => {
    e.preventDefault();
    const err = role(link, 'error');
    showError(err, '');
    const server = link.elements.server.value.trim().replace(/\/+$/, '');
    const name = link.elements.name.value.trim();
    try {
      const u = new URL(server);
      if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error();
    } catch {
      showError(err, 'Enter the server address, for example https://memory.example.org');
      return;
    }
    if (!NAME_RE.test(name)) {
      showError(err, 'The vault name is letters, digits, dot, dash or underscore.');
      return;
    }
    const progress = role(link, 'progress');
    const session = state.session;
    setBusy(link, true);
    showProgress(progress, 'Linking…');
    try {
      await client.call('link', { server, name });
      if (session !== state.session) return;
      settings.vaultName = name;
      saveSettings();
      await refreshStatus();
      showProgress(progress, 'Linked. Syncing…');
      await syncNow('link');
      showProgress(progress, 'Linked and synced.', false);
      describeLink(node);
      renderHeader();
    } catch (ex) {
      if (session !== state.session) return;
      showProgress(progress, '');
      showError(err, errorText(ex));
    } finally {
      if (link.isConnected) setBusy(link, false);
    }
  });

  // idle
  const idle = role(node, 'idle-form');
  idle.elements.minutes.value = String(settings.idleMinutes);
  idle.addEventListener('submit', (e) => {
    e.preventDefault();
    const err = role(idle, 'error');
    const v = Number(idle.elements.minutes.value);
    if (!Number.isInteger(v) || v < 1 || v > 1440) {
      showError(err, 'Enter a whole number of minutes from 1 to 1440.');
      idle.elements.minutes.focus();
      return;
    }
    showError(err, '');
    settings.idleMinutes = v;
    saveSettings();
    notice(`This vault now locks after ${v} idle minute${v === 1 ? '' : 's'}.`);
  });

  const facts = role(node, 'facts');
  const p = state.boot?.provider || {};
  const rows = [
    ['Vault', vaultName()],
    ['Memories', String(state.entries.length)],
    ['Stored', 'in this browser (IndexedDB), sealed; decrypted text only while unlocked'],
    ['Sync server', state.status.server ? `${state.status.server} (as ${state.status.name})` : 'not linked'],
    ['Signatures', p.mldsa ? `Ed25519 + ML-DSA-65 (${p.mldsa === 'webcrypto' ? 'built into the browser' : 'JavaScript'})` : null],
  ];
  for (const [k, v] of rows) if (v) facts.append(el('dt', { text: k }), el('dd', { text: v }));
  q(node, 'h1').setAttribute('tabindex', '-1');
  q(node, 'h1').focus();
}

function describeLink(node) {
  const s = role(node, 'link-state');
  s.textContent = isLinked()
    ? `Linked to ${state.status.server} as “${state.status.name}”. Changes sync to your other devices.`
    : 'Not linked: this vault lives only in this browser. Link it to a server to use it on your other devices and keep a sealed copy.';
}

function renderReport(node, filename, r) {
  const box = role(node, 'import-report');
  const rows = role(node, 'report-rows');
  const tr = (result, cls, object, reason) => el('tr', { class: `row-${cls}` },
    el('td', {}, el('span', { class: `result result-${cls}`, text: result })),
    el('td', { class: 'mono', text: object }), el('td', { text: reason }));
  const out = [];
  if (r.imported) out.push(tr('imported', 'ok', `${r.imported} object${r.imported === 1 ? '' : 's'}`, 'verified and added'));
  for (const [id, why] of r.skipped || []) out.push(tr('skipped', 'skip', shortId(id) || id, why));
  for (const [id, why] of r.refused || []) out.push(tr('refused', 'bad', shortId(id) || id, why));
  for (const s of r.scopes_added || []) out.push(tr('scope added', 'ok', s, 'new scope'));
  for (const [s, why] of r.scopes_refused || []) out.push(tr('scope refused', 'bad', s, why));
  for (const k of r.keys_added || []) out.push(tr('key trusted', 'ok', shortId(k), 'author key from the file'));
  for (const k of r.keys_held_back || []) out.push(tr('key not trusted', 'skip', shortId(k), 'listed in the file; not trusted (tick the option to trust it)'));
  if (!out.length) out.push(tr('nothing', 'skip', '—', 'the file holds no objects'));
  rows.replaceChildren(...out);
  const skipped = (r.skipped || []).length;
  const refused = (r.refused || []).length;
  role(node, 'report-summary').textContent = `${filename}: ${r.imported} imported, ${skipped} skipped, ${refused} refused.`;
  box.hidden = false;
  box.focus();
}

// ------------------------------------------------------------------ sync status

function renderSync() {
  const dot = document.getElementById('sync-dot');
  const text = document.getElementById('sync-text');
  const box = document.getElementById('sync-status');
  const btn = document.getElementById('sync-button');
  const s = state.status;
  let mode;
  let parts;
  if (!isLinked()) {
    mode = 'local';
    parts = ['This device only'];
    if (s.pending) parts.push(`${s.pending} not synced`);
  } else {
    const offline = state.online === false || navigator.onLine === false;
    mode = state.syncing ? 'syncing' : offline ? 'offline' : state.online ? 'online' : 'connecting';
    parts = [{ syncing: 'Syncing…', offline: 'Offline', online: 'Online', connecting: 'Connecting…' }[mode]];
    if (s.pending) parts.push(`${s.pending} pending`);
    if (s.last_sync) parts.push(`synced ${clockTime(s.last_sync)}`);
    else if (!s.pending) parts.push('not synced yet');
  }
  const line = parts.join(' · ');
  if (text.textContent !== line) text.textContent = line;
  dot.className = `dot dot-${mode}`;
  box.dataset.state = mode;
  box.dataset.pending = String(s.pending || 0);
  box.title = mode === 'offline' && state.offlineReason ? `Offline: ${state.offlineReason}` : line;
  btn.disabled = state.syncing;
  btn.textContent = isLinked() ? 'Sync' : 'Link…';
  btn.setAttribute('aria-label', isLinked() ? 'Sync now' : 'Link this vault to a sync server');
}

async function refreshStatus() {
  const session = state.session;
  try {
    const s = await client.call('status');
    if (session !== state.session || !state.unlocked) return;
    state.status = { pending: s.pending || 0, last_sync: s.last_sync || null, server: s.server || null, name: s.name || null };
    renderHeader();
  } catch {
    // the next event or action tries again
  }
}

async function syncNow(reason) {
  if (!isLinked()) return null;
  const session = state.session;
  state.syncing = true;
  renderSync();
  try {
    const r = await client.call('sync');
    if (session !== state.session) return null;
    state.online = true;
    state.offlineReason = '';
    return r;
  } catch (ex) {
    if (session !== state.session) return null;
    if (ex.code === 'sync') {
      state.online = false;
      state.offlineReason = oneLine(ex.message);
    }
    if (reason === 'manual' || reason === 'link') throw ex;
    return null;
  } finally {
    if (session === state.session) {
      state.syncing = false;
      await refreshStatus();
      renderSync();
    }
  }
}

let syncTimer = 0;
function scheduleSync() {
  if (!isLinked()) return;
  clearTimeout(syncTimer);
  syncTimer = setTimeout(() => { if (state.unlocked) syncNow('auto'); }, 800);
}

function onSynced(e) {
  if (!state.unlocked) return;
  state.online = true;
  state.offlineReason = '';
  if (typeof e.pending === 'number') state.status.pending = e.pending;
  state.status.last_sync = Math.floor(Date.now() / 1000);
  renderSync();
  if (e.pulled || e.erased_here) {
    // another device changed something: show it, but never under an open edit form
    if (state.editing === null) refreshList();
    refreshStatus();
  }
}

function onOnline(e) {
  if (!state.unlocked) return;
  state.online = Boolean(e.online);
  state.offlineReason = e.online ? '' : oneLine(e.message || 'the server cannot be reached');
  renderSync();
}

document.getElementById('sync-button').addEventListener('click', async () => {
  if (!isLinked()) {
    showView('settings');
    q(main, '#link-server')?.focus();
    return;
  }
  try {
    const r = await syncNow('manual');
    if (!r) return;
    const bits = [];
    if (r.pushed) bits.push(`${r.pushed} sent`);
    if (r.pulled) bits.push(`${r.pulled} received`);
    if (r.erased_here || r.erased_remote) bits.push(`${(r.erased_here || 0) + (r.erased_remote || 0)} erased`);
    notice(bits.length ? `Synced: ${bits.join(', ')}.` : 'Synced: nothing new.');
    if (r.pulled || r.erased_here) refreshList();
  } catch (ex) {
    notice(`Sync failed: ${oneLine(errorText(ex))}`);
  }
});

// Back online: send what was written meanwhile now, not at the next change or event.
window.addEventListener('online', () => {
  renderSync();
  if (state.unlocked) scheduleSync();
});
window.addEventListener('offline', renderSync);

// ------------------------------------------------------------------ lock, auto-lock

async function lock(reason) {
  if (!state.unlocked) return;
  state.unlocked = false;
  state.session++;
  clearTimeout(syncTimer);
  // Drop every decrypted byte the page holds: the data, the DOM showing it, open dialogs.
  state.entries = [];
  state.byId = new Map();
  state.conflicts = [];
  state.inConflict = new Set();
  state.editing = null;
  state.filters = { q: '', tag: '', type: '', trust: '', scope: '' };
  haystack = new WeakMap();
  cards = new WeakMap();
  forgetTarget = null;
  keepTarget = null;
  if (forgetDialog.open) forgetDialog.close('locked');
  if (keepDialog.open) keepDialog.close('locked');
  document.getElementById('forget-quote').textContent = '';
  document.getElementById('keep-quote').textContent = '';
  notice('');
  main.replaceChildren();
  topbar.hidden = true;
  document.title = 'ownmem';
  showUnlock(reason === 'idle'
    ? `Locked after ${settings.idleMinutes} idle minute${settings.idleMinutes === 1 ? '' : 's'}. Enter your passphrase to open it again.`
    : 'Locked. Enter your passphrase to open it again.');
  try {
    await client.call('lock');
  } catch {
    // the worker drops its keys with its state either way
  }
}

document.getElementById('lock-button').addEventListener('click', () => lock('button'));
document.getElementById('settings-button').addEventListener('click', () => {
  showView(state.view === 'settings' ? 'memories' : 'settings');
});

let lastActivity = Date.now();
for (const type of ['pointerdown', 'keydown', 'wheel', 'touchstart', 'input']) {
  window.addEventListener(type, () => { lastActivity = Date.now(); }, { passive: true, capture: true });
}

function checkIdle() {
  if (state.unlocked && Date.now() - lastActivity >= settings.idleMinutes * 60000) lock('idle');
}
setInterval(checkIdle, 10000);
document.addEventListener('visibilitychange', checkIdle);

// Escape leaves the settings and conflicts views (outside a field); <dialog> closes itself.
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && state.unlocked && (state.view === 'settings' || state.view === 'conflicts')
      && !forgetDialog.open && !keepDialog.open && !e.defaultPrevented
      && !e.target.closest?.('input, select, textarea')) {
    showView('memories');
  }
});

// ------------------------------------------------------------------ service worker, start

if ('serviceWorker' in navigator && window.isSecureContext) {
  navigator.serviceWorker.register('/sw.js').catch(() => {
    // offline support unavailable (private mode, unsupported); the app still works online
  });
}

start();
