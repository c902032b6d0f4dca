// The OpenAI-style completions in Chromium (web/openai.js): a synthetic
// model's completions.create, whole and streamed, with n > 1 and logprobs
// (the vocabulary's bytes cross from the worker), equals what Node gives for
// the same request and seed. Chat completions need the chat-template worker,
// whose bare @huggingface/jinja import this page (no bundler) cannot resolve:
// tests/browser/openai-chat.test.mjs runs them through the demo server, which
// serves that module.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openPage } from './browser.mjs';
import { makeModel } from '../../models/make-model.js';
import { loadModel } from '../../web/index.js';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-openai-browser-'));
const file = path.join(DIR, 'qwen2.gguf');
makeModel(file, { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 96, ctx: 256, vocab: 320 }, 'f32', 13, { arch: 'qwen2' });
const REQUESTS = [
  { prompt: 'Hello world', temperature: 0.9, seed: 4, max_tokens: 12, logprobs: 3 },
  { prompt: ['Hello', 'Once upon'], temperature: 1, seed: 8, max_tokens: 6, n: 2 },
];
let page, close;

// the page from ROOT, the model at /m/qwen2.gguf
before(async () => { ({ page, close } = await openPage({ files: { '/m/qwen2.gguf': file } })); });
after(async () => {
  await close?.();
  fs.rmSync(DIR, { recursive: true, force: true });
});

/** A response without what differs between two runs (id, created). */
const plain = (r) => JSON.stringify({ ...r, id: undefined, created: undefined });

test('completions.create in Chromium equals Node: whole, streamed, n > 1, logprobs', async () => {
  const got = await page.evaluate(async (requests) => {
    const { loadModel: load } = await import('/web/index.js');
    const bytes = new Uint8Array(await (await fetch('/m/qwen2.gguf')).arrayBuffer());
    const m = await load(bytes, { threads: 1 });
    try {
      const out = [];
      for (const req of requests) {
        const whole = await m.completions.create(req);
        const texts = {};
        for await (const c of await m.completions.create({ ...req, stream: true })) {
          for (const ch of c.choices) texts[ch.index] = (texts[ch.index] || '') + ch.text;
        }
        out.push({ whole: JSON.stringify({ ...whole, id: undefined, created: undefined }), id: whole.id, texts });
      }
      return out;
    } finally { await m.dispose(); }
  }, REQUESTS);
  const m = await loadModel(file, { threads: 1 });
  try {
    for (let i = 0; i < REQUESTS.length; i++) {
      const node = await m.completions.create(REQUESTS[i]);
      assert.equal(got[i].whole, plain(node));
      assert.match(got[i].id, /^cmpl-[A-Za-z0-9]{24}$/);
      assert.deepEqual(Object.values(got[i].texts), node.choices.map((c) => c.text));
    }
  } finally {
    await m.dispose();
  }
});
