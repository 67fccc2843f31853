// Unlock with a passkey (issue 24 item 7: WebAuthn's PRF extension, web/js/passkeys.js and
// web/js/views/passkeys.js) in each engine, through the engine's own virtual authenticator
// where its driver has one:
//
//   Chromium (playwright-core): the CDP WebAuthn domain, an internal ctap2 authenticator with
//     user verification and PRF (hasPrf), and one without PRF.
//   Firefox ESR: Marionette's WebAuthn:AddVirtualAuthenticator (WebDriver's "Add Virtual
//     Authenticator" extension command; WebDriver BiDi, and so puppeteer-core, has none), the
//     soft token, which computes PRF but answers it only to a get: the enrolment's second step.
//   WebKit (WebKitGTK's MiniBrowser): no WebAuthn at all (no PublicKeyCredential) and no
//     authenticator command in WebKitWebDriver: the passkey button and the Add form stay
//     hidden, Settings say why, and the passphrase unlocks as always.
//
// Where an authenticator exists, in order: a vault made, a memory added; Settings refuse to add
// a passkey without the passphrase typed again (a wrong one adds nothing); added; locked; the
// unlock screen offers the passkey and it opens the vault, the memory there; the passphrase
// changed (the op the Settings form calls, in a worker of its own) and the passkey still
// unlocks; a passkey gone from the authenticator is refused with a clear message and the
// passphrase still unlocks; removed in Settings, the unlock screen no longer offers it and its
// slot, with the passkey's true PRF secret, opens nothing.  Chromium also: an authenticator
// without PRF -> "cannot unlock", nothing added.  Screenshots at 390 and 320 px wide of Settings'
// panel and the unlock screen: test-output/screenshots/<engine>/passkeys-*.png, with no touch
// target under 44 px there (and, in Chromium, no serious or critical axe-core violation).
//
// WebAuthn needs a relying party id that is a host name: the app is opened at localhost (an IP
// address such as 127.0.0.1 is refused by every engine, and the app hides passkeys there).
//
//   python3 build.py build && node --test tests/browser/passkeys.test.mjs
//
// A missing engine skips its test, and fails it under CI=true (as the other engine tests do).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, serverDirs, spawnServer, stopProcess, until } from './helpers.mjs';
import { DRIVER, MINIBROWSER, XVFB, launchWebKit, startXvfb } from './webkit-driver.mjs';
import { launchMarionette } from './marionette.mjs';
import { SCREENSHOTS, TARGET, click, fill, showing, smallTargets, waitListed } from './screens.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const DIST = path.join(ROOT, 'web', 'dist');
const VENV_PY = process.env.OWNMEM_PYTHON ?? path.join(ROOT, '.venv', 'bin', 'python');
const FIREFOX = process.env.FIREFOX ?? '/usr/bin/firefox-esr';
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const require = createRequire(path.join(ROOT, 'package.json'));
const PASS = 'correct horse battery staple 42';
const PASS2 = 'a brand new passphrase for the vault 7';
const MEMORY = 'The spare key is under the blue pot';
const BOOT_MS = 180_000;
const OP_MS = 60_000;
const CI = process.env.CI === 'true';
const AXE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const PHONES = [['390', { width: 390, height: 844 }], ['320', { width: 320, height: 568 }]];

const skipOf = (paths, what) => {
  const missing = paths.filter((p) => !fs.existsSync(p));
  return missing.length && !CI ? `${what} is not installed here (${missing.join(', ')})` : false;
};

let tmp, dataDir, webDir, origin, serverProc, serverLog = '';

before(async () => {
  ({ tmp, dataDir, webDir } = serverDirs(DIST, 'ownmem-passkeys-'));
  const port = await freePort();
  origin = `http://localhost:${port}`;
  serverProc = await spawnServer({ py: VENV_PY, cwd: ROOT, port, dataDir, webDir,
    onOutput: (d) => { serverLog = (serverLog + d).slice(-20000); } });
}, { timeout: 60_000 });

after(async () => {
  await stopProcess(serverProc);
  fs.rmSync(tmp, { recursive: true, force: true });
});

// ------------------------------------------------------------------ in the page

