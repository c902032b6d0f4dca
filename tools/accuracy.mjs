#!/usr/bin/env node
// Quantization accuracy: re-quantizes a model to each type and compares the
// next-token distributions with the unquantized model over a fixed text.
//
//   node tools/accuracy.mjs [--models DIR] [--work DIR] [--only stories|synthetic] [--markdown]
//
// Two suites:
//   stories260K (F32; rows of 64 and 172: only 32-block types fit, so K
//     types fall back to 32-block types): Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 and the
//     mixtures, over a fixed TinyStories-like paragraph (below);
//   synthetic s110m shape (F16, random weights, dim 768 = 3 x 256, made by
//     models/make-model.js, 270 MB): every type incl. the K-quants and
//     mixtures, over the unquantized model's own greedy continuation of BOS.
// Metrics per type, over every position of the text: mean and max KL(P_ref ||
// P_quant) of the next-token distributions (nats), greedy top-1 agreement
// (argmax equal), and perplexity of the text (exp of the mean negative log
// likelihood of each next token). Quantization uses build/wasmlm-native when
// present (same quantizer code as the wasm engine), evaluation the wasm engine
// (wasm/wasmlm.wasm, one batch with logits for every position).
// Build first: make native wasm
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Engine } from '../web/worker/engine.js';
import { makeModel } from '../models/make-model.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, def) => { const i = args.indexOf(name); return i >= 0 && args[i + 1] ? args[i + 1] : def; };
const MODELS = opt('--models', process.env.WASMLM_MODELS || path.join(ROOT, '..', 'shared', 'models'));
const WORK = opt('--work', path.join(ROOT, 'build', 'accuracy'));
const ONLY = opt('--only', '');
fs.mkdirSync(WORK, { recursive: true });

export const STORY = 'Once upon a time, there was a little girl named Lily. She had a red ball that she loved very much. ' +
  'One day, she went to the park with her mom. The sun was warm and the birds were singing. Lily threw the ball high ' +
  'into the sky, and it landed in a big tree. She was sad and started to cry. A kind boy named Tom saw her. He climbed ' +
  'the tree and got the ball back. Lily smiled and said, "Thank you, Tom!" They played together all day and became ' +
  'best friends.';

const wasmBytes = fs.readFileSync(path.join(ROOT, 'wasm', 'wasmlm.wasm'));
const NATIVE = path.join(ROOT, 'build', 'wasmlm-native');

function quantize(src, dst, type) {
  if (fs.existsSync(dst) && fs.statSync(dst).mtimeMs > fs.statSync(src).mtimeMs &&
      fs.statSync(dst).mtimeMs > fs.statSync(NATIVE).mtimeMs) return;
  execFileSync(NATIVE, ['quantize', src, dst, type], { stdio: ['ignore', 'ignore', 'inherit'] });
}

// Loads a model into a fresh engine with a context that keeps the logits of
// every position (logits_all) and a batch as large as the text.
async function open(file, nTok) {
  const eng = await Engine.create(wasmBytes);
  eng.loadBytes(fs.readFileSync(file), { contextLength: nTok + 8, batchSize: nTok + 8 });
  const x = eng.x;
  x.wlm_ctx_free(eng.ctx);
  const { CTX_PARAMS, ERR, writeCtxParams } = eng.abi;
  const cp = eng.alloc(CTX_PARAMS.size), pp = eng.alloc(8), er = eng.alloc(ERR.size);
  x.wlm_ctx_default_params(cp);
  writeCtxParams(eng.dv, cp, { nCtx: nTok + 8, nBatch: nTok + 8, logitsAll: 1 });
  const st = x.wlm_ctx_new(pp, eng.model, cp, er);
  if (st) throw new Error(`wlm_ctx_new failed (${st})`);
  eng.ctx = eng.getPtr(pp);
  eng.nBatch = nTok + 8;
  return eng;
}

// log-softmax rows (Float64) of every position of `toks`
async function logProbs(file, toks) {
  const eng = await open(file, toks.length);
  const st = eng.append(toks);
  if (st) throw new Error(`eval failed (${st})`);
  const V = eng.hparams.nVocab, n = eng.x.wlm_ctx_n_logits(eng.ctx) >>> 0;
  if (n !== toks.length) throw new Error(`expected ${toks.length} rows of logits, got ${n}`);
  const p = eng.x.wlm_ctx_logits(eng.ctx) >>> 0;
  const f = new Float32Array(eng.memory.buffer, p, n * V);
  const out = [];
  for (let t = 0; t < n; t++) {
    const row = f.subarray(t * V, (t + 1) * V);
    let mx = -Infinity; for (let i = 0; i < V; i++) if (row[i] > mx) mx = row[i];
    let s = 0; for (let i = 0; i < V; i++) s += Math.exp(row[i] - mx);
    const ls = mx + Math.log(s), lp = new Float64Array(V);
    for (let i = 0; i < V; i++) lp[i] = row[i] - ls;
    out.push(lp);
  }
  eng.dispose();
  return out;
}

