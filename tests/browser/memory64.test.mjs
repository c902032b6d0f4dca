// The memory64 (wasm64) builds in Chromium (issue #28): the probe passes, and
// the wasm64 builds, single-threaded and threaded, compute the same bits as
// the wasm32 builds (greedy and seeded tokens, a logit bias, every logit, best-of-N) on the
// trained stories260K and on a synthetic Llama 3 model in F32 and Q4_K_M;
// with one allocation of 4 GiB first, every buffer of the model lies above
// 2^32 and still gives the same bits (top log-probabilities and embeddings
// too), a logit bias's pairs as well (a pointer in wlm_sampler_params: 8
// bytes in wasm64, web/worker/abi.js's ABI64). A model file larger than the build in
// use can hold is refused with TOO_LARGE before its bytes are read: a Blob
// whose size is faked (the only place a size is faked), and a URL whose
// server declares 5 GB (its download is stopped, nothing is cached).
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openPage, ROOT, MODEL_PATH, reference } from './browser.mjs';
import { makeModel } from '../../models/make-model.js';
import { Engine } from '../../web/worker/engine.js';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-m64-browser-'));
const SHAPE = { dim: 256, layers: 2, heads: 4, kvHeads: 2, ffn: 512, ctx: 256, vocab: 600 };
const HUGE = 5e9;
let page, close;
const huge = { requests: 0, closed: 0, sent: 0 };

before(async () => {
  const f32 = path.join(DIR, 'syn-f32.gguf');
  makeModel(f32, SHAPE, 'f32', 5, { arch: 'llama3' });
  // Q4_K_M through the engine's own quantizer (wasm32, in Node)
  const eng = await Engine.create(fs.readFileSync(path.join(ROOT, 'wasm', 'wasmlm.wasm')));
  eng.loadBytes(fs.readFileSync(f32));
  eng.quantize('q4_k_m', (view) => fs.writeFileSync(path.join(DIR, 'syn-q4km.gguf'), view));
  eng.dispose();
  fs.copyFileSync(MODEL_PATH, path.join(DIR, 'stories260K.gguf'));

  // cross-origin isolated (threads); the models at /t/NAME, whole (no Range)
  const iso = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };
  const routes = {
    '/huge.gguf': (req, res) => {
      // declares 5 GB, sends the start of a GGUF file, then nothing more
      huge.requests++;
      res.on('close', () => { huge.closed++; });
      res.writeHead(200, { ...iso, 'content-type': 'application/octet-stream', 'content-length': String(HUGE), etag: '"huge"' });
      const head = Buffer.alloc(64 << 10); head.write('GGUF');
      res.write(head);
      huge.sent += head.length;
    },
  };
  const files = (p) => (p.startsWith('/t/') ? path.join(DIR, path.basename(p)) : null);
  ({ page, close } = await openPage({ files, routes, headers: iso, ranges: false }));
});

after(async () => {
  await close?.();
  fs.rmSync(DIR, { recursive: true, force: true });
});

/** Runs every configuration on one model in the page: tokens, seeded tokens, tokens with a logit bias, logits (as hex), best-of-N. */
const runConfigs = (url, prompt, ids) => page.evaluate(async ([url, prompt, ids]) => {
  const { loadModel } = await import('/web/index.js');
  const hex = (rows) => rows.map((r) => Array.from(new Uint8Array(r.buffer, r.byteOffset, r.byteLength), (b) => b.toString(16).padStart(2, '0')).join('')).join('|');
  const out = {};
  for (const [memory64, threads] of [['off', 1], ['on', 1], ['on', 2], ['off', 2]]) {
    const m = await loadModel(url, { memory64, threads, contextLength: 128, cache: false });
    const greedy = await m.complete(prompt, { temperature: 0, repeatPenalty: 1, ignoreEos: true, maxTokens: 24 });
    const biased = await m.complete(prompt, { temperature: 0, repeatPenalty: 1, ignoreEos: true, maxTokens: 12, logitBias: { [greedy.tokens[0]]: -Infinity } });
    const seeded = await m.complete(prompt, { temperature: 0.9, seed: 7, ignoreEos: true, maxTokens: 24 });
    const best = await m.bestOfN(prompt, { n: 3, maxTokens: 12, temperature: 1, seed: 3, ignoreEos: true });
    out[`${memory64}/${threads}`] = {
      memory64: m.memory64, threads: m.threads,
      greedy: greedy.tokens, seeded: seeded.tokens, biased: biased.tokens,
      logits: hex(await m.logits(ids, { all: true })),
      best: best.candidates.map((c) => c.tokens.join(',')).join('|'),
    };
    await m.dispose();
  }
  return out;
}, [url, prompt, ids]);

