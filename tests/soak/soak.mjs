#!/usr/bin/env node
// Soak: N calls back to back in one process on stories260K with varied
// options (temperature, top-k/p, min-p, penalties, seeds, lengths, stop
// strings) over two models at once (1 and 2 threads), through every call
// kind: generate() streams, complete(), streams aborted mid-way, bestOfN,
// beamSearch, prompt-lookup drafting, chatComplete, nextTokenDistribution,
// tokenize/detokenize (the batched kinds on the 1-thread model: the other
// slides). Each kind runs once at its largest size before the loop, so the
// context re-plans happen in the warm-up. After each call it records the
// wasm memory size and the engine's bytes in use of both models and the
// process RSS and heap;
// every PROBE generations a fixed-seed probe runs on both models and must
// equal the first probe token for token.
//
//   node --expose-gc tests/soak/soak.mjs [N=1000] [--out build/soak]
//
// Writes <out>.csv (one row per generation) and <out>-summary.json, prints a
// summary and exits non-zero when memory grows after warm-up or a probe
// drifts. Assertions: wasm memory size constant after warm-up (wasm memory
// never shrinks, so any leak shows as growth); engine bytes in use never
// above their warm-up maximum; RSS (sampled after a forced GC)
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
// RSS settles about 35 MB above its warm-up value (docs/hardening.md, Soak)
const RSS_SLACK_MB = Number(process.env.SOAK_RSS_SLACK_MB || 64);

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
const rss0 = (gc(), process.memoryUsage().rss);
const t0 = Date.now();
let drift = 0, totalTokens = 0;
const TEMPLATE = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}";
const short = (o, max) => ({ ...o, maxTokens: Math.min(o.maxTokens, max) });
// each call kind: (model, prompt, options, big) -> tokens generated; `batched` kinds need onFull 'error'
const KINDS = {
  generate: async (m, p, o) => { let n = 0; for await (const c of m.generate(p, o)) if (c.token >= 0) n++; return n; },
  complete: async (m, p, o) => (await m.complete(p, o)).tokens.length,
  abort: async (m, p, o) => {
    const ac = new AbortController();
    let n = 0;
    const stopAt = 1 + Math.floor(rnd() * 20);
    try {
      for await (const c of m.generate(p, { ...o, maxTokens: 400, ignoreEos: true, signal: ac.signal })) if (c.token >= 0 && ++n === stopAt) ac.abort();
    } catch (e) { if (e.name !== 'AbortError') throw e; }
    return n;
  },
  chat: async (m, p, o) => (await m.chatComplete([{ role: 'user', content: p || 'hi' }], { ...short(o, 60), template: TEMPLATE })).tokens.length,
  distribution: async (m, p, o, big) => { await m.nextTokenDistribution(p, { topN: big ? 40 : 1 + Math.floor(rnd() * 40) }); return 0; },
  tokens: async (m, p) => { const ids = await m.tokenize(p + ' ' + pick(PROMPTS)); await m.detokenize(ids); return 0; },
  bestOfN: async (m, p, o, big) => (await m.bestOfN(p, { ...short(o, 40), n: big ? 8 : 2 + Math.floor(rnd() * 7) })).candidates.reduce((a, c) => a + c.tokens.length, 0),
  beamSearch: async (m, p, o, big) => (await m.beamSearch(p, { beams: big ? 4 : 1 + Math.floor(rnd() * 4), maxTokens: 1 + Math.floor(rnd() * 30) })).beams[0].tokens.length,
  lookup: async (m, p, o) => (await m.complete(p + ' ' + p, { ...short(o, 80), draft: 'lookup' })).tokens.length,
};
const BATCHED = new Set(['bestOfN', 'beamSearch', 'lookup']);
// SOAK_KINDS=a,b limits the loop to some kinds (to find which one a memory trend comes from)
const kindNames = process.env.SOAK_KINDS ? process.env.SOAK_KINDS.split(',') : Object.keys(KINDS);
const LONGEST = PROMPTS.reduce((a, b) => (b.length > a.length ? b : a));
for (const k of kindNames) {
  for (const m of BATCHED.has(k) ? [models[0]] : models) await KINDS[k](m, LONGEST, { ...PROBE_OPTS[0] }, true);
}
const engine0 = [];
const byKind = {};
for (let i = 0; i < N; i++) {
  let mi = i % 2, kind = pick(kindNames);
  if (BATCHED.has(kind)) mi = 0;
  const m = models[mi], o = options(), prompt = pick(PROMPTS);
  const tokens = await KINDS[kind](m, prompt, o, false);
  byKind[kind] = (byKind[kind] || 0) + 1;
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
  rows.push({ i: i + 1, model: mi, kind, tokens, wasm0: mem[0].wasmBytes, wasm1: mem[1].wasmBytes, engine0: mem[0].engineBytes, engine1: mem[1].engineBytes,
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
  calls: N, byKind, tokens: totalTokens, seconds: (Date.now() - t0) / 1000, warmup: WARMUP, probeEvery: PROBE,
  probes: Math.floor(N / PROBE), probeDrifts: drift,
  wasmBytes: { afterWarmup: [w.wasm0, w.wasm1], end: [last.wasm0, last.wasm1], max: [Math.max(...rows.map((r) => r.wasm0)), Math.max(...rows.map((r) => r.wasm1))] },
  engineBytes: { first: engine0, distinct: [new Set(rows.slice(WARMUP).map((r) => r.engine0)).size, new Set(rows.slice(WARMUP).map((r) => r.engine1)).size] },
  rssMB0: +(rss0 / 2 ** 20).toFixed(1),
  rssMB: { afterWarmup: +(rssWarm / 2 ** 20).toFixed(1), end: +(rssEnd / 2 ** 20).toFixed(1), max: +(maxRss / 2 ** 20).toFixed(1),
    secondHalfSlopeKBPerGen: +(slope / 1024).toFixed(2) },
};
const problems = [];
if (drift) problems.push(`${drift} fixed-seed probes drifted`);
if (last.wasm0 !== w.wasm0 || last.wasm1 !== w.wasm1 || summary.wasmBytes.max[0] !== w.wasm0 || summary.wasmBytes.max[1] !== w.wasm1)
  problems.push(`wasm memory grew after warm-up: ${w.wasm0}/${w.wasm1} -> max ${summary.wasmBytes.max}`);
// buffers sized on demand (token, history, distribution rows, drafting state)
// may move between their warm-up sizes; a new high after the warm-up is a leak
for (const k of ['engine0', 'engine1']) {
  const warm = Math.max(...rows.slice(0, WARMUP).map((r) => r[k])), after = Math.max(...rows.slice(WARMUP).map((r) => r[k]));
  if (after > warm) problems.push(`engine bytes in use of ${k === 'engine0' ? 'model 0' : 'model 1'} reached ${after} after the warm-up (max ${warm} before)`);
}
if (rssEnd - rssWarm > RSS_SLACK_MB * 2 ** 20) problems.push(`RSS grew ${((rssEnd - rssWarm) / 2 ** 20).toFixed(1)} MB after warm-up (limit ${RSS_SLACK_MB})`);
summary.ok = problems.length === 0;
summary.problems = problems;
fs.writeFileSync(`${OUT}-summary.json`, JSON.stringify(summary, null, 2) + '\n');
console.log(`soak: ${N} calls (${Object.entries(byKind).map(([k, v]) => `${k} ${v}`).join(', ')}), ${totalTokens} tokens in ${summary.seconds.toFixed(1)} s; probes ${summary.probes} (drifts ${drift}); ` +
  `wasm ${w.wasm0}/${w.wasm1} -> ${last.wasm0}/${last.wasm1} bytes; RSS at start ${summary.rssMB0}, ${summary.rssMB.afterWarmup} -> ${summary.rssMB.end} MB ` +
  `(max ${summary.rssMB.max}, 2nd-half slope ${summary.rssMB.secondHalfSlopeKBPerGen} KB/gen); curve: ${path.relative(ROOT, OUT)}.csv`);
if (problems.length) { console.error('soak FAILED: ' + problems.join('; ')); process.exit(1); }
