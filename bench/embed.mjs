// `make bench` (embeddings): texts embedded per second by wasmlm
// (model.embed in Node, the wasm engine) beside native llama.cpp
// (node-llama-cpp's embedding context, when installed) on the same synthetic
// GGUF: a bert of all-MiniLM-L6-v2's shape (models/make-model.js 'minilm':
// 6 layers, 384 dims, 12 heads, FFN 1536, WordPiece vocabulary of 30522),
// generated into bench/cache/. Two loads: batch 1 (one text per call) and
// batch 32 (32 texts per call: wasmlm runs them as 32 sequences of one
// forward pass; node-llama-cpp's embedding context takes one text per call,
// so its batch-32 column is 32 calls in a row). The engines take turns rep
// by rep, so a busy machine slows them alike; medians are reported.
//
//   node bench/embed.mjs [--types f16,q8_0] [--threads 1,2] [--reps 3] [--texts 64] [--out embed]
// Writes bench/results/OUT.json and OUT.md.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { cache, native, root, benchArgs, median } from './common.mjs';
import { makeModel } from '../models/make-model.js';
import { loadModel } from '../web/index.js';

const args = benchArgs();
const types = String(args.types || 'f16,q8_0').split(',');
const threadCounts = String(args.threads || '1,2').split(',').map(Number);
const reps = +(args.reps || 3);
const nTexts = +(args.texts || 64);
const out = String(args.out || 'embed');
const BATCH = 32;


/** The benchmark's bert file of `type`: F16 generated, other types quantized from it by the native CLI. */
function minilm(type) {
  fs.mkdirSync(cache, { recursive: true });
  const f16 = path.join(cache, 'minilm-bert_f16.gguf');
  if (!fs.existsSync(f16)) { console.error(`generating ${f16}`); makeModel(f16, 'minilm', 'f16', 1234, { arch: 'bert' }); }
  if (type === 'f16') return f16;
  const file = path.join(cache, `minilm-bert_${type}.gguf`);
  if (!fs.existsSync(file)) {
    if (!fs.existsSync(native)) throw new Error(`${file} is missing and build/wasmlm-native is not built (run make)`);
    console.error(`quantizing ${file}`);
    execFileSync(native, ['quantize', f16, file, type], { stdio: 'ignore' });
  }
  return file;
}

// sentences of 8 to 40 words of the synthetic vocabulary (every word one piece)
const WORDS = ['the', 'a', 'of', 'and', 'to', 'in', 'is', 'it', 'that', 'for', 'on', 'with', 'as', 'was', 'cat', 'dog', 'sat',
  'mat', 'quick', 'brown', 'fox', 'jumps', 'over', 'lazy', 'search', 'vector', 'text', 'model', 'weather', 'today', 'music'];
const texts = Array.from({ length: nTexts }, (_, i) => {
  const n = 8 + ((i * 13) % 33);
  return Array.from({ length: n }, (_, j) => WORDS[(i * 7 + j * 11) % WORDS.length]).join(' ') + '.';
});

let llama = null;
try {
  const { getLlama } = await import('node-llama-cpp');
  llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
} catch { /* not installed: its columns stay empty */ }

async function oursRep(m, batch) {
  const t0 = performance.now();
  for (let i = 0; i < texts.length; i += batch) await m.embed(texts.slice(i, i + batch));
  return texts.length / ((performance.now() - t0) / 1000);
}

async function theirsRep(ctx) {
  const t0 = performance.now();
  for (const t of texts) await ctx.getEmbeddingFor(t);
  return texts.length / ((performance.now() - t0) / 1000);
}

const rows = [];
for (const type of types) {
  const file = minilm(type);
  for (const threads of threadCounts) {
    const m = await loadModel(file, { threads });
    const tokens = (await Promise.all(texts.map((t) => m.tokenize(t)))).reduce((s, ids) => s + ids.length, 0);
    let L = null;
    if (llama) {
      const lm = await llama.loadModel({ modelPath: file });
      L = { lm, ctx: await lm.createEmbeddingContext({ contextSize: 512, batchSize: 512, threads }) };
    }
    const r = { ours1: [], ours32: [], theirs: [] };
    await oursRep(m, BATCH);   // warm-up: the context grows to its batch once
    if (L) await theirsRep(L.ctx);
    for (let k = 0; k < reps; k++) {
      r.ours1.push(await oursRep(m, 1));
      r.ours32.push(await oursRep(m, BATCH));
      if (L) r.theirs.push(await theirsRep(L.ctx));
    }
    const row = { type, threads, texts: texts.length, tokensPerText: +(tokens / texts.length).toFixed(1), simd: m.simd,
      wasmlmBatch1: +median(r.ours1).toFixed(1), wasmlmBatch32: +median(r.ours32).toFixed(1),
      llamaCpp: L ? +median(r.theirs).toFixed(1) : null };
    rows.push(row);
    console.error(`${type} ${threads}t: wasmlm ${row.wasmlmBatch1} (batch 1) / ${row.wasmlmBatch32} (batch ${BATCH}) texts/s; llama.cpp ${row.llamaCpp ?? '—'} texts/s`);
    await m.dispose();
    if (L) { await L.ctx.dispose(); await L.lm.dispose(); }
  }
}
if (llama) await llama.dispose();

const date = new Date().toISOString().slice(0, 10);
const host = `${os.cpus()[0]?.model || 'unknown CPU'}, ${os.cpus().length} cores, Node ${process.version}`;
fs.mkdirSync(path.join(root, 'bench', 'results'), { recursive: true });
fs.writeFileSync(path.join(root, 'bench', 'results', `${out}.json`), JSON.stringify({ date, host, batch: BATCH, reps, rows }, null, 1) + '\n');
let md = `# Embeddings per second (${date}, ${host})\n\n` +
  `all-MiniLM-L6-v2's shape (bert: 6 layers, 384 dims, 12 heads, FFN 1536, vocabulary 30522; random weights), ${texts.length} texts of 8-40 words, median of ${reps} reps, texts/s.\n` +
  `wasmlm: model.embed (the wasm engine in Node) with one text per call (batch 1) and ${BATCH} texts per call (one forward pass of ${BATCH} sequences). ` +
  'llama.cpp: node-llama-cpp\'s embedding context (native, prebuilt CPU build), which embeds one text per call.\n\n' +
  `| type | threads | tokens/text | wasmlm batch 1 | wasmlm batch ${BATCH} | llama.cpp | batch ${BATCH} ÷ llama.cpp |\n|---|---|---|---|---|---|---|\n`;
for (const r of rows) {
  md += `| ${r.type} | ${r.threads} | ${r.tokensPerText} | ${r.wasmlmBatch1} | ${r.wasmlmBatch32} | ${r.llamaCpp ?? '—'} | ${r.llamaCpp ? (r.wasmlmBatch32 / r.llamaCpp).toFixed(2) : '—'} |\n`;
}
fs.writeFileSync(path.join(root, 'bench', 'results', `${out}.md`), md);
process.stdout.write(md);
