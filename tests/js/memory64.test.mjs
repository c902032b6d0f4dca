// The memory64 (wasm64) builds from Node (issue #28). Node 20 cannot run them
// (its V8 refuses the 64-bit function table clang emits for wasm64, and even
// behind --experimental-wasm-memory64 caps a memory64 memory at 4 GiB): here
// the probe says so with the runtime's own reason, and a model file over the
// 4 GiB of wasm32 is refused with TOO_LARGE before its bytes are read or
// downloaded - a sparse file, a split of sparse parts, a URL declaring 5 GB,
// a registry entry and a hub listing naming 5 GB. The wasm64 modules' own
// types (read from their bytes) are the wasm32 ones with some i32 widened to
// i64, which is what the export wrapper relies on; it is checked here on the
// real modules. Computing with the wasm64 builds is tested in Chromium
// (tests/browser/memory64.test.mjs).
import test, { after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, MODEL_PATH } from './helpers.mjs';
import { loadModel, memory64Support } from '../../web/index.js';
import { describeModule, wrapExports, WASM32_MAX_BYTES } from '../../web/memory64.js';
import { Engine } from '../../web/worker/engine.js';
import { withHub } from './hub-server.mjs';
import { withServer } from './servers.mjs';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-m64-'));
after(() => fs.rmSync(DIR, { recursive: true, force: true }));
const HUGE = 5e9;
const wasm = (f) => fs.readFileSync(path.join(ROOT, 'wasm', f));

/** A sparse file of `size` bytes that starts like a GGUF file (nothing but the magic is written). */
function sparseGguf(name, size) {
  const f = path.join(DIR, name);
  const fd = fs.openSync(f, 'w');
  fs.writeSync(fd, Buffer.from('GGUF'));
  fs.ftruncateSync(fd, size);
  fs.closeSync(fd);
  return f;
}

async function refusal(p) {
  const t0 = Date.now();
  try { await p; } catch (e) { return { e, ms: Date.now() - t0 }; }
  throw new Error('resolved: expected TOO_LARGE');
}

test('each wasm64 build has the wasm32 build\'s exports, with only some i32 widened to i64', () => {
  for (const [w32, w64] of [['wasmlm.wasm', 'wasmlm64.wasm'], ['wasmlm-mt-relaxed.wasm', 'wasmlm64-mt-relaxed.wasm']]) {
    const a = describeModule(wasm(w32)), b = describeModule(wasm(w64));
    assert.equal(a.memory64, false);
    assert.equal(b.memory64, true);
    assert.equal(b.shared, w64.includes('-mt'));
    assert.deepEqual(Object.keys(b.exports).sort(), Object.keys(a.exports).sort());
    let widened = 0;
    for (const [name, t] of Object.entries(a.exports)) {
      const u = b.exports[name];
      for (const k of ['params', 'results']) {
        assert.equal(u[k].length, t[k].length, `${name} ${k}`);
        t[k].forEach((x, i) => {
          if (u[k][i] !== x) { assert.deepEqual([x, u[k][i]], ['i32', 'i64'], `${name} ${k}[${i}]`); widened++; }
        });
      }
    }
    assert.ok(widened > 50, `${widened} pointer/size values widened`);
    assert.deepEqual(b.exports.wlm_sys_alloc, { params: ['i64'], results: ['i64'] });
    assert.deepEqual(a.exports.wlm_sys_alloc, { params: ['i64'], results: ['i32'] });
    assert.deepEqual(b.exports.wlm_tokenize.params, ['i64', 'i64', 'i32', 'i32', 'i64', 'i32', 'i64', 'i64']);
  }
});

test('no address is narrowed with >>> 2 in web/ (it wraps at 2^32 in wasm64: word() in heap.js)', () => {
  // topLogprobs and the embeddings' blocks did, and read the wrong memory above 4 GiB
  // (tests/browser/memory64.test.mjs pads the engine past 4 GiB)
  const found = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const f = path.join(dir, e.name);
      if (e.isDirectory()) walk(f);
      else if (e.name.endsWith('.js')) {
        fs.readFileSync(f, 'utf8').split('\n').forEach((line, i) => {
          if (/>>>\s*2\b/.test(line.replace(/\/\/.*$/, ''))) found.push(`${path.relative(ROOT, f)}:${i + 1}: ${line.trim()}`);
        });
      }
    }
  };
  walk(path.join(ROOT, 'web'));
  assert.deepEqual(found, []);
});

