// The passphrase meter's zxcvbn (zxcvbn-ts, from vendor/vendor.js) on a thread of its own:
// unpacking its dictionaries takes a few hundred milliseconds and judging a long passphrase
// tens, which would stall typing on the page's thread.  Answers {id, passphrase, inputs}
// with {id, score, warning, suggestions} or {id, error}.  Nothing is kept or logged: the
// page terminates this worker once the vault is created.
import { loadZxcvbn } from "../vendor/vendor.js";

// zxcvbn's cost grows with length; past this it has seen enough (py/ownmem/passphrase.py)
const MAX_JUDGED = 100;
const zxcvbn = loadZxcvbn();

self.onmessage = async (e) => {
  const { id, passphrase, inputs } = e.data;
  try {
    const r = (await zxcvbn).check(String(passphrase).slice(0, MAX_JUDGED), inputs);
    let warning = r.feedback.warning || "";
    // fixed sentences with examples in them; one that happens to hold the passphrase is not shown
    if (passphrase && warning.includes(passphrase)) warning = "";
    self.postMessage({ id, score: r.score, warning, suggestions: r.feedback.suggestions || [] });
  } catch (/** @type {any} */ err) {
    self.postMessage({ id, error: String(err.message || err) });
  }
};
