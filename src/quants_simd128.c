/* SIMD128 dot products for Q4_1, Q5_0, Q5_1 and the K-quants.
 *
 * Each kernel computes the same exact int32 block sums as its reference in
 * quants_scalar.c (integer arithmetic, so the order of the additions does not
 * matter), then adds the block with the same float helper (wlm_kq_acc*,
 * quants.h), block by block in order: results are bit-identical to the
 * reference. Products are formed in 16-bit lanes (|q| <= 63, |x| <= 128: no
 * overflow) and summed pairwise into 32-bit lanes by i32x4.dot_i16x8. */
#include "quants.h"
#include "kernels.h"
#if WLM_SIMD128
#include "simd128.h"

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
    uint32_t h;
    __builtin_memcpy(&h, qh, 4);
    v128_t v = wasm_i32x4_splat((int32_t)h);
    const v128_t bits = wasm_u8x16_make(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    v128_t b0 = wasm_i8x16_swizzle(v, wasm_u8x16_make(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
    v128_t b1 = wasm_i8x16_swizzle(v, wasm_u8x16_make(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const v128_t sixteen = wasm_i8x16_splat(16);
    *h0 = wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(b0, bits), wasm_i8x16_splat(0)), sixteen);
    *h1 = wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(b1, bits), wasm_i8x16_splat(0)), sixteen);
}

float wlm_kq_dot_q4_1_simd(uint32_t n, const void *wv, const void *xv) {
    const block_q4_1 *w = wv;
    const block_q8_0 *x = xv;
    const v128_t m4 = wasm_i8x16_splat(15);
    float r = 0;
    for (uint32_t b = 0; b < n / 32; b++) {
        v128_t q = wasm_v128_load(w[b].qs), x0 = wasm_v128_load(x[b].qs), x1 = wasm_v128_load(x[b].qs + 16);
        v128_t s = wasm_i32x4_add(dot16(wasm_v128_and(q, m4), x0), dot16(hi_nibbles(q), x1));
        v128_t sx = wasm_i32x4_add(sum16(x0), sum16(x1));
        r = wlm_kq_acc_plus(r, h2f(w[b].d), h2f(w[b].m), h2f(x[b].d), hsum(s), hsum(sx));
    }
    return r;
}

float wlm_kq_dot_q5_0_simd(uint32_t n, const void *wv, const void *xv) {
    const block_q5_0 *w = wv;
    const block_q8_0 *x = xv;
    const v128_t m4 = wasm_i8x16_splat(15), off = wasm_i8x16_splat(16);
    float r = 0;
    for (uint32_t b = 0; b < n / 32; b++) {
        v128_t h0, h1;
        q5_high(w[b].qh, &h0, &h1);
        v128_t q = wasm_v128_load(w[b].qs);
        v128_t q0 = wasm_i8x16_sub(wasm_v128_or(wasm_v128_and(q, m4), h0), off);
        v128_t q1 = wasm_i8x16_sub(wasm_v128_or(hi_nibbles(q), h1), off);
        v128_t s = wasm_i32x4_add(dot16(q0, wasm_v128_load(x[b].qs)), dot16(q1, wasm_v128_load(x[b].qs + 16)));
        r = wlm_kq_acc(r, h2f(w[b].d), h2f(x[b].d), hsum(s));
    }
    return r;
}

float wlm_kq_dot_q5_1_simd(uint32_t n, const void *wv, const void *xv) {
    const block_q5_1 *w = wv;
    const block_q8_0 *x = xv;
    const v128_t m4 = wasm_i8x16_splat(15);
    float r = 0;
    for (uint32_t b = 0; b < n / 32; b++) {
        v128_t h0, h1;
        q5_high(w[b].qh, &h0, &h1);
        v128_t q = wasm_v128_load(w[b].qs), x0 = wasm_v128_load(x[b].qs), x1 = wasm_v128_load(x[b].qs + 16);
        v128_t q0 = wasm_v128_or(wasm_v128_and(q, m4), h0), q1 = wasm_v128_or(hi_nibbles(q), h1);
        v128_t s = wasm_i32x4_add(dot16(q0, x0), dot16(q1, x1));
        v128_t sx = wasm_i32x4_add(sum16(x0), sum16(x1));
        r = wlm_kq_acc_plus(r, h2f(w[b].d), h2f(w[b].m), h2f(x[b].d), hsum(s), hsum(sx));
    }
    return r;
}

