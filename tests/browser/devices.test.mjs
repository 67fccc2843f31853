// "Your devices" in Settings (issue 24 item 3; docs/decisions.md "15.7"), in each engine: Chromium
// (playwright-core), Firefox ESR (puppeteer-core over WebDriver BiDi) and WebKit (MiniBrowser
// behind WebKitWebDriver, under Xvfb).  Per engine, one vault made and synced by two CLI devices
// (the CLI's code), then:
//
//   1. the browser logs in to it: Settings list three devices, this browser marked, named from its
//      user agent; pictures at phone size (390 and 320 px) with every target at least 44 px
//   2. a wrong passphrase in the removal form removes nothing (a typo must never become the
//      vault's passphrase); the right one removes the second CLI device: the list shows two and
//      says what a removed device keeps
//   3. that CLI device's next sync says it was removed; the first takes the passphrase again and
//      removes the browser; the browser's next sync (the Sync button) says plainly it was removed
//
//   python3 build.py build && node --test tests/browser/devices.test.mjs
//
// A missing engine skips its test, and fails it under CI=true (as the other engine tests do).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, serverDirs, spawnServer, stopProcess, until } from './helpers.mjs';
import { ENGINES, TITLE, skipOf, withView } from './engines.mjs';
import { SMALL_TARGETS, capture, click, fill, showing, waitListed } from './screens.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const DIST = path.join(ROOT, 'web', 'dist');
const VENV_PY = process.env.OWNMEM_PYTHON ?? path.join(ROOT, '.venv', 'bin', 'python');
const PASS = 'correct horse battery staple 42';
const BOOT_MS = 180_000;
const OP_MS = 90_000;

let tmp, dataDir, webDir, port, origin, serverProc, serverLog = '';

before(async () => {
  ({ tmp, dataDir, webDir } = serverDirs(DIST, 'ownmem-devices-'));
  port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  serverProc = await spawnServer({ py: VENV_PY, cwd: ROOT, port, dataDir, webDir,
    onOutput: (d) => { serverLog = (serverLog + d).slice(-20000); } });
}, { timeout: 180_000 });

