// Inference-time scaling, caller side: best-of-N with scorers and verifiers,
// self-consistency voting, verify-and-retry, beam search and speculative
// decoding with a draft model. The token work runs in the models' workers
// (web/worker/multi.js); this file scores, votes, retries and orchestrates.
//
// How best-of-N splits the work: the n candidates are decoded as ONE batch
// in the model's worker (the prompt is prefilled once and its cache slots are
// shared by every candidate; each step is one forward pass for all of them),
// and that worker's compute threads split each step's matrix rows and
// attention heads. Scoring functions (verifiers) run here, on the caller's
// thread, concurrently (Promise.all) once the candidates are complete.

import { WasmlmError, badOption } from './errors.js';
import { abortError, withSignal, streamRequest } from './abort.js';
import { DEFAULT_SAMPLING } from './options.js';
import { CHANNEL, chunkOf } from './protocol.js';
import { adaptiveOptions, bestState, voteState } from './adaptive.js';

function scorerOf(scorer) {
  if (scorer == null || scorer === 'mean-logprob') {
    return (c) => (c.logprobs.length ? c.logprobs.reduce((a, b) => a + b, 0) / c.logprobs.length : -Infinity);
  }
  if (scorer === 'total-logprob') return (c) => c.logprobs.reduce((a, b) => a + b, 0);
  if (typeof scorer === 'function') return scorer;
  throw badOption('scorer', scorer, "must be 'mean-logprob', 'total-logprob' or a function");
}


/**
 * One batch of candidates in the worker: `n` of them with global indices
 * offset, offset + 1, ... (candidate i samples with seed + i, so a batch
 * taken after `offset` others continues the same candidates).
 */
async function sampleBatch(model, prompt, rest, { signal, onCandidate, offset = 0, n }) {
  let options = rest;
  if (n !== undefined) {
    options = { ...rest, n };
    if (offset) options.seed = BigInt.asUintN(64, BigInt(rest.seed ?? DEFAULT_SAMPLING.seed) + BigInt(offset));
  }
  const texts = new Map();
  const onEvent = onCandidate ? (ev) => {
    const index = ev.index + offset;
    const t = texts.get(index) || { text: '', n: 0 };
    t.text += ev.text;
    if (ev.token >= 0) t.n++;
    texts.set(index, t);
    return onCandidate({ index, text: t.text, delta: ev.text, token: ev.token, tokens: t.n, done: false });
  } : undefined;
  const r = await withSignal(model[CHANNEL], 'bestOfN', { prompt, options, stream: !!onCandidate }, signal, onEvent);
  if (offset) for (const c of r.candidates) c.index += offset;
  return r;
}

/** Scores candidates concurrently; a NaN score counts as -Infinity. */
async function scoreAll(candidates, score, signal) {
  const scores = await Promise.all(candidates.map((c) => Promise.resolve().then(() => score(c))));
  if (signal && signal.aborted) throw abortError(signal);
  return candidates.map((c, i) => {
    const s = Number(scores[i]);
    return { ...c, score: Number.isNaN(s) ? -Infinity : s };
  });
}

const sortCandidates = (list) => list.sort((a, b) => b.score - a.score || a.index - b.index);
function doneEvents(onCandidate, list) {
  if (onCandidate) for (const c of list) onCandidate({ index: c.index, text: c.text, delta: '', token: -1, tokens: c.tokens.length, done: true, score: c.score, finishReason: c.finishReason });
}

/** The statistics of several batches as one: times and counts add up. */
function mergeStats(list, extra) {
  const sum = (k) => list.reduce((a, s) => a + (s[k] || 0), 0);
  const first = list[0] || {};
  const totalTokens = sum('totalTokens'), decodeMs = sum('decodeMs');
  return {
    ...first, reusedPromptTokens: first.reusedPromptTokens || 0, prefillMs: sum('prefillMs'), decodeMs, steps: sum('steps'),
    totalTokens, wallMs: sum('wallMs'), tokensPerSec: decodeMs > 0 ? totalTokens / (decodeMs / 1000) : 0,
    contextGrown: list.some((s) => s.contextGrown), ...extra,
  };
}

