// make xcheck: the `llama` architecture against llama.cpp on synthetic files
// (tools/xcheck/common.mjs): F32 and F16, greedy tokens and teacher-forced KL.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeModel } from '../../models/make-model.js';
import { crossCheck, idPrompts } from './common.mjs';

export async function xcheck({ llama, tmpDir }) {
  const cases = [];
  for (const type of ['f32', 'f16']) {
    const file = path.join(tmpDir, 'llama-' + type + '.gguf');
    makeModel(file, 'tiny', type, 11, { arch: 'llama', qkStd: 0.2 });
    cases.push(await crossCheck(llama, file, await idPrompts(file), { name: 'llama tiny ' + type }));
  }
  return { arch: 'llama', cases };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { runOne } = await import('../xcheck.mjs');
  console.log(JSON.stringify(await runOne(xcheck), null, 1));
}
