// The window ring in Chromium: a synthetic gemma3 model (5 windowed : 1
// global layers) loaded in a page with windowCache 'window' and 'full'
// computes the same bits (prompts in chunks that wrap the ring, decoding
// past the window, prefix reuse that the ring refuses, best-of-N), as
// tests/js/swa.test.mjs checks in Node.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openPage } from './browser.mjs';
import { makeModel } from '../../models/make-model.js';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-swa-browser-'));
const file = path.join(DIR, 'gemma3.gguf');
makeModel(file, { dim: 64, layers: 7, heads: 4, kvHeads: 2, ffn: 96, ctx: 1024, vocab: 320 }, 'f16', 4321,
  { arch: 'gemma3', embdStd: 0.1, qkStd: 0.2, slidingWindow: 5 });
let page, close;

// the page from ROOT, the model at /m/gemma3.gguf
before(async () => { ({ page, close } = await openPage({ files: { '/m/gemma3.gguf': file } })); });
after(async () => {
  await close?.();
  fs.rmSync(DIR, { recursive: true, force: true });
});

test('gemma3 in Chromium: the window ring gives the bits of the full cache', async () => {
  const r = await page.evaluate(async () => {
    const { loadModel } = await import('/web/index.js');
    const bytes = new Uint8Array(await (await fetch('/m/gemma3.gguf')).arrayBuffer());
    const ids = (n, k = 0) => Array.from({ length: n }, (_, i) => ((i + k) * 37 + 11) % 300 + 5);
    const hex = (rows) => rows.map((f) => Array.from(new Uint8Array(f.buffer, f.byteOffset, f.byteLength), (b) => b.toString(16).padStart(2, '0')).join('')).join('|');
    const run = async (windowCache) => {
      const m = await loadModel(bytes, { contextLength: 256, batchSize: 5, threads: 1, windowCache });
      try {
        const g = { maxTokens: 60, temperature: 0.8, seed: 3, ignoreEos: true };
        const a = await m.complete(ids(30), g);
        const again = await m.complete(ids(30), g);   // a rewind past the ring: evaluated again
        const bo = await m.bestOfN(ids(20, 3), { n: 3, maxTokens: 20, temperature: 1, seed: 5, ignoreEos: true });
        return {
          rows: m.info.context.windowRows,
          logits: hex([...await m.logits(ids(90)), ...await m.logits(ids(33), { all: true })]),
          gen: JSON.stringify([a.tokens, a.logprobs, again.tokens, again.logprobs]),
          reused: again.stats.reusedPromptTokens,
          best: JSON.stringify(bo.candidates.map((c) => [c.tokens, c.logprobs])),
        };
      } finally { await m.dispose(); }
    };
    return { win: await run('window'), full: await run('full') };
  });
  assert.equal(r.win.rows, 5 - 1 + 5);
  assert.equal(r.full.rows, 0);
  assert.equal(r.win.logits, r.full.logits);
  assert.equal(r.win.gen, r.full.gen);
  assert.equal(r.win.best, r.full.best);
  assert.equal(r.win.reused, 0);
  assert.equal(r.full.reused, 29);
});
