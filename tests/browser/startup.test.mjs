// The web app's start-up (docs/web.md "Start-up") in headless Chromium: the vault worker is
// started by the page's first script, before the page's own modules have loaded, and only once;
// the wheel is unzipped in JavaScript while Pyodide boots; the start-up marks are on the page's
// timeline in their order.  A first visit (through a counting proxy that paces what it passes
// on, as a slow link would): the create form shows before the engine is ready, a progress bar
// says "N of M MB" of the engine's real size as its bytes arrive, a vault created meanwhile
// opens once the engine is ready, and every file of the bundle crosses the network once,
// compressed, the service worker's offline copy included.
//
//   python3 build.py build && node --test tests/browser/startup.test.mjs
//
// OWNMEM_JSPI=0 opens /?jspi=0 (the worker's path without JSPI), as for app.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, serverDirs, stopProcess, until } from './helpers.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const DIST = path.join(ROOT, 'web', 'dist');
const VENV_PY = path.join(ROOT, '.venv', 'bin', 'python');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const APP_PATH = process.env.OWNMEM_JSPI === '0' ? '/?jspi=0' : '/';
const BOOT_MS = 120_000;
const require = createRequire(path.join(ROOT, 'package.json'));

let browser, dirs, proc, origin, log = '';

before(async () => {
  assert.ok(fs.existsSync(path.join(DIST, 'index.html')), 'web/dist is missing: run python3 build.py build first');
  dirs = serverDirs(DIST, 'ownmem-startup-');
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

/** Runs before the page's scripts: records every Worker the page creates, and when. */
function recordWorkers() {
  const made = [];
  window.__workers = made;
  const PageWorker = window.Worker;
  window.Worker = class extends PageWorker {
    constructor(url, ...rest) {
      super(url, ...rest);
      made.push({ url: String(url), at: performance.now(), appRan: performance.getEntriesByName('ownmem:app').length > 0 });
    }
  };
}

const marksOf = (page) => page.evaluate(() => Object.fromEntries(performance.getEntriesByType('mark')
  .filter((m) => m.name.startsWith('ownmem:')).map((m) => [m.name.slice(7), m.startTime])));

test('the vault worker starts before the page modules, once; the wheel is unzipped in JS; the marks are in order', { timeout: 2 * BOOT_MS }, async () => {
  const ctx = await browser.newContext();
  const errors = [];
  ctx.on('weberror', (e) => errors.push(String(e.error()?.message || e.error())));
  await ctx.addInitScript(recordWorkers);
  const page = await ctx.newPage();
  await page.goto(origin + APP_PATH);
  // a fresh browser: the welcome screen once the engine answered `boot`, i.e. it is ready
  await page.waitForSelector('[data-testid="tab-login"]', { timeout: BOOT_MS });
  const marks = await until('the worker\'s ready mark', async () => {
    const m = await marksOf(page);
    return 'ready' in m ? m : null;
  }, BOOT_MS);
  const workers = (await page.evaluate(() => window.__workers)).filter((w) => new URL(w.url).pathname === '/js/worker.js');
  assert.equal(workers.length, 1, `one vault worker: ${JSON.stringify(workers)}`);
  assert.equal(workers[0].appRan, false, 'the vault worker was created before app.js ran');
  assert.ok(marks['worker-new'] <= marks.app, `worker-new ${marks['worker-new']} before app ${marks.app}`);
  assert.ok(!('wheel-unpacked-python' in marks), 'Chromium inflates the wheel in JavaScript, not in Python');
  const order = ['worker-new', 'worker-created', 'worker', 'pyodide', 'wheel-unpacked', 'imported', 'ready'];
  for (const k of order) assert.ok(k in marks, `mark ${k} is on the page's timeline: ${JSON.stringify(marks)}`);
  for (let i = 1; i < order.length; i++) {
    assert.ok(marks[order[i - 1]] <= marks[order[i]] + 1, `${order[i - 1]} before ${order[i]}: ${JSON.stringify(marks)}`);
  }
  assert.ok(marks['wheel-fetched'] <= marks['wheel-unpacked'] + 1, 'the wheel is fetched before it is written');
  assert.deepEqual(errors, []);
  await ctx.close();
});

// A pass-through proxy to the server that counts, per URL (path and query: with ?jspi=0 the page
// asks for /js/worker.js?jspi=0, another URL than the service worker's /js/worker.js), the
// answers that carried a body and their bytes as sent (compressed or not), and passes bodies on
// in paced pieces (about 6 MB/s).
function countingProxy(target) {
  const t = new URL(target);
  const seen = new Map();   // path?query -> { bodies, bytes, statuses: [] }
  const server = http.createServer((req, res) => {
    const u = new URL(req.url, 'http://x');
    const p = u.pathname + u.search;
    const up = http.request({ host: t.hostname, port: t.port, method: req.method, path: req.url,
      headers: { ...req.headers, host: t.host } }, async (r) => {
      res.writeHead(r.statusCode, r.headers);
      const s = seen.get(p) ?? { bodies: 0, bytes: 0, statuses: [] };
      seen.set(p, s);
      s.statuses.push(r.statusCode);
      let first = true;
      for await (const chunk of r) {
        if (first && chunk.length) s.bodies++;
        first = false;
        for (let i = 0; i < chunk.length; i += 65536) {
          const piece = chunk.subarray(i, i + 65536);
          s.bytes += piece.length;
          res.write(piece);
          await new Promise((done) => setTimeout(done, 10));
        }
      }
      res.end();
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, seen,
    origin: `http://127.0.0.1:${server.address().port}` })));
}

/** Runs before the page's scripts: every text the engine's progress line shows, and when the create form came. */
function recordProgress() {
  window.__progress = [];
  new MutationObserver(() => {
    const text = document.getElementById('engine-progress-text');
    const bar = document.getElementById('engine-progress');
    if (text && bar && !bar.hidden && text.textContent !== window.__progress.at(-1)) window.__progress.push(text.textContent);
    if (!window.__formAt && document.querySelector('[data-testid="create-form"]')) window.__formAt = performance.now();
  }).observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
}

test('a first visit: the form at once, MB of MB as the engine arrives, each file over the network once', { timeout: 3 * BOOT_MS }, async () => {
  const proxy = await countingProxy(origin);
  const ctx = await browser.newContext();
  const errors = [];
  ctx.on('weberror', (e) => errors.push(String(e.error()?.message || e.error())));
  await ctx.addInitScript(recordProgress);
  try {
    const page = await ctx.newPage();
    await page.goto(proxy.origin + APP_PATH);
    // the create form, before the engine is ready: typed into and submitted while it loads
    const form = page.locator('[data-testid="create-form"]');
    await form.waitFor({ timeout: 30_000 });
    const early = await marksOf(page);
    assert.ok(!('ready' in early), `the create form showed only once the engine was ready: ${JSON.stringify(early)}`);
    await form.locator('[data-testid="vault-name"]').fill('first-visit');
    await form.locator('[data-testid="passphrase"]').fill('correct horse battery staple 42');
    await form.locator('[data-testid="passphrase2"]').fill('correct horse battery staple 42');
    await form.locator('[data-testid="create-link"]').setChecked(false);
    await form.locator('[data-testid="create-submit"]').click();
    await page.waitForSelector('[data-testid="add-form"], #add-content', { timeout: BOOT_MS });
    const marks = await marksOf(page);
    assert.ok(marks['argon2-start'] < marks.ready, `the create's Argon2id started before the engine was ready: ${JSON.stringify(marks)}`);
    assert.ok(await page.locator('[data-testid="engine-progress"]').isHidden(), 'the progress line is gone once the engine is ready');

    // the progress line: "N of M MB", M what the engine's files weigh over the network (each its
    // Brotli copy's size where the server has one: Chromium accepts br), N rising to M
    const list = JSON.parse(fs.readFileSync(path.join(dirs.webDir, 'precache.json'), 'utf8'));
    const wheel = Object.keys(list.files).find((f) => /^\/wheels\/ownmem-.*\.whl$/.test(f));
    const sent = (f) => { const br = path.join(dirs.webDir, `${f}.br`); return fs.existsSync(br) ? fs.statSync(br).size : list.sizes[f]; };
    const total = ['/pyodide/pyodide.asm.wasm', '/pyodide/python_stdlib.zip', '/pyodide/pyodide-lock.json', wheel]
      .reduce((n, f) => n + sent(f), 0);
    const all = await page.evaluate(() => window.__progress);
    // once every byte is in, the line says the engine is starting (Pyodide's own boot)
    const texts = all.filter((t) => t !== 'Starting the vault engine…');
    assert.ok(all.length > texts.length, `the line said "Starting the vault engine…" at the end: ${JSON.stringify(all)}`);
    const read = texts.map((t) => /^Loading the vault engine: (\d+\.\d) of (\d+\.\d) MB$/.exec(t));
    assert.ok(read.length >= 2 && read.every(Boolean), `progress texts: ${JSON.stringify(texts)}`);
    for (const m of read) assert.equal(m[2], (total / 1e6).toFixed(1), `the total is the engine's bytes as sent: ${JSON.stringify(texts)}`);
    const loaded = read.map((m) => Number(m[1]));
    assert.ok(loaded.some((n) => n > 0 && n < total / 1e6), `a value between 0 and the total: ${JSON.stringify(texts)}`);
    for (let i = 1; i < loaded.length; i++) assert.ok(loaded[i] >= loaded[i - 1], `never backwards: ${JSON.stringify(texts)}`);

    // the service worker's copy: every file of the bundle, none of them fetched a second time
    await page.waitForFunction(async (n) => {
      const names = (await caches.keys()).filter((k) => k.startsWith('ownmem-'));
      return names.length === 1 && (await (await caches.open(names[0])).keys()).length === n;
    }, Object.keys(list.files).length + 1, { timeout: BOOT_MS });
    // (the proxy's count of a file's last piece may trail the cache's put by a moment)
    await until('every file through the proxy', () => Object.keys(list.files).every((f) => proxy.seen.has(f)), 10_000)
      .catch(() => {});
    const twice = [...proxy.seen].filter(([p, s]) => !p.startsWith('/v1/') && s.bodies > 1);
    assert.deepEqual(twice, [], 'a file crossed the network twice');
    // every file is in the cache (above) and none crossed twice; the proxy's count of a file the
    // service worker alone fetches (the stemmer's wheel) can still trail its cache put on a
    // loaded machine, so a count of 0 is the count not yet in, never a second download
    for (const f of Object.keys(list.files)) {
      if (f !== '/sw.js') assert.ok((proxy.seen.get(f)?.bodies ?? 0) <= 1, `${f} was fetched once: ${JSON.stringify([...proxy.seen])}`);
    }
    const bytes = [...proxy.seen].filter(([p]) => !p.startsWith('/v1/')).reduce((n, [, s]) => n + s.bytes, 0);
    assert.ok(bytes <= 12e6, `a first visit is at most 12 MB over the network: ${bytes}`);
    assert.ok(bytes < 0.7 * Object.values(list.sizes).reduce((a, b) => a + b, 0), `compressed: ${bytes} bytes`);
    console.log(`first visit: ${(bytes / 1e6).toFixed(2)} MB over the network for ${Object.keys(list.files).length} files; `
      + `progress ${JSON.stringify(texts.slice(0, 3))}... (${texts.length} steps)`);
    assert.deepEqual(errors, []);
  } finally {
    await ctx.close();
    proxy.server.closeAllConnections?.();
    proxy.server.close();
  }
});
