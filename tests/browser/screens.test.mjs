// The screen tour (tests/browser/screens.mjs) in Chromium (playwright-core) and Firefox ESR
// (puppeteer-core over WebDriver BiDi): every screen at 320, 360 and 390 px wide and desktop,
// kept as test-output/screenshots/<engine>/<screen>-<size>.png, with no touch target under 44 px
// at phone size; and Settings' Install button, shown where the browser offers to install the
// app (Chromium, in a profile of its own) and hidden where not (Firefox).  WebKit's tour runs in
// tests/browser/webkit.test.mjs (its MiniBrowser is slow to start, so it reuses that file's
// device).  A real `python -m server` serves a private copy of web/dist; each engine a fresh
// vault; the tour stops and restarts the server for the offline status.
//
//   python3 build.py build && node --test tests/browser/screens.test.mjs
//
// Without Firefox its tour skips (under CI=true it fails).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, spawnServer, serverDirs, stopProcess } from './helpers.mjs';
import { DESKTOP, assertShots, click, createWithMemories, showing, vaultTour, welcomeTour } from './screens.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const DIST = path.join(ROOT, 'web', 'dist');
const PY = process.env.OWNMEM_PYTHON || path.join(ROOT, '.venv', 'bin', 'python');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const FIREFOX = process.env.FIREFOX ?? '/usr/bin/firefox-esr';
const require = createRequire(path.join(ROOT, 'package.json'));
const PASS = 'correct horse battery staple 42';
const BOOT_MS = 120_000;
const noFirefox = !fs.existsSync(FIREFOX) && process.env.CI !== 'true' ? `Firefox ESR is not installed here (${FIREFOX})` : false;

let tmp, dataDir, webDir, port, origin, serverProc = null, serverLog = '';
const pageErrors = [];

async function startServer() {
  serverProc = await spawnServer({ py: PY, cwd: ROOT, port, dataDir, webDir,
    onOutput: (d) => { serverLog = (serverLog + d).slice(-20000); } });
}

async function stopServer() {
  const proc = serverProc;
  serverProc = null;
  await stopProcess(proc);
}

const offline = { stop: stopServer, start: startServer };

before(async () => {
  if (!fs.existsSync(path.join(DIST, 'precache.json'))) {
    throw new Error(`the web app is not built (${DIST} is missing): run \`python3 build.py build\` first`);
  }
  ({ tmp, dataDir, webDir } = serverDirs(DIST, 'ownmem-screens-'));
  port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  await startServer();
}, { timeout: 60_000 });

after(async () => {
  await stopServer();
  if (serverLog.includes('Traceback')) console.log(`# server log (tail):\n${serverLog.slice(-4000)}`);
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

/** Settings' Install button: shown (`offered`) or hidden, once the storage panel has its answer. */
async function installOffer(view, offered) {
  await click(view, '[data-testid="settings-button"]');
  await showing(view, '[data-testid="storage-state"][data-persisted]');
  if (offered) await showing(view, '[data-testid="install-button"]');
  const shown = await view.evaluate(() => {
    const b = document.querySelector('[data-testid="install-button"]');
    return b.getClientRects().length > 0 && !b.closest('[hidden]');
  });
  assert.equal(shown, offered, `${view.engine}: the Install button is ${shown ? 'shown' : 'hidden'}`);
  if (offered) {
    // its click shows the browser's prompt: the kept event's prompt() is called, once
    const prompted = await view.evaluate(async () => {
      const seen = [];
      const real = window.BeforeInstallPromptEvent?.prototype.prompt;
      if (!real) return 'no BeforeInstallPromptEvent';
      window.BeforeInstallPromptEvent.prototype.prompt = function prompt() { seen.push('prompt'); return Promise.resolve(); };
      Object.defineProperty(window.BeforeInstallPromptEvent.prototype, 'userChoice', { get: () => Promise.resolve({ outcome: 'dismissed' }), configurable: true });
      document.querySelector('[data-testid="install-button"]').click();
      await new Promise((r) => setTimeout(r, 200));
      window.BeforeInstallPromptEvent.prototype.prompt = real;
      return seen.join(',');
    });
    assert.equal(prompted, 'prompt');
  }
  await click(view, '[data-testid="settings-view"] [data-role="back"]');
}

test('Chromium: every screen at phone size and desktop', { timeout: 420_000 }, async () => {
  const since = Date.now();
  const { chromium } = require('playwright-core');
  // a profile of its own, not an incognito context: only there does Chromium offer to install
  // the app (beforeinstallprompt), which Settings' Install button follows
  const browser = await chromium.launchPersistentContext(fs.mkdtempSync(path.join(tmp, 'chromium-')), { executablePath: CHROMIUM,
    viewport: DESKTOP, args: ['--headless=new', '--no-sandbox', '--disable-gpu',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] });
  try {
    const page = browser.pages()[0] ?? await browser.newPage();
    page.on('pageerror', (e) => pageErrors.push(`chromium: ${e.stack || e}`));
    const view = {
      engine: 'chromium',
      evaluate: (fn, arg) => page.evaluate(fn, arg),
      setViewport: (v) => page.setViewportSize(v),
      screenshot: (file, { fullPage }) => page.screenshot({ path: file, fullPage }),
    };
    await page.goto(`${origin}/`);
    await page.waitForSelector('[data-testid="tab-create"]', { timeout: BOOT_MS });
    await welcomeTour(view);
    await createWithMemories(view, `shots-c-${Date.now().toString(36)}`, PASS);
    await vaultTour(view, { pass: PASS, offline });
    // Chromium offered to install the app: Settings show the Install button, which shows its prompt
    await installOffer(view, true);
  } finally {
    await browser.close();
  }
  assertShots('chromium', since);
});

test('Firefox: every screen at phone size and desktop', { timeout: 420_000, skip: noFirefox }, async () => {
  const since = Date.now();
  const puppeteer = require('puppeteer-core');
  const browser = await puppeteer.launch({ browser: 'firefox', protocol: 'webDriverBiDi', executablePath: FIREFOX, headless: true,
    userDataDir: fs.mkdtempSync(path.join(tmp, 'firefox-')) });
  try {
    const page = (await browser.pages())[0] ?? await browser.newPage();
    page.on('pageerror', (e) => pageErrors.push(`firefox: ${e.stack || e}`));
    await page.setViewport(DESKTOP);
    const view = {
      engine: 'firefox',
      evaluate: (fn, arg) => page.evaluate(fn, arg),
      setViewport: (v) => page.setViewport(v),
      screenshot: (file, { fullPage }) => page.screenshot({ path: file, fullPage }),
    };
    await page.goto(`${origin}/`);
    await page.waitForSelector('[data-testid="tab-create"]', { timeout: BOOT_MS });
    await welcomeTour(view);
    await createWithMemories(view, `shots-f-${Date.now().toString(36)}`, PASS);
    await vaultTour(view, { pass: PASS, offline });
    // Firefox never offers to install a web app: no Install button
    await installOffer(view, false);
  } finally {
    await browser.close();
  }
  assertShots('firefox', since);
});

test('no page error during the tours', () => {
  assert.deepEqual(pageErrors, []);
});
