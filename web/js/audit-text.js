// How an agent's session and its access audit read on the Agents screen: a session's kind in
// words, its last use, and one sentence per audit entry ("Claude read 3 memories tagged work —
// allowed, Dec 5, 21:04").  Pure: no DOM, so node's test runner imports it as it is
// (tests/browser/agents_text.test.mjs).  The kind words are ownmem.uomp.usage.KIND_WORDS's.

import { agentName, excerpt } from './format.js';

/** @import { AuditRow } from '../types/protocol' */

/** A session's kind (its published record's `binding`; none: a UOMP agent) in words. */
export const KIND_WORDS = Object.freeze({
  saihm: 'Assistant on this computer (MCP)',
  'mcp-remote': 'Remote assistant (MCP over the internet)',
  uomp: 'UOMP agent',
});

/** @param {string | null | undefined} binding */
export function kindWords(binding) {
  const k = binding || 'uomp';
  return Object.hasOwn(KIND_WORDS, k) ? KIND_WORDS[/** @type {keyof typeof KIND_WORDS} */ (k)] : k;
}

/** @type {Map<string, Intl.DateTimeFormat>} */
const formats = new Map();

/** "Dec 5, 21:04" (the year too when it is not this one), in the reader's locale.
 * @param {number} seconds Unix time
 * @param {number} [now] Unix time */
export function shortDateTime(seconds, now = Date.now() / 1000) {
  const d = new Date(seconds * 1000);
  const year = d.getFullYear() !== new Date(now * 1000).getFullYear();
  const key = year ? 'y' : '';
  let f = formats.get(key);
  if (!f) {
    f = new Intl.DateTimeFormat(undefined, {
      month: 'short', day: 'numeric', ...(year ? { year: 'numeric' } : {}), hour: '2-digit', minute: '2-digit', hourCycle: 'h23',
    });
    formats.set(key, f);
  }
  return f.format(d);
}

/** @param {number | null | undefined} seconds the session's newest use, Unix time */
export function lastUseText(seconds) {
  return seconds ? `last used ${shortDateTime(seconds)}` : 'never used';
}

// the Guard's and the agent service's reasons (ownmem.uomp.guard, agent/guarded.py), as the person reads them
/** @type {Record<string, string>} */
const REASONS = {
  'item carries a denied tag': 'it carries a tag you denied',
  'tag explicitly denied': 'a tag you denied',
  'key explicitly denied': 'a memory you denied',
  'key not within granted scope': 'outside its grant',
  'tag not within granted scope': 'outside its grant',
  'not found within the grant': 'outside its grant',
  'high-sensitivity item outside an exact-key read': 'a high-sensitivity memory',
  "the token's session does not exist": 'no such session',
  "not the session's current token": 'an old credential',   // entries recorded before issue 22
  'not a token issued for this session': 'a credential it was never given',
  'token blacklisted': 'an old credential',
  'session revoked': 'its access was revoked',
  'session expired': 'its access had expired',
  'session closed': 'its session had ended',
  'max_read_queries reached': 'its read limit was reached',
  'max_write_queries reached': 'its write limit was reached',
  'writes not within granted scope': 'it may not write',
  'aggregation_only token on a raw-data path': 'it may read only totals',
  'no such key': 'no such memory',
  'no such memory': 'no such memory',
  'audience is another endpoint': 'a credential for another server',
  'a remote token needs an audience': 'a credential for another server',
};

/** A refusal's reason in words: the known ones translated, any other without the ids it names.
 * @param {string | null | undefined} reason */
export function reasonWords(reason) {
  const r = String(reason || '').replace(/\s*\(attempt [^)]*\)\s*$/, '').trim();
  if (Object.hasOwn(REASONS, r)) return REASONS[r];
  if (/^profile .* is not this deployment's$/.test(r)) return 'a credential for another server';
  return r.replace(/\b[a-z]+(?:_[a-z]+)+\b/g, (w) => w.replace(/_/g, ' '));
}

