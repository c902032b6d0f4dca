// A local imitation of the model hub's public endpoints for the tests (not
// a test file itself): the tree listing in pages of two entries (Link:
// rel="next"), resolve URLs that redirect (302) to a "CDN" path, ETags,
// Range / If-Range / If-None-Match, connections cut mid-body, CORS
// preflights. A gated repository (state.token) demands
// `Authorization: Bearer TOKEN` on the listing and the resolve endpoint, as
// the real hub does (401 without it or with another token, 403 while the
// licence is not accepted); the CDN may run on another origin (state.cdn)
// and every request's Authorization header is logged, so the tests check
// that the CDN never saw one.
import http from 'node:http';
import { createHash } from 'node:crypto';
import { listen } from './servers.mjs';

export const sha = (b) => createHash('sha256').update(b).digest('hex');

/**
 * A hub imitation. `state.files` maps repository paths of state.repo to
 * bytes; `state.version` is part of each file's ETag (bump it to change the
 * file); `state.cuts` is how many of the next CDN bodies are cut after
 * `state.cutAt` bytes; `state.ignoreRange` answers 200 to a Range request;
 * `state.rangeEtag` sends that ETag on a 206; `state.listedSizes` gives
 * the listing a size for a path other than its bytes' (a file too large to
 * hold in a test).
 * Gated repository: `state.token` is the one token the listing and resolve
 * endpoints accept (`state.licence === false`: 403 even with it).
 * `state.cdnUrl` (set by withHub for `state.cdn`) is the CDN's origin the
 * resolve URLs redirect to (else a path on this server); `state.hop` makes
 * a resolve URL redirect first to another path of the hub (gated too), then
 * to the CDN; `state.linkBase` is the origin the listing's next-page links
 * point to. `role` 'cdn' serves the same paths, never gated.
 * Every response allows any origin (the browser tests load from another
 * port), as the real hub does.
 * `log` records every request: method, path, role, the Range / If-Range /
 * If-None-Match headers, and `authorization` (the header as received).
 */
export function hubServer(state, { role = 'hub', log = [] } = {}) {
  const server = http.createServer((req, res) => {
    const u = new URL(req.url, 'http://x');
    // like the real hub: readable from any origin, ETag and Link exposed
    res.setHeader('access-control-allow-origin', '*');
    res.setHeader('access-control-expose-headers', 'etag, link, content-range, accept-ranges, content-length');
    log.push({ method: req.method, path: u.pathname + u.search, role, range: req.headers.range, ifRange: req.headers['if-range'],
      ifNoneMatch: req.headers['if-none-match'], authorization: req.headers.authorization });
    if (req.method === 'OPTIONS') { // a CORS preflight (a browser sending Authorization or Range)
      res.writeHead(204, { 'access-control-allow-headers': 'authorization, range, if-range, if-none-match', 'access-control-allow-methods': 'GET, HEAD', 'access-control-max-age': '0' });
      res.end();
      return;
    }
    // a gated repository: false when the request was refused (401 / 403 sent)
    const gate = () => {
      if (!state.token || role !== 'hub') return true;
      const json = { 'content-type': 'application/json' };
      if (req.headers.authorization !== `Bearer ${state.token}`) {
        res.writeHead(401, json);
        res.end(JSON.stringify({ error: req.headers.authorization ? 'Invalid credentials in Authorization header' : `Access to model ${state.repo} is restricted. You must be authenticated to access it.` }));
        return false;
      }
      if (state.licence === false) {
        res.writeHead(403, json);
        res.end(JSON.stringify({ error: `Access to model ${state.repo} is restricted and you are not in the authorized list.` }));
        return false;
      }
      return true;
    };
    const cdn = state.cdnUrl || '';
    let m = /^\/api\/models\/([^/]+)\/([^/]+)\/tree\/([^/]+)$/.exec(u.pathname);
    if (m) {
      if (`${m[1]}/${m[2]}` !== state.repo || decodeURIComponent(m[3]) !== 'main') { res.writeHead(404, { 'content-type': 'application/json' }); res.end('{"error":"Repository not found"}'); return; }
      if (!gate()) return;
      const sizeOf = (p, b) => state.listedSizes?.[p] ?? b.length;
      const all = Object.entries(state.files).map(([p, b]) => ({ type: 'file', path: p, size: sizeOf(p, b), oid: 'x', lfs: { oid: sha(b), size: sizeOf(p, b), pointerSize: 130 } }));
      all.push({ type: 'directory', path: 'sub', oid: 'y', size: 0 }, { type: 'file', path: 'README.md', size: 5, oid: 'z' });
      const cursor = Number(u.searchParams.get('cursor') || 0);
      const page = all.slice(cursor, cursor + 2);
      const headers = { 'content-type': 'application/json' };
      if (cursor + 2 < all.length) headers.link = `<${state.linkBase || ''}${u.pathname}?recursive=true&cursor=${cursor + 2}>; rel="next"`;
      res.writeHead(200, headers);
      res.end(JSON.stringify(page));
      return;
    }
    m = /^\/([^/]+)\/([^/]+)\/(resolve|hop)\/([^/]+)\/(.+)$/.exec(u.pathname);
    if (m) {
      const p = decodeURIComponent(m[5]);
      if (`${m[1]}/${m[2]}` !== state.repo || !state.files[p]) { res.writeHead(404); res.end('Entry not found'); return; }
      if (!gate()) return;
      const to = state.hop && m[3] === 'resolve' ? `/${m[1]}/${m[2]}/hop/${m[4]}/${m[5]}` : `${cdn}/cdn/${encodeURIComponent(p)}?v=${state.version}`;
      res.writeHead(302, { location: to });
      res.end();
      return;
    }
    m = /^\/cdn\/(.+)$/.exec(u.pathname);
    if (m) {
      const body = state.files[decodeURIComponent(m[1])];
      // with a CDN of its own, the hub serves no file bytes; unknown files are 404
      if (!body || (state.cdnUrl && role === 'hub')) { res.writeHead(404); res.end(); return; }
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

/**
 * Runs fn(hubUrl, log, cdnUrl) with a hub imitation on 127.0.0.1 over `state` (which the test may
 * change as it goes). With `state.cdn` the CDN is a second server (another origin: another port)
 * sharing the log; cdnUrl is its origin (else null).
 */
export async function withHub(state, fn) {
  for (const [k, v] of Object.entries({ repo: 'owner/repo', version: 1, cuts: 0, cutAt: 100000 })) if (!(k in state)) state[k] = v;
  const log = [];
  const servers = [await listen(hubServer(state, { log }).server)];
  try {
    if (state.cdn) servers.push(await listen(hubServer(state, { role: 'cdn', log }).server));
    if (state.cdn) state.cdnUrl = servers[1].url;
    return await fn(servers[0].url, log, servers[1]?.url || null);
  } finally {
    for (const s of servers) await s.close();
  }
}
