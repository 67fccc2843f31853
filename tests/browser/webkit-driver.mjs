// WebKitGTK's MiniBrowser driven over W3C WebDriver (Debian webkit2gtk-driver), spoken with
// fetch: the protocol is a handful of JSON-over-HTTP commands, so no client library is needed.
// Not a test file (node's runner picks up only *.test.mjs).
//
// One WebKitWebDriver process holds one session ("Maximum number of active sessions"), so
// every device is a driver of its own, with its own MiniBrowser and so its own (ephemeral,
// automation-mode) website data: IndexedDB, service worker, Cache Storage.
//
// MiniBrowser runs full-screen: its toolbar then takes no room, and the window's rect is the
// viewport's, so 390x844 is a phone's viewport exactly (with the toolbar the window is at
// least 447 px wide).  `proxy` sends all its traffic through a proxy of the test's
// (countingProxy below), which is how a test sees every request the engine makes.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import { freePort, stopProcess, until } from './helpers.mjs';

export const DRIVER = process.env.WEBKIT_DRIVER ?? '/usr/bin/WebKitWebDriver';
export const MINIBROWSER = process.env.MINIBROWSER ?? '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser';
export const XVFB = process.env.XVFB ?? '/usr/bin/Xvfb';

function start(cmd, args, env = {}) {
  const proc = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  proc.log = '';
  const keep = (d) => { proc.log = (proc.log + d).slice(-20000); };
  proc.stdout.on('data', keep);
  proc.stderr.on('data', keep);
  return proc;
}

/** An X server of its own (a free display number: the lock file of :N is /tmp/.XN-lock). */
export async function startXvfb() {
  let display = 90 + Math.floor(Math.random() * 400);
  while (fs.existsSync(`/tmp/.X${display}-lock`)) display++;
  const proc = start(XVFB, [`:${display}`, '-screen', '0', '1400x1100x24', '-nolisten', 'tcp']);
  await until('Xvfb', () => fs.existsSync(`/tmp/.X11-unix/X${display}`), 15_000);
  return { display: `:${display}`, stop: () => stopProcess(proc, 5000) };
}

/**
 * A MiniBrowser of its own on X `display`, behind a WebKitWebDriver of its own.  `scriptMs`:
 * the script timeout (an async script may wait for the vault worker that long).
 */
export async function launchWebKit({ display, proxy, scriptMs }) {
  const port = await freePort();
  const driver = start(DRIVER, [`--port=${port}`, '--host=127.0.0.1'], { DISPLAY: display });
  const url = `http://127.0.0.1:${port}`;
  await until('WebKitWebDriver', async () => (await wd(url, 'GET', '/status')).ready !== undefined, 15_000);
  const args = ['--automation', '--full-screen', ...(proxy ? [`--proxy=${proxy}`] : [])];
  const s = await wd(url, 'POST', '/session', {
    capabilities: { alwaysMatch: { browserName: 'MiniBrowser', 'webkitgtk:browserOptions': { binary: MINIBROWSER, args } } },
  });
  const dev = new WebKitSession(url, s.sessionId, driver);
  await dev.cmd('POST', '/timeouts', { script: scriptMs, pageLoad: 60_000, implicit: 0 });
  return dev;
}

async function wd(base, method, route, body) {
  const r = await fetch(`${base}${route}`, {
    method, headers: { 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const out = await r.json();
  if (!r.ok) throw new Error(`WebDriver ${method} ${route}: ${out.value?.error}: ${out.value?.message}`);
  return out.value;
}

export class WebKitSession {
  constructor(url, id, driver) {
    this.url = url;
    this.id = id;
    this.driver = driver;
  }

  cmd(method, route, body) {
    return wd(this.url, method, `/session/${this.id}${route}`, body);
  }

  run(script, ...args) {
    return this.cmd('POST', '/execute/sync', { script, args });
  }

  runAsync(script, ...args) {
    return this.cmd('POST', '/execute/async', { script, args });
  }

  /**
   * Call `fn` (a function, sent as source; it may return a promise) in the page with one
   * JSON argument; its value, or its error thrown here.
   */
  async evaluate(fn, arg) {
    const r = await this.runAsync(`const done = arguments[1];
      Promise.resolve().then(() => (${fn})(arguments[0])).then((value) => done({ value }),
        (e) => done({ error: String(e && e.stack || e) }));`, arg ?? null);
    if (r.error) throw new Error(`in the page: ${r.error}`);
    return r.value;
  }

  goto(url) {
    return this.cmd('POST', '/url', { url });
  }

  reload() {
    return this.cmd('POST', '/refresh', {});
  }

  async find(css) {
    // a web element reference: {"element-6066-11e4-a6e7-4e8a9b15b0a3": id}
    return Object.values(await this.cmd('POST', '/element', { using: 'css selector', value: css }))[0];
  }

  waitFor(css, timeout) {
    return until(`${css} to show`, () => this.run('return !!document.querySelector(arguments[0]);', css), timeout);
  }

  /**
   * A real click (WebDriver's element click: hit-tested at the element's centre).  The
   * element is first scrolled to the middle of the screen: WebDriver's own scrolling may leave
   * it under the sticky top bar ("element click intercepted"), where a person would scroll on.
   */
  async click(css, timeout = 60_000) {
    await this.waitFor(css, timeout);
    await this.run('document.querySelector(arguments[0]).scrollIntoView({ block: "center" });', css);
    await this.cmd('POST', `/element/${await this.find(css)}/click`, {});
  }

  /** Typed key by key into a cleared field. */
  async type(css, text, timeout = 60_000) {
    await this.waitFor(css, timeout);
    const id = await this.find(css);
    await this.cmd('POST', `/element/${id}/clear`, {});
    await this.cmd('POST', `/element/${id}/value`, { text });
  }

  /** The viewport's size, set through the (full-screen) window's rect; -> [w, h] as measured. */
  async setViewport({ width, height }) {
    await this.cmd('POST', '/window/rect', { width, height });
    return this.run('return [window.innerWidth, window.innerHeight];');
  }

  async screenshot() {
    return Buffer.from(await this.cmd('GET', '/screenshot'), 'base64');
  }

  async close() {
    await wd(this.url, 'DELETE', `/session/${this.id}`).catch(() => {});
    await stopProcess(this.driver, 5000);
  }
}

/**
 * An HTTP proxy on 127.0.0.1 that forwards to wherever the browser asks and records every
 * request: {method, url, body} (body: the request's bytes, for a needle scan).  An origin that
 * does not answer closes the browser's connection (a network error, as without the proxy, not
 * a 502 page).  CONNECT (TLS, or WebSocket through a proxy) is recorded and refused: the app
 * needs neither.
 */
export async function countingProxy() {
  const seen = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      seen.push({ method: req.method, url: req.url, body });
      let target;
      try {
        target = new URL(req.url);
      } catch {
        res.writeHead(400).end();
        return;
      }
      const headers = { ...req.headers };
      delete headers['proxy-connection'];
      const up = http.request({ host: target.hostname, port: target.port || 80, method: req.method,
        path: target.pathname + target.search, headers }, (r) => {
        res.writeHead(r.statusCode, r.headers);
        r.pipe(res);
      });
      up.on('error', () => req.socket.destroy());
      up.end(body);
    });
  });
  server.on('connect', (req, socket) => {
    seen.push({ method: 'CONNECT', url: req.url, body: Buffer.alloc(0) });
    socket.end('HTTP/1.1 403 Forbidden\r\n\r\n');
  });
  const port = await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(resolve); }),
  };
}
