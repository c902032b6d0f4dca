// Local HTTP servers for the tests (not a test file itself): on 127.0.0.1
// only, at a free port, closed with their open connections (a response a
// test left stalled does not keep the process alive). The Node tests and the
// browser tests (tests/browser/browser.mjs) start every server of theirs
// through these.
import http from 'node:http';
import fs from 'node:fs';

/**
 * Starts a server on 127.0.0.1 at a free port. `server` is an http.Server
 * not yet listening (hubServer's, say) or a request handler to make one
 * around. Resolves {server, url, requests, close()}: `url` is the origin
 * (http://127.0.0.1:PORT, no trailing slash), `requests` counts the
 * requests received (for a handler only), close() drops open connections
 * and resolves once the server has stopped (twice is harmless).
 */
export async function listen(server) {
  const served = { server: null, url: null, requests: 0 };
  if (typeof server === 'function') {
    const handler = server;
    server = http.createServer((req, res) => { served.requests++; handler(req, res); });
  }
  served.server = server;
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  served.url = `http://127.0.0.1:${server.address().port}`;
  served.close = () => {
    server.closeAllConnections?.();
    return new Promise((r) => (server.listening ? server.close(() => r()) : r()));
  };
  return served;
}

/**
 * Runs fn(url, served) with a server for `handler` (see listen: `served.requests`
 * counts the requests), then closes it, whether fn resolved or threw.
 */
export async function withServer(handler, fn) {
  const served = await listen(handler);
  try {
    return await fn(served.url, served);
  } finally {
    await served.close();
  }
}

/**
 * A request handler that serves files. `files` maps a URL path ('/m.gguf')
 * to a file's path or its bytes, or is a function from the URL path
 * (decoded, without the query) to either, or null; what it does not name,
 * or a path that does not exist, is 404. A file given by path is read when
 * requested.
 * Options:
 *   ranges  true (default): `Range: bytes=A-B` or `bytes=A-` is answered 206
 *           (416 from past the end); false: 200 with the whole body, as a
 *           server without Range support does.
 *   log     an array that gets {path, range, status, sent} for every request
 *           to a file (range: the header or null; sent: body bytes written,
 *           complete once the response has ended).
 *   chunk   write the body in pieces of this many bytes, waiting for the
 *           client to drain each and stopping when it goes away (a cancelled
 *           download then stops early); 0 (default): one write.
 *   headers sent with every response (404s too).
 */
export function serveFiles(files, { ranges = true, log = null, chunk = 0, headers = {} } = {}) {
  const lookup = typeof files === 'function' ? files : (p) => (Object.hasOwn(files, p) ? files[p] : null);
  return (req, res) => {
    const p = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const f = lookup(p);
    if (f == null || (typeof f === 'string' && !fs.existsSync(f))) { res.writeHead(404, headers); res.end(); return; }
    const body = typeof f === 'string' ? fs.readFileSync(f) : f;
    const entry = { path: p, range: req.headers.range || null, status: 200, sent: 0 };
    log?.push(entry);
    const m = ranges && /^bytes=(\d+)-(\d+)?$/.exec(req.headers.range || '');
    let start = 0, end = body.length - 1;
    const head = { ...headers, 'content-type': 'application/octet-stream' };
    if (m) {
      start = Number(m[1]);
      end = m[2] ? Math.min(Number(m[2]), body.length - 1) : body.length - 1;
      if (start >= body.length) {
        entry.status = 416;
        res.writeHead(416, { ...headers, 'content-range': `bytes */${body.length}` });
        res.end();
        return;
      }
      entry.status = 206;
      res.writeHead(206, { ...head, 'content-range': `bytes ${start}-${end}/${body.length}`, 'content-length': end - start + 1, 'accept-ranges': 'bytes' });
    } else {
      res.writeHead(200, { ...head, 'content-length': body.length });
    }
    if (req.method === 'HEAD') { res.end(); return; }
    if (!chunk) {
      entry.sent = end + 1 - start;
      res.end(body.subarray(start, end + 1));
      return;
    }
    let at = start;
    const next = () => {
      while (at <= end) {
        const piece = body.subarray(at, Math.min(at + chunk, end + 1));
        at += piece.length;
        entry.sent += piece.length;
        if (!res.write(piece)) { res.once('drain', next); return; }
      }
      res.end();
    };
    res.on('close', () => { at = end + 1; });
    next();
  };
}
