// Inference-time scaling benchmark (part of `make bench`): ratios measured
// side by side in one run, interleaved, medians.
//   best-of-8 wall time / one generation's wall time (same length, s110m Q4_0, 2 threads)
//   a tree-search call growing keep x expand = 2 x 4 = 8 children / a best-of-8 step: time per
//   forward pass (both decode 8 sequences a pass; the tree's share their paths)
//   speculative decoding: F16 target + Q4_0 draft of the same model (random weights, and the trained
//   stories260K inside the same shape; s110m: + Q8_0 too), greedy, speedup at identical output
//   prompt lookup on a repetitive prompt, greedy, speedup at identical output
//
//   node bench/scaling.mjs [--shapes s110m,tl1b] [--best s110m] [--reps 3] [--tokens 64] [--threads 2] [--out scaling] [--only best]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { model, root, scalingTable, scalingWorkloads, benchArgs, median } from './common.mjs';
import { loadModel } from '../web/index.js';

const args = benchArgs();
const reps = +(args.reps || 3);
const N = +(args.tokens || 64);
const threads = +(args.threads || 2);
const shapes = String(args.shapes || 's110m,tl1b').split(',');
const bestShape = String(args.best || 's110m');   // the best-of-8 and tree rows' model (a smaller shape for a smoke run)
const only = args.only ? String(args.only).split(',') : null;   // 'best': only the best-of-8 and tree rows
const log = (...a) => console.error('[scaling]', ...a);
const W = scalingWorkloads(N);
const rows = [];
let build = null;   // the engine build loadModel picked (relaxed SIMD where its probe passes)

async function timed(fn) { const t = performance.now(); const r = await fn(); return [performance.now() - t, r]; }
// Every mode runs once at full length before the measured reps: V8 compiles
// a wasm function with its optimizing tier only once it has run a while, on
// background threads that share the cores with the engine's threads, so a
// mode's first run measures the compiler too (measured here: a mode's first
// full run took up to 1.5x as long as its later runs).

// ---- best-of-8 -------------------------------------------------------------------
{
  const file = model(bestShape, 'q4_0', log);
  const m = await loadModel(file, { threads, contextLength: 1024, maxSequences: 9 });
  build = m.simd;
  const prompt = W.bestPrompt, o = W.bestOptions;
  await m.complete(prompt, o);          // warm up
  await m.bestOfN(prompt, { ...o, n: 8 });
  const one = [], eight = [];
  for (let r = 0; r < reps; r++) {
    one.push((await timed(() => m.complete(prompt, o)))[0]);
    const [ms, res] = await timed(() => m.bestOfN(prompt, { ...o, n: 8 }));
    if (res.candidates.some((c) => c.tokens.length !== N)) throw new Error('best-of-8 candidates of unequal length');
    eight.push(ms);
  }
  const row = { bench: 'best-of-8', model: `${bestShape} Q4_0`, threads, tokens: N, singleMs: median(one), bestOf8Ms: median(eight) };
  row.ratio = row.bestOf8Ms / row.singleMs;
  log(row); rows.push(row);
  // a tree search's second call grows 2 nodes into 4 children each: 8 sequences a pass, N tokens
  // each (a step delimiter that never comes); its time per pass against best-of-8's per step
  const treeO = { ...o, maxTokens: 2 * N, strategy: 'beam', keep: 2, expand: 4, maxSteps: 2, maxTokensPerStep: N, step: W.neverDelimiter };
  await m.treeSearch(prompt, treeO);
  const perBest = [], perTree = [];
  for (let r = 0; r < reps; r++) {
    const b = await m.bestOfN(prompt, { ...o, n: 8 });
    perBest.push(b.stats.decodeMs / b.stats.steps);
    const t = await m.treeSearch(prompt, treeO);
    const call = t.stats.calls[1];
    if (call.nodes !== 8 || t.nodes.some((x) => x.depth === 2 && x.tokens.length !== N)) throw new Error('the tree call did not grow 8 children of N tokens');
    perTree.push(call.decodeMs / call.passes);
  }
  const tree = { bench: 'tree-step', model: `${bestShape} Q4_0`, threads, tokens: N, bestStepMs: median(perBest), treeStepMs: median(perTree) };
  tree.ratio = tree.treeStepMs / tree.bestStepMs;
  log(tree); rows.push(tree);
  await m.dispose();
}
if (only && only.includes('best')) shapes.length = 0;

