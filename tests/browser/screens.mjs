// The screen tour: every screen of the app at three phone widths (320x568, 360x740, 390x844:
// `phone-320`, `phone-360`, `phone`) and desktop (1280x800), one PNG each, in a stable place:
// test-output/screenshots/<engine>/<screen>-<size>.png (issue 11's Bar: "a screenshot per engine
// per screen"; issue 23's: 320, 360 and 390 px wide).  At every phone width each screen's
// interactive elements are measured (smallTargets): one under 44x44 CSS px is listed, by
// selector and size, and assertShots fails on it.  Written once for the three drivers
// (playwright, puppeteer, W3C WebDriver): the tour acts in the page through `evaluate` only.
// Not a test file (node's runner picks up only *.test.mjs); tests/browser/screens.test.mjs
// runs it in Chromium and Firefox, tests/browser/webkit.test.mjs in WebKit.
//
// A view is {engine, evaluate(fn, arg), setViewport({width, height}), screenshot(file, {fullPage}),
// check?(screen, size)}: `check` runs after each screenshot (WebKit's axe-core pass).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { until } from './helpers.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const SCREENSHOTS = path.join(ROOT, 'test-output', 'screenshots');
export const PHONE = { width: 390, height: 844 };
export const DESKTOP = { width: 1280, height: 800 };
/** [name, viewport]: every size a screen is taken at, the phones first. */
export const SIZES = [['phone-320', { width: 320, height: 568 }], ['phone-360', { width: 360, height: 740 }], ['phone', PHONE],
  ['desktop', DESKTOP]];
/** The least width and height of a touch target at phone size, CSS px (WCAG 2.5.5; Apple's 44 pt). */
export const TARGET = 44;
const OP_MS = 60_000;

/** A small CSV for the records panel's preview (one record with a problem, so both kinds show). */
export const TOUR_CSV = 'id,tag,level,desc,value.city\n'
  + 'contact-alice,contacts,medium,Alice from the book club,Lisbon\n'
  + 'note-groceries,notes;shopping,,,Porto\n';

// ------------------------------------------------------------------ in the page

const clickIn = (css) => {
  const n = document.querySelector(css);
  if (!n) throw new Error(`nothing matches ${css}`);
  n.click();
  return true;
};
const shows = (css) => {
  const n = document.querySelector(css);
  return !!n && n.getClientRects().length > 0 && !n.closest('[hidden]');
};
const fillIn = ([css, value]) => {
  const n = document.querySelector(css);
  n.focus();
  n.value = value;
  n.dispatchEvent(new Event('input', { bubbles: true }));
  return true;
};
// a file chosen in a file input, as the picker would: input.files set, then 'change'
const chooseIn = ([css, name, type, b64]) => {
  const input = document.querySelector(css);
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const dt = new DataTransfer();
  dt.items.add(new File([bytes], name, { type }));
  input.files = dt.files;
  input.dispatchEvent(new Event('change', { bubbles: true }));
  return true;
};
const listed = () => {
  const s = document.querySelector('[data-role="summary"]');
  return !!document.querySelector('[data-testid="add-form"]') && !!s && !!s.textContent && !s.textContent.startsWith('Opening');
};

/**
 * Run in the page: every interactive element shown that is smaller than `min` x `min` CSS px, as
 * "selector WxH".  A checkbox or file input counts as its label when a label wraps it (the label is
 * what a finger presses).  Not counted: what is not rendered (hidden, in a closed <details> or
 * dialog, display:none), the visually hidden (1 px) and a link inside a sentence (WCAG's inline
 * exception).
 */
