#!/usr/bin/env node
// Soak: N generations back to back in one process on stories260K with varied
// options (temperature, top-k/p, min-p, penalties, seeds, lengths, stop
// strings, streaming and complete()) over two models at once (1 and 2
// threads). After each generation it records the wasm memory size and the
// engine's allocation count of both models and the process RSS and heap;
// every PROBE generations a fixed-seed probe runs on both models and must
// equal the first probe token for token.
//
//   node --expose-gc tests/soak/soak.mjs [N=1000] [--out build/soak]
//
// Writes <out>.csv (one row per generation) and <out>-summary.json, prints a
// summary and exits non-zero when memory grows after warm-up or a probe
// drifts. Assertions: wasm memory size constant after warm-up (wasm memory
// never shrinks, so any leak shows as growth); engine bytes in use back to
// the same value after every generation; RSS (sampled after a forced GC)
// grows by less than RSS_SLACK_MB from the end of warm-up to the end.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadModel } from '../../web/index.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const args = process.argv.slice(2);
const N = Number(args.find((a) => /^\d+$/.test(a)) || 1000);
const outIdx = args.indexOf('--out');
const OUT = path.resolve(ROOT, outIdx >= 0 ? args[outIdx + 1] : 'build/soak');
const SHARED = path.resolve(ROOT, process.env.WLM_SHARED || '../shared');
const MODEL = path.join(SHARED, 'models', 'stories260K.gguf');
const PROBE = Math.max(10, Math.min(100, Math.floor(N / 10)));
const WARMUP = Math.max(10, Math.floor(N / 10));
const RSS_SLACK_MB = Number(process.env.SOAK_RSS_SLACK_MB || 24);

// deterministic option generator (xorshift32)
let s = 0x9e3779b9;
const rnd = () => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s / 4294967296; };
const pick = (a) => a[Math.floor(rnd() * a.length)];
const PROMPTS = ['Once upon a time', 'The little dog', 'Lily wanted to', '', 'One day, a big bear', 'Tom and Sue played with the ball. Then'];
function options() {
  const o = {
    temperature: pick([0, 0.3, 0.8, 1.0, 1.5]), topK: pick([0, 1, 5, 40]), topP: pick([1, 0.95, 0.5]), minP: pick([0, 0.05, 0.2]),
    repeatPenalty: pick([1, 1.1, 1.3]), repeatLastN: pick([0, 16, 64]), seed: Math.floor(rnd() * 2 ** 32), maxTokens: 1 + Math.floor(rnd() * 160),
    ignoreEos: rnd() < 0.5,
  };
  if (rnd() < 0.15) o.stop = [pick(['.', ' the', '\n', 'Lily'])];
  return o;
}
const PROBE_OPTS = [
  { temperature: 0.8, seed: 42, maxTokens: 60, ignoreEos: true },
  { temperature: 0, repeatPenalty: 1, maxTokens: 60, ignoreEos: true },
];

const gc = globalThis.gc || (() => {});
const models = [await loadModel(MODEL, { threads: 1, contextLength: 256 }), await loadModel(MODEL, { threads: 2, contextLength: 192, onFull: 'slide', nKeep: 4 })];
const probe = async () => Promise.all(models.flatMap((m) => PROBE_OPTS.map((o) => m.complete('Once upon a time', o).then((r) => r.tokens.join(',')))));
const reference = await probe();
const rows = [];
const t0 = Date.now();
let drift = 0, totalTokens = 0;
const engine0 = [];
for (let i = 0; i < N; i++) {
  const mi = i % 2, m = models[mi], o = options(), prompt = pick(PROMPTS);
  let tokens;
  if (rnd() < 0.5) {
    tokens = 0;
    for await (const c of m.generate(prompt, o)) { if (c.token >= 0) tokens++; }
  } else tokens = (await m.complete(prompt, o)).tokens.length;
  totalTokens += tokens;
  if (i % PROBE === PROBE - 1) {
    const p = await probe();
    if (p.join('|') !== reference.join('|')) { drift++; console.error(`soak: fixed-seed probe drifted after generation ${i + 1}`); }
  }
  const sampled = i % 10 === 9;
  if (sampled) gc();
  const mem = await Promise.all(models.map((x) => x.memory()));
  if (i === 0) mem.forEach((x, k) => { engine0[k] = x.engineBytes; });
  const pm = process.memoryUsage();
  rows.push({ i: i + 1, model: mi, tokens, wasm0: mem[0].wasmBytes, wasm1: mem[1].wasmBytes, engine0: mem[0].engineBytes, engine1: mem[1].engineBytes,
    rss: pm.rss, heap: pm.heapUsed, gc: sampled ? 1 : 0, ms: Date.now() - t0 });
}
await Promise.all(models.map((m) => m.dispose()));

