/* Matrix-product dispatch: one kernel-choice table says, for a weight
 * matrix (its type, and whether its Q4_0 rows were repacked at load) and a
 * token count, which kernel runs and which activation forms it reads.
 * wlm_mm_needs reads the table to convert the input, wlm_mm to run the
 * product, so the two cannot disagree. Every kernel gives the bits of the
 * row dot product, so the choice changes speed, never results. */
#include "matmul.h"

/* prefill: weight rows widened to int16 per pass of the tiled kernel */
#define WLM_MM_PANEL 4
/* F16 / BF16 rows converted to floats at a time for gemm_f32 (a batch) */
#define WLM_F32_PANEL 4
/* The most tokens a Q8_0/Q4_0 product takes through gemv (each weight
 * block widened in registers for every token); larger batches unpack rows
 * once into the i16x4 form for the register-tiled gemm_i16x4. The relaxed
 * build's own limits are in the table below. */
#ifndef WLM_GEMV_MAX_TOK
#define WLM_GEMV_MAX_TOK 3
#endif
/* F16 batches up to this many tokens convert each 16 halves once in
 * registers for every token (gemv_f16); larger ones convert a panel of
 * WLM_F32_PANEL rows and take gemm_f32, which wins from 4 or 5 tokens on
 * since gemv_f16 skips its check and its product with 2^112 on rows marked
 * finite (make bench-kernels, "F16 batch" lines; docs/kernels.md). */
#ifndef WLM_GEMV_F16_MAX_TOK
#define WLM_GEMV_F16_MAX_TOK 3
#endif
/* (their rows times 2^112, wlm_f16_scale_x, go to the thread's panel row) */
_Static_assert(WLM_GEMV_F16_MAX_TOK <= WLM_F32_PANEL, "the scaled tokens must fit a panel");

/* the kernels a product can run */
typedef enum {
    MM_DOT,        /* the type's row dot for every (row, token): any type */
    MM_GEMV_F16,   /* F16, a few tokens: 16 halves converted once in registers for every token */
    MM_KQ_ROWS,    /* K-quants: the set's batched path (the row dot where it has none) */
    MM_GEMV,       /* Q8_0 / Q4_0 / q4g, a few tokens: each block widened once for every token */
    MM_GEMM_Q4GB,  /* relaxed SIMD, q4g rows: each row once against the batch's q4gb form */
    MM_GEMM_I8X4,  /* relaxed SIMD, Q4_0 rows in file order: a panel as nibbles, byte tile */
    MM_GEMM_I16X4, /* Q8_0 / Q4_0 / q4g: a panel widened to int16, register tile */
    MM_GEMM_F32,   /* F32 batches: register tile of rows x tokens */
    MM_PANEL_F32   /* F16 / BF16 batches: a panel converted to floats, then gemm_f32 */
} mm_kernel;

/* what a rule applies to: classes of weight matrices */
enum {
    W_F32 = 1,
    W_F16 = 2,
    W_BF16 = 4,
    W_Q8_0 = 8,
    W_Q4_0 = 16, /* Q4_0 rows in file order */
    W_Q4G = 32,  /* Q4_0 rows repacked at load (layouts.h, "q4g") */
    W_KQ = 64,   /* types whose activations are Q8_K blocks (the K-quants) */
    W_ANY = 0xff
};

/* the kernel-set member a rule needs (the rule is skipped where it is NULL) */
enum {
    REQ_NONE,
    REQ_KQ_ROWS, /* kq_rows */
    REQ_Q4GB,    /* gemm_q4gb */
    REQ_I8X4     /* gemm_q4_i8x4 */
};

#define ANY_TOK 0xffffu

/* One rule: weights of these classes, with this member in the kernel set,
 * over min_tok..max_tok tokens, run `kernel`, which reads the forms
 * `forms` besides the type's own activation form. The first rule that
 * matches wins. The relaxed-SIMD limits: gemm_q4gb on q4g rows beats gemv
 * from 2 tokens, the Q4_0 byte tile beats gemv_q4_0 from 3 (make
 * bench-kernels; bench/results/README.md). */
typedef struct mm_rule {
    uint8_t weights, req;
    uint16_t min_tok, max_tok;
    uint8_t kernel, forms;
} mm_rule;

