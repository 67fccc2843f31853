// How a memory's values read on screen: types, trust, confidence, dates, ids, tags.

/** @import { Entry } from '../types/protocol' */

/** @type {Record<string, string>} */
const TYPE_LABELS = { semantic: 'Fact', episodic: 'Event', procedural: 'How-to' };
// Everyday words for the trust levels (ownmem's own terms stay in data-trust and the filters' values).
/** @type {Record<string, string>} */
const TRUST_TEXT = {
  self: 'yours',
  trusted: 'from someone you trust',
  unverified: 'unverified',
};
/** @type {Record<string, string>} */
const TRUST_TITLE = {
  self: 'Signed with this vault\'s own key',
  trusted: 'Signed by a key this vault trusts',
  unverified: 'No signature of this vault or of a key it trusts verifies this memory: anyone may have written it. Treat it as data, not as instructions.',
};

/** @param {string} t */
export function typeLabel(t) {
  return TYPE_LABELS[t] || String(t);
}

/** A trust level in words; a trusted key's memory that an agent wrote, signed with that agent's
 * own key (agentBadge's "confirmed"), reads "from an agent you trust".
 * @param {Pick<Entry, 'trust'> & Partial<Pick<Entry, 'source' | 'agent_confirmed'>>} e
 */
export function trustWords(e) {
  if (e.trust === 'trusted' && e.agent_confirmed && isAgentWritten({ trust: e.trust, source: e.source ?? null })) {
    return 'from an agent you trust';
  }
  return TRUST_TEXT[e.trust] || e.trust;
}

/** How sure the memory is, in words (the exact figure is in the card's details).
 * @param {number | string | null | undefined} c a confidence, 0 to 1 */
export function confidenceWords(c) {
  if (c === null || c === undefined) return '';
  const v = Number(c);
  return v >= 0.9 ? 'certain' : v >= 0.6 ? 'likely' : v >= 0.3 ? 'unsure' : 'a guess';
}

/**
 * @param {HTMLElement} node
 * @param {Pick<Entry, 'trust'> & Partial<Pick<Entry, 'source' | 'agent_confirmed'>>} e
 */
export function trustBadge(node, e) {
  node.textContent = trustWords(e);
  node.className = `badge badge-${e.trust in TRUST_TEXT ? e.trust : 'unverified'}`;
  node.title = TRUST_TITLE[e.trust] || '';
  node.dataset.trust = e.trust;
}

/** Written by an AI agent, as far as this vault can tell: the signed payload says so ("uomp"
 * "source": "agent") and its signature verifies.  An unverified memory's claim is not shown:
 * nothing of it is authenticated.
 * @param {Pick<Entry, 'source' | 'trust'>} e
 */
export function isAgentWritten(e) {
  return e.source === 'agent' && e.trust !== 'unverified';
}

/** An agent id as the person reads it: a credential's agent id is "<name>.<credential id>"
 * (16 hex digits, so that a name issued again never inherits the old one's writes); the name
 * is shown, the whole id stays in the badge's title and data-agent.
 * @template {string | null | undefined} I
 * @param {I} id
 * @returns {string | I}
 */
export function agentName(id) {
  const m = /^(.+)\.[0-9a-f]{16}$/.exec(id || '');
  return m ? m[1] : id;
}

/** The agent badge: which agent, and whether the key that signed is the one this vault
 * derives for that agent's name (`agent_confirmed`), or only a trusted key claiming it.
 * @param {HTMLElement} node
 * @param {Pick<Entry, 'source' | 'trust' | 'agent_id' | 'agent_confirmed'>} e
 */
export function agentBadge(node, e) {
  node.hidden = !isAgentWritten(e);
  if (node.hidden) return;
  const id = e.agent_id;
  const name = agentName(id);
  node.classList.toggle('badge-agent-unconfirmed', Boolean(name && !e.agent_confirmed));
  if (!id) {
    node.textContent = 'agent';
    node.title = 'Written by an AI agent';
  } else if (e.agent_confirmed) {
    node.textContent = `agent: ${name}`;
    node.title = `Written by the AI agent “${id}”, signed with that agent's own key`;
  } else {
    node.textContent = `agent: ${name} (unconfirmed)`;
    node.title = `Says it was written by the AI agent “${id}”, but it is signed by another key this vault trusts, not by that agent's key`;
  }
  node.dataset.agent = id || '';
  node.dataset.confirmed = String(Boolean(e.agent_confirmed));
}

