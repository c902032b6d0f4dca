/* The transformer forward pass (llama), written to read like the math:
 *
 *   x = embed(token)
 *   for each layer:
 *     h = rmsnorm(x) * w_attn_norm
 *     q, k, v = Wq h, Wk h, Wv h ; rotate q, k by RoPE at the token's position
 *     append k, v to the KV cache
 *     x = x + Wo attention(q, K_cache, V_cache)      (causal, tiled, online softmax)
 *     h = rmsnorm(x) * w_ffn_norm
 *     x = x + W_down (silu(W_gate h) * (W_up h))     (SwiGLU)
 *   logits = W_out (rmsnorm(x) * w_out_norm)
 *
 * A call processes a batch of tokens (prefill) or one (decode). Every buffer
 * was planned at context creation: nothing is allocated here. */
#include "ctx.h"
#include "wmath.h"

/* ---- context creation: the memory plan ----------------------------------------- */

/* prefill: weight rows widened to int16 per pass of the tiled kernel */
#define WLM_MM_PANEL 4
/* F16 / BF16 rows converted to floats at a time for gemm_f32 (a batch) */
#define WLM_F32_PANEL 4
/* Q8_0/Q4_0 batches up to this many tokens go through gemv (each weight
 * block widened in registers for every token); larger ones unpack rows once
 * into the i16x4 form for the register-tiled gemm_i16x4 (gemv_max_tok: the
 * relaxed build's Q4_0 byte tile takes over from 3 tokens on Q4_0 rows in
 * file order) */
#ifndef WLM_GEMV_MAX_TOK
#define WLM_GEMV_MAX_TOK 3
#endif
/* F16 batches up to this many tokens convert each 16 halves once in
 * registers for every token (gemv_f16); larger ones convert a panel of
 * WLM_F32_PANEL rows to floats in memory and take gemm_f32. The kernel
 * takes up to 8 tokens, but from 3 on the panel wins (make bench-kernels,
 * "F16 batch" lines: at 2 tokens gemv_f16 took 0.8-0.9x the panel's time,
 * at 3 1.0-1.15x, from 5 on 1.15-1.45x; the row-at-a-time
 * conversion before gemm_f32 lost from 3 tokens on as well). */
#ifndef WLM_GEMV_F16_MAX_TOK
#define WLM_GEMV_F16_MAX_TOK 2
#endif

typedef struct plan {
    uint64_t total;
    uint64_t off_k, off_v, off_slot, off_x, off_xb, off_q, off_kk, off_vv, off_att, off_hb, off_hb2,
             off_act, off_actk, off_wrow, off_logits, off_tile, off_rope, off_rcs, off_cid, off_cval, off_seen, off_sort,
             off_sseq, off_tok, off_aidx, off_spec, off_kvt;
    uint64_t act_row_bytes, wrow_bytes, act16_row_bytes, off_act16, act8_off, off_actb;
} plan;

static uint64_t reserve(plan *p, uint64_t bytes) {
    uint64_t at = WLM_ALIGN_UP(p->total, 64);
    p->total = at + bytes;
    return at;
}

static void resolve_params(const wlm_model *m, const wlm_ctx_params *in, wlm_ctx_params *p) {
    if (in) *p = *in; else wlm_ctx_default_params(p);
    if (p->n_ctx == 0) p->n_ctx = WLM_MIN(m->hp.n_ctx_train, 2048u);
    if (p->n_batch == 0) p->n_batch = 64;
    if (p->n_threads == 0) p->n_threads = 1;
    if (p->n_threads > WLM_MAX_THREADS) p->n_threads = WLM_MAX_THREADS;
    if (p->n_batch > p->n_ctx) p->n_batch = p->n_ctx;
    if (p->n_seq_max == 0) p->n_seq_max = 1;
    uint32_t rows = WLM_MAX(p->n_seq_max, p->logits_all ? p->n_batch : 1u);
    if (p->n_outputs < rows) p->n_outputs = rows;
}

static plan make_plan(const wlm_model *m, const wlm_ctx_params *p) {
    const wlm_hparams *hp = &m->hp;
    plan pl; wlm_memset(&pl, 0, sizeof pl);
    uint64_t B = p->n_batch, d = hp->n_embd, qd = (uint64_t)hp->n_head * hp->head_dim;
    uint64_t kvd = (uint64_t)hp->n_head_kv * hp->head_dim;        /* keys: n_head_kv x key_length */
    uint64_t vd = (uint64_t)hp->n_head_kv * hp->head_dim_v;       /* values: n_head_kv x value_length */
    uint64_t od = (uint64_t)hp->n_head * hp->head_dim_v;          /* attention output (input of attn_output) */
    uint64_t esz = p->kv_type == WLM_KV_F16 ? 2 : 4;
    uint64_t k_bytes = (uint64_t)hp->n_layer * kvd * p->n_ctx * esz;
    uint64_t v_bytes = (uint64_t)hp->n_layer * vd * p->n_ctx * esz;
    uint64_t widest = WLM_MAX(WLM_MAX(WLM_MAX(d, qd), od), (uint64_t)hp->n_ff);
    pl.act_row_bytes = WLM_ALIGN_UP(WLM_MAX(wlm_act_row_bytes(GGML_Q8_0, (uint32_t)widest),
                                            wlm_act_row_bytes(GGML_Q8_K, (uint32_t)widest)), 64);
    reserve(&pl, WLM_ALIGN_UP(sizeof(struct wlm_ctx), 64));
    pl.off_k = reserve(&pl, k_bytes);
    pl.off_v = reserve(&pl, v_bytes);
    pl.off_slot = reserve(&pl, (uint64_t)p->n_ctx * 4);
    pl.off_sseq = reserve(&pl, (uint64_t)p->n_ctx * 8);
    pl.off_tok = reserve(&pl, B * 24);
    pl.off_x = reserve(&pl, B * d * 4);
    pl.off_xb = reserve(&pl, B * WLM_MAX(d, qd) * 4);
    pl.off_q = reserve(&pl, B * qd * 4);
    pl.off_kk = reserve(&pl, B * kvd * 4);
    pl.off_vv = reserve(&pl, B * vd * 4);
    pl.off_att = reserve(&pl, B * od * 4);
    pl.off_hb = reserve(&pl, B * hp->n_ff * 4);
    pl.off_hb2 = reserve(&pl, B * hp->n_ff * 4);
    pl.off_act = reserve(&pl, B * pl.act_row_bytes);
    pl.off_actk = reserve(&pl, B * pl.act_row_bytes);
    /* [kernels] per thread: a panel of WLM_F32_PANEL rows as floats (F16 /
     * BF16 batches, gemm_f32), or a panel of i16x4 rows (prefill) */
    pl.wrow_bytes = WLM_ALIGN_UP(WLM_MAX(WLM_F32_PANEL * widest * 4, WLM_MM_PANEL * wlm_i16x4_row_bytes((uint32_t)widest)), 64);
    /* [kernels] int16 activations: i16x4 (prefill) or i16eo (decode) rows,
     * each followed (at act8_off) by the same values in the kernel set's
     * act_q4g form: i8x4 (relaxed SIMD: gemv_q4g, gemm_q4_i8x4) or i16g
     * (SIMD128: gemv_q4g) */
    pl.act8_off = WLM_ALIGN_UP(widest * 2 + (widest / 32 + 1) * 8, 64);
    pl.act16_row_bytes = pl.act8_off + WLM_ALIGN_UP(widest * 2 + (widest / 32 + 1) * 8, 64);
    pl.off_act16 = reserve(&pl, B * pl.act16_row_bytes);
    /* [kernels, relaxed SIMD] a batch's input in the q4gb form of gemm_q4gb
     * (q4g weights), chunks of four tokens; nothing where the set has none */
    if (wlm_kernels_best()->gemm_q4gb)
        pl.off_actb = reserve(&pl, (B + WLM_Q4GB_T - 1) / WLM_Q4GB_T * wlm_q4gb_chunk_bytes((uint32_t)widest));
    pl.off_wrow = reserve(&pl, p->n_threads * pl.wrow_bytes);
    pl.off_logits = reserve(&pl, (uint64_t)p->n_outputs * hp->n_vocab * 4);
    pl.off_tile = reserve(&pl, p->n_threads * WLM_ATT_TILE * 4);
    pl.off_aidx = reserve(&pl, p->n_threads * WLM_ATT_TILE * 4);
    /* F16 caches: per thread one tile of keys and one of values as floats (wlm_attention_block) */
    if (p->kv_type == WLM_KV_F16)
        pl.off_kvt = reserve(&pl, p->n_threads * 2ull * WLM_ATT_TILE * WLM_MAX(hp->head_dim, hp->head_dim_v) * 4);
    pl.off_rope = reserve(&pl, (hp->n_rot / 2 + 1) * 8);
    pl.off_rcs = reserve(&pl, B * (hp->n_rot / 2 + 1) * 8);
    pl.off_cid = reserve(&pl, (uint64_t)hp->n_vocab * 4);
    pl.off_cval = reserve(&pl, (uint64_t)hp->n_vocab * 4);
    pl.off_seen = reserve(&pl, hp->n_vocab);
    pl.off_sort = reserve(&pl, (uint64_t)hp->n_vocab * 12);
    pl.off_spec = reserve(&pl, (uint64_t)hp->n_vocab * 4);   /* dense draft distribution (wlm_spec_accept) */
    pl.total = WLM_ALIGN_UP(pl.total, 64);
    return pl;
}