export const smallTargets = (min) => {
  const css = 'a[href], button, input:not([type="hidden"]), select, textarea, summary, [role="tab"], [role="button"], [tabindex]:not([tabindex="-1"])';
  const name = (n) => {
    const tag = n.tagName.toLowerCase();
    const id = n.id ? `#${n.id}` : '';
    const attr = ['data-testid', 'data-role', 'data-tab'].map((a) => n.getAttribute(a) && `[${a}="${n.getAttribute(a)}"]`).find(Boolean) || '';
    const cls = !id && !attr && n.classList.length ? `.${[...n.classList].join('.')}` : '';
    const text = (n.textContent || n.getAttribute('aria-label') || '').trim().replace(/\s+/g, ' ').slice(0, 24);
    const where = n.closest('[data-testid]:not(:scope)')?.getAttribute('data-testid');
    return `${where && where !== n.getAttribute('data-testid') ? `[data-testid="${where}"] ` : ''}${tag}${id}${attr}${cls}${text ? ` "${text}"` : ''}`;
  };
  const out = [];
  for (const n of document.querySelectorAll(css)) {
    if (n.closest('[hidden], dialog:not([open]), [inert]')) continue;
    const label = (n.type === 'checkbox' || n.type === 'radio' || n.type === 'file') ? n.closest('label') : null;
    const t = label || n;
    if (!t.getClientRects().length) continue;
    const st = getComputedStyle(t);
    if (st.visibility === 'hidden' || st.display === 'contents') continue;
    const r = t.getBoundingClientRect();
    if (r.width <= 1 || r.height <= 1) continue;
    if (t.matches('.skip-link') && r.bottom <= 0) continue;   // off screen until it has the focus
    if (t.tagName === 'A' && st.display === 'inline' && t.parentElement?.closest('p')) continue;
    if (r.width + 0.01 < min || r.height + 0.01 < min) out.push(`${name(t)} ${Math.round(r.width)}x${Math.round(r.height)}`);
  }
  return [...new Set(out)];
};

/** Touch targets under TARGET px, by engine: "screen (size): selector WxH". */
export const SMALL_TARGETS = {};

/**
 * Run in the page: every Blob it makes a URL of is kept in window.__blobs, and a download
 * link's click saves nothing (its default action prevented; the page's own code runs as ever):
 * a driver may see no downloads (WebDriver), and a saved file would be litter (and, in
 * MiniBrowser, a download bar that shrinks the page).
 */
export const keepDownloads = () => {
  if (window.__blobs) return true;
  window.__blobs = [];
  const make = URL.createObjectURL.bind(URL);
  URL.createObjectURL = (b) => { window.__blobs.push(b); return make(b); };
  document.addEventListener('click', (e) => {
    if (e.target instanceof HTMLAnchorElement && e.target.hasAttribute('download')) e.preventDefault();
  }, true);
  return true;
};

/** Click `css` in the page (the element's own click(): a tour for pictures, not a driver test). */
export const click = (view, css) => view.evaluate(clickIn, css);
export const fill = (view, css, value) => view.evaluate(fillIn, [css, value]);
export const choose = (view, css, name, type, bytes) => view.evaluate(chooseIn, [css, name, type, Buffer.from(bytes).toString('base64')]);
export const showing = (view, css, timeout = OP_MS) => until(`${css} on screen`, () => view.evaluate(shows, css), timeout);
export const waitListed = (view, timeout = OP_MS) => until('the memory list', () => view.evaluate(listed), timeout);

/** The screens a tour must have left, each at both sizes. */
const SCREENS = ['welcome-create', 'welcome-login', 'welcome-restore', 'memories', 'memories-add', 'memories-filters', 'card-details', 'editor',
  'forget-dialog', 'settings', 'settings-passphrase', 'settings-export', 'settings-import-report', 'settings-records-preview', 'shares', 'agents',
  'sync-offline', 'sync-online', 'unlock', 'recovery'];

/** Every screen of the tour taken at every size for `engine` since `since` (ms); and no touch
 * target under TARGET px on any of them at phone size. */
export function assertShots(engine, since, { except = [] } = {}) {
  const missing = [];
  for (const s of SCREENS.filter((x) => !except.includes(x))) {
    for (const [size] of SIZES) {
      const f = path.join(SCREENSHOTS, engine, `${s}-${size}.png`);
      if (!fs.existsSync(f) || fs.statSync(f).mtimeMs < since) missing.push(`${s}-${size}`);
    }
  }
  assert.deepEqual(missing, [], `${engine}: screenshots not taken`);
  assert.deepEqual(SMALL_TARGETS[engine] ?? [], [], `${engine}: touch targets under ${TARGET}x${TARGET} px at phone size`);
}

