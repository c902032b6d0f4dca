// Network loading and the Node download cache against servers that lie,
// stall or break (issue #25, findings 7 and 8). Local servers on 127.0.0.1
// only; no test asserts on speed: "eventually fails" runs under a generous
// test timeout, and the load's own stall timeout is short.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { MODEL_PATH, ROOT, isError } from './helpers.mjs';
import { listen, withServer } from './servers.mjs';
import { resolveModel } from '../../models/registry.js';
import { loadModel, deleteCachedModel, REGISTRY_TIMEOUT_MS } from '../../web/index.js';
import { Engine, DECLARED_FIRST_BYTES } from '../../web/worker/engine.js';
import { checkSha256 } from '../../web/net.js';

const SHA = '270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d';
const MODEL = fs.readFileSync(MODEL_PATH);
const SIZE = MODEL.byteLength;
const LONG = { timeout: 120000 }; // a test-level deadline: only reached when something hangs

function tmpdir() { return fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-net-')); }

const serveModel = (req, res) => {
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': SIZE });
  res.end(MODEL);
};

const esc = (s) => new RegExp(s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));

// ---- finding 8: network loading -------------------------------------------

test('a malformed sha256 is refused before any request reaches the server', async () => {
  await withServer(serveModel, async (base, served) => {
    for (const bad of ['abc', 'zz'.repeat(32), SHA + '0', 42]) {
      await assert.rejects(loadModel(`${base}/m.gguf`, { sha256: bad }), isError('BAD_OPTION', /option sha256: must be 64 hex digits/));
    }
    const registry = { tiny: { url: `${base}/m.gguf`, sha256: 'not-a-digest' } };
    await assert.rejects(resolveModel('tiny', { modelDir: tmpdir(), cacheDir: tmpdir(), registry, offline: false }),
      isError('BAD_OPTION', /registry\.tiny\.sha256: must be 64 hex digits/));
    await assert.rejects(loadModel('tiny', { modelDir: tmpdir(), cacheDir: tmpdir(), registry, offline: false }),
      isError('BAD_OPTION', /registry\.tiny\.sha256/));
    assert.equal(served.requests, 0, 'no request was made');
    assert.equal(checkSha256(SHA.toUpperCase()), SHA);
    assert.equal(checkSha256(undefined), null);
  });
});

test('a server that never answers fails with NETWORK after the stall timeout', LONG, async () => {
  await withServer(() => { /* never responds */ }, async (base) => {
    await assert.rejects(loadModel(`${base}/m.gguf`, { timeout: 300 }),
      isError('NETWORK', esc(`${base}/m.gguf`), /no response within 300 ms/));
    const registry = { tiny: { url: `${base}/m.gguf`, sha256: SHA } };
    const cacheDir = tmpdir();
    await assert.rejects(resolveModel('tiny', { modelDir: tmpdir(), cacheDir, registry, offline: false, timeout: 300 }),
      isError('NETWORK', /no response within 300 ms/));
    assert.deepEqual(fs.readdirSync(cacheDir), []);
  });
  assert.equal(REGISTRY_TIMEOUT_MS, 30000);
});

test('a body that stops mid-way fails with NETWORK naming the bytes received of expected', LONG, async () => {
  const stall = (req, res) => { res.writeHead(200, { 'content-length': SIZE }); res.write(MODEL.subarray(0, 1000)); };
  await withServer(stall, async (base) => {
    await assert.rejects(loadModel(`${base}/m.gguf`, { timeout: 500 }),
      isError('NETWORK', esc(`${base}/m.gguf`), /stalled: no data for 500 ms/, new RegExp(`received \\d+ of ${SIZE} bytes`)));
    const cacheDir = tmpdir();
    const registry = { tiny: { url: `${base}/m.gguf`, sha256: SHA, size: SIZE } };
    await assert.rejects(resolveModel('tiny', { modelDir: tmpdir(), cacheDir, registry, offline: false, timeout: 500 }),
      isError('NETWORK', /stalled/));
    assert.deepEqual(fs.readdirSync(cacheDir), [], 'no temp file left');
  });
});

