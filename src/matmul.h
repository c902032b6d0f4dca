/* Matrix products of the forward pass (matmul.c): which kernel multiplies
 * a weight matrix by a batch of tokens, the activation forms it reads, and
 * the conversion of an input row into those forms. */
#ifndef WLM_MATMUL_H
#define WLM_MATMUL_H

#include "ctx.h"

/* Activation forms. A matrix product y = W x reads x in the form
 * wlm_act_type(W) names: the floats themselves, Q8_0 blocks (c->act; for
 * Q8_0/Q4_0 weights also rearranged in c->act16: the i16eo form for gemv's
 * few tokens or i16x4 rows for a larger batch at the row's start, and the
 * kernel set's act_q4g form at act8_off: for Q4_0 rows repacked at load
 * (q4g) and, in the relaxed build, for every Q4_0 batch) or Q8_K blocks
 * (c->act_k). Each input is converted once into every form its weights
 * read (Q, K and V share one input, gate and up another). The layouts of
 * the forms are in layouts.h. */
enum {
    WLM_NEED_Q8 = 1,  /* Q8_0 blocks (c->act) */
    WLM_NEED_I16 = 2, /* the i16eo form (gemv) */
    WLM_NEED_QK = 4,  /* Q8_K blocks (c->act_k) */
    WLM_NEED_X4 = 8,  /* the i16x4 form (gemm_i16x4) */
    WLM_NEED_G = 16,  /* the set's act_q4g form (gemv_q4g; relaxed SIMD: also gemm_q4_i8x4) */
    WLM_NEED_B = 32   /* the q4gb form of a batch (gemm_q4gb, relaxed SIMD) */
};

/* The forms a product with w over n_tok tokens reads (WLM_NEED_*), from
 * the same kernel-choice table wlm_mm follows. */
uint32_t wlm_mm_needs(const wlm_ctx *c, const wlm_tensor *w, uint32_t n_tok);

/* Rows [r0, r1) of y[t][r] = W[r] . x[t] for the n_tok tokens of input x
 * (n floats a row, already converted into the forms wlm_mm_needs names),
 * y rows W->ne[1] floats apart; tid picks the thread's scratch. */
void wlm_mm(wlm_ctx *c, const wlm_tensor *W, const float *x, uint32_t n_tok, float *y,
            uint32_t r0, uint32_t r1, uint32_t tid);

/* Elements a thread converts at a time for the forms in `need`: whole Q8_K
 * blocks, whole groups of four Q8_0 blocks (act_q4g), or Q8_0 blocks. */
uint32_t wlm_act_unit(uint32_t need);
/* Writes elements [lo, hi) of token t's input row y (n floats; lo and hi
 * multiples of wlm_act_unit) into the forms in `need`. */
void wlm_act_convert(const wlm_ctx *c, const float *y, uint32_t t, uint32_t n, uint32_t lo, uint32_t hi, uint32_t need);

/* Bytes of one thread's weight panel (c->wrow) for rows of up to `widest`
 * elements (the memory plan reserves one per thread). */
uint64_t wlm_mm_panel_bytes(uint32_t widest);
int wlm_f16_scale_x(const float *x, uint64_t xs, uint32_t nt, uint32_t n, float *out);

#endif
