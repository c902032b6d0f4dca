// Inference-time scaling on one engine (runs in the model's worker):
//   startBatch       n candidates from one prompt, decoded together: the
//                    prompt is prefilled once into sequence 0 and forked to
//                    sequences 1..n-1 (the cache slots are shared, not
//                    copied); each step evaluates the next token of every
//                    live candidate in ONE forward pass, so every weight is
//                    read once per step for the whole batch.
//   startBeam        beam search on forked sequences.
//   startSpeculative the target side of speculative decoding: checks k draft
//                    tokens in one batched pass with the rejection-sampling
//                    rule (wlm_spec_accept); drafts come from another model
//                    (draftPropose, run by that model's engine) or from
//                    n-gram matches in the context (prompt lookup).
// Each start* returns a stepper built on the one generation loop
// (./generation.js); the worker calls it step by step so that aborts are
// seen between steps and progress can be streamed. Strategies use only the
// Engine's public operations (prefill, evalBatch, sample, specAccept,
// distribution, fork / remove / rewind a sequence, logitsRow).
import { Stream, samplingOptions, promptIdsOf } from './stream.js';
import { GrammarState } from './grammar.js';
import { generationLoop, checkPromptFits, streamResult } from './generation.js';
import { EngineError } from '../errors.js';
import { STATUS_CONTEXT_FULL } from './heap.js';

const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());
const SEED_STEP = 1n; // candidate i samples with seed + i: it equals generate(prompt, {seed: seed + i})

// ---- best-of-N: n candidates in one batch ------------------------------------

/**
 * @param {object} opts sampling options + {n}
 * Stepper: step(shouldStop) -> {events:[{index,text,token,logprob}]} | {done:true, candidates, stats}
 */
export function startBatch(eng, prompt, opts = {}) {
  eng.requireModel();
  const o = samplingOptions(opts);
  const n = opts.n == null ? 4 : Number(opts.n);
  if (!Number.isInteger(n) || n < 1 || n > 64) throw new EngineError(`n must be an integer in 1..64, got ${opts.n}`, 1);
  const promptIds = promptIdsOf(eng, prompt, o);
  checkPromptFits(eng, promptIds);
  const limit = eng.ctxLimit;              // positions per candidate
  const perCand = Math.min(o.maxTokens, limit - promptIds.length);
  const grew = eng.ensureContext({ nSeq: n, slots: promptIds.length + n * perCand, outputs: n });
  const t0 = now();
  const seedOf = (i) => BigInt.asUintN(64, o.seed + BigInt(i) * SEED_STEP);
  const cands = [];
  for (let i = 0; i < n; i++) {
    const c = new Stream(eng, o, seedOf(i), promptIds);
    c.index = i; c.seq = i; c.row = 0; c.pos = promptIds.length;
    cands.push(c);
  }
  const stats = { promptTokens: promptIds.length, reusedPromptTokens: 0, prefillMs: 0, decodeMs: 0, steps: 0, contextGrown: grew };
  if (cands[0].grammarStats) stats.grammar = cands[0].grammarStats;

  function end(reason, events = []) {
    for (const c of cands) {
      const tail = c.finish(reason);
      if (tail) events.push({ index: c.index, text: tail, token: -1, logprob: 0 });
    }
    eng.removeOtherSequences();
    const list = cands.map((c) => ({
      index: c.index, seed: String(seedOf(c.index)),
      text: c.text, ...c.tokenFields(), finishReason: c.finishReason,
    }));
    for (const c of cands) c.free();
    const total = list.reduce((a, c) => a + c.tokens.length, 0);
    return {
      done: true, events, candidates: list,
      stats: { ...stats, wallMs: now() - t0, totalTokens: total, tokensPerSec: stats.decodeMs > 0 ? total / (stats.decodeMs / 1000) : 0 },
    };
  }

  // one step: every live candidate samples its next token, then all of them are evaluated in one pass
  function decode() {
    const events = [], toks = [], seqs = [], who = [];
    for (const c of cands) {
      if (c.finishReason) continue;
      const allow = c.nextAllow();
      if (allow === null) { if (c.seq !== 0) eng.removeSequence(c.seq); continue; }   // the grammar ends it
      const { token, logprob } = eng.sample(c.row, o, c.history, c.st.rng, allow);
      const ev = c.push(token, logprob, c.pos >= limit, c.top(c.row));
      if (ev) events.push({ index: c.index, ...ev });
      if (c.finishReason) { if (c.seq !== 0) eng.removeSequence(c.seq); continue; }
      toks.push(token); seqs.push(c.seq); who.push(c);
    }
    if (toks.length) {
      if (!eng.evalBatch(toks, seqs)) for (const c of who) c.finishReason = 'context';
      else who.forEach((c, r) => { c.row = r; c.pos++; });
    }
    stats.steps++;
    if (cands.every((c) => c.finishReason)) return end(null, events);
    return { events };
  }

  return generationLoop({
    eng, promptIds, o, stats, decode, what: 'batch',
    afterPrefill() { for (let i = 1; i < n; i++) eng.forkSequence(0, i); },
    end: (reason) => end(reason),
    cleanup() { eng.removeOtherSequences(); for (const c of cands) c.free(); },
  });
}

