// loadTokenizer: a GGUF's vocabulary without its weights, in a worker of its
// own. Every shared test vector (../shared/vocab: llama.cpp's vectors for
// SentencePiece and three byte-level BPE vocabularies) through the public
// API; the same sources as loadModel (path, bytes, Blob, stream, URL with
// and without Range support, a split GGUF's first part) reading only the
// header and metadata; a whole model as a tokenizer agrees with the model;
// chat templates; refusals; `wasmlm tokenize` (JS and WASI) on such files.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SHARED, MODEL_PATH, runCli, isError, ROOT } from './helpers.mjs';
import { makeModel, CHAT_TEMPLATES } from '../../models/make-model.js';
import { splitGguf } from '../../models/gguf-split.js';
import { withHub } from './hub-server.mjs';
import { listen, serveFiles } from './servers.mjs';
import { loadModel, loadTokenizer, Tokenizer, Model } from '../../web/index.js';
import { spawnSync, execFileSync } from 'node:child_process';

const VOCAB = path.join(SHARED, 'vocab');
const NAMES = ['llama-spm', 'gpt-2', 'deepseek-llm', 'falcon'];
const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-tok-'));
test.after(() => fs.rmSync(DIR, { recursive: true, force: true }));

/** The test strings and expected ids of a vocabulary (../shared/vocab/README.md). */
function vectors(name) {
  const inp = fs.readFileSync(path.join(VOCAB, `ggml-vocab-${name}.gguf.inp`), 'utf8').split('\n__ggml_vocab_test__\n');
  assert.equal(inp.pop(), '', 'every string is followed by the separator');
  const out = fs.readFileSync(path.join(VOCAB, `ggml-vocab-${name}.gguf.out`), 'utf8').split('\n').slice(0, inp.length)
    .map((l) => l.trim().split(/\s+/).filter(Boolean).map(Number));
  assert.equal(out.length, inp.length);
  return inp.map((text, i) => ({ text, ids: out[i] }));
}

for (const name of NAMES) {
  test(`every ${name} test vector through loadTokenizer (a vocabulary-only file)`, async () => {
    const file = path.join(VOCAB, `ggml-vocab-${name}.gguf`);
    const tok = await loadTokenizer(file);
    try {
      assert.ok(tok instanceof Tokenizer && !(tok instanceof Model));
      assert.equal(tok.info.vocabOnly, true);
      assert.equal(tok.info.bytesRead, fs.statSync(file).size, 'a vocabulary file is all metadata');
      const vs = vectors(name);
      assert.equal(vs.length, 46);
      let same = 0;
      for (const { text, ids } of vs) {
        const got = await tok.tokenize(text, { addBos: false });
        assert.deepEqual(got, ids, `${name}: ${JSON.stringify(text)}`);
        assert.equal(await tok.countTokens(text, { addBos: false }), ids.length);
        // decoding gives the text back (SentencePiece adds its leading space)
        const back = await tok.detokenize(ids);
        if (back === text || (name === 'llama-spm' && text !== '' && back === ' ' + text)) same++;
      }
      // the few that do not round-trip: falcon's and deepseek's normalizations, SPM's space runs
      assert.ok(same >= 40, `${name}: ${same} of ${vs.length} decode back to their text`);
      // add_bos as the file says; parseSpecial
      const withBos = await tok.tokenize('Hello');
      assert.equal(withBos.length, (await tok.tokenize('Hello', { addBos: false })).length + (tok.info.hparams.addBos ? 1 : 0));
    } finally {
      await tok.dispose();
    }
  });
}

test('the same vocabulary from bytes, a Blob, a ReadableStream and a file: URL', async () => {
  const file = path.join(VOCAB, 'ggml-vocab-gpt-2.gguf');
  const bytes = fs.readFileSync(file);
  const { text, ids: expect } = vectors('gpt-2').find((v) => [...v.text].some((ch) => ch.codePointAt(0) > 127) && v.ids.length > 3);
  const sources = [new Uint8Array(bytes), new Blob([bytes]), new Blob([bytes]).stream(), new URL(`file://${file}`)];
  for (const src of sources) {
    const tok = await loadTokenizer(src);
    try {
      assert.deepEqual(await tok.tokenize(text, { addBos: false }), expect, String(src));
    } finally { await tok.dispose(); }
  }
});

