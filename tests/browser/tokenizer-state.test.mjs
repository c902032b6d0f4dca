// In Chromium: loadTokenizer by URL reads a model's metadata with a Range
// request, not its weights, and passes a vocabulary's test vectors; a
// session saved with saveState() into IndexedDB survives a page reload and
// resumes exactly where it stopped, giving the tokens of one uninterrupted
// generation in Node; the browser's state also resumes in Node (one format).
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openPage, SHARED, MODEL_PATH } from './browser.mjs';
import { makeModel } from '../../models/make-model.js';
import { loadModel, loadTokenizer } from '../../web/index.js';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-tok-browser-'));
const BIG = path.join(DIR, 'big.gguf');
makeModel(BIG, { dim: 256, layers: 4, heads: 4, kvHeads: 2, ffn: 1024, ctx: 256, vocab: 320 }, 'f16', 3, { arch: 'qwen2' });
// the page, the package's files, and these with Range support; every request for them logged
const FILES = { '/files/big.gguf': BIG, '/files/stories.gguf': MODEL_PATH, '/files/gpt-2.gguf': path.join(SHARED, 'vocab', 'ggml-vocab-gpt-2.gguf') };
const log = [];
let page, close;
before(async () => { ({ page, close } = await openPage({ files: FILES, log })); });
after(async () => {
  await close?.();
  fs.rmSync(DIR, { recursive: true, force: true });
});

test('loadTokenizer by URL in the browser: one Range request for a model, a vocabulary\'s vectors pass', async () => {
  const vocab = path.join(SHARED, 'vocab', 'ggml-vocab-gpt-2.gguf');
  const texts = fs.readFileSync(`${vocab}.inp`, 'utf8').split('\n__ggml_vocab_test__\n').slice(0, -1);
  const expect = fs.readFileSync(`${vocab}.out`, 'utf8').split('\n').slice(0, texts.length).map((l) => l.trim().split(/\s+/).filter(Boolean).map(Number));
  log.length = 0;
  const r = await page.evaluate(async (texts) => {
    const { loadTokenizer } = await import('/web/index.js');
    const big = await loadTokenizer('/files/big.gguf');
    const out = { bytesRead: big.info.bytesRead, ids: await big.tokenize('<|im_start|>Hello world', { parseSpecial: true }) };
    await big.dispose();
    const gpt2 = await loadTokenizer('/files/gpt-2.gguf');
    out.vectors = [];
    for (const t of texts) out.vectors.push(await gpt2.tokenize(t, { addBos: false }));
    out.count = await gpt2.countTokens(texts[5], { addBos: false });
    await gpt2.dispose();
    return out;
  }, texts);
  assert.deepEqual(log.filter((l) => l.path === '/files/big.gguf').map((l) => l.range), ['bytes=0-1048575']);
  assert.ok(r.bytesRead <= 1 << 20 && r.bytesRead < fs.statSync(BIG).size / 4);
  const ref = await loadTokenizer(BIG);
  try {
    assert.deepEqual(r.ids, await ref.tokenize('<|im_start|>Hello world', { parseSpecial: true }));
  } finally { await ref.dispose(); }
  assert.deepEqual(r.vectors, expect);
  assert.equal(r.count, expect[5].length);
});

const SAMPLED = { temperature: 0.9, topK: 0, topP: 0.95, minP: 0, repeatPenalty: 1.1, repeatLastN: 16, seed: 77, ignoreEos: true };
const PROMPT = 'Once upon a time';

test('a session saved to IndexedDB survives a page reload and resumes exactly (and in Node)', async () => {
  // the uninterrupted generation, in Node
  const whole = await loadModel(MODEL_PATH, { contextLength: 128 });
  const ref = await whole.complete(PROMPT, { ...SAMPLED, maxTokens: 45 });
  await whole.dispose();

  const first = await page.evaluate(async ([prompt, o]) => {
    const { loadModel } = await import('/web/index.js');
    const m = await loadModel('/files/stories.gguf', { contextLength: 128, threads: 1 });
    const r = await m.complete(prompt, { ...o, maxTokens: 15 });
    const state = await m.saveState();
    await m.dispose();
    const db = await new Promise((res, rej) => {
      const q = indexedDB.open('wasmlm-test', 1);
      q.onupgradeneeded = () => q.result.createObjectStore('sessions');
      q.onsuccess = () => res(q.result); q.onerror = () => rej(q.error);
    });
    await new Promise((res, rej) => {
      const tx = db.transaction('sessions', 'readwrite');
      tx.objectStore('sessions').put(state, 'story');
      tx.oncomplete = res; tx.onerror = () => rej(tx.error);
    });
    db.close();
    return { tokens: r.tokens, text: r.text, state: Array.from(state) };
  }, [PROMPT, SAMPLED]);

  await page.reload();
  const second = await page.evaluate(async (o) => {
    const { loadModel } = await import('/web/index.js');
    const db = await new Promise((res, rej) => {
      const q = indexedDB.open('wasmlm-test', 1);
      q.onsuccess = () => res(q.result); q.onerror = () => rej(q.error);
    });
    const state = await new Promise((res, rej) => {
      const q = db.transaction('sessions').objectStore('sessions').get('story');
      q.onsuccess = () => res(q.result); q.onerror = () => rej(q.error);
    });
    db.close();
    const m = await loadModel('/files/stories.gguf', { contextLength: 64, threads: 1 });
    const info = await m.loadState(state);
    const r = await m.complete('', { ...o, seed: 1, maxTokens: 30, resume: true });
    await m.dispose();
    return { tokens: r.tokens, text: r.text, positions: info.positions };
  }, SAMPLED);
  assert.equal(second.positions, first.tokens.length + (await tokenCount(PROMPT)) - 1);
  assert.deepEqual([...first.tokens, ...second.tokens], ref.tokens);
  assert.equal(first.text + second.text, ref.text);

  // the browser's bytes resume in Node too
  const m = await loadModel(MODEL_PATH, { contextLength: 128 });
  try {
    await m.loadState(new Uint8Array(first.state));
    const r = await m.complete('', { ...SAMPLED, maxTokens: 30, resume: true });
    assert.deepEqual(r.tokens, second.tokens);
  } finally { await m.dispose(); }
});

async function tokenCount(text) {
  const t = await loadTokenizer(MODEL_PATH);
  try { return await t.countTokens(text); } finally { await t.dispose(); }
}
