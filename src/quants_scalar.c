/* Q4_1, Q5_0, Q5_1 and the K-quants: scalar reference dequantizers, dot
 * products and quantizers, written from the published GGUF block layouts.
 *
 * Element order (i = index of a weight inside its block):
 *   Q4_1, Q5_0, Q5_1 (32): byte j of qs holds weight j (low nibble) and
 *     weight j+16 (high nibble); Q5_x: the fifth bit of weight i is bit i of
 *     qh read as a little-endian uint32.
 *   Q2_K (256): i = 128h + 32k + l (h 0..1, k 0..3, l 0..31): q = bits 2k..2k+1
 *     of qs[32h + l]; sub-block i/16 uses scales[i/16] (low nibble scale,
 *     high nibble min).
 *   Q3_K (256): the two low bits as in Q2_K; q = low - 4 unless bit 4h+k of
 *     hmask[l] is set; sub-block i/16 has the 6-bit scale s (see scale_q3) and
 *     value = d * (s - 32) * q.
 *   Q4_K (256): i = 64c + 32u + l (c 0..3, u 0..1): q = nibble u of
 *     qs[32c + l] (low first); sub-block i/32 = 2c + u has a 6-bit scale and
 *     min (see scale_min_k4); Q5_K adds bit 2c+u of qh[l] as the fifth bit.
 *   Q6_K (256): i = 128h + 32k + l: low nibble of ql[64h + l] (k = 0),
 *     ql[64h + 32 + l] (k = 1), high nibbles of the same (k = 2, 3); bits
 *     2k..2k+1 of qh[32h + l] on top; value = d * scales[i/16] * (q - 32).
 *
 * Dot products: the integer sums of a block (weighted by the integer
 * sub-block scales for the K-quants) are exact in int32, then the float ops of
 * wlm_kq_acc* (quants.h) add the block to the running sum, block by block in
 * order. The SIMD128 kernels (quants_simd128.c) compute the same integers and
 * call the same float helpers, so their results are bit-identical. */
#include "quants.h"
#include "kernels.h"

/* ---- helpers --------------------------------------------------------------- */

static inline int nearest(float v) { /* round half away from zero; NaN -> 0, saturates at 2^30 */
    float a = v < 0 ? -v : v;
    if (!(a < 1073741824.0f)) a = a == a ? 1073741824.0f : 0.0f;
    int i = (int)a;
    if (a - (float)i >= 0.5f) i++;
    return v < 0 ? -i : i;
}
static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi
                                                                              : v; }
static inline float h2f(uint16_t h) { return wlm_f16_to_f32(h); }

void wlm_kq_scale_min_k4(const uint8_t *q, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

int wlm_kq_scale_q3(const uint8_t *q, int j) {
    return ((q[j % 8] >> (4 * (j / 8))) & 15) | (((q[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

/* ---- integer decoding of one block (q values as the formula uses them) ---- */

static void ints_q4_1(const block_q4_1 *b, int8_t *q) {
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)(b->qs[j] & 15);
        q[j + 16] = (int8_t)(b->qs[j] >> 4);
    }
}
static void ints_q5(const uint8_t *qs, const uint8_t *qh, int off, int8_t *q) {
    uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)(((qs[j] & 15) | ((h >> j) & 1) << 4) - off);
        q[j + 16] = (int8_t)(((qs[j] >> 4) | ((h >> (j + 16)) & 1) << 4) - off);
    }
}
static void ints_q2_k(const block_q2_k *b, int8_t *q) {
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) q[128 * h + 32 * k + l] = (int8_t)((b->qs[32 * h + l] >> (2 * k)) & 3);
}
static void ints_q3_k(const block_q3_k *b, int8_t *q) {
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                int low = (b->qs[32 * h + l] >> (2 * k)) & 3;
                int hb = (b->hmask[l] >> (4 * h + k)) & 1;
                q[128 * h + 32 * k + l] = (int8_t)(low - (hb ? 0 : 4));
            }
}
static void ints_q45_k(const uint8_t *qs, const uint8_t *qh, int8_t *q) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int lo = qs[32 * c + l] & 15, hi = qs[32 * c + l] >> 4;
            if (qh) {
                lo |= ((qh[l] >> (2 * c)) & 1) << 4;
                hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
            }
            q[64 * c + l] = (int8_t)lo;
            q[64 * c + 32 + l] = (int8_t)hi;
        }
}
static void ints_q6_k(const block_q6_k *b, int8_t *q) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *ql = b->ql + 64 * h, hb = b->qh[32 * h + l];
            q[128 * h + l] = (int8_t)(((ql[l] & 15) | ((hb & 3) << 4)) - 32);
            q[128 * h + 32 + l] = (int8_t)(((ql[l + 32] & 15) | (((hb >> 2) & 3) << 4)) - 32);
            q[128 * h + 64 + l] = (int8_t)(((ql[l] >> 4) | (((hb >> 4) & 3) << 4)) - 32);
            q[128 * h + 96 + l] = (int8_t)(((ql[l + 32] >> 4) | (((hb >> 6) & 3) << 4)) - 32);
        }
}

