// wasmlm engine: one wasm instance (one linear memory) holding one model.
//
// Pure JavaScript, no Node or browser APIs: it runs inside the worker
// (web/worker/worker.js) in both environments. Every call into the module may grow
// memory, so typed-array views are always taken through `this.u8` & co.,
// which re-create them when the underlying buffer changed.
//
// Struct layouts (wasm32, little-endian) come from ./abi.js, generated from src/wlm.h.
import { DEFAULT_SAMPLING } from '../options.js';
import { WasmlmError, EngineError } from '../errors.js';
import { QUANT_TYPES } from '../protocol.js';
import { ERR, SCRATCH, STREAM, CTX_PARAMS, readHparams, writeCtxParams, writeSamplerParams } from './abi.js';

export const STATUS_NAMES = [
  'WLM_OK', 'WLM_ERR_ARG', 'WLM_ERR_FORMAT', 'WLM_ERR_TRUNCATED', 'WLM_ERR_UNSUPPORTED',
  'WLM_ERR_NOMEM', 'WLM_ERR_CONTEXT_FULL', 'WLM_ERR_STATE',
];
export const STATUS_CONTEXT_FULL = 6;
/** Most bytes reserved up front for a file whose size is only declared (see Engine.beginLoad). */
export const DECLARED_FIRST_BYTES = 64 << 20;


/** Default sampling options: from the options schema (web/options.js). */
export { DEFAULT_SAMPLING };

/** nextTokenDistribution's sampler when no filter is asked for: the model's
 * own distribution (temperature 1, no top-k/top-p/min-p, no penalty). */
export const RAW_DISTRIBUTION = Object.freeze({ temperature: 1, topK: 0, topP: 1, minP: 0, repeatPenalty: 1 });

// GGUF metadata value types
const GT = { U8: 0, I8: 1, U16: 2, I16: 3, U32: 4, I32: 5, F32: 6, BOOL: 7, STRING: 8, ARRAY: 9, U64: 10, I64: 11, F64: 12 };
export const GGUF_TYPE_NAMES = ['u8', 'i8', 'u16', 'i16', 'u32', 'i32', 'f32', 'bool', 'string', 'array', 'u64', 'i64', 'f64'];
const FIXED_SIZE = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
/** Arrays longer than this are summarised in `info` as {arrayOf, count, head}. */
export const ARRAY_SUMMARY_LIMIT = 16;
const ARRAY_HEAD = 8;

// ignoreBOM: a U+FEFF is text like any other (the default drops a leading one
// from every decoded piece, so detokenized and streamed text lost it)
const utf8dec = new TextDecoder('utf-8', { ignoreBOM: true });
// Browsers refuse views of a SharedArrayBuffer (the threaded build's wasm
// memory) in TextDecoder.decode (Node accepts them): decode a copy then.
const utf8 = {
  decode: (v) => utf8dec.decode(typeof SharedArrayBuffer !== 'undefined' && v.buffer instanceof SharedArrayBuffer ? v.slice() : v),
};
const utf8enc = new TextEncoder();

/** The one shape of every out-of-memory message (as the C side's wlm_fail_nomem). */
export function nomemMessage(what, bytes, inUse, limit) {
  const msg = `${what} needs ${bytes} more bytes of memory (${inUse} in use, limit ${limit})`;
  // under the limit the cause is elsewhere: the host would not grow the memory
  return bytes + inUse > limit ? msg : msg + ' and the memory could not grow';
}

const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32

/**
 * Why the first bytes of a model file are not a GGUF header, or null when
 * they start as one. `atEnd`: these are all the bytes there are.
 */
export function ggufHeaderProblem(bytes, atEnd = false) {
  if (bytes.byteLength >= 4) {
    const magic = (bytes[0] | (bytes[1] << 8) | (bytes[2] << 16) | (bytes[3] << 24)) >>> 0;
    return magic === GGUF_MAGIC ? null : `not a GGUF file (magic 0x${magic.toString(16)}, a GGUF file starts with "GGUF")`;
  }
  if (!atEnd) return null;
  return bytes.byteLength === 0 ? 'not a GGUF file: empty file' : `not a GGUF file: only ${bytes.byteLength} bytes`;
}

/** A BAD_FILE error for a model file (or stream) `name` whose header is wrong. */
export function badFileError(name, problem) {
  // status: the C engine's WLM_ERR_FORMAT, which the same bytes would get from it
  return new WasmlmError('BAD_FILE', `${name}: ${problem}`, { status: 2, file: name });
}
// ... and TextEncoder.encodeInto a shared destination: encode, then copy.
function encodeUtf8Into(text, dst) {
  if (typeof SharedArrayBuffer === 'undefined' || !(dst.buffer instanceof SharedArrayBuffer)) return utf8enc.encodeInto(text, dst);
  const bytes = utf8enc.encode(text);
  if (bytes.byteLength > dst.byteLength) throw new RangeError('encodeUtf8Into: destination too small');
  dst.set(bytes);
  return { read: text.length, written: bytes.byteLength };
}

/** The shortest decimal that rounds to the same float32 (1e-5, not 0.000009999999747378752). */
export function shortF32(v) {
  if (!Number.isFinite(v) || v === 0) return v;
  for (let p = 1; p <= 9; p++) {
    const d = Number(v.toPrecision(p));
    if (Math.fround(d) === v) return d;
  }
  return v;
}

function bigToNum(b) {
  return (b <= BigInt(Number.MAX_SAFE_INTEGER) && b >= BigInt(Number.MIN_SAFE_INTEGER)) ? Number(b) : b;
}

/**
 * Decodes one raw GGUF metadata value of `type` at `off` in DataView `dv`
 * (bounded by `end`). Returns {value, next}. Arrays longer than
 * ARRAY_SUMMARY_LIMIT are summarised; the walk stops after the head.
 */
