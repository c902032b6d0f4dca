/* Scalar reference kernels.
 *
 * Float dot products use 16 running sums (lane i takes elements i, i+16,
 * i+32, ...), folded as ((s0..3 + s4..7) + (s8..11 + s12..15)) lane-wise and
 * then (l0 + l1) + (l2 + l3), then the tail in order. The SIMD kernels keep
 * exactly this order, so every build computes bit-identical results: the
 * same tokens natively, in Node and in the browser.
 * Quantized dot products sum int8 products exactly per 32-block, then
 * accumulate (d_w * d_x) * sum in four running sums by block index mod 4. */
#include "kernels.h"
#include "wmath.h"

float wlm_fold16(const float s[16]) {
    float l[4];
    for (int i = 0; i < 4; i++) l[i] = (s[i] + s[4 + i]) + (s[8 + i] + s[12 + i]);
    return (l[0] + l[1]) + (l[2] + l[3]);
}

static float dot_f32(uint32_t n, const float *w, const float *x) {
    float s[16] = { 0 };
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) s[j] += w[i + j] * x[i + j];
    float r = wlm_fold16(s);
    for (; i < n; i++) r += w[i] * x[i];
    return r;
}

/* x_scale: 1, or 2^-112 for x given times 2^112 (exact both ways: the x
 * are the caller's own floats again) */
static float dot_f16_xs(uint32_t n, const uint16_t *w, const float *x, float x_scale) {
    float s[16] = { 0 };
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) s[j] += wlm_f16_to_f32(w[i + j]) * (x[i + j] * x_scale);
    float r = wlm_fold16(s);
    for (; i < n; i++) r += wlm_f16_to_f32(w[i]) * (x[i] * x_scale);
    return r;
}
static float dot_f16(uint32_t n, const uint16_t *w, const float *x) { return dot_f16_xs(n, w, x, 1.0f); }

static float dot_bf16(uint32_t n, const uint16_t *w, const float *x) {
    float s[16] = { 0 };
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) s[j] += wlm_bf16_to_f32(w[i + j]) * x[i + j];
    float r = wlm_fold16(s);
    for (; i < n; i++) r += wlm_bf16_to_f32(w[i]) * x[i];
    return r;
}

/* Quantized rows: the block products (d_w * d_x) * isum go to four running
 * sums by block index mod 4 (the SIMD kernels keep one block per lane),
 * folded as (a0 + a1) + (a2 + a3); blocks past the last multiple of 4 follow
 * in order. Integer block sums are exact. */
static float dot_q8_0(uint32_t n, const block_q8_0 *w, const block_q8_0 *x) {
    uint32_t nb = n / QK8_0;
    float a[4] = { 0, 0, 0, 0 }, r;
    uint32_t b = 0;
    for (; b + 4 <= nb; b += 4)
        for (int j = 0; j < 4; j++) {
            int32_t s = 0;
            for (int k = 0; k < QK8_0; k++) s += (int32_t)w[b + j].qs[k] * x[b + j].qs[k];
            a[j] += (wlm_f16_to_f32(w[b + j].d) * wlm_f16_to_f32(x[b + j].d)) * (float)s;
        }
    r = (a[0] + a[1]) + (a[2] + a[3]);
    for (; b < nb; b++) {
        int32_t s = 0;
        for (int k = 0; k < QK8_0; k++) s += (int32_t)w[b].qs[k] * x[b].qs[k];
        r += (wlm_f16_to_f32(w[b].d) * wlm_f16_to_f32(x[b].d)) * (float)s;
    }
    return r;
}

static int32_t q4_0_isum(const block_q4_0 *w, const block_q8_0 *x) {
    int32_t s = 0;
    for (int j = 0; j < QK4_0 / 2; j++) {
        s += ((w->qs[j] & 15) - 8) * x->qs[j];
        s += ((w->qs[j] >> 4) - 8) * x->qs[j + 16];
    }
    return s;
}

