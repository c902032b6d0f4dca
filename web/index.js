// wasmlm: LLM inference in WebAssembly. Package entry (ESM, Node 20.19+ / 22.12+ and
// browsers). Each loaded model runs in its own worker (worker_threads in
// Node, a module Web Worker in browsers) with its own wasm memory, so the
// caller's event loop never blocks on inference.
import { probeRelaxedSimd } from './simd-probe.js';
import { isNode, nodeImport } from './env.js';
import { QUANT_TYPES, CHANNEL, checkRequest, chunkOf } from './protocol.js';
import { DEFAULT_SAMPLING, checkOptions, checkForModel, checkPrompt, workerOptions, MODEL_BRAND } from './options.js';
import { WasmlmError, badOption, describe } from './errors.js';
import { Sha256 } from './sha256.js';
import { renderRequest, renderResult, chatGenerateOptions, chatTemplateFor } from './chat.js';
import * as scaling from './scaling.js';
import { treeSearch } from './tree.js';
import { deliberate } from './deliberate.js';
import { openaiApi } from './openai.js';
import { abortError, withSignal, streamRequest } from './abort.js';
import { resolveModel, isRegistryName, registryEntries, evictCached, resolveHubModel } from '../models/registry.js';
import { isHubId, resolveHubId, hubFileError, parseHubId, hubAuth } from './hub.js';
import { fetchModelCached, listCachedModels, deleteCachedModel, clearModelCache, MODEL_CACHE } from './cache.js';
import { checkSha256, checkTimeout, declaredLength, readBody, httpError, safeUrl, fetchChecked, parseContentRange, REGISTRY_TIMEOUT_MS } from './net.js';
import { splitPartUrls, checkSplitNames, splitPartNames } from './split.js';
import { PART_ALIGN } from './worker/staging.js';
import { probeMemory64, describeModule, tooLargeError, WASM32_MAX_BYTES, WASM64_MAX_BYTES, CONTEXT_RESERVE } from './memory64.js';

export { DEFAULT_SAMPLING, QUANT_TYPES, WasmlmError };
export { resolveModel, registryEntries, isHubId, parseHubId, resolveHubId };
export { listCachedModels, deleteCachedModel, clearModelCache, MODEL_CACHE };
export { checkSha256, REGISTRY_TIMEOUT_MS };
export { jsonSchemaToGbnf, jsonGrammar } from './grammar/json-schema.js';


/** Default context options. */
export const DEFAULT_CONTEXT = Object.freeze({ contextLength: 0, batchSize: 0, kvType: 'f32', onFull: 'error', nKeep: 0 });

const STAGE_BYTES = 4 << 20; // chunk size for streaming bytes to the worker


function reviveError(plain) {
  const { name, message, code, ...fields } = plain;
  const e = new WasmlmError(code || (name === 'AbortError' ? 'ABORTED' : 'INTERNAL'), message, fields);
  e.name = name || 'WasmlmError';
  return e;
}

// ---- wasm module --------------------------------------------------------

const wasmModulePromises = {};
let relaxedPromise = null;

/**
 * Whether this JS engine runs relaxed SIMD correctly: a tiny probe module
 * (wasm/probe-relaxed.wasm) must compile and return the known answer.
 */
export function relaxedSimdAvailable() {
  if (!relaxedPromise) {
    relaxedPromise = compileFrom(new URL('../wasm/probe-relaxed.wasm', import.meta.url))
      .then((mod) => probeRelaxedSimd(mod), () => false);
  }
  return relaxedPromise;
}

/** The SIMD flavour to use: options.simd ('simd128' | 'relaxed' | 'auto', default auto). */
async function resolveSimd(options) {
  const want = options.simd || (isNode && process.env.WASMLM_SIMD) || 'auto';
  if (want === 'simd128') return 'simd128';
  const ok = await relaxedSimdAvailable();
  if (want === 'relaxed' && !ok) throw new WasmlmError('UNSUPPORTED', 'relaxed SIMD is not available here (the known-answer probe failed)');
  return ok ? 'relaxed' : 'simd128';
}

let memory64Promise = null;

/**
 * Whether this JS engine runs the memory64 (wasm64) builds, which hold model
 * files over 4 GiB: the probe module (wasm/probe-memory64.wasm) must compile
 * and return the known answer, and a 16 GiB memory64 memory must be
 * creatable (web/memory64.js). Resolves {ok, shared, reason}: `shared`, the
 * threaded builds can run too; `reason`, why not.
 */
export function memory64Support() {
  if (!memory64Promise) {
    memory64Promise = readWasm(new URL('../wasm/probe-memory64.wasm', import.meta.url))
      .then((bytes) => probeMemory64(bytes), (e) => ({ ok: false, shared: false, reason: `the memory64 probe module cannot be read (${e.message})` }));
  }
  return memory64Promise;
}

/**
 * Whether a model of `size` bytes (0: unknown) goes to a memory64 build:
 * options.memory64 'auto' (default) picks it when the file with a context
 * would not fit the 4 GiB of wasm32 and the probe passes; 'on' always, 'off'
 * never. Throws TOO_LARGE when the build that can run cannot hold `size`
 * (unless it is an `estimate`), UNSUPPORTED for 'on' without memory64.
 * Resolves {memory64, why}: `why` says why a wasm32 build was chosen.
 */
async function chooseMemory64(options, size, { what, estimate = false } = {}) {
  const want = options.memory64 || 'auto';
  const wasm32 = (why) => {
    if (!estimate && size > WASM32_MAX_BYTES) throw tooLargeError(size, { what, reason: why });
    return { memory64: false, why };
  };
  if (want === 'off') return wasm32("the option memory64 is 'off'");
  if (want === 'auto' && !(size > WASM32_MAX_BYTES - CONTEXT_RESERVE)) return { memory64: false, why: null };   // (why: see WorkerClient.start)
  const probe = await memory64Support();
  if (!probe.ok) {
    if (want === 'on') throw new WasmlmError('UNSUPPORTED', `option memory64 'on': the memory64 (wasm64) build cannot run here: ${probe.reason}`, { option: 'memory64' });
    return wasm32(probe.reason);
  }
  if (!estimate && size > WASM64_MAX_BYTES) throw tooLargeError(size, { what, memory64: true });
  return { memory64: true, why: null };
}

/** The describeModule() of a module this package compiled from bytes (null for one given compiled). */
const BUILDS = new WeakMap();
function engineBuild(mod) { return BUILDS.get(mod) || null; }

/**
 * Compiles (once) and returns the engine's WebAssembly.Module: the
 * single-threaded build, or with `threaded` the shared-memory build; with
 * simd 'relaxed', their relaxed-SIMD variants; with `memory64`, the wasm64
 * (memory64) variants of those.
 */
export function getWasmModule(wasm, threaded = false, simd = 'simd128', memory64 = false) {
  if (wasm instanceof WebAssembly.Module) return Promise.resolve(wasm);
  if (wasm) {
    return compileFrom(wasm).catch((e) => {
      throw new WasmlmError('BAD_OPTION', `option wasm: not a usable engine build: ${e.message}`, { option: 'wasm', cause: e });
    });
  }
  const key = (memory64 ? '64-' : '') + (threaded ? 'mt' : 'st') + (simd === 'relaxed' ? '-relaxed' : '');
  if (!wasmModulePromises[key]) {
    const override = isNode && !memory64 ? process.env[threaded ? 'WASMLM_WASM_MT' : 'WASMLM_WASM'] : undefined; // development: another build
    const p = compileFrom(override || WASM_URLS[key]());
    wasmModulePromises[key] = p;
    p.catch(() => { delete wasmModulePromises[key]; });
  }
  return wasmModulePromises[key];
}

