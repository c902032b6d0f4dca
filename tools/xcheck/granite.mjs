// granite against llama.cpp: embedding, residual, attention and logit
// multipliers (granite.embedding_scale, residual_scale, attention.scale,
// logit_scale; see lib/compare.mjs for the measures).
import { crossCheck, runStandalone } from './lib/compare.mjs';

const SHAPE = { dim: 128, layers: 4, heads: 4, kvHeads: 2, ffn: 256, ctx: 256, vocab: 512 };
const PROMPTS = [[17, 300, 42, 99, 256, 7, 123, 88], [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16], [400, 33]];

export async function xcheck({ llama, tmpDir } = {}) {
  return crossCheck({
    llama, tmpDir, arch: 'granite',
    cases: [
      { name: 'f32-default-scales', shape: SHAPE, type: 'f32', seed: 31, opts: { qkStd: 0.2, outStd: 0.4 }, prompts: PROMPTS, steps: 16 },
      { name: 'q4_k_m-default-scales', shape: SHAPE, type: 'f32', quant: 'q4_k_m', seed: 31, opts: { qkStd: 0.2, outStd: 0.4 }, prompts: PROMPTS, steps: 16 },
      { name: 'f16-granite3-like', shape: SHAPE, type: 'f16', seed: 32,
        opts: { qkStd: 0.2, outStd: 0.4, graniteScales: { embedding: 12, residual: 0.22, attention: 0.0625, logit: 0.5 } }, prompts: PROMPTS, steps: 16 },
    ],
  });
}

await runStandalone(xcheck, import.meta.url);