float wlm_kq_dot_q2_k_simd(uint32_t n, const void *wv, const void *xv) {
    const block_q2_k *w = wv;
    const block_q8_k *x = xv;
    const v128_t m2 = wasm_i8x16_splat(3), m4 = wasm_i16x8_splat(15);
    float r = 0;
    for (uint32_t b = 0; b < n / QK_K; b++) {
        const int8_t *xq = x[b].qs;
        v128_t acc = wasm_i32x4_splat(0);
        for (int h = 0; h < 2; h++) {
            v128_t Q0 = wasm_v128_load(w[b].qs + 32 * h), Q1 = wasm_v128_load(w[b].qs + 32 * h + 16);
            for (int k = 0; k < 4; k++) {
                int j = 8 * h + 2 * k; /* sub-blocks j (l 0..15) and j+1 (l 16..31) */
                v128_t a = wasm_v128_and(wasm_u16x8_shr(Q0, 2 * k), m2), c = wasm_v128_and(wasm_u16x8_shr(Q1, 2 * k), m2);
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
    const block_q3_k *w = wv;
    const block_q8_k *x = xv;
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
                v128_t a = wasm_i8x16_sub(wasm_v128_and(wasm_u16x8_shr(Q0, 2 * k), m2), s0);
                v128_t c = wasm_i8x16_sub(wasm_v128_and(wasm_u16x8_shr(Q1, 2 * k), m2), s1);
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

/* Q5_K (the old generic loop; Q4_K has its own kernels below) */
static inline float dot_q45_k(uint32_t n, const uint8_t *base, uint32_t stride, int has_qh, const block_q8_k *x) {
    const v128_t m4 = wasm_i8x16_splat(15), sixteen = wasm_i8x16_splat(16), zero = wasm_i8x16_splat(0);
    float r = 0;
    for (uint32_t b = 0; b < n / QK_K; b++) {
        const uint8_t *B = base + (uint64_t)b * stride;
        uint16_t d, dmin;
        __builtin_memcpy(&d, B, 2);
        __builtin_memcpy(&dmin, B + 2, 2);
        const uint8_t *scales = B + 4, *qh = B + 16, *qs = has_qh ? B + 48 : B + 16;
        const int8_t *xq = x[b].qs;
        int sc[8], mn[8];
        for (int j = 0; j < 8; j++) wlm_kq_scale_min_k4(scales, j, &sc[j], &mn[j]);
        v128_t QH0 = zero, QH1 = zero;
        if (has_qh) {
            QH0 = wasm_v128_load(qh);
            QH1 = wasm_v128_load(qh + 16);
        }
        v128_t acc = wasm_i32x4_splat(0);
        for (int c = 0; c < 4; c++) {
            v128_t A = wasm_v128_load(qs + 32 * c), C = wasm_v128_load(qs + 32 * c + 16);
            v128_t l0 = wasm_v128_and(A, m4), l1 = wasm_v128_and(C, m4);
            v128_t h0 = hi_nibbles(A), h1 = hi_nibbles(C);
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

float wlm_kq_dot_q5_k_simd(uint32_t n, const void *w, const void *x) { return dot_q45_k(n, w, sizeof(block_q5_k), 1, x); }

/* ---- Q4_K and Q6_K: fast kernels --------------------------------------------------
 *
 * Integer sums are exact, so any order gives the reference's s (and sm); the
 * float step per block is the reference's wlm_kq_acc*: results equal the
 * reference bit for bit.
 *
 * Decode (one pass over each weight): the activations are widened to int16
 * once per token (a row dot widens block by block) and the weights are
 * unpacked in 16-bit lanes. Q4_K: products q*x by i16x8.mul (|q| <= 15,
 * |x| <= 128, 4 products per lane: |.| <= 7680), then one i32x4.dot_i16x8
 * against the splatted sub-block scale widens and scales. Q6_K: the 6-bit
 * values are assembled in byte lanes and used unsigned (u = q + 32, 0..63):
 * products u*x by i16x8.mul (two a lane, |.| <= 16128), then the same
 * i32x4.dot_i16x8 against the scale; the offset is taken off once per block:
 * s = sum_j sc_j (sum u x) - 32 sum_j sc_j bsums_j.
 *
 * Prefill (rows x tokens): each block of a weight row is unpacked once per
 * tile of up to 64 tokens into int16 values already multiplied by their
 * sub-block scale (Q4_K: q*sc <= 945; Q6_K: (q-32)*sc, |.| <= 4096); then 4
 * tokens at a time run loads, int8 -> int16 widening and i32x4.dot_i16x8
 * against each weight vector loaded once. The relaxed build has its own
 * decode block sums and prefill (bytes and relaxed dot products, below). */

/* The 8 scales (bytes 0..7) and 8 mins (bytes 8..15) of a Q4_K/Q5_K scales[12]
 * field, four bytes at a time (the layout of wlm_kq_scale_min_k4). */
static inline v128_t k4_scales_mins(const uint8_t *q) {
    /* u32 lanes a, b, c = bytes 0-3, 4-7, 8-11 (the 16-byte load stays in
     * the block: the weights follow the scales) */
    v128_t v = wasm_v128_load(q);
    v128_t t = wasm_i32x4_shuffle(v, wasm_u32x4_shr(v, 4), 0, 2, 1, 6);                   /* a, c, b, c >> 4 */
    v128_t h = wasm_i32x4_shuffle(wasm_u32x4_shr(v, 2), wasm_i32x4_splat(0), 4, 0, 4, 1); /* 0, a >> 2, 0, b >> 2 */
    return wasm_v128_or(wasm_v128_and(t, wasm_u32x4_make(0x3f3f3f3fu, 0x0f0f0f0fu, 0x3f3f3f3fu, 0x0f0f0f0fu)),
                        wasm_v128_and(h, wasm_i32x4_splat(0x30303030)));
}

/* A Q4_K block's 8 sub-block scales as int16 into scs[0..7]; returns
 * k4_scales_mins (scales in bytes 0..7, mins in 8..15) */
static inline v128_t q4k_scales(const block_q4_k *B, int16_t *scs) {
    v128_t sm = k4_scales_mins(B->scales);
    wasm_v128_store(scs, wasm_u16x8_extend_low_u8x16(sm));
    return sm;
}

/* A Q6_K block's 16 signed sub-block scales as int16 into scs[0..15], also
 * returned as *lo (0..7) and *hi (8..15) */
static inline void q6k_scales(const block_q6_k *B, int16_t *scs, v128_t *lo, v128_t *hi) {
    v128_t S = wasm_v128_load(B->scales);
    *lo = wasm_i16x8_extend_low_i8x16(S);
    *hi = wasm_i16x8_extend_high_i8x16(S);
    wasm_v128_store(scs, *lo);
    wasm_v128_store(scs + 8, *hi);
}

/* the min term of a Q4_K block: sum_j m_j * (bsums[2j] + bsums[2j+1]), from
 * the mins as int16 lanes */
static inline int32_t q4k_min_term(v128_t mn, const int16_t *bsums) {
    v128_t m01 = wasm_i16x8_shuffle(mn, mn, 0, 0, 1, 1, 2, 2, 3, 3), m23 = wasm_i16x8_shuffle(mn, mn, 4, 4, 5, 5, 6, 6, 7, 7);
    return hsum(wasm_i32x4_add(wasm_i32x4_dot_i16x8(m01, wasm_v128_load(bsums)), wasm_i32x4_dot_i16x8(m23, wasm_v128_load(bsums + 8))));
}

/* The 64 values of a Q6_K block at positions 16v .. 16v+15 of each of its
 * four 32-value groups of half h, unsigned (u = q + 32, 0..63) in byte
 * lanes: u[k] holds sub-block 8h + 2k + v. L = ql + 64h + 16v, H = qh +
 * 32h + 16v. 16-bit shifts; the masks drop the bits that cross from the
 * neighbouring byte. */
static inline __attribute__((always_inline)) void q6_bytes(const uint8_t *L, const uint8_t *Hp, v128_t u[4]) {
    const v128_t m4 = wasm_i8x16_splat(15), m30 = wasm_i8x16_splat(0x30);
    v128_t L0 = wasm_v128_load(L), L1 = wasm_v128_load(L + 32);
    v128_t H = wasm_v128_load(Hp);
    u[0] = wasm_v128_or(wasm_v128_and(L0, m4), wasm_v128_and(wasm_i16x8_shl(H, 4), m30));
    u[1] = wasm_v128_or(wasm_v128_and(L1, m4), wasm_v128_and(wasm_i16x8_shl(H, 2), m30));
    u[2] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(L0, 4), m4), wasm_v128_and(H, m30));
    u[3] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(L1, 4), m4), wasm_v128_and(wasm_u16x8_shr(H, 2), m30));
}

/* The four (h, v) steps of a Q6_K block in order (0,0) (0,1) (1,0) (1,1)
 * walk ql by 16, 48, 16, qh by 16, the activations by 16, 112, 16 and the
 * scales by 1, 7, 1: pointers advanced so (V8 keeps a loop's address
 * arithmetic as written; the index form cost a quarter of the loop). */
#define Q6_NEXT(i, L, H, x, sp) ((L) += ((i)&1) ? 48 : 16, (H) += 16, (x) += ((i)&1) ? 112 : 16, (sp) += ((i)&1) ? 7 : 1)

/* Q6_K's offset term sum_j sc_j bsums_j, as i32x4 partial sums, from the 16
 * scales as int16 (sc_lo: 0..7, sc_hi: 8..15) */
static inline v128_t q6_corr(v128_t sc_lo, v128_t sc_hi, const int16_t *bsums) {
    return wasm_i32x4_add(wasm_i32x4_dot_i16x8(sc_lo, wasm_v128_load(bsums)), wasm_i32x4_dot_i16x8(sc_hi, wasm_v128_load(bsums + 8)));
}

/* two i32x4 partial sums a, b reduced by pairs: lanes 0 + 1 = sum of a,
 * lanes 2 + 3 = sum of b (the block sums the decode rows return) */
static inline v128_t pair_halves(v128_t a, v128_t b) {
    return wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 1, 4, 5), wasm_i32x4_shuffle(a, b, 2, 3, 6, 7));
}

/* ---- decode: one pass over each weight row ---------------------------------------
 * The activation form of the decode rows (kx_t, KX_STEP values a block):
 * SIMD128 widens a token's int8 values to int16 once for all rows
 * (widen_token); relaxed SIMD takes the Q8_K values where they are. */
#if WLM_RELAXED
typedef int8_t kx_t;
#define KX_STEP sizeof(block_q8_k)
#else
typedef int16_t kx_t;
#define KX_STEP QK_K
#endif

/* The sums of each activation block's sub-blocks of 32 (bsums[2j] +
 * bsums[2j+1], |.| <= 4096: int16), 8 a block: Q4_K's min term takes them. */
static void bsum_pairs(uint32_t nb, const block_q8_k *xb, int16_t *bp) {
    for (uint32_t b = 0; b < nb; b++) {
        v128_t p0 = wasm_i32x4_extadd_pairwise_i16x8(wasm_v128_load(xb[b].bsums));
        v128_t p1 = wasm_i32x4_extadd_pairwise_i16x8(wasm_v128_load(xb[b].bsums + 8));
        wasm_v128_store(bp + 8 * b, wasm_i16x8_narrow_i32x4(p0, p1));
    }
}

#if !WLM_RELAXED
/* 256 int8 -> int16 */
static inline void widen_256(const int8_t *q, int16_t *out) {
    for (int i = 0; i < QK_K; i += 16) {
        v128_t v = wasm_v128_load(q + i);
        wasm_v128_store(out + i, wasm_i16x8_extend_low_i8x16(v));
        wasm_v128_store(out + i + 8, wasm_i16x8_extend_high_i8x16(v));
    }
}

/* a token's activations widened to int16, 256 a block */
static void widen_token(uint32_t nb, const block_q8_k *xb, int16_t *xs) {
    for (uint32_t b = 0; b < nb; b++) widen_256(xb[b].qs, xs + b * QK_K);
}

/* The exact integer sums of one Q4_K block against one token (its
 * 256 values widened to int16, x, and bsum_pairs' 8 sums bp), in pairs of partial sums:
 * lanes 0 + 1 = s = sum_j sc_j (sum q x)_j, lanes 2 + 3 = the min term
 * sum_j m_j (bsums pair j). Products q*x by i16x8.mul (|q| <= 15,
 * |x| <= 128, 4 products a lane: |.| <= 7680), then one i32x4.dot_i16x8
 * against the sub-block scale widens and scales them. Built for V8: one loop
 * iteration per 64 weights (a whole block's loads in one body went to the
 * stack), the scales splatted from memory (a lane picked by a loop index
 * became a jump table). */
static inline __attribute__((always_inline)) v128_t q4k_sums(const block_q4_k *B, const int16_t *x, const int16_t *bp) {
    const v128_t m4 = wasm_i16x8_splat(15);
    int16_t scs[8] __attribute__((aligned(16)));
    v128_t sm = q4k_scales(B, scs);
    v128_t acc = wasm_i32x4_splat(0);
    const uint8_t *q = B->qs;
    const int16_t *sp = scs;
#pragma clang loop unroll(disable)
    for (int c = 0; c < 4; c++, q += 32, x += 64, sp += 2) { /* sub-blocks 2c (low nibbles), 2c+1 (high) */
        v128_t A = wasm_v128_load(q), C = wasm_v128_load(q + 16);
        v128_t a0 = wasm_u16x8_extend_low_u8x16(A), a1 = wasm_u16x8_extend_high_u8x16(A);
        v128_t c0 = wasm_u16x8_extend_low_u8x16(C), c1 = wasm_u16x8_extend_high_u8x16(C);
        v128_t lo = wasm_i16x8_add(wasm_i16x8_add(wasm_i16x8_mul(wasm_v128_and(a0, m4), wasm_v128_load(x)),
                                                  wasm_i16x8_mul(wasm_v128_and(a1, m4), wasm_v128_load(x + 8))),
                                   wasm_i16x8_add(wasm_i16x8_mul(wasm_v128_and(c0, m4), wasm_v128_load(x + 16)),
                                                  wasm_i16x8_mul(wasm_v128_and(c1, m4), wasm_v128_load(x + 24))));
        v128_t hi = wasm_i16x8_add(wasm_i16x8_add(wasm_i16x8_mul(wasm_u16x8_shr(a0, 4), wasm_v128_load(x + 32)),
                                                  wasm_i16x8_mul(wasm_u16x8_shr(a1, 4), wasm_v128_load(x + 40))),
                                   wasm_i16x8_add(wasm_i16x8_mul(wasm_u16x8_shr(c0, 4), wasm_v128_load(x + 48)),
                                                  wasm_i16x8_mul(wasm_u16x8_shr(c1, 4), wasm_v128_load(x + 56))));
        acc = wasm_i32x4_add(acc, wasm_i32x4_add(wasm_i32x4_dot_i16x8(lo, wasm_v128_load16_splat(sp)), wasm_i32x4_dot_i16x8(hi, wasm_v128_load16_splat(sp + 1))));
    }
    v128_t mt = wasm_i32x4_dot_i16x8(wasm_u16x8_extend_high_u8x16(sm), wasm_v128_load(bp));
    return pair_halves(acc, mt);
}

/* The exact integer sums of one Q6_K block against one token's 256 values x
 * widened to int16 (xb for its bsums), in pairs of partial sums: lanes 0 + 1
 * = sum_j sc_j (sum u x)_j, lanes 2 + 3 = sum_j sc_j bsums_j. The values
 * are used unsigned (u = q + 32, 0..63) and the offset is taken off once per
 * block: s = (lanes 0 + 1) - 32 (lanes 2 + 3). They are assembled 64 at a
 * time in byte lanes (q6_bytes) and widened; products u*x by i16x8.mul, two
 * a lane (|.| <= 2 * 63 * 128), then i32x4.dot_i16x8 against the splatted
 * sub-block scale. One loop iteration per 64 weights, as q4k_sums. */
static inline __attribute__((always_inline)) v128_t q6k_sums(const block_q6_k *B, const int16_t *xs, const block_q8_k *xb) {
    int16_t scs[16] __attribute__((aligned(16)));
    v128_t sc_lo, sc_hi;
    q6k_scales(B, scs, &sc_lo, &sc_hi);
    v128_t acc = wasm_i32x4_splat(0);
    const uint8_t *L = B->ql, *H = B->qh;
    const int16_t *x = xs, *sp = scs;
#pragma clang loop unroll(disable)
    for (int i = 0; i < 4; i++, Q6_NEXT(i - 1, L, H, x, sp)) { /* h = i / 2, v = i % 2: positions l = 16v .. 16v+15, sub-blocks 8h + 2k + v */
        v128_t u[4];
        q6_bytes(L, H, u);
#define Q6_SUB(u, k) wasm_i32x4_dot_i16x8(wasm_i16x8_add(wasm_i16x8_mul(wasm_u16x8_extend_low_u8x16(u), wasm_v128_load(x + 32 * (k))),       \
                                                         wasm_i16x8_mul(wasm_u16x8_extend_high_u8x16(u), wasm_v128_load(x + 32 * (k) + 8))), \
                                          wasm_v128_load16_splat(sp + 2 * (k)))
        acc = wasm_i32x4_add(acc, wasm_i32x4_add(wasm_i32x4_add(Q6_SUB(u[0], 0), Q6_SUB(u[1], 1)), wasm_i32x4_add(Q6_SUB(u[2], 2), Q6_SUB(u[3], 3))));
#undef Q6_SUB
    }
    return pair_halves(acc, q6_corr(sc_lo, sc_hi, xb->bsums));
}