void wlm_ctx_default_params(wlm_ctx_params *p) {
    wlm_memset(p, 0, sizeof *p);
    p->kv_type = WLM_KV_F32;
    p->full_policy = WLM_FULL_ERROR;
}

uint64_t wlm_ctx_bytes_needed(const wlm_model *m, const wlm_ctx_params *in) {
    wlm_ctx_params p; resolve_params(m, in, &p);
    return make_plan(m, &p).total;
}

wlm_status wlm_ctx_new(wlm_ctx **out, wlm_model *m, const wlm_ctx_params *in, wlm_err *err) {
    wlm_err dummy; if (!err) err = &dummy;
    if (!out || !m) return wlm_fail(err, WLM_ERR_ARG, "wlm_ctx_new: NULL argument");
    *out = 0;
    wlm_ctx_params p; resolve_params(m, in, &p);
    if (p.n_ctx > (1u << 24)) return wlm_fail(err, WLM_ERR_ARG, "context length %u is too large", p.n_ctx);
    if (p.kv_type > WLM_KV_F16) return wlm_fail(err, WLM_ERR_ARG, "unknown KV cache type %u", p.kv_type);
    if (p.full_policy > WLM_FULL_SLIDE) return wlm_fail(err, WLM_ERR_ARG, "unknown context-full policy %u", p.full_policy);
    if (p.n_seq_max > WLM_MAX_SEQ) return wlm_fail(err, WLM_ERR_ARG, "n_seq_max %u is above the limit of %u sequences", p.n_seq_max, WLM_MAX_SEQ);
    if (p.full_policy == WLM_FULL_SLIDE && p.n_seq_max > 1)
        return wlm_fail(err, WLM_ERR_ARG, "the sliding-window policy works with one sequence (n_seq_max %u)", p.n_seq_max);
    if (p.n_outputs > (1u << 20)) return wlm_fail(err, WLM_ERR_ARG, "n_outputs %u is too large", p.n_outputs);
    if (p.full_policy == WLM_FULL_SLIDE && p.n_keep >= p.n_ctx)
        return wlm_fail(err, WLM_ERR_ARG, "n_keep %u must be smaller than the context length %u", p.n_keep, p.n_ctx);
    plan pl = make_plan(m, &p);
    uint8_t *mem = wlm_sys_alloc(pl.total);   /* checks the limit before touching memory */
    if (!mem) return wlm_fail_nomem(err, "the context", pl.total);
    wlm_ctx *c = (wlm_ctx *)mem;
    const wlm_hparams *hp = &m->hp;
    c->m = m; c->k = wlm_kernels_best(); c->p = p;
    c->n_ctx = p.n_ctx; c->n_batch = p.n_batch;
    c->k_cache = mem + pl.off_k; c->v_cache = mem + pl.off_v;
    c->kv_head_stride = (uint64_t)p.n_ctx * hp->head_dim;
    c->kv_layer_stride = c->kv_head_stride * hp->n_head_kv;
    c->kv_head_stride_v = (uint64_t)p.n_ctx * hp->head_dim_v;
    c->kv_layer_stride_v = c->kv_head_stride_v * hp->n_head_kv;
    c->slot_pos = (int32_t *)(mem + pl.off_slot);
    c->slot_seq = (uint64_t *)(mem + pl.off_sseq);
    c->n_seq_max = p.n_seq_max; c->n_outputs = p.n_outputs;
    c->tok_seq = (uint32_t *)(mem + pl.off_tok); c->tok_slot = c->tok_seq + p.n_batch;
    c->tok_pos = (int32_t *)(c->tok_slot + p.n_batch); c->out_tok = (uint32_t *)(c->tok_pos + p.n_batch);
    c->att_run = c->out_tok + p.n_batch; c->att_wpos = (int32_t *)(c->att_run + p.n_batch);
    c->x = (float *)(mem + pl.off_x); c->xb = (float *)(mem + pl.off_xb);
    c->q = (float *)(mem + pl.off_q); c->kk = (float *)(mem + pl.off_kk); c->vv = (float *)(mem + pl.off_vv);
    c->att = (float *)(mem + pl.off_att); c->hb = (float *)(mem + pl.off_hb); c->hb2 = (float *)(mem + pl.off_hb2);
    c->act = mem + pl.off_act; c->act_k = mem + pl.off_actk; c->act_row_bytes = pl.act_row_bytes;
    c->wrow = mem + pl.off_wrow;
    c->wrow_bytes = pl.wrow_bytes;
    c->act16 = mem + pl.off_act16; c->act16_row_bytes = pl.act16_row_bytes; c->act8_off = pl.act8_off;
    c->act_b = mem + pl.off_actb;
    c->n_thr = 1;
    c->logits = (float *)(mem + pl.off_logits);
    c->att_tile = (float *)(mem + pl.off_tile);
    c->att_idx = (uint32_t *)(mem + pl.off_aidx);
    c->att_kvt = pl.off_kvt ? (float *)(mem + pl.off_kvt) : 0;
    c->spec_q = (float *)(mem + pl.off_spec);
    wlm_memset(c->spec_q, 0, (uint64_t)hp->n_vocab * 4);
    c->rope_freq = (double *)(mem + pl.off_rope); c->rope_cs = (float *)(mem + pl.off_rcs);
    c->cand_id = (int32_t *)(mem + pl.off_cid); c->cand_val = (float *)(mem + pl.off_cval);
    c->seen = mem + pl.off_seen;
    c->sort_tmp = mem + pl.off_sort;
    c->mem = mem; c->mem_bytes = pl.total;
    /* inverse RoPE frequencies theta_i = base^(-2i/n_rot), in double, divided
     * by the model's per-frequency factor (rope_freqs.weight or rope.scaling) */
    double lb = wlm_log((double)hp->rope_freq_base);
    for (uint32_t i = 0; i < hp->n_rot / 2; i++) {
        double theta = wlm_exp(-(double)(2 * i) / hp->n_rot * lb);
        c->rope_freq[i] = hp->rope_scaled ? theta / wlm_rope_freq_divisor(m, i, theta) : theta;
    }
    wlm_ctx_reset(c);
    *out = c;
    return WLM_OK;
}

