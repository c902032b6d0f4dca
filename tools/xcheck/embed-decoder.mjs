// Decoder embeddings against llama.cpp's: the final-norm hidden states of a
// causal model pooled by the file's pooling_type (Qwen3-Embedding style:
// last token; and mean), byte-level BPE tokenization (see lib/embed.mjs).
import { embedCheck } from './lib/embed.mjs';
import { runStandalone } from './lib/compare.mjs';

const SHAPE = { dim: 128, layers: 3, heads: 4, kvHeads: 2, ffn: 256, ctx: 256, vocab: 512 };

export async function xcheck({ llama, tmpDir } = {}) {
  return embedCheck({
    llama, tmpDir, arch: 'qwen3', label: 'qwen3 (embeddings)',
    cases: [
      { name: 'f32-last', shape: SHAPE, type: 'f32', seed: 51, opts: { qkStd: 0.2, pooling: 3 } },
      { name: 'f16-mean', shape: SHAPE, type: 'f16', seed: 52, opts: { qkStd: 0.2, pooling: 1 } },
    ],
  });
}

await runStandalone(xcheck, import.meta.url);
