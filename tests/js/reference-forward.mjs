// An independent, deliberately plain forward pass (not a test file itself):
// reads a GGUF with its own small reader (F32 / F16 tensors only) and runs
// the llama / qwen2 / qwen3 / smollm3 / granite / phi3 decoder in double precision,
// written from the math:
//
//   x = E[token] * s_emb                                        (granite: embedding_scale, else 1)
//   per layer:  h = rmsnorm(x) * g_attn
//               q = Wq h + bq, k = Wk h + bk, v = Wv h + bv     (biases when present)
//               qwen3: each head of q, k = rmsnorm(head) * g_q / g_k (attn_q_norm, attn_k_norm)
//               rotate q, k per head by RoPE at the position    (smollm3: not in layers l with (l+1) % 4 == 0):
//                 theta_i = base^(-2i/n_rot) / divisor_i
//                 (divisor_i: rope_freqs.weight, or the Llama 3.1 rule from
//                  rope.scaling.* metadata, or 1)
//                 (phi3 LongRoPE: divisor_i = rope_factors_short.weight[i] for a
//                  context of at most rope.scaling.original_context_length
//                  positions, rope_factors_long.weight[i] beyond; cos and sin
//                  times rope.scaling.attn_factor)
//                 pairs (2i, 2i+1) for llama, smollm3, granite; (i, i + n_rot/2) for qwen2, qwen3, phi3
//               (phi3: q, k, v are the rows of attn_qkv.weight in turn)
//               a_h = softmax(q_h . K_g * s_att) V_g    (g = h / (n_head / n_head_kv), causal;
//                                                        s_att = granite attention.scale, else 1/sqrt(key_length);
//                     with attention.sliding_window W (llama) only keys at positions > pos - W)
//               x += s_res * (Wo a (+ bo))                      (granite: residual_scale, else 1)
//               h = rmsnorm(x) * g_ffn ;  x += s_res * Wdown (silu(Wgate h) * (Wup h))
//                     (phi3: Wgate, Wup = the first and second n_ff rows of ffn_up.weight)
//   logits = Wout (rmsnorm(x) * g_out) / s_logit  (Wout = E when output.weight is absent;
//                                                   granite: logit_scale, else 1)
import fs from 'node:fs';

const dec = new TextDecoder();

function halfToFloat(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

/** Parses a GGUF file: {meta: {key: value}, tensors: {name: {ne, type, data: Float64Array}}}. */
export function readGGUF(pathOrBytes) {
  const buf = typeof pathOrBytes === 'string' ? fs.readFileSync(pathOrBytes) : pathOrBytes;
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let off = 0;
  const u32 = () => { const v = dv.getUint32(off, true); off += 4; return v; };
  const u64 = () => { const v = Number(dv.getBigUint64(off, true)); off += 8; return v; };
  const str = () => { const n = u64(); const s = dec.decode(buf.subarray(off, off + n)); off += n; return s; };
  const value = (t) => {
    switch (t) {
      case 0: off += 1; return dv.getUint8(off - 1);
      case 1: off += 1; return dv.getInt8(off - 1);
      case 2: off += 2; return dv.getUint16(off - 2, true);
      case 3: off += 2; return dv.getInt16(off - 2, true);
      case 4: return u32();
      case 5: off += 4; return dv.getInt32(off - 4, true);
      case 6: off += 4; return dv.getFloat32(off - 4, true);
      case 7: off += 1; return dv.getUint8(off - 1) !== 0;
      case 8: return str();
      case 9: { const et = u32(), n = u64(); const a = []; for (let i = 0; i < n; i++) a.push(value(et)); return a; }
      case 10: return u64();
      case 11: off += 8; return Number(dv.getBigInt64(off - 8, true));
      case 12: off += 8; return dv.getFloat64(off - 8, true);
      default: throw new Error(`gguf: value type ${t}`);
    }
  };
  if (dec.decode(buf.subarray(0, 4)) !== 'GGUF') throw new Error('not a GGUF file');
  off = 4;
  u32(); // version
  const nT = u64(), nKv = u64();
  const meta = {};
  for (let i = 0; i < nKv; i++) { const k = str(); meta[k] = value(u32()); }
  const infos = [];
  for (let i = 0; i < nT; i++) {
    const name = str(), nd = u32(), ne = [];
    for (let d = 0; d < nd; d++) ne.push(u64());
    infos.push({ name, ne, type: u32(), offset: u64() });
  }
  const align = meta['general.alignment'] || 32;
  const base = Math.ceil(off / align) * align;
  const tensors = {};
  for (const t of infos) {
    const n = t.ne.reduce((a, b) => a * b, 1), at = base + t.offset;
    const data = new Float64Array(n);
    if (t.type === 0) for (let i = 0; i < n; i++) data[i] = dv.getFloat32(at + 4 * i, true);
    else if (t.type === 1) for (let i = 0; i < n; i++) data[i] = halfToFloat(dv.getUint16(at + 2 * i, true));
    else throw new Error(`reference: tensor ${t.name} has type ${t.type} (only F32/F16)`);
    tensors[t.name] = { ne: t.ne, type: t.type, data };
  }
  return { meta, tensors };
}

// y = W x (+ b); W has rows of x.length values
function matvec(W, x, rows, b) {
  const n = x.length, y = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let s = 0;
    for (let i = 0; i < n; i++) s += W[r * n + i] * x[i];
    y[r] = s + (b ? b[r] : 0);
  }
  return y;
}

