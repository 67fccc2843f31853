// What the browser test files share, whichever engine and driver they use (node's test
// runner picks up only *.test.mjs, so this file is no test of its own).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** A TCP port free on 127.0.0.1 now (the OS picks it). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
}

/**
 * A fresh folder for one run's server: `dataDir` (empty) and `webDir`, a private copy of the
 * built bundle `dist`, so a rebuild of web/dist during the run changes nothing there.
 */
export function serverDirs(dist, prefix) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const dataDir = path.join(tmp, 'data');
  fs.mkdirSync(dataDir);
  const webDir = path.join(tmp, 'web');
  fs.cpSync(dist, webDir, { recursive: true });
  return { tmp, dataDir, webDir };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Poll `fn` until it returns a truthy value (a throw counts as not yet); fail after `timeout` ms. */
export async function until(what, fn, timeout) {
  const deadline = Date.now() + timeout;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms: ${what}`);
    await sleep(200);
  }
}

/**
 * What the page shows, for a test that timed out waiting on it (playwright or puppeteer): the
 * notice, every visible error text, the list's summary, busy forms, the cards and the focus.
 * Never throws: a closed or navigating page says so instead.
 */
export async function pageState(page) {
  try {
    return JSON.stringify(await page.evaluate(() => {
      const text = (n) => (n?.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 300);
      return {
        url: location.href,
        notice: text(document.querySelector('#notice')),
        errors: [...document.querySelectorAll('[data-role="error"]')].filter((n) => !n.hidden && text(n)).map(text),
        summary: text(document.querySelector('[data-role="summary"]')),
        busy: [...document.querySelectorAll('form[aria-busy="true"]')].map((f) => f.dataset.testid || f.id),
        cards: [...document.querySelectorAll('[data-testid="memory-card"] [data-role="content"]')].map(text),
        screens: [...document.querySelectorAll('main [data-testid$="-view"], main [data-testid$="-form"]')].map((n) => n.dataset.testid),
        focus: document.activeElement?.id || document.activeElement?.tagName,
      };
    }));
  } catch (e) {
    return `(the page could not be read: ${e.message})`;
  }
}

/** `wait` (a promise of a wait on `page`), failing with what the page shows (pageState) added. */
export async function explained(page, wait) {
  try {
    return await wait;
  } catch (e) {
    throw new Error(`${e.message}; the page: ${await pageState(page)}`);
  }
}

/**
 * Run in the page (`page.evaluate(scanStorage, needles)`, playwright or puppeteer): every
 * record of every store of the app's IndexedDB database, localStorage, sessionStorage,
 * cookies and every response in Cache Storage, scanned for each needle's bytes (`needles`:
 * {what: [byte, ...]}).  -> {hits: [{where, what}], records: {store: count}, dbs: [name],
 * localStorage: [key], cached: responses scanned}.  Self-contained: it is sent to the page
 * as source.
 */
export async function scanStorage(needles) {
  const find = (hay, needle) => {
    outer: for (let i = 0; i + needle.length <= hay.length; i++) {
      for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
      return true;
    }
    return false;
  };
  const enc = new TextEncoder();
  const bytesOf = (v) => {
    if (v instanceof Uint8Array) return [v];
    if (v instanceof ArrayBuffer) return [new Uint8Array(v)];
    if (ArrayBuffer.isView(v)) return [new Uint8Array(v.buffer, v.byteOffset, v.byteLength)];
    if (typeof v === 'string') return [enc.encode(v)];
    if (typeof v === 'number' || typeof v === 'boolean' || v === null || v === undefined) return [];
    if (Array.isArray(v)) return v.flatMap(bytesOf);
    if (typeof v === 'object') return Object.entries(v).flatMap(([k, x]) => [enc.encode(k), ...bytesOf(x)]);
    return [enc.encode(String(v))];
  };
  const hits = [];
  const records = {};
  const check = (where, v) => {
    for (const b of bytesOf(v)) for (const [what, n] of Object.entries(needles)) if (find(b, n)) hits.push({ where, what });
  };
  const db = await new Promise((res, rej) => {
    const r = indexedDB.open('ownmem');
    r.onsuccess = () => res(r.result);
    r.onerror = () => rej(r.error);
  });
  for (const s of db.objectStoreNames) {
    const store = db.transaction([s], 'readonly').objectStore(s);
    const [keys, values] = await Promise.all([store.getAllKeys(), store.getAll()].map((req) => new Promise((res, rej) => {
      req.onsuccess = () => res(req.result);
      req.onerror = () => rej(req.error);
    })));
    records[s] = keys.length;
    keys.forEach((k, i) => {
      check(`${s}/${k} (key)`, k);
      check(`${s}/${k}`, values[i]);
    });
  }
  db.close();
  for (let i = 0; i < localStorage.length; i++) {
    const k = localStorage.key(i);
    check(`localStorage/${k}`, [k, localStorage.getItem(k)]);
  }
  for (let i = 0; i < sessionStorage.length; i++) check(`sessionStorage/${i}`, sessionStorage.getItem(sessionStorage.key(i)));
  check('cookie', document.cookie);
  let cached = 0;
  for (const name of await caches.keys()) {
    const cache = await caches.open(name);
    for (const req of await cache.keys()) {
      check(`caches/${name}/${req.url} (url)`, req.url);
      check(`caches/${name}/${req.url}`, new Uint8Array(await (await cache.match(req)).arrayBuffer()));
      cached++;
    }
  }
  const dbs = (await indexedDB.databases()).map((d) => d.name);
  return { hits, records, dbs, localStorage: Object.keys(localStorage), cached };
}

/** Stop a child process: SIGTERM, then SIGKILL if it is still there after `graceMs`. */
export async function stopProcess(proc, graceMs = 10_000) {
  if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
  const gone = new Promise((resolve) => proc.once('exit', resolve));
  proc.kill('SIGTERM');
  const t = setTimeout(() => proc.kill('SIGKILL'), graceMs);
  await gone;
  clearTimeout(t);
}

/** `python -m server` on 127.0.0.1:port serving webDir, its data in dataDir; resolves with the
 *  process once /health answers.  Its output goes to onOutput (chunks), so a test keeps one log
 *  across restarts (the offline tests stop and start it on the same port). */
export async function spawnServer({ py, cwd, port, dataDir, webDir, onOutput }) {
  const proc = spawn(py, ['-m', 'server', '--host', '127.0.0.1', '--port', String(port)], {
    cwd, env: { ...process.env, OWNMEM_DATA_DIR: dataDir, OWNMEM_WEB_DIR: webDir }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let tail = '';
  const take = (d) => { tail = (tail + d).slice(-20000); onOutput(String(d)); };
  proc.stdout.on('data', take);
  proc.stderr.on('data', take);
  await until('the server to answer /health', async () => {
    if (proc.exitCode !== null) throw new Error(`the server exited at start:\n${tail.slice(-3000)}`);
    return (await fetch(`http://127.0.0.1:${port}/health`)).ok;
  }, 30_000);
  return proc;
}