const text = (css) => document.querySelector(css)?.textContent?.trim() ?? '';
const visible = (css) => {
  const n = document.querySelector(css);
  return !!n && n.getClientRects().length > 0 && !n.closest('[hidden]');
};
const cards = () => [...document.querySelectorAll('[data-testid="memory-card"] [data-role="content"]')].map((n) => n.textContent);
const passkeyRows = () => [...document.querySelectorAll('[data-testid="passkey-row"]')].map((n) => n.textContent.trim());

// A vault worker of its own, as another tab of this origin would hold (the page's worker is
// locked meanwhile): its operations in order -> [{ok, result} or {ok: false, code, message}].
const inWorker = (steps) => new Promise((done) => {
  const w = new Worker('/js/worker.js', { type: 'module' });
  const out = [];
  const send = () => {
    if (out.length === steps.length) {
      w.terminate();
      done(out);
      return;
    }
    const [op, args] = steps[out.length];
    w.postMessage({ id: out.length + 1, op, args });
  };
  w.onmessage = (e) => {
    if (e.data.event === 'failed') done([{ ok: false, code: 'failed', message: e.data.message }]);
    if (e.data.event === 'ready') send();
    if (e.data.id === out.length + 1) {
      out.push(e.data.ok ? { ok: true, result: e.data.result } : { ok: false, code: e.data.error.code, message: e.data.error.message });
      send();
    }
  };
});

// The PRF secret a passkey gives for ownmem's input (as web/js/passkeys.js asks it): what a
// thief of this device's authenticator, or of the person's finger, could compute.
const prfOf = async (refHex) => {
  const first = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode('ownmem/v1/passkey-prf')));
  const id = new Uint8Array(refHex.match(/../g).map((x) => parseInt(x, 16)));
  const got = await navigator.credentials.get({ publicKey: { challenge: crypto.getRandomValues(new Uint8Array(32)),
    allowCredentials: [{ type: 'public-key', id }], userVerification: 'required', extensions: { prf: { eval: { first } } } } });
  return [...new Uint8Array(got.getClientExtensionResults().prf.results.first)].map((x) => x.toString(16).padStart(2, '0')).join('');
};

// ------------------------------------------------------------------ steps, any engine

/** Screenshots of the screen at 390 and 320 px wide, scrolled to `scrollTo`; its small touch targets. */
async function shots(view, name, scrollTo = null) {
  const dir = path.join(SCREENSHOTS, view.engine);
  fs.mkdirSync(dir, { recursive: true });
  const small = [];
  for (const [size, viewport] of PHONES) {
    await view.setViewport(viewport);
    // MiniBrowser's window is at least 334 px wide (as in the WebKit tour): its "320" is that
    assert.equal(await view.evaluate(() => innerWidth), Math.max(viewport.width, view.minWidth ?? 0), `${view.engine}: the page is ${size} px wide`);
    await view.evaluate((sel) => new Promise((done) => {
      window.scrollTo(0, 0);
      const n = sel && document.querySelector(sel);
      const bar = document.querySelector('header')?.getBoundingClientRect().bottom ?? 0;
      if (n) window.scrollTo(0, n.getBoundingClientRect().top + window.scrollY - bar - 8);
      requestAnimationFrame(() => requestAnimationFrame(() => done(true)));
    }), scrollTo);
    fs.writeFileSync(path.join(dir, `passkeys-${name}-${size}.png`), await view.screenshot());
    small.push(...(await view.evaluate(smallTargets, TARGET)).map((t) => `${name} (${size}): ${t}`));
    if (view.axe) small.push(...(await view.axe()).map((v) => `${name} (${size}): axe ${v}`));
  }
  await view.setViewport({ width: 1280, height: 800 });
  return small;
}

async function createVault(view, name) {
  await view.goto(`${origin}/`);
  await showing(view, '[data-testid="tab-create"]', BOOT_MS);
  await click(view, '[data-testid="tab-create"]');
  const form = '[data-testid="create-form"]';
  await fill(view, `${form} [data-testid="vault-name"]`, name);
  await fill(view, `${form} [data-testid="passphrase"]`, PASS);
  await fill(view, `${form} [data-testid="passphrase2"]`, PASS);
  await click(view, `${form} [data-testid="create-submit"]`);
  await waitListed(view, BOOT_MS);
  if (await view.evaluate(visible, '[data-testid="recovery-close"]')) await click(view, '[data-testid="recovery-close"]');
  await fill(view, '[data-testid="add-content"]', MEMORY);
  await click(view, '[data-testid="add-submit"]');
  await until('the memory listed', async () => (await view.evaluate(cards)).includes(MEMORY), OP_MS);
}

