// `llama` against llama.cpp on synthetic files, F32 and F16 (see lib/compare.mjs for the measures).
import { crossCheck, prompts, runStandalone } from './lib/compare.mjs';

const PROMPTS = prompts(3, 12, 512, 7);

export async function xcheck({ llama, tmpDir } = {}) {
  return crossCheck({
    llama, tmpDir, arch: 'llama',
    cases: [...['f32', 'f16'].map((type) => ({ name: 'tiny-' + type, shape: 'tiny', type, seed: 11, opts: { qkStd: 0.2 }, prompts: PROMPTS, steps: 16 })),
      ...['q4_0', 'q4_k_m'].map((quant) => ({ name: 'tiny-' + quant, shape: 'tiny', type: 'f32', quant, seed: 11, opts: { qkStd: 0.2 }, prompts: PROMPTS, steps: 16 }))],
  });
}

await runStandalone(xcheck, import.meta.url);
