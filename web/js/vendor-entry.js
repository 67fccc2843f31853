// The JS libraries the page and its workers need, bundled by esbuild into vendor/vendor.js
// (python3 build.py build), so the app loads them from its own origin: no CDN.
//   argon2id: hash-wasm (WASM Argon2id; the passphrase KDF, docs/DESIGN "Keys")
//   ml_dsa65: @noble/post-quantum, the ML-DSA-65 fallback where WebCrypto lacks it
//   loadZxcvbn: zxcvbn-ts and its English and common dictionaries, for the create form's
//     passphrase meter (strength-worker.js).  The dictionaries are most of this file
//     (about 1.6 MB); behind a dynamic import, esbuild wraps them in a function that runs
//     only when the meter asks, so the vault worker, which imports this file for Argon2id,
//     never unpacks them.  The service worker precaches the file like every other.
export { argon2id } from "hash-wasm";
export { ml_dsa65 } from "@noble/post-quantum/ml-dsa.js";

export async function loadZxcvbn() {
  const [core, common, en] = await Promise.all([
    import("@zxcvbn-ts/core"), import("@zxcvbn-ts/language-common"), import("@zxcvbn-ts/language-en"),
  ]);
  return new core.ZxcvbnFactory({
    dictionary: { ...common.dictionary, ...en.dictionary },
    graphs: common.adjacencyGraphs,
    translations: en.translations,
  });
}
// The synchronous crypto of the path without WebAssembly JSPI (glue-sync.js).
export { gcm as nobleGcm, aeskw as nobleAesKw } from "@noble/ciphers/aes.js";
export { ed25519 as nobleEd25519, x25519 as nobleX25519 } from "@noble/curves/ed25519.js";
export { hkdf as nobleHkdf } from "@noble/hashes/hkdf.js";
export { sha256 as nobleSha256 } from "@noble/hashes/sha2.js";
// Keccak-256 for the UOMP audit's event hashes (ownmem.agent.audit_batches), on both paths
export { keccak_256 as nobleKeccak256 } from "@noble/hashes/sha3.js";
export { argon2id as nobleArgon2id } from "@noble/hashes/argon2.js";
// The Shares screen's QR code of this vault's share link (qrcode-generator, MIT, about 20 KB
// minified): behind a dynamic import, so a chunk of its own that loads when the screen shows.
export async function loadQr() {
  return (await import("qrcode-generator")).default;
}