function argmax(a) { let b = 0; for (let i = 1; i < a.length; i++) if (a[i] > a[b]) b = i; return b; }

function compare(ref, q, toks) {
  let kl = 0, klMax = 0, agree = 0, nll = 0;
  const T = toks.length - 1; // positions with a next token
  for (let t = 0; t < T; t++) {
    const a = ref[t], b = q[t];
    let k = 0; for (let i = 0; i < a.length; i++) { const pa = Math.exp(a[i]); if (pa > 0) k += pa * (a[i] - b[i]); }
    kl += k; klMax = Math.max(klMax, k);
    agree += argmax(a) === argmax(b) ? 1 : 0;
    nll -= b[toks[t + 1]];
  }
  return { kl: kl / T, klMax, agree, T, ppl: Math.exp(nll / T) };
}

async function tokenize(file, text) {
  const eng = await Engine.create(wasmBytes);
  eng.loadBytes(fs.readFileSync(file), { contextLength: 512 });
  const ids = eng.tokenize(text, true);
  eng.dispose();
  return Array.from(ids);
}

// greedy continuation of BOS by the model itself
async function greedyText(file, n) {
  const eng = await open(file, n + 1);
  const toks = [eng.hparams.bosId];
  for (let i = 0; i < n; i++) {
    if (eng.append([toks[toks.length - 1]])) throw new Error('eval failed');
    const V = eng.hparams.nVocab, rows = eng.x.wlm_ctx_n_logits(eng.ctx) >>> 0;
    const p = eng.x.wlm_ctx_logits(eng.ctx) >>> 0;
    toks.push(argmax(new Float32Array(eng.memory.buffer, p + (rows - 1) * V * 4, V)));
  }
  eng.dispose();
  return toks;
}

async function suite(name, base, types, toks, rows) {
  const refLp = await logProbs(base, toks);
  const refPpl = compare(refLp, refLp, toks).ppl;
  rows.push({ suite: name, type: 'reference', size: fs.statSync(base).size, kl: 0, klMax: 0, agree: toks.length - 1, T: toks.length - 1, ppl: refPpl });
  for (const t of types) {
    const out = path.join(WORK, `${path.basename(base, '.gguf')}-${t}.gguf`);
    quantize(base, out, t);
    const r = compare(refLp, await logProbs(out, toks), toks);
    rows.push({ suite: name, type: t, size: fs.statSync(out).size, ...r });
    console.error(`${name} ${t}: KL ${r.kl.toExponential(3)} top-1 ${r.agree}/${r.T} ppl ${r.ppl.toFixed(4)}`);
  }
}

const rows = [];
if (ONLY !== 'synthetic') {
  const base = path.join(MODELS, 'stories260K.gguf');
  const toks = await tokenize(base, STORY);
  await suite('stories260K', base, ['q8_0', 'q5_1', 'q5_0', 'q4_1', 'q4_0', 'q5_k_m', 'q4_k_m'], toks, rows);
}
if (ONLY !== 'stories') {
  const base = path.join(WORK, 's110m-f16.gguf');
  if (!fs.existsSync(base)) { console.error('making', base); await makeModel(base, 's110m', 'f16'); }
  const toks = await greedyText(base, 128);
  await suite('synthetic s110m', base, ['q8_0', 'q6_k', 'q5_k_m', 'q5_k', 'q5_1', 'q5_0', 'q4_k_m', 'q4_k', 'q4_1', 'q4_0', 'q3_k', 'q2_k'], toks, rows);
}

const fmt = (r) => `| ${r.suite} | ${r.type} | ${(r.size / 1e6).toFixed(2)} | ${r.type === 'reference' ? '-' : r.kl.toExponential(2)} | ` +
  `${r.type === 'reference' ? '-' : r.klMax.toExponential(2)} | ${r.agree}/${r.T} | ${r.ppl.toFixed(4)} |`;
console.log('| model | type | file MB | mean KL (nats) | max KL | greedy top-1 agreement | perplexity |');
console.log('|---|---|---|---|---|---|---|');
for (const r of rows) console.log(fmt(r));