function assertSameBits(out, what) {
  const [first, ...rest] = Object.keys(out);
  assert.equal(out['off/1'].memory64, false, `${what}: memory64 'off' runs wasm32`);
  assert.equal(out['on/1'].memory64, true, `${what}: memory64 'on' runs wasm64`);
  assert.equal(out['on/2'].memory64, true);
  assert.equal(out['on/2'].threads, 2, `${what}: the threaded wasm64 build runs (shared memory64)`);
  assert.ok(out[first].logits.length > 1000);
  assert.notEqual(out[first].biased[0], out[first].greedy[0], `${what}: the logit bias bans the greedy token`);
  for (const k of rest) {
    for (const field of ['greedy', 'seeded', 'biased', 'logits', 'best']) assert.equal(JSON.stringify(out[k][field]), JSON.stringify(out[first][field]), `${what}: ${field} of ${k} differs from ${first}`);
  }
}

test('the memory64 probe passes in Chromium, shared memory64 too', async () => {
  const probe = await page.evaluate(async () => (await import('/web/index.js')).memory64Support());
  assert.deepEqual(probe, { ok: true, shared: true, reason: null });
});

test('stories260K: wasm64 and wasm32, 1 and 2 threads, the same tokens and logits bit for bit; greedy = the reference', async () => {
  const ref = reference().results[0];
  const out = await runConfigs('/t/stories260K.gguf', ref.prompt, [1, 403, 407, 261, 378]);
  assertSameBits(out, 'stories260K');
  assert.deepEqual(out['on/1'].greedy, ref.generated_token_ids.slice(0, 24));
});

test('a synthetic Llama 3 model, F32 and Q4_K_M: wasm64 computes what wasm32 does', async () => {
  for (const name of ['syn-f32.gguf', 'syn-q4km.gguf']) {
    const out = await runConfigs(`/t/${name}`, 'hello world, the quick brown fox', [0, 17, 300, 42, 599, 7]);
    assertSameBits(out, name);
  }
});

test('wasm64 with every buffer above 4 GiB: model, context and logits at addresses past 2^32 give the same bits', async () => {
  const r = await page.evaluate(async () => {
    const { Engine } = await import('/web/worker/engine.js');
    const model = new Uint8Array(await (await fetch('/t/syn-q4km.gguf')).arrayBuffer());
    const run = async (file, pad) => {
      const eng = await Engine.create(new Uint8Array(await (await fetch(file)).arrayBuffer()));
      if (pad) eng.alloc(pad);
      eng.loadBytes(model, { contextLength: 128 });
      const at = { file: eng.staging.ptr, logits: eng.logitsAddress(0), next: eng.alloc(16) };
      const tokens = eng.complete('hello world', { temperature: 0, repeatPenalty: 1, ignoreEos: true, maxTokens: 16 }).tokens;
      const logits = Array.from(new Uint32Array(eng.logits([0, 17, 300], { all: true }).flatMap((row) => Array.from(new Uint32Array(row.buffer)))));
      const dist = eng.nextTokenDistribution('hello', { topK: 5 }).map((d) => d.token);
      // blocks of the helpers that read results through the 32-bit views (top logprobs, embeddings)
      const top = JSON.stringify(eng.topLogprobs(0, 4));
      const steps = eng.embedSteps([[1, 17, 300], [5, 6, 7, 8, 9]], { pooling: 'mean' });
      let step = steps.next();
      while (!step.done) step = steps.next();
      const embed = step.value.vectors.map((v) => Array.from(new Uint32Array(v.buffer, v.byteOffset, v.length)).join(',')).join('|');
      const wasmBytes = eng.memoryStats().wasmBytes;
      Object.assign(at, { topIds: eng.blocks.topIds.p, embedOut: eng.blocks.embedOut.p });
      eng.dispose();
      return { at, tokens, logits: logits.join(','), dist, top, embed, wasmBytes, memory64: eng.memory64 };
    };
    return { w32: await run('/wasm/wasmlm.wasm', 0), w64: await run('/wasm/wasmlm64-relaxed.wasm', 2 ** 32 + (16 << 20)) };
  });
  assert.equal(r.w64.memory64, true);
  for (const [k, v] of Object.entries(r.w64.at)) assert.ok(v > 2 ** 32, `${k} at ${v}: not above 4 GiB`);
  assert.ok(r.w64.wasmBytes > 2 ** 32);
  assert.deepEqual(r.w64.tokens, r.w32.tokens);
  assert.equal(r.w64.logits, r.w32.logits);
  assert.deepEqual(r.w64.dist, r.w32.dist);
  assert.match(r.w32.top, /"logprob":-?\d/);
  assert.equal(r.w64.top, r.w32.top, 'the top log-probabilities');
  assert.ok(r.w32.embed.length > 100);
  assert.equal(r.w64.embed, r.w32.embed, 'the embeddings');
});

