// The browser crypto provider (web/js/glue.js + py/ownmem/web/provider.py) in headless Chromium.
//
//   node --test tests/browser/provider.test.mjs
//
// A tiny static server serves the harness (tests/browser/harness*.{html,js}), web/js/glue.js,
// Pyodide and the vendor bundle (web/dist/ when built, else node_modules + an esbuild of the
// vendor entry), the py/ownmem sources as one JSON, and tests/vectors (the published vectors and
// the SAIHM spec, copied unchanged).  In a module worker, Pyodide runs ownmem.web.selftest.run with
// BrowserProvider installed: the same vector checks as the CPython suite.  Then ML-DSA-65
// signatures cross between the browser and CPython (.venv, pyca/cryptography) both ways.
//
// Environment: CHROMIUM (default /usr/bin/chromium); node modules are resolved from the
// project root, or from NODE_PATH.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const VECTORS = path.join(ROOT, 'tests', 'vectors');
const DIST = path.join(ROOT, 'web', 'dist');
const VENV_PY = path.join(ROOT, '.venv', 'bin', 'python');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const require = createRequire(path.join(ROOT, 'package.json'));

const TYPES = {
  '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.json': 'application/json',
  '.wasm': 'application/wasm', '.zip': 'application/zip', '.txt': 'text/plain', '.whl': 'application/zip',
};

let server, browser, page, origin, tmp;
const timings = {};

function pyodideDir() {
  const built = path.join(DIST, 'pyodide');
  if (fs.existsSync(path.join(built, 'pyodide.mjs'))) return built;
  return path.dirname(require.resolve('pyodide/package.json'));
}

async function vendorBundle() {
  const built = path.join(DIST, 'vendor', 'vendor.js');
  if (fs.existsSync(built)) return built;
  const esbuild = require('esbuild');
  const entry = path.join(ROOT, 'web', 'js', 'vendor-entry.js');
  const nodeModules = path.resolve(path.dirname(require.resolve('hash-wasm/package.json')), '..');
  const out = path.join(tmp, 'vendor.js');
  await esbuild.build({
    ...(fs.existsSync(entry)
      ? { entryPoints: [entry] }
      : { stdin: { contents: "export { argon2id } from 'hash-wasm';\nexport { ml_dsa65 } from '@noble/post-quantum/ml-dsa.js';\n", resolveDir: ROOT } }),
    bundle: true, format: 'esm', platform: 'browser', outfile: out, nodePaths: [nodeModules], logLevel: 'error',
  });
  return out;
}

function ownmemSources() {
  const base = path.join(ROOT, 'py');
  const files = {};
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory() && e.name !== '__pycache__') walk(p);
      else if (e.isFile() && e.name.endsWith('.py')) files[path.relative(base, p)] = fs.readFileSync(p, 'utf8');
    }
  };
  walk(path.join(base, 'ownmem'));
  return JSON.stringify(files);
}

function startServer(routes) {
  // routes: url prefix -> directory, or exact url -> file / () => body
  const srv = http.createServer((req, res) => {
    const url = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    let file = null;
    let body = null;
    if (typeof routes.exact[url] === 'function') body = routes.exact[url]();
    else if (routes.exact[url]) file = routes.exact[url];
    else {
      for (const [prefix, dir] of Object.entries(routes.dirs)) {
        if (url.startsWith(prefix)) {
          const candidate = path.resolve(dir, '.' + url.slice(prefix.length - 1));
          if (candidate.startsWith(path.resolve(dir) + path.sep)) file = candidate;
          break;
        }
      }
    }
    if (body === null && (!file || !fs.existsSync(file) || !fs.statSync(file).isFile())) {
      res.writeHead(404).end('not found');
      return;
    }
    const type = TYPES[path.extname(file ?? url)] ?? 'application/octet-stream';
    res.writeHead(200, { 'content-type': type, 'cache-control': 'no-store' });
    res.end(body ?? fs.readFileSync(file));
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve(srv)));
}

const call = (op, args = {}) => page.evaluate(([o, a]) => window.call(o, a), [op, args]);

