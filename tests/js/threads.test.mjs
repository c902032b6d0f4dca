// Compute threads: the shared-memory build gives the same tokens as one
// thread (greedy and sampled), reports its thread count, and disposes its
// compute workers.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import './helpers.mjs';
import { loadModel } from '../../web/index.js';
import { makeModel } from '../../models/make-model.js';

let dir, file;
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-threads-'));
  file = path.join(dir, 'm.gguf');
  // big enough that matrix products and attention really run on several threads
  makeModel(file, { dim: 256, layers: 2, heads: 4, kvHeads: 2, ffn: 768, ctx: 256, vocab: 1024 }, 'f32', 7);
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

const PROMPT = 'ab cd ef gh ij kl mn op qr st uv wx yz ba dc fe hg ji lk nm';

test('2 and 3 threads give the same tokens as 1 (greedy and seeded sampling)', async () => {
  const runs = {};
  for (const threads of [1, 2, 3]) {
    const m = await loadModel(file, { threads, contextLength: 128, batchSize: 8 });
    try {
      assert.equal(m.threads, threads);
      const greedy = await m.complete(PROMPT, { maxTokens: 24, temperature: 0, repeatPenalty: 1, ignoreEos: true });
      const sampled = await m.complete(PROMPT, { maxTokens: 24, temperature: 0.9, seed: 5, ignoreEos: true });
      runs[threads] = { greedy: greedy.tokens, sampled: sampled.tokens, lp: sampled.logprobs };
    } finally { await m.dispose(); }
  }
  assert.equal(runs[1].greedy.length, 24);
  for (const t of [2, 3]) {
    assert.deepEqual(runs[t].greedy, runs[1].greedy, `greedy with ${t} threads`);
    assert.deepEqual(runs[t].sampled, runs[1].sampled, `sampled with ${t} threads`);
    assert.deepEqual(runs[t].lp, runs[1].lp, `logprobs with ${t} threads`);
  }
});

test('abort stops a threaded generation within a token and the model stays usable', async () => {
  const m = await loadModel(file, { threads: 2, contextLength: 256 });
  try {
    const ac = new AbortController();
    let n = 0;
    await assert.rejects(async () => {
      for await (const _ of m.generate(PROMPT, { maxTokens: 200, ignoreEos: true, signal: ac.signal })) if (++n === 3) ac.abort();
    }, { name: 'AbortError' });
    assert.ok(n >= 3 && n <= 4, `stopped after ${n} tokens`);
    const again = await m.complete(PROMPT, { maxTokens: 5, temperature: 0, ignoreEos: true });
    assert.equal(again.tokens.length, 5);
  } finally { await m.dispose(); }
});

test('the relaxed-SIMD build gives the tokens of the SIMD128 build: decode, best-of-5, prompt lookup (Node with relaxed SIMD enabled)', async () => {
  const { spawnSync } = await import('node:child_process');
  const q4 = path.join(dir, 'm-q4_0.gguf');
  const src = await loadModel(file, { threads: 1 });
  try { await src.quantize('q4_0', { outPath: q4 }); } finally { await src.dispose(); }
  const script = `
    import { loadModel, relaxedSimdAvailable } from ${JSON.stringify(new URL('../../web/index.js', import.meta.url).href)};
    const out = { probe: await relaxedSimdAvailable() };
    for (const simd of ['simd128', 'relaxed']) {
      if (simd === 'relaxed' && !out.probe) break;
      const m = await loadModel(${JSON.stringify(q4)}, { simd, threads: 1, contextLength: 128 });
      const r = await m.complete(${JSON.stringify(PROMPT)}, { maxTokens: 24, temperature: 0.7, seed: 3, ignoreEos: true });
      // 5 candidates in one batch (a chunk of 4 and a remainder of 1 in the
      // relaxed build's gemm_q4gb) and a verification pass of prompt lookup
      const b = await m.bestOfN(${JSON.stringify(PROMPT)}, { n: 5, maxTokens: 12, temperature: 0.8, seed: 9, ignoreEos: true });
      const l = await m.complete(${JSON.stringify(PROMPT + ' ' + PROMPT)}, { maxTokens: 16, temperature: 0, draft: 'lookup', ignoreEos: true });
      out[simd] = { simd: m.simd, tokens: r.tokens, logprobs: r.logprobs, best: b.candidates.map((c) => [c.index, c.tokens, c.logprobs]), lookup: l.tokens };
      await m.dispose();
    }
    console.log(JSON.stringify(out));`;
  const scriptFile = path.join(dir, 'relaxed-check.mjs');
  fs.writeFileSync(scriptFile, script);
  const r = spawnSync(process.execPath, ['--experimental-wasm-relaxed-simd', scriptFile], { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout.trim().split('\n').pop());
  if (!out.probe) return; // this Node cannot run relaxed SIMD correctly: nothing to compare
  assert.equal(out.relaxed.simd, 'relaxed');
  assert.equal(out.simd128.simd, 'simd128');
  assert.deepEqual(out.relaxed.tokens, out.simd128.tokens);
  assert.deepEqual(out.relaxed.logprobs, out.simd128.logprobs);
  assert.deepEqual(out.relaxed.best, out.simd128.best);
  assert.deepEqual(out.relaxed.lookup, out.simd128.lookup);
  assert.equal(out.relaxed.best.length, 5);
});

test('memory(): the wasm memory stays within file + KV cache + 64 MB, and flat across generations', async () => {
  const m = await loadModel(file, { threads: 2, contextLength: 256 });
  try {
    await m.complete(PROMPT, { maxTokens: 32, ignoreEos: true }); // first use sizes the token buffers
    const before = await m.memory();
    for (let i = 0; i < 5; i++) await m.complete(PROMPT, { maxTokens: 32, seed: i, ignoreEos: true });
    const after = await m.memory();
    const kv = 2 * 2 * 256 * 128 * 4; // K and V: layers x kv_dim x n_ctx x f32
    assert.equal(after.fileBytes, fs.statSync(file).size);
    assert.ok(after.engineBytes >= after.fileBytes + kv, `engine ${after.engineBytes} holds the file and the KV cache`);
    assert.ok(after.wasmBytes <= after.fileBytes + kv + 64 * 2 ** 20, `wasm memory ${after.wasmBytes}`);
    assert.equal(after.wasmBytes, before.wasmBytes, 'no growth while generating');
    assert.equal(after.engineBytes, before.engineBytes, 'no allocation left behind');
  } finally { await m.dispose(); }
});
