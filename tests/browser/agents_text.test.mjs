// The Agents screen's words (web/js/audit-text.js): one sentence per audit entry, a session's
// kind, its last use.  No browser: the module has no DOM.
//
//   node --test tests/browser/agents_text.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KIND_WORDS, answers, auditSentence, kindWords, lastUseText, reasonWords, shortDateTime } from '../../web/js/audit-text.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const VENV_PY = path.join(ROOT, '.venv', 'bin', 'python');

const AT = '2025-12-05T21:04:00Z';
const WHEN = shortDateTime(Date.parse(AT) / 1000, Date.parse(AT) / 1000);
const row = (over) => ({ action: 'query', allowed: true, reason: '', timestamp: AT, key: null, tag: null, tags: [],
  agent_id: 'claude.0123456789abcdef', session_id: 'sess_saihm_0123456789abcdef', ...over });
const say = (over, opts = {}) => auditSentence(row(over), { now: Date.parse(AT) / 1000, ...opts });

test('the kind words are the Python ones (ownmem.uomp.usage.KIND_WORDS)', () => {
  const out = execFileSync(VENV_PY, ['-c', 'import json\nfrom ownmem.uomp.usage import KIND_WORDS\nprint(json.dumps(dict(KIND_WORDS)))'], {
    env: { ...process.env, PYTHONPATH: [path.join(ROOT, 'py'), ROOT].join(path.delimiter) },
  });
  assert.deepEqual({ ...KIND_WORDS }, JSON.parse(String(out)));
  assert.equal(kindWords(undefined), 'UOMP agent');
  assert.equal(kindWords('saihm'), 'Assistant on this computer (MCP)');
  assert.equal(kindWords('mcp-remote'), 'Remote assistant (MCP over the internet)');
});

test('a recall reads as how many memories of which tags, allowed, and when', () => {
  const s = say({ reason: '3 memories recalled', tags: ['work'], key: null }, { name: 'Claude' });
  assert.equal(s.text, `Claude read 3 memories tagged work — allowed, ${WHEN}`);
  assert.equal(say({ reason: '1 memories recalled', tags: ['work', 'home'] }, { name: 'Claude' }).what, 'Claude read 1 memory tagged work, home');
  assert.equal(say({ reason: '2 memories recalled', key: 'coffee' }, { name: 'Claude' }).what, 'Claude read 2 memories searching for “coffee”');
  assert.equal(say({ reason: '0 memories recalled', key: 'coffee' }, { name: 'Claude' }).what,
    'Claude searched for “coffee” and found nothing it may read');
  // "*" (every tag) is a grant, not a memory's tag
  assert.equal(say({ reason: '4 items in scope', tags: ['*'] }, { name: 'Cal' }).what, 'Cal read 4 memories');
  assert.match(WHEN, /Dec/);
});

test('a refused read says denied and why in words, never the Guard\'s terms', () => {
  const s = say({ action: 'read', allowed: false, key: 'preference.card', reason: 'item carries a denied tag' }, { name: 'Calendar Assistant' });
  assert.equal(s.text, `Calendar Assistant tried to read “preference.card” — denied: it carries a tag you denied, ${WHEN}`);
  assert.equal(say({ allowed: false, reason: 'key not within granted scope' }, { name: 'Claude' }).text,
    `Claude tried to search your memories — denied: outside its grant, ${WHEN}`);
  assert.equal(reasonWords('session revoked'), 'its access was revoked');
  assert.equal(reasonWords('max_read_queries reached'), 'its read limit was reached');
  assert.equal(reasonWords('quota_exceeded: too many writes (attempt log_abc)'), 'quota exceeded: too many writes');
});