static float dot_q4_0(uint32_t n, const block_q4_0 *w, const block_q8_0 *x) {
    uint32_t nb = n / QK4_0;
    float a[4] = { 0, 0, 0, 0 }, r;
    uint32_t b = 0;
    for (; b + 4 <= nb; b += 4)
        for (int j = 0; j < 4; j++)
            a[j] += (wlm_f16_to_f32(w[b + j].d) * wlm_f16_to_f32(x[b + j].d)) * (float)q4_0_isum(&w[b + j], &x[b + j]);
    r = (a[0] + a[1]) + (a[2] + a[3]);
    for (; b < nb; b++)
        r += (wlm_f16_to_f32(w[b].d) * wlm_f16_to_f32(x[b].d)) * (float)q4_0_isum(&w[b], &x[b]);
    return r;
}

/* one pair of i16x4 rows: dot_q8_0's order (lane = block mod 4) */
static float dot_i16x4(uint32_t n, const uint8_t *wr, const uint8_t *xr) {
    uint32_t nb = n / 32, b = 0;
    const int16_t *w = (const int16_t *)wr, *x = (const int16_t *)xr;
    const float *dw = (const float *)(wr + (uint64_t)n * 2), *dx = (const float *)(xr + (uint64_t)n * 2);
    float a[4] = { 0, 0, 0, 0 }, r;
    for (; b + 4 <= nb; b += 4)
        for (int i = 0; i < 4; i++) {
            int32_t s = 0;
            for (int k = 0; k < 32; k++) {
                uint32_t at = b * 32 + (k / 2) * 8 + i * 2 + (k & 1);
                s += (int32_t)w[at] * x[at];
            }
            a[i] += (dw[b + i] * dx[b + i]) * (float)s;
        }
    r = (a[0] + a[1]) + (a[2] + a[3]);
    for (; b < nb; b++) {
        int32_t s = 0;
        for (int k = 0; k < 32; k++) s += (int32_t)w[b * 32 + k] * x[b * 32 + k];
        r += (dw[b] * dx[b]) * (float)s;
    }
    return r;
}

static void gemm_i16x4(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr,
                       const uint8_t *x, uint64_t xs, uint32_t nt, float *y, uint64_t ys) {
    for (uint32_t t = 0; t < nt; t++)
        for (uint32_t r = 0; r < nr; r++) y[t * ys + r] = dot_i16x4(n, w + r * ws, x + t * xs);
}

/* decode rows against the i16eo activation: dot_q8_0 / dot_q4_0's order */
static void gemv_q(int q4, uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr, const uint8_t *x16, float *y) {
    uint32_t nb = n / 32;
    const int16_t *xq = (const int16_t *)x16;
    const float *dx = (const float *)(x16 + (uint64_t)n * 2);
    for (uint32_t r = 0; r < nr; r++) {
        float a[4] = { 0, 0, 0, 0 }, res = 0;
        for (uint32_t b = 0; b < nb; b++) {
            int32_t s = 0;
            float dw;
            if (q4) {
                const block_q4_0 *blk = (const block_q4_0 *)(w + r * ws) + b;
                for (uint32_t k = 0; k < 32; k++)
                    s += ((k < 16 ? blk->qs[k] & 15 : blk->qs[k - 16] >> 4) - 8) * xq[b * 32 + wlm_i16eo_pos(k)];
                dw = wlm_f16_to_f32(blk->d);
            } else {
                const block_q8_0 *blk = (const block_q8_0 *)(w + r * ws) + b;
                for (uint32_t k = 0; k < 32; k++) s += (int32_t)blk->qs[k] * xq[b * 32 + wlm_i16eo_pos(k)];
                dw = wlm_f16_to_f32(blk->d);
            }
            float t = (dw * dx[b]) * (float)s;
            if (b < nb / 4 * 4) {
                a[b % 4] += t;
                if (b % 4 == 3 && b + 1 == nb / 4 * 4) res = (a[0] + a[1]) + (a[2] + a[3]);
            } else res += t;
        }
        y[r] = res;
    }
}

