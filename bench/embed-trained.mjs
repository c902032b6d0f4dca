// A trained network in a benchmark's shape: the weights of a small trained
// llama (stories260K: dim 64, 5 layers, 8 query / 4 KV heads of 8, FFN 172,
// vocabulary 512) placed inside a zero model of a larger shape (s110m,
// tl1b, ...) so that the large model computes the small one's function
// exactly, up to float rounding, while every weight of the large shape is
// still stored and multiplied: it decodes at the large shape's speed, with a
// trained model's peaked next-token distributions. Speculative decoding's
// benchmark needs the latter: with random weights an F16 model and its own
// Q4_0 agree on 13-57 % of greedy tokens, a property of random weights, not
// of trained pairs (stories260K and its Q4_0: 70-82 %).
//
// The placement, small -> large (hd = head size of the large shape):
//   hidden dim i -> i; other dims stay 0 in every token's state
//   norm weights x sqrt(64 / D) and eps x 64 / D: the RMS over D dims of a
//     state with 64 non-zero ones is sqrt(64 / D) of the RMS over those 64
//   layer l -> l; the large shape's other layers are zero (the residual
//     stream passes them unchanged)
//   query head j -> large head qmap(j) with the KV head of its group; head
//     dims (2p, 2p + 1) -> (2p hd / 8, 2p hd / 8 + 1), the RoPE pair whose
//     frequency base^(-2p / 8) is the small head's; Wq x sqrt(hd / 8) for
//     the large shape's 1 / sqrt(hd) score scale
//   KV head g -> every large KV head that one of its query heads reads
//   FFN row k -> k; vocabulary ids < 512 -> themselves, the others are
//     unused pieces with zero embeddings and zero output rows (logit 0)
import { readGGUF } from '../tests/js/reference-forward.mjs';
import { writeGGUF, T, GGML } from '../models/gguf-writer.js';
import { SHAPES, toHalf } from '../models/make-model.js';

