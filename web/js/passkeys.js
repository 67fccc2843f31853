// Unlock with a passkey (issue 24 item 7; docs/decisions.md "15.6. Key Rotation"): WebAuthn's
// PRF extension gives, for one credential and one input, a 32-byte secret that only the
// authenticator can compute, after it has verified the person (fingerprint, face, PIN).
// That secret opens an unlock slot (py/ownmem/vault/slots.py) that wraps the vault's master
// to a key derived from it; the secret itself is never stored.
//
//   add:    credentials.create(rp = this host, user = the vault's name with a random id,
//           userVerification required, prf.eval = PRF_INPUT)
//           -> PRF(credential, PRF_INPUT) from the create, else from a get of that credential
//           -> slot_add("passkey", label, the credential's id, the secret)
//   unlock: credentials.get(allowCredentials = the passkey slots' ids, userVerification
//           required, prf.eval = PRF_INPUT) -> the slot whose id the answer names -> unlock_slot
//
// The input is one fixed value of ownmem's, SHA-256("ownmem/v1/passkey-prf"): the browser
// hashes it again with its own context ("WebAuthn PRF"), and the credential is this vault's
// alone (a random user id per passkey added), so one input per credential is enough.

const PRF_LABEL = 'ownmem/v1/passkey-prf';
const TIMEOUT_MS = 120_000;
const SECRET_LEN = 32;

/** What went wrong, in a code the views turn into a sentence. */
export class PasskeyError extends Error {
  /**
   * @param {'cancelled' | 'no_prf' | 'unsupported' | 'unknown_passkey' | 'failed'} code
   * @param {string} message
   */
  constructor(code, message) {
    super(message);
    this.name = 'PasskeyError';
    this.code = code;
  }
}

/** @type {Promise<Uint8Array<ArrayBuffer>> | null} */
let input = null;
function prfInput() {
  input ??= crypto.subtle.digest('SHA-256', new TextEncoder().encode(PRF_LABEL)).then((d) => new Uint8Array(d));
  return input;
}

/**
 * Whether this browser can unlock with a passkey here: 'yes' (it says it has PRF), 'no' (and
 * why, in a sentence), 'maybe' (WebAuthn without getClientCapabilities: only trying tells).
 * @returns {Promise<{ support: 'yes' | 'no' | 'maybe', why: string }>}
 */
