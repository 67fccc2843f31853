// Module worker for tests/browser/provider.test.mjs: boots Pyodide like the app's
// worker, installs the ownmem sources, registers web/js/glue.js as "ownmem_js",
// installs BrowserProvider, and answers {id, op, args} messages.
import { loadPyodide } from '/pyodide/pyodide.mjs';
import * as glue from '/js/glue.js';
import { ml_dsa65 } from '/vendor/vendor.js';

const SITE = '/lib/python3.14/site-packages';
let pyodide = null;

const hex = (u) => Array.from(u, (b) => b.toString(16).padStart(2, '0')).join('');
const unhex = (s) => Uint8Array.from(s.match(/../g) ?? [], (b) => parseInt(b, 16));

function toPlain(x) {
  if (x && typeof x.toJs === 'function') {
    const out = x.toJs({ dict_converter: Object.fromEntries, create_pyproxies: false });
    x.destroy();
    return out;
  }
  return x;
}

const ops = {
  async boot() {
    const t0 = performance.now();
    pyodide = await loadPyodide({ indexURL: '/pyodide/' });
    const t1 = performance.now();
    const files = await (await fetch('/ownmem-src.json')).json();
    for (const [rel, text] of Object.entries(files)) {
      const path = `${SITE}/${rel}`;
      pyodide.FS.mkdirTree(path.slice(0, path.lastIndexOf('/')));
      pyodide.FS.writeFile(path, text);
    }
    pyodide.registerJsModule('ownmem_js', glue);
    pyodide.runPython(`
import ownmem.crypto
from ownmem.web.provider import BrowserProvider
ownmem.crypto.set_provider(BrowserProvider())
`);
    const t2 = performance.now();
    const features = await glue.features();
    return {
      load_pyodide_ms: t1 - t0, install_ms: t2 - t1, files: Object.keys(files).length, features,
      python: pyodide.runPython('import sys; sys.version'),
      // JSPI: run_sync is possible on a stack entered through an async call
      can_run_sync: await pyodide.runPythonAsync('from pyodide.ffi import can_run_sync; can_run_sync()'),
      can_run_sync_plain: pyodide.runPython('from pyodide.ffi import can_run_sync; can_run_sync()'),
      provider: pyodide.runPython('import ownmem.crypto; ownmem.crypto.provider().name'),
    };
  },

  // ownmem.web.selftest.run, entered with callPromising so that run_sync (JSPI) can suspend.
  async selftest({ vectors }) {
    const run = pyodide.pyimport('ownmem.web.selftest').run;
    const t0 = performance.now();
    const result = toPlain(await run.callPromising(vectors));
    run.destroy();
    return { ...result, ms: performance.now() - t0 };
  },

  // Run Python (async-capable, so run_sync works); the value of the last expression is returned.
  async exec({ code }) {
    return toPlain(await pyodide.runPythonAsync(code));
  },

  // WebCrypto ML-DSA-65 (through glue) against noble, in JavaScript.
  async mldsa_parity({ seed, msg, ctx }) {
    const [s, m, c] = [unhex(seed), unhex(msg), unhex(ctx)];
    const noble = ml_dsa65.keygen(s);
    const pub = await glue.mldsa65_public(s);
    const hedged = await glue.mldsa65_sign(s, m, c, false);
    const det = await glue.mldsa65_sign(s, m, c, true);
    return {
      public_equal: hex(pub) === hex(noble.publicKey),
      noble_verifies_glue_hedged: ml_dsa65.verify(hedged, m, noble.publicKey, { context: c }),
      glue_verifies_noble_hedged: await glue.mldsa65_verify(pub, m, ml_dsa65.sign(m, noble.secretKey, { context: c }), c),
      det_equal_noble: hex(det) === hex(ml_dsa65.sign(m, noble.secretKey, { context: c, extraEntropy: false })),
      glue_verifies_det: await glue.mldsa65_verify(pub, m, det, c),
    };
  },
};

self.onmessage = async (e) => {
  const { id, op, args } = e.data;
  try {
    self.postMessage({ id, ok: true, result: await ops[op](args) });
  } catch (err) {
    self.postMessage({ id, ok: false, error: `${err?.name ?? 'Error'}: ${err?.message ?? err}` });
  }
};
