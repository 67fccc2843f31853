// ownmem crypto glue: the functions Python's BrowserProvider (py/ownmem/web/provider.py) awaits.
//
// The worker registers this module with pyodide.registerJsModule('ownmem_js', glue).
// Every function takes and returns Uint8Array (byte strings); nothing here holds a
// passphrase.  Errors that Python must tell apart carry a name:
//   'AuthenticationFailed'  AEAD tag or key-unwrap failure, bad X25519 peer (low order)
//   'MalformedInput'        a seed or context of the wrong size
//   'NotSupportedError'     the browser lacks the primitive (and there is no fallback)
// Verification answers false instead of throwing.
//
//   Argon2id     hash-wasm (../vendor/vendor.js)
//   HKDF, AES-256-GCM, AES-KW                       WebCrypto
//   Ed25519, X25519   WebCrypto where the browser has them, @noble/curves otherwise
//   ML-DSA-65    WebCrypto where the browser has it (keygen from seed, hedged sign, verify);
//                @noble/post-quantum otherwise, and always for deterministic signing
//                (WebCrypto's ML-DSA signs hedged only).
//
// Each call from Python costs ~0.16 ms, so the hot paths of opening a vault have
// batch forms (aes_kw_unwrap_many, aes_gcm_decrypt_many, ed25519_verify_many).

import { argon2id as hashWasmArgon2id, ml_dsa65 as nobleMlDsa65, nobleEd25519, nobleKeccak256, nobleX25519 }
  from '../vendor/vendor.js';

/** @typedef {Uint8Array<ArrayBuffer>} Bytes what bytes() makes of its input, and what WebCrypto takes */
/**
 * Bytes as Python passes them (a Uint8Array: Pyodide's conversion of bytes; bytes() also
 * takes an ArrayBuffer or another view); null or undefined: none.
 * @typedef {Bytes | ArrayBuffer | null | undefined} BytesIn
 */
/** @typedef {Map<string, number> | Record<string, number | undefined> | null | undefined} Options */

const subtle = globalThis.crypto.subtle;

const ED25519_PKCS8 = hex('302e020100300506032b657004220420');
const X25519_PKCS8 = hex('302e020100300506032b656e04220420');
const EMPTY = new Uint8Array(0);
const CACHE_LIMIT = 4096;
const MLDSA65_PUBLIC = 1952;
const MLDSA65_SIGNATURE = 3309;

// ------------------------------------------------------------------ helpers

/** @param {string} s */
function hex(s) {
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.substr(2 * i, 2), 16);
  return out;
}

/**
 * An Error Python tells apart by its name.
 * @param {string} name
 * @param {string} message
 */
function named(name, message) {
  const e = new Error(message);
  e.name = name;
  return e;
}

const authFailed = (/** @type {string} */ why) => named('AuthenticationFailed', why);
const malformed = (/** @type {string} */ why) => named('MalformedInput', why);

// The result's buffer is typed an ArrayBuffer (what WebCrypto's BufferSource asks for): no
// SharedArrayBuffer reaches this worker (nothing shares memory with it).
/**
 * @param {unknown} x
 * @returns {Bytes}
 */
function bytes(x) {
  if (x instanceof Uint8Array) return /** @type {Bytes} */ (x);
  if (x === null || x === undefined) return EMPTY;
  if (ArrayBuffer.isView(x)) return /** @type {Bytes} */ (new Uint8Array(x.buffer, x.byteOffset, x.byteLength));
  if (x instanceof ArrayBuffer) return new Uint8Array(x);
  throw new TypeError('expected bytes');
}

/**
 * @param {Uint8Array} a
 * @param {Uint8Array} b
 */
function concat(a, b) {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/** @param {string} s */
function b64urlDecode(s) {
  const b = atob(s.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (s.length % 4)) % 4));
  const out = new Uint8Array(b.length);
  for (let i = 0; i < b.length; i++) out[i] = b.charCodeAt(i);
  return out;
}

