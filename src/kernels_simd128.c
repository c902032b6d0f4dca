/* WebAssembly SIMD128 kernels (wasm_simd128.h; natively through SIMDe, simd128.h).
 *
 * Each kernel performs exactly the operations of its scalar reference in
 * kernels_scalar.c, in the same order, so results are bit-identical: four
 * f32x4 accumulators are the reference's 16 running sums, folded the same
 * way; integer block sums are exact. No fused multiply-add is used. */
#include "kernels.h"
#if WLM_SIMD128
#include "wmath.h"
#include "simd128.h"

/* (acc0 + acc1) + (acc2 + acc3) lane-wise, then (l0 + l1) + (l2 + l3) */
static inline float fold4(v128_t a0, v128_t a1, v128_t a2, v128_t a3) {
    v128_t l = wasm_f32x4_add(wasm_f32x4_add(a0, a1), wasm_f32x4_add(a2, a3));
    return (wasm_f32x4_extract_lane(l, 0) + wasm_f32x4_extract_lane(l, 1)) +
        (wasm_f32x4_extract_lane(l, 2) + wasm_f32x4_extract_lane(l, 3));
}

static float dot_f32(uint32_t n, const float *w, const float *x) {
    v128_t a0 = wasm_f32x4_splat(0), a1 = a0, a2 = a0, a3 = a0;
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(wasm_v128_load(w + i), wasm_v128_load(x + i)));
        a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(wasm_v128_load(w + i + 4), wasm_v128_load(x + i + 4)));
        a2 = wasm_f32x4_add(a2, wasm_f32x4_mul(wasm_v128_load(w + i + 8), wasm_v128_load(x + i + 8)));
        a3 = wasm_f32x4_add(a3, wasm_f32x4_mul(wasm_v128_load(w + i + 12), wasm_v128_load(x + i + 12)));
    }
    float r = fold4(a0, a1, a2, a3);
    for (; i < n; i++) r += w[i] * x[i];
    return r;
}

/* ---- batches of float rows: gemm_f32 -----------------------------------------------
 * dot_f32's accumulator a (0..3) adds the products at positions 16i + 4a ..
 * 16i + 4a + 3 for i = 0, 1, ... in that order, and none reads another
 * before the fold. So the four can be computed one after the other, and a
 * tile of R rows x T tokens needs one register per (row, token), not four:
 * each weight vector loaded serves T tokens, each token vector R rows. The
 * rows are walked in stretches of F32_KB floats, which stay in L1 for the
 * four passes; between stretches a pass's sums wait in part[a]. Fold and
 * tail are dot_f32's, so every result has dot_f32's bits. */
#define F32_KB 256u
static inline __attribute__((always_inline)) void gemm_f32_tile(int R, int T, uint32_t n, const float *w, uint64_t ws,
                                                                const float *x, uint64_t xs, float *y, uint64_t ys) {
    v128_t part[4][2][4];
    for (int a = 0; a < 4; a++)
        for (int r = 0; r < R; r++)
            for (int t = 0; t < T; t++) part[a][r][t] = wasm_f32x4_splat(0);
    uint32_t n16 = n / 16 * 16;
    for (uint32_t k0 = 0; k0 < n16; k0 += F32_KB) {
        uint32_t k1 = WLM_MIN(k0 + F32_KB, n16);
        for (int a = 0; a < 4; a++) {
            v128_t acc[2][4];
            for (int r = 0; r < R; r++)
                for (int t = 0; t < T; t++) acc[r][t] = part[a][r][t];
            for (uint32_t i = k0 + 4 * (uint32_t)a; i < k1; i += 16) {
                v128_t wv[2], xv[4];
                for (int r = 0; r < R; r++) wv[r] = wasm_v128_load(w + r * ws + i);
                for (int t = 0; t < T; t++) xv[t] = wasm_v128_load(x + t * xs + i);
                for (int r = 0; r < R; r++)
                    for (int t = 0; t < T; t++) acc[r][t] = wasm_f32x4_add(acc[r][t], wasm_f32x4_mul(wv[r], xv[t]));
            }
            for (int r = 0; r < R; r++)
                for (int t = 0; t < T; t++) part[a][r][t] = acc[r][t];
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) {
            const float *wr = w + r * ws, *xt = x + t * xs;
            float s = fold4(part[0][r][t], part[1][r][t], part[2][r][t], part[3][r][t]);
            for (uint32_t k = n16; k < n; k++) s += wr[k] * xt[k];
            y[t * ys + r] = s;
        }
}

/* rows in pairs, tokens in fours (then the remainders) */
static inline __attribute__((always_inline)) void gemm_f32_rows(int R, uint32_t n, const float *w, uint64_t ws,
                                                                const float *x, uint64_t xs, uint32_t nt, float *y, uint64_t ys) {
    uint32_t t = 0;
    for (; t + 4 <= nt; t += 4) gemm_f32_tile(R, 4, n, w, ws, x + t * xs, xs, y + t * ys, ys);
    switch (nt - t) {
    case 3: gemm_f32_tile(R, 3, n, w, ws, x + t * xs, xs, y + t * ys, ys); break;
    case 2: gemm_f32_tile(R, 2, n, w, ws, x + t * xs, xs, y + t * ys, ys); break;
    case 1: gemm_f32_tile(R, 1, n, w, ws, x + t * xs, xs, y + t * ys, ys); break;
    }
}

static void gemm_f32(uint32_t n, const float *w, uint64_t ws, uint32_t nr,
                     const float *x, uint64_t xs, uint32_t nt, float *y, uint64_t ys) {
    uint32_t r = 0;
    for (; r + 2 <= nr; r += 2) gemm_f32_rows(2, n, w + r * ws, ws, x, xs, nt, y + r, ys);
    if (r < nr) gemm_f32_rows(1, n, w + r * ws, ws, x, xs, nt, y + r, ys);
}

static inline void load_half8(const uint16_t *p, v128_t *lo, v128_t *hi) {
    v128_t h = wasm_v128_load(p);
    *lo = half4_to_f32(wasm_u32x4_extend_low_u16x8(h));
    *hi = half4_to_f32(wasm_u32x4_extend_high_u16x8(h));
}

/* exact reference order, exact conversion: used when a row holds an
 * infinite or NaN half */
static float dot_f16_exact(uint32_t n, const uint16_t *w, const float *x) {
    v128_t a0 = wasm_f32x4_splat(0), a1 = a0, a2 = a0, a3 = a0;
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v128_t w0, w1, w2, w3;
        load_half8(w + i, &w0, &w1);
        load_half8(w + i + 8, &w2, &w3);
        a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(w0, wasm_v128_load(x + i)));
        a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(w1, wasm_v128_load(x + i + 4)));
        a2 = wasm_f32x4_add(a2, wasm_f32x4_mul(w2, wasm_v128_load(x + i + 8)));
        a3 = wasm_f32x4_add(a3, wasm_f32x4_mul(w3, wasm_v128_load(x + i + 12)));
    }
    float r = fold4(a0, a1, a2, a3);
    for (; i < n; i++) r += wlm_f16_to_f32(w[i]) * x[i];
    return r;
}

/* Four finite halves' bits moved into floats' (the halves times 2^-112):
 * each half moved to the top of a 32-bit lane (a shuffle with zeros),
 * shifted right arithmetically by 3 so exponent and mantissa sit where a
 * float's do (13 bits up), the copies of the sign below bit 31 masked off.
 * Exact, subnormal floats included (for x given times 2^112). */
static inline v128_t half4_bits(v128_t h8, int high) {
    v128_t z = wasm_i32x4_splat(0);
    v128_t v = high ? wasm_i16x8_shuffle(z, h8, 4, 12, 5, 13, 6, 14, 7, 15) : wasm_i16x8_shuffle(z, h8, 0, 8, 1, 9, 2, 10, 3, 11);
    return wasm_v128_and(wasm_i32x4_shr(v, 3), wasm_i32x4_splat((int32_t)0x8fffffffu));
}

/* Four finite halves -> floats in 4 ops: half4_bits, and the product with
 * 2^112 rebiases the exponent (subnormal halves become normal floats
 * exactly). Infinities and NaNs would come out finite: the caller checks
 * for them separately. */
static inline v128_t half4_fast(v128_t h8, int high) { return wasm_f32x4_mul(half4_bits(h8, high), wasm_f32x4_splat(0x1p112f)); }

/* one half's bits in a float: the half times 2^-112 (half4_bits, one lane) */
static inline float half_bits(uint16_t h) {
    uint32_t b = ((uint32_t)(h & 0x8000) << 16) | ((uint32_t)(h & 0x7fff) << 13);
    float f;
    __builtin_memcpy(&f, &b, 4);
    return f;
}

/* one F16 row against T float rows (T <= 2): 16 halves converted once per
 * step for every token, per token dot_f16's lanes and fold. CHECK: keep the
 * running maximum of the magnitudes, and if the row turns out to hold an
 * infinity or a NaN compute it again exactly; without CHECK the caller knows
 * it holds none (make bench-kernels, "F16 decode": 13 % of the kernel). X112 (without
 * CHECK): x is the tokens times 2^112 and the halves are not multiplied by
 * 2^112, which gives the same products (another 13 %) */
static inline __attribute__((always_inline)) void gemv_f16_row(int T, int CHECK, int X112, uint32_t n, const uint16_t *w,
                                                               const float *x, uint64_t xs, float *y, uint64_t ys) {
    v128_t a[2][4], mx = wasm_i32x4_splat(0), m = wasm_i16x8_splat(0x7fff);
    for (int t = 0; t < T; t++) a[t][0] = a[t][1] = a[t][2] = a[t][3] = wasm_f32x4_splat(0);
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v128_t h0 = wasm_v128_load(w + i), h1 = wasm_v128_load(w + i + 8);
        if (CHECK) mx = wasm_u16x8_max(mx, wasm_u16x8_max(wasm_v128_and(h0, m), wasm_v128_and(h1, m)));
        v128_t w0, w1, w2, w3;
        if (X112) w0 = half4_bits(h0, 0), w1 = half4_bits(h0, 1), w2 = half4_bits(h1, 0), w3 = half4_bits(h1, 1);
        else w0 = half4_fast(h0, 0), w1 = half4_fast(h0, 1), w2 = half4_fast(h1, 0), w3 = half4_fast(h1, 1);
        for (int t = 0; t < T; t++) {
            const float *xt = x + t * xs + i;
            a[t][0] = wasm_f32x4_add(a[t][0], wasm_f32x4_mul(w0, wasm_v128_load(xt)));
            a[t][1] = wasm_f32x4_add(a[t][1], wasm_f32x4_mul(w1, wasm_v128_load(xt + 4)));
            a[t][2] = wasm_f32x4_add(a[t][2], wasm_f32x4_mul(w2, wasm_v128_load(xt + 8)));
            a[t][3] = wasm_f32x4_add(a[t][3], wasm_f32x4_mul(w3, wasm_v128_load(xt + 12)));
        }
    }
    int exact = CHECK && !wasm_i16x8_all_true(wasm_i16x8_lt(mx, wasm_i16x8_splat(0x7c00)));
    for (int t = 0; t < T; t++) {
        const float *xt = x + t * xs;
        if (exact) {
            y[t * ys] = dot_f16_exact(n, w, xt);
            continue;
        } /* an infinite or NaN half */
        float r = fold4(a[t][0], a[t][1], a[t][2], a[t][3]);
        for (uint32_t k = i; k < n; k++) r += (X112 ? half_bits(w[k]) : wlm_f16_to_f32(w[k])) * xt[k];
        y[t * ys] = r;
    }
}

/* one row, one token: the same kernel with T = 1 */
static float dot_f16(uint32_t n, const uint16_t *w, const float *x) {
    float y;
    gemv_f16_row(1, 1, 0, n, w, x, 0, &y, 0);
    return y;
}

