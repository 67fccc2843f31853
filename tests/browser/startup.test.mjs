// The web app's start-up (docs/web.md "Start-up") in headless Chromium: the vault worker is
// started by the page's first script, before the page's own modules have loaded, and only once;
// the wheel is unzipped in JavaScript while Pyodide boots; the start-up marks are on the page's
// timeline in their order.
//
//   python3 build.py build && node --test tests/browser/startup.test.mjs
//
// OWNMEM_JSPI=0 opens /?jspi=0 (the worker's path without JSPI), as for app.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
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
