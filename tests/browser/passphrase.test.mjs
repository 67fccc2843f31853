// Issue 24 items 1-2 in the PWA, in each engine: Chromium (playwright-core), Firefox ESR
// (puppeteer-core over WebDriver BiDi) and WebKit (WebKitGTK's MiniBrowser behind
// WebKitWebDriver, under Xvfb).  A real `python -m server`; the other device is the CLI on the
// same server (`ownmem`, its own folder).  Per engine, one fresh profile:
//
//   1. the CLI makes a vault and writes a memory; the browser opens it from the server
//   2. Settings > Change passphrase: a wrong current passphrase (sent with Ctrl+Enter) is
//      refused with nothing changed (the CLI still syncs with the old one); Escape closes the
//      dialog and only it; the right one changes it here and on the server, and the result
//      says what it does and does not do
//   3. the CLI's sync stops with "changed on another device"; `ownmem passphrase update`
//      refuses the old passphrase and takes the new one; the old one no longer opens the CLI's
//      vault; a memory the browser wrote after the change reaches the CLI as its own
//   4. the browser's old passphrase is refused at unlock, the new one opens it, every memory "self"
//   5. the CLI changes it again: the browser's Sync asks "Your passphrase was changed on another
//      device..." (the status line says why nothing syncs; "Not now" closes it, Sync asks again);
//      a wrong one is refused, nothing changed; the right one and it syncs again;
//      afterwards only the newest passphrase unlocks it, every memory still "self"
//
// The change form, its result and the "enter the new passphrase" dialog are taken at 320, 360
// and 390 px wide and desktop (test-output/screenshots/<engine>/passphrase-*.png), their touch
// targets measured (44 px) and axe-core run on them (no serious or critical violation).
//
//   python3 build.py build && node --test tests/browser/passphrase.test.mjs
//
// A missing engine skips its test, and fails it under CI=true (as the other engine tests do).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, serverDirs, spawnServer, stopProcess, until } from './helpers.mjs';
import { ENGINES, TITLE, skipOf, withView } from './engines.mjs';
import { SMALL_TARGETS, capture, click, fill, showing, waitListed } from './screens.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const DIST = path.join(ROOT, 'web', 'dist');
const VENV_PY = process.env.OWNMEM_PYTHON ?? path.join(ROOT, '.venv', 'bin', 'python');
const require = createRequire(path.join(ROOT, 'package.json'));
const AXE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const OLD = 'correct horse battery staple 42';
const NEW = 'violet canal lantern orbit 58 meadow';
const NEWER = 'quiet harbor pebble summit 73 ember';
const BOOT_MS = 180_000;
const OP_MS = 90_000;

let tmp, dataDir, webDir, origin, serverProc, serverLog = '';

before(async () => {
  if (!fs.existsSync(path.join(DIST, 'precache.json'))) {
    throw new Error(`the web app is not built (${DIST} is missing): run \`python3 build.py build\` first`);
  }
  ({ tmp, dataDir, webDir } = serverDirs(DIST, 'ownmem-passphrase-'));
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  serverProc = await spawnServer({ py: VENV_PY, cwd: ROOT, port, dataDir, webDir,
    onOutput: (d) => { serverLog = (serverLog + d).slice(-20000); } });
}, { timeout: 60_000 });

