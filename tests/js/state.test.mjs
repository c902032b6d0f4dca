// Saved sessions: model.saveState() / loadState(bytes) and generate(prompt,
// {resume: true}). A sampled generation (seed, temperature > 0) saved, the
// model disposed and loaded again, the state loaded and resumed gives
// exactly the tokens of one uninterrupted generation: stories260K and a
// synthetic GQA model, F32 and quantized weights, F32 and F16 caches, a
// slid window; synthetic gemma2, gemma3 and Mistral-style models far past
// their sliding window, saved from a window ring or a full cache and
// resumed in either (the ring's state holds only the rows its window
// layers keep; a rewind after the load goes as deep as before the save).
// A chat's next turn reuses the loaded cache. The size follows the tokens,
// not the context. States from another model (even one with the
// same shapes and metadata), another version, cut short or corrupt, or that
// do not fit the context are refused with BAD_SAVED_STATE, changing nothing.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MODEL_PATH, isError } from './helpers.mjs';
import { makeModel } from '../../models/make-model.js';
import { splitGguf } from '../../models/gguf-split.js';
import { loadModel } from '../../web/index.js';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-state-'));
test.after(() => fs.rmSync(DIR, { recursive: true, force: true }));

const GQA = path.join(DIR, 'gqa.gguf');
const GQA_TWIN = path.join(DIR, 'gqa-twin.gguf');   // the same shapes and metadata, other weights
const SHAPE = { dim: 64, layers: 3, heads: 8, kvHeads: 2, ffn: 128, ctx: 512, vocab: 320 };
makeModel(GQA, SHAPE, 'f32', 21, { arch: 'llama3' });
makeModel(GQA_TWIN, SHAPE, 'f32', 22, { arch: 'llama3' });

const SAMPLED = { temperature: 0.9, topK: 0, topP: 0.95, minP: 0, repeatPenalty: 1.1, repeatLastN: 16, seed: 1234, ignoreEos: true };
const PROMPT = 'Once upon a time, there was a';

/** Generates `first` tokens, saves, disposes, loads the file again and the state, resumes `rest`: equals one run of first + rest. */
async function roundTrip(source, loadOpts, first, rest, label) {
  const whole = await loadModel(source, loadOpts);
  const ref = await whole.complete(PROMPT, { ...SAMPLED, maxTokens: first + rest });
  await whole.dispose();

  const a = await loadModel(source, loadOpts);
  const r1 = await a.complete(PROMPT, { ...SAMPLED, maxTokens: first });
  const state = await a.saveState();
  await a.dispose();
  assert.ok(state instanceof Uint8Array);

  const b = await loadModel(source, { ...loadOpts, contextLength: 200 });   // another context length
  try {
    const info = await b.loadState(state);
    assert.equal(info.resumable, true);
    assert.equal(info.positions, info.tokens.length - 1, 'the last sampled token is not evaluated yet');
    assert.deepEqual(info.tokens.slice(-first), r1.tokens);
    const chunks = [];
    for await (const c of b.generate('', { ...SAMPLED, seed: 999, maxTokens: rest, resume: true })) chunks.push(c);
    const tokens = chunks.map((c) => c.token).filter((t) => t >= 0);
    assert.deepEqual([...r1.tokens, ...tokens], ref.tokens, `${label}: resumed tokens differ`);
    assert.equal(r1.text + chunks.map((c) => c.text).join(''), ref.text, `${label}: text`);
    return state.byteLength;
  } finally {
    await b.dispose();
  }
}

test('stories260K: 20 sampled tokens, saved, model reloaded, 30 more resumed = one run of 50 (F32 and F16 cache)', async () => {
  const f32 = await roundTrip(MODEL_PATH, { contextLength: 128 }, 20, 30, 'f32 cache');
  const f16 = await roundTrip(MODEL_PATH, { contextLength: 128, kvType: 'f16' }, 20, 30, 'f16 cache');
  assert.ok(f16 < f32 * 0.6, `an F16 cache saves half the rows' bytes (${f16} vs ${f32})`);
});

