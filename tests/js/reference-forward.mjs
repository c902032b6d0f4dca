// An independent, deliberately plain forward pass (not a test file itself):
// reads a GGUF with its own small reader (F32 / F16 tensors only) and runs
// the llama / qwen2 / qwen3 / smollm3 / granite / gemma2 / gemma3 / phi3 decoder in double precision,
// written from the math (the bert / nomic-bert encoders and embedding
// pooling: referenceEncoder and pool, below):
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
//                 pairs (2i, 2i+1) for llama, smollm3, granite; (i, i + n_rot/2) for qwen2, qwen3, gemma2, gemma3, phi3
//               (phi3: q, k, v are the rows of attn_qkv.weight in turn)
//               a_h = softmax(q_h . K_g * s_att) V_g    (g = h / (n_head / n_head_kv), causal;
//                                                        s_att = granite attention.scale, else 1/sqrt(key_length);
//                     with attention.sliding_window W (llama) only keys at positions > pos - W)
//               x += s_res * (Wo a (+ bo))                      (granite: residual_scale, else 1)
//               h = rmsnorm(x) * g_ffn ;  x += s_res * Wdown (silu(Wgate h) * (Wup h))
//                     (phi3: Wgate, Wup = the first and second n_ff rows of ffn_up.weight)
//   logits = Wout (rmsnorm(x) * g_out) / s_logit  (Wout = E when output.weight is absent;
//                                                   granite: logit_scale, else 1)
//
// gemma2 / gemma3 change it to (norm weights g are used as stored: the file
// holds Gemma's 1 + w):
//   x = E[token] * sqrt(d)
//   per layer:  h = rmsnorm(x) * g_attn ; q, k, v = Wq h, Wk h, Wv h
//               gemma3: q_h = rmsnorm(q_h) * g_qnorm, k_h = rmsnorm(k_h) * g_knorm (per head)
//               RoPE pairs (i, i + n_rot/2); gemma3: base 10000 on sliding layers,
//                 rope.freq_base (and scaling) on global ones (every sixth: l % 6 == 5)
//               s_j = q_h . k_j / sqrt(key_length) (n_embd / n_head for the 27B
//                 shapes); gemma2: s_j = c_att tanh(s_j / c_att)
//               sliding layers (gemma2: even l; gemma3: l % 6 != 5) see only
//                 positions j > pos - sliding_window
//               x += rmsnorm(Wo a) * g_post_attn
//               h = rmsnorm(x) * g_ffn ; x += rmsnorm(Wdown (gelu(Wgate h) * (Wup h))) * g_post_ffw
//                 (gelu(z) = z/2 (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))))
//   logits = E (rmsnorm(x) * g_out) ; gemma2: l = c_final tanh(l / c_final)
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
  if (!['llama', 'qwen2', 'qwen3', 'smollm3', 'granite', 'gemma2', 'gemma3', 'phi3'].includes(arch)) throw new Error(`reference: architecture ${arch}`);
  const gemma = arch.startsWith('gemma');
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
  const nLayer = k('block_count');
  const cfg = {
    arch, d, nHead, nHeadKv, hk, hv, nRot, theta, neox: arch !== 'llama' && arch !== 'smollm3' && arch !== 'granite',
    mscale: k('rope.scaling.attn_factor') ?? 1,
    embScale: arch === 'granite' ? k('embedding_scale') ?? 1 : gemma ? Math.sqrt(d) : 1,
    resScale: arch === 'granite' ? k('residual_scale') ?? 1 : 1,
    // 1/sqrt(key_length) unless granite's attention.scale (or gemma's query_pre_attn_scalar, below)
    scale: (arch === 'granite' && k('attention.scale')) || 1 / Math.sqrt(hk),
    logitScale: arch === 'granite' ? k('logit_scale') ?? 1 : 1,
    // smollm3: llama.cpp leaves every 4th layer unrotated (no GGUF key for it)
    ropeLayer: (l) => arch !== 'smollm3' || (l + 1) % 4 !== 0,
    nLayer, nFf: k('feed_forward_length'),
    eps: k('attention.layer_norm_rms_epsilon') ?? (gemma ? 1e-6 : 1e-5),
    nVocab: tensors['token_embd.weight'].ne[1],
    // the sliding window: llama's attention.sliding_window (Mistral-style) on
    // every layer; gemma's on its sliding layers only (below)
    window: arch === 'llama' ? k('attention.sliding_window') ?? 0 : 0,
    swa: () => cfg.window > 0, thetaSwa: null, attnCap: 0, finalCap: 0, gemma,
  };
  if (gemma) {
    const big = arch === 'gemma2' ? 46 : 62;
    cfg.scale = 1 / Math.sqrt(nLayer === big ? d / nHead : hk);
    cfg.window = k('attention.sliding_window') ?? (arch === 'gemma2' ? 4096 : 0);
    cfg.swa = (l) => cfg.window > 0 && (arch === 'gemma2' ? l % 2 === 0 : l % 6 !== 5);
    if (arch === 'gemma2') { cfg.attnCap = k('attn_logit_softcapping') ?? 50; cfg.finalCap = k('final_logit_softcapping') ?? 30; }
    else cfg.thetaSwa = Array.from({ length: nRot / 2 }, (_, i) => Math.pow(10000, -2 * i / nRot));
  }
  return cfg;
}

