// Sharing from the app (issue 23, 6): two people, two vaults on one real server, in one
// headless Chromium.  B's Shares screen shows B's holder ID, its share link and the link's QR
// code (decoded here with jsQR from the canvas's pixels); A opens B's link in A's own app, which
// unlocks into the Offer form with B's holder ID filled in; A offers; B accepts, declines and
// withdraws, sees the shared memories; A revokes and B's next read has nothing of A's.  What a
// person can get wrong in the form (a malformed or unknown holder ID, no memory chosen) is
// refused with a clear message and offers nothing.  axe-core is clean on the Shares screen with
// the Offer form open.
//
//   python3 build.py build && node --test tests/browser/sharing.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { explained, freePort, serverDirs, sleep, spawnServer, stopProcess } from './helpers.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const DIST = path.join(ROOT, 'web', 'dist');
const PY = path.join(ROOT, '.venv', 'bin', 'python');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const SHOTS = path.join(ROOT, 'test-output', 'screenshots');
const require = createRequire(path.join(ROOT, 'package.json'));
const AXE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const jsQR = require('jsqr');

const PASS = 'sharing test: eleven kites above a windy dune';
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };
const BOOT_MS = 120_000;
const SYNC_MS = 60_000;

let browser, tmp, server, origin, log = '';

