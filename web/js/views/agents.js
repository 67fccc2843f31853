// The Agents screen (top bar): what `ownmem agent` on the person's machine lends to AI agents
// (UOMP sessions, ownmem py/ownmem/agent/published.py) and the agent writes waiting for them
// (py/ownmem/agent/staging.py).  Everything here comes from this device's own store: the
// agent service publishes owner-signed session records that sync like memories, and the
// vault worker counts only those (`agents`).
//
//   Connect           how to connect an assistant, remote (the URL to paste) or local (the
//                     command and the configuration to copy): views/connect.js
//   Live sessions     every session in one list, whatever its kind (an MCP host on the agent's
//                     machine, a remote one through OAuth, a UOMP agent: audit-text.js's words),
//                     agent, scopes, read-only or read-write, last use (the newest audit entry
//                     of its own acts), time left (counting down), Revoke now: an
//                     owner-signed revocation record, synced at once; the agent service cuts
//                     the agent off when its sync brings it (`agent_revoke`)
//   Waiting for you   staged agent writes: Confirm (a confirmation record) or Discard (erased,
//                     asked first), the records of `ownmem staged confirm|discard`; and the
//                     agents' forget and share requests: Confirm (done here) or Discard
//   Registered agents what each registered manifest asks for, its retention, its publisher
//   Ended sessions    closed, revoked, expired
//   Access audit      one sentence per entry (audit-text.js): who read what, when, allowed or
//                     denied and why, newest first, by session
//                     (`audit`: the batches the agent service syncs, py/ownmem/agent/audit_batches.py);
//                     a batch that fails its check against the public log's anchor, or that
//                     follows a batch that never arrived, is a warning on its rows
//
// The screen reads again when a sync brings changes (state.js 'listing') and when asked.

import { ConfirmDialog } from '../dialog.js';
import { el, errorText, focusTitle, mount, notice, oneLine, role, showError, tpl } from '../dom.js';
import { answers, auditSentence, kindWords, lastUseText } from '../audit-text.js';
import { agentName, dateTime, excerpt } from '../format.js';
import { defineScreen, showView } from '../nav.js';
import { currentSession, currentView, isCurrent, isLinked, on } from '../state.js';
import { showConnect } from './connect.js';
import { afterWrite } from './syncstatus.js';
import { call, refreshList } from '../vault.js';

/** @import { Agent, AgentRequest, AuditRow, Result, Scope, Session, StagedWrite } from '../../types/protocol' */
/** @typedef {AgentRequest & { request: true }} Asked a request among the staged writes */

/** @type {Record<string, string>} */
const STATUS = { created: 'Waiting for a grant', active: 'Active', closed: 'Closed', revoked: 'Revoked', expired: 'Expired' };
const LIVE = new Set(['created', 'active']);

/** @type {ReturnType<typeof setInterval> | undefined} */
let ticker;
/** @type {Promise<void> | null} */
let loading = null;   // the read under way for loadingFor (its promise settles after the last re-read)
/** @type {HTMLElement | null} */
let loadingFor = null;
let again = false;
/** @type {Record<string, number>} */
let used = {};        // session id -> its last use, from the audit last read (op audit's last_use)

function showAgents() {
  const node = mount(tpl('tpl-agents'));
  role(node, 'back').addEventListener('click', () => showView('memories'));
  role(node, 'refresh').addEventListener('click', () => load(node));
  showConnect(role(node, 'connect'));
  focusTitle(node);
  load(node);
  clearInterval(ticker);
  ticker = setInterval(() => tick(node), 1000);
}

// One read at a time; a reason to read again while one is under way reads once more after
// it, and the caller waits for that one.
/** @param {HTMLElement} node */
function load(node) {
  if (loading && loadingFor === node) {
    again = true;
    return loading;
  }
  node.setAttribute('aria-busy', 'true');
  const session = currentSession();
  loadingFor = node;
  const mine = (async () => {
    do {
      again = false;
      try {
        const r = await call('agents');
        if (!isCurrent(session) || !node.isConnected) return;
        showError(role(node, 'error'), '');
        render(node, r);
        const audit = await call('audit', { session: role(node, 'audit-session').value || null });
        if (!isCurrent(session) || !node.isConnected) return;
        if (JSON.stringify(audit.last_use) !== JSON.stringify(used)) {
          used = audit.last_use;
          render(node, r);
        }
        renderAudit(node, r, audit);
        role(node, 'agents-state').textContent = isLinked() ? ''
          : 'This vault is not linked to a sync server: the agent service on your machine cannot reach this device.';
      } catch (ex) {
        if (!isCurrent(session) || !node.isConnected) return;
        showError(role(node, 'error'), `Could not read the agents: ${oneLine(errorText(ex))}`);
      }
    } while (again && node.isConnected);
  })().finally(() => {
    if (loading === mine) loading = null;
    node.setAttribute('aria-busy', 'false');
  });
  loading = mine;
  return mine;
}

