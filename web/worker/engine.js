// wasmlm engine: one wasm instance (one linear memory) holding one model.
//
// Pure JavaScript, no Node or browser APIs: it runs inside the worker
// (web/worker/worker.js) in both environments. Engine owns the model, its
// context and what the cache holds per sequence, and offers the operations
// generation strategies are built from (web/worker/generation.js,
// web/worker/multi.js): prefill, evaluate a batch over sequences, sample a
// row, speculative accept, fork / remove / rewind a sequence, a logits row.
// Concerns live in their own modules: memory and the C error (heap.js),
// file staging (staging.js), GGUF values (gguf.js), text streams and stop
// strings (stream.js), the generation loop (generation.js), quantization
// (quantize.js); struct layouts come from abi.js, generated from src/wlm.h,
// the running build's table (this.abi: wasm32 or wasm64 pointers, heap.js).
import { DEFAULT_SAMPLING } from '../options.js';
import { WasmlmError, EngineError } from '../errors.js';
import { WasmHeap, STATUS_CONTEXT_FULL, STATUS_NAMES, addr, word } from './heap.js';
import { createMemory, describeModule, wrapExports, WASM32_MAX_BYTES, WASM64_MAX_BYTES } from '../memory64.js';
import { FileStaging, VOCAB_FIRST_BYTES } from './staging.js';
import { decodeGgufValue, shortF32 } from './gguf.js';
import { decodeUtf8, encodeUtf8Into } from './text.js';
import { samplingOptions } from './stream.js';
import { startGeneration } from './generation.js';
import { quantizeModel } from './quantize.js';
import { Grammars } from './grammar.js';
import { embedTexts, POOLING_NAMES } from './embed.js';

// the engine's package entry (wasmlm/engine) keeps exporting what it did
export { STATUS_NAMES, STATUS_CONTEXT_FULL, nomemMessage } from './heap.js';
export { DECLARED_FIRST_BYTES } from './staging.js';
export { ggufHeaderProblem, badFileError, shortF32, decodeGgufValue, GGUF_TYPE_NAMES, ARRAY_SUMMARY_LIMIT } from './gguf.js';
export { StopMatcher, samplingOptions, promptIdsOf, Stream } from './stream.js';
export { DEFAULT_SAMPLING };

/** nextTokenDistribution's sampler when no filter is asked for: the model's
 * own distribution (temperature 1, no top-k/top-p/min-p, no penalty). */
export const RAW_DISTRIBUTION = Object.freeze({ temperature: 1, topK: 0, topP: 1, minP: 0, repeatPenalty: 1, presencePenalty: 0, frequencyPenalty: 0, typicalP: 1 });

const MAX_SEQ = 64;      // WLM_MAX_SEQ
const ENCODER_BATCH = 512; // default batch of a non-causal model: it sees a whole text in one pass
const DETOK_CAP = 4096;

/** Ops a vocabulary-only engine (loadTokenizer) serves; the others need weights. */
export const VOCAB_ONLY_OPS = Object.freeze(['loadFile', 'loadBegin', 'loadChunk', 'loadPart', 'loadEnd', 'loadCancel',
  'tokenize', 'detokenize', 'renderChat', 'vocab', 'info', 'memory', 'dispose']);

/** A saved state the engine refuses (corrupt, cut short, another version, model or context): code BAD_SAVED_STATE. */
function badSavedState(message, status) {
  return new WasmlmError('BAD_SAVED_STATE', message, { status, statusName: STATUS_NAMES[status] });
}

export class Engine extends WasmHeap {
  /**
   * @param {WebAssembly.Module|BufferSource} wasm compiled module or its bytes
   * @param {{threads?: number, spawnThread?: Function, build?: object}} [opts] `build`: describeModule()
   *   of the module (web/memory64.js; read here from bytes): a memory64 build gets a memory64
   *   memory and its exports wrapped; without it a compiled module is taken as a wasm32 build
   */
  static async create(wasm, opts = {}) {
    const mod = wasm instanceof WebAssembly.Module ? wasm : await WebAssembly.compile(wasm);
    const build = opts.build || (wasm instanceof WebAssembly.Module ? null : describeModule(wasm));
    const imports = WebAssembly.Module.imports(mod);
    const bad = imports.filter((i) => !(i.module === 'env' && i.name === 'memory' && i.kind === 'memory'));
    if (bad.length) throw new WasmlmError('UNSUPPORTED', 'wasmlm.wasm has unexpected imports: ' + bad.map((i) => `${i.module}.${i.name}`).join(', '));
    const threads = Math.max(1, opts.threads | 0);
    const shared = threads > 1;
    const memory64 = !!(build && build.memory64);
    const memory = createMemory({ memory64, shared, initial: 2 << 20, maximum: memory64 ? WASM64_MAX_BYTES : WASM32_MAX_BYTES });
    const inst = await WebAssembly.instantiate(mod, { env: { memory } });
    const e = new Engine(memory64 ? wrapExports(inst.exports, build) : inst.exports, memory, memory64);
    if (shared) await e.startThreads(mod, threads, opts.spawnThread, memory64 ? build : null);
    return e;
  }

  constructor(exports, memory, memory64 = false) {
    super(exports, memory, memory64);
    this.model = 0;
    this.ctx = 0;
    this.staging = new FileStaging(this);
    this.nParts = 1;         // the loaded model's files (a split GGUF: its parts)
    this.blocks = {};        // growable work blocks by name: {p, cap}
    this.hparams = null;
    this.pool = 0; this.threads = 1; this.threadWorkers = [];
    this.seqs = new Map();   // sequence -> the tokens whose keys/values it holds (prefix reuse)
    /** where a plain generation (or loadState) left sequence 0: {ids, rng} for `resume` and saveState; null when nothing can resume */
    this.resumePoint = null;
    this.vocabOnly = false;  // loaded by loadTokenizer: vocabulary and metadata, no weights, no context
    this.loadingVocab = false;
    this.nSeqMax = 1; this.nOutputs = 1;
    this.detokOut = this.alloc(DETOK_CAP);
    this.grammars = new Grammars(this);   // compiled grammars, by text (./grammar.js)
  }

