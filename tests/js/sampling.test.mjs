// The sampling controls of issue #29 through the public API, on stories260K:
// the defaults (temperature 0 alone is llama.cpp's greedy output), logitBias
// by token id and by text, the presence and frequency penalties against a
// reference computed here from the raw logits, typicalP, the top-N
// logprobs of chunks and results (generate, complete, chat, bestOfN,
// speculative decoding), and determinism with seeds.
import test from 'node:test';
import assert from 'node:assert/strict';
import { MODEL_PATH, reference } from './helpers.mjs';
import { loadModel } from '../../web/index.js';

const REF = reference();
const PROMPT = 'Once upon a time';
// every filter off: each token of the vocabulary can be drawn
const OPEN = { topK: 0, topP: 1, minP: 0, ignoreEos: true };
const CHAT_TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}";

let model, draft;
test.before(async () => {
  model = await loadModel(MODEL_PATH, { threads: 1, contextLength: 512 });
  draft = await loadModel((await model.quantize('q8_0')).bytes, { threads: 1, contextLength: 512 });
});
test.after(async () => { await model?.dispose(); await draft?.dispose(); });

const count = (tokens, t) => tokens.filter((x) => x === t).length;

test('defaults: temperature 0 and nothing else is plain greedy decoding, llama.cpp\'s output token for token', async () => {
  for (const ref of REF.results) {
    const r = await model.complete(ref.prompt, { temperature: 0, ignoreEos: true, maxTokens: ref.generated_token_ids.length });
    assert.deepEqual(r.tokens, ref.generated_token_ids, `prompt ${JSON.stringify(ref.prompt)}`);
    const streamed = [];
    for await (const c of model.generate(ref.prompt, { temperature: 0, ignoreEos: true, maxTokens: 40 })) if (c.token >= 0) streamed.push(c.token);
    assert.deepEqual(streamed, ref.generated_token_ids.slice(0, 40));
    // the old default (repeatPenalty 1.1) gave another output
    const old = await model.complete(ref.prompt, { temperature: 0, repeatPenalty: 1.1, ignoreEos: true, maxTokens: ref.generated_token_ids.length });
    assert.notDeepEqual(old.tokens, ref.generated_token_ids);
  }
  // the C defaults (the native CLI's) are the schema's: tests/js/options.test.mjs and cli.test.mjs
});

test('logitBias -Infinity: the greedy token changes, and the banned token is never drawn at any temperature or seed', async () => {
  const greedy = await model.complete(PROMPT, { temperature: 0, ignoreEos: true, maxTokens: 30 });
  const first = greedy.tokens[0];
  const g2 = await model.complete(PROMPT, { temperature: 0, ignoreEos: true, maxTokens: 30, logitBias: { [first]: -Infinity } });
  assert.notEqual(g2.tokens[0], first);
  assert.notDeepEqual(g2.tokens, greedy.tokens);
  assert.ok(!g2.tokens.includes(first));
  // the next most likely token of the raw distribution takes its place
  const d = await model.nextTokenDistribution(PROMPT, { topN: 2 });
  assert.equal(d[0].token, first);
  assert.equal(g2.tokens[0], d[1].token);

  // ban the token sampling uses most, then sample a lot without filters
  const free = await model.bestOfN(PROMPT, { ...OPEN, temperature: 1, n: 8, maxTokens: 40, seed: 100 });
  const all = free.candidates.flatMap((c) => c.tokens);
  const top = [...new Set(all)].sort((a, b) => count(all, b) - count(all, a))[0];
  assert.ok(count(all, top) > 10, `token ${top} drawn ${count(all, top)} times without the ban`);
  for (const temperature of [0.5, 1, 1.5, 3]) {
    const b = await model.bestOfN(PROMPT, { ...OPEN, temperature, n: 8, maxTokens: 40, seed: 100, logitBias: [[top, -Infinity]] });
    for (const c of b.candidates) assert.ok(!c.tokens.includes(top), `T ${temperature} candidate ${c.index} drew the banned token`);
    for (let seed = 0; seed < 4; seed++) {
      const r = await model.complete(PROMPT, { ...OPEN, temperature, maxTokens: 40, seed, logitBias: { [top]: -Infinity } });
      assert.ok(!r.tokens.includes(top), `T ${temperature} seed ${seed}`);
    }
  }
  // speculative decoding (prompt lookup and a draft model) and the distribution keep the ban
  const repetitive = 'One day, a big bear saw a big bear. One day, a big bear';
  for (const dr of ['lookup', draft]) {
    const r = await model.complete(repetitive, { ...OPEN, temperature: 1, maxTokens: 40, seed: 5, draft: dr, logitBias: { [top]: -Infinity } });
    assert.ok(!r.tokens.includes(top), `draft ${dr === 'lookup' ? 'lookup' : 'model'}`);
  }
  const dist = await model.nextTokenDistribution(PROMPT, { topN: 512, logitBias: { [first]: -Infinity } });
  assert.ok(dist.length === 511 && !dist.some((x) => x.token === first));
});

