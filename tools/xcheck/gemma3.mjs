// Cross-check of gemma3 against llama.cpp (node-llama-cpp) on synthetic files:
// see lib/compare.mjs for the method, the tie rule and the KL limit.
// `node tools/xcheck/gemma3.mjs` prints the result as JSON.
import { crossCheck, prompts, runStandalone } from './lib/compare.mjs';

const SHAPE = { dim: 64, layers: 7, heads: 4, kvHeads: 2, ffn: 128, ctx: 128, vocab: 320 };
export const CASES = [
  // 7 layers: sliding layers 0-4 and 6 (base 10000), global layer 5 (base 1e6)
  { name: 'gemma3-f32-window4', shape: SHAPE, type: 'f32', seed: 21, opts: { embdStd: 0.5, qkStd: 0.2, slidingWindow: 4 } },
  { name: 'gemma3-q4_0-window4', shape: SHAPE, type: 'f32', quant: 'q4_0', seed: 21, opts: { embdStd: 0.5, qkStd: 0.2, slidingWindow: 4 } },
  { name: 'gemma3-f16-k8-window6', shape: SHAPE, type: 'f16', seed: 22, opts: { embdStd: 0.5, qkStd: 0.2, keyLength: 8, valueLength: 8, slidingWindow: 6 } },
];

// prompts: BOS (2) and 19 ids past the control tokens
const PROMPTS = prompts(3, 19, 320, 1000, 6).map((p) => [2, ...p]);

export async function xcheck({ llama, tmpDir } = {}) {
  return crossCheck({ llama, tmpDir, arch: 'gemma3', loadOptions: { contextLength: 128 }, cases: CASES.map((c) => ({ ...c, prompts: PROMPTS, steps: 16 })) });
}

await runStandalone(xcheck, import.meta.url);
