// How strong a chosen passphrase is, as the create form's meter shows it, and the floor
// below which the form refuses it unless the person insists: zxcvbn's estimate
// (zxcvbn-ts, run in strength-worker.js), the same model and the same floor as the CLI's
// (py/ownmem/passphrase.py MIN_SCORE, with "ownmem" and the vault's name as the words an
// attacker tries first; `ownmem init --weak-passphrase` is the form's "I accept" box).
//
// Why a floor: an exported .amem file can be attacked offline as often as the attacker
// likes, with only Argon2id slowing each guess (ApertoMemory "Security Considerations").

// zxcvbn's score 3, "safely unguessable": about 10^8 to 10^10 guesses
export const MIN_SCORE = 3;

const LEVELS = ['very weak', 'weak', 'fair', 'strong', 'very strong'];

/** @typedef {{ score: number, warning: string, suggestions: string[] }} Verdict zxcvbn's */

/** @type {Worker | null} */
let worker = null;
let next = 0;
/** @type {Map<number, { resolve: (v: Verdict) => void, reject: (err: Error) => void }>} */
const waiting = new Map();   // id -> {resolve, reject}

function meter() {
  if (worker) return worker;
  worker = new Worker(new URL('./strength-worker.js', import.meta.url), { type: 'module' });
  worker.addEventListener('message', (/** @type {MessageEvent} */ e) => {
    const w = waiting.get(e.data.id);
    waiting.delete(e.data.id);
    if (!w) return;
    if (e.data.error) w.reject(new Error(e.data.error));
    else w.resolve({ score: e.data.score, warning: e.data.warning, suggestions: e.data.suggestions });
  });
  worker.addEventListener('error', (e) => {
    e.preventDefault();   // a worker that cannot load: every question gets "cannot tell"
    release(new Error('the strength check could not start'));
  });
  return worker;
}

/** Start the meter (it unpacks its dictionaries first): call at the first key typed. */
export function prepare() {
  try {
    meter();
  } catch {
    // no module workers: judge() reports that it cannot tell
  }
}

/** Stop the meter and forget what it was asked. */
export function release(err = new Error('the strength check was stopped')) {
  worker?.terminate();
  worker = null;
  for (const w of waiting.values()) w.reject(err);
  waiting.clear();
}

/** zxcvbn's verdict on `passphrase`, with the vault's name among the words tried first:
 *  {score 0-4, warning, suggestions}; rejects when the meter cannot run here.
 * @param {string} passphrase
 * @param {string} vaultName
 * @returns {Promise<Verdict>}
 */
export function judge(passphrase, vaultName) {
  return new Promise((resolve, reject) => {
    const id = ++next;
    waiting.set(id, { resolve, reject });
    try {
      meter().postMessage({ id, passphrase, inputs: ['ownmem', vaultName].filter(Boolean) });
    } catch (err) {
      waiting.delete(id);
      reject(err);
    }
  });
}

/**
 * The meter's line for a verdict (null: nothing typed; an Error: cannot tell).
 * @param {Verdict | Error | null} verdict
 */
export function describe(verdict) {
  if (verdict === null) return 'Strength: type a passphrase';
  if (verdict instanceof Error) return 'Strength: this browser could not check it. Use four or more random words.';
  const advice = [verdict.warning, ...verdict.suggestions].filter(Boolean).join(' ');
  const floor = verdict.score < MIN_SCORE ? ' Too easy to guess offline.' : '';
  return `Strength: ${LEVELS[verdict.score]}.${floor}${advice ? ` ${advice}` : ''}`;
}

/**
 * Why the form refuses a passphrase below the floor (the CLI's sentence, for the page).
 * @param {Verdict | Error} verdict
 */
export function refusal(verdict) {
  const why = verdict instanceof Error ? ' (its strength could not be checked)'
    : verdict.warning ? ` (${verdict.warning.charAt(0).toLowerCase()}${verdict.warning.slice(1).replace(/\.$/, '')})` : '';
  return `This passphrase is too easy to guess${why}: use four or more random words, `
    + 'or tick “I accept that this passphrase is easy to guess”.';
}