fs.mkdirSync(path.dirname(OUT), { recursive: true });
const cols = Object.keys(rows[0]);
fs.writeFileSync(`${OUT}.csv`, [cols.join(','), ...rows.map((r) => cols.map((c) => r[c]).join(','))].join('\n') + '\n');
const w = rows[WARMUP - 1], last = rows[rows.length - 1];
const gcRows = rows.filter((r) => r.gc && r.i >= WARMUP);
const rssWarm = (gcRows[0] || w).rss, rssEnd = (gcRows[gcRows.length - 1] || last).rss;
const maxRss = Math.max(...gcRows.map((r) => r.rss));
const half = gcRows.slice(Math.floor(gcRows.length / 2));
// least-squares slope of the gc'd RSS over the second half, bytes per generation
const slope = (() => {
  if (half.length < 3) return 0;
  const mx = half.reduce((a, r) => a + r.i, 0) / half.length, my = half.reduce((a, r) => a + r.rss, 0) / half.length;
  let num = 0, den = 0;
  for (const r of half) { num += (r.i - mx) * (r.rss - my); den += (r.i - mx) ** 2; }
  return num / den;
})();
const summary = {
  generations: N, tokens: totalTokens, seconds: (Date.now() - t0) / 1000, warmup: WARMUP, probeEvery: PROBE,
  probes: Math.floor(N / PROBE), probeDrifts: drift,
  wasmBytes: { afterWarmup: [w.wasm0, w.wasm1], end: [last.wasm0, last.wasm1], max: [Math.max(...rows.map((r) => r.wasm0)), Math.max(...rows.map((r) => r.wasm1))] },
  engineBytes: { first: engine0, distinct: [new Set(rows.map((r) => r.engine0)).size, new Set(rows.map((r) => r.engine1)).size] },
  rssMB: { afterWarmup: +(rssWarm / 2 ** 20).toFixed(1), end: +(rssEnd / 2 ** 20).toFixed(1), max: +(maxRss / 2 ** 20).toFixed(1),
    secondHalfSlopeKBPerGen: +(slope / 1024).toFixed(2) },
};
const problems = [];
if (drift) problems.push(`${drift} fixed-seed probes drifted`);
if (last.wasm0 !== w.wasm0 || last.wasm1 !== w.wasm1 || summary.wasmBytes.max[0] !== w.wasm0 || summary.wasmBytes.max[1] !== w.wasm1)
  problems.push(`wasm memory grew after warm-up: ${w.wasm0}/${w.wasm1} -> max ${summary.wasmBytes.max}`);
if (summary.engineBytes.distinct.some((d) => d !== 1)) problems.push(`engine bytes in use changed between generations (${summary.engineBytes.distinct} distinct values)`);
if (rssEnd - rssWarm > RSS_SLACK_MB * 2 ** 20) problems.push(`RSS grew ${((rssEnd - rssWarm) / 2 ** 20).toFixed(1)} MB after warm-up (limit ${RSS_SLACK_MB})`);
summary.ok = problems.length === 0;
summary.problems = problems;
fs.writeFileSync(`${OUT}-summary.json`, JSON.stringify(summary, null, 2) + '\n');
console.log(`soak: ${N} generations, ${totalTokens} tokens in ${summary.seconds.toFixed(1)} s; probes ${summary.probes} (drifts ${drift}); ` +
  `wasm ${w.wasm0}/${w.wasm1} -> ${last.wasm0}/${last.wasm1} bytes; RSS ${summary.rssMB.afterWarmup} -> ${summary.rssMB.end} MB ` +
  `(max ${summary.rssMB.max}, 2nd-half slope ${summary.rssMB.secondHalfSlopeKBPerGen} KB/gen); curve: ${path.relative(ROOT, OUT)}.csv`);
if (problems.length) { console.error('soak FAILED: ' + problems.join('; ')); process.exit(1); }
