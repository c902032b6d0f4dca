/* The transformer forward pass (llama), written to read like the math:
 *
 *   x = embed(token)                                (granite: * embedding_scale; gemma: * sqrt(d))
 *   for each layer:
 *     h = rmsnorm(x) * w_attn_norm
 *     q, k, v = Wq h, Wk h, Wv h                      (qwen3, gemma3: rmsnorm of each q, k head)
 *     rotate q, k by RoPE at the token's position     (smollm3: not every 4th layer)
 *     append k, v to the KV cache
 *     x = x + Wo attention(q, K_cache, V_cache)      (causal, tiled, online softmax;
 *                                                     gemma: sliding-window layers, gemma2 score
 *                                                     soft-capping, rmsnorm of Wo a before the add)
 *     h = rmsnorm(x) * w_ffn_norm
 *     x = x + W_down (silu(W_gate h) * (W_up h))     (SwiGLU; gemma: GeGLU, rmsnorm before the add)
 *   logits = W_out (rmsnorm(x) * w_out_norm)         (granite: / logit_scale;
 *                                                     block outputs * residual_scale,
 *                                                     attention.scale for 1/sqrt(d);
 *                                                     gemma2: logits soft-capped)
 *
 * The encoders (bert, nomic-bert: encoder_layers) are post-norm instead:
 *
 *   x = LayerNorm(embed(token) + type_embd[0] + pos_embd[pos])   (nomic-bert: RoPE, no pos_embd)
 *   for each layer:
 *     q, k, v = Wq x + bq, ...; a = attention over the whole text (non-causal)
 *     x = LayerNorm(x + Wo a + bo)
 *     x = LayerNorm(x + W_down gelu(W_up x + b_up) + b_down)  (nomic-bert: SwiGLU)
 *
 * and give hidden states (embeddings, src/embed.c), not logits.
 *
 * A call processes a batch of tokens (prefill) or one (decode). Every buffer
 * was planned at context creation: nothing is allocated here. */
#include "ctx.h"
#include "matmul.h"
#include "wmath.h"

/* ---- building blocks ------------------------------------------------------------ */

/* rmsnorm(x) = x / sqrt(mean(x^2) + eps) * w in two parts: the scale of a
 * whole row here, then (act_step) the elements a thread writes, so that
 * threads can share a row */