/**
 * @param {Options} opts
 * @param {string} name
 * @param {number} fallback
 * @returns {number}
 */
function option(opts, name, fallback) {
  if (opts === null || opts === undefined) return fallback;
  const v = opts instanceof Map ? opts.get(name) : opts[name];
  return v === undefined || v === null ? fallback : v;
}

// A Map of imported keys by their bytes.  Values are promises, so two concurrent
// callers import a key once; a failed import is not remembered.
/** @template V */
class KeyCache {
  /** @param {boolean} secret whether forgetSecrets() drops it */
  constructor(secret) {
    this.secret = secret;
    /** @type {Map<string, Promise<V>>} */
    this.map = new Map();
  }

  /**
   * @param {Uint8Array} keyBytes
   * @param {() => Promise<V>} make
   * @returns {Promise<V>}
   */
  get(keyBytes, make) {
    const k = String.fromCharCode.apply(null, /** @type {any} */ (keyBytes));
    let p = this.map.get(k);
    if (p === undefined) {
      if (this.map.size >= CACHE_LIMIT) this.map.clear();
      p = make();
      this.map.set(k, p);
      p.catch(() => {
        if (this.map.get(k) === p) this.map.delete(k);
      });
    }
    return p;
  }

  clear() {
    this.map.clear();
  }
}

/** @typedef {{ key: CryptoKey, pub: Uint8Array }} Pair */

/** @type {KeyCache<CryptoKey>} */
const gcmKeys = new KeyCache(true);
/** @type {KeyCache<CryptoKey>} */
const kwKeys = new KeyCache(true);
/** @type {KeyCache<Pair | null>} */
const edPrivate = new KeyCache(true);      // seed -> {key, pub}, or null: WebCrypto refused the seed
/** @type {KeyCache<Pair | null>} */
const xPrivate = new KeyCache(true);       // seed -> {key, pub}, or null: WebCrypto refused the seed
/** @type {KeyCache<Pair>} */
const mldsaPrivate = new KeyCache(true);   // seed -> {key, pub} (WebCrypto)
/** @type {KeyCache<{ secretKey: Uint8Array, publicKey: Uint8Array }>} */
const noblePrivate = new KeyCache(true);   // seed -> {secretKey, publicKey} (noble)
/** @type {KeyCache<CryptoKey>} */
const edPublic = new KeyCache(false);
/** @type {KeyCache<CryptoKey>} */
const mldsaPublic = new KeyCache(false);
const CACHES = [gcmKeys, kwKeys, edPrivate, xPrivate, mldsaPrivate, noblePrivate, edPublic, mldsaPublic];

/** Drop every cached private or symmetric key (the vault calls this on lock). */
export function forgetSecrets() {
  for (const c of CACHES) if (c.secret) c.clear();
}

// ------------------------------------------------------------------ feature detection

/** @typedef {{ webcrypto_ed25519: boolean, webcrypto_x25519: boolean, webcrypto_mldsa: boolean }} Detected */
/** @type {Promise<Detected> | null} */
let detected = null;

/** @param {() => Promise<boolean>} f */
async function probe(f) {
  try {
    return (await f()) === true;
  } catch {
    return false;
  }
}

