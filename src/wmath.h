/* Deterministic math: our own exp/log/sin/cos built only from IEEE +,-,*,/
 * and sqrt, compiled with -ffp-contract=off, so native and wasm builds give
 * bit-identical results (libm differs between platforms). */
#ifndef WLM_WMATH_H
#define WLM_WMATH_H

float wlm_expf(float x);
float wlm_logf(float x);
double wlm_exp(double x);
double wlm_log(double x);
double wlm_sin(double x);
double wlm_cos(double x);
static inline float wlm_sqrtf(float x) { return __builtin_sqrtf(x); }
static inline int wlm_isnan(float x) { return x != x; }
static inline int wlm_isfinite(float x) { return x - x == 0.0f; }
/* SiLU(x) = x * sigmoid(x) */
static inline float wlm_silu(float x) { return x / (1.0f + wlm_expf(-x)); }

#endif