test('an abort while a URL body stalls is still an AbortError, not NETWORK', LONG, async () => {
  const stall = (req, res) => { res.writeHead(200, { 'content-length': SIZE }); res.write(MODEL.subarray(0, 1000)); };
  await withServer(stall, async (base) => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 300);
    await assert.rejects(loadModel(`${base}/m.gguf`, { signal: ac.signal, timeout: 60000 }), (e) => e.name === 'AbortError');
  });
});

test('a truncated body names the URL and "received N of M bytes"', LONG, async () => {
  const half = Math.floor(SIZE / 2);
  const cut = (req, res) => {
    res.writeHead(200, { 'content-length': SIZE });
    res.write(MODEL.subarray(0, half), () => setTimeout(() => res.destroy(), 50));
  };
  await withServer(cut, async (base) => {
    await assert.rejects(loadModel(`${base}/m.gguf`),
      isError('NETWORK', esc(`${base}/m.gguf`), new RegExp(`received \\d+ of ${SIZE} bytes`)));
  });
});

test('a connection error is NETWORK naming the URL and the reason', LONG, async () => {
  const server = await listen(() => {});
  const url = `${server.url}/m.gguf`;
  await server.close(); // nothing listens there now
  await assert.rejects(loadModel(url), isError('NETWORK', esc(url), /ECONNREFUSED/));
  await withServer((req, res) => { res.writeHead(503, 'Busy'); res.end('later'); }, async (base) => {
    await assert.rejects(loadModel(`${base}/m.gguf`), (e) => isError('NETWORK', /HTTP 503 Busy/, esc(base))(e) && e.status === 503);
  });
});

test('Content-Length 4e9 with a small body: an error naming both numbers, no GBs reserved, the next load works', LONG, async () => {
  const liar = (req, res) => {
    res.writeHead(200, { 'content-length': '4000000000' });
    res.write(MODEL.subarray(0, 4096), () => setTimeout(() => res.destroy(), 50));
  };
  await withServer(liar, async (base) => {
    await assert.rejects(loadModel(`${base}/m.gguf`),
      isError('NETWORK', esc(`${base}/m.gguf`), /received \d+ of 4000000000 bytes/));
  });
  await withServer(serveModel, async (base) => {
    const m = await loadModel(`${base}/m.gguf`, { threads: 1 });
    assert.equal(m.info.hparams.nVocab, 512);
    await m.dispose();
  });
});

test('a declared size reserves at most DECLARED_FIRST_BYTES up front, and the file still loads', async () => {
  const eng = await Engine.create(fs.readFileSync(path.join(ROOT, 'wasm/wasmlm.wasm')));
  eng.beginLoad(4e9, { declared: true });
  assert.ok(eng.memory.buffer.byteLength < 2 * DECLARED_FIRST_BYTES, `wasm memory ${eng.memory.buffer.byteLength} bytes after a declared 4e9`);
  eng.unload();
  // a true declared size: written in pieces, parsed as usual
  eng.beginLoad(SIZE, { declared: true });
  for (let off = 0; off < SIZE; off += 100000) eng.write(MODEL.subarray(off, off + 100000));
  eng.finishLoad({});
  assert.equal(eng.hparams.nVocab, 512);
});

test('a body longer than its declared length is refused with both numbers', LONG, async () => {
  const res = new Response(new Blob([MODEL]).stream(), { headers: { 'content-length': '1000' } });
  await assert.rejects(loadModel(res), isError('NETWORK', /longer than declared: received \d+ bytes, expected 1000/));
});

// ---- finding 7: the Node download cache -------------------------------------

test('a cached file corrupted in place is re-verified: evicted and downloaded again (INTEGRITY offline)', LONG, async () => {
  await withServer(serveModel, async (base, served) => {
    for (const sha256 of [SHA, undefined]) { // with a registry digest, and with only the recorded one
      const cacheDir = tmpdir();
      const registry = { tiny: { url: `${base}/m.gguf`, sha256 } };
      const opts = { modelDir: tmpdir(), cacheDir, registry, offline: false };
      const r = await resolveModel('tiny', opts);
      assert.equal(r.source, 'download');
      assert.equal((await resolveModel('tiny', opts)).source, 'cache');
      const corrupt = () => { const fd = fs.openSync(r.path, 'r+'); fs.writeSync(fd, Buffer.from([0x55]), 0, 1, SIZE - 10); fs.closeSync(fd); };
      corrupt();
      const before = served.requests;
      const r2 = await resolveModel('tiny', opts);
      assert.equal(r2.source, 'download', 'the corrupted copy was not used');
      assert.equal(served.requests, before + 1);
      assert.ok(fs.readFileSync(r2.path).equals(MODEL));
      corrupt();
      await assert.rejects(resolveModel('tiny', { ...opts, offline: true }), isError('INTEGRITY', /sha256 [0-9a-f]{64}, expected [0-9a-f]{64}/, /tiny/));
      assert.ok(!fs.existsSync(r.path), 'evicted');
    }
  });
});

