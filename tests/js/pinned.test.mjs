// Seeded outputs pinned from main before the redesign of issue #26
// (tests/js/fixtures/pinned-stories260K.json, written by the code of
// 7f634a9): the same seeds must give the same tokens through complete(),
// bestOfN, beamSearch, prompt lookup and nextTokenDistribution, so a
// refactor that changes what the engine samples fails here. The default
// repeat penalty went from 1.1 to 1 (off, as llama.cpp's): the fixture's
// options and the calls below name 1.1 where they relied on the old default,
// and still give the pinned tokens; the new default is pinned to llama.cpp's
// greedy output in tests/js/sampling.test.mjs.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { MODEL_PATH } from './helpers.mjs';
import { loadModel } from '../../web/index.js';

const PIN = JSON.parse(fs.readFileSync(new URL('./fixtures/pinned-stories260K.json', import.meta.url), 'utf8'));

test('seeded generations equal the pinned tokens (1 and 2 threads)', async () => {
  for (const threads of [1, 2]) {
    const m = await loadModel(MODEL_PATH, { threads, contextLength: 256 });
    try {
      for (const c of PIN.complete) {
        const r = await m.complete('Once upon a time', { ...c.options, maxTokens: 24, ignoreEos: true });
        assert.deepEqual(r.tokens, c.tokens, `complete ${JSON.stringify(c.options)} threads ${threads}`);
      }
      const b = await m.bestOfN('The little dog', { n: 3, seed: 9, maxTokens: 16, ignoreEos: true, repeatPenalty: 1.1 });
      assert.deepEqual(b.candidates.map((c) => ({ index: c.index, tokens: c.tokens })), PIN.bestOfN);
      const bs = await m.beamSearch('Lily wanted to', { beams: 3, maxTokens: 12 });
      assert.deepEqual(bs.beams.map((x) => x.tokens), PIN.beamSearch);
      const l = await m.complete('One day, a big bear saw a big bear. One day, a big bear', { draft: 'lookup', temperature: 0.7, seed: 3, maxTokens: 20, ignoreEos: true, repeatPenalty: 1.1 });
      assert.deepEqual(l.tokens, PIN.lookup);
      const d = await m.nextTokenDistribution('Once upon a time', { topN: 5, temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05, repeatPenalty: 1.1 });
      assert.deepEqual(d.map((x) => x.token), PIN.distribution.map((x) => x[0]));
      d.forEach((x, i) => assert.ok(Math.abs(x.prob - PIN.distribution[i][1]) < 1e-5, `prob ${i}`));
    } finally { await m.dispose(); }
  }
});