/** The test vectors the vault worker's `selftest` runs, as one JSON string (from tests/vectors). */
export function selftestVectors(root) {
  const vectors = path.join(root, 'tests', 'vectors');
  const v2 = JSON.parse(fs.readFileSync(path.join(vectors, 'apertomemory-v2', 'apertomemory-v2-test-vectors.json'), 'utf8'));
  const example = JSON.parse(fs.readFileSync(path.join(vectors, 'saihm', 'example-values.json'), 'utf8'));
  return JSON.stringify({ apertomemory_v2: v2, saihm_example: example });
}

/**
 * Run in the page: a vault worker of its own, spoken to as the page's client.js does, runs
 * `selftest` over `vectors`.  -> the worker's answer ({id, ok, result}) or {error}.
 * Self-contained: it is sent to the page as source.
 */
export function selftestInPage(vectors) {
  return new Promise((done) => {
    const w = new Worker('/js/worker.js', { type: 'module' });
    w.onerror = (e) => done({ error: String(e.message || e) });
    w.onmessage = (e) => {
      if (e.data.event === 'failed') done({ error: e.data.message });
      if (e.data.event === 'ready') w.postMessage({ id: 1, op: 'selftest', args: { vectors } });
      if (e.data.id === 1) {
        w.terminate();
        done(e.data);
      }
    };
  });
}