function cpython(code, input) {
  return execFileSync(VENV_PY, ['-c', code], { input: JSON.stringify(input), encoding: 'utf8', cwd: ROOT });
}

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ownmem-browser-'));
  const vendor = await vendorBundle();
  server = await startServer({
    exact: {
      '/': path.join(HERE, 'harness.html'),
      '/harness-worker.js': path.join(HERE, 'harness-worker.js'),
      '/js/glue.js': path.join(ROOT, 'web', 'js', 'glue.js'),
      '/vendor/vendor.js': vendor,
      '/ownmem-src.json': ownmemSources,
      '/favicon.ico': () => '',
    },
    dirs: { '/pyodide/': pyodideDir(), '/vectors/': VECTORS },
  });
  origin = `http://127.0.0.1:${server.address().port}`;
  const { chromium } = require('playwright-core');
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error') console.error('[browser]', m.text()); });
  page.on('pageerror', (e) => console.error('[page error]', e.message));
  await page.goto(origin + '/');
  await page.waitForFunction(() => window.harnessReady === true);
  const t0 = Date.now();
  timings.boot = await call('boot');
  timings.boot.total_ms = Date.now() - t0;
}, { timeout: 300_000 });

after(async () => {
  await browser?.close();
  server?.close();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  if (Object.keys(timings).length) console.log('# timings', JSON.stringify(timings, null, 1));
});

test('boots Pyodide with JSPI and installs BrowserProvider', { timeout: 120_000 }, () => {
  const b = timings.boot;
  assert.match(b.python, /^3\.14\./);
  assert.equal(b.can_run_sync, true, 'JSPI: pyodide.ffi.run_sync must work under runPythonAsync');
  assert.equal(b.can_run_sync_plain, false, 'and not on a stack entered synchronously');
  assert.equal(b.provider, 'browser');
  assert.equal(b.features.argon2, 'hash-wasm');
  assert.equal(b.features.webcrypto_ed25519, true);
  assert.equal(b.features.webcrypto_x25519, true);
  assert.equal(b.features.mldsa, b.features.webcrypto_mldsa ? 'webcrypto' : 'noble');
});

const SELFTEST_CHECKS = 59;   // 13 KATs + 3 batch + 6 + 11 verdicts + 3 + 8 more v2 + 9 rebuilds + 6 SAIHM

test('the vector selftest passes in the browser (ApertoMemory v2 001-014, SAIHM example, KATs)', { timeout: 120_000 }, async () => {
  // As the app's selftest op does, the page fetches the vectors (here from tests/vectors via the
  // test server) and hands them to ownmem.web.selftest.run as one JSON string.
  const r = await page.evaluate(async () => {
    const v2 = await (await fetch('/vectors/apertomemory-v2/apertomemory-v2-test-vectors.json')).json();
    const example = await (await fetch('/vectors/saihm/example-values.json')).json();
    return window.call('selftest', { vectors: JSON.stringify({ apertomemory_v2: v2, saihm_example: example }) });
  });
  timings.selftest_ms = Math.round(r.ms);
  assert.deepEqual(r.failed, [], JSON.stringify(r.errors, null, 1));
  assert.deepEqual(r.errors, {});
  assert.equal(r.passed, SELFTEST_CHECKS, 'every group ran');
});

test('SAIHM example: the deterministic ML-DSA-65 cell signature reproduces in the browser', { timeout: 120_000 }, async () => {
  const example = JSON.parse(fs.readFileSync(path.join(VECTORS, 'saihm', 'example-values.json'), 'utf8'));
  const expected = example.signaturePrefix;
  const holderId = example.holderId;
  const r = await call('exec', { code: `
import json
from ownmem.crypto import provider, run_sync
from ownmem.saihm import cell, identity
from ownmem.web.selftest import saihm_example
from pyodide.http import pyfetch
e = saihm_example(json.loads(await (await pyfetch("/vectors/saihm/example-values.json")).string()))
p = provider()
holder = run_sync(identity.holder_from_seed(p, e["holder_seed"]))
c = run_sync(cell.make_cell(p, xi=holder.xi, holder_id=holder.holder_id, kek_version=e["kek_version"],
                            tier="hot", cell_nonce=e["cell_nonce"], ciphertext=e["ciphertext"],
                            timestamp=e["timestamp"], deterministic=True))
{"holder_id": holder.holder_id.hex(), "cell_id": c.cell_id.hex(), "sig32": c.signature[:32].hex(),
 "len": len(c.signature)}
` });
  assert.equal(r.holder_id, holderId);
  assert.equal(r.len, 3309);
  assert.equal(r.sig32, expected, 'noble extraEntropy:false must be FIPS 204 deterministic signing');
});