// One literal `new URL(..., import.meta.url)` per engine build, so that
// bundlers (Vite, webpack 5, ...) see every file and copy it next to the bundle.
const WASM_URLS = {
  st: () => new URL('../wasm/wasmlm.wasm', import.meta.url),
  mt: () => new URL('../wasm/wasmlm-mt.wasm', import.meta.url),
  'st-relaxed': () => new URL('../wasm/wasmlm-relaxed.wasm', import.meta.url),
  'mt-relaxed': () => new URL('../wasm/wasmlm-mt-relaxed.wasm', import.meta.url),
  '64-st': () => new URL('../wasm/wasmlm64.wasm', import.meta.url),
  '64-mt': () => new URL('../wasm/wasmlm64-mt.wasm', import.meta.url),
  '64-st-relaxed': () => new URL('../wasm/wasmlm64-relaxed.wasm', import.meta.url),
  '64-mt-relaxed': () => new URL('../wasm/wasmlm64-mt-relaxed.wasm', import.meta.url),
};

let warnedNoThreads = false;

/** Available cores, capped at 8 (more rarely helps a memory-bound decoder). */
export async function defaultThreads() {
  let n = 1;
  if (isNode) { const os = await nodeImport('node:os'); n = os.availableParallelism ? os.availableParallelism() : os.cpus().length; }
  else n = globalThis.navigator?.hardwareConcurrency || 1;
  return Math.max(1, Math.min(8, n));
}

/** Threads that can really be used: shared memory needs SharedArrayBuffer (crossOriginIsolated pages). */
async function resolveThreads(options) {
  // a custom engine build (options.wasm) is single-threaded unless threads are asked for
  let want = options.threads == null ? (options.wasm ? 1 : await defaultThreads()) : options.threads;
  const canShare = typeof SharedArrayBuffer !== 'undefined' && (isNode || globalThis.crossOriginIsolated === true);
  if (want > 1 && !canShare) {
    if (!warnedNoThreads) {
      warnedNoThreads = true;
      console.warn('wasmlm: threads need a crossOriginIsolated page (COOP/COEP headers); running on 1 thread');
    }
    want = 1;
  }
  return want;
}

// Failures are BAD_FILE errors naming the engine file (a missing or broken
// build); options.wasm failures are turned into BAD_OPTION by getWasmModule.
async function compileFrom(src) {
  try {
    return await compileOnce(src);
  } catch (e) {
    throw e instanceof WasmlmError ? e : new WasmlmError('BAD_FILE', `the wasm engine does not compile: ${e.message}`, { cause: e });
  }
}

// Engines are compiled from their bytes (not streamed): the bytes also tell
// the engine's JS the module's types (describeModule; a memory64 build's
// exports are wrapped with them).
async function compileOnce(src) {
  const bytes = await readWasm(src);
  const mod = await WebAssembly.compile(bytes);
  try { BUILDS.set(mod, describeModule(bytes)); } catch { /* compiled, but not readable here: taken as a wasm32 build */ }
  return mod;
}

/** The bytes of a wasm file: given, read (Node paths and file: URLs) or fetched. */
async function readWasm(src) {
  if (src instanceof ArrayBuffer || ArrayBuffer.isView(src)) return src;
  const url = src instanceof URL ? src : (isNode && !/^[a-z]+:/i.test(String(src)) ? null : new URL(String(src), globalThis.location?.href));
  if (isNode && (!url || url.protocol === 'file:')) {
    const fs = await nodeImport('node:fs');
    try {
      return fs.readFileSync(url || String(src));
    } catch (e) {
      throw new WasmlmError('BAD_FILE', `cannot read the wasm engine ${url ? url.pathname : src}: ${e.code || e.message} (build it with 'make wasm')`);
    }
  }
  const res = await fetch(url);
  if (!res.ok) throw new WasmlmError('NETWORK', `cannot fetch the wasm engine ${url}: HTTP ${res.status}`, { url: String(url), status: res.status });
  const bytes = new Uint8Array(await res.arrayBuffer());
  if (looksLikeHtml(bytes)) throw servedHtmlError(url);
  return bytes;
}

/** Whether fetched bytes are an HTML page (a dev server's fallback) rather than wasm. */
function looksLikeHtml(bytes) {
  const head = new TextDecoder().decode(bytes.subarray(0, 64)).trimStart().toLowerCase();
  return head.startsWith('<!doctype') || head.startsWith('<html') || head.startsWith('<');
}

// Vite's dev server pre-bundles dependencies into node_modules/.vite, where
// the engine's `new URL('../wasm/...', import.meta.url)` points nowhere and
// the server answers with its index.html.
function servedHtmlError(url) {
  return new WasmlmError('BAD_FILE', `the wasm engine ${url} was served as an HTML page, not wasm: the file is not where the` +
    " package's URL points. With Vite's dev server, add  optimizeDeps: { exclude: ['wasmlm'] }  to vite.config.js" +
    ' (pre-bundling moves the package away from its wasm files); with another bundler, serve or copy wasmlm/wasm/*.wasm next to the bundle.',
  { url: String(url) });
}

// ---- worker client --------------------------------------------------------

/** Calls a caller's callback; a throw or a rejected returned promise goes to onError, never up the stack. */
function callGuarded(fn, arg, onError) {
  try {
    const r = fn(arg);
    if (r && typeof r.then === 'function') r.then(undefined, onError);
  } catch (e) {
    onError(e);
  }
}

let warnedNoThreads64 = false;

// The worker starts with the first load (start()), once the model's size
// is known: the size picks the engine build (wasm32 or memory64).
class WorkerClient {
  static async create(options) {
    const threads = await resolveThreads(options);
    const simd = options.wasm ? 'custom' : await resolveSimd(options);
    return new WorkerClient(options, threads, simd);
  }

  constructor(options, threads = 1, simd = 'simd128') {
    this.options = options;
    this.threads = threads;
    this.simd = simd;
    this.memory64 = false;    // the engine build: memory64 (wasm64) or wasm32
    this.why32 = null;        // why a wasm32 build was chosen, when it was not the size (for a later TOO_LARGE)
    this.w = null;
    this.node = null;
    this.started = null;
    this.nextId = 1;
    this.pending = new Map();
    this.dead = null;
    const canShare = typeof SharedArrayBuffer !== 'undefined' && (isNode || globalThis.crossOriginIsolated);
    this.abortFlag = canShare ? new Int32Array(new SharedArrayBuffer(4)) : null;
  }

  /** The most bytes this client's engine build holds. */
  get maxBytes() { return this.memory64 ? WASM64_MAX_BYTES : WASM32_MAX_BYTES; }

  /**
   * Starts the worker with the engine build a model of `size` bytes needs
   * (0: unknown); once started, checks that `size` fits its build. Throws
   * TOO_LARGE naming the size and the limit, before any byte is sent.
   * @param {number} size
   * @param {{what?: string, estimate?: boolean}} [o] what: the file, for
   *   messages; estimate: `size` is a guess (a split's parts by URL): it
   *   picks the build but refuses nothing
   */
  async start(size, { what = 'the model file', estimate = false } = {}) {
    if (!this.started) {
      this.started = this._start(size, what, estimate);
      this.started.catch(() => {});
    }
    await this.started;
    if (!estimate && size > this.maxBytes) {
      // wasm32 was chosen for a size that seemed to fit (a split by URL learns its sizes part by part)
      const probe = this.why32 ? null : await memory64Support();
      const reason = this.why32 || (probe.ok ? "the size was not known when the engine was chosen: load it with the option memory64: 'on'" : probe.reason);
      throw tooLargeError(size, { what, memory64: this.memory64, reason });
    }
  }

