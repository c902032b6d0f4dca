// Cross-check of gemma2 against llama.cpp (node-llama-cpp) on synthetic files:
// see lib/compare.mjs for the method, the tie rule and the KL limit.
// `node tools/xcheck/gemma2.mjs` prints the result as JSON.
import { crossCheck, prompts, runStandalone } from './lib/compare.mjs';

const SHAPE = { dim: 64, layers: 4, heads: 4, kvHeads: 2, ffn: 128, ctx: 128, vocab: 320 };
export const CASES = [
  // the defaults (caps 50 / 30), window 8 of 20-token prompts
  { name: 'gemma2-f32-window8', shape: SHAPE, type: 'f32', seed: 11, opts: { embdStd: 0.5, qkStd: 0.2, slidingWindow: 8 } },
  // caps small enough to bend scores and logits, window 3
  { name: 'gemma2-f32-caps-window3', shape: SHAPE, type: 'f32', seed: 12, opts: { embdStd: 0.5, qkStd: 0.2, attnSoftcap: 2, finalSoftcap: 3, slidingWindow: 3 } },
  { name: 'gemma2-q4_0-window8', shape: SHAPE, type: 'f32', quant: 'q4_0', seed: 11, opts: { embdStd: 0.5, qkStd: 0.2, slidingWindow: 8 } },
  { name: 'gemma2-f16-k24', shape: SHAPE, type: 'f16', seed: 13, opts: { embdStd: 0.5, qkStd: 0.2, keyLength: 24, valueLength: 24, slidingWindow: 5 } },
];

// prompts: BOS (2) and 19 ids past the control tokens
const PROMPTS = prompts(3, 19, 320, 1000, 6).map((p) => [2, ...p]);

export async function xcheck({ llama, tmpDir } = {}) {
  return crossCheck({ llama, tmpDir, arch: 'gemma2', loadOptions: { contextLength: 128 }, cases: CASES.map((c) => ({ ...c, prompts: PROMPTS, steps: 16 })) });
}

await runStandalone(xcheck, import.meta.url);
