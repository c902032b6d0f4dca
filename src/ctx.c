/* Context lifecycle: the memory plan (every buffer of a context carved
 * from one block, sized at creation so that nothing is allocated while
 * evaluating), creation, reset, and the threads a context runs on. */
#include "ctx.h"
#include "matmul.h"
#include "wmath.h"

typedef struct plan {
    uint64_t total;
    uint64_t off_k, off_v, off_slot, off_x, off_xb, off_q, off_kk, off_vv, off_att, off_hb, off_hb2,
        off_act, off_actk, off_wrow, off_logits, off_tile, off_rope, off_rcs, off_cid, off_cval, off_pen, off_sort,
        off_sseq, off_tok, off_aidx, off_spec, off_kvt, off_rope_swa, off_rcs_swa,
        off_kvl, off_ring;
    uint32_t n_ring;
    uint64_t act_row_bytes, wrow_bytes, act16_row_bytes, off_act16, act8_off, off_actb;
} plan;

static uint64_t reserve(plan *p, uint64_t bytes) {
    uint64_t at = WLM_ALIGN_UP(p->total, 64);
    p->total = at + bytes;
    return at;
}

static void resolve_params(const wlm_model *m, const wlm_ctx_params *in, wlm_ctx_params *p) {
    if (in) *p = *in;
    else wlm_ctx_default_params(p);
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
    plan pl;
    wlm_memset(&pl, 0, sizeof pl);
    uint64_t B = p->n_batch, d = hp->n_embd, qd = (uint64_t)hp->n_head * hp->head_dim;
    uint64_t kvd = (uint64_t)hp->n_head_kv * hp->head_dim;  /* keys: n_head_kv x key_length */
    uint64_t vd = (uint64_t)hp->n_head_kv * hp->head_dim_v; /* values: n_head_kv x value_length */
    uint64_t od = (uint64_t)hp->n_head * hp->head_dim_v;    /* attention output (input of attn_output) */
    uint64_t esz = p->kv_type == WLM_KV_F16 ? 2 : 4;
    /* the K and V caches: a row per slot, or per row of the window ring on
     * the sliding-window layers when the context keeps one (kvcache.c) */
    pl.n_ring = wlm_kv_ring_rows(m, p);
    uint64_t rows = 0;
    for (uint32_t l = 0; l < hp->n_layer; l++) rows += m->layers[l].swa && pl.n_ring ? pl.n_ring : p->n_ctx;
    uint64_t k_bytes = rows * kvd * esz, v_bytes = rows * vd * esz;
    uint64_t widest = WLM_MAX(WLM_MAX(WLM_MAX(d, qd), od), (uint64_t)hp->n_ff);
    pl.act_row_bytes = WLM_ALIGN_UP(WLM_MAX(wlm_act_row_bytes(GGML_Q8_0, (uint32_t)widest),
                                            wlm_act_row_bytes(GGML_Q8_K, (uint32_t)widest)),
                                    64);
    reserve(&pl, WLM_ALIGN_UP(sizeof(struct wlm_ctx), 64));
    pl.off_k = reserve(&pl, k_bytes);
    pl.off_v = reserve(&pl, v_bytes);
    pl.off_kvl = reserve(&pl, (uint64_t)hp->n_layer * sizeof(wlm_kv_layer));
    pl.off_slot = reserve(&pl, (uint64_t)p->n_ctx * 4);
    pl.off_sseq = reserve(&pl, (uint64_t)p->n_ctx * 8);
    /* the ring's maps: per slot its row, per row its slot and position */
    if (pl.n_ring) pl.off_ring = reserve(&pl, (uint64_t)p->n_ctx * 4 + (uint64_t)pl.n_ring * 8);
    pl.off_tok = reserve(&pl, B * 28);
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
    /* [kernels] per thread: a panel of weight rows (matmul.c) */
    pl.wrow_bytes = wlm_mm_panel_bytes((uint32_t)widest);
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
    pl.off_logits = reserve(&pl, m->output ? (uint64_t)p->n_outputs * hp->n_vocab * 4 : 0); /* encoders: no logits */
    pl.off_tile = reserve(&pl, p->n_threads * WLM_ATT_TILE * 4);
    pl.off_aidx = reserve(&pl, p->n_threads * WLM_ATT_TILE * 4);
    /* F16 caches: per thread one tile of keys and one of values as floats (wlm_attention_block) */
    if (p->kv_type == WLM_KV_F16)
        pl.off_kvt = reserve(&pl, p->n_threads * 2ull * WLM_ATT_TILE * WLM_MAX(hp->head_dim, hp->head_dim_v) * 4);
    pl.off_rope = reserve(&pl, (hp->n_rot / 2 + 1) * 8);
    pl.off_rcs = reserve(&pl, B * (hp->n_rot / 2 + 1) * 8);
    if (m->rope_base_swa > 0) { /* gemma3's sliding-window layers rotate with a base of their own */
        pl.off_rope_swa = reserve(&pl, (hp->n_rot / 2 + 1) * 8);
        pl.off_rcs_swa = reserve(&pl, B * (hp->n_rot / 2 + 1) * 8);
    }
    pl.off_cid = reserve(&pl, (uint64_t)hp->n_vocab * 4);
    pl.off_cval = reserve(&pl, (uint64_t)hp->n_vocab * 4);
    pl.off_pen = reserve(&pl, (uint64_t)hp->n_vocab * 4);
    pl.off_sort = reserve(&pl, (uint64_t)hp->n_vocab * 16);
    pl.off_spec = reserve(&pl, (uint64_t)hp->n_vocab * 4); /* dense draft distribution (wlm_spec_accept) */
    pl.total = WLM_ALIGN_UP(pl.total, 64);
    return pl;
}