function rope(v, off, c, pos, theta = c.theta) {
  const half = c.nRot / 2;
  for (let i = 0; i < half; i++) {
    const a = pos * theta[i], co = Math.cos(a) * c.mscale, si = Math.sin(a) * c.mscale;
    const i0 = off + (c.neox ? i : 2 * i), i1 = off + (c.neox ? i + half : 2 * i + 1);
    const x0 = v[i0], x1 = v[i1];
    v[i0] = x0 * co - x1 * si;
    v[i1] = x0 * si + x1 * co;
  }
}

/** Logits (Float64Array per position) of `tokens` under the model in `g`
 * (readGGUF), run in a context of nCtx positions (phi3's LongRoPE); with
 * `hidden`, each position's final hidden state instead (rmsnorm(x) * g_out:
 * what decoder embeddings pool). */
export function referenceLogits(g, tokens, { nCtx = 0, hidden = false } = {}) {
  const c = configOf(g, { nCtx }), T = g.tensors;
  const W = (name) => (T[name] ? T[name].data : null);
  // fused matrices (phi3): rows [r0, r0 + n) of a matrix with rows of `cols` values
  const rows = (m, cols, r0, n) => (m ? m.subarray(r0 * cols, (r0 + n) * cols) : null);
  const E = W('token_embd.weight'), Wout = W('output.weight') || E;
  const K = [], V = [];
  for (let l = 0; l < c.nLayer; l++) { K.push([]); V.push([]); }
  const out = [];
  // per-head RMSNorm (gemma3's Q/K norms)
  const headNorm = (v, nh, g) => {
    if (!g) return;
    for (let hh = 0; hh < nh; hh++) {
      const n = rmsnorm(v.subarray(hh * c.hk, (hh + 1) * c.hk), g, c.eps);
      v.set(n, hh * c.hk);
    }
  };
  const gelu = (z) => 0.5 * z * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (z + 0.044715 * z * z * z)));
  const cap = (z, k) => (k > 0 ? k * Math.tanh(z / k) : z);
  tokens.forEach((tok, pos) => {
    let x = E.slice(tok * c.d, (tok + 1) * c.d).map((z) => z * c.embScale);
    for (let l = 0; l < c.nLayer; l++) {
      const b = (s) => W(`blk.${l}.${s}`);
      const swa = c.swa(l);
      const theta = swa && c.thetaSwa ? c.thetaSwa : c.theta;
      let h = rmsnorm(x, b('attn_norm.weight'), c.eps);
      const qkv = b('attn_qkv.weight'), nq = c.nHead * c.hk, nk = c.nHeadKv * c.hk;
      const q = matvec(qkv ? rows(qkv, c.d, 0, nq) : b('attn_q.weight'), h, nq, b('attn_q.bias'));
      const k = matvec(qkv ? rows(qkv, c.d, nq, nk) : b('attn_k.weight'), h, nk, b('attn_k.bias'));
      const v = matvec(qkv ? rows(qkv, c.d, nq + nk, c.nHeadKv * c.hv) : b('attn_v.weight'), h, c.nHeadKv * c.hv, b('attn_v.bias'));
      headNorm(q, c.nHead, b('attn_q_norm.weight'));
      headNorm(k, c.nHeadKv, b('attn_k_norm.weight'));
      if (c.ropeLayer(l)) {
        for (let hh = 0; hh < c.nHead; hh++) rope(q, hh * c.hk, c, pos, theta);
        for (let hh = 0; hh < c.nHeadKv; hh++) rope(k, hh * c.hk, c, pos, theta);
      }
      K[l].push(k); V[l].push(v);
      const j0 = swa ? Math.max(0, pos - c.window + 1) : 0;   // the window: positions > pos - window
      const att = new Float64Array(c.nHead * c.hv);
      for (let hq = 0; hq < c.nHead; hq++) {
        const g = Math.floor(hq / (c.nHead / c.nHeadKv));
        const s = K[l].slice(j0).map((kj) => {
          let dot = 0;
          for (let i = 0; i < c.hk; i++) dot += q[hq * c.hk + i] * kj[g * c.hk + i];
          return cap(dot * c.scale, c.attnCap);
        });
        const mx = Math.max(...s), e = s.map((z) => Math.exp(z - mx)), sum = e.reduce((a, z) => a + z, 0);
        for (let j = 0; j < e.length; j++)
          for (let i = 0; i < c.hv; i++) att[hq * c.hv + i] += (e[j] / sum) * V[l][j0 + j][g * c.hv + i];
      }
      let o = matvec(b('attn_output.weight'), att, c.d, b('attn_output.bias'));
      if (b('post_attention_norm.weight')) o = rmsnorm(o, b('post_attention_norm.weight'), c.eps);
      x = x.map((z, i) => z + c.resScale * o[i]);
      h = rmsnorm(x, b('ffn_norm.weight'), c.eps);
      const fused = !b('ffn_gate.weight');
      const gate = matvec(fused ? rows(b('ffn_up.weight'), c.d, 0, c.nFf) : b('ffn_gate.weight'), h, c.nFf);
      const up = matvec(fused ? rows(b('ffn_up.weight'), c.d, c.nFf, c.nFf) : b('ffn_up.weight'), h, c.nFf);
      const act = gate.map((z, i) => (c.gemma ? gelu(z) : z / (1 + Math.exp(-z))) * up[i]);
      let dn = matvec(b('ffn_down.weight'), act, c.d);
      if (b('post_ffw_norm.weight')) dn = rmsnorm(dn, b('post_ffw_norm.weight'), c.eps);
      x = x.map((z, i) => z + c.resScale * dn[i]);
    }
    if (hidden) { out.push(rmsnorm(x, W('output_norm.weight'), c.eps)); return; }
    out.push(matvec(Wout, rmsnorm(x, W('output_norm.weight'), c.eps), c.nVocab).map((z) => cap(z / c.logitScale, c.finalCap)));
  });
  return out;
}

