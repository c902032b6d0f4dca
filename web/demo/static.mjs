// The static-file server under the demo (web/demo/server.mjs) and the browser
// benchmark (bench/browser/server.mjs). A request is untrusted: it must not
// reach a file outside the paths a server lists (traversal, symlinks, dot
// files), must come for this server by name (a foreign Host header is a
// DNS-rebinding page), and no file it names (unreadable, a FIFO, a directory,
// deleted meanwhile) may hang or end the process: it gets a 4xx/5xx instead.
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

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

/** Cross-origin isolation (SharedArrayBuffer, compute threads) for every response. */
export const ISOLATION = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'X-Content-Type-Options': 'nosniff',
};

const LOOPBACK = ['127.0.0.1', 'localhost', '[::1]'];
const WILDCARD = ['0.0.0.0', '::', '[::]'];

/** Lower-case Host names (IPv6 in brackets) a server bound to `host` answers
 * to: the loopback names, `host` itself, and for a wildcard bind the
 * machine's own addresses and host name. */
export function hostNames(host = '127.0.0.1') {
  const names = new Set(LOOPBACK);
  const add = (n) => names.add(n.includes(':') && !n.startsWith('[') ? `[${n.toLowerCase()}]` : n.toLowerCase());
  add(host);
  if (WILDCARD.includes(host)) {
    add(os.hostname());
    for (const list of Object.values(os.networkInterfaces())) for (const a of list || []) add(a.address.replace(/%.*$/, ''));
  }
  return names;
}

/** Why the Host header of `req` is refused, or null when it names this
 * server: a name in `names` and the port the request came in on. */
export function hostProblem(req, names) {
  const h = req.headers.host;
  if (!h) return 'the request has no Host header';
  const m = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d+))?$/i.exec(h);
  const port = m && (m[2] ? +m[2] : 80);
  if (!m || !names.has(m[1].toLowerCase()) || port !== req.socket.localPort) {
    return `Host ${JSON.stringify(h.slice(0, 100))} is not this server (it answers to ${[...names].join(', ')} on port ${req.socket.localPort}; pass --host NAME to add one)`;
  }
  return null;
}

const inside = (dir, file) => file === dir || file.startsWith(dir + path.sep);

/** The real path of `file` when it (symlinks followed) lies in `base`,
 * else {status, why}. A path that does not resolve is a 404. */
export function realInside(base, file) {
  if (!inside(base, file)) return { status: 403, why: 'the path leaves its folder' };
  let realBase, real;
  try { realBase = fs.realpathSync(base); real = fs.realpathSync(file); } catch { return { status: 404, why: 'no such file' }; }
  if (!inside(realBase, real)) return { status: 403, why: 'a symbolic link leads out of its folder' };
  return { file: real };
}

/** `name` of the folder `dir` when it is a model the server may hand out: a
 * plain `*.gguf` name directly in the folder (no dot file, no sub-folder)
 * that is, after symlinks, a regular file inside the folder. Returns
 * {file, size} or {status, why}. */
export function modelFile(dir, name) {
  if (!/^[^./\\][^/\\]*\.gguf$/.test(name)) return { status: 404, why: 'only *.gguf files directly in the model folder are served' };
  const r = realInside(dir, path.join(dir, name));
  if (!r.file) return r;
  let st;
  try { st = fs.statSync(r.file); } catch { return { status: 404, why: 'no such file' }; }
  if (!st.isFile()) return { status: 404, why: 'not a regular file' };
  return { file: r.file, size: st.size };
}

const readable = (file) => { try { fs.accessSync(file, fs.constants.R_OK); return true; } catch { return false; } };

/** The models of folder `dir` that modelFile would serve and this process
 * can read, by name. */
export function listModels(dir) {
  return fs.readdirSync(dir).sort()
    .map((f) => ({ f, m: modelFile(dir, f) }))
    .filter(({ m }) => m.file && readable(m.file))
    .map(({ f, m }) => ({ name: f.slice(0, -5), file: f, size: m.size }));
}

/** The file behind URL path `rel` in `root` when `rel` is one of `allow`
 * (exact paths, or prefixes ending in '/'), with no dot segment, and stays in
 * its allowed folder after symlinks. Returns {file} or {status, why}. */
export function allowedFile(root, allow, rel) {
  const hit = allow.find((p) => rel === p || (p.endsWith('/') && rel.startsWith(p)));
  if (!hit) return { status: 404, why: 'not a served path' };
  if (rel.split('/').some((s) => s.startsWith('.'))) return { status: 404, why: 'dot files and dot segments are not served' };
  return realInside(path.resolve(root, '.' + hit), path.resolve(root, '.' + rel));
}

// Opening a FIFO for reading waits for a writer: O_NONBLOCK returns at once
// (it changes nothing for regular files, and only those are served).
const OPEN_FLAGS = fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK || 0);