// ------------------------------------------------------------------ pictures

/**
 * The screen as it is, at each phone width then desktop: scrolled to the top (or to `scrollTo`, a
 * selector), painted (two animation frames), saved; the phone ones of the whole page unless
 * `fullPage` is false (a modal dialog).  At phone size its touch targets are measured.  The
 * viewport is left at desktop size.
 */
export async function capture(view, screen, { fullPage = true, scrollTo = null } = {}) {
  const dir = path.join(SCREENSHOTS, view.engine);
  fs.mkdirSync(dir, { recursive: true });
  for (const [size, viewport] of SIZES) {
    await view.setViewport(viewport);
    await view.evaluate((sel) => new Promise((done) => {
      const n = sel && document.querySelector(sel);
      window.scrollTo(0, 0);
      // below the sticky top bar, not under it
      const bar = document.querySelector('header')?.getBoundingClientRect().bottom ?? 0;
      if (n) window.scrollTo(0, n.getBoundingClientRect().top - bar - 8);
      requestAnimationFrame(() => requestAnimationFrame(() => done(true)));
    }), scrollTo);
    const phone = size !== 'desktop';
    await view.screenshot(path.join(dir, `${screen}-${size}.png`), { fullPage: fullPage && phone && !scrollTo });
    if (phone) {
      for (const t of await view.evaluate(smallTargets, TARGET)) (SMALL_TARGETS[view.engine] ??= []).push(`${screen} (${size}): ${t}`);
    }
    // axe (WebKit's check, slow there) at the narrowest phone, the common one and desktop: 360 px
    // lays out as 390 does, and its targets are measured above all the same
    if (view.check && size !== 'phone-360') await view.check(screen, size);
  }
}

// ------------------------------------------------------------------ the tour

/** The welcome screen's three tabs (a browser holding no vault); leaves the Create tab shown. */
export async function welcomeTour(view) {
  await showing(view, '[data-testid="tab-create"]');
  for (const tab of ['create', 'login', 'restore']) {
    await click(view, `[data-testid="tab-${tab}"]`);
    await showing(view, `[data-testid="${tab}-form"]`);
    await capture(view, `welcome-${tab}`);
  }
  await click(view, '[data-testid="tab-create"]');
}

/**
 * Every screen of an unlocked vault holding at least one memory, in order: the list (and its
 * filters), a card's details, the editor, the forget dialog, Settings, an export, the import
 * report of that export, the records preview, Shares, Agents; then, if `offline` is given
 * ({stop, start}: the server), the sync status offline and back; then the unlock screen, and
 * unlocked again with `pass`.  Changes nothing in the vault but what an import of its own
 * export adds (nothing).
 */
