// Every agent in one place (issue 21, Bar item 1): `ownmem agent connect` (scripted, --grant),
// the configuration it prints started by the official MCP Python SDK's client, which recalls
// and remembers; then the PWA's Agents screen shows the session (its kind in words, its last
// use), its read and its write as sentences in the access audit; `ownmem agent sessions` and
// `ownmem agent audit` show them too; Revoke now in the PWA makes the next MCP call fail
// within 2 s (measured from the click).
//
//   python3 build.py build && node --test tests/browser/agents_one_place.test.mjs
//
// The real sync server (python -m server) serves web/dist, headless Chromium runs the PWA, the
// agent's machine is a folder of the same vault (a second device) running `ownmem agent`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
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
const NOTE = 'The person prefers short status updates';

let browser, tmp, dataDir, webDir, port, origin, serverProc, serverLog = '';

before(async () => {
  if (!fs.existsSync(path.join(DIST, 'precache.json'))) {
    throw new Error(`the web app is not built (${DIST} is missing): run \`python3 build.py build\` first`);
  }
  ({ tmp, dataDir, webDir } = serverDirs(DIST, 'ownmem-agents-'));
  port = await freePort();
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

function runPy(code, args, env) {
  const r = spawnSync(VENV_PY, ['-c', code, ...args], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, ...env }, timeout: 120_000 });
  assert.equal(r.status, 0, `python failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

// The agent's machine: one more device of the vault, holding a memory tagged work (granted) and
// one tagged health (not granted).
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

// An MCP host: the official SDK's client starts the configuration `ownmem agent connect`
// printed (command, args, env) and keeps its session open.  One JSON command a line on stdin:
// {"tool", "args"} -> the result; {"loop": tool, "args"} -> recalls until a call fails, then
// {"failed_at": ms since the epoch, "calls": n, "text"}.
const MCP_HOST = `
import json, os, sys, time
import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
server = json.loads(sys.argv[1])
env = {**server["env"], "PATH": os.environ["PATH"], "HOME": os.environ["HOME"]}
if os.environ.get("PYTHONPATH"):
    env["PYTHONPATH"] = os.environ["PYTHONPATH"]   # the checkout under test, as the CLI runs it
params = StdioServerParameters(command=server["command"], args=server["args"], env=env)
def out(d):
    print(json.dumps(d), flush=True)
async def call(s, tool, args):
    try:
        with anyio.fail_after(60):
            res = await s.call_tool(tool, args)
        return {"error": res.is_error, "structured": res.structured_content,
                "text": "\\n".join(getattr(c, "text", "") for c in res.content)}
    except Exception as e:
        return {"error": True, "structured": None, "text": f"{type(e).__name__}: {e}"}
async def go():
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            out({"ready": True, "tools": sorted(t.name for t in (await s.list_tools()).tools)})
            while True:
                line = await anyio.to_thread.run_sync(sys.stdin.readline)
                if not line:
                    return
                cmd = json.loads(line)
                if "loop" in cmd:
                    n = 0
                    while True:
                        res = await call(s, cmd["loop"], cmd["args"])
                        n += 1
                        if res["error"]:
                            out({"failed_at": time.time() * 1000, "calls": n, "text": res["text"]})
                            break
                else:
                    out(await call(s, cmd["tool"], cmd["args"]))
anyio.run(go)
`;

/** The MCP host process: send(cmd) -> its next answer line. */
function startHost(server, env) {
  const proc = spawn(VENV_PY, ['-c', MCP_HOST, JSON.stringify(server)], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
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

async function startAgent(env, agentPort) {
  const proc = spawn(OWNMEM_CLI, ['agent', '--port', String(agentPort)], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stdout.on('data', (d) => { log += d; });
  proc.stderr.on('data', (d) => { log += d; });
  await until('ownmem agent to answer /health', async () => {
    if (proc.exitCode !== null) throw new Error(`ownmem agent exited (${proc.exitCode}):\n${log}`);
    return (await fetch(`http://127.0.0.1:${agentPort}/health`)).ok;
  }, 90_000).catch((e) => { proc.kill('SIGKILL'); throw new Error(`${e.message}\n${log}`); });
  return { proc, log: () => log };
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
  await page.waitForFunction(() => {
    const s = document.querySelector('[data-testid="sync-status"]');
    return s && ['online', 'syncing', 'connecting', 'offline'].includes(s.dataset.state);
  }, null, { timeout: SYNC_MS });
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