// ---- encoders (bert, nomic-bert) and pooling --------------------------------------
//
//   x_t = E[tok_t] + T[0] + P[t]                       (P: position_embd, bert only;
//                                                       T: token_types row 0, when present)
//   x_t = LN(x_t) * g_tok + b_tok                      (LN: (x - mean) / sqrt(var + eps))
//   per layer:  q, k, v = Wq x + bq, ...               (nomic-bert: the rows of attn_qkv; RoPE
//                                                       on q, k: pairs (i, i + n_rot/2), base rope.freq_base)
//               a_h = softmax(q_h . K_h / sqrt(head)) V_h   over every position (not causal)
//               x = LN(x + Wo a + bo) * g + b                (attn_output_norm)
//               bert: f = Wdown gelu(Wup x + bup) + bdown    (gelu in its tanh form, as llama.cpp)
//               nomic-bert: f = Wdown (silu(Wgate x) * (Wup x))
//               x = LN(x + f) * g + b                         (layer_output_norm)
//   the last x of every position is its hidden state

function layerNorm(x, g, b, eps) {
  let mean = 0;
  for (const v of x) mean += v;
  mean /= x.length;
  let vr = 0;
  for (const v of x) vr += (v - mean) * (v - mean);
  vr /= x.length;
  const k = 1 / Math.sqrt(vr + eps);
  return x.map((v, i) => (v - mean) * k * g[i] + b[i]);
}

