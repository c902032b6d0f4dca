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
// Each start* returns a stepper; the worker calls it step by step so that
// aborts are seen between steps and progress can be streamed.
import { Stream, samplingOptions, promptIdsOf, sampleAt, STATUS_CONTEXT_FULL } from './engine.js';
import { EngineError } from '../errors.js';
import { SCRATCH } from './abi.js';

const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());
const SEED_STEP = 1n; // candidate i samples with seed + i: it equals generate(prompt, {seed: seed + i})

/** wlm_eval_batch over (token, seq) pairs; want[i] (default all) asks for row i's logits. */
function evalBatch(eng, tokens, seqs, want) {
  const n = tokens.length;
  if (!eng._batchBuf || eng._batchCap < n) {       // grows rarely, reused every step
    eng.free(eng._batchBuf);
    eng._batchCap = Math.max(n, 64);
    eng._batchBuf = eng.alloc(eng._batchCap * 9 + 8);
  }
  const p = eng._batchBuf, cap = eng._batchCap;
  const i32 = eng.i32, u8 = eng.u8, b = p >>> 2;
  for (let i = 0; i < n; i++) { i32[b + i] = tokens[i]; i32[b + cap + i] = seqs[i]; u8[p + 8 * cap + i] = want ? (want[i] ? 1 : 0) : 1; }
  eng._clearErr();
  return eng.x.wlm_eval_batch(eng.ctx, p, p + 4 * cap, p + 8 * cap, n, eng.scratch);
}

function logitsRow(eng, row) {
  return (eng.x.wlm_ctx_logits(eng.ctx) >>> 0) + row * eng.hparams.nVocab * 4;
}

/** Prefills the prompt into sequence 0 (reusing a cached prefix), timing it
 * into stats; false when stopped. */
function prefill(eng, promptIds, shouldStop, o, stats) {
  const t = now();
  const { status, reused } = eng._prefill(promptIds, shouldStop, o.reusePrefix);
  stats.prefillMs = now() - t; stats.reusedPromptTokens = reused;
  if (status === -1) return false;
  eng._check(status, 'prefill');
  return true;
}

function removeOthers(eng) {
  for (let s = 1; s < eng.nSeqMax; s++) eng.x.wlm_seq_remove(eng.ctx, s, 0);
}

// ---- best-of-N: n candidates in one batch ------------------------------------

/**
 * @param {object} opts sampling options + {n}
 * Stepper: step(shouldStop) -> {events:[{index,text,token,logprob}]} | {done:true, candidates, stats}
 */
