// The vault worker: Pyodide + the ownmem wheel, answering the page's messages
// (docs/web.md "Worker operations").  The page never blocks on crypto or storage.
//
// Argon2id (hash-wasm) starts the moment a passphrase is submitted, in parallel with
// Pyodide still booting (for an unlock, the page derives it in argon2-worker.js: see
// client.js); Python then derives and checks every key from that master secret, so a
// wrong passphrase is still refused by the same code as the CLI's.

import { loadPyodide } from "../pyodide/pyodide.mjs";
import * as glue from "./glue.js";
import * as idb from "./idb.js";
import * as syncGlue from "./glue-sync.js";

// WebAssembly JSPI (stack switching) lets synchronous Python wait for a JS promise; WebKit
// has none.  Without it the worker registers glue-sync.js, whose functions answer
// synchronously, with glue.js beside it (ASYNC): Python's handle then answers with a
// coroutine, which awaits glue.js's promises (WebCrypto) in the operations written as
// `async def`, and takes glue-sync.js's answers in the synchronous rest.  ?jspi=0 on the
// page (passed on by client.js) forces that path where JSPI exists, so Chromium tests both.
const JSPI = typeof WebAssembly.Suspending === "function"
  && new URL(import.meta.url).searchParams.get("jspi") !== "0";

let live = null;   // AbortController of the event stream

async function boot() {
  const pyodide = await loadPyodide({ indexURL: new URL("../pyodide/", import.meta.url).href });
  if (JSPI) {
    pyodide.registerJsModule("ownmem_js", { ...glue, ...idb, JSPI: true });
  } else {
    await syncGlue.prepareFeatures();
    pyodide.registerJsModule("ownmem_js", { ...syncGlue, ASYNC: { ...glue } });
  }
  const wheel = await wheelPath();
  if (!wheel) throw new Error("the app bundle has no ownmem wheel");
  const buf = await (await fetch(wheel)).arrayBuffer();
  pyodide.unpackArchive(buf, "wheel");
  return pyodide.pyimport("ownmem.web.api").handle;
}

const isWheel = (p) => p.startsWith("/wheels/") && p.endsWith(".whl");

// The bundle's file list names the wheel.  Offline the list cannot be fetched (the service
// worker caches the files it lists, not the list): the wheel is then found in its cache.
async function wheelPath() {
  try {
    const res = await fetch("/precache.json", { cache: "no-cache" });
    if (res.ok) return Object.keys((await res.json()).files).find(isWheel) ?? null;
    if (!self.caches) throw new Error(`precache.json: HTTP ${res.status}`);
  } catch (err) {
    if (!self.caches) throw err;
  }
  for (const name of await caches.keys()) {
    if (!name.startsWith("ownmem-")) continue;
    const found = (await (await caches.open(name)).keys()).map((r) => new URL(r.url).pathname).find(isWheel);
    if (found) return found;
  }
  throw new Error("the vault engine is not available offline yet: open the app once while online");
}

// First the salt (is there a vault here? the page's `probe`), then the whole store, read
// ahead while Pyodide boots (idb.js idb_prefetch); then the boot itself.
let saltAtStart = storedSalt();
saltAtStart.catch(() => null).then(() => idb.idb_prefetch());
const ready = boot();
ready.then(() => {
  // The first Python call loads the vault store from IndexedDB (ownmem.web.api.App): make it
  // now, as background work, so the load overlaps the passphrase's Argon2id or its typing.
  call("status", {}, true).catch(() => {});
}, () => {});

// The salt is public: read it straight from IndexedDB (idb.js idb_salt), so Argon2id need
// not wait for Python.
function storedSalt() {
  return idb.idb_salt();
}

async function master(passphrase, salt) {
  return glue.argon2id(new TextEncoder().encode(passphrase), salt, glue.ARGON2);
}

// One Python operation at a time: the page's requests and background syncs share one vault.
// The page's requests go first: a background call (the live sync loop) starts only when no
// page request is waiting and the page has been quiet for BACKGROUND_GRACE ms, so that the
// list the page asks for right after an unlock does not wait behind the sync the unlock started.
const BACKGROUND_GRACE = 300;
const waiting = { page: [], background: [] };
let busy = false;
let lastPage = -Infinity;
let graceTimer = 0;

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

async function callNow(op, args) {
  const handle = await ready;
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
    const err = new Error(res.error.message);
    err.code = res.error.code;
    throw err;
  }
  return res.result;
}

async function run(op, args) {
  // Is there a vault in this browser?  Answered from IndexedDB without waiting for Python, so
  // the page can show the unlock form while the vault engine is still booting.
  if (op === "probe") {
    const salt = await (saltAtStart ?? storedSalt()).catch(() => null);
    saltAtStart = null;
    return { vault: salt !== null };
  }
  if (op === "unlock") {
    // The page usually sends the master secret along (client.js derives it on a thread of its
    // own the moment the passphrase is submitted, as this thread may still be booting Pyodide).
    const salt = args.master ? null : await storedSalt();
    if (salt) args = { ...args, master: await master(args.passphrase, salt) };
  } else if (op === "create") {
    const salt = crypto.getRandomValues(new Uint8Array(16));
    args = { ...args, salt, master: await master(args.passphrase, salt) };
  } else if (op === "lock") {
    stopLive();
  }
  const result = await call(op, args);
  if (["unlock", "login", "link"].includes(op)) startLive();
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
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
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
    } catch (e) {
      if (ctl.signal.aborted) return;
      self.postMessage({ event: "online", online: false, message: String(e.message || e) });
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 30000);
    }
  }
}

let syncing = null;
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

self.onmessage = async (e) => {
  const { id, op, args } = e.data;
  try {
    const result = op === "sync" ? await sync("manual") : await run(op, args || {});
    self.postMessage({ id, ok: true, result });
  } catch (err) {
    self.postMessage({ id, ok: false, error: { code: err.code || "error", message: String(err.message || err) } });
  }
};

ready.then(() => self.postMessage({ event: "ready" }),
  (err) => self.postMessage({ event: "failed", message: String(err.message || err) }));
