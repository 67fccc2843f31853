// The vault worker: Pyodide + the ownmem wheel, answering the page's messages
// (docs/web.md "Worker operations").  The page never blocks on crypto or storage.
//
// Argon2id (hash-wasm) starts the moment a passphrase is submitted, in parallel with
// Pyodide still booting (for an unlock, the page derives it in argon2-worker.js: see
// client.js); Python then derives and checks every key from that master secret, so a
// wrong passphrase is still refused by the same code as the CLI's.

// Start-up marks (performance.mark, "ownmem:" names, docs/web.md "Start-up"): sent to the page,
// which puts them on its own timeline, so one list of marks tells where a load's time went.
// "worker-created" is this worker's time origin; "worker" is set once its static imports are loaded.
performance.mark("ownmem:worker-created", { startTime: 0 });
performance.mark("ownmem:worker");

import { loadPyodide } from "../pyodide/pyodide.mjs";
import * as idb from "./idb.js";

/** @import { Args, OpName, PythonOperations, Request, Result } from '../types/protocol' */
/** @typedef {keyof PythonOperations} PyOp an operation ownmem.web.api answers */

// glue.js and glue-sync.js (and vendor.js under them) load while loadPyodide runs, not before
// it: boot() and master() wait for them; everything else runs after boot().
/** @type {typeof import("./glue.js")} set once glueLoaded resolves */
let glue = /** @type {any} */ (null);
/** @type {typeof import("./glue-sync.js")} set once glueLoaded resolves */
let syncGlue = /** @type {any} */ (null);
const glueLoaded = Promise.all([import("./glue.js"), import("./glue-sync.js")]).then(([g, s]) => {
  glue = g;
  syncGlue = s;
});
glueLoaded.catch(() => {});

// WebAssembly JSPI (stack switching) lets synchronous Python wait for a JS promise; WebKit
// has none.  Without it the worker registers glue-sync.js, whose functions answer
// synchronously, with glue.js beside it (ASYNC): Python's handle then answers with a
// coroutine, which awaits glue.js's promises (WebCrypto) in the operations written as
// `async def`, and takes glue-sync.js's answers in the synchronous rest.  ?jspi=0 on the
// page (passed on by client.js) forces that path where JSPI exists, so Chromium tests both.
const JSPI = typeof WebAssembly.Suspending === "function"
  && new URL(import.meta.url).searchParams.get("jspi") !== "0";

/** @type {AbortController | null} */
let live = null;   // AbortController of the event stream

const mark = (/** @type {string} */ name) => performance.mark(`ownmem:${name}`);
let marksSent = 0;
function sendMarks() {
  const marks = performance.getEntriesByType("mark").filter((m) => m.name.startsWith("ownmem:"));
  if (marks.length === marksSent) return;
  self.postMessage({ event: "marks", marks: marks.slice(marksSent).map((m) => [m.name, performance.timeOrigin + m.startTime]) });
  marksSent = marks.length;
}

/** @type {Awaited<ReturnType<typeof loadPyodide>> | null} set once Pyodide has booted */
let pyodideNow = null;

// The engine's files as they arrive, for the page's progress bar (its `loading` event): every
// fetch of one of them while the boot runs is read again from a clone of its body (the answer
// itself is handed on untouched, so the browser still compiles Pyodide's WebAssembly as it
// streams in, and may keep that compiled code for the next start).  The bar counts what comes
// over the network: a file that came compressed weighs its Content-Length (the encoded
// bytes), and the decoded bytes read so far count for their share of it; a file that came as
// it is (from the service worker's cache) weighs its size in precache.json.  Nothing is said
// before every file has answered, so the total never changes.
//
// The same clone goes into the cache the service worker fills (`ownmem-<version>`, sw.js)
// when that cache does not hold the file yet (a first visit, a new bundle): its install then
// takes the copy, once its hash matches, instead of downloading the engine a second time.  A
// browser whose service worker cannot use the HTTP cache's copy (WebKit's private and
// automated sessions keep none) still downloads it once.  The worker says `kept` when those
// copies are written; the page registers the service worker then (app.js).
const BOOT_FILES = ["/pyodide/pyodide.asm.wasm", "/pyodide/python_stdlib.zip", "/pyodide/pyodide-lock.json"];
const LOADING_EVERY = 100;   // ms between two `loading` events
// what a kept copy must not say of itself: it is the decoded body, matched by its path alone
const TRANSFER_HEADERS = ["content-encoding", "content-length", "vary"];