  /**
   * Starts threads - 1 compute threads on this (shared) memory: each one is
   * a worker running web/worker/thread-worker.js with its own 1 MiB stack,
   * serving the engine's pool until dispose().
   * @param {(msg:object) => Promise<{terminate():void}>} spawn starts one thread-worker with msg
   * @param {object|null} build a memory64 build's describeModule() (its threads wrap their exports too)
   */
  async startThreads(mod, threads, spawn, build = null) {
    this.pool = this.x.wlm_pool_new(threads);
    if (!this.pool) throw new WasmlmError('UNSUPPORTED', 'this wasm build has no threads');
    this.threadWorkers = [];
    const STACK = 1 << 20;
    for (let tid = 1; tid < threads; tid++) {
      const base = this.alloc(STACK);
      this.threadWorkers.push(await spawn({ module: mod, memory: this.memory, pool: this.pool, tid, stackTop: base + STACK, build }));
    }
    this.threads = threads;
  }

  /** A work block of at least `bytes` (kept and reused; regrown to `grow(cap)` bytes when too small). */
  block(name, bytes, grow = (cap) => Math.max(bytes, cap * 2)) {
    const b = this.blocks[name] || (this.blocks[name] = { p: 0, cap: 0 });
    if (bytes > b.cap) {
      const cap = grow(b.cap);
      this.free(b.p);
      b.p = 0; b.cap = 0;
      b.p = this.alloc(cap);
      b.cap = cap;
      b.holds = null;   // what biasOf wrote there is gone
    }
    return b.p;
  }

  requireModel() { if (!this.model) throw new EngineError('no model loaded', 7); }
  requireContext() {
    this.requireModel();
    if (!this.ctx) throw new EngineError('this engine holds a vocabulary only (loadTokenizer): it has no weights to run', 7);
  }

  // ---- loading (the bytes: ./staging.js) ------------------------------------

  /**
   * Reserves memory for the model file (see FileStaging.begin). With
   * `vocabOnly` only its header and metadata will be read and loaded
   * (metaProgress says when they are in): a size is then only a hint.
   */
  beginLoad(size, { declared = false, vocabOnly = false, name = 'the model bytes' } = {}) {
    if (this.model) throw new EngineError('a model is already loaded in this engine', 7);
    this.loadingVocab = vocabOnly;
    this.loadName = name;   // what errors about the bytes call them
    return vocabOnly ? this.staging.begin(size, true, VOCAB_FIRST_BYTES) : this.staging.begin(size, declared);
  }

  /**
   * A vocabulary-only load: whether the bytes written so far hold the whole
   * header and metadata of the (first) file. {done, need}: need is their
   * size when done, else a lower bound of it. Throws when the bytes cannot
   * start a valid GGUF file.
   */
  metaProgress() {
    const first = this.staging.parts()[0];
    this.clearError();
    const st = this.x.wlm_gguf_meta_bytes(this.staging.ptr + first.offset, BigInt(first.length), this.at('u64'), this.at('err'));
    const need = Number(this.dv.getBigUint64(this.at('u64'), true));
    if (st === 3) return { done: false, need };
    this.check(st, 'cannot load the vocabulary');
    return { done: true, need };
  }
  /** Starts the next part of a split GGUF (see FileStaging.nextPart). */
  nextPart(size, { declared = false } = {}) {
    if (this.model) throw new EngineError('a model is already loaded in this engine', 7);
    this.staging.nextPart(size, declared);
  }
  reserve(extra) { this.staging.reserve(extra); }
  write(chunk, name = this.loadName || 'the model bytes') { this.staging.write(chunk instanceof Uint8Array ? chunk : new Uint8Array(chunk), name); }
  writeView(n) { return this.staging.writeView(n); }
  advance(n) { this.staging.advance(n); }
  get fileLen() { return this.staging.len; }

  /**
   * Parses the written bytes and creates the context.
   * @param {{contextLength?:number,batchSize?:number,kvType?:'f32'|'f16',onFull?:'error'|'slide',nKeep?:number,maxSequences?:number,windowCache?:'window'|'full'}} opts
   */
  finishLoad(opts = {}) {
    if (this.loadingVocab) return this.finishVocabLoad();
    try {
      this.clearError();
      const pp = this.at('ptr');
      this.setPtr(pp, 0);
      const parts = this.staging.parts();
      let st;
      if (parts.length === 1) {
        st = this.x.wlm_model_load_inplace(pp, this.staging.ptr, BigInt(this.staging.len), this.at('err'));
      } else {
        // the parts' addresses (pointers) and sizes (u64), in a block of their own
        const tab = this.alloc(parts.length * 16 + 8, 'the split GGUF part table');
        try {
          const sizes = tab + Math.ceil(parts.length * this.ptrBytes / 8) * 8;
          parts.forEach((p, i) => {
            this.setPtr(tab + i * this.ptrBytes, this.staging.ptr + p.offset);
            this.dv.setBigUint64(sizes + i * 8, BigInt(p.length), true);
          });
          st = this.x.wlm_model_load_parts_inplace(pp, tab, sizes, parts.length, this.at('err'));
        } finally { this.free(tab); }
      }
      this.check(st, 'cannot load model');
      this.nParts = parts.length;
      this.model = this.getPtr(pp);
      this.hparams = this.readHparams();
      /** attention is causal (decoders), or a token sees its whole text (bert, nomic-bert) */
      this.causal = this.x.wlm_model_causal(this.model) !== 0;
      this.ctxOpts = contextOptions(opts);
      if (!this.causal && opts.batchSize == null) this.ctxOpts.nBatch = ENCODER_BATCH;
      this.createContext(this.ctxOpts);
      /** the per-sequence position limit the user asked for (a grown cache keeps it) */
      this.ctxLimit = this.nCtx;
      this.tokenBlock(Math.max(256, Math.min(this.nCtx, 4096)));
      return this.info();
    } catch (e) {
      this.unload();
      throw e;
    }
  }

