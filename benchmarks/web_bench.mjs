// Area `web` of the benchmarks, the browser half: headless Chromium (playwright-core) driving
// the real PWA served by `python -m server`.  benchmarks/web.py prepares the server and the
// vaults, runs this file and turns its JSON into the report.
//
//   node benchmarks/web_bench.mjs CONFIG.json      (writes config.out)
//
// Every figure is taken inside the page with performance.now(), whose origin is the start of
// the navigation, so neither the CDP round trips of the harness nor node's clock are in it.
// An init script stands in for the person: it types the passphrase the moment the form is
// in the document (form.requestSubmit(), as the Enter key would), or with waitEngine the
// moment the vault worker says "ready" (the unlock form shows before), and watches the DOM with a
// MutationObserver for the moment the list is there: the summary shows the expected count
// and the list holds its first cards.  "Visible" is the first frame after that
// (requestAnimationFrame, then a task: the frame has been produced).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..');
const require = createRequire(path.join(ROOT, 'package.json'));
const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const { chromium } = require('playwright-core');

const LAUNCH_ARGS = ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run'];
const VIEWPORT = { width: 1280, height: 800 };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const say = (msg) => console.log(`  ${msg}`);

// ------------------------------------------------------------------ the page side

/** Runs in the page before any of its scripts (addInitScript). */
function pageProbe(p) {
  const B = { marks: {}, cards: 0, first: '', summary: '', ops: [] };
  window.__bench = B;
  const mark = (k) => { if (!(k in B.marks)) B.marks[k] = performance.now(); };
  const fill = (form, testid, value) => { form.querySelector(`[data-testid="${testid}"]`).value = value; };
  const check = () => {
    if (p.mode === 'unlock' && !B.marks.submit) {
      const form = document.querySelector('[data-testid="unlock-form"]');
      if (form) mark('form');
      if (form && (!p.waitEngine || B.marks.engine)) {
        fill(form, 'passphrase', p.passphrase);
        form.requestSubmit();
        mark('submit');
      }
    } else if (p.mode === 'login' && !B.marks.submit) {
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
  new MutationObserver(check).observe(document, { subtree: true, childList: true, characterData: true });
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

// ------------------------------------------------------------------ the harness side

let browser;
const out = { chromium: '', runs: {}, prep: {}, notes: [] };

function isApp(url) {
  const u = new URL(url);
  return u.origin === cfg.origin && !u.pathname.startsWith('/v1/') && u.pathname !== '/health';
}

async function newContext(label) {
  const ctx = await browser.newContext({ viewport: VIEWPORT });
  ctx.on('weberror', (e) => console.error(`  [${label} error] ${e.error()?.message || e.error()}`));
  return ctx;
}

/** One load of the app in a new page of ctx, driven by pageProbe; the page stays open. */
async function load(ctx, mode, vault, timeout, waitEngine = false) {
  const page = await ctx.newPage();
  const traffic = { sw: 0, network: 0, networkFiles: [] };
  page.on('response', (r) => {
    if (!isApp(r.url())) return;
    if (r.fromServiceWorker()) traffic.sw++;
    else {
      traffic.network++;
      traffic.networkFiles.push(new URL(r.url()).pathname);
    }
  });
  await page.addInitScript(pageProbe, { mode, passphrase: cfg.passphrase, name: vault.name, expect: vault.n,
    waitEngine });
  await page.goto(cfg.origin + '/', { waitUntil: 'commit' });
  await page.waitForFunction(() => window.__bench && window.__bench.marks.visible, null, { timeout, polling: 50 });
  const r = await page.evaluate(() => ({ ...window.__bench, controlled: Boolean(navigator.serviceWorker.controller) }));
  const expected = `[${vault.n - 1}] `;   // the newest memory of the vault (web.py numbers them)
  if (!r.first.startsWith(expected)) {
    throw new Error(`${vault.name}: the first card is ${JSON.stringify(r.first.slice(0, 60))}, expected "${expected}…"`);
  }
  return {
    page,
    run: {
      form: r.marks.form / 1000,                 // navigation start -> the form is in the document
      engine: (r.marks.engine ?? NaN) / 1000,    // navigation start -> the vault engine is ready
      submitToVisible: (r.marks.visible - r.marks.submit) / 1000,
      total: r.marks.visible / 1000,             // navigation start -> list visible
      dom: r.marks.dom / 1000,
      cards: r.cards,
      summary: r.summary,
      controlled: r.controlled,
      sw: traffic.sw,
      network: traffic.network,
      networkFiles: traffic.networkFiles,
    },
  };
}

/** Waits until the page's sync status is online with nothing pending, then a quiet second. */
async function settle(page) {
  await page.waitForFunction(() => {
    const s = document.querySelector('[data-testid="sync-status"]');
    return s && s.dataset.state === 'online' && s.dataset.pending === '0';
  }, null, { timeout: 120000, polling: 100 });
  await sleep(cfg.settle_ms);
}

async function unlockRuns(ctx, vault, reps, label, waitEngine) {
  const runs = [];
  let page = null;
  for (let i = -1; i < reps; i++) {   // i = -1: the warm-up load, reported apart
    if (page) await page.close();
    await sleep(500);
    const r = await load(ctx, 'unlock', vault, cfg.timeout_ms, waitEngine);
    page = r.page;
    if (i < 0) out.runs[`${label}_warmup`] = [r.run];
    else runs.push(r.run);
    say(`${label} ${i < 0 ? 'warm-up' : `run ${i + 1}/${reps}`}: form ${r.run.form.toFixed(3)} s, engine `
      + `${r.run.engine.toFixed(3)} s, `
      + `submit -> list ${r.run.submitToVisible.toFixed(3)} s, navigation -> list ${r.run.total.toFixed(3)} s `
      + `(${r.run.cards} cards; ${r.run.sw} files from the service worker, ${r.run.network} from the network)`);
  }
  out.runs[label] = runs;
  return page;
}

async function addRuns(page, reps, label) {
  const runs = [];
  for (let i = -1; i < reps; i++) {
    await settle(page);
    const text = `web bench: added memory ${label} ${i + 1} ${Date.now().toString(36)}`;
    const r = await page.evaluate(pageAdd, text);
    if (i >= 0) runs.push({ dom: r.dom / 1000, visible: r.visible / 1000 });
    say(`${label} ${i < 0 ? 'warm-up' : `run ${i + 1}/${reps}`}: ${r.visible.toFixed(1)} ms`);
  }
  out.runs[label] = runs;
}

async function device(vault, key, { freshReps = 1, unlockReps, addReps, waitEngine = false }) {
  // a fresh browser (a new context: no service worker, no cache, no IndexedDB) uses the vault
  // from the server; the last one becomes the device the cached loads are measured on
  const fresh = [];
  let ctx = null;
  let page = null;
  for (let i = 0; i < freshReps; i++) {
    if (ctx) await ctx.close();
    ctx = await newContext(`${key}-fresh-${i}`);
    const r = await load(ctx, 'login', vault, cfg.fresh_timeout_ms);
    page = r.page;
    fresh.push(r.run);
    say(`${key} fresh browser ${i + 1}/${freshReps}: form ${r.run.form.toFixed(3)} s, submit -> list `
      + `${r.run.submitToVisible.toFixed(3)} s, navigation -> list ${r.run.total.toFixed(3)} s (${r.run.cards} cards)`);
  }
  out.runs[`${key}_fresh`] = fresh;
  // the service worker has installed and controls the page (clients.claim) before any
  // cached load is measured
  await page.evaluate(() => navigator.serviceWorker.ready.then(() => true));
  await page.waitForFunction(() => navigator.serviceWorker.controller !== null, null, { timeout: 60000 });
  await settle(page);
  await page.close();
  page = await unlockRuns(ctx, vault, unlockReps, `${key}_unlock`, waitEngine);
  await addRuns(page, addReps, `${key}_add`);
  await ctx.close();
}

async function main() {
  browser = await chromium.launch({ executablePath: cfg.chromium, args: LAUNCH_ARGS });
  out.chromium = browser.version();
  try {
    for (const v of cfg.vaults) {
      say(`vault ${v.name}: ${v.n.toLocaleString('en')} memories`);
      await device(v, v.key, v.reps);
    }
  } finally {
    await browser.close();
  }
  fs.writeFileSync(cfg.out, JSON.stringify(out, null, 1));
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
