/* SIMD128 dot products for Q4_1, Q5_0, Q5_1 and the K-quants.
 *
 * Each kernel computes the same exact int32 block sums as its reference in
 * kquants.c (integer arithmetic, so the order of the additions does not
 * matter), then adds the block with the same float helper (wlm_kq_acc*,
 * kquants.h), block by block in order: results are bit-identical to the
 * reference. Products are formed in 16-bit lanes (|q| <= 63, |x| <= 128: no
 * overflow) and summed pairwise into 32-bit lanes by i32x4.dot_i16x8. */
#ifdef __wasm_simd128__
#include <wasm_simd128.h>
#include "internal.h"

/* exact int32x4 partial sums of 16 int8 x int8 products */
static inline v128_t dot16(v128_t a, v128_t b) {
    v128_t lo = wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(a), wasm_i16x8_extend_low_i8x16(b));
    v128_t hi = wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(a), wasm_i16x8_extend_high_i8x16(b));
    return wasm_i32x4_add(lo, hi);
}

/* exact int32x4 partial sums of 16 int8 */
static inline v128_t sum16(v128_t a) { return wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_extadd_pairwise_i8x16(a)); }

static inline int32_t hsum(v128_t v) {
    return wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1) +
           wasm_i32x4_extract_lane(v, 2) + wasm_i32x4_extract_lane(v, 3);
}

static inline float h2f(uint16_t h) { return wlm_f16_to_f32(h); }

