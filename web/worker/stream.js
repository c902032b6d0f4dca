// One generation's text side: its options with defaults, its prompt as
// token ids, stop-string matching, and Stream (rng, detokenizer, history,
// tokens and finish reason of one output).
import { DEFAULT_SAMPLING } from '../options.js';
import { EngineError } from '../errors.js';
import { GrammarState } from './grammar.js';

/**
 * Stop-string matcher for streamed text. push(text) returns the part of the
 * text that can be emitted now: text that might be the start of a stop
 * string is held back until it is known not to be one.
 */
export class StopMatcher {
  constructor(stops = []) {
    this.stops = stops.filter((s) => typeof s === 'string' && s.length > 0);
    this.full = '';
    this.emitted = 0;
    this.stopped = false;
  }
  /** @returns {{emit: string, stopped: boolean}} */
  push(text) {
    if (this.stopped) return { emit: '', stopped: true };
    this.full += text;
    if (this.stops.length === 0) {
      const emit = this.full.slice(this.emitted);
      this.emitted = this.full.length;
      return { emit, stopped: false };
    }
    let cut = -1;
    const maxLen = Math.max(...this.stops.map((s) => s.length));
    const from = Math.max(0, this.emitted - maxLen);
    for (const s of this.stops) {
      const i = this.full.indexOf(s, from);
      if (i >= 0 && (cut < 0 || i < cut)) cut = i;
    }
    if (cut >= 0) {
      const emit = this.full.slice(this.emitted, Math.max(cut, this.emitted));
      this.full = this.full.slice(0, cut);
      this.emitted = this.full.length;
      this.stopped = true;
      return { emit, stopped: true };
    }
    let hold = 0;
    for (const s of this.stops) {
      for (let k = Math.min(s.length - 1, this.full.length); k > hold; k--) {
        if (this.full.endsWith(s.slice(0, k))) { hold = k; break; }
      }
    }
    const upto = Math.max(this.emitted, this.full.length - hold);
    const emit = this.full.slice(this.emitted, upto);
    this.emitted = upto;
    return { emit, stopped: false };
  }
  /** Releases held-back text at the end of the stream. */
  flush() {
    const emit = this.stopped ? '' : this.full.slice(this.emitted);
    this.emitted = this.full.length;
    return emit;
  }
  get text() { return this.full; }
}

/** Normalises user sampling options (camelCase) with the defaults. */
export function samplingOptions(opts = {}) {
  const o = { ...DEFAULT_SAMPLING };
  for (const k of Object.keys(DEFAULT_SAMPLING)) if (opts[k] !== undefined && opts[k] !== null) o[k] = opts[k];
  const num = (k, min) => {
    const v = Number(o[k]);
    if (!Number.isFinite(v) || v < min) throw new EngineError(`option ${k} must be a number >= ${min}, got ${o[k]}`, 1);
    o[k] = v;
  };
  num('temperature', 0); num('topK', 0); num('topP', 0); num('minP', 0); num('repeatPenalty', 0);
  num('repeatLastN', 0); num('maxTokens', 0); num('typicalP', 0);
  num('presencePenalty', -Infinity); num('frequencyPenalty', -Infinity);
  o.topK = Math.floor(o.topK); o.repeatLastN = Math.floor(o.repeatLastN); o.maxTokens = Math.floor(o.maxTokens);
  o.logitBias = opts.logitBias || null;   // token ids and texts: the engine turns it into pairs (Engine.biasOf)
  o.logprobs = Math.max(0, Math.min(20, Math.floor(Number(opts.logprobs) || 0)));
  if (typeof o.seed !== 'bigint') {
    const s = Number(o.seed);
    if (!Number.isInteger(s) || s < 0) throw new EngineError(`option seed must be a non-negative integer, got ${o.seed}`, 1);
    o.seed = BigInt(s);
  }
  o.seed = BigInt.asUintN(64, o.seed);
  o.stop = Array.isArray(opts.stop) ? opts.stop : (typeof opts.stop === 'string' ? [opts.stop] : []);
  o.ignoreEos = !!opts.ignoreEos;
  o.addBos = opts.addBos;
  o.parseSpecial = !!opts.parseSpecial;
  o.reusePrefix = opts.reusePrefix !== false;
  o.resume = !!opts.resume;
  o.grammar = typeof opts.grammar === 'string' && opts.grammar !== '' ? opts.grammar : null;
  return o;
}

