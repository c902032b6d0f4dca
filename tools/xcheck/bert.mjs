// bert against llama.cpp's embeddings: WordPiece tokenization, absolute
// positions, token types, post-norm LayerNorms with biases, GELU FFN,
// non-causal attention; mean and CLS pooling (see lib/embed.mjs).
import { embedCheck } from './lib/embed.mjs';
import { runStandalone } from './lib/compare.mjs';

const SHAPE = { dim: 128, layers: 3, heads: 4, ffn: 256, ctx: 128, vocab: 1000 };

export async function xcheck({ llama, tmpDir } = {}) {
  return embedCheck({
    llama, tmpDir, arch: 'bert',
    cases: [
      { name: 'f32-mean', shape: SHAPE, type: 'f32', seed: 31, opts: { qkStd: 0.15 } },
      { name: 'f16-cls', shape: SHAPE, type: 'f16', seed: 32, opts: { qkStd: 0.15, pooling: 2 } },
      { name: 'minilm-shape-f16', shape: { ...SHAPE, dim: 384, heads: 12, ffn: 1536, layers: 2, vocab: 2000 }, type: 'f16', seed: 33, opts: {} },
      // re-quantized by wasmlm: Q8_0 matrices, the position and token-type tables kept
      { name: 'q8_0-by-wasmlm', shape: SHAPE, type: 'f16', seed: 34, opts: { qkStd: 0.15 }, quantize: 'q8_0' },
    ],
  });
}

await runStandalone(xcheck, import.meta.url);
