// An 8B-shape model in the browser through the memory64 (wasm64) build
// (issue #28; not in CI: it writes ~9 GB of files and needs ~6 GB of RAM).
//
// The file: Llama 3 8B's shape (32 layers, 4096 dim, 14336 ffn, 32 heads,
// 8 kv heads, 128256 vocabulary; RoPE base 500000), random weights, Q4_K_M,
// about 4.9 GB - over the 4 GiB of wasm32. Writing it as F16 and quantizing
// would need a 16 GB file in memory, so it is built from one layer: a
// 1-layer model of that shape (models/make-model.js, F16, 2.5 GB) is
// quantized by the engine (`quantize`, in Node) to Q4_K_M, a 1-layer model
// with a small vocabulary to Q4_K (for the layers whose attn_v and ffn_down
// Q4_K_M keeps in Q4_K), and the layer is repeated 32 times, each tensor
// taken in the type Q4_K_M gives it in a 32-layer model (asked of the
// engine's own rule on a tiny 32-layer model, not written down here). The tokenizer is the SentencePiece-style one
// of make-model (its Llama 3 style BPE vocabulary cannot reach 128256
// tokens); it does not change the compute.
//
// Then, in headless Chromium (a crossOriginIsolated page): loadModel(URL)
// with the default memory64 'auto' (so the probe and the file size pick the
// wasm64 build), the load time (fetch from a local server + copy into the
// engine + parse + context), a prompt and greedy tokens (prefill and decode
// tok/s), and the peak memory: the wasm memory and the resident memory of
// every Chromium process (sampled every 200 ms). Before that, the 1-layer
// Q4_K_M file (same matrices, 0.9 GB) runs in the wasm32 and the wasm64
// builds alternately: what the 64-bit build costs on the same work.
// Writes bench/results/memory64-8b-<date>.md and .json. The files are
// deleted at the end unless --keep.
//
//   node bench/memory64-8b.mjs [--dir /tmp/wasmlm-8b] [--threads 2] [--tokens 8]
//        [--context 512] [--reps 3] [--keep] [--host NAME]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { makeModel } from '../models/make-model.js';
import { readGgufHeader } from '../models/gguf-split.js';
import { writeGGUFRaw, T } from '../models/gguf-writer.js';
import { loadModel } from '../web/index.js';
import { launchBench } from './browser/chromium.mjs';
import { benchArgs, median } from './common.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = benchArgs();
const DIR = path.resolve(args.dir || path.join(os.tmpdir(), 'wasmlm-8b'));
const THREADS = +(args.threads || 2);
const TOKENS = +(args.tokens || 8);
const CONTEXT = +(args.context || 512);
const REPS = +(args.reps || 3);
const HOST = args.host || os.hostname();
const SHAPE_8B = { dim: 4096, layers: 32, heads: 32, kvHeads: 8, ffn: 14336, ctx: 8192, vocab: 128256 };
const PROMPT = 'Once upon a time, in a small village at the edge of a great forest, there lived';
const log = (...a) => console.error(`[${new Date().toISOString().slice(11, 19)}]`, ...a);

// ---- disk -------------------------------------------------------------------------

function freeBytes(dir) {
  const out = execFileSync('df', ['-B1', '--output=avail', dir], { encoding: 'utf8' }).trim().split('\n').pop();
  return Number(out);
}
fs.mkdirSync(DIR, { recursive: true });
const NEED = 10e9;
if (freeBytes(DIR) < NEED) { console.error(`${DIR}: ${(freeBytes(DIR) / 1e9).toFixed(1)} GB free, the files need ~${NEED / 1e9} GB (--dir elsewhere)`); process.exit(2); }
const files = {
  rule: path.join(DIR, 'rule-f16.gguf'), ruleQ: path.join(DIR, 'rule-q4km.gguf'),
  one: path.join(DIR, 'one-layer-f16.gguf'), oneQ4KM: path.join(DIR, 'one-layer-q4km.gguf'),
  small: path.join(DIR, 'one-layer-small-vocab-f16.gguf'), oneQ4K: path.join(DIR, 'one-layer-small-vocab-q4k.gguf'),
  big: path.join(DIR, 'llama3-8b-shape-q4_k_m.gguf'),
};