export async function prfSupport() {
  if (!globalThis.isSecureContext || typeof globalThis.PublicKeyCredential !== 'function' || !navigator.credentials) {
    return { support: 'no', why: 'This browser has no passkey support (WebAuthn) on this page.' };
  }
  // an IP address is no valid relying party id (WebAuthn §5.1.3): every call would fail
  if (/^[\d.]+$|^\[|:/.test(location.hostname)) {
    return { support: 'no', why: 'Passkeys need the app opened at a name (such as localhost), not at a numeric address.' };
  }
  if (typeof PublicKeyCredential.getClientCapabilities !== 'function') return { support: 'maybe', why: '' };
  try {
    const caps = await PublicKeyCredential.getClientCapabilities();
    return /** @type {Record<string, boolean | undefined>} */ (caps)['extension:prf'] ? { support: 'yes', why: '' }
      : { support: 'no', why: 'This browser cannot get from a passkey the secret that unlocking needs (WebAuthn\'s PRF extension).' };
  } catch {
    return { support: 'maybe', why: '' };
  }
}

/**
 * A new passkey for this vault and its PRF secret.  The authenticator must verify the person
 * and compute PRF: one that cannot is refused ('no_prf'), and nothing is added.
 * @param {string} vaultName shown by the authenticator's own prompt and passkey list
 * @returns {Promise<{ ref: Uint8Array<ArrayBuffer>, secret: Uint8Array<ArrayBuffer>, label: string }>}
 */
export async function createPasskey(vaultName) {
  const first = await prfInput();
  const created = await webauthn('No passkey was made: it was cancelled or timed out. Nothing was added.', () => navigator.credentials.create({ publicKey: {
    rp: { name: 'ownmem' },   // its id: this page's host (the default)
    user: { id: crypto.getRandomValues(new Uint8Array(16)), name: vaultName, displayName: `ownmem: ${vaultName}` },
    challenge: crypto.getRandomValues(new Uint8Array(32)),   // no server checks the attestation: the PRF secret is the proof
    pubKeyCredParams: [{ type: 'public-key', alg: -8 }, { type: 'public-key', alg: -7 }, { type: 'public-key', alg: -257 }],
    authenticatorSelection: { residentKey: 'preferred', userVerification: 'required' },
    timeout: TIMEOUT_MS,
    extensions: { prf: { eval: { first } } },
  } }));
  const prf = created.getClientExtensionResults().prf;
  if (prf?.enabled === false) throw noPrf();
  const ref = new Uint8Array(created.rawId);
  // most authenticators answer PRF only when asked with an existing credential: ask once more
  const secret = prfSecret(prf?.results?.first) ?? (await getSecret([ref], true)).secret;
  return { ref, secret, label: kindLabel(created.authenticatorAttachment) };
}

/**
 * The PRF secret of one of `refs` (the passkeys this vault holds slots for), as the person
 * chooses on the authenticator's prompt.
 * @param {Uint8Array<ArrayBuffer>[]} refs
 * @param {boolean} [adding] the second step of adding one (createPasskey), not an unlock
 * @returns {Promise<{ ref: Uint8Array<ArrayBuffer>, secret: Uint8Array<ArrayBuffer> }>}
 */
export async function getSecret(refs, adding = false) {
  const first = await prfInput();
  const got = await webauthn('No passkey was used: it was cancelled, it timed out, or this device has none of the passkeys added to this vault. Try again, or enter your passphrase.', () => navigator.credentials.get({ publicKey: {
    challenge: crypto.getRandomValues(new Uint8Array(32)),
    allowCredentials: refs.map((id) => ({ type: 'public-key', id })),
    userVerification: 'required',
    timeout: TIMEOUT_MS,
    extensions: { prf: { eval: { first } } },
  } }));
  const secret = prfSecret(got.getClientExtensionResults().prf?.results?.first);
  if (!secret && !adding) throw new PasskeyError('no_prf', 'This passkey gave no unlock secret (its authenticator does not offer the PRF extension). Enter your passphrase.');
  if (!secret) throw noPrf();
  return { ref: new Uint8Array(got.rawId), secret };
}

/**
 * One WebAuthn call; its DOMException as a PasskeyError.
 * @param {string} notUsed what to say when no passkey answered
 * @param {() => Promise<Credential | null>} ask
 * @returns {Promise<PublicKeyCredential>}
 */
async function webauthn(notUsed, ask) {
  let cred;
  try {
    cred = await ask();
  } catch (ex) {
    const name = /** @type {{ name?: string }} */ (ex)?.name;
    // NotAllowedError covers a cancel, a timeout and "none of these passkeys is here": the
    // browser does not tell them apart, on purpose (it would reveal which passkeys exist)
    if (name === 'NotAllowedError' || name === 'AbortError') {
      throw new PasskeyError('cancelled', notUsed);
    }
    if (name === 'NotSupportedError' || name === 'SecurityError') {
      throw new PasskeyError('unsupported', 'This browser cannot use a passkey on this page.');
    }
    throw new PasskeyError('failed', `The passkey did not answer: ${/** @type {Error} */ (ex)?.message || name || 'unknown error'}`);
  }
  if (!cred) throw new PasskeyError('cancelled', notUsed);
  return /** @type {PublicKeyCredential} */ (cred);
}

/** @param {BufferSource | undefined} out -> the 32-byte secret, or null */
function prfSecret(out) {
  if (!out) return null;
  const b = out instanceof ArrayBuffer ? new Uint8Array(out) : new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
  return b.length === SECRET_LEN ? new Uint8Array(b) : null;
}

function noPrf() {
  return new PasskeyError('no_prf', 'This passkey cannot unlock the vault: its authenticator does not offer the PRF extension that unlocking needs. Nothing was added: try a passkey on another device or security key, or keep using your passphrase.');
}

/** @param {string | null} attachment */
function kindLabel(attachment) {
  if (attachment === 'platform') return 'Passkey on this device';
  if (attachment === 'cross-platform') return 'Passkey on a security key or phone';
  return 'Passkey';
}

/** @param {Uint8Array} b */
export const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');

/** @param {string} h */
export const unhex = (h) => new Uint8Array((h.match(/../g) ?? []).map((x) => parseInt(x, 16)));