/* q4g rows against the Q8_0 blocks of each token: wlm_dot_q4g */
static void gemv_q4g(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr, const uint8_t *x8, uint64_t x8s,
                     const uint8_t *x16, uint64_t x16s, uint32_t nt, float *y, uint64_t ys) {
    (void)x16;
    (void)x16s;
    for (uint32_t t = 0; t < nt; t++)
        for (uint32_t r = 0; r < nr; r++) y[t * ys + r] = wlm_dot_q4g(n, w + r * ws, (const block_q8_0 *)(x8 + t * x8s));
}

static void gemv_f16(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr,
                     const float *x, uint64_t xs, uint32_t nt, float *y, uint64_t ys, int mode) {
    float x_scale = mode == WLM_F16_FINITE_X112 ? 0x1p-112f : 1.0f; /* (the exact conversion in every mode) */
    for (uint32_t t = 0; t < nt; t++)
        for (uint32_t r = 0; r < nr; r++) y[t * ys + r] = dot_f16_xs(n, (const uint16_t *)(w + r * ws), x + t * xs, x_scale);
}

static void gemm_f32(uint32_t n, const float *w, uint64_t ws, uint32_t nr,
                     const float *x, uint64_t xs, uint32_t nt, float *y, uint64_t ys) {
    for (uint32_t t = 0; t < nt; t++)
        for (uint32_t r = 0; r < nr; r++) y[t * ys + r] = dot_f32(n, w + r * ws, x + t * xs);
}

static void cvt_f16(uint32_t n, const uint16_t *h, float *y) {
    for (uint32_t i = 0; i < n; i++) y[i] = wlm_f16_to_f32(h[i]);
}

static void gemv_q8_0(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr, const uint8_t *x8, uint64_t x8s,
                      const uint8_t *x16, uint64_t x16s, uint32_t nt, float *y, uint64_t ys) {
    (void)x8;
    (void)x8s;
    for (uint32_t t = 0; t < nt; t++) gemv_q(0, n, w, ws, nr, x16 + t * x16s, y + t * ys);
}
static void gemv_q4_0(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr, const uint8_t *x8, uint64_t x8s,
                      const uint8_t *x16, uint64_t x16s, uint32_t nt, float *y, uint64_t ys) {
    (void)x8;
    (void)x8s;
    for (uint32_t t = 0; t < nt; t++) gemv_q(1, n, w, ws, nr, x16 + t * x16s, y + t * ys);
}

static void axpy_f32(uint32_t n, float a, const float *x, float *y) {
    for (uint32_t i = 0; i < n; i++) y[i] += a * x[i];
}

static void axpy_f16(uint32_t n, float a, const uint16_t *x, float *y) {
    for (uint32_t i = 0; i < n; i++) y[i] += a * wlm_f16_to_f32(x[i]);
}

static void att_accum(uint32_t n, uint32_t hd, const float *e, const void *v, int f16, const uint32_t *idx, float *out) {
    for (uint32_t i = 0; i < n; i++) {
        if (f16) axpy_f16(hd, e[i], (const uint16_t *)v + (uint64_t)idx[i] * hd, out);
        else axpy_f32(hd, e[i], (const float *)v + (uint64_t)idx[i] * hd, out);
    }
}

static void att_scores(uint32_t n, uint32_t hd, const float *q, const void *k, int f16, const uint32_t *idx, float scale, float *s) {
    for (uint32_t i = 0; i < n; i++)
        s[i] = (f16 ? dot_f16(hd, (const uint16_t *)k + (uint64_t)idx[i] * hd, q) : dot_f32(hd, (const float *)k + (uint64_t)idx[i] * hd, q)) * scale;
}

static void scale(uint32_t n, float a, float *y) {
    for (uint32_t i = 0; i < n; i++) y[i] *= a;
}