  /** The vocabulary-only end of a load: the first file's metadata, no context. */
  finishVocabLoad() {
    try {
      this.clearError();
      const pp = this.at('ptr');
      this.setPtr(pp, 0);
      const first = this.staging.parts()[0];
      const st = this.x.wlm_model_load_vocab(pp, this.staging.ptr + first.offset, BigInt(first.length), this.at('err'));
      this.check(st, 'cannot load the vocabulary');
      this.model = this.getPtr(pp);
      this.vocabOnly = true;
      this.nParts = 1;
      this.hparams = this.readHparams();
      this.tokenBlock(256);
      return this.info();
    } catch (e) {
      this.unload();
      throw e;
    }
  }

  /** Loads a whole in-memory file (convenience for tests and small models). */
  loadBytes(bytes, opts) {
    const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
    this.beginLoad(u8.byteLength);
    this.write(u8);
    return this.finishLoad(opts);
  }

  unload() {
    this.grammars.free();
    if (this.ctx) this.x.wlm_ctx_free(this.ctx);
    if (this.model) this.x.wlm_model_free(this.model);
    this.ctx = 0; this.model = 0; this.hparams = null; this.infoCache = null; this.vocabFp = null;
    this.seqs.clear();
    this.resumePoint = null;
    this.vocabOnly = false; this.loadingVocab = false;
    this.staging.free();
    for (const b of Object.values(this.blocks)) this.free(b.p);
    this.blocks = {};
  }

  readHparams() {
    const h = this.abi.readHparams(this.dv, addr(this.x.wlm_model_hparams(this.model)));
    return {
      nVocab: h.nVocab, nCtxTrain: h.nCtxTrain, nEmbd: h.nEmbd, nLayer: h.nLayer, nHead: h.nHead, nHeadKv: h.nHeadKv,
      headDim: h.headDim, nFf: h.nFf, nRot: h.nRot,
      ropeFreqBase: shortF32(h.ropeFreqBase), rmsEps: shortF32(h.rmsEps),
      bosId: h.bosId, eosId: h.eosId, unkId: h.unkId,
      addBos: h.addBos !== 0, addSpacePrefix: h.addSpacePrefix !== 0, tiedOutput: h.tiedOutput !== 0,
      headDimV: h.headDimV, ropeType: h.ropeType === 2 ? 'neox' : 'norm', ropeScaled: h.ropeScaled !== 0,
    };
  }

  // ---- the context plan ----------------------------------------------------------

  /** Creates (or re-creates) the context from resolved options {nCtx, nBatch, kv, slide, nKeep, nSeq, nOut, swaFull}. */
  createContext(o) {
    if (this.ctx) { this.x.wlm_ctx_free(this.ctx); this.ctx = 0; }
    this.seqs.clear();
    this.resumePoint = null;
    const cp = this.at('ctxParams'), pp = this.at('ptr');
    this.x.wlm_ctx_default_params(cp);
    this.abi.writeCtxParams(this.dv, cp, {
      nCtx: o.nCtx, nBatch: o.nBatch, kvType: o.kv, fullPolicy: o.slide, nKeep: o.nKeep,
      nThreads: this.threads, nSeqMax: o.nSeq, nOutputs: o.nOut, swaFull: o.swaFull,
    });
    this.clearError();
    this.setPtr(pp, 0);
    const st = this.x.wlm_ctx_new(pp, this.model, cp, this.at('err'));
    this.check(st, 'cannot create context');
    this.ctx = this.getPtr(pp);
    if (this.pool) this.x.wlm_ctx_set_pool(this.ctx, this.pool, this.threads);
    this.nCtx = this.x.wlm_ctx_n_ctx(this.ctx) >>> 0;
    this.nBatch = Math.min(o.nBatch || 64, this.nCtx); // as the engine resolves it
    this.kvType = o.kv ? 'f16' : 'f32';
    this.onFull = o.slide ? 'slide' : 'error';
    this.nSeqMax = o.nSeq;
    this.nOutputs = o.nOut;
    this.windowCache = o.swaFull ? 'full' : 'window';
    /** rows the sliding-window layers keep (0: one per position, as every other layer) */
    this.windowRows = this.x.wlm_ctx_window_rows(this.ctx) >>> 0;
  }

  /**
   * Makes sure the context holds `nSeq` sequences, `slots` cache slots and
   * `outputs` rows of logits per call; re-plans it (one allocation, the
   * cache starts empty) when it does not. Returns true when it grew.
   */
  ensureContext({ nSeq = 1, slots = 0, outputs = 1, batch = 0 }) {
    if (nSeq > MAX_SEQ) throw new EngineError(`${nSeq} sequences asked for, at most ${MAX_SEQ} fit in one context`, 1);
    if (nSeq <= this.nSeqMax && slots <= this.nCtx && outputs <= this.nOutputs && batch <= this.nBatch) return false;
    if (this.onFull === 'slide' && nSeq > 1) throw new EngineError("several sequences need onFull 'error' (the sliding window is a one-sequence policy)", 1);
    const nCtx = Math.max(this.nCtx, slots);
    const o = { ...this.ctxOpts, nCtx, nSeq: Math.max(this.nSeqMax, nSeq), nOut: Math.max(this.nOutputs, outputs, nSeq) };
    if (batch > this.nBatch) o.nBatch = Math.min(batch, nCtx);
    const old = this.ctxOpts;
    try {
      this.createContext(o);
    } catch (e) {
      this.createContext(old);   // keep a working context
      throw e;
    }
    this.ctxOpts = o;
    this.ctxGrowths = (this.ctxGrowths || 0) + 1;
    return true;
  }

  // ---- tokens -------------------------------------------------------------------

  tokenBlock(n) { return this.block('tok', n * 4, (cap) => Math.max(n * 4, cap * 2)); }