export function startBatch(eng, prompt, opts = {}) {
  eng._requireModel();
  const o = samplingOptions(opts);
  const n = opts.n == null ? 4 : Number(opts.n);
  if (!Number.isInteger(n) || n < 1 || n > 64) throw new EngineError(`n must be an integer in 1..64, got ${opts.n}`, 1);
  const promptIds = promptIdsOf(eng, prompt, o);
  const limit = eng.ctxLimit;              // positions per candidate
  if (promptIds.length >= limit) throw new EngineError(`prompt of ${promptIds.length} tokens does not fit the context (${limit} tokens)`, STATUS_CONTEXT_FULL);
  const perCand = Math.min(o.maxTokens, limit - promptIds.length);
  const grew = eng._ensureCtx({ nSeq: n, slots: promptIds.length + n * perCand, outputs: n });
  const t0 = now();
  const cands = [];
  for (let i = 0; i < n; i++) {
    const c = new Stream(eng, o, BigInt.asUintN(64, o.seed + BigInt(i) * SEED_STEP), promptIds);
    c.index = i; c.seq = i; c.row = 0; c.pos = promptIds.length;
    cands.push(c);
  }
  const stats = { promptTokens: promptIds.length, reusedPromptTokens: 0, prefillMs: 0, decodeMs: 0, steps: 0, contextGrown: grew };
  let started = false, finished = false;

  function end(reason) {
    finished = true;
    const events = [];
    for (const c of cands) {
      const tail = c.finish(reason);
      if (tail) events.push({ index: c.index, text: tail, token: -1, logprob: 0 });
    }
    removeOthers(eng);
    const list = cands.map((c) => ({
      index: c.index, seed: String(BigInt.asUintN(64, o.seed + BigInt(c.index) * SEED_STEP)),
      text: c.text, tokens: c.tokens.slice(), logprobs: c.logprobs.slice(), finishReason: c.finishReason,
    }));
    for (const c of cands) c.free();
    const total = list.reduce((a, c) => a + c.tokens.length, 0);
    const wallMs = now() - t0;
    return {
      done: true, events, candidates: list,
      stats: { ...stats, wallMs, totalTokens: total, tokensPerSec: stats.decodeMs > 0 ? total / (stats.decodeMs / 1000) : 0 },
    };
  }

  return {
    step(shouldStop) {
      if (finished) throw new EngineError('batch already finished', 7);
      try {
        if (!started) {
          started = true;
          if (!prefill(eng, promptIds, shouldStop, o, stats)) return end('abort');
          for (let i = 1; i < n; i++) eng._check(eng.x.wlm_seq_fork(eng.ctx, 0, i, eng.scratch), 'fork');
          if (o.maxTokens === 0) return end('length');
        }
        if (shouldStop && shouldStop()) return end('abort');
        const t = now();
        const events = [], toks = [], seqs = [], who = [];
        for (const c of cands) {
          if (c.finishReason) continue;
          const { token, logprob } = sampleAt(eng, logitsRow(eng, c.row), o, c.history, c.st.rng);
          const ev = c.push(token, logprob, c.pos >= limit);
          if (ev) events.push({ index: c.index, ...ev });
          if (c.finishReason) { if (c.seq !== 0) eng.x.wlm_seq_remove(eng.ctx, c.seq, 0); continue; }
          toks.push(token); seqs.push(c.seq); who.push(c);
        }
        if (toks.length) {
          const st = evalBatch(eng, toks, seqs, null);
          if (st === STATUS_CONTEXT_FULL) { for (const c of who) c.finishReason = 'context'; }
          else {
            eng._check(st, 'decode');
            who.forEach((c, r) => { c.row = r; c.pos++; if (c.seq === 0) eng.seqTokens.push(c.tokens[c.tokens.length - 1]); });
          }
        }
        stats.steps++;
        stats.decodeMs += now() - t;
        if (cands.every((c) => c.finishReason)) {
          const r = end(null);
          r.events = events.concat(r.events);
          return r;
        }
        return { events };
      } catch (e) {
        if (!finished) { finished = true; removeOthers(eng); for (const c of cands) c.free(); eng.seqTokens.length = Math.min(eng.seqTokens.length, eng.x.wlm_seq_pos(eng.ctx, 0)); }
        throw e;
      }
    },
  };
}

// ---- beam search ---------------------------------------------------------------

