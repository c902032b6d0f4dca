// `make bench`: speed of wasmlm (wasm in Node, and native) beside native
// llama.cpp, measured side by side in one run on the same synthetic GGUF
// files. The native baseline is llama-bench built for this machine
// (bench/llama-native.mjs: $LLAMA_BENCH, a source tree at $LLAMA_CPP_DIR, or
// one cloned from node-llama-cpp's bundle into ~/.cache/wasmlm/llama.cpp and
// built there, never in CI); node-llama-cpp's prebuilt binaries are the
// fallback, in the configuration that is fastest here (tried first, named in
// the results). Every ratio is against the best native baseline of the run
// and says which. Writes JSON + a markdown table to bench/results/. Speed
// targets are ratios read from this table, never timed unit tests.
//
//   node bench/bench.mjs [--shapes s110m,tl1b] [--types q4_0,q4_k_m,q8_0] [--threads 1,2] [--reps 3] [--out latest]
//                        [--skip far,native,load] [--simd simd128,relaxed] [--baseline llama-bench,node-llama-cpp]
// --skip leaves columns out to shorten a run while iterating on kernels: `far`
// (decode after a 1000-token prompt), `native` (build/wasmlm-native and
// build/wasmlm-native-relaxed: the same C kernels compiled natively through
// SIMDe, the baseline of the "wasm >= 0.8x our native build" target), `load`
// (the streamed-load timing). --baseline: which native llama.cpp to run
// (default: llama-bench where it is or can be built, else node-llama-cpp;
// both: --baseline llama-bench,node-llama-cpp). --no-build: use llama-bench
// only if it is already built.
// --simd picks the engine builds measured (loadModel's `simd` option): default
// both where relaxed SIMD passes the known-answer probe, else simd128 only
// (Node 20 runs relaxed SIMD only with --experimental-wasm-relaxed-simd, which
// `make bench` passes when the node binary accepts it; Node >= 22 by default).
// Models are generated on demand into bench/cache/ (never committed).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { model, promptOf, root, native, benchArgs, median } from './common.mjs';
import { loadModel, relaxedSimdAvailable } from '../web/index.js';
import { prepareLlamaBench, llamaBench, nodeLlamaCpp, nodeLlamaCppInstalled, NODE_LLAMA_CPP_CONFIGS, hostCpu, simdFlags, weightBytesPerToken } from './llama-native.mjs';

const args = benchArgs();
const shapes = String(args.shapes || 's110m,tl1b').split(',');
const types = String(args.types || 'q4_0,q4_k_m,q8_0').split(',');
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
const PROMPT = 128, GEN = 64;


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

// Our builds, the native llama.cpp baselines and our native builds on one
// file and thread count, rep by rep in turn (SIMD128, relaxed, llama-bench,
// node-llama-cpp, native, native relaxed, then again): a busy or drifting
// machine slows them alike, and the ratios are read within each run of reps.
async function openOurs(file, threads, simd) {
  const readyMs = skip.has('load') ? null : await readyAfterLastByte(file, threads, simd);
  const t0 = performance.now();
  const m = await loadModel(file, { contextLength: 1152, batchSize: 64, threads, simd });
  if (m.simd !== simd) throw new Error(`asked for the ${simd} build, loaded ${m.simd}`);
  return { m, loadMs: performance.now() - t0, readyMs, pre: [], dec: [], far: [] };
}

// reusePrefix false: every rep prefills its whole prompt (the same prompt
// would otherwise be served from the cache of the previous rep)
const greedy = { temperature: 0, repeatPenalty: 1, ignoreEos: true, reusePrefix: false };

async function repOurs(o, keep = true) {
  const a = await o.m.complete(promptOf(PROMPT), { ...greedy, maxTokens: GEN });
  if (a.stats.promptTokens !== PROMPT) throw new Error(`prompt is ${a.stats.promptTokens} tokens, expected ${PROMPT}`);
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
  const p = spawnSync(N.bin, ['generate', '-m', file, '-p', promptOf(PROMPT), '-n', String(GEN), '--temp', '0', '--repeat-penalty', '1', '--ignore-eos', '--ctx', '1152', '--threads', String(threads)], { encoding: 'utf8' });
  const m = /prompt (\d+) tokens, ([\d.]+) tok\/s \| generated (\d+) tokens, ([\d.]+) tok\/s/.exec(p.stderr);
  if (!m) throw new Error(`native bench (${N.bin}) failed: ` + p.stderr);
  N.pre.push(+m[2]); N.dec.push(+m[4]);
}
const nativeRelaxed = native + '-relaxed';
const nativeBins = skip.has('native') ? [] : [native, nativeRelaxed].filter((b) => fs.existsSync(b));