double wlm_sum_exp_from(uint32_t i, uint32_t n, const float *y, float m, double s[8]) {
    for (; i < n; i++) {
        float x = y[i];
        if (x != x || x == -__builtin_inff()) continue;
        if (x > 3.40282347e38f) x = 3.40282347e38f;
        s[i & 7] += (double)wlm_expf_fast(x - m);
    }
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

static double sum_exp(uint32_t n, const float *y, float m) {
    double s[8] = { 0, 0, 0, 0, 0, 0, 0, 0 };
    return wlm_sum_exp_from(0, n, y, m, s);
}

float wlm_logit_max_from(uint32_t i, uint32_t n, const float *y, float m) {
    for (; i < n; i++) {
        float x = y[i];
        if (x != x || x == -__builtin_inff()) continue;
        if (x > 3.40282347e38f) x = 3.40282347e38f;
        if (x > m) m = x;
    }
    return m + 0.0f; /* -0 -> +0 */
}

static float logit_max(uint32_t n, const float *y) { return wlm_logit_max_from(0, n, y, -__builtin_inff()); }

static void exp_shift(uint32_t n, float *y, float m) {
    for (uint32_t i = 0; i < n; i++) y[i] = wlm_expf_fast(y[i] - m);
}

static void silu_mul(uint32_t n, float *a, const float *b) {
    for (uint32_t i = 0; i < n; i++) a[i] = wlm_silu(a[i]) * b[i];
}

/* sum of x[i] (sq: of (x[i] - m)^2) in dot_f32's order */
static float row_sum(uint32_t n, const float *x, int sq, float m) {
    float s[16] = { 0 };
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) {
            float v = sq ? x[i + j] - m : x[i + j];
            s[j] += sq ? v * v : v;
        }
    float r = wlm_fold16(s);
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
    for (uint32_t i = lo; i < hi; i++) {
        float v = (x[i] - mean) * rstd;
        if (w) v = v * w[i];
        if (b) v = v + b[i];
        y[i] = v;
    }
}

float wlm_row_dot_f32(uint32_t n, const void *w, const void *x) { return dot_f32(n, w, x); }
float wlm_row_dot_f16(uint32_t n, const void *w, const void *x) { return dot_f16(n, w, x); }
float wlm_row_dot_bf16(uint32_t n, const void *w, const void *x) { return dot_bf16(n, w, x); }
float wlm_row_dot_q8_0(uint32_t n, const void *w, const void *x) { return dot_q8_0(n, w, x); }
float wlm_row_dot_q4_0(uint32_t n, const void *w, const void *x) { return dot_q4_0(n, w, x); }

const wlm_kernels wlm_kernels_scalar = {
    .name = "scalar",
    .set = WLM_SET_SCALAR,
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
    .dot_bf16 = dot_bf16,
    .dot_q8_0 = dot_q8_0,
    .dot_q4_0 = dot_q4_0,
    .gemm_i16x4 = gemm_i16x4,
    .unpack_i16x4 = wlm_unpack_i16x4,
    .gemv_q8_0 = gemv_q8_0,
    .gemv_q4_0 = gemv_q4_0,
    .gemv_q4g = gemv_q4g,
    .q4g_from_q4_0 = wlm_q4g_from_q4_0,
    .gemv_f16 = gemv_f16,
    .gemm_f32 = gemm_f32,
    .cvt_f16 = cvt_f16,
    .axpy_f32 = axpy_f32,
    .axpy_f16 = axpy_f16,
    .scale = scale,
    .kq_rows = wlm_kq_rows, /* K-quants */
    .quantize_q8_0 = wlm_quantize_row_q8_0,
    .sum_exp = sum_exp,
    .logit_max = logit_max,
    .exp_shift = exp_shift,
    .silu_mul = silu_mul,
    .att_accum = att_accum,
    .att_scores = att_scores,
    .layer_norm = layer_norm,
};

const wlm_kernels *const wlm_kernel_sets[] = {
    &wlm_kernels_scalar,
#if WLM_SIMD128
    &wlm_kernels_simd128,
#endif
};
const uint32_t wlm_kernel_set_count = sizeof wlm_kernel_sets / sizeof wlm_kernel_sets[0];

const wlm_kernels *wlm_kernels_best(void) {
#if WLM_SIMD128
    return &wlm_kernels_simd128;
#else
    return &wlm_kernels_scalar;
#endif
}
