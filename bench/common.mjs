// Shared by the benchmarks in bench/: the synthetic model files (generated
// on demand into bench/cache/, never committed), the benchmark prompt, and
// the scaling benchmarks' workloads and table, the command line's flags, medians.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { makeModel } from '../models/make-model.js';
import { embedTrained } from './embed-trained.mjs';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const cache = path.join(root, 'bench', 'cache');
export const native = path.join(root, 'build', 'wasmlm-native');
/** The trained model that bench/embed-trained.mjs places in benchmark shapes (WLM_SHARED as in the tests). */
export const trained = path.join(path.resolve(root, process.env.WLM_SHARED || '../shared'), 'models', 'stories260K.gguf');

/** The command line's `--name value` pairs as an object (a flag with no value: true). */
export function benchArgs(argv = process.argv.slice(2)) {
  return Object.fromEntries(argv.map((a, i, all) => a.startsWith('--') ? [a.slice(2), all[i + 1] && !all[i + 1].startsWith('--') ? all[i + 1] : true] : null).filter(Boolean));
}

/** The median of the finite numbers in `xs` (the upper one of an even count), null when there are none. */
export function median(xs) {
  const s = xs.filter((x) => x != null && Number.isFinite(x)).sort((a, b) => a - b);
  return s.length ? s[s.length >> 1] : null;
}

/** Path of the synthetic model `shape` in `type`: F16 generated, other types
 * quantized from it. `shape`-st (s110m-st, tl1b-st): the trained stories260K
 * inside that shape (bench/embed-trained.mjs), else random weights. */
export function model(shape, type, log = console.error) {
  fs.mkdirSync(cache, { recursive: true });
  const f16 = path.join(cache, `${shape}_f16.gguf`);
  if (!fs.existsSync(f16)) {
    log(`generating ${f16}`);
    if (shape.endsWith('-st')) embedTrained(trained, f16, shape.slice(0, -3), 'f16');
    else makeModel(f16, shape, 'f16');
  }
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

/** The inference-time scaling benchmarks' workloads (bench/scaling.mjs in
 * Node, bench/browser-scaling.mjs in Chromium: the same in both), n tokens
 * generated: best-of-8 with its sampling options, the greedy options,
 * speculative decoding's prompt and prompt lookup's repetitive one. */
export function scalingWorkloads(n) {
  return {
    bestPrompt: promptOf(16),
    bestOptions: { maxTokens: n, temperature: 0.8, topK: 40, topP: 0.95, minP: 0, repeatPenalty: 1, ignoreEos: true, seed: 7 },
    greedy: { temperature: 0, repeatPenalty: 1, ignoreEos: true, maxTokens: n },
    specDraftTokens: 4,
    // Speculative decoding's pairs for the given target shapes: the F16 model
    // with its own Q4_0 as draft, with random weights (`promptOf` prompts) and
    // with the trained stories260K inside the same shape (`-st`, a story
    // prompt); for s110m with random weights its Q8_0 as well, which agrees
    // with the F16 model far more often (0.8 against 0.13-0.57), to show what
    // a draft that is often right gains (no target of its own). With random
    // weights a Q4_0 draft agrees on too few tokens to pay (see README); the
    // trained network decodes at its shape's speed but agrees like a trained
    // pair (0.69).
    specCases: (shapes) => shapes.flatMap((shape) => [
      { shape, draft: 'q4_0', prompt: promptOf(32), label: `${shape} F16 + Q4_0 draft` },
      ...(shape === 's110m' ? [{ shape, draft: 'q8_0', prompt: promptOf(32), label: `${shape} F16 + Q8_0 draft`, target: '(none)' }] : []),
      { shape: `${shape}-st`, draft: 'q4_0', prompt: 'Once upon a time, there was a little girl named Lily. She loved to',
        label: `${shape} shape, trained (stories260K inside): F16 + Q4_0 draft` },
    ]),
    // a tree search's step delimiter that the synthetic vocabulary never produces: steps end at their token budget
    neverDelimiter: '<never a delimiter \u0007>',
    lookupPrompt: Array(6).fill(promptOf(12)).join(' '),
    lookupDraftTokens: 8,
  };
}

/** The markdown table of the scaling benchmarks' result rows. */
export function scalingTable(rows) {
  const f = (x, d = 2) => Number(x).toFixed(d);
  let md = '| bench | model | tokens | baseline ms | scaled ms | ratio | target | notes |\n|---|---|---|---|---|---|---|---|\n';
  for (const r of rows) {
    if (r.bench === 'tree-step') md += `| tree-search step / best-of-8 step | ${r.model} | ${r.tokens} | ${f(r.bestStepMs)} | ${f(r.treeStepMs)} | ${f(r.ratio)}× | ≈ 1× | ms per forward pass of 8 sequences: 2 nodes x 4 children sharing their paths vs 8 candidates |\n`;
    else if (r.bench === 'best-of-8') md += `| best-of-8 / single | ${r.model} | ${r.tokens} | ${f(r.singleMs, 0)} | ${f(r.bestOf8Ms, 0)} | ${f(r.ratio)}× | ≤ 2.5× | one batch of 8 forked sequences |\n`;
    else md += `| ${r.bench} speedup | ${r.model} | ${r.tokens} | ${f(r.plainMs, 0)} | ${f(r.specMs, 0)} | ${f(r.speedup)}× | ${r.target ?? '≥ 1.5×'} | output identical: ${r.identical ? 'yes' : 'NO'}; acceptance ${f(r.acceptanceRate)}, ${f(r.tokensPerPass)} tokens/pass |\n`;
  }
  return md;
}
