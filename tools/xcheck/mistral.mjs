// Cross-check of Mistral-style sliding-window attention on the llama
// architecture (llama.attention.sliding_window = W: each query sees the last
// W positions, itself included) against llama.cpp (node-llama-cpp).
// The llama.cpp that node-llama-cpp 3.21.1 bundles does not apply
// llama.attention.sliding_window: it runs full attention on llama files
// (and on phi3 files with phi3.attention.sliding_window). So llama.cpp can
// only vouch for what a window does not cut:
//   - cases: a file whose window (64) is longer than prompt + greedy tokens
//     (24 + 16): the key is read and nothing changes; greedy and
//     teacher-forced KL (lib/compare.mjs), plus a Q4_0 copy;
//   - windowCut: a window of 8 over 24-token prompts: KL(llama.cpp || ours)
//     over the first 8 positions (must be as small), and from position 8
//     on (large: llama.cpp's full attention against our window; reported,
//     not judged). What the window does past W is checked against the
//     double-precision reference in tests/js/arch.test.mjs.
// Export: xcheck({llama, tmpDir}) -> {arch, cases, ok}; `node tools/xcheck/mistral.mjs`
// prints the result as JSON.
import path from 'node:path';
import { makeModel } from '../../models/make-model.js';
import { loadModel } from '../../web/index.js';
import { crossCheck, llamaRows, logSoftmax, klOf, prompts, runStandalone, MAX_KL } from './lib/compare.mjs';

const SHAPE = { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 96, ctx: 4096, vocab: 320 };
export const WINDOW = 8;

export async function xcheck({ llama, tmpDir }) {
  const promptList = prompts(3, 24, SHAPE.vocab, 31);
  const base = { shape: SHAPE, seed: 4321, opts: { slidingWindow: 64, qkStd: 0.2, outStd: 0.5 }, prompts: promptList, steps: 16 };
  const r = await crossCheck({ llama, tmpDir, arch: 'llama', loadOptions: { threads: 1 }, cases: [
    { ...base, name: 'llama-swa64-f32', type: 'f32' },
    { ...base, name: 'llama-swa64-f16', type: 'f16' },
    { ...base, name: 'llama-swa64-q4_0', type: 'f32', quant: 'q4_0' },
  ] });
  const file = path.join(tmpDir, `mistral-swa${WINDOW}.gguf`);
  makeModel(file, SHAPE, 'f32', 4321, { arch: 'llama', slidingWindow: WINDOW, qkStd: 0.2, outStd: 0.5 });
  const windowCut = await windowCutKL(llama, file, promptList);
  return { ...r, arch: 'llama (sliding window)', windowCut, ok: r.ok && windowCut.maxKLBeforeWindow <= MAX_KL };
}

async function windowCutKL(llama, file, promptList) {
  const model = await loadModel(file, { contextLength: 256, threads: 1 });
  try {
    let before = 0, after = 0;
    for (const prompt of promptList) {
      const ref = await llamaRows(llama, file, prompt, model.info.hparams.nVocab);
      const ours = (await model.logits(prompt, { all: true })).map(logSoftmax);
      ref.forEach((p, t) => {
        const k = klOf(p, ours[t]);
        if (t < WINDOW) before = Math.max(before, k); else after = Math.max(after, k);
      });
    }
    return { window: WINDOW, note: 'llama.cpp applies no sliding window on llama files', maxKLBeforeWindow: before, maxKLFromWindow: after };
  } finally {
    await model.dispose();
  }
}

await runStandalone(xcheck, import.meta.url);
