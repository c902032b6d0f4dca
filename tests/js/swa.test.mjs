// The window ring through the public API: synthetic gemma2 (every other
// layer windowed), gemma3 (5 windowed : 1 global) and Mistral-style llama
// (every layer) models loaded with windowCache 'window' (the default: the
// windowed layers keep maxSequences x (W - 1) + batchSize rows) give the
// same bits as windowCache 'full' (a row per position, as before the ring)
// in every way the engine uses its cache: prompts in chunks that wrap the
// ring, decoding far past the window, prompt-prefix reuse (a shallow
// rewind kept, a deep one refused by the ring and evaluated again), best-of-N
// (forked sequences in one batch), beam search, speculative decoding by
// prompt lookup whose verification passes are longer than batchSize (its
// rollbacks reach into chunks the ring has moved past), 1 and 2 threads.
// And the memory the engine holds shrinks by exactly the rows not kept.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeModel } from '../../models/make-model.js';
import { loadModel } from '../../web/index.js';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-swa-'));
test.after(() => fs.rmSync(DIR, { recursive: true, force: true }));

const SHAPE = { dim: 64, layers: 4, heads: 4, kvHeads: 2, ffn: 96, ctx: 4096, vocab: 320 };
const MODELS = [
  // windowed layers: gemma2 0, 2; gemma3 all but 5; llama all
  { name: 'gemma2', type: 'f32', shape: SHAPE, window: 6, windowed: 2, opts: { arch: 'gemma2', embdStd: 0.1 } },
  { name: 'gemma3', type: 'f16', shape: { ...SHAPE, layers: 7 }, window: 5, windowed: 6, opts: { arch: 'gemma3', embdStd: 0.1 } },
  { name: 'mistral', type: 'f32', shape: SHAPE, window: 7, windowed: 4, opts: { arch: 'llama' } },
];
const BATCH = 5;
const LOAD = { contextLength: 256, batchSize: BATCH, threads: 1 };
const ids = (n, k = 0) => Array.from({ length: n }, (_, i) => ((i + k) * 37 + 11) % 300 + 5);

function fileOf(m) {
  const file = path.join(DIR, `${m.name}.gguf`);
  if (!fs.existsSync(file)) makeModel(file, m.shape, m.type, 4321, { qkStd: 0.2, slidingWindow: m.window, ...m.opts });
  return file;
}

/** The same bits: Float32Arrays compared as bytes, results as their JSON (numbers print exactly). */
function sameBits(a, b, what) {
  assert.equal(a.length, b.length, what);
  a.forEach((r, i) => assert.ok(Buffer.from(r.buffer, r.byteOffset, r.byteLength).equals(Buffer.from(b[i].buffer, b[i].byteOffset, b[i].byteLength)), `${what}: row ${i}`));
}
const gen = (r) => JSON.stringify({ tokens: r.tokens, logprobs: r.logprobs, text: r.text, finishReason: r.finishReason });

for (const m of MODELS) {
  test(`${m.name}: the window ring computes what the full cache computes, for every use of the cache`, async () => {
    const file = fileOf(m);
    const win = await loadModel(file, LOAD), full = await loadModel(file, { ...LOAD, windowCache: 'full' });
    try {
      assert.equal(win.info.context.windowCache, 'window');
      assert.equal(win.info.context.windowRows, m.window - 1 + BATCH);
      assert.equal(full.info.context.windowCache, 'full');
      assert.equal(full.info.context.windowRows, 0);
      // prompts of several lengths, in chunks of 5 over a ring of W + 4 rows; then every position one by one
      for (const n of [3, 13, 47, 90]) sameBits(await win.logits(ids(n)), await full.logits(ids(n)), `${n} tokens`);
      sameBits(await win.logits(ids(40), { all: true }), await full.logits(ids(40), { all: true }), 'token by token');
      // generation far past the window
      const g = { maxTokens: 80, temperature: 0.8, seed: 3, ignoreEos: true, repeatPenalty: 1 };
      const a = await win.complete(ids(30), g), b = await full.complete(ids(30), g);
      assert.equal(gen(a), gen(b));
      assert.equal(a.tokens.length, 80);
      // prefix reuse: the same prompt again rewinds past 80 generated tokens, deeper than the
      // ring keeps: the ring's engine evaluates the prompt again, the full one reuses it
      const a2 = await win.complete(ids(30), g), b2 = await full.complete(ids(30), g);
      assert.equal(gen(a2), gen(a));
      assert.equal(gen(b2), gen(a));
      assert.equal(a2.stats.reusedPromptTokens, 0);
      assert.equal(b2.stats.reusedPromptTokens, 29);
      // a continuation of what the cache holds: nothing to rewind, reused by both
      const more = [...ids(30), ...a2.tokens, 7, 8, 9];
      const a3 = await win.complete(more, { ...g, maxTokens: 2 }), b3 = await full.complete(more, { ...g, maxTokens: 2 });
      assert.equal(gen(a3), gen(b3));
      assert.ok(a3.stats.reusedPromptTokens >= 30 + 79);
      assert.equal(a3.stats.reusedPromptTokens, b3.stats.reusedPromptTokens);
      // a prompt that differs from the cache in its last 3 tokens: a rewind of at most
      // batchSize positions, which the ring always serves
      const edit = [...more.slice(0, -3), 17, 18, 19];
      const a4 = await win.complete(edit, { ...g, maxTokens: 4 }), b4 = await full.complete(edit, { ...g, maxTokens: 4 });
      assert.equal(gen(a4), gen(b4));
      assert.equal(a4.stats.reusedPromptTokens, more.length - 3);
      assert.equal(b4.stats.reusedPromptTokens, more.length - 3);
      // best-of-N: the prompt forked to 4 sequences decoded in one batch (the context grows to 4 sequences)
      const bo = { n: 4, maxTokens: 30, temperature: 1, seed: 5, ignoreEos: true };
      const ba = await win.bestOfN(ids(20, 3), bo), bb = await full.bestOfN(ids(20, 3), bo);
      assert.deepEqual(ba.candidates.map(gen), bb.candidates.map(gen));
      assert.ok(new Set(ba.candidates.map((c) => c.tokens.join())).size > 1, 'the candidates differ');
      // beam search: forks and removals every step
      const bs = { beams: 3, maxTokens: 24, ignoreEos: true };
      const ra = await win.beamSearch(ids(12, 9), bs), rb = await full.beamSearch(ids(12, 9), bs);
      assert.deepEqual(ra.beams.map((x) => [x.tokens, x.logprob]), rb.beams.map((x) => [x.tokens, x.logprob]));
    } finally {
      await win.dispose(); await full.dispose();
    }
  });
}