after(async () => {
  await stopProcess(serverProc);
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** The CLI's code, one script per step; -> its stdout. */
function py(script, ...args) {
  const r = spawnSync(VENV_PY, ['-c', script, ...args], { cwd: ROOT, encoding: 'utf8', timeout: 180_000,
    env: { ...process.env, PYTHONPATH: `${path.join(ROOT, 'py')}:${ROOT}` } });
  assert.equal(r.status, 0, `python:\n${r.stdout}\n${r.stderr}\n${serverLog.slice(-3000)}`);
  return r.stdout.trim();
}

const MAKE = `
import sys
from ownmem.vault import Vault
from ownmem.vault.sync import link, login_new_device
a, b, passphrase, url, name = sys.argv[1:]
v = Vault.create(a, passphrase)
v.add("The cat is called Miso")
link(v, url, name).sync_once()
login_new_device(b, url, name, passphrase).sync_once()
`;
const SYNC_REMOVED = `
import sys
from ownmem.errors import DeviceRemoved, PassphraseChanged
from ownmem.vault import Vault
from ownmem.vault.sync import syncer_for
v = Vault(sys.argv[1]).unlock(sys.argv[2])
try:
    syncer_for(v).sync_once()
    print("still a device")
except PassphraseChanged:
    print("still a device")
except DeviceRemoved as e:
    print(e)
`;
const REMOVE_BROWSER = `
import sys
from ownmem.errors import PassphraseChanged
from ownmem.vault import Vault
from ownmem.vault.devices import list_devices, remove_device
from ownmem.vault.rekey_sync import catch_up
from ownmem.vault.sync import syncer_for
v = Vault(sys.argv[1]).unlock(sys.argv[2])
s = syncer_for(v)
try:
    s.sync_once()
except PassphraseChanged:
    catch_up(s, sys.argv[2])
    s.sync_once()
found = [d for d in list_devices(s) if not d.this_device]
assert len(found) == 1, found
remove_device(s, found[0].device_id, sys.argv[2])
print(found[0].label)
`;

// ------------------------------------------------------------------ in the page

const text = (css) => document.querySelector(css)?.textContent ?? '';
const devices = () => [...document.querySelectorAll('[data-testid="device"]')].map((n) => ({
  label: n.querySelector('strong')?.textContent ?? '',
  mine: !!n.querySelector('[data-testid="this-device"]'),
  remove: !!n.querySelector('[data-testid="device-remove"]'),
}));
const clickRemoveOf = (label) => {
  const row = [...document.querySelectorAll('[data-testid="device"]')].find((n) => n.querySelector('strong')?.textContent === label);
  row?.querySelector('[data-testid="device-remove"]')?.click();
  return !!row;
};

// ------------------------------------------------------------------ the scenario, any engine

/**
 * @param {{ engine: string, evaluate: (fn: Function, arg?: any) => Promise<any>, goto: (url: string) => Promise<void>,
 *   setViewport: (v: { width: number, height: number }) => Promise<unknown>,
 *   screenshot: (file: string, o: { fullPage: boolean }) => Promise<unknown> }} view
 * @param {string} browserName what the browser calls itself in the list ("Chrome on Linux")
 */
async function scenario(view, browserName) {
  const ev = (fn, arg) => view.evaluate(fn, arg);
  const wait = (what, fn, timeout = OP_MS) => until(what, fn, timeout);
  const name = `dev-${view.engine}-${Date.now().toString(36)}`;
  const cliA = path.join(tmp, `${name}-a`);
  const cliB = path.join(tmp, `${name}-b`);
  py(MAKE, cliA, cliB, PASS, origin, name);

  // 1. the browser joins: three devices, this one marked and named
  await view.goto(`${origin}/`);
  await showing(view, '[data-testid="tab-login"]', BOOT_MS);
  await click(view, '[data-testid="tab-login"]');
  await fill(view, '[data-testid="login-form"] [name="server"]', origin);
  await fill(view, '[data-testid="login-form"] [name="name"]', name);
  await fill(view, '[data-testid="login-form"] [name="passphrase"]', PASS);
  await click(view, '[data-testid="login-form"] [type="submit"]');
  await waitListed(view, BOOT_MS);
  await click(view, '[data-testid="settings-button"]');
  await showing(view, '[data-testid="devices-panel"]');
  const three = await wait('three devices listed', async () => { const d = await ev(devices); return d.length === 3 && d; });
  assert.deepEqual(three.filter((d) => d.mine).map((d) => d.label), [browserName]);
  assert.equal(three.filter((d) => d.label.startsWith('ownmem CLI on')).length, 2);
  assert.ok(three.every((d) => d.remove !== d.mine), 'every other device has its Remove button, this one none');
  await capture(view, 'devices', { scrollTo: '[data-testid="devices-panel"]' });

  // 2. the removal form: a wrong passphrase removes nothing, the right one removes the second CLI device
  const cliLabel = three.find((d) => !d.mine).label;
  assert.ok(await ev(clickRemoveOf, cliLabel));
  await showing(view, '[data-testid="device-remove-confirm"]');
  assert.match(await ev(text, '[data-testid="device-keeps"]'), /keeps what it already held/);
  await capture(view, 'devices-remove', { scrollTo: '[data-testid="device-remove-confirm"]' });
  await fill(view, '[data-testid="device-passphrase"]', 'not the passphrase');
  await click(view, '[data-testid="device-remove-confirm-button"]');
  assert.match(await wait('the wrong passphrase refused', async () => ev(text, '[data-testid="devices-error"]'), BOOT_MS),
    /not this vault's passphrase: nothing was removed/);
  assert.equal((await ev(devices)).length, 3);
  await fill(view, '[data-testid="device-passphrase"]', PASS);
  await click(view, '[data-testid="device-remove-confirm-button"]');
  await wait('two devices left', async () => (await ev(devices)).length === 2, BOOT_MS);
  await wait('the removal said', async () =>
    /^Removed ownmem CLI on .*keeps what it already held/.test(await ev(text, '[data-testid="devices-state"]')), 10_000);
  await capture(view, 'devices-removed', { scrollTo: '[data-testid="devices-panel"]' });

  // 3. the removed CLI device is told; the other removes this browser, which is told at its next sync
  // both CLI devices have one name: which was removed is told by which one's sync says so
  const removedB = py(SYNC_REMOVED, cliB, PASS);
  if (removedB === 'still a device') {
    assert.match(py(SYNC_REMOVED, cliA, PASS), /removed from the vault/);
    assert.equal(py(REMOVE_BROWSER, cliB, PASS), browserName);
  } else {
    assert.match(removedB, /removed from the vault/);
    assert.equal(py(REMOVE_BROWSER, cliA, PASS), browserName);
  }
  await click(view, '#sync-button');
  const said = await wait('the removal said', async () => {
    const t = await ev(text, '#notice');
    return /removed from the vault/.test(t) && t;
  });
  assert.match(said, /Sync failed: This device was removed from the vault on another device: it can no longer sync\. What it already holds stays readable here/);
  await capture(view, 'device-removed-notice', { fullPage: false });
  assert.deepEqual((SMALL_TARGETS[view.engine] ?? []).filter((t) => /devices|device-/.test(t)), [],
    `${view.engine}: touch targets under 44 px`);
}

const UA_NAME = { chromium: 'Chrome on Linux', firefox: 'Firefox on Linux', webkit: 'Safari on Linux' };
for (const engine of ENGINES) {
  const title = engine === 'chromium' ? 'list, a refused typo, remove, the removed devices told' : 'the same';
  test(`${TITLE[engine]}: ${title}`, { skip: skipOf(engine), timeout: engine === 'webkit' ? 1_200_000 : 900_000 },
    () => withView(engine, { tmp, scriptMs: BOOT_MS }, (view) => scenario(view, UA_NAME[engine])));
}