test('a synthetic GQA model (8 heads, 2 KV heads), F32 and Q4_0 / Q8_0 weights', async () => {
  await roundTrip(GQA, {}, 15, 25, 'gqa f32');
  const m = await loadModel(GQA);
  const q4 = (await m.quantize('q4_0')).bytes, q8 = (await m.quantize('q8_0')).bytes;
  await m.dispose();
  await roundTrip(q4, {}, 15, 25, 'gqa q4_0');
  await roundTrip(q8, { kvType: 'f16' }, 10, 30, 'gqa q8_0 f16 cache');
});

test('resume in the same model; a chat turn after loadState reuses the saved cache', async () => {
  const m = await loadModel(MODEL_PATH, { contextLength: 256 });
  try {
    await assert.rejects(m.complete('', { resume: true }), isError('BAD_STATE', /nothing to continue/));
    // so do the searches, also when the cache already holds their prompt (no prefill): tree search, best-of-N, beams
    for (const search of [(p) => m.treeSearch(p, { expand: 2, keep: 1, maxSteps: 2, maxTokensPerStep: 2, score: () => 0 }),
      (p) => m.bestOfN(p, { n: 2, maxTokens: 3 }), (p) => m.beamSearch(p, { beams: 2, maxTokens: 3 })]) {
      await m.complete(PROMPT, { ...SAMPLED, maxTokens: 6 });
      await search(PROMPT);
      await assert.rejects(m.complete('', { resume: true }), isError('BAD_STATE', /nothing to continue/));
    }
    const ref = await m.complete(PROMPT, { ...SAMPLED, maxTokens: 40 });
    const a = await m.complete(PROMPT, { ...SAMPLED, maxTokens: 10 });
    const b = await m.complete('', { ...SAMPLED, maxTokens: 30, resume: true });
    assert.deepEqual([...a.tokens, ...b.tokens], ref.tokens);
    assert.equal(b.stats.promptTokens, b.stats.reusedPromptTokens + 1, 'only the pending token is evaluated');
    // a prompt appended to the resumed tokens (a text prompt has no BOS)
    const state = await m.saveState();
    const c = await m.complete(' The end', { ...SAMPLED, maxTokens: 5, resume: true });
    assert.equal(c.stats.promptTokens, (await m.tokenize(PROMPT)).length + 40 + (await m.tokenize(' The end', { addBos: false })).length);
    // another kind of call uses the context: nothing to resume
    await m.nextTokenDistribution('x');
    await assert.rejects(m.complete('', { resume: true }), isError('BAD_STATE'));
    // embeddings empty the cache: nothing to resume either
    await m.complete(PROMPT, { ...SAMPLED, maxTokens: 3 });
    await m.embed(['a text']);
    await assert.rejects(m.complete('', { resume: true }), isError('BAD_STATE', /nothing to continue/));
    // so do the searches, also when the cache already holds their prompt (no prefill): tree search, best-of-N, beams
    for (const search of [(p) => m.treeSearch(p, { expand: 2, keep: 1, maxSteps: 2, maxTokensPerStep: 2, score: () => 0 }),
      (p) => m.bestOfN(p, { n: 2, maxTokens: 3 }), (p) => m.beamSearch(p, { beams: 2, maxTokens: 3 })]) {
      await m.complete(PROMPT, { ...SAMPLED, maxTokens: 6 });
      await search(PROMPT);
      await assert.rejects(m.complete('', { resume: true }), isError('BAD_STATE', /nothing to continue/));
    }
    await assert.rejects(m.complete('', { resume: true, draft: 'lookup' }), isError('BAD_OPTION', /resume/));
    // a fresh model: the saved conversation continues with a prompt that starts with its text, reusing its cache
    const m2 = await loadModel(MODEL_PATH, { contextLength: 256 });
    try {
      const { tokens, positions } = await m2.loadState(state);
      const next = [...tokens, ...(await m2.tokenize(' Then', { addBos: false }))];
      const r = await m2.complete(next, { temperature: 0, maxTokens: 4 });
      assert.equal(r.stats.reusedPromptTokens, positions);
      const fresh = await loadModel(MODEL_PATH, { contextLength: 256 });
      try {
        const r2 = await fresh.complete(next, { temperature: 0, maxTokens: 4 });
        assert.deepEqual(r.tokens, r2.tokens);
        assert.equal(r2.stats.reusedPromptTokens, 0);
      } finally { await fresh.dispose(); }
    } finally { await m2.dispose(); }
  } finally {
    await m.dispose();
  }
});

