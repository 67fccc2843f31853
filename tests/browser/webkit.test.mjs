// The web app in WebKit (the engine of every browser on iPhone and iPad, and of Safari),
// which has no WebAssembly JSPI: the vault worker takes web/js/glue-sync.js (docs/web.md
// "Without JSPI").
//
//   node --test tests/browser/webkit.test.mjs
//
// A real `python -m server` on 127.0.0.1 serves a private copy of web/dist; WebKitGTK's
// MiniBrowser (--automation) runs under Xvfb and is driven over W3C WebDriver by
// WebKitWebDriver (Debian webkit2gtk-driver, xvfb; `python3 build.py setup` installs them).
// The W3C protocol is a handful of JSON-over-HTTP commands: spoken here with fetch, so no
// client library is needed.  Without the engine the tests skip, and fail under CI=true.
//
// Environment: WEBKIT_DRIVER (default /usr/bin/WebKitWebDriver), MINIBROWSER (default the
// Debian path below), XVFB (default /usr/bin/Xvfb); screenshots go to test-output/screenshots/
// (webkit-*-phone.png: 844 px high, 447 wide, the narrowest MiniBrowser's window gets) and /tmp/shots/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, selftestInPage, selftestVectors, stopProcess, until } from './helpers.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const DIST = path.join(ROOT, 'web', 'dist');
const VENV_PY = process.env.OWNMEM_PYTHON ?? path.join(ROOT, '.venv', 'bin', 'python');
const DRIVER = process.env.WEBKIT_DRIVER ?? '/usr/bin/WebKitWebDriver';
const MINIBROWSER = process.env.MINIBROWSER ?? '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser';
const XVFB = process.env.XVFB ?? '/usr/bin/Xvfb';
const SHOTS = [path.join(ROOT, 'test-output', 'screenshots'), '/tmp/shots'];
const PASS = 'correct horse battery staple 42';
const BOOT_MS = 180_000;     // Pyodide in WebKitGTK on a loaded 2-core machine
const OP_MS = 60_000;

const missing = [DRIVER, MINIBROWSER, XVFB].filter((p) => !fs.existsSync(p));
const skip = missing.length && process.env.CI !== 'true' ? `WebKit is not installed here (${missing.join(', ')})` : false;

let tmp, port, origin, serverProc, serverLog = '', xvfb, driverProc, driverUrl, session;
const procs = [];

// ------------------------------------------------------------------ processes

