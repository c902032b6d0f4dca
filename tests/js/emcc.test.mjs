// The engine built by Emscripten (`make wasm-emcc`: Debian's emcc 3.1.6,
// -sSTANDALONE_WASM, no Emscripten JS glue) loaded by our own glue through
// loadModel's `wasm` option: greedy generation equals llama.cpp's reference.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { loadModel } from '../../web/index.js';
import { ROOT, MODEL_PATH, reference } from './helpers.mjs';

const WASM = path.join(ROOT, 'wasm', 'wasmlm-emcc.wasm');
let emcc = null;
try { emcc = execFileSync('sh', ['-c', 'command -v emcc'], { encoding: 'utf8' }).trim() || null; } catch { emcc = null; }
const skip = !fs.existsSync(WASM) && !emcc
  ? 'emcc is not installed (apt-get install emscripten, or sh tools/setup.sh): the Emscripten build is not tested' : false;

test('Emscripten standalone build: only env.memory imported; greedy output equals the reference', { skip }, async () => {
  if (!fs.existsSync(WASM)) execFileSync('make', ['--no-print-directory', 'wasm/wasmlm-emcc.wasm'], { cwd: ROOT, stdio: 'inherit', timeout: 300000 });
  assert.ok(fs.existsSync(WASM), `${WASM} was not built`);
  const mod = await WebAssembly.compile(fs.readFileSync(WASM));
  assert.deepEqual(WebAssembly.Module.imports(mod), [{ module: 'env', name: 'memory', kind: 'memory' }]);
  const ref = reference().results[0];
  const model = await loadModel(MODEL_PATH, { wasm: WASM });
  try {
    assert.equal(model.simd, 'custom');
    const r = await model.complete(ref.prompt, { temperature: 0, repeatPenalty: 1, ignoreEos: true, maxTokens: 200 });
    assert.deepEqual(r.tokens, ref.generated_token_ids);
    assert.equal(r.text, ref.generated_text);
  } finally {
    await model.dispose();
  }
});