/* one row against nt tokens, two at a time (the modes as constants) */
static inline __attribute__((always_inline)) void gemv_f16_tokens(int CHECK, int X112, uint32_t n, const uint16_t *wr, const float *x,
                                                                  uint64_t xs, uint32_t nt, float *y, uint64_t ys) {
    uint32_t t = 0;
    for (; t + 2 <= nt; t += 2) gemv_f16_row(2, CHECK, X112, n, wr, x + t * xs, xs, y + t * ys, ys);
    if (t < nt) gemv_f16_row(1, CHECK, X112, n, wr, x + t * xs, xs, y + t * ys, ys);
}

static void gemv_f16(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr,
                     const float *x, uint64_t xs, uint32_t nt, float *y, uint64_t ys, int mode) {
    for (uint32_t r = 0; r < nr; r++) {
        const uint16_t *wr = (const uint16_t *)(w + r * ws);
        if (mode == WLM_F16_FINITE_X112) gemv_f16_tokens(0, 1, n, wr, x, xs, nt, y + r, ys);
        else if (mode == WLM_F16_FINITE) gemv_f16_tokens(0, 0, n, wr, x, xs, nt, y + r, ys);
        else gemv_f16_tokens(1, 0, n, wr, x, xs, nt, y + r, ys);
    }
}

/* halves -> floats: the 4-op conversion, and if the row holds an infinity or
 * a NaN (the running maximum of the magnitudes says so at the end), the
 * whole row again with the exact one: no test and branch per 8 halves */
static void cvt_f16(uint32_t n, const uint16_t *h, float *y) {
    v128_t m = wasm_i16x8_splat(0x7fff), mx = wasm_i16x8_splat(0);
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v128_t h8 = wasm_v128_load(h + i);
        mx = wasm_u16x8_max(mx, wasm_v128_and(h8, m));
        wasm_v128_store(y + i, half4_fast(h8, 0));
        wasm_v128_store(y + i + 4, half4_fast(h8, 1));
    }
    if (!wasm_i16x8_all_true(wasm_i16x8_lt(mx, wasm_i16x8_splat(0x7c00))))
        for (uint32_t k = 0; k + 8 <= n; k += 8) {
            v128_t lo, hi;
            load_half8(h + k, &lo, &hi);
            wasm_v128_store(y + k, lo);
            wasm_v128_store(y + k + 4, hi);
        }
    for (; i < n; i++) y[i] = wlm_f16_to_f32(h[i]);
}

static float dot_bf16(uint32_t n, const uint16_t *w, const float *x) {
    v128_t a0 = wasm_f32x4_splat(0), a1 = a0, a2 = a0, a3 = a0;
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v128_t h0 = wasm_v128_load(w + i), h1 = wasm_v128_load(w + i + 8);
        v128_t w0 = wasm_i32x4_shl(wasm_u32x4_extend_low_u16x8(h0), 16);
        v128_t w1 = wasm_i32x4_shl(wasm_u32x4_extend_high_u16x8(h0), 16);
        v128_t w2 = wasm_i32x4_shl(wasm_u32x4_extend_low_u16x8(h1), 16);
        v128_t w3 = wasm_i32x4_shl(wasm_u32x4_extend_high_u16x8(h1), 16);
        a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(w0, wasm_v128_load(x + i)));
        a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(w1, wasm_v128_load(x + i + 4)));
        a2 = wasm_f32x4_add(a2, wasm_f32x4_mul(w2, wasm_v128_load(x + i + 8)));
        a3 = wasm_f32x4_add(a3, wasm_f32x4_mul(w3, wasm_v128_load(x + i + 12)));
    }
    float r = fold4(a0, a1, a2, a3);
    for (; i < n; i++) r += wlm_bf16_to_f32(w[i]) * x[i];
    return r;
}

/* [sum(v0), sum(v1), sum(v2), sum(v3)] of four i32x4 vectors (exact) */
static inline v128_t hsum4_i32(v128_t v0, v128_t v1, v128_t v2, v128_t v3) {
    v128_t t0 = wasm_i32x4_add(wasm_i64x2_shuffle(v0, v1, 0, 2), wasm_i64x2_shuffle(v0, v1, 1, 3));
    v128_t t1 = wasm_i32x4_add(wasm_i64x2_shuffle(v2, v3, 0, 2), wasm_i64x2_shuffle(v2, v3, 1, 3));
    return wasm_i32x4_add(wasm_i32x4_shuffle(t0, t1, 0, 2, 4, 6), wasm_i32x4_shuffle(t0, t1, 1, 3, 5, 7));
}

/* exact partial sums (4 lanes) of the 32 int8 x int8 products of a block */
static inline v128_t isum_q8(const int8_t *w, const int8_t *x) {
    v128_t w0 = wasm_v128_load(w), w1 = wasm_v128_load(w + 16);
    v128_t x0 = wasm_v128_load(x), x1 = wasm_v128_load(x + 16);
    v128_t p0 = wasm_i32x4_add(wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_extmul_low_i8x16(w0, x0)),
                               wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_extmul_high_i8x16(w0, x0)));
    v128_t p1 = wasm_i32x4_add(wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_extmul_low_i8x16(w1, x1)),
                               wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_extmul_high_i8x16(w1, x1)));
    return wasm_i32x4_add(p0, p1);
}

#if WLM_RELAXED
/* Relaxed-SIMD build: i16x8.relaxed_dot_i8x16_i7x16_s multiplies int8
 * activations by 7-bit non-negative lanes and adds pairs (pmaddubsw on x86).
 * The nibbles q (0..15) and the constant 8 are such lanes, so
 *   sum (q - 8) x = dot(x, q) - dot(x, 8)
 * exactly, in int16 (|pair sums| <= 3840): the same integers as below. The
 * JS glue only loads this build after a known-answer probe passed. */
static inline v128_t isum_q4(const uint8_t *qs, const int8_t *x) {
    v128_t q = wasm_v128_load(qs), eight = wasm_i8x16_splat(8);
    v128_t lo = wasm_v128_and(q, wasm_i8x16_splat(15)), hi = hi_nibbles(q);
    v128_t x0 = wasm_v128_load(x), x1 = wasm_v128_load(x + 16);
    v128_t s = wasm_i16x8_sub(wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(x0, lo), wasm_i16x8_relaxed_dot_i8x16_i7x16(x1, hi)),
                              wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(x0, eight), wasm_i16x8_relaxed_dot_i8x16_i7x16(x1, eight)));
    return wasm_i32x4_extadd_pairwise_i16x8(s);
}
#else
/* Q4_0 block: weights in [-8, 7], so four products fit an i16 lane */
static inline v128_t isum_q4(const uint8_t *qs, const int8_t *x) {
    v128_t q = wasm_v128_load(qs);
    v128_t lo = wasm_i8x16_sub(wasm_v128_and(q, wasm_i8x16_splat(15)), wasm_i8x16_splat(8));
    v128_t hi = wasm_i8x16_sub(hi_nibbles(q), wasm_i8x16_splat(8));
    v128_t x0 = wasm_v128_load(x), x1 = wasm_v128_load(x + 16);
    v128_t s = wasm_i16x8_add(wasm_i16x8_add(wasm_i16x8_extmul_low_i8x16(lo, x0), wasm_i16x8_extmul_high_i8x16(lo, x0)),
                              wasm_i16x8_add(wasm_i16x8_extmul_low_i8x16(hi, x1), wasm_i16x8_extmul_high_i8x16(hi, x1)));
    return wasm_i32x4_extadd_pairwise_i16x8(s);
}
#endif

/* the f16 scales of four blocks (stride in bytes) as floats */
static inline v128_t scales4(const uint8_t *d0, uint32_t stride) {
    uint16_t a, b, c, e;
    __builtin_memcpy(&a, d0, 2);
    __builtin_memcpy(&b, d0 + stride, 2);
    __builtin_memcpy(&c, d0 + 2 * stride, 2);
    __builtin_memcpy(&e, d0 + 3 * stride, 2);
    return half4_to_f32(wasm_i32x4_make(a, b, c, e));
}

static inline float fold_lanes(v128_t a) {
    return (wasm_f32x4_extract_lane(a, 0) + wasm_f32x4_extract_lane(a, 1)) +
        (wasm_f32x4_extract_lane(a, 2) + wasm_f32x4_extract_lane(a, 3));
}

static inline int32_t lanes_sum_i32(v128_t s) {
    return wasm_i32x4_extract_lane(s, 0) + wasm_i32x4_extract_lane(s, 1) +
        wasm_i32x4_extract_lane(s, 2) + wasm_i32x4_extract_lane(s, 3);
}

/* Row dot of 32-blocks against Q8_0 activations: four blocks at a time, one
 * block per lane ((d_w * d_x) * isum accumulated per lane, then folded), the
 * remaining blocks in order; exactly the reference's order. ISUM gives a
 * block's exact integer partial sums. */
#define BLOCK_DOT(NAME, WTYPE, ISUM)                                                                               \
    static float NAME(uint32_t n, const WTYPE *w, const block_q8_0 *x) {                                           \
        uint32_t nb = n / 32, b = 0;                                                                               \
        v128_t acc = wasm_f32x4_splat(0);                                                                          \
        for (; b + 4 <= nb; b += 4) {                                                                              \
            v128_t s = hsum4_i32(ISUM(w[b].qs, x[b].qs), ISUM(w[b + 1].qs, x[b + 1].qs),                           \
                                 ISUM(w[b + 2].qs, x[b + 2].qs), ISUM(w[b + 3].qs, x[b + 3].qs));                  \
            v128_t d = wasm_f32x4_mul(scales4((const uint8_t *)&w[b].d, sizeof(WTYPE)),                            \
                                      scales4((const uint8_t *)&x[b].d, sizeof(block_q8_0)));                      \
            acc = wasm_f32x4_add(acc, wasm_f32x4_mul(d, wasm_f32x4_convert_i32x4(s)));                             \
        }                                                                                                          \
        float r = fold_lanes(acc);                                                                                 \
        for (; b < nb; b++)                                                                                        \
            r += (wlm_f16_to_f32(w[b].d) * wlm_f16_to_f32(x[b].d)) * (float)lanes_sum_i32(ISUM(w[b].qs, x[b].qs)); \
        return r;                                                                                                  \
    }

BLOCK_DOT(dot_q8_0, block_q8_0, isum_q8)
BLOCK_DOT(dot_q4_0, block_q4_0, isum_q4)

/* exact partial sums of one 32-block of int16 x int16 (|values| <= 128) */
static inline v128_t isum_i16(const int16_t *w, const int16_t *x) {
    v128_t s0 = wasm_i32x4_dot_i16x8(wasm_v128_load(w), wasm_v128_load(x));
    v128_t s1 = wasm_i32x4_dot_i16x8(wasm_v128_load(w + 8), wasm_v128_load(x + 8));
    v128_t s2 = wasm_i32x4_dot_i16x8(wasm_v128_load(w + 16), wasm_v128_load(x + 16));
    v128_t s3 = wasm_i32x4_dot_i16x8(wasm_v128_load(w + 24), wasm_v128_load(x + 24));
    return wasm_i32x4_add(wasm_i32x4_add(s0, s1), wasm_i32x4_add(s2, s3));
}

/* ---- prefill: register-tiled i16x4 rows ----------------------------------------------
 * In the i16x4 form one i32x4.dot_i16x8 lane sums a pair of values of one
 * block (lane i: block 4g+i), so 16 dots of a group leave the four exact
 * block sums in the four lanes: no horizontal adds. A tile of R weight rows x
 * T tokens shares every weight load among T tokens and every activation load
 * among R rows. Per pair the float steps are dot_q8_0's: lane i accumulates
 * (dw * dx) * isum of blocks i mod 4, folded (l0 + l1) + (l2 + l3), then the
 * remaining blocks in order. */