test('a whole model as a tokenizer: its metadata bytes only, the same ids and text as the model', async () => {
  const size = fs.statSync(MODEL_PATH).size;
  const [tok, model] = await Promise.all([loadTokenizer(MODEL_PATH), loadModel(MODEL_PATH, { contextLength: 64 })]);
  try {
    assert.ok(model instanceof Tokenizer, 'a Model is a Tokenizer');
    assert.ok(tok.info.bytesRead < size / 10, `${tok.info.bytesRead} of ${size} bytes read`);
    assert.deepEqual(tok.info.hparams, {
      nVocab: 512, nCtxTrain: model.info.hparams.nCtxTrain, bosId: 1, eosId: 2, unkId: 0, addBos: true, addSpacePrefix: true,
    });
    assert.deepEqual(tok.info.specialTokens, model.info.specialTokens);
    assert.equal(tok.info.architecture, 'llama');
    assert.equal(tok.info.metadata['tokenizer.ggml.tokens'].count, 512);
    assert.equal(tok.info.tensors, undefined);
    for (const text of ['Once upon a time', '', ' lily and  the\tdog\n', 'Hi</s><s>', 'ümlaut 日本']) {
      for (const o of [{}, { addBos: false }, { parseSpecial: true }]) {
        assert.deepEqual(await tok.tokenize(text, o), await model.tokenize(text, o), `${JSON.stringify(text)} ${JSON.stringify(o)}`);
        assert.equal(await tok.countTokens(text, o), await model.countTokens(text, o));
      }
    }
    const ids = (await model.complete('Once upon a time', { maxTokens: 30, temperature: 0 })).tokens;
    assert.equal(await tok.detokenize(ids), await model.detokenize(ids));
  } finally {
    await Promise.all([tok.dispose(), model.dispose()]);
  }
});

test('a tokenizer renders the chat template as its model does', async () => {
  const file = path.join(DIR, 'qwen2-chat.gguf');
  makeModel(file, { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 96, ctx: 256, vocab: 320 }, 'f32', 11, { arch: 'qwen2' });
  const [tok, model] = await Promise.all([loadTokenizer(file), loadModel(file)]);
  const msgs = [{ role: 'system', content: 'Be brief' }, { role: 'user', content: 'Hello' }];
  try {
    assert.equal(tok.info.chatTemplate, model.info.chatTemplate);
    const prompt = await tok.applyChatTemplate(msgs);
    assert.equal(prompt, await model.applyChatTemplate(msgs));
    assert.match(prompt, /^<\|im_start\|>system\nBe brief<\|im_end\|>\n/);
    assert.deepEqual(await tok.tokenize(prompt, { parseSpecial: true }), await model.tokenize(prompt, { parseSpecial: true }));
    assert.equal(await tok.applyChatTemplate(msgs, { template: CHAT_TEMPLATES.llama3, addGenerationPrompt: false }),
      await model.applyChatTemplate(msgs, { template: CHAT_TEMPLATES.llama3, addGenerationPrompt: false }));
  } finally {
    await Promise.all([tok.dispose(), model.dispose()]);
  }
  const plain = await loadTokenizer(path.join(VOCAB, 'ggml-vocab-llama-spm.gguf'));
  try {
    await assert.rejects(plain.applyChatTemplate(msgs), isError('NO_CHAT_TEMPLATE'));
    assert.equal(await plain.applyChatTemplate(msgs, { template: '{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}' }),
      'system:Be brief;user:Hello;');
  } finally { await plain.dispose(); }
});
test('a model file over the 4 GiB of wasm32: its tokenizer reads the metadata in the wasm32 build (no TOO_LARGE)', async () => {
  // stories260K's bytes in a sparse file of 5 GB: the metadata is real, the rest a hole
  const huge = path.join(DIR, 'huge.gguf');
  fs.copyFileSync(MODEL_PATH, huge);
  fs.truncateSync(huge, 5e9);
  const [tok, ref] = await Promise.all([loadTokenizer(huge), loadTokenizer(MODEL_PATH)]);
  try {
    assert.ok(tok.info.bytesRead < 2e6, `${tok.info.bytesRead} bytes read`);
    assert.deepEqual(await tok.tokenize('Once upon a time'), await ref.tokenize('Once upon a time'));
  } finally {
    await Promise.all([tok.dispose(), ref.dispose()]);
    fs.rmSync(huge);
  }
});