/* the fifth bits of a Q5_0/Q5_1 block as 0/16 per byte: weights 0..15 and 16..31 */
static inline void q5_high(const uint8_t *qh, v128_t *h0, v128_t *h1) {
    uint32_t h; __builtin_memcpy(&h, qh, 4);
    v128_t v = wasm_i32x4_splat((int32_t)h);
    const v128_t bits = wasm_u8x16_make(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    v128_t b0 = wasm_i8x16_swizzle(v, wasm_u8x16_make(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
    v128_t b1 = wasm_i8x16_swizzle(v, wasm_u8x16_make(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const v128_t sixteen = wasm_i8x16_splat(16);
    *h0 = wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(b0, bits), wasm_i8x16_splat(0)), sixteen);
    *h1 = wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(b1, bits), wasm_i8x16_splat(0)), sixteen);
}

float wlm_kq_dot_q4_1_simd(uint32_t n, const void *wv, const void *xv) {
    const block_q4_1 *w = wv; const block_q8_0 *x = xv;
    const v128_t m4 = wasm_i8x16_splat(15);
    float r = 0;
    for (uint32_t b = 0; b < n / 32; b++) {
        v128_t q = wasm_v128_load(w[b].qs), x0 = wasm_v128_load(x[b].qs), x1 = wasm_v128_load(x[b].qs + 16);
        v128_t s = wasm_i32x4_add(dot16(wasm_v128_and(q, m4), x0), dot16(wasm_u8x16_shr(q, 4), x1));
        v128_t sx = wasm_i32x4_add(sum16(x0), sum16(x1));
        r = wlm_kq_acc_plus(r, h2f(w[b].d), h2f(w[b].m), h2f(x[b].d), hsum(s), hsum(sx));
    }
    return r;
}

float wlm_kq_dot_q5_0_simd(uint32_t n, const void *wv, const void *xv) {
    const block_q5_0 *w = wv; const block_q8_0 *x = xv;
    const v128_t m4 = wasm_i8x16_splat(15), off = wasm_i8x16_splat(16);
    float r = 0;
    for (uint32_t b = 0; b < n / 32; b++) {
        v128_t h0, h1;
        q5_high(w[b].qh, &h0, &h1);
        v128_t q = wasm_v128_load(w[b].qs);
        v128_t q0 = wasm_i8x16_sub(wasm_v128_or(wasm_v128_and(q, m4), h0), off);
        v128_t q1 = wasm_i8x16_sub(wasm_v128_or(wasm_u8x16_shr(q, 4), h1), off);
        v128_t s = wasm_i32x4_add(dot16(q0, wasm_v128_load(x[b].qs)), dot16(q1, wasm_v128_load(x[b].qs + 16)));
        r = wlm_kq_acc(r, h2f(w[b].d), h2f(x[b].d), hsum(s));
    }
    return r;
}

float wlm_kq_dot_q5_1_simd(uint32_t n, const void *wv, const void *xv) {
    const block_q5_1 *w = wv; const block_q8_0 *x = xv;
    const v128_t m4 = wasm_i8x16_splat(15);
    float r = 0;
    for (uint32_t b = 0; b < n / 32; b++) {
        v128_t h0, h1;
        q5_high(w[b].qh, &h0, &h1);
        v128_t q = wasm_v128_load(w[b].qs), x0 = wasm_v128_load(x[b].qs), x1 = wasm_v128_load(x[b].qs + 16);
        v128_t q0 = wasm_v128_or(wasm_v128_and(q, m4), h0), q1 = wasm_v128_or(wasm_u8x16_shr(q, 4), h1);
        v128_t s = wasm_i32x4_add(dot16(q0, x0), dot16(q1, x1));
        v128_t sx = wasm_i32x4_add(sum16(x0), sum16(x1));
        r = wlm_kq_acc_plus(r, h2f(w[b].d), h2f(w[b].m), h2f(x[b].d), hsum(s), hsum(sx));
    }
    return r;
}

float wlm_kq_dot_q2_k_simd(uint32_t n, const void *wv, const void *xv) {
    const block_q2_k *w = wv; const block_q8_k *x = xv;
    const v128_t m2 = wasm_i8x16_splat(3), m4 = wasm_i16x8_splat(15);
    float r = 0;
    for (uint32_t b = 0; b < n / QK_K; b++) {
        const int8_t *xq = x[b].qs;
        v128_t acc = wasm_i32x4_splat(0);
        for (int h = 0; h < 2; h++) {
            v128_t Q0 = wasm_v128_load(w[b].qs + 32 * h), Q1 = wasm_v128_load(w[b].qs + 32 * h + 16);
            for (int k = 0; k < 4; k++) {
                int j = 8 * h + 2 * k; /* sub-blocks j (l 0..15) and j+1 (l 16..31) */
                v128_t a = wasm_v128_and(wasm_u8x16_shr(Q0, 2 * k), m2), c = wasm_v128_and(wasm_u8x16_shr(Q1, 2 * k), m2);
                const int8_t *xs = xq + 128 * h + 32 * k;
                acc = wasm_i32x4_add(acc, wasm_i32x4_mul(dot16(a, wasm_v128_load(xs)), wasm_i32x4_splat(w[b].scales[j] & 15)));
                acc = wasm_i32x4_add(acc, wasm_i32x4_mul(dot16(c, wasm_v128_load(xs + 16)), wasm_i32x4_splat(w[b].scales[j + 1] & 15)));
            }
        }
        /* min term: sum_j (scales[j] >> 4) * bsums[j] */
        v128_t sc = wasm_v128_load(w[b].scales);
        v128_t mn0 = wasm_v128_and(wasm_u16x8_shr(wasm_u16x8_extend_low_u8x16(sc), 4), m4);
        v128_t mn1 = wasm_v128_and(wasm_u16x8_shr(wasm_u16x8_extend_high_u8x16(sc), 4), m4);
        v128_t sm = wasm_i32x4_add(wasm_i32x4_dot_i16x8(mn0, wasm_v128_load(x[b].bsums)),
                                   wasm_i32x4_dot_i16x8(mn1, wasm_v128_load(x[b].bsums + 8)));
        r = wlm_kq_acc_minus(r, h2f(w[b].d), h2f(w[b].dmin), x[b].d, hsum(acc), hsum(sm));
    }
    return r;
}

float wlm_kq_dot_q3_k_simd(uint32_t n, const void *wv, const void *xv) {
    const block_q3_k *w = wv; const block_q8_k *x = xv;
    const v128_t m2 = wasm_i8x16_splat(3), four = wasm_i8x16_splat(4), zero = wasm_i8x16_splat(0);
    float r = 0;
    for (uint32_t b = 0; b < n / QK_K; b++) {
        const int8_t *xq = x[b].qs;
        int32_t sc[16];
        for (int j = 0; j < 16; j++) sc[j] = wlm_kq_scale_q3(w[b].scales, j) - 32;
        v128_t H0 = wasm_v128_load(w[b].hmask), H1 = wasm_v128_load(w[b].hmask + 16);
        v128_t acc = wasm_i32x4_splat(0);
        for (int h = 0; h < 2; h++) {
            v128_t Q0 = wasm_v128_load(w[b].qs + 32 * h), Q1 = wasm_v128_load(w[b].qs + 32 * h + 16);
            for (int k = 0; k < 4; k++) {
                v128_t bit = wasm_i8x16_splat((int8_t)(1 << (4 * h + k)));
                /* 4 where the hmask bit is clear, 0 where set */
                v128_t s0 = wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(H0, bit), zero), four);
                v128_t s1 = wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(H1, bit), zero), four);
                v128_t a = wasm_i8x16_sub(wasm_v128_and(wasm_u8x16_shr(Q0, 2 * k), m2), s0);
                v128_t c = wasm_i8x16_sub(wasm_v128_and(wasm_u8x16_shr(Q1, 2 * k), m2), s1);
                int j = 8 * h + 2 * k;
                const int8_t *xs = xq + 128 * h + 32 * k;
                acc = wasm_i32x4_add(acc, wasm_i32x4_mul(dot16(a, wasm_v128_load(xs)), wasm_i32x4_splat(sc[j])));
                acc = wasm_i32x4_add(acc, wasm_i32x4_mul(dot16(c, wasm_v128_load(xs + 16)), wasm_i32x4_splat(sc[j + 1])));
            }
        }
        r = wlm_kq_acc(r, h2f(w[b].d), x[b].d, hsum(acc));
    }
    return r;
}