#else
/* Relaxed SIMD: i16x8.relaxed_dot_i8x16_i7x16_s takes the int8 activations
 * directly (first operand) against weights in 0..63 (second operand: 7-bit,
 * where every implementation gives the exact pairwise sum; at most
 * 2 * 63 * 128 = 16128, no saturation). Byte lanes are split with 16-bit
 * shifts and masks that drop the bits crossing from the neighbouring byte. */
static inline v128_t rdot(v128_t x, v128_t q) { return wasm_i16x8_relaxed_dot_i8x16_i7x16(x, q); }

/* q4k_sums of the SIMD128 build, the int8 activations x taken directly */
static inline __attribute__((always_inline)) v128_t q4k_sums(const block_q4_k *B, const int8_t *x, const int16_t *bp) {
    const v128_t m4 = wasm_i8x16_splat(15);
    int16_t scs[8] __attribute__((aligned(16)));
    v128_t sm = q4k_scales(B, scs);
    v128_t acc = wasm_i32x4_splat(0);
    const uint8_t *q = B->qs;
    const int16_t *sp = scs;
#pragma clang loop unroll(disable)
    for (int c = 0; c < 4; c++, q += 32, x += 64, sp += 2) {
        v128_t A = wasm_v128_load(q), C = wasm_v128_load(q + 16);
        v128_t lo = wasm_i16x8_add(rdot(wasm_v128_load(x), wasm_v128_and(A, m4)), rdot(wasm_v128_load(x + 16), wasm_v128_and(C, m4)));
        v128_t hi = wasm_i16x8_add(rdot(wasm_v128_load(x + 32), hi_nibbles(A)),
                                   rdot(wasm_v128_load(x + 48), hi_nibbles(C)));
        acc = wasm_i32x4_add(acc, wasm_i32x4_add(wasm_i32x4_dot_i16x8(lo, wasm_v128_load16_splat(sp)), wasm_i32x4_dot_i16x8(hi, wasm_v128_load16_splat(sp + 1))));
    }
    v128_t mt = wasm_i32x4_dot_i16x8(wasm_u16x8_extend_high_u8x16(sm), wasm_v128_load(bp));
    return pair_halves(acc, mt);
}