export function decodeGgufValue(dv, off, type, end = dv.byteLength) {
  const need = (n) => { if (off + n > end) throw new RangeError('metadata value runs past its end'); };
  switch (type) {
    case GT.U8: need(1); return { value: dv.getUint8(off), next: off + 1 };
    case GT.I8: need(1); return { value: dv.getInt8(off), next: off + 1 };
    case GT.U16: need(2); return { value: dv.getUint16(off, true), next: off + 2 };
    case GT.I16: need(2); return { value: dv.getInt16(off, true), next: off + 2 };
    case GT.U32: need(4); return { value: dv.getUint32(off, true), next: off + 4 };
    case GT.I32: need(4); return { value: dv.getInt32(off, true), next: off + 4 };
    case GT.F32: need(4); return { value: shortF32(dv.getFloat32(off, true)), next: off + 4 };
    case GT.BOOL: need(1); return { value: dv.getUint8(off) !== 0, next: off + 1 };
    case GT.U64: need(8); return { value: bigToNum(dv.getBigUint64(off, true)), next: off + 8 };
    case GT.I64: need(8); return { value: bigToNum(dv.getBigInt64(off, true)), next: off + 8 };
    case GT.F64: need(8); return { value: dv.getFloat64(off, true), next: off + 8 };
    case GT.STRING: {
      need(8);
      const n = Number(dv.getBigUint64(off, true));
      off += 8; need(n);
      const s = utf8.decode(new Uint8Array(dv.buffer, dv.byteOffset + off, n));
      return { value: s, next: off + n };
    }
    case GT.ARRAY: {
      need(12);
      const et = dv.getUint32(off, true);            // GGUF array header: element type, then count
      off += 4;
      const count = Number(dv.getBigUint64(off, true));
      off += 8;
      const summarise = count > ARRAY_SUMMARY_LIMIT;
      const take = summarise ? ARRAY_HEAD : count;
      const vals = [];
      for (let i = 0; i < take; i++) {
        const r = decodeGgufValue(dv, off, et, end);
        vals.push(r.value); off = r.next;
      }
      if (!summarise) return { value: vals, next: off };
      // skip the rest cheaply when elements have a fixed size
      const fs = FIXED_SIZE[et];
      const next = fs ? off + (count - take) * fs : -1;
      return { value: { arrayOf: GGUF_TYPE_NAMES[et] || String(et), count, head: vals }, next };
    }
    default: throw new RangeError('unknown GGUF value type ' + type);
  }
}

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
  num('repeatLastN', 0); num('maxTokens', 0);
  o.topK = Math.floor(o.topK); o.repeatLastN = Math.floor(o.repeatLastN); o.maxTokens = Math.floor(o.maxTokens);
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
  return o;
}

const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

// the scratch block's fields (offsets from this.scratch: SCRATCH in ./abi.js)
const S_ERR = SCRATCH.err, S_PTR = SCRATCH.ptr, S_U64 = SCRATCH.u64, S_CTXP = SCRATCH.ctxParams, S_SAMP = SCRATCH.sampler;
const S_RNG = SCRATCH.rng, S_DETOK = SCRATCH.detok, S_TOK = SCRATCH.token, S_LOGP = SCRATCH.logprob, S_LEN = SCRATCH.len;
const S_NOUT = SCRATCH.nOut, S_DETOK2 = SCRATCH.detok2;
const MAX_SEQ = 64;      // WLM_MAX_SEQ
const DETOK_CAP = 4096;

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

/** Samples from the logits row at byte offset `logitsP` with the stream's rng; returns {token, logprob}. */
export function sampleAt(eng, logitsP, o, history, rng) {
  const sp = eng._writeSampler(o);
  const nh = eng._writeHist(history, o.repeatLastN);
  eng._clearErr();
  const st = eng.x.wlm_sample(eng.ctx, logitsP, sp, eng.histBuf, nh, rng, eng.scratch + S_TOK, eng.scratch + S_LOGP, eng.scratch + S_ERR);
  eng._check(st, 'sample');
  return { token: eng.dv.getInt32(eng.scratch + S_TOK, true), logprob: eng.dv.getFloat32(eng.scratch + S_LOGP, true) };
}

/**
 * One output stream of a generation: its rng and detokenizer (in wasm
 * memory: given, or 32 bytes of its own), repetition-penalty history, stop
 * strings, tokens, and finish reason. Plain generation has one; best-of-N
 * one per candidate; speculative decoding one for the emitted tokens.
 */
export class Stream {
  constructor(eng, o, seed, promptIds, mem = null) {
    this.eng = eng; this.o = o;
    this.own = !mem;
    this.st = mem || (() => { const p = eng.alloc(STREAM.size); return { rng: p + STREAM.rng, detok: p + STREAM.detok }; })();
    eng.x.wlm_rng_seed(this.st.rng, seed);
    eng.x.wlm_detok_reset(this.st.detok);
    this.stops = new StopMatcher(o.stop);
    this.history = promptIds.slice(-Math.max(o.repeatLastN, 1));
    this.tokens = []; this.logprobs = [];
    this.finishReason = null;
  }
  /** Appends a sampled token. Returns its chunk {text, token, logprob}, or
   * null for an end-of-generation token (not appended); sets finishReason
   * when the stream ends (stop string, maxTokens, or posLimitReached). */
  push(token, logprob, posLimitReached) {
    const { eng, o } = this;
    if (!o.ignoreEos && eng.isEog(token)) { this.finishReason = 'stop'; return null; }
    this.history.push(token);
    if (this.history.length > 4 * Math.max(o.repeatLastN, 16)) this.history.splice(0, this.history.length - Math.max(o.repeatLastN, 1));
    this.tokens.push(token); this.logprobs.push(logprob);
    const r = this.stops.push(eng._detokPush(this.st.detok, token));
    if (r.stopped) this.finishReason = 'stop';
    else if (this.tokens.length >= o.maxTokens) this.finishReason = 'length';
    else if (posLimitReached) this.finishReason = 'context';
    return { text: r.emit, token, logprob };
  }
  /** Ends the stream (reason unless one is set): flushes held text and returns it. */
  finish(reason) {
    if (!this.finishReason) this.finishReason = reason;
    let tail = '';
    if (!this.stops.stopped) {
      tail = this.stops.flush();
      const f = this.eng._detokFlush(this.st.detok);
      if (f) { const r = this.stops.push(f); tail += r.emit + (r.stopped ? '' : this.stops.flush()); }
      if (this.stops.stopped && this.finishReason !== 'abort') this.finishReason = 'stop';
    }
    return tail;
  }
  get text() { return this.stops.text; }
  free() { if (this.own && this.st.rng) this.eng.free(this.st.rng); this.st = { rng: 0, detok: 0 }; }
}