/**
 * Adaptive sampling (web/adaptive.js): batches of candidates (minN, then
 * `batch` at a time) until `settled(all so far)` reaches the confidence, or
 * maxN. `round(batch)` scores or votes on each batch as it comes.
 */
async function adaptiveRounds(model, prompt, rest, adaptive, { signal, onCandidate, round, settled }) {
  if (rest.n !== undefined) throw badOption('n', rest.n, 'must not be given with adaptive (adaptive.minN, batch and maxN set the samples)');
  const a = adaptiveOptions(adaptive);
  const all = [], stats = [];
  let state = { confidence: 0 }, stoppedBy = 'maxN';
  while (all.length < a.maxN) {
    const n = Math.min(all.length === 0 ? a.minN : a.batch, a.maxN - all.length);
    const r = await sampleBatch(model, prompt, rest, { signal, onCandidate, offset: all.length, n });
    stats.push(r.stats);
    all.push(...await round(r.candidates));
    state = settled(all, a);
    if (all.length >= a.minN && (state.reached || state.confidence >= a.confidence)) { stoppedBy = state.reached ? 'target' : 'confidence'; break; }
  }
  const adaptiveStats = { samples: all.length, batches: stats.length, stoppedBy, confidence: state.confidence, minN: a.minN, maxN: a.maxN, batch: a.batch, target: a.target };
  return { all, state, stats: mergeStats(stats, { adaptive: adaptiveStats }) };
}

/**
 * n candidates (seeds seed, seed+1, ...) decoded as one batch, scored, sorted.
 * With `adaptive`, batches until the best is settled (web/adaptive.js).
 * @returns {Promise<{candidates: object[], best: object, stats: object}>}
 */
export async function bestOfN(model, prompt, opts = {}) {
  const { signal, scorer, onCandidate, adaptive, ...rest } = opts;
  const score = scorerOf(scorer);
  if (adaptive) {
    let scoringMs = 0;
    const r = await adaptiveRounds(model, prompt, rest, adaptive, {
      signal, onCandidate,
      async round(batch) {
        const t0 = Date.now();
        const scored = await scoreAll(batch, score, signal);
        scoringMs += Date.now() - t0;
        doneEvents(onCandidate, scored);
        return scored;
      },
      settled: (all, a) => bestState(all.map((c) => c.score), a.batch, a.target),
    });
    const candidates = sortCandidates(r.all);
    return { candidates, best: candidates[0], stats: { ...r.stats, scoringMs } };
  }
  const r = await sampleBatch(model, prompt, rest, { signal, onCandidate });
  const t0 = Date.now();
  const candidates = sortCandidates(await scoreAll(r.candidates, score, signal));
  doneEvents(onCandidate, candidates);
  return { candidates, best: candidates[0], stats: { ...r.stats, scoringMs: Date.now() - t0 } };
}

/** The vote key of an answer (strings by value, others by their JSON). */
const voteKey = (a) => (typeof a === 'string' ? 's:' + a : 'j:' + JSON.stringify(a));

/** The votes of candidates (answers set), most first; ties go to the answer seen first. */
function tally(byIndex) {
  const votes = new Map();
  for (const c of byIndex) {
    const a = c.answer;
    if (a === null || a === undefined) continue;
    const key = voteKey(a);
    const v = votes.get(key);
    if (v) v.count++;
    else votes.set(key, { answer: a, count: 1, first: c.index });
  }
  return [...votes.values()].sort((a, b) => b.count - a.count || a.first - b.first).map(({ answer, count }) => ({ answer, count }));
}

/**
 * Majority vote over answers that `extract(text, candidate)` pulls out of n
 * samples (null/undefined = no answer). Ties go to the answer seen first.
 * With `adaptive`, batches until the leader is settled (web/adaptive.js).
 */