/* q6k_sums of the SIMD128 build, the int8 activations taken directly */
static inline __attribute__((always_inline)) v128_t q6k_sums(const block_q6_k *B, const int8_t *xq, const block_q8_k *xb) {
    int16_t scs[16] __attribute__((aligned(16)));
    v128_t sc_lo, sc_hi;
    q6k_scales(B, scs, &sc_lo, &sc_hi);
    v128_t acc = wasm_i32x4_splat(0);
    const uint8_t *L = B->ql, *H = B->qh;
    const int8_t *x = xq;
    const int16_t *sp = scs;
#pragma clang loop unroll(disable)
    for (int i = 0; i < 4; i++, Q6_NEXT(i - 1, L, H, x, sp)) {
        v128_t u[4];
        q6_bytes(L, H, u);
        acc = wasm_i32x4_add(acc, wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(rdot(wasm_v128_load(x), u[0]), wasm_v128_load16_splat(sp)), wasm_i32x4_dot_i16x8(rdot(wasm_v128_load(x + 32), u[1]), wasm_v128_load16_splat(sp + 2))), wasm_i32x4_add(wasm_i32x4_dot_i16x8(rdot(wasm_v128_load(x + 64), u[2]), wasm_v128_load16_splat(sp + 4)), wasm_i32x4_dot_i16x8(rdot(wasm_v128_load(x + 96), u[3]), wasm_v128_load16_splat(sp + 6)))));
    }
    return pair_halves(acc, q6_corr(sc_lo, sc_hi, xb->bsums));
}
#endif