export async function vaultTour(view, { pass, offline = null }) {
  await waitListed(view);
  // a vault created in this page still shows its recovery sheet until Done (createWithMemories)
  if (await view.evaluate(() => document.querySelector('[data-testid="recovery-close"]') !== null)) {
    await click(view, '[data-testid="recovery-close"]');
  }
  await capture(view, 'memories');
  // phone first: at every phone size the first memory shows whole without scrolling, the add
  // form closed to its text field; a tap on it opens the form, Escape closes it (the text kept)
  const closed = () => view.evaluate(() => document.querySelector('[data-testid="add-tags"]').getClientRects().length === 0);
  for (const [size, viewport] of SIZES.filter(([n]) => n !== 'desktop')) {
    await view.setViewport(viewport);
    const first = await view.evaluate(() => {
      window.scrollTo(0, 0);
      const card = document.querySelector('[data-testid="memory-card"]')?.getBoundingClientRect();
      const nav = document.querySelector('.topnav')?.getBoundingClientRect();
      return { bottom: card?.bottom ?? Infinity, limit: Math.min(innerHeight, nav && nav.top > 0 ? nav.top : innerHeight) };
    });
    assert.ok(first.bottom <= first.limit, `${view.engine} ${size}: the first memory ends at ${first.bottom} px, below the screen's ${first.limit} px`);
    assert.equal(await closed(), true, `${view.engine} ${size}: the add form is open before a tap`);
  }
  await view.setViewport(PHONE);
  await view.evaluate(() => { const t = document.querySelector('[data-testid="add-content"]'); t.focus(); t.click(); });
  await showing(view, '[data-testid="add-tags"]');
  assert.equal(await view.evaluate(() => document.activeElement?.id), 'add-content', `${view.engine}: the open form has the focus in its text`);
  await capture(view, 'memories-add');
  await view.setViewport(PHONE);
  // Escape in the form's text field (the screenshot's resizing may have moved the focus away in
  // WebKit: put it back, as a person's Escape comes from where they type), then the form closes
  // WebKit can run the field's focus handler (which opens the form) after an Escape sent in the
  // same turn: focus first, then send Escape from the field until the form has closed
  await view.evaluate(() => /** @type {HTMLElement} */ (document.querySelector('[data-testid="add-content"]')).focus());
  await until(`${view.engine}: Escape closes the add form`, async () => {
    if (await closed()) return true;
    await view.evaluate(() => {
      const t = /** @type {HTMLElement} */ (document.querySelector('[data-testid="add-content"]'));
      if (document.activeElement !== t) t.focus();
      t.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true, cancelable: true }));
    });
    return closed();
  }, 5_000);
  assert.equal(await view.evaluate(() => document.activeElement?.id), 'add-content');
  await click(view, '[data-testid="filters-toggle"]');
  await capture(view, 'memories-filters');
  await click(view, '[data-testid="filters-toggle"]');

  await click(view, '[data-testid="memory-card"] details summary');
  await until('the receipts read', () => view.evaluate(() => document.querySelector('[data-testid="memory-card"] [data-role="receipts-state"]')
    ?.textContent.trim()), OP_MS);
  await capture(view, 'card-details', { scrollTo: '[data-testid="memory-card"]' });
  await click(view, '[data-testid="memory-card"] details summary');

  await click(view, '[data-testid="memory-card"] [data-testid="edit-button"]');
  await showing(view, '[data-testid="edit-form"]');
  await capture(view, 'editor', { scrollTo: '[data-testid="edit-form"]' });
  await click(view, '[data-testid="edit-cancel"]');

  await click(view, '[data-testid="memory-card"] [data-testid="forget-button"]');
  await showing(view, '[data-testid="forget-dialog"][open]');
  await capture(view, 'forget-dialog', { fullPage: false });
  await view.evaluate(() => document.querySelector('[data-testid="forget-dialog"]').close('cancel'));

  await click(view, '[data-testid="settings-button"]');
  await showing(view, '[data-testid="settings-view"]');
  await until('the storage line', () => view.evaluate(() => document.querySelector('[data-testid="storage-state"]')?.dataset.persisted !== undefined), OP_MS);
  await capture(view, 'settings');
  // Change passphrase (views/passphrase.js): its dialog, then Escape from its first field closes it only
  await click(view, '[data-testid="passphrase-change-open"]');
  await showing(view, '[data-testid="change-dialog"]');
  await capture(view, 'settings-passphrase', { fullPage: false });
  await view.evaluate(() => {
    const t = /** @type {HTMLElement} */ (document.querySelector('#change-current'));
    t.focus();
    t.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true, cancelable: true }));
  });
  await until(`${view.engine}: Escape closes the passphrase dialog`, () => view.evaluate(() => !document.querySelector('[data-testid="change-dialog"]')), 5_000);
  assert.equal(await view.evaluate(() => !!document.querySelector('[data-testid="settings-view"]')), true, `${view.engine}: Settings still show`);
  // an export (the Blob the page makes, kept as it is handed to the download) and its import
  await view.evaluate(keepDownloads);
  await click(view, '[data-testid="export-button"]');
  await showing(view, '[data-role="export-progress"].done');
  await capture(view, 'settings-export', { scrollTo: '[data-testid="export-button"]' });
  const b64 = await view.evaluate(async () => {
    const bytes = new Uint8Array(await window.__blobs.at(-1).arrayBuffer());
    let s = '';
    for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    return btoa(s);
  });
  await choose(view, '[data-testid="import-input"]', 'own-export.amem', 'application/octet-stream', Buffer.from(b64, 'base64'));
  await showing(view, '[data-testid="import-report"]');
  await capture(view, 'settings-import-report', { scrollTo: '[data-testid="import-report"]' });
  await choose(view, '[data-testid="records-input"]', 'contacts.csv', 'text/csv', Buffer.from(TOUR_CSV));
  await until('the records preview', () => view.evaluate(() => document.querySelector('[data-testid="records-summary"]')?.textContent), OP_MS);
  await capture(view, 'settings-records-preview', { scrollTo: '[data-testid="records-panel"]' });
  await click(view, '[data-testid="records-cancel"]');

  await click(view, '[data-testid="shares-button"]');
  await showing(view, '[data-testid="shares-view"]');
  await until('the holder id', () => view.evaluate(() => document.querySelector('[data-testid="holder-id"]')?.textContent), OP_MS);
  await capture(view, 'shares');
  await click(view, '[data-testid="agents-button"]');
  await showing(view, '[data-testid="agents-view"]');
  await until('the agents read', () => view.evaluate(() => !/Reading|Loading/.test(document.querySelector('[data-role="agents-state"]')?.textContent ?? '')), OP_MS);
  await capture(view, 'agents');
  await click(view, '[data-testid="agents-view"] [data-role="back"]');
  await waitListed(view);

  if (offline) {
    await offline.stop();
    // the status line learns of it at the next sync; the Sync button asks for one now
    await click(view, '[data-testid="sync-button"]');
    await until('the sync status offline', () => view.evaluate(() => document.querySelector('[data-testid="sync-status"]').dataset.state === 'offline'), OP_MS);
    await capture(view, 'sync-offline');
    await offline.start();
    await click(view, '[data-testid="sync-button"]');
    await until('the sync status online', () => view.evaluate(() => {
      const s = document.querySelector('[data-testid="sync-status"]');
      return s.dataset.state === 'online' && s.dataset.pending === '0';
    }), OP_MS);
    await capture(view, 'sync-online');
  }

  await click(view, '[data-testid="lock-button"]');
  await showing(view, '[data-testid="unlock-form"]');
  await capture(view, 'unlock');
  await fill(view, '[data-testid="unlock-form"] [data-testid="passphrase"]', pass);
  await click(view, '[data-testid="unlock-submit"]');
  await waitListed(view);
}

