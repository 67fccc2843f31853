// Firefox driven over Marionette, its own remote protocol (the one geckodriver speaks to it),
// for what WebDriver BiDi and so puppeteer-core do not offer: the WebAuthn extension commands
// of WebDriver ("Add Virtual Authenticator", WebAuthn:AddVirtualAuthenticator here), which
// tests/browser/passkeys.test.mjs needs.  No geckodriver is installed here, and the protocol is
// small: each message is `<length>:<json>`, a command [0, id, name, params], its answer
// [1, id, error, result], after one greeting object.  Not a test file.
//
// Firefox writes the port it listens on (marionette.port 0: a free one) to MarionetteActivePort
// in its profile.  Its virtual authenticator is the soft token, enabled by a preference.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { stopProcess, until } from './helpers.mjs';

const MIN_WINDOW = 500;   // px: Firefox makes no window narrower

const PREFS = {
  'marionette.port': 0,
  'browser.shell.checkDefaultBrowser': false,
  'browser.startup.homepage_override.mstone': 'ignore',
  'datareporting.policy.dataSubmissionEnabled': false,
  'toolkit.telemetry.reporting.enabled': false,
  'app.update.disabledForTesting': true,
  // the virtual authenticators of WebAuthn:AddVirtualAuthenticator are the soft token's
  'security.webauth.webauthn_enable_softtoken': true,
  'security.webauth.webauthn_enable_usbtoken': false,
};

/** A headless Firefox of its own (a fresh profile in `dir`) and a Marionette session on it. */
export async function launchMarionette({ firefox, dir, scriptMs }) {
  const profile = path.join(dir, 'profile');
  fs.mkdirSync(profile, { recursive: true });
  fs.writeFileSync(path.join(profile, 'user.js'),
    Object.entries(PREFS).map(([k, v]) => `user_pref(${JSON.stringify(k)}, ${JSON.stringify(v)});\n`).join(''));
  const proc = spawn(firefox, ['--headless', '--marionette', '-remote-allow-system-access', '--no-remote', '--profile', profile],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  proc.log = '';
  const keep = (d) => { proc.log = (proc.log + d).slice(-20000); };
  proc.stdout.on('data', keep);
  proc.stderr.on('data', keep);
  const portFile = path.join(profile, 'MarionetteActivePort');
  const port = await until('Marionette to listen', () => fs.existsSync(portFile) && Number(fs.readFileSync(portFile, 'utf8')), 60_000);
  const m = new Marionette(proc);
  await m.connect(port);
  await m.cmd('WebDriver:NewSession', { capabilities: { alwaysMatch: { timeouts: { script: scriptMs, pageLoad: 60_000 } } } });
  return m;
}

export class Marionette {
  constructor(proc) {
    this.proc = proc;
    this.next = 1;
    this.waiting = new Map();
    this.buf = Buffer.alloc(0);
  }

  async connect(port) {
    const sock = net.connect(port, '127.0.0.1');
    this.sock = sock;
    let greeted;
    const greeting = new Promise((resolve) => { greeted = resolve; });
    sock.on('data', (d) => {
      this.buf = Buffer.concat([this.buf, d]);
      for (;;) {
        const colon = this.buf.indexOf(58);
        if (colon < 0) return;
        const len = Number(this.buf.subarray(0, colon).toString());
        if (this.buf.length < colon + 1 + len) return;
        const msg = JSON.parse(this.buf.subarray(colon + 1, colon + 1 + len).toString());
        this.buf = this.buf.subarray(colon + 1 + len);
        if (!Array.isArray(msg)) {
          greeted(msg);
          continue;
        }
        const w = this.waiting.get(msg[1]);
        this.waiting.delete(msg[1]);
        if (msg[2]) w?.reject(new Error(`Marionette: ${msg[2].error}: ${msg[2].message}`));
        else w?.resolve(msg[3]);
      }
    });
    sock.on('close', () => {
      for (const w of this.waiting.values()) w.reject(new Error('Marionette: the connection closed'));
      this.waiting.clear();
    });
    await new Promise((resolve, reject) => { sock.once('connect', resolve); sock.once('error', reject); });
    await greeting;
  }

  cmd(name, params = {}) {
    const id = this.next++;
    const body = JSON.stringify([0, id, name, params]);
    this.sock.write(`${Buffer.byteLength(body)}:${body}`);
    return new Promise((resolve, reject) => this.waiting.set(id, { resolve, reject }));
  }

  /** `fn` (sent as source; it may return a promise) called in the page with one JSON argument. */
  async evaluate(fn, arg) {
    const r = await this.cmd('WebDriver:ExecuteAsyncScript', { script: `const done = arguments[arguments.length - 1];
      Promise.resolve().then(() => (${fn})(arguments[0])).then((value) => done({ value }),
        (e) => done({ error: String(e && e.stack || e) }));`, args: [arg ?? null] });
    const out = r.value;
    if (out?.error) throw new Error(`in the page: ${out.error}`);
    return out?.value;
  }

  goto(url) {
    return this.cmd('WebDriver:Navigate', { url });
  }

  /**
   * The viewport (innerWidth x innerHeight, CSS px) made `width` x `height`.  A Firefox window is
   * at least 500 px wide: a narrower phone is the page zoomed in (the tab's full zoom, set from
   * the browser's chrome context), so it lays out at that many CSS px, as on a phone's screen.
   */
  async setViewport({ width, height }) {
    // a zoom a little above the least that fits: Firefox rounds the zoom it applies
    const zoom = width < MIN_WINDOW ? (MIN_WINDOW + 20) / width : 1;
    await this.#zoom(1);
    // the window's own frame, measured unzoomed (CSS px are then the window's px)
    const [fw, fh] = await this.evaluate(() => [outerWidth - innerWidth, outerHeight - innerHeight]);
    await this.#zoom(zoom);
    const applied = await this.evaluate(() => devicePixelRatio);
    await this.cmd('WebDriver:SetWindowRect', { width: Math.round(width * applied + fw), height: Math.round(height * applied + fh) });
    return this.evaluate(() => [innerWidth, innerHeight]);
  }

  async #zoom(zoom) {
    await this.cmd('Marionette:SetContext', { value: 'chrome' });
    try {
      await this.cmd('WebDriver:ExecuteScript', { script: 'gBrowser.selectedBrowser.browsingContext.fullZoom = arguments[0];', args: [zoom] });
    } finally {
      await this.cmd('Marionette:SetContext', { value: 'content' });
    }
  }

  async screenshot() {
    return Buffer.from((await this.cmd('WebDriver:TakeScreenshot', { full: false })).value, 'base64');
  }

  async close() {
    await this.cmd('Marionette:Quit', { flags: ['eForceQuit'] }).catch(() => {});
    this.sock?.destroy();
    await stopProcess(this.proc, 5000);
  }
}