  async _start(size, what, estimate) {
    let mod;
    if (this.options.wasm) {
      mod = await getWasmModule(this.options.wasm, this.threads > 1, this.simd);
      this.memory64 = !!engineBuild(mod)?.memory64;
      this.why32 = 'the engine build given as the option wasm is a wasm32 build';
    } else {
      const c = await chooseMemory64(this.options, size, { what, estimate });
      this.memory64 = c.memory64;
      this.why32 = c.why;
      if (c.memory64 && this.threads > 1 && !(await memory64Support()).shared) {
        if (!warnedNoThreads64) {
          warnedNoThreads64 = true;
          console.warn('wasmlm: this runtime has no shared memory64 memory: the memory64 engine runs on 1 thread');
        }
        this.threads = 1;
      }
      mod = await getWasmModule(undefined, this.threads > 1, this.simd, c.memory64);
    }
    if (this.dead) throw this.dead;
    let w, nodeWorker = null;
    if (isNode) {
      const { Worker } = await nodeImport('node:worker_threads');
      nodeWorker = new Worker(new URL('./worker/worker.js', import.meta.url));
      w = nodeWorker;
    } else {
      // written inline so that bundlers recognise the worker and bundle its imports
      w = new Worker(new URL('./worker/worker.js', import.meta.url), { type: 'module' });
    }
    this.w = w;
    this.node = nodeWorker;
    const onMessage = (m) => this._onMessage(m);
    const onError = (e) => this._fail(new WasmlmError('WORKER', 'worker error: ' + (e && e.message || e), { cause: e }));
    if (nodeWorker) {
      nodeWorker.on('message', onMessage);
      nodeWorker.on('error', onError);
      nodeWorker.on('exit', (code) => this._fail(new WasmlmError('WORKER', `wasmlm worker exited (code ${code})`)));
      nodeWorker.unref();
    } else {
      w.onmessage = (ev) => onMessage(ev.data);
      w.onerror = (ev) => { ev.preventDefault?.(); onError({ message: ev.message || 'failed to start' }); };
    }
    w.postMessage({ op: 'init', wasm: mod, threads: this.threads, build: engineBuild(mod), abortFlag: this.abortFlag ? this.abortFlag.buffer : null });
    if (this.dead) w.terminate();
  }

  _ref() { if (this.node) { if (this.pending.size > 0) this.node.ref(); else this.node.unref(); } }

  _onMessage(m) {
    if (m.id === 0 && m.ok === false) { this._fail(reviveError(m.error)); return; }
    const p = this.pending.get(m.id);
    if (!p) return;
    if (m.event) {
      // a caller's callback runs here: its throw fails this request (which
      // the worker then stops), never the process
      if (p.onEvent) callGuarded(p.onEvent, m, (e) => { this._settle(m.id, null, e); this.abort(m.id); });
      return;
    }
    if (m.ok) this._settle(m.id, m.result);
    else this._settle(m.id, null, reviveError(m.error));
  }

  _settle(id, result, error) {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    this._ref();
    if (error) p.reject(error);
    else p.resolve(result);
  }

  _fail(err) {
    if (this.dead) return;
    this.dead = err;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    this._ref();
  }

  /** Sends a request (web/protocol.js); returns {id, promise}. */
  request(op, payload = {}, { onEvent, transfer } = {}) {
    const id = this.nextId++;
    if (this.dead) return { id, promise: Promise.reject(this.dead) };
    const problem = checkRequest({ ...payload, id, op });
    if (problem) return { id, promise: Promise.reject(new WasmlmError('INTERNAL', `protocol: ${problem} (web/protocol.js)`)) };
    if (!this.w) return { id, promise: Promise.reject(new WasmlmError('INTERNAL', `${op}: the model's worker is not started`)) };
    const promise = new Promise((resolve, reject) => this.pending.set(id, { resolve, reject, onEvent }));
    this._ref();
    try {
      this.w.postMessage({ ...payload, id, op }, transfer || []);
    } catch (e) { // a value the structured clone cannot copy: nothing was sent
      this._settle(id, null, new WasmlmError('BAD_OPTION', `${op}: an argument cannot be sent to the model's worker (${e.message})`, { cause: e }));
    }
    return { id, promise };
  }

  call(op, payload, opts) { return this.request(op, payload, opts).promise; }

  abort(id) {
    if (this.dead || !this.w) return;
    if (this.abortFlag) Atomics.store(this.abortFlag, 0, id);
    this.w.postMessage({ op: 'abort', target: id });
  }

  /** Rejects every request in flight or queued with DISPOSED and ends the worker at once. */
  async terminate() {
    this._fail(new WasmlmError('DISPOSED', 'model disposed'));
    if (this.w) await this.w.terminate();
  }
}

// ---- source handling ---------------------------------------------------------

/** Bytes per second since `t0` (ms), 0 before a millisecond has passed. */
function rateOf(bytes, t0) {
  const secs = (Date.now() - t0) / 1000;
  return secs > 0 ? Math.round(bytes / secs) : 0;
}

/** Thrown by ChunkSender.push once a vocabulary-only load has what it needs: whatever reads the source stops there. */
class EnoughRead extends Error {}

/**
 * Streams chunks to the worker, coalesced into STAGE_BYTES messages, one in
 * flight. In a vocabulary-only load each reply says whether the metadata is
 * in ({done, need}, kept in `meta`); once it is, push throws EnoughRead.
 */
class ChunkSender {
  constructor(client, { total, onProgress, hasher, signal, stageBytes = STAGE_BYTES }) {
    this.client = client; this.total = total || 0; this.onProgress = onProgress;
    this.hasher = hasher; this.signal = signal; this.stageBytes = stageBytes;
    this.stage = null; this.n = 0; this.loaded = 0; this.inflight = null;
    this.meta = null;
    this.t0 = Date.now();
  }
  get enough() { return !!(this.meta && this.meta.done); }
  async push(chunk) {
    if (this.enough) throw new EnoughRead('the metadata is in');
    let u8 = chunk instanceof Uint8Array ? chunk : ArrayBuffer.isView(chunk)
      ? new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength) : new Uint8Array(chunk);
    if (this.signal && this.signal.aborted) throw abortError(this.signal);
    if (this.hasher) this.hasher.update(u8);
    while (u8.byteLength > 0) {
      if (!this.stage) { this.stage = new Uint8Array(this.stageBytes); this.n = 0; }
      const take = Math.min(u8.byteLength, this.stageBytes - this.n);
      this.stage.set(u8.subarray(0, take), this.n);
      this.n += take;
      u8 = u8.subarray(take);
      if (this.n === this.stageBytes) {
        await this._send();
        if (this.enough) throw new EnoughRead('the metadata is in');
      }
    }
  }
  async _send() {
    if (!this.stage || this.n === 0) return;
    const bytes = this.stage.subarray(0, this.n);
    const n = this.n;
    this.stage = null; this.n = 0;
    if (this.inflight) await this._settle();
    if (this.enough) return;   // what the previous chunk completed: these bytes are not needed
    this.inflight = this.client.call('loadChunk', { bytes }, { transfer: [bytes.buffer] });
    this.loaded += n;
    if (this.onProgress) {
      const p = { loaded: this.loaded, total: this.total || this.loaded, rate: rateOf(this.loaded, this.t0) };
      callGuarded(this.onProgress, p, (e) => { this.failed = this.failed || e; });
    }
    if (this.failed) throw this.failed;
  }
  async _settle() {
    const r = await this.inflight;
    this.inflight = null;
    if (r) this.meta = r;
  }
  /** Sends what is staged and waits for the worker (more chunks may follow). */
  async end() {
    await this._send();
    if (this.inflight) await this._settle();
    if (this.failed) throw this.failed;
  }
}