test('the size follows the tokens used, not the context length', async () => {
  const sizes = {};
  for (const ctx of [64, 1024]) {
    const m = await loadModel(MODEL_PATH, { contextLength: ctx });
    try {
      await m.complete(PROMPT, { ...SAMPLED, maxTokens: 10 });
      const s10 = (await m.saveState()).byteLength;
      await m.complete(PROMPT, { ...SAMPLED, maxTokens: 40 });
      const s40 = (await m.saveState()).byteLength;
      sizes[ctx] = [s10, s40];
    } finally { await m.dispose(); }
  }
  assert.deepEqual(sizes[64], sizes[1024]);
  const hp = { layers: 5, kvHeads: 4, headDim: 8 };   // stories260K
  const perToken = 4 + 4 + hp.layers * hp.kvHeads * hp.headDim * 2 * 4;   // token, position, K and V rows of every layer
  assert.equal(sizes[64][1] - sizes[64][0], 30 * perToken);
  assert.ok(sizes[1024][1] < 1024 * perToken / 10);
});

test('onFull slide: a state that slid continues in a context with the same ring, and only there', async () => {
  const opts = { contextLength: 32, onFull: 'slide', nKeep: 4 };
  const whole = await loadModel(MODEL_PATH, opts);
  const ref = await whole.complete(PROMPT, { ...SAMPLED, maxTokens: 70 });
  await whole.dispose();
  const a = await loadModel(MODEL_PATH, opts);
  const r1 = await a.complete(PROMPT, { ...SAMPLED, maxTokens: 50 });
  const state = await a.saveState();
  await a.dispose();
  const b = await loadModel(MODEL_PATH, opts);
  const longer = await loadModel(MODEL_PATH, { ...opts, contextLength: 64 });
  try {
    const { positions } = await b.loadState(state);
    assert.ok(positions > 32);
    const r2 = await b.complete('', { ...SAMPLED, maxTokens: 20, resume: true });
    assert.deepEqual([...r1.tokens, ...r2.tokens], ref.tokens);
    await assert.rejects(longer.loadState(state), isError('BAD_SAVED_STATE', /ring of 32 positions/));
  } finally {
    await Promise.all([b.dispose(), longer.dispose()]);
  }
});

// sliding-window models, as tests/js/swa.test.mjs builds them: windowed layers gemma2 0, 2; gemma3 all but 5; llama all
const WSHAPE = { dim: 64, layers: 4, heads: 4, kvHeads: 2, ffn: 96, ctx: 4096, vocab: 320 };
const WINDOWED = [
  { name: 'gemma2', type: 'f32', shape: WSHAPE, window: 6, windowed: 2, opts: { arch: 'gemma2', embdStd: 0.1 } },
  { name: 'gemma3', type: 'f16', shape: { ...WSHAPE, layers: 7 }, window: 5, windowed: 6, opts: { arch: 'gemma3', embdStd: 0.1 } },
  { name: 'mistral', type: 'f32', shape: WSHAPE, window: 7, windowed: 4, opts: { arch: 'llama' } },
];
const WLOAD = { contextLength: 256, batchSize: 5, threads: 1 };
// the new penalties too: a resumed stream's history is the saved tokens
const WSAMPLED = { ...SAMPLED, presencePenalty: 0.3, frequencyPenalty: 0.2 };
const wids = (n, k = 0) => Array.from({ length: n }, (_, i) => ((i + k) * 37 + 11) % 300 + 5);
const wgen = (r) => JSON.stringify({ tokens: r.tokens, logprobs: r.logprobs, text: r.text, reused: r.stats.reusedPromptTokens });