before(async () => {
  if (!fs.existsSync(path.join(DIST, 'precache.json'))) {
    throw new Error(`the web app is not built (${DIST} is missing): run \`python3 build.py build\` first`);
  }
  let dataDir, webDir;
  ({ tmp, dataDir, webDir } = serverDirs(DIST, 'ownmem-sharing-'));
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

const uniq = (p) => `${p}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;

async function waitVault(page) {
  await page.waitForSelector('[data-testid="add-form"]', { timeout: BOOT_MS });
  await page.waitForFunction(() => !document.querySelector('[data-role="summary"]')?.textContent?.startsWith('Opening'),
    null, { timeout: BOOT_MS });
}

async function createVault(page, name) {
  await page.goto(origin + '/');
  await page.waitForSelector('[data-testid="tab-create"]', { timeout: BOOT_MS });
  await page.click('[data-testid="tab-create"]');
  const form = page.locator('[data-testid="create-form"]');
  await form.locator('[data-testid="vault-name"]').fill(name);
  await form.locator('[data-testid="passphrase"]').fill(PASS);
  await form.locator('[data-testid="passphrase2"]').fill(PASS);
  await form.locator('[data-testid="create-link"]').setChecked(true);
  await form.locator('[data-testid="create-submit"]').click();
  await waitVault(page);
  await page.waitForFunction(() => ['online', 'syncing', 'connecting'].includes(document.querySelector('[data-testid="sync-status"]')?.dataset.state),
    null, { timeout: SYNC_MS });
}

async function addMemory(page, content, tags = '') {
  await page.fill('[data-testid="add-content"]', content);
  await page.fill('[data-testid="add-tags"]', tags);
  await page.click('[data-testid="add-submit"]');
  await explained(page, page.waitForFunction((c) => [...document.querySelectorAll('[data-testid="memory-card"] [data-role="content"]')]
    .some((n) => n.textContent === c), content, { timeout: 30_000 }));
}

async function openShares(page) {
  if (!(await page.$('[data-testid="shares-view"]'))) await page.click('[data-testid="shares-button"]');
  await sharesRead(page);
}

async function sharesRead(page) {
  await page.waitForSelector('[data-testid="shares-view"]');
  await explained(page, page.waitForFunction(() => document.querySelector('[data-testid="shares-view"]').getAttribute('aria-busy') === 'false'
    && document.querySelector('[data-testid="holder-id"]').textContent.length === 64, null, { timeout: SYNC_MS }));
}

async function refreshShares(page) {
  await page.click('[data-testid="shares-refresh"]');
  await sharesRead(page);
}

const states = (page, side) => page.$$eval(`[data-testid="share-${side}"]`,
  (els) => Object.fromEntries(els.map((li) => [li.dataset.contract, li.dataset.state])));
const sharedTexts = (page) => page.$$eval('[data-testid="shared-memory"] [data-role="content"]', (els) => els.map((n) => n.textContent).sort());
const row = (page, side, c) => page.locator(`[data-testid="share-${side}"][data-contract="${c}"]`);

/** Fill the open Offer form and submit it -> the new contract's id (the row that appeared). */
async function offer(page, { to, tag = '', pick = [], all = false, mode, expiry }) {
  const before = Object.keys(await states(page, 'offered'));
  if (to !== undefined) await page.fill('[data-testid="offer-to"]', to);
  await page.selectOption('[data-testid="offer-tag"]', tag);
  if (all) await page.click('[data-testid="offer-all"]');
  for (const text of pick) await page.locator('[data-testid="offer-list"] label', { hasText: text }).locator('input').check();
  await page.selectOption('[data-testid="offer-mode"]', mode);
  if (expiry !== undefined) await page.selectOption('[data-testid="offer-expiry"]', String(expiry));
  await page.click('[data-testid="offer-submit"]');
  await explained(page, page.waitForFunction((n) => document.querySelectorAll('[data-testid="share-offered"]').length > n
    && document.querySelector('[data-testid="shares-view"]').getAttribute('aria-busy') === 'false', before.length, { timeout: SYNC_MS }));
  const after = Object.keys(await states(page, 'offered'));
  const made = after.filter((c) => !before.includes(c));
  assert.equal(made.length, 1);
  assert.equal(await page.isHidden('[data-testid="offer-form"]'), true, 'the form stays open after the offer');
  return made[0];
}

/** Submit the form as it is; the refusal it shows (and no offer made). */
async function refused(page) {
  const before = await states(page, 'offered');
  await page.click('[data-testid="offer-submit"]');
  const err = page.locator('[data-testid="offer-error"]');
  await err.waitFor({ state: 'visible', timeout: SYNC_MS });
  await page.waitForFunction(() => document.querySelector('[data-testid="offer-form"]').getAttribute('aria-busy') !== 'true');
  await refreshShares(page);
  assert.deepEqual(await states(page, 'offered'), before, 'a refused offer changed the contracts');
  return err.textContent();
}

async function axeClean(page, screen) {
  if (!await page.evaluate(() => typeof window.axe === 'object')) await page.evaluate(AXE);
  const failures = [];
  for (const [size, viewport] of [['desktop', DESKTOP], ['phone', PHONE]]) {
    await page.setViewportSize(viewport);
    await sleep(150);
    const { violations, passes } = await page.evaluate(async () => {
      const r = await window.axe.run(document, { resultTypes: ['violations'] });
      return { passes: r.passes.length, violations: r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
        nodes: v.nodes.map((n) => `${n.target.join(' ')}: ${n.failureSummary.replace(/\s+/g, ' ')}`) })) };
    });
    assert.ok(passes > 10, `axe ran its rules on ${screen} (${size}): ${passes} passed`);
    for (const v of violations.filter((x) => x.impact === 'serious' || x.impact === 'critical')) {
      failures.push(`${screen} (${size}) ${v.impact} ${v.id}: ${v.help}\n    ${v.nodes.join('\n    ')}`);
    }
    fs.mkdirSync(SHOTS, { recursive: true });
    await page.screenshot({ path: path.join(SHOTS, `sharing-${screen}-${size}.png`), fullPage: size === 'phone' });
  }
  await page.setViewportSize(DESKTOP);
  assert.deepEqual(failures, [], `axe found serious or critical violations:\n${failures.join('\n')}`);
}

test('sharing from the app: the link and its QR code, offer, accept, decline, withdraw, revoke; mistakes refused',
  { timeout: 420_000 }, async () => {
    const ca = await browser.newContext({ viewport: DESKTOP });
    const cb = await browser.newContext({ viewport: DESKTOP });
    await cb.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
    const M = { flight: 'Flight lands at 18:40 on Friday', key: 'The spare key is with the neighbour', diet: 'No peanuts at dinner, please' };
    try {
      const a = await ca.newPage();
      const b = await cb.newPage();
      await Promise.all([createVault(a, uniq('share-a')), createVault(b, uniq('share-b'))]);
      await addMemory(a, M.flight, 'trip');
      await addMemory(a, M.key, 'trip, home');
      await addMemory(a, M.diet);

      // B: the holder ID, its link, and a QR code that decodes to that link
      await openShares(b);
      const holderB = await b.textContent('[data-testid="holder-id"]');
      assert.match(holderB, /^[0-9a-f]{64}$/);
      const link = await b.textContent('[data-testid="share-link"]');
      assert.equal(link, `${origin}/#share-with=${holderB}`);
      assert.match(await b.textContent('[data-testid="shares-log-note"]'), /Anyone who knows your holder ID can read .* public log/);
      await b.waitForFunction((l) => document.querySelector('[data-testid="share-qr"]').dataset.text === l, link, { timeout: 30_000 });
      const img = await b.$eval('[data-testid="share-qr"]', (c) => {
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height);
        return { w: d.width, h: d.height, px: Array.from(d.data) };
      });
      const decoded = jsQR(Uint8ClampedArray.from(img.px), img.w, img.h);
      assert.ok(decoded, 'the QR code does not decode');
      assert.equal(decoded.data, link);
      await b.click('[data-testid="copy-link"]');
      assert.equal(await b.evaluate(() => navigator.clipboard.readText()), link);

      // A: mistakes in the form are refused, with what to fix, and offer nothing
      await openShares(a);
      await a.click('[data-testid="offer-open"]');
      assert.match(await a.textContent('[data-testid="offer-log-note"]'), /public log/);
      await a.locator('[data-testid="offer-list"] label', { hasText: M.diet }).locator('input').check();
      await a.fill('[data-testid="offer-to"]', holderB.slice(0, 63));
      assert.match(await refused(a), /not a whole holder ID: it has 63 characters, a holder ID has 64/);
      assert.equal(await a.getAttribute('[data-testid="offer-to"]', 'aria-invalid'), 'true');
      await a.fill('[data-testid="offer-to"]', `${holderB.slice(0, 63)}z`);
      assert.match(await refused(a), /characters other than the digits 0-9 and the letters a-f/);
      await a.fill('[data-testid="offer-to"]', 'ab'.repeat(32));          // well formed, nobody's
      assert.match(await refused(a), /^No vault with this holder ID uses this server/);
      const mine = await a.textContent('[data-testid="holder-id"]');
      await a.fill('[data-testid="offer-to"]', mine);
      assert.match(await refused(a), /your own holder ID/);
      await a.locator('[data-testid="offer-list"] label', { hasText: M.diet }).locator('input').uncheck();
      await a.fill('[data-testid="offer-to"]', holderB);
      assert.match(await refused(a), /^Choose at least one memory to share/);
      assert.deepEqual(await states(a, 'offered'), {});

      // B's link opened in A's open app (the same page: only its hash changes): the form, filled in
      await a.click('[data-role="offer-cancel"]');
      await a.click('[data-testid="back"], [data-role="back"]');
      await a.waitForSelector('[data-testid="add-form"]');
      await a.goto(link);
      await a.waitForSelector('[data-testid="offer-form"]:not([hidden])', { timeout: SYNC_MS });
      assert.equal(await a.inputValue('[data-testid="offer-to"]'), holderB);
      // and opened afresh: A unlocks into the Offer form with B's holder ID filled in
      await a.goto('about:blank');
      await a.goto(link);
      await a.waitForSelector('[data-testid="unlock-form"]', { timeout: BOOT_MS });
      assert.equal(new URL(a.url()).hash, '', 'the share link stayed in the address bar');
      await a.fill('[data-testid="unlock-form"] [data-testid="passphrase"]', PASS);
      await a.click('[data-testid="unlock-submit"]');
      await a.waitForSelector('[data-testid="offer-form"]:not([hidden])', { timeout: BOOT_MS });
      await sharesRead(a);
      assert.equal(await a.inputValue('[data-testid="offer-to"]'), holderB);
      await a.waitForFunction(() => document.querySelectorAll('[data-testid="offer-memory"]').length === 3, null, { timeout: SYNC_MS });
      await a.selectOption('[data-testid="offer-tag"]', 'trip');
      assert.equal(await a.locator('[data-testid="offer-memory"]').count(), 2);
      await axeClean(a, 'shares-offer');
      const c1 = await offer(a, { tag: 'trip', all: true, mode: 'permanent' });
      await a.click('[data-testid="offer-open"]');
      const c2 = await offer(a, { to: link, pick: [M.diet], mode: 'temporary', expiry: 3600 });
      await a.click('[data-testid="offer-open"]');
      const c3 = await offer(a, { to: holderB, pick: [M.diet], mode: 'syndicate', expiry: 7 * 86400 });
      assert.deepEqual(await states(a, 'offered'), { [c1]: 'offered', [c2]: 'offered', [c3]: 'offered' });
      assert.match(await row(a, 'offered', c1).textContent(), /Permanent.*2 memories/s);
      assert.match(await row(a, 'offered', c2).textContent(), /Temporary.*until/s);

      // B: nothing shown before an answer; accept c1 and c3, decline c2
      await refreshShares(b);
      assert.deepEqual(await states(b, 'received'), { [c1]: 'offered', [c2]: 'offered', [c3]: 'offered' });
      assert.deepEqual(await sharedTexts(b), []);
      await row(b, 'received', c2).locator('[data-testid="share-decline"]').click();
      await b.waitForFunction((c) => document.querySelector(`[data-contract="${c}"]`)?.dataset.state === 'declined', c2, { timeout: SYNC_MS });
      await row(b, 'received', c1).locator('[data-testid="share-accept"]').click();
      await b.waitForFunction((c) => document.querySelector(`[data-contract="${c}"]`)?.dataset.state === 'accepted', c1, { timeout: SYNC_MS });
      await row(b, 'received', c3).locator('[data-testid="share-accept"]').click();
      await b.waitForFunction(() => document.querySelectorAll('[data-testid="shared-memory"]').length === 3, null, { timeout: SYNC_MS });
      assert.deepEqual(await sharedTexts(b), [M.flight, M.diet, M.key].sort());

      // B withdraws from c3 (asked first); A revokes c1 (asked first); B's next read has nothing of A's
      await row(b, 'received', c3).locator('[data-testid="share-withdraw"]').click();
      await b.click('[data-testid="withdraw-confirm"]');
      await b.waitForFunction((c) => document.querySelector(`[data-contract="${c}"]`)?.dataset.state === 'withdrawn', c3, { timeout: SYNC_MS });
      assert.deepEqual(await sharedTexts(b), [M.flight, M.key].sort());
      await refreshShares(a);
      assert.deepEqual(await states(a, 'offered'), { [c1]: 'accepted', [c2]: 'declined', [c3]: 'withdrawn' });
      await row(a, 'offered', c1).locator('[data-testid="share-revoke"]').click();
      await a.click('[data-testid="revoke-confirm"]');
      await a.waitForFunction((c) => document.querySelector(`[data-contract="${c}"]`)?.dataset.state === 'revoked', c1, { timeout: SYNC_MS });
      await refreshShares(b);
      assert.equal((await states(b, 'received'))[c1], 'revoked');
      assert.deepEqual(await sharedTexts(b), []);
    } finally {
      await ca.close();
      await cb.close();
    }
  });