void wlm_ctx_default_params(wlm_ctx_params *p) {
    wlm_memset(p, 0, sizeof *p);
    p->kv_type = WLM_KV_F32;
    p->full_policy = WLM_FULL_ERROR;
}

uint64_t wlm_ctx_bytes_needed(const wlm_model *m, const wlm_ctx_params *in) {
    if (m->vocab_only) return 0;
    wlm_ctx_params p;
    resolve_params(m, in, &p);
    return make_plan(m, &p).total;
}

wlm_status wlm_ctx_new(wlm_ctx **out, wlm_model *m, const wlm_ctx_params *in, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    if (!out || !m) return wlm_fail(err, WLM_ERR_ARG, "wlm_ctx_new: NULL argument");
    *out = 0;
    if (m->vocab_only)
        return wlm_fail(err, WLM_ERR_STATE, "this model was loaded vocabulary-only (a tokenizer, no weights): it cannot run");
    wlm_ctx_params p;
    resolve_params(m, in, &p);
    if (p.n_ctx > (1u << 24)) return wlm_fail(err, WLM_ERR_ARG, "context length %u is too large", p.n_ctx);
    if (p.kv_type > WLM_KV_F16) return wlm_fail(err, WLM_ERR_ARG, "unknown KV cache type %u", p.kv_type);
    if (p.full_policy > WLM_FULL_SLIDE) return wlm_fail(err, WLM_ERR_ARG, "unknown context-full policy %u", p.full_policy);
    if (p.swa_full > 1) return wlm_fail(err, WLM_ERR_ARG, "swa_full must be 0 or 1, got %u", p.swa_full);
    if (p.n_seq_max > WLM_MAX_SEQ) return wlm_fail(err, WLM_ERR_ARG, "n_seq_max %u is above the limit of %u sequences", p.n_seq_max, WLM_MAX_SEQ);
    if (p.full_policy == WLM_FULL_SLIDE && p.n_seq_max > 1)
        return wlm_fail(err, WLM_ERR_ARG, "the sliding-window policy works with one sequence (n_seq_max %u)", p.n_seq_max);
    if (p.n_outputs > (1u << 20)) return wlm_fail(err, WLM_ERR_ARG, "n_outputs %u is too large", p.n_outputs);
    if (p.full_policy == WLM_FULL_SLIDE && p.n_keep >= p.n_ctx)
        return wlm_fail(err, WLM_ERR_ARG, "n_keep %u must be smaller than the context length %u", p.n_keep, p.n_ctx);
    plan pl = make_plan(m, &p);
    uint8_t *mem = wlm_sys_alloc(pl.total); /* checks the limit before touching memory */
    if (!mem) return wlm_fail_nomem(err, "the context", pl.total);
    wlm_ctx *c = (wlm_ctx *)mem;
    const wlm_hparams *hp = &m->hp;
    c->m = m;
    c->k = wlm_kernels_best();
    c->p = p;
    c->n_ctx = p.n_ctx;
    c->n_batch = p.n_batch;
    /* each layer's K and V: [kv_head][row][dim], layer after layer */
    uint64_t esz = p.kv_type == WLM_KV_F16 ? 2 : 4, ko = pl.off_k, vo = pl.off_v;
    c->kv = (wlm_kv_layer *)(mem + pl.off_kvl);
    c->n_ring = pl.n_ring;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        wlm_kv_layer *L = &c->kv[l];
        L->ring = m->layers[l].swa && pl.n_ring;
        uint64_t rows = L->ring ? pl.n_ring : p.n_ctx;
        L->head_stride = rows * hp->head_dim;
        L->head_stride_v = rows * hp->head_dim_v;
        L->k = mem + ko;
        L->v = mem + vo;
        ko += L->head_stride * hp->n_head_kv * esz;
        vo += L->head_stride_v * hp->n_head_kv * esz;
    }
    c->slot_pos = (int32_t *)(mem + pl.off_slot);
    c->slot_seq = (uint64_t *)(mem + pl.off_sseq);
    if (pl.n_ring) {
        c->slot_row = (int32_t *)(mem + pl.off_ring);
        c->row_slot = c->slot_row + p.n_ctx;
        c->row_pos = c->row_slot + pl.n_ring;
    }
    c->n_seq_max = p.n_seq_max;
    c->n_outputs = p.n_outputs;
    c->tok_seq = (uint32_t *)(mem + pl.off_tok);
    c->tok_slot = c->tok_seq + p.n_batch;
    c->tok_pos = (int32_t *)(c->tok_slot + p.n_batch);
    c->out_tok = (uint32_t *)(c->tok_pos + p.n_batch);
    c->att_run = c->out_tok + p.n_batch;
    c->att_wpos = (int32_t *)(c->att_run + p.n_batch);
    c->tok_row = (uint32_t *)(c->att_wpos + p.n_batch);
    c->x = (float *)(mem + pl.off_x);
    c->xb = (float *)(mem + pl.off_xb);
    c->q = (float *)(mem + pl.off_q);
    c->kk = (float *)(mem + pl.off_kk);
    c->vv = (float *)(mem + pl.off_vv);
    c->att = (float *)(mem + pl.off_att);
    c->hb = (float *)(mem + pl.off_hb);
    c->hb2 = (float *)(mem + pl.off_hb2);
    c->act = mem + pl.off_act;
    c->act_k = mem + pl.off_actk;
    c->act_row_bytes = pl.act_row_bytes;
    c->wrow = mem + pl.off_wrow;
    c->wrow_bytes = pl.wrow_bytes;
    c->act16 = mem + pl.off_act16;
    c->act16_row_bytes = pl.act16_row_bytes;
    c->act8_off = pl.act8_off;
    c->act_b = mem + pl.off_actb;
    c->n_thr = 1;
    c->logits = (float *)(mem + pl.off_logits);
    c->att_tile = (float *)(mem + pl.off_tile);
    c->att_idx = (uint32_t *)(mem + pl.off_aidx);
    c->att_kvt = pl.off_kvt ? (float *)(mem + pl.off_kvt) : 0;
    c->spec_q = (float *)(mem + pl.off_spec);
    wlm_memset(c->spec_q, 0, (uint64_t)hp->n_vocab * 4);
    c->rope_freq = (double *)(mem + pl.off_rope);
    c->rope_cs = (float *)(mem + pl.off_rcs);
    c->cand_id = (int32_t *)(mem + pl.off_cid);
    c->cand_val = (float *)(mem + pl.off_cval);
    c->pen_count = (uint32_t *)(mem + pl.off_pen);
    c->sort_tmp = mem + pl.off_sort;
    c->mem = mem;
    c->mem_bytes = pl.total;
    /* inverse RoPE frequencies theta_i = base^(-2i/n_rot), in double, divided
     * by the model's per-frequency factor (rope_freqs.weight or rope.scaling) */
    double lb = wlm_log((double)hp->rope_freq_base);
    const float *lr = wlm_rope_factors(m, p.n_ctx); /* phi3 LongRoPE: chosen by this context's length */
    for (uint32_t i = 0; i < hp->n_rot / 2; i++) {
        double theta = wlm_exp(-(double)(2 * i) / hp->n_rot * lb);
        c->rope_freq[i] = lr ? theta / lr[i] : hp->rope_scaled ? theta / wlm_rope_freq_divisor(m, i, theta)
                                                               : theta;
    }
    /* the sliding-window layers' own base (gemma3), without scaling */
    c->rope_freq_swa = pl.off_rope_swa ? (double *)(mem + pl.off_rope_swa) : 0;
    c->rope_cs_swa = pl.off_rcs_swa ? (float *)(mem + pl.off_rcs_swa) : 0;
    if (c->rope_freq_swa) {
        double lbs = wlm_log((double)m->rope_base_swa);
        for (uint32_t i = 0; i < hp->n_rot / 2; i++) c->rope_freq_swa[i] = wlm_exp(-(double)(2 * i) / hp->n_rot * lbs);
    }
    wlm_ctx_reset(c);
    *out = c;
    return WLM_OK;
}

void wlm_ctx_free(wlm_ctx *c) {
    if (c) wlm_sys_free(c->mem);
}

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

void wlm_ctx_set_pool(wlm_ctx *c, wlm_pool *p, uint32_t n) {
    uint32_t max = c->p.n_threads;
    if (!p || n < 1) n = 1;
    if (n > max) n = max;
    if (p && n > wlm_pool_threads(p)) n = wlm_pool_threads(p);
    c->pool = n > 1 ? p : 0;
    c->n_thr = n;
}
