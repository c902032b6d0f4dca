// The generated wasm ABI (web/worker/abi.js, tools/gen-abi.c): the committed
// file matches what the generator prints for today's src/wlm.h, and no other
// file of web/ keeps a struct offset by hand.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { ROOT } from './helpers.mjs';

const hasClang = (() => {
  try { execFileSync('sh', ['-c', 'command -v clang-19'], { stdio: 'ignore' }); return true; } catch { return false; }
})();

test('web/worker/abi.js is what tools/gen-abi.c prints for src/wlm.h (make abi)', { skip: !hasClang && 'clang-19 is not installed' }, () => {
  execFileSync('make', ['-s', 'build/abi.js'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  const fresh = fs.readFileSync(path.join(ROOT, 'build', 'abi.js'), 'utf8');
  const committed = fs.readFileSync(path.join(ROOT, 'web', 'worker', 'abi.js'), 'utf8');
  assert.ok(fresh === committed, 'web/worker/abi.js is stale: run `make abi` and commit it');
});

test('the wasm64 builds have the same layouts: the structs compiled for wasm64 meet every wasm32 offset and size (make abi-check64)', { skip: !hasClang && 'clang-19 is not installed' }, () => {
  execFileSync('make', ['-s', 'abi-check64'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  const asserts = fs.readFileSync(path.join(ROOT, 'build', 'abi-asserts.h'), 'utf8');
  assert.ok(asserts.includes('offsetof(wlm_js_scratch, ptr) == 264 && sizeof(((wlm_js_scratch *)0)->ptr) == 8'), 'the out-pointer slot is 8 bytes');
  assert.ok((asserts.match(/_Static_assert/g) || []).length > 60);
});

function jsFiles(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const f = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'demo' ? [] : jsFiles(f);
    return e.name.endsWith('.js') ? [f] : [];
  });
}

test('no numeric struct offset in web/ outside the generated abi.js', () => {
  // a DataView access at pointer + literal, or a scratch slot by number
  const patterns = [/\.(get|set)(Uint|Int|Float|BigUint|BigInt)(8|16|32|64)\(\s*[\w.]+\s*\+\s*\d+/, /scratch\s*\+\s*\d+/, /\b[Ss]_[A-Z0-9]+\s*=\s*\d+/];
  const found = [];
  for (const f of jsFiles(path.join(ROOT, 'web'))) {
    if (f.endsWith(path.join('worker', 'abi.js'))) continue;
    fs.readFileSync(f, 'utf8').split('\n').forEach((line, i) => {
      if (patterns.some((re) => re.test(line))) found.push(`${path.relative(ROOT, f)}:${i + 1}: ${line.trim()}`);
    });
  }
  assert.deepEqual(found, []);
});

test('the generated readers and writers round-trip', async () => {
  const abi = await import('../../web/worker/abi.js');
  const dv = new DataView(new ArrayBuffer(abi.SCRATCH.size));
  const p = abi.SCRATCH.sampler;
  const v = { temperature: 0.5, topK: 40, topP: 0.75, minP: 0.125, repeatPenalty: 1.5, repeatLastN: 64,
    presencePenalty: 0.25, frequencyPenalty: -0.5, typicalP: 0.875, nBiases: 3, biases: 4096, allow: 8192 };
  abi.writeSamplerParams(dv, p, v);
  assert.deepEqual(abi.readSamplerParams(dv, p), v);
  assert.equal(abi.SAMPLER_PARAMS.size, 48);
  assert.deepEqual({ ...abi.LOGIT_BIAS }, { size: 8, token: 0, bias: 4 });
  assert.ok(abi.SCRATCH.rng % 8 === 0 && abi.SCRATCH.u64 % 8 === 0, 'u64 fields are 8-aligned');
});
