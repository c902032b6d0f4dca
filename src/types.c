/* Tensor types: one row per GGML type with everything the engine does with
 * it (sizes, row codecs, activation form, row dots by kernel set, what
 * re-quantization writes), the half/bfloat conversions and the codecs of
 * the float, Q8_0 and Q4_0 types. Adding a type is adding its row here. */
#include "ggml_types.h"
#include "quants.h"
#include "kernels.h"

/* ---- row codecs of the float, Q8_0 and Q4_0 types ---- */

static void dequantize_f32(const void *row, float *y, uint32_t n) { wlm_memcpy(y, row, (uint64_t)n * 4); }
static void dequantize_f16(const void *row, float *y, uint32_t n) {
    const uint16_t *h = row;
    for (uint32_t i = 0; i < n; i++) y[i] = wlm_f16_to_f32(h[i]);
}
static void dequantize_bf16(const void *row, float *y, uint32_t n) {
    const uint16_t *h = row;
    for (uint32_t i = 0; i < n; i++) y[i] = wlm_bf16_to_f32(h[i]);
}
static void dequantize_q8_0(const void *row, float *y, uint32_t n) {
    const block_q8_0 *b = row;
    for (uint32_t i = 0; i < n / QK8_0; i++) {
        float d = wlm_f16_to_f32(b[i].d);
        for (int j = 0; j < QK8_0; j++) y[i * QK8_0 + j] = d * (float)b[i].qs[j];
    }
}
static void dequantize_q4_0(const void *row, float *y, uint32_t n) {
    const block_q4_0 *b = row;
    for (uint32_t i = 0; i < n / QK4_0; i++) {
        float d = wlm_f16_to_f32(b[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[i * QK4_0 + j] = d * (float)((b[i].qs[j] & 15) - 8);
            y[i * QK4_0 + j + 16] = d * (float)((b[i].qs[j] >> 4) - 8);
        }
    }
}
static void quantize_f32(const float *x, void *y, uint32_t n) { wlm_memcpy(y, x, (uint64_t)n * 4); }
static void quantize_f16(const float *x, void *y, uint32_t n) { wlm_quantize_row_f16(x, y, n); }
static void quantize_q8_0(const float *x, void *y, uint32_t n) { wlm_quantize_row_q8_0(x, y, n); }
static void quantize_q4_0(const float *x, void *y, uint32_t n) { wlm_quantize_row_q4_0(x, y, n); }

/* ---- the table ---- */

/* clang-format off */
#if WLM_SIMD128
#define DOTS(ref, simd) { ref, simd }
#else
#define DOTS(ref, simd) { ref, 0 }
#endif

#define SIZE_ONLY(n, b, bytes) { .name = n, .block = b, .block_bytes = bytes }

static const wlm_type_info TYPES[GGML_TYPE_COUNT] = {
    /* name     block bytes  activations  dequantize, quantize  target  file_type  fallback, then dots */
    [GGML_F32]  = { "F32",  1,   4,   GGML_F32,  dequantize_f32,  quantize_f32,  1,  0, 0,
                    DOTS(wlm_row_dot_f32, wlm_row_dot_f32_simd) },
    [GGML_F16]  = { "F16",  1,   2,   GGML_F32,  dequantize_f16,  quantize_f16,  2,  1, 0,
                    DOTS(wlm_row_dot_f16, wlm_row_dot_f16_simd) },
    [GGML_BF16] = { "BF16", 1,   2,   GGML_F32,  dequantize_bf16, 0,             0,  0, 0,
                    DOTS(wlm_row_dot_bf16, wlm_row_dot_bf16_simd) },
    [GGML_Q8_0] = { "Q8_0", 32,  34,  GGML_Q8_0, dequantize_q8_0, quantize_q8_0, 3,  7, 0,
                    DOTS(wlm_row_dot_q8_0, wlm_row_dot_q8_0_simd) },
    [GGML_Q4_0] = { "Q4_0", 32,  18,  GGML_Q8_0, dequantize_q4_0, quantize_q4_0, 4,  2, 0,
                    DOTS(wlm_row_dot_q4_0, wlm_row_dot_q4_0_simd) },
    [GGML_Q4_1] = { "Q4_1", 32,  20,  GGML_Q8_0, wlm_dequantize_q4_1, wlm_quantize_q4_1, 5, 3, 0,
                    DOTS(wlm_kq_dot_q4_1, wlm_kq_dot_q4_1_simd) },
    [GGML_Q5_0] = { "Q5_0", 32,  22,  GGML_Q8_0, wlm_dequantize_q5_0, wlm_quantize_q5_0, 6, 8, 0,
                    DOTS(wlm_kq_dot_q5_0, wlm_kq_dot_q5_0_simd) },
    [GGML_Q5_1] = { "Q5_1", 32,  24,  GGML_Q8_0, wlm_dequantize_q5_1, wlm_quantize_q5_1, 7, 9, 0,
                    DOTS(wlm_kq_dot_q5_1, wlm_kq_dot_q5_1_simd) },
    [GGML_Q2_K] = { "Q2_K", 256, 84,  GGML_Q8_K, wlm_dequantize_q2_k, wlm_quantize_q2_k, 8, 10, GGML_Q4_0,
                    DOTS(wlm_kq_dot_q2_k, wlm_kq_dot_q2_k_simd) },
    [GGML_Q3_K] = { "Q3_K", 256, 110, GGML_Q8_K, wlm_dequantize_q3_k, wlm_quantize_q3_k, 9, 11, GGML_Q4_0,
                    DOTS(wlm_kq_dot_q3_k, wlm_kq_dot_q3_k_simd) },
    [GGML_Q4_K] = { "Q4_K", 256, 144, GGML_Q8_K, wlm_dequantize_q4_k, wlm_quantize_q4_k, 10, 14, GGML_Q5_0,
                    DOTS(wlm_kq_dot_q4_k, wlm_kq_dot_q4_k_simd) },
    [GGML_Q5_K] = { "Q5_K", 256, 176, GGML_Q8_K, wlm_dequantize_q5_k, wlm_quantize_q5_k, 11, 16, GGML_Q5_1,
                    DOTS(wlm_kq_dot_q5_k, wlm_kq_dot_q5_k_simd) },
    [GGML_Q6_K] = { "Q6_K", 256, 210, GGML_Q8_K, wlm_dequantize_q6_k, wlm_quantize_q6_k, 12, 18, GGML_Q8_0,
                    DOTS(wlm_kq_dot_q6_k, wlm_kq_dot_q6_k_simd) },
    /* the activations of the K-quant dots: decoded, never computed with */
    [GGML_Q8_K] = { .name = "Q8_K", .block = 256, .block_bytes = 292, .act = GGML_F32, .dequantize = wlm_dequantize_q8_k },
    /* known by size only (a file holding them fails to load by name) */
    [GGML_Q8_1] = SIZE_ONLY("Q8_1", 32, 36),     [16] = SIZE_ONLY("IQ2_XXS", 256, 66), [17] = SIZE_ONLY("IQ2_XS", 256, 74),
    [18] = SIZE_ONLY("IQ3_XXS", 256, 98),        [19] = SIZE_ONLY("IQ1_S", 256, 50),   [20] = SIZE_ONLY("IQ4_NL", 32, 18),
    [21] = SIZE_ONLY("IQ3_S", 256, 110),         [22] = SIZE_ONLY("IQ2_S", 256, 82),   [23] = SIZE_ONLY("IQ4_XS", 256, 136),
    [24] = SIZE_ONLY("I8", 1, 1),   [25] = SIZE_ONLY("I16", 1, 2),   [26] = SIZE_ONLY("I32", 1, 4),   [27] = SIZE_ONLY("I64", 1, 8),
    [28] = SIZE_ONLY("F64", 1, 8),  [29] = SIZE_ONLY("IQ1_M", 256, 56), [34] = SIZE_ONLY("TQ1_0", 256, 54),
    [35] = SIZE_ONLY("TQ2_0", 256, 66), [39] = SIZE_ONLY("MXFP4", 32, 17),
};
/* clang-format on */

const wlm_type_info *wlm_type(uint32_t type) {
    if (type >= GGML_TYPE_COUNT || !TYPES[type].name) return 0;
    return &TYPES[type];
}

const char *wlm_type_name(uint32_t type) {
    const wlm_type_info *t = wlm_type(type);
    return t ? t->name : "unknown";
}

wlm_dot_fn wlm_kernel_dot(const wlm_kernels *k, uint32_t type) {
    const wlm_type_info *t = wlm_type(type);
    return t ? t->dot[k->set] : 0;
}

void wlm_dequantize_row(uint32_t type, const void *row, float *y, uint32_t n) {
    const wlm_type_info *t = wlm_type(type);
    if (t && t->dequantize) t->dequantize(row, y, n);
    else wlm_memset(y, 0, (uint64_t)n * 4);
}

int wlm_quantize_row(uint32_t type, const float *x, void *y, uint32_t n) {
    const wlm_type_info *t = wlm_type(type);
    if (!t || !t->quantize) return 0;
    t->quantize(x, y, n);
    return 1;
}

uint32_t wlm_act_type(uint32_t wt) {
    const wlm_type_info *t = wlm_type(wt);
    return t && wlm_type_supported(t) ? t->act : GGML_F32;
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

/* ---- half / bfloat conversion and the Q8_0 / Q4_0 quantizers ---- */

uint16_t wlm_f32_to_f16(float f) {
    uint32_t x;
    __builtin_memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffff;
    if (ax >= 0x7f800000) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000 ? 0x200 | ((ax >> 13) & 0x3ff) : 0));
    if (ax >= 0x477ff000) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520: inf */
    if (ax < 0x38800000) {                                  /* result is subnormal or zero: align to 2^-24 units */
        if (ax < 0x33000000) return (uint16_t)sign;         /* < 2^-25: rounds to zero */
        uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = ax - 0x38000000; /* rebias exponent 127 -> 15 */
    uint32_t q = r >> 13, rem = r & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) q++;
    return (uint16_t)(sign | q);
}

