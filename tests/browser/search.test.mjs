// The list screen's search runs ownmem's one ranking in the vault worker (ownmem.web.search,
// docs/web.md "Search"): stemmed words, hyphenated words joined, best first; the filters still
// apply; the stemmer's wheel is fetched by the first search only, and the service worker serves
// it offline.  Headless Chromium at phone size (390x844), the real server serving web/dist.
//
//   python3 build.py build && node --test tests/browser/search.test.mjs
//
// OWNMEM_JSPI=0 runs it on the vault worker's path without WebAssembly JSPI (/?jspi=0).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { explained, freePort, serverDirs, spawnServer, stopProcess } from './helpers.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const DIST = path.join(ROOT, 'web', 'dist');
const PY = path.join(ROOT, '.venv', 'bin', 'python');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const APP_PATH = process.env.OWNMEM_JSPI === '0' ? '/?jspi=0' : '/';
const SHOTS = path.join(ROOT, 'test-output', 'screenshots');
const require = createRequire(path.join(ROOT, 'package.json'));

const PASS = 'search test: seven lanterns over a quiet harbour';
const PHONE = { width: 390, height: 844 };
const BOOT_MS = 120_000;
const STEMMER = '/wheels/snowballstemmer-';

let browser, tmp, server, origin, log = '';

before(async () => {
  if (!fs.existsSync(path.join(DIST, 'precache.json'))) {
    throw new Error(`the web app is not built (${DIST} is missing): run \`python3 build.py build\` first`);
  }
  let dataDir, webDir;
  ({ tmp, dataDir, webDir } = serverDirs(DIST, 'ownmem-search-'));
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  server = await spawnServer({ py: PY, cwd: ROOT, port, dataDir, webDir, onOutput: (d) => { log = (log + d).slice(-20000); } });
  const { chromium } = require('playwright-core');
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless=new', '--no-sandbox', '--disable-gpu',
    '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] });
}, { timeout: 60_000 });