/** "1 memory", "3 memories" @param {number} n */
const memories = (n) => `${n} ${n === 1 ? 'memory' : 'memories'}`;
/** @param {string[]} tags */
const tagged = (tags) => (tags.length ? ` tagged ${tags.join(', ')}` : '');
/** @param {string | null | undefined} s */
const quoted = (s) => `“${excerpt(String(s), 40)}”`;

/**
 * @typedef {object} Sentence
 * @property {string} what who did what ("Claude read 3 memories tagged work")
 * @property {string} verdict allowed | denied | attempted | waiting for you | confirmed | discarded | refused | failed | ''
 * @property {string} why a refusal's reason in words, or ''
 * @property {string} when "Dec 5, 21:04"
 * @property {string} text the whole sentence
 */

/**
 * One audit entry as a sentence.  `name`: the session's agent name, when the Agents screen knows
 * the session (else the entry's agent id, without its credential suffix); `answer`: for a staged
 * write or request, the person's answer if a later entry records it.
 * @param {Pick<AuditRow, 'action' | 'allowed' | 'reason' | 'timestamp'> & { key?: string | null; tag?: string | null; tags?: string[]; agent_id?: string }} e
 * @param {{ name?: string | null | undefined, answer?: 'confirmed' | 'discarded' | null | undefined, now?: number }} [opts]
 * @returns {Sentence}
 */
