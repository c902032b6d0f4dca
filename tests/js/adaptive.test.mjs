// Adaptive compute (web/adaptive.js): the stopping rules checked against
// their definitions, and best-of-N / self-consistency spending few samples
// on easy prompts and more on hard ones (stories260K).
import test from 'node:test';
import assert from 'node:assert/strict';
import { MODEL_PATH, isError } from './helpers.mjs';
import { loadModel } from '../../web/index.js';
import { checkOptions } from '../../web/options.js';
import { binomialHalfCdf, voteConfidence, survivalConfidence, bestState, voteState, adaptiveOptions } from '../../web/adaptive.js';

const SAMPLE = { temperature: 1, topK: 0, topP: 1, minP: 0, repeatPenalty: 1 };
let model;
test.before(async () => { model = await loadModel(MODEL_PATH, { threads: 1 }); });
test.after(async () => { await model?.dispose(); });

/** C(n, k) as a Number (small n). */
const choose = (n, k) => { let c = 1; for (let i = 1; i <= k; i++) c = c * (n - i + 1) / i; return c; };

/** P(Beta(a+1, b+1) > 1/2) by integrating the density numerically (the definition, not the identity). */
function betaTail(a, b) {
  const steps = 20000;
  let num = 0, den = 0;
  for (let i = 0; i < steps; i++) {
    const p = (i + 0.5) / steps;
    const f = Math.exp(a * Math.log(p) + b * Math.log(1 - p));
    den += f;
    if (p > 0.5) num += f;
  }
  return num / den;
}

test('the vote rule: P(Beta(a+1, b+1) > 1/2) = P(Binomial(a+b+1, 1/2) <= a), exactly', () => {
  for (let n = 1; n <= 30; n++) {
    for (let a = 0; a <= n; a++) {
      let want = 0;
      for (let k = 0; k <= a; k++) want += choose(n, k);
      assert.ok(Math.abs(binomialHalfCdf(a, n) - want / 2 ** n) < 1e-12, `a ${a} n ${n}`);
    }
  }
  for (const [a, b] of [[4, 0], [3, 1], [6, 2], [9, 3], [5, 5], [12, 7], [1, 0]]) {
    assert.ok(Math.abs(voteConfidence(a, b) - betaTail(a, b)) < 1e-3, `${a}:${b} ${voteConfidence(a, b)} vs ${betaTail(a, b)}`);
  }
  assert.equal(voteConfidence(4, 0), 31 / 32);
  assert.equal(voteConfidence(3, 1), 26 / 32);
  assert.equal(voteConfidence(5, 5), 0.5);
  // large counts: no overflow, and the tie stays near 1/2
  assert.ok(Math.abs(binomialHalfCdf(2000, 4001) - 0.5) < 1e-12);
  assert.ok(voteConfidence(2100, 1900) > 0.999 && voteConfidence(2100, 1900) < 0.9995);   // z = 3.15
  assert.deepEqual(voteState([5, 2, 2]), { a: 5, b: 2, confidence: voteConfidence(5, 2) });
  assert.equal(voteState([]).confidence, 0);
});

test('the best-of-N rule: (k + 1) / (k + 1 + batch) after k candidates that did not beat the best; a target ends it', () => {
  // the posterior predictive of Beta(1, k + 1): E[(1 - q)^b]
  for (const [k, b] of [[0, 4], [3, 4], [75, 4], [10, 1]]) {
    let s = 0; const steps = 100000;
    for (let i = 0; i < steps; i++) { const q = (i + 0.5) / steps; s += (k + 1) * (1 - q) ** k * (1 - q) ** b; }
    assert.ok(Math.abs(s / steps - survivalConfidence(k, b)) < 1e-4);
  }
  assert.ok(survivalConfidence(75, 4) >= 0.95 && survivalConfidence(74, 4) < 0.95);
  assert.deepEqual(bestState([0.1, 0.5, 0.2, 0.5, 0.3], 4), { best: 0.5, since: 3, confidence: 4 / 8, reached: false });
  assert.equal(bestState([0, 0, 1, 0], 4, 1).reached, true);
  assert.equal(bestState([0, 0, 1, 0], 4, 1).confidence, 1);
  assert.deepEqual(adaptiveOptions({}), { minN: 4, maxN: 32, confidence: 0.95, batch: 4 });
  assert.deepEqual(adaptiveOptions({ minN: 40 }), { minN: 40, maxN: 40, confidence: 0.95, batch: 40 });
});