/* Q4_K (qh == NULL) and Q5_K */
static inline float dot_q45_k(uint32_t n, const uint8_t *base, uint32_t stride, int has_qh, const block_q8_k *x) {
    const v128_t m4 = wasm_i8x16_splat(15), sixteen = wasm_i8x16_splat(16), zero = wasm_i8x16_splat(0);
    float r = 0;
    for (uint32_t b = 0; b < n / QK_K; b++) {
        const uint8_t *B = base + (uint64_t)b * stride;
        uint16_t d, dmin; __builtin_memcpy(&d, B, 2); __builtin_memcpy(&dmin, B + 2, 2);
        const uint8_t *scales = B + 4, *qh = B + 16, *qs = has_qh ? B + 48 : B + 16;
        const int8_t *xq = x[b].qs;
        int sc[8], mn[8];
        for (int j = 0; j < 8; j++) wlm_kq_scale_min_k4(scales, j, &sc[j], &mn[j]);
        v128_t QH0 = zero, QH1 = zero;
        if (has_qh) { QH0 = wasm_v128_load(qh); QH1 = wasm_v128_load(qh + 16); }
        v128_t acc = wasm_i32x4_splat(0);
        for (int c = 0; c < 4; c++) {
            v128_t A = wasm_v128_load(qs + 32 * c), C = wasm_v128_load(qs + 32 * c + 16);
            v128_t l0 = wasm_v128_and(A, m4), l1 = wasm_v128_and(C, m4);
            v128_t h0 = wasm_u8x16_shr(A, 4), h1 = wasm_u8x16_shr(C, 4);
            if (has_qh) {
                v128_t bl = wasm_i8x16_splat((int8_t)(1 << (2 * c))), bh = wasm_i8x16_splat((int8_t)(1 << (2 * c + 1)));
                l0 = wasm_v128_or(l0, wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(QH0, bl), zero), sixteen));
                l1 = wasm_v128_or(l1, wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(QH1, bl), zero), sixteen));
                h0 = wasm_v128_or(h0, wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(QH0, bh), zero), sixteen));
                h1 = wasm_v128_or(h1, wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(QH1, bh), zero), sixteen));
            }
            const int8_t *xs = xq + 64 * c;
            v128_t slo = wasm_i32x4_add(dot16(l0, wasm_v128_load(xs)), dot16(l1, wasm_v128_load(xs + 16)));
            v128_t shi = wasm_i32x4_add(dot16(h0, wasm_v128_load(xs + 32)), dot16(h1, wasm_v128_load(xs + 48)));
            acc = wasm_i32x4_add(acc, wasm_i32x4_mul(slo, wasm_i32x4_splat(sc[2 * c])));
            acc = wasm_i32x4_add(acc, wasm_i32x4_mul(shi, wasm_i32x4_splat(sc[2 * c + 1])));
        }
        /* min term: sum_j m_j * (bsums[2j] + bsums[2j+1]) */
        v128_t mv = wasm_i16x8_make((int16_t)mn[0], (int16_t)mn[0], (int16_t)mn[1], (int16_t)mn[1],
                                    (int16_t)mn[2], (int16_t)mn[2], (int16_t)mn[3], (int16_t)mn[3]);
        v128_t mw = wasm_i16x8_make((int16_t)mn[4], (int16_t)mn[4], (int16_t)mn[5], (int16_t)mn[5],
                                    (int16_t)mn[6], (int16_t)mn[6], (int16_t)mn[7], (int16_t)mn[7]);
        v128_t sm = wasm_i32x4_add(wasm_i32x4_dot_i16x8(mv, wasm_v128_load(x[b].bsums)),
                                   wasm_i32x4_dot_i16x8(mw, wasm_v128_load(x[b].bsums + 8)));
        r = wlm_kq_acc_minus(r, h2f(d), h2f(dmin), x[b].d, hsum(acc), hsum(sm));
    }
    return r;
}