test('the same selftest passes under CPython', { timeout: 120_000 }, (t) => {
  if (!fs.existsSync(VENV_PY)) {
    t.skip('no .venv (python3 build.py setup)');
    return;
  }
  const r = JSON.parse(cpython(`
import json, sys
from ownmem.web import selftest
print(json.dumps(selftest.run(sys.stdin.read())))
`, {
    apertomemory_v2: JSON.parse(fs.readFileSync(
      path.join(VECTORS, 'apertomemory-v2', 'apertomemory-v2-test-vectors.json'), 'utf8')),
    saihm_example: JSON.parse(fs.readFileSync(path.join(VECTORS, 'saihm', 'example-values.json'), 'utf8')),
  }));
  assert.deepEqual(r.failed, [], JSON.stringify(r.errors));
  assert.equal(r.passed, SELFTEST_CHECKS, 'every group ran (CPythonProvider has the batch forms too)');
});

test('the provider also works awaited from asyncio tasks, and maps JS errors', { timeout: 120_000 }, async () => {
  const r = await call('exec', { code: `
import asyncio
from ownmem.crypto import provider, random_bytes
from ownmem.errors import AuthenticationFailed, MalformedInput
p = provider()
key, nonce = random_bytes(32), random_bytes(12)
async def roundtrip(i):
    ct = await p.aes_gcm_encrypt(key, nonce, bytes([i]) * 10, b"")
    return await p.aes_gcm_decrypt(key, nonce, ct, b"")
got = await asyncio.gather(*(roundtrip(i) for i in range(5)))
out = {"gather": got == [bytes([i]) * 10 for i in range(5)]}
try:
    await p.aes_gcm_decrypt(key, nonce, bytes(40), b"")
    out["auth"] = "no error"
except AuthenticationFailed as e:
    out["auth"] = [str(e), e.reason]
try:
    await p.mldsa65_public(bytes(31))
    out["malformed"] = "no error"
except MalformedInput as e:
    out["malformed"] = str(e)
out
` });
  assert.deepEqual(r, {
    gather: true, auth: ['could not authenticate', 'AEAD tag mismatch'], malformed: 'ML-DSA seed must be 32 bytes',
  });
});

test('WebCrypto ML-DSA-65 and noble agree (keygen from seed, both signing modes)', { timeout: 120_000 }, async (t) => {
  if (!timings.boot.features.webcrypto_mldsa) {
    t.skip('this browser has no WebCrypto ML-DSA-65: glue uses noble only');
    return;
  }
  const r = await call('mldsa_parity', {
    seed: randomBytes(32).toString('hex'), msg: randomBytes(100).toString('hex'), ctx: '5341494848',
  });
  assert.deepEqual(r, {
    public_equal: true, noble_verifies_glue_hedged: true, glue_verifies_noble_hedged: true,
    det_equal_noble: true, glue_verifies_det: true,
  });
});

test('ML-DSA-65 signatures cross between the browser and CPython, both ways', { timeout: 120_000 }, async (t) => {
  if (!fs.existsSync(VENV_PY)) {
    t.skip('no .venv (python3 build.py setup)');
    return;
  }
  const seed = randomBytes(32).toString('hex');
  const msg = randomBytes(200).toString('hex');
  const ctx = Buffer.from('SAIHM-CELL-v1').toString('hex');
  // browser: public key, a hedged and a deterministic signature
  const b = await call('exec', { code: `
from ownmem.crypto import provider, run_sync
p, h = provider(), bytes.fromhex
seed, msg, ctx = h("${seed}"), h("${msg}"), h("${ctx}")
{"pub": run_sync(p.mldsa65_public(seed)).hex(),
 "hedged": run_sync(p.mldsa65_sign(seed, msg, ctx)).hex(),
 "det": run_sync(p.mldsa65_sign(seed, msg, ctx, deterministic=True)).hex()}
` });
  // CPython: check the browser's, make its own
  const c = JSON.parse(cpython(`
import json, sys
from cryptography.hazmat.primitives.asymmetric.mldsa import MLDSA65PrivateKey, MLDSA65PublicKey
from ownmem.crypto import provider, run_sync
a = json.load(sys.stdin); h = bytes.fromhex
seed, msg, ctx = h(a["seed"]), h(a["msg"]), h(a["ctx"])
pub = MLDSA65PublicKey.from_public_bytes(h(a["pub"]))
ok = {}
for name in ("hedged", "det"):
    try:
        pub.verify(h(a[name]), msg, ctx); ok[name] = True
    except Exception:
        ok[name] = False
try:
    pub.verify(h(a["hedged"]), msg, b"other"); ok["other_ctx"] = True
except Exception:
    ok["other_ctx"] = False
key = MLDSA65PrivateKey.from_seed_bytes(seed)
print(json.dumps({"ok": ok, "pub": key.public_key().public_bytes_raw().hex(),
                  "hedged": key.sign(msg, ctx).hex(),
                  "det": run_sync(provider().mldsa65_sign(seed, msg, ctx, deterministic=True)).hex()}))
`, { seed, msg, ctx, ...b }));
  assert.deepEqual(c.ok, { hedged: true, det: true, other_ctx: false });
  assert.equal(c.pub, b.pub, 'same public key from the same seed');
  assert.equal(c.det, b.det, 'FIPS 204 deterministic signing: noble == dilithium-py');
  // browser: verify CPython's hedged signature
  const v = await call('exec', { code: `
from ownmem.crypto import provider, run_sync
p, h = provider(), bytes.fromhex
pub, msg, sig = h("${b.pub}"), h("${msg}"), h("${c.hedged}")
[run_sync(p.mldsa65_verify(pub, msg, sig, h("${ctx}"))), run_sync(p.mldsa65_verify(pub, msg, sig, b"other"))]
` });
  assert.deepEqual(v, [true, false]);
});