test('wrapExports: i64 arguments take Numbers, i64 results come back as Numbers (on the wasm32 build\'s own i64s)', async () => {
  const mod = await WebAssembly.compile(wasm('wasmlm.wasm'));
  const memory = new WebAssembly.Memory({ initial: 32, maximum: 65536 });
  const { exports } = await WebAssembly.instantiate(mod, { env: { memory } });
  assert.throws(() => exports.wlm_sys_alloc(1000), TypeError, 'unwrapped, a Number for an i64 is refused');
  const x = wrapExports(exports, describeModule(wasm('wasmlm.wasm')));
  const before = x.wlm_sys_in_use();
  assert.equal(typeof before, 'number');
  const p = x.wlm_sys_alloc(1000);
  assert.ok(p > 0);
  assert.equal(x.wlm_sys_in_use(), before + 1024);   // 64-byte aligned
  assert.ok(x.wlm_sys_alloc(2n ** 40n) === 0, 'a BigInt still passes through');
  x.wlm_sys_free(p);
  assert.equal(x.wlm_sys_in_use(), before);
  assert.equal(x.memory, exports.memory);
});

test('Node 20 cannot run memory64 builds: the probe says why, memory64 \'on\' is UNSUPPORTED naming it', async (t) => {
  const probe = await memory64Support();
  if (probe.ok) { t.skip('this Node runs memory64 (the refusals below need a runtime without it)'); return; }
  assert.equal(probe.shared, false);
  assert.match(probe.reason, /^this runtime (does not compile memory64 modules|cannot create a memory64 memory of 16 GiB) \(.+\)$/);
  const { e } = await refusal(loadModel(MODEL_PATH, { memory64: 'on' }));
  assert.equal(e.code, 'UNSUPPORTED');
  assert.equal(e.option, 'memory64');
  assert.ok(e.message.includes(probe.reason), e.message);
});

test('a model file over 4 GiB is TOO_LARGE before it is read: a sparse path, a split of sparse parts, a Blob', async (t) => {
  if ((await memory64Support()).ok) { t.skip('this Node runs memory64'); return; }
  const big = sparseGguf('big.gguf', HUGE);
  let { e, ms } = await refusal(loadModel(big));
  assert.equal(e.code, 'TOO_LARGE');
  assert.equal(e.size, HUGE);
  assert.equal(e.limit, WASM32_MAX_BYTES);
  assert.match(e.message, new RegExp(`^model file ${big.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is 4\\.66 GiB \\(5000000000 bytes\\): over the 4 GiB a wasm32 engine can address; it needs the memory64 \\(wasm64\\) build, which is not used here: this runtime does not`));
  assert.ok(ms < 5000, `refused after ${ms} ms: read first?`);

  // two parts of 2.5 GB: each fits, together they do not
  const first = sparseGguf('split-00001-of-00002.gguf', HUGE / 2);
  sparseGguf('split-00002-of-00002.gguf', HUGE / 2);
  ({ e } = await refusal(loadModel(first)));
  assert.equal(e.code, 'TOO_LARGE');
  assert.equal(e.size, HUGE);

  // memory64 'off' names the option; a Blob's size (faked: only the refusal reads it)
  const blob = new Blob([Buffer.from('GGUF')]);
  Object.defineProperty(blob, 'size', { value: HUGE });
  ({ e } = await refusal(loadModel(blob, { memory64: 'off' })));
  assert.equal(e.code, 'TOO_LARGE');
  assert.match(e.message, /^the model file is 4\.66 GiB \(5000000000 bytes\): .* which is not used here: the option memory64 is 'off'$/);
});

test('a stream without a length that outgrows wasm32: TOO_LARGE from the engine\'s staging, before the memory is asked for', async () => {
  const eng = await Engine.create(wasm('wasmlm.wasm'));
  try {
    eng.beginLoad(0);
    eng.write(Buffer.from('GGUF'));
    const inUse = eng.memoryInUse();
    assert.throws(() => eng.reserve(WASM32_MAX_BYTES), (e) => e.code === 'TOO_LARGE' && /is at least 4\.00 GiB \(4294967300 bytes\).*memory64: 'on'/.test(e.message));
    assert.equal(eng.memoryInUse(), inUse);
  } finally { eng.dispose(); }
});

