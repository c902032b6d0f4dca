// Pointers above 2 GiB: a wasm32 address of 2^31 or more must be used as an
// unsigned number in JS (`p >>> 2`, never `p >> 2`, which goes negative and
// makes typed-array writes vanish). Found with a 2.2 GB F16 target in
// speculative decoding: the draft's token ids were written nowhere and the
// engine read garbage ids. Here an engine is pushed past 2 GiB by one large
// allocation, so every buffer allocated after it (the context, the
// speculative round's draft buffers, the sampler's distribution) lies above.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MODEL_PATH, reference } from './helpers.mjs';
import { Engine } from '../../web/worker/engine.js';
import { startSpeculative } from '../../web/worker/multi.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const GREEDY = { temperature: 0, repeatPenalty: 1, ignoreEos: true };

test('buffers above 2 GiB: generation, speculative rounds and the next-token distribution are unchanged', async () => {
  const REF = reference();
  const eng = await Engine.create(fs.readFileSync(path.join(root, 'wasm/wasmlm.wasm')));
  const pad = eng.alloc(2 ** 31 + (64 << 20));
  assert.ok(pad > 0);
  eng.loadBytes(fs.readFileSync(MODEL_PATH), { contextLength: 256 });
  const probe = eng.alloc(16);
  assert.ok(probe >= 2 ** 31, `allocation at ${probe} is not above 2 GiB`);
  eng.free(probe);

  const r = REF.results[0];
  const plain = eng.complete(r.prompt, { ...GREEDY, maxTokens: 40 });
  assert.deepEqual(plain.tokens, r.generated_token_ids.slice(0, 40));

  // speculative rounds with explicit draft tokens (one-hot q): drafting the
  // reference's own next tokens must accept all of them
  const g = startSpeculative(eng, r.prompt, { ...GREEDY, maxTokens: 40, draftTokens: 4 });
  const out = [];
  let res;
  for (;;) {
    const next = r.generated_token_ids.slice(out.length, out.length + 3);
    res = g.round(next, null, () => false);
    for (const c of res.chunks || []) if (c.token >= 0) out.push(c.token);
    if (res.done) break;
    assert.equal(res.accepted, next.length, 'every correct draft token accepted');
  }
  assert.deepEqual(res.tokens, r.generated_token_ids.slice(0, 40));

  const dist = eng.nextTokenDistribution(r.prompt, { topK: 5 });
  assert.equal(dist[0].token, r.generated_token_ids[0]);
  assert.ok(dist.every((d) => d.prob >= 0 && d.prob <= 1));
  eng.dispose();
});
