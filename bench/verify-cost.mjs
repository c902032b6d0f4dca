// The "v" of speculative decoding's cost model (web/scaling.js verifyCostOf):
// what one more token in a batched target pass costs, as a fraction of a
// one-token pass. A cached 60-token prefix, then j new tokens in one pass
// (complete(prefix + j tokens, {maxTokens: 1}): the pass plus one sample);
// medians of --reps, j interleaved. Such a pass computes logits for its
// last token only, a verification pass for all of them (one more classifier
// row a token), so this v is a lower bound of the verification's.
//
//   node bench/verify-cost.mjs [--shape s110m] [--types f16,q4_0] [--reps 7] [--threads 2]
import { model, promptOf, benchArgs, median } from './common.mjs';
import { loadModel } from '../web/index.js';

const args = benchArgs();
const shape = args.shape || 's110m', reps = +(args.reps || 7), threads = +(args.threads || 2);
const js = [1, 2, 3, 5, 9];
console.log(`| model | ${js.map((j) => `${j} tok ms`).join(' | ')} | v (j = ${js.slice(1).join(', ')}) |\n|---|${js.map(() => '---|').join('')}---|`);
for (const type of String(args.types || 'f16,q4_0').split(',')) {
  const m = await loadModel(model(shape, type, () => {}), { threads, contextLength: 512 });
  const ids = await m.tokenize(promptOf(80));
  const prefix = ids.slice(0, 60), t = {};
  for (let r = 0; r < reps; r++)
    for (const j of js) {
      await m.complete(prefix, { maxTokens: 1, temperature: 0 });   // the prefix cached
      const res = await m.complete(prefix.concat(ids.slice(60, 60 + j)), { maxTokens: 1, temperature: 0 });
      if (res.stats.reusedPromptTokens !== 60) throw new Error(`prefix not reused (${res.stats.reusedPromptTokens})`);
      (t[j] ||= []).push(res.stats.prefillMs);
    }
  const one = median(t[1]);
  const v = js.slice(1).map((j) => ((median(t[j]) - one) / (j - 1) / one).toFixed(2));
  console.log(`| ${shape} ${type} | ${js.map((j) => median(t[j]).toFixed(1)).join(' | ')} | ${v.join(', ')} |`);
  await m.dispose();
}