after(async () => {
  await stopProcess(serverProc);
  if (serverLog.includes('Traceback')) console.log(`# server log (tail):\n${serverLog.slice(-4000)}`);
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

// ------------------------------------------------------------------ the other device: the CLI

/** `ownmem ARGS` in its own home and vault folder -> {code, out}; no passphrase in its output. */
function cliOf(tag) {
  const home = path.join(tmp, `cli-${tag}`);
  fs.mkdirSync(home, { recursive: true });
  return (args, { pass = OLD, next = null, code = 0 } = {}) => {
    const env = { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OWNMEM_'))),
      HOME: home, OWNMEM_VAULT: path.join(home, 'vault'), OWNMEM_PASSPHRASE: pass,
      PYTHONPATH: [path.join(ROOT, 'py'), ROOT].join(path.delimiter),
      ...(next ? { OWNMEM_NEW_PASSPHRASE: next } : {}) };
    const r = spawnSync(VENV_PY, ['-m', 'ownmem.cli', ...args], { cwd: ROOT, env, encoding: 'utf8', timeout: 120_000 });
    const out = `${r.stdout}${r.stderr}`;
    assert.equal(r.status, code, `ownmem ${args.join(' ')}: ${out}`);
    for (const p of [OLD, NEW, NEWER]) assert.ok(!out.includes(p), `a passphrase in the output of ownmem ${args[0]}`);
    return out;
  };
}

// ------------------------------------------------------------------ in the page

const text = (css) => document.querySelector(css)?.textContent ?? '';
const cards = () => [...document.querySelectorAll('[data-testid="memory-card"]')]
  .map((c) => [c.querySelector('[data-role="content"]').textContent, c.dataset.trust]);
const dialogOpen = (testid) => document.querySelector(`[data-testid="${testid}"]`)?.open === true;
const escapeIn = (css) => {
  const n = document.querySelector(css);
  n.focus();
  n.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true, cancelable: true }));
  return true;
};
const axeRun = async () => {
  const r = await window.axe.run(document, { resultTypes: ['violations'] });
  return { passes: r.passes.length, violations: r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map((n) => `${n.target.join(' ')}: ${n.failureSummary.replace(/\s+/g, ' ')}`) })) };
};

// ------------------------------------------------------------------ the flow, any engine

/**
 * @param {{ engine: string, evaluate: (fn: Function, arg?: any) => Promise<any>, goto: (url: string) => Promise<void>,
 *   inject: (source: string) => Promise<void>, ctrlEnter: () => Promise<void>,
 *   setViewport: (v: object) => Promise<any>, screenshot: (file: string, o: object) => Promise<any> }} view
 */