export class Engine {
  /**
   * @param {WebAssembly.Module|BufferSource} wasm compiled module or its bytes
   */
  static async create(wasm, opts = {}) {
    const mod = wasm instanceof WebAssembly.Module ? wasm : await WebAssembly.compile(wasm);
    const imports = WebAssembly.Module.imports(mod);
    const bad = imports.filter((i) => !(i.module === 'env' && i.name === 'memory' && i.kind === 'memory'));
    if (bad.length) throw new Error('wasmlm.wasm has unexpected imports: ' + bad.map((i) => `${i.module}.${i.name}`).join(', '));
    const threads = Math.max(1, opts.threads | 0);
    const shared = threads > 1;
    const memory = new WebAssembly.Memory({ initial: 32, maximum: 65536, shared });
    const inst = await WebAssembly.instantiate(mod, { env: { memory } });
    const e = new Engine(inst.exports, memory);
    if (shared) await e._startThreads(mod, threads, opts.spawnThread);
    return e;
  }

  /**
   * Starts threads - 1 compute threads on this (shared) memory: each one is
   * a worker running web/worker/thread-worker.js with its own 1 MiB stack, serving
   * the engine's pool until dispose().
   * @param {(msg:object) => Promise<{terminate():void}>} spawn starts one thread-worker with msg
   */
  async _startThreads(mod, threads, spawn) {
    this.pool = this.x.wlm_pool_new(threads);
    if (!this.pool) throw new Error('this wasm build has no threads');
    this.threadWorkers = [];
    const STACK = 1 << 20;
    for (let tid = 1; tid < threads; tid++) {
      const base = this.alloc(STACK);
      this.threadWorkers.push(await spawn({ module: mod, memory: this.memory, pool: this.pool, tid, stackTop: base + STACK }));
    }
    this.threads = threads;
  }

  constructor(exports, memory) {
    this.x = exports;
    this.memory = memory;
    this._buf = null;
    this.scratch = 0;
    this.model = 0;
    this.ctx = 0;
    this.file = 0; this.fileCap = 0; this.fileLen = 0; this.fileHint = 0;
    this.textBuf = 0; this.textCap = 0;
    this.tokBuf = 0; this.tokCap = 0;
    this.histBuf = 0; this.histCap = 0;
    this.detokOut = 0;
    this.distIds = 0; this.distProbs = 0; this.distCap = 0;
    this.hparams = null;
    this.pool = 0; this.threads = 1; this.threadWorkers = [];
    this.seqTokens = [];     // the tokens whose keys/values sequence 0 holds (prefix reuse)
    this.nSeqMax = 1; this.nOutputs = 1;
    this.scratch = this.alloc(SCRATCH.size);
    this.detokOut = this.alloc(DETOK_CAP);
  }

  _views() {
    if (this._buf !== this.memory.buffer) {
      this._buf = this.memory.buffer;
      this._u8 = new Uint8Array(this._buf);
      this._dv = new DataView(this._buf);
      this._i32 = new Int32Array(this._buf);
      this._f32 = new Float32Array(this._buf);
    }
  }
  get u8() { this._views(); return this._u8; }
  get dv() { this._views(); return this._dv; }
  get i32() { this._views(); return this._i32; }
  get f32() { this._views(); return this._f32; }

  alloc(bytes, what = 'an engine buffer') {
    const p = this.x.wlm_sys_alloc(BigInt(Math.max(1, bytes)));
    if (!p) throw new EngineError(nomemMessage(what, bytes, Number(this.x.wlm_sys_in_use()), Number(this.x.wlm_sys_limit())), 5);
    return p >>> 0;
  }
  free(p) { if (p) this.x.wlm_sys_free(p); }
  setMemoryLimit(bytes) { this.x.wlm_sys_set_limit(BigInt(bytes)); }
  memoryInUse() { return Number(this.x.wlm_sys_in_use()); }

  _errMsg(status) {
    const u8 = this.u8, p = this.scratch + S_ERR + ERR.msg;
    let e = p; while (e < p + ERR.msgBytes && u8[e] !== 0) e++;
    const msg = utf8.decode(u8.subarray(p, e));
    return msg || STATUS_NAMES[status] || 'error ' + status;
  }
  _check(status, what) {
    if (status !== 0) throw new EngineError((what ? what + ': ' : '') + this._errMsg(status), status);
  }
  _clearErr() { this.dv.setUint32(this.scratch + S_ERR + ERR.code, 0, true); this.u8[this.scratch + S_ERR + ERR.msg] = 0; }
  _cstr(p, len) { return utf8.decode(this.u8.subarray(p, p + len)); }

  // ---- loading ----------------------------------------------------------