static inline __attribute__((always_inline)) void tile_i16x4(int R, int T, uint32_t n, const uint8_t *w, uint64_t ws,
                                                             const uint8_t *x, uint64_t xs, float *y, uint64_t ys) {
    uint32_t nb = n / 32, ng = nb / 4;
    v128_t acc[4][4];
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) acc[r][t] = wasm_f32x4_splat(0);
    for (uint32_t g = 0; g < ng; g++) {
        v128_t s[4][4];
        for (int r = 0; r < R; r++)
            for (int t = 0; t < T; t++) s[r][t] = wasm_i32x4_splat(0);
        for (uint32_t v = 0; v < 16; v++) {
            v128_t wv[4], xv[4];
            for (int r = 0; r < R; r++) wv[r] = wasm_v128_load(w + r * ws + (g * 128 + v * 8) * 2);
            for (int t = 0; t < T; t++) xv[t] = wasm_v128_load(x + t * xs + (g * 128 + v * 8) * 2);
            for (int r = 0; r < R; r++)
                for (int t = 0; t < T; t++) s[r][t] = wasm_i32x4_add(s[r][t], wasm_i32x4_dot_i16x8(wv[r], xv[t]));
        }
        for (int r = 0; r < R; r++) {
            v128_t dw = wasm_v128_load(w + r * ws + (uint64_t)n * 2 + g * 16);
            for (int t = 0; t < T; t++) {
                v128_t d = wasm_f32x4_mul(dw, wasm_v128_load(x + t * xs + (uint64_t)n * 2 + g * 16));
                acc[r][t] = wasm_f32x4_add(acc[r][t], wasm_f32x4_mul(d, wasm_f32x4_convert_i32x4(s[r][t])));
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) {
            const int16_t *wq = (const int16_t *)(w + r * ws), *xq = (const int16_t *)(x + t * xs);
            const float *dw = (const float *)(w + r * ws + (uint64_t)n * 2), *dx = (const float *)(x + t * xs + (uint64_t)n * 2);
            float res = fold_lanes(acc[r][t]);
            for (uint32_t b = ng * 4; b < nb; b++)
                res += (dw[b] * dx[b]) * (float)lanes_sum_i32(isum_i16(wq + b * 32, xq + b * 32));
            y[t * ys + r] = res;
        }
}

/* wlm_unpack_i16x4 in SIMD: each block widened to four i16x8 vectors
 * (32-bit lanes = value pairs 4c..4c+3), then four blocks' vectors
 * transposed by 32-bit lanes so that lane i of output vector v is pair v of
 * block i. Half a block (16 values: vectors 2h, 2h+1) at a time for the four
 * blocks, and the type a constant: with whole blocks (16 vectors live) and a
 * type test per block, V8 stored every widened block to the stack and loaded
 * it back for the transposition. */
static inline __attribute__((always_inline)) void widen_half(int q4, const uint8_t *blk, int h, v128_t *a, v128_t *b) {
    v128_t v;
    if (q4) {
        v128_t q = wasm_v128_load(blk + 2);
        v = wasm_i8x16_sub(h ? hi_nibbles(q) : wasm_v128_and(q, wasm_i8x16_splat(15)), wasm_i8x16_splat(8));
    } else {
        v = wasm_v128_load(blk + 2 + 16 * h);
    }
    *a = wasm_i16x8_extend_low_i8x16(v);
    *b = wasm_i16x8_extend_high_i8x16(v);
}

/* the 32-bit lanes of b0..b3 transposed into 4 vectors `stride` bytes
 * apart at g: vector p holds lane p of b0, b1, b2, b3 (the i16x4 and i8x4
 * forms' interleave; store_t4: the 64 bytes at g) */
static inline __attribute__((always_inline)) void store_t4_strided(void *g, uint32_t stride, v128_t b0, v128_t b1, v128_t b2, v128_t b3) {
    uint8_t *o = g;
    v128_t t0 = wasm_i32x4_shuffle(b0, b1, 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(b0, b1, 2, 6, 3, 7);
    v128_t t2 = wasm_i32x4_shuffle(b2, b3, 0, 4, 1, 5), t3 = wasm_i32x4_shuffle(b2, b3, 2, 6, 3, 7);
    wasm_v128_store(o, wasm_i64x2_shuffle(t0, t2, 0, 2));
    wasm_v128_store(o + stride, wasm_i64x2_shuffle(t0, t2, 1, 3));
    wasm_v128_store(o + 2 * stride, wasm_i64x2_shuffle(t1, t3, 0, 2));
    wasm_v128_store(o + 3 * stride, wasm_i64x2_shuffle(t1, t3, 1, 3));
}
static inline __attribute__((always_inline)) void store_t4(void *g, v128_t b0, v128_t b1, v128_t b2, v128_t b3) {
    store_t4_strided(g, 16, b0, b1, b2, b3);
}

/* the exact sum of a Q8_0 block's 32 values */
static inline int32_t q8_block_sum(const int8_t *qs) {
    return lanes_sum_i32(wasm_i32x4_add(wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_extadd_pairwise_i8x16(wasm_v128_load(qs))),
                                        wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_extadd_pairwise_i8x16(wasm_v128_load(qs + 16)))));
}

/* the f16 scales of nb blocks (bsz bytes apart, the first at row) as floats,
 * exactly as wlm_f16_to_f32: four at a time (scales4), then one by one */
static void block_scales(const uint8_t *row, uint32_t bsz, uint32_t nb, float *d) {
    uint32_t b = 0;
    for (; b + 4 <= nb; b += 4) wasm_v128_store(d + b, scales4(row + (uint64_t)b * bsz, bsz));
    for (; b < nb; b++) {
        uint16_t h;
        __builtin_memcpy(&h, row + (uint64_t)b * bsz, 2);
        d[b] = wlm_f16_to_f32(h);
    }
}

static inline __attribute__((always_inline)) void unpack_rows(int q4, const uint8_t *row, uint8_t *out, uint32_t n) {
    uint32_t nb = n / 32, b = 0, bsz = q4 ? sizeof(block_q4_0) : sizeof(block_q8_0);
    int16_t *q = (int16_t *)out;
    float *d = (float *)(out + (uint64_t)n * 2);
    const uint8_t *blk = row;
    for (; b + 4 <= nb; b += 4, blk += 4 * bsz) {
        int16_t *g = q + b * 32;
        for (int h = 0; h < 2; h++) {
            v128_t a0, a1, a2, a3, c0, c1, c2, c3;
            widen_half(q4, blk, h, &a0, &c0);
            widen_half(q4, blk + bsz, h, &a1, &c1);
            widen_half(q4, blk + 2 * bsz, h, &a2, &c2);
            widen_half(q4, blk + 3 * bsz, h, &a3, &c3);
            store_t4(g + 64 * h, a0, a1, a2, a3);
            store_t4(g + 64 * h + 32, c0, c1, c2, c3);
        }
    }
    for (; b < nb; b++, blk += bsz)
        for (int h = 0; h < 2; h++) {
            v128_t a, c;
            widen_half(q4, blk, h, &a, &c);
            wasm_v128_store(q + b * 32 + 16 * h, a);
            wasm_v128_store(q + b * 32 + 16 * h + 8, c);
        }
    block_scales(row, bsz, nb, d);
}

/* a q4g row into the i16x4 form: slice p's 32-bit lanes widened from its
 * low nibbles hold pairs 2p, 2p+1 of blocks 0, 0, 1, 1 (low half) and
 * 2, 2, 3, 3 (high half), so two shuffles give i16x4 vectors 2p and 2p+1;
 * the high nibbles give pairs 8 + 2p, 9 + 2p */
static void unpack_q4g_i16x4(const uint8_t *row, uint8_t *out, uint32_t n) {
    uint32_t nb = n / 32, ng = nb / 4;
    int16_t *q = (int16_t *)out;
    float *d = (float *)(out + (uint64_t)n * 2);
    const v128_t m4 = wasm_i8x16_splat(15), k8 = wasm_i8x16_splat(8);
    for (uint32_t g = 0; g < ng; g++) {
        const uint8_t *gp = row + (uint64_t)g * 72;
        int16_t *o = q + g * 128;
        for (int p = 0; p < 4; p++) {
            v128_t v = wasm_v128_load(gp + 8 + 16 * p);
            v128_t lo = wasm_i8x16_sub(wasm_v128_and(v, m4), k8), hi = wasm_i8x16_sub(hi_nibbles(v), k8);
            v128_t l0 = wasm_i16x8_extend_low_i8x16(lo), l1 = wasm_i16x8_extend_high_i8x16(lo);
            v128_t h0 = wasm_i16x8_extend_low_i8x16(hi), h1 = wasm_i16x8_extend_high_i8x16(hi);
            wasm_v128_store(o + 16 * p, wasm_i32x4_shuffle(l0, l1, 0, 2, 4, 6));
            wasm_v128_store(o + 16 * p + 8, wasm_i32x4_shuffle(l0, l1, 1, 3, 5, 7));
            wasm_v128_store(o + 64 + 16 * p, wasm_i32x4_shuffle(h0, h1, 0, 2, 4, 6));
            wasm_v128_store(o + 64 + 16 * p + 8, wasm_i32x4_shuffle(h0, h1, 1, 3, 5, 7));
        }
        wasm_v128_store(d + 4 * g, half4_to_f32(wasm_u32x4_load16x4(gp)));
    }
    for (uint32_t b = ng * 4; b < nb; b++) {
        const uint8_t *blk = row + (uint64_t)b * sizeof(block_q4_0);
        for (int hh = 0; hh < 2; hh++) {
            v128_t a, c;
            widen_half(1, blk, hh, &a, &c);
            wasm_v128_store(q + b * 32 + 16 * hh, a);
            wasm_v128_store(q + b * 32 + 16 * hh + 8, c);
        }
        uint16_t hf;
        __builtin_memcpy(&hf, blk, 2);
        d[b] = wlm_f16_to_f32(hf);
    }
}

static void unpack_i16x4(uint32_t type, const void *row, uint8_t *out, uint32_t n) {
    if (type == WLM_Q4G) unpack_q4g_i16x4(row, out, n);
    else if (type == GGML_Q4_0) unpack_rows(1, row, out, n);
    else unpack_rows(0, row, out, n);
}

#ifndef WLM_TILE_R
#define WLM_TILE_R 4
#endif
#ifndef WLM_TILE_T
#define WLM_TILE_T 2
#endif

/* A register-tiled product over whole tiles of R rows x T tokens, then the
 * leftover tokens one at a time, then the leftover rows: TILE(r, t, ...) is
 * an always-inline tile kernel with constant r and t. */
#define GEMM_TILED(NAME, TILE, R, T)                                                                               \
    static void NAME(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr,                                       \
                     const uint8_t *x, uint64_t xs, uint32_t nt, float *y, uint64_t ys) {                          \
        uint32_t r = 0;                                                                                            \
        for (; r + (R) <= nr; r += (R)) {                                                                          \
            uint32_t t = 0;                                                                                        \
            for (; t + (T) <= nt; t += (T)) TILE((R), (T), n, w + r * ws, ws, x + t * xs, xs, y + t * ys + r, ys); \
            for (; t < nt; t++) TILE((R), 1, n, w + r * ws, ws, x + t * xs, xs, y + t * ys + r, ys);               \
        }                                                                                                          \
        for (; r < nr; r++) {                                                                                      \
            uint32_t t = 0;                                                                                        \
            for (; t + (T) <= nt; t += (T)) TILE(1, (T), n, w + r * ws, ws, x + t * xs, xs, y + t * ys + r, ys);   \
            for (; t < nt; t++) TILE(1, 1, n, w + r * ws, ws, x + t * xs, xs, y + t * ys + r, ys);                 \
        }                                                                                                          \
    }

GEMM_TILED(gemm_i16x4, tile_i16x4, WLM_TILE_R, WLM_TILE_T)

#if WLM_RELAXED
/* ---- relaxed-SIMD prefill of Q4_0: the i8x4 form -----------------------------------
 * Weights as their nibbles (7-bit lanes) and activations as int8, both with
 * four blocks interleaved by 4 bytes (wlm_unpack_q4_i8x4, wlm_act_i8x4): one
 * i16x8.relaxed_dot_i8x16_i7x16_s multiplies 16 pairs (twice the products
 * of an i32x4.dot_i16x8 on widened values) and its lanes 2i, 2i+1 belong to
 * block i. The 8 dots of a group add up in int16 (each lane at most
 * 2 * 15 * 128 = 3840, eight: 30720), one pairwise add gives the four block
 * sums; sum (q - 8) x = sum q x - 8 sum x with the exact block sums of x.
 * The float steps are tile_i16x4's (dot_q4_0's order), so the results equal
 * dot_q4_0 bit for bit. */