// ---- beam search ---------------------------------------------------------------

/** log-softmax pieces of a logits row: the top `k` tokens by logit and log Z;
 * with a grammar's bitset `allow` (a wasm address) only its tokens count,
 * so the log-probabilities are renormalised over them. */
function topK(eng, row, k, allow = 0) {
  const nv = eng.hparams.nVocab;
  const f = eng.logitsRow(row), b = 0;
  const u8 = eng.u8, ok = allow ? (i) => (u8[allow + (i >>> 3)] >> (i & 7)) & 1 : () => 1;
  let m = -Infinity;
  for (let i = 0; i < nv; i++) { const v = f[b + i]; if (v > m && v < Infinity && ok(i)) m = v; }
  let s = 0;
  for (let i = 0; i < nv; i++) { const v = f[b + i]; if (v > -Infinity && v < Infinity && ok(i)) s += Math.exp(v - m); }
  const logZ = m + Math.log(s);
  // keep the best k (largest logit, lowest id on ties)
  const ids = [], vals = [];
  for (let i = 0; i < nv; i++) {
    const v = f[b + i];
    if (!(v > -Infinity && v < Infinity) || !ok(i)) continue;
    if (ids.length === k && !(v > vals[k - 1])) continue;
    let j = ids.length < k ? ids.length : k - 1;       // the slot to fill; a full list drops its last
    while (j > 0 && vals[j - 1] < v) { vals[j] = vals[j - 1]; ids[j] = ids[j - 1]; j--; }
    vals[j] = v; ids[j] = i;
  }
  return { ids, lps: vals.map((v) => v - logZ) };
}

/**
 * Beam search: at each step every live beam is extended by its best tokens,
 * and the `beams` best continuations by total log-probability survive.
 * A beam that picks an end-of-generation token is finished. Scores are
 * logprob / length^lengthPenalty. Deterministic (no sampling). With a
 * grammar each beam has its own recognizer state (children copy their
 * parent's) and ranks only the tokens the grammar allows, log-probabilities
 * renormalised over them; a beam the grammar completes (nothing else may
 * follow) or leads to a dead end is finished ('stop' / 'grammar').
 */