/* ---- dequantization ---------------------------------------------------------- */

/* value = d * q + m (Q4_1, Q5_1) */
static void dequantize_q4_1_q5_1(uint32_t type, const void *row, float *y, uint32_t n) {
    int8_t q[32];
    for (uint32_t b = 0; b < n / 32; b++) {
        float d, m;
        if (type == GGML_Q4_1) {
            const block_q4_1 *B = (const block_q4_1 *)row + b;
            ints_q4_1(B, q);
            d = h2f(B->d);
            m = h2f(B->m);
        } else {
            const block_q5_1 *B = (const block_q5_1 *)row + b;
            ints_q5(B->qs, B->qh, 0, q);
            d = h2f(B->d);
            m = h2f(B->m);
        }
        for (int j = 0; j < 32; j++) y[32 * b + j] = d * (float)q[j] + m;
    }
}
void wlm_dequantize_q4_1(const void *row, float *y, uint32_t n) { dequantize_q4_1_q5_1(GGML_Q4_1, row, y, n); }
void wlm_dequantize_q5_1(const void *row, float *y, uint32_t n) { dequantize_q4_1_q5_1(GGML_Q5_1, row, y, n); }

void wlm_dequantize_q5_0(const void *row, float *y, uint32_t n) {
    int8_t q[32];
    for (uint32_t b = 0; b < n / 32; b++) {
        const block_q5_0 *B = (const block_q5_0 *)row + b;
        ints_q5(B->qs, B->qh, 16, q);
        float d = h2f(B->d);
        for (int j = 0; j < 32; j++) y[32 * b + j] = d * (float)q[j];
    }
}

void wlm_dequantize_q2_k(const void *row, float *y, uint32_t n) {
    int8_t q[QK_K];
    for (uint32_t b = 0; b < n / QK_K; b++) {
        const block_q2_k *B = (const block_q2_k *)row + b;
        ints_q2_k(B, q);
        float d = h2f(B->d), dm = h2f(B->dmin);
        for (int i = 0; i < QK_K; i++) {
            uint8_t s = B->scales[i / 16];
            y[QK_K * b + i] = (d * (float)(s & 15)) * (float)q[i] - dm * (float)(s >> 4);
        }
    }
}

void wlm_dequantize_q3_k(const void *row, float *y, uint32_t n) {
    int8_t q[QK_K];
    for (uint32_t b = 0; b < n / QK_K; b++) {
        const block_q3_k *B = (const block_q3_k *)row + b;
        ints_q3_k(B, q);
        float d = h2f(B->d);
        for (int i = 0; i < QK_K; i++) y[QK_K * b + i] = (d * (float)(wlm_kq_scale_q3(B->scales, i / 16) - 32)) * (float)q[i];
    }
}

