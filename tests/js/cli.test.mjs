// The command line: wasm (default) and --native (build/wasmlm-native); its flag table against the options schema; Ctrl-C in chat.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MODEL_PATH, NATIVE_BIN, NATIVE_SKIP, reference, runCli } from './helpers.mjs';
import { loadModel, DEFAULT_SAMPLING } from '../../web/index.js';
import { usage, OPTION_FLAGS, parseArgs, chatInterrupt } from '../../web/cli/cli.js';
import { OPTIONS, METHODS } from '../../web/options.js';

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

test('the native CLI\'s own defaults (src/cli/common.c, no flags at all) equal the options schema\'s: same text as complete() with no options', { skip: NATIVE_SKIP }, async () => {
  const { spawnSync } = await import('node:child_process');
  const r = spawnSync(NATIVE_BIN, ['generate', '-m', MODEL_PATH, '-p', 'Once upon a time'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const m = await loadModel(MODEL_PATH, { threads: 1 });
  try {
    assert.equal(r.stdout, (await m.complete('Once upon a time')).text);
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

// ---- the flag table is the options schema's -------------------------------------

test('CLI flags name options of the schema; the help lists their docs and defaults', () => {
  const help = usage({ native: false });
  for (const [name, flags] of OPTION_FLAGS) {
    assert.ok(OPTIONS[name], `${flags[0]} maps to ${name}, an option of web/options.js`);
    assert.ok(METHODS.generate.includes(name) || METHODS.loadModel.includes(name) || METHODS.embed.includes(name), `${name} is a sampling, load or embed option`);
    assert.ok(help.includes(flags.join(', ')), `help lists ${flags.join(', ')}`);
    assert.ok(help.includes(OPTIONS[name].doc), `help gives the doc of ${name}`);
    const d = OPTIONS[name].default;
    if (d !== undefined && OPTIONS[name].kind !== 'boolean') assert.ok(help.includes(`(default ${d}`), `help gives the default of ${name}: ${d}`);
  }
  // every sampling default of the API has its flag
  for (const name of Object.keys(DEFAULT_SAMPLING)) assert.ok(OPTION_FLAGS.some(([n]) => n === name), `a flag for ${name}`);
});

test('CLI value flags are parsed and range-checked by the schema, errors name the flag', async () => {
  assert.equal(parseArgs(['generate', '--top-p', '0.5']).opts.topP, 0.5);
  assert.equal(parseArgs(['generate', '--kv', 'f16']).opts.kvType, 'f16');
  assert.throws(() => parseArgs(['generate', '--top-p', '1.5']), (e) => e.code === 'BAD_OPTION' && /^option --top-p: must be a number in \[0, 1\], got 1\.5$/.test(e.message));
  assert.throws(() => parseArgs(['generate', '-t', '0']), (e) => e.code === 'BAD_OPTION' && /option -t: must be an integer in \[1, 64\]/.test(e.message));
  assert.throws(() => parseArgs(['generate', '--kv', 'q8']), (e) => e.code === 'BAD_OPTION' && /--kv.*'f32', 'f16'/.test(e.message));
  assert.throws(() => parseArgs(['generate', '--seed', '-1']), (e) => e.code === 'BAD_OPTION' && /--seed/.test(e.message));
  const out = await runCli(['generate', '-m', 'stories260K', '-p', 'x', '--top-p', '1.5']);
  assert.equal(out.code, 2);
  assert.equal(out.stderr, 'error: option --top-p: must be a number in [0, 1], got 1.5\n');
});

test('CLI help shows --native only where the native build exists', async () => {
  assert.ok(!usage({ native: false }).includes('--native'));
  assert.match(usage({ native: true }), /--native \(or WASMLM_NATIVE=1\) runs this checkout's build\/wasmlm-native/);
  const h = await runCli(['--help']);
  assert.equal(h.code, 0);
  assert.equal(h.stdout.includes('--native'), !NATIVE_SKIP);
});

test('chat Ctrl-C: stops an answer; at the prompt the first warns, a second in a row exits', () => {
  let s = { answering: false, armed: false };
  const press = () => { const [a, next] = chatInterrupt(s); s = next; return a; };
  assert.equal(press(), 'warn');
  assert.equal(press(), 'exit');
  s = { answering: true, armed: true };
  assert.equal(press(), 'stop');
  s = { ...s, answering: false };
  assert.equal(press(), 'warn', 'the first Ctrl-C after a stopped answer only warns');
  assert.equal(press(), 'exit');
});