  /** @returns {number[]} token ids; `continuation`: the text continues other text (no SentencePiece space prefix) */
  tokenize(text, addBos, parseSpecial = false, continuation = false) {
    this.requireModel();
    text = String(text ?? '');
    if (addBos == null) addBos = this.hparams.addBos;
    const need = text.length * 3 + 1;
    const textP = this.block('text', need, (cap) => Math.max(need, 1024, cap * 2));
    const { written } = encodeUtf8Into(text, this.u8.subarray(textP, textP + this.blocks.text.cap));
    const nOut = this.at('nOut');
    for (let attempt = 0; attempt < 2; attempt++) {
      this.clearError();
      this.dv.setUint32(nOut, 0, true);
      const flags = (addBos ? 1 : 0) | (parseSpecial ? 2 : 0) | (continuation ? 4 : 0); // WLM_TOK_ADD_BOS | _PARSE_SPECIAL | _NO_SPACE_PREFIX
      const tok = this.blocks.tok, cap = Math.floor(tok.cap / 4);
      const st = this.x.wlm_tokenize(this.model, textP, written, flags, tok.p, cap, nOut, this.at('err'));
      const n = this.dv.getUint32(nOut, true);
      if (st !== 0 && n > cap && attempt === 0) { this.tokenBlock(n); continue; }
      this.check(st, 'tokenize');
      return Array.from(this.i32.subarray(word(tok.p), word(tok.p) + n));
    }
    throw new EngineError('tokenize: token buffer too small', 1);
  }

  /** A block for one stream: its rng and detokenizer ({rng, detok, block}). */
  allocStream() {
    const { STREAM } = this.abi, p = this.alloc(STREAM.size);
    return { rng: p + STREAM.rng, detok: p + STREAM.detok, block: p };
  }
  seedRng(rngP, seed) { this.x.wlm_rng_seed(rngP, seed); }
  rngFloat(rngP) { return this.x.wlm_rng_float(rngP); }
  resetDetok(detokP) { this.x.wlm_detok_reset(detokP); }

  /** The text a token adds to the detokenizer at `detokP` (complete UTF-8 only). */
  detokPush(detokP, token) {
    const n = this.x.wlm_detok_push(this.model, detokP, token, this.detokOut, DETOK_CAP) >>> 0;
    return n ? decodeUtf8(this.u8.subarray(this.detokOut, this.detokOut + Math.min(n, DETOK_CAP))) : '';
  }
  /** What the detokenizer still holds (an incomplete character) at the end of a stream. */
  detokFlush(detokP) {
    const n = this.x.wlm_detok_flush(detokP, this.detokOut, DETOK_CAP) >>> 0;
    return n ? decodeUtf8(this.u8.subarray(this.detokOut, this.detokOut + Math.min(n, DETOK_CAP))) : '';
  }

  /** Text of a token sequence (control tokens give nothing). */
  detokenize(ids) {
    this.requireModel();
    const d = this.at('detok2');
    this.resetDetok(d);
    let s = '';
    const nv = this.hparams.nVocab;
    for (const id of ids) {
      const t = Number(id);
      if (!Number.isInteger(t) || t < 0 || t >= nv) throw new EngineError(`token id ${id} out of range [0, ${nv})`, 1);
      s += this.detokPush(d, t);
    }
    return s + this.detokFlush(d);
  }

  /** Whether `token` ends generation (EOS, EOT, ... as the engine knows them). */
  isEog(token) {
    if (this.x.wlm_token_is_eog) return this.x.wlm_token_is_eog(this.model, token) !== 0;
    return token === this.hparams.eosId;
  }

  /** Raw bytes of one token. */
  tokenBytes(id) {
    this.requireModel();
    const n = this.x.wlm_token_bytes(this.model, id, this.detokOut, DETOK_CAP) >>> 0;
    return this.u8.slice(this.detokOut, this.detokOut + Math.min(n, DETOK_CAP));
  }

  /** The bytes of every token, packed: token i is bytes[offsets[i] .. offsets[i + 1]). */
  vocabBytes() {
    this.requireModel();
    const nv = this.hparams.nVocab;
    const offsets = new Uint32Array(nv + 1);
    let bytes = new Uint8Array(Math.max(1024, nv * 8)), len = 0;
    for (let i = 0; i < nv; i++) {
      const n = Math.min(this.x.wlm_token_bytes(this.model, i, this.detokOut, DETOK_CAP) >>> 0, DETOK_CAP);
      if (len + n > bytes.length) { const b = new Uint8Array(Math.max(bytes.length * 2, len + n)); b.set(bytes.subarray(0, len)); bytes = b; }
      bytes.set(this.u8.subarray(this.detokOut, this.detokOut + n), len);
      len += n;
      offsets[i + 1] = len;
    }
    return { bytes: bytes.slice(0, len), offsets };
  }

  // ---- sequences in the cache ------------------------------------------------------

  /** The tokens whose keys/values sequence `seq` holds (the engine keeps this list). */
  tokensOf(seq = 0) {
    let t = this.seqs.get(seq);
    if (!t) this.seqs.set(seq, (t = []));
    return t;
  }
  /** The tokens of sequence 0 (prefix reuse). */
  get seqTokens() { return this.tokensOf(0); }

  /** Empties the cache (every sequence). */
  clearCache() {
    this.x.wlm_ctx_reset(this.ctx);
    this.seqs.clear();
    this.resumePoint = null;
  }

  /** Evaluates `ids` after sequence 0's tokens in chunks of n_batch; returns the status (-1: stopped). */
  append(ids, shouldStop) {
    const tokP = this.tokenBlock(Math.min(ids.length, this.nBatch) || 1);
    const base = word(tokP), have = this.tokensOf(0);
    for (let i = 0; i < ids.length; i += this.nBatch) {
      if (shouldStop && shouldStop()) return -1;
      const n = Math.min(this.nBatch, ids.length - i);
      const i32 = this.i32;
      for (let j = 0; j < n; j++) i32[base + j] = ids[i + j];
      this.clearError();
      const st = this.x.wlm_eval(this.ctx, tokP, n, this.at('err'));
      if (st !== 0) return st;
      for (let j = 0; j < n; j++) have.push(ids[i + j]);
    }
    return 0;
  }

