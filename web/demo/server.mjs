#!/usr/bin/env node
// `npm run demo`: serves the demo page (web/demo/) and the package files it
// imports (web/, wasm/, models/registry.*) on 127.0.0.1, with COOP/COEP so
// the page is crossOriginIsolated (SharedArrayBuffer, compute threads),
// correct MIME types, HEAD and byte ranges. Local models: the directory in
// WASMLM_MODELS (or --models DIR) is served under /local-models/, with
// /local-models/index.json listing its .gguf files; the page offers them
// first. Only these paths are served; everything else is a 404.
//
//   node web/demo/server.mjs [--port 8080] [--host 127.0.0.1] [--models DIR]
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export const MIME = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.webmanifest': 'application/manifest+json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.gguf': 'application/octet-stream',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.txt': 'text/plain; charset=utf-8',
  '.md': 'text/plain; charset=utf-8',
};

// Cross-origin isolation for every response (the page, its scripts, the
// workers and the wasm all need it). `no-cache` = always revalidate, so an
// edited file is seen at once; offline use goes through the service worker.
const HEADERS = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Cache-Control': 'no-cache',
  'X-Content-Type-Options': 'nosniff',
};

// URL prefix -> directory (relative to the repo root) that may be served
const PUBLIC = [
  ['/web/', 'web'],
  ['/wasm/', 'wasm'],
  ['/models/registry.json', 'models/registry.json'],
  ['/models/registry.js', 'models/registry.js'],
];

/** Sends `file` (its stat `st`) with `headers`, its MIME type and one byte
 * range when asked (206, or 416 through `send`); HEAD sends headers only.
 * Shared with the browser benchmark's server. */
export function sendFile(req, res, file, st, headers, send) {
  headers = {
    ...headers,
    'Content-Type': MIME[path.extname(file).toLowerCase()] || 'application/octet-stream',
    'Accept-Ranges': 'bytes',
  };
  let start = 0, end = st.size - 1, status = 200;
  const range = /^bytes=(\d*)-(\d*)$/.exec(req.headers.range || '');
  if (range && (range[1] || range[2])) {
    if (range[1]) { start = +range[1]; end = range[2] ? Math.min(+range[2], st.size - 1) : st.size - 1; }
    else { start = Math.max(0, st.size - +range[2]); }
    if (start > end || start >= st.size) return send(416, 'range not satisfiable', { 'Content-Range': `bytes */${st.size}` });
    status = 206;
    headers['Content-Range'] = `bytes ${start}-${end}/${st.size}`;
  }
  headers['Content-Length'] = String(end - start + 1);
  res.writeHead(status, headers);
  if (req.method === 'HEAD' || st.size === 0) return res.end();
  fs.createReadStream(file, { start, end }).pipe(res);
}

function inside(dir, file) { return file === dir || file.startsWith(dir + path.sep); }

/**
 * Starts the demo server. Resolves with {url, port, close()}.
 * @param {{port?: number, host?: string, modelsDir?: string|null, root?: string, log?: (s: string) => void,
 *          onRequest?: (method: string, url: string) => void}} [opts]
 */
export function startDemoServer({ port = 0, host = '127.0.0.1', modelsDir = process.env.WASMLM_MODELS || null, root = ROOT, log = null, onRequest = null } = {}) {
  const models = modelsDir ? path.resolve(modelsDir) : null;
  const server = http.createServer((req, res) => {
    if (onRequest) onRequest(req.method, req.url);
    const send = (status, body, headers = {}) => {
      res.writeHead(status, { ...HEADERS, 'Content-Type': 'text/plain; charset=utf-8', ...headers });
      res.end(body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'method not allowed');
    let rel;
    try { rel = decodeURIComponent(new URL(req.url, 'http://x').pathname); } catch { return send(400, 'bad url'); }
    if (rel === '/' || rel === '/index.html') return send(302, 'see /web/demo/', { Location: '/web/demo/' });
    if (rel === '/favicon.ico') return send(204, '');
    let file = null;
    if (rel === '/local-models/index.json') {
      let list = [];
      if (models) {
        try {
          list = fs.readdirSync(models).filter((f) => f.endsWith('.gguf'))
            .map((f) => ({ name: f.slice(0, -5), file: f, size: fs.statSync(path.join(models, f)).size }));
        } catch (e) { return send(500, `cannot list ${models}: ${e.code || e.message}`); }
      }
      return send(200, JSON.stringify(list), { 'Content-Type': MIME['.json'] });
    }
    if (rel.startsWith('/local-models/')) {
      if (!models) return send(404, 'no local model directory (set WASMLM_MODELS or pass --models DIR)');
      file = path.resolve(models, '.' + rel.slice('/local-models'.length));
      if (!inside(models, file)) return send(403, 'forbidden');
    } else {
      if (rel.endsWith('/')) rel += 'index.html';
      const hit = PUBLIC.find(([prefix]) => rel === prefix || (prefix.endsWith('/') && rel.startsWith(prefix)));
      if (!hit) { if (log) log(`404 ${rel}`); return send(404, 'not found: ' + rel); }
      const base = path.join(root, hit[1]);
      file = path.resolve(root, '.' + rel);
      if (!inside(base, file)) return send(403, 'forbidden');
    }
    let st;
    try { st = fs.statSync(file); } catch { if (log) log(`404 ${rel}`); return send(404, 'not found: ' + rel); }
    if (st.isDirectory()) return send(302, 'directory', { Location: rel + '/' });
    const extra = { ...HEADERS, 'Last-Modified': st.mtime.toUTCString() };
    // the service worker must control the whole demo directory
    if (rel === '/web/demo/sw.js') extra['Service-Worker-Allowed'] = '/';
    sendFile(req, res, file, st, extra, send);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const p = server.address().port;
      const shown = host === '0.0.0.0' || host === '::' ? 'localhost' : host;
      resolve({
        url: `http://${shown}:${p}`, port: p,
        close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }),
      });
    });
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const argv = process.argv.slice(2);
  const opt = (name, dflt) => { const i = argv.indexOf(name); return i >= 0 && argv[i + 1] ? argv[i + 1] : dflt; };
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log('usage: node web/demo/server.mjs [--port 8080] [--host 127.0.0.1] [--models DIR]\n' +
      'Serves the wasmlm demo with COOP/COEP headers. --models (or env WASMLM_MODELS) is a folder of .gguf files.');
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