  /**
   * Reserves wasm memory for a file of (about) `size` bytes. A `declared`
   * size (a server's Content-Length, a caller's claim) is not trusted: at
   * most DECLARED_FIRST_BYTES are reserved up front, the rest once that
   * much has really arrived, so a lying header cannot take gigabytes of
   * memory (which a wasm instance never gives back) before the first byte.
   */
  beginLoad(size, { declared = false } = {}) {
    if (this.model) throw new EngineError('a model is already loaded in this engine', 7);
    this._freeFile();
    this.fileHint = declared && size > 0 ? size : 0;
    this.fileCap = size > 0 ? (declared ? Math.min(size, DECLARED_FIRST_BYTES) : size) : 1 << 20;
    this.file = this.alloc(this.fileCap);
    this.fileLen = 0;
    return this.file;
  }
  _freeFile() { if (this.file) this.free(this.file); this.file = 0; this.fileCap = 0; this.fileLen = 0; this.fileHint = 0; }

  /** Makes room for `extra` more bytes (grows the file block if the size was unknown or only declared). */
  reserve(extra) {
    const need = this.fileLen + extra;
    if (need <= this.fileCap) return;
    // a declared size that the bytes so far still fit is taken in one step (one copy)
    const cap = need <= this.fileHint ? this.fileHint : Math.max(need, Math.ceil(this.fileCap * 1.5), 1 << 20);
    const p = this.alloc(cap);
    this.u8.copyWithin(p, this.file, this.file + this.fileLen);
    this.free(this.file);
    this.file = p; this.fileCap = cap;
  }
  /** Copies a chunk of file bytes after those already written; the first
   * ones must start a GGUF header (checked before the block grows). */
  write(chunk, name = 'the model bytes') {
    const bytes = chunk instanceof Uint8Array ? chunk : new Uint8Array(chunk);
    if (this.fileLen < 4) this._checkHead(bytes, name);
    this.reserve(bytes.byteLength);
    this.u8.set(bytes, this.file + this.fileLen);
    this.fileLen += bytes.byteLength;
  }
  /** A view of `n` writable bytes at the current write position (for reading files straight in). */
  writeView(n) {
    this.reserve(n);
    return this.u8.subarray(this.file + this.fileLen, this.file + this.fileLen + n);
  }
  advance(n) { this.fileLen += n; }
  /** Throws BAD_FILE when the bytes written so far plus `next` cannot start a GGUF file. */
  _checkHead(next, name) {
    const have = this.u8.slice(this.file, this.file + this.fileLen);
    const head = new Uint8Array(Math.min(4, have.byteLength + next.byteLength));
    head.set(have.subarray(0, head.byteLength));
    if (head.byteLength > have.byteLength) head.set(next.subarray(0, head.byteLength - have.byteLength), have.byteLength);
    const problem = ggufHeaderProblem(head);
    if (problem) throw badFileError(name, problem);
  }

  /**
   * Parses the written bytes and creates the context.
   * @param {{contextLength?:number,batchSize?:number,kvType?:'f32'|'f16',onFull?:'error'|'slide',nKeep?:number}} opts
   */
  finishLoad(opts = {}) {
    try {
      this._clearErr();
      const pp = this.scratch + S_PTR;
      this.dv.setUint32(pp, 0, true);
      const st = this.x.wlm_model_load_inplace(pp, this.file, BigInt(this.fileLen), this.scratch + S_ERR);
      this._check(st, 'cannot load model');
      this.model = this.dv.getUint32(pp, true);
      this.hparams = this._readHparams();
      if (opts.kvType != null && opts.kvType !== 'f32' && opts.kvType !== 'f16') throw new EngineError(`kvType must be 'f32' or 'f16', got ${opts.kvType}`, 1);
      if (opts.onFull != null && opts.onFull !== 'error' && opts.onFull !== 'slide') throw new EngineError(`onFull must be 'error' or 'slide', got ${opts.onFull}`, 1);
      const maxSeq = opts.maxSequences == null ? 1 : Number(opts.maxSequences);
      if (!Number.isInteger(maxSeq) || maxSeq < 1 || maxSeq > MAX_SEQ) throw new EngineError(`maxSequences must be an integer in 1..${MAX_SEQ}, got ${opts.maxSequences}`, 1);
      if (maxSeq > 1 && opts.onFull === 'slide') throw new EngineError("maxSequences > 1 needs onFull 'error' (the sliding window is a one-sequence policy)", 1);
      this.ctxOpts = {
        nCtx: opts.contextLength == null ? 0 : opts.contextLength >>> 0,
        nBatch: opts.batchSize == null ? 0 : opts.batchSize >>> 0,
        kv: opts.kvType === 'f16' ? 1 : 0,
        slide: opts.onFull === 'slide' ? 1 : 0,
        nKeep: opts.nKeep == null ? 0 : opts.nKeep >>> 0,
        nSeq: maxSeq,
        nOut: maxSeq,
      };
      this._createCtx(this.ctxOpts);
      /** the per-sequence position limit the user asked for (a grown cache keeps it) */
      this.ctxLimit = this.nCtx;
      this._ensureTok(Math.max(256, Math.min(this.nCtx, 4096)));
      return this.info();
    } catch (e) {
      this.unload();
      throw e;
    }
  }