  /**
   * Puts `ids` into sequence 0 and leaves the logits of the last one, reusing
   * the longest prefix already in the cache (the previous prompt and its
   * continuation): only the rest is evaluated. Other sequences are dropped.
   * @returns {{status: number, reused: number}} status -1 = stopped
   */
  prefill(ids, shouldStop, reuse = true) {
    this.resumePoint = null;   // a plain generation sets it again when it ends
    this.removeOtherSequences();
    const have = this.tokensOf(0);
    const max = reuse ? Math.min(have.length, ids.length - 1) : 0;
    let L = 0;
    while (L < max && have[L] === ids[L]) L++;
    if (L === 0) this.clearCache();
    else if (L < have.length && !this.rewindSequence(0, L)) { this.clearCache(); L = 0; }
    return { status: this.append(L ? ids.slice(L) : ids, shouldStop), reused: L };
  }

  /**
   * Evaluates one token per (token, seq) pair in one forward pass; want[i]
   * (default all) asks for row i's logits. Returns false when the context is
   * full; throws other failures (named `what`).
   */
  evalBatch(tokens, seqs, want = null, what = 'decode') {
    const n = tokens.length;
    const cap = Math.max(n, 64);
    const p = this.block('batch', n * 9 + 8, () => cap * 9 + 8);
    const rows = (this.blocks.batch.cap - 8) / 9 | 0;   // the block holds ids, seqs and flags for `rows` pairs
    const i32 = this.i32, u8 = this.u8, b = word(p);
    for (let i = 0; i < n; i++) { i32[b + i] = tokens[i]; i32[b + rows + i] = seqs[i]; u8[p + 8 * rows + i] = want ? (want[i] ? 1 : 0) : 1; }
    this.clearError();
    const st = this.x.wlm_eval_batch(this.ctx, p, p + 4 * rows, p + 8 * rows, n, this.at('err'));
    if (st === 0) { for (let i = 0; i < n; i++) this.tokensOf(seqs[i]).push(tokens[i]); return true; }
    for (const [s, t] of this.seqs) t.length = Math.min(t.length, this.sequenceLength(s));
    if (st === STATUS_CONTEXT_FULL) return false;
    this.check(st, what);
    return true;
  }

  /** Sequence `dst` becomes a copy of `src` (the cache slots are shared, not copied). */
  forkSequence(src, dst) {
    this.check(this.x.wlm_seq_fork(this.ctx, src, dst, this.at('err')), 'fork');
    this.seqs.set(dst, this.tokensOf(src).slice());
  }
  removeSequence(seq) {
    this.x.wlm_seq_remove(this.ctx, seq, 0);
    this.seqs.delete(seq);
  }
  /** Drops every sequence but 0. */
  removeOtherSequences() {
    for (let s = 1; s < this.nSeqMax; s++) this.removeSequence(s);
  }
  /** Keeps the first `n` positions of sequence `seq`; false when the engine cannot (the cache slid),
   * or with `what` throws that failure. */
  rewindSequence(seq, n, what = null) {
    this.clearError();
    const st = this.x.wlm_seq_truncate(this.ctx, seq, n, this.at('err'));
    if (st !== 0 && what) this.check(st, what);
    if (st !== 0) return false;
    const t = this.tokensOf(seq);
    t.length = Math.min(t.length, n);
    return true;
  }
  /** Positions sequence `seq` holds in the cache. */
  sequenceLength(seq) { return this.x.wlm_seq_pos(this.ctx, seq); }

  // ---- saved state (src/kvcache.c: wlm_ctx_state_*) ----------------------------------

  /**
   * Sequence 0 as bytes: its tokens, the cache rows it uses, and, when a
   * plain generation (or a loaded state) left it, the tokens sampled after
   * them and the random stream to continue (the resume point).
   * @returns {Uint8Array}
   */
  saveState() {
    this.requireContext();
    const have = this.seqTokens;
    const pos = this.sequenceLength(0);
    if (have.length !== pos) throw new EngineError(`internal: sequence 0 holds ${pos} positions, ${have.length} tokens are recorded`, 7);
    const rp = this.resumePoint;
    const resumable = rp && rp.ids.length >= have.length && have.every((t, i) => rp.ids[i] === t);
    const ids = resumable ? rp.ids : have;
    const size = Number(this.x.wlm_ctx_state_size(this.ctx, 0, ids.length));
    const { RNG } = this.abi;
    const tmp = this.alloc(ids.length * 4 + RNG.size, 'the saved state\'s tokens');
    let out = 0;
    try {
      out = this.alloc(size, 'the saved state');
      this.i32.set(ids, word(tmp));
      if (resumable) this.u8.set(rp.rng, tmp + ids.length * 4);
      this.clearError();
      const st = this.x.wlm_ctx_state_save(this.ctx, 0, tmp, ids.length, resumable ? tmp + ids.length * 4 : 0, out, BigInt(size),
        this.at('u64'), this.at('err'));
      this.check(st, 'saveState');
      return this.u8.slice(out, out + size);
    } finally {
      this.free(out);
      this.free(tmp);
    }
  }

  /**
   * Makes the saved state `bytes` sequence 0 (other sequences are dropped).
   * Refused with BAD_SAVED_STATE, the cache unchanged, when the bytes are not
   * a state this model and context can take. Returns {tokens, positions,
   * resumable}.
   */
  loadState(bytes) {
    this.requireContext();
    const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
    const { RNG, STATE_INFO } = this.abi;
    this.removeOtherSequences();
    const p = this.alloc(Math.max(1, u8.byteLength), 'the saved state');
    try {
      this.u8.set(u8, p);
      this.clearError();
      const infoP = this.at('stateInfo');
      const st = this.x.wlm_ctx_state_load(this.ctx, 0, p, BigInt(u8.byteLength), infoP, this.at('err'));
      if (st === 5) this.check(st, 'loadState');   // out of memory is NOMEM, not the state's fault
      if (st !== 0) throw badSavedState(`cannot load the saved state: ${this.errorMessage(st)}`, st);
      const info = this.abi.readStateInfo(this.dv, infoP);
      const base = word(p + info.tokensOffset);
      const tokens = Array.from(this.i32.subarray(base, base + info.nTokens));   // (p is 64-byte aligned, the offset 4-aligned)
      this.seqs.clear();
      this.seqs.set(0, tokens.slice(0, info.nPos));
      this.resumePoint = info.hasRng ? { ids: tokens, rng: this.u8.slice(infoP + STATE_INFO.rng, infoP + STATE_INFO.rng + RNG.size) } : null;
      return { tokens, positions: info.nPos, resumable: !!info.hasRng };
    } finally {
      this.free(p);
    }
  }