/** Opens `file` and checks the opened file is a regular one (so it cannot
 * change between the check and the read). Returns {fd, st} or {status, why}. */
function openRegular(file) {
  let fd;
  try { fd = fs.openSync(file, OPEN_FLAGS); } catch (e) {
    const status = e.code === 'ENOENT' || e.code === 'ENOTDIR' ? 404 : e.code === 'EACCES' || e.code === 'EPERM' ? 403 : 500;
    return { status, why: `cannot open it (${e.code || e.message})` };
  }
  const st = fs.fstatSync(fd);
  if (st.isFile()) return { fd, st };
  fs.closeSync(fd);
  return st.isDirectory() ? { status: 302, why: 'a directory' } : { status: 404, why: 'not a regular file' };
}

/** One byte range of `size` from the Range header: {start, end}, null for
 * the whole file, or 'bad' when it cannot be satisfied. */
function byteRange(header, size) {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header || '');
  if (!m || !(m[1] || m[2])) return null;
  let start, end;
  if (m[1]) { start = +m[1]; end = m[2] ? Math.min(+m[2], size - 1) : size - 1; }
  else { start = Math.max(0, size - +m[2]); end = size - 1; }
  return start > end || start >= size ? 'bad' : { start, end };
}

/** Sends `file` with `headers` and its MIME type, one byte range when asked
 * (206 / 416), headers only for HEAD. A file that cannot be opened, is not
 * regular or fails while streaming never throws: the client gets a status
 * through `send`, or a cut connection once the headers are out. */
export function sendFile(req, res, file, headers, send, rel = file) {
  const o = openRegular(file);
  if (!o.fd && o.status === 302) return send(302, 'directory', { Location: rel + '/' });
  if (!o.fd) return send(o.status, `${rel}: ${o.why}`);
  const { fd, st } = o;
  const out = {
    ...headers,
    'Content-Type': MIME[path.extname(file).toLowerCase()] || 'application/octet-stream',
    'Accept-Ranges': 'bytes',
    'Last-Modified': st.mtime.toUTCString(),
  };
  const range = byteRange(req.headers.range, st.size);
  if (range === 'bad') { fs.closeSync(fd); return send(416, 'range not satisfiable', { 'Content-Range': `bytes */${st.size}` }); }
  const { start, end } = range || { start: 0, end: st.size - 1 };
  if (range) out['Content-Range'] = `bytes ${start}-${end}/${st.size}`;
  out['Content-Length'] = String(end - start + 1);
  res.writeHead(range ? 206 : 200, out);
  if (req.method === 'HEAD' || st.size === 0) { fs.closeSync(fd); return res.end(); }
  const stream = fs.createReadStream(null, { fd, start, end, autoClose: true });
  // a read error after the headers: cut this response, keep the server
  stream.on('error', () => res.destroy());
  res.on('close', () => stream.destroy());
  stream.pipe(res);
}

/**
 * Starts a static server on `host`:`port`. Every response carries
 * `headers`; only GET and HEAD for this server's Host names are answered.
 * `route(rel, req, send)` maps the decoded URL path to {file} (sent with
 * sendFile, plus its `headers`), to {status, why}, or sends itself and
 * returns null. Resolves with {url, port, close()}.
 */
export function startStatic({ port = 0, host = '127.0.0.1', headers = {}, route, log = null, onRequest = null }) {
  const names = hostNames(host);
  const server = http.createServer((req, res) => {
    if (onRequest) onRequest(req.method, req.url);
    const send = (status, body, extra = {}) => {
      if (log && status >= 400) log(`${status} ${req.url}: ${body}`);
      res.writeHead(status, { ...headers, 'Content-Type': 'text/plain; charset=utf-8', ...extra });
      res.end(body);
    };
    try {
      const refused = hostProblem(req, names);
      if (refused) return send(403, refused);
      if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, `method ${req.method} not allowed (GET and HEAD only)`);
      let rel;
      try { rel = decodeURIComponent(new URL(req.url, 'http://x').pathname); } catch { return send(400, 'bad url'); }
      if (rel.includes('\0')) return send(400, 'bad url: a NUL byte');
      const r = route(rel, req, send);
      if (!r) return;
      if (!r.file) return send(r.status, `${rel}: ${r.why}`);
      sendFile(req, res, r.file, { ...headers, ...r.headers }, send, rel);
    } catch (e) {
      // a bug or an unforeseen file system error costs one request, never the server
      if (!res.headersSent) send(500, `${req.url}: ${e.code || e.message}`);
      else res.destroy();
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const p = server.address().port;
      const shown = WILDCARD.includes(host) ? 'localhost' : host.includes(':') ? `[${host}]` : host;
      resolve({
        url: `http://${shown}:${p}`, port: p,
        close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }),
      });
    });
  });
}