export function startBeam(eng, prompt, opts = {}) {
  eng.requireModel();
  const o = samplingOptions({ ...opts, temperature: 0 });
  const B = opts.beams == null ? 4 : Number(opts.beams);
  if (!Number.isInteger(B) || B < 1 || B > 32) throw new EngineError(`beams must be an integer in 1..32, got ${opts.beams}`, 1);
  const lp = opts.lengthPenalty == null ? 1 : Number(opts.lengthPenalty);
  if (!Number.isFinite(lp)) throw new EngineError('lengthPenalty must be a finite number', 1);
  const promptIds = promptIdsOf(eng, prompt, o);
  checkPromptFits(eng, promptIds);
  const steps = Math.min(o.maxTokens, eng.ctxLimit - promptIds.length);
  eng.ensureContext({ nSeq: 2 * B, slots: promptIds.length + B * steps + B, outputs: B });
  const score = (logprob, len) => logprob / Math.pow(Math.max(len, 1), lp);
  const t0 = now();
  const grammar = o.grammar ? eng.grammars.get(o.grammar) : null;
  let live = [{ seq: 0, tokens: [], logprob: 0, row: 0, gs: grammar ? new GrammarState(grammar, o.ignoreEos) : null }];
  const done = [];
  const stats = { prefillMs: 0, decodeMs: 0, steps: 0 };
  const freeStates = (beams) => { for (const b of beams) if (b.gs) b.gs.free(); };

  // the beams, best first; the cache keeps the prompt only
  function result() {
    freeStates(live);
    const all = done.concat(live.map((b) => ({ tokens: b.tokens, logprob: b.logprob, finishReason: b.tokens.length >= o.maxTokens ? 'length' : 'context' })));
    all.forEach((b) => { b.score = score(b.logprob, b.tokens.length + (b.finishReason === 'stop' ? 1 : 0)); });
    all.sort((a, b) => b.score - a.score);
    eng.removeOtherSequences();
    if (!(eng.sequenceLength(0) >= promptIds.length && eng.rewindSequence(0, promptIds.length))) eng.clearCache();
    const beams = all.slice(0, B).map((b) => ({ text: eng.detokenize(b.tokens), tokens: b.tokens, logprob: b.logprob, score: b.score, finishReason: b.finishReason }));
    return { done: true, beams, stats: { promptTokens: promptIds.length, steps: stats.steps, wallMs: now() - t0 } };
  }
  function aborted() {
    freeStates(live);
    eng.removeOtherSequences(); eng.clearCache();
    return { done: true, aborted: true };
  }

  // sequences: a beam's first child continues in its sequence, others fork it
  function placeChildren(next) {
    const used = new Set(), inUse = new Set(live.map((b) => b.seq)), claimed = new Set();
    const free = () => { for (let s = 0; s < 2 * B; s++) if (!inUse.has(s) && !claimed.has(s)) { claimed.add(s); return s; } throw new EngineError('beam search ran out of sequences', 7); };
    for (const c of next) {
      const parent = live[c.bi];
      if (!used.has(c.bi)) { used.add(c.bi); c.seq = parent.seq; }
      else { c.seq = free(); eng.forkSequence(parent.seq, c.seq); }
    }
    live.forEach((b, bi) => { if (!used.has(bi)) eng.removeSequence(b.seq); });
  }

  function decode() {
    // candidates: each live beam's best 2B tokens
    const cands = [];
    live.forEach((b, bi) => {
      const allow = b.gs ? b.gs.before() : 0;
      if (b.gs && b.gs.end) { done.push({ tokens: b.tokens.slice(), logprob: b.logprob, finishReason: b.gs.end }); return; }
      const { ids, lps } = topK(eng, b.row, 2 * B, allow);
      ids.forEach((t, j) => cands.push({ bi, token: t, logprob: b.logprob + lps[j] }));
    });
    cands.sort((a, b) => b.logprob - a.logprob || a.bi - b.bi || a.token - b.token);
    const next = [];
    for (const c of cands) {
      if (next.length >= B) break;
      const parent = live[c.bi];
      if (!o.ignoreEos && eng.isEog(c.token)) {
        done.push({ tokens: parent.tokens.slice(), logprob: c.logprob, finishReason: 'stop' });
        continue;
      }
      next.push(c);
    }
    stats.steps++;
    if (done.length >= B || next.length === 0) { freeStates(live); live = []; return result(); }
    placeChildren(next);
    const parents = live;
    live = next.map((c) => {
      const p = parents[c.bi], gs = p.gs ? p.gs.fork() : null;
      if (gs) gs.after(c.token);
      return { seq: c.seq, tokens: p.tokens.concat([c.token]), logprob: c.logprob, row: 0, gs };
    });
    freeStates(parents);
    if (live[0].tokens.length >= steps) return result();
    if (!eng.evalBatch(live.map((b) => b.tokens[b.tokens.length - 1]), live.map((b) => b.seq))) return result();
    live.forEach((b, r) => { b.row = r; });
    return { done: false };
  }

  return generationLoop({
    eng, promptIds, o: { ...o, maxTokens: steps, reusePrefix: true }, stats, decode, what: 'beam search',
    end: (reason) => (reason === 'abort' ? aborted() : result()),
    cleanup() { freeStates(live); eng.removeOtherSequences(); eng.clearCache(); },
  });
}

// ---- speculative decoding --------------------------------------------------------

/** Drafts from the context itself: up to k tokens continuing the latest
 * earlier occurrence of the last n tokens (n = maxNgram, ..., 1). The copy
 * may run on into the draft itself, so a stretch that repeats with period p
 * drafts k tokens, not just the p that precede the end of the context. */
export function lookupDraft(tokens, k, maxNgram = 3) {
  const len = tokens.length;
  for (let n = Math.min(maxNgram, len - 1); n >= 1; n--) {
    for (let j = len - n - 1; j >= 0; j--) {
      let ok = true;
      for (let i = 0; i < n; i++) if (tokens[j + i] !== tokens[len - n + i]) { ok = false; break; }
      if (!ok) continue;
      const from = j + n, out = [];
      for (let i = 0; i < k; i++) { const p = from + i; out.push(p < len ? tokens[p] : out[p - len]); }
      return out;
    }
  }
  return [];
}

