// The sampling controls of issue #29 through the public API, on stories260K:
// the defaults (temperature 0 alone is llama.cpp's greedy output).
import test from 'node:test';
import assert from 'node:assert/strict';
import { MODEL_PATH, reference } from './helpers.mjs';
import { loadModel } from '../../web/index.js';

const REF = reference();

let model;
test.before(async () => { model = await loadModel(MODEL_PATH, { threads: 1, contextLength: 512 }); });
test.after(async () => { await model?.dispose(); });

test('defaults: temperature 0 and nothing else is plain greedy decoding, llama.cpp\'s output token for token', async () => {
  for (const ref of REF.results) {
    const r = await model.complete(ref.prompt, { temperature: 0, ignoreEos: true, maxTokens: ref.generated_token_ids.length });
    assert.deepEqual(r.tokens, ref.generated_token_ids, `prompt ${JSON.stringify(ref.prompt)}`);
    const streamed = [];
    for await (const c of model.generate(ref.prompt, { temperature: 0, ignoreEos: true, maxTokens: 40 })) if (c.token >= 0) streamed.push(c.token);
    assert.deepEqual(streamed, ref.generated_token_ids.slice(0, 40));
    // the old default (repeatPenalty 1.1) gave another output
    const old = await model.complete(ref.prompt, { temperature: 0, repeatPenalty: 1.1, ignoreEos: true, maxTokens: ref.generated_token_ids.length });
    assert.notDeepEqual(old.tokens, ref.generated_token_ids);
  }
  // the C defaults (the native CLI's) are the schema's: tests/js/options.test.mjs and cli.test.mjs
});