  // ---- logits and sampling -----------------------------------------------------

  logitsAddress(row = 0) { return addr(this.x.wlm_ctx_logits(this.ctx)) + row * this.hparams.nVocab * 4; }
  /** Logits row `row` of the last evaluation (a view, valid until the next engine call). */
  logitsRow(row = 0) {
    const p = word(this.logitsAddress(row));
    return this.f32.subarray(p, p + this.hparams.nVocab);
  }

  /** Writes the sampling options `o` (from samplingOptions) as the scratch's
   * wlm_sampler_params, with allowed-token bitset `allow` (0: every token). */
  writeSampler(o, allow = 0) {
    const p = this.at('sampler');
    const b = this.biasOf(o);
    this.abi.writeSamplerParams(this.dv, p, {
      temperature: o.temperature, topK: o.topK, topP: o.topP, minP: o.minP, repeatPenalty: o.repeatPenalty,
      repeatLastN: o.repeatLastN, presencePenalty: o.presencePenalty, frequencyPenalty: o.frequencyPenalty,
      typicalP: o.typicalP, nBiases: b.n, biases: b.p, allow,
    });
    return p;
  }

  /**
   * The logit bias of `o` as wlm_logit_bias pairs in wasm memory: {p, n}. A
   * token id is itself; a text stands for each distinct token of it,
   * tokenized as written (no BOS, special-token text kept plain, no
   * SentencePiece space prefix: " word" gives the word after a space). The
   * pairs are made once per options object and written again only when
   * another object's took the block.
   */
  biasOf(o) {
    if (!o.logitBias) return { p: 0, n: 0 };
    if (!o.biasPairs) {
      const nv = this.hparams.nVocab;
      const entries = Array.isArray(o.logitBias) ? o.logitBias : Object.entries(o.logitBias).map(([k, b]) => [Number(k), b]);
      const pairs = [];
      for (const [key, bias] of entries) {
        const ids = typeof key === 'string' ? [...new Set(this.tokenize(key, false, false, true))] : [key];
        for (const t of ids) {
          if (!Number.isInteger(t) || t < 0 || t >= nv) throw new EngineError(`logitBias: token id ${t} out of range [0, ${nv})`, 1);
          pairs.push(t, bias);
        }
      }
      o.biasPairs = pairs;
    }
    const n = o.biasPairs.length / 2;
    if (n === 0) return { p: 0, n: 0 };
    const { LOGIT_BIAS } = this.abi;
    const p = this.block('bias', n * LOGIT_BIAS.size, (cap) => Math.max(n * LOGIT_BIAS.size, cap * 2));
    if (this.blocks.bias.holds !== o.biasPairs) {
      for (let i = 0; i < n; i++) {
        this.dv.setInt32(p + i * LOGIT_BIAS.size + LOGIT_BIAS.token, o.biasPairs[2 * i], true);
        this.dv.setFloat32(p + i * LOGIT_BIAS.size + LOGIT_BIAS.bias, o.biasPairs[2 * i + 1], true);
      }
      this.blocks.bias.holds = o.biasPairs;
    }
    return { p, n };
  }
  /** Writes the last `n` tokens of `tokens` as the penalty history; returns how many. */
  writeHistory(tokens, n) {
    const k = Math.min(n, tokens.length);
    if (k === 0) return 0;
    const p = this.block('hist', k * 4, () => Math.max(k, 64) * 4);
    const base = word(p), i32 = this.i32;
    for (let i = 0; i < k; i++) i32[base + i] = tokens[tokens.length - k + i];
    return k;
  }
  get historyAddress() { return this.blocks.hist ? this.blocks.hist.p : 0; }

  /** Samples from logits row `row` with the stream's rng, among the tokens of bitset `allow` (0: all); returns {token, logprob}. */
  sample(row, o, history, rng, allow = 0) {
    const sp = this.writeSampler(o, allow);
    const nh = this.writeHistory(history, o.repeatLastN);
    this.clearError();
    const st = this.x.wlm_sample(this.ctx, this.logitsAddress(row), sp, this.historyAddress, nh, rng, this.at('token'), this.at('logprob'), this.at('err'));
    this.check(st, 'sample');
    return { token: this.dv.getInt32(this.at('token'), true), logprob: this.dv.getFloat32(this.at('logprob'), true) };
  }

  /**
   * The rejection-sampling rule of speculative decoding on logits row `row`:
   * keeps `draft` (drawn from q = {ids, probs}, null: one-hot) or draws a
   * replacement. Returns {token, accepted, logprob}.
   */
  specAccept(row, o, history, draft, q, rng, allow = 0) {
    const nv = this.hparams.nVocab;
    const qIds = this.block('qIds', nv * 4, () => nv * 4), qProbs = this.block('qProbs', nv * 4, () => nv * 4);
    const n = q ? q.ids.length : 1;
    if (q) { this.i32.set(q.ids, word(qIds)); this.f32.set(q.probs, word(qProbs)); }
    else { this.i32[word(qIds)] = draft; this.f32[word(qProbs)] = 1; }
    const sp = this.writeSampler(o, allow);
    const nh = this.writeHistory(history, o.repeatLastN);
    this.clearError();
    const st = this.x.wlm_spec_accept(this.ctx, this.logitsAddress(row), sp, this.historyAddress, nh, draft, qIds, qProbs, n,
      rng, this.at('token'), this.at('accepted'), this.at('logprob'), this.at('err'));
    this.check(st, 'accept');
    const dv = this.dv;
    return { token: dv.getInt32(this.at('token'), true), accepted: dv.getInt32(this.at('accepted'), true), logprob: dv.getFloat32(this.at('logprob'), true) };
  }

