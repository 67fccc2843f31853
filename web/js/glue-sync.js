// The vault worker's JavaScript module "ownmem_js" where the engine has no WebAssembly JSPI
// (WebKit: Safari on iPhone, iPad and Mac), or when the page asks for this path (?jspi=0).
//
// Without JSPI, synchronous Python cannot wait for a promise.  worker.js registers glue.js
// beside this module (ownmem_js.ASYNC): the operations Python awaits (unlock, list, add, ...)
// take their crypto from there (WebCrypto).  What is left here is what a step driven by
// ownmem.crypto.run_sync needs, which cannot wait: every function answers synchronously and
// Python's callers take the value as it is (ownmem.crypto.run_sync and
// ownmem.web.provider pass a value that is not a promise straight through):
//   crypto    @noble/* (pure JavaScript): HKDF, AES-256-GCM, AES-KW, Ed25519, X25519,
//             ML-DSA-65, and Argon2id for the one Python-side derivation (login from a
//             server's salt); create and unlock derive Argon2id with hash-wasm before Python
//             runs (worker.js, argon2-worker.js), as on the JSPI path
//   storage   the store read ahead into memory before the first Python call (prepare());
//             writes go to IndexedDB behind Python (idb_apply, idb_put return at once) and
//             worker.js waits for them (settle()) before it answers the page
//   network   synchronous XMLHttpRequest, which a dedicated worker may use (http())
// The errors are glue.js's: 'AuthenticationFailed', 'MalformedInput'.

import { nobleGcm, nobleAesKw, nobleEd25519, nobleX25519, nobleHkdf, nobleSha256, nobleArgon2id, ml_dsa65 }
  from '../vendor/vendor.js';
import * as idb from './idb.js';
import { ARGON2, features as detectFeatures, keccak256 } from './glue.js';

/** @import { BytesIn, Options } from './glue.js' */
/** @typedef {Uint8Array<ArrayBuffer>} Bytes */

export { ARGON2, keccak256 };
export const JSPI = false;

const MLDSA65_PUBLIC = 1952;
const MLDSA65_SIGNATURE = 3309;
const EMPTY = new Uint8Array(0);

/**
 * @param {string} name
 * @param {string} message
 * @returns {Error & { code?: string }}
 */
function named(name, message) {
  const e = new Error(message);
  e.name = name;
  return e;
}
const authFailed = (/** @type {string} */ why) => named('AuthenticationFailed', why);
const malformed = (/** @type {string} */ why) => named('MalformedInput', why);

// (typed as glue.js's bytes(): no SharedArrayBuffer reaches this worker)
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

/**
 * @param {BytesIn} seed
 * @param {string} what
 */
function seed32(seed, what) {
  seed = bytes(seed);
  if (seed.length !== 32) throw malformed(`${what} seed must be 32 bytes`);
  return seed;
}

// ML-DSA-65 key generation costs about a signature: keep the pairs, dropped on lock.
/** @type {Map<string, { secretKey: Uint8Array, publicKey: Uint8Array }>} */
const mldsaKeys = new Map();
export function forgetSecrets() {
  mldsaKeys.clear();
}

// ------------------------------------------------------------------ what this path uses

/** @type {Awaited<ReturnType<typeof detectFeatures>> | null} */
let detected = null;

/** Called by worker.js before Python starts: which primitives the engine's WebCrypto has.
 *  (ownmem.web.provider reports glue.js's features instead once it has ownmem_js.ASYNC.) */
export async function prepareFeatures() {
  detected = await detectFeatures();
}

export function features() {
  return {
    ...(detected ?? {}), jspi: false, argon2: 'hash-wasm (unlock, create); noble (login)',
    mldsa: 'noble', ed25519: 'noble', x25519: 'noble', aes: 'noble', hkdf: 'noble',
  };
}

// ------------------------------------------------------------------ crypto

/**
 * @param {BytesIn} password
 * @param {BytesIn} salt
 * @param {Options} opts
 */
export function argon2id(password, salt, opts) {
  return nobleArgon2id(bytes(password), bytes(salt), {
    m: option(opts, 'memory_kib', 64 * 1024), t: option(opts, 'iterations', 3),
    p: option(opts, 'parallelism', 4), dkLen: option(opts, 'length', 32),
  });
}

/**
 * @param {BytesIn} ikm
 * @param {BytesIn} info
 * @param {number} [length]
 * @param {BytesIn} [salt]
 */
export function hkdf_sha256(ikm, info, length = 32, salt = null) {
  const s = bytes(salt);
  return nobleHkdf(nobleSha256, bytes(ikm), s.length ? s : undefined, bytes(info), length);
}

/**
 * @param {BytesIn} key
 * @param {BytesIn} nonce
 * @param {BytesIn} data
 * @param {BytesIn} aad
 */
export function aes_gcm_encrypt(key, nonce, data, aad) {
  key = bytes(key);
  nonce = bytes(nonce);
  if (key.length !== 32 || nonce.length !== 12) throw malformed('bad AES-GCM key or nonce length');
  return nobleGcm(key, nonce, bytes(aad)).encrypt(bytes(data));
}

