/* Deterministic elementary functions (see wmath.h). Double-precision range
 * reduction and polynomial evaluation in a fixed order; results are accurate
 * to about 1 ulp for float uses. No libm: the same bits on every platform. */
#include "wmath.h"
#include <stdint.h>

static const double LN2_HI = 6.93147180369123816490e-01; /* low bits zero */
static const double LN2_LO = 1.90821492927058770002e-10;
static const double INV_LN2 = 1.44269504088896338700e+00;

static double from_bits(uint64_t b) {
    double d;
    __builtin_memcpy(&d, &b, 8);
    return d;
}
static uint64_t to_bits(double d) {
    uint64_t b;
    __builtin_memcpy(&b, &d, 8);
    return b;
}
static double pow2i(int k) { return from_bits((uint64_t)(k + 1023) << 52); } /* -1022 <= k <= 1023 */

double wlm_exp(double x) {
    if (x != x) return x;
    if (x > 709.782712893384) return from_bits(0x7ff0000000000000ull);
    if (x < -745.1332191019412) return 0.0;
    double kd = x * INV_LN2;
    int k = (int)(kd + (kd >= 0 ? 0.5 : -0.5));
    double r = (x - k * LN2_HI) - k * LN2_LO; /* |r| <= ln2/2 */
    /* Taylor series to r^13: error below 1e-17 on |r| <= 0.35 */
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    /* scale by 2^k in two steps so that k in [-1075, 1024] stays exact */
    int k1 = k / 2, k2 = k - k1;
    return p * pow2i(k1) * pow2i(k2);
}

double wlm_log(double x) {
    if (x != x || x < 0) return from_bits(0x7ff8000000000000ull);
    if (x == 0) return -from_bits(0x7ff0000000000000ull);
    if (x == from_bits(0x7ff0000000000000ull)) return x;
    int e = 0;
    uint64_t b = to_bits(x);
    if ((b >> 52) == 0) {
        x *= 18014398509481984.0;
        b = to_bits(x);
        e = -54;
    } /* subnormal: * 2^54 */
    e += (int)(b >> 52) - 1023;
    double m = from_bits((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull); /* [1, 2) */
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e++;
    }
    /* log(m) = 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.1716 */
    double s = (m - 1.0) / (m + 1.0), s2 = s * s;
    double p = 1.0 / 23;
    p = p * s2 + 1.0 / 21;
    p = p * s2 + 1.0 / 19;
    p = p * s2 + 1.0 / 17;
    p = p * s2 + 1.0 / 15;
    p = p * s2 + 1.0 / 13;
    p = p * s2 + 1.0 / 11;
    p = p * s2 + 1.0 / 9;
    p = p * s2 + 1.0 / 7;
    p = p * s2 + 1.0 / 5;
    p = p * s2 + 1.0 / 3;
    p = p * s2 + 1.0;
    return (e * LN2_HI + 2.0 * s * p) + e * LN2_LO;
}

/* pi/2 split in three parts (Cody-Waite): k * P1 is exact for |k| < 2^20 */
static const double P1 = 1.57079632673412561417e+00;
static const double P2 = 6.07710050630396597660e-11;
static const double P3 = 2.02226624871116645580e-21;
static const double INV_PIO2 = 6.36619772367581382433e-01;

static double sin_poly(double r) {
    double r2 = r * r;
    double p = -1.0 / 121645100408832000.0; /* -1/19! */
    p = p * r2 + 1.0 / 355687428096000.0;   /* 1/17! */
    p = p * r2 - 1.0 / 1307674368000.0;
    p = p * r2 + 1.0 / 6227020800.0;
    p = p * r2 - 1.0 / 39916800.0;
    p = p * r2 + 1.0 / 362880.0;
    p = p * r2 - 1.0 / 5040.0;
    p = p * r2 + 1.0 / 120.0;
    p = p * r2 - 1.0 / 6.0;
    return r + r * r2 * p;
}

static double cos_poly(double r) {
    double r2 = r * r;
    double p = 1.0 / 6402373705728000.0; /* 1/18! */
    p = p * r2 - 1.0 / 20922789888000.0; /* -1/16! */
    p = p * r2 + 1.0 / 87178291200.0;
    p = p * r2 - 1.0 / 479001600.0;
    p = p * r2 + 1.0 / 3628800.0;
    p = p * r2 - 1.0 / 40320.0;
    p = p * r2 + 1.0 / 720.0;
    p = p * r2 - 1.0 / 24.0;
    p = p * r2 + 0.5;
    return 1.0 - r2 * p;
}

static double reduce(double x, int *q) {
    double kd = x * INV_PIO2;
    double k = (double)(int64_t)(kd + (kd >= 0 ? 0.5 : -0.5));
    *q = (int)((int64_t)k & 3);
    return ((x - k * P1) - k * P2) - k * P3;
}

double wlm_sin(double x) {
    if (x != x || x - x != 0) return from_bits(0x7ff8000000000000ull);
    if (x == 0) return x; /* sin(-0) = -0 */
    int q;
    double r = reduce(x, &q);
    switch (q) {
    case 0: return sin_poly(r);
    case 1: return cos_poly(r);
    case 2: return -sin_poly(r);
    default: return -cos_poly(r);
    }
}

double wlm_cos(double x) {
    if (x != x || x - x != 0) return from_bits(0x7ff8000000000000ull);
    int q;
    double r = reduce(x, &q);
    switch (q) {
    case 0: return cos_poly(r);
    case 1: return -sin_poly(r);
    case 2: return -cos_poly(r);
    default: return sin_poly(r);
    }
}

float wlm_expf(float x) { return (float)wlm_exp((double)x); }
float wlm_logf(float x) { return (float)wlm_log((double)x); }
