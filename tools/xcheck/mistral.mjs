// Cross-check of Mistral-style sliding-window attention on the llama
// architecture (llama.attention.sliding_window = W: each query sees the last
// W positions, itself included) against llama.cpp (node-llama-cpp).
// The llama.cpp that node-llama-cpp 3.21.1 bundles does not apply
// llama.attention.sliding_window: it runs full attention on llama files
// (and on phi3 files with phi3.attention.sliding_window). So llama.cpp can
// only vouch for what a window does not cut:
//   - cases: a file whose window (64) is longer than prompt + greedy tokens
//     (24 + 16): the key is read and nothing changes; greedy and
//     teacher-forced KL as in phi3.mjs (crossCheck);
//   - windowCut: a window of 8 over 24-token prompts: KL(llama.cpp || ours)
//     over the first 8 positions (must be as small), and from position 8
//     on (large: llama.cpp's full attention against our window; reported,
//     not judged). What the window does past W is checked against the
//     double-precision reference in tests/js/arch.test.mjs.
// Export: xcheck({llama, tmpDir}) -> {arch, cases, ok}; `node tools/xcheck/mistral.mjs`
// prints the result as JSON.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeModel } from '../../models/make-model.js';
import { loadModel } from '../../web/index.js';
import { crossCheck, llamaLogProbs, prompts, runAlone, TIE_GAP, MAX_KL } from './phi3.mjs';

const SHAPE = { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 96, ctx: 4096, vocab: 320 };
export const WINDOW = 8;

export async function xcheck({ llama, tmpDir }) {
  const cases = [];
  const promptList = prompts(3, 24, SHAPE.vocab, 31);
  for (const type of ['f32', 'f16']) {
    const file = path.join(tmpDir, `mistral-swa64-${type}.gguf`);
    makeModel(file, SHAPE, type, 4321, { arch: 'llama', slidingWindow: 64, qkStd: 0.2, outStd: 0.5 });
    cases.push({ window: 64, ...await crossCheck({ llama, name: `llama-swa64-${type}`, file, nCtx: 256, promptList }) });
  }
  const file = path.join(tmpDir, `mistral-swa${WINDOW}.gguf`);
  makeModel(file, SHAPE, 'f32', 4321, { arch: 'llama', slidingWindow: WINDOW, qkStd: 0.2, outStd: 0.5 });
  const windowCut = await windowCutKL(llama, file, promptList);
  return { arch: 'llama (sliding window)', tieGap: TIE_GAP, maxKLAllowed: MAX_KL, cases, windowCut,
    ok: cases.every((c) => c.greedyEqual && c.maxKL <= MAX_KL) && windowCut.maxKLBeforeWindow <= MAX_KL };
}

async function windowCutKL(llama, file, promptList) {
  const lmodel = await llama.loadModel({ modelPath: file });
  const lctx = await lmodel.createContext({ contextSize: 256, sequences: 1 });
  const model = await loadModel(file, { contextLength: 256, threads: 1 });
  try {
    const seq = lctx.getSequence();
    let before = 0, after = 0;
    for (const prompt of promptList) {
      const { lps: ref } = await llamaLogProbs(seq, prompt, model.info.hparams.nVocab);
      const ours = await model.logits(prompt, { all: true });
      ref.forEach((r, t) => {
        const o = ours[t];
        let mx = -Infinity; for (const v of o) mx = Math.max(mx, v);
        let z = 0; for (const v of o) z += Math.exp(v - mx);
        const lz = Math.log(z) + mx;
        let k = 0; r.forEach((v, i) => { if (v > -Infinity) k += Math.exp(v) * (v - (o[i] - lz)); });
        if (t < WINDOW) before = Math.max(before, k); else after = Math.max(after, k);
      });
    }
    return { window: WINDOW, note: 'llama.cpp applies no sliding window on llama files', maxKLBeforeWindow: before, maxKLFromWindow: after };
  } finally {
    await model.dispose(); await lctx.dispose(); await lmodel.dispose();
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await runAlone(xcheck);