async function quantizeFile(src, type, out) {
  if (fs.existsSync(out)) return;
  const m = await loadModel(src, { threads: 1, contextLength: 16 });
  try { await m.quantize(type, { outPath: out }); } finally { await m.dispose(); }
}

// ---- the file ----------------------------------------------------------------------

async function build8b() {
  if (fs.existsSync(files.big) && fs.existsSync(files.oneQ4KM)) { log(`reusing ${files.big}`); return; }
  // the Q4_K_M rule for 32 layers, from the engine itself
  if (!fs.existsSync(files.rule)) makeModel(files.rule, { dim: 256, layers: 32, heads: 2, kvHeads: 1, ffn: 256, ctx: 256, vocab: 512 }, 'f16', 1);
  await quantizeFile(files.rule, 'q4_k_m', files.ruleQ);
  const ruleType = new Map(readGgufHeader(files.ruleQ).tensors.map((t) => [t.name, t.type]));

  if (!fs.existsSync(files.oneQ4KM)) {
    log('writing the 1-layer model of the 8B shape (F16, ~2.5 GB)');
    if (!fs.existsSync(files.one)) makeModel(files.one, { ...SHAPE_8B, layers: 1 }, 'f16', 8, { ropeBase: 500000 });
    log('quantizing it to Q4_K_M (the engine, in Node)');
    await quantizeFile(files.one, 'q4_k_m', files.oneQ4KM);
    fs.rmSync(files.one);
  }
  if (!fs.existsSync(files.oneQ4K)) {
    log('a 1-layer model with a small vocabulary to Q4_K');
    if (!fs.existsSync(files.small)) makeModel(files.small, { ...SHAPE_8B, layers: 1, vocab: 512 }, 'f16', 9, { ropeBase: 500000 });
    await quantizeFile(files.small, 'q4_k', files.oneQ4K);
    fs.rmSync(files.small);
  }

  const src = { km: readGgufHeader(files.oneQ4KM), k: readGgufHeader(files.oneQ4K) };
  const fds = { km: fs.openSync(files.oneQ4KM, 'r'), k: fs.openSync(files.oneQ4K, 'r') };
  const find = (which, name) => src[which].tensors.find((t) => t.name === name);
  const copy = (which, t) => (emit) => {
    const CH = 16 << 20, buf = Buffer.alloc(CH);
    for (let done = 0; done < t.nbytes;) {
      const n = fs.readSync(fds[which], buf, 0, Math.min(CH, t.nbytes - done), src[which].dataStart + Number(t.offset) + done);
      emit(buf.subarray(0, n)); done += n;
    }
  };
  // a tensor in the type the rule wants: from the Q4_K_M file, else from the Q4_K one
  const pick = (name, srcName) => {
    const want = ruleType.get(name);
    for (const which of ['km', 'k']) {
      const t = find(which, srcName);
      if (t.type === want || want === undefined) return { name, ne: t.ne, type: t.type, nbytes: t.nbytes, write: copy(which, t) };
    }
    throw new Error(`${name}: the rule asks for type ${want}, neither 1-layer file has it`);
  };
  const tensors = [];
  for (const t of src.km.tensors) {
    if (!t.name.startsWith('blk.')) { tensors.push(pick(t.name, t.name)); continue; }
    if (!t.name.startsWith('blk.0.')) throw new Error(`unexpected ${t.name}`);
  }
  const layer = src.km.tensors.filter((t) => t.name.startsWith('blk.0.')).map((t) => t.name.slice('blk.0.'.length));
  for (let l = 0; l < SHAPE_8B.layers; l++) for (const suffix of layer) tensors.push(pick(`blk.${l}.${suffix}`, `blk.0.${suffix}`));
  const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); return b; };
  const str = (s) => { const u = Buffer.from(s); const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(u.length)); return Buffer.concat([b, u]); };
  const kv = src.km.kv.map((e) => e.key === 'llama.block_count' ? { ...e, type: T.U32, raw: u32(SHAPE_8B.layers) }
    : e.key === 'general.name' ? { ...e, type: T.STRING, raw: str('wasmlm-synthetic-llama3-8b-shape') } : e);
  log(`writing ${files.big}`);
  writeGGUFRaw(files.big, { version: 3, alignment: src.km.alignment, kv, tensors });
  fs.closeSync(fds.km); fs.closeSync(fds.k);
}