test('logitBias by text: each distinct token of the text, tokenized as written (no BOS, no space prefix), the same as by id', async () => {
  // SentencePiece: ' time' as written is the piece of 'time' after a space, the
  // one tokenize('time') gives (it adds the space prefix)
  const [time] = await model.tokenize('time', { addBos: false });
  const opts = { ...OPEN, temperature: 0.9, maxTokens: 60, seed: 11 };
  for (const bias of [-Infinity, -2, 3]) {
    const byText = await model.complete(PROMPT, { ...opts, logitBias: [[' time', bias]] });
    const byId = await model.complete(PROMPT, { ...opts, logitBias: { [time]: bias } });
    assert.deepEqual(byText.tokens, byId.tokens, `bias ${bias}`);
  }
  // a text of several tokens: each distinct one once (' the the' biases ' the' by b, not 2b)
  const ids = await model.tokenize('a big dog', { addBos: false });
  assert.ok(ids.length >= 3);
  const many = await model.complete(PROMPT, { ...opts, logitBias: [[' a big dog', -1.5]] });
  const manyIds = await model.complete(PROMPT, { ...opts, logitBias: Object.fromEntries([...new Set(ids)].map((t) => [t, -1.5])) });
  assert.deepEqual(many.tokens, manyIds.tokens);
  const [the] = await model.tokenize('the', { addBos: false });
  const twice = await model.complete(PROMPT, { ...opts, logitBias: [[' the the', 2]] });
  assert.deepEqual(twice.tokens, (await model.complete(PROMPT, { ...opts, logitBias: { [the]: 2 } })).tokens);
  // entries add up; a positive bias makes its token more frequent
  const sum = await model.complete(PROMPT, { ...opts, logitBias: [[the, 1], [' the', 1]] });
  assert.deepEqual(sum.tokens, twice.tokens);
  const plain = await model.complete(PROMPT, { ...opts, maxTokens: 100 });
  const more = await model.complete(PROMPT, { ...opts, maxTokens: 100, logitBias: [[' the', 4]] });
  assert.ok(count(more.tokens, the) >= 2 * count(plain.tokens, the) + 3, `' the' ${count(plain.tokens, the)} -> ${count(more.tokens, the)} times`);
  // as written: 'time' without the space is other pieces than ' time', which stays
  const next = async (logitBias) => (await model.nextTokenDistribution('Once upon a', { topN: 512, logitBias })).map((x) => x.token);
  assert.equal((await next(undefined))[0], time);
  assert.ok((await next([['time', -Infinity]])).includes(time));
  assert.ok(!(await next([[' time', -Infinity]])).includes(time));
});