test('wasm64 above 4 GiB: a logit bias (a pointer in wlm_sampler_params, 8 bytes in wasm64) bans the greedy token as in wasm32', async () => {
  const r = await page.evaluate(async () => {
    const { Engine } = await import('/web/worker/engine.js');
    const model = new Uint8Array(await (await fetch('/t/syn-q4km.gguf')).arrayBuffer());
    const run = async (file, pad) => {
      const eng = await Engine.create(new Uint8Array(await (await fetch(file)).arrayBuffer()));
      if (pad) eng.alloc(pad);
      eng.loadBytes(model, { contextLength: 128 });
      const greedy = { temperature: 0, repeatPenalty: 1, ignoreEos: true, maxTokens: 12 };
      const plain = eng.complete('hello world', greedy).tokens;
      // two pairs: the first greedy token banned, a mild push for another
      const biased = eng.complete('hello world', { ...greedy, logitBias: { [plain[0]]: -Infinity, 7: 1 } }).tokens;
      const out = { plain, biased, biasAt: eng.blocks.bias.p, memory64: eng.memory64 };
      eng.dispose();
      return out;
    };
    return { w32: await run('/wasm/wasmlm.wasm', 0), w64: await run('/wasm/wasmlm64-relaxed.wasm', 2 ** 32 + (16 << 20)) };
  });
  assert.equal(r.w64.memory64, true);
  assert.ok(r.w64.biasAt > 2 ** 32, `the bias pairs at ${r.w64.biasAt}: not above 4 GiB`);
  assert.deepEqual(r.w64.plain, r.w32.plain);
  assert.notEqual(r.w32.biased[0], r.w32.plain[0], 'the bias bans the greedy token in wasm32');
  assert.ok(!r.w32.biased.includes(r.w32.plain[0]));
  assert.deepEqual(r.w64.biased, r.w32.biased, 'wasm64 samples with the same bias');
});