  /** Creates (or re-creates) the context from resolved options {nCtx, nBatch, kv, slide, nKeep, nSeq, nOut}. */
  _createCtx(o) {
    if (this.ctx) { this.x.wlm_ctx_free(this.ctx); this.ctx = 0; }
    this.seqTokens = [];
    const cp = this.scratch + S_CTXP, pp = this.scratch + S_PTR;
    this.x.wlm_ctx_default_params(cp);
    const dv = this.dv;
    writeCtxParams(dv, cp, {
      nCtx: o.nCtx, nBatch: o.nBatch, kvType: o.kv, fullPolicy: o.slide, nKeep: o.nKeep,
      nThreads: this.threads, nSeqMax: o.nSeq, nOutputs: o.nOut,
    });
    this._clearErr();
    dv.setUint32(pp, 0, true);
    const st = this.x.wlm_ctx_new(pp, this.model, cp, this.scratch + S_ERR);
    this._check(st, 'cannot create context');
    this.ctx = this.dv.getUint32(pp, true);
    if (this.pool) this.x.wlm_ctx_set_pool(this.ctx, this.pool, this.threads);
    this.nCtx = this.x.wlm_ctx_n_ctx(this.ctx) >>> 0;
    this.nBatch = Math.min(o.nBatch || 64, this.nCtx); // as the engine resolves it
    this.kvType = o.kv ? 'f16' : 'f32';
    this.onFull = o.slide ? 'slide' : 'error';
    this.nSeqMax = o.nSeq;
    this.nOutputs = o.nOut;
  }

  /**
   * Makes sure the context holds `nSeq` sequences, `slots` cache slots and
   * `outputs` rows of logits per call; re-plans it (one allocation, the
   * cache starts empty) when it does not. Returns true when it grew.
   */
  _ensureCtx({ nSeq = 1, slots = 0, outputs = 1 }) {
    if (nSeq > MAX_SEQ) throw new EngineError(`${nSeq} sequences asked for, at most ${MAX_SEQ} fit in one context`, 1);
    if (nSeq <= this.nSeqMax && slots <= this.nCtx && outputs <= this.nOutputs) return false;
    if (this.onFull === 'slide') throw new EngineError("several sequences need onFull 'error' (the sliding window is a one-sequence policy)", 1);
    const o = { ...this.ctxOpts, nCtx: Math.max(this.nCtx, slots), nSeq: Math.max(this.nSeqMax, nSeq), nOut: Math.max(this.nOutputs, outputs, nSeq) };
    const old = this.ctxOpts;
    try {
      this._createCtx(o);
    } catch (e) {
      this._createCtx(old);   // keep a working context
      throw e;
    }
    this.ctxOpts = o;
    this.ctxGrowths = (this.ctxGrowths || 0) + 1;
    return true;
  }

  /** Loads a whole in-memory file (convenience for tests and small models). */
  loadBytes(bytes, opts) {
    const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
    this.beginLoad(u8.byteLength);
    this.write(u8);
    return this.finishLoad(opts);
  }

  unload() {
    if (this.ctx) this.x.wlm_ctx_free(this.ctx);
    if (this.model) this.x.wlm_model_free(this.model);
    this.ctx = 0; this.model = 0; this.hparams = null; this._info = null; this.seqTokens = [];
    this._freeFile();
    for (const k of ['textBuf', 'tokBuf', 'histBuf', 'distIds', 'distProbs', '_batchBuf']) { this.free(this[k]); this[k] = 0; }
    this.textCap = 0; this._batchCap = 0; this._vocabFp = null; this.tokCap = 0; this.histCap = 0; this.distCap = 0;
  }

  _requireModel() { if (!this.model) throw new EngineError('no model loaded', 7); }

  _readHparams() {
    const h = readHparams(this.dv, this.x.wlm_model_hparams(this.model) >>> 0);
    return {
      nVocab: h.nVocab, nCtxTrain: h.nCtxTrain, nEmbd: h.nEmbd, nLayer: h.nLayer, nHead: h.nHead, nHeadKv: h.nHeadKv,
      headDim: h.headDim, nFf: h.nFf, nRot: h.nRot,
      ropeFreqBase: shortF32(h.ropeFreqBase), rmsEps: shortF32(h.rmsEps),
      bosId: h.bosId, eosId: h.eosId, unkId: h.unkId,
      addBos: h.addBos !== 0, addSpacePrefix: h.addSpacePrefix !== 0, tiedOutput: h.tiedOutput !== 0,
      headDimV: h.headDimV, ropeType: h.ropeType === 2 ? 'neox' : 'norm', ropeScaled: h.ropeScaled !== 0,
    };
  }

  /** Text of a token as stored in the vocabulary (control tokens included:
   * "<|im_end|>"), read from tokenizer.ggml.tokens; null when out of range. */
  tokenText(id) {
    this._requireModel();
    if (!Number.isInteger(id) || id < 0 || id >= this.hparams.nVocab) return null;
    const x = this.x, m = this.model, lenP = this.scratch + S_LEN, nbP = this.scratch + S_U64;
    const n = x.wlm_meta_count(m) >>> 0;
    for (let i = 0; i < n; i++) {
      const kp = x.wlm_meta_key(m, i, lenP) >>> 0;
      if (this._cstr(kp, this.dv.getUint32(lenP, true)) !== 'tokenizer.ggml.tokens') continue;
      const vp = x.wlm_meta_value(m, i, nbP) >>> 0;
      const dv = this.dv;
      let off = vp + 12; // element type u32, count u64, then (u64 length, bytes) per token
      for (let k = 0; k < id; k++) off += 8 + Number(dv.getBigUint64(off, true));
      const len = Number(dv.getBigUint64(off, true));
      return this._cstr(off + 8, len);
    }
    return null;
  }

  /**
   * Logits of `ids` evaluated from an empty context: the last position's
   * (prefill in batches), or with {all: true} every position's, each token
   * evaluated on its own (decode path). Returns an array of Float32Array.
   */
  logits(ids, { all = false } = {}) {
    this._requireModel();
    ids = Array.from(ids, Number);
    if (ids.length === 0) throw new EngineError('logits: no tokens', 1);
    const nv = this.hparams.nVocab;
    this._reset();
    const out = [];
    const grab = () => {
      const p = this.x.wlm_ctx_logits(this.ctx) >>> 2;
      return this.f32.slice(p, p + nv);
    };
    if (all) {
      for (const t of ids) {
        const st = this._evalTokens([t]);
        if (st !== 0) this._check(st, 'eval');
        out.push(grab());
      }
    } else {
      const st = this._evalTokens(ids);
      if (st !== 0) this._check(st, 'eval');
      out.push(grab());
    }
    return out;
  }

