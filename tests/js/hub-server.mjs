// A local imitation of the model hub's public endpoints for the tests (not
// a test file itself): the tree listing in pages of two entries (Link:
// rel="next"), resolve URLs that redirect (302) to a "CDN" path, ETags,
// Range / If-Range / If-None-Match, connections cut mid-body. Optionally it
// serves the package's own files too (the browser tests load web/index.js
// from it).
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';

export const sha = (b) => createHash('sha256').update(b).digest('hex');

const MIME = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.json': 'application/json', '.wasm': 'application/wasm', '.html': 'text/html' };

/**
 * A hub imitation. `state.files` maps repository paths of state.repo to
 * bytes; `state.version` is part of each file's ETag (bump it to change the
 * file); `state.cuts` is how many of the next CDN bodies are cut after
 * `state.cutAt` bytes; `state.ignoreRange` answers 200 to a Range request;
 * `state.rangeEtag` sends that ETag on a 206; `state.listedSizes` gives
 * the listing a size for a path other than its bytes' (a file too large to
 * hold in a test); `state.root` serves
 * /web, /wasm and /models from that directory and a blank page at /.
 * Every response allows any origin (the browser tests load from another
 * port), as the real hub does.
 * `log` records every request.
 */
export function hubServer(state) {
  const log = [];
  const server = http.createServer((req, res) => {
    const u = new URL(req.url, 'http://x');
    // like the real hub: readable from any origin, ETag and Link exposed
    res.setHeader('access-control-allow-origin', '*');
    res.setHeader('access-control-expose-headers', 'etag, link, content-range, accept-ranges, content-length');
    log.push({ method: req.method, path: u.pathname + u.search, range: req.headers.range, ifRange: req.headers['if-range'], ifNoneMatch: req.headers['if-none-match'] });
    if (state.root && (u.pathname === '/' || /^\/(web|wasm|models)\/[\w./-]+$/.test(u.pathname)) && !u.pathname.includes('..')) {
      if (u.pathname === '/') { res.writeHead(200, { 'content-type': 'text/html' }); res.end('<!doctype html><title>hub test</title>'); return; }
      const file = path.join(state.root, u.pathname);
      if (!fs.existsSync(file)) { res.writeHead(404); res.end(); return; }
      res.writeHead(200, { 'content-type': MIME[path.extname(file)] || 'application/octet-stream' });
      res.end(fs.readFileSync(file));
      return;
    }
    let m = /^\/api\/models\/([^/]+)\/([^/]+)\/tree\/([^/]+)$/.exec(u.pathname);
    if (m) {
      if (`${m[1]}/${m[2]}` !== state.repo || decodeURIComponent(m[3]) !== 'main') { res.writeHead(404, { 'content-type': 'application/json' }); res.end('{"error":"Repository not found"}'); return; }
      const sizeOf = (p, b) => state.listedSizes?.[p] ?? b.length;
      const all = Object.entries(state.files).map(([p, b]) => ({ type: 'file', path: p, size: sizeOf(p, b), oid: 'x', lfs: { oid: sha(b), size: sizeOf(p, b), pointerSize: 130 } }));
      all.push({ type: 'directory', path: 'sub', oid: 'y', size: 0 }, { type: 'file', path: 'README.md', size: 5, oid: 'z' });
      const cursor = Number(u.searchParams.get('cursor') || 0);
      const page = all.slice(cursor, cursor + 2);
      const headers = { 'content-type': 'application/json' };
      if (cursor + 2 < all.length) headers.link = `<${u.pathname}?recursive=true&cursor=${cursor + 2}>; rel="next"`;
      res.writeHead(200, headers);
      res.end(JSON.stringify(page));
      return;
    }
    m = /^\/([^/]+)\/([^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(u.pathname);
    if (m) {
      const p = decodeURIComponent(m[4]);
      if (`${m[1]}/${m[2]}` !== state.repo || !state.files[p]) { res.writeHead(404); res.end('Entry not found'); return; }
      res.writeHead(302, { location: `/cdn/${encodeURIComponent(p)}?v=${state.version}` });
      res.end();
      return;
    }
    m = /^\/cdn\/(.+)$/.exec(u.pathname);
    if (m) {
      const body = state.files[decodeURIComponent(m[1])];
      const etag = `"${sha(body).slice(0, 16)}-${state.version}"`;
      if (req.headers['if-none-match'] === etag) { res.writeHead(304, { etag }); res.end(); return; }
      let start = 0;
      const r = /^bytes=(\d+)-$/.exec(req.headers.range || '');
      const rangeOk = r && !state.ignoreRange && (!req.headers['if-range'] || req.headers['if-range'] === etag || state.rangeEtag);
      if (rangeOk) start = Number(r[1]);
      if (start >= body.length && rangeOk) { res.writeHead(416, { 'content-range': `bytes */${body.length}` }); res.end(); return; }
      const part = body.subarray(start);
      const headers = { 'content-type': 'application/octet-stream', 'content-length': part.length, 'accept-ranges': 'bytes', etag };
      if (rangeOk) {
        headers['content-range'] = `bytes ${start}-${body.length - 1}/${body.length}`;
        if (state.rangeEtag) headers.etag = state.rangeEtag;
      }
      res.writeHead(rangeOk ? 206 : 200, headers);
      if (req.method === 'HEAD') { res.end(); return; }
      if (state.cuts > 0) {
        state.cuts--;
        res.write(part.subarray(0, state.cutAt));
        setTimeout(() => res.socket?.destroy(), 50); // after the bytes reached the client
        return;
      }
      res.end(part);
      return;
    }
    res.writeHead(404); res.end();
  });
  return { server, log };
}

/** Runs fn(hubUrl, log) with a hub imitation on 127.0.0.1 over `state` (which the test may change as it goes). */
export async function withHub(state, fn) {
  for (const [k, v] of Object.entries({ repo: 'owner/repo', version: 1, cuts: 0, cutAt: 100000 })) if (!(k in state)) state[k] = v;
  const { server, log } = hubServer(state);
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const hubUrl = `http://127.0.0.1:${server.address().port}`;
  try { return await fn(hubUrl, log); } finally { server.closeAllConnections?.(); await new Promise((r) => server.close(r)); }
}