test('adaptive options are checked on the caller\'s thread: keys, ranges, n beside adaptive, target only for bestOfN', async () => {
  assert.throws(() => checkOptions('selfConsistency', { extract: () => 1, adaptive: { minN: 4, maxn: 8 } }), isError('BAD_OPTION', /unknown key maxn: did you mean maxN\?/));
  assert.throws(() => checkOptions('selfConsistency', { extract: () => 1, adaptive: { target: 1 } }), isError('BAD_OPTION', /unknown key target/));
  assert.throws(() => checkOptions('bestOfN', { adaptive: { confidence: 1 } }), isError('BAD_OPTION', /confidence a number > 0.5 and < 1/));
  assert.throws(() => checkOptions('bestOfN', { adaptive: true }), isError('BAD_OPTION', /adaptive/));
  assert.deepEqual(checkOptions('generate', { adaptive: false }), { adaptive: false });   // generate's own adaptive is a boolean
  assert.throws(() => checkOptions('generate', { adaptive: { minN: 2 } }), isError('BAD_OPTION', /adaptive/));
  await assert.rejects(model.bestOfN('Once', { n: 4, adaptive: { minN: 2 } }), isError('BAD_OPTION', /option n: must not be given with adaptive/));
});

const firstWord = (t) => (t.match(/[A-Za-z]+/) || [null])[0];

test('selfConsistency adaptive: an easy prompt settles at minN, harder ones spend more; the samples are those of bestOfN', async () => {
  const o = { ...SAMPLE, seed: 11, maxTokens: 4, extract: firstWord, adaptive: { minN: 4, maxN: 48, confidence: 0.95 } };
  const easy = await model.selfConsistency('Once upon a time, there was a little girl named', o);
  assert.equal(easy.answer, 'Lily');
  assert.equal(easy.stats.adaptive.samples, 4);
  assert.equal(easy.stats.adaptive.stoppedBy, 'confidence');
  assert.equal(easy.candidates.length, 4);
  const spent = [];
  for (const p of ['One day, the', 'The dog', 'Lily and Ben were']) {
    const hard = await model.selfConsistency(p, o);
    const a = hard.stats.adaptive;
    spent.push(a.samples);
    assert.equal(hard.candidates.length, a.samples);
    assert.equal(a.batches, 1 + (a.samples - 4) / 4);
    // it stopped when the rule first held, not later
    assert.ok(a.confidence >= 0.95 || a.stoppedBy === 'maxN');
    const first = hard.votes[0].count, second = hard.votes[1] ? hard.votes[1].count : 0;
    assert.equal(a.confidence, voteConfidence(first, second));
    const before = tallyOf(hard.candidates.slice(0, a.samples - 4));
    assert.ok(a.samples === 4 || voteConfidence(before[0] || 0, before[1] || 0) < 0.95, `${p}: settled before its last batch`);
  }
  // measured: 24, 16 and 16 samples against 4 for the easy prompt
  assert.ok(Math.min(...spent) >= 12, `hard prompts spent ${spent}`);
  // adaptive candidates are candidates 0.. of a plain run with as many
  const hard = await model.selfConsistency('The dog', o);
  const plain = await model.bestOfN('The dog', { ...SAMPLE, seed: 11, maxTokens: 4, n: hard.stats.adaptive.samples });
  const byIndex = plain.candidates.slice().sort((x, y) => x.index - y.index);
  assert.deepEqual(hard.candidates.map((c) => c.tokens), byIndex.map((c) => c.tokens));
  assert.deepEqual(hard.candidates.map((c) => c.index), byIndex.map((c) => c.index));
  assert.ok(hard.stats.totalTokens >= hard.stats.adaptive.samples);
});