  /** Metadata, hyper-parameters and tensor table. */
  /** Memory in use: the wasm memory's size (it never shrinks: the peak) and the engine's blocks. */
  memoryStats() {
    return {
      wasmBytes: this.memory.buffer.byteLength,
      engineBytes: Number(this.x.wlm_sys_in_use()),
      fileBytes: this.fileLen,
    };
  }

  info() {
    this._requireModel();
    if (this._info) return this._info;
    const x = this.x, m = this.model, lenP = this.scratch + S_LEN, nbP = this.scratch + S_U64;
    const metadata = {};
    const n = x.wlm_meta_count(m) >>> 0;
    for (let i = 0; i < n; i++) {
      const kp = x.wlm_meta_key(m, i, lenP) >>> 0;
      const key = this._cstr(kp, this.dv.getUint32(lenP, true));
      const type = x.wlm_meta_type(m, i) >>> 0;
      const vp = x.wlm_meta_value(m, i, nbP) >>> 0;
      const nb = Number(this.dv.getBigUint64(nbP, true));
      try {
        metadata[key] = decodeGgufValue(new DataView(this.memory.buffer, vp, nb), 0, type, nb).value;
      } catch (e) {
        metadata[key] = { error: String(e.message) };
      }
    }
    const tensors = [];
    const nt = x.wlm_tensor_count(m) >>> 0;
    let paramCount = 0;
    for (let i = 0; i < nt; i++) {
      const np = x.wlm_tensor_name(m, i, lenP) >>> 0;
      const name = this._cstr(np, this.dv.getUint32(lenP, true));
      const type = x.wlm_tensor_type(m, i) >>> 0;
      const nd = x.wlm_tensor_ndims(m, i) >>> 0;
      const dims = [];
      for (let d = 0; d < nd; d++) dims.push(Number(x.wlm_tensor_dim(m, i, d)));
      paramCount += dims.reduce((a, b) => a * b, 1);
      tensors.push({ name, type, typeName: this.typeName(type), dims, offset: Number(x.wlm_tensor_offset(m, i)) });
    }
    const hp = this.hparams;
    this._info = {
      architecture: metadata['general.architecture'] ?? null,
      specialTokens: {
        bos: hp.bosId >= 0 ? this.tokenText(hp.bosId) : null,
        eos: hp.eosId >= 0 ? this.tokenText(hp.eosId) : null,
      },
      chatTemplate: typeof metadata['tokenizer.chat_template'] === 'string' ? metadata['tokenizer.chat_template'] : null,
      name: metadata['general.name'] ?? null,
      fileSize: this.fileLen,
      paramCount,
      hparams: { ...this.hparams },
      context: { nCtx: this.nCtx, nBatch: this.nBatch, kvType: this.kvType, onFull: this.onFull },
      metadata,
      tensors,
    };
    return this._info;
  }

  typeName(type) {
    const p = this.x.wlm_type_name(type) >>> 0;
    if (!p) return 'type' + type;
    const u8 = this.u8; let e = p; while (u8[e] !== 0) e++;
    return utf8.decode(u8.subarray(p, e));
  }

  // ---- tokens -------------------------------------------------------------

  _ensureText(bytes) {
    if (bytes <= this.textCap) return;
    this.free(this.textBuf);
    this.textCap = Math.max(bytes, 1024, this.textCap * 2);
    this.textBuf = this.alloc(this.textCap);
  }
  _ensureTok(n) {
    if (n <= this.tokCap) return;
    this.free(this.tokBuf);
    this.tokCap = Math.max(n, this.tokCap * 2);
    this.tokBuf = this.alloc(this.tokCap * 4);
  }
  _ensureHist(n) {
    if (n <= this.histCap) return;
    this.free(this.histBuf);
    this.histCap = Math.max(n, 64);
    this.histBuf = this.alloc(this.histCap * 4);
  }

  /** @returns {number[]} token ids */
  tokenize(text, addBos, parseSpecial = false) {
    this._requireModel();
    text = String(text ?? '');
    if (addBos == null) addBos = this.hparams.addBos;
    this._ensureText(text.length * 3 + 1);
    const { written } = encodeUtf8Into(text, this.u8.subarray(this.textBuf, this.textBuf + this.textCap));
    const nOut = this.scratch + S_NOUT;
    for (let attempt = 0; attempt < 2; attempt++) {
      this._clearErr();
      this.dv.setUint32(nOut, 0, true);
      const flags = (addBos ? 1 : 0) | (parseSpecial ? 2 : 0); // WLM_TOK_ADD_BOS | WLM_TOK_PARSE_SPECIAL
      const st = this.x.wlm_tokenize(this.model, this.textBuf, written, flags, this.tokBuf, this.tokCap, nOut, this.scratch + S_ERR);
      const n = this.dv.getUint32(nOut, true);
      if (st !== 0 && n > this.tokCap && attempt === 0) { this._ensureTok(n); continue; }
      this._check(st, 'tokenize');
      return Array.from(this.i32.subarray(this.tokBuf >>> 2, (this.tokBuf >>> 2) + n));
    }
    throw new EngineError('tokenize: token buffer too small', 1);
  }

