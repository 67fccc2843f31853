// Area `web` of the benchmarks, the browser half: one engine per run of this file, driving the
// real PWA served by `python -m server`.  benchmarks/web.py prepares the server and the vaults,
// runs this file once per engine and turns its JSON into the report.
//
//   node benchmarks/web_bench.mjs CONFIG.json      (writes config.out)
//
// Engines (config.engine), each as tests/browser/ drives it:
//   chromium   headless Chromium through playwright-core; config.jspi false opens /?jspi=0,
//              the vault worker's path without WebAssembly JSPI (docs/web.md)
//   firefox    Firefox ESR, headless, through puppeteer-core over WebDriver BiDi
//   webkit     WebKitGTK's MiniBrowser under Xvfb, over W3C WebDriver (WebKitWebDriver), spoken
//              with fetch as tests/browser/webkit.test.mjs does
//
// Every figure is taken inside the page with performance.now(), whose origin is the start of
// the navigation, so neither the driver's round trips nor node's clock are in it.  A probe
// stands in for the person: it types the passphrase the moment the form is in the document
// (form.requestSubmit(), as the Enter key would), or with waitEngine the moment the vault
// worker says "ready", and watches the DOM with a MutationObserver for the moment the list is
// there: the summary shows the expected count and the list holds its first cards.  "Visible"
// is the first frame after that (requestAnimationFrame, then a task: the frame was produced).
// Chromium and Firefox install the probe before any script of the page (an init / preload
// script); W3C WebDriver has no such hook, so in WebKit the probe is installed by polling the
// new document as it loads (pageLoadStrategy "none"): it may land after the form shows (then
// the passphrase goes in when it lands, and the figure includes that delay: the run says
// `late`), and it cannot see the worker's "ready" (WebKit's unlock is submitted when the
// probe lands, so its figure includes what is left of the engine's boot).
//
// The browser reaches the server through a counting pass-through proxy on 127.0.0.1 (the
// page's origin): it records every request for an app file (not the sync API), so "every
// file from the service worker" is checked the same way in every engine.  The browser's own
// check for a new service worker script (/sw.js, which by specification bypasses the
// service worker) is counted apart.  It also counts, per path, the answers that carried a
// body and their bytes as sent (compressed or not): a first visit's bytes over the network,
// and whether any file crossed it twice (the fresh browser's load, until its service worker
// has installed and controls the page).
//
// Chromium alone also opens the app in a fresh profile under DevTools' "Fast 4G" with 4x CPU
// throttling (CDP Network.emulateNetworkConditions, which Chromium applies to the page's
// vault worker and service worker too, and Emulation.setCPUThrottlingRate): the moment the
// create form is in the document (the first usable screen: it can be typed into and
// submitted), and the moment the engine is ready (a submitted form completes).
import { createRequire } from 'node:module';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, sleep, stopProcess, until } from '../tests/browser/helpers.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..');
const require = createRequire(path.join(ROOT, 'package.json'));
const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));

const VIEWPORT = { width: 1280, height: 800 };
const say = (msg) => console.log(`  [${cfg.label}] ${msg}`);
const out = { engine: cfg.engine, label: cfg.label, version: '', runs: {}, added: {}, notes: [] };
let origin = '';   // the proxy's; set in main()

// ------------------------------------------------------------------ the page side