test('presence and frequency penalties: each greedy step is the argmax of the raw logits minus presence + count x frequency over the window', async () => {
  const prompt = await model.tokenize('One day, a big bear saw a big bear. One day, a big bear');
  const cases = [
    { presencePenalty: 1.2, frequencyPenalty: 0, repeatLastN: 64 },
    { presencePenalty: 0, frequencyPenalty: 0.7, repeatLastN: 16 },
    { presencePenalty: 0.4, frequencyPenalty: 0.3, repeatPenalty: 1.3, repeatLastN: 32 },
    { presencePenalty: -0.5, frequencyPenalty: 0, repeatLastN: 8 },
  ];
  for (const pen of cases) {
    const r = await model.complete(prompt, { temperature: 0, ignoreEos: true, maxTokens: 12, ...pen });
    // every position's raw logits, each token evaluated alone as decoding does
    const rows = await model.logits([...prompt, ...r.tokens.slice(0, -1)], { all: true });
    let checked = 0;
    for (let i = 0; i < r.tokens.length; i++) {
      const ids = [...prompt, ...r.tokens.slice(0, i)];
      const window = ids.slice(-pen.repeatLastN);
      const l = Float64Array.from(rows[prompt.length - 1 + i]);
      const rp = pen.repeatPenalty ?? 1;
      for (const t of new Set(window)) {
        let x = Math.fround(l[t]);
        if (rp !== 1) x = Math.fround(x > 0 ? x / rp : x * rp);
        l[t] = x - (count(window, t) * pen.frequencyPenalty + pen.presencePenalty);
      }
      let best = 0, second = -Infinity;
      for (let t = 1; t < l.length; t++) if (l[t] > l[best]) best = t;
      for (let t = 0; t < l.length; t++) if (t !== best && l[t] > second) second = l[t];
      if (l[best] - second < 1e-3) continue;   // too close to call across evaluation paths
      assert.equal(r.tokens[i], best, `${JSON.stringify(pen)} step ${i}`);
      checked++;
    }
    assert.ok(checked >= 8, `${checked} steps checked`);
  }
  // what they are for: fewer repeats
  const base = await model.complete(PROMPT, { temperature: 0, ignoreEos: true, maxTokens: 120 });
  const freq = await model.complete(PROMPT, { temperature: 0, ignoreEos: true, maxTokens: 120, frequencyPenalty: 1.5 });
  const pres = await model.complete(PROMPT, { temperature: 0, ignoreEos: true, maxTokens: 120, presencePenalty: 2 });
  const maxCount = (ts) => Math.max(...ts.map((t) => count(ts, t)));
  const distinct = (ts) => new Set(ts).size;
  assert.ok(maxCount(freq.tokens) < maxCount(base.tokens), `most repeated: ${maxCount(base.tokens)} -> ${maxCount(freq.tokens)}`);
  assert.ok(distinct(pres.tokens) > distinct(base.tokens), `distinct: ${distinct(base.tokens)} -> ${distinct(pres.tokens)}`);
  // negative values favour repeats
  const neg = await model.complete(PROMPT, { temperature: 0, ignoreEos: true, maxTokens: 120, frequencyPenalty: -1 });
  assert.ok(distinct(neg.tokens) < distinct(base.tokens));
});

