// WebCrypto as the browsers that have ML-DSA ship it ("Modern Algorithms in the Web Cryptography
// API", WICG), which TypeScript's lib does not describe yet: ML-DSA keys imported from their
// seed ('raw-seed') or public key ('raw-public'), a signature's `context`, a JWK's `pub`.
// glue.js uses them only where feature detection found them.

interface SubtleCrypto {
  importKey(format: "raw-seed" | "raw-public", keyData: BufferSource, algorithm: AlgorithmIdentifier,
            extractable: boolean, keyUsages: KeyUsage[]): Promise<CryptoKey>;
}

interface Algorithm {
  /** ML-DSA's context string (at most 255 bytes) */
  context?: BufferSource;
}

interface JsonWebKey {
  /** an ML-DSA public key */
  pub?: string;
}
