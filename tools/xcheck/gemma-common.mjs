// Shared by tools/xcheck/gemma2.mjs and gemma3.mjs (not a cross-check itself:
// it exports no xcheck). Cross-checks our engine against llama.cpp
// (node-llama-cpp) on synthetic files:
//   - teacher-forced: every position of a few prompts, llama.cpp's full
//     next-token distribution (temperature 1, no top-k/top-p) against
//     softmax of our logits; KL(ref || ours) per position;
//   - greedy: N tokens from each prompt; our token equals llama.cpp's except
//     at a near-tie, where our top-2 logit gap is < TIE x (logit range) of
//     that step (then the continuation legitimately diverges: the case stops).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeModel } from '../../models/make-model.js';
import { loadModel } from '../../web/index.js';

export const TIE = 1e-3;
export const MAX_KL = 1e-3;

function rngInts(seed, n, lo, hi) {
  let x = seed >>> 0 || 1;
  const out = [];
  for (let i = 0; i < n; i++) { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; out.push(lo + (x % (hi - lo))); }
  return out;
}

function softmax(row) {
  let m = -Infinity;
  for (const v of row) if (v > m) m = v;
  let s = 0;
  const p = new Float64Array(row.length);
  for (let i = 0; i < row.length; i++) { p[i] = Math.exp(row[i] - m); s += p[i]; }
  for (let i = 0; i < p.length; i++) p[i] /= s;
  return p;
}

function top2(row) {
  let a = -1, b = -1, mn = Infinity;
  for (let i = 0; i < row.length; i++) {
    if (row[i] < mn) mn = row[i];
    if (a < 0 || row[i] > row[a]) { b = a; a = i; } else if (b < 0 || row[i] > row[b]) b = i;
  }
  return { best: a, gap: row[a] - row[b], range: row[a] - mn };
}

/** One case: file made by makeModel(file, shape, type, seed, opts); prompts of BOS + random ids. */
export async function runCase(llama, tmpDir, { name, shape, type, seed, opts, prompts = 3, promptLen = 20, greedy = 16 }) {
  const file = path.join(tmpDir, `${name}.gguf`);
  makeModel(file, shape, type, seed, opts);
  const ours = await loadModel(file, { contextLength: 128, batchSize: 16 });
  const lm = await llama.loadModel({ modelPath: file });
  const lctx = await lm.createContext({ contextSize: 128, batchSize: 64, sequences: 1 });
  const nVocab = ours.info.hparams.nVocab;
  const kls = [];
  let greedyEqual = true, ties = 0, compared = 0;
  try {
    for (let p = 0; p < prompts; p++) {
      const toks = [2, ...rngInts(1000 + p, promptLen - 1, 6, nVocab)];
      // teacher-forced distributions
      const seq = lctx.getSequence();
      const res = await seq.controlledEvaluate(toks.map((t) => [t, { generateNext: { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } }]));
      const rows = await ours.logits(toks, { all: true });
      for (let i = 0; i < toks.length; i++) {
        const q = softmax(rows[i]), pm = res[i].next.probabilities;
        let kl = 0;
        for (const [tok, pr] of pm) if (pr > 0) kl += pr * Math.log(pr / Math.max(q[tok], 1e-300));
        kls.push(Math.max(0, kl));
      }
      // greedy
      await seq.clearHistory();
      const ref = [];
      for await (const t of seq.evaluate(toks, { temperature: 0 })) { ref.push(t); if (ref.length >= greedy) break; }
      seq.dispose();
      const ctx = [...toks];
      for (let i = 0; i < ref.length; i++) {
        const [row] = await ours.logits(ctx);
        const { best, gap, range } = top2(row);
        compared++;
        if (best !== ref[i]) {
          if (gap < TIE * range) { ties++; break; }
          greedyEqual = false; break;
        }
        ctx.push(best);
      }
    }
  } finally {
    await lctx.dispose(); await lm.dispose(); await ours.dispose();
  }
  const maxKL = Math.max(...kls), meanKL = kls.reduce((a, b) => a + b, 0) / kls.length;
  return { name, greedyEqual, ties, greedyTokensCompared: compared, maxKL, meanKL, positions: kls.length, tieGap: `top-2 gap < ${TIE} x logit range`, klLimit: MAX_KL };
}

export async function runArch(arch, cases, { llama, tmpDir } = {}) {
  let own = null;
  if (!llama) { const { getLlama } = await import('node-llama-cpp'); llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' }); }
  if (!tmpDir) tmpDir = own = fs.mkdtempSync(path.join(os.tmpdir(), `xcheck-${arch}-`));
  try {
    const out = [];
    for (const c of cases) out.push(await runCase(llama, tmpDir, c));
    return { arch, cases: out, ok: out.every((c) => c.greedyEqual && c.maxKL < MAX_KL) };
  } finally {
    if (own) fs.rmSync(own, { recursive: true, force: true });
  }
}