/* value = d * sc * q - dmin * m with 6-bit sc, m (Q4_K, Q5_K) */
static void dequantize_q45_k(uint32_t type, const void *row, float *y, uint32_t n) {
    int8_t q[QK_K];
    for (uint32_t b = 0; b < n / QK_K; b++) {
        const uint8_t *scales;
        float d, dm;
        if (type == GGML_Q4_K) {
            const block_q4_k *B = (const block_q4_k *)row + b;
            ints_q45_k(B->qs, 0, q);
            scales = B->scales;
            d = h2f(B->d);
            dm = h2f(B->dmin);
        } else {
            const block_q5_k *B = (const block_q5_k *)row + b;
            ints_q45_k(B->qs, B->qh, q);
            scales = B->scales;
            d = h2f(B->d);
            dm = h2f(B->dmin);
        }
        for (int i = 0; i < QK_K; i++) {
            int sc, m;
            wlm_kq_scale_min_k4(scales, i / 32, &sc, &m);
            y[QK_K * b + i] = (d * (float)sc) * (float)q[i] - dm * (float)m;
        }
    }
}
void wlm_dequantize_q4_k(const void *row, float *y, uint32_t n) { dequantize_q45_k(GGML_Q4_K, row, y, n); }
void wlm_dequantize_q5_k(const void *row, float *y, uint32_t n) { dequantize_q45_k(GGML_Q5_K, row, y, n); }

void wlm_dequantize_q6_k(const void *row, float *y, uint32_t n) {
    int8_t q[QK_K];
    for (uint32_t b = 0; b < n / QK_K; b++) {
        const block_q6_k *B = (const block_q6_k *)row + b;
        ints_q6_k(B, q);
        float d = h2f(B->d);
        for (int i = 0; i < QK_K; i++) y[QK_K * b + i] = (d * (float)B->scales[i / 16]) * (float)q[i];
    }
}

void wlm_dequantize_q8_k(const void *row, float *y, uint32_t n) {
    for (uint32_t b = 0; b < n / QK_K; b++) {
        const block_q8_k *B = (const block_q8_k *)row + b;
        for (int i = 0; i < QK_K; i++) y[QK_K * b + i] = B->d * (float)B->qs[i];
    }
}

/* ---- reference dot products -------------------------------------------------- */

static inline int32_t idot(const int8_t *a, const int8_t *b, int n) {
    int32_t s = 0;
    for (int i = 0; i < n; i++) s += (int32_t)a[i] * b[i];
    return s;
}
static inline int32_t isum(const int8_t *a, int n) {
    int32_t s = 0;
    for (int i = 0; i < n; i++) s += a[i];
    return s;
}

float wlm_kq_dot_q4_1(uint32_t n, const void *wv, const void *xv) {
    const block_q4_1 *w = wv;
    const block_q8_0 *x = xv;
    int8_t q[32];
    float r = 0;
    for (uint32_t b = 0; b < n / 32; b++) {
        ints_q4_1(&w[b], q);
        r = wlm_kq_acc_plus(r, h2f(w[b].d), h2f(w[b].m), h2f(x[b].d), idot(q, x[b].qs, 32), isum(x[b].qs, 32));
    }
    return r;
}

float wlm_kq_dot_q5_0(uint32_t n, const void *wv, const void *xv) {
    const block_q5_0 *w = wv;
    const block_q8_0 *x = xv;
    int8_t q[32];
    float r = 0;
    for (uint32_t b = 0; b < n / 32; b++) {
        ints_q5(w[b].qs, w[b].qh, 16, q);
        r = wlm_kq_acc(r, h2f(w[b].d), h2f(x[b].d), idot(q, x[b].qs, 32));
    }
    return r;
}