test('typicalP: the distribution keeps the locally typical set of the raw one; it changes what is sampled', async () => {
  const raw = await model.nextTokenDistribution(PROMPT, { topN: 512 });
  const H = -raw.reduce((a, x) => a + (x.prob > 0 ? x.prob * Math.log(x.prob) : 0), 0);
  for (const typicalP of [0.2, 0.5, 0.9]) {
    const ranked = raw.filter((x) => x.prob > 0).map((x) => ({ ...x, d: Math.abs(-Math.log(x.prob) - H) })).sort((a, b) => a.d - b.d || b.prob - a.prob);
    const want = new Set();
    let cum = 0, ambiguous = false;
    for (let j = 0; j < ranked.length; j++) {
      want.add(ranked[j].token);
      cum += ranked[j].prob;
      if (j + 1 < ranked.length && Math.abs(ranked[j + 1].d - ranked[j].d) < 1e-5) ambiguous = true;
      if (Math.abs(cum - typicalP) < 1e-5) ambiguous = true;
      if (cum >= typicalP) break;
    }
    const d = await model.nextTokenDistribution(PROMPT, { topN: 512, typicalP });
    const got = new Set(d.map((x) => x.token));
    if (!ambiguous) assert.deepEqual([...got].sort((a, b) => a - b), [...want].sort((a, b) => a - b), `typicalP ${typicalP}`);
    const kept = raw.filter((x) => got.has(x.token)).reduce((a, x) => a + x.prob, 0);
    for (const x of d) {
      const p = raw.find((y) => y.token === x.token).prob / kept;
      assert.ok(Math.abs(x.prob - p) < 1e-5, `typicalP ${typicalP} token ${x.token}: ${x.prob} vs ${p}`);
    }
    assert.ok(got.size < raw.length);
  }
  // sampling with it draws from fewer tokens
  const opts = { ...OPEN, temperature: 1.5, n: 8, maxTokens: 30, seed: 77 };
  const wide = await model.bestOfN(PROMPT, opts);
  const narrow = await model.bestOfN(PROMPT, { ...opts, typicalP: 0.3 });
  const distinctOf = (b) => new Set(b.candidates.flatMap((c) => c.tokens)).size;
  assert.ok(distinctOf(narrow) < distinctOf(wide), `${distinctOf(wide)} -> ${distinctOf(narrow)} distinct tokens`);
});

test('logprobs N: the N best of the model\'s own distribution per token, in chunks and results; the chosen token\'s logprob is the same value', async () => {
  const opts = { temperature: 0.9, maxTokens: 30, seed: 3, ignoreEos: true, logprobs: 5 };
  const r = await model.complete(PROMPT, opts);
  assert.equal(r.topLogprobs.length, r.tokens.length);
  let inTop = 0;
  r.topLogprobs.forEach((top, i) => {
    assert.equal(top.length, 5);
    for (let j = 1; j < 5; j++) assert.ok(top[j].logprob <= top[j - 1].logprob);
    const sum = top.reduce((a, x) => a + Math.exp(x.logprob), 0);
    assert.ok(sum <= 1 + 1e-6, `position ${i}: ${sum}`);
    for (const x of top) assert.ok(Number.isInteger(x.token) && typeof x.text === 'string' && x.logprob <= 0);
    const mine = top.find((x) => x.token === r.tokens[i]);
    if (mine) { inTop++; assert.equal(mine.logprob, r.logprobs[i]); } else assert.ok(r.logprobs[i] <= top[4].logprob);
  });
  assert.ok(inTop > 20, `${inTop} of 30 chosen tokens among the top 5`);
  // the first position: the raw next-token distribution, token texts as nextTokenDistribution gives them
  const d = await model.nextTokenDistribution(PROMPT, { topN: 5 });
  r.topLogprobs[0].forEach((x, j) => {
    assert.equal(x.token, d[j].token);
    assert.equal(x.text, d[j].text);
    assert.ok(Math.abs(Math.exp(x.logprob) - d[j].prob) < 1e-6);
  });
  // the filters and bias do not change them; greedy's token is the first
  const g = await model.complete(PROMPT, { temperature: 0, maxTokens: 30, ignoreEos: true, logprobs: 3, logitBias: { 5: -1 }, presencePenalty: 0.5 });
  const g0 = await model.complete(PROMPT, { temperature: 0, maxTokens: 30, ignoreEos: true, logprobs: 3 });
  assert.deepEqual(g0.topLogprobs.map((t) => t[0].token), g0.tokens);
  assert.deepEqual(g.topLogprobs[0], g0.topLogprobs[0]);
  g0.topLogprobs.forEach((t, i) => assert.equal(t[0].logprob, g0.logprobs[i]));
  // streamed chunks carry the same entries, and the result too
  const chunks = [];
  const it = model.generate(PROMPT, opts);
  let res;
  for (;;) { const x = await it.next(); if (x.done) { res = x.value; break; } chunks.push(x.value); }
  const tokenChunks = chunks.filter((c) => c.token >= 0);
  assert.deepEqual(tokenChunks.map((c) => c.topLogprobs), r.topLogprobs);
  assert.deepEqual(res.topLogprobs, r.topLogprobs);
  // absent unless asked for
  const none = await model.complete(PROMPT, { maxTokens: 3 });
  assert.ok(!('topLogprobs' in none));
  for await (const c of model.generate(PROMPT, { maxTokens: 3 })) assert.ok(!('topLogprobs' in c));
  // chat, bestOfN (candidate i equals complete with seed + i) and speculative decoding
  const chat = await model.chatComplete([{ role: 'user', content: PROMPT }], { ...opts, template: CHAT_TEMPLATE });
  assert.deepEqual(chat.topLogprobs, r.topLogprobs);
  const b = await model.bestOfN(PROMPT, { ...opts, n: 3 });
  for (const c of b.candidates) {
    const alone = await model.complete(PROMPT, { ...opts, seed: 3 + c.index });
    assert.deepEqual(c.topLogprobs, alone.topLogprobs);
  }
  for (const dr of ['lookup', draft]) {
    const sp = await model.complete(PROMPT, { temperature: 0, maxTokens: 30, ignoreEos: true, logprobs: 3, draft: dr });
    assert.deepEqual(sp.tokens, g0.tokens);
    assert.deepEqual(sp.topLogprobs, g0.topLogprobs);
    const streamed = [];
    for await (const c of model.generate(PROMPT, { temperature: 0, maxTokens: 30, ignoreEos: true, logprobs: 3, draft: dr })) if (c.token >= 0) streamed.push(c.topLogprobs);
    assert.deepEqual(streamed, g0.topLogprobs);
  }
});