void wlm_ctx_free(wlm_ctx *c) { if (c) wlm_sys_free(c->mem); }

void wlm_ctx_reset(wlm_ctx *c) { wlm_kv_reset(c); }

uint32_t wlm_ctx_pos(const wlm_ctx *c) { return c->seq_pos[0]; }
uint32_t wlm_ctx_n_ctx(const wlm_ctx *c) { return c->n_ctx; }
float *wlm_ctx_logits(wlm_ctx *c) { return c->logits; }
uint32_t wlm_ctx_n_logits(const wlm_ctx *c) { return c->n_logits; }

wlm_status wlm_ctx_truncate(wlm_ctx *c, uint32_t pos, wlm_err *err) {
    if (c->slid) return wlm_fail(err, WLM_ERR_STATE, "cannot rewind: positions already slid out of the window");
    if (pos > c->seq_pos[0]) return wlm_fail(err, WLM_ERR_ARG, "cannot truncate to %u: only %u positions evaluated", pos, c->seq_pos[0]);
    return wlm_seq_truncate(c, 0, pos, err);
}

/* ---- building blocks ------------------------------------------------------------ */

/* rmsnorm(x) = x / sqrt(mean(x^2) + eps) * w in two parts: the scale of a
 * whole row here, then (act_step) the elements a thread writes, so that
 * threads can share a row */