/** Prompt lookup's adaptive draft length: after a round that drafted, the
 * tokens it accepted + 2 (at least 1, at most kMax); before the first such
 * round min(kMax, 4). Its drafts come in runs: a copied stretch is right
 * until the text stops repeating it, so the last run length predicts the
 * next better than an average rate; replayed over the benchmark prompts it
 * beat every fixed draft length (bench/results/README.md, prompt lookup).
 * Only tokens decide it, so a seed gives the same result everywhere. */
export function nextLookupTokens(kMax, k, drafted, accepted) {
  if (k == null) return Math.min(kMax, 4);
  if (!drafted) return k;
  return Math.max(1, Math.min(kMax, accepted + 2));
}

/**
 * The target side of speculative decoding. round(drafts, qs) checks the
 * draft tokens (qs[i] = {ids, probs}: the distribution drafts[i] was drawn
 * from; null = one-hot, as prompt lookup proposes) in one forward pass and
 * returns the emitted chunks. A round always emits at least one token.
 * With {lookup: true}, round('lookup') drafts from the context itself.
 */
export function startSpeculative(eng, prompt, opts = {}, { lookup = false } = {}) {
  eng.requireModel();
  const o = samplingOptions(opts);
  const promptIds = promptIdsOf(eng, prompt, o);
  checkPromptFits(eng, promptIds);
  const limit = eng.ctxLimit;
  // prompt lookup drafts for free, so its default bound is higher: the
  // adaptive length (nextLookupTokens) rarely reaches it
  const maxDraft = Math.max(1, Math.min(opts.draftTokens ?? (lookup ? 8 : 4), 32));
  const adaptiveLookup = opts.adaptive !== false;
  let lookK = adaptiveLookup ? nextLookupTokens(maxDraft, null) : maxDraft;
  eng.ensureContext({ nSeq: 1, slots: 0, outputs: maxDraft + 1 });
  const s = new Stream(eng, o, o.seed, promptIds);
  const committed = promptIds.slice();
  const stats = { promptTokens: promptIds.length, reusedPromptTokens: 0, prefillMs: 0, decodeMs: 0, targetPasses: 0, proposed: 0, accepted: 0 };
  let firstRound = true;

  function end(reason, chunks) {
    const tail = s.finish(reason);
    s.free();
    const r = streamResult(s, stats);
    r.stats.speculative = {
      targetPasses: stats.targetPasses, proposed: stats.proposed, accepted: stats.accepted,
      acceptanceRate: stats.proposed ? stats.accepted / stats.proposed : 0,
      tokensPerPass: stats.targetPasses ? s.tokens.length / stats.targetPasses : 0,
      draftTokens: maxDraft,
      ...(lookup ? { adaptive: adaptiveLookup } : {}),
    };
    return { done: true, tail, ...r, ...(chunks ? { chunks } : {}) };
  }

  // the room for drafts this round: bounded by maxTokens, the context and the logits rows
  const room = (k) => Math.max(0, Math.min(k, o.maxTokens - s.tokens.length - 1, limit - committed.length, eng.nOutputs - 1));

  // one round: the cache is brought to committed + drafts (only what it lacks
  // is evaluated, in one pass), then each draft is accepted or replaced
  function verify(drafts, qs) {
    const fromContext = drafts === 'lookup';
    if (fromContext) { drafts = lookupDraft(committed, room(lookK)); qs = null; }
    drafts = (drafts || []).slice(0, room(drafts ? drafts.length : 0));
    const have = eng.tokensOf(0);
    let L = 0;
    const max = Math.min(have.length, committed.length - 1);
    while (L < max && have[L] === committed[L]) L++;
    // a rewind the window ring cannot serve (a verification pass longer than
    // batchSize, whose first chunk's rows the later chunks dropped): evaluate again
    if (L < have.length && !eng.rewindSequence(0, L)) { eng.clearCache(); L = 0; }
    const batch = committed.slice(L).concat(drafts);
    const want = batch.map((_, i) => i >= batch.length - drafts.length - 1);
    if (!eng.evalBatch(batch, batch.map(() => 0), want, 'verify')) return end('context');
    stats.targetPasses++;
    stats.proposed += drafts.length;
    const chunks = [];
    let acc = 0;
    for (let i = 0; i <= drafts.length; i++) {
      let token, logprob, accepted = 0;
      const allow = s.nextAllow();
      if (allow === null) return end(null, chunks);   // the grammar ends it
      if (i < drafts.length) ({ token, accepted, logprob } = eng.specAccept(i, o, s.history, drafts[i], qs && qs[i], s.st.rng, allow));
      else ({ token, logprob } = eng.sample(i, o, s.history, s.st.rng, allow));
      if (accepted) { stats.accepted++; acc++; }
      const ev = s.push(token, logprob, committed.length >= limit, s.top(i));
      if (ev) chunks.push(ev);
      if (s.finishReason) return end(null, chunks);
      committed.push(token);
      if (!accepted) break;
    }
    if (fromContext && adaptiveLookup) lookK = nextLookupTokens(maxDraft, lookK, drafts.length, acc);
    // this round's prompt prefill (the first round) is reported apart from its pass
    const prefillMs = firstRound ? stats.prefillMs : 0;
    firstRound = false;
    return { done: false, chunks, accepted: acc, proposed: drafts.length, prefillMs };
  }

  let pending = null;   // this round's drafts, for the loop's decode step
  const loop = generationLoop({
    eng, promptIds, o, stats, what: 'generation',
    decode: () => verify(pending.drafts, pending.qs),
    end: (reason) => end(reason),
    cleanup() { s.free(); },
  });
  return {
    get committed() { return committed; },
    get finished() { return loop.finished; },
    round(drafts, qs, shouldStop) {
      pending = { drafts, qs };
      return loop.step(shouldStop);
    },
  };
}