static void unpack_q4_i8x4(const block_q4_0 *B, uint8_t *out, uint32_t n) {
    uint32_t nb = n / 32, b = 0;
    const v128_t m4 = wasm_i8x16_splat(15);
    float *d = (float *)(out + n);
    for (; b + 4 <= nb; b += 4) {
        v128_t q0 = wasm_v128_load(B[b].qs), q1 = wasm_v128_load(B[b + 1].qs), q2 = wasm_v128_load(B[b + 2].qs), q3 = wasm_v128_load(B[b + 3].qs);
        store_t4(out + b * 32, wasm_v128_and(q0, m4), wasm_v128_and(q1, m4), wasm_v128_and(q2, m4), wasm_v128_and(q3, m4));
        store_t4(out + b * 32 + 64, hi_nibbles(q0), hi_nibbles(q1), hi_nibbles(q2), hi_nibbles(q3));
    }
    for (; b < nb; b++) {
        v128_t q = wasm_v128_load(B[b].qs);
        wasm_v128_store(out + b * 32, wasm_v128_and(q, m4));
        wasm_v128_store(out + b * 32 + 16, hi_nibbles(q));
    }
    block_scales((const uint8_t *)B, sizeof(block_q4_0), nb, d);
}

static void act_i8x4_blocks(const block_q8_0 *x, uint8_t *out, uint32_t n, uint32_t b0, uint32_t b1) {
    uint32_t nb = n / 32, b = b0;
    float *d = (float *)(out + n);
    int32_t *sum = (int32_t *)(out + n + (uint64_t)nb * 4);
    for (; b + 4 <= WLM_MIN(b1, nb / 4 * 4); b += 4) {
        store_t4(out + b * 32, wasm_v128_load(x[b].qs), wasm_v128_load(x[b + 1].qs), wasm_v128_load(x[b + 2].qs), wasm_v128_load(x[b + 3].qs));
        store_t4(out + b * 32 + 64, wasm_v128_load(x[b].qs + 16), wasm_v128_load(x[b + 1].qs + 16), wasm_v128_load(x[b + 2].qs + 16), wasm_v128_load(x[b + 3].qs + 16));
    }
    for (; b < b1; b++) {
        wasm_v128_store(out + b * 32, wasm_v128_load(x[b].qs));
        wasm_v128_store(out + b * 32 + 16, wasm_v128_load(x[b].qs + 16));
    }
    for (b = b0; b < b1; b++) {
        sum[b] = q8_block_sum(x[b].qs);
    }
    block_scales((const uint8_t *)(x + b0), sizeof(block_q8_0), b1 - b0, d + b0);
}

static inline __attribute__((always_inline)) void tile_i8x4(int R, int T, uint32_t n, const uint8_t *w, uint64_t ws,
                                                            const uint8_t *x, uint64_t xs, float *y, uint64_t ys) {
    uint32_t nb = n / 32, ng = nb / 4;
    v128_t acc[4][4];
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) acc[r][t] = wasm_f32x4_splat(0);
    for (uint32_t g = 0; g < ng; g++) {
        v128_t s[4][4];
        for (int r = 0; r < R; r++)
            for (int t = 0; t < T; t++) s[r][t] = wasm_i16x8_splat(0);
        for (uint32_t p = 0; p < 8; p++) {
            v128_t wv[4], xv[4];
            for (int r = 0; r < R; r++) wv[r] = wasm_v128_load(w + r * ws + g * 128 + p * 16);
            for (int t = 0; t < T; t++) xv[t] = wasm_v128_load(x + t * xs + g * 128 + p * 16);
            for (int r = 0; r < R; r++)
                for (int t = 0; t < T; t++) s[r][t] = wasm_i16x8_add(s[r][t], wasm_i16x8_relaxed_dot_i8x16_i7x16(xv[t], wv[r]));
        }
        for (int r = 0; r < R; r++) {
            v128_t dw = wasm_v128_load(w + r * ws + n + g * 16);
            for (int t = 0; t < T; t++) {
                const uint8_t *xt = x + t * xs + n;
                v128_t is = wasm_i32x4_sub(wasm_i32x4_extadd_pairwise_i16x8(s[r][t]), wasm_i32x4_shl(wasm_v128_load(xt + nb * 4 + g * 16), 3));
                v128_t d = wasm_f32x4_mul(dw, wasm_v128_load(xt + g * 16));
                acc[r][t] = wasm_f32x4_add(acc[r][t], wasm_f32x4_mul(d, wasm_f32x4_convert_i32x4(is)));
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) {
            const uint8_t *wq = w + r * ws, *xq = x + t * xs;
            const float *dw = (const float *)(wq + n), *dx = (const float *)(xq + n);
            const int32_t *sx = (const int32_t *)(xq + n + nb * 4);
            float res = fold_lanes(acc[r][t]);
            for (uint32_t b = ng * 4; b < nb; b++) {
                v128_t s2 = wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(xq + b * 32), wasm_v128_load(wq + b * 32)),
                                           wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(xq + b * 32 + 16), wasm_v128_load(wq + b * 32 + 16)));
                res += (dw[b] * dx[b]) * (float)(lanes_sum_i32(wasm_i32x4_extadd_pairwise_i16x8(s2)) - 8 * sx[b]);
            }
            y[t * ys + r] = res;
        }
}

#ifndef WLM_TILE8_R
#define WLM_TILE8_R 4
#endif
#ifndef WLM_TILE8_T
#define WLM_TILE8_T 2
#endif

GEMM_TILED(gemm_q4_i8x4, tile_i8x4, WLM_TILE8_R, WLM_TILE8_T)
#endif

/* ---- decode: several Q8_0 / Q4_0 rows against the i16eo activation --------------------
 * A weight block read as i16x8 lanes holds, per lane, an even value in its
 * low byte and the next odd value in its high byte (Q8_0), or four values in
 * its nibbles (Q4_0: low/high nibble of the low/high byte = values 2k, 2k+16,
 * 2k+1, 2k+17). Shifts and masks split them into int16 vectors without any
 * shuffle; the activation was widened once per token in the matching order
 * (even 0-14, odd 1-15, even 16-30, odd 17-31), so i32x4.dot_i16x8 gives
 * exact partial sums. Q4_0 takes the nibbles q unbiased: sum (q - 8) x =
 * sum q x - 8 sum x, with the block sums of x precomputed (exact integers).
 * Four block sums are transposed into one vector and scaled exactly as
 * dot_q8_0 does. Rows of a pass share every activation load. */

/* four halves in the high 16 bits of each u32 lane -> floats as
 * wlm_f16_to_f32 gives them, except infinities/NaNs. *bad keeps the running
 * maximum of the magnitude bits (one max per call, cheaper than a compare
 * and an or); scales_nonfinite(*bad) then says whether any was an infinity
 * or NaN, and the caller takes the exact path */
static inline v128_t half4_hi_to_f32(v128_t v, v128_t *bad) {
    *bad = wasm_u32x4_max(*bad, wasm_i32x4_shl(v, 1)); /* the magnitude bits, at the top */
    /* sign at bit 31, exponent and mantissa at bits 27..13 (the arithmetic
     * shift copies the sign into bits 30..28, the mask clears them); the
     * multiplication by 2^112 rebiases the exponent and keeps the sign */
    v128_t f = wasm_v128_and(wasm_i32x4_shr(v, 3), wasm_i32x4_splat((int32_t)0x8fffe000u));
    return wasm_f32x4_mul(f, wasm_f32x4_splat(0x1p112f));
}

static inline int scales_nonfinite(v128_t bad) {
    return wasm_v128_any_true(wasm_u32x4_ge(bad, wasm_i32x4_splat((int32_t)0xf8000000u)));
}

/* the f16 scales of four consecutive weight blocks (bsz bytes apart) */
static inline v128_t wscales4(const uint8_t *blk, uint32_t bsz, v128_t *bad) {
    v128_t v = wasm_i32x4_splat(0);
    v = wasm_v128_load16_lane(blk, v, 1);
    v = wasm_v128_load16_lane(blk + bsz, v, 3);
    v = wasm_v128_load16_lane(blk + 2 * bsz, v, 5);
    v = wasm_v128_load16_lane(blk + 3 * bsz, v, 7);
    return half4_hi_to_f32(v, bad);
}

/* one weight block widened to int16 vectors u[0..3], in the i16eo order of
 * the activation: even 0-14, odd 1-15, even 16-30, odd 17-31 */
static inline __attribute__((always_inline)) void widen_blk(int q4, const uint8_t *blk, v128_t u[4]) {
    if (q4) {
        v128_t v = wasm_v128_load(blk + 2), m = wasm_i16x8_splat(15);
        u[0] = wasm_v128_and(v, m);
        u[2] = wasm_v128_and(wasm_u16x8_shr(v, 4), m);
        u[1] = wasm_v128_and(wasm_u16x8_shr(v, 8), m);
        u[3] = wasm_u16x8_shr(v, 12);
    } else {
        v128_t v0 = wasm_v128_load(blk + 2), v1 = wasm_v128_load(blk + 18);
        u[0] = wasm_i16x8_shr(wasm_i16x8_shl(v0, 8), 8);
        u[1] = wasm_i16x8_shr(v0, 8);
        u[2] = wasm_i16x8_shr(wasm_i16x8_shl(v1, 8), 8);
        u[3] = wasm_i16x8_shr(v1, 8);
    }
}

/* exact i32x4 partial sums of a widened block against its i16eo values xb */
static inline __attribute__((always_inline)) v128_t isum_eo(const v128_t u[4], const int16_t *xb) {
    return wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(u[0], wasm_v128_load(xb)), wasm_i32x4_dot_i16x8(u[1], wasm_v128_load(xb + 8))),
                          wasm_i32x4_add(wasm_i32x4_dot_i16x8(u[2], wasm_v128_load(xb + 16)), wasm_i32x4_dot_i16x8(u[3], wasm_v128_load(xb + 24))));
}

#if WLM_RELAXED
/* relaxed build, Q4_0: the unbiased nibbles (7-bit lanes: lo, hi) times the
 * int8 activations by i16x8.relaxed_dot_i8x16_i7x16_s (|pair sums| <= 3840) */
static inline v128_t isum_q4_relaxed(v128_t lo, v128_t hi, const int8_t *x) {
    v128_t s = wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(x), lo),
                              wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(x + 16), hi));
    return wasm_i32x4_extadd_pairwise_i16x8(s);
}
#endif

/* exact i32x4 sums of two blocks against one token, one pair of lanes each:
 * lanes 0-1 hold two partial sums of the first block, lanes 2-3 of the
 * second. Q4_0 in the relaxed build takes the nibbles (lo, hi) of both
 * blocks and the int8 activations; otherwise the widened blocks u0, u1 and
 * the i16eo activations. */
static inline __attribute__((always_inline)) v128_t pair_sums(int q4, const v128_t u0[4], const v128_t u1[4],
                                                              const block_q8_0 *x8, const int16_t *xq) {
    v128_t p0, p1;
#if WLM_RELAXED
    if (q4) {
        p0 = isum_q4_relaxed(u0[0], u0[1], x8[0].qs);
        p1 = isum_q4_relaxed(u1[0], u1[1], x8[1].qs);
    } else
#endif
    {
        p0 = isum_eo(u0, xq);
        p1 = isum_eo(u1, xq + 32);
    }
    return wasm_i32x4_add(wasm_i64x2_shuffle(p0, p1, 0, 2), wasm_i64x2_shuffle(p0, p1, 1, 3));
}

static inline __attribute__((always_inline)) void load_blk(int q4, const uint8_t *blk, v128_t u[4]) {
#if WLM_RELAXED
    if (q4) {
        v128_t q = wasm_v128_load(blk + 2);
        u[0] = wasm_v128_and(q, wasm_i8x16_splat(15));
        u[1] = hi_nibbles(q);
        return;
    }
#endif
    widen_blk(q4, blk, u);
}

