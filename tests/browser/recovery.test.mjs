// The recovery kit in the web app (ownmem.vault.recovery; views/recovery.js, views/welcome.js),
// in Chromium (playwright-core), Firefox ESR (puppeteer-core over WebDriver BiDi) and WebKit
// (MiniBrowser behind WebKitWebDriver, no JSPI): a vault is created (linked to the server) and
// the recovery sheet shows the kit's 12 words and their QR code once; the words are read off the
// page; the vault is locked; "Forgot your passphrase?" takes mistyped words (refused, said
// plainly), then the real words and a new passphrase; the vault opens with its memory, a new kit
// is shown (other words), and the new passphrase unlocks it after the next lock.  Then the main
// case of a kit, a lost phone AND a forgotten passphrase: a FRESH browser context (no vault), on
// "Use my vault from a server", "Forgot your passphrase?": a mistyped word and a name nobody
// holds are refused plainly with nothing stored (the page reloaded holds no vault); the name and
// the words and a new passphrase fetch the vault with its memory and show a new kit; another
// fresh context cannot log in with the passphrase from before.  Phone-size pictures of the kit
// and the forms: test-output/screenshots/<engine>/recovery-kit-*.png, recovery-form-*.png,
// recovery-new-browser-form-*.png and recovery-new-browser-kit-*.png.
//
//   python3 build.py build && node --test tests/browser/recovery.test.mjs
//
// Without an engine its test skips (under CI=true it fails).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, spawnServer, serverDirs, stopProcess, until } from './helpers.mjs';
import { ENGINES, TITLE, skipOf, withView } from './engines.mjs';
import { DESKTOP, SCREENSHOTS, click, fill, showing, waitListed } from './screens.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const DIST = path.join(ROOT, 'web', 'dist');
const PY = process.env.OWNMEM_PYTHON || path.join(ROOT, '.venv', 'bin', 'python');
const PASS = 'correct horse battery staple 42';
const NEW_PASS = 'a fresh passphrase after the kit, 77 lanterns';
const NEWER_PASS = 'the phone was lost too: 19 quiet harbours';
const MEMORY = 'The spare key is under the blue pot';
const BOOT_MS = 180_000;
const OP_MS = 120_000;
const PHONES = [['phone', { width: 390, height: 844 }], ['phone-320', { width: 320, height: 568 }]];
// the kit's word list (py/ownmem/vault/bip39_english.py): the last word's low bits are the checksum
const WORDS = fs.readFileSync(path.join(ROOT, 'py', 'ownmem', 'vault', 'bip39_english.py'), 'utf8')
  .split('"""')[3].split(/\s+/).filter(Boolean);

let tmp, dataDir, webDir, origin, serverProc = null, serverLog = '';
const pageErrors = [];

before(async () => {
  if (!fs.existsSync(path.join(DIST, 'precache.json'))) {
    throw new Error(`the web app is not built (${DIST} is missing): run \`python3 build.py build\` first`);
  }
  ({ tmp, dataDir, webDir } = serverDirs(DIST, 'ownmem-recovery-'));
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  serverProc = await spawnServer({ py: PY, cwd: ROOT, port, dataDir, webDir,
    onOutput: (d) => { serverLog = (serverLog + d).slice(-20000); } });
}, { timeout: 60_000 });

