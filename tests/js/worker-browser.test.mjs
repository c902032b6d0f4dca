// web/worker/worker.js's browser branch (self.onmessage, MessageChannel yields),
// exercised inside a Node worker that provides a minimal `self`.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ROOT, MODEL_PATH, reference } from './helpers.mjs';

const WORKER_URL = pathToFileURL(path.join(ROOT, 'web', 'worker', 'worker.js')).href;
const SHIM = `
const { parentPort } = require('node:worker_threads');
globalThis.self = { postMessage: (m, t) => parentPort.postMessage(m, t) };
const early = [];
parentPort.on('message', (m) => { if (self.onmessage) self.onmessage({ data: m }); else early.push(m); });
import(${JSON.stringify(WORKER_URL)}).then(() => { for (const m of early) self.onmessage({ data: m }); });
`;

test('worker.js browser branch: load in chunks, stream, abort without a shared flag', async () => {
  const w = new Worker(SHIM, { eval: true });
  try {
    const pending = new Map();
    const chunks = [];
    w.on('message', (m) => { if (m.event === 'chunk') chunks.push(m); else if (!m.event) pending.get(m.id)?.(m); });
    const call = (id, op, extra) => new Promise((r) => { pending.set(id, r); w.postMessage({ id, op, ...extra }); });
    const mod = await WebAssembly.compile(fs.readFileSync(path.join(ROOT, 'wasm', 'wasmlm.wasm')));
    w.postMessage({ op: 'init', wasm: mod, abortFlag: null });
    const bytes = fs.readFileSync(MODEL_PATH);
    assert.equal((await call(1, 'loadBegin', { size: 0 })).ok, true);
    for (let off = 0, id = 100; off < bytes.length; off += 300000) {
      assert.equal((await call(id++, 'loadChunk', { bytes: bytes.subarray(off, off + 300000) })).ok, true);
    }
    const loaded = await call(2, 'loadEnd', { options: {} });
    assert.equal(loaded.ok, true, loaded.error?.message);
    assert.equal(loaded.result.fileSize, bytes.length);

    const ref = reference().results[0];
    const g = await call(3, 'generate', { prompt: ref.prompt, options: { temperature: 0, repeatPenalty: 1, ignoreEos: true, maxTokens: 50 }, stream: true });
    assert.equal(g.ok, true);
    assert.deepEqual(g.result.tokens, ref.generated_token_ids.slice(0, 50));
    assert.equal(chunks.map((c) => c.text).join(''), g.result.text);

    const p = call(4, 'generate', { prompt: 'Once upon a time', options: { maxTokens: 100000, ignoreEos: true }, stream: true });
    await new Promise((r) => setTimeout(r, 50));
    const t0 = performance.now();
    w.postMessage({ op: 'abort', target: 4 });
    const r = await p;
    const took = performance.now() - t0;
    assert.equal(r.ok, false);
    assert.equal(r.error.name, 'AbortError');
    assert.ok(took < 500, `stopped ${took.toFixed(0)} ms after the abort message`);
    const after = await call(5, 'tokenize', { text: 'Once upon a time' });
    assert.deepEqual(after.result, [1, 403, 407, 261, 378]);
  } finally {
    await w.terminate();
  }
});