/** @returns {Promise<Detected>} */
function detect() {
  detected ??= (async () => {
    const seed = new Uint8Array(32).fill(7);
    const msg = new Uint8Array([1, 2, 3]);
    const [ed, x, mldsa] = await Promise.all([
      probe(async () => {
        const k = await subtle.importKey('pkcs8', concat(ED25519_PKCS8, seed), { name: 'Ed25519' }, true, ['sign']);
        const pub = b64urlDecode(/** @type {string} */ ((await subtle.exportKey('jwk', k)).x));
        const sig = await subtle.sign({ name: 'Ed25519' }, k, msg);
        const pk = await subtle.importKey('raw', pub, { name: 'Ed25519' }, false, ['verify']);
        return subtle.verify({ name: 'Ed25519' }, pk, sig, msg);
      }),
      probe(async () => {
        const k = await subtle.importKey('pkcs8', concat(X25519_PKCS8, seed), { name: 'X25519' }, true, ['deriveBits']);
        const pub = b64urlDecode(/** @type {string} */ ((await subtle.exportKey('jwk', k)).x));
        const pk = await subtle.importKey('raw', pub, { name: 'X25519' }, false, []);
        return (await subtle.deriveBits({ name: 'X25519', public: pk }, k, 256)).byteLength === 32;
      }),
      probe(async () => {
        const alg = { name: 'ML-DSA-65', context: msg };
        const k = await subtle.importKey('raw-seed', seed, { name: 'ML-DSA-65' }, true, ['sign']);
        const pub = b64urlDecode(/** @type {string} */ ((await subtle.exportKey('jwk', k)).pub));
        const sig = await subtle.sign(alg, k, msg);
        const pk = await subtle.importKey('raw-public', pub, { name: 'ML-DSA-65' }, false, ['verify']);
        return pub.length === MLDSA65_PUBLIC && (await subtle.verify(alg, pk, sig, msg));
      }),
    ]);
    return { webcrypto_ed25519: ed, webcrypto_x25519: x, webcrypto_mldsa: mldsa };
  })();
  return detected;
}

/** What this browser provides: {webcrypto_ed25519, webcrypto_x25519, webcrypto_mldsa, argon2, mldsa}. */
export async function features() {
  const f = await detect();
  return {
    ...f, jspi: true, argon2: 'hash-wasm', mldsa: f.webcrypto_mldsa ? 'webcrypto' : 'noble',
    ed25519: f.webcrypto_ed25519 ? 'webcrypto' : 'noble', x25519: f.webcrypto_x25519 ? 'webcrypto' : 'noble',
    aes: 'webcrypto', hkdf: 'webcrypto',
  };
}

/**
 * @param {string} flag
 * @param {string} what
 */
async function need(flag, what) {
  if (!(await detect())[/** @type {keyof Detected} */ (flag)]) throw named('NotSupportedError', `this browser has no WebCrypto ${what}`);
}

// ------------------------------------------------------------------ Argon2id, HKDF

/** The vault's Argon2id parameters (ownmem.crypto.interface ARGON2_*, the CLI's). */
export const ARGON2 = Object.freeze({ memory_kib: 64 * 1024, iterations: 3, parallelism: 4, length: 32 });

/** Argon2id (RFC 9106) via hash-wasm; opts = {memory_kib, iterations, parallelism, length}. */
// Keccak-256 (Ethereum's, not SHA3-256) of the UOMP audit's event hashes
// (ownmem.agent.audit_batches.keccak256): WebCrypto has none; synchronous, so glue-sync.js
// re-exports it for the path without JSPI.
/** @param {BytesIn} data */
export function keccak256(data) {
  return nobleKeccak256(bytes(data));
}

/**
 * @param {BytesIn} password
 * @param {BytesIn} salt
 * @param {Options} opts
 * @returns {Promise<Uint8Array>}
 */
export async function argon2id(password, salt, opts) {
  return hashWasmArgon2id({
    password: bytes(password),
    salt: bytes(salt),
    memorySize: option(opts, 'memory_kib', 64 * 1024),
    iterations: option(opts, 'iterations', 3),
    parallelism: option(opts, 'parallelism', 4),
    hashLength: option(opts, 'length', 32),
    outputType: 'binary',
  });
}

/** HKDF-SHA256 (RFC 5869); a null salt is HashLen zero bytes, the same as an empty one. */
/**
 * @param {BytesIn} ikm
 * @param {BytesIn} info
 * @param {number} [length]
 * @param {BytesIn} [salt]
 */
export async function hkdf_sha256(ikm, info, length = 32, salt = null) {
  const key = await subtle.importKey('raw', bytes(ikm), 'HKDF', false, ['deriveBits']);
  const bits = await subtle.deriveBits(
    { name: 'HKDF', hash: 'SHA-256', salt: bytes(salt), info: bytes(info) }, key, length * 8);
  return new Uint8Array(bits);
}