/** @param {number | string | null | undefined} c a confidence, 0 to 1 */
export function percent(c) {
  return c === null || c === undefined ? '' : `${Math.round(Number(c) * 100)}%`;
}

/** @param {string | null | undefined} hex */
export function shortId(hex) {
  return hex ? hex.slice(0, 12) : '';
}

/**
 * A memory's text cut for a dialog's quote or a button's label.
 * @param {string} text
 * @param {number} max
 */
export function excerpt(text, max) {
  return text.length > max ? text.slice(0, max) + '…' : text;
}

/**
 * "1 object", "3 objects".
 * @param {number} n
 * @param {string} word
 */
export function plural(n, word) {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/**
 * @param {unknown} text tags separated by commas
 * @returns {string[]}
 */
export function parseTags(text) {
  /** @type {string[]} */
  const out = [];
  for (const t of String(text || '').split(',')) {
    const tag = t.trim();
    if (tag && !out.includes(tag)) out.push(tag);
  }
  return out;
}

// One formatter each: making an Intl.DateTimeFormat costs far more than formatting with it,
// and every card formats two dates.
/** @type {Map<string, Intl.DateTimeFormat>} */
const formats = new Map();
/** @param {Intl.DateTimeFormatOptions} options */
function formatter(options) {
  const key = JSON.stringify(options);
  let f = formats.get(key);
  if (!f) formats.set(key, f = new Intl.DateTimeFormat(undefined, options));
  return f;
}

/** @param {number | null | undefined} seconds Unix time */
export function dateTime(seconds) {
  if (!seconds) return '';
  const d = new Date(seconds * 1000);
  return formatter({ dateStyle: 'medium', timeStyle: 'short' }).format(d);
}

/** @param {number} seconds Unix time */
export function clockTime(seconds) {
  const d = new Date(seconds * 1000);
  const today = new Date();
  const sameDay = d.toDateString() === today.toDateString();
  return formatter(sameDay ? { timeStyle: 'short' } : { dateStyle: 'short', timeStyle: 'short' }).format(d);
}

export function isoDate(d = new Date()) {
  const p = (/** @type {number} */ n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
}

/**
 * An http(s) server address without trailing slashes, or null.
 * @param {unknown} text
 */
export function serverUrl(text) {
  const server = String(text).trim().replace(/\/+$/, '');
  try {
    const u = new URL(server);
    return u.protocol === 'https:' || u.protocol === 'http:' ? server : null;
  } catch {
    return null;
  }
}

// A vault name on the sync server: ownmem.wire.limits.valid_vault_name's rule, the same characters (lower
// case), the same first character and length (tests/browser/vault_name.test.mjs runs both on one table)
export const NAME_RE = /^[a-z0-9][a-z0-9._-]{0,63}$/;

// What the public log shows about a linked vault (docs/decisions.md, SAIHM "Receipt semantics"):
// said before the first share (the Shares screen, the Offer form) and at creation (the recovery sheet).
export const PUBLIC_LOG_NOTE = 'Anyone who knows your holder ID can read this vault\'s entries in the public log: '
  + 'when memories were saved, forgotten or shared, when your assistants\' activity record was sealed, and when keys '
  + 'changed, but never what the memories say. ownmem writes the time of each save to the hour only.';

// This browser's name in the vault's device list (views/devices.js; sent with `link` and `login`).
/**
 * This browser's name in the list, from its user agent (pure): "Firefox on Linux".
 * @param {string} ua
 * @returns {string}
 */
export function deviceLabel(ua) {
  const browser = /Edg\//.test(ua) ? 'Edge' : /Firefox\//.test(ua) ? 'Firefox'
    : /Chrom(e|ium)\//.test(ua) ? 'Chrome' : /Safari\//.test(ua) ? 'Safari' : 'A browser';
  const os = /iPhone/.test(ua) ? 'iPhone' : /iPad/.test(ua) ? 'iPad' : /Android/.test(ua) ? 'Android'
    : /Mac OS X|Macintosh/.test(ua) ? 'Mac' : /Windows/.test(ua) ? 'Windows' : /CrOS/.test(ua) ? 'ChromeOS'
      : /Linux/.test(ua) ? 'Linux' : '';
  return os ? `${browser} on ${os}` : browser;
}

/** This browser's label, for `link` and `login`. */
export function thisDeviceLabel() {
  return deviceLabel(globalThis.navigator?.userAgent ?? '');
}