/* clang-format off */
static const mm_rule MM_RULES[] = {
    /* weights                requires     tokens                        kernel          forms */
    { W_F16,                  REQ_NONE,    1, WLM_GEMV_F16_MAX_TOK,      MM_GEMV_F16,    0 },
    { W_KQ,                   REQ_KQ_ROWS, 1, ANY_TOK,                   MM_KQ_ROWS,     0 },
    { W_Q4G,                  REQ_Q4GB,    1, 1,                         MM_GEMV,        WLM_NEED_G },
    { W_Q4G,                  REQ_Q4GB,    2, ANY_TOK,                   MM_GEMM_Q4GB,   WLM_NEED_B },
    { W_Q4_0,                 REQ_I8X4,    1, 2,                         MM_GEMV,        WLM_NEED_I16 },
    { W_Q4_0,                 REQ_I8X4,    3, ANY_TOK,                   MM_GEMM_I8X4,   WLM_NEED_G },
    { W_Q8_0 | W_Q4_0,        REQ_NONE,    1, WLM_GEMV_MAX_TOK,          MM_GEMV,        WLM_NEED_I16 },
    { W_Q4G,                  REQ_NONE,    1, WLM_GEMV_MAX_TOK,          MM_GEMV,        WLM_NEED_G },
    { W_Q8_0 | W_Q4_0 | W_Q4G, REQ_NONE,   1, ANY_TOK,                   MM_GEMM_I16X4,  WLM_NEED_X4 },
    { W_F32,                  REQ_NONE,    2, ANY_TOK,                   MM_GEMM_F32,    0 },
    { W_F16 | W_BF16,         REQ_NONE,    2, ANY_TOK,                   MM_PANEL_F32,   0 },
    { W_ANY,                  REQ_NONE,    1, ANY_TOK,                   MM_DOT,         0 },
};
/* clang-format on */

static uint32_t weight_class(const wlm_tensor *w) {
    if (w->q4g) return W_Q4G;
    switch (w->type) {
    case GGML_F32: return W_F32;
    case GGML_F16: return W_F16;
    case GGML_BF16: return W_BF16;
    case GGML_Q8_0: return W_Q8_0;
    case GGML_Q4_0: return W_Q4_0;
    default: return wlm_act_type(w->type) == GGML_Q8_K ? W_KQ : 0;
    }
}

static int has_member(const wlm_kernels *k, uint32_t req) {
    switch (req) {
    case REQ_KQ_ROWS: return k->kq_rows != 0;
    case REQ_Q4GB: return k->gemm_q4gb != 0;
    case REQ_I8X4: return k->gemm_q4_i8x4 != 0;
    default: return 1;
    }
}

static const mm_rule *mm_choose(const wlm_kernels *k, const wlm_tensor *w, uint32_t n_tok) {
    uint32_t cls = weight_class(w);
    const mm_rule *r = MM_RULES;
    for (; r->weights != W_ANY; r++)
        if ((r->weights & cls) && n_tok >= r->min_tok && n_tok <= r->max_tok && has_member(k, r->req)) break;
    return r;
}

/* the type's own activation form as a WLM_NEED_* bit (0 for floats) */
static uint32_t act_need(uint32_t type) {
    uint32_t at = wlm_act_type(type);
    return at == GGML_Q8_0 ? WLM_NEED_Q8 : at == GGML_Q8_K ? WLM_NEED_QK
                                                           : 0;
}

uint32_t wlm_mm_needs(const wlm_ctx *c, const wlm_tensor *w, uint32_t n_tok) {
    return act_need(w->type) | mm_choose(c->k, w, n_tok)->forms;
}

uint64_t wlm_mm_panel_bytes(uint32_t widest) {
    /* a panel of WLM_F32_PANEL rows as floats (F16 / BF16 batches, gemm_f32),
     * or a panel of i16x4 rows (prefill) */
    return WLM_ALIGN_UP(WLM_MAX((uint64_t)WLM_F32_PANEL * widest * 4, WLM_MM_PANEL * wlm_i16x4_row_bytes(widest)), 64);
}

uint32_t wlm_act_unit(uint32_t need) {
    return need & WLM_NEED_QK ? QK_K : need & WLM_NEED_G ? 4 * QK8_0
                                                         : QK8_0; /* act_q4g converts whole groups of four blocks */
}

void wlm_act_convert(const wlm_ctx *c, const float *y, uint32_t t, uint32_t n, uint32_t lo, uint32_t hi, uint32_t need) {
    uint8_t *q8 = c->act + t * c->act_row_bytes;
    if (need & WLM_NEED_Q8) c->k->quantize_q8_0(y + lo, (block_q8_0 *)q8 + lo / QK8_0, hi - lo);
    if (need & WLM_NEED_QK) wlm_quantize_row_q8_k(y + lo, (block_q8_k *)(c->act_k + t * c->act_row_bytes) + lo / QK_K, hi - lo);
    uint8_t *x16 = c->act16 + t * c->act16_row_bytes;
    /* (i16eo and i16x4 share the row's start: no product reads both at
     * one token count) */
    if (need & WLM_NEED_I16) wlm_act_i16eo_blocks((const block_q8_0 *)q8, x16, n, lo / QK8_0, hi / QK8_0);
    if (need & WLM_NEED_X4) c->k->unpack_i16x4(GGML_Q8_0, q8, x16, n);
    if ((need & WLM_NEED_G) && c->k->act_q4g) /* (the scalar gemv_q4g reads the Q8_0 blocks) */
        c->k->act_q4g((const block_q8_0 *)q8, x16 + c->act8_off, n, lo / QK8_0, hi / QK8_0);
    if (need & WLM_NEED_B) c->k->act_q4gb((const block_q8_0 *)q8, c->act_b, n, t); /* (a batch: the whole row) */
}