/**
 * The draft side: state for one speculative generation on the draft model.
 * propose(ids, k) brings the draft's cache to `ids` (the committed tokens;
 * only what differs is evaluated), then samples k tokens one by one,
 * returning them with the distributions they were drawn from.
 */
export function startDraft(eng, opts = {}) {
  eng.requireModel();
  const o = samplingOptions(opts);
  const st = eng.allocStream();   // the draft's own rng
  eng.seedRng(st.rng, BigInt.asUintN(64, o.seed ^ 0x9e3779b97f4a7c15n));
  const nv = eng.hparams.nVocab;
  const cap = o.topK > 0 ? Math.min(o.topK, nv) : nv;
  let closed = false;
  return {
    propose(ids, k) {
      if (closed) throw new EngineError('draft session closed', 7);
      const tokens = [], qs = [];
      const { status, reused } = eng.prefill(ids);
      const caughtUp = ids.length - reused;   // tokens the draft had not seen (1 after a drafting round)
      if (status === STATUS_CONTEXT_FULL) return { tokens, qs, caughtUp };
      eng.check(status, 'draft prefill');
      const history = ids.slice(-Math.max(o.repeatLastN, 1));
      // stepMs: the mean time of a draft step after the first (one token's
      // evaluation and the sampling of the next), NaN when k = 1 (the
      // caller's cost model). The clock starts at the first evaluation: a
      // start at the second sampling left one evaluation out of every round
      // (k = 2 timed a sampling alone, and the cost model then drafted where
      // it lost; bench/results/ has the measurement)
      let tStep = 0;
      for (let i = 0; i < k; i++) {
        const { ids: qi, probs: qp } = eng.distribution(0, o, history, cap);
        const n = qi.length;
        if (n === 0) break;
        // x ~ q with the draft's own rng (greedy: q is one-hot)
        let x = qi[n - 1];
        if (n > 1) {
          const u = eng.rngFloat(st.rng);
          let cum = 0;
          for (let j = 0; j < n; j++) { cum += qp[j]; if (u < cum) { x = qi[j]; break; } }
        }
        tokens.push(x); qs.push({ ids: qi, probs: qp });
        history.push(x);
        if (eng.isEog(x) && !o.ignoreEos) break;
        if (i + 1 < k) {
          if (i === 0) tStep = now();
          if (eng.append([x]) !== 0) break;
        }
      }
      return { tokens, qs, caughtUp, stepMs: tokens.length > 1 ? (now() - tStep) / (tokens.length - 1) : NaN };
    },
    close() { if (!closed) { closed = true; eng.free(st.block); } },
  };
}

/** A fingerprint of the vocabulary (size + every token's bytes), cached by the engine. */
export function vocabFingerprint(eng) {
  return eng.vocabFingerprint();
}