for (const m of WINDOWED) {
  test(`${m.name} past its window of ${m.window}: saved from a window ring or a full cache, resumed in either = one uninterrupted run`, async () => {
    const file = path.join(DIR, `${m.name}.gguf`);
    makeModel(file, m.shape, m.type, 4321, { qkStd: 0.2, slidingWindow: m.window, ...m.opts });
    const whole = await loadModel(file, WLOAD);
    const ref = await whole.complete(wids(20), { ...WSAMPLED, maxTokens: 100 });
    await whole.dispose();
    const states = {}, sizes = {};
    for (const windowCache of ['window', 'full']) {
      const a = await loadModel(file, { ...WLOAD, windowCache });
      const r1 = await a.complete(wids(20), { ...WSAMPLED, maxTokens: 40 });
      assert.deepEqual(r1.tokens, ref.tokens.slice(0, 40));
      states[windowCache] = await a.saveState();
      // 40 more: the size grows by the tokens, their positions and the rows of the layers without a window
      // (and, in the full cache, of the windowed ones too; the ring keeps its 4 + window rows)
      await a.complete('', { ...WSAMPLED, maxTokens: 40, resume: true });
      sizes[windowCache] = [states[windowCache].byteLength, (await a.saveState()).byteLength];
      const { hparams: hp, context } = a.info;
      const row = hp.nHeadKv * (hp.headDim + hp.headDimV) * (context.kvType === 'f16' ? 2 : 4);
      const kept = windowCache === 'window' ? hp.nLayer - m.windowed : hp.nLayer;
      assert.equal(sizes[windowCache][1] - sizes[windowCache][0], 40 * (8 + kept * row), `${m.name}, ${windowCache}: bytes per token`);
      await a.dispose();
    }
    const w = await loadModel(file, WLOAD);
    const ringRows = w.info.context.windowRows, hp = w.info.hparams;
    await w.dispose();
    assert.equal(ringRows, m.window - 1 + 5);
    assert.ok(sizes.window[0] < sizes.full[0], `the ring's state is smaller (${sizes.window[0]} vs ${sizes.full[0]} bytes)`);
    assert.equal(sizes.full[0] - sizes.window[0], m.windowed * (59 - ringRows) * hp.nHeadKv * (hp.headDim + hp.headDimV) * 4,
      'the rows the ring dropped, no more');
    // each state in each kind of context (one with a smaller ring: batchSize 2), after a reload
    for (const [from, into, extra] of [['window', 'window', {}], ['window', 'full', {}], ['full', 'window', {}], ['full', 'full', {}],
      ['window', 'window', { batchSize: 2 }], ['full', 'window', { batchSize: 2 }]]) {
      const b = await loadModel(file, { ...WLOAD, contextLength: 200, windowCache: into, ...extra });
      try {
        const info = await b.loadState(states[from]);
        assert.equal(info.positions, 59);
        const r2 = await b.complete('', { ...WSAMPLED, seed: 1, maxTokens: 60, resume: true });
        assert.deepEqual([...ref.tokens.slice(0, 40), ...r2.tokens], ref.tokens, `${m.name}: ${from} -> ${into} ${JSON.stringify(extra)}`);
      } finally { await b.dispose(); }
    }
    // rewinds after a load go as deep as before the save: a prompt 3 tokens off the cache's end
    // reuses the rest, one back at position 10 is evaluated again (the ring dropped what it needs)
    const tokens = [...wids(20), ...ref.tokens.slice(0, 39)];
    const edit = [...tokens.slice(0, -3), 17, 18, 19], deep = [...tokens.slice(0, 10), 5];
    for (const prompt of [edit, deep]) {
      const before = await loadModel(file, WLOAD), after = await loadModel(file, WLOAD);
      try {
        await before.complete(wids(20), { ...WSAMPLED, maxTokens: 40 });
        await after.loadState(states.window);
        const g = { ...WSAMPLED, maxTokens: 6 };
        const [x, y] = [await before.complete(prompt, g), await after.complete(prompt, g)];
        assert.equal(wgen(y), wgen(x));
        assert.equal(x.stats.reusedPromptTokens, prompt === edit ? tokens.length - 3 : 0);
      } finally { await Promise.all([before.dispose(), after.dispose()]); }
    }
  });
}

