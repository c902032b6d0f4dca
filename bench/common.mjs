// Shared by bench/bench.mjs and bench/browser-bench.mjs: the synthetic model
// files (generated on demand into bench/cache/, never committed) and the
// benchmark prompt.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { makeModel } from '../models/make-model.js';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const cache = path.join(root, 'bench', 'cache');
export const native = path.join(root, 'build', 'wasmlm-native');

/** Path of the synthetic model `shape` in `type`: F16 generated, other types quantized from it. */
export function model(shape, type, log = console.error) {
  fs.mkdirSync(cache, { recursive: true });
  const f16 = path.join(cache, `${shape}_f16.gguf`);
  if (!fs.existsSync(f16)) { log(`generating ${f16}`); makeModel(f16, shape, 'f16'); }
  if (type === 'f16') return f16;
  const out = path.join(cache, `${shape}_${type}.gguf`);
  if (!fs.existsSync(out)) {
    if (!fs.existsSync(native)) throw new Error(`${out} is missing and build/wasmlm-native is not built (run make)`);
    log(`quantizing ${out}`);
    execFileSync(native, ['quantize', f16, out, type], { stdio: 'ignore' });
  }
  return out;
}

/** A prompt of n tokens (BOS included): two-letter words are single pieces in the synthetic vocab. */
export function promptOf(n) {
  const L = 'abcdefghijklmnopqrstuvwxyz';
  const w = [];
  for (let i = 0; i < n - 1; i++) w.push(L[(i * 7) % 26] + L[(i * 11 + 3) % 26]);
  return w.join(' ');
}