test('per-operation costs (JS call overhead, batch vs single)', { timeout: 120_000 }, async () => {
  const r = await call('exec', { code: `
import time, js
from pyodide.ffi import run_sync as jspi
from ownmem.crypto import provider, run_sync, random_bytes
p = provider()
N = 300
key, nonce = random_bytes(32), random_bytes(12)
ct = run_sync(p.aes_gcm_encrypt(key, nonce, b"x" * 200, b"aad"))
kek = random_bytes(32)
wrapped = run_sync(p.aes_kw_wrap(kek, random_bytes(32)))
seed = random_bytes(32)
pub = run_sync(p.ed25519_public(seed))
msg = b"m" * 300
sig = run_sync(p.ed25519_sign(seed, msg))
out = {}
def per_op(name, f, n=N):
    t = time.perf_counter()
    for _ in range(n):
        f()
    out[name] = round((time.perf_counter() - t) * 1000 / n, 4)
per_op("aes_gcm_decrypt", lambda: run_sync(p.aes_gcm_decrypt(key, nonce, ct, b"aad")))
def send(coro):  # the driver ownmem.crypto.run_sync uses on CPython: BrowserProvider never suspends
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("suspended")
per_op("aes_gcm_decrypt (send driver)", lambda: send(p.aes_gcm_decrypt(key, nonce, ct, b"aad")))
per_op("js_call_floor (run_sync of a resolved promise)", lambda: jspi(js.Promise.resolve(1)))
per_op("aes_kw_unwrap", lambda: run_sync(p.aes_kw_unwrap(kek, wrapped)))
per_op("ed25519_verify", lambda: run_sync(p.ed25519_verify(pub, sig, msg)))
per_op("ed25519_sign", lambda: run_sync(p.ed25519_sign(seed, msg)))
per_op("hkdf_sha256", lambda: run_sync(p.hkdf_sha256(key, b"info")))
per_op("aes_gcm_decrypt_many/item", lambda: run_sync(p.aes_gcm_decrypt_many([key] * N, [nonce] * N, [ct] * N, [b"aad"] * N)), 1)
out["aes_gcm_decrypt_many/item"] = round(out["aes_gcm_decrypt_many/item"] / N, 4)
per_op("aes_kw_unwrap_many/item", lambda: run_sync(p.aes_kw_unwrap_many(kek, [wrapped] * N)), 1)
out["aes_kw_unwrap_many/item"] = round(out["aes_kw_unwrap_many/item"] / N, 4)
per_op("ed25519_verify_many/item", lambda: run_sync(p.ed25519_verify_many([pub] * N, [sig] * N, [msg] * N)), 1)
out["ed25519_verify_many/item"] = round(out["ed25519_verify_many/item"] / N, 4)
mseed = random_bytes(32)
mpub = run_sync(p.mldsa65_public(mseed))
msig = run_sync(p.mldsa65_sign(mseed, msg, b"c"))
per_op("mldsa65_sign_hedged", lambda: run_sync(p.mldsa65_sign(mseed, msg, b"c")), 20)
per_op("mldsa65_sign_deterministic", lambda: run_sync(p.mldsa65_sign(mseed, msg, b"c", deterministic=True)), 5)
per_op("mldsa65_verify", lambda: run_sync(p.mldsa65_verify(mpub, msg, msig, b"c")), 50)
per_op("argon2id_64MiB_t3_p4", lambda: run_sync(p.argon2id(b"pw", bytes(16))), 1)
out
` });
  timings.per_op_ms = r;
  assert.ok(r['aes_gcm_decrypt_many/item'] < r.aes_gcm_decrypt, 'batching must beat one call per object');
});
