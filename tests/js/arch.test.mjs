// Architectures: synthetic llama, Llama 3 style (rope_freqs.weight or llama3
// RoPE-scaling metadata, key/value head sizes that differ from
// n_embd/n_head, byte-level BPE), qwen2 (Q/K/V biases, NEOX RoPE), qwen3, smollm3, granite, gemma2
// (soft-capping, post norms, GeGLU, sliding window on even layers), gemma3
// (Q/K norms, 5 sliding : 1 global layers with their own RoPE bases), phi3
// (fused QKV and gate/up, LongRoPE short/long factors by context length,
// attention factor) and Mistral-style llama (attention.sliding_window on
// every layer) models
// run in the wasm engine; their logits match an independent plain-JS
// forward pass (tests/js/reference-forward.mjs) to 1e-4; the native build
// generates the same greedy text; unknown architectures are refused by name.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeModel } from '../../models/make-model.js';
import { writeGGUF, T, GGML } from '../../models/gguf-writer.js';
import { loadModel } from '../../web/index.js';
import { readGGUF, referenceLogits, configOf } from './reference-forward.mjs';
import { runCli, NATIVE_SKIP } from './helpers.mjs';
import { SHAPE, VARIANTS } from './arch-variants.mjs';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-arch-'));
test.after(() => fs.rmSync(DIR, { recursive: true, force: true }));

const CTX = 64;
const NEOX = new Set(['qwen2', 'qwen3', 'gemma2', 'gemma3', 'phi3']);
const byName = (n) => VARIANTS.find((v) => v.name === n);
const TOKENS = [5, 17, 200, 33, 64, 99, 150, 7, 250, 12, 81, 42];
const TOL = 1e-4;

function maxDiff(a, b) {
  let m = 0;
  for (let i = 0; i < a.length; i++) { const d = Math.abs(a[i] - b[i]); if (!(d <= m)) m = d; }
  return m;
}

for (const v of VARIANTS) {
  test(`${v.name}: wasm logits match the plain-JS reference (decode and prefill)`, async () => {
    const file = path.join(DIR, `${v.name}.gguf`);
    makeModel(file, { ...SHAPE, ...v.shape }, v.type, 4321, { qkStd: 0.2, ...v.opts });
    const g = readGGUF(file);
    const cfg = configOf(g, { nCtx: CTX });
    const ref = referenceLogits(g, TOKENS, { nCtx: CTX });
    const model = await loadModel(file, { contextLength: CTX, batchSize: 5 });
    try {
      const hp = model.info.hparams;
      assert.equal(hp.headDim, cfg.hk);
      assert.equal(hp.headDimV, cfg.hv);
      assert.equal(hp.ropeType, NEOX.has(v.opts.arch) ? 'neox' : 'norm');
      assert.equal(hp.ropeScaled, v.opts.arch === 'llama3' || v.opts.arch === 'phi3');
      if (v.opts.arch === 'llama3') assert.equal(hp.ropeFreqBase, 500000);
      const rows = await model.logits(TOKENS, { all: true });
      assert.equal(rows.length, TOKENS.length);
      let worst = 0;
      // gemma's larger synthetic logits: the tolerance relative to their size
      const tol = TOL * Math.max(1, ...ref.at(-1).map(Math.abs));
      rows.forEach((r, t) => { worst = Math.max(worst, maxDiff(r, ref[t])); });
      assert.ok(worst < tol, `decode: max |diff| ${worst}`);
      if (process.env.WLM_TEST_VERBOSE) console.log(v.name, 'max |diff|', worst);
      const [last] = await model.logits(TOKENS);
      const wp = maxDiff(last, ref[TOKENS.length - 1]);
      assert.ok(wp < tol, `prefill: max |diff| ${wp}`);
      // the logits are not trivially small: the comparison means something
      assert.ok(Math.max(...ref.at(-1).map(Math.abs)) > 0.05);
    } finally {
      await model.dispose();
    }
  });
}

test('the reference itself: the RoPE convention and the divisors change the logits', () => {
  const file = path.join(DIR, 'qwen2-biases.gguf');
  if (!fs.existsSync(file)) makeModel(file, SHAPE, 'f32', 4321, { qkStd: 0.2, arch: 'qwen2' });
  const g = readGGUF(file);
  const a = referenceLogits(g, TOKENS.slice(0, 6)).at(-1);
  g.meta['general.architecture'] = 'llama';
  for (const k of Object.keys(g.meta)) if (k.startsWith('qwen2.')) g.meta['llama.' + k.slice(6)] = g.meta[k];
  const b = referenceLogits(g, TOKENS.slice(0, 6)).at(-1);
  assert.ok(maxDiff(a, b) > 1e-2, `llama vs neox pairing must differ (${maxDiff(a, b)})`);
  const f3 = path.join(DIR, 'llama3-rope_freqs-k24-v8.gguf');
  if (!fs.existsSync(f3)) makeModel(f3, SHAPE, 'f32', 4321, { qkStd: 0.2, ...VARIANTS[2].opts });
  const g3 = readGGUF(f3);
  const c = referenceLogits(g3, TOKENS).at(-1);
  g3.tensors['rope_freqs.weight'].data.fill(1);
  assert.ok(maxDiff(c, referenceLogits(g3, TOKENS).at(-1)) > 1e-3, `rope_freqs divisors must matter (${maxDiff(c, referenceLogits(g3, TOKENS).at(-1))})`);
});