// ---- the native llama.cpp baselines ------------------------------------------------
const wanted = args.baseline ? new Set(String(args.baseline).split(',')) : null;
for (const b of wanted || []) if (b !== 'llama-bench' && b !== 'node-llama-cpp') throw new Error(`--baseline: unknown ${b} (llama-bench, node-llama-cpp)`);
let lb = { bin: null, why: 'not asked for (--baseline)' };
if (!wanted || wanted.has('llama-bench')) lb = prepareLlamaBench({ build: !args['no-build'] });
if (lb.bin) console.error(`llama-bench: ${lb.bin}${lb.commit ? ` (llama.cpp ${lb.commit})` : ''}${lb.built ? ', built now' : ''}`);
else console.error(`llama-bench not used: ${lb.why}`);
const useNodeLlama = (wanted ? wanted.has('node-llama-cpp') : !lb.bin) && nodeLlamaCppInstalled();
if ((wanted ? wanted.has('node-llama-cpp') : !lb.bin) && !useNodeLlama) console.error('node-llama-cpp is not installed: no fallback baseline');

// node-llama-cpp: each configuration on the first file at every thread count
// (one unmeasured run, then two); the one with the best decode at the most
// threads runs the benchmark
let nlcConfig = null;
const nlcCalibration = [];
if (useNodeLlama) {
  const file = model(shapes[0], types[0]);
  for (const cfg of NODE_LLAMA_CPP_CONFIGS) {
    const L = nodeLlamaCpp(cfg);
    try {
      await L.open(file);
      const res = { config: cfg.name, file: path.basename(file), decode: {}, prefill: {} };
      for (const t of threadCounts) {
        await L.rep(t, { prompt: PROMPT, gen: GEN });
        const r = [await L.rep(t, { prompt: PROMPT, gen: GEN }), await L.rep(t, { prompt: PROMPT, gen: GEN })];
        res.decode[t] = median(r.map((x) => x.decode)); res.prefill[t] = median(r.map((x) => x.prefill));
      }
      nlcCalibration.push(res);
      console.error('node-llama-cpp calibration', JSON.stringify(res));
    } catch (e) {
      console.error(`node-llama-cpp (${cfg.name}) failed: ${e.message}`);
    } finally { await L.exit(); }
  }
  const tMax = Math.max(...threadCounts);
  nlcCalibration.sort((a, b) => b.decode[tMax] - a.decode[tMax]);
  nlcConfig = nlcCalibration.length ? NODE_LLAMA_CPP_CONFIGS.find((c) => c.name === nlcCalibration[0].config) : null;
  if (nlcConfig) console.error(`node-llama-cpp runs as: ${nlcConfig.name} (fastest decode at ${tMax} threads)`);
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
let lbInfo = null;
for (const shape of shapes) {
  for (const type of types) {
    const file = model(shape, type);
    const size = fs.statSync(file).size;
    const weightBytes = await weightBytesPerToken(file);
    for (const threads of threadCounts) {
      // ours: the SIMD128 build; oursRelaxed: the relaxed-SIMD build (null when not measured)
      const o1 = simds.has('simd128') ? await openOurs(file, threads, 'simd128') : null;
      const o2 = simds.has('relaxed') ? await openOurs(file, threads, 'relaxed') : null;
      const L = nlcConfig ? nodeLlamaCpp(nlcConfig) : null;
      if (L) await L.open(file);
      const LB = lb.bin ? { pre: [], dec: [] } : null, NL = L ? { pre: [], dec: [] } : null;
      const N = nativeBins.map((bin) => ({ bin, pre: [], dec: [] }));
      // one unmeasured run of each engine in this process first: V8 gives a
      // wasm function its optimized code once it has run a while, compiling
      // on threads that share the cores (see bench/scaling.mjs)
      if (o1) await repOurs(o1, false);
      if (o2) await repOurs(o2, false);
      if (L) await L.rep(threads, { prompt: PROMPT, gen: GEN });
      for (let r = 0; r < reps; r++) {
        if (o1) await repOurs(o1);
        if (o2) await repOurs(o2);
        if (LB) {
          const x = llamaBench(lb.bin, file, { threads, prompt: PROMPT, gen: GEN });
          LB.pre.push(x.prefill); LB.dec.push(x.decode); lbInfo = x.info;
        }
        if (L) { const x = await L.rep(threads, { prompt: PROMPT, gen: GEN }); NL.pre.push(x.prefill); NL.dec.push(x.decode); }
        for (const n of N) repNative(n, file, threads);
      }
      if (L) await L.exit();
      const nat = {};
      for (const n of N) nat[n.bin === native ? 'simd128' : 'relaxed'] = { prefill: median(n.pre), decode: median(n.dec) };
      const ours = o1 ? await closeOurs(o1) : null;
      const oursRelaxed = o2 ? await closeOurs(o2) : null;
      const llamaBenchRes = LB ? { prefill: median(LB.pre), decode: median(LB.dec), samples: LB } : null;
      const nodeLlamaRes = NL ? { prefill: median(NL.pre), decode: median(NL.dec), config: nlcConfig.name, samples: NL } : null;
      // the best native baseline of this row, prefill and decode on their own
      const best = (k) => {
        const c = [['llama-bench', llamaBenchRes?.[k]], ['node-llama-cpp', nodeLlamaRes?.[k]]].filter((x) => x[1] != null);
        c.sort((a, b) => b[1] - a[1]);
        return c.length ? { by: c[0][0], value: c[0][1] } : null;
      };
      // decode reads (about) every weight byte once per token
      const gbs = (o) => (o ? +(weightBytes / 1e9 * o.decode).toFixed(2) : null);
      const share = (g) => (g != null && bandwidth[threads] ? +(g / bandwidth[threads]).toFixed(3) : null);
      const row = {
        shape, type, fileMB: +(size / 1e6).toFixed(1), weightMBPerToken: +(weightBytes / 1e6).toFixed(1), threads,
        ours, oursRelaxed, native: nat.simd128 || null, nativeRelaxed: nat.relaxed || null,
        llamaBench: llamaBenchRes, nodeLlamaCpp: nodeLlamaRes, bestNative: { prefill: best('prefill'), decode: best('decode') },
        bandwidthGBs: bandwidth[threads],
        weightsGBs: gbs(ours), bandwidthShare: share(gbs(ours)),
        weightsGBsRelaxed: gbs(oursRelaxed), bandwidthShareRelaxed: share(gbs(oursRelaxed)),
        weightsGBsLlamaBench: gbs(llamaBenchRes), bandwidthShareLlamaBench: share(gbs(llamaBenchRes)),
      };
      rows.push(row);
      console.error(JSON.stringify({ ...row, llamaBench: llamaBenchRes && { prefill: llamaBenchRes.prefill, decode: llamaBenchRes.decode }, nodeLlamaCpp: nodeLlamaRes && { prefill: nodeLlamaRes.prefill, decode: nodeLlamaRes.decode } }));
    }
  }
}

// 2 threads against 1 for each baseline and ours: a baseline whose decode
// does not gain from the second thread is named (a configuration pathology
// gives a weak baseline, as node-llama-cpp's default did on a Zen 4 host)
const speedups = [];
for (const r of rows) {
  const one = rows.find((q) => q.shape === r.shape && q.type === r.type && q.threads === 1);
  if (!one || r.threads === 1) continue;
  const sp = (a, b) => (a != null && b ? +(a / b).toFixed(2) : null);
  const s = { shape: r.shape, type: r.type, threads: r.threads,
    decode: { ours: sp(r.ours?.decode, one.ours?.decode), oursRelaxed: sp(r.oursRelaxed?.decode, one.oursRelaxed?.decode), llamaBench: sp(r.llamaBench?.decode, one.llamaBench?.decode), nodeLlamaCpp: sp(r.nodeLlamaCpp?.decode, one.nodeLlamaCpp?.decode) },
    prefill: { ours: sp(r.ours?.prefill, one.ours?.prefill), oursRelaxed: sp(r.oursRelaxed?.prefill, one.oursRelaxed?.prefill), llamaBench: sp(r.llamaBench?.prefill, one.llamaBench?.prefill), nodeLlamaCpp: sp(r.nodeLlamaCpp?.prefill, one.nodeLlamaCpp?.prefill) } };
  s.warnings = ['llamaBench', 'nodeLlamaCpp'].filter((k) => s.decode[k] != null && s.decode[k] < 1.1).map((k) => `${k === 'llamaBench' ? 'llama-bench' : 'node-llama-cpp'} decodes ${s.decode[k]}x as fast at ${r.threads} threads as at 1: a weak baseline`);
  speedups.push(s);
}

const cpu = hostCpu();
const f = (x) => (x == null ? '—' : x >= 100 ? x.toFixed(0) : x.toFixed(1));
const ratio = (a, b) => (a && b ? (a / b).toFixed(2) + '×' : '—');
const pair = (a, b) => [a, b].filter((x) => x !== undefined).map(f).join(' · ');
const pct = (s) => (s == null ? '—' : Math.round(s * 100) + ' %');
const flags = process.execArgv.length ? ' ' + process.execArgv.join(' ') : '';
const builds = [simds.has('simd128') && 'SIMD128', simds.has('relaxed') && 'relaxed'].filter(Boolean).join(' · ');
const pickO = (r) => [simds.has('simd128') ? r.ours : undefined, simds.has('relaxed') ? r.oursRelaxed : undefined].filter((x) => x !== undefined);
let md = `# wasmlm benchmark\n\n${new Date().toISOString()} · ${cpu.model} × ${cpu.cores} (${simdFlags(cpu.flags).join(' ') || 'flags unknown'}) · Node ${process.version}${flags} · medians of ${reps}\n\n`;
md += `Native baseline: ${lb.bin ? `llama-bench (llama.cpp ${lb.commit || lbInfo?.build_commit || '?'}, built for this machine: Release, GGML_NATIVE=ON; ${lbInfo ? `KV ${lbInfo.type_k}, flash attention ${lbInfo.flash_attn}` : ''})` : `no llama-bench (${lb.why})`}` +
  `${nlcConfig ? `; node-llama-cpp (prebuilt), run as ${nlcConfig.name}, the fastest of ${nlcCalibration.map((c) => `${c.config}: ${threadCounts.map((t) => `${f(c.decode[t])} tok/s at ${t}t`).join(', ')}`).join('; ')} (decode, ${nlcCalibration[0]?.file})` : ''}. ` +
  'Ratios are ours ÷ the best native baseline of the row (named in its column).\n\n';
md += `| model | type | threads | weights MB/token | prefill tok/s ${builds} | decode tok/s ${builds} | llama-bench prefill · decode | node-llama-cpp prefill · decode | best native prefill · decode | ${builds} ÷ best prefill | ${builds} ÷ best decode | share of bandwidth ${builds} · llama-bench | our native ${builds} decode | load ms | ready ms after last byte | peak wasm MB | decode @1000 |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n`;
for (const r of rows) {
  const os_ = pickO(r), bp = r.bestNative.prefill, bd = r.bestNative.decode;
  const bn = bp || bd ? `${f(bp?.value)} · ${f(bd?.value)} (${[...new Set([bp?.by, bd?.by].filter(Boolean))].join(' / ')})` : '—';
  const shares = [simds.has('simd128') && pct(r.bandwidthShare), simds.has('relaxed') && pct(r.bandwidthShareRelaxed), pct(r.bandwidthShareLlamaBench)].filter((x) => x !== false).join(' · ');
  const nat = [simds.has('simd128') && f(r.native?.decode), simds.has('relaxed') && f(r.nativeRelaxed?.decode)].filter((x) => x !== false).join(' · ');
  const o = r.ours || r.oursRelaxed;
  md += `| ${r.shape} | ${r.type} | ${r.threads} | ${r.weightMBPerToken} | ${pair(...os_.map((x) => x?.prefill))} | ${pair(...os_.map((x) => x?.decode))} | ${r.llamaBench ? `${f(r.llamaBench.prefill)} · ${f(r.llamaBench.decode)}` : '—'} | ${r.nodeLlamaCpp ? `${f(r.nodeLlamaCpp.prefill)} · ${f(r.nodeLlamaCpp.decode)}` : '—'} | ${bn} | ${os_.map((x) => ratio(x?.prefill, bp?.value)).join(' · ')} | ${os_.map((x) => ratio(x?.decode, bd?.value)).join(' · ')} | ${shares} | ${nat || '—'} | ${f(o?.loadMs)} | ${f(o?.readyMs)} | ${f(o?.peakWasmMB)} | ${f(o?.decode1000)} |\n`;
}
if (speedups.length) {
  md += `\n2 threads ÷ 1 thread (decode · prefill):\n\n| model | type | threads | ${builds} | llama-bench | node-llama-cpp |\n|---|---|---|---|---|---|\n`;
  for (const s of speedups) {
    const c = (k) => (s.decode[k] == null ? '—' : `${s.decode[k]}× · ${s.prefill[k]}×`);
    md += `| ${s.shape} | ${s.type} | ${s.threads} | ${[simds.has('simd128') && c('ours'), simds.has('relaxed') && c('oursRelaxed')].filter(Boolean).join(' / ')} | ${c('llamaBench')} | ${c('nodeLlamaCpp')} |\n`;
  }
  const warn = speedups.flatMap((s) => s.warnings.map((w) => `${s.shape} ${s.type}: ${w}`));
  if (warn.length) md += '\n**Warning:** ' + warn.join('; ') + '.\n';
}
md += `\nThe same file, prompt (${PROMPT} tokens), generation (${GEN} greedy tokens) and thread count for every engine, rep by rep in turn (${[...simds].join(', ')}, llama-bench, node-llama-cpp, our native builds, again) after one unmeasured run of each engine in this process. ${builds}: the wasm builds (wasm/wasmlm[-mt].wasm, wasm/wasmlm[-mt]-relaxed.wasm; loadModel picks relaxed wherever its known-answer probe passes; Node 20 runs it only with --experimental-wasm-relaxed-simd, which \`make bench\` passes when the node binary accepts it), F32 KV cache, batch 64. llama-bench: one run a rep (-r 1): prefill = pp${PROMPT}, decode = tg${GEN} at depth ${PROMPT} (-d ${PROMPT}), its own defaults otherwise. node-llama-cpp: its prebuilt CPU binaries in a child process, batch 512. weights MB/token: the bytes of every weight matrix a decode step reads (all tensors but the token embeddings, from the GGUF header); share of bandwidth = weights MB/token × decode tok/s ÷ the machine's streaming-read bandwidth, ${JSON.stringify(bandwidth)} GB/s by thread count (build/wasmlm-native bandwidth: 1 GiB read by native code). our native: build/wasmlm-native[-relaxed], the same C kernels compiled by \`cc -O3 -march=native\` through SIMDe. load ms: loadModel(path) until ready; ready ms after last byte: loadModel of the file as a stream of 4 MB chunks, from the last chunk to ready; peak wasm MB: wasm memory after all runs (1152-position F32 KV cache); decode @1000: 32 tokens after a 1000-token prompt (these four: the ${simds.has('simd128') ? 'SIMD128' : 'relaxed'} build's; the JSON has both).\n`;
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
fs.writeFileSync(path.join(root, 'bench', 'results', `bench-${stamp}.json`), JSON.stringify({
  machine: { cpu: cpu.model, cores: cpu.cores, cpuFlags: cpu.flags, memGB: +(os.totalmem() / 2 ** 30).toFixed(1), os: `${os.type()} ${os.release()}`, node: process.version, nodeFlags: process.execArgv, simd: [...simds] },
  baselines: { llamaBench: lb.bin ? { bin: lb.bin, commit: lb.commit, info: lbInfo } : { why: lb.why }, nodeLlamaCpp: nlcConfig ? { config: nlcConfig.name, calibration: nlcCalibration } : null },
  settings: { shapes, types, threads: threadCounts, reps, prompt: PROMPT, gen: GEN },
  bandwidth, rows, speedups, tokenizer: tok,
}, null, 2));
fs.writeFileSync(path.join(root, 'bench', 'results', `bench-${stamp}.md`), md);
fs.writeFileSync(path.join(root, 'bench', 'results', `${args.out || 'latest'}.md`), md);
console.log(md);
process.exit(0);