float wlm_kq_dot_q5_1(uint32_t n, const void *wv, const void *xv) {
    const block_q5_1 *w = wv;
    const block_q8_0 *x = xv;
    int8_t q[32];
    float r = 0;
    for (uint32_t b = 0; b < n / 32; b++) {
        ints_q5(w[b].qs, w[b].qh, 0, q);
        r = wlm_kq_acc_plus(r, h2f(w[b].d), h2f(w[b].m), h2f(x[b].d), idot(q, x[b].qs, 32), isum(x[b].qs, 32));
    }
    return r;
}

float wlm_kq_dot_q2_k(uint32_t n, const void *wv, const void *xv) {
    const block_q2_k *w = wv;
    const block_q8_k *x = xv;
    int8_t q[QK_K];
    float r = 0;
    for (uint32_t b = 0; b < n / QK_K; b++) {
        ints_q2_k(&w[b], q);
        int32_t s = 0, sm = 0;
        for (int j = 0; j < 16; j++) {
            s += (w[b].scales[j] & 15) * idot(q + 16 * j, x[b].qs + 16 * j, 16);
            sm += (w[b].scales[j] >> 4) * x[b].bsums[j];
        }
        r = wlm_kq_acc_minus(r, h2f(w[b].d), h2f(w[b].dmin), x[b].d, s, sm);
    }
    return r;
}

float wlm_kq_dot_q3_k(uint32_t n, const void *wv, const void *xv) {
    const block_q3_k *w = wv;
    const block_q8_k *x = xv;
    int8_t q[QK_K];
    float r = 0;
    for (uint32_t b = 0; b < n / QK_K; b++) {
        ints_q3_k(&w[b], q);
        int32_t s = 0;
        for (int j = 0; j < 16; j++) s += (wlm_kq_scale_q3(w[b].scales, j) - 32) * idot(q + 16 * j, x[b].qs + 16 * j, 16);
        r = wlm_kq_acc(r, h2f(w[b].d), x[b].d, s);
    }
    return r;
}

static float dot_q45_k(uint32_t n, const uint8_t *wbase, uint32_t stride, int has_qh, const block_q8_k *x) {
    int8_t q[QK_K];
    float r = 0;
    for (uint32_t b = 0; b < n / QK_K; b++) {
        const uint8_t *B = wbase + (uint64_t)b * stride;
        uint16_t d, dmin;
        __builtin_memcpy(&d, B, 2);
        __builtin_memcpy(&dmin, B + 2, 2);
        const uint8_t *scales = B + 4;
        ints_q45_k(has_qh ? B + 48 : B + 16, has_qh ? B + 16 : 0, q);
        int32_t s = 0, sm = 0;
        for (int j = 0; j < 8; j++) {
            int sc, m;
            wlm_kq_scale_min_k4(scales, j, &sc, &m);
            s += sc * idot(q + 32 * j, x[b].qs + 32 * j, 32);
            sm += m * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
        }
        r = wlm_kq_acc_minus(r, h2f(d), h2f(dmin), x[b].d, s, sm);
    }
    return r;
}

float wlm_kq_dot_q4_k(uint32_t n, const void *w, const void *x) { return dot_q45_k(n, w, sizeof(block_q4_k), 0, x); }
float wlm_kq_dot_q5_k(uint32_t n, const void *w, const void *x) { return dot_q45_k(n, w, sizeof(block_q5_k), 1, x); }

float wlm_kq_dot_q6_k(uint32_t n, const void *wv, const void *xv) {
    const block_q6_k *w = wv;
    const block_q8_k *x = xv;
    int8_t q[QK_K];
    float r = 0;
    for (uint32_t b = 0; b < n / QK_K; b++) {
        ints_q6_k(&w[b], q);
        int32_t s = 0;
        for (int j = 0; j < 16; j++) s += w[b].scales[j] * idot(q + 16 * j, x[b].qs + 16 * j, 16);
        r = wlm_kq_acc(r, h2f(w[b].d), x[b].d, s);
    }
    return r;
}