// ------------------------------------------------------------------ AES-256-GCM

/** @param {Bytes} key */
function gcmKey(key) {
  return gcmKeys.get(key, () => subtle.importKey('raw', key, 'AES-GCM', false, ['encrypt', 'decrypt']));
}

/** AES-GCM encryption; returns ciphertext || 16-byte tag. */
/**
 * @param {BytesIn} key
 * @param {BytesIn} nonce
 * @param {BytesIn} data
 * @param {BytesIn} aad
 */
export async function aes_gcm_encrypt(key, nonce, data, aad) {
  const k = await gcmKey(bytes(key));
  const alg = { name: 'AES-GCM', iv: bytes(nonce), additionalData: bytes(aad), tagLength: 128 };
  return new Uint8Array(await subtle.encrypt(alg, k, bytes(data)));
}

/**
 * @param {CryptoKey} k
 * @param {Bytes} nonce
 * @param {Bytes} ct
 * @param {Bytes} aad
 */
async function gcmOpen(k, nonce, ct, aad) {
  return new Uint8Array(await subtle.decrypt(
    { name: 'AES-GCM', iv: nonce, additionalData: aad, tagLength: 128 }, k, ct));
}

/** AES-256-GCM decryption; any failure (tag, sizes) throws AuthenticationFailed. */
/**
 * @param {BytesIn} key
 * @param {BytesIn} nonce
 * @param {BytesIn} data
 * @param {BytesIn} aad
 */
export async function aes_gcm_decrypt(key, nonce, data, aad) {
  key = bytes(key);
  nonce = bytes(nonce);
  data = bytes(data);
  if (key.length !== 32 || nonce.length !== 12 || data.length < 16) {
    throw authFailed('bad AES-GCM key, nonce or ciphertext length');
  }
  try {
    return await gcmOpen(await gcmKey(key), nonce, data, bytes(aad));
  } catch {
    throw authFailed('AEAD tag mismatch');
  }
}

/** Many AES-256-GCM decryptions at once; each result is the plaintext or null.
 *  Keys here are single-use DEKs, so they are imported without being cached.
 * @param {ArrayLike<BytesIn>} keys
 * @param {ArrayLike<BytesIn>} nonces
 * @param {ArrayLike<BytesIn>} datas
 * @param {ArrayLike<BytesIn>} aads
 */
export async function aes_gcm_decrypt_many(keys, nonces, datas, aads) {
  return Promise.all(Array.from(keys, async (keyIn, i) => {
    const key = bytes(keyIn);
    const nonce = bytes(nonces[i]);
    const data = bytes(datas[i]);
    if (key.length !== 32 || nonce.length !== 12 || data.length < 16) return null;
    try {
      const k = await subtle.importKey('raw', key, 'AES-GCM', false, ['decrypt']);
      return await gcmOpen(k, nonce, data, bytes(aads[i]));
    } catch {
      return null;
    }
  }));
}

// ------------------------------------------------------------------ AES-KW (RFC 3394)

// The wrapped bytes travel as an HMAC key: WebCrypto wraps CryptoKeys, and HMAC
// takes raw key material of any length.
const WRAPPED_ALG = { name: 'HMAC', hash: 'SHA-256' };

/** @param {Bytes} kek */
function kwKey(kek) {
  return kwKeys.get(kek, () => subtle.importKey('raw', kek, 'AES-KW', false, ['wrapKey', 'unwrapKey']));
}

/** RFC 3394 key wrap of `key` (a multiple of 8 bytes, at least 16) under `kek`. */
/**
 * @param {BytesIn} kek
 * @param {BytesIn} key
 */