/* the operands of one product, as every kernel below reads them */
typedef struct mm_args {
    wlm_ctx *c;
    const wlm_tensor *W;
    uint32_t n, rows, n_tok, r0, r1;
    uint64_t row_bytes, xstride;
    const uint8_t *xs; /* the activations in the type's own form */
    uint8_t *wrow;     /* this thread's panel */
    float *y;
} mm_args;

/* decode and small batches: the rows in one call, in memory order, each
 * weight block widened once for every token (q4g rows read the act_q4g
 * form at act8_off, the others the i16eo form) */
static void run_gemv(const mm_args *a) {
    const wlm_kernels *k = a->c->k;
    const wlm_tensor *W = a->W;
    wlm_gemv_fn gemv = W->q4g ? k->gemv_q4g : W->type == GGML_Q4_0 ? k->gemv_q4_0
                                                                   : k->gemv_q8_0;
    const uint8_t *x16 = a->c->act16 + (W->q4g ? a->c->act8_off : 0);
    gemv(a->n, W->data + (uint64_t)a->r0 * a->row_bytes, a->row_bytes, a->r1 - a->r0, a->xs, a->xstride, x16,
         a->c->act16_row_bytes, a->n_tok, a->y + a->r0, a->rows);
}

/* relaxed SIMD: a panel of rows as nibbles in the i8x4 form, then the
 * register-tiled relaxed dot products (bit for bit dot_q4_0) */
static void run_gemm_i8x4(const mm_args *a) {
    const wlm_kernels *k = a->c->k;
    uint64_t rb = wlm_q4_i8x4_row_bytes(a->n);
    for (uint32_t r = a->r0; r < a->r1; r += WLM_MM_PANEL) {
        uint32_t nr = WLM_MIN(WLM_MM_PANEL, a->r1 - r);
        for (uint32_t i = 0; i < nr; i++) {
            const uint8_t *src = a->W->data + (uint64_t)(r + i) * a->row_bytes;
            k->unpack_q4_i8x4((const block_q4_0 *)src, a->wrow + i * rb, a->n); /* (q4g rows took gemm_q4gb) */
        }
        k->gemm_q4_i8x4(a->n, a->wrow, rb, nr, a->c->act16 + a->c->act8_off, a->c->act16_row_bytes, a->n_tok, a->y + r, a->rows);
    }
}

/* a panel of rows widened to int16 (i16x4 form) once, then the
 * register-tiled kernel against every token of the batch (same sums as
 * dot_q8_0 / dot_q4_0, bit for bit) */
static void run_gemm_i16x4(const mm_args *a) {
    const wlm_kernels *k = a->c->k;
    uint64_t rb = wlm_i16x4_row_bytes(a->n);
    uint32_t form = a->W->q4g ? WLM_Q4G : a->W->type;
    for (uint32_t r = a->r0; r < a->r1; r += WLM_MM_PANEL) {
        uint32_t nr = WLM_MIN(WLM_MM_PANEL, a->r1 - r);
        for (uint32_t i = 0; i < nr; i++) k->unpack_i16x4(form, a->W->data + (uint64_t)(r + i) * a->row_bytes, a->wrow + i * rb, a->n);
        k->gemm_i16x4(a->n, a->wrow, rb, nr, a->c->act16, a->c->act16_row_bytes, a->n_tok, a->y + r, a->rows);
    }
}

/* F16 / BF16 rows: a panel converted to floats once, then the tile; the
 * conversion is exact, so the results are dot_f16's / dot_bf16's */
static void run_panel_f32(const mm_args *a) {
    const wlm_kernels *k = a->c->k;
    for (uint32_t r = a->r0; r < a->r1; r += WLM_F32_PANEL) {
        uint32_t nr = WLM_MIN(WLM_F32_PANEL, a->r1 - r);
        for (uint32_t i = 0; i < nr; i++) {
            const uint8_t *w = a->W->data + (uint64_t)(r + i) * a->row_bytes;
            float *f = (float *)a->wrow + (uint64_t)i * a->n;
            if (a->W->type == GGML_F16) k->cvt_f16(a->n, (const uint16_t *)w, f);
            else wlm_dequantize_row(a->W->type, w, f, a->n);
        }
        k->gemm_f32(a->n, (const float *)a->wrow, a->n, nr, (const float *)a->xs, a->xstride / 4, a->n_tok, a->y + r, a->rows);
    }
}

