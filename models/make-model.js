// Synthetic model generator: valid llama GGUFs with random weights (normal,
// std 0.02, fixed seed) in real shapes, and a 32000-piece SentencePiece-style
// vocabulary, for speed tests. llama.cpp-based engines accept these files.
// Weights are written as F32 or F16; other types come from `wasmlm quantize`.
import { writeGGUF, T, GGML } from './gguf-writer.js';

export const SHAPES = {
  // name: embedding, layers, heads, kv heads, ffn, context
  tiny: { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 192, ctx: 256, vocab: 512 },
  s15m: { dim: 288, layers: 6, heads: 6, kvHeads: 6, ffn: 768, ctx: 256, vocab: 32000 },
  s110m: { dim: 768, layers: 12, heads: 12, kvHeads: 12, ffn: 2048, ctx: 1024, vocab: 32000 },
  tl1b: { dim: 2048, layers: 22, heads: 32, kvHeads: 4, ffn: 5632, ctx: 2048, vocab: 32000 },
};

// xorshift128+ with Box-Muller: fast, seeded, platform independent
function rng(seed) {
  let s0 = BigInt.asUintN(64, BigInt(seed) * 0x9E3779B97F4A7C15n + 1n), s1 = BigInt.asUintN(64, s0 * 0xBF58476D1CE4E5B9n + 7n);
  // use 32-bit state in Numbers for speed (xorshift128)
  let x = Number(s0 & 0xffffffffn) | 1, y = Number(s0 >> 32n) | 0, z = Number(s1 & 0xffffffffn) | 0, w = Number(s1 >> 32n) | 0;
  const u32 = () => { const t = x ^ (x << 11); x = y; y = z; z = w; w = (w ^ (w >>> 19) ^ (t ^ (t >>> 8))) >>> 0; return w; };
  let spare = null;
  return () => {
    if (spare !== null) { const s = spare; spare = null; return s; }
    const u = (u32() + 1) / 4294967297, v = u32() / 4294967296;
    const r = Math.sqrt(-2 * Math.log(u));
    spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  };
}

const f32buf = new Float32Array(1), u32buf = new Uint32Array(f32buf.buffer);
function toHalf(f) {
  // round-to-nearest-even float -> half (normal range is all we produce)
  f32buf[0] = f;
  const x = u32buf[0], sign = (x >>> 16) & 0x8000, ax = x & 0x7fffffff;
  if (ax < 0x38800000) { // subnormal half
    if (ax < 0x33000000) return sign;
    const e = ax >>> 23, m = (ax & 0x7fffff) | 0x800000, shift = 126 - e;
    let q = m >>> shift; const rem = m & ((1 << shift) - 1), half = 1 << (shift - 1);
    if (rem > half || (rem === half && (q & 1))) q++;
    return sign | q;
  }
  const r = ax - 0x38000000; let q = r >>> 13; const rem = r & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (q & 1))) q++;
  return sign | Math.min(q, 0x7bff);
}