async function openSettings(view) {
  await click(view, '[data-testid="settings-button"]');
  await showing(view, '[data-testid="passkeys-panel"]');
  // the panel has read this device's passkeys and this browser's support
  await until('the passkeys panel read', async () => !/Reading/.test(await view.evaluate(text, '[data-testid="passkeys-state"]')), OP_MS);
}

async function lock(view) {
  await click(view, '[data-testid="lock-button"]');
  await showing(view, '[data-testid="unlock-form"]');
}

/** The unlock screen once its passkey check is answered: whether it offers the passkey. */
async function offersPasskey(view) {
  // the box says when the question (this vault's passkeys, this browser's PRF) is answered
  await until('the unlock screen\'s passkey check', () => view.evaluate(() => document.querySelector('[data-testid="passkey-unlock-box"]')?.dataset.answered === 'true'), BOOT_MS);
  return view.evaluate(visible, '[data-testid="passkey-unlock"]');
}

async function unlockWithPassphrase(view, pass) {
  await fill(view, '[data-testid="unlock-form"] [data-testid="passphrase"]', pass);
  await click(view, '[data-testid="unlock-submit"]');
  await waitListed(view, BOOT_MS);
}

/** The error line of `form` once it says something. */
const errorOf = (view, form) => until(`${form}'s error`, async () => view.evaluate(text, `${form} [data-role="error"]`), OP_MS);

/**
 * The whole flow in an engine with a PRF authenticator.  `view`: {engine, evaluate, goto,
 * setViewport, screenshot, press(css): the person's click, dropCredentials(): the authenticator
 * forgets its passkeys}.  -> touch targets under 44 px.
 */
async function passkeyFlow(view) {
  const small = [];
  await createVault(view, `pk-${view.engine}-${Date.now().toString(36)}`);

  // 1. Settings: the panel, and no passkey without the passphrase typed again
  await openSettings(view);
  assert.equal(await view.evaluate(visible, '[data-testid="passkey-form"]'), true, 'this browser may add a passkey');
  assert.match(await view.evaluate(text, '[data-testid="passkeys-state"]'), /No passkey unlocks this vault on this device yet/);
  await view.press('[data-testid="passkey-add"]');
  assert.match(await errorOf(view, '[data-testid="passkey-form"]'), /Enter your passphrase to add a passkey/);
  await fill(view, '[data-testid="passkey-passphrase"]', 'not the passphrase');
  await view.press('[data-testid="passkey-add"]');
  assert.match(await errorOf(view, '[data-testid="passkey-form"]'), /Wrong passphrase/);
  assert.deepEqual(await view.evaluate(passkeyRows), [], 'a wrong passphrase adds nothing');
  assert.deepEqual((await view.evaluate(inWorkerSlots)), [], 'no slot stored');

  // 2. added
  await fill(view, '[data-testid="passkey-passphrase"]', PASS);
  await view.press('[data-testid="passkey-add"]');
  await until('the passkey listed, or an error', async () => (await view.evaluate(passkeyRows)).length === 1
    || await view.evaluate(text, '[data-testid="passkey-form"] [data-role="error"]'), OP_MS);
  assert.equal(await view.evaluate(text, '[data-testid="passkey-form"] [data-role="error"]'), '', 'the passkey was added');
  const [row] = await view.evaluate(passkeyRows);
  assert.match(row, /^Passkey.* added .*Remove$/);
  assert.equal(await view.evaluate(() => document.querySelector('[data-testid="passkey-passphrase"]').value), '', 'the passphrase field is emptied');
  await until('the "added" notice faded', async () => !(await view.evaluate(visible, '#notice')), 10_000);
  small.push(...await shots(view, 'settings', '[data-testid="passkeys-panel"]'));

  // 3. locked: the unlock screen offers it; it opens the vault
  await lock(view);
  assert.equal(await offersPasskey(view), true);
  small.push(...await shots(view, 'unlock'));
  await view.press('[data-testid="passkey-unlock"]');
  await waitListed(view, BOOT_MS);
  assert.ok((await view.evaluate(cards)).includes(MEMORY), 'the memory is there after a passkey unlock');

  // 4. the passphrase changed (the Settings form's operation, in a worker of its own while this
  //    page is locked): the passkey still unlocks, and the new passphrase too
  await lock(view);
  const changed = await view.evaluate(inWorker, [['unlock', { passphrase: PASS }], ['passphrase_change', { current: PASS, new: PASS2 }]]);
  assert.deepEqual(changed.map((r) => r.ok), [true, true], JSON.stringify(changed));
  assert.equal(changed[1].result.server, origin, 'the change went through the server (the vault is linked)');
  await view.goto(`${origin}/`);   // a fresh vault worker reads the changed store
  await showing(view, '[data-testid="unlock-form"]', BOOT_MS);
  assert.equal(await offersPasskey(view), true);
  await view.press('[data-testid="passkey-unlock"]');
  await waitListed(view, BOOT_MS);
  assert.ok((await view.evaluate(cards)).includes(MEMORY), 'the passkey unlocks after the passphrase change');

  // 5. the passkey gone from the authenticator (deleted from the person's password manager):
  //    a clear refusal, and the passphrase still unlocks
  await openSettings(view);
  const [slot] = await view.evaluate(inWorkerSlots);
  const secret = await view.evaluate(prfOf, slot.ref);
  await lock(view);
  await view.dropCredentials();
  assert.equal(await offersPasskey(view), true);
  await view.press('[data-testid="passkey-unlock"]');
  assert.match(await errorOf(view, '[data-testid="unlock-form"]'), /No passkey was used: .*none of the passkeys added to this vault/);
  assert.equal(await view.evaluate(visible, '[data-testid="unlock-submit"]'), true, 'the passphrase form stays');
  small.push(...await shots(view, 'unlock-refused'));
  await unlockWithPassphrase(view, PASS2);
  assert.ok((await view.evaluate(cards)).includes(MEMORY));

  // 6. removed in Settings: no longer offered, and its slot with the passkey's true secret opens nothing
  await openSettings(view);
  await view.press('[data-testid="passkey-remove"]');
  await until('the passkey removed', async () => (await view.evaluate(passkeyRows)).length === 0, OP_MS);
  await lock(view);
  assert.equal(await offersPasskey(view), false, 'a removed passkey is not offered');
  const replay = await view.evaluate(inWorker, [['unlock_slot', { slot_id: slot.id, secret }]]);
  assert.equal(replay[0].ok, false, 'the removed slot opened the vault');
  assert.equal(replay[0].code, 'not_found');
  assert.match(replay[0].message, /no such unlock slot \(it was removed\)/);
  await unlockWithPassphrase(view, PASS2);
  return small;
}