/* One weight row against T tokens (T <= 3): each block is loaded and
 * widened once for every token; per token the reference's order (four
 * blocks per lane step, then the tail in order). Two blocks per loop
 * iteration, the pair sums of the first half of a group of four carried to
 * the second: V8 keeps a loop body's loads ahead of its arithmetic, and
 * with four blocks per iteration (20 loads for one token) most of them went
 * to the stack (51 spill moves per 16 dot products in the Q4_0 decode
 * loop); with two they fit in registers. */
static inline __attribute__((always_inline)) void gemv_row(int T, int q4, uint32_t n, const uint8_t *w,
                                                           const uint8_t *x8, uint64_t x8s, const uint8_t *x16, uint64_t x16s,
                                                           float *y, uint64_t ys) {
    uint32_t nb = n / 32, bsz = q4 ? sizeof(block_q4_0) : sizeof(block_q8_0), nb4 = nb / 4 * 4;
    const uint64_t sxo = (uint64_t)n * 2 + (uint64_t)nb * 4, dxo = (uint64_t)n * 2;
    v128_t acc[3], lo[3], bad = wasm_i32x4_splat(0);
    for (int t = 0; t < T; t++) acc[t] = lo[t] = wasm_f32x4_splat(0);
    /* pointers advanced through the loop, so that clang folds the constant
     * offsets into the loads (with index arithmetic in uint32_t it adds them
     * itself, and V8 then spends an extra lea per load) */
    const uint8_t *wp = w;
    const int16_t *xp[3];
    const block_q8_0 *x8p[3];
    const int32_t *sxp[3];
    const float *dxp[3];
    for (int t = 0; t < T; t++) {
        xp[t] = (const int16_t *)(x16 + t * x16s);
        x8p[t] = (const block_q8_0 *)(x8 + t * x8s);
        sxp[t] = (const int32_t *)(x16 + t * x16s + sxo);
        dxp[t] = (const float *)(x16 + t * x16s + dxo);
    }
#pragma clang loop unroll(disable)
    for (uint32_t b = 0; b < nb4; b += 2) {
        v128_t u0[4], u1[4], pt[3];
        load_blk(q4, wp, u0);
        load_blk(q4, wp + bsz, u1);
        for (int t = 0; t < T; t++) {
            pt[t] = pair_sums(q4, u0, u1, x8p[t], xp[t]);
            xp[t] += 64;
            x8p[t] += 2;
        }
        wp += 2 * bsz;
        if (!(b & 2)) {
            for (int t = 0; t < T; t++) lo[t] = pt[t];
            continue;
        }
        v128_t dw = wscales4(wp - 4 * bsz, bsz, &bad);
        for (int t = 0; t < T; t++) {
            v128_t s = wasm_i32x4_add(wasm_i32x4_shuffle(lo[t], pt[t], 0, 2, 4, 6), wasm_i32x4_shuffle(lo[t], pt[t], 1, 3, 5, 7));
            if (q4) s = wasm_i32x4_sub(s, wasm_i32x4_shl(wasm_v128_load(sxp[t]), 3));
            v128_t d = wasm_f32x4_mul(dw, wasm_v128_load(dxp[t]));
            acc[t] = wasm_f32x4_add(acc[t], wasm_f32x4_mul(d, wasm_f32x4_convert_i32x4(s)));
            sxp[t] += 4;
            dxp[t] += 4;
        }
    }
    for (int t = 0; t < T; t++) {
        const uint8_t *xt = x16 + t * x16s;
        const float *dx = (const float *)(xt + dxo);
        const int32_t *sx = (const int32_t *)(xt + sxo);
        float res = fold_lanes(acc[t]);
        for (uint32_t k = nb4; k < nb; k++) {
            const uint8_t *blk = w + k * bsz;
            v128_t u[4];
            widen_blk(q4, blk, u);
            int32_t s = lanes_sum_i32(isum_eo(u, (const int16_t *)xt + k * 32));
            if (q4) s -= 8 * sx[k];
            uint16_t h;
            __builtin_memcpy(&h, blk, 2);
            res += (wlm_f16_to_f32(h) * dx[k]) * (float)s;
        }
        y[t * ys] = res;
    }
    if (scales_nonfinite(bad)) /* an infinite or NaN weight scale: the exact conversion */
        for (int t = 0; t < T; t++) {
            const block_q8_0 *xt = (const block_q8_0 *)(x8 + t * x8s);
            y[t * ys] = q4 ? dot_q4_0(n, (const block_q4_0 *)w, xt) : dot_q8_0(n, (const block_q8_0 *)w, xt);
        }
}

/* Rows one at a time in memory order. Several rows in step share the
 * activation loads, which pays only while the weights come from cache
 * (1024 x 1024 Q8_0 in Node: 1 row 8.2 GMAC/s, 6 rows 11.5); decode streams
 * them from memory, and there several rows in step (several short streams,
 * each one row long) defeat the hardware prefetcher: 768 x 24000 Q8_0,
 * 1 row 6.8 GMAC/s, 2 rows 3.9, 4 rows 2.6. So one long sequential stream;
 * a small batch takes the tokens four at a time, the row's later passes
 * coming from cache. */
#ifndef WLM_GEMV_T
#define WLM_GEMV_T 3
#endif
static inline __attribute__((always_inline)) void gemv(int q4, uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr,
                                                       const uint8_t *x8, uint64_t x8s, const uint8_t *x16, uint64_t x16s,
                                                       uint32_t nt, float *y, uint64_t ys) {
    for (uint32_t r = 0; r < nr; r++) {
        const uint8_t *wr = w + r * ws;
        uint32_t t = 0;
        for (; t + WLM_GEMV_T <= nt; t += WLM_GEMV_T) gemv_row(WLM_GEMV_T, q4, n, wr, x8 + t * x8s, x8s, x16 + t * x16s, x16s, y + t * ys + r, ys);
        switch (nt - t) {
        case 3: gemv_row(3, q4, n, wr, x8 + t * x8s, x8s, x16 + t * x16s, x16s, y + t * ys + r, ys); break;
        case 2: gemv_row(2, q4, n, wr, x8 + t * x8s, x8s, x16 + t * x16s, x16s, y + t * ys + r, ys); break;
        case 1: gemv_row(1, q4, n, wr, x8 + t * x8s, x8s, x16 + t * x16s, x16s, y + t * ys + r, ys); break;
        }
    }
}

static void gemv_q8_0(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr, const uint8_t *x8, uint64_t x8s,
                      const uint8_t *x16, uint64_t x16s, uint32_t nt, float *y, uint64_t ys) {
    gemv(0, n, w, ws, nr, x8, x8s, x16, x16s, nt, y, ys);
}

static void gemv_q4_0(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr, const uint8_t *x8, uint64_t x8s,
                      const uint8_t *x16, uint64_t x16s, uint32_t nt, float *y, uint64_t ys) {
    gemv(1, n, w, ws, nr, x8, x8s, x16, x16s, nt, y, ys);
}

/* ---- decode: Q4_0 rows in the q4g form (repacked at load) ---------------------------
 * A group is four f16 scales and 64 nibble bytes (wlm_q4g_from_q4_0).
 * SIMD128: a 16-byte slice read as int16 lanes gives four vectors (low and
 * high nibbles of the even bytes, then of the odd bytes) whose lanes 2i and
 * 2i+1 both hold values of block i; against the i16g activation each
 * i32x4.dot_i16x8 leaves block i's partial sum in lane i, so 16 dots add up
 * to the four block sums with no transposition and no scale gather (the
 * group's scales are one 8-byte load). Relaxed SIMD: the low and high
 * nibbles of slice p are vectors p and p + 4 of the i8x4 form; 8 relaxed
 * dots add up in int16 (at most 8 * 3840) and one pairwise add gives the
 * block sums. Then dot_q4_0's float steps, as in gemv_row; blocks after the
 * last group are plain Q4_0 blocks. */
static inline v128_t q4g_scales(const uint8_t *g, v128_t *bad) {
    return half4_hi_to_f32(wasm_i32x4_shl(wasm_u32x4_load16x4(g), 16), bad);
}

#if WLM_RELAXED
enum { Q4G_ACT_SCALE = 1 }; /* i8x4 form: bytes per value */
#else
enum { Q4G_ACT_SCALE = 2 }; /* i16g form */
#endif

#if WLM_RELAXED
/* The partial block sums of slices 2h and 2h + 1 of a group (sp: slice
 * 2h's bytes) against token activations at xq, in int16 lanes */
static inline __attribute__((always_inline)) v128_t q4g_half(const uint8_t *sp, const uint8_t *xq) {
    v128_t q0 = wasm_v128_load(sp), q1 = wasm_v128_load(sp + 16), m4 = wasm_i8x16_splat(15);
    v128_t a = wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(xq), wasm_v128_and(q0, m4)),
                              wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(xq + 64), hi_nibbles(q0)));
    v128_t b = wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(xq + 16), wasm_v128_and(q1, m4)),
                              wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(xq + 80), hi_nibbles(q1)));
    return wasm_i16x8_add(a, b);
}
#endif

/* dot_q4_0's float step for one group of four blocks and one token: the
 * exact block sums s (sum q x), minus 8 sum x, scaled */
static inline v128_t q4g_step(v128_t acc, v128_t s, v128_t dw, const float *dx, const int32_t *sx) {
    v128_t is = wasm_i32x4_sub(s, wasm_i32x4_shl(wasm_v128_load(sx), 3));
    v128_t d = wasm_f32x4_mul(dw, wasm_v128_load(dx));
    return wasm_f32x4_add(acc, wasm_f32x4_mul(d, wasm_f32x4_convert_i32x4(is)));
}

/* wlm_q4g_from_q4_0 in place: a group's four blocks are read whole, then
 * their scales stored first and their nibble bytes transposed by 4-byte
 * lanes (store_t4: vector p takes lane p of each block) */
static void q4g_from_q4_0(uint8_t *row, uint32_t n) {
    uint32_t ng = n / 32 / 4;
    for (uint32_t g = 0; g < ng; g++) {
        uint8_t *p = row + (uint64_t)g * 72;
        v128_t q0 = wasm_v128_load(p + 2), q1 = wasm_v128_load(p + 20), q2 = wasm_v128_load(p + 38), q3 = wasm_v128_load(p + 56);
        uint16_t d[4];
        for (int i = 0; i < 4; i++) __builtin_memcpy(&d[i], p + 18 * i, 2);
        __builtin_memcpy(p, d, 8);
        store_t4(p + 8, q0, q1, q2, q3);
    }
}

/* One q4g row against T tokens (T <= 3), a group per loop iteration. V8
 * hoists a loop body's loads ahead of its arithmetic: the relaxed loop (12
 * loads for one token) fits in registers; SIMD128's (20) is cut into its
 * four slices by stores (below). Both beat gemv_q4_0 on the same weights
 * (make bench-kernels; bench/results/README.md). */
static inline __attribute__((always_inline)) void gemv_q4g_row(int T, uint32_t n, const uint8_t *w,
                                                               const uint8_t *x8, uint64_t x8s, const uint8_t *xa, uint64_t xas,
                                                               float *y, uint64_t ys) {
    uint32_t nb = n / 32, ng = nb / 4;
    const uint64_t dxo = (uint64_t)n * Q4G_ACT_SCALE, sxo = dxo + (uint64_t)nb * 4;
    v128_t acc[3], bad = wasm_i32x4_splat(0);
    const uint8_t *xp[3];
    const float *dxp[3];
    const int32_t *sxp[3];
    for (int t = 0; t < T; t++) {
        acc[t] = wasm_f32x4_splat(0);
        xp[t] = xa + t * xas;
        dxp[t] = (const float *)(xa + t * xas + dxo);
        sxp[t] = (const int32_t *)(xa + t * xas + sxo);
    }
    const uint8_t *wp = w;
#if WLM_RELAXED
#pragma clang loop unroll(disable)
    for (uint32_t g = 0; g < ng; g++, wp += 72) {
        v128_t dw = q4g_scales(wp, &bad);
        for (int t = 0; t < T; t++) {
            v128_t s = wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_add(q4g_half(wp + 8, xp[t]), q4g_half(wp + 40, xp[t] + 32)));
            acc[t] = q4g_step(acc[t], s, dw, dxp[t], sxp[t]);
            xp[t] += 128;
            dxp[t] += 4;
            sxp[t] += 4;
        }
    }
