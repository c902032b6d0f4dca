// Cross-check of one synthetic architecture against llama.cpp (node-llama-cpp)
// on the very same GGUF files. For each case and prompt, llama.cpp decodes
// greedily from the prompt, giving its next-token distribution at every
// position (teacher forcing along its own greedy path); our engine computes
// the logits of the same token sequence. Per position:
//   - KL(ref || ours) = sum_i p_i (log p_i - log q_i), p = llama.cpp's
//     softmax, q = ours;
//   - greedy: our argmax must equal llama.cpp's; a different argmax counts as
//     a tie (not a failure) when llama.cpp's log-probability gap between the
//     two tokens is below TIE_REL x (the range of its log-probabilities over
//     the vocabulary).
// Equal argmaxes along llama.cpp's greedy path mean both engines decode the
// same greedy tokens.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeModel } from '../../../models/make-model.js';
import { loadModel } from '../../../web/index.js';

export const TIE_REL = 1e-3;
// llama.cpp's context as the cross-check runs it: K/V caches in F32 and no
// flash attention, so its attention is F32 throughout like ours (its default
// F16 cache also rounds Q and the attention weights to F16). With its
// defaults, a quantized file diverged by KL ~1e-3 on these peaked models: the
// F16 roundings flip Q8_0 roundings of the next activations. Run this way,
// llama.cpp and wasmlm agree to ~1e-6 on F32, F16 and quantized files alike.
export const LLAMA_CONTEXT = { flashAttention: false, experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32' };
// A case fails above this KL (nats) at any position. llama.cpp keeps its KV
// cache in F16 and our engine in F32 by default: on these peaked synthetic
// models (qkStd 0.2) a plain 8-layer llama file, which both engines have run
// exactly for long, already reaches 3e-4 at its worst position.
export const MAX_KL = 1e-3;

export async function getLlamaCpp() {
  const { getLlama } = await import('node-llama-cpp');
  return getLlama({ gpu: false, build: 'never', logLevel: 'error' });
}

/** Deterministic prompts: `count` arrays of `len` token ids in [first, limit) (xorshift32 from `seed`). */
export function prompts(count, len, limit, seed, first = 3) {
  let x = seed >>> 0 || 1;
  const next = () => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x; };
  return Array.from({ length: count }, () => Array.from({ length: len }, () => first + (next() % (limit - first))));
}

export function logSoftmax(row) {
  let mx = -Infinity;
  for (const v of row) if (v > mx) mx = v;
  let s = 0;
  for (const v of row) s += Math.exp(v - mx);
  const ls = Math.log(s) + mx;
  return Float64Array.from(row, (v) => v - ls);
}

function argmax(a) {
  let b = 0;
  for (let i = 1; i < a.length; i++) if (a[i] > a[b]) b = i;
  return b;
}

/** llama.cpp's log-probabilities (Float64Array of n_vocab) after each token of
 * prompt and of its greedy continuation of `steps` tokens: {tokens, rows}. */
async function llamaGreedyPath(llama, file, prompt, steps, nVocab, nCtx = 256) {
  const m = await llama.loadModel({ modelPath: file });
  const ctx = await m.createContext({ contextSize: nCtx, batchSize: 256, threads: 1, ...LLAMA_CONTEXT });
  if (ctx.contextSize !== nCtx) throw new Error(`llama.cpp context ${ctx.contextSize}, asked for ${nCtx}`);
  try {
    const seq = ctx.getSequence();
    const next = { generateNext: { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } };
    const toRow = (probs) => {
      const r = new Float64Array(nVocab).fill(-Infinity);
      for (const [t, p] of probs) r[t] = Math.log(p);
      return r;
    };
    const rows = [];
    const out = await seq.controlledEvaluate(prompt.map((t) => [t, next]));
    for (let i = 0; i < prompt.length; i++) rows.push(toRow(out[i].next.probabilities));
    const tokens = [...prompt];
    for (let s = 0; s < steps; s++) {
      const t = argmax(rows.at(-1));
      tokens.push(t);
      const [o] = await seq.controlledEvaluate([[t, next]]);
      rows.push(toRow(o.next.probabilities));
    }
    return { tokens, rows };
  } finally {
    await ctx.dispose();
    await m.dispose();
  }
}

/** A case's verdict: exact cases by greedy agreement and KL, quantized ones by accuracy (QUANT_SLACK). */
export function caseOk(c, maxKL = MAX_KL) {
  if (c.quant) return c.quantKL <= QUANT_SLACK * c.quantKLRef + 1e-6;
  return c.greedyEqual === true && c.maxKL <= maxKL;
}

/** llama.cpp's log-probability rows after each of `tokens` (teacher forcing). */
export async function llamaRows(llama, file, tokens, nVocab, nCtx = 256) {
  const m = await llama.loadModel({ modelPath: file });
  const ctx = await m.createContext({ contextSize: nCtx, batchSize: 256, threads: 1, ...LLAMA_CONTEXT });
  try {
    const next = { generateNext: { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } };
    const out = await ctx.getSequence().controlledEvaluate(tokens.map((t) => [t, next]));
    return out.map((o) => {
      const r = new Float64Array(nVocab).fill(-Infinity);
      for (const [t, p] of o.next.probabilities) r[t] = Math.log(p);
      return r;
    });
  } finally {
    await ctx.dispose();
    await m.dispose();
  }
}

