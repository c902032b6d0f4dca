// Cross-check of gemma3 against llama.cpp (node-llama-cpp) on synthetic files:
// see gemma-common.mjs for the method, the tie rule and the KL limit.
// `node tools/xcheck/gemma3.mjs` prints the result as JSON.
import { fileURLToPath } from 'node:url';
import { runArch } from './gemma-common.mjs';

const SHAPE = { dim: 64, layers: 7, heads: 4, kvHeads: 2, ffn: 128, ctx: 128, vocab: 320 };
export const CASES = [
  // 7 layers: sliding layers 0-4 and 6 (base 10000), global layer 5 (base 1e6)
  { name: 'gemma3-f32-window4', shape: SHAPE, type: 'f32', seed: 21, opts: { arch: 'gemma3', embdStd: 0.5, qkStd: 0.2, slidingWindow: 4 } },
  { name: 'gemma3-f16-k8-window6', shape: SHAPE, type: 'f16', seed: 22, opts: { arch: 'gemma3', embdStd: 0.5, qkStd: 0.2, keyLength: 8, valueLength: 8, slidingWindow: 6 } },
];

export async function xcheck({ llama, tmpDir } = {}) { return runArch('gemma3', CASES, { llama, tmpDir }); }

if (process.argv[1] === fileURLToPath(import.meta.url)) console.log(JSON.stringify(await xcheck(), null, 2));