function rmsnorm(x, g, eps) {
  let ss = 0;
  for (const v of x) ss += v * v;
  const k = 1 / Math.sqrt(ss / x.length + eps);
  return x.map((v, i) => v * k * g[i]);
}

/** The hyper-parameters and RoPE setup a GGUF describes (nCtx: the context
 * length it runs with, which picks phi3's LongRoPE factors). */
export function configOf({ meta, tensors }, { nCtx = 0 } = {}) {
  const arch = meta['general.architecture'];
  if (!['llama', 'qwen2', 'qwen3', 'smollm3', 'granite', 'phi3'].includes(arch)) throw new Error(`reference: architecture ${arch}`);
  const k = (s) => meta[`${arch}.${s}`];
  const d = k('embedding_length'), nHead = k('attention.head_count');
  const nHeadKv = k('attention.head_count_kv') ?? nHead;
  const hk = k('attention.key_length') ?? d / nHead, hv = k('attention.value_length') ?? d / nHead;
  const nRot = k('rope.dimension_count') ?? hk, base = k('rope.freq_base') ?? 10000;
  const theta = [];
  const origCtx = k('rope.scaling.original_context_length') ?? k('context_length');
  const longrope = tensors[nCtx > origCtx ? 'rope_factors_long.weight' : 'rope_factors_short.weight'];
  for (let i = 0; i < nRot / 2; i++) {
    let t = Math.pow(base, -2 * i / nRot);
    if (longrope) t /= longrope.data[i];
    else if (tensors['rope_freqs.weight']) t /= tensors['rope_freqs.weight'].data[i];
    else if (k('rope.scaling.type') === 'llama3') {
      const f = k('rope.scaling.factor'), lo = k('rope.scaling.low_freq_factor') ?? 1;
      const hi = k('rope.scaling.high_freq_factor') ?? 4, orig = k('rope.scaling.original_context_length') ?? 8192;
      const wl = 2 * Math.PI / t;
      if (wl > orig / lo) t /= f;
      else if (wl >= orig / hi) { const sm = (orig / wl - lo) / (hi - lo); t = (1 - sm) * t / f + sm * t; }
    } else if (k('rope.scaling.type') === 'linear') t /= k('rope.scaling.factor');
    theta.push(t);
  }
  return {
    arch, d, nHead, nHeadKv, hk, hv, nRot, theta, neox: arch === 'qwen2' || arch === 'qwen3' || arch === 'phi3',
    mscale: k('rope.scaling.attn_factor') ?? 1,
    window: arch === 'llama' ? k('attention.sliding_window') ?? 0 : 0,
    embScale: arch === 'granite' ? k('embedding_scale') ?? 1 : 1,
    resScale: arch === 'granite' ? k('residual_scale') ?? 1 : 1,
    attScale: (arch === 'granite' && k('attention.scale')) || 0,   // 0: 1/sqrt(key_length)
    logitScale: arch === 'granite' ? k('logit_scale') ?? 1 : 1,
    // smollm3: llama.cpp leaves every 4th layer unrotated (no GGUF key for it)
    ropeLayer: (l) => arch !== 'smollm3' || (l + 1) % 4 !== 0,
    nLayer: k('block_count'), nFf: k('feed_forward_length'),
    eps: k('attention.layer_norm_rms_epsilon') ?? 1e-5,
    nVocab: tensors['token_embd.weight'].ne[1],
  };
}

function rope(v, off, c, pos) {
  const half = c.nRot / 2;
  for (let i = 0; i < half; i++) {
    const a = pos * c.theta[i], co = Math.cos(a) * c.mscale, si = Math.sin(a) * c.mscale;
    const i0 = off + (c.neox ? i : 2 * i), i1 = off + (c.neox ? i + half : 2 * i + 1);
    const x0 = v[i0], x1 = v[i1];
    v[i0] = x0 * co - x1 * si;
    v[i1] = x0 * si + x1 * co;
  }
}

