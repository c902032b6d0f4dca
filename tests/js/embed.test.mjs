// Embeddings through the public API (model.embed): synthetic bert and
// nomic-bert files (models/make-model.js) and decoders give the vectors of a
// plain double-precision forward pass and pooling (tests/js/reference-forward.mjs)
// for every pooling; a batch gives each text the bits it gets alone; strings
// are framed as the model expects ([CLS] ... [SEP] by WordPiece); a text
// longer than the batch grows it (non-causal models see a text whole);
// misuse is refused by name; `wasmlm embed` prints the same vectors.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeModel } from '../../models/make-model.js';
import { loadModel } from '../../web/index.js';
import { readGGUF, referenceEmbedding } from './reference-forward.mjs';
import { spawnSync } from 'node:child_process';
import { MODEL_PATH, CLI, isError, runCli } from './helpers.mjs';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-embed-'));
test.after(() => fs.rmSync(DIR, { recursive: true, force: true }));

const SHAPE = { dim: 64, layers: 2, heads: 4, ffn: 96, ctx: 128, vocab: 400 };
const TEXTS = ['Hello, world!', 'the quick brown fox jumps over the lazy dog', 'a', 'Café naïve — 中国 2024'];

function cosine(a, b) {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
  return ab / Math.sqrt(aa * bb);
}
function maxDiff(a, b) {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

const CASES = [
  { name: 'bert-f32', type: 'f32', opts: { arch: 'bert', qkStd: 0.2 }, tol: 1e-5 },
  { name: 'bert-f16-cls', type: 'f16', opts: { arch: 'bert', qkStd: 0.2, pooling: 2 }, tol: 1e-5 },
  { name: 'nomic-bert-f32', type: 'f32', opts: { arch: 'nomic-bert', qkStd: 0.2 }, tol: 1e-5 },
  { name: 'nomic-bert-f16', type: 'f16', opts: { arch: 'nomic-bert', qkStd: 0.2 }, tol: 1e-5 },
  // decoder embeddings: the final-norm states, last token by default
  { name: 'qwen3-f32', type: 'f32', opts: { arch: 'qwen3', qkStd: 0.2 }, tol: 1e-5, decoder: true },
  { name: 'llama-f16-mean', type: 'f16', opts: { arch: 'llama', pooling: 1 }, tol: 1e-5, decoder: true },
  // sliding-window layers narrower than the texts (the cache rows of a windowed layer)
  { name: 'gemma3-window4-mean', type: 'f32', opts: { arch: 'gemma3', slidingWindow: 4, embdStd: 0.3, pooling: 1 }, tol: 1e-5, decoder: true },
  { name: 'gemma2-window3', type: 'f32', opts: { arch: 'gemma2', slidingWindow: 3, embdStd: 0.3 }, tol: 1e-5, decoder: true },
];

for (const c of CASES) {
  test(`${c.name}: embeddings equal the double-precision reference for every pooling`, async () => {
    const file = path.join(DIR, `${c.name}.gguf`);
    makeModel(file, { ...SHAPE, kvHeads: c.decoder ? 2 : 4 }, c.type, 21, c.opts);
    const g = readGGUF(file);
    const model = await loadModel(file, { threads: 1 });
    try {
      const want = c.opts.pooling === 2 ? 'cls' : c.opts.pooling === 1 ? 'mean' : c.decoder ? 'last' : 'mean';
      assert.equal(model.info.embedding.pooling, want);
      assert.equal(model.info.embedding.causal, !!c.decoder);
      assert.equal(model.info.embedding.length, SHAPE.dim);
      const ids = [];
      for (const t of TEXTS) ids.push(await model.tokenize(t, { addBos: model.info.hparams.addBos }));
      if (!c.decoder) for (const t of ids) { assert.equal(t[0], 101); assert.equal(t.at(-1), 102); } // [CLS] ... [SEP]
      for (const pooling of ['model', 'mean', 'cls', 'last']) {
        const got = await model.embed(TEXTS, { pooling });
        assert.equal(got.length, TEXTS.length);
        for (let i = 0; i < TEXTS.length; i++) {
          assert.ok(got[i] instanceof Float32Array && got[i].length === SHAPE.dim);
          const ref = referenceEmbedding(g, ids[i], pooling === 'model' ? want : pooling);
          const diff = maxDiff(got[i], ref);
          assert.ok(diff < c.tol, `${pooling} text ${i}: max |diff| ${diff}`);
          assert.ok(cosine(got[i], ref) > 0.99999, `${pooling} text ${i}`);
        }
      }
      // not normalized: the reference's raw pooled vector
      const raw = await model.embed(TEXTS[1], { normalize: false, pooling: 'mean' });
      assert.equal(raw.length, 1);
      const ref = referenceEmbedding(g, ids[1], 'mean', false);
      assert.ok(maxDiff(raw[0], ref) < c.tol * 10, `unnormalized: ${maxDiff(raw[0], ref)}`);
      // one at a time: the same bits as the batch
      const all = await model.embed(TEXTS);
      for (let i = 0; i < TEXTS.length; i++) {
        const [one] = await model.embed(TEXTS[i]);
        assert.deepEqual(one, all[i], `text ${i} alone`);
      }
      // token ids are used as they are
      const [fromIds] = await model.embed([ids[1]]);
      assert.deepEqual(fromIds, all[1]);
    } finally {
      await model.dispose();
    }
  });
}

test('a non-causal text longer than the batch grows it; one past the positions is refused naming the text', async () => {
  const file = path.join(DIR, 'bert-long.gguf');
  makeModel(file, { ...SHAPE, ctx: 96 }, 'f32', 5, { arch: 'bert' });
  const model = await loadModel(file, { threads: 1, batchSize: 16 });
  try {
    const long = Array.from({ length: 40 }, (_, i) => ['hello', 'world', 'cat', 'dog'][i % 4]).join(' ');
    const [v] = await model.embed(long, { pooling: 'cls' });
    const ids = await model.tokenize(long);
    assert.equal(ids.length, 42);
    const ref = referenceEmbedding(readGGUF(file), ids, 'cls');
    assert.ok(maxDiff(v, ref) < 1e-5);
    const tooLong = Array.from({ length: 120 }, () => 'cat').join(' ');
    await assert.rejects(model.embed(['a', tooLong]), isError('BAD_ARGUMENT', /text 1 has 122 tokens, more than the 96 positions/));
    // the model stays usable
    const [again] = await model.embed(long, { pooling: 'cls' });
    assert.deepEqual(again, v);
  } finally {
    await model.dispose();
  }
});

test('embed on a trained decoder (stories260K), generation after it, and refusals by name', async () => {
  const model = await loadModel(MODEL_PATH, { threads: 1, contextLength: 128 });
  try {
    assert.deepEqual(model.info.embedding, { length: 64, pooling: 'last', causal: true });
    const a = await model.embed(['Once upon a time', 'The little girl', 'Once upon a time']);
    assert.deepEqual(a[0], a[2]);
    assert.ok(Math.abs(Math.hypot(...a[1]) - 1) < 1e-5);
    assert.ok(cosine(a[0], a[1]) < 0.9999);
    const r = await model.complete('Once upon a time', { maxTokens: 5, temperature: 0 });
    assert.equal(r.tokens.length, 5);
    assert.deepEqual(await model.embed([]), []);
    await assert.rejects(model.embed('x', { pooling: 'max' }), isError('BAD_OPTION', /pooling/));
    await assert.rejects(model.embed('x', { normalize: 1 }), isError('BAD_OPTION', /normalize/));
    await assert.rejects(model.embed('x', { polling: 'mean' }), isError('BAD_OPTION', /did you mean pooling/));
    await assert.rejects(model.embed(5), isError('BAD_OPTION', /texts/));
    await assert.rejects(model.embed([[1, 99999]]), isError('BAD_OPTION', /texts\[0\]/));
    await assert.rejects(model.embed([[]]), isError('BAD_ARGUMENT', /text 0 has no tokens/));
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(model.embed('x', { signal: ac.signal }), (e) => e.name === 'AbortError' || e.code === 'ABORTED');
  } finally {
    await model.dispose();
  }
});

test('an encoder refuses generation, naming embed', async () => {
  const file = path.join(DIR, 'bert-gen.gguf');
  makeModel(file, SHAPE, 'f32', 6, { arch: 'bert' });
  const model = await loadModel(file, { threads: 1 });
  try {
    await assert.rejects(model.complete('hello', { maxTokens: 2 }), isError('UNSUPPORTED', /no output layer/, /wlm_embed/));
    const v = await model.embed('hello');
    assert.equal(v.length, 1);
  } finally {
    await model.dispose();
  }
});

test('wasmlm embed: one JSON line per text, from -p flags or stdin lines, equal to model.embed', async () => {
  const file = path.join(DIR, 'bert-cli.gguf');
  makeModel(file, SHAPE, 'f32', 8, { arch: 'bert' });
  const out = await runCli(['embed', '-m', file, '-p', 'hello world', '-p', 'the cat sat', '--pooling', 'cls']);
  assert.equal(out.code, 0, out.stderr);
  const lines = out.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.deepEqual(lines.map((l) => [l.index, l.text]), [[0, 'hello world'], [1, 'the cat sat']]);
  assert.match(out.stderr, /2 texts, 64 dims, pooling cls, normalized/);
  const piped = spawnSync(process.execPath, [CLI, 'embed', '-m', file, '--pooling', 'cls', '--no-normalize'],
    { input: 'hello world\n\nthe cat sat\n', encoding: 'utf8' });
  assert.equal(piped.status, 0, piped.stderr);
  const raw = piped.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(raw.length, 2);
  const model = await loadModel(file, { threads: 1 });
  try {
    const unit = await model.embed(['hello world', 'the cat sat'], { pooling: 'cls' });
    const plain = await model.embed(['hello world', 'the cat sat'], { pooling: 'cls', normalize: false });
    for (let i = 0; i < 2; i++) {
      assert.deepEqual(Float32Array.from(lines[i].embedding), unit[i]);
      assert.deepEqual(Float32Array.from(raw[i].embedding), plain[i]);
    }
  } finally {
    await model.dispose();
  }
  const none = spawnSync(process.execPath, [CLI, 'embed', '-m', file], { input: '', encoding: 'utf8' });
  assert.equal(none.status, 2);
  assert.match(none.stderr, /embed needs texts/);
});

test('threads: two compute threads give the bits of one (bert, nomic-bert, a decoder)', async () => {
  const shape = { dim: 128, layers: 2, heads: 4, kvHeads: 2, ffn: 256, ctx: 128, vocab: 600 };
  const texts = [...TEXTS, TEXTS.join(' '), 'the cat sat on the mat and the dog sat on the cat'];
  for (const arch of ['bert', 'nomic-bert', 'qwen3']) {
    const file = path.join(DIR, `threads-${arch}.gguf`);
    makeModel(file, shape, 'f16', 9, { arch, qkStd: 0.15 });
    const one = await loadModel(file, { threads: 1 }), two = await loadModel(file, { threads: 2 });
    try {
      assert.equal(two.threads, 2);
      for (const pooling of ['mean', 'last']) {
        const a = await one.embed(texts, { pooling }), b = await two.embed(texts, { pooling });
        for (let i = 0; i < texts.length; i++) assert.deepEqual(b[i], a[i], `${arch} ${pooling} text ${i}`);
      }
    } finally {
      await one.dispose(); await two.dispose();
    }
  }
});
