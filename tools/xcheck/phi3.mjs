// phi3 against llama.cpp: fused attn_qkv and gate/up tensors, LongRoPE
// factors and the attention factor, GQA. One synthetic file runs in a context
// up to rope.scaling.original_context_length (the short factors) and past it
// (the long factors); a Q4_0 copy checks the fused tensors' quantized row
// views. Measures: lib/compare.mjs.
import { crossCheck, prompts, runStandalone } from './lib/compare.mjs';

export const SHAPE = { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 96, ctx: 4096, vocab: 320 };
const ORIGINAL_CONTEXT = 512;

export async function xcheck({ llama, tmpDir }) {
  const base = { shape: SHAPE, seed: 4321, opts: { qkStd: 0.2, outStd: 0.5, ropeOriginalContext: ORIGINAL_CONTEXT }, prompts: prompts(3, 24, SHAPE.vocab - 11, 27), steps: 16 };
  const cases = [];
  for (const type of ['f32', 'f16']) {
    cases.push({ ...base, name: `phi3-${type}-short-factors`, type, contextLength: 256 });
    cases.push({ ...base, name: `phi3-${type}-long-factors`, type, contextLength: 1024 });
  }
  cases.push({ ...base, name: 'phi3-q4_0-long-factors', type: 'f32', quant: 'q4_0', contextLength: 1024 });
  return crossCheck({ llama, tmpDir, arch: 'phi3', loadOptions: { threads: 1 }, cases });
}

await runStandalone(xcheck, import.meta.url);
