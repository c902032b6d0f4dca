/* The kernel vtable (kernels_scalar.c, the reference; kernels_simd128.c,
 * SIMD128 and relaxed SIMD): every inner loop the engine runs, one set
 * chosen per build, each set equal to the reference bit for bit. The
 * activation and weight forms the kernels read are in layouts.h. */
#ifndef WLM_KERNELS_H
#define WLM_KERNELS_H

#include "base.h"
#include "ggml_types.h"
#include "quants.h"
#include "layouts.h"

typedef void (*wlm_gemv_fn)(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr,
                            const uint8_t *x8, uint64_t x8s, const uint8_t *x16, uint64_t x16s,
                            uint32_t nt, float *y, uint64_t ys);

enum { WLM_F16_CHECK = 0,
       WLM_F16_FINITE = 1,
       WLM_F16_FINITE_X112 = 2 };

typedef struct wlm_kernels {
    const char *name;
    uint32_t set; /* WLM_SET_*: which dot of each type row this set uses */
    /* the float kernels by name (attention and tests use them directly) */
    float (*dot_f32)(uint32_t n, const float *w, const float *x);
    float (*dot_f16)(uint32_t n, const uint16_t *w, const float *x);
    float (*dot_bf16)(uint32_t n, const uint16_t *w, const float *x);
    float (*dot_q8_0)(uint32_t n, const block_q8_0 *w, const block_q8_0 *x);
    float (*dot_q4_0)(uint32_t n, const block_q4_0 *w, const block_q8_0 *x);
    /* Prefill of Q8_0/Q4_0 weights, register-tiled: y[t * ys + r] = row r of
     * w . row t of x for r < nr, t < nt. Rows of n values (n % 32 == 0) in the
     * "i16x4" form wlm_unpack_i16x4 writes (int16 values, groups of four
     * blocks interleaved, then float block scales), w rows ws bytes apart, x
     * rows xs. Each result equals dot_q8_0 / dot_q4_0 of the same values bit
     * for bit, however rows and tokens are grouped. */
    void (*gemm_i16x4)(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr,
                       const uint8_t *x, uint64_t xs, uint32_t nt, float *y, uint64_t ys);
    /* wlm_unpack_i16x4 (Q8_0 / Q4_0 / q4g row -> i16x4 form), the same bytes */
    void (*unpack_i16x4)(uint32_t type, const void *row, uint8_t *out, uint32_t n);
    /* Decode and small batches of Q8_0 / Q4_0 weights: y[t * ys + r] = row r
     * of w (rows ws bytes apart) . token t for r < nr, t < nt, where token t
     * comes as Q8_0 blocks at x8 + t * x8s and in the "i16eo" form of
     * wlm_act_i16eo at x16 + t * x16s. Each weight block is loaded and
     * widened once for every token (no unpacked copy in memory, unlike
     * gemm_i16x4). Equal bit for bit to dot_q8_0 / dot_q4_0 on (w row, x8). */
    wlm_gemv_fn gemv_q8_0, gemv_q4_0;
    /* Prefill of Q4_0 weights with relaxed SIMD (NULL elsewhere): as
     * gemm_i16x4, on rows in the i8x4 form (weights: unpack_q4_i8x4, n + nb*4
     * bytes; tokens: act_q4g, which in this set writes the i8x4 form, n +
     * nb*8 bytes); equal bit for bit to dot_q4_0. The unpacker writes the
     * bytes of wlm_unpack_q4_i8x4. */
    void (*gemm_q4_i8x4)(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr,
                         const uint8_t *x, uint64_t xs, uint32_t nt, float *y, uint64_t ys);
    void (*unpack_q4_i8x4)(const block_q4_0 *row, uint8_t *out, uint32_t n);
    /* Decode and small batches of Q4_0 rows in the q4g form (repacked at
     * load): as gemv_q4_0, with token t as Q8_0 blocks at x8 + t * x8s and
     * in this set's act_q4g form at x16 + t * x16s (the scalar set reads x8
     * only). Equal bit for bit to wlm_dot_q4g, that is to dot_q4_0 on the
     * blocks before the repack. */
    wlm_gemv_fn gemv_q4g;
    /* Writes blocks [b0, b1) of a token's act_q4g form: SIMD128 the i16g
     * form (wlm_act_i16g_blocks), relaxed SIMD the i8x4 form
     * (wlm_act_i8x4_blocks); NULL in the scalar set. b0 and b1 are
     * multiples of 4 (or b1 = nb): groups convert on their own. */
    void (*act_q4g)(const block_q8_0 *x, uint8_t *out, uint32_t n, uint32_t b0, uint32_t b1);
    /* wlm_q4g_from_q4_0, the same bytes (the load-time repack) */
    void (*q4g_from_q4_0)(uint8_t *row, uint32_t n);
    /* Batches of q4g rows with relaxed SIMD (NULL elsewhere): y[t * ys + r] =
     * row r of w (rows ws bytes apart) . token t for r < nr, t < nt, token t
     * in the q4gb form at xb (act_q4gb, the bytes of wlm_act_q4gb_row) and
     * as Q8_0 blocks at x8 + t * x8s. Each row is read once for the batch,
     * with no unpacked copy. Equal bit for bit to wlm_dot_q4g. */
    void (*gemm_q4gb)(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr, const uint8_t *x8, uint64_t x8s,
                      const uint8_t *xb, uint32_t nt, float *y, uint64_t ys);
    void (*act_q4gb)(const block_q8_0 *x, uint8_t *xb, uint32_t n, uint32_t t);
    /* Small batches of F16 weights: y[t * ys + r] = row r of w (rows ws
     * bytes apart) . float row x + t * xs (xs in floats) for r < nr,
     * t < nt; each 16 halves converted once for every token. Equal bit for
     * bit to dot_f16. `mode`: WLM_F16_CHECK, or WLM_F16_FINITE when the
     * caller knows no half of these rows is infinite or NaN
     * (wlm_tensor.finite: the SIMD set skips the check that otherwise sends
     * such a row to the exact conversion), or WLM_F16_FINITE_X112 when
     * besides x holds the token rows times 2^112 (wlm_f16_scale_x): a half's
     * bits moved into a float's are then the half times 2^-112, and the
     * products are the same reals, so the SIMD set needs no multiplication
     * to convert. */
    void (*gemv_f16)(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr,
                     const float *x, uint64_t xs, uint32_t nt, float *y, uint64_t ys, int mode);
    /* Batches of float rows: y[t * ys + r] = row r of w (rows ws floats
     * apart) . row t of x (xs floats apart) for r < nr, t < nt, equal bit
     * for bit to dot_f32. The SIMD set keeps a register tile of rows x
     * tokens, one accumulator each (see kernels_simd128.c). F32 weights take
     * it directly, F16 / BF16 rows after converting a panel of rows. */
    void (*gemm_f32)(uint32_t n, const float *w, uint64_t ws, uint32_t nr,
                     const float *x, uint64_t xs, uint32_t nt, float *y, uint64_t ys);
    /* n halves -> floats exactly as wlm_f16_to_f32 (batched F16 rows are
     * converted once, then gemm_f32 gives dot_f16's bits) */
    void (*cvt_f16)(uint32_t n, const uint16_t *h, float *y);
    /* y += a * x (attention value accumulation), f32 and f16 sources */
    void (*axpy_f32)(uint32_t n, float a, const float *x, float *y);
    void (*axpy_f16)(uint32_t n, float a, const uint16_t *x, float *y);
    /* y *= a */
    void (*scale)(uint32_t n, float a, float *y);
    /* K-quants (quants_scalar.c, quants_simd128.c): rows of a K-quant weight
     * against a batch of Q8_K activations, equal to dot[type] bit for bit;
     * returns 0 for a type without a batched path (see quants.h) */
    wlm_kq_rows_fn kq_rows;
    /* The sampler's log-sum-exp: sum over i of wlm_expf_fast(y[i] - m),
     * skipping NaN and -inf, with y[i] above FLT_MAX (+inf) taken as FLT_MAX.
     * Term i goes to double running sum i % 8; the eight are folded as
     * ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)). Every set gives the
     * scalar reference's bits. */
    double (*sum_exp)(uint32_t n, const float *y, float m);
    /* Its m: the largest y[i] with the same exclusions and clamp, -inf when
     * every entry is excluded; a zero maximum is returned as +0 (the sign of
     * a zero maximum would depend on the order of the scan) */
    float (*logit_max)(uint32_t n, const float *y);
    /* y[i] = wlm_expf_fast(y[i] - m), in place (attention's softmax weights
     * of one tile): the same bits in every set */
    void (*exp_shift)(uint32_t n, float *y, float m);
    /* a[i] = wlm_silu(a[i]) * b[i] (the SwiGLU gate): the same bits in every set */
    void (*silu_mul)(uint32_t n, float *a, const float *b);
    /* wlm_quantize_row_q8_0, the same bytes (the activations of every Q8_0 / Q4_0 product) */
    void (*quantize_q8_0)(const float *x, block_q8_0 *y, uint32_t n);
    /* Attention's value accumulation over a tile: for i < n in order,
     * axpy(hd, e[i], row idx[i] of v (hd floats, or halves with f16), out),
     * the same bits as those axpy calls one by one */
    void (*att_accum)(uint32_t n, uint32_t hd, const float *e, const void *v, int f16, const uint32_t *idx, float *out);
    /* Attention's scores over a tile: s[i] = dot(hd, row idx[i] of k, q) *
     * scale for i < n (dot_f32, or dot_f16 with f16): the same bits */
    void (*att_scores)(uint32_t n, uint32_t hd, const float *q, const void *k, int f16, const uint32_t *idx, float scale, float *s);
    /* LayerNorm of one row x of n floats (bert's blocks), elements [lo, hi)
     * of y written: mean = S(x) / n, var = S((x - mean)^2) / n with S the
     * sum in dot_f32's order (16 running sums, wlm_fold16, the tail in
     * order), rstd = 1 / sqrt(var + eps), y[i] = ((x[i] - mean) * rstd) *
     * w[i] + b[i] (w NULL: 1; b NULL: 0). Each thread of a row computes the
     * statistics of the whole row, so threads may share it. y may not
     * overlap x. The same bits in every set. */
    void (*layer_norm)(uint32_t n, const float *x, const float *w, const float *b, float eps, float *y, uint32_t lo, uint32_t hi);
} wlm_kernels;