/** Vote counts, most first. */
function tallyOf(cands) {
  const m = new Map();
  for (const c of cands) if (c.answer != null) m.set(c.answer, (m.get(c.answer) || 0) + 1);
  return [...m.values()].sort((a, b) => b - a);
}

test('bestOfN adaptive with a verifier: a target reached early stops at once; a hard prompt spends up to maxN', async () => {
  const park = (c) => (/\bpark\b/.test(c.text) ? 1 : 0);
  const o = { ...SAMPLE, seed: 11, maxTokens: 24, scorer: park, adaptive: { minN: 4, maxN: 32, target: 1 } };
  const easy = await model.bestOfN('Lily went to the', o);
  assert.equal(easy.best.score, 1);
  assert.equal(easy.stats.adaptive.stoppedBy, 'target');
  assert.equal(easy.stats.adaptive.samples, 4);
  const hard = await model.bestOfN('Once upon a time', o);
  assert.equal(hard.stats.adaptive.samples, 32);
  assert.equal(hard.stats.adaptive.stoppedBy, 'maxN');
  assert.equal(hard.candidates.length, 32);
  assert.deepEqual(hard.candidates.map((c) => c.index).sort((a, b) => a - b), [...Array(32).keys()]);
  // without a target the rule waits for the best to survive enough challengers (about 12 at 0.8 and batch 4)
  const loose = await model.bestOfN('Once upon a time', { ...SAMPLE, seed: 11, maxTokens: 8, adaptive: { minN: 4, maxN: 64, confidence: 0.8 } });
  const a = loose.stats.adaptive;
  assert.equal(a.stoppedBy, 'confidence');
  const st = bestState(loose.candidates.slice().sort((x, y) => x.index - y.index).map((c) => c.score), 4);
  assert.ok(st.since >= 15 && st.confidence >= 0.8, `since ${st.since}`);
  assert.equal(a.confidence, st.confidence);
  // streamed progress carries the global index
  const seen = new Set();
  await model.bestOfN('Once upon a time', { ...o, adaptive: { minN: 2, maxN: 6, target: 1 }, onCandidate: (e) => seen.add(e.index) });
  assert.deepEqual([...seen].sort(), [0, 1, 2, 3, 4, 5]);
});

// ---- deliberate decoding ------------------------------------------------------------

test('deliberate: a confident greedy answer costs only itself; a rejected one escalates until the verifier accepts', async () => {
  // min log-prob: greedy "Once upon a time" never drops below -3
  const easy = await model.deliberate('Once upon a time', { maxTokens: 40 });
  assert.equal(easy.accepted, true);
  assert.equal(easy.stage, 'greedy');
  assert.equal(easy.stages.length, 1);
  const greedy = await model.complete('Once upon a time', { maxTokens: 40, temperature: 0 });
  assert.equal(easy.text, greedy.text);
  assert.equal(easy.spent, greedy.tokens.length);
  assert.equal(easy.stages[0].signal, Math.min(...greedy.logprobs));
  assert.match(easy.stages[0].why, /min log-prob -?\d+\.\d+ >= -3/);
  // a verifier the greedy answer fails: best-of-N (adaptive, stopping at the first pass) finds one
  const toy = /\btoy\b/;
  const seen = [];
  const r = await model.deliberate('Once upon a time', { ...SAMPLE, seed: 3, maxTokens: 40, budget: 1000, step: '.', verify: (a) => { seen.push(a.text); return toy.test(a.text); } });
  assert.equal(r.uncertainty, 'verifier');
  assert.equal(r.stages[0].stage, 'greedy');
  assert.equal(r.stages[0].accepted, false);
  assert.match(r.stages[0].why, /the verifier rejected it/);
  assert.equal(r.accepted, true);
  assert.match(r.text, toy);
  assert.ok(r.spent <= 1000);
  assert.equal(r.spent, r.stages.reduce((a, s) => a + s.tokens, 0));
  // measured: the 8th candidate of best-of-N has the word; the tree stage is not needed
  const bon = r.stages[1];
  assert.equal(bon.stage, 'best-of-n');
  assert.equal(bon.accepted, true);
  assert.equal(bon.stoppedBy, 'target');
  assert.equal(r.stages.length, 2);
  assert.equal(r.stage, 'best-of-n');
  assert.ok(seen.length >= 1 + bon.samples);
});