/** Runs a source pump; a vocabulary-only load that has what it needs ends it early (EnoughRead), which is no failure. */
async function pump(run, sender) {
  try {
    await run(sender);
  } catch (e) {
    if (!(e instanceof EnoughRead)) throw e;
  }
}

/** The first Range request of a vocabulary-only load of a URL (later ones ask for what the metadata still needs, at least doubling). */
const FIRST_RANGE_BYTES = 1 << 20;
/** A vocabulary-only load stages smaller chunks, so that it learns sooner that the metadata is in. */
const VOCAB_STAGE_BYTES = 1 << 20;

/**
 * A vocabulary-only load of a URL: only the file's header and metadata are
 * fetched. A copy in the browser model cache is read until the metadata is
 * in; otherwise Range requests ask for the first FIRST_RANGE_BYTES, then for
 * what the worker says is still missing. A server that ignores Range (200)
 * sends the whole file, read until the metadata is in and then cancelled.
 */
async function readUrlHead(url, sender, { signal, timeout, cache, auth }) {
  const hit = await fetchModelCached(url, { signal, cache, timeout, fill: false, auth });
  if (hit) {
    for await (const c of readBody(hit.response, { url, signal, timeout })) await sender.push(c);
    return;
  }
  let have = 0, want = FIRST_RANGE_BYTES;
  for (;;) {
    const { response: res, timer } = await fetchChecked(url, { signal, timeout, headers: { Range: `bytes=${have}-${want - 1}` }, allow: [416], auth });
    if (res.status === 416) { timer.done(); res.body?.cancel().catch(() => {}); return; }   // the file ends before `have`: loadEnd says what is missing
    const range = res.status === 206 ? parseContentRange(res) : null;
    if (res.status === 206 && (!range || range.start !== have)) {
      timer.done(); res.body?.cancel().catch(() => {});
      throw new WasmlmError('NETWORK', `${url} answered a request for bytes ${have}-${want - 1} with ${res.headers.get('content-range') || 'no Content-Range'}`, { url });
    }
    let skip = res.status === 206 ? 0 : have;   // a whole file after ranges (a server that changed its mind): skip what is in
    for await (const c of readBody(res, { url, expected: declaredLength(res), timeout, signal, timer })) {
      const part = skip ? c.subarray(Math.min(skip, c.byteLength)) : c;
      skip -= c.byteLength - part.byteLength;
      if (part.byteLength) { await sender.push(part); have += part.byteLength; }
    }
    if (res.status !== 206) return;
    await sender.end();
    if (sender.enough || (range.total && have >= range.total)) return;
    want = Math.max(sender.meta ? sender.meta.need : 0, have * 2);
    if (range.total) want = Math.min(want, range.total);
  }
}

async function pumpReader(reader, sender) {
  // an abort (or a failed push) cancels the source, so a stalled or endless
  // stream is released rather than left locked and pending
  const signal = sender.signal;
  const onAbort = () => { reader.cancel(abortError(signal)).catch(() => {}); };
  if (signal?.aborted) onAbort();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      await sender.push(value);
    }
  } catch (e) {
    reader.cancel(e).catch(() => {});
    throw e;
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
}

/**
 * Lets go of a fetched model response whose body will not be read: the
 * download stops (with it the copy into the model cache, web/cache.js), a
 * cached copy's body is released.
 */
function dropUnread(c, reason) {
  if (c.timer) { c.timer.abort(reason); c.timer.done(); }
  if (c.response.body && !c.response.body.locked) c.response.body.cancel(reason).catch(() => {});
}

/** The sizes a split's URL parts declare, the first one's given: their sum, or 0 when a HEAD request fails or names no length. */
async function declaredTotal(parts, first, { signal, timeout }) {
  let total = first;
  for (const p of parts.slice(1)) {
    try {
      const { response, timer } = await fetchChecked(p.url, { signal, timeout, method: 'HEAD' });
      timer.done();
      const n = declaredLength(response);
      if (!n) return 0;
      total += n;
    } catch (e) {
      if (signal?.aborted) throw e;
      return 0;   // (a missing part is named when its turn comes)
    }
  }
  return total;
}

/** The size of the model file at a Node path, all parts of a split GGUF (0: not a regular file, or unreadable). */
async function pathSize(p) {
  const fs = await nodeImport('node:fs');
  let total = 0;
  for (const f of splitPartNames(p) || [p]) {
    try {
      const st = fs.statSync(f);
      if (st.isFile()) total += st.size;
    } catch { /* missing: the worker names it */ }
  }
  return total;
}

/**
 * A Node path that is not a regular file (a FIFO, a process substitution's
 * pipe, a device) as a stream read on this thread, else null. Not in the
 * worker: a Node worker closes on exit every descriptor it opened with
 * fs.open, and the socket that reads a FIFO has closed it already, so the
 * worker would close that number a second time under whoever holds it then.
 * A FIFO is opened non-blocking: a blocking open waits for a writer.
 */