// The page's clock against the worker's (the same machine, but an answer takes a while)
let skew = 0;

/**
 * @param {HTMLElement} node
 * @param {Result<'agents'>} r
 */
function render(node, r) {
  skew = r.now - Math.floor(Date.now() / 1000);
  const live = r.sessions.filter((s) => LIVE.has(s.status));
  const ended = r.sessions.filter((s) => !LIVE.has(s.status));
  // a row's item carries its last use: a new use redraws that row only
  const withUse = (/** @type {Session} */ s) => ({ ...s, last_use: used[s.session_id] ?? null });
  fill(role(node, 'sessions-live'), live.map(withUse), (s) => sessionRow(node, s),
    'No assistant or agent holds a session now. Connect one: see "Connect an assistant" above.');
  // agent writes, then the agents' forget and share requests (issue 19): both wait for the person
  /** @type {((StagedWrite & { request?: undefined }) | Asked)[]} */
  const waiting = [...r.staged, ...(r.requests || []).map((q) => ({ ...q, request: /** @type {const} */ (true) }))];
  fill(role(node, 'staged'), waiting, (w) => (w.request ? requestRow(node, w) : stagedRow(node, w)),
    'No agent write is waiting for you.');
  fill(role(node, 'registered'), r.agents, agentRow, 'No agent is registered. Register one on your machine: ownmem agent register uom.json.');
  fill(role(node, 'sessions-ended'), ended.map(withUse), (s) => sessionRow(node, s), 'None yet.');
  role(node, 'ended-count').textContent = `(${ended.length})`;
  tick(node);
}

/**
 * @param {HTMLElement} node
 * @param {Result<'agents'>} r
 * @param {Result<'audit'>} audit
 */
function renderAudit(node, r, audit) {
  const select = role(node, 'audit-session');
  if (!select.dataset.bound) {
    select.dataset.bound = '1';
    select.addEventListener('change', () => load(node));
  }
  const names = new Map(r.sessions.map((s) => [s.session_id, s.agent_name || agentName(s.agent_id)]));
  for (const e of audit.entries) if (!names.has(e.session_id)) names.set(e.session_id, agentName(e.agent_id));
  const chosen = select.value;
  // the person reads a session as its agent, kind and start, never its id
  const about = new Map(r.sessions.map((s) => [s.session_id, `${kindWords(s.binding)}, started ${dateTime(s.created_at)}`]));
  const options = [['', 'All sessions'], ...[...names].filter(([sid]) => sid)
    .map(([sid, who]) => [sid, about.has(sid) ? `${who} (${about.get(sid)})` : who])];
  // replaced only when they changed (as fill's rows): an open list is not redrawn under the person
  if (JSON.stringify(options) !== JSON.stringify([...select.options].map((/** @type {HTMLOptionElement} */ o) => [o.value, o.text]))) {
    select.replaceChildren(...options.map(([value, text]) => el('option', { value, text })));
  }
  select.value = names.has(chosen) ? chosen : '';
  role(node, 'audit-warnings').replaceChildren(...audit.warnings.map((w) => el('li', { class: 'sync-warning-line', text: w })));
  const answered = answers(audit.entries);
  const now = Math.floor(Date.now() / 1000);
  // a row's item carries the answer and the name it reads with: a later answer redraws that row
  const rows = audit.entries.map((e) => ({ ...e, answer: (e.key && answered.get(e.key)) || null, name: names.get(e.session_id) }));
  fill(role(node, 'audit'), rows, (e) => auditRow(e, auditSentence(e, { name: e.name, answer: e.answer, now })),
    audit.batches ? 'No access recorded for this session.' : 'No audit has reached this device yet.');
}

/** @type {Record<string, string>} */
const VERDICT_BADGE = {
  allowed: 'badge-trusted', confirmed: 'badge-trusted', 'you confirmed it': 'badge-trusted',
  denied: 'badge-agent-unconfirmed', refused: 'badge-agent-unconfirmed', failed: 'badge-agent-unconfirmed',
  missing: 'badge-agent-unconfirmed',
};