static float rms_scale(const float *x, uint32_t n, float eps) {
    double ss = 0;
    for (uint32_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    return 1.0f / wlm_sqrtf((float)(ss / n) + eps);
}

/* Rows t < n_tok of dst (n floats each) = rmsnorm(row rows[t] of src) * w
 * when `norm` is given (rows NULL: row t; without norm dst is src), and
 * their forms in `need` (matmul.h). One token is split across threads by
 * activation blocks (every block is converted on its own), a batch by
 * tokens. */
static void act_step(wlm_ctx *c, const float *src, const uint32_t *rows, const wlm_tensor *norm, float *dst,
                     uint32_t n_tok, uint32_t n, uint32_t need, uint32_t tid, uint32_t nth) {
    uint32_t unit = wlm_act_unit(need), t0 = 0, t1 = n_tok, u0, u1;
    if (n % unit) unit = n; /* unquantized input of a width that is not whole blocks: one piece */
    if (n_tok == 1) wlm_split(n / unit, tid, nth, &u0, &u1);
    else {
        wlm_split(n_tok, tid, nth, &t0, &t1);
        u0 = 0;
        u1 = n / unit;
    }
    uint32_t lo = u0 * unit, hi = u1 * unit;
    if (lo == hi) return;
    for (uint32_t t = t0; t < t1; t++) {
        float *y = norm ? dst + (uint64_t)t * n : (float *)src + (uint64_t)t * n;
        if (norm) {
            const float *x = src + (uint64_t)(rows ? rows[t] : t) * n, *w = (const float *)norm->data;
            float s = rms_scale(x, n, c->m->hp.rms_eps);
            for (uint32_t i = lo; i < hi; i++) y[i] = (x[i] * s) * w[i];
        }
        wlm_act_convert(c, y, t, n, lo, hi, need);
    }
}

/* y[t][r] += b[r] for rows [r0, r1) of n_tok rows of `rows` values (projection biases) */
static void add_bias(float *y, const wlm_tensor *b, uint32_t n_tok, uint32_t rows, uint32_t r0, uint32_t r1) {
    if (!b) return;
    const float *bv = (const float *)b->data;
    for (uint32_t t = 0; t < n_tok; t++)
        for (uint32_t r = r0; r < r1; r++) y[(uint64_t)t * rows + r] += bv[r];
}

/* RoPE: pairs of the first n_rot dims of each head rotate by pos * theta_i.
 * Which dims pair up depends on the architecture's convention:
 *   NORM (llama GGUF files): consecutive pairs (x[2i], x[2i+1]);
 *   NEOX (qwen2):            halves, (x[i], x[i + n_rot/2]).
 * cs holds (cos, sin) of each pos * theta_i, once per token of a chunk. */
static void rope_prepare(const wlm_ctx *c, const double *freq, float *cs, uint32_t pos) {
    uint32_t half = c->m->hp.n_rot / 2;
    double mscale = c->m->rope_attn_factor; /* 1 but for LongRoPE files (phi3) */
    for (uint32_t i = 0; i < half; i++) {
        double ang = (double)pos * freq[i];
        cs[2 * i] = (float)(wlm_cos(ang) * mscale);
        cs[2 * i + 1] = (float)(wlm_sin(ang) * mscale);
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

/* qwen3, gemma3: each of n_heads heads of v (head_dim floats) = rmsnorm(head) * w */
static void head_norm(const wlm_ctx *c, const wlm_tensor *norm, float *v, uint32_t n_heads) {
    uint32_t hd = c->m->hp.head_dim;
    const float *w = (const float *)norm->data;
    for (uint32_t h = 0; h < n_heads; h++) {
        float *x = v + h * hd, s = rms_scale(x, hd, c->m->hp.rms_eps);
        for (uint32_t i = 0; i < hd; i++) x[i] = (x[i] * s) * w[i];
    }
}

/* Stores heads [h0, h1) of chunk token t's keys (heads of head_dim floats)
 * or, with `values`, its values (heads of head_dim_v) in the layer's row
 * for it: its cache slot, or its window-ring row (kvcache.c). */
static void kv_store(wlm_ctx *c, int values, uint32_t layer, uint32_t t, const float *src, uint32_t h0, uint32_t h1) {
    const wlm_hparams *hp = &c->m->hp;
    uint32_t hs = values ? hp->head_dim_v : hp->head_dim;
    uint64_t row = c->kv[layer].ring ? c->tok_row[t] : c->tok_slot[t];
    for (uint32_t h = h0; h < h1; h++) {
        void *head = wlm_kv_head(c, layer, values, h);
        if (c->p.kv_type == WLM_KV_F16) wlm_quantize_row_f16(src + h * hs, (uint16_t *)head + row * hs, hs);
        else wlm_memcpy((float *)head + row * hs, src + h * hs, hs * 4);
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
    union {
        struct {
            wlm_ctx *c;
            const int32_t *tokens;
            uint32_t n, n_out, out_row;
        };
        char args_line[WLM_SYNC_LINE];
    };
    /* each counter on a line of its own, away from the fields above that
     * every thread reads (a take is an atomic update: sharing their line
     * would make the next read of f->c or f->n a miss on the other cores) */
    struct {
        volatile int32_t v;
        char pad[WLM_SYNC_LINE - 4];
    } next[2];
    uint32_t hidden; /* 1: leave every token's final hidden state in c->xb, no logits (embeddings) */
} fwd;

typedef struct step {
    volatile int32_t *next;
    uint32_t nth;
} step;

static step step_begin(fwd *f, uint32_t *k, uint32_t tid, uint32_t nth) {
    step s = { &f->next[*k & 1].v, nth };
    if (tid == 0) __atomic_store_n(&f->next[(*k & 1) ^ 1].v, 0, __ATOMIC_RELAXED);
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

/* the first position a query at qpos sees on a sliding-window layer
 * (wlm_layer.swa) with a window of w: the last w positions, itself included */
static int32_t att_window_lo(uint32_t w, int32_t qpos) {
    return w && (int64_t)qpos >= (int64_t)w ? qpos - (int32_t)w + 1 : 0;
}

/* the slots a token of the run starting at t0 may see, up to position wpos */
static wlm_att_mask att_run_mask(const wlm_ctx *c, uint32_t t0, int32_t wpos) {
    wlm_att_mask mk = { c->slot_pos, c->n_seq_max > 1 ? c->slot_seq : 0, 1ull << c->tok_seq[t0], c->n_slots, wpos, 0, c->m->attn_softcap, 0, 0 };
    return mk;
}

#define ATT_TOGETHER 0x80000000u
/* the query position of non-causal attention (encoders): every position of
 * its sequence is visible */
#define ATT_ALL 0x7fffffff

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
            wlm_att_mask mk = att_run_mask(c, t0, c->m->causal ? wpos : ATT_ALL);
            /* (on a sliding-window layer an earlier query's slots are not a
             * prefix of the run's last one: there only a lone token shares,
             * attention_step) */
            c->att_run[t0] = t1 | (t1 - t0 == 1 || wlm_att_ascending(&mk) ? ATT_TOGETHER : 0);
            c->att_wpos[t0] = wpos;
            if (!c->m->causal) c->att_wpos[t0] = ATT_ALL; /* non-causal: the whole sequence */
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
    float *tile = c->att_tile + (uint64_t)tid * WLM_ATT_TILE;
    uint32_t *idx = c->att_idx + (uint64_t)tid * WLM_ATT_TILE;
    float *kvt = f16 ? c->att_kvt + (uint64_t)tid * 2 * WLM_ATT_TILE * WLM_MAX(hd, hdv) : 0;
    const float *qs[WLM_ATT_MAXQ];
    float *outs[WLM_ATT_MAXQ];
    int32_t qpos[WLM_ATT_MAXQ];
    /* a sliding-window layer: a query at position p sees positions > p - n_swa,
     * a window of its own, so its queries run one by one */
    uint32_t swa = c->m->layers[layer].swa ? c->m->n_swa : 0;
    /* a layer that keeps its rows in the window ring reads slot j at row slot_row[j] */
    const int32_t *row_of = c->kv[layer].ring ? c->slot_row : 0;
    while (take(s, nblk * hp->n_head_kv, 1, &lo, &hi))
        for (uint32_t it = lo; it < hi; it++) {
            uint32_t b = it / hp->n_head_kv, hk = it % hp->n_head_kv;
            uint32_t t0 = b * qb, tend = WLM_MIN(f->n, t0 + qb);
            const void *kc = wlm_kv_head(c, layer, 0, hk), *vc = wlm_kv_head(c, layer, 1, hk);
            while (t0 < tend) { /* the block's runs (att_plan_runs) */
                uint32_t t1 = c->att_run[t0] & ~ATT_TOGETHER;
                int together = (c->att_run[t0] & ATT_TOGETHER) != 0 && (!swa || t1 - t0 == 1);
                wlm_att_mask mask = att_run_mask(c, t0, c->att_wpos[t0]);
                if (swa) mask.window_lo = att_window_lo(swa, c->att_wpos[t0]); /* a lone token's window */
                if (row_of) {
                    mask.row_of = row_of;
                    mask.row_pos = c->row_pos;
                }
                /* the run's queries, WLM_ATT_MAXQ at a time (a GQA group can be wider) */
                uint32_t nq = 0;
                for (uint32_t t = t0; t < t1; t++)
                    for (uint32_t g = 0; g < group; g++) {
                        uint32_t hq = hk * group + g;
                        qs[nq] = c->q + (uint64_t)t * qd + hq * hd;
                        outs[nq] = c->att + (uint64_t)t * od + hq * hdv;
                        qpos[nq] = c->m->causal ? c->tok_pos[t] : ATT_ALL;
                        if (++nq < WLM_ATT_MAXQ && !(t + 1 == t1 && g + 1 == group)) continue;
                        if (nq > 1 && together)
                            wlm_attention_block(c->k, nq, qs, outs, qpos, kc, vc, f16, &mask, hd, hdv, scale, tile, idx, kvt);
                        else
                            for (uint32_t i = 0; i < nq; i++) {
                                wlm_att_mask one = mask;
                                one.qpos = qpos[i];
                                if (swa) one.window_lo = att_window_lo(swa, qpos[i]);
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
        float *x = c->x + (uint64_t)t * d;
        wlm_dequantize_row(m->tok_embd->type, m->tok_embd->data + (uint64_t)f->tokens[t] * emb_row, x, d);
        if (m->embd_scale != 1.0f)
            for (uint32_t i = 0; i < d; i++) x[i] *= m->embd_scale; /* granite, gemma */
        /* encoders: + token type 0 (+ the absolute position, bert); xb's row is free here */
        const wlm_tensor *add[2] = { m->type_embd, m->pos_embd };
        uint64_t row[2] = { 0, (uint64_t)c->tok_pos[t] };
        for (uint32_t a = 0; a < 2; a++) {
            if (!add[a]) continue;
            float *tmp = c->xb + (uint64_t)t * d;
            wlm_dequantize_row(add[a]->type, add[a]->data + row[a] * (add[a]->nbytes / add[a]->ne[1]), tmp, d);
            for (uint32_t i = 0; i < d; i++) x[i] += tmp[i];
        }
        rope_prepare(c, c->rope_freq, c->rope_cs + (uint64_t)t * m->hp.n_rot, (uint32_t)c->tok_pos[t]);
        if (c->rope_cs_swa) rope_prepare(c, c->rope_freq_swa, c->rope_cs_swa + (uint64_t)t * m->hp.n_rot, (uint32_t)c->tok_pos[t]);
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
    const wlm_tensor *W[3] = { L->wq, L->wk, L->wv }, *B[3] = { L->bq, L->bk, L->bv }, *N[2] = { L->q_norm, L->k_norm };
    float *Y[3] = { c->q, c->kk, c->vv };
    uint32_t heads[3] = { hp->n_head, hp->n_head_kv, hp->n_head_kv }, hs[3] = { hp->head_dim, hp->head_dim, hp->head_dim_v };
    const float *rcs = L->swa && c->rope_cs_swa ? c->rope_cs_swa : c->rope_cs;
    uint32_t lo, hi;
    while (take(s, heads[0] + heads[1] + heads[2], 1, &lo, &hi))
        for (uint32_t i = 0, base = 0; i < 3; base += heads[i], i++) {
            uint32_t h0 = WLM_MAX(lo, base), h1 = WLM_MIN(hi, base + heads[i]);
            if (h0 >= h1) continue;
            h0 -= base;
            h1 -= base;
            uint32_t rows = heads[i] * hs[i];
            wlm_mm(c, W[i], c->xb, f->n, Y[i], h0 * hs[i], h1 * hs[i], tid);
            add_bias(Y[i], B[i], f->n, rows, h0 * hs[i], h1 * hs[i]);
            for (uint32_t t = 0; t < f->n; t++) {
                float *y = Y[i] + (uint64_t)t * rows;
                if (i < 2 && N[i]) head_norm(c, N[i], y + h0 * hs[i], h1 - h0);
                if (i < 2 && !L->no_rope) rope_apply(c, rcs + (uint64_t)t * hp->n_rot, y + h0 * hs[i], h1 - h0);
                if (i > 0) kv_store(c, i == 2, l, t, y, h0, h1);
            }
        }
}

/* x += W y (+ bias): a projection back into the residual stream (attention
 * output, FFN down), each thread adding the rows it computed. With
 * add = 0 only xb = W y (+ bias): a norm of the whole row comes first
 * (post_norm_step). */
static void residual_step(const fwd *f, const wlm_tensor *W, const wlm_tensor *b, const float *y, int add, const step *s, uint32_t tid) {
    wlm_ctx *c = f->c;
    uint32_t d = c->m->hp.n_embd, r0, r1;
    float rs = c->m->resid_scale;
    while (take(s, d, min_rows(W), &r0, &r1)) {
        wlm_mm(c, W, y, f->n, c->xb, r0, r1, tid);
        add_bias(c->xb, b, f->n, d, r0, r1);
        if (!add) continue;
        for (uint32_t t = 0; t < f->n; t++)
            if (rs == 1.0f)
                for (uint32_t r = r0; r < r1; r++) c->x[(uint64_t)t * d + r] += c->xb[(uint64_t)t * d + r];
            else /* granite: the block's output scaled before it is added */
                for (uint32_t r = r0; r < r1; r++) c->x[(uint64_t)t * d + r] += c->xb[(uint64_t)t * d + r] * rs;
    }
}

/* x += rmsnorm(xb) * w (gemma's post-attention and post-FFN norms), the
 * tokens split among threads (one token: thread 0; a row of n_embd is cheap) */
static void post_norm_step(const fwd *f, const wlm_tensor *norm, uint32_t tid, uint32_t nth) {
    wlm_ctx *c = f->c;
    uint32_t d = c->m->hp.n_embd, t0, t1;
    const float *w = (const float *)norm->data;
    wlm_split(f->n, tid, nth, &t0, &t1);
    for (uint32_t t = t0; t < t1; t++) {
        const float *y = c->xb + (uint64_t)t * d;
        float *x = c->x + (uint64_t)t * d, sc = rms_scale(y, d, c->m->hp.rms_eps);
        for (uint32_t i = 0; i < d; i++) x[i] += (y[i] * sc) * w[i];
    }
}

/* hb = act(W_gate h) * (W_up h), act = SiLU (SwiGLU) or GELU (GeGLU, gemma):
 * a thread computes the same rows of both */
static void gate_up_step(const fwd *f, const wlm_layer *L, const step *s, uint32_t tid) {
    wlm_ctx *c = f->c;
    uint32_t nff = c->m->hp.n_ff, r0, r1;
    int gelu = c->m->ffn_gelu;
    while (!L->w_gate && take(s, nff, min_rows(L->w_up), &r0, &r1)) { /* bert: hb = gelu(W_up h + b_up) */
        wlm_mm(c, L->w_up, c->xb, f->n, c->hb, r0, r1, tid);
        add_bias(c->hb, L->b_up, f->n, nff, r0, r1);
        for (uint32_t t = 0; t < f->n; t++) {
            float *a = c->hb + (uint64_t)t * nff;
            for (uint32_t i = r0; i < r1; i++) a[i] = wlm_gelu_tanh(a[i]);
        }
    }
    while (L->w_gate && take(s, nff, min_rows(L->w_gate), &r0, &r1)) {
        wlm_mm(c, L->w_gate, c->xb, f->n, c->hb, r0, r1, tid);
        wlm_mm(c, L->w_up, c->xb, f->n, c->hb2, r0, r1, tid);
        for (uint32_t t = 0; t < f->n; t++) {
            float *a = c->hb + (uint64_t)t * nff + r0;
            const float *b = c->hb2 + (uint64_t)t * nff + r0;
            if (gelu)
                for (uint32_t i = 0; i < r1 - r0; i++) a[i] = wlm_gelu_tanh(a[i]) * b[i];
            else c->k->silu_mul(r1 - r0, a, b);
        }
    }
}

/* ---- encoders (bert, nomic-bert) ---------------------------------------------------- */

/* xb[t] = LayerNorm(x[t]) * w + b for the chunk's tokens, converted into the
 * forms `need` names (the next products read xb); split as act_step splits
 * (one token: its row by activation blocks, each thread computing the row's
 * statistics; a batch: by tokens). After a barrier, ln_commit makes x the
 * same values (the residual stream of a post-norm block). */
static void ln_split(const wlm_ctx *c, uint32_t n_tok, uint32_t n, uint32_t need, uint32_t tid, uint32_t nth,
                     uint32_t *t0, uint32_t *t1, uint32_t *lo, uint32_t *hi) {
    uint32_t unit = wlm_act_unit(need), u0, u1;
    if (n % unit) unit = n;
    *t0 = 0;
    *t1 = n_tok;
    if (n_tok == 1) wlm_split(n / unit, tid, nth, &u0, &u1);
    else {
        wlm_split(n_tok, tid, nth, t0, t1);
        u0 = 0;
        u1 = n / unit;
    }
    *lo = u0 * unit;
    *hi = u1 * unit;
    (void)c;
}

static void ln_step(wlm_ctx *c, const wlm_tensor *w, const wlm_tensor *b, uint32_t n_tok, uint32_t need, uint32_t tid, uint32_t nth) {
    uint32_t d = c->m->hp.n_embd, t0, t1, lo, hi;
    ln_split(c, n_tok, d, need, tid, nth, &t0, &t1, &lo, &hi);
    if (lo == hi) return;
    for (uint32_t t = t0; t < t1; t++) {
        float *y = c->xb + (uint64_t)t * d;
        c->k->layer_norm(d, c->x + (uint64_t)t * d, (const float *)w->data, (const float *)b->data, c->m->ln_eps, y, lo, hi);
        wlm_act_convert(c, y, t, d, lo, hi, need);
    }
}

static void ln_commit(wlm_ctx *c, uint32_t n_tok, uint32_t need, uint32_t tid, uint32_t nth) {
    uint32_t d = c->m->hp.n_embd, t0, t1, lo, hi;
    ln_split(c, n_tok, d, need, tid, nth, &t0, &t1, &lo, &hi);
    for (uint32_t t = t0; t < t1 && lo < hi; t++)
        wlm_memcpy(c->x + (uint64_t)t * d + lo, c->xb + (uint64_t)t * d + lo, (hi - lo) * 4);
}

/* The layers of a post-norm encoder. Each LayerNorm writes xb (the next
 * products' input); ln_commit copies it into x after the barrier, while the
 * next step reads xb only, so no step waits for the copy. */
static void encoder_layers(fwd *f, uint32_t *k, uint32_t tid, uint32_t nth) {
    wlm_ctx *c = f->c;
    const wlm_model *m = c->m;
    const wlm_hparams *hp = &m->hp;
    wlm_pool *p = c->pool;
    uint32_t n = f->n, od = hp->n_head * hp->head_dim_v;
    float scale = 1.0f / wlm_sqrtf((float)hp->head_dim);
    const wlm_layer *L0 = &m->layers[0];
    uint32_t need = wlm_mm_needs(c, L0->wq, n) | wlm_mm_needs(c, L0->wk, n) | wlm_mm_needs(c, L0->wv, n);
    step s;
    ln_step(c, m->tok_norm, m->tok_norm_b, n, need, tid, nth);
    wlm_pool_barrier(p, nth);
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const wlm_layer *L = &m->layers[l];
        ln_commit(c, n, need, tid, nth);
        s = step_begin(f, k, tid, nth);
        qkv_step(f, l, &s, tid);
        wlm_pool_barrier(p, nth);
        s = step_begin(f, k, tid, nth);
        attention_step(f, l, scale, &s, tid);
        wlm_pool_barrier(p, nth);
        act_step(c, c->att, 0, 0, 0, n, od, wlm_mm_needs(c, L->wo, n), tid, nth);
        wlm_pool_barrier(p, nth);
        s = step_begin(f, k, tid, nth);
        residual_step(f, L->wo, L->bo, c->att, 1, &s, tid); /* x += Wo a + bo */
        wlm_pool_barrier(p, nth);
        need = wlm_mm_needs(c, L->w_up, n) | (L->w_gate ? wlm_mm_needs(c, L->w_gate, n) : 0);
        ln_step(c, L->ln_attn, L->ln_attn_b, n, need, tid, nth);
        wlm_pool_barrier(p, nth);
        ln_commit(c, n, need, tid, nth);
        s = step_begin(f, k, tid, nth);
        gate_up_step(f, L, &s, tid);
        wlm_pool_barrier(p, nth);
        act_step(c, c->hb, 0, 0, 0, n, hp->n_ff, wlm_mm_needs(c, L->w_down, n), tid, nth);
        wlm_pool_barrier(p, nth);
        s = step_begin(f, k, tid, nth);
        residual_step(f, L->w_down, L->b_down, c->hb, 1, &s, tid); /* x += W_down hb + b_down */
        wlm_pool_barrier(p, nth);
        const wlm_layer *Ln = l + 1 < hp->n_layer ? &m->layers[l + 1] : 0;
        need = Ln ? wlm_mm_needs(c, Ln->wq, n) | wlm_mm_needs(c, Ln->wk, n) | wlm_mm_needs(c, Ln->wv, n) : 0;
        ln_step(c, L->ln_out, L->ln_out_b, n, need, tid, nth);
        wlm_pool_barrier(p, nth);
    }
    ln_commit(c, n, need, tid, nth);
}

static void forward_job(void *arg, uint32_t tid, uint32_t nth) {
    fwd *f = arg;
    wlm_ctx *c = f->c;
    const wlm_model *m = c->m;
    const wlm_hparams *hp = &m->hp;
    wlm_pool *p = c->pool;
    uint32_t n = f->n, d = hp->n_embd, od = hp->n_head * hp->head_dim_v, k = 0;
    float scale = m->attn_scale != 0.0f ? m->attn_scale : 1.0f / wlm_sqrtf((float)hp->head_dim);
    step s;

    embed_step(f, tid, nth);
    wlm_pool_barrier(p, nth);
    if (m->encoder) encoder_layers(f, &k, tid, nth);
    else
        for (uint32_t l = 0; l < hp->n_layer; l++) {
            const wlm_layer *L = &m->layers[l];
            /* attention block: h = rmsnorm(x) * w_attn_norm; q, k, v; attention; x += Wo att */
            act_step(c, c->x, 0, L->attn_norm, c->xb, n, d, wlm_mm_needs(c, L->wq, n) | wlm_mm_needs(c, L->wk, n) | wlm_mm_needs(c, L->wv, n), tid, nth);
            wlm_pool_barrier(p, nth);
            s = step_begin(f, &k, tid, nth);
            qkv_step(f, l, &s, tid);
            wlm_pool_barrier(p, nth);
            s = step_begin(f, &k, tid, nth);
            attention_step(f, l, scale, &s, tid);
            wlm_pool_barrier(p, nth);
            act_step(c, c->att, 0, 0, 0, n, od, wlm_mm_needs(c, L->wo, n), tid, nth);
            wlm_pool_barrier(p, nth);
            s = step_begin(f, &k, tid, nth);
            residual_step(f, L->wo, L->bo, c->att, !L->post_attn_norm, &s, tid);
            wlm_pool_barrier(p, nth);
            if (L->post_attn_norm) { /* gemma: x += rmsnorm(Wo att) * w_post_attn */
                post_norm_step(f, L->post_attn_norm, tid, nth);
                wlm_pool_barrier(p, nth);
            }
            /* feed-forward block (SwiGLU): h = rmsnorm(x) * w_ffn_norm; x += W_down (silu(W_gate h) * (W_up h)) */
            act_step(c, c->x, 0, L->ffn_norm, c->xb, n, d, wlm_mm_needs(c, L->w_gate, n) | wlm_mm_needs(c, L->w_up, n), tid, nth);
            wlm_pool_barrier(p, nth);
            s = step_begin(f, &k, tid, nth);
            gate_up_step(f, L, &s, tid);
            wlm_pool_barrier(p, nth);
            act_step(c, c->hb, 0, 0, 0, n, hp->n_ff, wlm_mm_needs(c, L->w_down, n), tid, nth);
            wlm_pool_barrier(p, nth);
            s = step_begin(f, &k, tid, nth);
            residual_step(f, L->w_down, L->b_down, c->hb, !L->post_ffn_norm, &s, tid);
            wlm_pool_barrier(p, nth);
            if (L->post_ffn_norm) { /* gemma: x += rmsnorm(W_down hb) * w_post_ffw */
                post_norm_step(f, L->post_ffn_norm, tid, nth);
                wlm_pool_barrier(p, nth);
            }
        }

    if (f->hidden) { /* embeddings: xb = every token's final hidden state */
        if (!m->encoder) act_step(c, c->x, 0, m->out_norm, c->xb, n, d, 0, tid, nth);
        return;
    }
    /* logits = W_out (rmsnorm(x) * w_out_norm) for the tokens asked for */
    if (!f->n_out) return;
    act_step(c, c->x, c->out_tok, m->out_norm, c->xb, f->n_out, d, wlm_mm_needs(c, m->output, f->n_out), tid, nth);
    wlm_pool_barrier(p, nth);
    s = step_begin(f, &k, tid, nth);
    uint32_t r0, r1;
    float ls = 1.0f / m->logit_scale;
    float *lg = c->logits + (uint64_t)f->out_row * hp->n_vocab;
    while (take(&s, hp->n_vocab, min_rows(m->output), &r0, &r1)) {
        wlm_mm(c, m->output, c->xb, f->n_out, lg, r0, r1, tid);
        if (ls != 1.0f) /* granite: logits divided by logit_scale */
            for (uint32_t t = 0; t < f->n_out; t++)
                for (uint32_t r = r0; r < r1; r++) lg[(uint64_t)t * hp->n_vocab + r] *= ls;
        if (m->final_softcap > 0) /* gemma2: logits soft-capped */
            for (uint32_t t = 0; t < f->n_out; t++)
                for (uint32_t r = r0; r < r1; r++) lg[(uint64_t)t * hp->n_vocab + r] = wlm_softcap(lg[(uint64_t)t * hp->n_vocab + r], m->final_softcap);
    }
}

/* Runs n tokens whose sequence, position and cache slot are in
 * c->tok_seq/tok_pos/tok_slot; writes the logits of the n_out tokens listed
 * in c->out_tok into rows out_row.. of c->logits. */
static void run_job(wlm_ctx *c, fwd *f);
static void forward_chunk(wlm_ctx *c, const int32_t *tokens, uint32_t n, uint32_t n_out, uint32_t out_row) {
    fwd f = { .c = c, .tokens = tokens, .n = n, .n_out = n_out, .out_row = out_row };
    run_job(c, &f);
}

void wlm_forward_hidden(wlm_ctx *c, const int32_t *tokens, uint32_t n) {
    fwd f = { .c = c, .tokens = tokens, .n = n, .hidden = 1 };
    run_job(c, &f);
}

static void run_job(wlm_ctx *c, fwd *f) {
    uint32_t n = f->n;
    att_plan_runs(c, n);
    /* waking the other threads and the barriers cost microseconds: a model
     * whose largest layer matrix times the tokens is small stays on one */
    const wlm_layer *L = &c->m->layers[0];
    const wlm_tensor *W[7] = { L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down };
    uint64_t work = 0;
    for (int i = 0; i < 7; i++)
        if (W[i]) work = WLM_MAX(work, (uint64_t)W[i]->ne[0] * W[i]->ne[1] * n);
    wlm_pool_run(c->pool, forward_job, f, work < WLM_MIN_PARALLEL_WORK ? 1 : c->n_thr);
}

wlm_status wlm_eval_batch(wlm_ctx *c, const int32_t *tokens, const uint32_t *seqs,
                          const uint8_t *want, uint32_t n, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    if (!c || !tokens) return wlm_fail(err, WLM_ERR_ARG, "wlm_eval: NULL argument");
    if (n == 0) return wlm_fail(err, WLM_ERR_ARG, "wlm_eval: no tokens");
    if (!c->m->output)
        return wlm_fail(err, WLM_ERR_UNSUPPORTED, "a %s model has no output layer: it gives embeddings (wlm_embed), not next-token logits",
                        wlm_arch_name(c->m->arch));
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
            if (slide && c->n_free == 0) { /* the ring overwrites the oldest */
                uint32_t j = wlm_kv_slide_slot(c, pos);
                wlm_kv_overwrite(c, j, (int32_t)pos);
                c->tok_slot[t] = j;
            } else {
                c->tok_slot[t] = wlm_kv_take(c, s, (int32_t)pos);
            }
            int w = all_last_chunk ? 1 : want ? want[i] != 0
                                              : i == n - 1;
            if (w) c->out_tok[n_out++] = t;
        }
        wlm_kv_take_rows(c, chunk); /* the window ring's rows (when there is one) */
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