export const klOf = (p, q) => { let k = 0; for (let t = 0; t < p.length; t++) if (p[t] > -Infinity) k += Math.exp(p[t]) * (p[t] - q[t]); return k; };

// Quantized files: llama.cpp's x86 kernels (repacked Q4_0/K-quant matrices)
// round their Q8 activations by other conventions than its reference code,
// which wasmlm follows, so on a quantized file the two engines differ by
// rounding noise (a Q8_0 file, whose kernels round alike, agrees to ~1e-6).
// A quantized case is judged by accuracy instead: wasmlm's quantization
// error, mean KL(llama.cpp on the F32 file || engine on the quantized file)
// along the same tokens, must not exceed llama.cpp's own by more than 10 %.
export const QUANT_SLACK = 1.1;

/** `wasmlm quantize`'s file of `file` at `type` (beside it): both engines then run those very bytes. */
async function quantized(file, type) {
  const out = file.replace(/\.gguf$/, `-${type}.gguf`);
  const m = await loadModel(file);
  try { await m.quantize(type, { outPath: out }); } finally { await m.dispose(); }
  return out;
}

/**
 * cases: [{name, shape, type, seed, opts (makeModel), quant? (a wasmlm quantize type: the
 * generated file re-quantized, the same bytes for both engines), contextLength? (both engines;
 * default loadOptions.contextLength or 256), prompts: [[ids]], steps}]
 * → {arch, cases: [{name, greedyEqual, ties, mismatches, maxKL, meanKL, positions, logitRange}], ok}
 */
export async function crossCheck({ llama, tmpDir, arch, cases, loadOptions = {} }) {
  const own = !llama;
  if (own) llama = await getLlamaCpp();
  const dir = tmpDir || fs.mkdtempSync(path.join(os.tmpdir(), `wasmlm-xcheck-${arch}-`));
  const results = [];
  try {
    for (const c of cases) {
      const source = path.join(dir, `${arch}-${c.name}.gguf`);
      makeModel(source, c.shape, c.type, c.seed, { arch, ...c.opts });
      const file = c.quant ? await quantized(source, c.quant) : source;
      let quantOurs = 0, quantRef = 0;
      const nCtx = c.contextLength ?? loadOptions.contextLength ?? 256;
      const model = await loadModel(file, { ...loadOptions, contextLength: nCtx });
      let ties = 0, mismatches = 0, maxKL = 0, sumKL = 0, positions = 0, range = 0;
      try {
        const nVocab = model.info.hparams.nVocab;
        for (const prompt of c.prompts) {
          const ref = await llamaGreedyPath(llama, file, prompt, c.steps, nVocab, nCtx);
          const ours = (await model.logits(ref.tokens, { all: true })).map(logSoftmax);
          if (c.quant) {
            const exact = await llamaRows(llama, source, ref.tokens, nVocab, nCtx);
            exact.forEach((p, i) => { quantOurs += klOf(p, ours[i]); quantRef += klOf(p, ref.rows[i]); });
          }
          ref.rows.forEach((p, i) => {
            const q = ours[i];
            let kl = 0, lo = Infinity, hi = -Infinity;
            for (let t = 0; t < nVocab; t++) {
              if (p[t] > -Infinity) { kl += Math.exp(p[t]) * (p[t] - q[t]); lo = Math.min(lo, p[t]); }
              hi = Math.max(hi, p[t]);
            }
            range = Math.max(range, hi - lo);
            maxKL = Math.max(maxKL, kl); sumKL += kl; positions++;
            const a = argmax(p), b = argmax(q);
            if (a !== b) {
              if (p[a] - p[b] < TIE_REL * (hi - lo)) ties++;
              else mismatches++;
            }
          });
        }
      } finally {
        await model.dispose();
      }
      const r = { name: c.name, nCtx, greedyEqual: mismatches === 0, ties, mismatches, maxKL, meanKL: sumKL / positions, positions, logitRange: range };
      if (c.quant) Object.assign(r, { quant: c.quant, quantKL: quantOurs / positions, quantKLRef: quantRef / positions });
      results.push(r);
    }
  } finally {
    if (!tmpDir) fs.rmSync(dir, { recursive: true, force: true });
    if (own) await llama.dispose();
  }
  return {
    arch, tieRule: `different argmax with llama.cpp's top-2 gap < ${TIE_REL} x its log-prob range`, maxKLAllowed: MAX_KL,
    cases: results, ok: results.every(caseOk),
  };
}

/** `node tools/xcheck/ARCH.mjs`: runs xcheck and prints its result as JSON. */
export async function runStandalone(xcheck, metaUrl) {
  if (process.argv[1] && path.resolve(process.argv[1]) === new URL(metaUrl).pathname) {
    const llama = await getLlamaCpp();
    const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-xcheck-'));
    try {
      const r = await xcheck({ llama, tmpDir });
      console.log(JSON.stringify(r, null, 2));
      process.exitCode = r.ok ? 0 : 1;
    } finally {
      fs.rmSync(tmpDir, { recursive: true, force: true });
      await llama.dispose();
    }
  }
}
