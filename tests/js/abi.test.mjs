// The generated wasm ABI (web/worker/abi.js, tools/gen-abi.c): the committed
// file matches what the generator prints for today's src/wlm.h, and no other
// file of web/ keeps a struct offset by hand.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { ROOT } from './helpers.mjs';

const hasClang = (() => {
  try { execFileSync('sh', ['-c', 'command -v clang-19'], { stdio: 'ignore' }); return true; } catch { return false; }
})();

test('web/worker/abi.js is what tools/gen-abi.c prints for src/wlm.h, both tables (make abi)', { skip: !hasClang && 'clang-19 is not installed' }, () => {
  execFileSync('make', ['-s', 'build/abi.js'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  const fresh = fs.readFileSync(path.join(ROOT, 'build', 'abi.js'), 'utf8');
  const committed = fs.readFileSync(path.join(ROOT, 'web', 'worker', 'abi.js'), 'utf8');
  assert.ok(fresh.includes('export const ABI32 = ') && fresh.includes('export const ABI64 = '), 'the wasm32 and the native run each printed their table');
  assert.ok(fresh === committed, 'web/worker/abi.js is stale: run `make abi` and commit it');
});

test('ABI64 is the wasm64 builds\' layout: the structs compiled for wasm64 meet every offset and size of the native table (make abi-check64)', { skip: !hasClang && 'clang-19 is not installed' }, () => {
  execFileSync('make', ['-s', 'abi-check64'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  const asserts = fs.readFileSync(path.join(ROOT, 'build', 'abi-asserts.h'), 'utf8');
  assert.ok(asserts.includes('offsetof(wlm_js_scratch, ptr) == 264 && sizeof(((wlm_js_scratch *)0)->ptr) == 8'), 'the out-pointer slot is 8 bytes');
  assert.ok(asserts.includes('offsetof(wlm_sampler_params, biases) == 40 && sizeof(((wlm_sampler_params *)0)->biases) == 8'), 'a pointer is 8 bytes');
  assert.ok((asserts.match(/_Static_assert/g) || []).length > 60);
});

test('abi-check64 fails on a table that is not wasm64\'s (the check can fail)', { skip: !hasClang && 'clang-19 is not installed' }, () => {
  const wrong = path.join(os.tmpdir(), `wasmlm-abi-wrong-${process.pid}.h`);
  fs.writeFileSync(wrong, '_Static_assert(sizeof(wlm_sampler_params) == 44, "wlm_sampler_params: 44 bytes (the wasm32 size)");\n');
  try {
    assert.throws(() => execFileSync('clang-19', ['--target=wasm64', '-ffreestanding', '-fsyntax-only', '-Isrc', `-DWLM_ABI_CHECK="${wrong}"`, 'tools/gen-abi.c'],
      { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] }), /44 bytes \(the wasm32 size\)/);
  } finally { fs.rmSync(wrong, { force: true }); }
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

test('web/ takes its layouts from the build\'s table: abi.js is imported for abiFor only, out-pointers are read at the build\'s width', () => {
  // a layout imported by name would be one width's whatever the build (ABI32 in a
  // wasm64 engine: pointers written as 4 bytes); an out-pointer read as a u32 loses
  // the high half of a wasm64 address (getPtr / setPtr in heap.js)
  const found = [];
  for (const f of jsFiles(path.join(ROOT, 'web'))) {
    if (f.endsWith(path.join('worker', 'abi.js'))) continue;
    fs.readFileSync(f, 'utf8').split('\n').forEach((line, i) => {
      const imp = /import\s*\{([^}]*)\}\s*from\s*'[./]*(?:worker\/)?abi\.js'/.exec(line);
      if ((imp && imp[1].trim() !== 'abiFor') || /\.(get|set)(Uint|Int)32\([^)]*at\('ptr'\)/.test(line)) found.push(`${path.relative(ROOT, f)}:${i + 1}: ${line.trim()}`);
    });
  }
  assert.deepEqual(found, []);
});

test('the generated readers and writers round-trip in both tables; a pointer is 4 bytes in ABI32 and 8 in ABI64', async () => {
  const { ABI32, ABI64, abiFor } = await import('../../web/worker/abi.js');
  assert.equal(abiFor(false), ABI32);
  assert.equal(abiFor(true), ABI64);
  assert.deepEqual([ABI32.ptrBytes, ABI64.ptrBytes], [4, 8]);
  const v = { temperature: 0.5, topK: 40, topP: 0.75, minP: 0.125, repeatPenalty: 1.5, repeatLastN: 64,
    presencePenalty: 0.25, frequencyPenalty: -0.5, typicalP: 0.875, nBiases: 3 };
  const POINTERS = ['biases', 'allow'];   // the pointer fields of wlm_sampler_params
  for (const [abi, top] of [[ABI32, 2 ** 32], [ABI64, 2 ** 34]]) {
    for (const [biases, allow] of [[4096, 8192], [top - 16, top - 8]]) {
      const dv = new DataView(new ArrayBuffer(abi.SCRATCH.size));
      const p = abi.SCRATCH.sampler, w = { ...v, biases, allow };
      abi.writeSamplerParams(dv, p, w);
      assert.deepEqual(abi.readSamplerParams(dv, p), w, `ptrBytes ${abi.ptrBytes}, pointers ${biases} ${allow}`);
      // each pointer's bytes are where the table says, at the build's width
      for (const f of POINTERS) {
        const at = p + abi.SAMPLER_PARAMS[f];
        assert.equal(abi.ptrBytes === 8 ? Number(dv.getBigUint64(at, true)) : dv.getUint32(at, true), w[f], f);
        assert.equal(abi.SAMPLER_PARAMS[f] % abi.ptrBytes, 0, `${f} is aligned`);
        assert.ok(abi.SAMPLER_PARAMS[f] + abi.ptrBytes <= abi.SAMPLER_PARAMS.size);
      }
    }
    assert.deepEqual({ ...abi.LOGIT_BIAS }, { size: 8, token: 0, bias: 4 });
    assert.ok(abi.SCRATCH.rng % 8 === 0 && abi.SCRATCH.u64 % 8 === 0 && abi.SCRATCH.sampler % 8 === 0, 'u64 and pointer fields are 8-aligned');
    assert.ok(abi.SCRATCH.sampler + abi.SAMPLER_PARAMS.size <= abi.SCRATCH.rng, 'the scratch holds the sampler params of its width');
  }
  assert.deepEqual([ABI32.SAMPLER_PARAMS.size, ABI32.SAMPLER_PARAMS.allow], [48, 44]);
  assert.deepEqual([ABI64.SAMPLER_PARAMS.size, ABI64.SAMPLER_PARAMS.allow], [56, 48]);
  assert.ok(ABI64.SCRATCH.rng > ABI32.SCRATCH.rng, 'the fields after the sampler params move in wasm64');
  // a wasm64 address above 4 GiB keeps its high bytes
  const dv = new DataView(new ArrayBuffer(64));
  ABI64.writeSamplerParams(dv, 0, { biases: 2 ** 32 + 16, allow: 3 * 2 ** 32 + 32 });
  assert.equal(dv.getUint32(ABI64.SAMPLER_PARAMS.biases + 4, true), 1);
  assert.equal(dv.getUint32(ABI64.SAMPLER_PARAMS.allow + 4, true), 3);
});

test('the engine takes the table of its build (WasmHeap.abi)', async () => {
  const { ABI32 } = await import('../../web/worker/abi.js');
  const { Engine } = await import('../../web/worker/engine.js');
  const eng = await Engine.create(fs.readFileSync(path.join(ROOT, 'wasm', 'wasmlm.wasm')));
  try {
    assert.equal(eng.abi, ABI32);
    assert.equal(eng.abi.ptrBytes, eng.ptrBytes);
  } finally { eng.dispose(); }
});