export async function selfConsistency(model, prompt, opts = {}) {
  const { extract, adaptive, ...rest } = opts;
  if (typeof extract !== 'function') throw badOption('extract', extract, 'must be a function (text, candidate) => answer');
  const answer = async (list) => {
    const answers = await Promise.all(list.map((c) => Promise.resolve().then(() => extract(c.text, c))));
    list.forEach((c, i) => { c.answer = answers[i]; });
    return list;
  };
  let byIndex, stats;
  if (adaptive) {
    const { signal, onCandidate, ...sampling } = rest;
    const score = scorerOf('mean-logprob');
    const r = await adaptiveRounds(model, prompt, sampling, adaptive, {
      signal, onCandidate,
      async round(batch) {
        const scored = await scoreAll(batch, score, signal);
        doneEvents(onCandidate, scored);
        return answer(scored);
      },
      settled: (all) => voteState(tally(all).map((v) => v.count)),
    });
    byIndex = r.all; stats = r.stats;
  } else {
    const r = await bestOfN(model, prompt, { ...rest, scorer: 'mean-logprob' });
    byIndex = await answer(r.candidates.slice().sort((a, b) => a.index - b.index));
    stats = r.stats;
  }
  const list = tally(byIndex);
  return {
    answer: list.length ? list[0].answer : null,
    votes: list,
    answered: list.reduce((a, v) => a + v.count, 0),
    candidates: byIndex,
    stats,
  };
}

/**
 * Generates, asks `verify(result, attempt)` (true / false / {ok, message}),
 * and resamples with the next seed until it accepts or maxAttempts is reached.
 * With `feedback` the verifier's message is fed back: `true` appends
 * "\n<message>\n" to the prompt; a function (prompt, result, message, attempt)
 * returns the next prompt.
 */
export async function generateUntil(model, prompt, opts = {}) {
  const { verify, maxAttempts = 4, feedback, signal, ...rest } = opts;
  if (typeof verify !== 'function') throw badOption('verify', verify, 'must be a function (result, attempt) => verdict');
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) throw badOption('maxAttempts', maxAttempts, 'must be a positive integer');
  const seed0 = BigInt(rest.seed ?? DEFAULT_SAMPLING.seed);
  const attempts = [];
  let p = prompt;
  for (let a = 0; a < maxAttempts; a++) {
    const seed = BigInt.asUintN(64, seed0 + BigInt(a));
    const result = await model.complete(p, { ...rest, seed, signal });
    let v = await verify(result, a);
    if (typeof v === 'boolean' || v == null) v = { ok: !!v };
    const rec = { attempt: a, seed: String(seed), prompt: p, text: result.text, tokens: result.tokens, finishReason: result.finishReason, ok: !!v.ok, message: v.message ?? null, stats: result.stats };
    attempts.push(rec);
    if (rec.ok) return { ok: true, result: rec, attempts };
    if (feedback && v.message != null) {
      p = typeof feedback === 'function' ? await feedback(p, result, v.message, a)
        : (typeof p === 'string' ? `${p}\n${v.message}\n` : p);
    }
  }
  return { ok: false, result: null, attempts };
}

export async function beamSearch(model, prompt, opts = {}) {
  const { signal, ...rest } = opts;
  return withSignal(model[CHANNEL], 'beamSearch', { prompt, options: rest }, signal);
}

// ---- speculative decoding with a draft model ---------------------------------------

const vocabChecked = new WeakMap();
let sessionSeq = 1;

async function checkVocab(target, draft) {
  let m = vocabChecked.get(target);
  if (m && m.get(draft)) return;
  const [a, b] = await Promise.all([target[CHANNEL].call('vocab'), draft[CHANNEL].call('vocab')]);
  if (a.nVocab !== b.nVocab || a.hash !== b.hash) {
    const e = new WasmlmError('VOCAB_MISMATCH', `the draft model's vocabulary differs from the target's (${b.nVocab} tokens, fingerprint ${b.hash}, vs ${a.nVocab} tokens, fingerprint ${a.hash}): speculative decoding needs one shared vocabulary`);
    throw e;
  }
  if (!m) vocabChecked.set(target, (m = new WeakMap()));
  m.set(draft, true);
}

