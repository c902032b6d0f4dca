// The native llama.cpp baselines of the benchmarks (bench/bench.mjs,
// bench/browser-bench.mjs):
//
// - llama-bench, llama.cpp's own benchmark, built for this machine (CMake,
//   Release, GGML_NATIVE=ON: every instruction set the CPU has). Found at
//   $LLAMA_BENCH (a binary), else in the llama.cpp source tree $LLAMA_CPP_DIR,
//   else in ~/.cache/wasmlm/llama.cpp ($WASMLM_CACHE / $XDG_CACHE_HOME as
//   for models). A source tree without the binary is built once (target
//   llama-bench only); without a source tree the cache is cloned from the git
//   bundle node-llama-cpp ships (node_modules/node-llama-cpp/llama/
//   gitRelease.bundle: no network). Nothing is cloned or built when $CI is
//   set. Nothing of it enters this repository.
// - node-llama-cpp's prebuilt CPU binaries, the fallback where there is no
//   llama-bench: run in a process of its own (llamacpp-child.mjs), so that
//   its environment can be chosen per run (its libuv thread pool: see
//   NODE_LLAMA_CPP_CONFIGS).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');

/** The llama.cpp source tree the benchmarks use: {dir, from}. */
export function llamaCppDir() {
  if (process.env.LLAMA_CPP_DIR) return { dir: path.resolve(process.env.LLAMA_CPP_DIR), from: 'LLAMA_CPP_DIR' };
  const cache = process.env.WASMLM_CACHE || path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'wasmlm');
  return { dir: path.join(cache, 'llama.cpp'), from: 'cache' };
}

const BUNDLE = path.join(root, 'node_modules', 'node-llama-cpp', 'llama', 'gitRelease.bundle');
const CMAKE_FLAGS = ['-DCMAKE_BUILD_TYPE=Release', '-DGGML_NATIVE=ON', '-DLLAMA_CURL=OFF'];

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...opts });
  if (r.error) return { ok: false, out: String(r.error.message) };
  return { ok: r.status === 0, out: (r.stdout || '') + (r.stderr || '') };
}

/**
 * Finds llama-bench, building it (and cloning its source from node-llama-cpp's
 * bundle) when it is missing and that is allowed. Resolves with
 * {bin, dir, commit, built} or {bin: null, why}.
 */
export function prepareLlamaBench({ log = console.error, build = true } = {}) {
  if (process.env.LLAMA_BENCH) {
    const bin = path.resolve(process.env.LLAMA_BENCH);
    return fs.existsSync(bin) ? { bin, dir: null, commit: null, built: false } : { bin: null, why: `LLAMA_BENCH=${bin} does not exist` };
  }
  const { dir, from } = llamaCppDir();
  const bin = path.join(dir, 'build', 'bin', 'llama-bench');
  const commit = () => { const r = run('git', ['-C', dir, 'rev-parse', '--short=12', 'HEAD']); return r.ok ? r.out.trim() : null; };
  if (fs.existsSync(bin)) return { bin, dir, commit: commit(), built: false };
  if (process.env.CI) return { bin: null, why: `no ${bin}, and CI is set: llama.cpp is not fetched or built in CI` };
  if (!build) return { bin: null, why: `no ${bin} (building was not asked for)` };
  if (!fs.existsSync(path.join(dir, 'CMakeLists.txt'))) {
    if (from === 'LLAMA_CPP_DIR') return { bin: null, why: `LLAMA_CPP_DIR=${dir} is not a llama.cpp source tree (no CMakeLists.txt)` };
    if (!fs.existsSync(BUNDLE)) return { bin: null, why: `no llama.cpp source in ${dir} and no node-llama-cpp bundle to clone it from (${BUNDLE})` };
    if (fs.existsSync(dir) && fs.readdirSync(dir).length) return { bin: null, why: `${dir} exists but is not a llama.cpp source tree` };
    log(`cloning llama.cpp from ${BUNDLE} into ${dir}`);
    fs.mkdirSync(path.dirname(dir), { recursive: true });
    const c = run('git', ['clone', '--quiet', BUNDLE, dir]);
    if (!c.ok) return { bin: null, why: `git clone of ${BUNDLE} failed: ${c.out.trim().split('\n').pop()}` };
  }
  if (!run('cmake', ['--version']).ok) return { bin: null, why: 'cmake is not installed (apt-get install cmake)' };
  const logFile = path.join(dir, 'build', 'wasmlm-bench-build.log');
  fs.mkdirSync(path.dirname(logFile), { recursive: true });
  log(`building llama-bench in ${dir} (Release, GGML_NATIVE=ON; log: ${logFile}); this takes minutes, once`);
  const jobs = String(Math.max(1, os.availableParallelism ? os.availableParallelism() : os.cpus().length));
  for (const args of [['-S', dir, '-B', path.join(dir, 'build'), ...CMAKE_FLAGS], ['--build', path.join(dir, 'build'), '--target', 'llama-bench', '-j', jobs]]) {
    const r = run('cmake', args);
    fs.appendFileSync(logFile, `$ cmake ${args.join(' ')}\n${r.out}\n`);
    if (!r.ok) return { bin: null, why: `cmake ${args[0]} failed (see ${logFile})` };
  }
  return fs.existsSync(bin) ? { bin, dir, commit: commit(), built: true } : { bin: null, why: `the build finished without ${bin}` };
}