after(async () => {
  await browser?.close();
  await stopProcess(server);
  if (log.includes('Traceback')) console.log(`# server log (tail):\n${log.slice(-4000)}`);
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

/** The cards' texts, top to bottom. */
function shown(page) {
  return page.$$eval('[data-testid="memory-card"] [data-role="content"]', (els) => els.map((n) => n.textContent));
}

/** Type a query into the search field and wait until the list shows `count` cards, `first` (if given) on top. */
async function search(page, query, first, count) {
  await page.fill('[data-testid="search"]', query);
  await explained(page, page.waitForFunction(([f, n]) => {
    const cards = [...document.querySelectorAll('[data-testid="memory-card"] [data-role="content"]')];
    return cards.length === n && (f === null || cards[0].textContent === f);
  }, [first, count], { timeout: 60_000 }));
}

async function addMemory(page, content, tags = '') {
  await page.fill('[data-testid="add-content"]', content);
  await page.fill('[data-testid="add-tags"]', tags);
  await page.click('[data-testid="add-submit"]');
  await explained(page, page.waitForFunction((c) => [...document.querySelectorAll('[data-testid="memory-card"] [data-role="content"]')]
    .some((n) => n.textContent === c), content, { timeout: 30_000 }));
}

async function waitVault(page) {
  await page.waitForSelector('[data-testid="add-form"]', { timeout: 90_000 });
  await page.waitForFunction(() => !document.querySelector('[data-role="summary"]')?.textContent?.startsWith('Opening'),
    null, { timeout: 90_000 });
}

const MEMORIES = [
  ['Daily stand-up at 9:30', 'work'],
  ['She is researching adoption', 'family'],
  ['What did the team decide on pricing?', 'work'],
  ['She prefers tea in the morning', ''],
  ['Standing desk ordered for the office', 'work'],
];

test('search: stemmed and ranked in the worker, the filters still apply, the stemmer loaded on first use and offline',
  { timeout: 300_000 }, async () => {
    const ctx = await browser.newContext({ viewport: PHONE });
    // what the page and its vault worker fetched (not the service worker's precaching)
    const fetched = [];
    ctx.on('request', (r) => { if (!r.serviceWorker()) fetched.push(new URL(r.url()).pathname); });
    try {
      const page = await ctx.newPage();
      await page.goto(origin + APP_PATH);
      await page.waitForSelector('[data-testid="tab-create"]', { timeout: BOOT_MS });
      await page.click('[data-testid="tab-create"]');
      const form = page.locator('[data-testid="create-form"]');
      await form.locator('[data-testid="vault-name"]').fill(`search-${Date.now().toString(36)}`);
      await form.locator('[data-testid="passphrase"]').fill(PASS);
      await form.locator('[data-testid="passphrase2"]').fill(PASS);
      await form.locator('[data-testid="create-link"]').setChecked(false);
      await form.locator('[data-testid="create-submit"]').click();
      await waitVault(page);
      for (const [content, tags] of MEMORIES) await addMemory(page, content, tags);
      assert.ok(!fetched.some((p) => p.startsWith(STEMMER)), 'the stemmer was fetched before any search');

      // "standup" finds "stand-up" (the hyphenated word joined), and only it: not "Standing"
      await search(page, 'standup', 'Daily stand-up at 9:30', 1);
      assert.match(await page.textContent('[data-role="summary"]'), /^1 of 5 memories match/);
      assert.ok(fetched.some((p) => p.startsWith(STEMMER)), 'the first search fetched the stemmer');
      // stop words dropped, "research" stems as "researching" does: the answer first
      await search(page, 'what did she research', 'She is researching adoption', 1);
      // a stop word alone: the memories that contain it, as SAIHM's baseline does
      await search(page, 'She', null, 2);
      assert.deepEqual((await shown(page)).sort(), ['She is researching adoption', 'She prefers tea in the morning']);
      fs.mkdirSync(SHOTS, { recursive: true });
      await page.screenshot({ path: path.join(SHOTS, 'search-ranked-phone.png'), fullPage: true });

      // the filters apply to the ranked list
      await search(page, 'standup', 'Daily stand-up at 9:30', 1);
      await page.click('[data-testid="filters-toggle"]');
      await page.selectOption('[data-testid="filter-tag"]', 'family');
      await explained(page, page.waitForFunction(() => !document.querySelector('[data-role="empty"]').hidden, null,
        { timeout: 30_000 }));
      assert.deepEqual(await shown(page), []);
      await search(page, 'researched', 'She is researching adoption', 1);
      await page.selectOption('[data-testid="filter-tag"]', '');

      // typed on before the answer came: the list ends on the last query's answer
      await page.fill('[data-testid="search"]', 'tea');
      await page.fill('[data-testid="search"]', 'pricing');
      await search(page, 'pricing decided', 'What did the team decide on pricing?', 1);
      await page.waitForTimeout(500);
      assert.deepEqual(await shown(page), ['What did the team decide on pricing?']);

      // no query: every memory, newest first, as before
      await page.fill('[data-testid="search"]', '');
      await explained(page, page.waitForFunction((n) => document.querySelectorAll('[data-testid="memory-card"]').length === n,
        MEMORIES.length, { timeout: 30_000 }));
      // (in the listing's order: added within a second or two, they are newest first by the second, then by id)
      assert.deepEqual(await shown(page),
        await page.evaluate(async () => (await import('/js/state.js')).entries().map((e) => e.content)));
      assert.deepEqual([...await shown(page)].sort(), MEMORIES.map(([c]) => c).sort());

      // offline: the service worker serves the app and the stemmer to a new vault worker
      await page.evaluate(() => navigator.serviceWorker.ready.then(() => true));
      await page.waitForFunction(() => navigator.serviceWorker.controller !== null, null, { timeout: 30_000 });
      await ctx.setOffline(true);
      await page.reload();
      await page.waitForSelector('[data-testid="unlock-form"]', { timeout: BOOT_MS });
      await page.fill('[data-testid="unlock-form"] [data-testid="passphrase"]', PASS);
      await page.click('[data-testid="unlock-submit"]');
      await waitVault(page);
      await search(page, 'standups', 'Daily stand-up at 9:30', 1);
      await page.screenshot({ path: path.join(SHOTS, 'search-offline-phone.png'), fullPage: true });
    } finally {
      await ctx.close().catch(() => {});
    }
  });