test('wasm64 above 4 GiB: a grammar\'s mask (wlm_sampler_params.allow, a second pointer) with a logit bias constrains as in wasm32', async () => {
  const ARITH = 'root ::= num (" + " num){1,3} "="\nnum ::= [1-9] [0-9]{0,2}\n';
  const r = await page.evaluate(async (ARITH) => {
    const { Engine } = await import('/web/worker/engine.js');
    const model = new Uint8Array(await (await fetch('/t/stories260K.gguf')).arrayBuffer());
    const run = async (file, pad) => {
      const eng = await Engine.create(new Uint8Array(await (await fetch(file)).arrayBuffer()));
      if (pad) eng.alloc(pad);
      eng.loadBytes(model, { contextLength: 128 });
      const o = { temperature: 0.9, seed: 11, maxTokens: 40, grammar: ARITH };
      const texts = [];
      for (const logitBias of [null, [['5', 3], ['1', -Infinity]]]) {
        const g = eng.complete('Once upon a time', { ...o, logitBias });
        texts.push({ text: g.text, tokens: g.tokens, finishReason: g.finishReason });
      }
      const gr = eng.grammars.get(ARITH), s = gr.newState();
      const maskAt = gr.mask(s).allow;
      gr.freeState(s);
      const out = { texts, maskAt, biasAt: eng.blocks.bias.p, memory64: eng.memory64 };
      eng.dispose();
      return out;
    };
    return { w32: await run('/wasm/wasmlm.wasm', 0), w64: await run('/wasm/wasmlm64-relaxed.wasm', 2 ** 32 + (16 << 20)) };
  }, ARITH);
  assert.equal(r.w64.memory64, true);
  assert.ok(r.w64.maskAt > 2 ** 32 && r.w64.biasAt > 2 ** 32, `mask at ${r.w64.maskAt}, bias pairs at ${r.w64.biasAt}: not above 4 GiB`);
  for (const t of r.w32.texts) assert.match(t.text, /^[1-9][0-9]{0,2}( \+ [1-9][0-9]{0,2}){1,3}=$/, `wasm32: ${JSON.stringify(t)}`);
  assert.notEqual(r.w32.texts[1].text, r.w32.texts[0].text, 'the bias changes the constrained text');
  assert.deepEqual(r.w64.texts, r.w32.texts, 'wasm64 generates what wasm32 does under the grammar');
});

test('a file over what the build can hold is TOO_LARGE before a byte is read: a Blob (its size faked) and a URL declaring 5 GB', async () => {
  const r = await page.evaluate(async (huge) => {
    const { loadModel } = await import('/web/index.js');
    const err = async (src, opts) => {
      const t0 = performance.now();
      try { await loadModel(src, opts); return { code: 'resolved' }; } catch (e) { return { code: e.code, message: e.message, size: e.size, limit: e.limit, ms: performance.now() - t0 }; }
    };
    // a Blob whose size says 5 GB (17 GiB): only the refusal looks at it, no byte is read
    const fake = (size) => { const b = new Blob([new TextEncoder().encode('GGUF')]); Object.defineProperty(b, 'size', { value: size }); return b; };
    const out = {
      off: await err(fake(huge), { memory64: 'off' }),
      over64: await err(fake(17 * 2 ** 30), {}),
      url: await err('/huge.gguf', { memory64: 'off' }),
    };
    const store = await caches.open('wasmlm-models-v1');
    out.cached = (await store.keys()).map((k) => k.url);
    return out;
  }, HUGE);
  assert.equal(r.off.code, 'TOO_LARGE', r.off.message);
  assert.equal(r.off.size, HUGE);
  assert.equal(r.off.limit, 2 ** 32);
  assert.match(r.off.message, /is 4\.66 GiB \(5000000000 bytes\): over the 4 GiB a wasm32 engine can address; it needs the memory64 \(wasm64\) build, which is not used here: the option memory64 is 'off'/);
  assert.equal(r.over64.code, 'TOO_LARGE', r.over64.message);
  assert.equal(r.over64.limit, 2 ** 34);
  assert.match(r.over64.message, /is 17\.00 GiB \(18253611008 bytes\): over the 16 GiB of memory a memory64 \(wasm64\) engine can have/);
  assert.equal(r.url.code, 'TOO_LARGE', r.url.message);
  assert.match(r.url.message, /^\/huge\.gguf is 4\.66 GiB \(5000000000 bytes\): over the 4 GiB/);   // the URL as given
  // the download was stopped, not left to fill the model cache in the background
  for (let i = 0; i < 50 && huge.closed < huge.requests; i++) await new Promise((res) => setTimeout(res, 100));
  assert.equal(huge.requests, 1);
  assert.equal(huge.closed, 1, 'the 5 GB response was aborted');
  assert.deepEqual(r.cached, []);
});
