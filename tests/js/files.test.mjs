// Model files given to loadModel(path) and the CLI, exact text round trips,
// clear messages (issue #25, findings 10, 11, 12, 13a; docs/hardening.md,
// "Model files, exact text, clear messages").
//   - a directory, an empty file, a huge non-GGUF file: BAD_FILE naming the
//     file, the header checked on the first bytes (a 2 GiB file is not read)
//   - a FIFO (with a writer: loads; without: abort still works), `-m <(cat f)`
//   - streamed bytes (loadBegin/loadChunk): the same header check
//   - U+FEFF survives detokenize and streamed generation
//   - out-of-memory messages: "needs N more bytes of memory (X in use, limit M)", N + X > M
//   - a prompt that tokenizes to nothing on a model without BOS says so
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawn } from 'node:child_process';
import { MODEL_PATH, CLI, runCli } from './helpers.mjs';
import { loadModel } from '../../web/index.js';
import { Engine } from '../../web/worker/engine.js';
import { makeModel } from '../../models/make-model.js';
import { parseGGUF, serializeGGUF, encodeValue, baseModels } from '../../tools/make-hostile.mjs';
import { T } from '../../models/gguf-writer.js';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wlm-files-'));
test.after(() => fs.rmSync(DIR, { recursive: true, force: true }));
const GREEDY = { temperature: 0, repeatPenalty: 1, ignoreEos: true };
const NOMEM_RE = /needs (\d+) more bytes of memory \((\d+) in use, limit (\d+)\)/;

let fifoCount = 0;
function makeFifo() {
  const p = path.join(DIR, `fifo-${fifoCount++}`);
  execFileSync('mkfifo', [p]);
  return p;
}

/** Writes `bytes` into FIFO `p` (opening it waits for the reader): the first 2 bytes alone, then the rest. */
function feedFifo(p, bytes) {
  const w = fs.createWriteStream(p);
  w.write(bytes.subarray(0, 2));
  setTimeout(() => w.end(bytes.subarray(2)), 100);
  return new Promise((resolve, reject) => { w.on('close', resolve); w.on('error', reject); });
}

/** Lets a reader stuck in a blocking open of FIFO `p` go (it then sees an empty stream). */
function releaseFifo(p) {
  try { fs.closeSync(fs.openSync(p, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK)); } catch { /* no reader left */ }
}

/** `promise`, or a rejection naming `what` after `ms` (a hang fails the test instead of stalling it). */
function within(promise, ms, what) {
  let timer;
  const late = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms); });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

function badFile(re) {
  return (e) => {
    assert.equal(e.code, 'BAD_FILE', `${e.code}: ${e.message}`);
    assert.match(e.message, re);
    return true;
  };
}

// ---- finding 12: paths that are not regular GGUF files ------------------------------

test('a directory as the model path: BAD_FILE "is a directory"', async () => {
  await assert.rejects(loadModel(DIR), badFile(new RegExp(`model file ${DIR} is a directory`)));
});

test('a 2 GiB file that is not GGUF fails on its first bytes, naming the file', async () => {
  const big = path.join(DIR, 'big.bin');
  fs.writeFileSync(big, 'PK\x03\x04 a zip, not a model');
  fs.truncateSync(big, 2 ** 31); // sparse: no disk used
  try {
    const t0 = performance.now();
    await assert.rejects(loadModel(big), badFile(new RegExp(`model file ${big}: not a GGUF file \\(magic 0x4034b50`)));
    assert.ok(performance.now() - t0 < 10000, 'failed without reading the file');
  } finally { fs.rmSync(big); }
});

test('an empty file and a 2-byte file: BAD_FILE naming the file', async () => {
  const empty = path.join(DIR, 'empty.gguf'), two = path.join(DIR, 'two.gguf');
  fs.writeFileSync(empty, '');
  fs.writeFileSync(two, 'GG');
  await assert.rejects(loadModel(empty), badFile(new RegExp(`model file ${empty}: not a GGUF file: empty file`)));
  await assert.rejects(loadModel(two), badFile(new RegExp(`model file ${two}: not a GGUF file: only 2 bytes`)));
});

test('a FIFO with a writer loads as a stream of unknown size and generates as the file does', async () => {
  const bytes = fs.readFileSync(MODEL_PATH);
  const fifo = makeFifo();
  const fed = feedFifo(fifo, bytes);
  const seen = [];
  const m = await within(loadModel(fifo, { onProgress: (p) => seen.push(p) }), 60000, 'loading the FIFO');
  await fed;
  const ref = await loadModel(MODEL_PATH);
  try {
    assert.equal(m.info.fileSize, bytes.length);
    const { rate, ...last } = seen.at(-1);
    assert.deepEqual(last, { loaded: bytes.length, total: bytes.length });
    assert.ok(Number.isInteger(rate) && rate >= 0, `progress has a rate in bytes/s, got ${rate}`);
    const a = await m.complete('Once upon a time', { ...GREEDY, maxTokens: 8 });
    const b = await ref.complete('Once upon a time', { ...GREEDY, maxTokens: 8 });
    assert.deepEqual(a.tokens, b.tokens);
  } finally { await m.dispose(); await ref.dispose(); }
});

