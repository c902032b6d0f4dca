// bench/embed-trained.mjs: stories260K placed in larger shapes (more
// dimensions, heads, FFN rows, layers and vocabulary; GQA groups mapped both
// ways) computes stories260K's own function: the same greedy tokens as the
// llama.cpp reference, F32 and F16, and its Q4_0 still agrees with it as a
// trained pair does.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { MODEL_PATH, reference } from './helpers.mjs';
import { loadModel } from '../../web/index.js';
import { embedTrained } from '../../bench/embed-trained.mjs';

const REF = reference();
const GREEDY = { temperature: 0, repeatPenalty: 1, ignoreEos: true };
const NATIVE = path.resolve(import.meta.dirname, '../../build/wasmlm-native');
let dir;
before(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-embed-')); });
after(() => fs.rmSync(dir, { recursive: true, force: true }));

// A: one KV head per query head (stories260K's groups of 2 split, KV copied);
// B: groups of 4 query heads (a group of 2 inside each)
const SHAPES = {
  A: { dim: 512, layers: 6, heads: 8, kvHeads: 8, ffn: 256, ctx: 512, vocab: 1024 },
  B: { dim: 1024, layers: 7, heads: 16, kvHeads: 4, ffn: 384, ctx: 512, vocab: 600 },
};

for (const [name, shape] of Object.entries(SHAPES))
  for (const type of ['f32', 'f16'])
    test(`stories260K inside shape ${name} (${type}) gives the reference greedy tokens`, async () => {
      const file = path.join(dir, `${name}-${type}.gguf`);
      embedTrained(MODEL_PATH, file, shape, type);
      const m = await loadModel(file, { threads: 1 });
      try {
        const hp = m.info.hparams;   // the large shape, not the small one's
        assert.deepEqual([hp.nEmbd, hp.nLayer, hp.nHead, hp.nHeadKv, hp.nFf, hp.nVocab, hp.headDim],
          [shape.dim, shape.layers, shape.heads, shape.kvHeads, shape.ffn, shape.vocab, shape.dim / shape.heads]);
        for (const r of REF.results.slice(0, 3)) {
          const res = await m.complete(r.prompt, { ...GREEDY, maxTokens: r.generated_token_ids.length });
          assert.deepEqual(res.tokens, r.generated_token_ids, r.prompt);
        }
      } finally { await m.dispose(); }
    });

test('the embedded model and its Q4_0 agree as a trained pair does (greedy speculative decoding)', async (t) => {
  if (!fs.existsSync(NATIVE)) { t.skip('build/wasmlm-native not built'); return; }
  const f16 = path.join(dir, 'B-f16.gguf'), q4 = path.join(dir, 'B-q4_0.gguf');
  if (!fs.existsSync(f16)) embedTrained(MODEL_PATH, f16, SHAPES.B, 'f16');
  assert.equal(spawnSync(NATIVE, ['quantize', f16, q4, 'q4_0']).status, 0);
  const target = await loadModel(f16, { threads: 1 }), draft = await loadModel(q4, { threads: 1 });
  try {
    let proposed = 0, accepted = 0;
    for (const r of REF.results) {
      const res = await target.complete(r.prompt, { ...GREEDY, maxTokens: r.generated_token_ids.length, draft, draftTokens: 4, adaptive: false });
      assert.deepEqual(res.tokens, r.generated_token_ids, r.prompt);
      proposed += res.stats.speculative.proposed; accepted += res.stats.speculative.accepted;
    }
    t.diagnostic(`Q4_0 draft acceptance ${(accepted / proposed).toFixed(3)}`);
    assert.ok(accepted / proposed > 0.6, `acceptance ${accepted / proposed}`);
  } finally { await target.dispose(); await draft.dispose(); }
});
