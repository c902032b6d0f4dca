#!/usr/bin/env node
// `npm run demo`: serves the demo page (web/demo/) and the package files it
// imports (web/, wasm/, models/registry.*) on 127.0.0.1, with COOP/COEP so
// the page is crossOriginIsolated (SharedArrayBuffer, compute threads),
// correct MIME types, HEAD and byte ranges. Local models: the directory in
// WASMLM_MODELS (or --models DIR): its regular *.gguf files (not its dot
// files, other files, sub-folders or links leading out of it) are served
// under /local-models/, with /local-models/index.json listing them; the page
// offers them first. Only these paths are served; everything else is a 404.
// Requests must name the server by 127.0.0.1, localhost or [::1] (or the
// --host given) and its port, so a DNS-rebinding page cannot read them.
// The request handling is web/demo/static.mjs, shared with the browser bench.
// Chat templates: the package's one dependency, @huggingface/jinja, is
// imported by a bare name (web/worker/template.js), which a page without a
// bundler cannot resolve (and import maps do not reach workers); like a
// bundler's dev server, this one serves that module at /vendor/jinja.js and
// template.js with its import pointing there.
//
//   node web/demo/server.mjs [--port 8080] [--host 127.0.0.1] [--models DIR]
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MIME, ISOLATION, startStatic, allowedFile, modelFile, listModels } from './static.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

// Isolation on every response (the page, its scripts, the workers and the
// wasm all need it). `no-cache` = always revalidate, so an edited file is
// seen at once; offline use goes through the service worker.
const HEADERS = { ...ISOLATION, 'Cache-Control': 'no-cache' };

// The URL paths served from the repository (prefixes end in '/')
const PUBLIC = ['/web/', '/wasm/', '/models/registry.json', '/models/registry.js'];

// @huggingface/jinja's ES module as Node resolves it from the package (null when it is not installed)
const JINJA_URL = '/vendor/jinja.js', JINJA_NAME = '@huggingface/jinja';
function jinjaFile() {
  try { return fileURLToPath(import.meta.resolve(JINJA_NAME)); } catch { return null; }
}
/** web/worker/template.js with its bare import of Jinja pointing at JINJA_URL. */
function templateModule(root, send) {
  const src = fs.readFileSync(path.join(root, 'web/worker/template.js'), 'utf8');
  const out = src.replace(/(\bfrom\s*)(['"])@huggingface\/jinja\2/, `$1$2${JINJA_URL}$2`);
  if (out === src) return send(500, `web/worker/template.js: no import of ${JINJA_NAME} to point at ${JINJA_URL}`);
  return send(200, out, { 'Content-Type': MIME['.js'] });
}

/** The demo's routes: `/` to the page, the model list and models of the
 * local folder, the public package files. */
function demoRoute(root, models) {
  return (rel, req, send) => {
    if (rel === '/' || rel === '/index.html') return send(302, 'see /web/demo/', { Location: '/web/demo/' });
    if (rel === '/favicon.ico') return send(204, '');
    if (rel === '/local-models/index.json') {
      let list = [];
      try { if (models) list = listModels(models); } catch (e) { return send(500, `cannot list the model folder: ${e.code || e.message}`); }
      return send(200, JSON.stringify(list), { 'Content-Type': MIME['.json'] });
    }
    if (rel.startsWith('/local-models/')) {
      if (!models) return send(404, 'no local model directory (set WASMLM_MODELS or pass --models DIR)');
      return modelFile(models, rel.slice('/local-models/'.length));
    }
    if (rel === JINJA_URL) {
      const file = jinjaFile();
      return file ? { file } : { status: 404, why: `${JINJA_NAME} is not installed (npm install): chat templates cannot be rendered` };
    }
    if (rel === '/web/worker/template.js') return templateModule(root, send);
    if (rel.endsWith('/')) rel += 'index.html';
    const r = allowedFile(root, PUBLIC, rel);
    // the service worker must control the whole demo directory
    if (r.file && rel === '/web/demo/sw.js') r.headers = { 'Service-Worker-Allowed': '/' };
    return r;
  };
}

/**
 * Starts the demo server. Resolves with {url, port, close()}. It answers
 * only to Host names 127.0.0.1, localhost, [::1] and `host` (for a wildcard
 * `host`, the machine's own names too) with the listening port.
 * @param {{port?: number, host?: string, modelsDir?: string|null, root?: string, log?: (s: string) => void,
 *          onRequest?: (method: string, url: string) => void}} [opts]
 */
export function startDemoServer({ port = 0, host = '127.0.0.1', modelsDir = process.env.WASMLM_MODELS || null, root = ROOT, log = null, onRequest = null } = {}) {
  const models = modelsDir ? path.resolve(modelsDir) : null;
  return startStatic({ port, host, headers: HEADERS, route: demoRoute(root, models), log, onRequest });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const argv = process.argv.slice(2);
  const opt = (name, dflt) => { const i = argv.indexOf(name); return i >= 0 && argv[i + 1] ? argv[i + 1] : dflt; };
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log('usage: node web/demo/server.mjs [--port 8080] [--host 127.0.0.1] [--models DIR]\n' +
      'Serves the wasmlm demo with COOP/COEP headers. --models (or env WASMLM_MODELS) is a folder of .gguf files\n' +
      '(only regular *.gguf files directly in it are served). Requests must address the server as 127.0.0.1,\n' +
      'localhost or [::1] (plus --host NAME when given) with its port; others get a 403.');
    process.exit(0);
  }
  const port = +opt('--port', process.env.PORT || 8080);
  const host = opt('--host', '127.0.0.1');
  const modelsDir = opt('--models', process.env.WASMLM_MODELS || null);
  for (const w of ['wasmlm.wasm', 'wasmlm-mt.wasm']) {
    if (!fs.existsSync(path.join(ROOT, 'wasm', w))) console.error(`warning: wasm/${w} is missing: run 'make wasm' first`);
  }
  startDemoServer({ port, host, modelsDir, log: (s) => console.error(s) }).then((s) => {
    console.log(`wasmlm demo: ${s.url}/web/demo/`);
    console.log(modelsDir ? `local models from ${path.resolve(modelsDir)}` : 'no local model folder (set WASMLM_MODELS to serve one); registry models download from their URL');
    console.log('Ctrl-C stops the server.');
  }, (e) => {
    console.error(`cannot start the demo server on ${host}:${port}: ${e.code === 'EADDRINUSE' ? 'the port is in use (try --port 0)' : e.message}`);
    process.exit(1);
  });
}