/**
 * One run of llama-bench on `file` at `threads`: prefill of `prompt` tokens
 * from an empty context, and decode of `gen` tokens after `prompt` tokens
 * of context (-d), each once (-r 1; llama-bench warms up first). Its
 * defaults otherwise: F16 KV cache, flash attention as it picks, batch 2048.
 * Returns {prefill, decode} in tokens/s and what llama-bench reports of itself.
 */
export function llamaBench(bin, file, { threads, prompt = 128, gen = 64 }) {
  const one = (args) => {
    const r = run(bin, ['-m', file, '-t', String(threads), '-r', '1', '-o', 'json', ...args]);
    if (!r.ok) throw new Error(`llama-bench ${args.join(' ')} on ${path.basename(file)} failed: ${r.out.trim().split('\n').slice(-3).join(' | ')}`);
    const json = JSON.parse(r.out.slice(r.out.indexOf('['), r.out.lastIndexOf(']') + 1));
    if (!json.length) throw new Error(`llama-bench ${args.join(' ')} reported no test`);
    return json[0];
  };
  const p = one(['-p', String(prompt), '-n', '0']);
  const d = one(['-p', '0', '-n', String(gen), '-d', String(prompt)]);
  return {
    prefill: p.avg_ts, decode: d.avg_ts,
    info: { build_commit: d.build_commit, cpu_info: d.cpu_info, backends: d.backends, type_k: d.type_k, type_v: d.type_v, flash_attn: d.flash_attn === -1 ? 'auto' : d.flash_attn, n_batch: d.n_batch },
  };
}

/** node-llama-cpp's configurations tried for the fallback: its decode at 2
 * threads was measured at a third of llama.cpp's on a Zen 4 host by default
 * and near it with libuv's pool (where its work runs) cut to one thread. */
export const NODE_LLAMA_CPP_CONFIGS = [
  { name: 'default', env: {} },
  { name: 'UV_THREADPOOL_SIZE=1', env: { UV_THREADPOOL_SIZE: '1' } },
];

/** Whether node-llama-cpp is installed (make bench installs it). */
export function nodeLlamaCppInstalled() {
  return fs.existsSync(path.join(root, 'node_modules', 'node-llama-cpp', 'package.json'));
}

/**
 * node-llama-cpp in a child process with `config`'s environment. Methods
 * resolve with the child's answers: open(file), rep(threads, {prompt, gen})
 * -> {prefill, decode}, sample(threads, {prompt, gen, grammar, seed, ...})
 * -> {msPerToken, tokens}, close(), exit().
 */
export function nodeLlamaCpp(config) {
  const child = fork(path.join(here, 'llamacpp-child.mjs'), [], { env: { ...process.env, ...config.env }, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  let pending = null;
  child.on('message', (m) => { const p = pending; pending = null; if (p) (m.error ? p.reject(new Error(m.error)) : p.resolve(m.result)); });
  child.on('exit', (code) => { const p = pending; pending = null; if (p) p.reject(new Error(`node-llama-cpp child exited (${code})`)); });
  const ask = (msg) => new Promise((resolve, reject) => { pending = { resolve, reject }; child.send(msg); });
  return {
    config: config.name,
    open: (file) => ask({ op: 'open', file }),
    rep: (threads, o = {}) => ask({ op: 'rep', threads, ...o }),
    sample: (threads, o = {}) => ask({ op: 'sample', threads, ...o }),
    close: () => ask({ op: 'close' }),
    exit: async () => { try { await ask({ op: 'exit' }); } catch { /* it exits */ } },
  };
}

/** The CPU's model and flags (/proc/cpuinfo where there is one), for the result files. */
export function hostCpu() {
  const cpu = { model: os.cpus()[0]?.model || 'unknown', cores: os.cpus().length, flags: [] };
  try {
    const info = fs.readFileSync('/proc/cpuinfo', 'utf8');
    const f = /^flags\s*:\s*(.*)$/m.exec(info) || /^Features\s*:\s*(.*)$/m.exec(info);
    if (f) cpu.flags = f[1].trim().split(/\s+/);
  } catch { /* not Linux */ }
  return cpu;
}

/** The SIMD-related CPU flags of hostCpu().flags, for a one-line host description. */
export function simdFlags(flags) {
  const want = /^(sse4_2|avx|avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_vnni|avx_vnni|avx_vnni_int8|avx512_bf16|avx512_fp16|amx_\w+|asimd|asimddp|sve|sve2|i8mm|fphp|asimdhp)$/;
  return flags.filter((f) => want.test(f));
}

/**
 * Bytes of weights a decode step reads: every tensor of the file but the
 * token embeddings (one row of them is read), which count in full when the
 * file has no output matrix (tied: they are the output projection). From the
 * GGUF header.
 */
export async function weightBytesPerToken(file) {
  const { readGgufHeader } = await import('../models/gguf-split.js');
  const h = readGgufHeader(file);
  const tensors = h.tensors;
  const tied = !tensors.some((t) => t.name === 'output.weight');
  let n = 0;
  for (const t of tensors) if (t.name !== 'token_embd.weight' || tied) n += t.nbytes;
  return n;
}
