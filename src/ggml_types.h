/* GGML tensor types as stored in GGUF files: ids, block sizes and the packed
 * block layouts. Layouts follow the published GGUF/ggml format. */
#ifndef WLM_GGML_TYPES_H
#define WLM_GGML_TYPES_H

#include <stdint.h>

enum {
    GGML_F32 = 0,
    GGML_F16 = 1,
    GGML_Q4_0 = 2,
    GGML_Q4_1 = 3,
    GGML_Q5_0 = 6,
    GGML_Q5_1 = 7,
    GGML_Q8_0 = 8,
    GGML_Q8_1 = 9,
    GGML_Q2_K = 10,
    GGML_Q3_K = 11,
    GGML_Q4_K = 12,
    GGML_Q5_K = 13,
    GGML_Q6_K = 14,
    GGML_Q8_K = 15,
    GGML_BF16 = 30,
    GGML_TYPE_COUNT = 40
};

#define QK8_0 32
#define QK4_0 32

/* Q8_0: 32 weights = f16 scale + 32 int8. value = d * q */
typedef struct {
    uint16_t d;
    int8_t qs[QK8_0];
} block_q8_0;
/* Q4_0: 32 weights = f16 scale + 16 bytes of nibbles; byte j holds weight j
 * (low nibble) and weight j+16 (high nibble). value = d * (q - 8) */
typedef struct {
    uint16_t d;
    uint8_t qs[QK4_0 / 2];
} block_q4_0;

_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 is 34 bytes");
_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 is 18 bytes");

/* ---- more 32-blocks and the K-quants (256-element super-blocks); the
 * element order of each is described in src/quants_scalar.c. Halves are IEEE f16. */
#define QK_K 256
/* Q4_1: value = d * q + m, q = 0..15 (nibbles as in Q4_0) */
typedef struct {
    uint16_t d, m;
    uint8_t qs[16];
} block_q4_1;
/* Q5_0: value = d * (q - 16), q = nibble | high bit from qh (bit j of qh for weight j) */
typedef struct {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
} block_q5_0;
/* Q5_1: value = d * q + m, q = 0..31 */
typedef struct {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[16];
} block_q5_1;
/* Q2_K: 16 sub-blocks of 16: value = d * (sc & 15) * q - dmin * (sc >> 4), q = 0..3 */
typedef struct {
    uint8_t scales[16];
    uint8_t qs[64];
    uint16_t d, dmin;
} block_q2_k;
/* Q3_K: 16 sub-blocks of 16: value = d * (s6 - 32) * q, q = -4..3 (2 low bits + hmask bit) */
typedef struct {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12];
    uint16_t d;
} block_q3_k;
/* Q4_K: 8 sub-blocks of 32: value = d * sc * q - dmin * m, 6-bit sc/m, q = 0..15 */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[128];
} block_q4_k;
/* Q5_K: as Q4_K with q = 0..31 (fifth bit in qh) */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
} block_q5_k;
/* Q6_K: 16 sub-blocks of 16: value = d * sc * (q - 32), int8 sc, q = 0..63 */
typedef struct {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
} block_q6_k;
/* Q8_K (activations of K-quant dot products): value = d * q; bsums[i] is the
 * sum of q[16i .. 16i+15] */
typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
} block_q8_k;

_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 is 20 bytes");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 is 22 bytes");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 is 24 bytes");
_Static_assert(sizeof(block_q2_k) == 84, "block_q2_k is 84 bytes");
_Static_assert(sizeof(block_q3_k) == 110, "block_q3_k is 110 bytes");
_Static_assert(sizeof(block_q4_k) == 144, "block_q4_k is 144 bytes");
_Static_assert(sizeof(block_q5_k) == 176, "block_q5_k is 176 bytes");
_Static_assert(sizeof(block_q6_k) == 210, "block_q6_k is 210 bytes");
_Static_assert(sizeof(block_q8_k) == 292, "block_q8_k is 292 bytes");

/* kernel sets a type row carries dots for: the scalar reference and the
 * SIMD set (SIMD128 or relaxed SIMD, whichever the build compiles) */
enum { WLM_SET_SCALAR = 0,
       WLM_SET_SIMD = 1,
       WLM_KERNEL_SETS = 2 };