#else
    v128_t m = wasm_i16x8_splat(15);
    /* Each slice's running sums are stored (volatile) before the next slice
     * is loaded: V8 keeps loads in order with stores and computes a value
     * where it is used, so without a store in between it issued all 20 of a
     * group's loads first and spilled them; with the stores it spills little
     * (make bench-kernels; bench/results/README.md). The native builds
     * compile the stores too: the same code on both sides of the ratio. */
    volatile v128_t order[3];
    (void)order; /* written only for the ordering it forces */
#pragma clang loop unroll(disable)
    for (uint32_t g = 0; g < ng; g++, wp += 72) {
        v128_t s[3] = { wasm_i32x4_splat(0), wasm_i32x4_splat(0), wasm_i32x4_splat(0) };
        for (int p = 0; p < 4; p++) {
            v128_t v = wasm_v128_load(wp + 8 + 16 * p);
            v128_t n0 = wasm_v128_and(v, m), n1 = wasm_v128_and(wasm_u16x8_shr(v, 4), m);
            v128_t n2 = wasm_v128_and(wasm_u16x8_shr(v, 8), m), n3 = wasm_u16x8_shr(v, 12);
            for (int t = 0; t < T; t++) {
                const uint8_t *x = xp[t] + 64 * p;
                v128_t a = wasm_i32x4_add(wasm_i32x4_dot_i16x8(n0, wasm_v128_load(x)), wasm_i32x4_dot_i16x8(n1, wasm_v128_load(x + 16)));
                v128_t b = wasm_i32x4_add(wasm_i32x4_dot_i16x8(n2, wasm_v128_load(x + 32)), wasm_i32x4_dot_i16x8(n3, wasm_v128_load(x + 48)));
                s[t] = wasm_i32x4_add(s[t], wasm_i32x4_add(a, b));
                order[t] = s[t];
            }
        }
        v128_t dw = q4g_scales(wp, &bad);
        for (int t = 0; t < T; t++) {
            acc[t] = q4g_step(acc[t], s[t], dw, dxp[t], sxp[t]);
            xp[t] += 256;
            dxp[t] += 4;
            sxp[t] += 4;
        }
    }
#endif
    for (int t = 0; t < T; t++) {
        const uint8_t *xt = xa + t * xas;
        const float *dx = (const float *)(xt + dxo);
        const int32_t *sx = (const int32_t *)(xt + sxo);
        float res = fold_lanes(acc[t]);
        for (uint32_t k = ng * 4; k < nb; k++) {
            const uint8_t *blk = w + (uint64_t)k * sizeof(block_q4_0);
#if WLM_RELAXED
            v128_t q = wasm_v128_load(blk + 2);
            int32_t is = lanes_sum_i32(isum_q4_relaxed(wasm_v128_and(q, wasm_i8x16_splat(15)), hi_nibbles(q), (const int8_t *)xt + k * 32));
#else
            v128_t u[4];
            widen_blk(1, blk, u);
            int32_t is = lanes_sum_i32(isum_eo(u, (const int16_t *)xt + k * 32));
#endif
            uint16_t h;
            __builtin_memcpy(&h, blk, 2);
            res += (wlm_f16_to_f32(h) * dx[k]) * (float)(is - 8 * sx[k]);
        }
        y[t * ys] = res;
    }
    if (scales_nonfinite(bad)) /* an infinite or NaN weight scale: the exact conversion */
        for (int t = 0; t < T; t++) y[t * ys] = wlm_dot_q4g(n, w, (const block_q8_0 *)(x8 + t * x8s));
}

static void gemv_q4g(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr, const uint8_t *x8, uint64_t x8s,
                     const uint8_t *xa, uint64_t xas, uint32_t nt, float *y, uint64_t ys) {
    for (uint32_t r = 0; r < nr; r++) {
        const uint8_t *wr = w + r * ws;
        uint32_t t = 0;
        for (; t + 3 <= nt; t += 3) gemv_q4g_row(3, n, wr, x8 + t * x8s, x8s, xa + t * xas, xas, y + t * ys + r, ys);
        switch (nt - t) {
        case 2: gemv_q4g_row(2, n, wr, x8 + t * x8s, x8s, xa + t * xas, xas, y + t * ys + r, ys); break;
        case 1: gemv_q4g_row(1, n, wr, x8 + t * x8s, x8s, xa + t * xas, xas, y + t * ys + r, ys); break;
        }
    }
}

#if WLM_RELAXED
/* ---- relaxed-SIMD batches of q4g rows: the q4gb form --------------------------------
 * A batch of tokens goes to q4g rows in chunks of WLM_Q4GB_T = 4 tokens. The
 * activations of a chunk are laid out group by group, 640 bytes a group
 * (wlm_act_q4gb_row writes them, one token at a time):
 *   bytes 64v + 16j        i8x4 vector v (0..7) of token j of the chunk
 *   bytes 512 + 16j        the four block scales of token j (floats)
 *   bytes 576 + 16j        token j's int16 starting sums: lanes 2i and 2i + 1
 *                          -8 * the sum of block i's values 4v + m at m < 2
 *                          and m >= 2, the ones the dots add into those lanes
 * so that everything one group of one row needs for the four tokens lies at
 * fixed offsets from one pointer. One row at a time, in memory order (the
 * weights stream from memory as in decode; the second chunk of a batch finds
 * the row in L1): each 16-byte slice of a group is loaded once for the
 * chunk, its nibbles split once, and multiplied by the four tokens' vectors
 * (relaxed dots adding up in int16, as gemv_q4g does). No unpacked copy of
 * the weights in memory (the i8x4 tile needs one per panel of rows: 20 % of
 * a best-of-8 step went to writing it). The float steps are gemv_q4g's, so
 * every result equals dot_q4_0 on the blocks before the repack, bit for bit.
 * A row's scales are checked for infinities / NaNs once, before its chunks
 * (the loop's 4-op half conversion holds for finite halves; such a row takes
 * wlm_dot_q4g): a running check inside the loop held one more register,
 * and V8 then spilled the accumulators (slower: make bench-kernels). */

/* one row against T tokens of a chunk; the row's scales are finite */
static inline __attribute__((always_inline)) void gemm_q4gb_row(int T, uint32_t n, const uint8_t *w,
                                                                const uint8_t *x8, uint64_t x8s, const uint8_t *xb,
                                                                float *y, uint64_t ys) {
    uint32_t nb = n / 32, ng = nb / 4;
    const v128_t m4 = wasm_i8x16_splat(15);
    v128_t acc[WLM_Q4GB_T];
    for (int t = 0; t < T; t++) acc[t] = wasm_f32x4_splat(0);
    const uint8_t *wp = w, *xp = xb;
#pragma clang loop unroll(disable)
    for (uint32_t g = 0; g < ng; g++, wp += 72, xp += 160 * WLM_Q4GB_T) {
        v128_t s[WLM_Q4GB_T];
        for (int t = 0; t < T; t++) s[t] = wasm_v128_load(xp + 144 * WLM_Q4GB_T + 16 * t); /* -8 x the sums */
        const uint8_t *sp = wp + 8, *xq = xp;
#pragma clang loop unroll(disable)
        for (int p = 0; p < 4; p++, sp += 16, xq += 16 * WLM_Q4GB_T) {
            v128_t q = wasm_v128_load(sp), lo = wasm_v128_and(q, m4), hi = hi_nibbles(q);
            for (int t = 0; t < T; t++)
                s[t] = wasm_i16x8_add(s[t], wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(xq + 16 * t), lo), wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(xq + 64 * WLM_Q4GB_T + 16 * t), hi)));
        }
        v128_t h = wasm_i32x4_shl(wasm_u32x4_load16x4(wp), 16);
        v128_t dw = wasm_f32x4_mul(wasm_v128_and(wasm_i32x4_shr(h, 3), wasm_i32x4_splat((int32_t)0x8fffe000u)), wasm_f32x4_splat(0x1p112f));
        for (int t = 0; t < T; t++) {
            v128_t is = wasm_i32x4_extadd_pairwise_i16x8(s[t]);
            v128_t d = wasm_f32x4_mul(dw, wasm_v128_load(xp + 128 * WLM_Q4GB_T + 16 * t));
            acc[t] = wasm_f32x4_add(acc[t], wasm_f32x4_mul(d, wasm_f32x4_convert_i32x4(is)));
        }
    }
    for (int t = 0; t < T; t++) {
        const block_q8_0 *xt = (const block_q8_0 *)(x8 + t * x8s);
        float res = fold_lanes(acc[t]);
        for (uint32_t k = ng * 4; k < nb; k++) { /* blocks after the last group: plain Q4_0 */
            const uint8_t *blk = w + (uint64_t)k * sizeof(block_q4_0);
            uint16_t hh;
            __builtin_memcpy(&hh, blk, 2);
            res += (wlm_f16_to_f32(hh) * wlm_f16_to_f32(xt[k].d)) * (float)lanes_sum_i32(isum_q4(blk + 2, xt[k].qs));
        }
        y[t * ys] = res;
    }
}

/* whether any of the f16 scales of a q4g row's groups is infinite or NaN
 * (the kernel's fast conversion holds for finite halves only) */
static int q4g_row_nonfinite(const uint8_t *w, uint32_t ng) {
    v128_t bad = wasm_i32x4_splat(0);
    for (uint32_t g = 0; g < ng; g++) bad = wasm_u32x4_max(bad, wasm_i32x4_shl(wasm_u32x4_load16x4(w + (uint64_t)g * 72), 17));
    return scales_nonfinite(bad);
}

static void gemm_q4gb(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr, const uint8_t *x8, uint64_t x8s,
                      const uint8_t *xb, uint32_t nt, float *y, uint64_t ys) {
    uint64_t cs = wlm_q4gb_chunk_bytes(n);
    for (uint32_t r = 0; r < nr; r++) {
        const uint8_t *wr = w + r * ws;
        if (q4g_row_nonfinite(wr, n / 128)) { /* the exact conversion */
            for (uint32_t t = 0; t < nt; t++) y[t * ys + r] = wlm_dot_q4g(n, wr, (const block_q8_0 *)(x8 + t * x8s));
            continue;
        }
        uint32_t t = 0;
        for (; t + WLM_Q4GB_T <= nt; t += WLM_Q4GB_T) gemm_q4gb_row(WLM_Q4GB_T, n, wr, x8 + t * x8s, x8s, xb + t / WLM_Q4GB_T * cs, y + t * ys + r, ys);
        const uint8_t *xc = xb + t / WLM_Q4GB_T * cs;
        switch (nt - t) {
        case 3: gemm_q4gb_row(3, n, wr, x8 + t * x8s, x8s, xc, y + t * ys + r, ys); break;
        case 2: gemm_q4gb_row(2, n, wr, x8 + t * x8s, x8s, xc, y + t * ys + r, ys); break;
        case 1: gemm_q4gb_row(1, n, wr, x8 + t * x8s, x8s, xc, y + t * ys + r, ys); break;
        }
    }
}

