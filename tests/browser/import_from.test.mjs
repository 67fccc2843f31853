// Import from ChatGPT, Claude or Gemini in the PWA (issue 22 item 5), in headless Chromium at phone
// size (390x844): a pasted "Manage memories" list is previewed (the counts, the first memories, the
// duplicates skipped and why), imported, and its memories are in the list, tagged; a Gemini Takeout
// file is chosen and imported the same way; a refused file writes nothing and says where.
//
//   python3 build.py build && node --test tests/browser/import_from.test.mjs
//
// OWNMEM_JSPI=0 opens /?jspi=0 (the worker's path without JSPI), as for app.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { explained, freePort, serverDirs, stopProcess, until } from './helpers.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const DIST = path.join(ROOT, 'web', 'dist');
const VENV_PY = path.join(ROOT, '.venv', 'bin', 'python');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const APP_PATH = process.env.OWNMEM_JSPI === '0' ? '/?jspi=0' : '/';
const SHOTS = path.join(ROOT, 'test-output', 'screenshots');
const BOOT_MS = 120_000;
const PHONE = { width: 390, height: 844 };
const PASS = 'correct horse battery staple 42';
const require = createRequire(path.join(ROOT, 'package.json'));

let browser, dirs, proc, origin, log = '';

before(async () => {
  assert.ok(fs.existsSync(path.join(DIST, 'index.html')), 'web/dist is missing: run python3 build.py build first');
  dirs = serverDirs(DIST, 'ownmem-import-from-');
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  proc = spawn(VENV_PY, ['-m', 'server', '--host', '127.0.0.1', '--port', String(port)], {
    cwd: ROOT, env: { ...process.env, OWNMEM_DATA_DIR: dirs.dataDir, OWNMEM_WEB_DIR: dirs.webDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout.on('data', (d) => { log += d; });
  proc.stderr.on('data', (d) => { log += d; });
  await until(`the server to answer /health (${log.slice(-500)})`, async () => (await fetch(`${origin}/health`)).ok, 30_000);
  const { chromium } = require('playwright-core');
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless=new', '--no-sandbox',
    '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] });
}, { timeout: 120_000 });

after(async () => {
  await browser?.close();
  if (proc) await stopProcess(proc);
  if (dirs) fs.rmSync(dirs.tmp, { recursive: true, force: true });
});

const cardTexts = (page) => page.$$eval('[data-testid="memory-card"] [data-role="content"]', (els) => els.map((e) => e.textContent));
const cardTags = (page, content) => page.$$eval('[data-testid="memory-card"]', (els, c) => {
  const li = els.find((e) => e.querySelector('[data-role="content"]')?.textContent === c);
  return li ? [...li.querySelectorAll('.chip-btn')].map((b) => b.textContent) : null;
}, content);

async function waitCard(page, content) {
  await explained(page, page.waitForFunction((c) => [...document.querySelectorAll('[data-testid="memory-card"] [data-role="content"]')]
    .some((n) => n.textContent === c), content, { timeout: 60_000 }));
}

async function openSettings(page) {
  await page.click('[data-testid="settings-button"]');
  await page.waitForSelector('[data-testid="import-from-panel"]');
  await page.locator('[data-testid="import-from-panel"]').scrollIntoViewIfNeeded();
}

async function backToList(page) {
  await page.click('[data-testid="settings-view"] [data-role="back"]');
  await page.waitForSelector('[data-testid="add-form"]');
}

/** Nothing of the page is wider than the phone (no sideways scrolling). */
async function fitsThePhone(page) {
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= PHONE.width, `the page is ${width} px wide at ${PHONE.width}`);
}

test('a pasted ChatGPT list is previewed, imported, and listed; a Takeout file too; a refused file writes nothing', { timeout: 4 * BOOT_MS }, async () => {
  const ctx = await browser.newContext({ viewport: PHONE });
  const errors = [];
  ctx.on('weberror', (e) => errors.push(String(e.error()?.message || e.error())));
  const page = await ctx.newPage();
  await page.goto(origin + APP_PATH);
  await page.waitForSelector('[data-testid="tab-create"]', { timeout: BOOT_MS });
  await page.click('[data-testid="tab-create"]');
  const form = page.locator('[data-testid="create-form"]');
  await form.locator('[data-testid="vault-name"]').fill(`imp-${Date.now().toString(36)}`);
  await form.locator('[data-testid="passphrase"]').fill(PASS);
  await form.locator('[data-testid="passphrase2"]').fill(PASS);
  await form.locator('[data-testid="create-link"]').setChecked(false);
  await form.locator('[data-testid="create-submit"]').click();
  await page.waitForSelector('[data-testid="add-form"]', { timeout: 90_000 });
  // one memory already here: the same text in the list is skipped
  await page.fill('[data-testid="add-content"]', 'Likes green tea');
  await page.click('[data-testid="add-submit"]');
  await waitCard(page, 'Likes green tea');

  // 1. paste ChatGPT's "Manage memories" list; Preview
  await openSettings(page);
  await page.selectOption('[data-testid="import-from-source"]', 'chatgpt');
  await page.fill('[data-testid="import-from-text"]',
    'Likes  green tea\n• Plays the cello\n- Lives in Lyon\n• Plays the cello\n- Prefers metric units\n');
  await page.click('[data-testid="import-from-preview-button"]');
  await page.waitForSelector('[data-testid="import-from-preview"]:not([hidden])', { timeout: 60_000 });
  assert.equal(await page.textContent('[data-testid="import-from-summary"]'),
    'From ChatGPT (a list): 3 new memories to import, 2 skipped. Each will be yours, tagged imported:chatgpt.');
  assert.deepEqual(await page.$$eval('[data-testid="import-from-first"] li', (els) => els.map((e) => e.textContent)),
    ['Plays the cello', 'Lives in Lyon', 'Prefers metric units']);
  assert.deepEqual(await page.$$eval('[data-testid="import-from-skips"] li', (els) => els.map((e) => e.textContent)),
    ['Likes  green tea (line 1: already in the vault)', 'Plays the cello (line 4: repeated (line 2))']);
  assert.equal(await cardTexts(page).then((t) => t.length), 0, 'the list is not on this screen');
  await fitsThePhone(page);
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.locator('[data-testid="import-from-panel"]').screenshot({ path: path.join(SHOTS, 'import-from-preview-phone.png') });

  // 2. Import: the count, then the memories in the list, tagged
  await page.click('[data-testid="import-from-confirm"]');
  await explained(page, page.waitForFunction(() => (document.querySelector('[data-testid="import-from-progress"]')?.textContent || '')
    .startsWith('Imported'), null, { timeout: 60_000 }));
  assert.equal(await page.textContent('[data-testid="import-from-progress"]'),
    'Imported 3 memories from ChatGPT, skipped 2. They are tagged imported:chatgpt.');
  assert.ok(await page.isHidden('[data-testid="import-from-preview"]'));
  await backToList(page);
  for (const t of ['Plays the cello', 'Lives in Lyon', 'Prefers metric units']) {
    await waitCard(page, t);
    assert.deepEqual(await cardTags(page, t), ['imported:chatgpt']);
  }
  const texts = await cardTexts(page);
  assert.equal(texts.length, 4, JSON.stringify(texts));
  assert.deepEqual(await cardTags(page, 'Likes green tea'), []);

  // 3. a Gemini Takeout page, chosen as a file: previewed at once, imported
  await openSettings(page);
  await page.selectOption('[data-testid="import-from-source"]', 'gemini');
  await page.setInputFiles('[data-testid="import-from-input"]', {
    name: 'Saved info.html', mimeType: 'text/html',
    buffer: Buffer.from('<html><body><h1>Saved info</h1><ul><li>Lives in Lyon</li><li>Cooks on Sundays &amp; holidays</li></ul></body></html>'),
  });
  await page.waitForSelector('[data-testid="import-from-preview"]:not([hidden])', { timeout: 60_000 });
  assert.equal(await page.textContent('[data-testid="import-from-summary"]'),
    'From Gemini (an HTML list): 1 new memory to import, 1 skipped. Each will be yours, tagged imported:gemini.');
  await page.click('[data-testid="import-from-confirm"]');
  await explained(page, page.waitForFunction(() => (document.querySelector('[data-testid="import-from-progress"]')?.textContent || '')
    .startsWith('Imported'), null, { timeout: 60_000 }));

  // 4. a refused file: the error names the item, no preview, nothing written
  await page.selectOption('[data-testid="import-from-source"]', 'chatgpt');
  await page.setInputFiles('[data-testid="import-from-input"]', {
    name: 'memory.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(['fine', 7])),
  });
  await page.waitForSelector('[data-testid="import-from-error"]:not([hidden])', { timeout: 60_000 });
  assert.match(await page.textContent('[data-testid="import-from-error"]'), /item 2: not the format/);
  assert.ok(await page.isHidden('[data-testid="import-from-preview"]'));
  await fitsThePhone(page);
  await backToList(page);
  await waitCard(page, 'Cooks on Sundays & holidays');
  assert.deepEqual(await cardTags(page, 'Cooks on Sundays & holidays'), ['imported:gemini']);
  assert.equal((await cardTexts(page)).length, 5);
  assert.deepEqual(errors, []);
  await ctx.close();
});