/**
 * @param {BytesIn} key
 * @param {BytesIn} nonce
 * @param {BytesIn} data
 * @param {BytesIn} aad
 */
function gcmOpen(key, nonce, data, aad) {
  key = bytes(key);
  nonce = bytes(nonce);
  data = bytes(data);
  if (key.length !== 32 || nonce.length !== 12 || data.length < 16) return null;
  try {
    return nobleGcm(key, nonce, bytes(aad)).decrypt(data);
  } catch {
    return null;
  }
}

/**
 * @param {BytesIn} key
 * @param {BytesIn} nonce
 * @param {BytesIn} data
 * @param {BytesIn} aad
 */
export function aes_gcm_decrypt(key, nonce, data, aad) {
  const out = gcmOpen(key, nonce, data, aad);
  if (out === null) throw authFailed('AEAD tag mismatch');
  return out;
}

/**
 * @param {ArrayLike<BytesIn>} keys
 * @param {ArrayLike<BytesIn>} nonces
 * @param {ArrayLike<BytesIn>} datas
 * @param {ArrayLike<BytesIn>} aads
 */
export function aes_gcm_decrypt_many(keys, nonces, datas, aads) {
  return Array.from(keys, (key, i) => gcmOpen(key, nonces[i], datas[i], aads[i]));
}

/**
 * @param {BytesIn} kek
 * @param {BytesIn} key
 */
export function aes_kw_wrap(kek, key) {
  key = bytes(key);
  if (key.length < 16 || key.length % 8 !== 0) throw malformed('AES-KW wraps a multiple of 8 bytes, at least 16');
  return nobleAesKw(bytes(kek)).encrypt(key);
}

/**
 * @param {Bytes} kek
 * @param {BytesIn} wrapped
 */
function kwOpen(kek, wrapped) {
  wrapped = bytes(wrapped);
  if (wrapped.length < 24 || wrapped.length % 8 !== 0) return null;
  try {
    return nobleAesKw(kek).decrypt(wrapped);
  } catch {
    return null;
  }
}

/**
 * @param {BytesIn} kek
 * @param {BytesIn} wrapped
 */
export function aes_kw_unwrap(kek, wrapped) {
  const out = kwOpen(bytes(kek), wrapped);
  if (out === null) throw authFailed('key unwrap failed');
  return out;
}

/**
 * @param {BytesIn} kek
 * @param {ArrayLike<BytesIn>} wrappedList
 */
export function aes_kw_unwrap_many(kek, wrappedList) {
  const k = bytes(kek);
  return Array.from(wrappedList, (w) => kwOpen(k, w));
}

/** @param {BytesIn} seed */
export function ed25519_public(seed) {
  return nobleEd25519.getPublicKey(seed32(seed, 'Ed25519'));
}

/**
 * @param {BytesIn} seed
 * @param {BytesIn} msg
 */
export function ed25519_sign(seed, msg) {
  return nobleEd25519.sign(bytes(msg), seed32(seed, 'Ed25519'));
}

// RFC 8032 verification (zip215: false), as WebCrypto's.
/**
 * @param {BytesIn} pub
 * @param {BytesIn} sig
 * @param {BytesIn} msg
 */