/** @param {Promise<BundleList>} listed */
function bootFetches(listed) {
  const plain = self.fetch;
  /** @type {Map<string, { size: number, weight: number, read: number, answered: boolean }>} the engine's files: decoded size, bytes as sent, decoded bytes read */
  const files = new Map();
  let done = false;
  let sent = 0;
  /** @type {Promise<unknown>[]} */
  const kept = [];
  const send = (/** @type {boolean} */ now) => {
    // after the boot, a clone still being read or written says nothing more
    if (!files.size || (!now && (done || performance.now() - sent < LOADING_EVERY))) return;
    // the total is known once every file has answered (its encoded size): nothing said before
    if (!done && [...files.values()].some((f) => !f.answered)) return;
    sent = performance.now();
    let loaded = 0;
    let total = 0;
    for (const f of files.values()) {
      total += f.weight;
      loaded += done ? f.weight : f.weight * Math.min(1, f.read / f.size);
    }
    self.postMessage({ event: "loading", loaded: Math.round(loaded), total: Math.round(total) });
  };
  listed.then((list) => {
    const sizes = list.sizes ?? {};
    for (const f of [...BOOT_FILES, Object.keys(list.files).find(isWheel) ?? ""]) {
      if (sizes[f] && !files.has(f)) files.set(f, { size: sizes[f], weight: sizes[f], read: 0, answered: false });
    }
    send(true);
  }, () => {});
  /** @param {string} path */
  const counter = (path) => new TransformStream({
    transform(chunk, ctl) {
      const f = files.get(path);
      if (f) f.read += chunk.byteLength;
      send(false);
      ctl.enqueue(chunk);
    },
  });
  /** @type {typeof fetch} */
  const counting = async (input, init) => {
    const res = await plain(input, init);
    const path = new URL(input instanceof Request ? input.url : String(input), self.location.href).pathname;
    if (res.ok && res.body && (BOOT_FILES.includes(path) || isWheel(path))) {
      await listed.catch(() => null);
      const f = files.get(path);
      const sentBytes = Number(res.headers.get("content-length"));
      if (f && res.headers.get("content-encoding") && sentBytes > 0) f.weight = sentBytes;
      if (f) f.answered = true;
      const copy = res.clone();
      kept.push(keep(path, copy, listed, counter(path)).catch(() => {}));
    }
    return res;
  };
  self.fetch = counting;
  return {
    stop() {
      self.fetch = plain;
      done = true;
      send(true);
    },
    kept: () => Promise.all(kept),
  };
}

/**
 * A boot file's clone, counted as it is read, and written into the service worker's cache
 * of this bundle when that cache lacks it.
 * @param {string} path
 * @param {Response} res
 * @param {Promise<BundleList>} listed
 * @param {TransformStream<Uint8Array, Uint8Array>} counter
 */
async function keep(path, res, listed, counter) {
  const body = /** @type {ReadableStream<Uint8Array>} */ (res.body).pipeThrough(counter);
  /** @type {Cache | null} */
  let cache = null;
  try {
    const list = await listed;
    if (self.caches) {
      cache = await caches.open(`ownmem-${list.version}`);
      if (await cache.match(path)) cache = null;   // there already (a cached start)
    }
  } catch {
    cache = null;
  }
  if (!cache) {
    const reader = body.getReader();
    while (!(await reader.read()).done) { /* counted */ }
    return;
  }
  const headers = new Headers(res.headers);
  for (const h of TRANSFER_HEADERS) headers.delete(h);
  await cache.put(path, new Response(body, { status: 200, statusText: "OK", headers }));
}

async function boot() {
  const fetches = bootFetches(bundleList());
  try {
    return await bootCounted();
  } finally {
    fetches.stop();
    fetches.kept().then(() => self.postMessage({ event: "kept" }));
  }
}

async function bootCounted() {
  // The wheel is fetched and unzipped while Pyodide boots (they do not depend on each other).
  const wheel = bundlePath(isWheel).then(async (path) => {
    if (!path) throw new Error("the app bundle has no ownmem wheel");
    const buf = await (await fetch(path)).arrayBuffer();
    mark("wheel-fetched");
    return { buf, files: await unzip(buf).catch(() => null) };
  });
  wheel.catch(() => {});
  const pyodide = await loadPyodide({ indexURL: new URL("../pyodide/", import.meta.url).href });
  pyodideNow = pyodide;
  mark("pyodide");
  await glueLoaded;
  if (JSPI) {
    pyodide.registerJsModule("ownmem_js", { ...glue, ...idb, JSPI: true });
  } else {
    await syncGlue.prepareFeatures();
    pyodide.registerJsModule("ownmem_js", { ...syncGlue, ASYNC: { ...glue } });
  }
  const { buf, files } = await wheel;
  mark(unpack(pyodide, buf, files) ? "wheel-unpacked" : "wheel-unpacked-python");
  const handle = pyodide.pyimport("ownmem.web.api").handle;
  mark("imported");
  return handle;
}