/** A server whose /huge.gguf declares 5 GB (each part of /split-0000N-of-00002.gguf 2.5 GB) and sends
 * 64 KiB of it, then waits; HEAD requests get the length only. */
function hugeServer(fn) {
  const seen = { requests: 0, closed: 0, log: [] };
  return withServer((req, res) => {
    seen.log.push(`${req.method} ${req.url}`);
    const size = req.url.startsWith('/split-') ? HUGE / 2 : HUGE;
    const headers = { 'content-type': 'application/octet-stream', 'content-length': String(size), etag: '"huge"', 'accept-ranges': 'bytes' };
    if (req.method === 'HEAD') { res.writeHead(200, headers); res.end(); return; }
    seen.requests++;
    res.on('close', () => { seen.closed++; });
    res.writeHead(200, headers);
    const head = Buffer.alloc(64 << 10); head.write('GGUF');
    res.write(head);
  }, (url) => fn(`${url}/huge.gguf`, seen));
}

const closedSoon = async (seen) => { for (let i = 0; i < 50 && seen.closed < seen.requests; i++) await new Promise((r) => setTimeout(r, 100)); return seen.closed; };

test('a URL, a registry entry and a hub file declaring 5 GB: TOO_LARGE before the body is read or downloaded', async (t) => {
  if ((await memory64Support()).ok) { t.skip('this Node runs memory64'); return; }
  await hugeServer(async (url, seen) => {
    const { e } = await refusal(loadModel(url));
    assert.equal(e.code, 'TOO_LARGE', e.message);
    assert.ok(e.message.startsWith(`${url} is 4.66 GiB (5000000000 bytes)`), e.message);
    assert.equal(await closedSoon(seen), 1, 'the request was aborted');

    // registry: a size in the entry refuses before any request; without one, the response's length does
    const cacheDir = path.join(DIR, 'cache');
    const r1 = await refusal(loadModel('bigmodel', { cacheDir, registry: { bigmodel: { url, size: HUGE } } }));
    assert.equal(r1.e.code, 'TOO_LARGE', r1.e.message);
    assert.match(r1.e.message, /^model 'bigmodel' is 4\.66 GiB/);
    assert.equal(seen.requests, 1, 'no request for an entry whose size says it cannot load');
    const r2 = await refusal(loadModel('bigmodel', { cacheDir, offline: false, registry: { bigmodel: { url } } }));
    assert.equal(r2.e.code, 'TOO_LARGE', r2.e.message);
    assert.ok(r2.e.message.startsWith(`model 'bigmodel' from ${url} is 4.66 GiB`), r2.e.message);
    assert.equal(seen.requests, 2);
    assert.equal(await closedSoon(seen), 2, 'the download was aborted');
    assert.deepEqual(fs.readdirSync(cacheDir).filter((f) => !f.endsWith('.lock')), [], 'nothing kept in the cache');

    // a split by URL: the other parts' HEAD requests give the total before the first part's body is read
    seen.log.length = 0;
    const first = url.replace('huge.gguf', 'split-00001-of-00002.gguf');
    const r3 = await refusal(loadModel(first));
    assert.equal(r3.e.code, 'TOO_LARGE', r3.e.message);
    assert.match(r3.e.message, /^the split GGUF \(2 parts, sizes from the server\) is 4\.66 GiB \(5000000000 bytes\)/);
    assert.deepEqual(seen.log, ['GET /split-00001-of-00002.gguf', 'HEAD /split-00002-of-00002.gguf']);
    assert.equal(await closedSoon(seen), 3, 'the first part\'s download was aborted');
  });
  // the hub's listing names the size of a quantization's file: refused before the CDN is asked
  const state = { files: { 'big-Q4_K_M.gguf': Buffer.from('GGUF') }, listedSizes: { 'big-Q4_K_M.gguf': HUGE } };
  await withHub(state, async (hubUrl, log) => {
    const { e } = await refusal(loadModel('hf:owner/repo:Q4_K_M', { hubUrl, offline: false, cacheDir: path.join(DIR, 'hub-cache') }));
    assert.equal(e.code, 'TOO_LARGE', e.message);
    assert.match(e.message, /^hf:owner\/repo:Q4_K_M \(big-Q4_K_M\.gguf\) is 4\.66 GiB \(5000000000 bytes\)/);
    assert.deepEqual(log.filter((l) => l.path.startsWith('/cdn/')), []);
  });
});