/* dot of one weight row (n elements, stored in the weight type) with an
 * activation row in the type's activation form (act below) */
typedef float (*wlm_dot_fn)(uint32_t n, const void *w, const void *x);

/* One row per tensor type (types.c): everything the engine does with it.
 * Adding a type is adding its row (and writing the functions it names). */
typedef struct wlm_type_info {
    const char *name;
    uint32_t block;       /* elements per block (1 for plain floats) */
    uint32_t block_bytes; /* bytes per block; 0 = unknown/unsupported size */
    uint32_t act;         /* the activation form its dots read: GGML_F32, GGML_Q8_0 or GGML_Q8_K */
    /* n elements of a row (n a multiple of block) to floats / from floats;
     * quantize NULL: not a wlm_quantize target */
    void (*dequantize)(const void *row, float *y, uint32_t n);
    void (*quantize)(const float *x, void *y, uint32_t n);
    uint32_t target;                 /* quantize targets: place in wlm_quantize_target's list (from 1) */
    uint32_t file_type;              /* general.file_type of a file written in this type (llama.cpp's numbers) */
    uint32_t fallback;               /* K-quants: the 32-block type for rows that are not whole super-blocks */
    wlm_dot_fn dot[WLM_KERNEL_SETS]; /* row dots by kernel set; dot[WLM_SET_SCALAR] NULL: not computable */
} wlm_type_info;

/* NULL for ids out of range; .block_bytes == 0 for ids with unknown size. */
const wlm_type_info *wlm_type(uint32_t type);
/* whether the engine computes with this type (it has a reference dot) */
static inline int wlm_type_supported(const wlm_type_info *t) { return t && t->dot[WLM_SET_SCALAR]; }

/* IEEE half <-> float (exact, all values incl. subnormals, inf, nan). */
static inline float wlm_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t em = h & 0x7fff;
    uint32_t bits;
    if (em >= 0x7c00) {
        bits = sign | 0x7f800000u | ((uint32_t)(em & 0x3ff) << 13);
    } else {
        /* shift exponent+mantissa into float position, rescale by 2^112:
         * exact for normals and subnormals alike */
        float f;
        uint32_t t = em << 13;
        __builtin_memcpy(&f, &t, 4);
        f *= 0x1p112f;
        __builtin_memcpy(&bits, &f, 4);
        bits |= sign;
    }
    float out;
    __builtin_memcpy(&out, &bits, 4);
    return out;
}
uint16_t wlm_f32_to_f16(float f); /* round to nearest even */
static inline float wlm_bf16_to_f32(uint16_t h) {
    uint32_t b = (uint32_t)h << 16;
    float f;
    __builtin_memcpy(&f, &b, 4);
    return f;
}
uint16_t wlm_f32_to_bf16(float f);

/* Quantizes n floats (n % 32 == 0) to Q8_0 blocks; scalar, shared by every
 * build so activations quantize identically everywhere. */
void wlm_quantize_row_q8_0(const float *x, block_q8_0 *y, uint32_t n);
void wlm_quantize_row_q4_0(const float *x, block_q4_0 *y, uint32_t n);
void wlm_quantize_row_f16(const float *x, uint16_t *y, uint32_t n);
/* Dequantizes one row of any supported type into floats (zeros for others). */
void wlm_dequantize_row(uint32_t type, const void *row, float *y, uint32_t n);
/* Quantizes n floats into `type` by its row's quantizer; 0 (nothing
 * written) when the type has none. */
int wlm_quantize_row(uint32_t type, const float *x, void *y, uint32_t n);
/* The activation form a weight type's dot product takes: GGML_F32 (floats),
 * GGML_Q8_0 (int8 blocks of 32) or GGML_Q8_K (int8 blocks of 256). */
uint32_t wlm_act_type(uint32_t weight_type);
/* Converts n floats into activation form `act_type` (no-op for F32). */
void wlm_quantize_act(uint32_t act_type, const float *x, void *y, uint32_t n);
/* bytes of one activation row of n elements in form act_type */
uint64_t wlm_act_row_bytes(uint32_t act_type, uint32_t n);

#endif
