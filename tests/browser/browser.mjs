// Shared set-up for the browser tests (not a test file itself): Debian's
// chromium driven by playwright-core, a fresh profile per launch, the flags
// that keep a headless sandboxed run quiet and off the network.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { listen, serveFiles } from '../js/servers.mjs';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const SHARED = path.resolve(ROOT, process.env.WLM_SHARED || '../shared');
export const MODELS = process.env.WASMLM_MODELS ? path.resolve(process.env.WASMLM_MODELS) : path.join(SHARED, 'models');
export const MODEL_PATH = path.join(MODELS, 'stories260K.gguf');
export const ARTIFACTS = path.join(ROOT, 'test-artifacts');
export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
export const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export function reference() {
  return JSON.parse(fs.readFileSync(path.join(SHARED, 'reference', 'stories260K_greedy.json'), 'utf8'));
}

/** playwright-core's chromium, or throws with the command that installs it. */
export async function chromiumOrThrow() {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: run sh tools/setup-browser.sh (apt chromium)`);
  try {
    return (await import('playwright-core')).chromium;
  } catch {
    throw new Error('playwright-core is not installed: run sh tools/setup-browser.sh (npm devDependencies)');
  }
}

/** Launches Chromium with a fresh profile; resolves {context, close()}. */
export async function launch(opts = {}) {
  const chromium = await chromiumOrThrow();
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-test-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM, headless: true, args: FLAGS, viewport: { width: 1280, height: 900 }, ...opts,
  });
  return {
    context,
    async close() {
      await context.close().catch(() => {});
      fs.rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

const MIME = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.json': 'application/json', '.wasm': 'application/wasm', '.html': 'text/html' };

/**
 * A request handler for a test page's origin: a blank page at /, the
 * package's own files under /web, /wasm and /models from ROOT, `routes`
 * (URL path -> handler(req, res), for a response of the test's own making),
 * and `files` as tests/js/servers.mjs's serveFiles serves them (URL path ->
 * file path or bytes, or a function; `ranges` and `log` as there); anything
 * else is 404. `headers` go with every response (cross-origin isolation, say).
 */
export function rootHandler({ files = {}, routes = {}, headers = {}, ranges, log } = {}) {
  const serve = serveFiles(files, { ranges, log, headers });
  return (req, res) => {
    const p = new URL(req.url, 'http://x').pathname;
    if (p === '/') { res.writeHead(200, { ...headers, 'content-type': 'text/html' }); res.end('<!doctype html><title>wasmlm test</title>'); return; }
    if (Object.hasOwn(routes, p)) { routes[p](req, res); return; }
    if (/^\/(web|wasm|models)\/[\w./-]+$/.test(p) && !p.includes('..')) {
      const file = path.join(ROOT, p);
      if (!fs.existsSync(file)) { res.writeHead(404, headers); res.end(); return; }
      res.writeHead(200, { ...headers, 'content-type': MIME[path.extname(file)] || 'application/octet-stream' });
      res.end(fs.readFileSync(file));
      return;
    }
    serve(req, res);
  };
}

/**
 * The set-up the browser tests share: a server, Chromium with a fresh
 * profile, a page on the server's origin. `server` is one already started,
 * as {url, close()} (startDemoServer's), an http.Server not yet listening
 * (hubServer's), or left out: then rootHandler(options) is served (the
 * options `files`, `routes`, `headers`, `ranges`, `log` are its). The page
 * opens url + `path` (null: it stays blank), after `errors`, when given,
 * starts collecting its errors (watchPage, with `isOffline`). Resolves
 * {url, page, context, close()}; close() closes the browser, then the
 * server, and is safe when a step failed half-way (call it from after()).
 */
export async function openPage({ server, path: at = '/', errors, isOffline, launchOptions, ...handlerOptions } = {}) {
  const served = server?.url ? server : await listen(server || rootHandler(handlerOptions));
  let browser;
  const close = async () => {
    await browser?.close();
    await served.close();
  };
  try {
    browser = await launch(launchOptions);
    const page = await browser.context.newPage();
    if (errors) watchPage(page, errors, isOffline);
    if (at != null) await page.goto(`${served.url}${at}`);
    return { url: served.url, page, context: browser.context, close };
  } catch (e) {
    await close();
    throw e;
  }
}

/**
 * Makes the page press the button `selector` itself, at the first DOM change
 * after which `when()` (run in the page) holds, and resolves once that is
 * armed. A tiny model can finish a long reply ~100 ms after its first text
 * shows, so a click sent from the test may land after the end; this one
 * cannot. `window.pressedEnabled` tells afterwards whether the button was
 * enabled when pressed (undefined: it never was pressed).
 */
export function pressWhen(page, selector, when) {
  const arm = (selector, holds) => {
    const seen = new MutationObserver(() => {
      if (!holds()) return;
      seen.disconnect();
      const button = document.querySelector(selector);
      window.pressedEnabled = !button.disabled;
      button.click();
    });
    seen.observe(document.body, { childList: true, subtree: true, characterData: true, attributes: true });
  };
  // one expression for the DevTools protocol to evaluate: the page's own CSP would refuse new Function
  return page.evaluate(`(${arm})(${JSON.stringify(selector)}, ${when})`);
}

/**
 * Collects page errors and console errors (a test asserts there are none).
 * While isOffline() is true, the browser's own failed requests (the service
 * worker's update check) are expected and not collected.
 */
export function watchPage(page, errors, isOffline = () => false) {
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  // failed responses are reported by URL (the console message has none); the
  // browser's own /favicon.ico probe is not the page's doing
  page.on('response', (r) => {
    if (r.status() >= 400 && !/\/favicon\.ico$/.test(r.url())) errors.push(`HTTP ${r.status()} ${r.url()}`);
  });
  page.on('console', (m) => {
    const t = m.text();
    if (m.type() !== 'error' || /favicon/.test(t)) return;
    if (/^Failed to load resource: the server responded with a status of/.test(t)) return;   // see 'response'
    if (isOffline() && /Failed to load resource: net::ERR_(FAILED|INTERNET_DISCONNECTED|CONNECTION_REFUSED)/.test(t)) return;
    errors.push(`console.error: ${t}`);
  });
}

/**
 * Runs `fn` while Chromium traces the renderer's main thread; resolves with
 * every task that took more than `overMs` of wall time there, as
 * {wallMs, cpuMs}, and the largest CPU time of any task. A task whose wall
 * time is long but whose CPU time is short was waiting for a core (the OS ran
 * other threads: the engine's, other programs'), not doing page work.
 */
export async function traceMainThread(context, page, fn, overMs = 50) {
  const cdp = await context.newCDPSession(page);
  const events = [];
  cdp.on('Tracing.dataCollected', (d) => { for (const e of d.value) events.push(e); });
  const complete = new Promise((r) => cdp.once('Tracing.tracingComplete', r));
  await cdp.send('Tracing.start', { categories: 'toplevel', transferMode: 'ReportEvents' });
  try {
    await fn();
  } finally {
    await cdp.send('Tracing.end');
    await complete;
    await cdp.detach().catch(() => {});
  }
  const mains = new Set(events.filter((e) => e.name === 'thread_name' && e.args?.name === 'CrRendererMain').map((e) => `${e.pid}:${e.tid}`));
  const tasks = events.filter((e) => e.ph === 'X' && e.name === 'ThreadControllerImpl::RunTask' && mains.has(`${e.pid}:${e.tid}`));
  return {
    count: tasks.length,
    long: tasks.filter((e) => e.dur / 1000 > overMs).map((e) => ({ wallMs: Math.round(e.dur / 1000), cpuMs: +((e.tdur ?? e.dur) / 1000).toFixed(1) })),
    maxCpuMs: +(Math.max(0, ...tasks.map((e) => (e.tdur ?? e.dur) / 1000))).toFixed(1),
  };
}

