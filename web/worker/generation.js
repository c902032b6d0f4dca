// The one generation loop of the worker. Every strategy (plain generation
// here; best-of-N, beam search, speculative decoding and prompt lookup in
// ./multi.js) is a `decode` step run by generationLoop, which owns what they
// share: the prompt prefilled once (reusing a cached prefix), maxTokens 0,
// aborts between steps, timing, and cleanup when a step throws.
import { EngineError } from '../errors.js';
import { STATUS_CONTEXT_FULL } from './heap.js';
import { Stream, samplingOptions, promptIdsOf } from './stream.js';

const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

/**
 * A stepper: step(shouldStop) prefills on its first call, then runs
 * `decode()` once per call (timed into stats.decodeMs) until a strategy
 * returns a record with done: true.
 * @param {object} s
 * @param {import('./engine.js').Engine} s.eng
 * @param {number[]} s.promptIds
 * @param {object} s.o sampling options (maxTokens, reusePrefix)
 * @param {object} s.stats filled with prefillMs, reusedPromptTokens, decodeMs
 * @param {(stopped: boolean) => void} [s.afterPrefill] after the prompt is in sequence 0 (forks)
 * @param {() => object} s.decode one step; returns its record
 * @param {(reason: 'abort'|'length') => object} s.end the final record when the loop ends the generation
 * @param {() => void} [s.cleanup] frees what the strategy holds when a step throws
 * @param {string} [s.what] names the generation in errors
 */
export function generationLoop({ eng, promptIds, o, stats, afterPrefill, decode, end, cleanup = () => {}, what = 'generation' }) {
  let started = false, finished = false;
  const finish = (record) => { if (record && record.done) finished = true; return record; };
  return {
    get finished() { return finished; },
    /** Ends the loop with a final record the strategy made outside a step. */
    done(record) { finished = true; return record; },
    step(shouldStop) {
      if (finished) throw new EngineError(`${what} already finished`, 7);
      try {
        if (!started) {
          started = true;
          const t = now();
          const { status, reused } = eng.prefill(promptIds, shouldStop, o.reusePrefix);
          stats.prefillMs = now() - t; stats.reusedPromptTokens = reused;
          if (status === -1) return finish(end('abort'));
          if (status === STATUS_CONTEXT_FULL) {
            throw new EngineError(`prompt of ${promptIds.length} tokens does not fit the context (${eng.nCtx} tokens): ${eng.errorMessage(status)}`, status);
          }
          eng.check(status, 'prefill');
          if (afterPrefill) afterPrefill();
          if (o.maxTokens === 0) return finish(end('length'));
        }
        if (shouldStop && shouldStop()) return finish(end('abort'));
        const t = now();
        const r = decode();
        stats.decodeMs += now() - t;
        return finish(r);
      } catch (e) {
        if (!finished) { finished = true; cleanup(); }
        throw e;
      }
    },
  };
}

/** A prompt that leaves no position to generate in fails before anything runs. */
export function checkPromptFits(eng, promptIds) {
  if (promptIds.length >= eng.ctxLimit) {
    throw new EngineError(`prompt of ${promptIds.length} tokens does not fit the context (${eng.ctxLimit} tokens)`, STATUS_CONTEXT_FULL);
  }
}

/** The result record of a single-stream generation. */
export function streamResult(s, stats) {
  const gen = s.tokens.length;
  const fresh = stats.promptTokens - (stats.reusedPromptTokens || 0);
  const grammar = s.grammarStats ? { grammar: s.grammarStats } : {};
  return {
    text: s.text,
    ...s.tokenFields(),
    finishReason: s.finishReason,
    stats: {
      promptTokens: stats.promptTokens,
      reusedPromptTokens: stats.reusedPromptTokens || 0,
      generatedTokens: gen,
      prefillMs: stats.prefillMs,
      decodeMs: stats.decodeMs,
      prefillTokensPerSec: stats.prefillMs > 0 ? fresh / (stats.prefillMs / 1000) : 0,
      decodeTokensPerSec: stats.decodeMs > 0 ? gen / (stats.decodeMs / 1000) : 0,
      ...grammar,
    },
  };
}

/**
 * `resume`: the tokens where the last plain generation (or a loaded state)
 * left sequence 0, with the prompt's tokens after them (a text prompt
 * without BOS unless addBos), and the random stream to continue.
 */
function resumeFrom(eng, prompt, o) {
  const rp = eng.resumePoint;
  if (!rp) {
    throw new EngineError('resume: nothing to continue (no plain generation, or loaded state with a sampler stream, left the context; ' +
      'another call has used it since)', 7);
  }
  const extra = Array.isArray(prompt) ? prompt.map(Number) : eng.tokenize(prompt, o.addBos == null ? false : !!o.addBos, o.parseSpecial);
  const nv = eng.hparams.nVocab;
  for (const t of extra) if (!Number.isInteger(t) || t < 0 || t >= nv) throw new EngineError(`token id ${t} out of range [0, ${nv})`, 1);
  return { ids: rp.ids.concat(extra), rng: rp.rng };
}

/**
 * Plain generation: a stepper whose next(shouldStop) returns a chunk
 * {text, token, logprob[, topLogprobs]} per token and finally {done: true, tail, ...result}.
 * `shouldStop()` is polled between prefill chunks and tokens (abort). When
 * it ends, the engine keeps its tokens and random stream as the resume
 * point (saveState, and a later call with `resume`).
 */
export function startGeneration(eng, prompt, opts = {}) {
  eng.requireContext();
  const o = samplingOptions(opts);
  const resumed = o.resume ? resumeFrom(eng, prompt, o) : null;
  const promptIds = resumed ? resumed.ids : promptIdsOf(eng, prompt, o);
  // the single stream's rng and detokenizer live in the scratch block
  const rngP = eng.at('rng');
  const s = new Stream(eng, o, o.seed, promptIds, { rng: rngP, detok: eng.at('detok') });
  if (resumed) eng.u8.set(resumed.rng, rngP);   // the saved stream, not the seed
  const stats = { promptTokens: promptIds.length, reusedPromptTokens: 0, prefillMs: 0, decodeMs: 0 };
  let pendingEnd = null;   // a chunk that ended the stream was returned; the final record comes next
  const end = (reason) => {
    s.finishReason = null;
    const tail = s.finish(reason);
    eng.resumePoint = { ids: promptIds.concat(s.tokens), rng: eng.u8.slice(rngP, rngP + eng.abi.RNG.size) };
    s.free();   // its grammar state (the rng and detokenizer are the scratch block's)
    return { done: true, tail, ...streamResult(s, stats) };
  };
  const loop = generationLoop({
    eng, promptIds, o, stats, end, cleanup: () => s.free(),
    decode() {
      const allow = s.nextAllow();
      if (allow === null) return end(s.finishReason);   // the grammar ends it
      const { token, logprob } = eng.sample(0, o, s.history, s.st.rng, allow);
      const chunk = s.push(token, logprob, false, s.top(0));
      if (!chunk) return end(s.finishReason);   // end of generation
      if (s.finishReason) { pendingEnd = s.finishReason; return chunk; }
      const st = eng.append([token]);
      if (st === STATUS_CONTEXT_FULL) { pendingEnd = 'context'; return chunk; }
      eng.check(st, 'decode');
      return chunk;
    },
  });
  return {
    /** true when the next call returns the final record */
    get ending() { return pendingEnd !== null; },
    next(shouldStop) {
      if (pendingEnd !== null && !loop.finished) return loop.done(end(pendingEnd));
      return loop.step(shouldStop);
    },
  };
}
