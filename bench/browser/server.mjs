// Minimal static file server for the browser bench: serves `root` on
// 127.0.0.1 with COOP/COEP (so the page is crossOriginIsolated and both
// engines can use SharedArrayBuffer threads), correct MIME types, HEAD and
// single byte-range requests. Paths outside `root` are refused.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { sendFile } from '../../web/demo/server.mjs';

const ISOLATION = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Cache-Control': 'no-store',
};

/** Starts the server; resolves with {url, close()}. */
export function startServer(root, { port = 0, log = null } = {}) {
  root = path.resolve(root);
  const server = http.createServer((req, res) => {
    const send = (status, body, headers = {}) => {
      res.writeHead(status, { ...ISOLATION, 'Content-Type': 'text/plain; charset=utf-8', ...headers });
      res.end(body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'method not allowed');
    let rel;
    try { rel = decodeURIComponent(new URL(req.url, 'http://x').pathname); } catch { return send(400, 'bad url'); }
    if (rel.endsWith('/')) rel += 'index.html';
    const file = path.resolve(root, '.' + rel);
    if (file !== root && !file.startsWith(root + path.sep)) return send(403, 'forbidden');
    let st;
    try { st = fs.statSync(file); } catch { if (log) log(`404 ${rel}`); return send(404, 'not found: ' + rel); }
    if (st.isDirectory()) return send(404, 'is a directory');
    sendFile(req, res, file, st, ISOLATION, send);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const { port: p } = server.address();
      resolve({ url: `http://127.0.0.1:${p}`, close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }) });
    });
  });
}