  _detokPush(detokP, token) {
    const n = this.x.wlm_detok_push(this.model, detokP, token, this.detokOut, DETOK_CAP) >>> 0;
    return n ? utf8.decode(this.u8.subarray(this.detokOut, this.detokOut + Math.min(n, DETOK_CAP))) : '';
  }
  _detokFlush(detokP) {
    const n = this.x.wlm_detok_flush(detokP, this.detokOut, DETOK_CAP) >>> 0;
    return n ? utf8.decode(this.u8.subarray(this.detokOut, this.detokOut + Math.min(n, DETOK_CAP))) : '';
  }

  /** Text of a token sequence (control tokens give nothing). */
  detokenize(ids) {
    this._requireModel();
    const d = this.scratch + S_DETOK2;
    this.x.wlm_detok_reset(d);
    let s = '';
    const nv = this.hparams.nVocab;
    for (const id of ids) {
      const t = Number(id);
      if (!Number.isInteger(t) || t < 0 || t >= nv) throw new EngineError(`token id ${id} out of range [0, ${nv})`, 1);
      s += this._detokPush(d, t);
    }
    return s + this._detokFlush(d);
  }

  /** Whether `token` ends generation (EOS, EOT, ... as the engine knows them). */
  isEog(token) {
    if (this.x.wlm_token_is_eog) return this.x.wlm_token_is_eog(this.model, token) !== 0;
    return token === this.hparams.eosId;
  }

  /** Raw bytes of one token. */
  tokenBytes(id) {
    this._requireModel();
    const n = this.x.wlm_token_bytes(this.model, id, this.detokOut, DETOK_CAP) >>> 0;
    return this.u8.slice(this.detokOut, this.detokOut + Math.min(n, DETOK_CAP));
  }

  // ---- generation -----------------------------------------------------------

  _writeSampler(o) {
    const p = this.scratch + S_SAMP;
    writeSamplerParams(this.dv, p, o);
    return p;
  }

  _writeHist(tokens, n) {
    const k = Math.min(n, tokens.length);
    if (k === 0) return 0;
    this._ensureHist(k);
    const base = this.histBuf >>> 2, i32 = this.i32;
    for (let i = 0; i < k; i++) i32[base + i] = tokens[tokens.length - k + i];
    return k;
  }

  /** Evaluates tokens (written at tokBuf) in chunks of n_batch; returns status. */
  _evalTokens(ids, shouldStop) {
    this._ensureTok(Math.min(ids.length, this.nBatch) || 1);
    const base = this.tokBuf >>> 2;
    for (let i = 0; i < ids.length; i += this.nBatch) {
      if (shouldStop && shouldStop()) return -1;
      const n = Math.min(this.nBatch, ids.length - i);
      const i32 = this.i32;
      for (let j = 0; j < n; j++) i32[base + j] = ids[i + j];
      this._clearErr();
      const st = this.x.wlm_eval(this.ctx, this.tokBuf, n, this.scratch + S_ERR);
      if (st !== 0) return st;
      for (let j = 0; j < n; j++) this.seqTokens.push(ids[i + j]);
    }
    return 0;
  }

  /** Empties the cache (every sequence). */
  _reset() {
    this.x.wlm_ctx_reset(this.ctx);
    this.seqTokens = [];
  }

  /**
   * Puts `ids` into sequence 0 and leaves the logits of the last one, reusing
   * the longest prefix already in the cache (the previous prompt and its
   * continuation): only the rest is evaluated. Other sequences are dropped.
   * @returns {{status: number, reused: number}} status -1 = stopped
   */
  _prefill(ids, shouldStop, reuse = true) {
    for (let s = 1; s < this.nSeqMax; s++) this.x.wlm_seq_remove(this.ctx, s, 0);
    const have = this.seqTokens;
    const max = reuse ? Math.min(have.length, ids.length - 1) : 0;
    let L = 0;
    while (L < max && have[L] === ids[L]) L++;
    if (L === 0) this._reset();
    else if (L < have.length) {
      if (this.x.wlm_seq_truncate(this.ctx, 0, L, 0) !== 0) { this._reset(); L = 0; }
      else have.length = L;
    }
    return { status: this._evalTokens(L ? ids.slice(L) : ids, shouldStop), reused: L };
  }

  /**
   * Starts a generation and returns a stepper: call step() until it returns
   * {done: true, ...}. Each non-final step returns {text, token, logprob}.
   * `shouldStop()` is polled between prefill chunks and tokens (abort).
   */
  startGeneration(prompt, opts = {}) {
    this._requireModel();
    const o = samplingOptions(opts);
    const promptIds = promptIdsOf(this, prompt, o);
    const eng = this;
    // the single stream's rng and detokenizer live in the scratch block
    const s = new Stream(this, o, o.seed, promptIds, { rng: this.scratch + S_RNG, detok: this.scratch + S_DETOK });
    const state = {
      options: o,
      promptTokens: promptIds.length,
      tokens: s.tokens, logprobs: s.logprobs,
      prefillMs: 0, decodeMs: 0,
      finishReason: null,
      started: false,
    };
    const self = {
      state,
      /** @param {() => boolean} [shouldStop] */
      step(shouldStop) {
        if (state.finishReason) throw new EngineError('generation already finished', 7);
        if (!state.started) {
          state.started = true;
          const t0 = now();
          const { status: st, reused } = eng._prefill(promptIds, shouldStop, o.reusePrefix);
          state.reusedTokens = reused;
          state.prefillMs = now() - t0;
          if (st === -1) return self._end('abort');
          if (st === STATUS_CONTEXT_FULL) throw new EngineError(`prompt of ${promptIds.length} tokens does not fit the context (${eng.nCtx} tokens): ${eng._errMsg(st)}`, st);
          eng._check(st, 'prefill');
          if (o.maxTokens === 0) return self._end('length');
        }
        if (shouldStop && shouldStop()) return self._end('abort');
        const t0 = now();
        const { token, logprob } = sampleAt(eng, eng.x.wlm_ctx_logits(eng.ctx) >>> 0, o, s.history, s.st.rng);
        const chunk = s.push(token, logprob, false);
        if (!chunk) { state.decodeMs += now() - t0; return self._end(s.finishReason); }   // end of generation
        if (s.finishReason) { state.decodeMs += now() - t0; state.pendingEnd = s.finishReason; return chunk; }
        const es = eng._evalTokens([token]);
        state.decodeMs += now() - t0;
        if (es === STATUS_CONTEXT_FULL) { state.pendingEnd = 'context'; return chunk; }
        eng._check(es, 'decode');
        return chunk;
      },
      /** true when the next step() will return the final record */
      get ending() { return !!state.pendingEnd; },
      next(shouldStop) {
        if (state.pendingEnd) return self._end(state.pendingEnd);
        return self.step(shouldStop);
      },
      _end(reason) {
        s.finishReason = null;
        const tail = s.finish(reason);
        state.finishReason = s.finishReason;
        return { done: true, tail, ...eng._result(state, s.text) };
      },
    };
    return self;
  }