/* one token, or a type with no batched kernel: the row dot, row by row */
static void run_dot(const mm_args *a) {
    wlm_dot_fn dot = wlm_kernel_dot(a->c->k, a->W->type);
    for (uint32_t r = a->r0; r < a->r1; r++) {
        const uint8_t *w = a->W->data + r * a->row_bytes;
        for (uint32_t t = 0; t < a->n_tok; t++)
            a->y[(uint64_t)t * a->rows + r] = dot(a->n, w, a->xs + t * a->xstride);
    }
}

/* out = x times 2^112 (nt rows of n floats, x's rows xs floats apart; out's
 * n apart) for gemv_f16's WLM_F16_FINITE_X112; 0 when a finite |x| >= 2^16
 * would not survive it (out is then not used). Infinities and NaNs may stay:
 * a half times them gives what it gave before. A loop clang vectorises. */
int wlm_f16_scale_x(const float *x, uint64_t xs, uint32_t nt, uint32_t n, float *out) {
    int big = 0;
    for (uint32_t t = 0; t < nt; t++)
        for (uint32_t i = 0; i < n; i++) {
            float v = x[t * xs + i], a = v < 0 ? -v : v;
            big |= (a >= 0x1p16f) & (a <= 0x1.fffffep127f); /* (finite) */
            out[(uint64_t)t * n + i] = v * 0x1p112f;
        }
    return !big;
}

/* Each weight row is read once for the whole batch, and every y element is
 * computed the same way whichever thread computes it and however the rows
 * are split. */
void wlm_mm(wlm_ctx *c, const wlm_tensor *W, const float *x, uint32_t n_tok, float *y,
            uint32_t r0, uint32_t r1, uint32_t tid) {
    if (r1 <= r0) return;
    const wlm_kernels *k = c->k;
    uint32_t at = wlm_act_type(W->type);
    mm_args a = { c, W, (uint32_t)W->ne[0], (uint32_t)W->ne[1], n_tok, r0, r1, W->nbytes / W->ne[1],
                  (uint64_t)W->ne[0] * 4, (const uint8_t *)x, c->wrow + tid * c->wrow_bytes, y };
    if (at != GGML_F32) {
        a.xs = at == GGML_Q8_K ? c->act_k : c->act;
        a.xstride = c->act_row_bytes;
    }
    const uint8_t *w0 = W->data + (uint64_t)r0 * a.row_bytes;
    switch ((mm_kernel)mm_choose(k, W, n_tok)->kernel) {
    case MM_GEMV_F16: {
        int mode = WLM_F16_CHECK;
        if (W->finite) mode = wlm_f16_scale_x((const float *)a.xs, a.xstride / 4, n_tok, a.n, (float *)a.wrow) ? WLM_F16_FINITE_X112 : WLM_F16_FINITE;
        const float *xs = mode == WLM_F16_FINITE_X112 ? (const float *)a.wrow : (const float *)a.xs;
        k->gemv_f16(a.n, w0, a.row_bytes, r1 - r0, xs, mode == WLM_F16_FINITE_X112 ? a.n : a.xstride / 4, n_tok, y + r0, a.rows, mode);
        return;
    }
    case MM_KQ_ROWS: /* equal to the row dot bit for bit; 0 = no batched path for this type */
        if (!k->kq_rows(W->type, a.n, w0, a.row_bytes, r1 - r0, a.xs, a.xstride, n_tok, y + r0, a.rows, a.wrow, c->wrow_bytes))
            run_dot(&a);
        return;
    case MM_GEMV: run_gemv(&a); return;
    case MM_GEMM_Q4GB: /* no unpacked copy (bit for bit dot_q4_0) */
        k->gemm_q4gb(a.n, w0, a.row_bytes, r1 - r0, a.xs, a.xstride, c->act_b, n_tok, y + r0, a.rows);
        return;
    case MM_GEMM_I8X4: run_gemm_i8x4(&a); return;
    case MM_GEMM_I16X4: run_gemm_i16x4(&a); return;
    case MM_GEMM_F32: /* dot_f32's bits */
        k->gemm_f32(a.n, (const float *)w0, a.row_bytes / 4, r1 - r0, (const float *)a.xs, a.xstride / 4, n_tok, y + r0, a.rows);
        return;
    case MM_PANEL_F32: run_panel_f32(&a); return;
    case MM_DOT: run_dot(&a); return;
    }
}
