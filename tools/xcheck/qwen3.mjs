// qwen3 against llama.cpp: per-head Q/K RMSNorm, NEOX RoPE, head sizes from
// attention.key_length / value_length (see lib/compare.mjs for the measures).
import { crossCheck, runStandalone } from './lib/compare.mjs';

const SHAPE = { dim: 128, layers: 4, heads: 4, kvHeads: 2, ffn: 256, ctx: 256, vocab: 512 };
const PROMPTS = [[17, 300, 42, 99, 256, 7, 123, 88], [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16], [400, 33]];

export async function xcheck({ llama, tmpDir } = {}) {
  return crossCheck({
    llama, tmpDir, arch: 'qwen3',
    cases: [
      { name: 'f32-k32', shape: SHAPE, type: 'f32', seed: 11, opts: { qkStd: 0.2, outStd: 0.2 }, prompts: PROMPTS, steps: 16 },
      { name: 'q4_k_m', shape: SHAPE, type: 'f32', quant: 'q4_k_m', seed: 11, opts: { qkStd: 0.2, outStd: 0.2 }, prompts: PROMPTS, steps: 16 },
      { name: 'f16-k48', shape: SHAPE, type: 'f16', seed: 12, opts: { qkStd: 0.2, outStd: 0.2, keyLength: 48, valueLength: 48 }, prompts: PROMPTS, steps: 16 },
    ],
  });
}

await runStandalone(xcheck, import.meta.url);
