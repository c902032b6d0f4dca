// Cross-check of gemma2 against llama.cpp (node-llama-cpp) on synthetic files:
// see gemma-common.mjs for the method, the tie rule and the KL limit.
// `node tools/xcheck/gemma2.mjs` prints the result as JSON.
import { fileURLToPath } from 'node:url';
import { runArch } from './gemma-common.mjs';

const SHAPE = { dim: 64, layers: 4, heads: 4, kvHeads: 2, ffn: 128, ctx: 128, vocab: 320 };
export const CASES = [
  // the defaults (caps 50 / 30), window 8 of 20-token prompts
  { name: 'gemma2-f32-window8', shape: SHAPE, type: 'f32', seed: 11, opts: { arch: 'gemma2', embdStd: 0.5, qkStd: 0.2, slidingWindow: 8 } },
  // caps small enough to bend scores and logits, window 3
  { name: 'gemma2-f32-caps-window3', shape: SHAPE, type: 'f32', seed: 12, opts: { arch: 'gemma2', embdStd: 0.5, qkStd: 0.2, attnSoftcap: 2, finalSoftcap: 3, slidingWindow: 3 } },
  { name: 'gemma2-f16-k24', shape: SHAPE, type: 'f16', seed: 13, opts: { arch: 'gemma2', embdStd: 0.5, qkStd: 0.2, keyLength: 24, valueLength: 24, slidingWindow: 5 } },
];

export async function xcheck({ llama, tmpDir } = {}) { return runArch('gemma2', CASES, { llama, tmpDir }); }

if (process.argv[1] === fileURLToPath(import.meta.url)) console.log(JSON.stringify(await xcheck(), null, 2));
