/* Tensor types: the table of GGML types, half/bfloat conversion, and the
 * scalar reference quantizers and dequantizers. */
#include "ggml_types.h"
#include "kquants.h"
#include "layouts.h"

static const wlm_type_info TYPES[GGML_TYPE_COUNT] = {
    [0] = {"F32", 1, 4, 1},      [1] = {"F16", 1, 2, 1},      [2] = {"Q4_0", 32, 18, 1},
    [3] = {"Q4_1", 32, 20, 1},   [6] = {"Q5_0", 32, 22, 1},   [7] = {"Q5_1", 32, 24, 1},
    [8] = {"Q8_0", 32, 34, 1},   [9] = {"Q8_1", 32, 36, 0},   [10] = {"Q2_K", 256, 84, 1},
    [11] = {"Q3_K", 256, 110, 1}, [12] = {"Q4_K", 256, 144, 1}, [13] = {"Q5_K", 256, 176, 1},
    [14] = {"Q6_K", 256, 210, 1}, [15] = {"Q8_K", 256, 292, 0}, [16] = {"IQ2_XXS", 256, 66, 0},
    [17] = {"IQ2_XS", 256, 74, 0}, [18] = {"IQ3_XXS", 256, 98, 0}, [19] = {"IQ1_S", 256, 50, 0},
    [20] = {"IQ4_NL", 32, 18, 0}, [21] = {"IQ3_S", 256, 110, 0}, [22] = {"IQ2_S", 256, 82, 0},
    [23] = {"IQ4_XS", 256, 136, 0}, [24] = {"I8", 1, 1, 0},     [25] = {"I16", 1, 2, 0},
    [26] = {"I32", 1, 4, 0},     [27] = {"I64", 1, 8, 0},     [28] = {"F64", 1, 8, 0},
    [29] = {"IQ1_M", 256, 56, 0}, [30] = {"BF16", 1, 2, 1},    [34] = {"TQ1_0", 256, 54, 0},
    [35] = {"TQ2_0", 256, 66, 0}, [39] = {"MXFP4", 32, 17, 0},
};

const wlm_type_info *wlm_type(uint32_t type) {
    if (type >= GGML_TYPE_COUNT || !TYPES[type].name) return 0;
    return &TYPES[type];
}

const char *wlm_type_name(uint32_t type) {
    const wlm_type_info *t = wlm_type(type);
    return t ? t->name : "unknown";
}

uint16_t wlm_f32_to_f16(float f) {
    uint32_t x; __builtin_memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffff;
    if (ax >= 0x7f800000) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000 ? 0x200 | ((ax >> 13) & 0x3ff) : 0));
    if (ax >= 0x477ff000) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520: inf */
    if (ax < 0x38800000) { /* result is subnormal or zero: align to 2^-24 units */
        if (ax < 0x33000000) return (uint16_t)sign;   /* < 2^-25: rounds to zero */
        uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e;                      /* 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = ax - 0x38000000;                      /* rebias exponent 127 -> 15 */
    uint32_t q = r >> 13, rem = r & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) q++;
    return (uint16_t)(sign | q);
}