after(async () => {
  await stopProcess(serverProc);
  if (serverLog.includes('Traceback')) console.log(`# server log (tail):\n${serverLog.slice(-4000)}`);
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

/** Pictures of the screen as it is at both phone sizes, scrolled to `scrollTo`. */
async function phoneShots(view, name, scrollTo) {
  const dir = path.join(SCREENSHOTS, view.engine);
  fs.mkdirSync(dir, { recursive: true });
  for (const [size, viewport] of PHONES) {
    await view.setViewport(viewport);
    await view.evaluate((sel) => new Promise((done) => {
      const n = document.querySelector(sel);
      window.scrollTo(0, 0);
      const bar = document.querySelector('header')?.getBoundingClientRect().bottom ?? 0;
      if (n) window.scrollTo(0, n.getBoundingClientRect().top + window.scrollY - bar - 8);
      requestAnimationFrame(() => requestAnimationFrame(() => done(true)));
    }), scrollTo);
    await view.screenshot(path.join(dir, `${name}-${size}.png`));
  }
  await view.setViewport(DESKTOP);
}

const kitWords = (view) => view.evaluate(() => [...document.querySelectorAll('[data-testid="recovery-word"]')].map((n) => n.textContent));
const cards = (view) => view.evaluate(() => [...document.querySelectorAll('[data-testid="memory-card"] [data-role="content"]')]
  .map((n) => n.textContent));
const errorLine = (view, form) => view.evaluate((f) => document.querySelector(`${f} [data-role="error"]`)?.textContent ?? '', form);

/** The whole scenario in one engine, through `view` (acts in the page by `evaluate` only). */
async function scenario(view) {
  const name = `kit-${view.engine.slice(0, 2)}-${Date.now().toString(36)}`;
  const form = '[data-testid="create-form"]';
  await click(view, '[data-testid="tab-create"]');
  await fill(view, `${form} [data-testid="vault-name"]`, name);
  await fill(view, `${form} [data-testid="passphrase"]`, PASS);
  await fill(view, `${form} [data-testid="passphrase2"]`, PASS);
  await click(view, `${form} [data-testid="create-submit"]`);
  await waitListed(view, BOOT_MS);
  // the sheet shows the kit once: 12 words and their QR code
  await showing(view, '[data-testid="recovery-words"]');
  const words = await kitWords(view);
  assert.equal(words.length, 12, `${view.engine}: ${JSON.stringify(words)}`);
  assert.ok(words.every((w) => /^[a-z]{3,8}$/.test(w)), JSON.stringify(words));
  await until('the QR code drawn', () => view.evaluate(() => {
    const c = document.querySelector('[data-testid="recovery-qr"]');
    return !!c && c.width > 100 && c.dataset.text?.split(' ').length === 12;
  }), OP_MS);
  await phoneShots(view, 'recovery-kit', '[data-role="recovery-kit"]');
  await click(view, '[data-testid="recovery-close"]');
  await fill(view, '[data-testid="add-content"]', MEMORY);
  await click(view, '[data-testid="add-submit"]');
  await until('the memory listed', async () => (await cards(view)).includes(MEMORY), OP_MS);

  // locked, and the passphrase forgotten
  await click(view, '[data-testid="lock-button"]');
  await showing(view, '[data-testid="forgot"]');
  await click(view, '[data-testid="forgot"]');
  await showing(view, '[data-testid="recovery-form"]');
  const rf = '[data-testid="recovery-form"]';
  // one word swapped for another (the checksum fails): said plainly, nothing unlocked
  const swapped = [...words.slice(0, 11), words[11] === 'zoo' ? 'abandon' : 'zoo'];
  await fill(view, `${rf} [data-testid="recovery-words-input"]`, swapped.join(' '));
  await fill(view, `${rf} [data-testid="recovery-passphrase"]`, NEW_PASS);
  await fill(view, `${rf} [data-testid="recovery-passphrase2"]`, NEW_PASS);
  await click(view, `${rf} [data-testid="recovery-submit"]`);
  const said = await until('the words refused', async () => {
    const t = await errorLine(view, rf);
    return t && !t.startsWith('Opening') ? t : null;
  }, OP_MS);
  assert.match(said, /(do not check out|not one of the recovery kit|do not open)/, `${view.engine}: ${said}`);
  assert.equal(await view.evaluate(() => !!document.querySelector('[data-testid="add-form"]')), false);
  await phoneShots(view, 'recovery-form', rf);

  // the real words, numbered and spaced as a person copies them from paper
  const typed = words.map((w, i) => `${i + 1}. ${w.toUpperCase()}`).join('\n');
  await fill(view, `${rf} [data-testid="recovery-words-input"]`, typed);
  await fill(view, `${rf} [data-testid="recovery-passphrase"]`, NEW_PASS);
  await fill(view, `${rf} [data-testid="recovery-passphrase2"]`, NEW_PASS);
  await click(view, `${rf} [data-testid="recovery-submit"]`);
  await waitListed(view, OP_MS);
  await until('the memory there', async () => (await cards(view)).includes(MEMORY), OP_MS);
  // a new kit, shown once: other words; the sheet says what happened
  await showing(view, '[data-testid="recovery-words"]');
  assert.match(await view.evaluate(() => document.querySelector('[data-testid="recovery-used"]')?.textContent ?? ''),
    /new passphrase.*no longer works/);
  const fresh = await kitWords(view);
  assert.equal(fresh.length, 12);
  assert.notDeepEqual(fresh, words);
  await phoneShots(view, 'recovery-new-kit', '[data-role="recovery-kit"]');
  await click(view, '[data-testid="recovery-close"]');

  // the new passphrase unlocks it; the old one no longer does
  await click(view, '[data-testid="lock-button"]');
  await showing(view, '[data-testid="unlock-form"]');
  await fill(view, '[data-testid="unlock-form"] [data-testid="passphrase"]', PASS);
  await click(view, '[data-testid="unlock-submit"]');
  await until('the old passphrase refused', async () => /wrong passphrase/i.test(await errorLine(view, '[data-testid="unlock-form"]')), OP_MS);
  await fill(view, '[data-testid="unlock-form"] [data-testid="passphrase"]', NEW_PASS);
  await click(view, '[data-testid="unlock-submit"]');
  await waitListed(view, OP_MS);
  await until('the memory listed', async () => (await cards(view)).includes(MEMORY), OP_MS);
  // the memory on the server before this browser may go away (WebKit's is closed before the next starts)
  await click(view, '[data-testid="sync-button"]');
  await new Promise((done) => setTimeout(done, 2000));
  await until('the memory pushed', () => view.evaluate(() => {
    const s = document.querySelector('[data-testid="sync-status"]');
    return s?.dataset.pending === '0' && !document.querySelector('[data-testid="sync-button"]')?.disabled;
  }), OP_MS);
  return { name, words: fresh };
}

/**
 * A browser that holds no vault: the vault `name` is opened with the kit's `words` and a new
 * passphrase.  `fresh()` -> a view of the app in a new browser context (nothing stored), loaded
 * at the welcome screen; `view.goto(url)` reloads it; `view.close()` ends it.
 */
async function onANewBrowser(fresh, name, words) {
  const rf = '[data-testid="recovery-form"]';
  const view = await fresh();
  try {
    assert.equal(await view.evaluate(() => !!document.querySelector('[data-testid="unlock-form"]')), false,
      `${view.engine}: the fresh context holds a vault already`);
    await click(view, '[data-testid="tab-login"]');
    await showing(view, '[data-testid="login-form"]');
    await fill(view, '[data-testid="login-form"] [data-testid="vault-name"]', name);
    await click(view, '[data-testid="login-form"] [data-testid="forgot"]');
    await showing(view, rf);
    // the login form's server and name carried over
    assert.equal(await view.evaluate((f) => document.querySelector(`${f} [data-testid="recovery-server"]`).value, rf), origin);
    assert.equal(await view.evaluate((f) => document.querySelector(`${f} [data-testid="recovery-vault-name"]`).value, rf), name);
    const submit = async (vaultName, typed) => {
      await fill(view, `${rf} [data-testid="recovery-vault-name"]`, vaultName);
      await fill(view, `${rf} [data-testid="recovery-words-input"]`, typed);
      await fill(view, `${rf} [data-testid="recovery-passphrase"]`, NEWER_PASS);
      await fill(view, `${rf} [data-testid="recovery-passphrase2"]`, NEWER_PASS);
      await click(view, `${rf} [data-testid="recovery-submit"]`);
    };
    const refused = (what) => until(what, async () => {
      const t = await errorLine(view, rf);
      return t && (await view.evaluate((f) => !document.querySelector(`${f} [data-testid="recovery-submit"]`).disabled, rf)) ? t : null;
    }, OP_MS);
    // the last word swapped for its neighbour in the list (a checksum bit flipped): refused before anything is fetched
    assert.equal(WORDS.length, 2048);
    await submit(name, [...words.slice(0, 11), WORDS[WORDS.indexOf(words[11]) ^ 1]].join(' '));
    const said = await refused('the mistyped words refused');
    assert.match(said, /do not check out/, `${view.engine}: ${said}`);
    await phoneShots(view, 'recovery-new-browser-form', rf);
    // a name nobody holds on this server: said as such
    await submit(`nobody-${name}`, words.join(' '));
    const unknown = await refused('the unknown name refused');
    assert.match(unknown, /No vault with this name on this server/, `${view.engine}: ${unknown}`);
    // nothing was stored: the page loaded again holds no vault
    await view.goto(`${origin}/`);
    await showing(view, '[data-testid="tab-create"]', BOOT_MS);
    assert.equal(await view.evaluate(() => !!document.querySelector('[data-testid="unlock-form"]')), false,
      `${view.engine}: the refused attempts left a vault in the browser`);

    await click(view, '[data-testid="tab-login"]');
    await showing(view, '[data-testid="login-form"]');
    await click(view, '[data-testid="login-form"] [data-testid="forgot"]');
    await showing(view, rf);
    await submit(name, words.join(' '));
    await waitListed(view, OP_MS);
    await until('the memory fetched', async () => (await cards(view)).includes(MEMORY), OP_MS);
    await showing(view, '[data-testid="recovery-words"]');
    assert.match(await view.evaluate(() => document.querySelector('[data-testid="recovery-used"]')?.textContent ?? ''),
      /open in this browser with its new passphrase.*old passphrase and the kit you used no longer work/);
    const fresher = await kitWords(view);
    assert.equal(fresher.length, 12);
    assert.notDeepEqual(fresher, words);
    await phoneShots(view, 'recovery-new-browser-kit', '[data-testid="recovery-sheet"]');
  } finally {
    await view.close();
  }

  // the passphrase from before opens nothing from another fresh browser
  const other = await fresh();
  try {
    await click(other, '[data-testid="tab-login"]');
    const lf = '[data-testid="login-form"]';
    await showing(other, lf);
    await fill(other, `${lf} [data-testid="vault-name"]`, name);
    await fill(other, `${lf} [data-testid="passphrase"]`, NEW_PASS);
    await click(other, `${lf} [data-testid="login-submit"]`);
    await until('the old passphrase refused', async () => /wrong passphrase/i.test(await errorLine(other, lf)), OP_MS);
    assert.equal(await other.evaluate(() => !!document.querySelector('[data-testid="add-form"]')), false);
  } finally {
    await other.close();
  }
}

/** The app loaded in `view`, its first screen showing. */
async function loaded(view) {
  await view.goto(`${origin}/`);
  await showing(view, '[data-testid="tab-create"]', BOOT_MS);
  return view;
}

for (const engine of ENGINES) {
  test(`${TITLE[engine]}: the recovery kit shown, used, replaced, then used on a new browser`,
    { skip: skipOf(engine), timeout: engine === 'webkit' ? 900_000 : 600_000 },
    () => withView(engine, { tmp, scriptMs: BOOT_MS, proxy: true, onPageError: (e, err) => pageErrors.push(`${e}: ${err.stack || err}`) },
      async (view) => {
        const { name, words } = await scenario(await loaded(view));
        await onANewBrowser(async () => loaded(await view.fresh()), name, words);
      }));
}

test('no page error', () => {
  assert.deepEqual(pageErrors, []);
});