function vocabulary(n) {
  const tokens = ['<unk>', '<s>', '</s>'], types = [2, 3, 3], scores = [0, 0, 0];
  for (let b = 0; b < 256; b++) { tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`); types.push(6); scores.push(0); }
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  const seen = new Set(tokens);
  // single letters and '▁'-words first (so every text can be encoded), then
  // synthetic pieces of growing length
  const add = (p) => { if (!seen.has(p) && tokens.length < n) { seen.add(p); tokens.push(p); types.push(1); scores.push(-tokens.length); } };
  add('\u2581');
  for (const c of letters) { add(c); add('\u2581' + c); }
  // synthetic pieces: every length-2 string, then length-3, ... in a fixed
  // order, each with and without the word-start mark
  for (let len = 2; tokens.length < n; len++) {
    const total = 26 ** len;
    for (let i = 0; i < total && tokens.length < n; i++) {
      let p = '', k = i;
      for (let j = 0; j < len; j++) { p += letters[k % 26]; k = Math.floor(k / 26); }
      add('\u2581' + p); add(p);
    }
  }
  return { tokens, types, scores };
}

/**
 * Writes a synthetic llama model.
 * @param {string} path output file
 * @param {keyof SHAPES | object} shape
 * @param {'f32'|'f16'} type weight type of the 2-D tensors
 * @param {number} seed
 */
export function makeModel(path, shape, type = 'f16', seed = 1234) {
  const s = typeof shape === 'string' ? SHAPES[shape] : shape;
  if (!s) throw new Error(`unknown shape ${shape} (known: ${Object.keys(SHAPES).join(', ')})`);
  const wt = type === 'f32' ? GGML.F32 : GGML.F16;
  const headDim = s.dim / s.heads, kvDim = headDim * s.kvHeads;
  const v = vocabulary(s.vocab);
  const kv = [
    { key: 'general.architecture', type: T.STRING, value: 'llama' },
    { key: 'general.name', type: T.STRING, value: `wasmlm-synthetic-${typeof shape === 'string' ? shape : 'custom'}` },
    { key: 'general.file_type', type: T.U32, value: wt === GGML.F32 ? 0 : 1 },
    { key: 'llama.context_length', type: T.U32, value: s.ctx },
    { key: 'llama.embedding_length', type: T.U32, value: s.dim },
    { key: 'llama.block_count', type: T.U32, value: s.layers },
    { key: 'llama.feed_forward_length', type: T.U32, value: s.ffn },
    { key: 'llama.rope.dimension_count', type: T.U32, value: headDim },
    { key: 'llama.attention.head_count', type: T.U32, value: s.heads },
    { key: 'llama.attention.head_count_kv', type: T.U32, value: s.kvHeads },
    { key: 'llama.attention.layer_norm_rms_epsilon', type: T.F32, value: 1e-5 },
    { key: 'llama.rope.freq_base', type: T.F32, value: 10000 },
    { key: 'tokenizer.ggml.model', type: T.STRING, value: 'llama' },
    { key: 'tokenizer.ggml.tokens', type: T.ARRAY, arrayType: T.STRING, value: v.tokens },
    { key: 'tokenizer.ggml.scores', type: T.ARRAY, arrayType: T.F32, value: v.scores },
    { key: 'tokenizer.ggml.token_type', type: T.ARRAY, arrayType: T.I32, value: v.types },
    { key: 'tokenizer.ggml.bos_token_id', type: T.U32, value: 1 },
    { key: 'tokenizer.ggml.eos_token_id', type: T.U32, value: 2 },
    { key: 'tokenizer.ggml.unknown_token_id', type: T.U32, value: 0 },
  ];
  const r = rng(seed);
  const CH = 1 << 16;
  const random = (ne, t) => (emit) => {
    const n = ne.reduce((a, b) => a * b, 1);
    for (let i = 0; i < n; i += CH) {
      const m = Math.min(CH, n - i);
      if (t === GGML.F32) { const a = new Float32Array(m); for (let j = 0; j < m; j++) a[j] = 0.02 * r(); emit(new Uint8Array(a.buffer)); }
      else { const a = new Uint16Array(m); for (let j = 0; j < m; j++) a[j] = toHalf(0.02 * r()); emit(new Uint8Array(a.buffer)); }
    }
  };
  const ones = (n) => (emit) => emit(new Uint8Array(new Float32Array(n).fill(1).buffer));
  const tensors = [
    { name: 'token_embd.weight', ne: [s.dim, s.vocab], type: wt, write: random([s.dim, s.vocab], wt) },
    { name: 'output_norm.weight', ne: [s.dim], type: GGML.F32, write: ones(s.dim) },
    { name: 'output.weight', ne: [s.dim, s.vocab], type: wt, write: random([s.dim, s.vocab], wt) },
  ];
  for (let l = 0; l < s.layers; l++) {
    const m = (name, ne) => tensors.push({ name: `blk.${l}.${name}`, ne, type: wt, write: random(ne, wt) });
    tensors.push({ name: `blk.${l}.attn_norm.weight`, ne: [s.dim], type: GGML.F32, write: ones(s.dim) });
    m('attn_q.weight', [s.dim, s.dim]);
    m('attn_k.weight', [s.dim, kvDim]);
    m('attn_v.weight', [s.dim, kvDim]);
    m('attn_output.weight', [s.dim, s.dim]);
    tensors.push({ name: `blk.${l}.ffn_norm.weight`, ne: [s.dim], type: GGML.F32, write: ones(s.dim) });
    m('ffn_gate.weight', [s.dim, s.ffn]);
    m('ffn_down.weight', [s.ffn, s.dim]);
    m('ffn_up.weight', [s.dim, s.ffn]);
  }
  writeGGUF(path, kv, tensors);
  return path;
}