test('speculative decoding follows the same pipeline: greedy output with bias and penalties equals plain decoding', async () => {
  const repetitive = 'One day, a big bear saw a big bear. One day, a big bear';
  const opts = { temperature: 0, ignoreEos: true, maxTokens: 60, presencePenalty: 0.3, frequencyPenalty: 0.2, repeatPenalty: 1.1, logitBias: [[' bear', -1]] };
  const plain = await model.complete(repetitive, opts);
  for (const dr of ['lookup', draft]) {
    const sp = await model.complete(repetitive, { ...opts, draft: dr, adaptive: false });
    assert.deepEqual(sp.tokens, plain.tokens, dr === 'lookup' ? 'lookup' : 'draft model');
    assert.ok(sp.stats.speculative.proposed > 0);
  }
});

test('determinism: the same seed gives the same tokens with every control on; another seed others', async () => {
  const opts = { temperature: 1.1, topK: 0, typicalP: 0.8, presencePenalty: 0.3, frequencyPenalty: 0.1, logitBias: [[' the', -1], [5, 2]], maxTokens: 50, ignoreEos: true, logprobs: 2 };
  const a = await model.complete(PROMPT, { ...opts, seed: 9 });
  const b = await model.complete(PROMPT, { ...opts, seed: 9 });
  const c = await model.complete(PROMPT, { ...opts, seed: 10 });
  assert.deepEqual(a, { ...b, stats: a.stats });
  assert.notDeepEqual(a.tokens, c.tokens);
  const two = await loadModel(MODEL_PATH, { threads: 2, contextLength: 512 });
  try {
    const t = await two.complete(PROMPT, { ...opts, seed: 9 });
    assert.deepEqual(t.tokens, a.tokens);
    assert.deepEqual(t.topLogprobs, a.topLogprobs);
  } finally { await two.dispose(); }
});
