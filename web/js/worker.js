// The vault worker: Pyodide + the ownmem wheel, answering the page's messages
// (docs/web.md "Worker operations").  The page never blocks on crypto or storage.
//
// Argon2id (hash-wasm) starts the moment a passphrase arrives, in parallel with
// Pyodide still booting; Python then derives and checks every key from that master
// secret, so a wrong passphrase is still refused by the same code as the CLI's.

import { loadPyodide } from "../pyodide/pyodide.mjs";
import * as glue from "./glue.js";
import * as idb from "./idb.js";

const ARGON2 = { memory_kib: 65536, iterations: 3, parallelism: 4, length: 32 };
let live = null;   // AbortController of the event stream

async function boot() {
  const pyodide = await loadPyodide({ indexURL: new URL("../pyodide/", import.meta.url).href });
  pyodide.registerJsModule("ownmem_js", { ...glue, ...idb });
  const manifest = await (await fetch("/precache.json", { cache: "no-cache" })).json();
  const wheel = Object.keys(manifest.files).find((p) => p.startsWith("/wheels/") && p.endsWith(".whl"));
  if (!wheel) throw new Error("the app bundle has no ownmem wheel");
  const buf = await (await fetch(wheel)).arrayBuffer();
  pyodide.unpackArchive(buf, "wheel");
  return pyodide.pyimport("ownmem.web.api").handle;
}

const ready = boot();

// The salt is public: read it straight from IndexedDB (the "salt" row of the meta table,
// CBOR {"k": "salt", "v": h'<16 bytes>'}), so Argon2id need not wait for Python.
async function storedSalt() {
  const row = await idb.idb_get("meta", "salt");
  if (!row || row.length < 17 || row[row.length - 17] !== 0x50) return null;
  return row.slice(row.length - 16);
}

async function master(passphrase, salt) {
  return glue.argon2id(new TextEncoder().encode(passphrase), salt, ARGON2);
}

// One Python operation at a time: the page's requests and background syncs share one vault.
let queue = Promise.resolve();

function call(op, args) {
  const run = queue.then(() => callNow(op, args));
  queue = run.catch(() => {});
  return run;
}

async function callNow(op, args) {
  const handle = await ready;
  const out = await handle.callPromising(op, args);
  const res = out instanceof Map ? Object.fromEntries(out) : out;
  if (!res.ok) {
    const err = new Error(res.error.message);
    err.code = res.error.code;
    throw err;
  }
  return res.result;
}

async function run(op, args) {
  if (op === "unlock") {
    const salt = await storedSalt();
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
      const status = await call("status", {});
      if (!status.server || !status.unlocked) return;
      await sync("live");
      const { token, url } = await call("token", {});
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
      const r = await call("sync", {});
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