/* r plus nb Q4_K blocks of a row against one token (x in its kx_t form, bsum_pairs'
 * bp, xb for the activation scales), added block by block as the reference
 * (wlm_kq_acc_minus) adds them. Two blocks share the float step: their sums
 * s, smin in one vector, their four f16 scales converted at once. */
static float q4k_row(float r, uint32_t nb, const block_q4_k *B, const kx_t *x, const int16_t *bp, const block_q8_k *xb) {
    uint32_t b = 0;
    for (; b + 2 <= nb; b += 2, B += 2, x += 2 * KX_STEP, bp += 16, xb += 2) {
        v128_t t0 = q4k_sums(B, x, bp), t1 = q4k_sums(B + 1, x + KX_STEP, bp + 8);
        v128_t u = wasm_i32x4_add(wasm_i32x4_shuffle(t0, t1, 0, 2, 4, 6), wasm_i32x4_shuffle(t0, t1, 1, 3, 5, 7)); /* s0 m0 s1 m1 */
        v128_t h = wasm_v128_load32_lane(B + 1, wasm_v128_load32_zero(B), 1);                                      /* d0 dmin0 d1 dmin1 */
        v128_t dx = wasm_i32x4_shuffle(wasm_v128_load32_splat(&xb[0].d), wasm_v128_load32_splat(&xb[1].d), 0, 1, 4, 5);
        v128_t p = wasm_f32x4_mul(wasm_f32x4_mul(half4_to_f32(wasm_u32x4_extend_low_u16x8(h)), dx), wasm_f32x4_convert_i32x4(u));
        r = r + (wasm_f32x4_extract_lane(p, 0) - wasm_f32x4_extract_lane(p, 1));
        r = r + (wasm_f32x4_extract_lane(p, 2) - wasm_f32x4_extract_lane(p, 3));
    }
    if (b < nb) {
        v128_t t = q4k_sums(B, x, bp);
        v128_t u = wasm_i32x4_add(wasm_i32x4_shuffle(t, t, 0, 2, 0, 2), wasm_i32x4_shuffle(t, t, 1, 3, 1, 3)); /* s m s m */
        v128_t dd = half4_to_f32(wasm_u32x4_load16x4(B));                                                      /* d dmin . . */
        v128_t p = wasm_f32x4_mul(wasm_f32x4_mul(dd, wasm_v128_load32_splat(&xb->d)), wasm_f32x4_convert_i32x4(u));
        r = r + (wasm_f32x4_extract_lane(p, 0) - wasm_f32x4_extract_lane(p, 1));
    }
    return r;
}

/* r plus nb Q6_K blocks of a row against one token (x in its kx_t form; xb
 * for the bsums and scales), added block by block as wlm_kq_acc does; two
 * blocks share the float step */
