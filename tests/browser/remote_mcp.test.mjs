// A remote MCP host reaches the person's memory through `ownmem agent --public-url` (issue 21,
// Bar item 2): the official MCP SDK's OAuth client (OAuthClientProvider, tests/mcp/oauth_client.py)
// discovers the server from a 401, registers by a Client ID Metadata Document this test serves
// over https (second test: by Dynamic Client Registration), is sent to the consent page, which
// the person approves in a real browser (Chromium at phone size) with their passphrase; the host
// then lists exactly the eight tools, recalls, remembers and forgets over Streamable HTTP + TLS
// 1.3.  The PWA shows the remote host on its Agents screen; the memory it wrote waits there and
// is confirmed; Revoke now in the PWA makes the host's next call fail within 2 s.
//
//   python3 build.py build && node --test tests/browser/remote_mcp.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { explained, freePort, serverDirs, sleep, spawnServer, stopProcess, until } from './helpers.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const DIST = path.join(ROOT, 'web', 'dist');
const VENV_PY = path.join(ROOT, '.venv', 'bin', 'python');
const OWNMEM_CLI = path.join(ROOT, '.venv', 'bin', 'ownmem');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const SHOTS = path.join(ROOT, 'test-output', 'screenshots');
const require = createRequire(path.join(ROOT, 'package.json'));

const PASS = 'correct horse battery staple 42';
const BOOT_MS = 120_000;
const SYNC_MS = 45_000;
const WORK = 'Project Falcon ships on the first Monday of March';
const HEALTH = 'The person is allergic to penicillin';
const NOTE = 'The person prefers the window seat on long flights';
const DRAFT = 'A half-formed note the assistant takes back';
const EIGHT = ['saihm_forget', 'saihm_governance_propose', 'saihm_governance_vote', 'saihm_recall', 'saihm_remember',
  'saihm_revoke_share', 'saihm_share', 'saihm_status'];

let browser, tmp, dataDir, webDir, origin, serverProc, serverLog = '';