static float rms_scale(const float *x, uint32_t n, float eps) {
    double ss = 0;
    for (uint32_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    return 1.0f / wlm_sqrtf((float)(ss / n) + eps);
}

/* Activation forms. A matrix product y = W x reads x in the form
 * wlm_act_type(W) names: the floats themselves, Q8_0 blocks (c->act; for
 * Q8_0/Q4_0 weights also rearranged in c->act16: the i16eo form for gemv's
 * few tokens or i16x4 rows for a larger batch at the row's start, and the
 * kernel set's act_q4g form at act8_off: for Q4_0 rows repacked at load
 * (q4g) and, in the relaxed build, for every Q4_0 batch) or Q8_K blocks
 * (c->act_k). Each input is converted once into every form its weights
 * read (Q, K and V share one input, gate and up another). The i16eo and
 * act_q4g forms convert block by block (act_q4g group by group), so they
 * are split across threads within one token; the batch forms come with
 * n_tok > 1, where act_step splits by tokens. */
enum { NEED_Q8 = 1, NEED_I16 = 2, NEED_QK = 4, NEED_X4 = 8, NEED_G = 16, NEED_B = 32 };

/* The most tokens a Q8_0/Q4_0 product takes through gemv (each weight
 * block widened in registers for every token); more go through a batch
 * kernel. Relaxed SIMD: gemm_q4gb on q4g rows from 2 tokens on (make
 * bench-kernels, 2048 x 1024: 0.053 / 0.047 ns per weight per token at 2 / 3
 * tokens against gemv_q4g's 0.060 / 0.057); the Q4_0 byte tile on rows in
 * file order from 3 (about 0.08 against gemv_q4_0's 0.09-0.10 at 3, even at
 * 2). */
static uint32_t gemv_max_tok(const wlm_ctx *c, const wlm_tensor *w) {
    if (w->q4g && c->k->gemm_q4gb) return 1;
    return w->type == GGML_Q4_0 && !w->q4g && c->k->gemm_q4_i8x4 ? 2 : WLM_GEMV_MAX_TOK;
}

/* The forms a product with w over n_tok tokens reads: NEED_I16 the i16eo
 * form (gemv), NEED_X4 the i16x4 form (gemm_i16x4), NEED_G the act_q4g
 * form (gemv_q4g; in the relaxed build also gemm_q4_i8x4, for which it is
 * the i8x4 form), NEED_B the q4gb form (gemm_q4gb: batches on q4g rows in
 * the relaxed build). */
static uint32_t needs_of(const wlm_ctx *c, const wlm_tensor *w, uint32_t n_tok) {
    switch (wlm_act_type(w->type)) {
    case GGML_Q8_0:
        if (w->type != GGML_Q8_0 && w->type != GGML_Q4_0) return NEED_Q8;
        if (n_tok <= gemv_max_tok(c, w)) return NEED_Q8 | (w->q4g ? NEED_G : NEED_I16);
        if (w->q4g && c->k->gemm_q4gb) return NEED_Q8 | NEED_B;
        return NEED_Q8 | (w->type == GGML_Q4_0 && c->k->gemm_q4_i8x4 ? NEED_G : NEED_X4);
    case GGML_Q8_K: return NEED_QK;
    default: return 0;
    }
}

/* Rows t < n_tok of dst (n floats each) = rmsnorm(row rows[t] of src) * w
 * when `norm` is given (rows NULL: row t; without norm dst is src), and
 * their forms in `need`. One token is split across threads by activation
 * blocks (every block is converted on its own), a batch by tokens. */
static void act_step(wlm_ctx *c, const float *src, const uint32_t *rows, const wlm_tensor *norm, float *dst,
                     uint32_t n_tok, uint32_t n, uint32_t need, uint32_t tid, uint32_t nth) {
    /* act_q4g converts whole groups of four blocks */
    uint32_t unit = need & NEED_QK ? QK_K : need & NEED_G ? 4 * QK8_0 : QK8_0, t0 = 0, t1 = n_tok, u0, u1;
    if (n % unit) unit = n;   /* unquantized input of a width that is not whole blocks: one piece */
    if (n_tok == 1) wlm_split(n / unit, tid, nth, &u0, &u1);
    else { wlm_split(n_tok, tid, nth, &t0, &t1); u0 = 0; u1 = n / unit; }
    uint32_t lo = u0 * unit, hi = u1 * unit;
    if (lo == hi) return;
    for (uint32_t t = t0; t < t1; t++) {
        float *y = norm ? dst + (uint64_t)t * n : (float *)src + (uint64_t)t * n;
        if (norm) {
            const float *x = src + (uint64_t)(rows ? rows[t] : t) * n, *w = (const float *)norm->data;
            float s = rms_scale(x, n, c->m->hp.rms_eps);
            for (uint32_t i = lo; i < hi; i++) y[i] = (x[i] * s) * w[i];
        }
        uint8_t *q8 = c->act + t * c->act_row_bytes;
        if (need & NEED_Q8) c->k->quantize_q8_0(y + lo, (block_q8_0 *)q8 + lo / QK8_0, hi - lo);
        if (need & NEED_QK) wlm_quantize_row_q8_k(y + lo, (block_q8_k *)(c->act_k + t * c->act_row_bytes) + lo / QK_K, hi - lo);
        uint8_t *x16 = c->act16 + t * c->act16_row_bytes;
        /* (i16eo and i16x4 share the row's start: no product reads both at
         * one token count) */
        if (need & NEED_I16) wlm_act_i16eo_blocks((const block_q8_0 *)q8, x16, n, lo / QK8_0, hi / QK8_0);
        if (need & NEED_X4) c->k->unpack_i16x4(GGML_Q8_0, q8, x16, n);
        if ((need & NEED_G) && c->k->act_q4g) /* (the scalar gemv_q4g reads the Q8_0 blocks) */
            c->k->act_q4g((const block_q8_0 *)q8, x16 + c->act8_off, n, lo / QK8_0, hi / QK8_0);
        if (need & NEED_B) c->k->act_q4gb((const block_q8_0 *)q8, c->act_b, n, t);   /* (a batch: the whole row) */
    }
}

/* Rows [r0, r1) of y[t][r] = W[r] . x[t] for the n_tok tokens of input x
 * (n floats a row, already converted by act_step): each weight row is read
 * once for the whole batch, and every y element is computed the same way
 * whichever thread computes it and however the rows are split. */
static void mm(wlm_ctx *c, const wlm_tensor *W, const float *x, uint32_t n_tok, float *y,
               uint32_t r0, uint32_t r1, uint32_t tid) {
    uint32_t n = (uint32_t)W->ne[0], rows = (uint32_t)W->ne[1], at = wlm_act_type(W->type);
    uint64_t row_bytes = W->nbytes / W->ne[1];
    if (r1 <= r0) return;
    const uint8_t *xs = (const uint8_t *)x; uint64_t xstride = (uint64_t)n * 4;
    if (at != GGML_F32) { xs = at == GGML_Q8_K ? c->act_k : c->act; xstride = c->act_row_bytes; }
    int i16 = W->type == GGML_Q8_0 || W->type == GGML_Q4_0;   /* every kernel set has gemv/gemm_i16x4 */
    /* With several tokens, an F16/BF16 row is converted once to floats: the
     * F32 kernel then computes bit-identical results. */
    int unpack = n_tok > 1 && (W->type == GGML_F16 || W->type == GGML_BF16);
    if (W->type == GGML_F16 && n_tok > 1 && n_tok <= WLM_GEMV_F16_MAX_TOK) {
        /* small batches (speculative verification, a few candidates): each
         * 16 halves converted once in registers for every token */
        c->k->gemv_f16(n, W->data + (uint64_t)r0 * row_bytes, row_bytes, r1 - r0, (const float *)xs, xstride / 4, n_tok, y + r0, rows);
        return;
    }
    wlm_dot_fn dot = c->k->dot[W->type];
    uint8_t *wrow = c->wrow + tid * c->wrow_bytes;
    /* K-quants: the kernel set's batched path (kquants*.c) does the whole
     * range for every token, equal to the row dot bit for bit; 0 = none */
    if (c->k->kq_rows && at == GGML_Q8_K &&
        c->k->kq_rows(W->type, n, W->data + r0 * row_bytes, row_bytes, r1 - r0, xs, xstride, n_tok,
                      y + r0, rows, wrow, c->wrow_bytes))
        return;
    if (i16 && n_tok <= gemv_max_tok(c, W)) {
        /* decode and small batches: the rows in one call, in memory order,
         * each weight block widened once for every token (q4g rows read the
         * act_q4g form at act8_off, the others the i16eo form) */
        wlm_gemv_fn gemv = W->q4g ? c->k->gemv_q4g : W->type == GGML_Q4_0 ? c->k->gemv_q4_0 : c->k->gemv_q8_0;
        const uint8_t *x16 = c->act16 + (W->q4g ? c->act8_off : 0);
        gemv(n, W->data + (uint64_t)r0 * row_bytes, row_bytes, r1 - r0, xs, xstride, x16, c->act16_row_bytes, n_tok, y + r0, rows);
        return;
    }
    if (W->q4g && c->k->gemm_q4gb) {
        /* relaxed SIMD, q4g rows: one row at a time against the batch's
         * q4gb form, no unpacked copy (bit for bit dot_q4_0) */
        c->k->gemm_q4gb(n, W->data + (uint64_t)r0 * row_bytes, row_bytes, r1 - r0, xs, xstride, c->act_b, n_tok, y + r0, rows);
        return;
    }
    if (W->type == GGML_Q4_0 && c->k->gemm_q4_i8x4) {
        /* relaxed SIMD: a panel of rows as nibbles in the i8x4 form, then the
         * register-tiled relaxed dot products (bit for bit dot_q4_0) */
        uint64_t rb = wlm_q4_i8x4_row_bytes(n);
        for (uint32_t r = r0; r < r1; r += WLM_MM_PANEL) {
            uint32_t nr = WLM_MIN(WLM_MM_PANEL, r1 - r);
            for (uint32_t i = 0; i < nr; i++) {
                const uint8_t *src = W->data + (uint64_t)(r + i) * row_bytes;
                c->k->unpack_q4_i8x4((const block_q4_0 *)src, wrow + i * rb, n);   /* (q4g rows took gemm_q4gb) */
            }
            c->k->gemm_q4_i8x4(n, wrow, rb, nr, c->act16 + c->act8_off, c->act16_row_bytes, n_tok, y + r, rows);
        }
        return;
    }
    if (i16) {
        /* a panel of rows widened to int16 (i16x4 form) once, then the
         * register-tiled kernel against every token of the batch (same sums
         * as dot_q8_0 / dot_q4_0, bit for bit) */
        uint64_t rb = wlm_i16x4_row_bytes(n);
        for (uint32_t r = r0; r < r1; r += WLM_MM_PANEL) {
            uint32_t nr = WLM_MIN(WLM_MM_PANEL, r1 - r);
            for (uint32_t i = 0; i < nr; i++) c->k->unpack_i16x4(W->q4g ? WLM_Q4G : W->type, W->data + (uint64_t)(r + i) * row_bytes, wrow + i * rb, n);
            c->k->gemm_i16x4(n, wrow, rb, nr, c->act16, c->act16_row_bytes, n_tok, y + r, rows);
        }
        return;
    }
    if (n_tok > 1 && W->type == GGML_F32) {
        /* float rows: the register tile of rows x tokens (dot_f32's bits) */
        c->k->gemm_f32(n, (const float *)(W->data + (uint64_t)r0 * row_bytes), row_bytes / 4, r1 - r0,
                       (const float *)xs, xstride / 4, n_tok, y + r0, rows);
        return;
    }
    if (unpack) {
        /* F16 / BF16 rows: a panel converted to floats once, then the tile;
         * the conversion is exact, so the results are dot_f16's / dot_bf16's */
        uint32_t np = WLM_F32_PANEL;
        for (uint32_t r = r0; r < r1; r += np) {
            uint32_t nr = WLM_MIN(np, r1 - r);
            for (uint32_t i = 0; i < nr; i++) {
                const uint8_t *w = W->data + (uint64_t)(r + i) * row_bytes;
                float *f = (float *)wrow + (uint64_t)i * n;
                if (W->type == GGML_F16) c->k->cvt_f16(n, (const uint16_t *)w, f);
                else wlm_dequantize_row(W->type, w, f, n);
            }
            c->k->gemm_f32(n, (const float *)wrow, n, nr, (const float *)xs, xstride / 4, n_tok, y + r, rows);
        }
        return;
    }
    for (uint32_t r = r0; r < r1; r++) {   /* one token, or a type with no batched kernel */
        const uint8_t *w = W->data + r * row_bytes;
        for (uint32_t t = 0; t < n_tok; t++)
            y[(uint64_t)t * rows + r] = dot(n, w, xs + t * xstride);
    }
}

/* y[t][r] += b[r] for rows [r0, r1) of n_tok rows of `rows` values (projection biases) */
static void add_bias(float *y, const wlm_tensor *b, uint32_t n_tok, uint32_t rows, uint32_t r0, uint32_t r1) {
    if (!b) return;
    const float *bv = (const float *)b->data;
    for (uint32_t t = 0; t < n_tok; t++)
        for (uint32_t r = r0; r < r1; r++) y[(uint64_t)t * rows + r] += bv[r];
}

void wlm_ctx_set_pool(wlm_ctx *c, wlm_pool *p, uint32_t n) {
    uint32_t max = c->p.n_threads;
    if (!p || n < 1) n = 1;
    if (n > max) n = max;
    if (p && n > wlm_pool_threads(p)) n = wlm_pool_threads(p);
    c->pool = n > 1 ? p : 0;
    c->n_thr = n;
}

/* RoPE: pairs of the first n_rot dims of each head rotate by pos * theta_i.
 * Which dims pair up depends on the architecture's convention:
 *   NORM (llama GGUF files): consecutive pairs (x[2i], x[2i+1]);
 *   NEOX (qwen2):            halves, (x[i], x[i + n_rot/2]).
 * cs holds (cos, sin) of each pos * theta_i, once per token of a chunk. */
static void rope_prepare(const wlm_ctx *c, float *cs, uint32_t pos) {
    uint32_t half = c->m->hp.n_rot / 2;
    for (uint32_t i = 0; i < half; i++) {
        double ang = (double)pos * c->rope_freq[i];
        cs[2 * i] = (float)wlm_cos(ang);
        cs[2 * i + 1] = (float)wlm_sin(ang);
    }
}

static void rope_apply(const wlm_ctx *c, const float *cs, float *v, uint32_t n_heads) {
    uint32_t hd = c->m->hp.head_dim, half = c->m->hp.n_rot / 2;
    int neox = c->m->hp.rope_type == WLM_ROPE_NEOX;
    for (uint32_t h = 0; h < n_heads; h++) {
        float *x = v + h * hd;
        for (uint32_t i = 0; i < half; i++) {
            float co = cs[2 * i], si = cs[2 * i + 1];
            uint32_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
            float x0 = x[i0], x1 = x[i1];
            x[i0] = x0 * co - x1 * si;
            x[i1] = x0 * si + x1 * co;
        }
    }
}

/* Attention of one query head over the cached keys/values, tile by tile with
 * an online softmax: for each tile of WLM_ATT_TILE slots compute the scores
 * s_j = q.k_j * scale, raise the running max m if needed (rescaling the
 * running sum and output by exp(m_old - m_new)), then add exp(s_j - m) and
 * exp(s_j - m) v_j. No n x n score matrix is ever formed: memory is one tile.
 * Slot j takes part when 0 <= slot_pos[j] <= qpos (causal mask). */
void wlm_attention_tiled(const wlm_kernels *k, const float *q, const void *kc, const void *vc,
                         int kv_f16, const int32_t *slot_pos, uint32_t n_slots, int32_t qpos,
                         int32_t window_lo, uint32_t hd, float scale, float *out, float *tile) {
    uint32_t idx[WLM_ATT_TILE];
    wlm_att_mask mask = { slot_pos, 0, 0, n_slots, qpos, window_lo };
    wlm_attention_tiled_kv(k, q, kc, vc, kv_f16, &mask, hd, hd, scale, out, tile, idx);
}

/* One tile of the online softmax for one query: the scores of the tn slots
 * idx[0..tn) of kc, the running max *m raised if needed (the running sum and
 * the output rescaled by exp(m_old - m_new)), then out += exp(s - m) v. */
static void att_tile_step(const wlm_kernels *k, const float *q, const void *kc, const void *vc, int kv_f16,
                          const uint32_t *idx, uint32_t tn, uint32_t hd_k, uint32_t hd, float scale,
                          float *out, float *tile, float *m, float *sum) {
    k->att_scores(tn, hd_k, q, kc, kv_f16, idx, scale, tile);
    float tmax = -3.0e38f;
    for (uint32_t i = 0; i < tn; i++) if (tile[i] > tmax) tmax = tile[i];
    if (tmax > *m) {
        float corr = wlm_expf_fast(*m - tmax);
        *sum *= corr;
        k->scale(hd, corr, out);
        *m = tmax;
    }
    k->exp_shift(tn, tile, *m);  /* the tile's weights exp(s - m) */
    float s = *sum;
    for (uint32_t i = 0; i < tn; i++) s += tile[i];
    *sum = s;
    k->att_accum(tn, hd, tile, vc, kv_f16, idx, out);
}

/* whether mk lets its query see slot i */
static int att_visible(const wlm_att_mask *mk, uint32_t i) {
    int32_t p = mk->slot_pos[i];
    return p >= 0 && p <= mk->qpos && p >= mk->window_lo && (!mk->slot_seq || (mk->slot_seq[i] & mk->seq_bit));
}

/* the next tile of the slots mk lets its query see, from slot *j on: their
 * indices in idx, their count returned (0: none left) */
static uint32_t att_next_tile(const wlm_att_mask *mk, uint32_t *j, uint32_t *idx) {
    uint32_t tn = 0, i = *j;
    for (; i < mk->n_slots && tn < WLM_ATT_TILE; i++)
        if (att_visible(mk, i)) idx[tn++] = i;
    *j = i;
    return tn;
}

/* wlm_attention_tiled with keys (and the query) of hd_k elements and values of hd_v.
 * A tile is the next WLM_ATT_TILE slots the query may see (slots it may
 * not see are skipped, not padded), so the result depends only on the
 * visible slots and their order, not on what lies between them. */
void wlm_attention_tiled_kv(const wlm_kernels *k, const float *q, const void *kc, const void *vc,
                            int kv_f16, const wlm_att_mask *mk, uint32_t hd_k, uint32_t hd,
                            float scale, float *out, float *tile, uint32_t *idx) {
    float m = -3.0e38f, sum = 0.0f;
    for (uint32_t i = 0; i < hd; i++) out[i] = 0.0f;
    uint32_t j = 0, tn;
    while ((tn = att_next_tile(mk, &j, idx)))
        att_tile_step(k, q, kc, vc, kv_f16, idx, tn, hd_k, hd, scale, out, tile, &m, &sum);
    if (sum > 0) k->scale(hd, 1.0f / sum, out);
}

/* Whether the slots mk lets its query see hold ascending positions in slot
 * order: then what a query of the same sequence at an earlier position sees
 * is a prefix of them, and its tiles are the first ones of mk's query, the
 * last maybe cut short (wlm_attention_block relies on it). */
int wlm_att_ascending(const wlm_att_mask *mk) {
    int32_t last = -1;
    for (uint32_t i = 0; i < mk->n_slots; i++) {
        if (!att_visible(mk, i)) continue;
        if (mk->slot_pos[i] <= last) return 0;
        last = mk->slot_pos[i];
    }
    return 1;
}

/* Flash-attention order for nq queries that read one KV head of one
 * sequence (the query heads of a GQA group, and/or consecutive tokens):
 * tile by tile of the slots mk's query sees (mk->qpos = the largest of
 * qpos[]), every query takes the part of the tile it sees, so each tile of
 * keys and values is read from memory once for all of them and then from
 * the cache. Query i sees the slots with position <= qpos[i]; they must be a
 * prefix of mk's (wlm_att_ascending), so its tiles are the ones it would
 * take alone and every output equals wlm_attention_tiled_kv's bit for bit.
 * kvt (F16 caches; else NULL): room for one tile of keys and one of values
 * as floats (2 x WLM_ATT_TILE x max(hd_k, hd) floats): the tile is converted
 * once (exactly) and the queries run the F32 kernels on it, which take the
 * same operations in the same order as the F16 ones. */
void wlm_attention_block(const wlm_kernels *k, uint32_t nq, const float *const *q, float *const *out, const int32_t *qpos,
                         const void *kc, const void *vc, int kv_f16, const wlm_att_mask *mk, uint32_t hd_k, uint32_t hd,
                         float scale, float *tile, uint32_t *idx, float *kvt) {
    float m[WLM_ATT_MAXQ], sum[WLM_ATT_MAXQ];
    uint32_t iota[WLM_ATT_TILE];
    for (uint32_t i = 0; i < WLM_ATT_TILE; i++) iota[i] = i;
    float *kt = kvt, *vt = kvt ? kvt + (uint64_t)WLM_ATT_TILE * WLM_MAX(hd_k, hd) : 0;
    for (uint32_t q0 = 0; q0 < nq; q0 += WLM_ATT_MAXQ) {
        uint32_t q1 = WLM_MIN(nq, q0 + WLM_ATT_MAXQ);
        for (uint32_t i = q0; i < q1; i++) {
            m[i - q0] = -3.0e38f; sum[i - q0] = 0.0f;
            for (uint32_t d = 0; d < hd; d++) out[i][d] = 0.0f;
        }
        uint32_t j = 0, tn;
        while ((tn = att_next_tile(mk, &j, idx))) {
            const void *kk = kc, *vv = vc;
            const uint32_t *ix = idx;
            int f16 = kv_f16;
            if (kv_f16 && kvt) {
                for (uint32_t r = 0; r < tn; r++) {
                    k->cvt_f16(hd_k, (const uint16_t *)kc + (uint64_t)idx[r] * hd_k, kt + (uint64_t)r * hd_k);
                    k->cvt_f16(hd, (const uint16_t *)vc + (uint64_t)idx[r] * hd, vt + (uint64_t)r * hd);
                }
                kk = kt; vv = vt; ix = iota; f16 = 0;
            }
            for (uint32_t i = q0; i < q1; i++) {
                uint32_t n = 0;   /* the tile's first n slots are the ones query i sees */
                while (n < tn && mk->slot_pos[idx[n]] <= qpos[i]) n++;
                if (n) att_tile_step(k, q[i], kk, vv, f16, ix, n, hd_k, hd, scale, out[i], tile, &m[i - q0], &sum[i - q0]);
            }
        }
        for (uint32_t i = q0; i < q1; i++)
            if (sum[i - q0] > 0) k->scale(hd, 1.0f / sum[i - q0], out[i]);
    }
}

/* The ring of the sliding window (one sequence): past n_ctx, position pos
 * overwrites the slot of position pos - (n_ctx - n_keep). */
static uint32_t slot_for(const wlm_ctx *c, uint32_t pos) {
    uint32_t keep = c->p.n_keep, ring = c->n_ctx - keep;
    return keep + (pos - keep) % ring;
}

/* Stores heads [h0, h1) of one token's keys (heads of head_dim floats) or,
 * with `values`, its values (heads of head_dim_v) in cache slot `slot`. */
static void kv_store(wlm_ctx *c, int values, uint32_t layer, uint32_t slot, const float *src, uint32_t h0, uint32_t h1) {
    const wlm_hparams *hp = &c->m->hp;
    uint32_t hs = values ? hp->head_dim_v : hp->head_dim;
    uint64_t ls = values ? c->kv_layer_stride_v : c->kv_layer_stride, hstr = values ? c->kv_head_stride_v : c->kv_head_stride;
    void *cache = values ? c->v_cache : c->k_cache;
    for (uint32_t h = h0; h < h1; h++) {
        uint64_t off = layer * ls + h * hstr + (uint64_t)slot * hs;
        if (c->p.kv_type == WLM_KV_F16) wlm_quantize_row_f16(src + h * hs, (uint16_t *)cache + off, hs);
        else wlm_memcpy((float *)cache + off, src + h * hs, hs * 4);
    }
}

/* ---- the forward pass for one chunk of tokens --------------------------------------- */

/* The whole chunk is one job: every thread runs the steps below in order,
 * with a barrier wherever a step reads what other threads wrote in the one
 * before. Nothing runs on one thread while the others wait. The matrix
 * products, attention and everything fused with them hand out their items
 * (rows, heads) in chunks from a shared counter (wlm_pool_take): a thread
 * that runs late does less of the step. Which thread computes an item never
 * changes what is computed, so results are the same at any thread count.
 * Two counters alternate: while one step takes from one, thread 0 clears the
 * other for the next such step (a barrier always lies between two steps). */
typedef struct fwd {
    wlm_ctx *c; const int32_t *tokens; uint32_t n, n_out, out_row;
    volatile int32_t next[2];
} fwd;

typedef struct step { volatile int32_t *next; uint32_t nth; } step;

static step step_begin(fwd *f, uint32_t *k, uint32_t tid, uint32_t nth) {
    step s = { &f->next[*k & 1], nth };
    if (tid == 0) __atomic_store_n(&f->next[(*k & 1) ^ 1], 0, __ATOMIC_RELAXED);
    ++*k;
    return s;
}

static int take(const step *s, uint32_t n, uint32_t min, uint32_t *lo, uint32_t *hi) {
    return wlm_pool_take(s->next, n, s->nth, min, lo, hi);
}

/* rows per chunk of a matrix product: enough weight bytes that taking a
 * chunk costs little next to computing it */
static uint32_t min_rows(const wlm_tensor *W) {
    uint64_t row_bytes = W->nbytes / W->ne[1];
    return (uint32_t)WLM_MAX(4u, WLM_MIN(64u, (16384 + row_bytes - 1) / row_bytes));
}

/* tokens a block of attention items holds (at most WLM_ATT_MAXQ queries with the GQA group) */
static uint32_t att_block_tokens(const wlm_hparams *hp) {
    return WLM_MAX(1u, WLM_MIN((uint32_t)WLM_ATT_QB, WLM_ATT_MAXQ / (hp->n_head / hp->n_head_kv)));
}

/* the slots a token of the run starting at t0 may see, up to position wpos */
static wlm_att_mask att_run_mask(const wlm_ctx *c, uint32_t t0, int32_t wpos) {
    wlm_att_mask mk = { c->slot_pos, c->n_seq_max > 1 ? c->slot_seq : 0, 1ull << c->tok_seq[t0], c->n_slots, wpos, 0 };
    return mk;
}

#define ATT_TOGETHER 0x80000000u

/* Once per chunk, before its layers: cuts each block of att_block_tokens
 * tokens into runs of consecutive tokens of one sequence. For a run from
 * t0: att_run[t0] = its end, with ATT_TOGETHER when its queries may share
 * passes (a lone token, or visible slots at ascending positions: the same
 * for every layer and head, so checked here once), att_wpos[t0] = its
 * latest position. */
static void att_plan_runs(wlm_ctx *c, uint32_t n) {
    uint32_t qb = att_block_tokens(&c->m->hp);
    for (uint32_t b0 = 0; b0 < n; b0 += qb) {
        uint32_t tend = WLM_MIN(n, b0 + qb);
        for (uint32_t t0 = b0, t1; t0 < tend; t0 = t1) {
            int32_t wpos = c->tok_pos[t0];
            for (t1 = t0 + 1; t1 < tend && c->tok_seq[t1] == c->tok_seq[t0]; t1++) wpos = WLM_MAX(wpos, c->tok_pos[t1]);
            wlm_att_mask mk = att_run_mask(c, t0, wpos);
            c->att_run[t0] = t1 | (t1 - t0 == 1 || wlm_att_ascending(&mk) ? ATT_TOGETHER : 0);
            c->att_wpos[t0] = wpos;
        }
    }
}

/* Attention for every (token, query head) pair of a chunk, each thread with
 * its own tile of scores. Token t sees the slots of its own sequence up to
 * its own position (causal mask). An item is one KV head for a run of
 * consecutive tokens of one sequence (at most WLM_ATT_QB tokens, and at most
 * WLM_ATT_MAXQ queries with the query heads of a GQA group): its queries
 * go through wlm_attention_block together, so each tile of keys and values
 * is read once for all of them, where their visible slots hold ascending
 * positions (a fresh prompt, decode); elsewhere (slots reused out of order)
 * each query runs alone. Either way every output is the same bits. */
static void attention_step(const fwd *f, uint32_t layer, float scale, const step *s, uint32_t tid) {
    wlm_ctx *c = f->c;
    const wlm_hparams *hp = &c->m->hp;
    uint32_t hd = hp->head_dim, hdv = hp->head_dim_v, qd = hp->n_head * hd, od = hp->n_head * hdv;
    uint32_t group = hp->n_head / hp->n_head_kv, lo, hi;
    uint32_t qb = att_block_tokens(hp), nblk = (f->n + qb - 1) / qb;
    int f16 = c->p.kv_type == WLM_KV_F16;
    uint64_t esz = f16 ? 2 : 4;
    float *tile = c->att_tile + (uint64_t)tid * WLM_ATT_TILE;
    uint32_t *idx = c->att_idx + (uint64_t)tid * WLM_ATT_TILE;
    float *kvt = f16 ? c->att_kvt + (uint64_t)tid * 2 * WLM_ATT_TILE * WLM_MAX(hd, hdv) : 0;
    const float *qs[WLM_ATT_MAXQ];
    float *outs[WLM_ATT_MAXQ];
    int32_t qpos[WLM_ATT_MAXQ];
    while (take(s, nblk * hp->n_head_kv, 1, &lo, &hi))
        for (uint32_t it = lo; it < hi; it++) {
            uint32_t b = it / hp->n_head_kv, hk = it % hp->n_head_kv;
            uint32_t t0 = b * qb, tend = WLM_MIN(f->n, t0 + qb);
            uint64_t off = layer * c->kv_layer_stride + hk * c->kv_head_stride;
            uint64_t off_v = layer * c->kv_layer_stride_v + hk * c->kv_head_stride_v;
            const void *kc = (const uint8_t *)c->k_cache + off * esz, *vc = (const uint8_t *)c->v_cache + off_v * esz;
            while (t0 < tend) {   /* the block's runs (att_plan_runs) */
                uint32_t t1 = c->att_run[t0] & ~ATT_TOGETHER;
                int together = (c->att_run[t0] & ATT_TOGETHER) != 0;
                wlm_att_mask mask = att_run_mask(c, t0, c->att_wpos[t0]);
                /* the run's queries, WLM_ATT_MAXQ at a time (a GQA group can be wider) */
                uint32_t nq = 0;
                for (uint32_t t = t0; t < t1; t++)
                    for (uint32_t g = 0; g < group; g++) {
                        uint32_t hq = hk * group + g;
                        qs[nq] = c->q + (uint64_t)t * qd + hq * hd;
                        outs[nq] = c->att + (uint64_t)t * od + hq * hdv;
                        qpos[nq] = c->tok_pos[t];
                        if (++nq < WLM_ATT_MAXQ && !(t + 1 == t1 && g + 1 == group)) continue;
                        if (nq > 1 && together)
                            wlm_attention_block(c->k, nq, qs, outs, qpos, kc, vc, f16, &mask, hd, hdv, scale, tile, idx, kvt);
                        else
                            for (uint32_t i = 0; i < nq; i++) {
                                wlm_att_mask one = mask;
                                one.qpos = qpos[i];
                                wlm_attention_tiled_kv(c->k, qs[i], kc, vc, f16, &one, hd, hdv, scale, outs[i], tile, idx);
                            }
                        nq = 0;
                    }
                t0 = t1;
            }
        }
}

/* x = embed(token), and the RoPE angles of each token's position */
static void embed_step(const fwd *f, uint32_t tid, uint32_t nth) {
    wlm_ctx *c = f->c;
    const wlm_model *m = c->m;
    uint32_t d = m->hp.n_embd, lo, hi;
    uint64_t emb_row = m->tok_embd->nbytes / m->tok_embd->ne[1];
    wlm_split(f->n, tid, nth, &lo, &hi);
    for (uint32_t t = lo; t < hi; t++) {
        wlm_dequantize_row(m->tok_embd->type, m->tok_embd->data + (uint64_t)f->tokens[t] * emb_row, c->x + (uint64_t)t * d, d);
        rope_prepare(c, c->rope_cs + (uint64_t)t * m->hp.n_rot, (uint32_t)c->tok_pos[t]);
    }
}

/* q, k, v = Wq h, Wk h, Wv h (+ biases); q and k rotated by RoPE; k and v
 * into the cache. The heads of Q, K and V form one range of items (with GQA
 * the K and V heads are few, and V may be of a wider type): a thread
 * finishes whole heads, so it rotates and stores what it computed. */
static void qkv_step(const fwd *f, uint32_t l, const step *s, uint32_t tid) {
    wlm_ctx *c = f->c;
    const wlm_hparams *hp = &c->m->hp;
    const wlm_layer *L = &c->m->layers[l];
    const wlm_tensor *W[3] = { L->wq, L->wk, L->wv }, *B[3] = { L->bq, L->bk, L->bv };
    float *Y[3] = { c->q, c->kk, c->vv };
    uint32_t heads[3] = { hp->n_head, hp->n_head_kv, hp->n_head_kv }, hs[3] = { hp->head_dim, hp->head_dim, hp->head_dim_v };
    uint32_t lo, hi;
    while (take(s, heads[0] + heads[1] + heads[2], 1, &lo, &hi))
        for (uint32_t i = 0, base = 0; i < 3; base += heads[i], i++) {
            uint32_t h0 = WLM_MAX(lo, base), h1 = WLM_MIN(hi, base + heads[i]);
            if (h0 >= h1) continue;
            h0 -= base; h1 -= base;
            uint32_t rows = heads[i] * hs[i];
            mm(c, W[i], c->xb, f->n, Y[i], h0 * hs[i], h1 * hs[i], tid);
            add_bias(Y[i], B[i], f->n, rows, h0 * hs[i], h1 * hs[i]);
            for (uint32_t t = 0; t < f->n; t++) {
                float *y = Y[i] + (uint64_t)t * rows;
                if (i < 2) rope_apply(c, c->rope_cs + (uint64_t)t * hp->n_rot, y + h0 * hs[i], h1 - h0);
                if (i > 0) kv_store(c, i == 2, l, c->tok_slot[t], y, h0, h1);
            }
        }
}

/* x += W y (+ bias): a projection back into the residual stream (attention
 * output, FFN down), each thread adding the rows it computed */
static void residual_step(const fwd *f, const wlm_tensor *W, const wlm_tensor *b, const float *y, const step *s, uint32_t tid) {
    wlm_ctx *c = f->c;
    uint32_t d = c->m->hp.n_embd, r0, r1;
    while (take(s, d, min_rows(W), &r0, &r1)) {
        mm(c, W, y, f->n, c->xb, r0, r1, tid);
        add_bias(c->xb, b, f->n, d, r0, r1);
        for (uint32_t t = 0; t < f->n; t++)
            for (uint32_t r = r0; r < r1; r++) c->x[(uint64_t)t * d + r] += c->xb[(uint64_t)t * d + r];
    }
}

/* hb = silu(W_gate h) * (W_up h): a thread computes the same rows of both */
static void gate_up_step(const fwd *f, const wlm_layer *L, const step *s, uint32_t tid) {
    wlm_ctx *c = f->c;
    uint32_t nff = c->m->hp.n_ff, r0, r1;
    while (take(s, nff, min_rows(L->w_gate), &r0, &r1)) {
        mm(c, L->w_gate, c->xb, f->n, c->hb, r0, r1, tid);
        mm(c, L->w_up, c->xb, f->n, c->hb2, r0, r1, tid);
        for (uint32_t t = 0; t < f->n; t++)
            c->k->silu_mul(r1 - r0, c->hb + (uint64_t)t * nff + r0, c->hb2 + (uint64_t)t * nff + r0);
    }
}

static void forward_job(void *arg, uint32_t tid, uint32_t nth) {
    fwd *f = arg;
    wlm_ctx *c = f->c;
    const wlm_model *m = c->m;
    const wlm_hparams *hp = &m->hp;
    wlm_pool *p = c->pool;
    uint32_t n = f->n, d = hp->n_embd, od = hp->n_head * hp->head_dim_v, k = 0;
    float scale = 1.0f / wlm_sqrtf((float)hp->head_dim);
    step s;

    embed_step(f, tid, nth);
    wlm_pool_barrier(p, nth);
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const wlm_layer *L = &m->layers[l];
        /* attention block: h = rmsnorm(x) * w_attn_norm; q, k, v; attention; x += Wo att */
        act_step(c, c->x, 0, L->attn_norm, c->xb, n, d, needs_of(c, L->wq, n) | needs_of(c, L->wk, n) | needs_of(c, L->wv, n), tid, nth);
        wlm_pool_barrier(p, nth);
        s = step_begin(f, &k, tid, nth);
        qkv_step(f, l, &s, tid);
        wlm_pool_barrier(p, nth);
        s = step_begin(f, &k, tid, nth);
        attention_step(f, l, scale, &s, tid);
        wlm_pool_barrier(p, nth);
        act_step(c, c->att, 0, 0, 0, n, od, needs_of(c, L->wo, n), tid, nth);
        wlm_pool_barrier(p, nth);
        s = step_begin(f, &k, tid, nth);
        residual_step(f, L->wo, L->bo, c->att, &s, tid);
        wlm_pool_barrier(p, nth);
        /* feed-forward block (SwiGLU): h = rmsnorm(x) * w_ffn_norm; x += W_down (silu(W_gate h) * (W_up h)) */
        act_step(c, c->x, 0, L->ffn_norm, c->xb, n, d, needs_of(c, L->w_gate, n) | needs_of(c, L->w_up, n), tid, nth);
        wlm_pool_barrier(p, nth);
        s = step_begin(f, &k, tid, nth);
        gate_up_step(f, L, &s, tid);
        wlm_pool_barrier(p, nth);
        act_step(c, c->hb, 0, 0, 0, n, hp->n_ff, needs_of(c, L->w_down, n), tid, nth);
        wlm_pool_barrier(p, nth);
        s = step_begin(f, &k, tid, nth);
        residual_step(f, L->w_down, 0, c->hb, &s, tid);
        wlm_pool_barrier(p, nth);
    }

    /* logits = W_out (rmsnorm(x) * w_out_norm) for the tokens asked for */
    if (!f->n_out) return;
    act_step(c, c->x, c->out_tok, m->out_norm, c->xb, f->n_out, d, needs_of(c, m->output, f->n_out), tid, nth);
    wlm_pool_barrier(p, nth);
    s = step_begin(f, &k, tid, nth);
    uint32_t r0, r1;
    while (take(&s, hp->n_vocab, min_rows(m->output), &r0, &r1))
        mm(c, m->output, c->xb, f->n_out, c->logits + (uint64_t)f->out_row * hp->n_vocab, r0, r1, tid);
}