async function specialFileStream(p) {
  const fs = await nodeImport('node:fs');
  let st;
  try { st = fs.statSync(p); } catch { return null; }   // (the worker names the problem)
  if (st.isFile() || st.isDirectory() || st.isSocket()) return null;
  const { Readable } = await nodeImport('node:stream');
  if (!st.isFIFO()) return Readable.toWeb(fs.createReadStream(p, { highWaterMark: 1 << 20 }));
  const net = await nodeImport('node:net');
  let fd;
  try {
    fd = fs.openSync(p, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  } catch (e) {
    throw new WasmlmError('BAD_FILE', `cannot open model file ${p}: ${e.code || e.message}`, { file: p, cause: e });
  }
  return Readable.toWeb(new net.Socket({ fd, readable: true, writable: false }));
}

/** Errors that blame the file's bytes (not an option, a limit or an abort). */
function isFileError(e) {
  return ['BAD_FORMAT', 'TRUNCATED', 'BAD_FILE'].includes(e && e.code);
}

function looksLikeUrl(s) { return /^(https?|blob|data):/i.test(s); }

/** A split GGUF's parts as Blobs/Files or buffers, in order (Files: their names are checked first). */
function resolveParts(list) {
  if (list.length === 0) throw badOption('source', list, 'an array of model parts must not be empty');
  const parts = list.map((p, i) => {
    if (p instanceof ArrayBuffer || ArrayBuffer.isView(p)) return { kind: 'bytes', bytes: p };
    if (typeof Blob !== 'undefined' && p instanceof Blob) return { kind: 'blob', blob: p };
    throw badOption(`source[${i}]`, p, 'each part of a split GGUF must be a Blob, File, ArrayBuffer or Uint8Array');
  });
  checkSplitNames(list.map((p) => (typeof p.name === 'string' ? p.name : '')));
  return parts.length === 1 ? parts[0] : { kind: 'parts', parts };
}

async function resolveSource(source, options, vocabOnly = false) {
  if (Array.isArray(source)) return resolveParts(source);
  if (typeof source === 'string' || source instanceof URL) {
    const s = String(source);
    if (looksLikeUrl(s)) {
      const urls = splitPartUrls(s);   // NAME-00001-of-0000N.gguf: every part, fetched one after the other
      return urls ? { kind: 'parts', parts: urls.map((url) => ({ kind: 'url', url })) } : { kind: 'url', url: s };
    }
    if (isHubId(s)) {
      // Node: through the download cache (resumable, kept by URL + ETag); browsers: a URL for web/cache.js.
      // A tokenizer reads the file's first megabytes by URL instead of downloading it all.
      if (isNode && options.cache !== false && !vocabOnly) {
        const r = await resolveHubModel(s, withSizeCheck(options));
        return { kind: 'path', path: r.path, registry: r };
      }
      const timeout = checkTimeout(options.timeout, REGISTRY_TIMEOUT_MS);
      const hub = await resolveHubId(s, { hubUrl: options.hubUrl, hubToken: options.hubToken, signal: options.signal, timeout });
      const auth = hubAuth(options, hub.hubUrl);   // the token goes to the hub's origin only (web/net.js)
      if (hub.parts) {   // a split GGUF: every part, fetched one after the other
        return { kind: 'parts', parts: hub.parts.map((p) => ({ kind: 'url', url: p.url, hub: { ...hub, ...p, parts: undefined }, auth })) };
      }
      return { kind: 'url', url: hub.url, sha256: hub.sha256, size: hub.size, hub, auth };
    }
    if (/^file:/i.test(s)) {
      if (!isNode) return { kind: 'url', url: s };
      const { fileURLToPath } = await nodeImport('node:url');
      return { kind: 'path', path: fileURLToPath(s) };
    }
    if (await isRegistryName(s, options)) {
      const r = await resolveModel(s, vocabOnly ? options : withSizeCheck(options));
      if (r.path) return { kind: 'path', path: r.path, registry: r };
      return { kind: 'url', url: r.url, sha256: r.sha256, size: r.size, registry: r };
    }
    if (isNode) return { kind: 'path', path: s };
    return { kind: 'url', url: s };
  }
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) return { kind: 'bytes', bytes: source };
  if (typeof Blob !== 'undefined' && source instanceof Blob) return { kind: 'blob', blob: source };
  if (typeof ReadableStream !== 'undefined' && source instanceof ReadableStream) return { kind: 'stream', stream: source };
  if (typeof Response !== 'undefined' && source instanceof Response) return { kind: 'response', response: source };
  if (source && typeof source[Symbol.asyncIterator] === 'function') return { kind: 'iterable', iterable: source };
  throw badOption('source', source, 'must be a path, URL, hub id (hf:OWNER/REPO:QUANT), registry name, ArrayBuffer, Uint8Array, Blob, ReadableStream, Response, or an array of split GGUF parts');
}

/**
 * The options for a Node download (models/registry.js) with `checkSize(size,
 * what)`, which refuses a file no engine build here can hold before it is
 * downloaded (TOO_LARGE, as the load itself would).
 */
function withSizeCheck(options) {
  if (options.wasm) return options;
  return { ...options, checkSize: (size, what) => chooseMemory64(options, size, { what }) };
}

function ctxOptions(options) {
  const o = {};
  for (const k of ['contextLength', 'batchSize', 'kvType', 'onFull', 'nKeep', 'memoryLimit', 'maxSequences', 'windowCache']) if (options[k] != null) o[k] = options[k];
  return o;
}

/** A failure fetching part i of n: a part the server does not have is BAD_FILE naming it; others say which part. */
function partError(e, i, n, url) {
  if (e && e.code === 'NETWORK' && (e.status === 404 || e.status === 410)) {
    return new WasmlmError('BAD_FILE', `split GGUF part ${i + 1} of ${n} is missing: ${url} (HTTP ${e.status})`, { url, part: i + 1, parts: n, status: e.status, cause: e });
  }
  if (e instanceof WasmlmError && e.part === undefined && e.code !== 'ABORTED') { e.part = i + 1; e.message = `split GGUF part ${i + 1} of ${n}: ${e.message}`; }
  return e;
}

/**
 * A split GGUF's parts streamed one after the other into the worker (op
 * loadPart between them), so they end up in one block of its memory and load
 * as one model. URLs are fetched in turn (each through the model cache).
 */
async function loadParts(client, parts, options) {
  const { onProgress, signal } = options;
  const ctx = ctxOptions(options);
  if (options.sha256 !== undefined) throw badOption('sha256', options.sha256, 'is the digest of one file: it does not apply to the parts of a split GGUF');
  const timeout = checkTimeout(options.timeout, parts.some((p) => p.hub) ? REGISTRY_TIMEOUT_MS : 0);
  const known = parts.every((p) => p.kind !== 'url');
  const sizeOf = (p) => (p.kind === 'blob' ? p.blob.size : p.bytes.byteLength);
  const sender = new ChunkSender(client, { total: known ? parts.reduce((a, p) => a + sizeOf(p), 0) : 0, onProgress, signal });
  const cached = [];
  let begun = false, seen = 0;
  try {
    for (const [i, p] of parts.entries()) {
      let size, run, c = null;
      if (p.kind === 'url') {
        try {
          c = await fetchModelCached(p.url, { signal, cache: options.cache, timeout, auth: p.auth });
        } catch (e) {   // a hub's 401 / 403 says whether a token went; a missing part is BAD_FILE naming it
          throw partError(p.hub && e && (e.status === 401 || e.status === 403) ? hubFileError(e, p.hub, p.auth) : e, i, parts.length, p.url);
        }
        cached.push(c);
        const res = c.response;
        size = declaredLength(res);
        sender.total = sender.total && size ? sender.total + size : (i === 0 ? size : 0);
        run = async () => {
          if (!res.body) throw new WasmlmError('NETWORK', `${p.url} has no body`, { url: p.url });
          try {
            for await (const ch of readBody(res, { url: p.url, expected: size, timeout, signal, timer: c.timer })) await sender.push(ch);
          } catch (e) { throw partError(e, i, parts.length, p.url); }
        };
      } else {
        size = sizeOf(p);
        run = p.kind === 'blob' ? () => pumpReader(p.blob.stream().getReader(), sender) : async () => {
          const b = p.bytes, u8 = b instanceof ArrayBuffer ? new Uint8Array(b) : new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
          for (let off = 0; off < u8.byteLength; off += STAGE_BYTES) await sender.push(u8.subarray(off, off + STAGE_BYTES));
        };
      }
      // the engine build: by every part's size when known; parts by URL: when the first part's
      // size says the split may not fit wasm32, by the sizes the others' HEAD requests declare,
      // else guessed from the first (a split's parts but the last are about the same size).
      // The sizes known so far must fit it before this part's bytes are read.
      seen += size;
      try {
        if (i === 0 && !known) {
          const all = size * parts.length > WASM32_MAX_BYTES - CONTEXT_RESERVE ? await declaredTotal(parts, size, { signal, timeout }) : 0;
          if (all) await client.start(all, { what: `the split GGUF (${parts.length} parts, sizes from the server)` });
          else await client.start(size * parts.length, { estimate: true });
        }
        await client.start(known ? sender.total : seen, { what: known ? `the split GGUF (${parts.length} parts)` : `the split GGUF's parts 1 to ${i + 1} of ${parts.length}` });
      } catch (e) {
        if (c) dropUnread(c, e);
        throw e;
      }
      if (i === 0) {
        // sizes all known (Blobs, buffers): one block for every part from the start
        await client.call('loadBegin', { size: known ? sender.total + PART_ALIGN * parts.length : size });
        begun = true;
      } else {
        await sender.end();   // the previous part's bytes are in before the next part starts
        await client.call('loadPart', { size });
      }
      await run();
    }
    await sender.end();
    if (signal && signal.aborted) throw abortError(signal);
  } catch (e) {
    if (begun) await client.call('loadCancel').catch(() => {});
    for (const c of cached) { c.timer?.done(); await c.discard(); }
    throw e;
  }
  let info;
  try { info = await client.call('loadEnd', { options: ctx }); } catch (e) { for (const c of cached) await c.discard(); throw e; }
  if (cached.length) {
    for (const c of cached) await c.commit().catch((e) => console.warn(`wasmlm: a model part was not cached: ${e.message}`));
    info.fromCache = cached.every((c) => c.fromCache);
  }
  return info;
}

