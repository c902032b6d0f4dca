// In-page side of `npm run bench:browser`: loads wasmlm (web/index.js) and
// wllama (@wllama/wllama ESM build) in the same page and exposes a small
// API on `window.bench` that bench/browser-bench.mjs calls through
// page.evaluate. Each run returns engine-reported speeds plus wall time.
import { loadModel } from '/web/index.js';
import { Wllama, LogLevel } from '/node_modules/@wllama/wllama/esm/index.js';

const WLLAMA_WASM = '/node_modules/@wllama/wllama/esm/wasm/wllama.wasm';
const quietLogger = { debug() {}, log() {}, warn: (...a) => console.warn(...a), error: (...a) => console.error(...a) };

let ours = null;   // wasmlm Model
let wl = null;     // Wllama instance

function env() {
  return {
    userAgent: navigator.userAgent,
    hardwareConcurrency: navigator.hardwareConcurrency,
    crossOriginIsolated: globalThis.crossOriginIsolated === true,
    sharedArrayBuffer: typeof SharedArrayBuffer !== 'undefined',
    jspi: !!WebAssembly.Suspending,
  };
}

async function oursLoad(url, { threads, contextLength, maxSequences }) {
  if (ours) await ours.dispose();
  const t0 = performance.now();
  ours = await loadModel(url, { threads, contextLength, ...(maxSequences ? { maxSequences } : {}) });
  return { loadMs: performance.now() - t0, threads: ours.threads, simd: ours.simd ?? null };
}

async function oursRun(prompt, { maxTokens }) {
  const t0 = performance.now();
  const r = await ours.complete(prompt, { temperature: 0, repeatPenalty: 1, ignoreEos: true, maxTokens, reusePrefix: false });
  const wallMs = performance.now() - t0;
  return {
    wallMs,
    promptTokens: r.stats.promptTokens,
    generatedTokens: r.stats.generatedTokens,
    prefill: r.stats.prefillTokensPerSec,
    decode: r.stats.decodeTokensPerSec,
    tokens: r.tokens,
    logprobs: r.logprobs,
    text: r.text,
  };
}

async function oursTokenize(text) { return ours.tokenize(text); }

// Next-token log-probabilities after `prompt` (raw logits, log-softmax): our
// top `k` and the values at `ids` (wllama's candidates), for the correctness check.
async function oursFirstLogprobs(prompt, k, ids) {
  const toks = await ours.tokenize(prompt);
  const [row] = await ours.logits(toks);
  let max = -Infinity;
  for (const v of row) if (v > max) max = v;
  let sum = 0;
  for (const v of row) sum += Math.exp(v - max);
  const lse = max + Math.log(sum);
  const order = Array.from(row.keys()).sort((a, b) => row[b] - row[a]).slice(0, k);
  return { top: order.map((id) => ({ id, logprob: row[id] - lse })), at: ids.map((id) => row[id] - lse) };
}
async function oursDetokenize(ids) { return ours.detokenize(ids); }
/** Texts of ids[0..i] for every i (to compare with another engine's text). */
async function oursPrefixTexts(ids) {
  const out = [];
  for (let i = 0; i < ids.length; i++) out.push(await ours.detokenize(ids.slice(0, i + 1)));
  return out;
}

async function oursDispose() { if (ours) await ours.dispose(); ours = null; if (draft) await draft.dispose(); draft = null; }

// Inference-time scaling (bench/browser-scaling.mjs): a second model as the
// draft, and one timed call of a mode: 'single' (complete), 'best' (bestOfN),
// 'draft' (complete with the draft model), 'lookup' (complete with prompt lookup)
let draft = null;
async function oursLoadDraft(url, { threads, contextLength }) {
  if (draft) await draft.dispose();
  draft = await loadModel(url, { threads, contextLength });
  return { simd: draft.simd ?? null };
}
async function oursTimed(mode, prompt, o) {
  const t0 = performance.now();
  const r = mode === 'best' ? await ours.bestOfN(prompt, o)
    : await ours.complete(prompt, mode === 'draft' ? { ...o, draft } : mode === 'lookup' ? { ...o, draft: 'lookup' } : o);
  const ms = performance.now() - t0;
  if (mode === 'best') return { ms, lengths: r.candidates.map((c) => c.tokens.length) };
  return { ms, tokens: r.tokens, spec: r.stats.speculative || null };
}

async function wllamaLoad(url, { threads, contextLength }) {
  if (wl) await wl.exit();
  const t0 = performance.now();
  const res = await fetch(url);
  if (!res.ok) throw new Error(`cannot fetch ${url}: HTTP ${res.status}`);
  const blob = await res.blob();
  wl = new Wllama({ default: WLLAMA_WASM }, { logger: quietLogger, suppressNativeLog: true });
  await wl.loadModel([new File([blob], url.split('/').pop())], {
    n_threads: threads,
    n_ctx: contextLength,
    n_gpu_layers: 0,         // CPU only (no WebGPU)
    n_parallel: 1,
    log_level: LogLevel.ERROR,
  });
  return { loadMs: performance.now() - t0, threads: wl.getNumThreads(), multithread: wl.isMultithread() };
}

async function wllamaRun(prompt, { maxTokens, topLogprobs = 0 }) {
  const t0 = performance.now();
  const r = await wl.createCompletion({
    prompt,
    max_tokens: maxTokens,
    temperature: 0,          // greedy
    top_k: 1,
    penalty_repeat: 1, penalty_freq: 0, penalty_present: 0,
    ignore_eos: true,
    cache_prompt: false,     // every run prefills the whole prompt
    ...(topLogprobs ? { logprobs: topLogprobs } : {}),
  });
  const wallMs = performance.now() - t0;
  const t = r.timings || {};
  const choice = r.choices && r.choices[0] || {};
  return {
    wallMs,
    promptTokens: t.prompt_n ?? r.usage?.prompt_tokens,
    cachedTokens: t.cache_n ?? 0,
    generatedTokens: t.predicted_n ?? r.usage?.completion_tokens,
    prefill: t.prompt_per_second,
    decode: t.predicted_per_second,
    text: choice.text,
    finishReason: choice.finish_reason,
    // with logprobs: the generated ids and, per position, the top candidates {id, logprob}
    tokens: choice.logprobs?.content ? choice.logprobs.content.map((c) => c.id) : null,
    top: choice.logprobs?.content ? choice.logprobs.content.map((c) => c.top_logprobs.map((t) => ({ id: t.id, logprob: t.logprob }))) : null,
  };
}

async function wllamaExit() { if (wl) await wl.exit(); wl = null; }

window.bench = { env, oursLoad, oursLoadDraft, oursTimed, oursRun, oursTokenize, oursDetokenize, oursPrefixTexts, oursFirstLogprobs, oursDispose, wllamaLoad, wllamaRun, wllamaExit };
window.benchReady = true;
