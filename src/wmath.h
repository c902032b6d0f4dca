/* Deterministic math: our own exp/log/sin/cos built only from IEEE +,-,*,/
 * and sqrt, compiled with -ffp-contract=off, so native and wasm builds give
 * bit-identical results (libm differs between platforms). */
#ifndef WLM_WMATH_H
#define WLM_WMATH_H

#include <stdint.h>

float wlm_expf(float x);
float wlm_logf(float x);
double wlm_exp(double x);
double wlm_log(double x);
double wlm_sin(double x);
double wlm_cos(double x);
static inline float wlm_sqrtf(float x) { return __builtin_sqrtf(x); }
static inline int wlm_isnan(float x) { return x != x; }
static inline int wlm_isfinite(float x) { return x - x == 0.0f; }
/* exp(x) in float arithmetic only, for the engine's many exponentials (the
 * sampler's log-sum-exp over the vocabulary, attention weights, SiLU): fixed
 * to the bit, so SIMD kernels reproduce it lane by lane (far cheaper than
 * wlm_expf in the SIMD sum_exp: make bench-logprob).
 * Relative error below 1e-7 (at most 1.18 ulp: checked against libm's exp
 * for every float in [WLM_EXPF_LO, WLM_EXPF_HI]); 0 below WLM_EXPF_LO (where
 * exp(x) < FLT_MIN: no subnormal results), +inf above WLM_EXPF_HI (just under
 * 127.5 ln 2; true overflow is at 88.72), NaN for NaN.
 * Definition (every step one IEEE float operation, in this order):
 *   t = x * LOG2E + 0x1.8p23            k = t - 0x1.8p23 (round(x/ln2))
 *   r = (x - k * LN2_HI) - k * LN2_LO    (LN2_HI has 12 bits: k * LN2_HI exact)
 *   p = Horner ((((C6 r + C5) r + C4) r + C3) r + C2) r + 1) r + 1
 *   result = p * 2^k (2^k built from the low bits of t: exact)
 * The coefficients are a minimax fit of exp on |r| <= ln2/2 (relative error
 * 3.2e-9 before rounding). */
#define WLM_EXPF_LO (-0x1.5d589ep+6f) /* -87.33654: the float just above ln(FLT_MIN) */
#define WLM_EXPF_HI 88.375f           /* below 127.5 ln2: k <= 127 */
#define WLM_EXPF_LOG2E 0x1.715476p+0f
#define WLM_EXPF_SHIFT 0x1.8p23f
#define WLM_EXPF_LN2_HI 0x1.62ep-1f     /* 2839/4096 */
#define WLM_EXPF_LN2_LO 0x1.0bfbe8p-15f /* ln2 - LN2_HI, rounded */
#define WLM_EXPF_C2 0x1.fffffcp-2f
#define WLM_EXPF_C3 0x1.55548cp-3f
#define WLM_EXPF_C4 0x1.555858p-5f
#define WLM_EXPF_C5 0x1.123de0p-7f
#define WLM_EXPF_C6 0x1.6ac74cp-10f
static inline float wlm_expf_fast(float x) {
    if (x < WLM_EXPF_LO) return 0.0f;
    if (x > WLM_EXPF_HI) return __builtin_inff();
    float t = x * WLM_EXPF_LOG2E + WLM_EXPF_SHIFT;
    float k = t - WLM_EXPF_SHIFT;
    float r = (x - k * WLM_EXPF_LN2_HI) - k * WLM_EXPF_LN2_LO;
    float p = WLM_EXPF_C6;
    p = p * r + WLM_EXPF_C5;
    p = p * r + WLM_EXPF_C4;
    p = p * r + WLM_EXPF_C3;
    p = p * r + WLM_EXPF_C2;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* t = 1.5 * 2^23 + k exactly, so its bits are 0x4b400000 + k and
     * bits << 23 is k << 23: the exponent field of 2^k after adding 127 */
    uint32_t tb, sb;
    __builtin_memcpy(&tb, &t, 4);
    sb = (tb << 23) + (127u << 23);
    float scale;
    __builtin_memcpy(&scale, &sb, 4);
    return p * scale;
}

/* SiLU(x) = x * sigmoid(x) = x / (1 + exp(-x)), exp by wlm_expf_fast (the
 * kernel silu_mul computes it lane by lane with the same bits) */
static inline float wlm_silu(float x) { return x / (1.0f + wlm_expf_fast(-x)); }

/* tanh(x) = 1 - 2 / (exp(2x) + 1), exp by wlm_expf_fast: exact limits +-1
 * (exp overflows to inf or underflows to 0); absolute error about 1e-7 */
static inline float wlm_tanhf(float x) { return 1.0f - 2.0f / (wlm_expf_fast(2.0f * x) + 1.0f); }

/* GELU in its tanh form (Gemma's FFN):
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
static inline float wlm_gelu_tanh(float x) {
    return 0.5f * x * (1.0f + wlm_tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

/* soft-capping: cap tanh(s / cap) */
static inline float wlm_softcap(float s, float cap) { return cap * wlm_tanhf(s / cap); }

#endif