/**
 * One entry, one sentence: what — verdict[: why], when; the whole record in its time's title.
 * @param {AuditRow} e
 * @param {import('../audit-text.js').Sentence} said
 */
function auditRow(e, said) {
  return el('li', {
    class: 'audit-row', 'data-testid': 'audit-row', 'data-allowed': String(e.allowed), 'data-session': e.session_id,
    'data-action': e.action, 'data-entry': String(e.id ?? ''),
  },
  el('p', { class: 'audit-sentence', 'data-testid': 'audit-sentence' },
    el('span', { 'data-role': 'what', text: said.what }),
    said.verdict ? ' — ' : null,
    said.verdict ? el('span', {
      class: `badge ${VERDICT_BADGE[said.verdict] || ''}`, 'data-testid': 'audit-verdict', text: said.verdict,
    }) : null,
    said.why ? (said.verdict ? ': ' : ' — ') : null,
    said.why ? el('span', { 'data-testid': 'audit-reason', text: said.why }) : null,
    ', ',
    el('time', { class: 'muted', datetime: e.timestamp, title: e.timestamp, text: said.when })),
  e.batch.problem ? el('p', { class: 'retention-warning', 'data-testid': 'audit-problem', text: `⚠ ${e.batch.problem}` }) : null);
}

// After an action its button is gone with the row it was in: the focus goes to the heading
// of that row's list (a keyboard or screen reader user stays where they were).
/**
 * @param {HTMLElement} node
 * @param {string} heading its id
 */
function keepFocus(node, heading) {
  if (node.isConnected && !node.contains(document.activeElement)) {
    const h = /** @type {HTMLElement} */ (node.querySelector(`#${heading}`));
    h.setAttribute('tabindex', '-1');
    h.focus();
  }
}

// The lists are read again at every sync (an agent's audit batches sync every few seconds):
// a row whose item is unchanged stays the same element, so a button the person is pressing, or
// the keyboard focus on it, is not replaced under them; only new, changed or gone rows change.
/**
 * @template T
 * @param {HTMLElement} ul
 * @param {T[]} items
 * @param {(item: T) => HTMLElement} row
 * @param {string} empty what the list says when it has no item
 */
function fill(ul, items, row, empty) {
  if (!items.length) {
    if (ul.children.length !== 1 || /** @type {HTMLElement} */ (ul.firstElementChild).dataset.item !== undefined) {
      ul.replaceChildren(el('li', { class: 'muted', text: empty }));
    }
    return;
  }
  const children = /** @type {HTMLElement[]} */ ([...ul.children]);
  const kept = new Map(children.filter((li) => li.dataset.item !== undefined).map((li) => [li.dataset.item, li]));
  const rows = items.map((x) => {
    const sig = JSON.stringify(x);
    const li = kept.get(sig);
    if (li) {
      kept.delete(sig);
      return li;
    }
    const made = row(x);
    made.dataset.item = sig;
    return made;
  });
  for (const li of kept.values()) li.remove();
  for (const li of ul.querySelectorAll(':scope > li:not([data-item])')) li.remove();
  rows.forEach((li, i) => {
    if (ul.children[i] !== li) ul.insertBefore(li, ul.children[i] ?? null);
  });
}

const list = (/** @type {string[] | null | undefined} */ xs) => (xs && xs.length ? xs.join(', ') : null);
// "*" in a grant's tags: every tag and untagged memory (docs/decisions.md, issue 19)
const tagList = (/** @type {string[] | null | undefined} */ xs) => list((xs || []).map((t) => (t === '*' ? 'every tag and untagged memory' : t)));

/**
 * What a session may read, one line each: the reader's view of its granted scopes.
 * @param {Session} s
 */
