// Runtime edges through the public API (docs/hardening.md): prompts and
// generations longer than the context under both policies, aborts before the
// load completes / during prefill / during decode (each leaves the model, or
// the process, as it was), a worker that dies (pending and later calls
// reject, never hang), and a memory limit that fails fast with
// "needs N more bytes of memory (X in use, limit M)". Context-full basics and abort during decode are
// in generate.test.mjs; NaN/Inf logits in tests/c/test_sampler.c and
// fuzz/fuzz_sampler.c.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { MODEL_PATH, reference } from './helpers.mjs';
import { loadModel } from '../../web/index.js';
import { CHANNEL } from '../../web/protocol.js';

const REF = reference();
const GREEDY = { temperature: 0, repeatPenalty: 1, ignoreEos: true };
const refTokens = (n) => REF.results[0].generated_token_ids.slice(0, n);

// threads of this process (Linux): a worker that is not ended keeps its threads
function threadCount() {
  try { return Number(/Threads:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]); } catch { return null; }
}
async function settleThreads(baseline, slack = 2) {
  for (let i = 0; i < 50; i++) {
    const n = threadCount();
    if (n === null || n <= baseline + slack) return n;
    await new Promise((r) => setTimeout(r, 40));
  }
  return threadCount();
}

let model;
test.before(async () => { model = await loadModel(MODEL_PATH, { contextLength: 64 }); });
test.after(async () => { await model?.dispose(); });

test('prompt longer than the context: error policy rejects clearly and the model stays usable; slide keeps the tail', async () => {
  const long = 'Once upon a time there was a little girl. '.repeat(12);
  const n = (await model.tokenize(long)).length;
  assert.ok(n > 64, `prompt is ${n} tokens`);
  await assert.rejects(model.complete(long, { ...GREEDY, maxTokens: 5 }), (e) => {
    assert.match(e.message, /context/);
    assert.match(e.message, new RegExp(`${n}|64`));
    return true;
  });
  const after = await model.complete('Once upon a time', { ...GREEDY, maxTokens: 20 });
  assert.deepEqual(after.tokens, refTokens(20));
  const slide = await loadModel(MODEL_PATH, { contextLength: 64, onFull: 'slide', nKeep: 1 });
  try {
    const r = await slide.complete(long, { ...GREEDY, maxTokens: 10 });
    assert.equal(r.tokens.length, 10);
    assert.equal(r.finishReason, 'length');
    const again = await slide.complete('Once upon a time', { ...GREEDY, maxTokens: 20 });
    assert.deepEqual(again.tokens, refTokens(20));
  } finally { await slide.dispose(); }
});

test('maxTokens beyond the context: error policy ends with finishReason context, slide keeps going', async () => {
  const r = await model.complete('Once upon a time', { ...GREEDY, maxTokens: 500 });
  assert.equal(r.finishReason, 'context');
  assert.ok(r.tokens.length < 64 && r.tokens.length > 50, `${r.tokens.length} tokens`);
  assert.deepEqual(r.tokens, refTokens(r.tokens.length));
  const slide = await loadModel(MODEL_PATH, { contextLength: 64, onFull: 'slide', nKeep: 4 });
  try {
    const s = await slide.complete('Once upon a time', { ...GREEDY, maxTokens: 300 });
    assert.equal(s.finishReason, 'length');
    assert.equal(s.tokens.length, 300);
    assert.deepEqual(s.tokens.slice(0, r.tokens.length), r.tokens, 'identical until the window first slides');
    for (const t of s.tokens) assert.ok(t >= 0 && t < 512);
  } finally { await slide.dispose(); }
});