/**
 * Speculative decoding: the draft proposes k tokens, the target checks them
 * in one batched pass (wlm_spec_accept: the output follows the target's
 * distribution; greedy output equals the target's own).
 *
 * With `adaptive` (default) k is chosen each round from the acceptance rate
 * a seen so far (over proposed tokens) and a cost model: a draft token costs
 * c target steps, and a target pass over k drafts costs 1 + v k steps. A
 * round with k drafts emits on average (1 - a^(k+1)) / (1 - a) tokens; the
 * k in [0, draftTokens] with the most tokens per step wins. The rate is
 * taken with 4 pseudo-drafts at 0.7 (so one lucky draft is not read as a
 * perfect draft), and the first round takes the k picked for 0.7 (at least
 * 1). k = 0 is a plain target step, so a draft that is rarely right costs
 * only its catch-up at the probes (bench/results/README.md, speculative
 * decoding); after `PROBE` plain rounds one round
 * drafts a token again so a draft that starts agreeing is noticed, the
 * interval doubling (up to `PROBE_MAX`) while the draft stays poor: a probe
 * costs the draft's catch-up over every token it missed, which with a poor
 * draft cost more than the probes found. Timed probes draft two
 * tokens, so that each times a draft step, and they stop for good once the
 * measured costs say that no k could pay even at full acceptance
 * (draftingCanPay; stats.speculative.stoppedDrafting).
 *
 * Where c and v come from depends on whether the output can depend on k:
 * - Sampled decoding: which tokens come out depends on what was drafted, so
 *   k must not depend on timings (a seed gives the same tokens on every run
 *   and machine). A fixed model: c = draft file size / target file size
 *   (decode streams the weights) and v = verifyCostOf(target).
 * - Greedy decoding (temperature 0 or topK 1: the target's distribution is
 *   one-hot, so the output is the target's own whatever k is): c and v are
 *   measured as the generation goes (measuredCosts: the rounds' wall times
 *   by k, fitted by a line, the draft's time per token, timed in the
 *   draft's own loop, and the rest of its drafting rounds), because the
 *   fixed model can be far off on a host whose cache holds the weights
 *   (bench/results/README.md, speculative decoding by host).
 */
export function chooseDraftTokens(kMax, acceptance, draftCost, verifyCost = 0.25, draftOverhead = 0) {
  const a = Math.min(Math.max(acceptance, 0), 0.999);
  const o = Math.max(Number(draftOverhead) || 0, 0);
  let best = 0, bestRate = 1;
  for (let k = 1; k <= kMax; k++) {
    const rate = ((1 - a ** (k + 1)) / (1 - a)) / (k * draftCost + o + 1 + k * verifyCost);
    if (rate > bestRate * 1.02) { best = k; bestRate = rate; }
  }
  return best;
}
const PROBE = 8, PROBE_MAX = 512, PRIOR_ACCEPTANCE = 0.7, PRIOR_WEIGHT = 4;
// Greedy timings carry from one generation of a target / draft pair to the
// next, which starts from them instead of timing its own first rounds (timing
// them costs a generation where drafting does not pay); every CARRY_FRESH-th generation of a pair
// times afresh, so that a change in the host's load is seen.
const carried = new WeakMap();   // target -> WeakMap(draft -> timings)
const CARRY_FRESH = 8;
/** The greedy timings carried for a target / draft pair (live; created
 * empty): gens (generations so far), passS[k] (a target pass's ms over k
 * drafts, the last 8), draftS (a draft step's ms, the last 8), overMs and
 * overN (a drafting round's overhead: mean, count). For inspection, and for
 * tests that need a pair whose costs say no k pays. */