test('the reference itself: qwen3 head norms, the smollm3 unrotated layer and each granite multiplier change the logits', () => {
  const ref = (g) => referenceLogits(g, TOKENS.slice(0, 8)).at(-1);
  const file = (v) => {
    const f = path.join(DIR, `${v.name}.gguf`);
    if (!fs.existsSync(f)) makeModel(f, { ...SHAPE, ...v.shape }, v.type, 4321, { qkStd: 0.2, ...v.opts });
    return readGGUF(f);
  };
  const q3 = file(byName('qwen3-qk-norm')), a = ref(q3);
  for (const t of Object.keys(q3.tensors)) if (/attn_[qk]_norm/.test(t)) q3.tensors[t].data.fill(1);
  assert.ok(maxDiff(a, ref(q3)) > 1e-3, 'the norm weights must matter');
  for (const t of Object.keys(q3.tensors)) if (/attn_[qk]_norm/.test(t)) delete q3.tensors[t];
  assert.ok(maxDiff(a, ref(q3)) > 1e-3, 'the head norms must matter');
  const sm = file(byName('smollm3-nope-layer')), b = ref(sm);
  sm.meta['general.architecture'] = 'llama';
  for (const k of Object.keys(sm.meta)) if (k.startsWith('smollm3.')) sm.meta['llama.' + k.slice(8)] = sm.meta[k];
  assert.ok(maxDiff(b, ref(sm)) > 1e-3, 'rotating layer 3 must change the logits');
  const gr = file(byName('granite-multipliers')), c = ref(gr);
  for (const k of ['embedding_scale', 'residual_scale', 'attention.scale', 'logit_scale']) {
    const keep = gr.meta[`granite.${k}`];
    gr.meta[`granite.${k}`] = k === 'attention.scale' ? 3 : 1;
    assert.ok(maxDiff(c, ref(gr)) > 1e-3, `granite.${k} must matter`);
    gr.meta[`granite.${k}`] = keep;
  }
});

test('synthetic architectures generate in the native build exactly as in wasm', { skip: NATIVE_SKIP }, async () => {
  for (const v of [VARIANTS[2], VARIANTS[4]]) {
    const file = path.join(DIR, `${v.name}.gguf`);
    if (!fs.existsSync(file)) makeModel(file, SHAPE, v.type, 4321, { qkStd: 0.2, ...v.opts });
    const args = ['generate', '-m', file, '-p', 'Hello world, the story', '-n', '24', '--temp', '0', '--repeat-penalty', '1', '--ignore-eos'];
    const w = await runCli(args);
    const n = await runCli([...args, '--native']);
    assert.equal(w.code, 0, w.stderr);
    assert.equal(n.code, 0, n.stderr);
    assert.ok(w.stdout.length > 0);
    assert.equal(n.stdout, w.stdout, v.name);
  }
});

test('phi3 reference: the fused tensors, the factor choice and the attention factor all matter', () => {
  const file = path.join(DIR, 'phi3-long-factors.gguf');
  if (!fs.existsSync(file)) makeModel(file, SHAPE, 'f32', 4321, { qkStd: 0.2, ...byName('phi3-long-factors').opts });
  const g = readGGUF(file);
  const toks = TOKENS.slice(0, 8);
  const long = referenceLogits(g, toks, { nCtx: CTX }).at(-1);
  assert.ok(maxDiff(long, referenceLogits(g, toks, { nCtx: 32 }).at(-1)) > 1e-3, 'short vs long factors');
  g.meta['phi3.rope.scaling.attn_factor'] = 1;
  assert.ok(maxDiff(long, referenceLogits(g, toks, { nCtx: CTX }).at(-1)) > 1e-3, 'attention factor');
});

test('sliding window: the reference with a window differs from full attention only from position W on', () => {
  const file = path.join(DIR, 'llama-sliding-window-5.gguf');
  if (!fs.existsSync(file)) makeModel(file, SHAPE, 'f32', 4321, { qkStd: 0.2, ...byName('llama-sliding-window-5').opts });
  const g = readGGUF(file);
  const win = referenceLogits(g, TOKENS);
  g.meta['llama.attention.sliding_window'] = 0;
  const full = referenceLogits(g, TOKENS);
  for (let t = 0; t < 5; t++) assert.equal(maxDiff(win[t], full[t]), 0);
  for (let t = 5; t < TOKENS.length; t++) assert.ok(maxDiff(win[t], full[t]) > 1e-3, `position ${t}`);
});

test('an unknown architecture is refused naming it and its first unknown tensor', async () => {
  const file = path.join(DIR, 'falcon.gguf');
  const f32 = (n) => (emit) => emit(new Uint8Array(new Float32Array(n).buffer));
  writeGGUF(file, [
    { key: 'general.architecture', type: T.STRING, value: 'falcon' },
    { key: 'falcon.block_count', type: T.U32, value: 1 },
    { key: 'falcon.embedding_length', type: T.U32, value: 32 },
  ], [
    { name: 'token_embd.weight', ne: [32, 8], type: GGML.F32, write: f32(256) },
    { name: 'blk.0.attn_norm.weight', ne: [32], type: GGML.F32, write: f32(32) },
    { name: 'blk.0.attn_norm.bias', ne: [32], type: GGML.F32, write: f32(32) },
    { name: 'blk.0.attn_qkv.weight', ne: [32, 96], type: GGML.F32, write: f32(32 * 96) },
  ]);
  await assert.rejects(loadModel(file), (e) => {
    assert.match(e.message, /unsupported architecture 'falcon' \(first unknown tensor: blk\.0\.attn_norm\.bias/);
    assert.equal(e.code, 'UNSUPPORTED');
    return true;
  });
});
