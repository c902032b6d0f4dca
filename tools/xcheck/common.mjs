// Cross-check helpers for `make xcheck` (tools/xcheck.mjs): one synthetic
// GGUF run by wasmlm and by llama.cpp (node-llama-cpp's prebuilt build) on the
// same token ids. Greedy continuations must be equal except at near-ties;
// teacher-forced next-token distributions are compared by KL divergence.
//
// A tie: where the two greedy runs first differ, wasmlm's top-2 logit gap at
// that position is below TIE_GAP (either token is a correct argmax within
// float rounding); the comparison stops there.
import { loadModel } from '../../web/index.js';

export const TIE_GAP = 1e-3;

function softmax(row) {
  let max = -Infinity;
  for (const v of row) if (v > max) max = v;
  const p = new Float64Array(row.length);
  let sum = 0;
  for (let i = 0; i < row.length; i++) { p[i] = Math.exp(row[i] - max); sum += p[i]; }
  for (let i = 0; i < p.length; i++) p[i] /= sum;
  return p;
}

/** KL(ref || ours) in nats; probabilities below 1e-12 in ours are floored there. */
export function kl(ref, ours) {
  let d = 0;
  for (let i = 0; i < ref.length; i++) if (ref[i] > 0) d += ref[i] * Math.log(ref[i] / Math.max(ours[i], 1e-12));
  return Math.max(d, 0);
}

function top2Gap(row) {
  let a = -Infinity, b = -Infinity;
  for (const v of row) { if (v > a) { b = a; a = v; } else if (v > b) b = v; }
  return a - b;
}

/**
 * Cross-checks one model file over token-id prompts.
 * @param {object} llama node-llama-cpp's Llama (getLlama())
 * @param {string} file GGUF path
 * @param {number[][]} prompts token ids (BOS included when the model wants it)
 * @param {{maxTokens?: number, name?: string}} [o]
 * @returns {Promise<{name, prompts, greedyEqual, ties, tokensCompared, maxKL, meanKL}>}
 */
export async function crossCheck(llama, file, prompts, { maxTokens = 24, name = file } = {}) {
  const ours = await loadModel(file, { threads: 1, contextLength: 256 });
  const ref = await llama.loadModel({ modelPath: file });
  const ctx = await ref.createContext({ contextSize: 256, threads: 1 });
  let equal = 0, ties = 0, compared = 0, maxKL = 0, sumKL = 0, nKL = 0;
  try {
    for (const ids of prompts) {
      // teacher-forced distributions at every prompt position
      const seq = ctx.getSequence();
      const out = await seq.controlledEvaluate(ids.map((t) => [t, { generateNext: { probabilities: true } }]));
      const rows = await ours.logits(ids, { all: true });
      for (let i = 0; i < ids.length; i++) {
        const probs = out[i]?.next?.probabilities;
        if (!probs) continue;
        const p = new Float64Array(rows[i].length);
        for (const [tok, pr] of probs) p[tok] = pr;
        const d = kl(p, softmax(rows[i]));
        maxKL = Math.max(maxKL, d); sumKL += d; nKL++;
      }
      await seq.clearHistory();
      // greedy continuations
      const a = (await ours.complete(ids, { temperature: 0, repeatPenalty: 1, maxTokens, ignoreEos: true, reusePrefix: false })).tokens;
      const b = [];
      for await (const t of seq.evaluate(ids, { temperature: 0 })) { b.push(t); if (b.length >= maxTokens) break; }
      seq.dispose();
      let k = 0;
      while (k < a.length && k < b.length && a[k] === b[k]) k++;
      compared += k;
      if (k === Math.min(a.length, b.length)) { equal++; continue; }
      const row = (await ours.logits([...ids, ...a.slice(0, k)]))[0];
      if (top2Gap(row) < TIE_GAP) { ties++; equal++; }
    }
  } finally {
    await ctx.dispose();
    await ref.dispose();
    await ours.dispose();
  }
  return { name, prompts: prompts.length, greedyEqual: equal, ties, tokensCompared: compared, maxKL, meanKL: nKL ? sumKL / nKL : 0 };
}

/** Prompts of token ids from a tokenizer-independent recipe: BOS (when the model has one) and fixed ids. */
export async function idPrompts(file, n = 3, len = 12, seed = 7) {
  const m = await loadModel(file, { threads: 1, contextLength: 64 });
  try {
    const { nVocab, bosId, addBos } = m.info.hparams;
    const out = [];
    let s = seed;
    for (let i = 0; i < n; i++) {
      const ids = addBos && bosId >= 0 ? [bosId] : [];
      while (ids.length < len) { s = (s * 1103515245 + 12345) >>> 0; ids.push(3 + (s % (nVocab - 3))); }
      out.push(ids);
    }
    return out;
  } finally { await m.dispose(); }
}
