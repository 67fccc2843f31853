// ownmem service worker: the whole bundle (app, Pyodide, wheel, vendor JS) is precached,
// so the app opens and works offline; the sync API always goes to the network.
//
// precache.json (written by `python3 build.py build`) lists every file of the bundle with
// its sha256 and the bundle's version.  Install fetches each file, checks its hash and
// stores it in the cache named after that version; a file that does not match fails the
// install, so a half-updated server never becomes the offline copy.  Nothing is ever
// fetched from, or allowed to, any origin but the app's own.
//
// Each file is downloaded once: the page registers this worker only once the vault engine
// has started (app.js).  By then the vault worker has put the engine's files into this
// bundle's cache (worker.js `keep`), and the page's own files are in the browser's HTTP
// cache.  Install takes a copy the cache holds, else the HTTP cache's (`force-cache`), and
// downloads only what neither has; the hash decides, as for a download: a held or cached copy
// that does not match (an older build's, a truncated one) is fetched again from the server,
// and that copy must match.  A new bundle likewise downloads only the files that changed.
"use strict";

// build.py writes the bundle's version over this placeholder in web/dist/sw.js: every
// new bundle is then a new service worker script, which is what makes browsers update.
const VERSION = "__OWNMEM_PRECACHE_VERSION__";
const PREFIX = "ownmem-";
const CACHE = PREFIX + VERSION;
// `self`, typed: TypeScript's lib gives every worker the same global scope type
const scope = /** @type {ServiceWorkerGlobalScope} */ (/** @type {unknown} */ (self));

scope.addEventListener("install", (event) => {
  event.waitUntil(precache().then(() => scope.skipWaiting()));
});

scope.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) {
      if (name.startsWith(PREFIX) && name !== CACHE) await caches.delete(name);
    }
    await scope.clients.claim();
  })());
});

scope.addEventListener("fetch", (event) => {
  const request = event.request;
  const url = new URL(request.url);
  if (url.origin !== scope.location.origin) {
    // The CSP already forbids this; refuse here too rather than pass it on.
    event.respondWith(Response.error());
    return;
  }
  if (request.method !== "GET" || isApi(url.pathname)) return;   // the sync server: network, never cached
  event.respondWith(cacheFirst(request, url));
});

/** @param {string} path */
function isApi(path) {
  return path.startsWith("/v1/") || path === "/v1" || path === "/health";
}

/**
 * @param {Request} request
 * @param {URL} url
 */
async function cacheFirst(request, url) {
  const path = url.pathname === "/" ? "/index.html" : url.pathname;
  // caches.match with cacheName does not create the cache, unlike caches.open
  const hit = await caches.match(path, { cacheName: CACHE });
  return hit || fetch(request);
}

async function precache() {
  try {
    // revalidated (the worker fetched it at start: usually a 304), never taken stale
    const res = await fetch("/precache.json", { cache: "no-cache" });
    if (!res.ok) throw new Error(`precache.json: HTTP ${res.status}`);
    /** @type {{ version: string, files: Record<string, string> }} path -> sha256 */
    const list = await res.json();
    // A server updated between this script and its list: fail now; the browser fetches
    // the newer sw.js at its next update check.
    if (list.version !== VERSION) throw new Error("precache.json belongs to another build");
    const cache = await caches.open(CACHE);
    await Promise.all(Object.entries(list.files).map(([path, sha256]) => store(cache, path, sha256)));
    // The list itself too: offline, the worker finds this build's wheel through it.
    await cache.put("/precache.json", new Response(JSON.stringify(list),
      { headers: { "Content-Type": "application/json" } }));
  } catch (err) {
    await caches.delete(CACHE);   // nothing half-filled stays behind
    throw err;
  }
}

/**
 * @param {Cache} cache
 * @param {string} path
 * @param {string} sha256 hex
 */
async function store(cache, path, sha256) {
  // a copy the vault worker kept here at its start, if it is the one listed
  const held = await cache.match(path);
  if (held && await sha256Hex(await held.arrayBuffer()) === sha256) return;
  // the copy the page's start downloaded, if any; a cached failure counts as none
  let got = await download(path, "force-cache").catch(() => null);
  if (got?.sha256 !== sha256) got = await download(path, "no-store");
  if (got.sha256 !== sha256) throw new Error(`${path}: content does not match precache.json`);
  const { res, body } = got;
  // Keep the server's headers (Content-Type for WASM streaming, the CSP for pages and
  // workers) but not the transfer ones, which described the encoded body: the cache holds
  // the one decoded copy, matched by its path alone.
  const headers = new Headers(res.headers);
  headers.delete("content-encoding");
  headers.delete("content-length");
  headers.delete("vary");
  await cache.put(path, new Response(body, { status: 200, statusText: "OK", headers }));
}

/**
 * @param {string} path
 * @param {RequestCache} mode
 */
async function download(path, mode) {
  const res = await fetch(path, { cache: mode, redirect: "error" });
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  const body = await res.arrayBuffer();
  return { res, body, sha256: await sha256Hex(body) };
}

/** @param {ArrayBuffer} body */
async function sha256Hex(body) {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", body));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}