/** Runs in the page: before any of its scripts (Chromium, Firefox) or as early as the driver can (WebKit). */
function pageProbe(p) {
  if (window.__bench) return;
  const B = { marks: {}, cards: 0, first: '', summary: '', late: false, error: '' };
  window.__bench = B;
  const mark = (k) => { if (!(k in B.marks)) B.marks[k] = performance.now(); };
  mark('installed');
  const fill = (form, testid, value) => { form.querySelector(`[data-testid="${testid}"]`).value = value; };
  const check = () => {
    if (p.mode === 'unlock' && !B.marks.submit) {
      if (document.querySelector('[data-testid="tab-login"]')) B.error = 'the welcome screen, not the unlock form';
      const form = document.querySelector('[data-testid="unlock-form"]');
      if (form) mark('form');
      if (form && p.waitEngine && p.engineBy === 'status' && !B.asked) {
        // No hook on the worker (WebKit): a `status` call, answered once the engine is ready and
        // has read the store from IndexedDB (its first Python call), stands in for "ready".
        // Sent once the form shows: the page's client exists by then.
        B.asked = true;
        import('/js/vault.js').then((m) => m.call('status')).then(() => {
          mark('engine');
          check();
        }, (e) => { B.error = `status: ${e.message || e}`; });
      }
      if (form && (!p.waitEngine || B.marks.engine)) {
        fill(form, 'passphrase', p.passphrase);
        form.requestSubmit();
        mark('submit');
      }
    } else if (p.mode === 'login' && !B.marks.submit) {
      if (document.querySelector('[data-testid="unlock-form"]')) B.error = 'an unlock form in a fresh browser';
      const tab = document.querySelector('[data-testid="tab-login"]');
      if (tab && !B.marks.form) {
        mark('form');
        tab.click();
      }
      const form = document.querySelector('[data-testid="login-form"]');
      if (form) {
        fill(form, 'server-url', location.origin);
        fill(form, 'vault-name', p.name);
        fill(form, 'passphrase', p.passphrase);
        form.requestSubmit();
        mark('submit');
      }
    }
    if (B.marks.submit && !B.marks.dom) {
      const summary = document.querySelector('[data-role="summary"]');
      const list = document.querySelector('[data-testid="memory-list"]');
      const m = summary && /^([\d,.\s]+) memor/.exec(summary.textContent || '');
      if (m && Number(m[1].replace(/\D/g, '')) === p.expect && list && list.children.length > 0) {
        mark('dom');
        B.summary = summary.textContent;
        B.cards = list.querySelectorAll('[data-testid="memory-card"]').length;
        B.first = list.querySelector('[data-testid="memory-card"] [data-role="content"]')?.textContent || '';
        requestAnimationFrame(() => setTimeout(() => mark('visible'), 0));
      }
    }
  };
  // installed after the form showed (WebKit): the passphrase goes in now, and the run says so
  B.late = !!document.querySelector('[data-testid="unlock-form"], [data-testid="tab-login"]');
  new MutationObserver(check).observe(document, { subtree: true, childList: true, characterData: true });
  if (p.engineBy === 'ready') {
    // The vault worker says "ready" once Pyodide and the wheel are loaded (web/js/worker.js).
    const PageWorker = window.Worker;
    window.Worker = class extends PageWorker {
      constructor(...args) {
        super(...args);
        this.addEventListener('message', (e) => {
          if (e.data && e.data.event === 'ready') {
            mark('engine');
            check();
          }
        });
      }
    };
  }
  check();
}

/** Runs in the page before its scripts (Chromium): a first visit, no vault: when the create form
 * is in the document and in a frame, and when the vault worker says "ready". */
function firstProbe() {
  const B = { marks: {} };
  window.__first = B;
  const mark = (k) => { if (!(k in B.marks)) B.marks[k] = performance.now(); };
  new MutationObserver(() => {
    if (!B.marks.form && document.querySelector('[data-testid="create-form"]')) {
      mark('form');
      requestAnimationFrame(() => setTimeout(() => mark('visible'), 0));
    }
  }).observe(document, { subtree: true, childList: true });
  const PageWorker = window.Worker;
  window.Worker = class extends PageWorker {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (e) => { if (e.data && e.data.event === 'ready') mark('engine'); });
    }
  };
}

/** In an unlocked page: add one memory through the add form; ms until its card is in a frame. */
function pageAdd(text) {
  const form = document.querySelector('[data-testid="add-form"]');
  const main = document.getElementById('main');
  const shown = () => [...document.querySelectorAll('[data-testid="memory-card"] [data-role="content"]')]
    .some((n) => n.textContent === text);
  return new Promise((resolve, reject) => {
    let t0 = 0;
    const timer = setTimeout(() => { mo.disconnect(); reject(new Error(`"${text}" did not show in 60 s`)); }, 60000);
    const mo = new MutationObserver(() => {
      if (!shown()) return;
      const dom = performance.now() - t0;
      mo.disconnect();
      clearTimeout(timer);
      requestAnimationFrame(() => setTimeout(() => resolve({ dom, visible: performance.now() - t0 }), 0));
    });
    mo.observe(main, { subtree: true, childList: true, characterData: true });
    form.querySelector('[data-testid="add-content"]').value = text;
    t0 = performance.now();
    form.requestSubmit();
  });
}

