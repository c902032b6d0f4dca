// The synthetic architecture variants tests/js/arch.test.mjs checks against
// the plain-JS reference and tests/browser/arch.test.mjs runs in Chromium:
// one list, so both cover the same files.
export const SHAPE = { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 96, ctx: 128, vocab: 320 };
export const VARIANTS = [
  { name: 'llama-f32', type: 'f32', opts: { arch: 'llama' } },
  { name: 'llama-f16', type: 'f16', opts: { arch: 'llama' } },
  { name: 'llama3-rope_freqs-k24-v8', type: 'f32', opts: { arch: 'llama3', keyLength: 24, valueLength: 8, ropeOriginalContext: 64 } },
  { name: 'llama3-scaling-metadata-k16', type: 'f16', opts: { arch: 'llama3', ropeScaling: 'metadata', keyLength: 16, valueLength: 16, ropeOriginalContext: 64 } },
  { name: 'qwen2-biases', type: 'f32', opts: { arch: 'qwen2' } },
  { name: 'qwen2-f16-k8-v24', type: 'f16', opts: { arch: 'qwen2', keyLength: 8, valueLength: 24 } },
  { name: 'qwen3-qk-norm', type: 'f32', opts: { arch: 'qwen3' } },
  { name: 'qwen3-f16-k24-v8', type: 'f16', opts: { arch: 'qwen3', keyLength: 24, valueLength: 8 } },
  // 5 layers: layer 3 has no RoPE; base 10000 so that RoPE matters in 12 positions
  { name: 'smollm3-nope-layer', type: 'f32', shape: { layers: 5 }, opts: { arch: 'smollm3', ropeBase: 10000 } },
  { name: 'granite-multipliers', type: 'f32', opts: { arch: 'granite' } },
  { name: 'granite-f16-k16', type: 'f16', opts: { arch: 'granite', keyLength: 16, valueLength: 16 } },
  // contextLength 64: past original_context_length 32 the long factors, within 128 the short ones
  { name: 'phi3-long-factors', type: 'f32', opts: { arch: 'phi3', ropeOriginalContext: 32 } },
  { name: 'phi3-f16-short-factors-k24-v8', type: 'f16', opts: { arch: 'phi3', ropeOriginalContext: 128, keyLength: 24, valueLength: 8 } },
  // Mistral-style: each query sees the last 5 positions (prefill chunks of 5 straddle the window)
  { name: 'llama-sliding-window-5', type: 'f32', opts: { arch: 'llama', slidingWindow: 5 } },
  { name: 'llama-f16-sliding-window-3-gqa', type: 'f16', opts: { arch: 'llama', slidingWindow: 3 } },
  // small caps and window, large embeddings: soft-capping and the window change the logits
  { name: 'gemma2-caps-window3', type: 'f32', opts: { arch: 'gemma2', embdStd: 0.5, attnSoftcap: 2, finalSoftcap: 3, slidingWindow: 3 } },
  { name: 'gemma2-f16-k24-v8', type: 'f16', opts: { arch: 'gemma2', embdStd: 0.3, keyLength: 24, valueLength: 8 } },
  { name: 'gemma3-7layers', type: 'f32', shape: { ...SHAPE, layers: 7 }, opts: { arch: 'gemma3', embdStd: 0.5, slidingWindow: 4 } },
  { name: 'gemma3-f16-k8-v24-7layers', type: 'f16', shape: { ...SHAPE, layers: 7 }, opts: { arch: 'gemma3', embdStd: 0.3, keyLength: 8, valueLength: 24, slidingWindow: 5 } },
];