/** The hidden state (Float64Array) of every position of `tokens` under the bert / nomic-bert model in `g`. */
export function referenceEncoder(g, tokens) {
  const { meta, tensors: T } = g;
  const arch = meta['general.architecture'];
  if (arch !== 'bert' && arch !== 'nomic-bert') throw new Error(`referenceEncoder: architecture ${arch}`);
  const k = (s) => meta[`${arch}.${s}`];
  const d = k('embedding_length'), nHead = k('attention.head_count'), hd = d / nHead, nFf = k('feed_forward_length');
  const eps = k('attention.layer_norm_epsilon') ?? 1e-12, nRot = k('rope.dimension_count') ?? hd, base = k('rope.freq_base') ?? 10000;
  const W = (name) => (T[name] ? T[name].data : null);
  const row = (m, r) => m.subarray(r * d, (r + 1) * d);
  const gelu = (z) => 0.5 * z * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (z + 0.044715 * z * z * z)));
  let xs = tokens.map((tok, pos) => {
    const x = Float64Array.from(row(W('token_embd.weight'), tok));
    if (W('token_types.weight')) x.forEach((v, i) => { x[i] = v + W('token_types.weight')[i]; });
    if (W('position_embd.weight')) { const p = row(W('position_embd.weight'), pos); x.forEach((v, i) => { x[i] = v + p[i]; }); }
    return layerNorm(x, W('token_embd_norm.weight'), W('token_embd_norm.bias'), eps);
  });
  const rope = (v, pos) => {
    const half = nRot / 2;
    for (let h = 0; h < nHead; h++)
      for (let i = 0; i < half; i++) {
        const a = pos * Math.pow(base, -2 * i / nRot), co = Math.cos(a), si = Math.sin(a);
        const i0 = h * hd + i, i1 = i0 + half, x0 = v[i0], x1 = v[i1];
        v[i0] = x0 * co - x1 * si;
        v[i1] = x0 * si + x1 * co;
      }
  };
  for (let l = 0; l < k('block_count'); l++) {
    const b = (s) => W(`blk.${l}.${s}`);
    const qkv = b('attn_qkv.weight'), bqkv = b('attn_qkv.bias');
    const part = (i) => (qkv ? qkv.subarray(i * d * d, (i + 1) * d * d) : null);
    const bpart = (i) => (bqkv ? bqkv.subarray(i * d, (i + 1) * d) : null);
    const Q = [], K = [], V = [];
    xs.forEach((x, pos) => {
      const q = matvec(part(0) || b('attn_q.weight'), x, d, bpart(0) || b('attn_q.bias'));
      const kk = matvec(part(1) || b('attn_k.weight'), x, d, bpart(1) || b('attn_k.bias'));
      const v = matvec(part(2) || b('attn_v.weight'), x, d, bpart(2) || b('attn_v.bias'));
      if (arch === 'nomic-bert') { rope(q, pos); rope(kk, pos); }
      Q.push(q); K.push(kk); V.push(v);
    });
    xs = xs.map((x, t) => {
      const a = new Float64Array(d);
      for (let h = 0; h < nHead; h++) {
        const s = K.map((kj) => { let dot = 0; for (let i = 0; i < hd; i++) dot += Q[t][h * hd + i] * kj[h * hd + i]; return dot / Math.sqrt(hd); });
        const mx = Math.max(...s), e = s.map((z) => Math.exp(z - mx)), sum = e.reduce((p, z) => p + z, 0);
        for (let j = 0; j < e.length; j++) for (let i = 0; i < hd; i++) a[h * hd + i] += (e[j] / sum) * V[j][h * hd + i];
      }
      const o = matvec(b('attn_output.weight'), a, d, b('attn_output.bias'));
      const y = layerNorm(x.map((z, i) => z + o[i]), b('attn_output_norm.weight'), b('attn_output_norm.bias'), eps);
      let hmid;
      if (b('ffn_gate.weight')) {
        const gt = matvec(b('ffn_gate.weight'), y, nFf), up = matvec(b('ffn_up.weight'), y, nFf);
        hmid = gt.map((z, i) => (z / (1 + Math.exp(-z))) * up[i]);
      } else {
        hmid = matvec(b('ffn_up.weight'), y, nFf, b('ffn_up.bias')).map(gelu);
      }
      const f = matvec(b('ffn_down.weight'), hmid, d, b('ffn_down.bias'));
      return layerNorm(y.map((z, i) => z + f[i]), b('layer_output_norm.weight'), b('layer_output_norm.bias'), eps);
    });
  }
  return xs;
}

/** One vector from per-position states: 'mean', 'cls' (the first) or 'last'; L2-normalized unless normalize is false. */
export function pool(states, pooling, normalize = true) {
  const d = states[0].length;
  let v;
  if (pooling === 'cls') v = Float64Array.from(states[0]);
  else if (pooling === 'last') v = Float64Array.from(states.at(-1));
  else { v = new Float64Array(d); for (const s of states) for (let i = 0; i < d; i++) v[i] += s[i] / states.length; }
  if (normalize) { const n = Math.hypot(...v); if (n > 0) for (let i = 0; i < d; i++) v[i] /= n; }
  return v;
}

/** The embedding of `tokens` under the model in `g`: encoders pool referenceEncoder, decoders their final-norm states. */
export function referenceEmbedding(g, tokens, pooling, normalize = true) {
  const arch = g.meta['general.architecture'];
  const states = arch === 'bert' || arch === 'nomic-bert' ? referenceEncoder(g, tokens) : referenceLogits(g, tokens, { hidden: true });
  return pool(states, pooling, normalize);
}