// One file at /model.gguf in 64 KiB pieces (a cancelled download stops
// early), every request logged with the bytes sent; `ranges` false answers
// 200 with the whole file to a Range request.
async function fileServer(file, { ranges = true } = {}) {
  const log = [];
  const served = await listen(serveFiles({ '/model.gguf': file }, { ranges, log, chunk: 65536 }));
  return { url: `${served.url}/model.gguf`, log, size: fs.statSync(file).size, close: served.close };
}

const BIG = path.join(DIR, 'big.gguf');   // ~8 MB of weights behind a few KB of metadata
const BIG_SHAPE = { dim: 256, layers: 4, heads: 4, kvHeads: 2, ffn: 1024, ctx: 256, vocab: 320 };
makeModel(BIG, BIG_SHAPE, 'f16', 3, { arch: 'qwen2' });

test('a URL: Range requests fetch the first megabyte, not the weights', async () => {
  const srv = await fileServer(BIG);
  try {
    const tok = await loadTokenizer(srv.url);
    try {
      assert.ok(srv.size > 6e6);
      assert.deepEqual(srv.log.map((e) => [e.range, e.status]), [['bytes=0-1048575', 206]]);
      assert.ok(tok.info.bytesRead <= 1 << 20);
      const model = await loadModel(BIG);
      try {
        assert.deepEqual(await tok.tokenize('<|im_start|>Hello world', { parseSpecial: true }), await model.tokenize('<|im_start|>Hello world', { parseSpecial: true }));
      } finally { await model.dispose(); }
    } finally { await tok.dispose(); }
  } finally { await srv.close(); }
});

test('a URL whose metadata is larger than the first range: the next range asks for what is missing', async () => {
  // a vocabulary file of 1.7 MB: all metadata
  const srv = await fileServer(path.join(VOCAB, 'ggml-vocab-gpt-2.gguf'));
  try {
    const tok = await loadTokenizer(srv.url);
    try {
      assert.equal(srv.log.length, 2);
      assert.deepEqual(srv.log.map((e) => e.status), [206, 206]);
      assert.equal(srv.log[0].range, 'bytes=0-1048575');
      assert.match(srv.log[1].range, /^bytes=1048576-\d+$/);
      assert.equal(srv.log[0].sent + srv.log[1].sent, srv.size);
      assert.deepEqual(await tok.tokenize('Hello world'), [15496, 995]);
    } finally { await tok.dispose(); }
  } finally { await srv.close(); }
});

test('a URL on a server without Range support: the body is read until the metadata is in, then dropped', async () => {
  const srv = await fileServer(BIG, { ranges: false });
  try {
    const tok = await loadTokenizer(srv.url);
    try {
      assert.equal(srv.log.length, 1);
      assert.equal(srv.log[0].status, 200);
      assert.ok(tok.info.bytesRead <= 1 << 20, `${tok.info.bytesRead} of ${srv.size}`);
      const ref = await loadTokenizer(BIG);
      try {
        assert.deepEqual(await tok.tokenize('Hello <|im_end|>', { parseSpecial: true }), await ref.tokenize('Hello <|im_end|>', { parseSpecial: true }));
      } finally { await ref.dispose(); }
    } finally { await tok.dispose(); }
  } finally { await srv.close(); }
});

test('a FIFO: read until the metadata is in, then closed (the writer sees the pipe end)', async () => {
  const fifo = path.join(DIR, 'model.fifo');
  execFileSync('mkfifo', [fifo]);
  const bytes = fs.readFileSync(BIG);
  const w = fs.createWriteStream(fifo);
  const wrote = new Promise((resolve) => { w.on('close', () => resolve('closed')); w.on('error', (e) => resolve(e.code)); });
  w.end(bytes);
  const tok = await loadTokenizer(fifo);
  const ref = await loadTokenizer(BIG);
  try {
    assert.ok(tok.info.bytesRead < bytes.length / 2, `${tok.info.bytesRead} of ${bytes.length}`);
    assert.equal(await wrote, 'EPIPE', 'the reader left before the end');
    assert.deepEqual(await tok.tokenize('Hello world'), await ref.tokenize('Hello world'));
  } finally { await Promise.all([tok.dispose(), ref.dispose()]); }
});