  /**
   * The `n` most likely tokens of logits row `row` under the model's own
   * distribution (before a grammar's mask, bias, penalties and filters, so a
   * token the grammar forbids can be among them; wlm_top_logprobs):
   * [{token, text, logprob}], best first. A token's logprob is the very
   * value sample() reports when it picks that token.
   */
  topLogprobs(row, n) {
    const ids = this.block('topIds', n * 4), lps = this.block('topLps', n * 4);
    const k = this.x.wlm_top_logprobs(this.ctx, this.logitsAddress(row), n, ids, lps) >>> 0;
    const out = [];
    for (let i = 0; i < k; i++) {
      const token = this.i32[word(ids) + i];
      out.push({ token, text: decodeUtf8(this.tokenBytes(token)), logprob: this.f32[word(lps) + i] });
    }
    return out;
  }

  /** The sampling distribution of row `row` after the filters: {ids: Int32Array, probs: Float32Array}, most likely first, at most `cap`. */
  distribution(row, o, history, cap) {
    const ids = this.block('distIds', cap * 4, () => cap * 4), probs = this.block('distProbs', cap * 4, () => cap * 4);
    const sp = this.writeSampler(o);
    const nh = this.writeHistory(history, o.repeatLastN);
    const n = this.x.wlm_sample_dist(this.ctx, this.logitsAddress(row), sp, this.historyAddress, nh, ids, probs, cap) >>> 0;
    return { ids: this.i32.slice(word(ids), word(ids) + n), probs: this.f32.slice(word(probs), word(probs) + n) };
  }

  // ---- generation (./generation.js) ----------------------------------------------