test('signal aborted before the load completes: AbortError, the worker ends, the source is released', async () => {
  const base = threadCount();
  // a path source aborted while loading
  for (let i = 0; i < 3; i++) {
    const ac = new AbortController();
    const p = loadModel(MODEL_PATH, { signal: ac.signal });
    setTimeout(() => ac.abort(), i * 5);
    await assert.rejects(p, { name: 'AbortError' });
  }
  // a slow stream: aborted mid-way; the stream must be cancelled
  const bytes = fs.readFileSync(MODEL_PATH);
  let cancelled = null, pulls = 0;
  const stream = new ReadableStream({
    async pull(ctl) {
      await new Promise((r) => setTimeout(r, 10));
      const off = pulls++ * 65536;
      if (off >= bytes.length) ctl.close(); else ctl.enqueue(bytes.subarray(off, off + 65536));
    },
    cancel(reason) { cancelled = reason; },
  }, { highWaterMark: 0 });
  const ac = new AbortController();
  const t0 = performance.now();
  const p = loadModel(stream, { signal: ac.signal });
  setTimeout(() => ac.abort(), 60);
  await assert.rejects(p, { name: 'AbortError' });
  assert.ok(performance.now() - t0 < 1000, 'rejected promptly');
  for (let i = 0; i < 50 && !cancelled; i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(cancelled, 'the source stream was cancelled');
  assert.ok(pulls < 18, `read ${pulls} chunks of 18`);
  // a stream that never delivers: the abort still rejects and cancels it
  let stalledCancel = false;
  const stalled = new ReadableStream({ pull() { return new Promise(() => {}); }, cancel() { stalledCancel = true; } });
  const ac2 = new AbortController();
  const p2 = loadModel(stalled, { signal: ac2.signal });
  setTimeout(() => ac2.abort(), 30);
  await assert.rejects(p2, { name: 'AbortError' });
  for (let i = 0; i < 50 && !stalledCancel; i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(stalledCancel, 'the stalled stream was cancelled');
  // no worker is left behind
  if (base !== null) {
    const now = await settleThreads(base);
    assert.ok(now <= base + 2, `threads ${base} -> ${now}: a worker of an aborted load is still alive`);
  }
  // and loading still works
  const m = await loadModel(MODEL_PATH, { contextLength: 64 });
  try { assert.deepEqual((await m.complete('Once upon a time', { ...GREEDY, maxTokens: 10 })).tokens, refTokens(10)); } finally { await m.dispose(); }
});

test('abort during prefill stops before any token; the model stays usable', async () => {
  const m = await loadModel(MODEL_PATH, { contextLength: 2048, batchSize: 1 });
  try {
    const long = 'Once upon a time there was a little girl named Lily. '.repeat(60);
    const n = (await m.tokenize(long)).length;
    assert.ok(n > 700 && n < 2000, `${n} prompt tokens`);
    // how long a full prefill takes here, to abort in the middle of one
    const t0 = performance.now();
    await m.complete(long, { ...GREEDY, maxTokens: 1 });
    const full = performance.now() - t0;
    const ac = new AbortController();
    let chunks = 0;
    const started = performance.now();
    setTimeout(() => ac.abort(), Math.max(5, full / 3));
    let abortedAfter = 0;
    // another prompt of the same length: the cache holds `long` now, and a
    // prompt sharing its prefix would skip most of the prefill
    const other = 'Far away there was a little girl named Lily. '.repeat(60);
    await assert.rejects(async () => {
      try { for await (const _ of m.generate(other, { ...GREEDY, maxTokens: 50, signal: ac.signal })) chunks++; } finally { abortedAfter = performance.now() - started; }
    }, { name: 'AbortError' });
    assert.equal(chunks, 0, 'no token before the prefill finished');
    assert.ok(abortedAfter < full * 0.9 + 50, `stopped after ${abortedAfter.toFixed(0)} ms of a ${full.toFixed(0)} ms prefill`);
    const after = await m.complete('Once upon a time', { ...GREEDY, maxTokens: 30 });
    assert.deepEqual(after.tokens, refTokens(30));
  } finally { await m.dispose(); }
});

test('abort during decode, then the same request again gives the reference output', async () => {
  const ac = new AbortController();
  let n = 0;
  await assert.rejects(async () => {
    for await (const _ of model.generate('Once upon a time', { ...GREEDY, maxTokens: 40, signal: ac.signal })) if (++n === 7) ac.abort();
  }, { name: 'AbortError' });
  assert.equal(n, 7);
  const r = await model.complete('Once upon a time', { ...GREEDY, maxTokens: 40 });
  assert.deepEqual(r.tokens, refTokens(40));
});

test('a worker that dies: pending and later calls reject with a clear error, never hang', async () => {
  const m = await loadModel(MODEL_PATH, { contextLength: 256 });
  const it = m.generate('Once upon a time', { maxTokens: 100000, ignoreEos: true, temperature: 0.8 });
  await it.next();
  const pendingTok = m.tokenize('hello');
  // simulate a crash: the worker is gone without a word (only the client holds the worker)
  m[CHANNEL].w.terminate();
  const deadline = (p) => Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error('hung')), 3000))]);
  // chunks that arrived before the crash may still be handed out; then it fails
  await assert.rejects(deadline((async () => { for (let i = 0; i < 1000; i++) if ((await it.next()).done) return; })()), /worker exited/);
  await assert.rejects(deadline(pendingTok), /worker exited/);
  await assert.rejects(deadline(m.complete('x', { maxTokens: 2 })), /worker exited/);
  await assert.rejects(deadline(m.tokenize('x')), /worker exited/);
  await assert.rejects(deadline((async () => { for await (const _ of m.generate('x')) { /* none */ } })()), /worker exited/);
  await deadline(m.dispose()); // disposing a dead model still settles
});

test('a malformed request that throws inside the worker fails alone; the model keeps working', async () => {
  const m = await loadModel(MODEL_PATH, { contextLength: 64 });
  try {
    // past the caller-side checks: these reach the worker as a peer could send them
    await assert.rejects(m[CHANNEL].call('logits', { ids: [1, 2], all: false }).then(() => m[CHANNEL].call('logits', { ids: { length: -1 }, all: false })));
    await assert.rejects(m[CHANNEL].call('no-such-op', {}), /no-such-op/);
    const r = await m.complete('Once upon a time', { ...GREEDY, maxTokens: 5 });
    assert.deepEqual(r.tokens, refTokens(5));
  } finally { await m.dispose(); }
});

test('a model that does not fit the memory limit fails fast with "needs N more bytes of memory (X in use, limit M)"', async () => {
  const t0 = performance.now();
  const NOMEM = /needs (\d+) more bytes of memory \((\d+) in use, limit (\d+)\)/;
  await assert.rejects(loadModel(MODEL_PATH, { memoryLimit: 256 << 10 }), (e) => {
    assert.match(e.message, NOMEM);
    return true;
  });
  // the file fits, the context does not
  await assert.rejects(loadModel(MODEL_PATH, { memoryLimit: 4 << 20, contextLength: 2048, kvType: 'f32' }), (e) => {
    assert.match(e.message, /the context needs/);
    const [need, inUse, limit] = NOMEM.exec(e.message).slice(1).map(Number);
    assert.ok(need + inUse > limit, `${need} + ${inUse} vs ${limit}`);
    return true;
  });
  assert.ok(performance.now() - t0 < 3000, 'failed fast');
  const ok = await loadModel(MODEL_PATH, { memoryLimit: 64 << 20, contextLength: 256 });
  try { assert.deepEqual((await ok.complete('Once upon a time', { ...GREEDY, maxTokens: 8 })).tokens, refTokens(8)); } finally { await ok.dispose(); }
});
