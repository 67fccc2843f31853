// The page's crypto (web/js/glue.js, the operations the vault worker awaits) against OpenSSL
// (node:crypto), in Chromium, Firefox ESR and WebKit, for Ed25519 and X25519 seeds whose first
// byte is 0 as well as others.  WebKitGTK's WebCrypto refuses to import such a seed (a DataError:
// one key in 256, an owner key that could never sign there, a scope-key wrap that failed at
// random); glue.js then does that seed's work with @noble/curves, and the bytes must be the ones
// OpenSSL makes.
//
//   python3 build.py build && node --test tests/browser/webcrypto.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, spawnServer, serverDirs, stopProcess } from './helpers.mjs';
import { ENGINES, TITLE, skipOf, withView } from './engines.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const DIST = path.join(ROOT, 'web', 'dist');
const PY = process.env.OWNMEM_PYTHON || path.join(ROOT, '.venv', 'bin', 'python');
// PKCS#8 wrappers of a bare 32-byte seed (RFC 8410)
const ED_PKCS8 = Buffer.from('302e020100300506032b657004220420', 'hex');
const X_PKCS8 = Buffer.from('302e020100300506032b656e04220420', 'hex');
const X_SPKI = Buffer.from('302a300506032b656e032100', 'hex');
const MESSAGE = Buffer.from('ownmem: a seed whose first byte is 0');

let tmp, dataDir, webDir, origin, serverProc = null;

before(async () => {
  if (!fs.existsSync(path.join(DIST, 'precache.json'))) {
    throw new Error(`the web app is not built (${DIST} is missing): run \`python3 build.py build\` first`);
  }
  ({ tmp, dataDir, webDir } = serverDirs(DIST, 'ownmem-webcrypto-'));
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  serverProc = await spawnServer({ py: PY, cwd: ROOT, port, dataDir, webDir, onOutput: () => {} });
}, { timeout: 60_000 });

after(async () => {
  await stopProcess(serverProc);
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

/** Seeds: 12 whose first byte is 0 (one of them 00 01 .. 1f), 4 others. */
function seeds() {
  const out = [Buffer.from([...Array(32).keys()])];
  while (out.length < 12) out.push(Buffer.concat([Buffer.from([0]), crypto.randomBytes(31)]));
  while (out.length < 16) out.push(Buffer.concat([Buffer.from([1 + crypto.randomInt(255)]), crypto.randomBytes(31)]));
  return out;
}

/** What OpenSSL makes of each seed: Ed25519 public key and signature, X25519 public key and the
 *  shared secret with a fixed peer (RFC 7748's Bob). */
function openssl(seed) {
  const ed = crypto.createPrivateKey({ key: Buffer.concat([ED_PKCS8, seed]), format: 'der', type: 'pkcs8' });
  const x = crypto.createPrivateKey({ key: Buffer.concat([X_PKCS8, seed]), format: 'der', type: 'pkcs8' });
  const bob = crypto.createPublicKey({ key: Buffer.concat([X_SPKI, Buffer.from(BOB_PUB, 'hex')]), format: 'der', type: 'spki' });
  const raw = (k) => k.export({ format: 'der', type: 'spki' }).subarray(-32).toString('hex');
  return {
    ed_pub: raw(crypto.createPublicKey(ed)),
    ed_sig: crypto.sign(null, MESSAGE, ed).toString('hex'),
    x_pub: raw(crypto.createPublicKey(x)),
    x_shared: crypto.diffieHellman({ privateKey: x, publicKey: bob }).toString('hex'),
  };
}
const BOB_PUB = 'de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f';

/** In the page: glue.js's answers for each seed (hex), and whether this engine's WebCrypto
 *  imports a seed whose first byte is 0 at all (so the test says which path it checked). */
async function inPage({ seeds, message, bob }) {
  const g = await import('/js/glue.js');
  const unhex = (h) => Uint8Array.from(h.match(/../g), (b) => parseInt(b, 16));
  const hex = (u) => Array.from(u, (b) => b.toString(16).padStart(2, '0')).join('');
  const msg = unhex(message);
  const out = [];
  for (const s of seeds) {
    const seed = unhex(s);
    out.push({
      ed_pub: hex(await g.ed25519_public(seed)),
      ed_sig: hex(await g.ed25519_sign(seed, msg)),
      x_pub: hex(await g.x25519_public(seed)),
      x_shared: hex(await g.x25519_shared(seed, unhex(bob))),
    });
  }
  let refuses = false;
  try {
    await crypto.subtle.importKey('pkcs8', unhex(`302e020100300506032b657004220420${seeds[0]}`), { name: 'Ed25519' }, true, ['sign']);
  } catch (e) {
    refuses = e.name;
  }
  return { out, refuses };
}

for (const engine of ENGINES) {
  test(`${TITLE[engine]}: Ed25519 and X25519 from seeds whose first byte is 0 make OpenSSL's bytes`,
    { skip: skipOf(engine), timeout: 300_000 }, () => withView(engine, { tmp }, async (view) => {
      await view.goto(`${origin}/`);
      const given = seeds();
      const { out, refuses } = await view.evaluate(inPage,
        { seeds: given.map((s) => s.toString('hex')), message: MESSAGE.toString('hex'), bob: BOB_PUB });
      console.log(`# ${engine}: WebCrypto ${refuses ? `refuses such a seed (${refuses})` : 'imports such a seed'}`);
      assert.deepEqual(out, given.map(openssl));
    }));
}
