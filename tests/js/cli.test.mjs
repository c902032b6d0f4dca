// The command line: wasm (default) and --native (build/wasmlm-native).
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MODEL_PATH, NATIVE_SKIP, reference, runCli } from './helpers.mjs';
import { loadModel } from '../../web/index.js';

const REF = reference();
const GREEDY_ARGS = ['-n', '200', '--temp', '0', '--repeat-penalty', '1', '--ignore-eos'];

for (const r of REF.results) {
  test(`CLI (wasm) greedy from ${JSON.stringify(r.prompt)}: stdout is exactly the reference continuation`, async () => {
    const out = await runCli(['generate', '-m', 'stories260K', '-p', r.prompt, ...GREEDY_ARGS]);
    assert.equal(out.code, 0, out.stderr);
    assert.equal(out.stdout, r.generated_text);
    assert.match(out.stderr, /generated 200 tokens/);
  });

  test(`CLI --native greedy from ${JSON.stringify(r.prompt)}: stdout is exactly the reference continuation`, { skip: NATIVE_SKIP }, async () => {
    const out = await runCli(['generate', '--native', '-m', 'stories260K', '-p', r.prompt, ...GREEDY_ARGS]);
    assert.equal(out.code, 0, out.stderr);
    assert.equal(out.stdout, r.generated_text);
  });
}

test('same seed gives identical tokens in wasm and native (--temp 0.8 --seed 42)', { skip: NATIVE_SKIP }, async () => {
  const args = ['generate', '-m', MODEL_PATH, '-p', 'Once upon a time', '-n', '120', '--temp', '0.8', '--seed', '42', '--ignore-eos'];
  const [native, wasmCli] = await Promise.all([runCli([...args, '--native']), runCli(args)]);
  assert.equal(native.code, 0, native.stderr);
  assert.equal(wasmCli.code, 0, wasmCli.stderr);
  const m = await loadModel(MODEL_PATH);
  try {
    const api = await m.complete('Once upon a time', { maxTokens: 120, temperature: 0.8, seed: 42, ignoreEos: true });
    assert.equal(api.tokens.length, 120);
    assert.equal(native.stdout, api.text);
    assert.equal(wasmCli.stdout, api.text);
    const greedy = await m.complete('Once upon a time', { maxTokens: 120, temperature: 0, ignoreEos: true });
    assert.notEqual(api.text, greedy.text, 'sampling differs from greedy');
  } finally { await m.dispose(); }
  // WASMLM_NATIVE=1 selects the native build too
  const env = await runCli(args, { env: { WASMLM_NATIVE: '1' } });
  assert.equal(env.stdout, native.stdout);
});

test('CLI default sampling is the API default (wasm and native agree without flags)', { skip: NATIVE_SKIP }, async () => {
  const args = ['generate', '-m', 'stories260K', '-p', 'Once upon a time', '-n', '60'];
  const [a, b] = await Promise.all([runCli(args), runCli([...args, '--native'])]);
  assert.equal(a.code, 0, a.stderr);
  assert.equal(b.code, 0, b.stderr);
  assert.equal(a.stdout, b.stdout);
  const m = await loadModel('stories260K');
  try {
    assert.equal(a.stdout, (await m.complete('Once upon a time', { maxTokens: 60 })).text);
  } finally { await m.dispose(); }
});

test('CLI info prints metadata and the tensor table', async () => {
  const out = await runCli(['info', 'stories260K']);
  assert.equal(out.code, 0, out.stderr);
  assert.match(out.stdout, /general\.architecture = "llama"/);
  assert.match(out.stdout, /tokenizer\.ggml\.tokens = \[.*\(512 string\)\]/);
  assert.match(out.stdout, /token_embd\.weight\s+F32\s+64 x 512/);
  const json = await runCli(['info', MODEL_PATH, '--json']);
  const info = JSON.parse(json.stdout);
  assert.equal(info.hparams.nLayer, 5);
  assert.equal(info.tensors.length, Object.keys(info.tensors).length);
});

test('CLI errors: bad usage exits 2, a bad model exits 1 with the engine message', async () => {
  const u = await runCli(['generate', '--bogus']);
  assert.equal(u.code, 2);
  assert.match(u.stderr, /unknown option --bogus/);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-cli-'));
  const bad = path.join(dir, 'bad.gguf');
  fs.writeFileSync(bad, 'not a gguf file at all, not at all');
  const b = await runCli(['generate', '-m', bad, '-p', 'x']);
  assert.equal(b.code, 1);
  assert.match(b.stderr, /^error: model file .*bad\.gguf: not a GGUF file/m);
  assert.equal(b.stdout, '');
  const cut = path.join(dir, 'cut.gguf');
  fs.writeFileSync(cut, fs.readFileSync(MODEL_PATH).subarray(0, 100));
  const c = await runCli(['generate', '-m', cut, '-p', 'x']);
  assert.equal(c.code, 1);
  assert.match(c.stderr, /^error: cannot load model: /m);
});

for (const type of ['q8_0', 'q4_0']) {
  test(`CLI quantize to ${type}: the output loads and generates`, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-q-'));
    const out = path.join(dir, `stories260K-${type}.gguf`);
    const r = await runCli(['quantize', 'stories260K', out, type]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(fs.existsSync(out));
    const lines = r.stdout.trim().split('\n');
    assert.ok(lines.length >= 10, r.stdout);
    assert.match(r.stdout, new RegExp(`wrote .*${type}\\.gguf \\(\\d+ bytes\\)`));
    assert.ok(fs.statSync(out).size < fs.statSync(MODEL_PATH).size, 'quantized file is smaller');
    const m = await loadModel(out);
    try {
      assert.ok(m.info.tensors.some((t) => t.typeName.toLowerCase() === type), 'some tensors are ' + type);
      const g = await m.complete('Once upon a time', { temperature: 0, repeatPenalty: 1, maxTokens: 40, ignoreEos: true });
      assert.equal(g.tokens.length, 40);
      assert.ok(g.text.length > 20);
      if (type === 'q8_0') {
        // 8-bit weights keep the greedy story's start
        assert.deepEqual(g.tokens.slice(0, 8), REF.results[0].generated_token_ids.slice(0, 8));
      }
    } finally { await m.dispose(); }
    if (!NATIVE_SKIP) {
      const nout = path.join(dir, `native-${type}.gguf`);
      const n = await runCli(['quantize', MODEL_PATH, nout, type, '--native']);
      assert.equal(n.code, 0, n.stderr);
      assert.ok(fs.readFileSync(nout).equals(fs.readFileSync(out)), 'native and wasm quantize write identical files');
    }
  });
}