/* the reference batched path: the row dot for every (row, token) */
int wlm_kq_rows(uint32_t type, uint32_t n, const uint8_t *w, uint64_t row_bytes, uint32_t n_rows,
                const uint8_t *x, uint64_t xstride, uint32_t n_tok, float *y, uint64_t ystride,
                void *scratch, uint64_t scratch_bytes) {
    const wlm_type_info *ti = wlm_type(type);
    if (!ti || ti->act != GGML_Q8_K || !ti->dot[WLM_SET_SCALAR]) return 0;
    wlm_dot_fn dot = ti->dot[WLM_SET_SCALAR];
    for (uint32_t r = 0; r < n_rows; r++)
        for (uint32_t t = 0; t < n_tok; t++)
            y[(uint64_t)t * ystride + r] = dot(n, w + r * row_bytes, x + (uint64_t)t * xstride);
    return 1;
}

/* ---- activation quantization (Q8_K) ------------------------------------------- */

void wlm_quantize_row_q8_k(const float *x, void *yv, uint32_t n) {
    block_q8_k *y = yv;
    for (uint32_t b = 0; b < n / QK_K; b++) {
        const float *v = x + (uint64_t)b * QK_K;
        float amax = 0;
        for (int i = 0; i < QK_K; i++) {
            float a = v[i] < 0 ? -v[i] : v[i];
            if (a > amax) amax = a;
        }
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        y[b].d = d;
        for (int i = 0; i < QK_K; i++) y[b].qs[i] = (int8_t)clampi(nearest(v[i] * id), -127, 127);
        for (int j = 0; j < 16; j++) y[b].bsums[j] = (int16_t)isum(y[b].qs + 16 * j, 16);
    }
}

/* ---- weight quantization -------------------------------------------------------- */

/* x ~ s * q - m with q in 0..nmax, s >= 0 and m >= 0 (or m of any sign with
 * free_min): a small search over the grid spacing, each candidate's (s, m)
 * refitted by least squares for its q assignment; keeps the one with the
 * least squared error. */
static void fit_min(const float *x, int n, int nmax, int free_min, float *s_out, float *m_out) {
    float lo = free_min ? x[0] : 0, hi = x[0];
    for (int i = 0; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    if (hi < 0 && !free_min) hi = 0;
    if (hi - lo <= 0) {
        *s_out = 0;
        *m_out = -lo;
        return;
    }
    float best_s = (hi - lo) / (float)nmax, best_m = -lo, best_e = 0;
    for (int i = 0; i < n; i++) {
        int q = clampi(nearest((x[i] - lo) / best_s), 0, nmax);
        float e = best_s * (float)q - best_m - x[i];
        best_e += e * e;
    }
    for (int k = -8; k <= 8; k++) {
        float iscale = ((float)nmax + 0.1f * (float)k) / (hi - lo);
        float sq = 0, sqq = 0, sx = 0, sxq = 0;
        int8_t qv[32];
        for (int i = 0; i < n; i++) {
            int q = clampi(nearest((x[i] - lo) * iscale), 0, nmax);
            qv[i] = (int8_t)q;
            sq += (float)q;
            sqq += (float)(q * q);
            sx += x[i];
            sxq += x[i] * (float)q;
        }
        float D = (float)n * sqq - sq * sq, s, b;
        if (D <= 0) continue;
        s = ((float)n * sxq - sq * sx) / D;
        b = (sx - s * sq) / (float)n;
        if (b > 0 && !free_min) {
            b = 0;
            s = sqq > 0 ? sxq / sqq : 0;
        }
        if (s <= 0) continue;
        float e = 0;
        for (int i = 0; i < n; i++) {
            float t = s * (float)qv[i] + b - x[i];
            e += t * t;
        }
        if (e < best_e) {
            best_e = e;
            best_s = s;
            best_m = -b;
        }
    }
    *s_out = best_s;
    *m_out = best_m;
}

/* x ~ s * q with q in qmin..qmax (qmin = -qmax - 1), s of any sign: candidates
 * map the largest-magnitude value near either end of the range; s refitted by
 * least squares per candidate. */
static float fit_sym(const float *x, int n, int qmin, int qmax) {
    float amax = 0, vmax = 0;
    for (int i = 0; i < n; i++) {
        float a = x[i] < 0 ? -x[i] : x[i];
        if (a > amax) {
            amax = a;
            vmax = x[i];
        }
    }
    if (amax == 0) return 0;
    float best_s = vmax / (float)qmin, best_e = -1;
    for (int k = 0; k <= 20; k++) {
        float t = k <= 10 ? (float)qmin + 0.1f * (float)k : (float)qmax - 0.1f * (float)(k - 11);
        float iscale = t / vmax, sqq = 0, sxq = 0;
        for (int i = 0; i < n; i++) {
            int q = clampi(nearest(x[i] * iscale), qmin, qmax);
            sqq += (float)(q * q);
            sxq += x[i] * (float)q;
        }
        if (sqq <= 0 || sxq == 0) continue;
        float s = sxq / sqq, e = 0;
        for (int i = 0; i < n; i++) {
            int q = clampi(nearest(x[i] / s), qmin, qmax);
            float t2 = s * (float)q - x[i];
            e += t2 * t2;
        }
        if (best_e < 0 || e < best_e) {
            best_e = e;
            best_s = s;
        }
    }
    return best_s;
}

static void quant_q4_1_q5_1(const float *v, uint16_t *d_out, uint16_t *m_out, int nmax, int8_t *q) {
    float s, mm;
    fit_min(v, 32, nmax, 1, &s, &mm);
    *d_out = wlm_f32_to_f16(s);
    *m_out = wlm_f32_to_f16(-mm);
    float d = h2f(*d_out), m = h2f(*m_out), id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) q[j] = (int8_t)clampi(nearest((v[j] - m) * id), 0, nmax);
}

