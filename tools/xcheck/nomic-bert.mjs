// nomic-bert against llama.cpp's embeddings: fused QKV, NEOX RoPE (no
// position table), SwiGLU, post-norm LayerNorms, non-causal attention,
// WordPiece tokenization (see lib/embed.mjs).
import { embedCheck } from './lib/embed.mjs';
import { runStandalone } from './lib/compare.mjs';

const SHAPE = { dim: 128, layers: 3, heads: 4, ffn: 256, ctx: 256, vocab: 1000 };

export async function xcheck({ llama, tmpDir } = {}) {
  return embedCheck({
    llama, tmpDir, arch: 'nomic-bert',
    cases: [
      { name: 'f32-mean', shape: SHAPE, type: 'f32', seed: 41, opts: { qkStd: 0.15 } },
      { name: 'f16-mean-base10000', shape: SHAPE, type: 'f16', seed: 42, opts: { qkStd: 0.15, ropeBase: 10000 } },
    ],
  });
}

await runStandalone(xcheck, import.meta.url);