test('deliberate: a hard task spends up to its budget (best-of-N gets half, tree search the rest) and reports why', async () => {
  for (const budget of [300, 900]) {
    const r = await model.deliberate('Once upon a time', { ...SAMPLE, seed: 5, maxTokens: 40, budget, step: '.', maxTokensPerStep: 16, verify: () => ({ ok: false, message: 'no' }) });
    assert.equal(r.accepted, false);
    assert.ok(r.spent <= budget, `${r.spent} > ${budget}`);
    assert.deepEqual(r.stages.map((s) => s.stage), ['greedy', 'best-of-n', 'tree']);
    const [g, b, t] = r.stages;
    assert.ok(b.tokens <= Math.floor((budget - g.tokens) / 2), 'best-of-N took at most half of what was left');
    assert.ok(t.skipped || t.tokens <= budget - g.tokens - b.tokens);
    for (const s of r.stages) if (!s.skipped) assert.match(s.why, /the verifier rejected it: no/);
    assert.ok(r.spent > budget / 2, `spent ${r.spent} of ${budget}`);
  }
  // too small a budget: the later stages are skipped, saying why
  const tiny = await model.deliberate('Once upon a time', { maxTokens: 40, budget: 60, verify: () => false });
  assert.equal(tiny.stages[1].skipped, '10 tokens for this stage: not 2 candidates of 40');
  assert.match(tiny.stages[2].skipped, /tokens left: not one expansion of 4 x 32/);
  assert.ok(tiny.spent <= 60);
});

test('deliberate: the entropy signal is the mean entropy of the model\'s distributions at the answer\'s tokens', async () => {
  const r = await model.deliberate('The dog', { maxTokens: 30, uncertainty: 'entropy', threshold: 10, escalate: [] });
  assert.equal(r.accepted, true);
  const ids = await model.tokenize('The dog');
  const all = ids.concat(r.tokens);
  const rows = await model.logits(all, { all: true });
  let h = 0;
  for (let i = ids.length - 1; i < all.length - 1; i++) {
    const f = rows[i];
    const m = Math.max(...f);
    const z = f.reduce((a, v) => a + Math.exp(v - m), 0);
    h += -f.reduce((a, v) => { const p = Math.exp(v - m) / z; return a + (p > 0 ? p * Math.log(p) : 0); }, 0);
  }
  h /= r.tokens.length;
  assert.ok(Math.abs(r.stages[0].signal - h) < 1e-6, `${r.stages[0].signal} vs ${h}`);
  assert.equal(r.signalTokens, all.length);
  const strict = await model.deliberate('The dog', { maxTokens: 30, uncertainty: 'entropy', threshold: 0.01, budget: 200, escalate: ['best-of-n'] });
  assert.equal(strict.stages[0].accepted, false);
  assert.match(strict.stages[0].why, /mean entropy \d+\.\d+ nats > 0.01/);
});

test('deliberate: options are checked first; a throwing verifier is a CALLBACK error', async () => {
  await assert.rejects(model.deliberate('x', { uncertainty: 'verifier' }), isError('BAD_OPTION', /verify/));
  assert.throws(() => checkOptions('deliberate', { escalate: ['tree', 'tree'] }), isError('BAD_OPTION', /escalate/));
  assert.throws(() => checkOptions('deliberate', { escalate: ['beam'] }), isError('BAD_OPTION', /'best-of-n' and \/ or 'tree'/));
  assert.throws(() => checkOptions('deliberate', { budgett: 5 }), isError('BAD_OPTION', /did you mean budget\?/));
  const boom = new Error('judge boom');
  await assert.rejects(model.deliberate('Once', { maxTokens: 5, verify: () => { throw boom; } }),
    (e) => e.code === 'CALLBACK' && e.cause === boom && e.callback === 'verify');
  const g = await model.complete('Once upon a time', { temperature: 0, maxTokens: 8 });
  assert.equal(g.tokens.length, 8);
});
