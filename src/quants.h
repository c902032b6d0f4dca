/* Q4_1, Q5_0, Q5_1 and the K-quants (Q2_K .. Q6_K): the scalar reference
 * (quants_scalar.c) and SIMD128 (quants_simd128.c) dot products, and the
 * reference dequantizers and quantizers (the block structs are in
 * ggml_types.h). */
#ifndef WLM_QUANTS_H
#define WLM_QUANTS_H

#include "base.h"
#include "ggml_types.h"

/* Row dot products (the wlm_dot_fn signature): n weights of the named type
 * with an activation row, block_q8_0 for Q4_1/Q5_0/Q5_1, block_q8_k for the
 * K-quants. Scalar reference: */
float wlm_kq_dot_q4_1(uint32_t n, const void *w, const void *x);
float wlm_kq_dot_q5_0(uint32_t n, const void *w, const void *x);
float wlm_kq_dot_q5_1(uint32_t n, const void *w, const void *x);
float wlm_kq_dot_q2_k(uint32_t n, const void *w, const void *x);
float wlm_kq_dot_q3_k(uint32_t n, const void *w, const void *x);
float wlm_kq_dot_q4_k(uint32_t n, const void *w, const void *x);
float wlm_kq_dot_q5_k(uint32_t n, const void *w, const void *x);
float wlm_kq_dot_q6_k(uint32_t n, const void *w, const void *x);
#if WLM_SIMD128
/* SIMD128 versions, bit-identical to the reference */
float wlm_kq_dot_q4_1_simd(uint32_t n, const void *w, const void *x);
float wlm_kq_dot_q5_0_simd(uint32_t n, const void *w, const void *x);
float wlm_kq_dot_q5_1_simd(uint32_t n, const void *w, const void *x);
float wlm_kq_dot_q2_k_simd(uint32_t n, const void *w, const void *x);
float wlm_kq_dot_q3_k_simd(uint32_t n, const void *w, const void *x);
float wlm_kq_dot_q4_k_simd(uint32_t n, const void *w, const void *x);
float wlm_kq_dot_q5_k_simd(uint32_t n, const void *w, const void *x);
float wlm_kq_dot_q6_k_simd(uint32_t n, const void *w, const void *x);
#endif

/* Batched products of K-quant rows with Q8_K activation rows (matmul and
 * prefill): for rows r < n_rows (row r at w + r * row_bytes) and tokens
 * t < n_tok (activation row t at x + t * xstride),
 *   y[t * ystride + r] = dot[type](n, row r, activation t)
 * bit for bit, whatever n_tok. scratch: scratch_bytes of per-thread work
 * space, 16-byte aligned (the SIMD version unpacks one weight row there;
 * about 2.2 bytes per weight). Returns 0, writing nothing, when this type has
 * no batched path in the set or the scratch is too small: the caller then
 * uses the row dot. */
typedef int (*wlm_kq_rows_fn)(uint32_t type, uint32_t n, const uint8_t *w, uint64_t row_bytes, uint32_t n_rows,
                              const uint8_t *x, uint64_t xstride, uint32_t n_tok, float *y, uint64_t ystride,
                              void *scratch, uint64_t scratch_bytes);
int wlm_kq_rows(uint32_t type, uint32_t n, const uint8_t *w, uint64_t row_bytes, uint32_t n_rows,
                const uint8_t *x, uint64_t xstride, uint32_t n_tok, float *y, uint64_t ystride,
                void *scratch, uint64_t scratch_bytes);
#if WLM_SIMD128
/* Q4_K and Q6_K (0 for the other types) */
int wlm_kq_rows_simd(uint32_t type, uint32_t n, const uint8_t *w, uint64_t row_bytes, uint32_t n_rows,
                     const uint8_t *x, uint64_t xstride, uint32_t n_tok, float *y, uint64_t ystride,
                     void *scratch, uint64_t scratch_bytes);
#endif

/* Row codecs of the types above (the type rows of types.c name them): n
 * elements, n a multiple of the type's block. */
void wlm_dequantize_q4_1(const void *row, float *y, uint32_t n);
void wlm_dequantize_q5_0(const void *row, float *y, uint32_t n);
void wlm_dequantize_q5_1(const void *row, float *y, uint32_t n);
void wlm_dequantize_q2_k(const void *row, float *y, uint32_t n);
void wlm_dequantize_q3_k(const void *row, float *y, uint32_t n);
void wlm_dequantize_q4_k(const void *row, float *y, uint32_t n);
void wlm_dequantize_q5_k(const void *row, float *y, uint32_t n);
void wlm_dequantize_q6_k(const void *row, float *y, uint32_t n);
void wlm_dequantize_q8_k(const void *row, float *y, uint32_t n);
void wlm_quantize_q4_1(const float *x, void *y, uint32_t n);
void wlm_quantize_q5_0(const float *x, void *y, uint32_t n);
void wlm_quantize_q5_1(const float *x, void *y, uint32_t n);
void wlm_quantize_q2_k(const float *x, void *y, uint32_t n);
void wlm_quantize_q3_k(const float *x, void *y, uint32_t n);
void wlm_quantize_q4_k(const float *x, void *y, uint32_t n);
void wlm_quantize_q5_k(const float *x, void *y, uint32_t n);
void wlm_quantize_q6_k(const float *x, void *y, uint32_t n);
/* Activation quantization for the K-quant dots (n % 256 == 0): d = amax/127,
 * q = round(x/d) half away from zero, bsums exact. Scalar, shared by every build. */
void wlm_quantize_row_q8_k(const float *x, void *y, uint32_t n);
/* The 6-bit scale/min pair j (0..7) of a Q4_K/Q5_K scales[12] field, and the
 * 6-bit scale j (0..15, before the -32) of a Q3_K scales[12] field. */
void wlm_kq_scale_min_k4(const uint8_t *scales, int j, int *sc, int *m);
int wlm_kq_scale_q3(const uint8_t *scales, int j);

/* The float part of every dot product here, shared by the reference and the
 * SIMD kernels so both do exactly these operations in this order (after exact
 * int32 sums): per block / super-block, with dw, mw the weight scales and dx
 * the activation scale, s the weighted integer dot and sx the integer term of
 * the min:  r + ((dw*dx)*s + (mw*dx)*sx)   (Q4_1, Q5_1: value = d*q + m)
 *           r + ((dw*dx)*s - (mw*dx)*sx)   (Q2_K, Q4_K, Q5_K: value = d*sc*q - dmin*m)
 *           r + (dw*dx)*s                  (Q5_0, Q3_K, Q6_K) */
static inline float wlm_kq_acc_plus(float r, float dw, float mw, float dx, int32_t s, int32_t sx) {
    return r + ((dw * dx) * (float)s + (mw * dx) * (float)sx);
}
static inline float wlm_kq_acc_minus(float r, float dw, float mw, float dx, int32_t s, int32_t sx) {
    return r + ((dw * dx) * (float)s - (mw * dx) * (float)sx);
}
static inline float wlm_kq_acc(float r, float dw, float dx, int32_t s) {
    return r + (dw * dx) * (float)s;
}

#endif