/** In an unlocked page: the worker's `search` (web/js/vault.js call, as the list screen asks it),
 * ms per call.  The first call builds the index (the stemmer's wheel fetched and unpacked, every
 * listed memory stemmed); then each query `reps` times, in turn. */
async function pageSearch({ queries, reps }) {
  const m = await import('/js/vault.js');
  const timed = async (query) => {
    const t = performance.now();
    const r = await m.call('search', { query });
    return { ms: performance.now() - t, hits: r.ids.length };
  };
  const first = await timed(queries[0]);
  const times = [];
  const hits = {};
  for (let i = 0; i < reps; i++) {
    for (const q of queries) {
      const r = await timed(q);
      times.push(r.ms);
      hits[q] = r.hits;
    }
  }
  return { build: first.ms, times, hits };
}

function pageState() {
  return {
    bench: window.__bench || null,
    // the app's start-up marks (web/js/client.js), ms from navigation start
    marks: Object.fromEntries(performance.getEntriesByType('mark').filter((m) => m.name.startsWith('ownmem:'))
      .map((m) => [m.name.slice(7), Math.round(m.startTime)])),
    controlled: Boolean(navigator.serviceWorker && navigator.serviceWorker.controller),
  };
}

function pageSynced() {
  const s = document.querySelector('[data-testid="sync-status"]');
  return Boolean(s && s.dataset.state === 'online' && s.dataset.pending === '0');
}

// Where the time goes: the vault engine's own speed in this engine, apart from the app.  In
// the page: Pyodide loaded from the bundle, the wheel unpacked, then three fixed Python
// workloads, each timed in Python (ms): the interpreter (a loop), C code compiled to
// WebAssembly (json), the import of the vault modules (bytecode read and run).
const SPEED_PY = `
import time
t = time.perf_counter(); s = sum(i * i for i in range(300_000)); loop = time.perf_counter() - t
import json
t = time.perf_counter(); json.loads(json.dumps([{"k": i, "v": "x" * 20} for i in range(20_000)])); js = time.perf_counter() - t
t = time.perf_counter(); import ownmem.vault, ownmem.web.api; imp = time.perf_counter() - t
[round(loop * 1000), round(js * 1000), round(imp * 1000)]`;

async function pageSpeed(py) {
  const t0 = performance.now();
  const m = await import('/pyodide/pyodide.mjs');
  const pyodide = await m.loadPyodide({ indexURL: '/pyodide/' });
  const boot = performance.now() - t0;
  const list = await (await fetch('/precache.json')).json();
  const wheel = Object.keys(list.files).find((f) => f.startsWith('/wheels/ownmem-') && f.endsWith('.whl'));
  let loop, json, imp;
  try {
    pyodide.unpackArchive(await (await fetch(wheel)).arrayBuffer(), 'wheel');
    [loop, json, imp] = pyodide.runPython(py).toJs();
  } catch (e) {
    // the boot's figure still tells (the diagnosis run with JSC options has failed here: see web.py)
    return { boot, error: String(e.message || e).slice(0, 200) };
  }
  // and the JavaScript crypto the path without JSPI runs (glue-sync.js: @noble/*), next to
  // WebCrypto's AES-GCM that the JSPI path uses: ms for each batch
  const v = await import('/vendor/vendor.js');
  const timed = async (f) => { const t = performance.now(); await f(); return performance.now() - t; };
  const seed = new Uint8Array(32).fill(7);
  const msg = new Uint8Array(200).fill(1);
  const sig = v.nobleEd25519.sign(msg, seed);
  const pub = v.nobleEd25519.getPublicKey(seed);
  const ed = await timed(() => { for (let i = 0; i < 200; i++) v.nobleEd25519.verify(sig, msg, pub, { zip215: false }); });
  const pair = v.ml_dsa65.keygen(seed);
  const msig = v.ml_dsa65.sign(msg, pair.secretKey);
  const mldsa = await timed(() => { for (let i = 0; i < 50; i++) v.ml_dsa65.verify(msig, msg, pair.publicKey); });
  const key = new Uint8Array(32).fill(3);
  const nonce = new Uint8Array(12).fill(4);
  const ct = v.nobleGcm(key, nonce, new Uint8Array(0)).encrypt(new Uint8Array(1024).fill(5));
  const gcm = await timed(() => { for (let i = 0; i < 1000; i++) v.nobleGcm(key, nonce, new Uint8Array(0)).decrypt(ct); });
  const ck = await crypto.subtle.importKey('raw', key, 'AES-GCM', false, ['decrypt']);
  const wc = await timed(() => Promise.all(Array.from({ length: 1000 },
    () => crypto.subtle.decrypt({ name: 'AES-GCM', iv: nonce, additionalData: new Uint8Array(0) }, ck, ct))));
  return { boot, loop, json, import: imp, ed25519: ed, mldsa, gcm, webcrypto_gcm: wc };
}