// ---- speculative decoding: F16 targets with their own Q4_0 (see scalingWorkloads) ----------
for (const sc of W.specCases(shapes)) {
  const target = await loadModel(model(sc.shape, 'f16', log), { threads, contextLength: 512 });
  const draft = await loadModel(model(sc.shape, sc.draft, log), { threads, contextLength: 512 });
  const prompt = sc.prompt, g = W.greedy, k = W.specDraftTokens;
  const r = sc.shape.startsWith('tl1b') ? Math.max(1, Math.min(reps, 2)) : reps;
  await target.complete(prompt, g);
  await target.complete(prompt, { ...g, draft, draftTokens: k });
  const plain = [], spec = [];
  let last = null, same = true;
  for (let i = 0; i < r; i++) {
    const [a, pa] = await timed(() => target.complete(prompt, g));
    const [b, sb] = await timed(() => target.complete(prompt, { ...g, draft, draftTokens: k }));
    plain.push(a); spec.push(b);
    if (pa.tokens.join() !== sb.tokens.join()) same = false;
    last = sb.stats.speculative;
  }
  const row = { bench: 'speculative', model: sc.label, threads, tokens: N, plainMs: median(plain), specMs: median(spec), identical: same, acceptanceRate: last.acceptanceRate, tokensPerPass: last.tokensPerPass,
    ...(sc.target ? { target: sc.target } : {}), draftCost: last.draftCost, verifyCost: last.verifyCost };
  row.speedup = row.plainMs / row.specMs;
  log(row); rows.push(row);
  await target.dispose(); await draft.dispose();
}

// ---- prompt lookup on a repetitive prompt -------------------------------------------------
if (!only) {
  const m = await loadModel(model('s110m', 'f16', log), { threads, contextLength: 512 });
  const prompt = W.lookupPrompt, g = W.greedy, k = W.lookupDraftTokens;
  await m.complete(prompt, g);
  await m.complete(prompt, { ...g, draft: 'lookup', draftTokens: k });
  const plain = [], look = [];
  let same = true, st = null;
  for (let i = 0; i < reps; i++) {
    const [a, pa] = await timed(() => m.complete(prompt, g));
    const [b, lb] = await timed(() => m.complete(prompt, { ...g, draft: 'lookup', draftTokens: k }));
    plain.push(a); look.push(b);
    if (pa.tokens.join() !== lb.tokens.join()) same = false;
    st = lb.stats.speculative;
  }
  const row = { bench: 'prompt-lookup', model: 's110m F16, repetitive prompt', threads, tokens: N, plainMs: median(plain), specMs: median(look), identical: same, acceptanceRate: st.acceptanceRate, tokensPerPass: st.tokensPerPass };
  row.speedup = row.plainMs / row.specMs;
  log(row); rows.push(row);
  await m.dispose();
}

let md = `# Inference-time scaling benchmark\n\n${new Date().toISOString()} · ${os.cpus()[0].model} × ${os.cpus().length} · Node ${process.version}${process.execArgv.length ? ' ' + process.execArgv.join(' ') : ''} · wasm build ${build} · ${threads} threads · medians of ${reps} (tl1b: ${Math.max(1, Math.min(reps, 2))}), interleaved\n\n`;
md += scalingTable(rows);
fs.mkdirSync(path.join(root, 'bench', 'results'), { recursive: true });
fs.writeFileSync(path.join(root, 'bench', 'results', `${args.out || 'scaling'}.json`), JSON.stringify({ machine: { cpu: os.cpus()[0].model, cores: os.cpus().length, node: process.version, nodeFlags: process.execArgv, simd: build }, rows }, null, 2));
fs.writeFileSync(path.join(root, 'bench', 'results', `${args.out || 'scaling'}.md`), md);
console.log(md);