  _result(state, text) {
    const gen = state.tokens.length;
    return {
      text,
      tokens: state.tokens.slice(),
      logprobs: state.logprobs.slice(),
      finishReason: state.finishReason,
      stats: {
        promptTokens: state.promptTokens,
        reusedPromptTokens: state.reusedTokens || 0,
        generatedTokens: gen,
        prefillMs: state.prefillMs,
        decodeMs: state.decodeMs,
        prefillTokensPerSec: state.prefillMs > 0 ? (state.promptTokens - (state.reusedTokens || 0)) / (state.prefillMs / 1000) : 0,
        decodeTokensPerSec: state.decodeMs > 0 ? gen / (state.decodeMs / 1000) : 0,
      },
    };
  }

  /** Synchronous full generation (no yielding); the worker uses the stepper instead. */
  complete(prompt, opts = {}) {
    const g = this.startGeneration(prompt, opts);
    for (;;) {
      const r = g.next();
      if (r.done) return r;
    }
  }

  /**
   * Next-token distribution after `text`: [{token, prob, text}] sorted by
   * probability (at most `topN`). The raw distribution (RAW_DISTRIBUTION)
   * unless sampling filters are asked for.
   */
  nextTokenDistribution(text, opts = {}) {
    this._requireModel();
    const asked = Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined && v !== null));
    const o = samplingOptions({ ...RAW_DISTRIBUTION, ...asked });
    const addBos = o.addBos == null ? this.hparams.addBos : !!o.addBos;
    const ids = Array.isArray(text) ? text.map(Number) : this.tokenize(text, addBos, o.parseSpecial);
    if (ids.length === 0) ids.push(this.hparams.bosId);
    const { status: st } = this._prefill(ids);
    if (st !== 0) this._check(st, 'eval');
    const cap = Math.max(1, Math.min(opts.topN ?? 20, this.hparams.nVocab));
    if (cap > this.distCap) {
      this.free(this.distIds); this.free(this.distProbs);
      this.distCap = cap; this.distIds = this.alloc(cap * 4); this.distProbs = this.alloc(cap * 4);
    }
    const logits = this.x.wlm_ctx_logits(this.ctx) >>> 0;
    const sp = this._writeSampler(o);
    const nh = this._writeHist(ids, o.repeatLastN);
    const n = this.x.wlm_sample_dist(this.ctx, logits, sp, this.histBuf, nh, this.distIds, this.distProbs, cap) >>> 0;
    const out = [];
    for (let i = 0; i < n; i++) {
      const token = this.i32[(this.distIds >>> 2) + i];
      out.push({ token, prob: this.f32[(this.distProbs >>> 2) + i], text: utf8.decode(this.tokenBytes(token)) });
    }
    return out;
  }

  // ---- quantization -----------------------------------------------------------

  /**
   * Re-quantizes the loaded model. `sink(view)` receives a view of the output
   * bytes in wasm memory (valid until the next engine call).
   * @returns {{report: string, size: number}}
   */
  quantize(type, sink) {
    this._requireModel();
    const t = typeof type === 'number' ? type : QUANT_TYPES[String(type).toLowerCase()];
    if (t === undefined) throw new EngineError(`unknown quantization type '${type}' (use ${Object.keys(QUANT_TYPES).join(', ')})`, 1);
    this._clearErr();
    const st = this.x.wlm_quantize_size(this.model, t, this.scratch + S_U64, this.scratch + S_ERR);
    this._check(st, 'quantize');
    const size = Number(this.dv.getBigUint64(this.scratch + S_U64, true));
    const out = this.alloc(size);
    const repCap = 65536 + 256 * (this.x.wlm_tensor_count(this.model) >>> 0);
    let rep = 0;
    try {
      rep = this.alloc(repCap);
      this._clearErr();
      const st2 = this.x.wlm_quantize(this.model, t, out, BigInt(size), rep, repCap, this.scratch + S_ERR);
      this._check(st2, 'quantize');
      const u8 = this.u8;
      let e = rep; while (e < rep + repCap && u8[e] !== 0) e++;
      const report = utf8.decode(u8.subarray(rep, e));
      sink(this.u8.subarray(out, out + size));
      return { report, size };
    } finally {
      this.free(out); this.free(rep);
    }
  }

  dispose() {
    this.unload();
    if (this.pool) {
      this.x.wlm_pool_free(this.pool);   // the compute threads leave their loops
      this.pool = 0;
      for (const w of this.threadWorkers) w.terminate();
      this.threadWorkers = [];
    }
    this.free(this.scratch); this.free(this.detokOut);
    this.scratch = 0; this.detokOut = 0;
  }
}