test('a FIFO load leaves alone the descriptors opened after it (was: the worker closed the FIFO a second time as it exited)', async () => {
  // Node's workers close on exit what they opened with fs.open; the FIFO was
  // handed to a socket that had closed it already, so its number, free again,
  // was closed under whoever held it by then: another thread's event loop (abort)
  const bytes = fs.readFileSync(MODEL_PATH);
  const fifo = makeFifo();
  const fed = feedFifo(fifo, bytes);
  const m = await within(loadModel(fifo), 60000, 'loading the FIFO');
  await fed;
  const fds = Array.from({ length: 16 }, () => fs.openSync(MODEL_PATH, 'r'));   // the lowest free numbers, the FIFO's among them
  try {
    await m.dispose();
    for (const fd of fds) assert.ok(fs.fstatSync(fd).isFile(), `descriptor ${fd} is still open`);
  } finally {
    for (const fd of fds) { try { fs.closeSync(fd); } catch { /* already closed: the failure above */ } }
  }
});

test('a FIFO nobody writes to does not freeze the worker: abort ends the load', async () => {
  const fifo = makeFifo();
  const ac = new AbortController();
  setTimeout(() => ac.abort(), 300);
  try {
    await within(assert.rejects(loadModel(fifo, { signal: ac.signal }), (e) => e.name === 'AbortError'), 20000, 'the aborted FIFO load');
  } finally { releaseFifo(fifo); }
});

test('a FIFO fed non-GGUF bytes fails with BAD_FILE', async () => {
  const fifo = makeFifo();
  const fed = feedFifo(fifo, Buffer.from('not a model at all'));
  await within(assert.rejects(loadModel(fifo), badFile(new RegExp(`model file ${fifo}: not a GGUF file \\(magic`))), 20000, 'the FIFO load');
  await fed.catch(() => { /* the reader may close first */ });
});

// ---- the same header check on streamed bytes (loadBegin/loadChunk) --------------------

test('streamed bytes: the first chunk is checked for the GGUF magic, also when split', async () => {
  const good = fs.readFileSync(MODEL_PATH);
  await assert.rejects(loadModel(Buffer.concat([Buffer.from('GGML'), good.subarray(4, 4096)])),
    badFile(/^the model bytes: not a GGUF file \(magic 0x4c4d4747/));
  async function* split(head, rest) { yield head; yield rest; }
  await assert.rejects(loadModel(split(Buffer.from('GG'), Buffer.from('MLxxxxxxxx'))), badFile(/not a GGUF file \(magic 0x4c4d4747/));
  const m = await loadModel(split(good.subarray(0, 2), good.subarray(2)));
  assert.equal(m.info.fileSize, good.length);
  await m.dispose();
});

// ---- the CLI ----------------------------------------------------------------------------

test('CLI: a directory, a big non-GGUF file: exit 1 with a message naming the file', async () => {
  let r = await runCli(['generate', '-m', DIR, '-p', 'x', '-n', '1']);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, new RegExp(`error: model file ${DIR} is a directory`));
  const big = path.join(DIR, 'big-cli.bin');
  fs.writeFileSync(big, '\x7fELF binary');
  fs.truncateSync(big, 2 ** 31);
  try {
    r = await runCli(['generate', '-m', big, '-p', 'x', '-n', '1']);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`error: model file ${big}: not a GGUF file \\(magic 0x464c457f`));
  } finally { fs.rmSync(big); }
});

test('CLI: -m a FIFO fed by a writer, and -m <(cat file), generate', async () => {
  const fifo = makeFifo();
  const fed = feedFifo(fifo, fs.readFileSync(MODEL_PATH));
  const r = await runCli(['generate', '-m', fifo, '-p', 'Once upon a time', '-n', '3', '--temp', '0']);
  await fed;
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /generated 3 tokens/);
  const sub = await new Promise((resolve, reject) => {
    const q = (s) => `'${s.replace(/'/g, "'\\''")}'`;
    const child = spawn('bash', ['-c', `${q(process.execPath)} ${q(CLI)} generate -m <(cat ${q(MODEL_PATH)}) -p 'Once upon a time' -n 3 --temp 0`],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error('cli with <(cat f) timed out')); }, 120000);
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, stdout: out, stderr: err }); });
  });
  assert.equal(sub.code, 0, sub.stderr);
  assert.equal(sub.stdout, r.stdout);
});

// ---- finding 11: U+FEFF is text ---------------------------------------------------------

const BOM_CASES = ['\ufeffx', 'x\ufeffy', 'xy\ufeff', '\ufeff', '\ufeff\ufeff'];