static float q6k_row(float r, uint32_t nb, const block_q6_k *B, const kx_t *x, const block_q8_k *xb) {
    uint32_t b = 0;
    for (; b + 2 <= nb; b += 2, B += 2, x += 2 * KX_STEP, xb += 2) {
        v128_t t0 = q6k_sums(B, x, xb), t1 = q6k_sums(B + 1, x + KX_STEP, xb + 1);
        v128_t u = wasm_i32x4_add(wasm_i32x4_shuffle(t0, t1, 0, 2, 4, 6), wasm_i32x4_shuffle(t0, t1, 1, 3, 5, 7)); /* a0 c0 a1 c1 */
        v128_t sv = wasm_i32x4_sub(u, wasm_i32x4_shl(wasm_i32x4_shuffle(u, u, 1, 1, 3, 3), 5));                    /* s0 . s1 . */
        v128_t h = wasm_v128_load16_lane(&B[1].d, wasm_v128_load16_lane(&B[0].d, wasm_i32x4_splat(0), 0), 4);      /* d0 . d1 . */
        v128_t dx = wasm_i32x4_shuffle(wasm_v128_load32_splat(&xb[0].d), wasm_v128_load32_splat(&xb[1].d), 0, 1, 4, 5);
        v128_t p = wasm_f32x4_mul(wasm_f32x4_mul(half4_to_f32(h), dx), wasm_f32x4_convert_i32x4(sv));
        r = r + wasm_f32x4_extract_lane(p, 0);
        r = r + wasm_f32x4_extract_lane(p, 2);
    }
    if (b < nb) {
        v128_t t = q6k_sums(B, x, xb);
        int32_t a = wasm_i32x4_extract_lane(t, 0) + wasm_i32x4_extract_lane(t, 1);
        int32_t c = wasm_i32x4_extract_lane(t, 2) + wasm_i32x4_extract_lane(t, 3);
        r = wlm_kq_acc(r, h2f(B->d), xb->d, a - 32 * c);
    }
    return r;
}
float wlm_kq_dot_q4_k_simd(uint32_t n, const void *wv, const void *xv) {
    const block_q4_k *w = wv;
    const block_q8_k *x = xv;
    int16_t bp[8] __attribute__((aligned(16)));
    float r = 0;
    for (uint32_t b = 0; b < n / QK_K; b++) {
        bsum_pairs(1, &x[b], bp);
#if WLM_RELAXED
        r = q4k_row(r, 1, &w[b], x[b].qs, bp, &x[b]);
#else
        int16_t xs[QK_K] __attribute__((aligned(16)));
        widen_256(x[b].qs, xs);
        r = q4k_row(r, 1, &w[b], xs, bp, &x[b]);
#endif
    }
    return r;
}

float wlm_kq_dot_q6_k_simd(uint32_t n, const void *wv, const void *xv) {
    const block_q6_k *w = wv;
    const block_q8_k *x = xv;
    float r = 0;
    for (uint32_t b = 0; b < n / QK_K; b++) {
#if WLM_RELAXED
        r = q6k_row(r, 1, &w[b], x[b].qs, &x[b]);
#else
        int16_t xs[QK_K] __attribute__((aligned(16)));
        widen_256(x[b].qs, xs);
        r = q6k_row(r, 1, &w[b], xs, &x[b]);
#endif
    }
    return r;
}

/* ---- prefill: rows unpacked once per chunk of tokens ------------------------------ */
/* Both builds: a block unpacked to int16 products, tokens widened as they are
 * loaded. A relaxed-SIMD variant (values as bytes, one relaxed dot per 16
 * values) was slower end to end though faster in a microbenchmark, and was
 * removed (bench/thread-ratio.mjs; bench/results/README.md). */

/* An unpacked block: 256 int16 products q*sc (Q4_K) or (q-32)*sc (Q6_K), then
 * the block's float scales and, for Q4_K, its 8 mins as int16. */
typedef struct {
    int16_t w[QK_K];
    int16_t mn[8];
    float d, dmin;
    uint32_t pad[2];
} ublock;
_Static_assert(sizeof(ublock) % 16 == 0, "ublock keeps 16-byte alignment");

static void unpack_q4k(const block_q4_k *B, ublock *u) {
    const v128_t m4 = wasm_i16x8_splat(15);
    int16_t scs[8] __attribute__((aligned(16)));
    v128_t sm = q4k_scales(B, scs);
    for (int c = 0; c < 4; c++) {
        v128_t A = wasm_v128_load(B->qs + 32 * c), C = wasm_v128_load(B->qs + 32 * c + 16);
        v128_t a0 = wasm_u16x8_extend_low_u8x16(A), a1 = wasm_u16x8_extend_high_u8x16(A);
        v128_t c0 = wasm_u16x8_extend_low_u8x16(C), c1 = wasm_u16x8_extend_high_u8x16(C);
        v128_t sl = wasm_v128_load16_splat(scs + 2 * c), sh = wasm_v128_load16_splat(scs + 2 * c + 1);
        int16_t *o = u->w + 64 * c;
        wasm_v128_store(o, wasm_i16x8_mul(wasm_v128_and(a0, m4), sl));
        wasm_v128_store(o + 8, wasm_i16x8_mul(wasm_v128_and(a1, m4), sl));
        wasm_v128_store(o + 16, wasm_i16x8_mul(wasm_v128_and(c0, m4), sl));
        wasm_v128_store(o + 24, wasm_i16x8_mul(wasm_v128_and(c1, m4), sl));
        wasm_v128_store(o + 32, wasm_i16x8_mul(wasm_u16x8_shr(a0, 4), sh));
        wasm_v128_store(o + 40, wasm_i16x8_mul(wasm_u16x8_shr(a1, 4), sh));
        wasm_v128_store(o + 48, wasm_i16x8_mul(wasm_u16x8_shr(c0, 4), sh));
        wasm_v128_store(o + 56, wasm_i16x8_mul(wasm_u16x8_shr(c1, 4), sh));
    }
    wasm_v128_store(u->mn, wasm_u16x8_extend_high_u8x16(sm));
    u->d = h2f(B->d);
    u->dmin = h2f(B->dmin);
}