/** Logits (Float64Array per position) of `tokens` under the model in `g`
 * (readGGUF), run in a context of nCtx positions (phi3's LongRoPE). */
export function referenceLogits(g, tokens, { nCtx = 0 } = {}) {
  const c = configOf(g, { nCtx }), T = g.tensors;
  const W = (name) => (T[name] ? T[name].data : null);
  // fused matrices (phi3): rows [r0, r0 + n) of a matrix with rows of `cols` values
  const rows = (m, cols, r0, n) => (m ? m.subarray(r0 * cols, (r0 + n) * cols) : null);
  const E = W('token_embd.weight'), Wout = W('output.weight') || E;
  const K = [], V = [];
  for (let l = 0; l < c.nLayer; l++) { K.push([]); V.push([]); }
  const out = [];
  tokens.forEach((tok, pos) => {
    let x = E.slice(tok * c.d, (tok + 1) * c.d).map((z) => z * c.embScale);
    for (let l = 0; l < c.nLayer; l++) {
      const b = (s) => W(`blk.${l}.${s}`);
      let h = rmsnorm(x, b('attn_norm.weight'), c.eps);
      const qkv = b('attn_qkv.weight'), nq = c.nHead * c.hk, nk = c.nHeadKv * c.hk;
      const q = matvec(qkv ? rows(qkv, c.d, 0, nq) : b('attn_q.weight'), h, nq, b('attn_q.bias'));
      const k = matvec(qkv ? rows(qkv, c.d, nq, nk) : b('attn_k.weight'), h, nk, b('attn_k.bias'));
      const v = matvec(qkv ? rows(qkv, c.d, nq + nk, c.nHeadKv * c.hv) : b('attn_v.weight'), h, c.nHeadKv * c.hv, b('attn_v.bias'));
      const headNorm = (v, n, g) => {
        for (let hh = 0; hh < n; hh++) v.set(rmsnorm(v.slice(hh * c.hk, (hh + 1) * c.hk), g, c.eps), hh * c.hk);
      };
      if (b('attn_q_norm.weight')) headNorm(q, c.nHead, b('attn_q_norm.weight'));
      if (b('attn_k_norm.weight')) headNorm(k, c.nHeadKv, b('attn_k_norm.weight'));
      if (c.ropeLayer(l)) {
        for (let hh = 0; hh < c.nHead; hh++) rope(q, hh * c.hk, c, pos);
        for (let hh = 0; hh < c.nHeadKv; hh++) rope(k, hh * c.hk, c, pos);
      }
      K[l].push(k); V[l].push(v);
      const att = new Float64Array(c.nHead * c.hv);
      for (let hq = 0; hq < c.nHead; hq++) {
        const g = Math.floor(hq / (c.nHead / c.nHeadKv));
        const s = K[l].map((kj, j) => {
          if (c.window && pos - j >= c.window) return -Infinity;   // outside the sliding window
          let dot = 0;
          for (let i = 0; i < c.hk; i++) dot += q[hq * c.hk + i] * kj[g * c.hk + i];
          return c.attScale ? dot * c.attScale : dot / Math.sqrt(c.hk);
        });
        const mx = Math.max(...s), e = s.map((z) => Math.exp(z - mx)), sum = e.reduce((a, z) => a + z, 0);
        for (let j = 0; j < e.length; j++)
          for (let i = 0; i < c.hv; i++) att[hq * c.hv + i] += (e[j] / sum) * V[l][j][g * c.hv + i];
      }
      const o = matvec(b('attn_output.weight'), att, c.d, b('attn_output.bias'));
      x = x.map((z, i) => z + c.resScale * o[i]);
      h = rmsnorm(x, b('ffn_norm.weight'), c.eps);
      const fused = !b('ffn_gate.weight');
      const gate = matvec(fused ? rows(b('ffn_up.weight'), c.d, 0, c.nFf) : b('ffn_gate.weight'), h, c.nFf);
      const up = matvec(fused ? rows(b('ffn_up.weight'), c.d, c.nFf, c.nFf) : b('ffn_up.weight'), h, c.nFf);
      const act = gate.map((z, i) => (z / (1 + Math.exp(-z))) * up[i]);
      const dn = matvec(b('ffn_down.weight'), act, c.d);
      x = x.map((z, i) => z + c.resScale * dn[i]);
    }
    out.push(matvec(Wout, rmsnorm(x, W('output_norm.weight'), c.eps), c.nVocab).map((z) => z / c.logitScale));
  });
  return out;
}