/**
 * A wheel's files where pyodide.unpackArchive(buf, "wheel") would put them: the working directory,
 * on sys.path.  -> whether they were written from `files` (else unpackArchive did it in Python).
 * @param {NonNullable<typeof pyodideNow>} pyodide
 * @param {ArrayBuffer} buf
 * @param {[string, Uint8Array][] | null} files the wheel unzipped by unzip(), if it could
 */
function unpack(pyodide, buf, files) {
  if (!files) {
    pyodide.unpackArchive(buf, "wheel");
    return false;
  }
  const root = pyodide.FS.cwd();
  for (const [name, data] of files) {
    const slash = name.lastIndexOf("/");
    if (slash > 0) pyodide.FS.mkdirTree(`${root}/${name.slice(0, slash)}`);
    pyodide.FS.writeFile(`${root}/${name}`, data);
  }
  pyodide.runPython("import importlib; importlib.invalidate_caches()");
  return true;
}

// The search's stemmer (snowballstemmer, ownmem.recall.words) is a wheel of its own, unpacked
// when the first search needs it: the first screen never waits for it.  Called between two
// Python operations (callNow), so no Python runs while its files are written.
/** @type {Promise<void> | null} */
let stemmer = null;
function stemmerReady() {
  stemmer ??= (async () => {
    const path = await bundlePath(isStemmer);
    if (!path) throw new Error("the app bundle has no stemmer wheel");
    const buf = await (await fetch(path)).arrayBuffer();
    const files = await unzip(buf).catch(() => null);
    unpack(/** @type {NonNullable<typeof pyodideNow>} */ (pyodideNow), buf, files);
    mark("stemmer-unpacked");
  })();
  stemmer.catch(() => { stemmer = null; });   // offline before the service worker had it: next time
  return stemmer;
}

// The wheel's files, [[name, bytes]], read from the zip in JavaScript and inflated by the
// browser's own DecompressionStream: pyodide.unpackArchive does this in Python, which costs a
// second or more at every start in a slow engine (WebKit).  Rejects where the browser lacks
// "deflate-raw" or the zip is not the plain kind build.py writes (the caller then unpacks in Python).
/**
 * @param {ArrayBuffer} buf
 * @returns {Promise<[string, Uint8Array][]>}
 */
async function unzip(buf) {
  const bytes = new Uint8Array(buf);
  const view = new DataView(buf);
  let end = bytes.length - 22;   // the end of central directory record, before any comment
  while (end >= 0 && view.getUint32(end, true) !== 0x06054b50) end--;
  if (end < 0) throw new Error("the wheel is not a zip");
  const count = view.getUint16(end + 10, true);
  let at = view.getUint32(end + 16, true);
  const names = new TextDecoder();
  /** @type {Promise<[string, Uint8Array]>[]} */
  const out = [];
  for (let i = 0; i < count; i++) {
    if (view.getUint32(at, true) !== 0x02014b50) throw new Error("bad zip central directory");
    const method = view.getUint16(at + 10, true);
    const size = view.getUint32(at + 20, true);
    const nameLen = view.getUint16(at + 28, true);
    const skip = nameLen + view.getUint16(at + 30, true) + view.getUint16(at + 32, true);
    const local = view.getUint32(at + 42, true);
    const name = names.decode(bytes.subarray(at + 46, at + 46 + nameLen));
    at += 46 + skip;
    if (name.endsWith("/")) continue;
    if (name.startsWith("/") || name.split("/").includes("..")) throw new Error(`unsafe name in the wheel: ${name}`);
    const start = local + 30 + view.getUint16(local + 26, true) + view.getUint16(local + 28, true);
    const data = bytes.subarray(start, start + size);
    if (method === 0) out.push(Promise.resolve([name, data]));
    else if (method === 8) out.push(inflate(data).then((d) => /** @type {[string, Uint8Array]} */ ([name, d])));
    else throw new Error(`zip method ${method}`);
  }
  return Promise.all(out);
}