static void pack_q5_bits(const int8_t *q, uint8_t *qs, uint8_t *qh) {
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
        h |= (uint32_t)((q[j] >> 4) & 1) << j;
        h |= (uint32_t)((q[j + 16] >> 4) & 1) << (j + 16);
    }
    qh[0] = (uint8_t)h;
    qh[1] = (uint8_t)(h >> 8);
    qh[2] = (uint8_t)(h >> 16);
    qh[3] = (uint8_t)(h >> 24);
}

/* K-quants with (scale, min) per sub-block: nsub sub-blocks of `len`, q in
 * 0..nmax, integer scales/mins in 0..smax. Writes q[256], sc[], mc[], d, dmin. */
static void quant_k_min(const float *v, int nsub, int len, int nmax, int smax, int8_t *q, int *sc, int *mc,
                        uint16_t *d_out, uint16_t *dmin_out) {
    float s[16], m[16], max_s = 0, max_m = 0;
    for (int j = 0; j < nsub; j++) {
        fit_min(v + j * len, len, nmax, 0, &s[j], &m[j]);
        if (s[j] > max_s) max_s = s[j];
        if (m[j] > max_m) max_m = m[j];
    }
    *d_out = wlm_f32_to_f16(max_s / (float)smax);
    *dmin_out = wlm_f32_to_f16(max_m / (float)smax);
    float d = h2f(*d_out), dmin = h2f(*dmin_out);
    for (int j = 0; j < nsub; j++) {
        sc[j] = d > 0 ? clampi(nearest(s[j] / d), 0, smax) : 0;
        mc[j] = dmin > 0 ? clampi(nearest(m[j] / dmin), 0, smax) : 0;
        float ds = d * (float)sc[j], dm = dmin * (float)mc[j];
        for (int i = 0; i < len; i++)
            q[j * len + i] = (int8_t)(ds > 0 ? clampi(nearest((v[j * len + i] + dm) / ds), 0, nmax) : 0);
    }
}

/* symmetric K-quants: 16 sub-blocks of 16, q in qmin..qmax, signed integer
 * scales in smin..smax */