/* the row dot of weight type `type` in set k, from the type's row (NULL:
 * not available) */
wlm_dot_fn wlm_kernel_dot(const wlm_kernels *k, uint32_t type);
/* the row dots of the float, Q8_0 and Q4_0 types in each set (the type
 * rows of types.c name them) */
float wlm_row_dot_f32(uint32_t n, const void *w, const void *x);
float wlm_row_dot_f16(uint32_t n, const void *w, const void *x);
float wlm_row_dot_bf16(uint32_t n, const void *w, const void *x);
float wlm_row_dot_q8_0(uint32_t n, const void *w, const void *x);
float wlm_row_dot_q4_0(uint32_t n, const void *w, const void *x);
#if WLM_SIMD128
float wlm_row_dot_f32_simd(uint32_t n, const void *w, const void *x);
float wlm_row_dot_f16_simd(uint32_t n, const void *w, const void *x);
float wlm_row_dot_bf16_simd(uint32_t n, const void *w, const void *x);
float wlm_row_dot_q8_0_simd(uint32_t n, const void *w, const void *x);
float wlm_row_dot_q4_0_simd(uint32_t n, const void *w, const void *x);
#endif

extern const wlm_kernels wlm_kernels_scalar;
#if WLM_SIMD128
extern const wlm_kernels wlm_kernels_simd128;
#endif
const wlm_kernels *wlm_kernels_best(void);
/* every kernel set compiled into this build, the reference first */
extern const wlm_kernels *const wlm_kernel_sets[];
extern const uint32_t wlm_kernel_set_count;
float wlm_fold16(const float s[16]); /* the reference lane fold */
/* sum_exp's reference from element i on: adds terms i..n-1 to the running
 * sums s[8] (term j to s[j % 8]) and returns their fold (SIMD kernels finish
 * their tail with it) */
double wlm_sum_exp_from(uint32_t i, uint32_t n, const float *y, float m, double s[8]);
/* logit_max's reference from element i on, starting from the running max m */
float wlm_logit_max_from(uint32_t i, uint32_t n, const float *y, float m);

#endif