/** Bytes of the verified cache's record in IndexedDB (one AES-GCM blob, decrypted at every unlock). */
function pageCacheBytes() {
  return new Promise((resolve) => {
    const r = indexedDB.open('ownmem');
    r.onerror = () => resolve(null);
    r.onsuccess = () => {
      const db = r.result;
      try {
        const q = db.transaction(['cache'], 'readonly').objectStore('cache').get('verified-v1');
        q.onsuccess = () => { db.close(); resolve(q.result ? q.result.byteLength ?? q.result.length ?? null : null); };
        q.onerror = () => { db.close(); resolve(null); };
      } catch {
        db.close();
        resolve(null);
      }
    };
  });
}

async function pageServiceWorker() {
  if (!navigator.serviceWorker) return false;
  await navigator.serviceWorker.ready;
  return true;
}

// ------------------------------------------------------------------ the counting proxy

/** A pass-through HTTP proxy to the server; `traffic` counts the app files it was asked for. */
function startProxy(target) {
  const t = new URL(target);
  const traffic = { files: [], swChecks: 0, sent: new Map() };   // sent: path?query -> { bodies, bytes }
  const server = http.createServer((req, res) => {
    const p = new URL(req.url, 'http://x').pathname;
    const app = !p.startsWith('/v1/') && p !== '/v1' && p !== '/health';
    if (p === '/sw.js') traffic.swChecks++;
    else if (app) traffic.files.push(p);
    const up = http.request({ host: t.hostname, port: t.port, method: req.method, path: req.url,
      headers: { ...req.headers, host: t.host } }, (r) => {
      res.writeHead(r.statusCode, r.headers);
      if (app) {
        // per URL: with ?jspi=0 the page's /js/worker.js?jspi=0 is another URL than the service worker's
        const url = p + new URL(req.url, 'http://x').search;
        const sent = traffic.sent.get(url) ?? { bodies: 0, bytes: 0 };
        traffic.sent.set(url, sent);
        let first = true;
        r.on('data', (chunk) => {
          if (first && chunk.length) sent.bodies++;
          first = false;
          sent.bytes += chunk.length;
        });
      }
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    res.on('close', () => up.destroy());
    req.pipe(up);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, traffic,
    origin: `http://127.0.0.1:${server.address().port}` })));
}

// ------------------------------------------------------------------ engines
//
// An engine makes devices (a fresh browser profile each: no service worker, no HTTP cache, no
// IndexedDB); a device opens the app in a page (`open`) and runs functions in it (`run`).

// DevTools' "Fast 4G" preset (devtools-frontend front_end/core/sdk/NetworkManager.ts,
// Fast4GConditions): 9 Mbit/s down and 1.5 Mbit/s up, each x 0.9, latency 60 ms x 2.75
const FAST_4G = { offline: false, latency: 60 * 2.75, downloadThroughput: 9e6 / 8 * 0.9, uploadThroughput: 1.5e6 / 8 * 0.9 };
const CPU_SLOWDOWN = 4;