/* wlm_act_q4gb_row: token t's groups in the q4gb form of its chunk */
static void act_q4gb_row(const block_q8_0 *x, uint8_t *xb, uint32_t n, uint32_t t) {
    uint32_t ng = n / 128;
    uint8_t *o = xb + t / WLM_Q4GB_T * wlm_q4gb_chunk_bytes(n) + 16 * (t % WLM_Q4GB_T);
    for (uint32_t g = 0; g < ng; g++, o += 160 * WLM_Q4GB_T, x += 4) {
        for (int h = 0; h < 2; h++) /* vectors 4h..4h+3: the four blocks' bytes 16h.. by 4-byte lanes */
            store_t4_strided(o + 64 * WLM_Q4GB_T * h, 16 * WLM_Q4GB_T, wasm_v128_load(x[0].qs + 16 * h), wasm_v128_load(x[1].qs + 16 * h),
                             wasm_v128_load(x[2].qs + 16 * h), wasm_v128_load(x[3].qs + 16 * h));
        v128_t h[4]; /* block i: -8 x its values at k % 4 < 2 and at k % 4 >= 2, as int16 lanes 0 and 1 */
        for (int i = 0; i < 4; i++) {
            v128_t p = wasm_i16x8_add(wasm_i16x8_extadd_pairwise_i8x16(wasm_v128_load(x[i].qs)),
                                      wasm_i16x8_extadd_pairwise_i8x16(wasm_v128_load(x[i].qs + 16)));
            p = wasm_i16x8_add(p, wasm_i64x2_shuffle(p, p, 1, 0));
            p = wasm_i16x8_add(p, wasm_i32x4_shuffle(p, p, 1, 0, 3, 2));
            h[i] = wasm_i16x8_mul(p, wasm_i16x8_splat(-8));
        }
        wasm_v128_store(o + 144 * WLM_Q4GB_T, wasm_i64x2_shuffle(wasm_i32x4_shuffle(h[0], h[1], 0, 4, 0, 4), wasm_i32x4_shuffle(h[2], h[3], 0, 4, 0, 4), 0, 2));
        block_scales((const uint8_t *)x, sizeof(block_q8_0), 4, (float *)(o + 128 * WLM_Q4GB_T));
    }
}
#endif

#if !WLM_RELAXED
/* wlm_act_i16g_blocks: per group the i8x4 vectors (store_t4), then their
 * even and odd bytes sign-extended to int16 lanes */
static void act_i16g(const block_q8_0 *x, uint8_t *out, uint32_t n, uint32_t b0, uint32_t b1) {
    uint32_t nb = n / 32, full = nb / 4 * 4, b = b0;
    float *d = (float *)(out + (uint64_t)n * 2);
    int32_t *sum = (int32_t *)(out + (uint64_t)n * 2 + (uint64_t)nb * 4);
    for (; b + 4 <= WLM_MIN(b1, full); b += 4) {
        uint8_t t8[128] __attribute__((aligned(16)));
        store_t4(t8, wasm_v128_load(x[b].qs), wasm_v128_load(x[b + 1].qs), wasm_v128_load(x[b + 2].qs), wasm_v128_load(x[b + 3].qs));
        store_t4(t8 + 64, wasm_v128_load(x[b].qs + 16), wasm_v128_load(x[b + 1].qs + 16), wasm_v128_load(x[b + 2].qs + 16), wasm_v128_load(x[b + 3].qs + 16));
        uint8_t *o = out + (uint64_t)b * 64;
        for (int p = 0; p < 4; p++) {
            v128_t lo = wasm_v128_load(t8 + 16 * p), hi = wasm_v128_load(t8 + 64 + 16 * p);
            wasm_v128_store(o + 64 * p, wasm_i16x8_shr(wasm_i16x8_shl(lo, 8), 8));
            wasm_v128_store(o + 64 * p + 16, wasm_i16x8_shr(wasm_i16x8_shl(hi, 8), 8));
            wasm_v128_store(o + 64 * p + 32, wasm_i16x8_shr(lo, 8));
            wasm_v128_store(o + 64 * p + 48, wasm_i16x8_shr(hi, 8));
        }
    }
    if (b < b1) wlm_act_i16eo_blocks(x, out, n, b, b1); /* the blocks after the last group */
    for (b = b0; b < b1; b++) {
        sum[b] = q8_block_sum(x[b].qs);
    }
    block_scales((const uint8_t *)(x + b0), sizeof(block_q8_0), b1 - b0, d + b0);
}
#endif

static void axpy_f32(uint32_t n, float a, const float *x, float *y) {
    v128_t va = wasm_f32x4_splat(a);
    uint32_t i = 0;
    for (; i + 4 <= n; i += 4)
        wasm_v128_store(y + i, wasm_f32x4_add(wasm_v128_load(y + i), wasm_f32x4_mul(va, wasm_v128_load(x + i))));
    for (; i < n; i++) y[i] += a * x[i];
}

static void axpy_f16(uint32_t n, float a, const uint16_t *x, float *y) {
    v128_t va = wasm_f32x4_splat(a);
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v128_t lo, hi;
        load_half8(x + i, &lo, &hi);
        wasm_v128_store(y + i, wasm_f32x4_add(wasm_v128_load(y + i), wasm_f32x4_mul(va, lo)));
        wasm_v128_store(y + i + 4, wasm_f32x4_add(wasm_v128_load(y + i + 4), wasm_f32x4_mul(va, hi)));
    }
    for (; i < n; i++) y[i] += a * wlm_f16_to_f32(x[i]);
}

/* att_accum: F32 values with `out` held in registers 32 floats at a time
 * while the tile's rows are added (axpy per row reloaded and stored all of
 * `out` for every slot); each element still takes out + e[i] * v in row
 * order, as the axpy calls would */
static void att_accum(uint32_t n, uint32_t hd, const float *e, const void *v, int f16, const uint32_t *idx, float *out) {
    if (f16) { /* 16 output floats in registers */
        const uint16_t *H = v;
        const v128_t m = wasm_i16x8_splat(0x7fff);
        uint32_t d = 0;
        for (; d + 16 <= hd; d += 16) {
            v128_t o0 = wasm_v128_load(out + d), o1 = wasm_v128_load(out + d + 4), o2 = wasm_v128_load(out + d + 8), o3 = wasm_v128_load(out + d + 12);
            /* the 4-op conversion (half4_fast), exact for finite halves; the
             * largest magnitude seen tells whether an infinity or NaN came by,
             * and then these 16 outputs are redone from `out` (still as it
             * was) with the exact conversion */
            v128_t mx = wasm_i32x4_splat(0);
            for (uint32_t i = 0; i < n; i++) {
                const uint16_t *x = H + (uint64_t)idx[i] * hd + d;
                v128_t a = wasm_f32x4_splat(e[i]), h0 = wasm_v128_load(x), h1 = wasm_v128_load(x + 8);
                mx = wasm_u16x8_max(mx, wasm_u16x8_max(wasm_v128_and(h0, m), wasm_v128_and(h1, m)));
                o0 = wasm_f32x4_add(o0, wasm_f32x4_mul(a, half4_fast(h0, 0)));
                o1 = wasm_f32x4_add(o1, wasm_f32x4_mul(a, half4_fast(h0, 1)));
                o2 = wasm_f32x4_add(o2, wasm_f32x4_mul(a, half4_fast(h1, 0)));
                o3 = wasm_f32x4_add(o3, wasm_f32x4_mul(a, half4_fast(h1, 1)));
            }
            if (wasm_i16x8_all_true(wasm_i16x8_lt(mx, wasm_i16x8_splat(0x7c00)))) {
                wasm_v128_store(out + d, o0);
                wasm_v128_store(out + d + 4, o1);
                wasm_v128_store(out + d + 8, o2);
                wasm_v128_store(out + d + 12, o3);
                continue;
            }
            o0 = wasm_v128_load(out + d), o1 = wasm_v128_load(out + d + 4), o2 = wasm_v128_load(out + d + 8), o3 = wasm_v128_load(out + d + 12);
            for (uint32_t i = 0; i < n; i++) {
                const uint16_t *x = H + (uint64_t)idx[i] * hd + d;
                v128_t a = wasm_f32x4_splat(e[i]), l0, h0, l1, h1;
                load_half8(x, &l0, &h0);
                load_half8(x + 8, &l1, &h1);
                o0 = wasm_f32x4_add(o0, wasm_f32x4_mul(a, l0));
                o1 = wasm_f32x4_add(o1, wasm_f32x4_mul(a, h0));
                o2 = wasm_f32x4_add(o2, wasm_f32x4_mul(a, l1));
                o3 = wasm_f32x4_add(o3, wasm_f32x4_mul(a, h1));
            }
            wasm_v128_store(out + d, o0);
            wasm_v128_store(out + d + 4, o1);
            wasm_v128_store(out + d + 8, o2);
            wasm_v128_store(out + d + 12, o3);
        }
        /* the rest as the axpy_f16 calls would (8 at a time, then one by one) */
        if (d < hd)
            for (uint32_t i = 0; i < n; i++) axpy_f16(hd - d, e[i], H + (uint64_t)idx[i] * hd + d, out + d);
        return;
    }
    const float *V = v;
    uint32_t d = 0;
    for (; d + 32 <= hd; d += 32) {
        v128_t o0 = wasm_v128_load(out + d), o1 = wasm_v128_load(out + d + 4), o2 = wasm_v128_load(out + d + 8), o3 = wasm_v128_load(out + d + 12);
        v128_t o4 = wasm_v128_load(out + d + 16), o5 = wasm_v128_load(out + d + 20), o6 = wasm_v128_load(out + d + 24), o7 = wasm_v128_load(out + d + 28);
        for (uint32_t i = 0; i < n; i++) {
            const float *x = V + (uint64_t)idx[i] * hd + d;
            v128_t a = wasm_f32x4_splat(e[i]);
            o0 = wasm_f32x4_add(o0, wasm_f32x4_mul(a, wasm_v128_load(x)));
            o1 = wasm_f32x4_add(o1, wasm_f32x4_mul(a, wasm_v128_load(x + 4)));
            o2 = wasm_f32x4_add(o2, wasm_f32x4_mul(a, wasm_v128_load(x + 8)));
            o3 = wasm_f32x4_add(o3, wasm_f32x4_mul(a, wasm_v128_load(x + 12)));
            o4 = wasm_f32x4_add(o4, wasm_f32x4_mul(a, wasm_v128_load(x + 16)));
            o5 = wasm_f32x4_add(o5, wasm_f32x4_mul(a, wasm_v128_load(x + 20)));
            o6 = wasm_f32x4_add(o6, wasm_f32x4_mul(a, wasm_v128_load(x + 24)));
            o7 = wasm_f32x4_add(o7, wasm_f32x4_mul(a, wasm_v128_load(x + 28)));
        }
        wasm_v128_store(out + d, o0);
        wasm_v128_store(out + d + 4, o1);
        wasm_v128_store(out + d + 8, o2);
        wasm_v128_store(out + d + 12, o3);
        wasm_v128_store(out + d + 16, o4);
        wasm_v128_store(out + d + 20, o5);
        wasm_v128_store(out + d + 24, o6);
        wasm_v128_store(out + d + 28, o7);
    }
    for (; d + 4 <= hd; d += 4) {
        v128_t o = wasm_v128_load(out + d);
        for (uint32_t i = 0; i < n; i++) o = wasm_f32x4_add(o, wasm_f32x4_mul(wasm_f32x4_splat(e[i]), wasm_v128_load(V + (uint64_t)idx[i] * hd + d)));
        wasm_v128_store(out + d, o);
    }
    for (; d < hd; d++)
        for (uint32_t i = 0; i < n; i++) out[d] += e[i] * V[(uint64_t)idx[i] * hd + d];
}

static void att_scores(uint32_t n, uint32_t hd, const float *q, const void *k, int f16, const uint32_t *idx, float scale, float *s) {
    for (uint32_t i = 0; i < n; i++)
        s[i] = (f16 ? dot_f16(hd, (const uint16_t *)k + (uint64_t)idx[i] * hd, q) : dot_f32(hd, (const float *)k + (uint64_t)idx[i] * hd, q)) * scale;
}

static void scale(uint32_t n, float a, float *y) {
    v128_t va = wasm_f32x4_splat(a);
    uint32_t i = 0;
    for (; i + 4 <= n; i += 4) wasm_v128_store(y + i, wasm_f32x4_mul(wasm_v128_load(y + i), va));
    for (; i < n; i++) y[i] *= a;
}

/* wlm_expf_fast on four lanes: the same float operations in the same order;
 * lanes outside [WLM_EXPF_LO, WLM_EXPF_HI] are replaced by 0 or +inf after
 * the fact (what the scalar version returns early) */