async function flow(view) {
  const ev = (fn, arg) => view.evaluate(fn, arg);
  const wait = (what, fn, timeout = OP_MS) => until(what, fn, timeout);
  // the app moves the focus once it has drawn (a dialog closed, an error shown): a loaded
  // machine reads it later than a test that reads at once, so every focus read waits
  const focusOn = (name, what) => wait(what, async () =>
    (await ev(() => document.activeElement?.id || document.activeElement?.dataset?.testid || '')) === name, 5_000);
  const tag = view.engine;
  const name = `pw-${tag}-${Date.now().toString(36)}`;
  const cli = cliOf(tag);
  // axe after each screenshot of the dialogs (screens.mjs capture calls it)
  view.check = async (screen, size) => {
    if (!await ev(() => typeof window.axe === 'object')) await view.inject(AXE);
    const r = await ev(axeRun);
    assert.ok(r.passes > 10, `axe ran its rules on ${screen} (${size})`);
    const bad = r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    assert.deepEqual(bad.map((v) => `${screen} (${size}) ${v.impact} ${v.id}: ${v.help}\n    ${v.nodes.join('\n    ')}`), [],
      `${tag}: axe found serious or critical violations`);
  };
  const unlockWith = async (pass) => {
    await fill(view, '[data-testid="unlock-form"] [data-testid="passphrase"]', pass);
    await click(view, '[data-testid="unlock-submit"]');
  };
  const allSelf = async (want) => {
    const got = await wait(`${want.length} memories listed`, async () => {
      const c = await ev(cards);
      return c.length === want.length && c;
    });
    assert.deepEqual(Object.fromEntries(got), Object.fromEntries(want.map((t) => [t, 'self'])), `${tag}: every memory is yours`);
  };
  const synced = () => wait('synced', () => ev(() => {
    const s = document.querySelector('[data-testid="sync-status"]');
    return s?.dataset.state === 'online' && s.dataset.pending === '0';
  }));

  // 1. the CLI's vault, opened in the browser from the server
  cli(['init']);
  cli(['add', 'written before, by the CLI']);
  cli(['login', '--server', origin, '--vault-name', name]);
  cli(['sync']);
  await view.goto(`${origin}/`);
  await showing(view, '[data-testid="tab-login"]', BOOT_MS);
  await click(view, '[data-testid="tab-login"]');
  await fill(view, '[data-testid="login-form"] [name="name"]', name);
  await fill(view, '[data-testid="login-form"] [name="passphrase"]', OLD);
  await click(view, '[data-testid="login-form"] [type="submit"]');
  await waitListed(view, BOOT_MS);
  await allSelf(['written before, by the CLI']);

  // 2. a wrong current passphrase: refused, nothing changed; Escape closes the dialog only
  await click(view, '[data-testid="settings-button"]');
  await showing(view, '[data-testid="passphrase-panel"]');
  await click(view, '[data-testid="passphrase-change-open"]');
  await showing(view, '[data-testid="change-dialog"]');
  await focusOn('change-current', 'the current passphrase has the focus');
  await fill(view, '#change-new', NEW);
  await fill(view, '#change-new2', NEW);
  await wait('the meter', async () => /Strength: (strong|very strong)/.test(await ev(text, '[data-testid="change-strength"]')));
  await fill(view, '#change-current', 'a guess at the unlocked phone');
  await view.ctrlEnter();
  const refused = await wait('the wrong current passphrase refused', () => ev(text, '[data-testid="change-form"] [data-role="error"]'));
  assert.equal(refused, 'That is not your current passphrase. Nothing changed.');
  await focusOn('change-current', 'the focus back in the current passphrase');
  assert.ok(!(await ev(() => [...document.querySelectorAll('[data-testid="change-dialog"] input[name^="passphrase"]')]
    .some((i) => i.value))), 'the fields are emptied');
  await fill(view, '#change-new', NEW);
  await wait('the meter', async () => /Strength: (strong|very strong)/.test(await ev(text, '[data-testid="change-strength"]')));
  await capture(view, 'passphrase-change', { fullPage: false });
  await ev(escapeIn, '[data-testid="change-cancel"]');
  await wait('Escape closes the dialog', async () => !(await ev(dialogOpen, 'change-dialog')), 5_000);
  assert.ok(await ev(() => !!document.querySelector('[data-testid="settings-view"]')), 'Settings still show');
  await focusOn('passphrase-change-open', 'the focus is back on the button');
  assert.match(cli(['sync']), /./, 'the server still takes the old passphrase');

  // ... the right one: changed here and on the server; the result says what it does and does not
  await click(view, '[data-testid="passphrase-change-open"]');
  await showing(view, '[data-testid="change-dialog"]');
  await fill(view, '#change-current', OLD);
  await fill(view, '#change-new', NEW);
  await fill(view, '#change-new2', NEW);
  await click(view, '[data-testid="change-submit"]');
  const said = await wait('the change made', () => ev(text, '[data-testid="changed-result"]'), OP_MS).catch(async (e) => {
    throw new Error(`${e.message}; the form says: ${await ev(text, '[data-testid="change-form"] [data-role="error"]')}`);
  });
  assert.match(said, new RegExp(`Your passphrase is changed here and on ${origin.replace(/[.]/g, '\\.')}`));
  assert.match(said, /the old passphrase opens nothing you write/);
  assert.match(said, /can still read what was written before/);
  assert.match(said, /Agents connected before now are disconnected: connect them again/);
  await capture(view, 'passphrase-changed', { fullPage: false });
  await click(view, '[data-testid="changed-done"]');
  await wait('the result closed', async () => !(await ev(dialogOpen, 'change-dialog')), 5_000);

  // 3. the CLI missed it: asked, the old one refused, the new one taken; the old one opens nothing there
  assert.match(cli(['sync'], { code: 1 }), /changed on another device/);
  assert.match(cli(['passphrase', 'update'], { next: OLD, code: 1 }), /wrong passphrase/);
  cli(['passphrase', 'update'], { next: NEW });
  await click(view, '[data-testid="settings-view"] [data-role="back"]');
  await waitListed(view);
  await fill(view, '[data-testid="add-content"]', 'written after the change, in the browser');
  await click(view, '[data-testid="add-submit"]');
  await allSelf(['written before, by the CLI', 'written after the change, in the browser']);
  await synced();
  cli(['sync'], { pass: NEW });
  const listed = JSON.parse(cli(['list', '--json'], { pass: NEW }));
  assert.deepEqual(Object.fromEntries(listed.map((m) => [m.content, m.trust])),
    { 'written before, by the CLI': 'self', 'written after the change, in the browser': 'self' });
  assert.match(cli(['list'], { pass: OLD, code: 1 }), /wrong passphrase/);

  // 4. the browser: the old passphrase refused at unlock, the new one opens it
  await click(view, '[data-testid="lock-button"]');
  await showing(view, '[data-testid="unlock-form"]');
  await unlockWith(OLD);
  await wait('the old passphrase refused', async () => /Wrong passphrase/.test(await ev(text, '[data-testid="unlock-form"] [data-role="error"]')));
  await unlockWith(NEW);
  await waitListed(view, BOOT_MS);
  await allSelf(['written before, by the CLI', 'written after the change, in the browser']);

  // 5. changed again on the CLI: the browser's Sync asks for the new one
  cli(['passphrase', 'change'], { pass: NEW, next: NEWER });
  // the live sync may have asked already; else the Sync button's sync does
  if (!(await ev(dialogOpen, 'update-dialog'))) await click(view, '[data-testid="sync-button"]');
  await showing(view, '[data-testid="update-dialog"]', OP_MS);
  assert.match(await ev(text, '[data-testid="update-form"]'),
    /Your passphrase was changed on another device\. Enter the new passphrase to keep syncing\./);
  await focusOn('update-new', 'the focus in the new passphrase');
  await capture(view, 'passphrase-update', { fullPage: false });
  assert.match(await ev(text, '[data-testid="sync-status"]'), /^\s*Paused/);
  assert.equal(await ev(() => document.querySelector('[data-testid="sync-status"]').title),
    'Sync paused: your passphrase was changed on another device');
  // "Not now": it says why nothing syncs; Sync asks again
  await click(view, '[data-testid="update-later"]');
  await wait('the dialog closed', async () => !(await ev(dialogOpen, 'update-dialog')), 5_000);
  assert.match(await ev(text, '#notice'), /Not syncing: your passphrase was changed on another device\. Press Sync/);
  await click(view, '[data-testid="sync-button"]');
  await showing(view, '[data-testid="update-dialog"]', OP_MS);
  await fill(view, '#update-new', NEW);             // this device's own, now the old one
  await click(view, '[data-testid="update-submit"]');
  assert.equal(await wait('a wrong new passphrase refused', () => ev(text, '[data-testid="update-form"] [data-role="error"]')),
    'That is not the new passphrase of this vault. Nothing changed: try again.');
  await fill(view, '#update-new', NEWER);
  await click(view, '[data-testid="update-submit"]');
  await wait('the dialog closed', async () => !(await ev(dialogOpen, 'update-dialog')));
  await synced();
  assert.match(await ev(text, '#notice'), /now uses the new passphrase and is syncing again/);
  await allSelf(['written before, by the CLI', 'written after the change, in the browser']);
  await click(view, '[data-testid="lock-button"]');
  await showing(view, '[data-testid="unlock-form"]');
  await unlockWith(NEW);
  await wait('the passphrase before refused', async () => /Wrong passphrase/.test(await ev(text, '[data-testid="unlock-form"] [data-role="error"]')));
  await unlockWith(NEWER);
  await waitListed(view, BOOT_MS);
  await allSelf(['written before, by the CLI', 'written after the change, in the browser']);
  await synced();
  assert.deepEqual(SMALL_TARGETS[tag] ?? [], [], `${tag}: touch targets under 44 px at phone size`);
}

// ------------------------------------------------------------------ the engines

for (const engine of ENGINES) {
  const title = engine === 'chromium' ? 'change the passphrase, the CLI takes it; the CLI changes it, the app asks' : 'the same';
  test(`${TITLE[engine]}: ${title}`, { skip: skipOf(engine), timeout: engine === 'webkit' ? 900_000 : 600_000 },
    () => withView(engine, { tmp, scriptMs: BOOT_MS }, flow));
}