function start(cmd, args, env = {}) {
  const proc = spawn(cmd, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  proc.log = '';
  proc.stdout.on('data', (d) => { proc.log = (proc.log + d).slice(-20000); });
  proc.stderr.on('data', (d) => { proc.log = (proc.log + d).slice(-20000); });
  procs.push(proc);
  return proc;
}

// ------------------------------------------------------------------ W3C WebDriver

async function wd(method, route, body) {
  const r = await fetch(`${driverUrl}${route}`, {
    method, headers: { 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const out = await r.json();
  if (!r.ok) throw new Error(`WebDriver ${method} ${route}: ${out.value?.error}: ${out.value?.message}`);
  return out.value;
}

const cmd = (method, route, body) => wd(method, `/session/${session}${route}`, body);

const run = (script, ...args) => cmd('POST', '/execute/sync', { script, args });
const runAsync = (script, ...args) => cmd('POST', '/execute/async', { script, args });

async function find(css) {
  // a web element reference: {"element-6066-11e4-a6e7-4e8a9b15b0a3"-like key: id}
  return Object.values(await cmd('POST', '/element', { using: 'css selector', value: css }))[0];
}

async function click(css) {
  await waitFor(css);
  await cmd('POST', `/element/${await find(css)}/click`, {});
}

async function type(css, text) {
  await waitFor(css);
  const id = await find(css);
  await cmd('POST', `/element/${id}/clear`, {});
  await cmd('POST', `/element/${id}/value`, { text });
}

function waitFor(css, timeout = OP_MS) {
  return until(`${css} to show`, () => run('return !!document.querySelector(arguments[0]);', css), timeout);
}

function waitVault(timeout = OP_MS) {
  return until('the memory list', () => run(`
    const s = document.querySelector('[data-role="summary"]');
    return !!document.querySelector('[data-testid="add-form"]') && !!s && !!s.textContent
      && !s.textContent.startsWith('Opening');`), timeout);
}

function contents() {
  return run(`return [...document.querySelectorAll('[data-testid="memory-card"] [data-role="content"]')]
    .map((n) => n.textContent);`);
}

async function waitContents(pred, what, timeout = OP_MS) {
  try {
    return await until(what, async () => pred(await contents()), timeout);
  } catch (e) {
    // say what the screen shows: the cards and any error line
    const seen = await run(`return [...document.querySelectorAll('[data-testid="memory-card"], [role="alert"], .error')]
      .map((n) => n.textContent.trim().slice(0, 200));`).catch(() => []);
    throw new Error(`${e.message}; the screen shows ${JSON.stringify(seen)}`);
  }
}

async function shot(name) {
  const png = Buffer.from(await cmd('GET', '/screenshot'), 'base64');
  for (const dir of SHOTS) {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, `webkit-${name}.png`), png);
  }
  return png;
}

// ------------------------------------------------------------------ setup

before(async () => {
  if (skip) return;
  if (missing.length) throw new Error(`WebKit is missing under CI (${missing.join(', ')}): run \`python3 build.py setup\``);
  if (!fs.existsSync(path.join(DIST, 'precache.json'))) {
    throw new Error(`the web app is not built (${DIST} is missing): run \`python3 build.py build\` first`);
  }
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ownmem-webkit-'));
  const dataDir = path.join(tmp, 'data');
  const webDir = path.join(tmp, 'web');
  fs.mkdirSync(dataDir);
  fs.cpSync(DIST, webDir, { recursive: true });
  port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  serverProc = start(VENV_PY, ['-m', 'server', '--host', '127.0.0.1', '--port', String(port)],
    { OWNMEM_DATA_DIR: dataDir, OWNMEM_WEB_DIR: webDir });
  await until('the server to answer /health', async () => (await fetch(`${origin}/health`)).ok, 30_000);

  // A free display number: the lock file of :N is /tmp/.XN-lock.
  let display = 90 + Math.floor(Math.random() * 400);
  while (fs.existsSync(`/tmp/.X${display}-lock`)) display++;
  xvfb = start(XVFB, [`:${display}`, '-screen', '0', '1280x1024x24', '-nolisten', 'tcp']);
  await until('Xvfb', () => fs.existsSync(`/tmp/.X11-unix/X${display}`), 15_000);
  const driverPort = await freePort();
  driverUrl = `http://127.0.0.1:${driverPort}`;
  driverProc = start(DRIVER, [`--port=${driverPort}`, '--host=127.0.0.1'], { DISPLAY: `:${display}` });
  await until('WebKitWebDriver', async () => (await wd('GET', '/status')).ready !== undefined, 15_000);
  const s = await wd('POST', '/session', {
    capabilities: {
      alwaysMatch: {
        browserName: 'MiniBrowser',
        'webkitgtk:browserOptions': { binary: MINIBROWSER, args: ['--automation'] },
      },
    },
  });
  session = s.sessionId;
  await cmd('POST', '/timeouts', { script: BOOT_MS, pageLoad: 60_000, implicit: 0 });
}, { timeout: 120_000 });

// The viewport at phone size: the window's rect includes its frame, so correct by what the
// page measures.
async function phoneViewport(width = 390, height = 844) {
  let rect = { width, height };
  for (let i = 0; i < 4; i++) {
    await cmd('POST', '/window/rect', rect);
    const [w, h] = await run('return [window.innerWidth, window.innerHeight];');
    if (w === width && h === height) return [w, h];
    const now = await cmd('GET', '/window/rect');
    rect = { width: now.width + width - w, height: now.height + height - h };
  }
  return run('return [window.innerWidth, window.innerHeight];');
}

after(async () => {
  if (session) await wd('DELETE', `/session/${session}`).catch(() => {});
  for (const p of procs.reverse()) await stopProcess(p, 5000);
  if (serverLog.includes('Traceback') || serverProc?.log.includes('Traceback')) {
    console.log(`# server log (tail):\n${serverProc.log.slice(-4000)}`);
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

// ------------------------------------------------------------------ tests

test('WebKit: create, reload and unlock, add, edit and forget a memory', { skip, timeout: 600_000 }, async (t) => {
  await cmd('POST', '/url', { url: `${origin}/` });
  // MiniBrowser's window is at least 447 px wide (its toolbar): the narrowest it gets
  const [vw, vh] = await phoneViewport();
  assert.ok(vw <= 450 && vh === 844, `the phone-size viewport is ${vw}x${vh}`);
  // the engine has no JSPI: the app must start anyway
  assert.equal(await run('return typeof WebAssembly.Suspending;'), 'undefined', 'this WebKit has JSPI: the test proves nothing');
  await until('the welcome screen', () => run(`return !!document.querySelector('[data-testid="tab-create"]')
    || /could not start/.test(document.body.textContent);`), BOOT_MS);
  assert.ok(!(await run('return document.body.textContent;')).includes('could not start'),
    await run('return document.body.textContent;'));

  const name = `wk-${Date.now().toString(36)}`;
  await click('[data-testid="tab-create"]');
  await type('[data-testid="create-form"] [data-testid="vault-name"]', name);
  await type('[data-testid="create-form"] [data-testid="passphrase"]', PASS);
  await type('[data-testid="create-form"] [data-testid="passphrase2"]', PASS);
  await run(`const c = document.querySelector('[data-testid="create-form"] [data-testid="create-link"]');
    if (c && c.checked) c.click();`);
  await click('[data-testid="create-form"] [data-testid="create-submit"]');
  await waitVault(BOOT_MS);

  await type('[data-testid="add-content"]', 'I prefer tea over coffee');
  await click('[data-testid="add-submit"]');
  await waitContents((c) => c.includes('I prefer tea over coffee'), 'the first memory');
  await type('[data-testid="add-content"]', 'Forget me: an old address');
  await click('[data-testid="add-submit"]');
  await waitContents((c) => c.includes('Forget me: an old address'), 'the second memory');
  assert.deepEqual(await run(`return [...document.querySelectorAll('[data-testid="memory-card"]')].map((c) => c.dataset.trust);`),
    ['self', 'self']);

  // reload: the vault is in IndexedDB (written behind Python, before each answer)
  await cmd('POST', '/refresh', {});
  await waitFor('[data-testid="unlock-form"]', BOOT_MS);
  await type('[data-testid="unlock-form"] [data-testid="passphrase"]', PASS);
  await click('[data-testid="unlock-submit"]');
  await waitVault(BOOT_MS);
  await waitContents((c) => c.length === 2, 'both memories after the unlock');
  assert.deepEqual((await contents()).sort(), ['Forget me: an old address', 'I prefer tea over coffee']);
  await shot('list-phone');

  // edit
  await run(`const card = [...document.querySelectorAll('[data-testid="memory-card"]')]
    .find((c) => c.textContent.includes('I prefer tea over coffee'));
    card.querySelector('[data-testid="edit-button"]').click();`);
  // The text is set in one step: typed key by key over WebDriver, WebKit once lost the rest of
  // it after the first key (the editor rendered again while typing; not investigated here).
  await waitFor('[data-testid="edit-form"] [data-testid="edit-content"]');
  await run(`const t = document.querySelector('[data-testid="edit-form"] [data-testid="edit-content"]');
    t.value = arguments[0];
    t.dispatchEvent(new Event('input', { bubbles: true }));`, 'I prefer green tea over coffee');
  await click('[data-testid="edit-form"] [data-testid="edit-save"]');
  await waitContents((c) => c.includes('I prefer green tea over coffee') && !c.includes('I prefer tea over coffee'),
    'the edited memory');

  // forget
  await run(`const card = [...document.querySelectorAll('[data-testid="memory-card"]')]
    .find((c) => c.textContent.includes('Forget me: an old address'));
    card.querySelector('[data-testid="forget-button"]').click();`);
  await waitFor('[data-testid="forget-dialog"][open]');
  await click('[data-testid="forget-confirm"]');
  await waitContents((c) => !c.includes('Forget me: an old address'), 'the forgotten memory gone');

  // and so it stays after another reload
  await cmd('POST', '/refresh', {});
  await waitFor('[data-testid="unlock-form"]', BOOT_MS);
  await type('[data-testid="unlock-form"] [data-testid="passphrase"]', PASS);
  await click('[data-testid="unlock-submit"]');
  await waitVault(BOOT_MS);
  await waitContents((c) => c.length === 1, 'one memory after the second unlock');
  assert.deepEqual(await contents(), ['I prefer green tea over coffee']);

  // Settings name the provider of each primitive: JavaScript (noble) here.  After an unlock
  // the page asks `boot` in the background (nav.js enterVault); Settings opened before its
  // answer leave the rows out, so wait for it.
  await until('the worker\'s boot answer', () => runAsync(`const done = arguments[0];
    import('/js/state.js').then((m) => done(!!m.bootInfo()?.provider?.aes), () => done(false));`), OP_MS);
  await click('[data-testid="settings-button"]');
  await waitFor('[data-testid="settings-view"]');
  const settingsText = () => run(`return document.querySelector('[data-testid="settings-view"]').textContent;`);
  await until('the crypto line in Settings', async () => /Crypto/.test(await settingsText()), OP_MS)
    .catch(async () => assert.fail(JSON.stringify(await runAsync(`const done = arguments[0];
      import('/js/state.js').then((m) => done(m.bootInfo()), (e) => done(String(e)));`))));
  const settings = (await settingsText()).replace(/\s+/g, ' ');
  // Without JSPI the awaited operations (unlock, list, add, ...) use glue.js: WebCrypto where
  // WebKit has the primitive; the synchronous rest uses noble (docs/web.md "Without JSPI").
  const p = await runAsync(`const done = arguments[0];
    import('/js/state.js').then((m) => done(m.bootInfo().provider), (e) => done(String(e)));`);
  assert.equal(p.jspi, false, JSON.stringify(p));
  assert.equal(p.aes, 'webcrypto', JSON.stringify(p));
  assert.equal(p.sync_steps, 'noble', JSON.stringify(p));
  assert.equal(p.ed25519, p.webcrypto_ed25519 ? 'webcrypto' : 'noble', JSON.stringify(p));
  const by = (v) => (v === 'webcrypto' ? 'built into the browser' : 'JavaScript');
  t.diagnostic(`WebKit provider: ${JSON.stringify(p)}`);
  assert.ok(settings.includes(`without WebAssembly JSPI; AES-GCM, AES-KW, HKDF: built into the browser; `
    + `Ed25519: ${by(p.ed25519)}; X25519: ${by(p.x25519)}; ML-DSA-65: ${by(p.mldsa)}; Argon2id: hash-wasm (WebAssembly); `
    + 'sync, import, export, sharing: JavaScript'), settings);
  // shown, and painted: the screenshot follows two animation frames
  await until('Settings on screen', () => run(`const v = document.querySelector('[data-testid="settings-view"]');
    return !!v && v.getClientRects().length > 0 && !v.closest('[hidden]');`), OP_MS);
  await runAsync('const done = arguments[0]; requestAnimationFrame(() => requestAnimationFrame(() => done(true)));');
  await shot('settings-phone');
});

test('WebKit: the vector self-test passes in the vault worker (ApertoMemory v2, SAIHM example, KATs)', { skip, timeout: 600_000 }, async () => {
  const r = await runAsync(`(${selftestInPage})(arguments[0]).then(arguments[1]);`, selftestVectors(ROOT));
  assert.ok(r.ok, JSON.stringify(r));
  assert.deepEqual(r.result.failed, [], JSON.stringify(r.result.errors, null, 1));
  assert.deepEqual(r.result.errors, {});
  assert.equal(r.result.passed, 51, 'every group ran');
});