static void unpack_q6k(const block_q6_k *B, ublock *u) {
    const v128_t m4 = wasm_i16x8_splat(15), m3 = wasm_i16x8_splat(3), m12 = wasm_i16x8_splat(12), m30 = wasm_i16x8_splat(0x30);
    const v128_t off = wasm_i16x8_splat(32);
    int16_t scs[16] __attribute__((aligned(16)));
    v128_t lo, hi;
    q6k_scales(B, scs, &lo, &hi);
    for (int h = 0; h < 2; h++) {
        const int16_t *sch = scs + 8 * h;
        for (int l = 0; l < 32; l += 8) {
            int v = l / 16;
            v128_t L0 = wasm_u16x8_load8x8(B->ql + 64 * h + l), L1 = wasm_u16x8_load8x8(B->ql + 64 * h + 32 + l);
            v128_t H = wasm_u16x8_load8x8(B->qh + 32 * h + l);
            v128_t u0 = wasm_v128_or(wasm_v128_and(L0, m4), wasm_i16x8_shl(wasm_v128_and(H, m3), 4));
            v128_t u1 = wasm_v128_or(wasm_v128_and(L1, m4), wasm_i16x8_shl(wasm_v128_and(H, m12), 2));
            v128_t u2 = wasm_v128_or(wasm_u16x8_shr(L0, 4), wasm_v128_and(H, m30));
            v128_t u3 = wasm_v128_or(wasm_u16x8_shr(L1, 4), wasm_v128_and(wasm_u16x8_shr(H, 2), m30));
            int16_t *o = u->w + 128 * h + l;
            wasm_v128_store(o, wasm_i16x8_mul(wasm_i16x8_sub(u0, off), wasm_v128_load16_splat(sch + v)));
            wasm_v128_store(o + 32, wasm_i16x8_mul(wasm_i16x8_sub(u1, off), wasm_v128_load16_splat(sch + 2 + v)));
            wasm_v128_store(o + 64, wasm_i16x8_mul(wasm_i16x8_sub(u2, off), wasm_v128_load16_splat(sch + 4 + v)));
            wasm_v128_store(o + 96, wasm_i16x8_mul(wasm_i16x8_sub(u3, off), wasm_v128_load16_splat(sch + 6 + v)));
        }
    }
    wasm_v128_store(u->mn, wasm_i16x8_splat(0));
    u->d = h2f(B->d);
    u->dmin = 0;
}

/* Exact sums of the 256 int16 values of an unpacked block (|w| <= 4096) with
 * the int8 activations of 4 tokens (widened in registers; each weight vector
 * is loaded once for the 4): pairs at most 2 * 4096 * 128, 32 pairs a lane. */
static inline void dot4_u256(const int16_t *w, const int8_t *x0, const int8_t *x1, const int8_t *x2, const int8_t *x3, int32_t *s) {
    v128_t a0 = wasm_i32x4_splat(0), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < QK_K; i += 16) {
        v128_t W0 = wasm_v128_load(w + i), W1 = wasm_v128_load(w + i + 8), X;
        X = wasm_v128_load(x0 + i);
        a0 = wasm_i32x4_add(a0, wasm_i32x4_add(wasm_i32x4_dot_i16x8(W0, wasm_i16x8_extend_low_i8x16(X)), wasm_i32x4_dot_i16x8(W1, wasm_i16x8_extend_high_i8x16(X))));
        X = wasm_v128_load(x1 + i);
        a1 = wasm_i32x4_add(a1, wasm_i32x4_add(wasm_i32x4_dot_i16x8(W0, wasm_i16x8_extend_low_i8x16(X)), wasm_i32x4_dot_i16x8(W1, wasm_i16x8_extend_high_i8x16(X))));
        X = wasm_v128_load(x2 + i);
        a2 = wasm_i32x4_add(a2, wasm_i32x4_add(wasm_i32x4_dot_i16x8(W0, wasm_i16x8_extend_low_i8x16(X)), wasm_i32x4_dot_i16x8(W1, wasm_i16x8_extend_high_i8x16(X))));
        X = wasm_v128_load(x3 + i);
        a3 = wasm_i32x4_add(a3, wasm_i32x4_add(wasm_i32x4_dot_i16x8(W0, wasm_i16x8_extend_low_i8x16(X)), wasm_i32x4_dot_i16x8(W1, wasm_i16x8_extend_high_i8x16(X))));
    }
    s[0] = hsum(a0);
    s[1] = hsum(a1);
    s[2] = hsum(a2);
    s[3] = hsum(a3);
}

static inline int32_t dot1_u256(const int16_t *w, const int8_t *x) {
    v128_t a0 = wasm_i32x4_splat(0), a1 = a0;
    for (int i = 0; i < QK_K; i += 16) {
        v128_t X = wasm_v128_load(x + i);
        a0 = wasm_i32x4_add(a0, wasm_i32x4_dot_i16x8(wasm_v128_load(w + i), wasm_i16x8_extend_low_i8x16(X)));
        a1 = wasm_i32x4_add(a1, wasm_i32x4_dot_i16x8(wasm_v128_load(w + i + 8), wasm_i16x8_extend_high_i8x16(X)));
    }
    return hsum(wasm_i32x4_add(a0, a1));
}

/* the block's exact integer dot with 4 tokens' activations, and with one */
static inline void dot4_u(const ublock *u, const block_q8_k *b0, const block_q8_k *b1, const block_q8_k *b2, const block_q8_k *b3, int32_t *s) {
    dot4_u256(u->w, b0->qs, b1->qs, b2->qs, b3->qs, s);
}
static inline int32_t dot1_u(const ublock *u, const block_q8_k *bt) { return dot1_u256(u->w, bt->qs); }

/* dot4_u for two rows (the same tensor) at once: each token's 8 values are
 * loaded and widened once for both rows; 8 accumulators, 2 weight vectors
 * and one activation vector a step fit V8's registers. Same integers,
 * faster than one row a call (make bench-kernels). */
static inline void dot4x2_u(const ublock *u0, const ublock *u1, const block_q8_k *b0, const block_q8_k *b1,
                            const block_q8_k *b2, const block_q8_k *b3, int32_t *s0, int32_t *s1) {
    v128_t a00 = wasm_i32x4_splat(0), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00;
#pragma clang loop unroll(disable)
    for (int i = 0; i < QK_K; i += 8) {
        v128_t P = wasm_v128_load(u0->w + i), Q = wasm_v128_load(u1->w + i);
        /* clang-format off */
#define DOT_T(A0, A1, B) { v128_t X = wasm_i16x8_load8x8((B)->qs + i);                 \
                           A0 = wasm_i32x4_add(A0, wasm_i32x4_dot_i16x8(P, X));         \
                           A1 = wasm_i32x4_add(A1, wasm_i32x4_dot_i16x8(Q, X)); }
        DOT_T(a00, a10, b0) DOT_T(a01, a11, b1) DOT_T(a02, a12, b2) DOT_T(a03, a13, b3)
#undef DOT_T
        /* clang-format on */
    }
    s0[0] = hsum(a00);
    s0[1] = hsum(a01);
    s0[2] = hsum(a02);
    s0[3] = hsum(a03);
    s1[0] = hsum(a10);
    s1[1] = hsum(a11);
    s1[2] = hsum(a12);
    s1[3] = hsum(a13);
}

