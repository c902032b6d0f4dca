// Every synthetic architecture variant of tests/js/arch-variants.mjs in
// Chromium (issue #27: each architecture works in Node and Chromium): the
// page loads the file from a local server and computes, for the same tokens,
// logits bit-identical to Node's (the determinism rule of
// docs/architecture.md holds across runtimes and across the SIMD128 and
// relaxed-SIMD builds the page may pick), and the same greedy tokens.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openPage } from './browser.mjs';
import { SHAPE, VARIANTS } from '../js/arch-variants.mjs';
import { makeModel } from '../../models/make-model.js';
import { loadModel } from '../../web/index.js';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-arch-browser-'));
const TOKENS = [5, 17, 200, 33, 64, 99, 150, 7, 250, 12, 81, 42];
const CTX = 64;
const GREEDY = { temperature: 0, maxTokens: 12, ignoreEos: true };
const files = {};
for (const v of VARIANTS) {
  const file = path.join(DIR, `${v.name}.gguf`);
  makeModel(file, { ...SHAPE, ...v.shape }, v.type, 4321, { qkStd: 0.2, ...v.opts });
  files[`/m/${v.name}.gguf`] = file;
}

let page, base, close;
before(async () => { ({ page, url: base, close } = await openPage({ files })); });
after(async () => {
  await close?.();
  fs.rmSync(DIR, { recursive: true, force: true });
});

/** the same work in the page or here: last-position logits as bit patterns, greedy tokens */
async function run(load, src) {
  const model = await load(src, { contextLength: CTX, batchSize: 5, threads: 1 });
  try {
    const [row] = await model.logits(TOKENS);
    const { tokens } = await model.complete(TOKENS, { temperature: 0, maxTokens: 12, ignoreEos: true });
    return { arch: model.info.architecture, bits: Array.from(new Uint32Array(row.buffer, row.byteOffset, row.length)), tokens };
  } finally {
    await model.dispose();
  }
}

for (const v of VARIANTS) {
  test(`${v.name}: Chromium computes Node's logits bit for bit and its greedy tokens`, async () => {
    const here = await run(loadModel, path.join(DIR, `${v.name}.gguf`));
    const there = await page.evaluate(async ([url, tokens, ctx, greedy]) => {
      const { loadModel } = await import('/web/index.js');
      const model = await loadModel(url, { contextLength: ctx, batchSize: 5, threads: 1, cache: false });
      try {
        const [row] = await model.logits(tokens);
        const { tokens: out } = await model.complete(tokens, greedy);
        return { arch: model.info.architecture, bits: Array.from(new Uint32Array(row.buffer, row.byteOffset, row.length)), tokens: out };
      } finally {
        await model.dispose();
      }
    }, [`${base}/m/${v.name}.gguf`, TOKENS, CTX, GREEDY]);
    assert.equal(there.arch, here.arch);
    assert.equal(there.tokens.length, 12);
    assert.deepEqual(there.tokens, here.tokens);
    let differ = 0;
    for (let i = 0; i < here.bits.length; i++) if (here.bits[i] !== there.bits[i]) differ++;
    assert.equal(differ, 0, `${differ} of ${here.bits.length} logits differ between Node and Chromium`);
  });
}