export function auditSentence(e, opts = {}) {
  const who = opts.name || agentName(e.agent_id) || 'An agent';
  const tags = (e.tags || []).filter((t) => t !== '*');
  const denied = !e.allowed;
  const n = /^(\d+) (?:memories recalled|items in scope)/.exec(e.reason || '');
  /** @type {string} */
  let what;
  /** @type {string | null} */
  let verdict = null;       // null: allowed or denied, as the entry says
  let why = denied ? reasonWords(e.reason) : '';
  const reqWhat = /saihm_share/.test(e.reason || '') ? 'share memories' : 'forget a memory';
  switch (e.action) {
    case 'query':
      if (denied) what = `${who} tried to search your memories`;
      else if (n && Number(n[1]) === 0) what = `${who} searched for ${quoted(e.key)} and found nothing it may read`;
      else what = `${who} read ${n ? memories(Number(n[1])) : 'memories'}${tagged(tags)}${e.key ? ` searching for ${quoted(e.key)}` : ''}`;
      break;
    case 'read':
      if (e.key) what = `${who} ${denied ? 'tried to read' : 'read'} ${quoted(e.key)}`;
      else if (e.tag) what = `${who} ${denied ? 'tried to read' : 'read'} ${n && !denied ? memories(Number(n[1])) : 'memories'} tagged ${e.tag}`;
      else what = `${who} ${denied ? 'tried to read' : 'read'}`;
      break;
    case 'aggregate':
      what = `${who} ${denied ? 'tried to compute' : 'computed'} a total over memories${e.tag ? ` tagged ${e.tag}` : ''}`;
      break;
    case 'status':
      what = `${who} checked what it can see`;
      break;
    case 'write':
      what = `${who} tried to save ${e.key ? quoted(e.key) : 'a memory'}`;
      break;
    case 'delete':
      what = `${who} tried to delete ${e.key ? quoted(e.key) : 'a memory'}`;
      break;
    case 'write_attempt':
      what = `${who} asked to save a memory`;
      verdict = 'attempted';
      why = '';
      break;
    case 'write_staged':
      what = `${who} saved a memory for you to confirm`;
      verdict = opts.answer ? `you ${opts.answer} it` : 'waiting for you';
      break;
    case 'write_refused':
    case 'request_refused':
      what = `${who} tried to ${e.action === 'write_refused' ? 'save a memory' : 'ask for something'}`;
      verdict = 'refused';
      why = reasonWords(e.reason);
      break;
    case 'write_failed':
    case 'request_failed':
      what = `${who} tried to ${e.action === 'write_failed' ? 'save a memory' : 'ask for something'}`;
      verdict = 'failed';
      why = reasonWords(e.reason);
      break;
    case 'write_confirmed':
      what = `You confirmed a memory ${who} saved`;
      verdict = 'confirmed';
      break;
    case 'write_discarded':
      what = `You discarded a memory ${who} saved`;
      verdict = 'discarded';
      why = '';
      break;
    case 'request_attempt':
      what = `${who} asked to ${reqWhat}`;
      verdict = 'attempted';
      why = '';
      break;
    case 'request_staged':
      what = `${who} asked you to ${reqWhat}`;
      verdict = opts.answer ? `you ${opts.answer} it` : 'waiting for you';
      break;
    case 'request_confirmed':
      what = `You confirmed a request of ${who}`;
      verdict = 'confirmed';
      break;
    case 'request_discarded':
      what = `You declined a request of ${who}`;
      verdict = 'discarded';
      why = '';
      break;
    case 'forget':
      what = `${who} ${denied ? 'tried to forget' : 'asked to forget'} a memory`;
      break;
    case 'share':
      what = `${who} ${denied ? 'tried to share' : 'asked to share'} memories`;
      break;
    case 'revoke_share':
      what = `${who} withdrew a share`;
      break;
    case 'grant':
      what = `You granted ${who} access`;
      break;
    case 'consent':
      // the OAuth consent page (py/ownmem/agent/consent.py): approved with the passphrase, or
      // refused (by the person, or void after wrong passphrases: the reason says which)
      what = denied ? `${who} was not allowed in on the consent page` : `You allowed ${who} in on the consent page`;
      verdict = denied ? 'refused' : 'allowed';
      break;
    case 'created':
      what = `${who} asked for access`;
      break;
    case 'revoked':
      what = `${who}'s access was revoked`;
      verdict = '';
      break;
    case 'closed':
      what = `${who}'s session ended`;
      verdict = '';
      break;
    case 'expired':
      what = `${who}'s access expired`;
      verdict = '';
      break;
    case 'deletion_proof':
      what = denied ? `${who} sent a proof that it deleted what it read` : `${who} proved it deleted what it read`;
      break;
    case 'deletion_proof_missing':
      what = `${who} never proved it deleted what it read`;
      verdict = 'missing';
      why = '';
      break;
    case 'audit_pruned':
      what = 'Old audit entries were deleted';
      verdict = '';
      why = reasonWords(e.reason);
      break;
    case 'unauthenticated':
      what = 'Requests without a valid credential were refused';
      verdict = '';
      why = reasonWords(e.reason);
      break;
    default:
      what = `${who} ${String(e.action).replace(/_/g, ' ')}`;
  }
  const v = verdict ?? (denied ? 'denied' : 'allowed');
  const at = Date.parse(e.timestamp) / 1000;
  const when = Number.isFinite(at) ? shortDateTime(at, opts.now) : '';
  // "Claude read 3 memories tagged work — allowed, Dec 5, 21:04": the verdict after a dash, the time after a comma
  const said = [what, v ? `${v}${why ? `: ${why}` : ''}` : why].filter(Boolean).join(' — ');
  const text = when ? `${said}, ${when}` : said;
  return { what, verdict: v, why, when, text };
}

/**
 * The person's answers the audit records, by the staged object they answer (its id, hex):
 * a write_staged or request_staged entry reads as answered when one follows.
 * @param {Pick<AuditRow, 'action' | 'key'>[]} entries
 * @returns {Map<string, 'confirmed' | 'discarded'>}
 */
export function answers(entries) {
  /** @type {Map<string, 'confirmed' | 'discarded'>} */
  const out = new Map();
  for (const e of entries) {
    const m = /^(?:write|request)_(confirmed|discarded)$/.exec(e.action);
    if (m && e.key) out.set(e.key, /** @type {'confirmed' | 'discarded'} */ (m[1]));
  }
  return out;
}