// the passkey slots the vault holds (not its recovery kit's), read by a worker of its own (public: no unlock needed)
const inWorkerSlots = async () => {
  const w = new Worker('/js/worker.js', { type: 'module' });
  return new Promise((done, fail) => {
    w.onmessage = (e) => {
      if (e.data.event === 'ready') w.postMessage({ id: 1, op: 'slots', args: {} });
      if (e.data.event === 'failed') fail(new Error(e.data.message));
      if (e.data.id === 1) {
        w.terminate();
        if (e.data.ok) done(e.data.result.slots.filter((x) => x.kind === 'passkey'));
        else fail(new Error(e.data.error.message));
      }
    };
  });
};

// ------------------------------------------------------------------ the engines

test('Chromium: add, unlock, passphrase change, passkey gone, removed; an authenticator without PRF adds nothing', {
  skip: skipOf([CHROMIUM], 'Chromium'), timeout: 600_000,
}, async () => {
  const { chromium } = require('playwright-core');
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--no-first-run'] });
  try {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await ctx.newPage();
    page.on('pageerror', (e) => console.error('[chromium page error]', e.message));
    const cdp = await ctx.newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    const authenticator = async (hasPrf) => (await cdp.send('WebAuthn.addVirtualAuthenticator', { options: {
      protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true,
      hasPrf, automaticPresenceSimulation: true } })).authenticatorId;
    let auth = await authenticator(true);
    const view = {
      engine: 'chromium',
      evaluate: (fn, arg) => page.evaluate(fn, arg),
      goto: async (url) => { await page.goto(url); },
      setViewport: (v) => page.setViewportSize(v),
      screenshot: () => page.screenshot(),
      press: (css) => page.click(css),   // a real click: the person's gesture
      dropCredentials: () => cdp.send('WebAuthn.clearCredentials', { authenticatorId: auth }),
      // axe-core (as tests/browser/a11y.test.mjs runs it): its serious and critical violations
      axe: async () => {
        if (!await page.evaluate(() => typeof window.axe === 'object')) await page.evaluate(AXE);
        return page.evaluate(async () => (await window.axe.run(document, { resultTypes: ['violations'] })).violations
          .filter((v) => v.impact === 'serious' || v.impact === 'critical')
          .map((v) => `${v.impact} ${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`));
      },
    };
    const small = await passkeyFlow(view);
    assert.deepEqual(small, [], 'touch targets under 44 px at phone size');

    // an authenticator that cannot compute PRF: the enrolment says so and adds nothing
    await cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId: auth });
    auth = await authenticator(false);
    await openSettings(view);
    await fill(view, '[data-testid="passkey-passphrase"]', PASS2);
    await view.press('[data-testid="passkey-add"]');
    assert.match(await errorOf(view, '[data-testid="passkey-form"]'),
      /This passkey cannot unlock the vault: its authenticator does not offer the PRF extension.*Nothing was added/);
    assert.deepEqual(await view.evaluate(passkeyRows), []);
    assert.deepEqual(await view.evaluate(inWorkerSlots), []);
    await shots(view, 'no-prf', '[data-testid="passkey-form"]');
  } finally {
    await browser.close();
  }
});