before(async () => {
  if (!fs.existsSync(path.join(DIST, 'precache.json'))) {
    throw new Error(`the web app is not built (${DIST} is missing): run \`python3 build.py build\` first`);
  }
  ({ tmp, dataDir, webDir } = serverDirs(DIST, 'ownmem-remote-'));
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  serverProc = await spawnServer({ py: VENV_PY, cwd: ROOT, port, dataDir, webDir, onOutput: (d) => { serverLog += d; } });
  const { chromium } = require('playwright-core');
  browser = await chromium.launch({ executablePath: CHROMIUM,
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'] });
}, { timeout: 60_000 });

after(async () => {
  await browser?.close();
  await stopProcess(serverProc);
  if (serverLog.includes('Traceback')) console.log(`# server log (tail):\n${serverLog.slice(-4000)}`);
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

function runPy(code, args, env = {}) {
  const r = spawnSync(VENV_PY, ['-c', code, ...args], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, ...env }, timeout: 120_000 });
  assert.equal(r.status, 0, `python failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

// The agent's machine: one more device of the vault, a memory tagged work and one tagged health.
const AGENT_DEVICE = `
import os, sys
from ownmem.vault.sync import login_new_device
folder, server, name, work, health = sys.argv[1:6]
s = login_new_device(folder, server, name, os.environ["PW"])
s.v.add(work, tags=("work",))
s.v.add(health, tags=("health",))
s.sync_once()
s.v.close()
`;

// A CA and a certificate for 127.0.0.1 (the person's "public" name in this test)
const MAKE_TLS = `
import json, sys
from pathlib import Path
from tests.agent.tlskit import make_tls
t = make_tls(Path(sys.argv[1]))
print(json.dumps({"ca": str(t.ca), "cert": str(t.cert), "key": str(t.key)}))
`;

/** GET over https trusting the test CA -> [status, body] (or [0, error] when nothing answers). */
function httpsGet(url, ca) {
  return new Promise((resolve) => {
    https.get(url, { ca }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve([res.statusCode, body]));
    }).on('error', (e) => resolve([0, String(e)]));
  });
}

/** The MCP host (tests/mcp/oauth_client.py): next() -> its next JSON line; send(cmd) -> the answer. */
function startHost(args, env) {
  const proc = spawn(VENV_PY, ['-m', 'tests.mcp.oauth_client', ...args], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  proc.stderr.on('data', (d) => { err += d; });
  const lines = readline.createInterface({ input: proc.stdout });
  const waiting = [];
  const queued = [];
  lines.on('line', (l) => {
    const w = waiting.shift();
    if (w) w(JSON.parse(l));
    else queued.push(JSON.parse(l));
  });
  const next = (ms = 90_000) => new Promise((resolve, reject) => {
    if (queued.length) return resolve(queued.shift());
    const t = setTimeout(() => reject(new Error(`the MCP host did not answer in ${ms} ms:\n${err.slice(-3000)}`)), ms);
    waiting.push((v) => { clearTimeout(t); resolve(v); });
  });
  return {
    proc, next,
    send(cmd) {
      proc.stdin.write(JSON.stringify(cmd) + '\n');
      return next();
    },
    err: () => err,
  };
}

async function createVault(page, name) {
  await page.click('[data-testid="tab-create"]');
  const form = page.locator('[data-testid="create-form"]');
  await form.locator('[data-testid="vault-name"]').fill(name);
  await form.locator('[data-testid="passphrase"]').fill(PASS);
  await form.locator('[data-testid="passphrase2"]').fill(PASS);
  await form.locator('[data-testid="create-link"]').setChecked(true);
  await form.locator('[data-testid="create-submit"]').click();
  await page.waitForSelector('[data-testid="add-form"]', { timeout: 90_000 });
}

/** Refresh the Agents screen until `pred` (run in the page) holds. */
async function refreshUntil(page, what, pred, arg) {
  const deadline = Date.now() + SYNC_MS;
  while (!(await page.evaluate(pred, arg))) {
    if (Date.now() > deadline) {
      throw new Error(`${what}: the Agents screen shows ${await page.textContent('[data-testid="agents-view"]')}`);
    }
    await page.click('[data-testid="agents-refresh"]');
    await sleep(500);
  }
}

/**
 * The person's machine and a remote host connected to it: the vault (made in the PWA), the agent
 * device, `ownmem agent --public-url` over TLS, the CIMD document served over https (when
 * `cimd`), and the host, approved on the consent page in a browser at phone size.
 */
async function connectHost(label, { cimd, write, everything, shotName }) {
  const pwa = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await pwa.newPage();
  page.on('pageerror', (e) => console.error('[page error]', e.message));
  await page.goto(origin + '/');
  await page.waitForSelector('[data-testid="tab-create"]', { timeout: BOOT_MS });
  const name = `${label}-${Date.now().toString(36)}`;
  await createVault(page, name);
  const folder = path.join(tmp, `${label}-agent-machine`);
  const home = path.join(tmp, `${label}-home`);
  fs.mkdirSync(home, { recursive: true });
  runPy(AGENT_DEVICE, [folder, origin, name, WORK, HEALTH], { PW: PASS });
  const tls = JSON.parse(runPy(MAKE_TLS, [path.join(tmp, `${label}-tls`)]));
  const ca = fs.readFileSync(tls.ca);

  const closers = [];
  let cimdUrl = null;
  const callbackPort = await freePort();
  const redirect = `http://127.0.0.1:${callbackPort}/oauth/callback`;
  if (cimd) {
    const cimdPort = await freePort();
    cimdUrl = `https://127.0.0.1:${cimdPort}/oauth/client.json`;
    const doc = { client_id: cimdUrl, client_name: 'Test Assistant', redirect_uris: [redirect],
      grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' };
    const srv = https.createServer({ cert: fs.readFileSync(tls.cert), key: fs.readFileSync(tls.key) }, (req, res) => {
      if (req.url === '/oauth/client.json') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(doc));
      } else {
        res.writeHead(404);
        res.end();
      }
    });
    await new Promise((r) => srv.listen(cimdPort, '127.0.0.1', r));
    closers.push(() => new Promise((r) => srv.close(r)));
  }

  const env = { ...process.env, OWNMEM_VAULT: folder, OWNMEM_PASSPHRASE: PASS, HOME: home,
    OWNMEM_CIMD_ALLOW_HOSTS: '127.0.0.1', OWNMEM_CIMD_CA: tls.ca };
  for (const k of Object.keys(env)) if (k.startsWith('SAIHM_')) delete env[k];
  const agentPort = await freePort();
  const publicPort = await freePort();
  const publicUrl = `https://127.0.0.1:${publicPort}`;
  const agent = spawn(OWNMEM_CLI, ['agent', '--port', String(agentPort), '--public-url', publicUrl,
    '--tls-cert', tls.cert, '--tls-key', tls.key, '--public-bind', `127.0.0.1:${publicPort}`],
  { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let agentLog = '';
  agent.stdout.on('data', (d) => { agentLog += d; });
  agent.stderr.on('data', (d) => { agentLog += d; });
  closers.push(() => stopProcess(agent, 3000));
  await until('the public listener', async () => {
    if (agent.exitCode !== null) throw new Error(`ownmem agent exited (${agent.exitCode}):\n${agentLog}`);
    return (await httpsGet(`${publicUrl}/.well-known/oauth-protected-resource/mcp`, ca))[0] === 200;
  }, 90_000);

  const host = startHost([`${publicUrl}/mcp`, tls.ca, redirect, ...(cimdUrl ? [cimdUrl] : [])],
    { ...process.env, HOME: home, PYTHONPATH: [ROOT, process.env.PYTHONPATH].filter(Boolean).join(':') });
  closers.push(async () => { host.proc.stdin.end(); await stopProcess(host.proc, 3000); });
  const asked = await host.next();
  assert.ok(asked.authorize, JSON.stringify(asked) + host.err());
  const authorize = new URL(asked.authorize);
  assert.equal(authorize.origin, publicUrl);
  assert.equal(authorize.searchParams.get('code_challenge_method'), 'S256');
  assert.equal(authorize.searchParams.get('resource'), `${publicUrl}/mcp`);
  assert.equal(authorize.searchParams.get('client_id'), cimdUrl ?? authorize.searchParams.get('client_id'));

  // the person, on their phone: the consent page, the passphrase, Allow
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, ignoreHTTPSErrors: true });
  closers.push(() => phone.close());
  const consent = await phone.newPage();
  let callback = null;
  await consent.route(`http://127.0.0.1:${callbackPort}/**`, (route) => {
    callback = route.request().url();
    return route.fulfill({ status: 200, contentType: 'text/plain', body: 'You can close this window.' });
  });
  await consent.goto(asked.authorize);
  await consent.waitForSelector('form[action="/consent"]');
  const shown = await consent.textContent('body');
  assert.match(shown, /Test Assistant asks to use your memories/);
  assert.ok(shown.includes(`127.0.0.1:${callbackPort}`), 'the page does not say where it sends the person back');
  assert.ok(!shown.includes('health') && !shown.includes('work'), 'the page lists the vault\'s tags before any passphrase');
  assert.equal(await consent.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, 'the consent page is wider than a phone');
  if (everything) await consent.check('input[name="allow"][type="checkbox"]');
  else await consent.fill('input[name="allow"]:not([type="checkbox"])', 'work');
  await consent.fill('input[name="deny"]', 'health');
  await consent.check(`input[name="access"][value="${write ? 'write' : 'read'}"]`);
  await consent.selectOption('select[name="lifetime"]', '3600');
  await consent.fill('input[name="passphrase"]', PASS);
  fs.mkdirSync(SHOTS, { recursive: true });
  await consent.screenshot({ path: path.join(SHOTS, `${shotName}.png`), fullPage: true });
  await consent.click('button[value="approve"]');
  await until('the consent page to send the person back to the host', async () => callback !== null, 30_000)
    .catch(async (e) => {
      throw new Error(`${e.message}: the page is at ${consent.url()} and says ${(await consent.textContent('body').catch(() => '?'))
        .slice(0, 600)}\nagent log:\n${agentLog.slice(-3000)}`);
    });
  const back = new URL(callback);
  assert.equal(back.searchParams.get('iss'), publicUrl);                       // RFC 9207
  assert.equal(back.searchParams.get('state'), authorize.searchParams.get('state'));
  const connected = await host.send({ callback });
  assert.ok(connected.connected, JSON.stringify(connected) + host.err());
  return { page, pwa, host, connected, closers, agentPort, publicUrl, ca, log: () => agentLog };
}

async function closeAll(h) {
  for (const c of (h?.closers ?? []).reverse()) await c().catch(() => {});
  await h?.pwa.close().catch(() => {});
}

test('a remote host registered by its Client ID Metadata Document: consent in a browser with the passphrase, the eight tools over TLS, its write confirmed in the PWA, Revoke in the PWA cuts it within 2 s', { timeout: 300_000 }, async () => {
  let h;
  try {
    // every memory but those tagged health: the host's own (untagged) writes are within its grant,
    // so it may withdraw one
    h = await connectHost('cimd', { cimd: true, write: true, everything: true, shotName: '41-consent-phone' });
    const { host, page, connected } = h;
    assert.deepEqual(connected.tools.map((t) => t.name).sort(), EIGHT);
    const hint = Object.fromEntries(connected.tools.map((t) => [t.name, t]));
    assert.ok(hint.saihm_recall.read_only && hint.saihm_status.read_only && hint.saihm_forget.destructive);

    const recalled = await host.send({ call: 'saihm_recall', args: { query: 'Project Falcon March' } });
    assert.equal(recalled.result.error, false, recalled.result.text);
    assert.ok(recalled.result.text.includes(WORK), recalled.result.text);
    assert.ok(!recalled.result.text.includes(HEALTH), 'a denied memory was recalled');
    const remembered = await host.send({ call: 'saihm_remember', args: { content: NOTE } });
    assert.equal(remembered.result.error, false, remembered.result.text);
    const draft = await host.send({ call: 'saihm_remember', args: { content: DRAFT } });
    assert.equal(draft.result.error, false, draft.result.text);
    const forgot = await host.send({ call: 'saihm_forget', args: { id: draft.result.structured.cellId } });
    assert.equal(forgot.result.error, false, forgot.result.text);   // its own staged write: withdrawn at once
    assert.equal(forgot.result.structured.outcome, 'forgotten', forgot.result.text);

    // a refresh token is no access token at /mcp
    const { tokens } = await host.send({ tokens: true });
    assert.ok(tokens.refresh_token && tokens.access_token && tokens.expires_in <= 3600, JSON.stringify(tokens));
    const probe = (bearer) => new Promise((resolve) => {
      const req = https.request(`${h.publicUrl}/mcp`, { method: 'POST', ca: h.ca, headers: {
        Authorization: `Bearer ${bearer}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' } },
      (res) => { res.resume(); resolve(res.statusCode); });
      req.end('{}');
    });
    assert.equal(await probe(tokens.refresh_token), 401);

    // the PWA: the remote host, its grant; the write waiting for the person, confirmed
    await page.click('[data-testid="agents-button"]');
    await page.waitForSelector('[data-testid="agents-view"]');
    const row = page.locator('[data-testid="sessions-live"] [data-testid="agent-session"][data-kind="mcp-remote"]', { hasText: 'test-assistant' });
    await explained(page, row.waitFor({ timeout: SYNC_MS }));
    assert.equal(await row.locator('[data-testid="session-kind"]').textContent(), 'Remote assistant (MCP over the internet)');
    // which OAuth client the person let in: the host of its metadata document's URL
    assert.match(await row.locator('[data-testid="oauth-client"]').textContent(), /^OAuth client: 127\.0\.0\.1:\d+$/);
    assert.match(await row.textContent(), /May read: tags every tag and untagged memory/);
    assert.match(await row.textContent(), /Never: tags health/);
    const staged = page.locator('[data-testid="staged-write"]', { hasText: NOTE });
    await staged.waitFor({ timeout: SYNC_MS });
    // the draft the host withdrew is gone (its erasure syncs as any other)
    await page.locator('[data-testid="staged-write"]', { hasText: DRAFT }).waitFor({ state: 'detached', timeout: SYNC_MS });
    await refreshUntil(page, 'the host\'s read in the audit', () => [...document.querySelectorAll('[data-testid="audit-row"]')]
      .some((r) => /read 1 memory tagged work/.test(r.textContent)));
    await page.screenshot({ path: path.join(SHOTS, '42-agents-remote-host.png'), fullPage: true });
    await staged.getByRole('button', { name: /^Confirm the write of/ }).click();
    await staged.waitFor({ state: 'detached', timeout: SYNC_MS });
    await page.click('[data-testid="agents-view"] [data-role="back"]');
    await page.waitForSelector(`[data-testid="memory-card"]:has-text("${NOTE}")`, { timeout: SYNC_MS });
    await page.click('[data-testid="agents-button"]');
    await row.waitFor({ timeout: SYNC_MS });

    // Revoke now in the PWA: the host's next call fails within 2 s
    const clickedAt = Date.now();
    await row.getByRole('button', { name: /^Revoke now the session of test-assistant/ }).click();
    let failedAt = null;
    let last;
    while (!failedAt && Date.now() - clickedAt < 10_000) {
      last = await host.send({ call: 'saihm_recall', args: { query: 'Project Falcon' } });
      if (last.failed || last.fatal || last.result?.error) failedAt = Date.now();
    }
    assert.ok(failedAt, `the host still recalls 10 s after Revoke now: ${JSON.stringify(last)}`);
    console.log(`# Revoke now -> the remote host's call fails: ${failedAt - clickedAt} ms (${JSON.stringify(last).slice(0, 160)})`);
    assert.ok(failedAt - clickedAt < 2000, `the remote host still read ${failedAt - clickedAt} ms after Revoke now`);
  } finally {
    if (h && /Traceback/.test(h.log())) console.log(`# agent log (tail):\n${h.log().slice(-4000)}`);
    await closeAll(h);
  }
});

test('a remote host registered by Dynamic Client Registration: read-only consent, recall works, a write is refused, `ownmem agent sessions` lists it and revoking it there cuts it', { timeout: 300_000 }, async () => {
  let h;
  try {
    h = await connectHost('dcr', { cimd: false, write: false, shotName: '43-consent-dcr-phone' });
    const { host } = h;
    assert.deepEqual(h.connected.tools.map((t) => t.name).sort(), EIGHT);
    const recalled = await host.send({ call: 'saihm_recall', args: { query: 'Project Falcon' } });
    assert.ok(recalled.result?.text.includes(WORK), JSON.stringify(recalled));
    const refused = await host.send({ call: 'saihm_remember', args: { content: NOTE } });
    assert.equal(refused.result?.error, true, JSON.stringify(refused));
    const env = { ...process.env, OWNMEM_VAULT: path.join(tmp, 'dcr-agent-machine'), OWNMEM_PASSPHRASE: PASS,
      HOME: path.join(tmp, 'dcr-home') };
    const sessions = spawnSync(OWNMEM_CLI, ['agent', 'sessions', '--port', String(h.agentPort)], { env, encoding: 'utf8', timeout: 60_000 });
    assert.equal(sessions.status, 0, sessions.stderr);
    assert.match(sessions.stdout, /^test-assistant-[0-9a-f]{6} {2}\[Remote assistant \(MCP over the internet\)\] {2}active$/m);
    const list = spawnSync(OWNMEM_CLI, ['agent', 'credential', 'list', '--json'], { env, encoding: 'utf8', timeout: 60_000 });
    const grant = JSON.parse(list.stdout).find((c) => c.name.startsWith('test-assistant-'));
    const t0 = Date.now();
    const revoked = spawnSync(OWNMEM_CLI, ['agent', 'credential', 'revoke', grant.name], { env, encoding: 'utf8', timeout: 60_000 });
    assert.equal(revoked.status, 0, revoked.stderr);
    const after = await host.send({ call: 'saihm_recall', args: { query: 'Project Falcon' } });
    // the call fails (or the SDK's client gives up its session: the grant is gone)
    assert.ok(after.failed || after.fatal || after.result?.error, JSON.stringify(after));
    console.log(`# after revocation: ${JSON.stringify(after).slice(0, 300)}`);
    assert.ok(Date.now() - t0 < 5000);
  } finally {
    if (h && /Traceback/.test(h.log())) console.log(`# agent log (tail):\n${h.log().slice(-4000)}`);
    await closeAll(h);
  }
});