/* one block's float step for one token: the reference's wlm_kq_acc_minus
 * (Q4_K, with the min term) or wlm_kq_acc (Q6_K) */
static inline float kq_step(int q4, const ublock *u, v128_t mn, const block_q8_k *bt, int32_t s, float acc) {
    return q4 ? wlm_kq_acc_minus(acc, u->d, u->dmin, bt->d, s, q4k_min_term(mn, bt->bsums)) : wlm_kq_acc(acc, u->d, bt->d, s);
}

/* tokens whose running sums are kept at once (on the stack) */
#define KQ_TILE 64

int wlm_kq_rows_simd(uint32_t type, uint32_t n, const uint8_t *w, uint64_t row_bytes, uint32_t n_rows,
                     const uint8_t *x, uint64_t xstride, uint32_t n_tok, float *y, uint64_t ystride,
                     void *scratch, uint64_t scratch_bytes) {
    if (type != GGML_Q4_K && type != GGML_Q6_K) return 0;
    if (n % QK_K) return 0;
    uint32_t nb = n / QK_K;
    int q4 = type == GGML_Q4_K;
#define XB(t) ((const block_q8_k *)(x + (uint64_t)(t)*xstride))
    if (n_tok <= 2) { /* too few tokens to pay for unpacking the rows: decode kernels */
        /* per token, once for all rows: the sub-block sums, and (SIMD128)
         * the values widened to int16 */
        uint64_t need = (uint64_t)nb * 16;
#if !WLM_RELAXED
        need += (uint64_t)n * 2;
#endif
        for (uint32_t t = 0; t < n_tok; t++) {
            const block_q8_k *xb = XB(t);
            float *yt = y + (uint64_t)t * ystride;
            if (need > scratch_bytes || ((uintptr_t)scratch & 15)) {
                for (uint32_t r = 0; r < n_rows; r++)
                    yt[r] = (q4 ? wlm_kq_dot_q4_k_simd : wlm_kq_dot_q6_k_simd)(n, w + r * row_bytes, xb);
                continue;
            }
            int16_t *bp = scratch;
            const kx_t *x0;
#if WLM_RELAXED
            x0 = xb->qs;
#else
            widen_token(nb, xb, bp + 8 * nb);
            x0 = bp + 8 * nb;
#endif
            if (q4) {
                bsum_pairs(nb, xb, bp);
                for (uint32_t r = 0; r < n_rows; r++) yt[r] = q4k_row(0, nb, (const block_q4_k *)(w + r * row_bytes), x0, bp, xb);
            } else {
                for (uint32_t r = 0; r < n_rows; r++) yt[r] = q6k_row(0, nb, (const block_q6_k *)(w + r * row_bytes), x0, xb);
            }
        }
        return 1;
    }
    /* prefill: each block of a row is unpacked once per tile of tokens; the
     * tokens' running sums advance block by block, in the reference order.
     * Rows go in pairs (dot4x2_u: each activation vector loaded once for
     * both), a last odd row alone. */
    ublock u[2];
    float acc[2][KQ_TILE];
    for (uint32_t t0 = 0; t0 < n_tok; t0 += KQ_TILE) {
        uint32_t nt = n_tok - t0 < KQ_TILE ? n_tok - t0 : KQ_TILE;
        for (uint32_t r = 0; r < n_rows; r += 2) {
            uint32_t nr = r + 1 < n_rows ? 2 : 1;
            for (uint32_t i = 0; i < nr; i++)
                for (uint32_t t = 0; t < nt; t++) acc[i][t] = 0;
            for (uint32_t b = 0; b < nb; b++) {
                v128_t mn[2];
                for (uint32_t i = 0; i < nr; i++) {
                    const uint8_t *wr = w + (r + i) * row_bytes;
                    if (q4) unpack_q4k((const block_q4_k *)wr + b, &u[i]);
                    else unpack_q6k((const block_q6_k *)wr + b, &u[i]);
                    mn[i] = wasm_v128_load(u[i].mn);
                }
                uint32_t t = 0;
                for (; t + 4 <= nt; t += 4) {
                    const block_q8_k *bt[4] = { XB(t0 + t) + b, XB(t0 + t + 1) + b, XB(t0 + t + 2) + b, XB(t0 + t + 3) + b };
                    int32_t s[2][4];
                    if (nr == 2) dot4x2_u(&u[0], &u[1], bt[0], bt[1], bt[2], bt[3], s[0], s[1]);
                    else dot4_u(&u[0], bt[0], bt[1], bt[2], bt[3], s[0]);
                    for (uint32_t i = 0; i < nr; i++)
                        for (int k = 0; k < 4; k++) acc[i][t + k] = kq_step(q4, &u[i], mn[i], bt[k], s[i][k], acc[i][t + k]);
                }
                for (; t < nt; t++) {
                    const block_q8_k *bt = XB(t0 + t) + b;
                    for (uint32_t i = 0; i < nr; i++) acc[i][t] = kq_step(q4, &u[i], mn[i], bt, dot1_u(&u[i], bt), acc[i][t]);
                }
            }
            for (uint32_t i = 0; i < nr; i++)
                for (uint32_t t = 0; t < nt; t++) y[(uint64_t)(t0 + t) * ystride + r + i] = acc[i][t];
        }
    }
#undef XB
    return 1;
}
#endif
