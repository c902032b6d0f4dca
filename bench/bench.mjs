// `make bench`: speed of wasmlm (wasm in Node, and native) beside native
// llama.cpp (node-llama-cpp, when installed), measured side by side in one
// run on the same synthetic GGUF files. Writes JSON + a markdown table to
// bench/results/. Speed targets are ratios read from this table, never
// timed unit tests.
//
//   node bench/bench.mjs [--shapes s15m,s110m] [--types q8_0,q4_0,f16] [--threads 1,2] [--reps 3] [--out latest]
//                        [--skip far,native] [--simd simd128,relaxed]
// --skip leaves columns out to shorten a run while iterating on kernels: `far`
// (decode after a 1000-token prompt), `native` (build/wasmlm-native and
// build/wasmlm-native-relaxed: the same C kernels compiled natively through
// SIMDe, the baseline of the "wasm >= 0.8x our native build" target).
// --simd picks the engine builds measured (loadModel's `simd` option): default
// both where relaxed SIMD passes the known-answer probe, else simd128 only
// (Node 20 runs relaxed SIMD only with --experimental-wasm-relaxed-simd, which
// `make bench` passes when the node binary accepts it; Node >= 22 by default).
// Models are generated on demand into bench/cache/ (never committed).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { model, promptOf, root, native } from './common.mjs';
import { loadModel, relaxedSimdAvailable } from '../web/index.js';