function scopeLines(s) {
  /** @type {Scope} */
  const read = s.scopes?.read || {};
  const lines = [];
  const may = [tagList(read.tags) && `tags ${tagList(read.tags)}`, list(read.keys) && `keys ${list(read.keys)}`].filter(Boolean);
  lines.push(`May read: ${may.length ? may.join('; ') : 'nothing'}`);
  const never = [list(read.deny_tags) && `tags ${list(read.deny_tags)}`, list(read.deny_keys) && `keys ${list(read.deny_keys)}`].filter(Boolean);
  if (never.length) lines.push(`Never: ${never.join('; ')}`);
  /** @type {string[]} */
  const limits = [];
  if (s.aggregation_only) limits.push('sums and counts only');
  if (s.allowed_fields) limits.push(`fields ${s.allowed_fields.join(', ') || 'none'}`);
  if (s.max_read_queries != null) limits.push(`at most ${s.max_read_queries} reads`);
  if (s.task_bound) limits.push('ends with its deletion proof');
  if (s.deletion_proof?.required) limits.push(s.deletion_proof.accepted ? 'deletion proof received' : 'owes a deletion proof');
  if (s.deletion_proof?.missing) limits.push('deletion proof missing');
  if (limits.length) lines.push(`Limits: ${limits.join('; ')}`);
  const write = s.scopes?.write;
  lines.push(write && ((write.tags || []).length || (write.keys || []).length)
    ? 'Read and write: its writes wait for you' : 'Read-only');
  if (s.binding === 'saihm' || s.binding === 'mcp-remote') lines.push('High-sensitivity memories are never recalled.');
  if (!s.granted) lines.push('Asked for, not granted yet.');
  return lines;
}

/** A remote host's OAuth client as the person reads it: the host of a client id that is a URL
 * (a Client ID Metadata Document's), else the id.
 * @param {string} id */
function clientHost(id) {
  try {
    return new URL(id).host || id;
  } catch {
    return id;
  }
}

/** @param {number} seconds */
function timeLeft(seconds) {
  if (seconds <= 0) return 'expired';
  // an agent credential lives days, or has no end set (its session ends a century on)
  if (seconds >= 50 * 365 * 86400) return 'no end set';
  if (seconds >= 2 * 86400) return `${Math.floor(seconds / 86400)} days left`;
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const sec = seconds % 60;
  const mm = String(m).padStart(h ? 2 : 1, '0');
  return `${h ? `${h}:` : ''}${mm}:${String(sec).padStart(2, '0')} left`;
}

// Every second: each live session's time left; one that runs out reads as expired at once
// (the agent service refuses its token from that second; its own record follows).
/** @param {HTMLElement} node */
function tick(node) {
  if (!node.isConnected) {
    clearInterval(ticker);
    return;
  }
  const now = Math.floor(Date.now() / 1000) + skew;
  /** @type {NodeListOf<HTMLElement>} */
  const live = node.querySelectorAll('[data-testid="agent-session"][data-live="true"]');
  for (const li of live) {
    const left = Number(li.dataset.expires) - now;
    const t = role(li, 'time-left');
    t.textContent = timeLeft(left);
    t.dataset.seconds = String(Math.max(0, left));
    if (left <= 0 && li.dataset.status !== 'expired') {
      li.dataset.status = 'expired';
      role(li, 'status').textContent = STATUS.expired;
      role(li, 'revoke')?.remove();
    }
  }
}

/**
 * @param {HTMLElement} node
 * @param {Session} s
 */
function sessionRow(node, s) {
  const isLive = LIVE.has(s.status);
  const name = s.agent_name || agentName(s.agent_id);
  const li = el('li', {
    class: `share agent-session ${isLive ? 'share-active' : ''}`, 'data-testid': 'agent-session',
    'data-session': s.session_id, 'data-status': s.status, 'data-live': String(isLive), 'data-expires': String(s.expires_at),
    'data-kind': s.binding || 'uomp',
  });
  const client = typeof s.client_id === 'string' && s.client_id ? clientHost(s.client_id) : '';
  li.append(
    el('div', { class: 'share-head' },
      el('strong', { text: name, title: `agent ${s.agent_id}, session ${s.session_id}` }),
      el('span', { class: 'badge badge-agent', 'data-testid': 'session-kind', text: kindWords(s.binding) }),
      el('span', { class: `badge share-state share-state-${s.status === 'active' ? 'accepted' : s.status}`, 'data-role': 'status', text: STATUS[s.status] || s.status }),
      isLive ? el('span', { class: 'time-left', 'data-role': 'time-left', 'data-testid': 'time-left', title: `until ${dateTime(s.expires_at)}` }) : null,
      s.revocation_sent && isLive ? el('span', { class: 'badge badge-agent-unconfirmed', 'data-testid': 'revocation-sent', text: 'revocation sent' }) : null),
    el('ul', { class: 'scope-lines', 'aria-label': `What ${name} may read` }, ...scopeLines(s).map((t) => el('li', { text: t })),
      client ? el('li', { 'data-testid': 'oauth-client', text: `OAuth client: ${client}`, title: String(s.client_id) }) : null),
    el('p', { class: 'muted small' },
      el('span', { 'data-testid': 'last-use', text: lastUseText(typeof s.last_use === 'number' ? s.last_use : null) }),
      ` · started ${dateTime(s.created_at)} · `,
      isLive ? ((s.expires_at ?? 0) - (s.created_at ?? 0) >= 50 * 365 * 86400 ? 'no end set' : `ends ${dateTime(s.expires_at)}`)
        : s.closed_at ? `ended ${dateTime(s.closed_at)}` : `ended ${dateTime(s.expires_at)}`));
  if (isLive) {
    li.append(el('div', { class: 'actions' }, el('button', {
      type: 'button', class: 'btn btn-small btn-danger', 'data-role': 'revoke', 'data-testid': 'revoke-session',
      'aria-label': `Revoke now the session of ${name}`, text: s.revocation_sent ? 'Revoke again' : 'Revoke now',
      onclick: (/** @type {MouseEvent} */ ev) => revoke(node, /** @type {HTMLButtonElement} */ (ev.currentTarget), s),
    })));
  }
  return li;
}