/* Runs n tokens whose sequence, position and cache slot are in
 * c->tok_seq/tok_pos/tok_slot; writes the logits of the n_out tokens listed
 * in c->out_tok into rows out_row.. of c->logits. */
static void forward_chunk(wlm_ctx *c, const int32_t *tokens, uint32_t n, uint32_t n_out, uint32_t out_row) {
    fwd f = { c, tokens, n, n_out, out_row, { 0, 0 } };
    att_plan_runs(c, n);
    /* waking the other threads and the barriers cost microseconds: a model
     * whose largest layer matrix times the tokens is small stays on one */
    const wlm_layer *L = &c->m->layers[0];
    const wlm_tensor *W[7] = { L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down };
    uint64_t work = 0;
    for (int i = 0; i < 7; i++) work = WLM_MAX(work, (uint64_t)W[i]->ne[0] * W[i]->ne[1] * n);
    wlm_pool_run(c->pool, forward_job, &f, work < WLM_MIN_PARALLEL_WORK ? 1 : c->n_thr);
}

wlm_status wlm_eval_batch(wlm_ctx *c, const int32_t *tokens, const uint32_t *seqs,
                          const uint8_t *want, uint32_t n, wlm_err *err) {
    wlm_err dummy; if (!err) err = &dummy;
    if (!c || !tokens) return wlm_fail(err, WLM_ERR_ARG, "wlm_eval: NULL argument");
    if (n == 0) return wlm_fail(err, WLM_ERR_ARG, "wlm_eval: no tokens");
    /* check everything before changing anything */
    uint32_t need[WLM_MAX_SEQ] = { 0 }, n_want = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= c->m->hp.n_vocab)
            return wlm_fail(err, WLM_ERR_ARG, "token id %d out of range (vocabulary has %u)", tokens[i], c->m->hp.n_vocab);
        uint32_t s = seqs ? seqs[i] : 0;
        if (s >= c->n_seq_max)
            return wlm_fail(err, WLM_ERR_ARG, "sequence %u out of range (the context holds %u)", s, c->n_seq_max);
        need[s]++;
        if (want ? want[i] != 0 : i == n - 1) n_want++;
    }
    int slide = c->p.full_policy == WLM_FULL_SLIDE;
    if (!slide) {
        for (uint32_t s = 0; s < c->n_seq_max; s++)
            if ((uint64_t)c->seq_pos[s] + need[s] > c->n_ctx) {
                if (c->n_seq_max == 1)
                    return wlm_fail(err, WLM_ERR_CONTEXT_FULL, "context full (%u): %u positions used, %u more requested",
                                    c->n_ctx, c->seq_pos[s], need[s]);
                return wlm_fail(err, WLM_ERR_CONTEXT_FULL, "context full (%u): sequence %u has %u positions, %u more requested",
                                c->n_ctx, s, c->seq_pos[s], need[s]);
            }
        if (n > c->n_free)
            return wlm_fail(err, WLM_ERR_CONTEXT_FULL, "context full: %u tokens need cache slots, %u of %u are free",
                            n, c->n_free, c->n_ctx);
    }
    /* logits_all without `want` keeps its old meaning: every token of the last chunk */
    int all_last_chunk = !want && c->p.logits_all;
    if (!all_last_chunk && n_want > c->n_outputs)
        return wlm_fail(err, WLM_ERR_ARG, "%u rows of logits asked for, the context keeps %u (n_outputs)", n_want, c->n_outputs);

    uint32_t done = 0, rows = 0;
    c->n_logits = 0;
    while (done < n) {
        uint32_t chunk = WLM_MIN(c->n_batch, n - done);
        /* when sliding, a chunk must not overwrite slots its own earlier
         * tokens still attend to: past the first wrap, go one by one */
        if (slide && c->seq_pos[0] + chunk > c->n_ctx)
            chunk = c->seq_pos[0] < c->n_ctx ? c->n_ctx - c->seq_pos[0] : 1;
        uint32_t n_out = 0;
        for (uint32_t t = 0; t < chunk; t++) {
            uint32_t i = done + t, s = seqs ? seqs[i] : 0;
            uint32_t pos = c->seq_pos[s]++;
            c->tok_seq[t] = s;
            c->tok_pos[t] = (int32_t)pos;
            if (slide && c->n_free == 0) {           /* the ring overwrites the oldest */
                uint32_t j = slot_for(c, pos);
                c->slot_pos[j] = (int32_t)pos;
                c->tok_slot[t] = j;
            } else {
                c->tok_slot[t] = wlm_kv_take(c, s, (int32_t)pos);
            }
            int w = all_last_chunk ? 1 : want ? want[i] != 0 : i == n - 1;
            if (w) c->out_tok[n_out++] = t;
        }
        if (all_last_chunk) rows = 0;
        forward_chunk(c, tokens + done, chunk, n_out, rows);
        rows += n_out;
        done += chunk;
    }
    c->n_logits = rows;
    if (c->seq_pos[0] > c->n_ctx) c->slid = c->seq_pos[0] - c->n_ctx;
    return WLM_OK;
}

wlm_status wlm_eval(wlm_ctx *c, const int32_t *tokens, uint32_t n, wlm_err *err) {
    return wlm_eval_batch(c, tokens, 0, 0, n, err);
}
