// Isolation: several models and contexts in one process at once stay
// independent. stories260K F32, its Q8_0 (made by model.quantize) and a
// second F32 context with other options (f16 KV cache, 2 threads, small
// batches) run interleaved generations (round-robin over streaming iterators
// plus concurrent complete() calls); every output equals the one the same
// model gives when it runs alone.
import test from 'node:test';
import assert from 'node:assert/strict';
import { MODEL_PATH } from './helpers.mjs';
import { loadModel } from '../../web/index.js';

const JOBS = [
  { prompt: 'Once upon a time', opts: { temperature: 0, repeatPenalty: 1, maxTokens: 40, ignoreEos: true } },
  { prompt: 'The little dog', opts: { temperature: 0.9, topK: 20, seed: 7, maxTokens: 40, ignoreEos: true } },
  { prompt: 'Lily and Ben went to the park', opts: { temperature: 0.7, topP: 0.8, minP: 0.02, seed: 123, maxTokens: 30 } },
  { prompt: '', opts: { temperature: 1.2, seed: 99, maxTokens: 25, ignoreEos: true } },
];

const CONFIGS = {
  f32: { contextLength: 256, threads: 1 },
  q8: { contextLength: 256, threads: 1 },
  f32b: { contextLength: 128, kvType: 'f16', threads: 2, batchSize: 7 },
};

async function runAlone(source, cfg) {
  const m = await loadModel(source, cfg);
  try {
    const out = [];
    for (const j of JOBS) out.push((await m.complete(j.prompt, j.opts)).tokens);
    return out;
  } finally { await m.dispose(); }
}

async function drain(it) {
  const toks = [];
  for (;;) { const r = await it.next(); if (r.done) return { toks, final: r.value }; toks.push(r.value.token); }
}

test('two models of different types and three contexts, interleaved, give what each gives alone', async () => {
  const src = await loadModel(MODEL_PATH, { contextLength: 64 });
  const q8 = (await src.quantize('q8_0')).bytes;
  await src.dispose();
  assert.ok(q8 && q8.byteLength > 100000, 'quantized bytes');
  const sources = { f32: MODEL_PATH, q8, f32b: MODEL_PATH };

  const alone = {};
  for (const k of Object.keys(CONFIGS)) alone[k] = await runAlone(sources[k], CONFIGS[k]);
  // Q8_0 really is another model: at least one sampled job differs from F32
  assert.ok(JOBS.some((_, i) => alone.q8[i].join() !== alone.f32[i].join()), 'Q8_0 outputs all equal F32: was it quantized?');
  // f16 KV may round differently from f32 KV: compare it only with itself

  const models = {};
  for (const k of Object.keys(CONFIGS)) models[k] = await loadModel(sources[k], CONFIGS[k]);
  try {
    // round-robin: one token from each stream in turn
    for (let round = 0; round < 2; round++) {
      const streams = [];
      for (const k of Object.keys(models)) JOBS.forEach((j, i) => streams.push({ k, i, it: models[k].generate(j.prompt, j.opts), toks: [], done: false }));
      // one model runs one request at a time: iterate streams of different models in lockstep
      let active = streams.length;
      while (active > 0) {
        await Promise.all(streams.filter((s) => !s.done).map(async (s) => {
          const r = await s.it.next();
          if (r.done) { s.done = true; active--; assert.deepEqual(r.value.tokens, s.toks); } else s.toks.push(r.value.token);
        }));
      }
      for (const s of streams) assert.deepEqual(s.toks, alone[s.k][s.i], `round ${round}: ${s.k} job ${s.i} differs when interleaved`);
    }
    // concurrent complete() calls plus tokenize/info traffic on every model
    const calls = [];
    for (const k of Object.keys(models)) {
      JOBS.forEach((j, i) => calls.push(models[k].complete(j.prompt, j.opts).then((r) => [k, i, r.tokens])));
      calls.push(models[k].tokenize('Once upon a time').then((t) => ['tok', k, t]));
    }
    for (const r of await Promise.all(calls)) {
      if (r[0] === 'tok') { assert.deepEqual(r[2], [1, 403, 407, 261, 378], `tokenize on ${r[1]}`); continue; }
      const [k, i, toks] = r;
      assert.deepEqual(toks, alone[k][i], `concurrent ${k} job ${i}`);
    }
    // disposing one model leaves the others untouched
    await models.f32b.dispose();
    const again = await Promise.all([drain(models.f32.generate(JOBS[1].prompt, JOBS[1].opts)), drain(models.q8.generate(JOBS[1].prompt, JOBS[1].opts))]);
    assert.deepEqual(again[0].toks, alone.f32[1]);
    assert.deepEqual(again[1].toks, alone.q8[1]);
  } finally {
    for (const m of Object.values(models)) await m.dispose();
  }
});