/**
 * @param {HTMLElement} node
 * @param {HTMLButtonElement} button
 * @param {Session} s
 */
async function revoke(node, button, s) {
  const label = button.textContent;
  button.disabled = true;
  button.textContent = 'Revoking…';
  try {
    const r = await call('agent_revoke', { session_id: s.session_id });
    notice(r.synced ? `Revoked: ${s.agent_name || s.agent_id} is cut off as soon as the agent service syncs.`
      : `Revocation saved on this device; it reaches the agent service at the next sync (${oneLine(r.problem)}).`);
    if (!r.synced) afterWrite();
  } catch (ex) {
    showError(role(node, 'error'), errorText(ex));
  }
  await load(node);
  if (button.isConnected) {
    // the session's row was kept (fill keeps a row whose session did not change): its button as it was
    button.disabled = false;
    button.textContent = label;
  }
  keepFocus(node, 'sessions-title');
}

const discardDialog = new ConfirmDialog('discard-dialog');

/**
 * @param {HTMLElement} node
 * @param {StagedWrite} w
 */
function stagedRow(node, w) {
  const who = agentName(w.agent_id);
  const li = el('li', { class: 'card card-staged', 'data-testid': 'staged-write', 'data-id': w.id },
    el('div', { class: 'card-head' },
      el('span', { class: `badge badge-agent ${w.agent_confirmed ? '' : 'badge-agent-unconfirmed'}`, text: `agent: ${who}`, title: w.agent_id }),
      el('span', { class: 'muted small', text: dateTime(w.created) })),
    el('p', { class: 'card-content', 'data-role': 'content', text: w.content }),
    w.tags.length ? el('ul', { class: 'chips', 'aria-label': 'Tags' }, ...w.tags.map((/** @type {string} */ t) => el('li', { class: 'chip', text: t }))) : null);
  const label = `the write of ${who}: ${excerpt(w.content, 40)}`;
  li.append(el('div', { class: 'actions' },
    el('button', {
      type: 'button', class: 'btn btn-small btn-primary', 'data-testid': 'staged-confirm', text: 'Confirm',
      'aria-label': `Confirm ${label}`,
      onclick: (/** @type {MouseEvent} */ ev) => confirmWrite(node, /** @type {HTMLButtonElement} */ (ev.currentTarget), w),
    }),
    el('button', {
      type: 'button', class: 'btn btn-small btn-danger-ghost', 'data-testid': 'staged-discard', text: 'Discard',
      'aria-label': `Discard ${label}`,
      onclick: (/** @type {MouseEvent} */ ev) => discardDialog.ask(w.content, /** @type {HTMLElement} */ (ev.currentTarget), () => call('staged_discard', { id: w.id }), async () => {
        notice('Discarded: the agent\'s write is erased.');
        await Promise.all([load(node), refreshList()]);
        keepFocus(node, 'staged-title');
      }),
    })));
  return li;
}

// An agent asks to forget one of the person's memories or to share some: nothing happens until
// Confirm, which does it on this device (the worker: the forget, or the share's contract); Discard
// drops the request.  The description is the worker's (what confirming would do), shown as text.
/**
 * @param {HTMLElement} node
 * @param {AgentRequest} q
 */