static void quant_k_sym(const float *v, int qmin, int qmax, int smin, int smax, int8_t *q, int *sc, uint16_t *d_out) {
    float s[16], amax = 0, smx = 0;
    for (int j = 0; j < 16; j++) {
        s[j] = fit_sym(v + 16 * j, 16, qmin, qmax);
        float a = s[j] < 0 ? -s[j] : s[j];
        if (a > amax) {
            amax = a;
            smx = s[j];
        }
    }
    *d_out = wlm_f32_to_f16(smx / (float)smin);
    float d = h2f(*d_out);
    for (int j = 0; j < 16; j++) {
        sc[j] = d != 0 ? clampi(nearest(s[j] / d), smin, smax) : 0;
        float ds = d * (float)sc[j];
        for (int i = 0; i < 16; i++) q[16 * j + i] = (int8_t)(ds != 0 ? clampi(nearest(v[16 * j + i] / ds), qmin, qmax) : 0);
    }
}

static void pack_scales_k4(const int *sc, const int *mc, uint8_t *out) {
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        out[j + 4] = (uint8_t)(mc[j] | (mc[j + 4] >> 4) << 6);
        out[j + 8] = (uint8_t)((sc[j + 4] & 15) | (mc[j + 4] & 15) << 4);
    }
}

/* Q4_1, Q5_1: value = d * q + m; Q5_0: value = d * (q - 16) */
static void quantize_32(uint32_t type, const float *x, void *yv, uint32_t n) {
    int8_t q[32];
    for (uint32_t b = 0; b < n / 32; b++) {
        const float *v = x + (uint64_t)b * 32;
        if (type == GGML_Q4_1) {
            block_q4_1 *B = (block_q4_1 *)yv + b;
            quant_q4_1_q5_1(v, &B->d, &B->m, 15, q);
            for (int j = 0; j < 16; j++) B->qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
        } else if (type == GGML_Q5_1) {
            block_q5_1 *B = (block_q5_1 *)yv + b;
            quant_q4_1_q5_1(v, &B->d, &B->m, 31, q);
            pack_q5_bits(q, B->qs, B->qh);
        } else {
            block_q5_0 *B = (block_q5_0 *)yv + b;
            float s = fit_sym(v, 32, -16, 15);
            B->d = wlm_f32_to_f16(s);
            float d = h2f(B->d), id = d != 0 ? 1.0f / d : 0.0f;
            for (int j = 0; j < 32; j++) q[j] = (int8_t)(clampi(nearest(v[j] * id), -16, 15) + 16);
            pack_q5_bits(q, B->qs, B->qh);
        }
    }
}
void wlm_quantize_q4_1(const float *x, void *y, uint32_t n) { quantize_32(GGML_Q4_1, x, y, n); }
void wlm_quantize_q5_0(const float *x, void *y, uint32_t n) { quantize_32(GGML_Q5_0, x, y, n); }
void wlm_quantize_q5_1(const float *x, void *y, uint32_t n) { quantize_32(GGML_Q5_1, x, y, n); }

void wlm_quantize_q2_k(const float *x, void *yv, uint32_t n) {
    int8_t q[QK_K];
    int sc[16], mc[16];
    for (uint32_t b = 0; b < n / QK_K; b++) {
        block_q2_k *B = (block_q2_k *)yv + b;
        quant_k_min(x + (uint64_t)b * QK_K, 16, 16, 3, 15, q, sc, mc, &B->d, &B->dmin);
        for (int j = 0; j < 16; j++) B->scales[j] = (uint8_t)(sc[j] | mc[j] << 4);
        wlm_memset(B->qs, 0, sizeof B->qs);
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < 4; k++)
                for (int l = 0; l < 32; l++) B->qs[32 * h + l] |= (uint8_t)(q[128 * h + 32 * k + l] << (2 * k));
    }
}