async function loadInto(client, src, options, vocabOnly = false) {
  const { onProgress, signal } = options;
  const ctx = ctxOptions(options);
  // a tokenizer needs the first file of a split GGUF only: its metadata holds the vocabulary
  if (src.kind === 'parts') {
    if (!vocabOnly) return loadParts(client, src.parts, options);
    src = src.parts[0];
  }
  if (src.kind === 'path') {
    const stream = await specialFileStream(src.path);
    if (stream) src = { kind: 'stream', stream, name: `model file ${src.path}` };
  }
  if (src.kind === 'path') {
    await client.start(vocabOnly ? 0 : await pathSize(src.path), { what: `model file ${src.path}` });
    const t0 = Date.now();
    const { id, promise } = client.request('loadFile', { path: src.path, options: ctx, progress: !!onProgress, vocabOnly: vocabOnly || undefined },
      { onEvent: (ev) => onProgress && onProgress({ loaded: ev.loaded, total: ev.total, rate: rateOf(ev.loaded, t0) }) });
    const onAbort = () => client.abort(id);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      return await promise;
    } catch (e) {
      // a downloaded model the engine refuses is dropped from the cache, so the next load fetches it again
      if (isFileError(e) && ['cache', 'download'].includes(src.registry?.source)) await evictCached(src.registry.path);
      throw e;
    } finally { signal?.removeEventListener('abort', onAbort); }
  }
  let total = 0, run, hasher = null, expect = null, cached = null;
  let body = src.kind === 'stream' ? src.stream : null; // released when the load cannot begin
  if (src.kind === 'bytes') {
    const b = src.bytes;
    const u8 = b instanceof ArrayBuffer ? new Uint8Array(b) : new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    total = u8.byteLength;
    run = async (sender) => {
      for (let off = 0; off < u8.byteLength; off += STAGE_BYTES) await sender.push(u8.subarray(off, off + STAGE_BYTES));
    };
  } else if (src.kind === 'blob') {
    total = src.blob.size;
    run = (sender) => pumpReader(src.blob.stream().getReader(), sender);
  } else if (src.kind === 'stream') {
    run = (sender) => pumpReader(src.stream.getReader(), sender);
  } else if (src.kind === 'iterable') {
    run = async (sender) => { for await (const c of src.iterable) await sender.push(c); };
  } else if (src.kind === 'url' && vocabOnly) {
    total = src.size || 0;
    const timeout = checkTimeout(options.timeout, src.registry || src.hub ? REGISTRY_TIMEOUT_MS : 0);
    run = async (sender) => {
      try {
        await readUrlHead(src.url, sender, { signal, timeout, cache: options.cache, auth: src.auth });
      } catch (e) { throw src.hub ? hubFileError(e, src.hub, src.auth) : e; }
    };
  } else if (src.kind === 'url' || src.kind === 'response') {
    // a stall timeout (web/net.js): the caller's, else a default for registry models
    const timeout = checkTimeout(options.timeout, src.registry || src.hub ? REGISTRY_TIMEOUT_MS : 0);
    let res, timer = null, url = src.url;
    if (src.kind === 'url') {
      // browsers: through the model cache (web/cache.js); options.cache === false skips it
      try {
        cached = await fetchModelCached(src.url, { signal, cache: options.cache, timeout, auth: src.auth });
      } catch (e) { throw src.hub ? hubFileError(e, src.hub, src.auth) : e; }
      ({ response: res, timer } = cached);
    } else {
      res = src.response;
      url = res.url || 'the Response';
      if (!res.ok) throw httpError(url, res);
    }
    // the declared length is checked against the body, and the worker only trusts it as it arrives
    total = src.size || declaredLength(res);
    const expected = total;
    body = res.body;
    run = async (sender) => {
      if (!res.body) throw new WasmlmError('NETWORK', `${url} has no body`, { url });
      for await (const c of readBody(res, { url, expected, timeout, signal, timer })) await sender.push(c);
    };
  }
  // (a tokenizer reads part of the file: no digest to check)
  const wantSha = vocabOnly ? null : checkSha256(src.sha256 || options.sha256, src.sha256 ? 'registry sha256' : 'sha256');
  if (wantSha) { hasher = new Sha256(); expect = wantSha; }
  try {
    // the size picks the engine build; one it cannot hold is refused here, before the body is read
    // (a tokenizer reads only the metadata, which any build holds)
    await client.start(vocabOnly ? 0 : total, { what: src.url ? safeUrl(src.url) : src.name || (src.kind === 'blob' && src.blob.name ? `model file ${src.blob.name}` : 'the model file') });
    await client.call('loadBegin', { size: total, vocabOnly: vocabOnly || undefined, name: src.name });
  } catch (e) { // (e.g. aborted while the worker started): release a stream source
    if (cached) dropUnread(cached, e);
    else if (body && !body.locked) body.cancel(e).catch(() => {});
    throw e;
  }
  const sender = new ChunkSender(client, { total, onProgress, hasher, signal, stageBytes: vocabOnly ? VOCAB_STAGE_BYTES : STAGE_BYTES });
  try {
    await pump(run, sender);
    await sender.end();
    if (signal && signal.aborted) throw abortError(signal);
    if (hasher) {
      const got = hasher.hex();
      if (got !== expect) {
        throw new WasmlmError('INTEGRITY', `sha256 mismatch for ${src.url || 'the model bytes'}: expected ${expect}, got ${got}`,
          { expected: expect, actual: got });
      }
    }
  } catch (e) {
    await client.call('loadCancel').catch(() => {});
    if (cached) await cached.discard();
    throw e;
  }
  let info;
  try { info = await client.call('loadEnd', { options: ctx }); } catch (e) { if (cached) await cached.discard(); throw e; }
  if (cached) { await cached.commit().catch((e) => console.warn(`wasmlm: the model was not cached: ${e.message}`)); info.fromCache = cached.fromCache; }
  return info;
}

// ---- public API --------------------------------------------------------------

/**
 * Loads a GGUF model into a new worker.
 * @param {string|URL|ArrayBuffer|ArrayBufferView|Blob|ReadableStream|Response} source
 * @param {object} [options] see index.d.ts (LoadOptions)
 * @returns {Promise<Model>}
 */
export async function loadModel(source, options = {}) {
  options = checkOptions('loadModel', options);
  const { client, info } = await startWorker(source, options, false);
  return new Model(client, info);
}

/**
 * Loads only the vocabulary of a GGUF file (a whole model or a
 * vocabulary-only file such as ggml-vocab-*.gguf): the same sources as
 * loadModel, but only the file's header and metadata are read (a URL by
 * Range requests; a split GGUF's first part). The tokenizer runs in a worker
 * of its own, as a model does, so a large vocabulary never blocks the page.
 * @param {string|URL|ArrayBuffer|ArrayBufferView|Blob|ReadableStream|Response} source
 * @param {object} [options] see index.d.ts (TokenizerLoadOptions)
 * @returns {Promise<Tokenizer>}
 */