test('an assistant connected with `ownmem agent connect`: its session, reads and write on the PWA\'s Agents screen and in the CLI; Revoke in the PWA cuts its next MCP call within 2 s', { timeout: 300_000 }, async () => {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const folder = path.join(tmp, 'agent-machine');
  const home = path.join(tmp, 'home');
  fs.mkdirSync(home, { recursive: true });
  let agent;
  let host;
  try {
    const page = await ctx.newPage();
    page.on('pageerror', (e) => console.error('[page error]', e.message));
    await page.goto(origin + '/');
    await page.waitForSelector('[data-testid="tab-create"]', { timeout: BOOT_MS });
    const name = `one-place-${Date.now().toString(36)}`;
    await createVault(page, name);
    runPy(AGENT_DEVICE, [folder, origin, name, WORK, HEALTH], { PW: PASS });

    const env = { ...process.env, OWNMEM_VAULT: folder, OWNMEM_PASSPHRASE: PASS, HOME: home };
    for (const k of Object.keys(env)) if (k.startsWith('SAIHM_')) delete env[k];
    const cli = (...args) => {
      const r = spawnSync(OWNMEM_CLI, args, { env, encoding: 'utf8', timeout: 60_000 });
      assert.equal(r.status, 0, r.stdout + r.stderr);
      return r;
    };
    const agentPort = await freePort();
    // scripted: --grant, no question asked (stdin is no terminal either)
    const connected = cli('agent', 'connect', 'claude', '--grant', 'work', '--minutes', '30', '--port', String(agentPort));
    const config = JSON.parse(connected.stdout);
    const server = config.mcpServers.ownmem;
    assert.deepEqual(server.args, ['mcp']);
    assert.equal(server.env.SAIHM_ENDPOINT_URL, `http://127.0.0.1:${agentPort}/saihm`);
    assert.match(connected.stderr, /grant of claude/);
    agent = await startAgent(env, agentPort);

    host = startHost(server, { ...process.env, HOME: home });
    const ready = await host.next();
    assert.ok(ready.ready, JSON.stringify(ready));
    assert.ok(ready.tools.includes('saihm_recall') && ready.tools.includes('saihm_remember'), ready.tools.join());
    const recalled = await host.send({ tool: 'saihm_recall', args: { query: 'Project Falcon March' } });
    assert.equal(recalled.error, false, recalled.text);
    assert.ok(recalled.text.includes(WORK), recalled.text);
    assert.ok(!recalled.text.includes(HEALTH), 'a memory outside the grant was recalled');
    const remembered = await host.send({ tool: 'saihm_remember', args: { content: NOTE } });
    assert.equal(remembered.error, false, remembered.text);

    // the PWA: the session, of its kind, with its last use
    await page.click('[data-testid="agents-button"]');
    await page.waitForSelector('[data-testid="agents-view"]');
    const row = page.locator('[data-testid="sessions-live"] [data-testid="agent-session"][data-kind="saihm"]', { hasText: 'claude' });
    await explained(page, row.waitFor({ timeout: SYNC_MS }));
    assert.equal(await row.locator('[data-testid="session-kind"]').textContent(), 'Assistant on this computer (MCP)');
    assert.match(await row.textContent(), /May read: tags work/);
    assert.match(await row.textContent(), /Read and write: its writes wait for you/);
    const left = Number(await row.locator('[data-testid="time-left"]').getAttribute('data-seconds'));
    assert.ok(left > 25 * 60 && left <= 30 * 60, `time left ${left}`);
    // its read and its write, as sentences, once the audit batches synced
    const sentences = () => page.$$eval('[data-testid="audit-row"]', (rs) => rs.map((r) => r.textContent));
    await refreshUntil(page, 'the read and the write in the audit', () => {
      const t = [...document.querySelectorAll('[data-testid="audit-row"]')].map((r) => r.textContent);
      return t.some((x) => x.startsWith('claude read 1 memory tagged work')) && t.some((x) => x.startsWith('claude saved a memory for you to confirm'));
    });
    const all = await sentences();
    const read = all.find((x) => x.startsWith('claude read 1 memory tagged work'));
    assert.match(read, /^claude read 1 memory tagged work searching for “Project Falcon March” — allowed, \w+ \d+, \d\d:\d\d$/);
    assert.match(all.find((x) => x.startsWith('claude saved')), /^claude saved a memory for you to confirm — waiting for you, /);
    assert.ok(all.some((x) => x.startsWith('claude asked to save a memory — attempted')), all.join('\n'));
    for (const s of all) assert.doesNotMatch(s, /write_|saihm_|sess_|log_|[0-9a-f]{16}/, s);
    assert.ok(!all.join('\n').includes(NOTE), 'the write\'s content is in the audit');
    await refreshUntil(page, 'the last use on the session', () => /last used/.test(
      document.querySelector('[data-testid="agent-session"][data-kind="saihm"] [data-testid="last-use"]')?.textContent ?? ''));
    // the connect section: the sentence on what a host sees, the remote URL shape, the command
    const connect = page.locator('[data-testid="connect-assistant"]');
    await connect.locator('summary').click();
    assert.match(await connect.locator('[data-testid="connect-sees"]').textContent(), /^An assistant you connect sees only the memories its grant allows/);
    assert.equal(await connect.locator('[data-testid="connect-remote-url"]').textContent(), 'https://YOUR-HOST/mcp');
    assert.equal(await connect.locator('[data-testid="connect-local-command"]').textContent(), 'ownmem agent connect claude');
    fs.mkdirSync(SHOTS, { recursive: true });
    await page.setViewportSize({ width: 390, height: 844 });
    await sleep(200);
    await page.screenshot({ path: path.join(SHOTS, '40-agents-one-place-phone.png'), fullPage: true });
    for (const [part, sel] of [['connect', '[data-testid="connect-assistant"]'], ['sessions', '[data-testid="sessions-live"]'],
      ['staged', '[data-testid="staged-list"]'], ['audit', '[data-testid="agents-audit"]']]) {
      await page.locator(sel).screenshot({ path: path.join(SHOTS, `40-agents-one-place-phone-${part}.png`) });
    }
    await connect.locator('summary').click();
    await page.setViewportSize({ width: 1280, height: 800 });

    // the CLI on the agent's machine shows the same session and the same audit
    const sessions = cli('agent', 'sessions', '--port', String(agentPort)).stdout;
    assert.match(sessions, /^claude {2}\[Assistant on this computer \(MCP\)\] {2}active$/m);
    assert.match(sessions, /reads tags work; read-write/);
    assert.match(sessions, /last used \d{4}-\d\d-\d\d \d\d:\d\d; expires \d{4}-/);
    const audit = cli('agent', 'audit', '--port', String(agentPort)).stdout;
    assert.match(audit, / claude\.[0-9a-f]{16} query +allowed .*1 memories recalled/);
    assert.match(audit, / claude\.[0-9a-f]{16} write_staged +allowed /);

    // Revoke now in the PWA while the host recalls in a loop: its next call fails within 2 s
    const looping = host.send({ loop: 'saihm_recall', args: { query: 'Project Falcon' } });
    await sleep(500);
    const clickedAt = Date.now();
    await row.getByRole('button', { name: 'Revoke now the session of claude' }).click();
    const cut = await looping;
    const tookMs = cut.failed_at - clickedAt;
    console.log(`# Revoke now -> the MCP host's call fails: ${Math.round(tookMs)} ms (${cut.calls} calls; ${cut.text.slice(0, 120)})`);
    assert.ok(cut.calls > 1, 'the host was not recalling before the click');
    assert.ok(tookMs < 2000, `the host's calls still succeeded ${Math.round(tookMs)} ms after Revoke now`);
    const after = await host.send({ tool: 'saihm_recall', args: { query: 'Project Falcon' } });
    assert.equal(after.error, true, after.text);
    await page.waitForSelector('[data-testid="sessions-ended"] [data-kind="saihm"][data-status="revoked"]', { state: 'attached', timeout: SYNC_MS });
  } finally {
    host?.proc.stdin.end();
    if (host) await stopProcess(host.proc, 3000);
    if (agent) await stopProcess(agent.proc, 3000);
    await ctx.close();
  }
});
