// smollm3 against llama.cpp: llama-like, layers 3 and 7 of 8 without RoPE
// (llama.cpp's fixed every-4th-layer rule; no GGUF key). RoPE base 10000 in
// one case so that rotation matters within short prompts, the real 5000000 in
// the other (see lib/compare.mjs for the measures).
import { crossCheck, runStandalone } from './lib/compare.mjs';

const SHAPE = { dim: 128, layers: 8, heads: 4, kvHeads: 2, ffn: 256, ctx: 256, vocab: 512 };
const PROMPTS = [[17, 300, 42, 99, 256, 7, 123, 88], [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16], [400, 33]];

export async function xcheck({ llama, tmpDir } = {}) {
  return crossCheck({
    llama, tmpDir, arch: 'smollm3',
    cases: [
      { name: 'f32-base10000', shape: SHAPE, type: 'f32', seed: 21, opts: { qkStd: 0.2, outStd: 0.2, ropeBase: 10000 }, prompts: PROMPTS, steps: 16 },
      { name: 'q4_k_m-base10000', shape: SHAPE, type: 'f32', quant: 'q4_k_m', seed: 21, opts: { qkStd: 0.2, outStd: 0.2, ropeBase: 10000 }, prompts: PROMPTS, steps: 16 },
      { name: 'f16-base5e6', shape: SHAPE, type: 'f16', seed: 22, opts: { qkStd: 0.2, outStd: 0.2 }, prompts: PROMPTS, steps: 16 },
    ],
  });
}

await runStandalone(xcheck, import.meta.url);