test('tokenize -> detokenize keeps U+FEFF at the start, middle and end (BPE: exact)', async () => {
  const file = path.join(DIR, 'bpe.gguf');
  makeModel(file, { dim: 64, layers: 1, heads: 2, kvHeads: 1, ffn: 64, ctx: 64, vocab: 512 }, 'f32', 5, { arch: 'llama3' });
  const m = await loadModel(file);
  try {
    for (const s of BOM_CASES) assert.equal(await m.detokenize(await m.tokenize(s)), s, JSON.stringify(s));
  } finally { await m.dispose(); }
});

test('tokenize -> detokenize keeps U+FEFF (SentencePiece: up to the word-start space)', async () => {
  const m = await loadModel(MODEL_PATH);
  try {
    // the SentencePiece prefix space comes back as a leading ' ' (as for any text)
    for (const s of BOM_CASES) assert.equal(await m.detokenize(await m.tokenize(s)), ' ' + s, JSON.stringify(s));
  } finally { await m.dispose(); }
});

test('streamed generation keeps a generated U+FEFF (bytes EF BB BF as three tokens)', async () => {
  const file = path.join(DIR, 'bom-script.gguf');
  // greedy decoding follows the script: a -> <0xEF> <0xBB> <0xBF> b </s>
  makeModel(file, { dim: 64, layers: 1, heads: 2, kvHeads: 1, ffn: 64, ctx: 64, vocab: 512 }, 'f32', 5,
    { script: [['\u2581a', '<0xEF>'], ['<0xEF>', '<0xBB>'], ['<0xBB>', '<0xBF>'], ['<0xBF>', 'b'], ['b', '</s>']] });
  const m = await loadModel(file);
  try {
    const opts = { temperature: 0, repeatPenalty: 1, maxTokens: 8 };
    let streamed = '';
    for await (const c of m.generate('a', opts)) streamed += c.text;
    assert.equal(streamed, '\ufeffb');
    assert.equal((await m.complete('a', opts)).text, '\ufeffb');
  } finally { await m.dispose(); }
});

// ---- finding 10: out-of-memory messages agree with themselves ---------------------------

function assertNomemNumbers(message) {
  const r = NOMEM_RE.exec(message);
  assert.ok(r, `'${message}' is not 'needs N more bytes of memory (X in use, limit M)'`);
  const [need, inUse, limit] = r.slice(1).map(Number);
  assert.ok(need + inUse > limit, `${message}: ${need} + ${inUse} does not pass ${limit}`);
}

test('a memory limit below what the file already uses: the message adds up (C side)', async () => {
  // the case: "needs 4368 bytes ... limit 2000000" while 2 MB were in use
  await assert.rejects(loadModel(MODEL_PATH, { memoryLimit: 2000000 }), (e) => {
    assert.equal(e.code, 'NOMEM');
    assert.match(e.message, /the GGUF index needs/);
    assertNomemNumbers(e.message);
    return true;
  });
});

test('the JS side reports a refused block the same way', async () => {
  const eng = await Engine.create(fs.readFileSync(new URL('../../wasm/wasmlm.wasm', import.meta.url)));
  try {
    eng.setMemoryLimit(eng.memoryInUse() + 1000);
    assert.throws(() => eng.alloc(5000, 'the test block'), (e) => {
      assert.match(e.message, /^the test block needs 5000 more bytes of memory/);
      assertNomemNumbers(e.message);
      return true;
    });
  } finally { eng.dispose(); }
});

// ---- finding 13a: a prompt that tokenizes to nothing ------------------------------------

test('a 1-token vocabulary without BOS: the message says the text tokenized to no tokens', async () => {
  const d = parseGGUF(baseModels().spm);
  const set = (key, type, v, at) => { d.kv[d.kv.findIndex((e) => e.key === key)] = { key, type, raw: encodeValue(type, v, at) }; };
  set('tokenizer.ggml.tokens', T.ARRAY, ['<unk>'], T.STRING);
  set('tokenizer.ggml.scores', T.ARRAY, [0], T.F32);
  set('tokenizer.ggml.token_type', T.ARRAY, [2], T.I32);
  d.kv = d.kv.filter((e) => !/bos_token_id|eos_token_id|unknown_token_id/.test(e.key));
  for (const t of d.tensors) {
    if (t.name === 'token_embd.weight' || t.name === 'output.weight') { t.ne = [t.ne[0], 1n]; t.data = t.data.slice(0, Number(t.ne[0]) * 4); }
  }
  const m = await loadModel(serializeGGUF(d), { contextLength: 32 });
  try {
    assert.equal(m.info.hparams.bosId, -1);
    assert.deepEqual(await m.tokenize('hello'), []);
    await assert.rejects(m.complete('hello', { maxTokens: 1 }),
      /the prompt text \(5 characters\) tokenized to no tokens and the model has no BOS token to start from/);
    await assert.rejects(m.complete('', { maxTokens: 1 }), /the prompt is empty and the model has no BOS token/);
  } finally { await m.dispose(); }
});