/** log-softmax pieces of a logits row: the top `k` tokens by logit and log Z. */
function topK(eng, row, k) {
  const nv = eng.hparams.nVocab;
  const f = eng.f32, b = logitsRow(eng, row) >>> 2;
  let m = -Infinity;
  for (let i = 0; i < nv; i++) { const v = f[b + i]; if (v > m && v < Infinity) m = v; }
  let s = 0;
  for (let i = 0; i < nv; i++) { const v = f[b + i]; if (v > -Infinity && v < Infinity) s += Math.exp(v - m); }
  const logZ = m + Math.log(s);
  // keep the best k (largest logit, lowest id on ties)
  const ids = [], vals = [];
  for (let i = 0; i < nv; i++) {
    const v = f[b + i];
    if (!(v > -Infinity && v < Infinity)) continue;
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
 * logprob / length^lengthPenalty. Deterministic (no sampling).
 */
export function startBeam(eng, prompt, opts = {}) {
  eng._requireModel();
  const o = samplingOptions({ ...opts, temperature: 0 });
  const B = opts.beams == null ? 4 : Number(opts.beams);
  if (!Number.isInteger(B) || B < 1 || B > 32) throw new EngineError(`beams must be an integer in 1..32, got ${opts.beams}`, 1);
  const lp = opts.lengthPenalty == null ? 1 : Number(opts.lengthPenalty);
  if (!Number.isFinite(lp)) throw new EngineError('lengthPenalty must be a finite number', 1);
  const promptIds = promptIdsOf(eng, prompt, o);
  const limit = eng.ctxLimit;
  if (promptIds.length >= limit) throw new EngineError(`prompt of ${promptIds.length} tokens does not fit the context (${limit} tokens)`, STATUS_CONTEXT_FULL);
  const steps = Math.min(o.maxTokens, limit - promptIds.length);
  eng._ensureCtx({ nSeq: 2 * B, slots: promptIds.length + B * steps + B, outputs: B });
  const score = (logprob, len) => logprob / Math.pow(Math.max(len, 1), lp);
  const t0 = now();
  let live = [{ seq: 0, tokens: [], logprob: 0, row: 0 }];
  const done = [];
  let started = false, finished = false, nSteps = 0;

  function result() {
    finished = true;
    const all = done.concat(live.map((b) => ({ tokens: b.tokens, logprob: b.logprob, finishReason: b.tokens.length >= o.maxTokens ? 'length' : 'context' })));
    all.forEach((b) => { b.score = score(b.logprob, b.tokens.length + (b.finishReason === 'stop' ? 1 : 0)); });
    all.sort((a, b) => b.score - a.score);
    removeOthers(eng);
    if (eng.x.wlm_seq_pos(eng.ctx, 0) >= promptIds.length) {
      eng.x.wlm_seq_truncate(eng.ctx, 0, promptIds.length, 0);
      eng.seqTokens = promptIds.slice();
    } else eng._reset();
    const beams = all.slice(0, B).map((b) => ({ text: eng.detokenize(b.tokens), tokens: b.tokens, logprob: b.logprob, score: b.score, finishReason: b.finishReason }));
    return { done: true, beams, stats: { promptTokens: promptIds.length, steps: nSteps, wallMs: now() - t0 } };
  }

  return {
    step(shouldStop) {
      if (finished) throw new EngineError('beam search already finished', 7);
      try {
        if (!started) {
          started = true;
          const { status } = eng._prefill(promptIds, shouldStop);
          if (status === -1) { finished = true; return { done: true, aborted: true }; }
          eng._check(status, 'prefill');
          if (steps === 0) return result();
        }
        if (shouldStop && shouldStop()) { finished = true; removeOthers(eng); eng._reset(); return { done: true, aborted: true }; }
        // candidates: each live beam's best 2B tokens
        const cands = [];
        live.forEach((b, bi) => {
          const { ids, lps } = topK(eng, b.row, 2 * B);
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
        nSteps++;
        if (done.length >= B || next.length === 0) { live = []; return result(); }
        // sequences: a beam's first child continues in its sequence, others fork it
        const used = new Set(), inUse = new Set(live.map((b) => b.seq));
        const claimed = new Set();
        const free = () => { for (let s = 0; s < 2 * B; s++) if (!inUse.has(s) && !claimed.has(s)) { claimed.add(s); return s; } throw new EngineError('beam search ran out of sequences', 7); };
        for (const c of next) {
          const parent = live[c.bi];
          if (!used.has(c.bi)) { used.add(c.bi); c.seq = parent.seq; }
          else { c.seq = free(); eng._check(eng.x.wlm_seq_fork(eng.ctx, parent.seq, c.seq, eng.scratch), 'fork'); }
        }
        live.forEach((b, bi) => { if (!used.has(bi)) eng.x.wlm_seq_remove(eng.ctx, b.seq, 0); });
        const nextLive = next.map((c) => ({ seq: c.seq, tokens: live[c.bi].tokens.concat([c.token]), logprob: c.logprob, row: 0 }));
        const atLimit = nextLive[0].tokens.length >= steps;
        live = nextLive;
        if (atLimit) return result();
        const st = evalBatch(eng, live.map((b) => b.tokens[b.tokens.length - 1]), live.map((b) => b.seq), null);
        if (st === STATUS_CONTEXT_FULL) return result();
        eng._check(st, 'decode');
        live.forEach((b, r) => { b.row = r; });
        return { done: false };
      } catch (e) {
        if (!finished) { finished = true; removeOthers(eng); eng._reset(); }
        throw e;
      }
    },
  };
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
 * next better than an average rate. Replayed on 7 greedy continuations
 * (s110m F16 and Q4_0, 6 prompts, most of them repetitive; a verified token
 * costing 0.25-0.45 of a plain step), the best fixed length varied from 2 to
 * 8 between prompts; this rule beat every fixed length on the geometric mean
 * and came within 6 % of each prompt's best one, except on the prompt where
 * lookup rarely helps (13 % behind drafting 2). Only tokens decide it, so a
 * seed gives the same result everywhere. */
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
 */
export function startSpeculative(eng, prompt, opts = {}, { lookup = false } = {}) {
  eng._requireModel();
  const o = samplingOptions(opts);
  const promptIds = promptIdsOf(eng, prompt, o);
  const limit = eng.ctxLimit;
  if (promptIds.length >= limit) throw new EngineError(`prompt of ${promptIds.length} tokens does not fit the context (${limit} tokens)`, STATUS_CONTEXT_FULL);
  // prompt lookup drafts for free, so its default bound is higher: the
  // adaptive length (nextLookupTokens) rarely reaches it
  const maxDraft = Math.max(1, Math.min(opts.draftTokens ?? (lookup ? 8 : 4), 32));
  const adaptiveLookup = opts.adaptive !== false;
  let lookK = adaptiveLookup ? nextLookupTokens(maxDraft, null) : maxDraft;
  eng._ensureCtx({ nSeq: 1, slots: 0, outputs: maxDraft + 1 });
  const s = new Stream(eng, o, o.seed, promptIds);
  const committed = promptIds.slice();
  const stats = { promptTokens: promptIds.length, reusedPromptTokens: 0, prefillMs: 0, decodeMs: 0, targetPasses: 0, proposed: 0, accepted: 0 };
  const nv = eng.hparams.nVocab;
  const qIds = eng.alloc(nv * 4), qProbs = eng.alloc(nv * 4);
  let started = false, finished = false;

  function end(reason) {
    finished = true;
    const tail = s.finish(reason);
    eng.free(qIds); eng.free(qProbs); s.free();
    const gen = s.tokens.length;
    return {
      done: true, tail,
      text: s.text, tokens: s.tokens.slice(), logprobs: s.logprobs.slice(), finishReason: s.finishReason,
      stats: {
        promptTokens: stats.promptTokens, reusedPromptTokens: stats.reusedPromptTokens, generatedTokens: gen,
        prefillMs: stats.prefillMs, decodeMs: stats.decodeMs,
        prefillTokensPerSec: stats.prefillMs > 0 ? (stats.promptTokens - stats.reusedPromptTokens) / (stats.prefillMs / 1000) : 0,
        decodeTokensPerSec: stats.decodeMs > 0 ? gen / (stats.decodeMs / 1000) : 0,
        speculative: {
          targetPasses: stats.targetPasses, proposed: stats.proposed, accepted: stats.accepted,
          acceptanceRate: stats.proposed ? stats.accepted / stats.proposed : 0,
          tokensPerPass: stats.targetPasses ? gen / stats.targetPasses : 0,
          draftTokens: maxDraft,
          ...(lookup ? { adaptive: adaptiveLookup } : {}),
        },
      },
    };
  }

  return {
    get committed() { return committed; },
    get finished() { return finished; },
    /** the room for drafts this round: bounded by maxTokens, the context and the logits rows */
    room(k) {
      return Math.max(0, Math.min(k, o.maxTokens - s.tokens.length - 1, limit - committed.length, eng.nOutputs - 1));
    },
    round(drafts, qs, shouldStop) {
      if (finished) throw new EngineError('generation already finished', 7);
      try {
        let prefillMs = 0;   // this round's prompt prefill (the first round), reported apart from its pass
        if (!started) {
          started = true;
          if (!prefill(eng, promptIds, shouldStop, o, stats)) return end('abort');
          if (o.maxTokens === 0) return end('length');
          prefillMs = stats.prefillMs;
        }
        if (shouldStop && shouldStop()) return end('abort');
        const t = now();
        const fromContext = drafts === 'lookup';
        if (fromContext) { drafts = lookupDraft(committed, this.room(lookK)); qs = null; }
        drafts = (drafts || []).slice(0, this.room(drafts ? drafts.length : 0));
        // the cache must hold committed + drafts; only what it lacks is evaluated
        const have = eng.seqTokens;
        let L = 0;
        const max = Math.min(have.length, committed.length - 1);
        while (L < max && have[L] === committed[L]) L++;
        if (L < have.length) { eng._check(eng.x.wlm_seq_truncate(eng.ctx, 0, L, eng.scratch), 'rewind'); have.length = L; }
        const batch = committed.slice(L).concat(drafts);
        const want = batch.map((_, i) => i >= batch.length - drafts.length - 1);
        const st = evalBatch(eng, batch, batch.map(() => 0), want);
        if (st === STATUS_CONTEXT_FULL) return end('context');
        eng._check(st, 'verify');
        for (const tk of batch) have.push(tk);
        stats.targetPasses++;
        stats.proposed += drafts.length;
        const chunks = [];
        let acc = 0;
        for (let i = 0; i <= drafts.length; i++) {
          const logitsP = logitsRow(eng, i);
          let token, logprob, accepted = 0;
          if (i < drafts.length) {
            const q = qs && qs[i];
            const n = q ? q.ids.length : 1;
            const i32 = eng.i32, f32 = eng.f32;
            if (q) { i32.set(q.ids, qIds >>> 2); f32.set(q.probs, qProbs >>> 2); }
            else { i32[qIds >>> 2] = drafts[i]; f32[qProbs >>> 2] = 1; }
            const sp = eng._writeSampler(o);
            const nh = eng._writeHist(s.history, o.repeatLastN);
            eng._clearErr();
            const r = eng.x.wlm_spec_accept(eng.ctx, logitsP, sp, eng.histBuf, nh, drafts[i], qIds, qProbs, n,
              s.st.rng, eng.scratch + SCRATCH.token, eng.scratch + SCRATCH.accepted, eng.scratch + SCRATCH.logprob, eng.scratch + SCRATCH.err);
            eng._check(r, 'accept');
            token = eng.dv.getInt32(eng.scratch + SCRATCH.token, true);
            accepted = eng.dv.getInt32(eng.scratch + SCRATCH.accepted, true);
            logprob = eng.dv.getFloat32(eng.scratch + SCRATCH.logprob, true);
          } else {
            ({ token, logprob } = sampleAt(eng, logitsP, o, s.history, s.st.rng));
          }
          if (accepted) { stats.accepted++; acc++; }
          const ev = s.push(token, logprob, committed.length >= limit);
          if (ev) chunks.push(ev);
          if (s.finishReason) { stats.decodeMs += now() - t; const r = end(null); r.chunks = chunks; return r; }
          committed.push(token);
          if (!accepted) break;
        }
        stats.decodeMs += now() - t;
        if (fromContext && adaptiveLookup) lookK = nextLookupTokens(maxDraft, lookK, drafts.length, acc);
        return { done: false, chunks, accepted: acc, proposed: drafts.length, prefillMs };
      } catch (e) {
        if (!finished) { finished = true; eng.free(qIds); eng.free(qProbs); s.free(); }
        throw e;
      }
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
  eng._requireModel();
  const o = samplingOptions(opts);
  const st = eng.alloc(32);   // the draft's own rng
  eng.x.wlm_rng_seed(st, BigInt.asUintN(64, o.seed ^ 0x9e3779b97f4a7c15n));
  const nv = eng.hparams.nVocab;
  const cap = o.topK > 0 ? Math.min(o.topK, nv) : nv;
  const idsP = eng.alloc(cap * 4), probsP = eng.alloc(cap * 4);
  let closed = false;
  return {
    propose(ids, k) {
      if (closed) throw new EngineError('draft session closed', 7);
      const tokens = [], qs = [];
      const { status, reused } = eng._prefill(ids);
      const caughtUp = ids.length - reused;   // tokens the draft had not seen (1 after a drafting round)
      if (status === STATUS_CONTEXT_FULL) return { tokens, qs, caughtUp };
      eng._check(status, 'draft prefill');
      const history = ids.slice(-Math.max(o.repeatLastN, 1));
      // stepMs: the mean time of a draft step after the first (one token's
      // evaluation and the sampling of the next), NaN when k = 1 (the
      // caller's cost model). The clock starts at the first evaluation: a
      // start at the second sampling left one evaluation out of every round
      // (k = 2 timed a sampling alone, 1/60 of a step, and the cost model
      // then drafted where it lost: 0.75x plain on a Zen 3 host)
      let tStep = 0;
      for (let i = 0; i < k; i++) {
        const logitsP = eng.x.wlm_ctx_logits(eng.ctx) >>> 0;
        const sp = eng._writeSampler(o);
        const nh = eng._writeHist(history, o.repeatLastN);
        const n = eng.x.wlm_sample_dist(eng.ctx, logitsP, sp, eng.histBuf, nh, idsP, probsP, cap) >>> 0;
        if (n === 0) break;
        const qi = eng.i32.slice(idsP >>> 2, (idsP >>> 2) + n), qp = eng.f32.slice(probsP >>> 2, (probsP >>> 2) + n);
        // x ~ q with the draft's own rng (greedy: q is one-hot)
        let x = qi[n - 1];
        if (n > 1) {
          const u = eng.x.wlm_rng_float(st);
          let cum = 0;
          for (let j = 0; j < n; j++) { cum += qp[j]; if (u < cum) { x = qi[j]; break; } }
        }
        tokens.push(x); qs.push({ ids: qi, probs: qp });
        history.push(x);
        if (eng.isEog(x) && !o.ignoreEos) break;
        if (i + 1 < k) {
          if (i === 0) tStep = now();
          if (eng._evalTokens([x]) !== 0) break;
        }
      }
      return { tokens, qs, caughtUp, stepMs: tokens.length > 1 ? (now() - tStep) / (tokens.length - 1) : NaN };
    },
    close() { if (!closed) { closed = true; eng.free(idsP); eng.free(probsP); eng.free(st); } },
  };
}

/** A fingerprint of the vocabulary (size + every token's bytes), cached. */
export function vocabFingerprint(eng) {
  eng._requireModel();
  if (eng._vocabFp) return eng._vocabFp;
  let h = 0x811c9dc5 >>> 0;
  const nv = eng.hparams.nVocab;
  const mix = (b) => { h ^= b; h = Math.imul(h, 0x01000193) >>> 0; };
  for (let i = 0; i < nv; i++) {
    const bytes = eng.tokenBytes(i);
    for (let j = 0; j < bytes.length; j++) mix(bytes[j]);
    mix(0xff); mix(eng.isEog(i) ? 1 : 0);
  }
  eng._vocabFp = { nVocab: nv, hash: h.toString(16).padStart(8, '0') };
  return eng._vocabFp;
}