export async function loadTokenizer(source, options = {}) {
  options = checkOptions('loadTokenizer', options);
  const { client, info } = await startWorker(source, { ...options, threads: 1 }, true);
  return new Tokenizer(client, info);
}

/** Resolves the source, starts a worker and loads the file into it (vocabOnly: its metadata only). */
async function startWorker(source, options, vocabOnly) {
  const { signal } = options;
  if (signal && signal.aborted) throw abortError(signal);
  const src = await resolveSource(source, options, vocabOnly);
  const client = await WorkerClient.create(options);
  let onAbort;
  try {
    const abortP = new Promise((_, reject) => {
      onAbort = () => reject(abortError(signal));
      signal?.addEventListener('abort', onAbort, { once: true });
    });
    abortP.catch(() => {});
    const info = await Promise.race([loadInto(client, src, options, vocabOnly), abortP]);
    return { client, info };
  } catch (e) {
    await client.terminate().catch(() => {});
    throw e;
  } finally {
    if (onAbort) signal?.removeEventListener('abort', onAbort);
  }
}

// Every method checks its options (web/options.js) on the caller's thread
// first; only checked, cloneable options travel to the worker.

/**
 * A vocabulary in a worker (loadTokenizer): tokenize, detokenize, count
 * tokens, render chat templates. A Model is a Tokenizer too.
 */
export class Tokenizer {
  constructor(client, info) {
    this._client = client;
    /** Metadata and hyper-parameters (a tokenizer: vocabOnly, bytesRead, hparams.nVocab and the special ids; a model: ModelInfo). */
    this.info = info;
    this._disposed = false;
  }

  get disposed() { return this._disposed; }
  _check() { if (this._disposed) throw new WasmlmError('DISPOSED', `${this.info.vocabOnly ? 'tokenizer' : 'model'} disposed`); }

  /** @returns {Promise<number[]>} */
  async tokenize(text, opts = {}) {
    this._check();
    const o = checkOptions('tokenize', opts);
    if (typeof text !== 'string') throw badOption('text', text, 'must be a string');
    return this._client.call('tokenize', { text, addBos: o.addBos, parseSpecial: !!o.parseSpecial });
  }

  /** The number of tokens `text` makes (as tokenize, with the same options). @returns {Promise<number>} */
  async countTokens(text, opts = {}) {
    this._check();
    const o = checkOptions('countTokens', opts);
    if (typeof text !== 'string') throw badOption('text', text, 'must be a string');
    return (await this._client.call('tokenize', { text, addBos: o.addBos, parseSpecial: !!o.parseSpecial })).length;
  }

  /** @returns {Promise<string>} */
  async detokenize(ids) {
    this._check();
    if (ids == null || typeof ids === 'string' || typeof ids[Symbol.iterator] !== 'function') throw badOption('ids', ids, 'must be an iterable of token ids');
    const list = checkPrompt(Array.from(ids), this.info.hparams.nVocab, 'ids');
    return this._client.call('detokenize', { ids: list });
  }

  /**
   * Renders `messages` ([{role, content}]) with the model's chat template
   * (tokenizer.chat_template, or options.template), with
   * add_generation_prompt (default true) and the model's BOS/EOS token text.
   * The template is untrusted (it comes with the model file): it is rendered
   * in the worker within options.templateLimits; going past one rejects with
   * code TEMPLATE_LIMIT and the object stays usable.
   * @returns {Promise<string>}
   */
  async applyChatTemplate(messages, opts = {}) {
    this._check();
    const o = checkOptions('applyChatTemplate', opts);
    const template = chatTemplateFor(this.info, o);
    const reply = await this._client.call('renderChat', renderRequest(template, messages, this.info, o));
    return renderResult(reply);
  }

  /**
   * Frees it and ends its worker at once: requests in flight or queued
   * reject with code DISPOSED (a running generation is not waited for).
   */
  async dispose() {
    if (this._disposed) return;
    this._disposed = true;
    await this._client.terminate().catch(() => {});
  }
}

export class Model extends Tokenizer {
  constructor(client, info) {
    super(client, info);
    /** Threads really used for compute (1 when shared memory is unavailable). */
    this.threads = client.threads;
    /** The engine build's SIMD flavour: 'relaxed' or 'simd128' ('custom' for options.wasm). */
    this.simd = client.simd;
    /** Whether the model runs in a memory64 (wasm64) build (files over the 4 GiB of wasm32). */
    this.memory64 = client.memory64;
    this[MODEL_BRAND] = true;
    // the OpenAI-style API (web/openai.js): model.chat.completions.create, model.completions.create;
    // `chat` stays the method below, called through the prototype, with `completions` on it
    const api = openaiApi(this);
    const chat = (messages, opts) => Model.prototype.chat.call(this, messages, opts);
    this.chat = Object.assign(chat, api.chat);
    this.completions = api.completions;
  }

  /** The worker channel of this model, for the strategies of web/scaling.js (web/protocol.js). */
  get [CHANNEL]() { return this._client; }
  _prompt(prompt) { return checkPrompt(prompt, this.info.hparams.nVocab); }
  /** checkOptions, then what needs the model (logitBias token ids in the vocabulary). */
  _options(method, opts) { return checkForModel(checkOptions(method, opts), this.info.hparams.nVocab); }

  /**
   * Streams a completion: an async iterator of {text, token, logprob}
   * chunks (with options.logprobs also topLogprobs). Its return value (when iterated by hand) is the CompletionResult.
   */
  generate(prompt, opts = {}) {
    return async function* gen() {
      this._check();
      const o = this._options('generate', opts);
      const p = this._prompt(prompt);
      checkResume(o);
      if (o.draft && o.draft !== 'lookup') return yield* scaling.speculative(this, o.draft, p, o);
      const it = streamRequest(this._client, 'generate', generateRequest(p, o, true), o.signal);
      try {
        for (;;) {
          const r = await it.next();
          if (r.done) return r.value;
          yield chunkOf(r.value);
        }
      } finally {
        await it.return();
      }
    }.call(this);
  }

  /** Runs a whole completion; resolves with {text, tokens, logprobs, finishReason, stats}. */
  async complete(prompt, opts = {}) {
    this._check();
    const o = this._options('complete', opts);
    const p = this._prompt(prompt);
    checkResume(o);
    if (o.signal && o.signal.aborted) throw abortError(o.signal);
    if (o.onToken || (o.draft && o.draft !== 'lookup')) {
      const { onToken = () => {}, ...rest } = o;
      const it = this.generate(p, rest);
      try {
        for (;;) {
          const r = await it.next();
          if (r.done) return r.value;
          await onToken(r.value); // an async onToken is awaited (back-pressure); its rejection fails the call
        }
      } finally {
        await it.return(); // a throwing onToken stops the generation in the worker too
      }
    }
    return withSignal(this._client, 'generate', generateRequest(p, o, false), o.signal);
  }

  /**
   * Streams the assistant's reply to a conversation, like generate(): the
   * messages are rendered with the chat template, special tokens in the
   * rendered prompt become their ids, and generation stops at the model's
   * end-of-generation tokens (EOS, <|im_end|>, <|eot_id|>, ...).
   */
  chat(messages, opts = {}) {
    return async function* chatGen() {
      this._check();
      const o = this._options('chat', opts);
      const prompt = await this.applyChatTemplate(messages, templateOptions(o));
      return yield* this.generate(prompt, chatGenerateOptions(prompt, this.info, o));
    }.call(this);
  }