export function ed25519_verify(pub, sig, msg) {
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
 * @param {ArrayLike<BytesIn>} pubs
 * @param {ArrayLike<BytesIn>} sigs
 * @param {ArrayLike<BytesIn>} msgs
 */
export function ed25519_verify_many(pubs, sigs, msgs) {
  return Array.from(pubs, (pub, i) => ed25519_verify(pub, sigs[i], msgs[i]));
}

/** @param {BytesIn} seed */
export function x25519_public(seed) {
  return nobleX25519.getPublicKey(seed32(seed, 'X25519'));
}

/**
 * @param {BytesIn} seed
 * @param {BytesIn} peerPub
 */
export function x25519_shared(seed, peerPub) {
  seed = seed32(seed, 'X25519');
  peerPub = bytes(peerPub);
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

/** @param {BytesIn} seed */
function mldsaPair(seed) {
  seed = seed32(seed, 'ML-DSA');
  const k = Array.from(seed, (b) => b.toString(16).padStart(2, '0')).join('');
  let pair = mldsaKeys.get(k);
  if (!pair) {
    pair = ml_dsa65.keygen(seed);
    mldsaKeys.set(k, pair);
  }
  return pair;
}

/** @param {BytesIn} seed */
export function mldsa65_public(seed) {
  return mldsaPair(seed).publicKey.slice();
}

/**
 * @param {BytesIn} seed
 * @param {BytesIn} msg
 * @param {BytesIn} ctx
 * @param {boolean} [deterministic]
 */
export function mldsa65_sign(seed, msg, ctx, deterministic = false) {
  ctx = bytes(ctx);
  if (ctx.length > 255) throw malformed('ML-DSA context longer than 255 bytes');
  const { secretKey } = mldsaPair(seed);
  /** @type {{ context: Uint8Array, extraEntropy?: false }} */
  const opts = deterministic ? { context: ctx, extraEntropy: false } : { context: ctx };
  return ml_dsa65.sign(bytes(msg), secretKey, opts);
}

/**
 * @param {BytesIn} pub
 * @param {BytesIn} msg
 * @param {BytesIn} sig
 * @param {BytesIn} ctx
 */
export function mldsa65_verify(pub, msg, sig, ctx) {
  pub = bytes(pub);
  sig = bytes(sig);
  ctx = bytes(ctx);
  if (pub.length !== MLDSA65_PUBLIC || sig.length !== MLDSA65_SIGNATURE || ctx.length > 255) return false;
  try {
    return ml_dsa65.verify(sig, bytes(msg), pub, { context: ctx });
  } catch {
    return false;
  }
}

// ------------------------------------------------------------------ storage

/** @type {Record<string, Uint8Array> | null} */
let loaded = null;                  // {table: Uint8Array}, until the store's load takes it
/** @type {Map<string, Uint8Array | null>} */
const records = new Map();          // "table/key" -> value, for idb_get (the verified cache)
const READ_AHEAD = [['cache', 'verified-v1']];
/** @type {Promise<void>} */
let writes = Promise.resolve();
// The first write IndexedDB refused.  Python's store went on as if it had been made, so from
// then on memory is ahead of disk: no further call runs (or writes) in this worker, and every
// one says why, until the app is reloaded from what IndexedDB holds.
/** @type {Error | null} */
let broken = null;

/** @param {any} e what IndexedDB threw */
function storageFailed(e) {
  const err = named('StorageFailed', `this browser refused to save to its storage (${e && e.message ? e.message : e}); `
    + 'nothing more is saved until the app is reloaded (what was not saved and not synced is lost)');
  err.code = 'storage_failed';
  return err;
}

/** Before each Python call: the store (the first time) and the records Python reads by key. */
export async function prepare() {
  if (broken) throw broken;
  if (loaded === null && !prepare.done) {
    loaded = await idb.idb_load_all();
    prepare.done = true;
  }
  for (const [t, k] of READ_AHEAD) {
    const id = `${t}/${k}`;
    if (!records.has(id)) records.set(id, await idb.idb_get(t, k));
  }
}
prepare.done = false;   // true once the first call read the store (declared here, for the type checker)

/** After each Python call: every write it queued is in IndexedDB (or its error is thrown). */
export async function settle() {
  await writes;
  if (broken) throw broken;
}

/** @param {() => Promise<void>} write */
function queue(write) {
  writes = writes.then(() => (broken ? undefined : write())).catch((e) => { broken ??= storageFailed(e); });
}

export function idb_load_all() {
  const out = loaded ?? {};
  loaded = null;
  return out;
}

/**
 * @param {string} table
 * @param {string} key
 */
export function idb_get(table, key) {
  const v = records.get(`${table}/${key}`);
  if (v === undefined) throw new Error(`${table}/${key} was not read ahead (glue-sync.js READ_AHEAD)`);
  return v;
}

/**
 * @param {string} table
 * @param {string} key
 * @param {BytesIn} value
 */
export function idb_put(table, key, value) {
  const v = bytes(value).slice();
  records.set(`${table}/${key}`, v);
  queue(() => idb.idb_put(table, key, v));
}

/**
 * @param {Iterable<string>} tables
 * @param {Iterable<string>} keys
 * @param {Iterable<BytesIn>} values null: delete
 */
export function idb_apply(tables, keys, values) {
  const t = Array.from(tables);
  const k = Array.from(keys);
  const v = Array.from(values, (x) => (x === null || x === undefined ? null : bytes(x).slice()));
  queue(() => idb.idb_apply(t, k, v));
}

// ------------------------------------------------------------------ network

/** One HTTP exchange: {status, body: Uint8Array}; a network error, a redirect or no answer
 * within timeoutMs throws (a worker's synchronous request may have a timeout, a page's not).
 * @param {string} method
 * @param {string} url
 * @param {Map<string, string> | Record<string, string> | null | undefined} headers
 * @param {BytesIn} body
 * @param {number | null | undefined} timeoutMs
 */
export function http(method, url, headers, body, timeoutMs) {
  const xhr = new XMLHttpRequest();
  xhr.open(method, url, false);
  xhr.responseType = 'arraybuffer';
  if (timeoutMs) xhr.timeout = timeoutMs;
  const h = headers instanceof Map ? headers : new Map(Object.entries(headers ?? {}));
  for (const [name, value] of h) xhr.setRequestHeader(name, value);
  xhr.setRequestHeader('Cache-Control', 'no-store');
  xhr.send(body === null || body === undefined ? null : bytes(body));
  // fetch's redirect: "error": a response from elsewhere is not the server's answer
  if (xhr.responseURL && xhr.responseURL !== new URL(url, self.location.href).href) {
    throw new TypeError('redirected');
  }
  return { status: xhr.status, body: new Uint8Array(xhr.response ?? new ArrayBuffer(0)) };
}
