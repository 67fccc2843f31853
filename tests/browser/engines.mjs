// The three engines behind one small "view", so that a scenario is written once and run in each:
// Chromium (playwright-core), Firefox ESR (puppeteer-core over WebDriver BiDi) and WebKit
// (MiniBrowser behind WebKitWebDriver, under an Xvfb of its own).  A view acts in the page by
// script only; what differs per engine (launching, keys, screenshots, a fresh browser) is here.
//
//   for (const engine of ENGINES) {
//     test(`${TITLE[engine]}: ...`, { skip: skipOf(engine), timeout }, () =>
//       withView(engine, { tmp }, (view) => scenario(view)));
//   }
//
// A missing engine skips its test, and fails it under CI=true (CI must run every engine).
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { DRIVER, MINIBROWSER, XVFB, countingProxy, launchWebKit, startXvfb } from './webkit-driver.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const require = createRequire(path.join(ROOT, 'package.json'));

export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
export const FIREFOX = process.env.FIREFOX ?? '/usr/bin/firefox-esr';
export const ENGINES = ['chromium', 'firefox', 'webkit'];
export const TITLE = { chromium: 'Chromium', firefox: 'Firefox', webkit: 'WebKit' };
const NEEDS = { chromium: [CHROMIUM], firefox: [FIREFOX], webkit: [DRIVER, MINIBROWSER, XVFB] };
const DESKTOP = { width: 1280, height: 800 };

/** The test's `skip` option: false, or why the engine cannot run here (never under CI=true). */
export function skipOf(engine) {
  const missing = NEEDS[engine].filter((p) => !fs.existsSync(p));
  return missing.length && process.env.CI !== 'true' ? `${TITLE[engine]} is not installed here (${missing.join(', ')})` : false;
}

// W3C key actions for WebKitWebDriver: one sequence per call, so keys typed after Ctrl+Enter
// reach the page while the save it started still runs
const ENTER = '\uE007';
const CONTROL = '\uE009';
const keyActions = (steps) => steps.flatMap((s) => {
  if (typeof s === 'string') return [...s].flatMap((c) => [{ type: 'keyDown', value: c }, { type: 'keyUp', value: c }]);
  if ('press' in s) return [{ type: 'keyDown', value: ENTER }, { type: 'keyUp', value: ENTER }];
  return [{ type: 'keyDown', value: CONTROL }, { type: 'keyDown', value: ENTER }, { type: 'keyUp', value: ENTER },
    { type: 'keyUp', value: CONTROL }];
});

/** Keys typed through a playwright or puppeteer page: a string is typed, {press: 'Enter'} is
 *  Enter, {ctrlEnter: true} is Ctrl+Enter (puppeteer has no "Control+Enter" chord). */
async function typeKeys(page, steps) {
  for (const s of steps) {
    if (typeof s === 'string') await page.keyboard.type(s);
    else if ('press' in s) await page.keyboard.press('Enter');
    else {
      await page.keyboard.down('Control');
      await page.keyboard.press('Enter');
      await page.keyboard.up('Control');
    }
  }
}

/** The view of a playwright or puppeteer page. */
function pageView(engine, page, setViewport, fresh) {
  return {
    engine,
    evaluate: (fn, arg) => page.evaluate(fn, arg),
    inject: async (src) => { await page.evaluate(src); },
    goto: async (url) => { await page.goto(url); },
    keys: (steps) => typeKeys(page, steps),
    ctrlEnter: () => typeKeys(page, [{ ctrlEnter: true }]),
    setViewport,
    screenshot: (file, { fullPage = true } = {}) => page.screenshot({ path: file, fullPage }),
    fresh,
  };
}

function webkitView(dev, fresh) {
  return {
    engine: 'webkit',
    evaluate: (fn, arg) => dev.evaluate(fn, arg),
    inject: async (src) => { await dev.run(src); },
    goto: (url) => dev.goto(url),
    keys: async (steps) => {
      await dev.cmd('POST', '/actions', { actions: [{ type: 'key', id: 'keyboard', actions: keyActions(steps) }] });
      await dev.cmd('DELETE', '/actions');
    },
    ctrlEnter: () => webkitView(dev).keys([{ ctrlEnter: true }]),
    setViewport: (v) => dev.setViewport(v),
    // WebDriver's screenshot is the viewport (no full-page capture in WebKitWebDriver)
    screenshot: async (file) => fs.writeFileSync(file, await dev.screenshot()),
    fresh,
  };
}

/**
 * Run `fn(view)` in a new browser of `engine` and close it after, whatever happens.
 * `tmp`: a folder for Firefox's profile; `onPageError(engine, error)`: uncaught page errors
 * (default: printed); `scriptMs`: WebKit's script timeout (an async script may wait for the vault
 * worker that long); `proxy`: WebKit through the counting proxy (its first-visit bytes).
 * `view.fresh()` opens another browser with no site data (a new context in Chromium and
 * Firefox, a new automation session in WebKit, whose data is ephemeral) -> a view with `close()`.
 */
export async function withView(engine, { tmp, viewport = DESKTOP, scriptMs = 180_000, proxy = false,
  onPageError = (e, err) => console.error(`[${e} page error]`, err.message) } = {}, fn) {
  if (engine === 'chromium') {
    const { chromium } = require('playwright-core');
    const browser = await chromium.launch({ executablePath: CHROMIUM,
      args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--no-first-run'] });
    const open = async () => {
      const context = await browser.newContext({ viewport });
      const page = await context.newPage();
      page.on('pageerror', (err) => onPageError(engine, err));
      const view = pageView(engine, page, (v) => page.setViewportSize(v), open);
      view.close = () => context.close();
      return view;
    };
    try {
      return await fn(await open());
    } finally {
      await browser.close();
    }
  }
  if (engine === 'firefox') {
    const puppeteer = require('puppeteer-core');
    const browser = await puppeteer.launch({ browser: 'firefox', protocol: 'webDriverBiDi', executablePath: FIREFOX,
      headless: true, userDataDir: fs.mkdtempSync(path.join(tmp, 'firefox-')) });
    const wrap = async (page, close) => {
      page.on('pageerror', (err) => onPageError(engine, err));
      await page.setViewport(viewport);
      const view = pageView(engine, page, (v) => page.setViewport(v), async () => {
        const context = await browser.createBrowserContext();
        return wrap(await context.newPage(), () => context.close());
      });
      view.close = close;
      return view;
    };
    try {
      return await fn(await wrap((await browser.pages())[0] ?? await browser.newPage(), async () => {}));
    } finally {
      await browser.close();
    }
  }
  const xvfb = await startXvfb();
  const counting = proxy ? await countingProxy() : null;
  const sessions = [];
  const launch = async (via) => {
    const dev = await launchWebKit({ display: xvfb.display, proxy: via, scriptMs });
    sessions.push(dev);
    await dev.setViewport(viewport);
    // one MiniBrowser at a time on this display: a fresh one replaces those before
    const view = webkitView(dev, async () => {
      for (const d of sessions) await d.close();
      return launch(undefined);
    });
    view.close = () => dev.close();
    return view;
  };
  try {
    return await fn(await launch(counting?.url));
  } finally {
    for (const dev of sessions) await dev.close().catch(() => {});
    await counting?.close();
    await xvfb.stop();
  }
}