test('an HTML error page, a non-GGUF body or a cut body is never cached (entry without sha256)', LONG, async () => {
  const html = '<!doctype html><html><body>Rate limited</body></html>';
  const routes = {
    '/html': (res) => { res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }); res.end(html); },
    '/text': (res) => { res.writeHead(200, { 'content-type': 'application/octet-stream' }); res.end(html); },
    '/cut': (res) => { res.writeHead(200, { 'content-length': SIZE }); res.write(MODEL.subarray(0, 5000), () => setTimeout(() => res.destroy(), 50)); },
  };
  await withServer((req, res) => routes[req.url](res), async (base) => {
    const cacheDir = tmpdir();
    const load = (p) => resolveModel('tiny', { modelDir: tmpdir(), cacheDir, registry: { tiny: { url: base + p } }, offline: false });
    await assert.rejects(load('/html'), isError('BAD_FILE', /is an HTML page/, esc(base + '/html')));
    await assert.rejects(load('/text'), isError('BAD_FILE', /not a GGUF file/));
    await assert.rejects(load('/cut'), isError('NETWORK', new RegExp(`received \\d+ of ${SIZE} bytes`)));
    assert.deepEqual(fs.readdirSync(cacheDir), [], 'nothing cached, no temp file');
  });
});

test('a cached model whose load fails is evicted', LONG, async () => {
  const broken = Buffer.from(MODEL.subarray(0, 50000)); // a GGUF header whose data is cut
  await withServer((req, res) => { res.writeHead(200, { 'content-length': broken.length }); res.end(broken); }, async (base) => {
    const cacheDir = tmpdir();
    const opts = { modelDir: tmpdir(), cacheDir, registry: { tiny: { url: `${base}/m.gguf` } }, offline: false, threads: 1 };
    await assert.rejects(loadModel('tiny', opts), (e) => /^(BAD_FORMAT|TRUNCATED)$/.test(e.code));
    assert.deepEqual(fs.readdirSync(cacheDir), [], 'the refused file and its record are gone');
  });
});

test('temp files of dead processes or older than a day are swept when the cache is used', async () => {
  const cacheDir = tmpdir();
  const dead = spawnSync(process.execPath, ['-e', '']).pid;
  const files = {
    dead: `a.gguf.tmp-${dead}-x1`,
    deadRecord: `a.gguf.json.tmp-${dead}-x2`,
    old: `b.gguf.tmp-${process.pid}-x3`,
    live: `c.gguf.tmp-${process.pid}-x4`,
    other: 'notes.txt',
  };
  for (const f of Object.values(files)) fs.writeFileSync(path.join(cacheDir, f), 'partial');
  const twoDaysAgo = new Date(Date.now() - 2 * 24 * 3600 * 1000);
  fs.utimesSync(path.join(cacheDir, files.old), twoDaysAgo, twoDaysAgo);
  await assert.rejects(resolveModel('tiny', { modelDir: tmpdir(), cacheDir, registry: { tiny: { url: 'http://127.0.0.1:9/m.gguf' } }, offline: true }),
    /not available offline/);
  assert.deepEqual(fs.readdirSync(cacheDir).sort(), [files.live, files.other].sort());
});

test('deleteCachedModel removes the download record too', LONG, async () => {
  await withServer(serveModel, async (base) => {
    const cacheDir = tmpdir();
    const r = await resolveModel('tiny', { modelDir: tmpdir(), cacheDir, registry: { tiny: { url: `${base}/m.gguf`, sha256: SHA } }, offline: false });
    assert.ok(fs.existsSync(r.path + '.json'));
    assert.equal(await deleteCachedModel(r.path, { cacheDir }), true);
    assert.deepEqual(fs.readdirSync(cacheDir), []);
  });
});