function requestRow(node, q) {
  const li = el('li', { class: 'card card-staged', 'data-testid': 'staged-request', 'data-id': q.id, 'data-kind': q.kind },
    el('div', { class: 'card-head' },
      el('span', { class: 'badge badge-agent', text: `agent: ${agentName(q.agent_id)}`, title: q.agent_id }),
      el('span', { class: 'muted small', text: dateTime(q.created) })),
    el('p', { class: 'card-content', 'data-role': 'content', text: `Asks to ${q.description}` }));
  const label = `the ${q.kind} request of ${agentName(q.agent_id)}`;
  const done = q.kind === 'forget' ? 'Confirmed: the memory is erased here and, with the sync, everywhere.'
    : 'Confirmed: the share is offered to its grantees.';
  li.append(el('div', { class: 'actions' },
    el('button', {
      type: 'button', class: `btn btn-small ${q.kind === 'forget' ? 'btn-danger-ghost' : 'btn-primary'}`,
      'data-testid': 'request-confirm', text: 'Confirm', 'aria-label': `Confirm ${label}`,
      onclick: (/** @type {MouseEvent} */ ev) => answerRequest(node, /** @type {HTMLButtonElement} */ (ev.currentTarget), 'staged_confirm', q, done),
    }),
    el('button', {
      type: 'button', class: 'btn btn-small btn-ghost', 'data-testid': 'request-discard', text: 'Discard',
      'aria-label': `Discard ${label}`,
      onclick: (/** @type {MouseEvent} */ ev) => answerRequest(node, /** @type {HTMLButtonElement} */ (ev.currentTarget), 'staged_discard', q, 'Discarded: nothing was done.'),
    })));
  return li;
}

/**
 * @param {HTMLElement} node
 * @param {HTMLButtonElement} button
 * @param {'staged_confirm' | 'staged_discard'} op
 * @param {AgentRequest} q
 * @param {string} done what the notice says once done
 */
async function answerRequest(node, button, op, q, done) {
  button.disabled = true;
  try {
    await call(op, { id: q.id });
    notice(done);
    await Promise.all([load(node), refreshList()]);
    keepFocus(node, 'staged-title');
  } catch (ex) {
    showError(role(node, 'error'), errorText(ex));
    if (button.isConnected) button.disabled = false;
  }
}

/**
 * @param {HTMLElement} node
 * @param {HTMLButtonElement} button
 * @param {StagedWrite} w
 */
async function confirmWrite(node, button, w) {
  button.disabled = true;
  try {
    await call('staged_confirm', { id: w.id });
    notice(`Confirmed: the write of ${agentName(w.agent_id)} is one of your memories now (still signed by the agent).`);
    await Promise.all([load(node), refreshList()]);
    keepFocus(node, 'staged-title');
  } catch (ex) {
    showError(role(node, 'error'), errorText(ex));
    if (button.isConnected) button.disabled = false;
  }
}

/** @param {Agent} a */
function agentRow(a) {
  /** @type {(kind: string, x: Scope | undefined) => string} */
  const asks = (kind, x) => {
    if (!x) return `${kind}: nothing`;
    const parts = [list(x.tags) && `tags ${list(x.tags)}`, list(x.keys) && `keys ${list(x.keys)}`].filter(Boolean);
    const never = [...(x.deny_tags || []), ...(x.deny_keys || [])];
    return `${kind}: ${parts.join('; ') || 'nothing'}${never.length ? ` (never ${never.join(', ')})` : ''}`;
  };
  return el('li', { class: 'share', 'data-testid': 'registered-agent', 'data-agent': a.agent_id },
    el('div', { class: 'share-head' },
      el('strong', { text: a.agent_name || a.agent_id }),
      el('span', { class: 'muted', text: `${a.agent_id} ${a.version || ''}`.trim() }),
      el('span', {
        class: `badge ${a.publisher_verified ? 'badge-trusted' : 'badge-agent-unconfirmed'}`, 'data-testid': 'publisher',
        text: a.publisher_verified ? 'verified publisher' : 'unverified publisher', title: a.publisher_summary || '',
      })),
    el('ul', { class: 'scope-lines' },
      el('li', { text: asks('Asks to read', a.requested?.read) }),
      a.requested?.write ? el('li', { text: asks('Asks to write', a.requested.write) }) : null,
      el('li', { class: a.retention_warning ? 'retention-warning' : '', 'data-testid': 'retention', text: `Retention: ${a.retention_text}` })),
    a.publisher ? el('p', { class: 'muted small', text: `Published by ${a.publisher}` }) : null);
}

defineScreen('agents', showAgents);

// a sync brought changes (the list was read again): the records may have changed too
on('listing', () => {
  /** @type {HTMLElement | null} */
  const node = document.querySelector('[data-testid="agents-view"]');
  if (node && currentView() === 'agents') load(node);
});
on('lock', () => clearInterval(ticker));
