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
  const proc = spawn(firefox, ['--headless', '--marionette', '--no-remote', '--profile', profile],
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

  /** The viewport (innerWidth x innerHeight) made `width` x `height`: the window is that plus its own frame. */
  async setViewport({ width, height }) {
    const [ow, oh, iw, ih] = await this.evaluate(() => [outerWidth, outerHeight, innerWidth, innerHeight]);
    await this.cmd('WebDriver:SetWindowRect', { width: width + (ow - iw), height: height + (oh - ih) });
    return this.evaluate(() => [innerWidth, innerHeight]);
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