// ---- memory of the browser's processes ---------------------------------------------

function processesOf(marker) {
  const out = [];
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (!fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker)) continue;
      const rss = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (rss) out.push(+rss[1] * 1024);
    } catch { /* gone */ }
  }
  return out;
}
function sampler(marker) {
  const peak = { sum: 0, largest: 0 };
  const timer = setInterval(() => {
    const r = processesOf(marker);
    peak.sum = Math.max(peak.sum, r.reduce((a, b) => a + b, 0));
    peak.largest = Math.max(peak.largest, ...r, 0);
  }, 200);
  return { peak, stop: () => clearInterval(timer) };
}

// ---- the run -------------------------------------------------------------------------

const t0 = Date.now();
await build8b();
const bigSize = fs.statSync(files.big).size;
log(`${files.big}: ${(bigSize / 2 ** 30).toFixed(2)} GiB (${bigSize} bytes)`);

const loadBefore = os.loadavg();
const tRun = Date.now();
const { server, context, userDataDir, close } = await launchBench(root, { name: 'memory64 bench', watchdogMinutes: 60, modelsDir: DIR });
const result = {};
try {
  const page = await context.newPage();
  page.on('pageerror', (e) => log('[pageerror]', e.message));
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') log('[page]', m.type(), m.text()); });
  await page.goto(`${server.url}/bench/browser/index.html`);
  await page.waitForFunction(() => window.benchReady === true, null, { timeout: 60000 });

  // the 64-bit build's cost: the 1-layer Q4_K_M file in both builds, taking turns
  log('1-layer file: wasm32 and wasm64, alternating');
  result.oneLayer = await page.evaluate(async ([url, o]) => {
    const { loadModel } = await import('/web/index.js');
    const runs = { off: [], on: [] };
    for (let rep = 0; rep < o.reps; rep++) {
      for (const memory64 of rep % 2 ? ['on', 'off'] : ['off', 'on']) {
        const m = await loadModel(url, { memory64, threads: o.threads, contextLength: o.context, cache: false });
        const r = await m.complete(o.prompt, { temperature: 0, repeatPenalty: 1, ignoreEos: true, maxTokens: 16, reusePrefix: false });
        runs[memory64].push({ memory64: m.memory64, prefill: r.stats.prefillTokensPerSec, decode: r.stats.decodeTokensPerSec, tokens: r.tokens });
        await m.dispose();
      }
    }
    return runs;
  }, [`/bench/cache/${path.basename(files.oneQ4KM)}`, { reps: REPS, threads: THREADS, context: CONTEXT, prompt: PROMPT }]);

  log('8B shape: load through the memory64 build, generate');
  const mem = sampler(userDataDir);
  try {
    result.big = await page.evaluate(async ([url, o]) => {
      const { loadModel, memory64Support } = await import('/web/index.js');
      const probe = await memory64Support();
      const t = performance.now();
      const m = await loadModel(url, { threads: o.threads, contextLength: o.context, cache: false });
      const loadMs = performance.now() - t;
      const out = { probe, loadMs, memory64: m.memory64, threads: m.threads, simd: m.simd, nParams: m.info.paramCount, runs: [] };
      for (let rep = 0; rep < o.reps; rep++) {
        const r = await m.complete(o.prompt, { temperature: 0, repeatPenalty: 1, ignoreEos: true, maxTokens: o.tokens, reusePrefix: false });
        out.runs.push({ promptTokens: r.stats.promptTokens, prefill: r.stats.prefillTokensPerSec, decode: r.stats.decodeTokensPerSec, tokens: r.tokens });
      }
      out.memory = await m.memory();
      await m.dispose();
      return out;
    }, [`/bench/cache/${path.basename(files.big)}`, { threads: THREADS, context: CONTEXT, prompt: PROMPT, tokens: TOKENS, reps: REPS }]);
  } finally { mem.stop(); }
  result.big.rssPeak = mem.peak;
} finally {
  result.loadAvg = { before: loadBefore, after: os.loadavg() };
  await close();
  if (!args.keep) { for (const f of Object.values(files)) fs.rmSync(f, { force: true }); log(`deleted the files in ${DIR}`); }
}

// ---- the report -------------------------------------------------------------------------

