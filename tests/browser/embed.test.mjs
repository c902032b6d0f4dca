// The demo's Embeddings panel in headless Chromium: the demo server's model
// folder holds a synthetic bert (an embedding model) and stories260K; the
// page loads the bert, disables generation for it, and compares sentences:
// the similarity matrix is N x N, 1 on the diagonal, symmetric, and equal to
// what model.embed gives in Node for the same texts; the pooling select
// changes it; stories260K (a decoder) embeds too. Screenshot in
// test-artifacts/.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startDemoServer } from '../../web/demo/server.mjs';
import { makeModel } from '../../models/make-model.js';
import { loadModel } from '../../web/index.js';
import { openPage, MODEL_PATH, ARTIFACTS } from './browser.mjs';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-embed-demo-'));
const BERT = path.join(DIR, 'a-bert-demo.gguf');   // first in the list: the page loads it
let server, page, close;
const errors = [];
const TEXTS = ['the cat sat on the mat', 'a dog sat on the mat', 'the weather is sunny today', 'rain and music'];

const state = () => page.evaluate(() => document.body.dataset.state);
const waitState = (states, timeout = 60000) =>
  page.waitForFunction((s) => s.includes(document.body.dataset.state), states, { timeout });

before(async () => {
  makeModel(BERT, { dim: 128, layers: 2, heads: 4, ffn: 256, ctx: 128, vocab: 1000 }, 'f16', 77, { arch: 'bert', qkStd: 0.15 });
  fs.copyFileSync(MODEL_PATH, path.join(DIR, 'stories260K.gguf'));
  server = await startDemoServer({ modelsDir: DIR });
  ({ page, close } = await openPage({ server, errors, path: null }));
});

after(async () => {
  await close?.();
  fs.rmSync(DIR, { recursive: true, force: true });
});

/** Runs a comparison in the page; resolves {texts, matrix, cells, status}. */
async function compare(pooling) {
  await page.fill('#embed-texts', TEXTS.join('\n') + '\n\n');
  await page.selectOption('#embed-pooling', pooling);
  await page.click('#embed-run');
  await waitState(['done', 'error']);
  return page.evaluate(() => ({
    state: document.body.dataset.state,
    ...window.wasmlmDemo.state.embedding,
    cells: [...document.querySelectorAll('#embed-matrix td')].map((td) => Number(td.dataset.sim)),
    shown: [...document.querySelectorAll('#embed-matrix td')].map((td) => td.textContent),
    rows: document.querySelectorAll('#embed-matrix tbody tr').length,
    status: document.getElementById('embed-status').textContent,
  }));
}

function expectedMatrix(vectors) {
  return vectors.map((a) => vectors.map((b) => { let s = 0; for (let k = 0; k < a.length; k++) s += a[k] * b[k]; return s; }));
}

test('the Embeddings panel compares sentences with an embedding model: the matrix equals model.embed in Node', async () => {
  await page.goto(`${server.url}/`);
  await waitState(['ready', 'error']);
  assert.equal(await state(), 'ready', await page.textContent('#progress-text'));
  assert.match(await page.textContent('#model-info'), /bert · .*an embedding model/);
  assert.equal(await page.isDisabled('#generate'), true, 'no generation with an embedding model');
  assert.equal(await page.isDisabled('#bon-run'), true);
  assert.equal(await page.isEnabled('#embed-run'), true);

  const model = await loadModel(BERT, { threads: 1 });
  try {
    for (const pooling of ['model', 'cls']) {
      const r = await compare(pooling);
      assert.equal(r.state, 'done', r.status);
      assert.deepEqual(r.texts, TEXTS, 'blank lines are skipped');
      assert.equal(r.rows, TEXTS.length);
      assert.equal(r.cells.length, TEXTS.length ** 2);
      const want = expectedMatrix(await model.embed(TEXTS, { pooling }));
      for (let i = 0; i < TEXTS.length; i++) {
        assert.ok(Math.abs(r.matrix[i][i] - 1) < 1e-5, `diagonal ${r.matrix[i][i]}`);
        for (let j = 0; j < TEXTS.length; j++) {
          assert.ok(Math.abs(r.matrix[i][j] - want[i][j]) < 1e-6, `${pooling} [${i}][${j}]: page ${r.matrix[i][j]}, Node ${want[i][j]}`);
          assert.equal(r.matrix[i][j], r.cells[i * TEXTS.length + j]);
          assert.equal(r.shown[i * TEXTS.length + j], r.matrix[i][j].toFixed(3));
        }
      }
      assert.match(r.status, new RegExp(`4 vectors of 128 numbers \\(pooling ${pooling === 'model' ? 'mean' : 'cls'}\\)`));
    }
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    await page.locator('section.embed').screenshot({ path: path.join(ARTIFACTS, 'demo-embeddings.png') });
  } finally {
    await model.dispose();
  }
});

test('a decoder (stories260K) embeds in the page too, and generation comes back', async () => {
  await page.selectOption('#model-select', 'local:stories260K.gguf');
  await page.click('#load-btn');
  await page.waitForFunction(() => /stories260K loaded/.test(document.getElementById('progress-text').textContent), null, { timeout: 60000 });
  assert.equal(await page.isEnabled('#generate'), true);
  const r = await compare('model');
  assert.equal(r.state, 'done', r.status);
  assert.match(r.status, /4 vectors of 64 numbers \(pooling last\)/);
  assert.deepEqual(errors, []);
});
