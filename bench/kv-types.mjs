// The two cache types side by side (the numbers README gives for kvType):
// one engine with an F32 cache and one with an F16 cache, both loaded once,
// runs alternating between them, medians; prefill and decode (64 greedy
// tokens) after a short and a long prompt, and each engine's wasm memory.
//
//   node [--experimental-wasm-relaxed-simd] bench/kv-types.mjs [shape=s110m] [type=q4_0] [reps=4] [threads=2]
import { loadModel } from '../web/index.js';
import { model, promptOf, median } from './common.mjs';

const arg = Object.fromEntries(process.argv.slice(2).map((a) => a.split('=')));
const shape = arg.shape || 's110m', type = arg.type || 'q4_0', reps = +(arg.reps || 4), threads = +(arg.threads || 2);
const PROMPTS = [128, 1000];
const engines = [];
for (const kvType of ['f32', 'f16']) {
  const m = await loadModel(model(shape, type), { threads, contextLength: 1152, kvType });
  engines.push({ kvType, m, runs: PROMPTS.map(() => ({ pre: [], dec: [] })) });
}
for (const [pi, n] of PROMPTS.entries()) {
  const prompt = promptOf(n);
  for (const e of engines) await e.m.complete(prompt, { maxTokens: 4, temperature: 0 });   // warm-up
  for (let r = 0; r < reps; r++)
    for (const e of engines) {
      const res = await e.m.complete(prompt, { maxTokens: 64, temperature: 0, ignoreEos: true, reusePrefix: false });
      e.runs[pi].pre.push(res.stats.prefillTokensPerSec);
      e.runs[pi].dec.push(res.stats.decodeTokensPerSec);
    }
}
console.log(`${shape} ${type}, ${threads} threads, build ${engines[0].m.simd}, medians of ${reps}, tok/s`);
console.log('| cache | ' + PROMPTS.map((n) => `prefill ${n} | decode after ${n}`).join(' | ') + ' | wasm MB |');
console.log('|---|' + PROMPTS.map(() => '---|---|').join('') + '---|');
for (const e of engines) {
  const mem = await e.m.memory();
  console.log(`| ${e.kvType} | ` + e.runs.map((x) => `${median(x.pre).toFixed(1)} | ${median(x.dec).toFixed(1)}`).join(' | ') + ` | ${(mem.wasmBytes / 1e6).toFixed(0)} |`);
}
for (const e of engines) await e.m.dispose();