export function speculativeTimings(target, draft) {
  let byDraft = carried.get(target);
  if (!byDraft) carried.set(target, (byDraft = new WeakMap()));
  let t = byDraft.get(draft);
  if (!t) byDraft.set(draft, (t = { gens: 0, passS: null, draftS: null, overMs: NaN, overN: 0 }));
  return t;
}
function carriedTimings(target, draft) {
  const t = speculativeTimings(target, draft);
  if (t.gens++ % CARRY_FRESH === 0) Object.assign(t, { passS: null, draftS: null, overMs: NaN, overN: 0 });
  return t;
}

/** Whether drafting up to kMax tokens could pay at these costs (target
 * steps: c a draft token, v one more token in a pass, o a drafting round's
 * overhead) if every draft were accepted. Measured costs at which it could
 * not stop the probes: the pair is too dear on this host whatever it agrees
 * on (bench/results/README.md, Zen 3 speculative decoding). */
export function draftingCanPay(kMax, costs) {
  return chooseDraftTokens(kMax, 1, costs.draftCost, costs.verifyCost, costs.draftOverhead || 0) > 0;
}

/** The fixed v of the cost model: 1/4, plus 0.2 times the share of the
 * target's matrix elements stored as halves (F16 1, BF16 30 in GGML's ids),
 * whose batches are float arithmetic. bench/verify-cost.mjs measures v
 * (without the extra logits rows a verification computes, so a lower
 * bound); its results by host are in bench/results/README.md. */
export function verifyCostOf(info) {
  let all = 0, flt = 0;
  for (const t of info?.tensors || []) {
    if (!t.dims || t.dims.length < 2) continue;
    const n = t.dims.reduce((x, y) => x * y, 1);
    all += n;
    if (t.type === 1 || t.type === 30) flt += n;
  }
  return 0.25 + (all ? 0.2 * flt / all : 0);
}

/** Whether the target's next-token distribution is one-hot under these
 * options (temperature 0: argmax after the penalties; topK 1), so that the
 * output cannot depend on what was drafted. */
export function oneHotSampling(opts = {}) {
  const t = opts.temperature ?? DEFAULT_SAMPLING.temperature, k = opts.topK ?? DEFAULT_SAMPLING.topK;
  return Number(t) <= 0 || Number(k) === 1;
}

/**
 * c and v of the cost model from a generation's own timings: passMs[k] the
 * mean wall time of a target round with k drafts (NaN: none yet), draftMs
 * the draft's mean time per drafted token, overheadMs what a drafting round
 * of the draft costs beyond its k tokens (its catch-up over the tokens the
 * last round added, the call; 0 when not known). The target rounds are
 * fitted by a line T(k) = T0 (1 + v k) (least squares over the k seen; with
 * one k seen, v = fixedV and T0 follows from it); c = draftMs / T0, the
 * overhead o = overheadMs / T0 (at least 0). null until a target round and
 * a draft have been timed.
 */
export function measuredCosts(passMs, draftMs, fixedV, overheadMs = 0) {
  const pts = [];
  passMs.forEach((t, k) => { if (Number.isFinite(t) && t > 0) pts.push([k, t]); });
  if (!pts.length || !(draftMs > 0)) return null;
  let t0, v;
  if (pts.length === 1) {
    const [k, t] = pts[0];
    t0 = t / (1 + fixedV * k); v = fixedV;
  } else {
    const n = pts.length, mk = pts.reduce((a, p) => a + p[0], 0) / n, mt = pts.reduce((a, p) => a + p[1], 0) / n;
    let sxy = 0, sxx = 0;
    for (const [k, t] of pts) { sxy += (k - mk) * (t - mt); sxx += (k - mk) ** 2; }
    const slope = sxy / sxx;
    t0 = mt - slope * mk;
    if (!(t0 > 0)) t0 = Math.min(...pts.map((p) => p[1]));
    v = Math.min(Math.max(slope / t0, 0), 2);
  }
  const o = Number.isFinite(overheadMs) ? Math.min(Math.max(overheadMs / t0, 0), 4) : 0;
  return { draftCost: Math.min(draftMs / t0, 4), verifyCost: v, draftOverhead: o };
}

