// Cross-check of the phi3 architecture against llama.cpp (node-llama-cpp):
// one synthetic phi3 file (fused attn_qkv / gate-up tensors, LongRoPE
// factors and attention factor, GQA) run by both engines in a context up to
// rope.scaling.original_context_length (short factors) and past it (long
// factors). Per case:
//   - greedy: from each prompt, 16 tokens chosen by argmax in each engine;
//     equal, or they part at a near-tie: a position where the top-2 logit
//     gap (in llama.cpp's distribution) is below TIE_GAP of its logit range;
//   - teacher forced: at every position of each prompt, KL(llama.cpp || ours)
//     of the next-token distributions at temperature 1 (llama.cpp's full
//     distribution, no truncation; ours softmax of our logits in double).
// Export: xcheck({llama, tmpDir}) -> {arch, cases, ok}; `node tools/xcheck/phi3.mjs`
// prints the result as JSON. crossCheck() is shared with the other xcheck files of
// this set (mistral.mjs).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeModel } from '../../models/make-model.js';
import { loadModel } from '../../web/index.js';
import { prompts } from './lib/compare.mjs';

export { prompts };

export const TIE_GAP = 1e-3;       // a near-tie: top-2 logit gap below this share of the logit range
export const MAX_KL = 1e-4;        // largest per-position KL(llama.cpp || ours) accepted (nats)
const GREEDY_TOKENS = 16;
const SAMPLING = { temperature: 1, topK: 0, topP: 1, minP: 0 };

function logSoftmax(row) {
  let mx = -Infinity;
  for (const v of row) if (v > mx) mx = v;
  let s = 0;
  for (const v of row) s += Math.exp(v - mx);
  const l = Math.log(s) + mx;
  return Array.from(row, (v) => v - l);
}

const argmax = (a) => { let b = 0; for (let i = 1; i < a.length; i++) if (a[i] > a[b]) b = i; return b; };

function dense(probabilities, nVocab) {
  const lp = new Float64Array(nVocab).fill(-Infinity);
  for (const [id, p] of probabilities) lp[id] = Math.log(p);
  return lp;
}

// llama.cpp's next-token log-probabilities after each token of `tokens`
// (from an empty sequence each call), as dense arrays. With `greedy` n, n more tokens follow, each llama.cpp's argmax (their
// log-probabilities appended too); returns {lps, tokens: the greedy ones}.
export async function llamaLogProbs(seq, tokens, nVocab, greedy = 0) {
  await seq.clearHistory();
  const gen = { generateNext: { probabilities: true, options: SAMPLING } };
  const feed = async (ts) => (await seq.controlledEvaluate(ts.map((t) => [t, gen]))).map((r) => dense(r.next.probabilities, nVocab));
  const lps = await feed(tokens), more = [];
  for (let i = 0; i < greedy; i++) {
    more.push(argmax(lps.at(-1)));
    if (i + 1 < greedy) lps.push(...await feed([more.at(-1)]));
  }
  return { lps, tokens: more };
}

// the top-2 gap of log-probabilities (= of logits) over the finite range
function tieAt(lp) {
  let a = -Infinity, b = -Infinity, lo = Infinity;
  for (const v of lp) {
    if (v > a) { b = a; a = v; } else if (v > b) b = v;
    if (Number.isFinite(v) && v < lo) lo = v;
  }
  return a - b < TIE_GAP * (a - lo);
}

/**
 * Runs one case: `file` in both engines with a context of nCtx positions.
 * @returns {{name, nCtx, greedyEqual, ties, maxKL, meanKL, positions, greedy: Array}}
 */
export async function crossCheck({ llama, name, file, nCtx, promptList, ourOptions = {} }) {
  const lmodel = await llama.loadModel({ modelPath: file });
  const lctx = await lmodel.createContext({ contextSize: nCtx, sequences: 1 });
  const model = await loadModel(file, { contextLength: nCtx, threads: 1, ...ourOptions });
  try {
    const nVocab = model.info.hparams.nVocab;
    if (lctx.contextSize !== nCtx) throw new Error(`llama.cpp context ${lctx.contextSize}, asked for ${nCtx}`);
    const seq = lctx.getSequence();
    let maxKL = 0, sumKL = 0, positions = 0, ties = 0, greedyEqual = true;
    const greedy = [];
    for (const p of promptList) {
      // teacher forced
      const { lps: ref } = await llamaLogProbs(seq, p, nVocab);
      const ours = (await model.logits(p, { all: true })).map(logSoftmax);
      ref.forEach((r, t) => {
        let kl = 0;
        for (let i = 0; i < nVocab; i++) if (r[i] > -Infinity) kl += Math.exp(r[i]) * (r[i] - ours[t][i]);
        kl = Math.max(0, kl);
        maxKL = Math.max(maxKL, kl); sumKL += kl; positions++;
      });
      // greedy, each engine on its own
      const g = await llamaLogProbs(seq, p, nVocab, GREEDY_TOKENS), go = [...p];
      for (let i = 0; i < GREEDY_TOKENS; i++) go.push(argmax((await model.logits(go)).at(-1)));
      const a = g.tokens, b = go.slice(p.length);
      const first = a.findIndex((v, i) => v !== b[i]);
      let tie = false;
      if (first >= 0) {
        tie = tieAt(g.lps[p.length - 1 + first]);
        if (tie) ties++; else greedyEqual = false;
      }
      greedy.push({ llamaCpp: a, ours: b, firstDifference: first, atTie: tie });
    }
    return { name, nCtx, greedyEqual, ties, maxKL, meanKL: sumKL / positions, positions, greedy };
  } finally {
    await model.dispose();
    await lctx.dispose();
    await lmodel.dispose();
  }
}

export const SHAPE = { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 96, ctx: 4096, vocab: 320 };

export async function xcheck({ llama, tmpDir }) {
  const cases = [];
  const orig = 512;
  for (const type of ['f32', 'f16']) {
    const file = path.join(tmpDir, `phi3-${type}.gguf`);
    makeModel(file, SHAPE, type, 4321, { arch: 'phi3', qkStd: 0.2, outStd: 0.5, ropeOriginalContext: orig });
    const promptList = prompts(3, 24, SHAPE.vocab - 11, 27);
    // a context up to original_context_length: rope_factors_short; past it: rope_factors_long
    cases.push(await crossCheck({ llama, name: `phi3-${type}-short-factors`, file, nCtx: 256, promptList }));
    cases.push(await crossCheck({ llama, name: `phi3-${type}-long-factors`, file, nCtx: 1024, promptList }));
  }
  return { arch: 'phi3', tieGap: TIE_GAP, maxKLAllowed: MAX_KL, cases, ok: cases.every((c) => c.greedyEqual && c.maxKL <= MAX_KL) };
}

export async function runAlone(fn) {
  const { getLlama } = await import('node-llama-cpp');
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-xcheck-'));
  try {
    const r = await fn({ llama, tmpDir });
    console.log(JSON.stringify(r, null, 1));
    process.exitCode = r.ok ? 0 : 1;
  } finally {
    fs.rmSync(tmpDir, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await runAlone(xcheck);