test('speculative decoding by prompt lookup with verification passes longer than batchSize: rollbacks past the ring evaluate again, same tokens', async () => {
  const m = MODELS[0];
  const file = fileOf(m);
  // batchSize 2: a pass of a pending token and 8 drafts is 5 chunks; a rejected
  // draft rewinds into a chunk whose window rows the later chunks dropped
  const o = { contextLength: 256, batchSize: 2, threads: 1 };
  const win = await loadModel(file, o), full = await loadModel(file, { ...o, windowCache: 'full' });
  try {
    const loop = [...ids(6), ...ids(6), ...ids(6), ...ids(6)];   // repeats: lookup finds drafts
    const g = { maxTokens: 60, temperature: 0, ignoreEos: true, repeatPenalty: 1, draft: 'lookup', draftTokens: 8, adaptive: false };
    const a = await win.complete(loop, g), b = await full.complete(loop, g);
    assert.equal(gen(a), gen(b));
    const s = a.stats.speculative;
    assert.ok(s.proposed > 0 && s.accepted < s.proposed, `drafts proposed ${s.proposed}, accepted ${s.accepted}: some must be rejected`);
    assert.deepEqual(s, b.stats.speculative);
    // sampled, too
    const t = { ...g, temperature: 0.9, seed: 11 };
    assert.equal(gen(await win.complete(loop, t)), gen(await full.complete(loop, t)));
  } finally {
    await win.dispose(); await full.dispose();
  }
});

test('two threads with the ring: the same bits as one thread with the full cache', async () => {
  const m = MODELS[1];
  const file = fileOf(m);
  const win = await loadModel(file, { ...LOAD, threads: 2 }), full = await loadModel(file, { ...LOAD, windowCache: 'full' });
  try {
    sameBits(await win.logits(ids(90)), await full.logits(ids(90)), '90 tokens');
    const g = { maxTokens: 50, temperature: 0.7, seed: 9, ignoreEos: true };
    assert.equal(gen(await win.complete(ids(25), g)), gen(await full.complete(ids(25), g)));
  } finally {
    await win.dispose(); await full.dispose();
  }
});

test('the engine holds less memory by exactly the rows the windowed layers do not keep', async () => {
  for (const m of MODELS) {
    const file = fileOf(m);
    const n = 4096, o = { contextLength: n, threads: 1 };
    const win = await loadModel(file, o), full = await loadModel(file, { ...o, windowCache: 'full' });
    try {
      const rows = win.info.context.windowRows;
      assert.equal(rows, m.window - 1 + 64);   // batchSize 64 by default
      const hk = win.info.hparams.headDim, hv = win.info.hparams.headDimV, kv = win.info.hparams.nHeadKv;
      // keys and values of every windowed layer: n - rows rows fewer; the ring's maps: a row per slot, two per ring row
      const align = (x) => Math.ceil(x / 64) * 64;
      const saved = m.windowed * (n - rows) * kv * (hk + hv) * 4 - align(n * 4 + rows * 8);
      const [a, b] = [await win.memory(), await full.memory()];
      assert.equal(b.engineBytes - a.engineBytes, saved, `${m.name}: saved ${b.engineBytes - a.engineBytes}, expected ${saved}`);
    } finally {
      await win.dispose(); await full.dispose();
    }
  }
});