  /** A stepper over one generation (see startGeneration in ./generation.js). */
  startGeneration(prompt, opts = {}) { return startGeneration(this, prompt, opts); }

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
    this.requireModel();
    const asked = Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined && v !== null));
    const o = samplingOptions({ ...RAW_DISTRIBUTION, ...asked });
    const addBos = o.addBos == null ? this.hparams.addBos : !!o.addBos;
    const ids = Array.isArray(text) ? text.map(Number) : this.tokenize(text, addBos, o.parseSpecial);
    if (ids.length === 0) ids.push(this.hparams.bosId);
    const { status: st } = this.prefill(ids);
    if (st !== 0) this.check(st, 'eval');
    const cap = Math.max(1, Math.min(opts.topN ?? 20, this.hparams.nVocab));
    const d = this.distribution(0, o, ids, cap);
    return Array.from(d.ids, (token, i) => ({ token, prob: d.probs[i], text: decodeUtf8(this.tokenBytes(token)) }));
  }

  /**
   * Logits of `ids` evaluated from an empty context: the last position's
   * (prefill in batches), or with {all: true} every position's, each token
   * evaluated on its own (decode path). Returns an array of Float32Array.
   */
  logits(ids, { all = false } = {}) {
    this.requireModel();
    ids = Array.from(ids, Number);
    if (ids.length === 0) throw new EngineError('logits: no tokens', 1);
    this.clearCache();
    const out = [];
    for (const part of all ? ids.map((t) => [t]) : [ids]) {
      const st = this.append(part);
      if (st !== 0) this.check(st, 'eval');
      out.push(this.logitsRow(0).slice());
    }
    return out;
  }

  // ---- metadata --------------------------------------------------------------------

  /** Memory in use: the wasm memory's size (it never shrinks: the peak) and the engine's blocks. */
  memoryStats() {
    return {
      wasmBytes: this.memory.buffer.byteLength,
      engineBytes: Number(this.x.wlm_sys_in_use()),
      fileBytes: this.fileLen,
    };
  }

  /** Each metadata entry as {key, type, value pointer, bytes}. */
  *metaEntries() {
    const x = this.x, m = this.model, lenP = this.at('len'), nbP = this.at('u64');
    const n = x.wlm_meta_count(m) >>> 0;
    for (let i = 0; i < n; i++) {
      const kp = addr(x.wlm_meta_key(m, i, lenP));
      const key = this.cstr(kp, this.dv.getUint32(lenP, true));
      const type = x.wlm_meta_type(m, i) >>> 0;
      const vp = addr(x.wlm_meta_value(m, i, nbP));
      yield { key, type, vp, nb: Number(this.dv.getBigUint64(nbP, true)) };
    }
  }

  /** Metadata, hyper-parameters, context settings and tensor table. */
  info() {
    this.requireModel();
    if (this.infoCache) return this.infoCache;
    const metadata = {};
    for (const { key, type, vp, nb } of this.metaEntries()) {
      try {
        metadata[key] = decodeGgufValue(new DataView(this.memory.buffer, vp, nb), 0, type, nb).value;
      } catch (e) {
        metadata[key] = { error: String(e.message) };
      }
    }
    const hp = this.hparams;
    const common = {
      architecture: metadata['general.architecture'] ?? null,
      specialTokens: {
        bos: hp.bosId >= 0 ? this.tokenText(hp.bosId) : null,
        eos: hp.eosId >= 0 ? this.tokenText(hp.eosId) : null,
      },
      chatTemplate: typeof metadata['tokenizer.chat_template'] === 'string' ? metadata['tokenizer.chat_template'] : null,
      name: metadata['general.name'] ?? null,
    };
    if (this.vocabOnly) {
      // a tokenizer: what the vocabulary says, and how much of the file was read
      const { nVocab, nCtxTrain, bosId, eosId, unkId, addBos, addSpacePrefix } = hp;
      this.infoCache = { ...common, vocabOnly: true, bytesRead: this.staging.dataLen,
        hparams: { nVocab, nCtxTrain, bosId, eosId, unkId, addBos, addSpacePrefix }, metadata };
      return this.infoCache;
    }
    const table = this.tensorTable();
    this.infoCache = {
      ...common,
      fileSize: this.staging.dataLen,
      parts: this.nParts,
      paramCount: table.paramCount,
      hparams: { ...this.hparams },
      context: { nCtx: this.nCtx, nBatch: this.nBatch, kvType: this.kvType, onFull: this.onFull, windowCache: this.windowCache, windowRows: this.windowRows },
      embedding: { length: hp.nEmbd, pooling: POOLING_NAMES[this.x.wlm_model_pooling(this.model)], causal: this.causal },
      vocabOnly: false,
      metadata,
      tensors: table.tensors,
    };
    return this.infoCache;
  }

  /** {paramCount, tensors}: every tensor's name, type, dims and file offset. */
  tensorTable() {
    const x = this.x, m = this.model, lenP = this.at('len');
    const tensors = [];
    let paramCount = 0;
    const nt = x.wlm_tensor_count(m) >>> 0;
    for (let i = 0; i < nt; i++) {
      const np = addr(x.wlm_tensor_name(m, i, lenP));
      const name = this.cstr(np, this.dv.getUint32(lenP, true));
      const type = x.wlm_tensor_type(m, i) >>> 0;
      const nd = x.wlm_tensor_ndims(m, i) >>> 0;
      const dims = [];
      for (let d = 0; d < nd; d++) dims.push(Number(x.wlm_tensor_dim(m, i, d)));
      paramCount += dims.reduce((a, b) => a * b, 1);
      const t = { name, type, typeName: this.typeName(type), dims, offset: Number(x.wlm_tensor_offset(m, i)) };
      if (this.nParts > 1) t.part = x.wlm_tensor_part(m, i) >>> 0;
      tensors.push(t);
    }
    return { paramCount, tensors };
  }

  typeName(type) {
    const p = addr(this.x.wlm_type_name(type));
    return p ? this.cstrz(p) : 'type' + type;
  }

  /** Text of a token as stored in the vocabulary (control tokens included:
   * "<|im_end|>"), read from tokenizer.ggml.tokens; null when out of range. */
  tokenText(id) {
    this.requireModel();
    if (!Number.isInteger(id) || id < 0 || id >= this.hparams.nVocab) return null;
    for (const { key, vp } of this.metaEntries()) {
      if (key !== 'tokenizer.ggml.tokens') continue;
      const dv = this.dv;
      let off = vp + 4 + 8; // the GGUF array header (element type u32, count u64), then (u64 length, bytes) per token
      for (let k = 0; k < id; k++) off += 8 + Number(dv.getBigUint64(off, true));
      const len = Number(dv.getBigUint64(off, true));
      return this.cstr(off + 8, len);
    }
    return null;
  }

  /** A fingerprint of the vocabulary (size + every token's bytes and end-of-generation flag), cached. */
  vocabFingerprint() {
    this.requireModel();
    if (this.vocabFp) return this.vocabFp;
    let h = 0x811c9dc5 >>> 0;
    const nv = this.hparams.nVocab;
    const mix = (b) => { h ^= b; h = Math.imul(h, 0x01000193) >>> 0; };
    for (let i = 0; i < nv; i++) {
      const bytes = this.tokenBytes(i);
      for (let j = 0; j < bytes.length; j++) mix(bytes[j]);
      mix(0xff); mix(this.isEog(i) ? 1 : 0);
    }
    this.vocabFp = { nVocab: nv, hash: h.toString(16).padStart(8, '0') };
    return this.vocabFp;
  }

  // ---- embeddings (./embed.js) -------------------------------------------------------

  /** Whether the file asks for EOS after a text (tokenizer.ggml.add_eos_token). */
  get addEos() { return this.info().metadata['tokenizer.ggml.add_eos_token'] === true; }

  /** Embeds texts in groups (a generator yielding between groups; see ./embed.js). */
  embedSteps(texts, opts = {}) { return embedTexts(this, texts, opts); }
  /** Synchronous embed of every text: {vectors, tokens}. */
  embed(texts, opts = {}) {
    const it = this.embedSteps(texts, opts);
    for (;;) { const r = it.next(); if (r.done) return r.value; }
  }

  /** Re-quantizes the loaded model (see ./quantize.js). */
  quantize(type, sink) { return quantizeModel(this, type, sink); }

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

/** The context options of finishLoad, checked and resolved. */
function contextOptions(opts) {
  if (opts.kvType != null && opts.kvType !== 'f32' && opts.kvType !== 'f16') throw new EngineError(`kvType must be 'f32' or 'f16', got ${opts.kvType}`, 1);
  if (opts.onFull != null && opts.onFull !== 'error' && opts.onFull !== 'slide') throw new EngineError(`onFull must be 'error' or 'slide', got ${opts.onFull}`, 1);
  const maxSeq = opts.maxSequences == null ? 1 : Number(opts.maxSequences);
  if (!Number.isInteger(maxSeq) || maxSeq < 1 || maxSeq > MAX_SEQ) throw new EngineError(`maxSequences must be an integer in 1..${MAX_SEQ}, got ${opts.maxSequences}`, 1);
  if (maxSeq > 1 && opts.onFull === 'slide') throw new EngineError("maxSequences > 1 needs onFull 'error' (the sliding window is a one-sequence policy)", 1);
  if (opts.windowCache != null && opts.windowCache !== 'window' && opts.windowCache !== 'full') throw new EngineError(`windowCache must be 'window' or 'full', got ${opts.windowCache}`, 1);
  return {
    nCtx: opts.contextLength == null ? 0 : opts.contextLength >>> 0,
    nBatch: opts.batchSize == null ? 0 : opts.batchSize >>> 0,
    kv: opts.kvType === 'f16' ? 1 : 0,
    slide: opts.onFull === 'slide' ? 1 : 0,
    nKeep: opts.nKeep == null ? 0 : opts.nKeep >>> 0,
    nSeq: maxSeq,
    nOut: maxSeq,
    swaFull: opts.windowCache === 'full' ? 1 : 0,
  };
}