async function chromiumEngine() {
  const { chromium } = require('playwright-core');
  const browser = await chromium.launch({ executablePath: cfg.chromium, args: ['--headless=new', '--no-sandbox',
    '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] });
  out.version = `Chromium ${browser.version()}`;
  return {
    async device(label, { throttled = false } = {}) {
      const ctx = await browser.newContext({ viewport: VIEWPORT });
      ctx.on('weberror', (e) => console.error(`  [${label} error] ${e.error()?.message || e.error()}`));
      let page = null;
      return {
        async open(url, probe, script = pageProbe) {   // a new page of this profile
          if (page) await page.close();
          page = await ctx.newPage();
          if (throttled) {
            const cdp = await ctx.newCDPSession(page);
            await cdp.send('Network.enable');
            await cdp.send('Network.emulateNetworkConditions', FAST_4G);
            await cdp.send('Emulation.setCPUThrottlingRate', { rate: CPU_SLOWDOWN });
          }
          if (probe) await page.addInitScript(script, probe);
          await page.goto(url, { waitUntil: 'commit' });
        },
        run: (fn, arg) => page.evaluate(fn, arg),
        close: () => ctx.close(),
      };
    },
    close: () => browser.close(),
  };
}

async function firefoxEngine() {
  const puppeteer = require('puppeteer-core');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ownmem-bench-firefox-'));
  const browsers = [];
  return {
    async device(label) {   // a Firefox of its own with a fresh profile directory
      const browser = await puppeteer.launch({
        browser: 'firefox', protocol: 'webDriverBiDi', executablePath: cfg.firefox, headless: true,
        userDataDir: fs.mkdtempSync(path.join(tmp, `${label}-`)),
        // navigator.storage.persist() asks the person with a prompt; answered here, as in the tests
        extraPrefsFirefox: { 'dom.storageManager.prompt.testing': true, 'dom.storageManager.prompt.testing.allow': true },
      });
      browsers.push(browser);
      out.version ||= `Firefox ${(await browser.version()).replace(/^firefox\//i, '')}`;
      let page = (await browser.pages())[0] ?? null;
      let fresh = true;
      return {
        async open(url, probe) {   // a new tab of this profile (the first: the browser's own)
          const old = fresh ? null : page;
          if (!page || !fresh) page = await browser.newPage();
          fresh = false;
          page.on('pageerror', (e) => console.error(`  [${label} error] ${e.message}`));
          await page.setViewport(VIEWPORT);
          if (probe) await page.evaluateOnNewDocument(pageProbe, probe);
          if (old) await old.close();
          await page.goto(url, { waitUntil: 'domcontentloaded' });
        },
        run: (fn, arg) => page.evaluate(fn, arg),
        async close() {
          await browser.close();
          browsers.splice(browsers.indexOf(browser), 1);
        },
      };
    },
    async close() {
      for (const b of browsers) await b.close().catch(() => {});
      fs.rmSync(tmp, { recursive: true, force: true });
    },
  };
}

async function webkitEngine() {
  const procs = [];
  const start = (cmd, args, env = {}) => {
    const proc = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
    proc.log = '';
    proc.stderr.on('data', (d) => { proc.log = (proc.log + d).slice(-8000); });
    procs.push(proc);
    return proc;
  };
  let display = 90 + Math.floor(Math.random() * 400);
  while (fs.existsSync(`/tmp/.X${display}-lock`)) display++;
  start(cfg.xvfb, [`:${display}`, '-screen', '0', '1600x1200x24', '-nolisten', 'tcp']);
  await until('Xvfb', () => fs.existsSync(`/tmp/.X11-unix/X${display}`), 15_000);
  const driverUrl = `http://127.0.0.1:${await freePort()}`;
  // cfg.jsc_env (JSC_* options for the engine's JavaScriptCore, inherited by MiniBrowser's web
  // process): only for the speed-only diagnosis run (benchmarks/web.py), never for judged figures
  start(cfg.webkit_driver, [`--port=${new URL(driverUrl).port}`, '--host=127.0.0.1'],
    { DISPLAY: `:${display}`, ...(cfg.jsc_env || {}) });
  const wd = async (method, route, body) => {
    const r = await fetch(`${driverUrl}${route}`, { method, headers: { 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body) });
    const v = (await r.json()).value;
    if (!r.ok) throw new Error(`WebDriver ${method} ${route}: ${v?.error}: ${v?.message}`);
    return v;
  };
  await until('WebKitWebDriver', async () => (await wd('GET', '/status')).ready !== undefined, 15_000);
  const sessions = [];
  return {
    async device() {   // a new WebDriver session: a new MiniBrowser with an ephemeral profile
      const s = await wd('POST', '/session', { capabilities: { alwaysMatch: {
        browserName: 'MiniBrowser', pageLoadStrategy: 'none',
        'webkitgtk:browserOptions': { binary: cfg.minibrowser, args: ['--automation'] } } } });
      const id = s.sessionId;
      sessions.push(id);
      out.version ||= `WebKitGTK ${s.capabilities.browserVersion} (MiniBrowser)`;
      const cmd = (method, route, body) => wd(method, `/session/${id}${route}`, body);
      await cmd('POST', '/timeouts', { script: cfg.fresh_timeout_ms, pageLoad: 300_000, implicit: 0 });
      // the viewport at 1280x800: the window's rect includes its frame, so correct by what the page measures
      let rect = { ...VIEWPORT };
      for (let i = 0; i < 3; i++) {
        await cmd('POST', '/window/rect', rect);
        const [w, h] = await cmd('POST', '/execute/sync', { script: 'return [innerWidth, innerHeight];', args: [] });
        if (w === VIEWPORT.width && h === VIEWPORT.height) break;
        rect = { width: rect.width + VIEWPORT.width - w, height: rect.height + VIEWPORT.height - h };
      }
      const run = async (fn, arg) => {
        const r = await cmd('POST', '/execute/async', { script: `const done = arguments[1];
          Promise.resolve().then(() => (${fn})(arguments[0])).then((v) => done({ v }), (e) => done({ e: String(e) }));`,
        args: [arg ?? null] });
        if (r.e) throw new Error(r.e);
        return r.v;
      };
      return {
        async open(url, probe) {   // the same tab, navigated afresh (W3C WebDriver has no init script)
          await cmd('POST', '/url', { url });
          // the new document: at the app's URL and without the previous document's probe
          await until('the new document', () => cmd('POST', '/execute/sync', { script: `
            if (location.href !== arguments[1] || window.__bench) return false;
            if (arguments[0]) (${pageProbe})(arguments[0]);
            return true;`, args: [probe, url] }), 60_000);
        },
        run,
        async close() {
          await wd('DELETE', `/session/${id}`).catch(() => {});
          sessions.splice(sessions.indexOf(id), 1);
        },
      };
    },
    async close() {
      for (const id of sessions) await wd('DELETE', `/session/${id}`).catch(() => {});
      for (const p of procs.reverse()) await stopProcess(p, 5000);
    },
  };
}

const ENGINES = { chromium: chromiumEngine, firefox: firefoxEngine, webkit: webkitEngine };

// ------------------------------------------------------------------ the runs

let proxy;

/** One load of the app in `dev`, driven by pageProbe; the page stays open. */
async function load(dev, mode, vault, timeout, waitEngine = false) {
  const url = cfg.jspi ? `${origin}/` : `${origin}/?jspi=0`;
  const probe = { mode, passphrase: cfg.passphrase, name: vault.name, expect: vault.n, waitEngine,
    engineBy: cfg.engine === 'webkit' ? 'status' : 'ready' };
  proxy.traffic.files = [];
  proxy.traffic.swChecks = 0;
  proxy.traffic.sent = new Map();
  await dev.open(url, probe);
  let failed = '';
  const st = await until(`${vault.name}: the list of ${vault.n} (${mode})`, async () => {
    const s = await dev.run(pageState);
    if (s.bench?.error) failed = `${vault.name}: ${s.bench.error}`;
    return failed || s.bench?.marks.visible ? s : null;
  }, timeout).catch(async (e) => {
    // bounded: a load over its time is reported as such (with how far it got), not waited for
    const s = await dev.run(pageState).catch(() => null);
    const err = new Error(`${e.message}; the page's probe: ${JSON.stringify(s?.bench)}`);
    err.overTime = { limit: timeout / 1000, marks: s?.bench?.marks ?? {} };
    throw err;
  });
  if (failed) throw new Error(failed);
  const r = st.bench;
  if (!r.first.startsWith(vault.first)) {
    throw new Error(`${vault.name}: the first card is ${JSON.stringify(r.first.slice(0, 80))}, expected "${vault.first}…"`);
  }
  return {
    form: r.marks.form / 1000,                 // navigation start -> the form is in the document (or the probe in, if later)
    engine: (r.marks.engine ?? NaN) / 1000,    // navigation start -> the vault engine is ready (not seen in WebKit)
    installed: r.marks.installed / 1000,       // navigation start -> the probe was in the page
    late: r.late,
    submit: r.marks.submit / 1000,
    submitToVisible: (r.marks.visible - r.marks.submit) / 1000,
    total: r.marks.visible / 1000,             // navigation start -> list visible
    dom: r.marks.dom / 1000,
    cards: r.cards,
    summary: r.summary,
    marks: st.marks,                           // the app's start-up marks (ms from navigation start)
    controlled: st.controlled,
    network: proxy.traffic.files.length,
    networkFiles: [...new Set(proxy.traffic.files)],
    swChecks: proxy.traffic.swChecks,
  };
}

/** Waits until the page's sync status is online with nothing pending, then a quiet while. */
async function settle(dev) {
  await until('the sync to settle', () => dev.run(pageSynced), 120_000);
  await sleep(cfg.settle_ms);
}

function line(label, r) {
  return `${label}: form ${r.form.toFixed(3)} s, engine ${r.engine.toFixed(3)} s, submit ${r.submit.toFixed(3)} s, `
    + `submit -> list ${r.submitToVisible.toFixed(3)} s, navigation -> list ${r.total.toFixed(3)} s (${r.cards} cards; `
    + `${r.controlled ? 'controlled' : 'NOT controlled'}, ${r.network} app files from the network${r.late ? '; probe late' : ''})`
    + `\n    marks (ms): ${Object.entries(r.marks || {}).sort((a, b) => a[1] - b[1]).map(([k, v]) => `${k} ${v}`).join(', ')}`;
}

async function unlockRuns(dev, vault, reps, label, waitEngine) {
  const runs = [];
  out.runs[label] = runs;
  for (let i = -1; i < reps; i++) {   // i = -1: the warm-up load, reported apart
    await sleep(500);
    let r;
    try {
      r = await load(dev, 'unlock', vault, cfg.timeout_ms, waitEngine);
    } catch (e) {
      if (!e.overTime) throw e;
      runs.push({ overTime: true, ...e.overTime });
      say(`${label}: over ${e.overTime.limit} s, stopped (${JSON.stringify(e.overTime.marks)})`);
      return false;
    }
    if (i < 0) out.runs[`${label}_warmup`] = [r];
    else runs.push(r);
    say(line(`${label} ${i < 0 ? 'warm-up' : `run ${i + 1}/${reps}`}`, r));
  }
  return true;
}

async function addRuns(dev, vault, reps, label) {
  const runs = [];
  const added = (out.added[vault.key] ??= []);
  for (let i = -1; i < reps; i++) {
    await settle(dev);
    const text = `web bench: added memory ${cfg.label} ${label} ${i + 1} ${Date.now().toString(36)}`;
    const r = await dev.run(pageAdd, text);
    added.push(text);
    if (i >= 0) runs.push({ dom: r.dom / 1000, visible: r.visible / 1000 });
    say(`${label} ${i < 0 ? 'warm-up' : `run ${i + 1}/${reps}`}: ${r.visible.toFixed(1)} ms`);
  }
  await settle(dev);   // every add is on the server before the next engine logs in
  out.runs[label] = runs;
}

/** The worker's search in the unlocked page (the sync settled first): the index build, then the queries. */
async function searchRuns(dev, key, search) {
  await settle(dev);
  const r = await dev.run(pageSearch, search);
  out.runs[`${key}_search`] = [r];
  const sorted = [...r.times].sort((a, b) => a - b);
  say(`${key} search: first (index built) ${r.build.toFixed(0)} ms; ${r.times.length} searches, median `
    + `${sorted[Math.floor(sorted.length / 2)].toFixed(1)} ms; hits ${JSON.stringify(r.hits)}`);
}

async function device(engine, vault, { freshReps = 1, unlockReps, addReps, waitEngine = false, search = null }) {
  // a fresh browser uses the vault from the server; the last one becomes the device the cached
  // loads are measured on
  const key = vault.key;
  const fresh = [];
  let dev = null;
  out.runs[`${key}_fresh`] = fresh;
  try {
    for (let i = 0; i < freshReps; i++) {
      if (dev) await dev.close();
      dev = await engine.device(`${key}-fresh-${i}`);
      const r = await load(dev, 'login', vault, cfg.fresh_timeout_ms);
      fresh.push(r);
      say(line(`${key} fresh browser ${i + 1}/${freshReps}`, r));
    }
  } catch (e) {
    if (!e.overTime) throw e;
    // over its time: recorded, and this vault's other steps (which need the pulled vault) skipped
    fresh.push({ overTime: true, ...e.overTime });
    out.notes.push(`${key}: the fresh browser did not show the list within ${e.overTime.limit} s; this vault's `
      + 'cached loads and adds were not run in this engine');
    say(`${key} fresh browser: over ${e.overTime.limit} s, stopped (${JSON.stringify(e.overTime.marks)})`);
    await dev.close();
    return;
  }
  // the service worker has installed and controls the page (clients.claim) before any cached
  // load is measured
  const hasSw = await dev.run(pageServiceWorker);
  if (hasSw) await until('the service worker to control the page', async () => (await dev.run(pageState)).controlled, 60_000);
  else out.notes.push(`${key}: this engine exposes no navigator.serviceWorker`);
  await settle(dev);
  // the fresh browser's first visit, its service worker's install included: bytes over the network
  out.runs[`${key}_first_visit`] = [firstVisit(proxy.traffic.sent)];
  say(`${key} first visit: ${JSON.stringify({ ...out.runs[`${key}_first_visit`][0], files: undefined })}`);
  out.runs[`${key}_cache_bytes`] = await dev.run(pageCacheBytes).catch(() => null);
  if (await unlockRuns(dev, vault, unlockReps, `${key}_unlock`, waitEngine)) {
    await addRuns(dev, vault, addReps, `${key}_add`);
    if (search) await searchRuns(dev, key, search);
  } else out.notes.push(`${key}: an unlock did not show the list within ${cfg.timeout_ms / 1000} s; the adds were not run`);
  await dev.close();
}

/** What a first visit sent: every app file's bytes as sent, and the files sent with a body more than once. */
function firstVisit(sent) {
  const files = Object.fromEntries([...sent].map(([p, s]) => [p, s.bytes]));
  const twice = [...sent].filter(([, s]) => s.bodies > 1).map(([p, s]) => `${p} x${s.bodies}`);
  return { bytes: Object.values(files).reduce((a, b) => a + b, 0), count: sent.size, twice, files };
}

/** Chromium: a fresh profile under Fast 4G and 4x CPU; the create form, then the engine ready. */
async function fast4gRuns(engine, reps) {
  const runs = [];
  for (let i = 0; i < reps; i++) {
    const dev = await engine.device(`fast4g-${i}`, { throttled: true });
    try {
      proxy.traffic.sent = new Map();
      await dev.open(`${origin}/`, {}, firstProbe);
      const m = await until('the engine under Fast 4G', async () => {
        const b = await dev.run(() => window.__first || null);
        return b?.marks.engine && b.marks.visible ? b.marks : null;
      }, cfg.fresh_timeout_ms);
      const r = { form: m.form / 1000, visible: m.visible / 1000, engine: m.engine / 1000,
        bytes: firstVisit(proxy.traffic.sent).bytes };
      runs.push(r);
      say(`Fast 4G, 4x CPU, run ${i + 1}/${reps}: create form shown ${r.visible.toFixed(2)} s, engine ready `
        + `${r.engine.toFixed(2)} s, ${(r.bytes / 1e6).toFixed(2)} MB by then`);
    } finally {
      await dev.close();
    }
  }
  out.runs.fast4g = runs;
}

async function main() {
  proxy = await startProxy(cfg.server);
  origin = proxy.origin;
  const engine = await ENGINES[cfg.engine]();
  try {
    for (const v of cfg.speed_only ? [] : cfg.vaults) {
      say(`vault ${v.name}: ${v.n.toLocaleString('en')} memories`);
      await device(engine, v, v.reps);
    }
    if (cfg.fast4g_reps && cfg.engine === 'chromium' && !cfg.speed_only) await fast4gRuns(engine, cfg.fast4g_reps);
    // a profile of its own, on a page of the origin the app never uses (/health): twice, the
    // second with the engine's caches warm
    const dev = await engine.device('speed');
    await dev.open(`${origin}/health`, null);
    out.runs.speed = [];
    for (let i = 0; i < 2; i++) out.runs.speed.push(await dev.run(pageSpeed, SPEED_PY));
    say(`vault engine's speed: ${JSON.stringify(out.runs.speed)}`);
    await dev.close();
  } finally {
    await engine.close();
    proxy.server.closeAllConnections?.();
    proxy.server.close();
  }
  fs.writeFileSync(cfg.out, JSON.stringify(out, null, 1));
}

main().catch((e) => {
  console.error(e.stack || String(e));
  // what was measured before the failure still goes to the report's notes
  fs.writeFileSync(cfg.out, JSON.stringify({ ...out, error: String(e.message || e) }, null, 1));
  process.exit(1);
});