uint16_t wlm_f32_to_bf16(float f) {
    uint32_t x;
    __builtin_memcpy(&x, &f, 4);
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

/* v rounded half away from zero and kept within [-127, 127]; NaN gives 0.
 * |v * id| is at most 127 (and a hair) for every block but one whose amax
 * is so small that 1 / d overflows: there v * id is infinite and the value
 * saturates (the conversion of an infinity to int is undefined). So a Q8_0
 * activation never holds -128, and kernels may take |x| as a 7-bit operand. */
static inline int8_t round_q8(float v) {
    if (v != v) return 0;
    float a = v < 0 ? -v : v;
    int i = a >= 127.0f ? 127 : round_i(a);
    return (int8_t)(v < 0 ? -i : i);
}

void wlm_quantize_row_q8_0(const float *x, block_q8_0 *y, uint32_t n) {
    for (uint32_t b = 0; b < n / QK8_0; b++) {
        const float *v = x + b * QK8_0;
        float amax = 0;
        for (int j = 0; j < QK8_0; j++) {
            float a = v[j] < 0 ? -v[j] : v[j];
            if (a > amax) amax = a;
        }
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        y[b].d = wlm_f32_to_f16(d);
        for (int j = 0; j < QK8_0; j++) y[b].qs[j] = round_q8(v[j] * id);
    }
}

void wlm_quantize_row_q4_0(const float *x, block_q4_0 *y, uint32_t n) {
    for (uint32_t b = 0; b < n / QK4_0; b++) {
        const float *v = x + b * QK4_0;
        float amax = 0, vmax = 0;
        for (int j = 0; j < QK4_0; j++) {
            float a = v[j] < 0 ? -v[j] : v[j];
            if (a > amax) {
                amax = a;
                vmax = v[j];
            }
        }
        /* the extreme value maps to -8, so the full range [-8, 7] is used */
        float d = vmax / -8.0f, id = d ? 1.0f / d : 0.0f;
        y[b].d = wlm_f32_to_f16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            int q0 = (int)(v[j] * id + 8.5f), q1 = (int)(v[j + 16] * id + 8.5f);
            q0 = q0 < 0 ? 0 : q0 > 15 ? 15
                                      : q0;
            q1 = q1 < 0 ? 0 : q1 > 15 ? 15
                                      : q1;
            y[b].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

void wlm_quantize_row_f16(const float *x, uint16_t *y, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) y[i] = wlm_f32_to_f16(x[i]);
}