/** From the welcome screen: a vault created (synced through this server), two memories added. */
export async function createWithMemories(view, name, pass) {
  await click(view, '[data-testid="tab-create"]');
  const form = '[data-testid="create-form"]';
  await fill(view, `${form} [data-testid="vault-name"]`, name);
  await fill(view, `${form} [data-testid="passphrase"]`, pass);
  await fill(view, `${form} [data-testid="passphrase2"]`, pass);
  await click(view, `${form} [data-testid="create-submit"]`);
  await waitListed(view, 180_000);
  // the recovery sheet shows above the list after creating; a person reads it and presses Done
  await showing(view, '[data-testid="recovery-sheet"]');
  // a vault synced from its creation is told there what the public log shows of it (issue 23)
  const note = await view.evaluate(() => document.querySelector('[data-testid="recovery-log-note"]')?.textContent ?? '');
  assert.match(note, /public log.*never what the memories say/);
  await capture(view, 'recovery');
  await click(view, '[data-testid="recovery-close"]');
  for (const [content, tags] of [['The spare key is under the blue pot', 'home, keys'], ['Dentist appointments are on Tuesdays', 'health']]) {
    await fill(view, '[data-testid="add-content"]', content);
    await fill(view, '[data-testid="add-tags"]', tags);
    await click(view, '[data-testid="add-submit"]');
    await until(`"${content}" listed`, () => view.evaluate((c) => [...document.querySelectorAll('[data-testid="memory-card"] [data-role="content"]')]
      .some((n) => n.textContent === c), content), OP_MS);
  }
}