export async function aes_kw_wrap(kek, key) {
  key = bytes(key);
  if (key.length < 16 || key.length % 8 !== 0) throw malformed('AES-KW wraps a multiple of 8 bytes, at least 16');
  const k = await kwKey(bytes(kek));
  const inner = await subtle.importKey('raw', key, WRAPPED_ALG, true, ['sign']);
  return new Uint8Array(await subtle.wrapKey('raw', inner, k, 'AES-KW'));
}

/**
 * @param {CryptoKey} k
 * @param {Bytes} wrapped
 */
async function kwOpen(k, wrapped) {
  if (wrapped.length < 24 || wrapped.length % 8 !== 0) throw authFailed('bad wrapped key length');
  const inner = await subtle.unwrapKey('raw', wrapped, k, 'AES-KW', WRAPPED_ALG, true, ['sign']);
  return new Uint8Array(await subtle.exportKey('raw', inner));
}

/** RFC 3394 key unwrap; an integrity failure or a malformed wrap throws AuthenticationFailed. */
/**
 * @param {BytesIn} kek
 * @param {BytesIn} wrapped
 */
export async function aes_kw_unwrap(kek, wrapped) {
  try {
    return await kwOpen(await kwKey(bytes(kek)), bytes(wrapped));
  } catch {
    throw authFailed('key unwrap failed');
  }
}

/** Many unwraps under one KEK; each result is the key or null. */
/**
 * @param {BytesIn} kek
 * @param {ArrayLike<BytesIn>} wrappedList
 */
export async function aes_kw_unwrap_many(kek, wrappedList) {
  /** @type {CryptoKey} */
  let k;
  try {
    k = await kwKey(bytes(kek));
  } catch {
    return Array.from(wrappedList, () => null);
  }
  return Promise.all(Array.from(wrappedList, async (w) => {
    try {
      return await kwOpen(k, bytes(w));
    } catch {
      return null;
    }
  }));
}

// ------------------------------------------------------------------ Ed25519 (RFC 8032)

// A key pair from its 32-byte seed (Ed25519 or X25519): WebCrypto imports a bare seed only
// inside PKCS#8, and tells the public key only through JWK.
/**
 * @param {'Ed25519' | 'X25519'} alg
 * @param {Uint8Array} pkcs8Prefix
 * @param {KeyUsage} usage
 * @param {KeyCache<Pair | null>} cache
 * @param {BytesIn} seed
 * @returns {Promise<Pair | null>} null: this engine's WebCrypto refused the seed
 */
async function seededPair(alg, pkcs8Prefix, usage, cache, seed) {
  seed = bytes(seed);
  if (seed.length !== 32) throw malformed(`${alg} seed must be 32 bytes`);
  await need(`webcrypto_${alg.toLowerCase()}`, alg);
  return cache.get(seed, async () => {
    try {
      const key = await subtle.importKey('pkcs8', concat(pkcs8Prefix, seed), { name: alg }, true, [usage]);
      return { key, pub: b64urlDecode(/** @type {string} */ ((await subtle.exportKey('jwk', key)).x)) };
    } catch (/** @type {any} */ err) {
      // WebKitGTK (its libgcrypt) refuses a seed whose first byte is 0 with a DataError: one
      // key in 256, an owner key that could never sign or an ephemeral wrap that fails at
      // random.  Both curves are deterministic, so @noble/curves does that seed's work and the
      // bytes are the same (tests/browser/webcrypto.test.mjs)
      if (err?.name === 'DataError') return null;
      throw err;
    }
  });
}

const edPair = (/** @type {BytesIn} */ seed) => seededPair('Ed25519', ED25519_PKCS8, 'sign', edPrivate, seed);

// Where WebCrypto has no Ed25519 or X25519 (Safari before 17, older Chromium), @noble/curves
// does it: RFC 8032 verification (zip215: false), as WebCrypto's.
const noEd = async () => !(await detect()).webcrypto_ed25519;
const noX = async () => !(await detect()).webcrypto_x25519;

/**
 * @param {BytesIn} pub
 * @param {BytesIn} sig
 * @param {BytesIn} msg
 */
