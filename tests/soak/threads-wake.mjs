#!/usr/bin/env node
// Hangs of the compute threads across fresh processes. Once (see WAIT_NS in
// src/threads.c) a thread sleeping in memory.atomic.wait32 without a timeout
// missed a notify, and a 2-thread F16 prefill of s110m hung in about one
// fresh process of three. Runs N fresh processes, each loading the model
// with 2 threads and prefilling a 3-token prompt, and counts those that did
// not finish within --timeout seconds. Too slow for the unit tests (the
// model is 269 MB): run it after changing src/threads.c or the thread workers.
//
//   node [--experimental-wasm-relaxed-simd] tests/soak/threads-wake.mjs [N=12] [--timeout 20] [--model FILE]
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { model } from '../../bench/common.mjs';

const args = process.argv.slice(2);
const opt = (k, d) => { const i = args.indexOf('--' + k); return i >= 0 ? args[i + 1] : d; };
const N = Number(args.find((a) => /^\d+$/.test(a)) || 12), timeout = Number(opt('timeout', 20));
if (process.argv[2] === '--child') {
  const { loadModel } = await import('../../web/index.js');
  const m = await loadModel(process.argv[3], { threads: 2, contextLength: 512 });
  const r = await m.complete([10, 11, 12], { maxTokens: 1, temperature: 0 });
  await m.dispose();
  console.log(r.tokens.length);
} else {
  const file = opt('model', null) || model('s110m', 'f16');
  const flags = process.execArgv;   // e.g. --experimental-wasm-relaxed-simd: the children run the same builds
  let hung = 0;
  for (let i = 0; i < N; i++) {
    const r = spawnSync(process.execPath, [...flags, fileURLToPath(import.meta.url), '--child', file], { timeout: timeout * 1000, encoding: 'utf8' });
    const ok = r.status === 0 && r.stdout.trim() === '1';
    if (!ok) hung++;
    console.log(`run ${i + 1}: ${ok ? 'ok' : r.signal ? `no answer in ${timeout} s (killed)` : `failed: ${(r.stderr || '').trim().split('\n').pop()}`}`);
  }
  console.log(`${hung} of ${N} runs hung or failed`);
  process.exit(hung ? 1 : 0);
}