export function embedTrained(srcPath, outPath, shape, type = 'f16') {
  const big = typeof shape === 'string' ? SHAPES[shape] : shape;
  const { meta, tensors: st } = readGGUF(srcPath);
  const d = meta['llama.embedding_length'], nl = meta['llama.block_count'], f = meta['llama.feed_forward_length'];
  const h = meta['llama.attention.head_count'], kvh = meta['llama.attention.head_count_kv'];
  const shd = d / h, gs = h / kvh, sv = meta['tokenizer.ggml.tokens'].length;
  const D = big.dim, H = big.heads, KV = big.kvHeads, F = big.ffn, L = big.layers, V = big.vocab, hd = D / H, bgs = H / KV;
  if (D < d || F < f || L < nl || V < sv || hd < shd || H < h || KV < kvh || hd % shd || (bgs < gs && gs % bgs))
    throw new Error('the large shape must hold the small model');
  // query head j of small KV group g = j / gs: large head qmap(j), KV head qmap(j) / bgs;
  // the gs heads of a group go to consecutive large heads of one large group when
  // bgs >= gs, else in order, bgs to a large group (each such KV head holds a
  // copy of the small one; bgs divides gs, so no large group mixes two)
  const qmap = (j) => (bgs >= gs ? Math.floor(j / gs) * bgs + (j % gs) : j);
  if (qmap(h - 1) >= H) throw new Error('not enough query heads');
  const dimIn = (p) => p * (hd / shd);   // small head dim p -> large head dim (pairs stay pairs)
  const headDim = (q) => dimIn(q & ~1) + (q & 1);
  const normScale = Math.sqrt(d / D), qScale = Math.sqrt(hd / shd);
  const wt = type === 'f32' ? GGML.F32 : GGML.F16;
  const CH = 1 << 16;
  // a matrix of `rows` x `cols` (cols contiguous) from at(r, c), written in chunks
  const mat = (rows, cols, at) => (emit) => {
    const n = rows * cols;
    for (let i = 0; i < n; i += CH) {
      const m = Math.min(CH, n - i);
      const a = wt === GGML.F32 ? new Float32Array(m) : new Uint16Array(m);
      for (let j = 0; j < m; j++) { const r = Math.floor((i + j) / cols), c = (i + j) % cols; const x = at(r, c); a[j] = wt === GGML.F32 ? x : toHalf(x); }
      emit(new Uint8Array(a.buffer));
    }
  };
  const vec = (n, at) => (emit) => { const a = new Float32Array(n); for (let i = 0; i < n; i++) a[i] = at(i); emit(new Uint8Array(a.buffer)); };
  const S = (name) => st[name].data;
  // inverse maps of the large rows of Q / K,V / O columns: -> small index or -1
  const qRow = new Int32Array(H * hd).fill(-1), kRow = new Int32Array(KV * hd).fill(-1);
  for (let j = 0; j < h; j++)
    for (let q = 0; q < shd; q++) {
      qRow[qmap(j) * hd + headDim(q)] = j * shd + q;
      kRow[Math.floor(qmap(j) / bgs) * hd + headDim(q)] = Math.floor(j / gs) * shd + q;
    }
  const tensors = [
    { name: 'token_embd.weight', ne: [D, V], type: wt, write: mat(V, D, (t, i) => (t < sv && i < d ? S('token_embd.weight')[t * d + i] : 0)) },
    { name: 'output_norm.weight', ne: [D], type: GGML.F32, write: vec(D, (i) => (i < d ? S('output_norm.weight')[i] * normScale : 1)) },
    { name: 'output.weight', ne: [D, V], type: wt, write: mat(V, D, (t, i) => (t < sv && i < d ? S(st['output.weight'] ? 'output.weight' : 'token_embd.weight')[t * d + i] : 0)) },
  ];
  for (let l = 0; l < L; l++) {
    const real = l < nl, P = (n) => `blk.${l}.${n}`;
    const norm = (n) => ({ name: P(n), ne: [D], type: GGML.F32, write: vec(D, (i) => (real && i < d ? S(P(n))[i] * normScale : 1)) });
    const rowsFrom = (n, map, rows, scale) => ({ name: P(n), ne: [D, rows], type: wt,
      write: mat(rows, D, (r, c) => (real && c < d && map[r] >= 0 ? S(P(n))[map[r] * d + c] * scale : 0)) });
    tensors.push(norm('attn_norm.weight'));
    tensors.push(rowsFrom('attn_q.weight', qRow, H * hd, qScale));
    tensors.push(rowsFrom('attn_k.weight', kRow, KV * hd, 1));
    tensors.push(rowsFrom('attn_v.weight', kRow, KV * hd, 1));
    tensors.push({ name: P('attn_output.weight'), ne: [H * hd, D], type: wt,
      write: mat(D, H * hd, (r, c) => (real && r < d && qRow[c] >= 0 ? S(P('attn_output.weight'))[r * d + qRow[c]] : 0)) });
    tensors.push(norm('ffn_norm.weight'));
    tensors.push({ name: P('ffn_gate.weight'), ne: [D, F], type: wt, write: mat(F, D, (r, c) => (real && r < f && c < d ? S(P('ffn_gate.weight'))[r * d + c] : 0)) });
    tensors.push({ name: P('ffn_down.weight'), ne: [F, D], type: wt, write: mat(D, F, (r, c) => (real && r < d && c < f ? S(P('ffn_down.weight'))[r * f + c] : 0)) });
    tensors.push({ name: P('ffn_up.weight'), ne: [D, F], type: wt, write: mat(F, D, (r, c) => (real && r < f && c < d ? S(P('ffn_up.weight'))[r * d + c] : 0)) });
  }
  const pad = (a, fill) => a.concat(Array.from({ length: V - a.length }, (_, i) => fill(sv + i)));
  const kv = [
    { key: 'general.architecture', type: T.STRING, value: 'llama' },
    { key: 'general.name', type: T.STRING, value: `wasmlm-embedded-${meta['general.name'] || 'model'}-${typeof shape === 'string' ? shape : 'custom'}` },
    { key: 'general.file_type', type: T.U32, value: wt === GGML.F32 ? 0 : 1 },
    { key: 'llama.context_length', type: T.U32, value: Math.min(big.ctx, meta['llama.context_length'] || big.ctx) },
    { key: 'llama.embedding_length', type: T.U32, value: D },
    { key: 'llama.block_count', type: T.U32, value: L },
    { key: 'llama.feed_forward_length', type: T.U32, value: F },
    { key: 'llama.rope.dimension_count', type: T.U32, value: hd },
    { key: 'llama.attention.head_count', type: T.U32, value: H },
    { key: 'llama.attention.head_count_kv', type: T.U32, value: KV },
    { key: 'llama.attention.layer_norm_rms_epsilon', type: T.F32, value: (meta['llama.attention.layer_norm_rms_epsilon'] ?? 1e-5) * d / D },
    { key: 'llama.rope.freq_base', type: T.F32, value: meta['llama.rope.freq_base'] ?? 10000 },
    { key: 'tokenizer.ggml.model', type: T.STRING, value: meta['tokenizer.ggml.model'] },
    { key: 'tokenizer.ggml.tokens', type: T.ARRAY, arrayType: T.STRING, value: pad(meta['tokenizer.ggml.tokens'], (i) => `<unused${i}>`) },
    { key: 'tokenizer.ggml.scores', type: T.ARRAY, arrayType: T.F32, value: pad(meta['tokenizer.ggml.scores'], () => -1e9) },
    { key: 'tokenizer.ggml.token_type', type: T.ARRAY, arrayType: T.I32, value: pad(meta['tokenizer.ggml.token_type'], () => 5) },
  ];
  for (const k of ['bos_token_id', 'eos_token_id', 'unknown_token_id'])
    if (meta[`tokenizer.ggml.${k}`] !== undefined) kv.push({ key: `tokenizer.ggml.${k}`, type: T.U32, value: meta[`tokenizer.ggml.${k}`] });
  writeGGUF(outPath, kv, tensors);
  return outPath;
}
