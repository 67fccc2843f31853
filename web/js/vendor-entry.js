// The JS libraries the crypto glue needs, bundled by esbuild into vendor/vendor.js
// (python3 build.py build), so the app loads them from its own origin: no CDN.
//   argon2id: hash-wasm (WASM Argon2id; the passphrase KDF, docs/DESIGN "Keys")
//   ml_dsa65: @noble/post-quantum, the ML-DSA-65 fallback where WebCrypto lacks it
export { argon2id } from "hash-wasm";
export { ml_dsa65 } from "@noble/post-quantum/ml-dsa.js";
