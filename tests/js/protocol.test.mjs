// The closed worker protocol (web/protocol.js): the worker refuses an op not
// in the list and a request whose fields do not match, with an INTERNAL
// error and without running it, and stays usable; the caller refuses them
// before posting.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { Worker } from 'node:worker_threads';
import { MODEL_PATH } from './helpers.mjs';
import { OPS, checkRequest } from '../../web/protocol.js';
import { getWasmModule, loadModel } from '../../web/index.js';

test('checkRequest: known ops with their fields pass; anything else is named', () => {
  assert.equal(checkRequest({ id: 1, op: 'tokenize', text: 'hi' }), null);
  assert.equal(checkRequest({ id: 1, op: 'tokenize', text: 'hi', addBos: undefined }), null);
  assert.equal(checkRequest({ id: 2, op: 'generate', prompt: [1, 2], draft: 'lookup', stream: true }), null);
  assert.match(checkRequest({ id: 1, op: 'specRoom', session: 1 }), /unknown op specRoom/);
  assert.match(checkRequest({ id: 1, op: '__proto__' }), /unknown op/);
  assert.match(checkRequest({ id: 1, op: 'tokenize', text: 5 }), /field text must be string/);
  assert.match(checkRequest({ id: 1, op: 'tokenize' }), /field text is missing/);
  assert.match(checkRequest({ id: 1, op: 'generate', prompt: 'x', options: { lookup: true }, lookup: true }), /unknown field lookup/);
  assert.match(checkRequest({ id: 'x', op: 'info' }), /id must be an integer/);
  assert.ok(!('specRoom' in OPS));
  for (const [name, o] of Object.entries(OPS)) assert.ok(o.request && typeof o.result === 'string', name);
});

test('the worker refuses requests outside the protocol with INTERNAL and keeps serving', async () => {
  const w = new Worker(new URL('../../web/worker/worker.js', import.meta.url));
  try {
    const replies = new Map();
    w.on('message', (m) => { if (!m.event) replies.get(m.id)?.(m); });
    const call = (m) => new Promise((r) => { replies.set(m.id, r); w.postMessage(m); });
    w.postMessage({ op: 'init', wasm: await getWasmModule(undefined, false, 'simd128'), threads: 1, abortFlag: null });
    const bytes = fs.readFileSync(MODEL_PATH);
    assert.equal((await call({ id: 1, op: 'loadBegin', size: bytes.length })).ok, true);
    assert.equal((await call({ id: 2, op: 'loadChunk', bytes: new Uint8Array(bytes) })).ok, true);
    assert.equal((await call({ id: 3, op: 'loadEnd', options: {} })).ok, true);
    for (const [id, bad] of [[10, { op: 'nope' }], [11, { op: 'specRoom', session: 1, k: 2 }], [12, { op: 'tokenize', text: 42 }],
      [13, { op: 'generate', prompt: 'x', options: {}, lookup: true }], [14, { op: 'detokenize', ids: 'abc' }], [15, { op: 'toString' }]]) {
      const r = await call({ id, ...bad });
      assert.equal(r.ok, false, bad.op);
      assert.equal(r.error.code, 'INTERNAL', bad.op);
      assert.match(r.error.message, /protocol: /);
    }
    const ok = await call({ id: 20, op: 'tokenize', text: 'Once upon a time' });
    assert.deepEqual(ok.result, [1, 403, 407, 261, 378]);
  } finally {
    await w.terminate();
  }
});

test('prompt lookup travels as the generate request\'s draft field', async () => {
  const model = await loadModel(MODEL_PATH, { contextLength: 256, threads: 1 });
  try {
    const r = await model.complete('Once upon a time, there was a', { temperature: 0, maxTokens: 24, draft: 'lookup' });
    assert.equal(r.stats.speculative.draftTokens, 8);
    assert.equal(typeof r.stats.speculative.adaptive, 'boolean');
  } finally {
    await model.dispose();
  }
});

test('QUANT_TYPES equals the C library\'s quantize targets (wlm_quantize_target): one list', async () => {
  const { QUANT_TYPES } = await import('../../web/protocol.js');
  const root = new URL('../../', import.meta.url);
  const memory = new WebAssembly.Memory({ initial: 32, maximum: 65536 });
  const { instance } = await WebAssembly.instantiate(fs.readFileSync(new URL('wasm/wasmlm.wasm', root)), { env: { memory } });
  const x = instance.exports;
  const fromC = {};
  for (let i = 0; ; i++) {
    const id = x.wlm_quantize_target(i) >>> 0;
    if (id === 0xffffffff) break;
    const p = x.wlm_quantize_target_name(id) >>> 0;
    const bytes = new Uint8Array(memory.buffer, p);
    const name = new TextDecoder().decode(bytes.subarray(0, bytes.indexOf(0)));
    fromC[name.toLowerCase()] = id;
  }
  assert.deepEqual(fromC, { ...QUANT_TYPES });
});