test('agent writes: asked, waiting for you, then your answer; no raw action names or ids', () => {
  const oid = 'ab'.repeat(32);
  const entries = [
    row({ action: 'write_confirmed', key: oid, session_id: '', allowed: true, reason: 'the person confirmed the staged write' }),
    row({ action: 'write_staged', key: oid, allowed: true, reason: 'staged (attempt log_x)' }),
    row({ action: 'write_attempt', allowed: false, reason: 'saihm_remember called; its outcome follows' }),
  ];
  const answered = answers(entries);
  const said = entries.map((e) => auditSentence(e, { name: 'notes-agent', answer: e.key ? answered.get(e.key) : null }));
  assert.equal(said[0].what, 'You confirmed a memory notes-agent saved');
  assert.equal(said[1].what, 'notes-agent saved a memory for you to confirm');
  assert.equal(said[1].verdict, 'you confirmed it');
  assert.equal(auditSentence(entries[1], { name: 'notes-agent' }).verdict, 'waiting for you');
  assert.equal(said[2].text.split(' — ')[0], 'notes-agent asked to save a memory');
  assert.equal(said[2].verdict, 'attempted');
  for (const s of said) {
    assert.doesNotMatch(s.text, /write_|saihm_|log_|abab|\(attempt/, s.text);
  }
  // a request to forget, and its refusal
  assert.equal(say({ action: 'request_staged', allowed: true, reason: 'saihm_forget: waits for the person (attempt log_y)' }, { name: 'notes-agent' }).text,
    `notes-agent asked you to forget a memory — waiting for you, ${WHEN}`);
  assert.equal(say({ action: 'write_refused', allowed: false, reason: 'over quota (attempt log_z)' }, { name: 'n' }).text,
    `n tried to save a memory — refused: over quota, ${WHEN}`);
});

test('a refused write and a refused delete on the Guard read as two different acts', () => {
  // UOMP PUT and DELETE /v1/memory/{key} are audited "write" and "delete" (uomp_api.WRITE_ACTIONS)
  assert.equal(say({ action: 'write', allowed: false, key: 'pref.theme', reason: 'agent writes are not served by the Guard' }, { name: 'Cal' }).what,
    'Cal tried to save “pref.theme”');
  assert.equal(say({ action: 'delete', allowed: false, key: 'pref.theme', reason: 'agent writes are not served by the Guard' }, { name: 'Cal' }).what,
    'Cal tried to delete “pref.theme”');
  assert.equal(say({ action: 'delete', allowed: false, reason: 'x' }, { name: 'Cal' }).what, 'Cal tried to delete a memory');
  // a validly signed token the session was never issued (guard.decide step 3)
  assert.equal(reasonWords('not a token issued for this session'), 'a credential it was never given');
});

test('without the session\'s name, the agent id reads without its credential suffix; unknown actions lose their underscores', () => {
  assert.equal(say({ action: 'status', reason: 'status' }).what, 'claude checked what it can see');
  assert.equal(say({ action: 'frobnicate_things' }).what, 'claude frobnicate things');
  assert.equal(say({ action: 'revoked', reason: 'SAIHM credential revoked' }).text, `claude's access was revoked, ${WHEN}`);
});

test('last use', () => {
  assert.equal(lastUseText(null), 'never used');
  assert.match(lastUseText(Date.now() / 1000), /^last used \w+ \d+, \d\d:\d\d$/);
});

test('the consent page: allowed with the passphrase, or not let in, and why', () => {
  assert.equal(say({ action: 'consent', key: 'https://claude.ai/oauth/client.json', tags: ['work'], reason: 'consent' }, { name: 'claude-1a2b3c' }).text,
    `You allowed claude-1a2b3c in on the consent page — allowed, ${WHEN}`);
  const refused = say({ action: 'consent', allowed: false, reason: 'consent refused by the person' }, { name: 'claude-1a2b3c' });
  assert.equal(refused.what, 'claude-1a2b3c was not allowed in on the consent page');
  assert.equal(refused.verdict, 'refused');
});

// ------------------------------------------------------------------ the memories' and Settings' words

import { confidenceWords, trustWords } from '../../web/js/format.js';
import { storageMessage } from '../../web/js/storage.js';

test('cards in everyday words: yours, from an agent you trust, unverified; confidence in a word', () => {
  assert.equal(trustWords({ trust: 'self' }), 'yours');
  assert.equal(trustWords({ trust: 'trusted', source: 'agent', agent_confirmed: true }), 'from an agent you trust');
  // a trusted key that only claims to be the agent, or no agent at all: not "an agent you trust"
  assert.equal(trustWords({ trust: 'trusted', source: 'agent', agent_confirmed: false }), 'from someone you trust');
  assert.equal(trustWords({ trust: 'trusted', source: null }), 'from someone you trust');
  assert.equal(trustWords({ trust: 'unverified', source: 'agent', agent_confirmed: true }), 'unverified');
  assert.deepEqual([1, 0.9, 0.8, 0.6, 0.5, 0.3, 0.1, null].map(confidenceWords),
    ['certain', 'certain', 'likely', 'likely', 'unsure', 'unsure', 'a guess', '']);
});

test('the storage message follows whether the vault is kept, synced, installed, on an iPhone', () => {
  const at = (over) => storageMessage({ persisted: false, waiting: false, linked: false, installed: false, apple: false, ...over });
  // the only copy, and the browser may delete it: the warning, with no iPhone tip off an iPhone
  const risk = at({});
  assert.equal(risk.level, 'at-risk');
  assert.equal(risk.line, 'This browser may delete this vault.');
  assert.match(risk.detail, /export it, or link it/);
  assert.equal(risk.homeScreenTip, false);
  assert.doesNotMatch(risk.detail, /Safari/);
  // synced: no alarm; the server's copy is the way back
  const synced = at({ linked: true });
  assert.equal(synced.level, 'synced');
  assert.equal(synced.line, 'The server keeps a sealed copy of this vault.');
  assert.doesNotMatch(`${synced.line} ${synced.detail}`, /may delete this vault/);
  // kept by the browser: nothing to do
  assert.deepEqual(at({ persisted: true }), { level: 'kept', line: 'This browser keeps the vault until you delete it.', detail: '', homeScreenTip: false });
  assert.match(at({ persisted: true, linked: true }).line, /and the server keeps a sealed copy/);
  // iPhone Safari: the 7-day rule said, and the Home Screen tip; from the Home Screen, neither
  const iphone = at({ apple: true });
  assert.equal(iphone.homeScreenTip, true);
  assert.match(iphone.detail, /7 days/);
  const home = at({ apple: true, installed: true });
  assert.equal(home.homeScreenTip, false);
  assert.doesNotMatch(home.detail, /7 days/);
  assert.match(at({ waiting: true }).detail, /asking you whether to keep it/);
});