const args = Object.fromEntries(process.argv.slice(2).map((a, i, all) => a.startsWith('--') ? [a.slice(2), all[i + 1] && !all[i + 1].startsWith('--') ? all[i + 1] : true] : null).filter(Boolean));
const shapes = String(args.shapes || 's15m,s110m').split(',');
const types = String(args.types || 'q8_0,q4_0,f16').split(',');
const reps = +(args.reps || 3);
const threadCounts = String(args.threads || '1,2').split(',').map(Number);
const skip = new Set(String(args.skip || '').split(',').filter(Boolean));
const relaxedOk = await relaxedSimdAvailable();
const simds = new Set(args.simd ? String(args.simd).split(',').filter(Boolean) : relaxedOk ? ['simd128', 'relaxed'] : ['simd128']);
for (const s of simds) if (s !== 'simd128' && s !== 'relaxed') throw new Error(`--simd: unknown build ${s} (simd128, relaxed)`);
if (simds.has('relaxed') && !relaxedOk) {
  simds.delete('relaxed');
  if (!simds.size) simds.add('simd128');
  console.error(`warning: relaxed SIMD is not available in this Node (${process.version}${process.version.startsWith('v20.') ? ': run it with --experimental-wasm-relaxed-simd' : ''}): measuring ${[...simds].join(',')} only`);
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

// Load from a stream (an async iterable of 4 MB file chunks, as a download
// would deliver them) and time from the moment the last chunk is handed over
// to the model being ready: parsing and placement overlap the transfer, so
// what is left after the last byte is the finishing work (checks, tokenizer,
// context and KV cache).
async function readyAfterLastByte(file, threads, simd) {
  let tLast = 0;
  async function* chunks() {
    const fh = await fs.promises.open(file);
    try {
      const size = (await fh.stat()).size;
      for (let off = 0; off < size;) {
        const n = Math.min(4 << 20, size - off), buf = new Uint8Array(n);
        await fh.read(buf, 0, n, off);
        off += n;
        if (off >= size) tLast = performance.now();
        yield buf;
      }
    } finally { await fh.close(); }
  }
  const m = await loadModel(chunks(), { contextLength: 1152, batchSize: 64, threads, simd });
  const ms = performance.now() - tLast;
  await m.dispose();
  return ms;
}

// Our builds, llama.cpp and our native builds on one file and thread count,
// rep by rep in turn (SIMD128, relaxed, llama.cpp, native, native relaxed,
// then again): a busy or drifting machine
// slows them alike, and the ratios are read within each run of reps.
async function openOurs(file, threads, simd) {
  const readyMs = await readyAfterLastByte(file, threads, simd);
  const t0 = performance.now();
  const m = await loadModel(file, { contextLength: 1152, batchSize: 64, threads, simd });
  if (m.simd !== simd) throw new Error(`asked for the ${simd} build, loaded ${m.simd}`);
  return { m, loadMs: performance.now() - t0, readyMs, pre: [], dec: [], far: [] };
}

// reusePrefix false: every rep prefills its whole prompt (the same prompt
// would otherwise be served from the cache of the previous rep)
const greedy = { temperature: 0, repeatPenalty: 1, ignoreEos: true, reusePrefix: false };

async function repOurs(o, keep = true) {
  const a = await o.m.complete(promptOf(128), { ...greedy, maxTokens: 64 });
  if (a.stats.promptTokens !== 128) throw new Error(`prompt is ${a.stats.promptTokens} tokens, expected 128`);
  if (keep) { o.pre.push(a.stats.prefillTokensPerSec); o.dec.push(a.stats.decodeTokensPerSec); }
}

async function closeOurs(o) {
  if (!skip.has('far')) {
    const b = await o.m.complete(promptOf(1000), { ...greedy, maxTokens: 32 });
    o.far.push(b.stats.decodeTokensPerSec);
  }
  const mem = await o.m.memory();
  await o.m.dispose();
  return { loadMs: o.loadMs, readyMs: o.readyMs, prefill: median(o.pre), decode: median(o.dec), decode1000: o.far.length ? median(o.far) : null,
           peakWasmMB: +(mem.wasmBytes / 1e6).toFixed(1), engineMB: +(mem.engineBytes / 1e6).toFixed(1) };
}

// one run of a native CLI (its own process: the file is loaded again, and
// only the prompt and generation speeds it reports are kept)
function repNative(N, file, threads) {
  const p = spawnSync(N.bin, ['generate', '-m', file, '-p', promptOf(128), '-n', '64', '--temp', '0', '--repeat-penalty', '1', '--ignore-eos', '--ctx', '1152', '--threads', String(threads)], { encoding: 'utf8' });
  const m = /prompt (\d+) tokens, ([\d.]+) tok\/s \| generated (\d+) tokens, ([\d.]+) tok\/s/.exec(p.stderr);
  if (!m) throw new Error(`native bench (${N.bin}) failed: ` + p.stderr);
  N.pre.push(+m[2]); N.dec.push(+m[4]);
}
const nativeRelaxed = native + '-relaxed';
const nativeBins = skip.has('native') ? [] : [native, nativeRelaxed].filter((b) => fs.existsSync(b));

let llamaCpp = null;
try {
  const { getLlama } = await import('node-llama-cpp');
  llamaCpp = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
} catch { /* not installed: column left empty */ }

async function openLlamaCpp(file) {
  if (!llamaCpp) return null;
  const m = await llamaCpp.loadModel({ modelPath: file });
  const prompt = m.tokenize(promptOf(128));
  return { m, toks: [m.tokens.bos, ...prompt].slice(0, 128), pre: [], dec: [] };
}

async function repLlamaCpp(L, threads, keep = true) {
  const ctx = await L.m.createContext({ contextSize: 1152, threads, batchSize: 512 });
  const seq = ctx.getSequence();
  let t0 = performance.now();
  await seq.evaluateWithoutGeneratingNewTokens(L.toks);
  const pre = L.toks.length / ((performance.now() - t0) / 1000);
  t0 = performance.now(); let n = 0;
  for await (const _ of seq.evaluate([L.toks[1]], { temperature: 0 })) if (++n >= 64) break;
  const dec = 64 / ((performance.now() - t0) / 1000);
  await ctx.dispose();
  if (keep) { L.pre.push(pre); L.dec.push(dec); }
}

// the machine's memory bandwidth (streaming read of 1 GiB), per thread count
const bandwidth = {};
for (const t of threadCounts) {
  const r = fs.existsSync(native) ? spawnSync(native, ['bandwidth', String(t)], { encoding: 'utf8' }) : null;
  bandwidth[t] = r && r.status === 0 ? +r.stdout.trim() : null;
}
console.error('bandwidth GB/s', JSON.stringify(bandwidth));
console.error('wasm builds', [...simds].join(','));

const rows = [];
for (const shape of shapes) {
  for (const type of types) {
    const file = model(shape, type);
    const size = fs.statSync(file).size;
    for (const threads of threadCounts) {
      // ours: the SIMD128 build; oursRelaxed: the relaxed-SIMD build (null when not measured)
      const o1 = simds.has('simd128') ? await openOurs(file, threads, 'simd128') : null;
      const o2 = simds.has('relaxed') ? await openOurs(file, threads, 'relaxed') : null;
      const L = await openLlamaCpp(file);
      const N = nativeBins.map((bin) => ({ bin, pre: [], dec: [] }));
      // one unmeasured run of each engine in this process first: V8 gives a
      // wasm function its optimized code once it has run a while, compiling
      // on threads that share the cores (see bench/scaling.mjs)
      if (o1) await repOurs(o1, false);
      if (o2) await repOurs(o2, false);
      if (L) await repLlamaCpp(L, threads, false);
      for (let r = 0; r < reps; r++) {
        if (o1) await repOurs(o1);
        if (o2) await repOurs(o2);
        if (L) await repLlamaCpp(L, threads);
        for (const n of N) repNative(n, file, threads);
      }
      const nat = {};
      for (const n of N) nat[n.bin === native ? 'simd128' : 'relaxed'] = { prefill: median(n.pre), decode: median(n.dec) };
      const ours = o1 ? await closeOurs(o1) : null;
      const oursRelaxed = o2 ? await closeOurs(o2) : null;
      let lc = null;
      if (L) { lc = { prefill: median(L.pre), decode: median(L.dec) }; await L.m.dispose(); }
      // decode moves (about) every weight byte once per token
      const gbs = (o) => (o ? +(size / 1e9 * o.decode).toFixed(2) : null);
      const share = (g) => (g != null && bandwidth[threads] ? +(g / bandwidth[threads]).toFixed(3) : null);
      const weightsGBs = gbs(ours), weightsGBsRelaxed = gbs(oursRelaxed);
      const row = { shape, type, fileMB: +(size / 1e6).toFixed(1), threads, ours, oursRelaxed, native: nat.simd128 || null, nativeRelaxed: nat.relaxed || null, llamaCpp: lc,
        weightsGBs, bandwidthGBs: bandwidth[threads], bandwidthShare: share(weightsGBs),
        weightsGBsRelaxed, bandwidthShareRelaxed: share(weightsGBsRelaxed) };
      rows.push(row);
      console.error(JSON.stringify(row));
    }
  }
}

const f = (x) => (x == null ? '—' : x >= 100 ? x.toFixed(0) : x.toFixed(1));
const ratio = (a, b) => (a && b ? (a / b).toFixed(2) + '×' : '—');
const gbCell = (g, s) => (g == null ? '—' : `${g} (${s == null ? '—' : Math.round(s * 100) + ' %'})`);
const flags = process.execArgv.length ? ' ' + process.execArgv.join(' ') : '';
let md = `# wasmlm benchmark\n\n${new Date().toISOString()} · ${os.cpus()[0].model} × ${os.cpus().length} · Node ${process.version}${flags} · medians of ${reps}\n\n`;
md += '| model | type | threads | MB | peak wasm MB | weights GB/s (share of bandwidth) | load ms | ready ms after last byte | prefill tok/s (wasm) | decode tok/s (wasm) | prefill tok/s (relaxed) | decode tok/s (relaxed) | decode @1000 | native prefill | native decode | native relaxed prefill | native relaxed decode | llama.cpp prefill | llama.cpp decode | wasm/llama.cpp prefill | wasm/llama.cpp decode | relaxed/llama.cpp prefill | relaxed/llama.cpp decode | wasm/native prefill · decode | relaxed/native relaxed prefill · decode |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n';
for (const r of rows) {
  const gb = [r.ours && gbCell(r.weightsGBs, r.bandwidthShare), r.oursRelaxed && 'relaxed ' + gbCell(r.weightsGBsRelaxed, r.bandwidthShareRelaxed)].filter(Boolean).join(' · ');
  const o = r.ours, x = r.oursRelaxed;
  md += `| ${r.shape} | ${r.type} | ${r.threads} | ${r.fileMB} | ${f(o?.peakWasmMB)} | ${gb} | ${f(o?.loadMs)} | ${f(o?.readyMs)} | ${f(o?.prefill)} | ${f(o?.decode)} | ${f(x?.prefill)} | ${f(x?.decode)} | ${f(o?.decode1000)} | ${f(r.native?.prefill)} | ${f(r.native?.decode)} | ${f(r.nativeRelaxed?.prefill)} | ${f(r.nativeRelaxed?.decode)} | ${f(r.llamaCpp?.prefill)} | ${f(r.llamaCpp?.decode)} | ${ratio(o?.prefill, r.llamaCpp?.prefill)} | ${ratio(o?.decode, r.llamaCpp?.decode)} | ${ratio(x?.prefill, r.llamaCpp?.prefill)} | ${ratio(x?.decode, r.llamaCpp?.decode)} | ${ratio(o?.prefill, r.native?.prefill)} · ${ratio(o?.decode, r.native?.decode)} | ${ratio(x?.prefill, r.nativeRelaxed?.prefill)} · ${ratio(x?.decode, r.nativeRelaxed?.decode)} |\n`;
}
md += `\nwasm = the SIMD128 build, relaxed = the relaxed-SIMD build (wasm/wasmlm-relaxed.wasm, wasm/wasmlm-mt-relaxed.wasm), the same file and thread count, rep by rep in turn with llama.cpp and the native builds (SIMD128, relaxed, llama.cpp, native, native relaxed, again); loadModel picks the relaxed build automatically wherever its known-answer probe passes. Node 20 runs relaxed SIMD only with --experimental-wasm-relaxed-simd (\`make bench\` passes it when the node binary accepts it; Node >= 22 and Chromium run it by default); where it is not available the relaxed columns are empty (—). load ms, ready ms, peak wasm MB and decode @1000 are the SIMD128 build's (the relaxed build's are in the JSON). bandwidth: streaming read of 1 GiB by native code, ${JSON.stringify(bandwidth)} GB/s by thread count; weights GB/s = file size × decode tok/s (SIMD128, then relaxed). load ms: loadModel(path) until ready; ready ms after last byte: loadModel of the file as a stream of 4 MB chunks, from the last chunk handed over to ready. peak wasm MB: the engine wasm memory after all runs (it only grows), with a 1152-position F32 KV cache. prefill: a 128-token prompt; decode: 64 greedy tokens after it; decode @1000: 32 tokens after a 1000-token prompt. llama.cpp = node-llama-cpp prebuilt CPU binaries (same files, same thread count). native = build/wasmlm-native and build/wasmlm-native-relaxed: the same C sources and kernels (SIMD128 and relaxed-SIMD sets) compiled natively by ${'`'}cc -O3 -march=native${'`'} through SIMDe's implementation of the wasm SIMD intrinsics, same files, thread count and prompt, one process a rep (taking turns with the others); only their reported prompt and generation speeds count.\n`;
// tokenizer throughput (MB/s on a few MB of mixed text, SentencePiece and
// byte-level BPE vocabularies): printed by the C test tokenizer_throughput,
// natively and in the wasm build
const tok = [];
for (const [label, cmd, cargs] of [
  ['native', path.join(root, 'build', 'tests-native'), ['--data', path.resolve(root, '..', 'shared'), 'tokenizer_throughput']],
  ['wasm', 'node', [path.join(root, 'tests', 'c', 'run_wasi.mjs'), path.join(root, 'build', 'tests.wasm'), 'tokenizer_throughput']],
]) {
  if (cmd !== 'node' && !fs.existsSync(cmd)) continue;
  const r = spawnSync(cmd, cargs, { cwd: root, encoding: 'utf8', env: { ...process.env, WLM_TEST_DATA: path.resolve(root, '..', 'shared') } });
  for (const line of (r.stdout || '').split('\n')) if (/MB\/s/.test(line)) tok.push(`${label}: ${line.trim()}`);
}
if (tok.length) md += '\n## Tokenizer throughput\n\n' + tok.map((l) => '- ' + l).join('\n') + '\n';

const stamp = new Date().toISOString().replace(/[:.]/g, '-');
fs.writeFileSync(path.join(root, 'bench', 'results', `bench-${stamp}.json`), JSON.stringify({ machine: { cpu: os.cpus()[0].model, cores: os.cpus().length, node: process.version, nodeFlags: process.execArgv, simd: [...simds] }, rows, tokenizer: tok }, null, 2));
fs.writeFileSync(path.join(root, 'bench', 'results', `${args.out || 'latest'}.md`), md);
console.log(md);
process.exit(0);