/** @param {Uint8Array<ArrayBuffer>} data */
async function inflate(data) {
  const stream = new Blob([data]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

const isWheel = (/** @type {string} */ p) => p.startsWith("/wheels/ownmem-") && p.endsWith(".whl");
const isStemmer = (/** @type {string} */ p) => p.startsWith("/wheels/snowballstemmer-") && p.endsWith(".whl");

/** @typedef {{ version: string, files: Record<string, string>, sizes?: Record<string, number> }} BundleList precache.json */

// The bundle's file list (precache.json: each file's hash and size), fetched once per worker.
/** @type {Promise<BundleList> | null} */
let listed = null;
function bundleList() {
  listed ??= fetch("/precache.json", { cache: "no-cache" }).then((res) => {
    if (!res.ok) throw new Error(`precache.json: HTTP ${res.status}`);
    return res.json();
  });
  listed.catch(() => { listed = null; });   // offline: asked again next time
  return listed;
}

// The bundle's file list names the wheels.  Offline the list cannot be fetched (the service
// worker caches the files it lists, not the list): a wheel is then found in its cache.
/** @param {(path: string) => boolean} isWanted */
async function bundlePath(isWanted) {
  try {
    return Object.keys((await bundleList()).files).find(isWanted) ?? null;
  } catch (err) {
    if (!self.caches) throw err;
  }
  for (const name of await caches.keys()) {
    if (!name.startsWith("ownmem-")) continue;
    const found = (await (await caches.open(name)).keys()).map((r) => new URL(r.url).pathname).find(isWanted);
    if (found) return found;
  }
  throw new Error("the vault engine is not available offline yet: open the app once while online");
}

// First the salt (is there a vault here? the page's `probe`), then the whole store, read
// ahead while Pyodide boots (idb.js idb_prefetch); then the boot itself.
/** @type {ReturnType<typeof storedSalt> | null} */
let saltAtStart = storedSalt();
saltAtStart.catch(() => null).then(() => idb.idb_prefetch());
const ready = boot();
ready.then(() => {
  // The first Python call loads the vault store from IndexedDB (ownmem.web.api.App): make it
  // now, as background work, so the load overlaps the passphrase's Argon2id or its typing.
  call("status", {}, true).catch(() => {}).finally(() => {
    mark("store-read");
    sendMarks();
  });
}, () => {});

// The salt is public: read it straight from IndexedDB (idb.js idb_salt), so Argon2id need
// not wait for Python.
function storedSalt() {
  return idb.idb_salt();
}

/**
 * @param {string} passphrase
 * @param {Uint8Array<ArrayBuffer>} salt
 */
async function master(passphrase, salt) {
  await glueLoaded;
  return glue.argon2id(new TextEncoder().encode(passphrase), salt, glue.ARGON2);
}

// One Python operation at a time: the page's requests and background syncs share one vault.
// The page's requests go first: a background call (the live sync loop) starts only when no
// page request is waiting and the page has been quiet for BACKGROUND_GRACE ms, so that the
// list the page asks for right after an unlock does not wait behind the sync the unlock started.
const BACKGROUND_GRACE = 300;
/** @typedef {{ op: PyOp, args: object, background: boolean, resolve: (result: any) => void, reject: (err: unknown) => void }} Task */
/** @type {{ page: Task[], background: Task[] }} */
const waiting = { page: [], background: [] };
let busy = false;
let lastPage = -Infinity;
/** @type {ReturnType<typeof setTimeout> | undefined} */
let graceTimer;

/**
 * One Python operation, in turn (the page's before the background's).
 * @template {PyOp} K
 * @param {K} op
 * @param {Args<K>} args
 * @param {boolean} [background]
 * @returns {Promise<Result<K>>}
 */
function call(op, args, background = false) {
  return new Promise((resolve, reject) => {
    waiting[background ? "background" : "page"].push({ op, args, background, resolve, reject });
    pump();
  });
}

function pump() {
  if (busy) return;
  let task = waiting.page.shift();
  if (!task && waiting.background.length) {
    const wait = lastPage + BACKGROUND_GRACE - performance.now();
    if (wait > 0) {
      clearTimeout(graceTimer);
      graceTimer = setTimeout(pump, wait);
      return;
    }
    task = waiting.background.shift();
  }
  if (!task) return;
  busy = true;
  callNow(task.op, task.args).then(task.resolve, task.reject).finally(() => {
    busy = false;
    if (!task.background) lastPage = performance.now();
    pump();
  });
}

/**
 * @param {PyOp} op
 * @param {object} args
 */
async function callNow(op, args) {
  const handle = await ready;
  // a query is stemmed (a blank one is not): the stemmer's wheel first, once
  if (op === "search" && String(/** @type {{ query?: unknown }} */ (args).query ?? "").trim()) await stemmerReady();
  let out;
  if (JSPI) {
    out = await handle.callPromising(op, args);
  } else {
    await syncGlue.prepare();
    try {
      out = handle(op, args);
      if (typeof out?.then === "function") {   // a Python coroutine (an awaited operation)
        const pending = out;
        try {
          out = await pending;
        } finally {
          pending.destroy?.();
        }
      }
    } finally {
      await syncGlue.settle();   // the answer goes out once its writes are in IndexedDB
    }
  }
  // most results come as one JSON string (ownmem.web.api.handle); those with bytes as an object
  const res = typeof out === "string" ? JSON.parse(out) : out instanceof Map ? Object.fromEntries(out) : out;
  if (!res.ok) {
    /** @type {Error & { code?: string }} */
    const err = new Error(res.error.message);
    err.code = res.error.code;
    throw err;
  }
  return res.result;
}

/**
 * A page's request: probe answered here, the rest by Python (create and unlock with their
 * Argon2id master secret, lock after the live loop stopped).
 * @param {OpName} op
 * @param {any} args as the page sent them (Args<op>)
 */
async function run(op, args) {
  // Is there a vault in this browser?  Answered from IndexedDB without waiting for Python, so
  // the page can show the unlock form while the vault engine is still booting.
  if (op === "probe") {
    const salt = await (saltAtStart ?? storedSalt()).catch(() => null);
    saltAtStart = null;
    return { vault: salt !== null };
  }
  if (op === "unlock") {
    mark("unlock-received");
    // The page usually sends the master secret along (client.js derives it on a thread of its
    // own the moment the passphrase is submitted, as this thread may still be booting Pyodide).
    const salt = args.master ? null : await storedSalt();
    if (salt) args = { ...args, master: await master(args.passphrase, salt) };
  } else if (op === "create") {
    // the page's salt and master (client.js, Argon2id on a thread of its own), else both here
    const given = args.salt instanceof Uint8Array && args.salt.length === 16 && args.master instanceof Uint8Array;
    const salt = given ? args.salt : crypto.getRandomValues(new Uint8Array(16));
    args = { ...args, salt, master: given ? args.master : await master(args.passphrase, salt) };
  } else if (op === "lock") {
    stopLive();
  }
  const result = await call(op, args);
  if (op === "unlock" || op === "login") {
    mark(`${op}-done`);
    sendMarks();
  }
  if (["unlock", "unlock_slot", "login", "link", "passphrase_update"].includes(op)) startLive();
  return result;
}

// Live updates: follow the server's event stream while unlocked and linked; each
// event pulls.  Offline or refused: retry with backoff; the "online" event retries now.
function stopLive() {
  if (live) live.abort();
  live = null;
}

async function startLive() {
  stopLive();
  const ctl = new AbortController();
  live = ctl;
  let delay = 1000;
  while (!ctl.signal.aborted) {
    try {
      const status = await call("status", {}, true);
      if (!status.server || !status.unlocked) return;
      await sync("live");
      const { token, url } = await call("token", {}, true);
      const resp = await fetch(url, { headers: { Authorization: `Bearer ${token}` }, signal: ctl.signal,
        cache: "no-store" });
      if (!resp.ok) throw new Error(`event stream: ${resp.status}`);
      self.postMessage({ event: "online", online: true });
      delay = 1000;
      const reader = /** @type {NonNullable<typeof resp.body>} */ (resp.body).pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          if (block.startsWith("event: changes")) await sync("live");
        }
      }
    } catch (/** @type {any} */ e) {
      if (ctl.signal.aborted) return;
      self.postMessage({ event: "online", online: false, message: String(e.message || e), code: e.code });
      // changed on another device: nothing syncs until the page's passphrase_update, which starts the loop again
      if (e.code === "passphrase_changed") return;
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 30000);
    }
  }
}

/** @type {Promise<Result<'sync'>> | null} */
let syncing = null;
/**
 * One sync at a time: a sync asked meanwhile joins the one under way.
 * @param {'manual' | 'live'} reason
 */
async function sync(reason) {
  if (syncing) return syncing;
  syncing = (async () => {
    try {
      const r = await call("sync", {}, reason !== "manual");
      self.postMessage({ event: "synced", reason, ...r });
      return r;
    } finally {
      syncing = null;
    }
  })();
  return syncing;
}

self.addEventListener("online", () => { if (live) startLive(); });

self.onmessage = async (/** @type {MessageEvent<Request>} */ e) => {
  const { id, op, args } = e.data;
  try {
    const result = op === "sync" ? await sync("manual") : await run(op, args || {});
    self.postMessage({ id, ok: true, result });
  } catch (/** @type {any} */ err) {
    self.postMessage({ id, ok: false, error: { code: err.code || "error", message: String(err.message || err) } });
  }
};

ready.then(() => {
  mark("ready");
  sendMarks();
  self.postMessage({ event: "ready" });
},
  (err) => self.postMessage({ event: "failed", message: String(err.message || err) }));