static inline v128_t expf4(v128_t x) {
    v128_t shift = wasm_f32x4_splat(WLM_EXPF_SHIFT);
    v128_t t = wasm_f32x4_add(wasm_f32x4_mul(x, wasm_f32x4_splat(WLM_EXPF_LOG2E)), shift);
    v128_t k = wasm_f32x4_sub(t, shift);
    v128_t r = wasm_f32x4_sub(wasm_f32x4_sub(x, wasm_f32x4_mul(k, wasm_f32x4_splat(WLM_EXPF_LN2_HI))),
                              wasm_f32x4_mul(k, wasm_f32x4_splat(WLM_EXPF_LN2_LO)));
    v128_t one = wasm_f32x4_splat(1.0f);
    v128_t p = wasm_f32x4_splat(WLM_EXPF_C6);
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(WLM_EXPF_C5));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(WLM_EXPF_C4));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(WLM_EXPF_C3));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(WLM_EXPF_C2));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), one);
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), one);
    v128_t scale = wasm_i32x4_add(wasm_i32x4_shl(t, 23), wasm_i32x4_splat(127 << 23));
    v128_t e = wasm_f32x4_mul(p, scale);
    e = wasm_v128_andnot(e, wasm_f32x4_lt(x, wasm_f32x4_splat(WLM_EXPF_LO)));
    return wasm_v128_bitselect(wasm_f32x4_splat(__builtin_inff()), e, wasm_f32x4_gt(x, wasm_f32x4_splat(WLM_EXPF_HI)));
}

/* exp(y - m) of four logits, 0 for the excluded ones (NaN, -inf), +inf
 * taken as FLT_MAX (pmin(y, big) = big < y ? big : y) */
static inline v128_t exp_term4(v128_t y, v128_t m) {
    v128_t use = wasm_v128_and(wasm_f32x4_eq(y, y), wasm_f32x4_ne(y, wasm_f32x4_splat(-__builtin_inff())));
    v128_t x = wasm_f32x4_sub(wasm_f32x4_pmin(y, wasm_f32x4_splat(3.40282347e38f)), m);
    return wasm_v128_and(expf4(x), use);
}

/* The reference's eight running sums: a0 = (s0, s1), a1 = (s2, s3),
 * a2 = (s4, s5), a3 = (s6, s7). An excluded term adds +0, which leaves a
 * sum (never -0) unchanged, as skipping it does. */
static double sum_exp(uint32_t n, const float *y, float m) {
    v128_t a0 = wasm_f64x2_splat(0.0), a1 = a0, a2 = a0, a3 = a0;
    v128_t vm = wasm_f32x4_splat(m);
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v128_t e0 = exp_term4(wasm_v128_load(y + i), vm);
        v128_t e1 = exp_term4(wasm_v128_load(y + i + 4), vm);
        a0 = wasm_f64x2_add(a0, wasm_f64x2_promote_low_f32x4(e0));
        a1 = wasm_f64x2_add(a1, wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(e0, e0, 2, 3, 2, 3)));
        a2 = wasm_f64x2_add(a2, wasm_f64x2_promote_low_f32x4(e1));
        a3 = wasm_f64x2_add(a3, wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(e1, e1, 2, 3, 2, 3)));
    }
    double s[8];
    wasm_v128_store(s, a0);
    wasm_v128_store(s + 2, a1);
    wasm_v128_store(s + 4, a2);
    wasm_v128_store(s + 6, a3);
    return wlm_sum_exp_from(i, n, y, m, s);
}

/* Lane-wise pmax(m, pmin(y, FLT_MAX)): pmin(a, b) = b < a ? b : a takes
 * +inf to FLT_MAX and keeps NaN, pmax(m, z) = m < z ? z : m ignores a NaN or
 * -inf z. The maximum is exact, so folding the lanes in any order gives the
 * reference's value; only the sign of a zero maximum could differ, and both
 * return it as +0. */
static float logit_max(uint32_t n, const float *y) {
    v128_t big = wasm_f32x4_splat(3.40282347e38f);
    v128_t m0 = wasm_f32x4_splat(-__builtin_inff()), m1 = m0;
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        m0 = wasm_f32x4_pmax(m0, wasm_f32x4_pmin(wasm_v128_load(y + i), big));
        m1 = wasm_f32x4_pmax(m1, wasm_f32x4_pmin(wasm_v128_load(y + i + 4), big));
    }
    v128_t mm = wasm_f32x4_pmax(m0, m1);
    float m = wasm_f32x4_extract_lane(mm, 0), v;
    if ((v = wasm_f32x4_extract_lane(mm, 1)) > m) m = v;
    if ((v = wasm_f32x4_extract_lane(mm, 2)) > m) m = v;
    if ((v = wasm_f32x4_extract_lane(mm, 3)) > m) m = v;
    return wlm_logit_max_from(i, n, y, m);
}

static void exp_shift(uint32_t n, float *y, float m) {
    v128_t vm = wasm_f32x4_splat(m);
    uint32_t i = 0;
    for (; i + 4 <= n; i += 4) wasm_v128_store(y + i, expf4(wasm_f32x4_sub(wasm_v128_load(y + i), vm)));
    for (; i < n; i++) y[i] = wlm_expf_fast(y[i] - m);
}

/* wlm_silu(a) * b: a / (1 + exp(-a)), then the product, as the scalar loop */
static void silu_mul(uint32_t n, float *a, const float *b) {
    v128_t one = wasm_f32x4_splat(1.0f);
    uint32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        v128_t x = wasm_v128_load(a + i);
        v128_t s = wasm_f32x4_div(x, wasm_f32x4_add(one, expf4(wasm_f32x4_neg(x))));
        wasm_v128_store(a + i, wasm_f32x4_mul(s, wasm_v128_load(b + i)));
    }
    for (; i < n; i++) a[i] = wlm_silu(a[i]) * b[i];
}

/* wlm_quantize_row_q8_0, 4 lanes at a time, the same bits: amax of |v|
 * (lane maxima that skip NaN as the scalar compare does), the scale from
 * the scalar formula, then each v * id rounded half away from zero (trunc,
 * +1 where the fraction is >= 0.5) of |v * id| at most 127 (an infinite
 * v * id saturates; pmin keeps a NaN, which truncates to 0), the sign put
 * back, and narrowed */
static void quantize_q8_0(const float *x, block_q8_0 *y, uint32_t n) {
    const v128_t absm = wasm_i32x4_splat(0x7fffffff), half = wasm_f32x4_splat(0.5f), top = wasm_f32x4_splat(127.0f);
    for (uint32_t b = 0; b < n / QK8_0; b++) {
        const float *v = x + b * QK8_0;
        v128_t m = wasm_f32x4_splat(0);
        for (int j = 0; j < 8; j++) m = wasm_f32x4_pmax(m, wasm_v128_and(wasm_v128_load(v + 4 * j), absm));
        m = wasm_f32x4_pmax(m, wasm_i32x4_shuffle(m, m, 2, 3, 0, 1));
        m = wasm_f32x4_pmax(m, wasm_i32x4_shuffle(m, m, 1, 0, 3, 2));
        float amax = wasm_f32x4_extract_lane(m, 0);
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        y[b].d = wlm_f32_to_f16(d);
        v128_t vid = wasm_f32x4_splat(id), q[8];
        for (int j = 0; j < 8; j++) {
            v128_t p = wasm_f32x4_mul(wasm_v128_load(v + 4 * j), vid), a = wasm_f32x4_pmin(wasm_v128_and(p, absm), top);
            v128_t i = wasm_i32x4_trunc_sat_f32x4(a);
            i = wasm_i32x4_sub(i, wasm_f32x4_ge(wasm_f32x4_sub(a, wasm_f32x4_convert_i32x4(i)), half));
            q[j] = wasm_v128_bitselect(wasm_i32x4_neg(i), i, wasm_f32x4_lt(p, wasm_f32x4_splat(0)));
        }
        for (int h = 0; h < 2; h++)
            wasm_v128_store(y[b].qs + 16 * h, wasm_i8x16_narrow_i16x8(wasm_i16x8_narrow_i32x4(q[4 * h], q[4 * h + 1]), wasm_i16x8_narrow_i32x4(q[4 * h + 2], q[4 * h + 3])));
    }
}

/* the scalar row_sum (kernels_scalar.c): four accumulators are its 16
 * running sums, fold4 its fold, then the tail in order */
static float row_sum(uint32_t n, const float *x, int sq, float m) {
    v128_t a[4], vm = wasm_f32x4_splat(m);
    for (int j = 0; j < 4; j++) a[j] = wasm_f32x4_splat(0);
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 4; j++) {
            v128_t v = wasm_v128_load(x + i + 4 * j);
            if (sq) {
                v = wasm_f32x4_sub(v, vm);
                v = wasm_f32x4_mul(v, v);
            }
            a[j] = wasm_f32x4_add(a[j], v);
        }
    float r = fold4(a[0], a[1], a[2], a[3]);
    for (; i < n; i++) {
        float v = sq ? x[i] - m : x[i];
        r += sq ? v * v : v;
    }
    return r;
}

static void layer_norm(uint32_t n, const float *x, const float *w, const float *b, float eps, float *y, uint32_t lo, uint32_t hi) {
    float mean = row_sum(n, x, 0, 0.0f) / (float)n;
    float var = row_sum(n, x, 1, mean) / (float)n;
    float rstd = 1.0f / wlm_sqrtf(var + eps);
    v128_t vm = wasm_f32x4_splat(mean), vr = wasm_f32x4_splat(rstd);
    uint32_t i = lo;
    for (; i + 4 <= hi; i += 4) {
        v128_t v = wasm_f32x4_mul(wasm_f32x4_sub(wasm_v128_load(x + i), vm), vr);
        if (w) v = wasm_f32x4_mul(v, wasm_v128_load(w + i));
        if (b) v = wasm_f32x4_add(v, wasm_v128_load(b + i));
        wasm_v128_store(y + i, v);
    }
    for (; i < hi; i++) {
        float v = (x[i] - mean) * rstd;
        if (w) v = v * w[i];
        if (b) v = v + b[i];
        y[i] = v;
    }
}

float wlm_row_dot_f32_simd(uint32_t n, const void *w, const void *x) { return dot_f32(n, w, x); }
float wlm_row_dot_f16_simd(uint32_t n, const void *w, const void *x) { return dot_f16(n, w, x); }
float wlm_row_dot_bf16_simd(uint32_t n, const void *w, const void *x) { return dot_bf16(n, w, x); }
float wlm_row_dot_q8_0_simd(uint32_t n, const void *w, const void *x) { return dot_q8_0(n, w, x); }
float wlm_row_dot_q4_0_simd(uint32_t n, const void *w, const void *x) { return dot_q4_0(n, w, x); }

const wlm_kernels wlm_kernels_simd128 = {
#if WLM_RELAXED
    .name = "relaxed-simd",
#else
    .name = "simd128",
#endif
    .set = WLM_SET_SIMD,
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
    .dot_bf16 = dot_bf16,
    .dot_q8_0 = dot_q8_0,
    .dot_q4_0 = dot_q4_0,
    .gemm_i16x4 = gemm_i16x4,
    .unpack_i16x4 = unpack_i16x4,
#if WLM_RELAXED
    .gemm_q4_i8x4 = gemm_q4_i8x4,
    .unpack_q4_i8x4 = unpack_q4_i8x4,
#endif
    .gemv_q8_0 = gemv_q8_0,
    .gemv_q4_0 = gemv_q4_0,
    .gemv_q4g = gemv_q4g,
    .q4g_from_q4_0 = q4g_from_q4_0,
    .gemv_f16 = gemv_f16,
    .gemm_f32 = gemm_f32,
    .cvt_f16 = cvt_f16,
    .axpy_f32 = axpy_f32,
    .axpy_f16 = axpy_f16,
    .scale = scale,
#if WLM_RELAXED
    .act_q4g = act_i8x4_blocks,
    .gemm_q4gb = gemm_q4gb,
    .act_q4gb = act_q4gb_row,
#else
    .act_q4g = act_i16g,
#endif
    .kq_rows = wlm_kq_rows_simd, /* K-quants */
    .quantize_q8_0 = quantize_q8_0,
    .sum_exp = sum_exp,
    .logit_max = logit_max,
    .exp_shift = exp_shift,
    .silu_mul = silu_mul,
    .att_accum = att_accum,
    .att_scores = att_scores,
    .layer_norm = layer_norm,
};
#endif