function nobleEdVerify(pub, sig, msg) {
  pub = bytes(pub);
  sig = bytes(sig);
  if (pub.length !== 32 || sig.length !== 64) return false;
  try {
    return nobleEd25519.verify(sig, bytes(msg), pub, { zip215: false });
  } catch {
    return false;
  }
}

/**
 * @param {BytesIn} seed
 * @param {string} alg
 */
function seed32(seed, alg) {
  seed = bytes(seed);
  if (seed.length !== 32) throw malformed(`${alg} seed must be 32 bytes`);
  return seed;
}

/** @param {BytesIn} seed */
export async function ed25519_public(seed) {
  const pair = await noEd() ? null : await edPair(seed);
  return pair ? pair.pub.slice() : nobleEd25519.getPublicKey(seed32(seed, 'Ed25519'));
}

/**
 * @param {BytesIn} seed
 * @param {BytesIn} msg
 */
export async function ed25519_sign(seed, msg) {
  const pair = await noEd() ? null : await edPair(seed);
  if (!pair) return nobleEd25519.sign(bytes(msg), seed32(seed, 'Ed25519'));
  return new Uint8Array(await subtle.sign({ name: 'Ed25519' }, pair.key, bytes(msg)));
}

/**
 * @param {BytesIn} pub
 * @param {BytesIn} sig
 * @param {BytesIn} msg
 */
async function edVerify(pub, sig, msg) {
  pub = bytes(pub);
  sig = bytes(sig);
  if (pub.length !== 32 || sig.length !== 64) return false;
  try {
    const k = await edPublic.get(pub, () => subtle.importKey('raw', pub, { name: 'Ed25519' }, false, ['verify']));
    return await subtle.verify({ name: 'Ed25519' }, k, sig, bytes(msg));
  } catch {
    return false;
  }
}

/**
 * @param {BytesIn} pub
 * @param {BytesIn} sig
 * @param {BytesIn} msg
 */
export async function ed25519_verify(pub, sig, msg) {
  if (await noEd()) return nobleEdVerify(pub, sig, msg);
  return edVerify(pub, sig, msg);
}

/**
 * Many verifications at once; one boolean each.
 * @param {ArrayLike<BytesIn>} pubs
 * @param {ArrayLike<BytesIn>} sigs
 * @param {ArrayLike<BytesIn>} msgs
 */
export async function ed25519_verify_many(pubs, sigs, msgs) {
  if (await noEd()) return Array.from(pubs, (pub, i) => nobleEdVerify(pub, sigs[i], msgs[i]));
  return Promise.all(Array.from(pubs, (pub, i) => edVerify(pub, sigs[i], msgs[i])));
}

// ------------------------------------------------------------------ X25519 (RFC 7748)

const xPair = (/** @type {BytesIn} */ seed) => seededPair('X25519', X25519_PKCS8, 'deriveBits', xPrivate, seed);

/** @param {BytesIn} seed */
export async function x25519_public(seed) {
  const pair = await noX() ? null : await xPair(seed);
  return pair ? pair.pub.slice() : nobleX25519.getPublicKey(seed32(seed, 'X25519'));
}

/** X25519 shared secret; a malformed or low-order peer (all-zero result) throws AuthenticationFailed. */
/**
 * @param {BytesIn} seed
 * @param {BytesIn} peerPub
 */
export async function x25519_shared(seed, peerPub) {
  const pair = await noX() ? null : await xPair(seed);
  peerPub = bytes(peerPub);
  if (!pair) return nobleShared(seed32(seed, 'X25519'), peerPub);
  if (peerPub.length !== 32) throw authFailed('bad X25519 public key');
  let shared;
  try {
    const peer = await subtle.importKey('raw', peerPub, { name: 'X25519' }, false, []);
    shared = new Uint8Array(await subtle.deriveBits({ name: 'X25519', public: peer }, pair.key, 256));
  } catch {
    throw authFailed('bad X25519 public key');
  }
  if (shared.every((b) => b === 0)) throw authFailed('bad X25519 public key');
  return shared;
}