const f1 = (x) => (x == null ? '—' : x.toFixed(2));
const gib = (b) => (b / 2 ** 30).toFixed(2);
const big = result.big, one = result.oneLayer;
const sameTokens = one.on.every((r) => r.tokens.join() === one.off[0].tokens.join()) && one.off.every((r) => r.tokens.join() === one.off[0].tokens.join());
const cpu = os.cpus()[0]?.model || 'unknown CPU';
const date = new Date().toISOString();
const md = `# An 8B-shape Q4_K_M model in Chromium (memory64 build)

${date} · host ${HOST} (${cpu}, ${os.cpus().length} cores, ${gib(os.totalmem())} GiB RAM) · Chromium via playwright-core · ${THREADS} threads · \`node bench/memory64-8b.mjs\`

The machine is a shared VM: other work (other sessions' builds and tests) ran
at the same time, so the speeds are lower bounds of what it can do and move
between runs. Load average (1, 5, 15 min) on its ${os.cpus().length} cores: ${result.loadAvg.before.map((x) => x.toFixed(1)).join(', ')} before the
browser runs, ${result.loadAvg.after.map((x) => x.toFixed(1)).join(', ')} after.

**File**: Llama 3 8B shape (32 layers, dim 4096, ffn 14336, 32 heads, 8 KV heads,
vocabulary 128256), random weights in Q4_K_M (the engine's own rule per tensor),
${gib(bigSize)} GiB (${bigSize} bytes), ${(big.nParams / 1e9).toFixed(2)} B parameters; over the 4 GiB of wasm32.

| | |
|---|---|
| build picked by \`loadModel\` ('auto') | memory64: ${big.memory64}, ${big.simd} SIMD, ${big.threads} threads (probe: ${big.probe.ok ? 'ok' : big.probe.reason}${big.probe.shared ? ', shared memory64' : ''}) |
| load (fetch from 127.0.0.1 + copy into the engine + parse + ${CONTEXT}-token context) | ${(big.loadMs / 1000).toFixed(1)} s (${(bigSize / 1e6 / (big.loadMs / 1000)).toFixed(0)} MB/s) |
| prefill (${big.runs[0].promptTokens} tokens), median of ${REPS} | ${f1(median(big.runs.map((r) => r.prefill)))} tok/s |
| decode (${TOKENS} greedy tokens), median of ${REPS} | ${f1(median(big.runs.map((r) => r.decode)))} tok/s (runs: ${big.runs.map((r) => f1(r.decode)).join(', ')}) |
| wasm memory at the end (it only grows: its peak) | ${gib(big.memory.wasmBytes)} GiB (engine blocks in use ${gib(big.memory.engineBytes)} GiB) |
| peak resident memory, all Chromium processes (largest one) | ${gib(big.rssPeak.sum)} GiB (${gib(big.rssPeak.largest)} GiB) |

**What the 64-bit build costs**: the 1-layer Q4_K_M file of the same shape
(the same matrices and embeddings, 0.9 GB), loaded in each build in turn,
${REPS} times each, ${THREADS} threads, medians:

| build | prefill tok/s | decode tok/s |
|---|---|---|
| wasm32 | ${f1(median(one.off.map((r) => r.prefill)))} | ${f1(median(one.off.map((r) => r.decode)))} |
| wasm64 (memory64) | ${f1(median(one.on.map((r) => r.prefill)))} | ${f1(median(one.on.map((r) => r.decode)))} |

Same greedy tokens in both builds: ${sameTokens ? 'yes' : 'NO'}.
Browser runs ${((Date.now() - tRun) / 60000).toFixed(1)} min; the whole program ${((Date.now() - t0) / 60000).toFixed(1)} min (with the files it had to make;
making them all takes ~30 min here, mostly the engine quantizing 1.3 B weights on one thread).
`;
const stamp = date.slice(0, 10);
fs.mkdirSync(path.join(root, 'bench', 'results'), { recursive: true });
fs.writeFileSync(path.join(root, 'bench', 'results', `memory64-8b-${stamp}.md`), md);
fs.writeFileSync(path.join(root, 'bench', 'results', `memory64-8b-${stamp}.json`), JSON.stringify({ date, host: HOST, cpu, threads: THREADS, context: CONTEXT, fileBytes: bigSize, ...result }, null, 1));
console.log(md);