test('a hub id: the file is resolved from the listing and its head read by URL, nothing downloaded into the cache', async () => {
  const bytes = fs.readFileSync(BIG);
  await withHub({ files: { 'big-F16.gguf': bytes, 'other-Q8_0.gguf': Buffer.from('x') } }, async (hubUrl, log) => {
    const cacheDir = fs.mkdtempSync(path.join(DIR, 'cache-'));
    const tok = await loadTokenizer('hf:owner/repo:F16', { hubUrl, cacheDir, offline: false });
    const ref = await loadTokenizer(BIG);
    try {
      assert.deepEqual(fs.readdirSync(cacheDir), []);
      assert.ok(log.some((l) => l.path.startsWith('/api/models/owner/repo/tree/main')), 'the listing was read');
      assert.ok(tok.info.bytesRead <= 1 << 20);
      assert.deepEqual(await tok.tokenize('<|im_end|> Hi', { parseSpecial: true }), await ref.tokenize('<|im_end|> Hi', { parseSpecial: true }));
    } finally { await Promise.all([tok.dispose(), ref.dispose()]); }
  });
});

test('a split GGUF: its first part alone is enough', async () => {
  const whole = path.join(DIR, 'split-src.gguf');
  makeModel(whole, BIG_SHAPE, 'f16', 5, { arch: 'llama' });
  const { parts } = splitGguf(whole, 3 << 20);
  assert.ok(parts.length >= 3);
  fs.rmSync(parts.at(-1));   // a part missing: a model cannot load, a tokenizer can
  await assert.rejects(loadModel(parts[0]), isError('BAD_FILE', /missing/));
  const tok = await loadTokenizer(parts[0]);
  const ref = await loadTokenizer(whole);
  try {
    assert.ok(tok.info.bytesRead < fs.statSync(parts[0]).size);
    assert.deepEqual(await tok.tokenize('Once upon a time'), await ref.tokenize('Once upon a time'));
  } finally { await Promise.all([tok.dispose(), ref.dispose()]); }
});

test('refusals: options for weights, files that are not GGUF, cut inside the metadata, or without a vocabulary', async () => {
  await assert.rejects(loadTokenizer(MODEL_PATH, { contextLength: 64 }), isError('BAD_OPTION', /contextLength is not an option of loadTokenizer/));
  await assert.rejects(loadTokenizer(MODEL_PATH, { sha256: 'a'.repeat(64) }), isError('BAD_OPTION', /sha256/));
  await assert.rejects(loadTokenizer(path.join(VOCAB, 'README.md')), isError('BAD_FILE', /not a GGUF file/));
  const vocab = fs.readFileSync(path.join(VOCAB, 'ggml-vocab-falcon.gguf'));
  await assert.rejects(loadTokenizer(vocab.subarray(0, 500000)), isError('TRUNCATED', /truncated/));
  const bare = path.join(DIR, 'no-vocab.gguf');
  // a GGUF with one metadata key and no tokenizer
  const b = Buffer.alloc(24 + 8 + 4 + 4 + 8 + 5);
  b.write('GGUF', 0); b.writeUInt32LE(3, 4); b.writeBigUInt64LE(0n, 8); b.writeBigUInt64LE(1n, 16);
  b.writeBigUInt64LE(4n, 24); b.write('name', 32); b.writeUInt32LE(8, 36); b.writeBigUInt64LE(5n, 40); b.write('hello', 48);
  fs.writeFileSync(bare, b);
  await assert.rejects(loadTokenizer(bare), isError('BAD_FORMAT', /tokenizer/));
  const tok = await loadTokenizer(path.join(VOCAB, 'ggml-vocab-gpt-2.gguf'));
  await assert.rejects(tok.detokenize([50257]), isError('BAD_OPTION', /out of range/));
  await tok.dispose();
  await assert.rejects(tok.tokenize('x'), isError('DISPOSED', /tokenizer disposed/));
});

test('wasmlm tokenize (JS and WASI) takes a vocabulary-only file', async () => {
  const file = path.join(VOCAB, 'ggml-vocab-deepseek-llm.gguf');
  const { text, ids } = vectors('deepseek-llm')[12];
  const r = await runCli(['tokenize', '-m', file, '-p', text, '--no-bos']);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), ids);
  const wasm = path.join(ROOT, 'wasm', 'wasmlm-cli.wasm');
  if (!fs.existsSync(wasm)) return;
  const spm = vectors('llama-spm')[8];
  const w = spawnSync(process.execPath, [path.join(ROOT, 'web', 'cli', 'wasi-cli.js'), 'tokenize', '-m', path.join(VOCAB, 'ggml-vocab-llama-spm.gguf'), '-p', spm.text],
    { encoding: 'utf8' });
  assert.equal(w.status, 0, w.stderr);
  assert.deepEqual(w.stdout.trim().split(' ').map(Number), [1, ...spm.ids]);   // BOS: the WASI command follows add_bos
});