export async function* speculative(target, draft, prompt, opts = {}) {
  const { signal, draft: _d, draftTokens = 4, adaptive = true, ...rest } = opts;
  if (draft.disposed) throw new WasmlmError('DISPOSED', 'draft model disposed');
  const kMax = Math.max(1, Math.min(Number(draftTokens) | 0 || 4, 32));
  await checkVocab(target, draft);
  const session = sessionSeq++;
  const t0 = Date.now();
  let ended = false;
  const options = { ...rest, draftTokens: kMax };
  const { committed } = await withSignal(target[CHANNEL], 'specStart', { session, prompt, options }, signal);
  let saveTimings = () => {};
  try {
    await draft[CHANNEL].call('draftStart', { session, options: rest });
    const fixed = { draftCost: (draft.info?.fileSize || 1) / (target.info?.fileSize || 1), verifyCost: verifyCostOf(target.info) };
    const timed = adaptive && oneHotSampling(rest);   // greedy: costs from this generation's timings
    let costs = fixed;
    let draftMs = 0, rounds = 0, plainRounds = 0, sincePlain = 0, probeEvery = PROBE, hopeless = false;
    let proposed = 0, accepted = 0;
    // timings (timed): a target round's ms by its number of drafts, the
    // draft's ms per token, the rest of its drafting rounds. The first two
    // are the least of their last 8 samples: a round's work is the same each
    // time, and what varies is one-sided (a collection, a function compiled
    // by V8's optimizing tier only after its first calls, so by a mean one
    // slow first sample would set the costs of the whole generation)
    const memo = timed ? carriedTimings(target, draft) : null;
    const passS = Array.from({ length: kMax + 1 }, (_, i) => (memo?.passS?.[i] || []).slice()), draftS = (memo?.draftS || []).slice();
    let overMs = memo ? memo.overMs : NaN, overN = memo ? memo.overN : 0;
    const push8 = (a, x) => { a.push(x); if (a.length > 8) a.shift(); };
    const least = (a) => (a.length ? Math.min(...a) : NaN);
    const mean = (m, n, x) => (n === 0 ? x : m + (x - m) / Math.min(n + 1, 8));   // the last ~8 weigh most
    saveTimings = () => { if (memo) Object.assign(memo, { passS, draftS, overMs, overN }); };
    const measured = () => measuredCosts(passS.map(least), least(draftS), fixed.verifyCost, overMs);
    // whether the timings so far say that no k could pay: two drafting rounds
    // and two draft lengths timed first, so that one slow round does not decide it
    const noKPays = () => draftS.length >= 2 && passS.filter((a) => a.length).length >= 2 && !draftingCanPay(kMax, costs);
    if (timed && draftS.length) {
      costs = measured() || fixed;
      if (costs !== fixed && noKPays()) hopeless = true;
    }
    // the first round drafts at least 1 token (2 when timed afresh: its second
    // draft step times a draft token); none when carried timings say no k pays
    let k = !adaptive ? kMax : hopeless ? 0
      : Math.min(kMax, Math.max(timed && costs === fixed ? 2 : 1, chooseDraftTokens(kMax, PRIOR_ACCEPTANCE, costs.draftCost, costs.verifyCost, costs.draftOverhead || 0)));
    for (;;) {
      if (signal && signal.aborted) throw abortError(signal);
      let p = { tokens: [], qs: [] };
      if (k > 0) {
        const td = performance.now();
        p = await draft[CHANNEL].call('draftPropose', { session, ids: committed, k });
        const ms = performance.now() - td;
        draftMs += ms;
        // a draft token's cost: a step of the draft's loop (timed there, in
        // its worker), or a one-token round's time when it caught up over only
        // the 1-2 tokens the last round added; the long catch-up after plain
        // rounds is the probes' cost, not a draft token's
        const tok = Number.isFinite(p.stepMs) ? p.stepMs : p.tokens.length && p.caughtUp <= 2 ? ms / p.tokens.length : NaN;
        if (tok > 0) push8(draftS, tok);
        // the rest of a drafting round's draft time (its catch-up over the 1-2
        // tokens the last round added, the call), which k c leaves out
        if (Number.isFinite(p.stepMs) && p.caughtUp <= 2) { overMs = mean(overMs, overN, ms - p.tokens.length * p.stepMs); overN++; }
      }
      const transfer = p.qs.flatMap((q) => [q.ids.buffer, q.probs.buffer]);
      const tr = performance.now();
      let r;
      if (hopeless) {
        // no more drafts: the target's worker runs the rest as plain rounds,
        // streaming their tokens, without a call a token (a measurable share
        // of a small model's step)
        const it = streamRequest(target[CHANNEL], 'specRound', { session, drafts: [], qs: [], plain: 2 ** 31 }, signal);
        try {
          for (;;) {
            const x = await it.next();
            if (x.done) { r = x.value; break; }
            const c = x.value;
            if (c.token >= 0) { committed.push(c.token); rounds++; plainRounds++; }
            yield chunkOf(c);
          }
        } finally {
          await it.return();
        }
      } else {
        r = await target[CHANNEL].call('specRound', { session, drafts: p.tokens, qs: p.qs }, { transfer });
      }
      const nd = p.tokens.length;
      // a pass's time, without the prompt prefill the first round also does
      // (a cached prompt's last token, which would inflate the first pass's v)
      if (timed && !hopeless && !r.done) push8(passS[nd], performance.now() - tr - (r.prefillMs || 0));
      rounds++;
      if (!p.tokens.length) plainRounds++;
      for (const c of r.chunks || []) {
        if (signal && signal.aborted) throw abortError(signal);
        if (c.token >= 0) committed.push(c.token);
        yield chunkOf(c);
      }
      if (r.done) {
        ended = true;
        if (r.tail) yield { text: r.tail, token: -1, logprob: 0 };
        if (r.finishReason === 'abort') throw abortError(signal);
        const { done, tail, chunks, ...result } = r;
        result.stats.speculative = {
          ...result.stats.speculative, draftMs, rounds, plainRounds, wallMs: Date.now() - t0, adaptive,
          ...(adaptive ? { costModel: costs === fixed ? 'fixed' : 'measured', draftCost: costs.draftCost, verifyCost: costs.verifyCost, draftOverhead: costs.draftOverhead || 0, stoppedDrafting: hopeless } : {}),
        };
        return result;
      }
      proposed += p.tokens.length; accepted += r.accepted || 0;
      if (adaptive && proposed > 0) {
        // the rate with PRIOR_WEIGHT pseudo-drafts at PRIOR_ACCEPTANCE: one
        // lucky first draft no longer reads as a perfect draft (1 of 1 made
        // the next rounds draft kMax tokens)
        if (timed) costs = measured() || fixed;
        k = chooseDraftTokens(kMax, (accepted + PRIOR_WEIGHT * PRIOR_ACCEPTANCE) / (proposed + PRIOR_WEIGHT), costs.draftCost, costs.verifyCost, costs.draftOverhead || 0);
        // timed costs at which no k pays even if every draft were accepted:
        // this host's draft and verification are too dear for this pair, so
        // probing only costs catch-ups (bench/results/README.md)
        if (timed && costs !== fixed && noKPays()) hopeless = true;
        if (k > 0) probeEvery = PROBE;
        // a probe drafts one token (two when timed: its second step times a draft token)
        else if (!hopeless && ++sincePlain >= probeEvery) { k = timed ? Math.min(2, kMax) : 1; sincePlain = 0; probeEvery = Math.min(probeEvery * 2, PROBE_MAX); }
      }
    }
  } finally {
    saveTimings();
    draft[CHANNEL].call('draftEnd', { session }).catch(() => {});
    if (!ended) target[CHANNEL].call('specEnd', { session }).catch(() => {});
  }
}