test('refused: another model, another version, cut short, corrupt, too long for the context, another KV type; nothing changes', async () => {
  const m = await loadModel(GQA, { contextLength: 64 });
  await m.complete(PROMPT, { ...SAMPLED, maxTokens: 20 });
  const state = await m.saveState();
  await m.dispose();
  const twin = await loadModel(GQA_TWIN, { contextLength: 64 });
  const small = await loadModel(GQA, { contextLength: 16 });
  const f16 = await loadModel(GQA, { contextLength: 64, kvType: 'f16' });
  const target = await loadModel(GQA, { contextLength: 64 });
  try {
    await assert.rejects(twin.loadState(state), isError('BAD_SAVED_STATE', /another model/));
    await assert.rejects(small.loadState(state), isError('BAD_SAVED_STATE', /this context has room for 16/));
    await assert.rejects(f16.loadState(state), isError('BAD_SAVED_STATE', /f32 cache/));
    // the target holds a generation of its own, which every refusal leaves in place
    const own = await target.complete('Hello', { ...SAMPLED, maxTokens: 5 });
    const cut = state.slice(0, state.length - 1);
    await assert.rejects(target.loadState(cut), isError('BAD_SAVED_STATE', /cut short/));
    await assert.rejects(target.loadState(state.slice(0, 50)), isError('BAD_SAVED_STATE', /cut short/));
    const flipped = state.slice(); flipped[state.length >> 1] ^= 1;
    await assert.rejects(target.loadState(flipped), isError('BAD_SAVED_STATE', /checksum/));
    const v2 = state.slice(); v2[4] = 2;
    await assert.rejects(target.loadState(v2), isError('BAD_SAVED_STATE', /version 2: this engine reads version 1/));
    await assert.rejects(target.loadState(new TextEncoder().encode('not a state at all')), isError('BAD_SAVED_STATE', /not a wasmlm saved state/));
    await assert.rejects(target.loadState(new Uint8Array(0)), isError('BAD_SAVED_STATE'));
    await assert.rejects(target.loadState('bytes'), isError('BAD_OPTION', /bytes/));
    const e = await target.loadState(flipped).catch((x) => x);
    assert.equal(e.status, 2);
    assert.equal(e.statusName, 'WLM_ERR_FORMAT');
    // nothing changed: the target resumes its own generation
    const more = await target.complete('', { ...SAMPLED, maxTokens: 5, resume: true });
    const whole = await target.complete('Hello', { ...SAMPLED, maxTokens: 10 });
    assert.deepEqual([...own.tokens, ...more.tokens], whole.tokens);
    // and takes the valid state (an ArrayBuffer works too)
    const ok = await target.loadState(state.buffer.slice(state.byteOffset, state.byteOffset + state.byteLength));
    assert.equal(ok.tokens.length, (await target.tokenize(PROMPT)).length + 20);
  } finally {
    await Promise.all([twin.dispose(), small.dispose(), f16.dispose(), target.dispose()]);
  }
});

test('a state saved before any generation, and after a load with nothing in it', async () => {
  const m = await loadModel(MODEL_PATH, { contextLength: 64 });
  try {
    const empty = await m.saveState();
    const info = await m.loadState(empty);
    assert.deepEqual(info, { tokens: [], positions: 0, resumable: false });
    await assert.rejects(m.complete('', { resume: true }), isError('BAD_STATE'));
    const r = await m.complete(PROMPT, { temperature: 0, maxTokens: 5 });
    assert.equal(r.stats.reusedPromptTokens, 0);
  } finally { await m.dispose(); }
});

test('the same model split into parts and as one file: one fingerprint, the state moves between them', async () => {
  const whole = path.join(DIR, 'stories.gguf');
  fs.copyFileSync(MODEL_PATH, whole);
  const { parts } = splitGguf(whole, 400000);
  assert.ok(parts.length > 1);
  const a = await loadModel(parts[0], { contextLength: 64 });
  const r1 = await a.complete(PROMPT, { ...SAMPLED, maxTokens: 8 });
  const state = await a.saveState();
  await a.dispose();
  const b = await loadModel(whole, { contextLength: 64 });
  const ref = await loadModel(whole, { contextLength: 64 });
  try {
    await b.loadState(state);
    const r2 = await b.complete('', { ...SAMPLED, maxTokens: 8, resume: true });
    assert.deepEqual([...r1.tokens, ...r2.tokens], (await ref.complete(PROMPT, { ...SAMPLED, maxTokens: 16 })).tokens);
  } finally { await Promise.all([b.dispose(), ref.dispose()]); }
});
