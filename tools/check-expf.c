/* Exhaustive accuracy check of wlm_expf_fast (src/wmath.h) against libm's
 * double exp, over every float in [WLM_EXPF_LO, WLM_EXPF_HI] (2.24e9
 * values, about a minute natively; the C tests sample every 61st):
 *   cc -O2 -ffp-contract=off -o build/check-expf tools/check-expf.c -lm && build/check-expf
 * Last run: max relative error 9.801e-8 (at 37.78), max 1.176 ulp (at -59.93). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "../src/wmath.h"

int main(void) {
    double worst = 0, worst_ulp = 0; float at = 0, at_ulp = 0; long n = 0;
    for (int sign = 0; sign < 2; sign++)
        for (uint32_t b = 0; b < 0x7f800000u; b++) {
            uint32_t bits = b | (sign ? 0x80000000u : 0); float x;
            memcpy(&x, &bits, 4);
            if (x < WLM_EXPF_LO || x > WLM_EXPF_HI) continue;
            double want = exp((double)x), err = fabs((double)wlm_expf_fast(x) - want);
            int e; frexp(want, &e);
            double rel = err / want, ulps = err / ldexp(1.0, e - 24); /* ulp of the result's binade */
            if (rel > worst) { worst = rel; at = x; }
            if (ulps > worst_ulp) { worst_ulp = ulps; at_ulp = x; }
            n++;
        }
    printf("%ld floats: max relative error %.4g (at %.9g), max %.4f ulp (at %.9g)\n", n, worst, at, worst_ulp, at_ulp);
    return worst < 1e-7 ? 0 : 1;
}