uint16_t wlm_f32_to_bf16(float f) {
    uint32_t x; __builtin_memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* round half away from zero, without libm */
static inline int round_i(float v) {
    float a = v < 0 ? -v : v;
    int i = (int)a;
    if (a - (float)i >= 0.5f) i++;
    return v < 0 ? -i : i;
}

void wlm_quantize_row_q8_0(const float *x, block_q8_0 *y, uint32_t n) {
    for (uint32_t b = 0; b < n / QK8_0; b++) {
        const float *v = x + b * QK8_0;
        float amax = 0;
        for (int j = 0; j < QK8_0; j++) { float a = v[j] < 0 ? -v[j] : v[j]; if (a > amax) amax = a; }
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        y[b].d = wlm_f32_to_f16(d);
        for (int j = 0; j < QK8_0; j++) y[b].qs[j] = (int8_t)round_i(v[j] * id);
    }
}

void wlm_quantize_row_q4_0(const float *x, block_q4_0 *y, uint32_t n) {
    for (uint32_t b = 0; b < n / QK4_0; b++) {
        const float *v = x + b * QK4_0;
        float amax = 0, vmax = 0;
        for (int j = 0; j < QK4_0; j++) { float a = v[j] < 0 ? -v[j] : v[j]; if (a > amax) { amax = a; vmax = v[j]; } }
        /* the extreme value maps to -8, so the full range [-8, 7] is used */
        float d = vmax / -8.0f, id = d ? 1.0f / d : 0.0f;
        y[b].d = wlm_f32_to_f16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            int q0 = (int)(v[j] * id + 8.5f), q1 = (int)(v[j + 16] * id + 8.5f);
            q0 = q0 < 0 ? 0 : q0 > 15 ? 15 : q0;
            q1 = q1 < 0 ? 0 : q1 > 15 ? 15 : q1;
            y[b].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}


void wlm_unpack_i16x4(uint32_t type, const void *row, uint8_t *out, uint32_t n) {
    uint32_t nb = n / 32, full = nb / 4 * 4;
    int16_t *q = (int16_t *)out;
    float *d = (float *)(out + (uint64_t)n * 2);
    for (uint32_t b = 0; b < nb; b++) {
        int16_t v[32];
        if (type == WLM_Q4G) {
            d[b] = wlm_f16_to_f32(wlm_q4g_d(row, nb, b));
            for (int k = 0; k < 32; k++) v[k] = (int16_t)((int)wlm_q4g_q(row, nb, b, (uint32_t)k) - 8);
        } else if (type == GGML_Q4_0) {
            const block_q4_0 *x = (const block_q4_0 *)row + b;
            d[b] = wlm_f16_to_f32(x->d);
            for (int j = 0; j < 16; j++) { v[j] = (int16_t)((x->qs[j] & 15) - 8); v[j + 16] = (int16_t)((x->qs[j] >> 4) - 8); }
        } else {
            const block_q8_0 *x = (const block_q8_0 *)row + b;
            d[b] = wlm_f16_to_f32(x->d);
            for (int j = 0; j < 32; j++) v[j] = x->qs[j];
        }
        if (b < full) {
            int16_t *g = q + (b / 4) * 128 + (b % 4) * 2;
            for (int k = 0; k < 32; k++) g[(k / 2) * 8 + (k & 1)] = v[k];
        } else {
            for (int k = 0; k < 32; k++) q[b * 32 + k] = v[k];
        }
    }
}

/* byte offset of value k (0..31) of block b in the i8x4 form of a row of nb
 * blocks: within the groups of four, interleaved by 4 bytes; after them, in
 * order */
static inline uint64_t i8x4_at(uint32_t b, uint32_t nb, uint32_t k) {
    if (b >= nb / 4 * 4) return (uint64_t)b * 32 + k;
    return (uint64_t)(b / 4) * 128 + (k / 4) * 16 + (b % 4) * 4 + k % 4;
}

void wlm_unpack_q4_i8x4(const block_q4_0 *row, uint8_t *out, uint32_t n) {
    uint32_t nb = n / 32;
    float *d = (float *)(out + n);
    for (uint32_t b = 0; b < nb; b++) {
        for (uint32_t k = 0; k < 32; k++) out[i8x4_at(b, nb, k)] = k < 16 ? row[b].qs[k] & 15 : row[b].qs[k - 16] >> 4;
        d[b] = wlm_f16_to_f32(row[b].d);
    }
}

void wlm_act_i8x4(const block_q8_0 *x, uint8_t *out, uint32_t n) { wlm_act_i8x4_blocks(x, out, n, 0, n / 32); }

void wlm_act_i8x4_blocks(const block_q8_0 *x, uint8_t *out, uint32_t n, uint32_t b0, uint32_t b1) {
    uint32_t nb = n / 32;
    float *d = (float *)(out + n);
    int32_t *sum = (int32_t *)(out + n + (uint64_t)nb * 4);
    for (uint32_t b = b0; b < b1; b++) {
        int32_t s = 0;
        for (uint32_t k = 0; k < 32; k++) { ((int8_t *)out)[i8x4_at(b, nb, k)] = x[b].qs[k]; s += x[b].qs[k]; }
        d[b] = wlm_f16_to_f32(x[b].d);
        sum[b] = s;
    }
}

void wlm_act_q4gb_row(const block_q8_0 *x, uint8_t *xb, uint32_t n, uint32_t t) {
    uint8_t *o = xb + t / WLM_Q4GB_T * wlm_q4gb_chunk_bytes(n) + 16 * (t % WLM_Q4GB_T);
    for (uint32_t g = 0; g < n / 128; g++, o += 160 * WLM_Q4GB_T)
        for (uint32_t i = 0; i < 4; i++) {
            const block_q8_0 *B = x + 4 * g + i;
            int16_t s[2] = { 0, 0 };   /* -8 x the values the kernel's int16 lanes 2i, 2i + 1 take */
            for (uint32_t k = 0; k < 32; k++) {
                o[16 * WLM_Q4GB_T * (k / 4) + 4 * i + k % 4] = (uint8_t)B->qs[k];
                s[k % 4 / 2] = (int16_t)(s[k % 4 / 2] - 8 * B->qs[k]);
            }
            float d = wlm_f16_to_f32(B->d);
            wlm_memcpy(o + 128 * WLM_Q4GB_T + 4 * i, &d, 4);
            wlm_memcpy(o + 144 * WLM_Q4GB_T + 4 * i, s, 4);
        }
}

/* ---- q4g ---- */
void wlm_q4g_from_q4_0(uint8_t *row, uint32_t n) {
    uint32_t ng = n / 32 / 4;
    for (uint32_t g = 0; g < ng; g++) {
        uint8_t *p = row + (uint64_t)g * 72, t[72];
        wlm_memcpy(t, p, 72);
        const block_q4_0 *B = (const block_q4_0 *)t;
        for (uint32_t i = 0; i < 4; i++) {
            p[i * 2] = (uint8_t)(B[i].d & 0xff);
            p[i * 2 + 1] = (uint8_t)(B[i].d >> 8);
            for (uint32_t k = 0; k < 16; k++) p[8 + (k / 4) * 16 + i * 4 + k % 4] = B[i].qs[k];
        }
    }
}

void wlm_q4g_to_q4_0(const uint8_t *row, block_q4_0 *out, uint32_t n) {
    uint32_t nb = n / 32;
    for (uint32_t b = 0; b < nb; b++) {
        out[b].d = wlm_q4g_d(row, nb, b);
        for (uint32_t k = 0; k < 16; k++) out[b].qs[k] = (uint8_t)(wlm_q4g_q(row, nb, b, k) | wlm_q4g_q(row, nb, b, k + 16) << 4);
    }
}

/* dot_q4_0's order: four running sums by block index mod 4, the tail in order */
float wlm_dot_q4g(uint32_t n, const uint8_t *row, const block_q8_0 *x) {
    uint32_t nb = n / 32, full = nb / 4 * 4;
    float a[4] = {0, 0, 0, 0}, r = 0;
    for (uint32_t b = 0; b < nb; b++) {
        int32_t s = 0;
        for (uint32_t k = 0; k < 32; k++) s += ((int32_t)wlm_q4g_q(row, nb, b, k) - 8) * x[b].qs[k];
        float t = (wlm_f16_to_f32(wlm_q4g_d(row, nb, b)) * wlm_f16_to_f32(x[b].d)) * (float)s;
        if (b < full) a[b % 4] += t;
        else r += t;
        if (b + 1 == full) r = (a[0] + a[1]) + (a[2] + a[3]);
    }
    return r;
}

void wlm_dequantize_q4g_row(const uint8_t *row, float *y, uint32_t n) {
    uint32_t nb = n / 32;
    for (uint32_t b = 0; b < nb; b++) {
        float d = wlm_f16_to_f32(wlm_q4g_d(row, nb, b));
        for (uint32_t k = 0; k < 32; k++) y[b * 32 + k] = d * (float)((int)wlm_q4g_q(row, nb, b, k) - 8);
    }
}

/* blocks [b0, b1) of x widened to int16 in the i16eo order (grouped = 0) or
 * the i16g order, then their scales and exact sums */
static void act_i16_blocks(const block_q8_0 *x, uint8_t *out, uint32_t n, uint32_t b0, uint32_t b1, int grouped) {
    uint32_t nb = n / 32;
    int16_t *q = (int16_t *)out;
    float *d = (float *)(out + (uint64_t)n * 2);
    int32_t *sum = (int32_t *)(out + (uint64_t)n * 2 + (uint64_t)nb * 4);
    for (uint32_t b = b0; b < b1; b++) {
        int32_t s = 0;
        for (uint32_t k = 0; k < 32; k++) { q[grouped ? wlm_i16g_pos(b, nb, k) : b * 32 + wlm_i16eo_pos(k)] = x[b].qs[k]; s += x[b].qs[k]; }
        d[b] = wlm_f16_to_f32(x[b].d);
        sum[b] = s;
    }
}

void wlm_act_i16g_blocks(const block_q8_0 *x, uint8_t *out, uint32_t n, uint32_t b0, uint32_t b1) { act_i16_blocks(x, out, n, b0, b1, 1); }

void wlm_act_i16eo(const block_q8_0 *x, uint8_t *out, uint32_t n) { wlm_act_i16eo_blocks(x, out, n, 0, n / 32); }

void wlm_act_i16eo_blocks(const block_q8_0 *x, uint8_t *out, uint32_t n, uint32_t b0, uint32_t b1) { act_i16_blocks(x, out, n, b0, b1, 0); }


void wlm_quantize_row_f16(const float *x, uint16_t *y, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) y[i] = wlm_f32_to_f16(x[i]);
}

void wlm_dequantize_row(uint32_t type, const void *row, float *y, uint32_t n) {
    switch (type) {
    case GGML_F32: wlm_memcpy(y, row, n * 4); break;
    case GGML_F16: { const uint16_t *h = row; for (uint32_t i = 0; i < n; i++) y[i] = wlm_f16_to_f32(h[i]); break; }
    case GGML_BF16: { const uint16_t *h = row; for (uint32_t i = 0; i < n; i++) y[i] = wlm_bf16_to_f32(h[i]); break; }
    case GGML_Q8_0: {
        const block_q8_0 *b = row;
        for (uint32_t i = 0; i < n / QK8_0; i++) {
            float d = wlm_f16_to_f32(b[i].d);
            for (int j = 0; j < QK8_0; j++) y[i * QK8_0 + j] = d * (float)b[i].qs[j];
        }
        break;
    }
    case GGML_Q4_0: {
        const block_q4_0 *b = row;
        for (uint32_t i = 0; i < n / QK4_0; i++) {
            float d = wlm_f16_to_f32(b[i].d);
            for (int j = 0; j < QK4_0 / 2; j++) {
                y[i * QK4_0 + j] = d * (float)((b[i].qs[j] & 15) - 8);
                y[i * QK4_0 + j + 16] = d * (float)((b[i].qs[j] >> 4) - 8);
            }
        }
        break;
    }
    default: if (!wlm_kq_dequantize_row(type, row, y, n)) wlm_memset(y, 0, n * 4); break;
    }
}

uint32_t wlm_act_type(uint32_t wt) {
    switch (wt) {
    case GGML_Q8_0: case GGML_Q4_0: return GGML_Q8_0;
    case GGML_Q4_1: case GGML_Q5_0: case GGML_Q5_1: return GGML_Q8_0;
    case GGML_Q2_K: case GGML_Q3_K: case GGML_Q4_K: case GGML_Q5_K: case GGML_Q6_K: return GGML_Q8_K;
    default: return GGML_F32;
    }
}

uint64_t wlm_act_row_bytes(uint32_t act_type, uint32_t n) {
    const wlm_type_info *t = wlm_type(act_type);
    return (uint64_t)(n + t->block - 1) / t->block * t->block_bytes;
}

void wlm_quantize_act(uint32_t act_type, const float *x, void *y, uint32_t n) {
    switch (act_type) {
    case GGML_Q8_0: wlm_quantize_row_q8_0(x, y, n); break;
    case GGML_Q8_K: wlm_quantize_row_q8_k(x, y, n); break;
    default: break;
    }
}