float wlm_kq_dot_q4_k_simd(uint32_t n, const void *w, const void *x) { return dot_q45_k(n, w, sizeof(block_q4_k), 0, x); }
float wlm_kq_dot_q5_k_simd(uint32_t n, const void *w, const void *x) { return dot_q45_k(n, w, sizeof(block_q5_k), 1, x); }

float wlm_kq_dot_q6_k_simd(uint32_t n, const void *wv, const void *xv) {
    const block_q6_k *w = wv; const block_q8_k *x = xv;
    const v128_t m4 = wasm_i8x16_splat(15), m30 = wasm_i8x16_splat(0x30), off = wasm_i8x16_splat(32);
    float r = 0;
    for (uint32_t b = 0; b < n / QK_K; b++) {
        const int8_t *xq = x[b].qs, *sc = w[b].scales;
        v128_t acc = wasm_i32x4_splat(0);
        for (int h = 0; h < 2; h++) {
            for (int v = 0; v < 2; v++) { /* l = 16v .. 16v+15 */
                v128_t L0 = wasm_v128_load(w[b].ql + 64 * h + 16 * v), L1 = wasm_v128_load(w[b].ql + 64 * h + 32 + 16 * v);
                v128_t H = wasm_v128_load(w[b].qh + 32 * h + 16 * v);
                v128_t q0 = wasm_v128_or(wasm_v128_and(L0, m4), wasm_v128_and(wasm_i8x16_shl(H, 4), m30));
                v128_t q1 = wasm_v128_or(wasm_v128_and(L1, m4), wasm_v128_and(wasm_i8x16_shl(H, 2), m30));
                v128_t q2 = wasm_v128_or(wasm_u8x16_shr(L0, 4), wasm_v128_and(H, m30));
                v128_t q3 = wasm_v128_or(wasm_u8x16_shr(L1, 4), wasm_v128_and(wasm_u8x16_shr(H, 2), m30));
                const int8_t *xs = xq + 128 * h + 16 * v;
                const int8_t *s = sc + 8 * h + v; /* element 128h + 32k + 16v + l: scale 8h + 2k + v */
                acc = wasm_i32x4_add(acc, wasm_i32x4_mul(dot16(wasm_i8x16_sub(q0, off), wasm_v128_load(xs)), wasm_i32x4_splat(s[0])));
                acc = wasm_i32x4_add(acc, wasm_i32x4_mul(dot16(wasm_i8x16_sub(q1, off), wasm_v128_load(xs + 32)), wasm_i32x4_splat(s[2])));
                acc = wasm_i32x4_add(acc, wasm_i32x4_mul(dot16(wasm_i8x16_sub(q2, off), wasm_v128_load(xs + 64)), wasm_i32x4_splat(s[4])));
                acc = wasm_i32x4_add(acc, wasm_i32x4_mul(dot16(wasm_i8x16_sub(q3, off), wasm_v128_load(xs + 96)), wasm_i32x4_splat(s[6])));
            }
        }
        r = wlm_kq_acc(r, h2f(w[b].d), x[b].d, hsum(acc));
    }
    return r;
}
#endif