test('Firefox: the same, through Marionette\'s virtual authenticator', { skip: skipOf([FIREFOX], 'Firefox ESR'), timeout: 600_000 }, async () => {
  const m = await launchMarionette({ firefox: FIREFOX, dir: fs.mkdtempSync(path.join(tmp, 'firefox-')), scriptMs: BOOT_MS });
  try {
    await m.setViewport({ width: 1280, height: 800 });
    const authenticatorId = (await m.cmd('WebAuthn:AddVirtualAuthenticator', { protocol: 'ctap2_1', transport: 'internal',
      hasResidentKey: true, hasUserVerification: true, isUserVerified: true })).value;
    const view = {
      engine: 'firefox',
      evaluate: (fn, arg) => m.evaluate(fn, arg),
      goto: (url) => m.goto(url),
      setViewport: (v) => m.setViewport(v),
      screenshot: () => m.screenshot(),
      press: (css) => click(view, css),
      dropCredentials: () => m.cmd('WebAuthn:RemoveAllCredentials', { authenticatorId }),
    };
    const small = await passkeyFlow(view);
    assert.deepEqual(small, [], 'touch targets under 44 px at phone size');
  } finally {
    await m.close();
  }
});

test('WebKit: no WebAuthn here: the passkey path hidden, the passphrase path intact', {
  skip: skipOf([DRIVER, MINIBROWSER, XVFB], 'WebKit'), timeout: 600_000,
}, async () => {
  const xvfb = await startXvfb();
  const dev = await launchWebKit({ display: xvfb.display, scriptMs: BOOT_MS });
  try {
    await dev.setViewport({ width: 1280, height: 800 });
    const view = {
      engine: 'webkit',
      minWidth: 334,
      evaluate: (fn, arg) => dev.evaluate(fn, arg),
      goto: (url) => dev.goto(url),
      setViewport: (v) => dev.setViewport(v),
      screenshot: () => dev.screenshot(),
    };
    assert.equal(await view.evaluate(() => typeof PublicKeyCredential).catch(() => 'undefined'), 'undefined',
      'this WebKit has WebAuthn now: give this test its authenticator');
    await createVault(view, `pk-webkit-${Date.now().toString(36)}`);
    await openSettings(view);
    assert.equal(await view.evaluate(visible, '[data-testid="passkey-form"]'), false, 'no Add where PRF cannot work');
    assert.match(await view.evaluate(text, '[data-testid="passkeys-state"]'), /^This browser has no passkey support \(WebAuthn\) on this page\. Your passphrase works as always\.$/);
    const small = await shots(view, 'settings', '[data-testid="passkeys-panel"]');
    await lock(view);
    assert.equal(await offersPasskey(view), false);
    small.push(...await shots(view, 'unlock'));
    await unlockWithPassphrase(view, PASS);
    assert.ok((await view.evaluate(cards)).includes(MEMORY));
    assert.deepEqual(small, [], 'touch targets under 44 px at phone size');
  } finally {
    await dev.close();
    await xvfb.stop();
  }
});