/** The prompt as token ids: text is tokenized (BOS per options/model); an empty prompt becomes BOS. */
export function promptIdsOf(eng, prompt, o) {
  const hp = eng.hparams;
  const addBos = o.addBos == null ? hp.addBos : !!o.addBos;
  const ids = Array.isArray(prompt) ? prompt.map(Number) : eng.tokenize(prompt, addBos, o.parseSpecial);
  if (ids.length === 0) {
    // nothing to condition on: start from BOS when the model has one
    if (hp.bosId >= 0) ids.push(hp.bosId);
    else if (Array.isArray(prompt)) throw new EngineError('the prompt has no tokens and the model has no BOS token to start from', 1);
    else {
      const what = String(prompt ?? '') === '' ? 'the prompt is empty' : `the prompt text (${String(prompt).length} characters) tokenized to no tokens`;
      throw new EngineError(`${what} and the model has no BOS token to start from`, 1);
    }
  }
  for (const t of ids) if (!Number.isInteger(t) || t < 0 || t >= hp.nVocab) throw new EngineError(`token id ${t} out of range [0, ${hp.nVocab})`, 1);
  return ids;
}

/**
 * One output stream of a generation: its rng and detokenizer (in wasm
 * memory: given, or a block of its own), repetition-penalty history, stop
 * strings, tokens, finish reason and, with a grammar, its recognizer state.
 * Plain generation has one; best-of-N one per candidate; speculative
 * decoding one for the emitted tokens.
 */
export class Stream {
  constructor(eng, o, seed, promptIds, mem = null) {
    this.eng = eng; this.o = o;
    this.gs = null;
    if (o.grammar) {
      const cache = eng.grammars, g = cache.get(o.grammar);   // compiled on first use (./grammar.js)
      this.grammarStats = { compileMs: cache.lastHit ? 0 : g.compileMs, cached: cache.lastHit, trieMs: cache.lastHit ? 0 : cache.lastTrieMs };
      this.gs = new GrammarState(g, o.ignoreEos);
    }
    this.own = !mem;
    this.st = mem || eng.allocStream();
    eng.seedRng(this.st.rng, seed);
    eng.resetDetok(this.st.detok);
    this.stops = new StopMatcher(o.stop);
    this.history = promptIds.slice(-Math.max(o.repeatLastN, 1));
    this.tokens = []; this.logprobs = [];
    this.topLogprobs = o.logprobs > 0 ? [] : null;
    this.finishReason = null;
  }
  /** The allowed-token bitset of the next sample (0: every token), or null
   * when the grammar ends the stream here (finishReason 'stop': complete,
   * 'grammar': no token continues it). */
  nextAllow() {
    if (!this.gs) return 0;
    const allow = this.gs.before();
    if (this.gs.end) { this.finishReason = this.gs.end; return null; }
    return allow;
  }
  /** With options.logprobs, the top alternatives of logits row `row` (call
   * before that row is overwritten), else null. */
  top(row) { return this.topLogprobs ? this.eng.topLogprobs(row, this.o.logprobs) : null; }
  /** Appends a sampled token (with its top alternatives from top()). Returns
   * its chunk {text, token, logprob[, topLogprobs]}, or null for an
   * end-of-generation token (not appended); sets finishReason when the
   * stream ends (stop string, maxTokens, or posLimitReached). */
  push(token, logprob, posLimitReached, top = null) {
    const { eng, o } = this;
    if (!o.ignoreEos && eng.isEog(token)) { this.finishReason = 'stop'; return null; }
    if (this.gs) this.gs.after(token);
    this.history.push(token);
    if (this.history.length > 4 * Math.max(o.repeatLastN, 16)) this.history.splice(0, this.history.length - Math.max(o.repeatLastN, 1));
    this.tokens.push(token); this.logprobs.push(logprob);
    if (this.topLogprobs) this.topLogprobs.push(top || []);
    const r = this.stops.push(eng.detokPush(this.st.detok, token));
    if (r.stopped) this.finishReason = 'stop';
    else if (this.tokens.length >= o.maxTokens) this.finishReason = 'length';
    else if (posLimitReached) this.finishReason = 'context';
    return this.topLogprobs ? { text: r.emit, token, logprob, topLogprobs: top || [] } : { text: r.emit, token, logprob };
  }
  /** The result fields of the tokens: tokens, logprobs[, topLogprobs]. */
  tokenFields() {
    const f = { tokens: this.tokens.slice(), logprobs: this.logprobs.slice() };
    if (this.topLogprobs) f.topLogprobs = this.topLogprobs.slice();
    return f;
  }
  /** Ends the stream (reason unless one is set): flushes held text and returns it. */
  finish(reason) {
    if (!this.finishReason) this.finishReason = reason;
    let tail = '';
    if (!this.stops.stopped) {
      tail = this.stops.flush();
      const f = this.eng.detokFlush(this.st.detok);
      if (f) { const r = this.stops.push(f); tail += r.emit + (r.stopped ? '' : this.stops.flush()); }
      if (this.stops.stopped && this.finishReason !== 'abort') this.finishReason = 'stop';
    }
    return tail;
  }
  get text() { return this.stops.text; }
  free() {
    if (this.gs) this.gs.free();
    if (this.own && this.st.block) this.eng.free(this.st.block);
    this.st = { rng: 0, detok: 0, block: 0 };
  }
}
