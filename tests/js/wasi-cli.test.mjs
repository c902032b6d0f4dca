// The WASI command build of the CLI (wasm/wasmlm-cli.wasm from
// src/cli/wasi.c) run by node:wasi through web/cli/wasi-cli.js: greedy output
// equals llama.cpp's reference, batch prompts give JSON lines, failures
// name the problem and exit non-zero.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { ROOT, MODEL_PATH, reference } from './helpers.mjs';

const RUNNER = path.join(ROOT, 'web', 'cli', 'wasi-cli.js');

function run(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [RUNNER, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [], err = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => err.push(d));
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error('wasi cli timed out')); }, 120000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') });
    });
  });
}

test('wasi cli: greedy generation of 200 tokens equals the reference text', async () => {
  assert.ok(fs.existsSync(path.join(ROOT, 'wasm', 'wasmlm-cli.wasm')), 'wasm/wasmlm-cli.wasm is built by make wasm');
  const ref = reference().results[0];
  const r = await run(['generate', '-m', MODEL_PATH, '-p', ref.prompt, '-n', '200', '--temp', '0', '--repeat-penalty', '1', '--ignore-eos']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, ref.generated_text + '\n');
  assert.match(r.stderr, /1 prompt, 5 prompt tokens at [\d.]+ tok\/s, 200 generated/);
});

test('wasi cli: --prompts FILE --jsonl generates each line from a fresh context', async () => {
  const refs = reference().results;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-wasi-'));
  try {
    const file = path.join(dir, 'prompts.txt');
    fs.writeFileSync(file, `${refs[0].prompt}\r\n\n${refs[0].prompt}\n`);
    const r = await run(['generate', '-m', MODEL_PATH, '--prompts', file, '-n', '30', '--temp', '0', '--repeat-penalty', '1', '--ignore-eos', '--jsonl']);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(lines.length, 2);
    for (const l of lines) {
      assert.equal(l.prompt, refs[0].prompt);
      assert.deepEqual(l.tokens, refs[0].generated_token_ids.slice(0, 30));
      assert.ok(refs[0].generated_text.startsWith(l.text));
      assert.equal(l.finish, 'length');
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('wasi cli: a missing file and a bad flag are named, with a non-zero exit', async () => {
  const missing = await run(['generate', '-m', '/nonexistent/model.gguf', '-p', 'x']);
  assert.notEqual(missing.code, 0);
  assert.match(missing.stderr, /error: cannot open \/nonexistent\/model\.gguf/);
  const bad = await run(['generate', '-m', MODEL_PATH, '-p', 'x', '--kv', 'q4']);
  assert.notEqual(bad.code, 0);
  assert.match(bad.stderr, /--kv must be f16 or f32, not q4/);
  const notGguf = await run(['info', RUNNER]);
  assert.notEqual(notGguf.code, 0);
  assert.match(notGguf.stderr, /not a GGUF file/);
});