void wlm_quantize_q3_k(const float *x, void *yv, uint32_t n) {
    int8_t q[QK_K];
    int sc[16];
    for (uint32_t b = 0; b < n / QK_K; b++) {
        block_q3_k *B = (block_q3_k *)yv + b;
        quant_k_sym(x + (uint64_t)b * QK_K, -4, 3, -32, 31, q, sc, &B->d);
        wlm_memset(B->scales, 0, sizeof B->scales);
        for (int j = 0; j < 16; j++) {
            int u = sc[j] + 32;
            B->scales[j % 8] |= (uint8_t)((u & 15) << (4 * (j / 8)));
            B->scales[8 + j % 4] |= (uint8_t)((u >> 4) << (2 * (j / 4)));
        }
        wlm_memset(B->qs, 0, sizeof B->qs);
        wlm_memset(B->hmask, 0, sizeof B->hmask);
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < 4; k++)
                for (int l = 0; l < 32; l++) {
                    int u = q[128 * h + 32 * k + l] + 4; /* 0..7 */
                    B->qs[32 * h + l] |= (uint8_t)((u & 3) << (2 * k));
                    B->hmask[l] |= (uint8_t)((u >> 2) << (4 * h + k));
                }
    }
}

/* Q4_K, Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins */
static void quantize_q45_k(uint32_t type, const float *x, void *yv, uint32_t n) {
    int8_t q[QK_K];
    int sc[16], mc[16];
    for (uint32_t b = 0; b < n / QK_K; b++) {
        uint8_t *B = (uint8_t *)yv + (uint64_t)b * (type == GGML_Q4_K ? sizeof(block_q4_k) : sizeof(block_q5_k));
        uint16_t d, dmin;
        quant_k_min(x + (uint64_t)b * QK_K, 8, 32, type == GGML_Q4_K ? 15 : 31, 63, q, sc, mc, &d, &dmin);
        __builtin_memcpy(B, &d, 2);
        __builtin_memcpy(B + 2, &dmin, 2);
        pack_scales_k4(sc, mc, B + 4);
        uint8_t *qh = type == GGML_Q5_K ? B + 16 : 0, *qs = type == GGML_Q5_K ? B + 48 : B + 16;
        if (qh) wlm_memset(qh, 0, 32);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                int lo = q[64 * c + l], hi = q[64 * c + 32 + l];
                qs[32 * c + l] = (uint8_t)((lo & 15) | (hi & 15) << 4);
                if (qh) qh[l] |= (uint8_t)(((lo >> 4) & 1) << (2 * c) | ((hi >> 4) & 1) << (2 * c + 1));
            }
    }
}
void wlm_quantize_q4_k(const float *x, void *y, uint32_t n) { quantize_q45_k(GGML_Q4_K, x, y, n); }
void wlm_quantize_q5_k(const float *x, void *y, uint32_t n) { quantize_q45_k(GGML_Q5_K, x, y, n); }

void wlm_quantize_q6_k(const float *x, void *yv, uint32_t n) {
    int8_t q[QK_K];
    int sc[16];
    for (uint32_t b = 0; b < n / QK_K; b++) {
        block_q6_k *B = (block_q6_k *)yv + b;
        quant_k_sym(x + (uint64_t)b * QK_K, -32, 31, -128, 127, q, sc, &B->d);
        for (int j = 0; j < 16; j++) B->scales[j] = (int8_t)sc[j];
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                int u0 = q[128 * h + l] + 32, u1 = q[128 * h + 32 + l] + 32;
                int u2 = q[128 * h + 64 + l] + 32, u3 = q[128 * h + 96 + l] + 32;
                B->ql[64 * h + l] = (uint8_t)((u0 & 15) | (u2 & 15) << 4);
                B->ql[64 * h + 32 + l] = (uint8_t)((u1 & 15) | (u3 & 15) << 4);
                B->qh[32 * h + l] = (uint8_t)((u0 >> 4) | (u1 >> 4) << 2 | (u2 >> 4) << 4 | (u3 >> 4) << 6);
            }
    }
}
