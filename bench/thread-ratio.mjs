// Decode speed at 1 and 2 threads, measured side by side in one process:
// every engine is loaded once and the runs alternate between them, so a
// shared or busy machine slows them alike; reports medians and the 2/1 ratio.
// On Linux a run during which other processes kept a core more than 10 %
// busy (from /proc/stat less this process's own CPU time) is run again, up
// to 30 times half a second apart: two threads on a 2-core machine shared
// with a compiler measure the compiler, not the engine.
//
//   node bench/thread-ratio.mjs MODEL.gguf [tokens=64] [reps=5] [prompt=8] [label=DIR ...]
//
// Every run prefills the whole prompt (prompt=N tokens, no prefix reuse):
// the prefill speeds are reported too (use a longer prompt for them).
// Each `label=DIR` adds an engine build (DIR/wasmlm.wasm for one thread,
// DIR/wasmlm-mt.wasm for two), e.g. a copy of wasm/ from before a change;
// without any, the build in wasm/ (SIMD128) is measured.
import fs from 'node:fs';
import path from 'node:path';
import { loadModel } from '../web/index.js';
import { root, promptOf, median } from './common.mjs';

const [file, tokArg, repArg, ...rest] = process.argv.slice(2);
if (!file) { console.error('usage: node bench/thread-ratio.mjs MODEL.gguf [tokens] [reps] [prompt=N] [label=DIR ...]'); process.exit(2); }
const maxTokens = +tokArg || 64, reps = +repArg || 5;
const opts = rest.map((b) => b.split('='));
const promptLen = +(opts.find(([k]) => k === 'prompt') || [])[1] || 8;
const builds = opts.filter(([k]) => k !== 'prompt');
const dirs = builds.length ? builds : [['wasm', path.join(root, 'wasm')]];
const prompt = promptOf(promptLen);
const busyTicks = () => {   // CPU time of the whole machine, in USER_HZ ticks (100 per second)
  try {
    const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    return f[0] + f[1] + f[2] + f[5] + f[6] + f[7];   // user nice system irq softirq steal
  } catch { return null; }
};
async function measured(fn) {
  for (let attempt = 0; ; attempt++) {
    const b0 = busyTicks(), u0 = process.cpuUsage(), t0 = performance.now();
    const out = await fn();
    const wall = performance.now() - t0, u = process.cpuUsage(u0), b1 = busyTicks();
    const foreign = b0 == null ? 0 : ((b1 - b0) * 10 - (u.user + u.system) / 1000) / wall;
    if (foreign <= 0.1 || attempt === 30) return { out, foreign };
    await new Promise((r) => setTimeout(r, 500));   // let the other process finish
  }
}

const runs = [];
for (const [label, dir] of dirs) {
  for (const threads of [1, 2]) {
    const wasm = path.join(dir, threads > 1 ? 'wasmlm-mt.wasm' : 'wasmlm.wasm');
    const m = await loadModel(file, { wasm, threads, contextLength: 256 });
    await m.complete(prompt, { maxTokens: 4, temperature: 0, ignoreEos: true });   // warm up
    runs.push({ label, threads, m, tps: [], pre: [], tokens: null });
  }
}
for (let r = 0; r < reps; r++) {
  for (const run of (r & 1 ? [...runs].reverse() : runs)) {
    const { out, foreign } = await measured(() => run.m.complete(prompt, { maxTokens, temperature: 0, ignoreEos: true, reusePrefix: false }));
    if (foreign > 0.1) run.busy = (run.busy || 0) + 1;
    run.tps.push(out.stats.decodeTokensPerSec);
    run.pre.push(out.stats.prefillTokensPerSec);
    if (run.tokens && run.tokens.join() !== out.tokens.join()) throw new Error(`${run.label}/${run.threads}: tokens changed between runs`);
    run.tokens = out.tokens;
  }
}
const ref = runs[0].tokens.join();
for (const run of runs) if (run.tokens.join() !== ref) console.error(`warning: ${run.label}/${run.threads} threads generated other tokens`);
console.log(`${path.basename(file)}: ${promptLen}-token prompt, ${maxTokens} tokens, ${reps} alternating runs, median decode tok/s`);
for (const [label] of dirs) {
  const [one, two] = runs.filter((r) => r.label === label);
  const a = median(one.tps), b = median(two.tps);
  console.log(`  ${label.padEnd(8)} 1 thr ${a.toFixed(2).padStart(7)}  2 thr ${b.toFixed(2).padStart(7)}  ratio ${(b / a).toFixed(3)}` +
    `   (1: ${one.tps.map((x) => x.toFixed(1)).join(' ')} | 2: ${two.tps.map((x) => x.toFixed(1)).join(' ')})` +
    (one.busy || two.busy ? `  [${(one.busy || 0) + (two.busy || 0)} runs on a busy machine]` : ''));
  const pa = median(one.pre), pb = median(two.pre);
  console.log(`  ${''.padEnd(8)} prefill tok/s: 1 thr ${pa.toFixed(1)}  2 thr ${pb.toFixed(1)}  ratio ${(pb / pa).toFixed(3)}`);
}
for (const run of runs) await run.m.dispose();
