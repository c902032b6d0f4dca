// Cross-check of embeddings against llama.cpp (node-llama-cpp's embedding
// context) on the very same synthetic GGUF files. Per case:
//   - tokenization: every text tokenized by wasmlm and by llama.cpp without
//     special tokens must give the same ids (WordPiece, byte-level BPE, ...);
//   - vectors: each text's ids, framed as the model frames a text ([CLS] ...
//     [SEP], BOS / EOS), go to both engines as ids; llama.cpp pools by the
//     file's pooling_type (llama_get_embeddings_seq); wasmlm embeds them in one
//     batch with its default pooling (the same rule, wlm_model_pooling) and
//     no normalization. The cosine of the two vectors must be at least
//     MIN_COSINE for every text.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeModel } from '../../../models/make-model.js';
import { loadModel } from '../../../web/index.js';
import { getLlamaCpp } from './compare.mjs';

export const MIN_COSINE = 0.9999;

/** Texts for the tokenizer and the vectors: punctuation, case, accents, CJK, digits, spacing, symbols. */
export const TEXTS = [
  'Hello, world!',
  'The quick brown fox jumps over the lazy dog.',
  'Café naïve, CAFÉ NAÏVE: search the embed vectors!',
  '中国 text 2024 — (music) & [songs]',
  '  the\tweather\ntoday is\r\nsunny  ',
  'unaffable playing; rain? a cat-dog $5 #1 @me',
  'a',
  'it was the cat that sat on the mat, and the dog was with it on the mat as the text and the model play',
];

function cosine(a, b) {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
  return ab / Math.sqrt(aa * bb);
}

/**
 * cases: [{name, shape, type, seed, opts (makeModel), texts?, quantize?}] (quantize: a
 * QUANT_TYPES name: the file is re-quantized by wasmlm first, and both engines run that file)
 * → {arch, kind: 'embedding', minCosineAllowed, cases: [{name, texts, tokensEqual, tokenMismatches, minCosine, meanCosine, pooling}], ok}
 */
export async function embedCheck({ llama, tmpDir, arch, label = arch, cases }) {
  const own = !llama;
  if (own) llama = await getLlamaCpp();
  const dir = tmpDir || fs.mkdtempSync(path.join(os.tmpdir(), `wasmlm-xcheck-${arch}-`));
  const results = [];
  try {
    for (const c of cases) {
      const texts = c.texts || TEXTS;
      let file = path.join(dir, `${arch}-${c.name}.gguf`);
      makeModel(file, c.shape, c.type, c.seed, { arch, ...c.opts });
      if (c.quantize) {
        const src = await loadModel(file, { threads: 1 });
        const q = file.replace(/\.gguf$/, `-${c.quantize}.gguf`);
        try { await src.quantize(c.quantize, { outPath: q }); } finally { await src.dispose(); }
        file = q;
      }
      const model = await loadModel(file, { threads: 1 });
      const lm = await llama.loadModel({ modelPath: file });
      const ctx = await lm.createEmbeddingContext({ contextSize: 512, batchSize: 512, threads: 1 });
      let mismatches = 0, minCos = Infinity, sumCos = 0;
      try {
        const framed = [];
        for (const t of texts) {
          const ours = await model.tokenize(t, { addBos: false });
          const theirs = Array.from(lm.tokenize(t), Number);
          if (ours.length !== theirs.length || ours.some((id, i) => id !== theirs[i])) mismatches++;
          framed.push(await model.tokenize(t, { addBos: model.info.hparams.addBos }));
        }
        const ours = await model.embed(framed, { normalize: false });
        for (let i = 0; i < texts.length; i++) {
          const ref = (await ctx.getEmbeddingFor(framed[i])).vector;
          if (ref.length !== ours[i].length) throw new Error(`${c.name}: llama.cpp gives ${ref.length} dims, wasmlm ${ours[i].length}`);
          const cs = cosine(ours[i], ref);
          minCos = Math.min(minCos, cs); sumCos += cs;
        }
        results.push({ name: c.name, texts: texts.length, pooling: model.info.embedding.pooling, tokensEqual: mismatches === 0,
          tokenMismatches: mismatches, minCosine: minCos, meanCosine: sumCos / texts.length });
      } finally {
        await ctx.dispose();
        await lm.dispose();
        await model.dispose();
      }
    }
  } finally {
    if (!tmpDir) fs.rmSync(dir, { recursive: true, force: true });
    if (own) await llama.dispose();
  }
  return {
    arch: label, kind: 'embedding', minCosineAllowed: MIN_COSINE,
    cases: results, ok: results.every((r) => r.tokensEqual && r.minCosine >= MIN_COSINE),
  };
}