/**
 * @param {Uint8Array} seed
 * @param {Uint8Array} peerPub
 */
function nobleShared(seed, peerPub) {
  if (peerPub.length !== 32) throw authFailed('bad X25519 public key');
  let shared;
  try {
    shared = nobleX25519.getSharedSecret(seed, peerPub);
  } catch {
    throw authFailed('bad X25519 public key');
  }
  if (shared.every((b) => b === 0)) throw authFailed('bad X25519 public key');
  return shared;
}

// ------------------------------------------------------------------ ML-DSA-65 (FIPS 204)

/** @param {BytesIn} seed */
function checkMldsaSeed(seed) {
  seed = bytes(seed);
  if (seed.length !== 32) throw malformed('ML-DSA seed must be 32 bytes');
  return seed;
}

/** @param {Bytes} seed */
function nobleKeys(seed) {
  return noblePrivate.get(seed, async () => nobleMlDsa65.keygen(seed));
}

/** @param {Bytes} seed */
function webcryptoKeys(seed) {
  return mldsaPrivate.get(seed, async () => {
    const key = await subtle.importKey('raw-seed', seed, { name: 'ML-DSA-65' }, true, ['sign']);
    return { key, pub: b64urlDecode(/** @type {string} */ ((await subtle.exportKey('jwk', key)).pub)) };
  });
}

/** The ML-DSA-65 public key (1952 bytes) from the 32-byte seed xi (KeyGen_internal). */
/** @param {BytesIn} seed */
export async function mldsa65_public(seed) {
  seed = checkMldsaSeed(seed);
  if ((await detect()).webcrypto_mldsa) return (await webcryptoKeys(seed)).pub.slice();
  return (await nobleKeys(seed)).publicKey.slice();
}

/** ML-DSA-65 signature with a context (at most 255 bytes).  deterministic: rnd = 0^32
 *  (FIPS 204 deterministic variant, via noble); otherwise hedged (fresh randomness). */
/**
 * @param {BytesIn} seed
 * @param {BytesIn} msg
 * @param {BytesIn} ctx
 * @param {boolean} [deterministic]
 */
export async function mldsa65_sign(seed, msg, ctx, deterministic = false) {
  seed = checkMldsaSeed(seed);
  msg = bytes(msg);
  ctx = bytes(ctx);
  if (ctx.length > 255) throw malformed('ML-DSA context longer than 255 bytes');
  if (!deterministic && (await detect()).webcrypto_mldsa) {
    const { key } = await webcryptoKeys(seed);
    return new Uint8Array(await subtle.sign({ name: 'ML-DSA-65', context: ctx }, key, msg));
  }
  const { secretKey } = await nobleKeys(seed);
  /** @type {{ context: Uint8Array, extraEntropy?: false }} */
  const opts = deterministic ? { context: ctx, extraEntropy: false } : { context: ctx };
  return nobleMlDsa65.sign(msg, secretKey, opts);
}

/** ML-DSA-65 verification; false on any mismatch or malformed input. */
/**
 * @param {BytesIn} pub
 * @param {BytesIn} msg
 * @param {BytesIn} sig
 * @param {BytesIn} ctx
 */
export async function mldsa65_verify(pub, msg, sig, ctx) {
  pub = bytes(pub);
  sig = bytes(sig);
  ctx = bytes(ctx);
  msg = bytes(msg);
  if (pub.length !== MLDSA65_PUBLIC || sig.length !== MLDSA65_SIGNATURE || ctx.length > 255) return false;
  try {
    if ((await detect()).webcrypto_mldsa) {
      const k = await mldsaPublic.get(pub, () => subtle.importKey('raw-public', pub, { name: 'ML-DSA-65' }, false, ['verify']));
      return await subtle.verify({ name: 'ML-DSA-65', context: ctx }, k, sig, msg);
    }
    return nobleMlDsa65.verify(sig, msg, pub, { context: ctx });
  } catch {
    return false;
  }
}