  /** The whole reply to a conversation; resolves with a CompletionResult (onToken streams). */
  async chatComplete(messages, opts = {}) {
    this._check();
    const o = this._options('chatComplete', opts);
    const prompt = await this.applyChatTemplate(messages, templateOptions(o));
    return this.complete(prompt, chatGenerateOptions(prompt, this.info, o));
  }

  /**
   * Raw logits from an empty context (tests, analysis): of the last token,
   * or with {all: true} of every position. @returns {Promise<Float32Array[]>}
   */
  async logits(tokens, opts = {}) {
    this._check();
    const o = checkOptions('logits', opts);
    const ids = checkPrompt(tokens, this.info.hparams.nVocab, 'tokens');
    if (typeof ids === 'string' || ids.length === 0) throw badOption('tokens', tokens, 'must be a non-empty array of token ids');
    const r = await this._client.call('logits', { ids, all: !!o.all });
    return r.rows;
  }

  /**
   * Memory of this model's engine: `wasmBytes` (the wasm memory, which only
   * grows: its peak), `engineBytes` (file + tables + context in use),
   * `fileBytes`.
   * @returns {Promise<{wasmBytes:number, engineBytes:number, fileBytes:number}>}
   */
  async memory() {
    this._check();
    return this._client.call('memory', {});
  }

  /**
   * The context's sequence as bytes: its tokens, the keys and values of the
   * cache rows it uses (not the whole context), a fingerprint of the model,
   * and, after a plain generation, the tokens it sampled and its random
   * stream. loadState(bytes) on this model, loaded again later (another page
   * load, another process), puts it back; generate(prompt, {resume: true})
   * then continues exactly where it stopped, and any call whose prompt
   * starts with the saved tokens (a chat's next turn) reuses their cache.
   * @returns {Promise<Uint8Array>}
   */
  async saveState() {
    this._check();
    return (await this._client.call('saveState', {})).bytes;
  }

  /**
   * Loads bytes from saveState. Untrusted input: bytes that are cut short,
   * corrupt, of another state version, from another model, or that do not
   * fit this context (its length; its KV type; a slid window's ring) are
   * refused with code BAD_SAVED_STATE and the context is left as it was.
   * @returns {Promise<{tokens: number[], positions: number, resumable: boolean}>}
   */
  async loadState(bytes) {
    this._check();
    if (!(bytes instanceof ArrayBuffer || ArrayBuffer.isView(bytes))) throw badOption('bytes', bytes, 'must be a Uint8Array or ArrayBuffer (from saveState)');
    const view = bytes instanceof ArrayBuffer ? new Uint8Array(bytes) : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const copy = view.slice();   // ours to transfer
    return this._client.call('loadState', { bytes: copy }, { transfer: [copy.buffer] });
  }

  /** Next-token distribution after `text`: [{token, prob, text}] (top `topN`, default 20); raw unless filters are given. */
  async nextTokenDistribution(text, opts = {}) {
    this._check();
    const o = this._options('nextTokenDistribution', opts);
    return this._client.call('distribution', { text: this._prompt(text), options: o });
  }

  /**
   * Embeddings: one Float32Array of info.embedding.length floats per text, in
   * order. `texts` is a string or an array of them (a single string gives an
   * array of one vector too); an element may also be token ids, used as they
   * are (no [CLS]/BOS added). Strings are framed as the model expects ([CLS]
   * ... [SEP] for bert, BOS and EOS as the file says for decoders). The
   * texts run as separate sequences packed into batches, so each gets the
   * vector it gets alone. Vectors are L2-normalized unless normalize: false.
   * @returns {Promise<Float32Array[]>}
   */
  async embed(texts, opts = {}) {
    this._check();
    const o = checkOptions('embed', opts);
    const list = typeof texts === 'string' ? [texts] : texts;
    if (!Array.isArray(list)) throw badOption('texts', texts, 'must be a string or an array of strings (or of token-id arrays)');
    const items = list.map((t, i) => (typeof t === 'string' ? t : checkPrompt(t, this.info.hparams.nVocab, `texts[${i}]`)));
    if (items.length === 0) return [];
    if (o.signal && o.signal.aborted) throw abortError(o.signal);
    const r = await withSignal(this._client, 'embed', { texts: items, options: workerOptions(o) }, o.signal);
    return r.vectors;
  }

  // ---- inference-time scaling (web/scaling.js, web/worker/multi.js) ----

  /** n candidates decoded as one batch, scored and sorted (best first). */
  async bestOfN(prompt, opts = {}) {
    this._check();
    return scaling.bestOfN(this, this._prompt(prompt), this._options('bestOfN', opts));
  }
  /** Majority vote over answers extracted from n samples. */
  async selfConsistency(prompt, opts = {}) {
    this._check();
    return scaling.selfConsistency(this, this._prompt(prompt), this._options('selfConsistency', opts));
  }
  /** Resamples until verify() accepts (or maxAttempts). */
  async generateUntil(prompt, opts = {}) {
    this._check();
    return scaling.generateUntil(this, this._prompt(prompt), this._options('generateUntil', opts));
  }
  /** Deterministic beam search on forked sequences. */
  async beamSearch(prompt, opts = {}) {
    this._check();
    return scaling.beamSearch(this, this._prompt(prompt), checkOptions('beamSearch', opts));
  }
  /** Tree search over steps (web/tree.js): each call grows nodes as one batch sharing their paths in the cache. */
  async treeSearch(prompt, opts = {}) {
    this._check();
    return treeSearch(this, this._prompt(prompt), checkOptions('treeSearch', opts));
  }
  /** Greedy first; more compute (best-of-N, tree search) only when the answer looks uncertain, within a token budget (web/deliberate.js). */
  async deliberate(prompt, opts = {}) {
    this._check();
    return deliberate(this, this._prompt(prompt), checkOptions('deliberate', opts));
  }

  /**
   * Re-quantizes the model to `type` (a QUANT_TYPES name: 'q4_0', 'q4_k_m', ...).
   * With {outPath} (Node) the GGUF is written there; otherwise the result has `bytes`.
   */
  async quantize(type, opts = {}) {
    this._check();
    const o = checkOptions('quantize', opts);
    if (typeof type !== 'string' || !Object.hasOwn(QUANT_TYPES, type.toLowerCase())) {
      throw new WasmlmError('BAD_OPTION', `unknown quantization type ${describe(type)} (use ${Object.keys(QUANT_TYPES).join(', ')})`, { option: 'type' });
    }
    return this._client.call('quantize', { type: type.toLowerCase(), outPath: o.outPath });
  }
}

/** A generate request (web/protocol.js) from checked options: prompt lookup is its `draft` field. */
function generateRequest(prompt, o, stream) {
  const req = { prompt, options: workerOptions(o), stream };
  if (o.draft === 'lookup') req.draft = 'lookup';
  return req;
}

/** `resume` continues the one stream a plain generation left: not with a draft model or prompt lookup. */
function checkResume(o) {
  if (o.resume && o.draft) throw badOption('resume', o.resume, 'continues a plain generation: it cannot be combined with draft');
}

function templateOptions(o) {
  const t = {};
  for (const k of ['template', 'addGenerationPrompt', 'variables', 'templateLimits']) if (o[k] !== undefined) t[k] = o[k];
  return t;
}

if (typeof Symbol.asyncDispose === 'symbol') {
  Tokenizer.prototype[Symbol.asyncDispose] = function asyncDispose() { return this.dispose(); };
}

export default { loadModel, loadTokenizer, DEFAULT_SAMPLING };
