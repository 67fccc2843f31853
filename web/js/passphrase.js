// Passphrase strength, as the create form shows it while a passphrase is typed.
//
// A conservative estimate of guessing entropy: a vault export can be attacked offline as
// often as the attacker likes (only Argon2id slows each guess), so words count as words,
// keyboard and alphabet runs, repeats, years and the most common passwords count as
// almost nothing.

const COMMON = new Set(('password passwort motdepasse contraseña qwerty qwertz azerty letmein welcome admin iloveyou ' +
  'monkey dragon football baseball sunshine princess secret master shadow superman trustno1 abc123 ownmem login ' +
  'hello freedom whatever starwars changeme default test passphrase correcthorsebatterystaple memory vault ' +
  'summer winter spring autumn love god jesus qazwsx asdf asdfgh zxcvbn').split(' '));
const KEYBOARD = 'qwertyuiopasdfghjklzxcvbnm';
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz';
const DIGITS = '01234567890';

function isRun(s, seq) {
  if (s.length < 3) return false;
  return seq.includes(s) || [...seq].reverse().join('').includes(s);
}

function looksLikeWord(w) {
  const vowels = (w.match(/[aeiouyäöüàáâãåæèéêëìíîïòóôõøùúûýœ]/g) || []).length;
  const ratio = vowels / w.length;
  return ratio >= 0.2 && ratio <= 0.7 && !/[^aeiouyäöüàáâãåæèéêëìíîïòóôõøùúûýœ]{5,}/.test(w);
}

/** A conservative estimate of a passphrase's guessing entropy, in bits. */
export function passphraseBits(p) {
  if (!p) return 0;
  const lower = p.toLowerCase();
  const letters = lower.replace(/[^\p{L}]/gu, '');
  if (COMMON.has(lower) || (COMMON.has(letters) && letters.length >= lower.length - 4)) return 8;
  const tokens = p.match(/\p{L}+|\p{N}+|\s+|[^\p{L}\p{N}\s]+/gu) || [];
  const seen = new Set();
  let bits = 0;
  for (const tok of tokens) {
    const t = tok.toLowerCase();
    const L = [...tok].length;
    if (seen.has(t)) { bits += 2; continue; }
    seen.add(t);
    if (/^\s+$/.test(tok)) { bits += 0.5; continue; }
    if (/^(.)\1+$/u.test(t)) { bits += 3; continue; }
    if (/^\p{L}+$/u.test(tok)) {
      if (isRun(t, KEYBOARD) || isRun(t, ALPHABET) || COMMON.has(t)) bits += 4;
      else if (L >= 3 && looksLikeWord(t)) {
        bits += 11 + Math.max(0, L - 9) * 2;
        if (/\p{Lu}/u.test(tok.slice(1))) bits += 3;
        else if (/^\p{Lu}/u.test(tok)) bits += 1;
      } else bits += L * (/\p{Lu}/u.test(tok) && /\p{Ll}/u.test(tok) ? 5.7 : 4.7);
    } else if (/^\p{N}+$/u.test(tok)) {
      if (/^(19|20)\d\d$/.test(tok)) bits += 5;
      else if (isRun(tok, DIGITS)) bits += 3;
      else bits += L * 3.32;
    } else {
      bits += Math.min(L, 3) * 5 + Math.max(0, L - 3) * 2;
    }
  }
  return bits;
}

const STRENGTH = [
  ['very weak', 'Very weak: easy to guess offline. Use five or more random words.'],
  ['weak', 'Weak: add more random words.'],
  ['fair', 'Fair: one or two more random words would make it strong.'],
  ['strong', 'Strong.'],
  ['very strong', 'Very strong.'],
];

export function passphraseScore(p) {
  if (!p) return -1;
  const b = passphraseBits(p);
  return b < 28 ? 0 : b < 40 ? 1 : b < 52 ? 2 : b < 64 ? 3 : 4;
}

/** The create form's strength meter: its score (-1 for nothing typed, 0-4) and its line. */
export function strength(p) {
  const score = passphraseScore(p);
  return { score, text: score < 0 ? 'Strength: type a passphrase' : `Strength: ${STRENGTH[score][1]}` };
}
