/* Kernel tests: every kernel set against the scalar reference bit for bit and
 * against plain double-precision sums; half/bfloat conversion against
 * independent formulas; the Q8_0/Q4_0 block layout against hand-written
 * blocks; quantization error bounds; and the deterministic math (wmath)
 * against libm. */
#include <stdint.h>
#include <float.h>
#include "tst.h"
#include "../../src/internal.h"
#include "../../src/wmath.h"
#include "../../src/matmul.h"
#include "gguf_build.h"
#if !defined(__wasm__)
#include <pthread.h>
#endif

#define T_PI 3.14159265358979323846
#define T_E 2.71828182845904523536
#define T_LN2 0.69314718055994530942

/* ---- helpers ------------------------------------------------------------------ */

/* every kernel set of this build (scalar, and SIMD128 in wasm) */
#define SETS wlm_kernel_sets
#define N_SETS (int)wlm_kernel_set_count

static uint32_t fbits(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}
static float bitsf(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}
static uint64_t dbits(double d) {
    uint64_t b;
    memcpy(&b, &d, 8);
    return b;
}

/* equal bits, or both NaN (NaN payloads are not specified) */
static int same_float(float a, float b) { return (a != a && b != b) || fbits(a) == fbits(b); }

/* distance in units in the last place (float), sign-aware; +0 == -0 */
static int64_t ord_f(float f) {
    uint32_t b = fbits(f);
    return (b & 0x80000000u) ? -(int64_t)(b & 0x7fffffffu) : (int64_t)b;
}
static int64_t ulp_diff(float a, float b) {
    int64_t d = ord_f(a) - ord_f(b);
    return d < 0 ? -d : d;
}

/* a random float with a magnitude spread over many binades */
static float rand_wide(void) {
    float v = tst_randf();
    int e = (int)(tst_rand() % 21) - 10; /* 2^-10 .. 2^10 */
    return ldexpf(v, e);
}

static int half_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }

/* a random half that is not NaN (may be inf, subnormal, zero) */
static uint16_t rand_half_nonan(void) {
    for (;;) {
        uint16_t h = (uint16_t)tst_rand();
        if (!half_is_nan(h)) return h;
    }
}
/* a random finite half */
static uint16_t rand_half_finite(void) {
    for (;;) {
        uint16_t h = (uint16_t)tst_rand();
        if ((h & 0x7c00) != 0x7c00) return h;
    }
}
/* a random finite, non-subnormal-extreme half in a moderate range */
static uint16_t rand_half_moderate(void) { return wlm_f32_to_f16(rand_wide()); }

/* The documented reference order, written independently: 16 running sums
 * (lane i takes i, i+16, ...), fold ((s0..3 + s4..7) + (s8..11 + s12..15))
 * lane-wise, then (l0 + l1) + (l2 + l3), then the tail in order. */
static float order_dot(uint32_t n, const float *w, const float *x) {
    float s[16] = { 0 };
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) s[j] = s[j] + w[i + j] * x[i + j];
    float l0 = (s[0] + s[4]) + (s[8] + s[12]), l1 = (s[1] + s[5]) + (s[9] + s[13]);
    float l2 = (s[2] + s[6]) + (s[10] + s[14]), l3 = (s[3] + s[7]) + (s[11] + s[15]);
    float r = (l0 + l1) + (l2 + l3);
    for (; i < n; i++) r = r + w[i] * x[i];
    return r;
}

/* |computed - exact| must stay within the worst-case bound of any float
 * summation order: n * 2^-24 * sum |w x| (plus a hair for underflow) */
static int dot_close(float got, const float *w, const float *x, uint32_t n, double *worst) {
    double exact = 0, mag = 0;
    for (uint32_t i = 0; i < n; i++) {
        exact += (double)w[i] * x[i];
        mag += fabs((double)w[i] * x[i]);
    }
    double err = fabs((double)got - exact);
    double bound = (n + 2) * 0x1p-24 * mag + 1e-37;
    if (mag > 0 && err / mag > *worst) *worst = err / mag;
    return err <= bound;
}

static const uint32_t FLOAT_SIZES[] = { 255, 256, 1000, 1024, 4096 };

/* every float size the float kernels are tested at: 1..70 and a few big ones */
static uint32_t float_size(int i) { return i < 70 ? (uint32_t)i + 1 : FLOAT_SIZES[i - 70]; }
#define N_FLOAT_SIZES (70 + (int)(sizeof FLOAT_SIZES / sizeof FLOAT_SIZES[0]))

/* ---- 1. kernels vs the scalar reference and vs double ---------------------------- */

TEST(kernels_dot_f32_bit_identical) {
    enum { MAXN = 4096 + 8 };
    float *w = malloc(MAXN * 4), *x = malloc(MAXN * 4);
    double worst = 0;
    int checked = 0;
    for (int si = 0; si < N_FLOAT_SIZES; si++) {
        uint32_t n = float_size(si);
        for (int rep = 0; rep < 4; rep++) {
            int off = rep & 1; /* misaligned start on odd reps */
            for (uint32_t i = 0; i < n + 1; i++) {
                w[i] = rand_wide();
                x[i] = rand_wide();
            }
            float ref = wlm_kernels_scalar.dot_f32(n, w + off, x + off);
            float ord = order_dot(n, w + off, x + off);
            CHECKF(fbits(ref) == fbits(ord), "n=%u scalar %.9g documented order %.9g", n, ref, ord);
            CHECKF(dot_close(ref, w + off, x + off, n, &worst), "n=%u scalar %.9g far from double", n, ref);
            for (int k = 0; k < N_SETS; k++) {
                float got = SETS[k]->dot_f32(n, w + off, x + off);
                CHECKF(fbits(got) == fbits(ref), "%s n=%u got %.9g ref %.9g", SETS[k]->name, n, got, ref);
                checked++;
            }
        }
    }
    /* cancellation: a large positive and negative pair must cancel exactly in
     * the same lane (no reassociation across lanes in one build only) */
    for (uint32_t i = 0; i < 64; i++) {
        w[i] = 1.0f;
        x[i] = (i & 1) ? 1e8f : -1e8f;
    }
    w[5] = 3.0f;
    x[5] = 0.25f; /* lane 5 is then 0.75 - 1e8 + ... */
    float ref = wlm_kernels_scalar.dot_f32(64, w, x), ord = order_dot(64, w, x);
    CHECK(fbits(ref) == fbits(ord));
    for (int k = 0; k < N_SETS; k++) CHECK(fbits(SETS[k]->dot_f32(64, w, x)) == fbits(ref));
    printf("  dot_f32: %d comparisons over %d kernel sets, worst |err|/sum|wx| vs double = %.3g\n", checked, N_SETS, worst);
    free(w);
    free(x);
}

TEST(kernels_dot_f16_bf16_bit_identical) {
    enum { MAXN = 4096 + 8 };
    uint16_t *h = malloc(MAXN * 2), *b = malloc(MAXN * 2);
    float *wf = malloc(MAXN * 4), *x = malloc(MAXN * 4);
    double worst16 = 0, worstb = 0;
    for (int si = 0; si < N_FLOAT_SIZES; si++) {
        uint32_t n = float_size(si);
        for (int rep = 0; rep < 6; rep++) {
            int off = rep & 1;
            /* reps 0-1: moderate values; 2-3: any finite half (subnormals,
             * 65504); 4-5: any non-NaN half, inf included */
            for (uint32_t i = 0; i < n + 1; i++) {
                h[i] = rep < 2 ? rand_half_moderate() : rep < 4 ? rand_half_finite()
                                                                : rand_half_nonan();
                uint16_t bb;
                do bb = (uint16_t)tst_rand();
                while ((bb & 0x7f80) == 0x7f80 && (bb & 0x7f) && 1);
                b[i] = rep < 2 ? wlm_f32_to_bf16(rand_wide()) : bb;
                x[i] = rand_wide();
                if (rep >= 2 && (tst_rand() & 7) == 0) x[i] = 0.0f; /* inf * 0 = NaN paths */
            }
            float r16 = wlm_kernels_scalar.dot_f16(n, h + off, x + off);
            float rb = wlm_kernels_scalar.dot_bf16(n, b + off, x + off);
            /* documented order over the converted weights */
            for (uint32_t i = 0; i < n; i++) wf[i] = wlm_f16_to_f32(h[i + off]);
            CHECKF(same_float(r16, order_dot(n, wf, x + off)), "f16 n=%u rep=%d", n, rep);
            int finite16 = 1;
            for (uint32_t i = 0; i < n; i++) finite16 &= isfinite(wf[i]) != 0;
            if (finite16 && rep < 4) CHECKF(dot_close(r16, wf, x + off, n, &worst16), "f16 n=%u: %.9g far from double", n, r16);
            for (uint32_t i = 0; i < n; i++) wf[i] = wlm_bf16_to_f32(b[i + off]);
            CHECKF(same_float(rb, order_dot(n, wf, x + off)), "bf16 n=%u rep=%d", n, rep);
            int finiteb = 1;
            for (uint32_t i = 0; i < n; i++) finiteb &= isfinite(wf[i]) != 0;
            /* bf16 random bit patterns reach 1e38: products overflow floats */
            if (finiteb && rep < 2) CHECKF(dot_close(rb, wf, x + off, n, &worstb), "bf16 n=%u: %.9g far from double", n, rb);
            for (int k = 0; k < N_SETS; k++) {
                float g16 = SETS[k]->dot_f16(n, h + off, x + off), gb = SETS[k]->dot_bf16(n, b + off, x + off);
                CHECKF(same_float(g16, r16), "%s dot_f16 n=%u rep=%d got %.9g ref %.9g", SETS[k]->name, n, rep, g16, r16);
                CHECKF(same_float(gb, rb), "%s dot_bf16 n=%u rep=%d got %.9g ref %.9g", SETS[k]->name, n, rep, gb, rb);
            }
        }
    }
    printf("  worst relative error vs double: f16 %.3g, bf16 %.3g\n", worst16, worstb);
    free(h);
    free(b);
    free(wf);
    free(x);
}

/* a random Q8_0-style scale: mostly moderate, sometimes extreme */
static uint16_t rand_scale(void) {
    switch (tst_rand() % 10) {
    case 0: return 0x7bff;                         /* 65504 */
    case 1: return 0x0001;                         /* 2^-24, smallest subnormal */
    case 2: return (uint16_t)(tst_rand() % 0x400); /* any subnormal or zero */
    case 3: return 0xfbff;                         /* -65504 */
    default: return wlm_f32_to_f16(ldexpf(tst_randf(), -(int)(tst_rand() % 12)));
    }
}

static void rand_q8_block(block_q8_0 *b, int extreme) {
    b->d = rand_scale();
    for (int j = 0; j < QK8_0; j++) {
        int v = (int)(tst_rand() % 256) - 128;
        if (extreme == 1) v = -128;
        else if (extreme == 2) v = 127;
        else if (extreme == 3) v = (j & 1) ? 127 : -128;
        b->qs[j] = (int8_t)v;
    }
}

static void rand_q4_block(block_q4_0 *b, int extreme) {
    b->d = rand_scale();
    for (int j = 0; j < QK4_0 / 2; j++) {
        int lo = (int)(tst_rand() % 16), hi = (int)(tst_rand() % 16);
        if (extreme == 1) lo = hi = 0;       /* -8 */
        else if (extreme == 2) lo = hi = 15; /* +7 */
        else if (extreme == 3) {
            lo = 0;
            hi = 15;
        }
        b->qs[j] = (uint8_t)(lo | hi << 4);
    }
}

/* nt token rows of nb Q8_0 blocks (x + t * stride): quantized random
 * values, or (extremes) random blocks with extreme values and scales */
static void rand_tokens(block_q8_0 *x, uint32_t stride, int nt, uint32_t nb, int extremes) {
    float v[32];
    for (int t = 0; t < nt; t++)
        for (uint32_t b = 0; b < nb; b++) {
            if (extremes) rand_q8_block(&x[t * stride + b], (int)(tst_rand() % 4));
            else {
                for (int j = 0; j < 32; j++) v[j] = tst_randf() * (1 + b % 5);
                wlm_quantize_row_q8_0(v, &x[t * stride + b], 32);
            }
        }
}

/* an infinite, NaN, subnormal or zero f16 weight scale */
static uint16_t odd_scale(void) {
    static const uint16_t odd[] = { 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0x0001, 0x83ff, 0x8000 };
    return odd[tst_rand() % 7];
}

/* independent decode of the published layouts */
static int q4_val(const block_q4_0 *b, int j) { return j < 16 ? (b->qs[j] & 15) - 8 : (b->qs[j - 16] >> 4) - 8; }

TEST(kernels_dot_q8_0_q4_0_bit_identical) {
    enum { MAXB = 128 };
    block_q8_0 *w8 = malloc(sizeof(block_q8_0) * MAXB), *x8 = malloc(sizeof(block_q8_0) * MAXB);
    block_q4_0 *w4 = malloc(sizeof(block_q4_0) * MAXB);
    static const uint32_t NB[] = { 1, 2, 3, 4, 5, 7, 8, 13, 16, 31, 32, 64, 127, 128 };
    double worst8 = 0, worst4 = 0;
    for (unsigned si = 0; si < sizeof NB / sizeof NB[0]; si++) {
        uint32_t nb = NB[si], n = nb * 32;
        for (int rep = 0; rep < 8; rep++) {
            for (uint32_t b = 0; b < nb; b++) {
                int ex = rep < 4 ? (int)(tst_rand() % 4) : 0; /* extreme blocks in reps 0-3 */
                rand_q8_block(&w8[b], ex);
                rand_q8_block(&x8[b], rep < 4 ? (int)(tst_rand() % 4) : 0);
                rand_q4_block(&w4[b], ex);
                if (rep >= 4) { /* moderate scales for the double comparison */
                    w8[b].d = rand_half_moderate();
                    x8[b].d = rand_half_moderate();
                    w4[b].d = rand_half_moderate();
                }
            }
            /* independent reference: exact integer block sums, then the
             * documented float accumulation */
            /* four running sums by block index mod 4, folded (a0+a1)+(a2+a3),
             * then the remaining blocks in order */
            float ref8 = 0, ref4 = 0, l8[4] = { 0, 0, 0, 0 }, l4[4] = { 0, 0, 0, 0 };
            uint32_t nb4 = nb / 4 * 4;
            double ex8 = 0, mag8 = 0, ex4 = 0, mag4 = 0;
            for (uint32_t b = 0; b < nb; b++) {
                int32_t s8 = 0, s4 = 0;
                for (int j = 0; j < 32; j++) {
                    s8 += w8[b].qs[j] * x8[b].qs[j];
                    s4 += q4_val(&w4[b], j) * x8[b].qs[j];
                }
                float dx = wlm_f16_to_f32(x8[b].d);
                if (b < nb4) {
                    l8[b % 4] += (wlm_f16_to_f32(w8[b].d) * dx) * (float)s8;
                    l4[b % 4] += (wlm_f16_to_f32(w4[b].d) * dx) * (float)s4;
                    if (b == nb4 - 1) {
                        ref8 = (l8[0] + l8[1]) + (l8[2] + l8[3]);
                        ref4 = (l4[0] + l4[1]) + (l4[2] + l4[3]);
                    }
                } else {
                    ref8 = ref8 + (wlm_f16_to_f32(w8[b].d) * dx) * (float)s8;
                    ref4 = ref4 + (wlm_f16_to_f32(w4[b].d) * dx) * (float)s4;
                }
                double t8 = (double)wlm_f16_to_f32(w8[b].d) * dx * s8, t4 = (double)wlm_f16_to_f32(w4[b].d) * dx * s4;
                ex8 += t8;
                mag8 += fabs(t8);
                ex4 += t4;
                mag4 += fabs(t4);
            }
            float sc8 = wlm_kernels_scalar.dot_q8_0(n, w8, x8), sc4 = wlm_kernels_scalar.dot_q4_0(n, w4, x8);
            CHECKF(fbits(sc8) == fbits(ref8), "q8_0 nb=%u rep=%d scalar %.9g ref %.9g", nb, rep, sc8, ref8);
            CHECKF(fbits(sc4) == fbits(ref4), "q4_0 nb=%u rep=%d scalar %.9g ref %.9g", nb, rep, sc4, ref4);
            if (rep >= 4) {
                double e8 = fabs(sc8 - ex8), e4 = fabs(sc4 - ex4);
                CHECKF(e8 <= (nb + 2) * 0x1p-24 * mag8 + 1e-30, "q8_0 nb=%u err %.3g", nb, e8);
                CHECKF(e4 <= (nb + 2) * 0x1p-24 * mag4 + 1e-30, "q4_0 nb=%u err %.3g", nb, e4);
                if (mag8 > 0 && e8 / mag8 > worst8) worst8 = e8 / mag8;
                if (mag4 > 0 && e4 / mag4 > worst4) worst4 = e4 / mag4;
            }
            for (int k = 0; k < N_SETS; k++) {
                float g8 = SETS[k]->dot_q8_0(n, w8, x8), g4 = SETS[k]->dot_q4_0(n, w4, x8);
                CHECKF(same_float(g8, sc8), "%s dot_q8_0 nb=%u rep=%d got %.9g ref %.9g", SETS[k]->name, nb, rep, g8, sc8);
                CHECKF(same_float(g4, sc4), "%s dot_q4_0 nb=%u rep=%d got %.9g ref %.9g", SETS[k]->name, nb, rep, g4, sc4);
            }
        }
    }
    /* all-extreme block: -128 * -128 * 32 = 524288 must be summed exactly */
    for (int j = 0; j < 32; j++) {
        w8[0].qs[j] = -128;
        x8[0].qs[j] = -128;
    }
    w8[0].d = x8[0].d = 0x3c00; /* 1.0 */
    for (int k = 0; k < N_SETS; k++) CHECKF(SETS[k]->dot_q8_0(32, w8, x8) == 524288.0f, "%s", SETS[k]->name);
    for (int j = 0; j < 16; j++) w4[0].qs[j] = 0x00; /* every weight -8 */
    w4[0].d = 0x3c00;
    for (int k = 0; k < N_SETS; k++) CHECKF(SETS[k]->dot_q4_0(32, w4, x8) == 32768.0f, "%s", SETS[k]->name);
    for (int j = 0; j < 16; j++) w4[0].qs[j] = 0xff; /* every weight +7 */
    for (int j = 0; j < 32; j++) x8[0].qs[j] = 127;
    for (int k = 0; k < N_SETS; k++) CHECKF(SETS[k]->dot_q4_0(32, w4, x8) == 7.0f * 127 * 32, "%s", SETS[k]->name);
    printf("  worst relative error vs double: q8_0 %.3g, q4_0 %.3g\n", worst8, worst4);
    free(w8);
    free(x8);
    free(w4);
}

TEST(kernels_axpy_scale_bit_identical) {
    enum { MAXN = 4096 + 8 };
    float *x = malloc(MAXN * 4), *y0 = malloc(MAXN * 4), *yr = malloc(MAXN * 4), *yk = malloc(MAXN * 4);
    uint16_t *h = malloc(MAXN * 2);
    for (int si = 0; si < N_FLOAT_SIZES; si++) {
        uint32_t n = float_size(si);
        for (int rep = 0; rep < 4; rep++) {
            int off = rep & 1;
            float a = rep == 3 ? 0.0f : rand_wide();
            for (uint32_t i = 0; i < n + 1; i++) {
                x[i] = rand_wide();
                y0[i] = rand_wide();
                h[i] = rep < 2 ? rand_half_moderate() : rand_half_finite();
            }
            /* axpy_f32: y[i] + a * x[i], each element rounded twice */
            memcpy(yr, y0, (n + 1) * 4);
            wlm_kernels_scalar.axpy_f32(n, a, x + off, yr + off);
            int bad = 0;
            for (uint32_t i = 0; i < n; i++) {
                float want = y0[i + off] + a * x[i + off];
                if (fbits(yr[i + off]) != fbits(want)) bad++;
                double e = fabs((double)yr[i + off] - ((double)y0[i + off] + (double)a * x[i + off]));
                if (e > 0x1p-23 * (fabs(y0[i + off]) + fabs((double)a * x[i + off])) + 1e-44) bad++;
            }
            CHECKF(bad == 0, "scalar axpy_f32 n=%u: %d bad elements", n, bad);
            CHECKF(fbits(yr[off ? 0 : n]) == fbits(y0[off ? 0 : n]), "axpy_f32 n=%u wrote outside [0,n)", n);
            for (int k = 0; k < N_SETS; k++) {
                memcpy(yk, y0, (n + 1) * 4);
                SETS[k]->axpy_f32(n, a, x + off, yk + off);
                CHECKF(memcmp(yk, yr, (n + 1) * 4) == 0, "%s axpy_f32 n=%u", SETS[k]->name, n);
            }
            /* axpy_f16 */
            memcpy(yr, y0, (n + 1) * 4);
            wlm_kernels_scalar.axpy_f16(n, a, h + off, yr + off);
            bad = 0;
            for (uint32_t i = 0; i < n; i++)
                if (fbits(yr[i + off]) != fbits(y0[i + off] + a * wlm_f16_to_f32(h[i + off]))) bad++;
            CHECKF(bad == 0, "scalar axpy_f16 n=%u: %d bad elements", n, bad);
            for (int k = 0; k < N_SETS; k++) {
                memcpy(yk, y0, (n + 1) * 4);
                SETS[k]->axpy_f16(n, a, h + off, yk + off);
                CHECKF(memcmp(yk, yr, (n + 1) * 4) == 0, "%s axpy_f16 n=%u", SETS[k]->name, n);
            }
            /* scale */
            memcpy(yr, y0, (n + 1) * 4);
            wlm_kernels_scalar.scale(n, a, yr + off);
            bad = 0;
            for (uint32_t i = 0; i < n; i++)
                if (fbits(yr[i + off]) != fbits(y0[i + off] * a)) bad++;
            CHECKF(bad == 0, "scalar scale n=%u: %d bad elements", n, bad);
            for (int k = 0; k < N_SETS; k++) {
                memcpy(yk, y0, (n + 1) * 4);
                SETS[k]->scale(n, a, yk + off);
                CHECKF(memcmp(yk, yr, (n + 1) * 4) == 0, "%s scale n=%u", SETS[k]->name, n);
            }
        }
    }
    free(x);
    free(y0);
    free(yr);
    free(yk);
    free(h);
}

/* att_accum (exp-weighted sum of the value rows idx[0..n) into out) of each
 * set against the scalar kernel, bit for bit, F32 and F16 caches: head
 * sizes around the SIMD widths, up to a whole tile of slots picked out of
 * order, and halves that are moderate, any finite (subnormals included), or
 * moderate with some infinities (the 4-op conversion's redo path). */
TEST(kernels_att_accum_bit_identical) {
    enum { SLOTS = 96,
           MAXHD = 80 };
    static const uint32_t hds[] = { 4, 8, 13, 16, 31, 32, 48, 64, 80 };
    float *V = malloc(SLOTS * MAXHD * 4), *yr = malloc(MAXHD * 4), *yk = malloc(MAXHD * 4), *y0 = malloc(MAXHD * 4);
    uint16_t *H = malloc(SLOTS * MAXHD * 2);
    float e[WLM_ATT_TILE];
    uint32_t idx[WLM_ATT_TILE];
    int cases = 0;
    for (uint32_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
        for (int rep = 0; rep < 12; rep++) {
            uint32_t hd = hds[hi], n = rep == 0 ? 1 : rep == 1 ? WLM_ATT_TILE
                                                               : 1 + tst_rand() % WLM_ATT_TILE;
            for (uint32_t i = 0; i < SLOTS * hd; i++) {
                V[i] = rand_wide();
                int kind = rep % 3;
                H[i] = kind == 0 ? rand_half_moderate() : kind == 1 ? rand_half_finite()
                                                                    : (tst_rand() % 31 ? rand_half_moderate() : (uint16_t)(tst_rand() & 1 ? 0x7c00 : 0xfc00));
            }
            for (uint32_t i = 0; i < n; i++) {
                e[i] = tst_randf() + 0.5f;
                idx[i] = tst_rand() % SLOTS;
            }
            for (uint32_t i = 0; i < hd; i++) y0[i] = rand_wide();
            for (int f16 = 0; f16 < 2; f16++) {
                const void *v = f16 ? (const void *)H : (const void *)V;
                memcpy(yr, y0, hd * 4);
                wlm_kernels_scalar.att_accum(n, hd, e, v, f16, idx, yr);
                for (int k = 0; k < N_SETS; k++) {
                    memcpy(yk, y0, hd * 4);
                    SETS[k]->att_accum(n, hd, e, v, f16, idx, yk);
                    int bad = 0;
                    for (uint32_t i = 0; i < hd; i++) bad += !same_float(yk[i], yr[i]);
                    CHECKF(bad == 0, "%s att_accum f16=%d hd=%u n=%u rep=%d: %d outputs differ", SETS[k]->name, f16, hd, n, rep, bad);
                    cases++;
                }
            }
        }
    printf("  %d cases\n", cases);
    free(V);
    free(yr);
    free(yk);
    free(y0);
    free(H);
}

/* Every one of the 65536 halves through each set's f16 path: axpy with a = 1
 * onto -0 gives the converted half itself (-0 + v == v for every v). */
TEST(kernels_f16_all_halves_through_kernels) {
    float *y = malloc(65536 * 4);
    uint16_t *h = malloc(65536 * 2);
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    for (int k = 0; k < N_SETS; k++) {
        for (uint32_t i = 0; i < 65536; i++) y[i] = -0.0f;
        SETS[k]->axpy_f16(65536, 1.0f, h, y);
        int bad = 0;
        for (uint32_t i = 0; i < 65536; i++) {
            float want = wlm_f16_to_f32((uint16_t)i);
            if (!same_float(y[i], want)) {
                if (bad < 5) fprintf(stderr, "  %s half %04x -> %08x want %08x\n", SETS[k]->name, i, fbits(y[i]), fbits(want));
                bad++;
            }
        }
        CHECKF(bad == 0, "%s: %d halves converted differently", SETS[k]->name, bad);
    }
    /* the dot product path too, element by element: w . e_j = w_j */
    float x[16];
    for (int k = 0; k < N_SETS; k++) {
        int bad = 0;
        for (uint32_t i = 0; i < 65536; i += 16) {
            for (int j = 0; j < 16; j++) {
                for (int t = 0; t < 16; t++) x[t] = t == j ? 1.0f : 0.0f;
                int finite = 1;
                for (int t = 0; t < 16; t++) finite &= (h[i + t] & 0x7c00) != 0x7c00;
                if (!finite) continue; /* inf * 0 would hide the element */
                float got = SETS[k]->dot_f16(16, h + i, x);
                float want = wlm_f16_to_f32(h[i + j]);
                if (fbits(got) != fbits(want) && !(got == 0 && want == 0)) bad++;
            }
        }
        CHECKF(bad == 0, "%s dot_f16 picked %d elements wrongly", SETS[k]->name, bad);
    }
    free(y);
    free(h);
}

/* ---- 2. half and bfloat conversion ---------------------------------------------- */

/* IEEE binary16 by the formula, in double */
static double half_formula(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double sign = s ? -1.0 : 1.0;
    if (e == 0) return sign * ldexp(m / 1024.0, -14);
    if (e == 31) return m ? NAN : sign * INFINITY;
    return sign * ldexp(1.0 + m / 1024.0, e - 15);
}

TEST(kernels_f16_to_f32_all_halves) {
    int bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float got = wlm_f16_to_f32(h);
        double want = half_formula(h);
        if (want != want) {
            /* NaN: stays NaN with its sign and payload */
            uint32_t b = fbits(got);
            if (got == got || (b >> 31) != (uint32_t)(h >> 15) || ((b >> 13) & 0x3ff) != (h & 0x3ffu)) bad++;
        } else if ((double)got != want || (signbit(got) != 0) != (h >> 15)) {
            if (bad < 5) fprintf(stderr, "  half %04x -> %.9g want %.17g\n", h, got, want);
            bad++;
        }
    }
    CHECKF(bad == 0, "%d halves decoded wrongly", bad);
    CHECK(wlm_f16_to_f32(0x3c00) == 1.0f);
    CHECK(wlm_f16_to_f32(0x7bff) == 65504.0f);
    CHECK(wlm_f16_to_f32(0x0001) == 0x1p-24f);
    CHECK(wlm_f16_to_f32(0x0400) == 0x1p-14f);
    CHECK(wlm_f16_to_f32(0xc000) == -2.0f);
}

/* Independent nearest-half search: the positive finite halves 0..0x7bff are
 * increasing in their bit pattern, so bracket |x| by bisection and pick the
 * nearer, the even pattern on a tie; 65520 and above (half-way to the next
 * binade after 65504) round to infinity. */
static uint16_t ref_f32_to_f16(float f) {
    if (f != f) return 0x7e00;
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    if (a >= 65520.0) return sign | 0x7c00;
    uint32_t lo = 0, hi = 0x7bff;
    if (a >= half_formula(0x7bff)) return sign | 0x7bff;
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (half_formula((uint16_t)mid) <= a) lo = mid;
        else hi = mid;
    }
    double dl = a - half_formula((uint16_t)lo), dh = half_formula((uint16_t)hi) - a;
    uint32_t r = dl < dh ? lo : dh < dl ? hi
                                        : ((lo & 1) ? hi : lo);
    return (uint16_t)(sign | r);
}

TEST(kernels_f32_to_f16_rounding) {
    static const struct {
        float f;
        uint16_t h;
    } C[] = {
        { 0.0f, 0x0000 },
        { -0.0f, 0x8000 },
        { 1.0f, 0x3c00 },
        { -2.0f, 0xc000 },
        { 65504.0f, 0x7bff },
        { 65519.996f, 0x7bff },
        { 65520.0f, 0x7c00 },
        { -65520.0f, 0xfc00 },
        { 65536.0f, 0x7c00 },
        { 1e10f, 0x7c00 },
        { INFINITY, 0x7c00 },
        { -INFINITY, 0xfc00 },
        { 0x1p-24f, 0x0001 },
        { 0x1p-25f, 0x0000 },        /* tie between 0 and 2^-24: even (0) */
        { 0x1.000002p-25f, 0x0001 }, /* just above the tie */
        { 0x1.8p-24f, 0x0002 },      /* 1.5 * 2^-24: tie, even is 2 */
        { 0x1.4p-23f, 0x0002 },      /* 2.5 * 2^-24: tie, even is 2 */
        { 0x1p-26f, 0x0000 },
        { -0x1p-26f, 0x8000 },
        { 1e-10f, 0x0000 },
        { 0x1p-14f, 0x0400 },      /* smallest normal */
        { 0x1.ffcp-15f, 0x0400 },  /* 1023.5 * 2^-24: tie, even is 0x400 */
        { 0x1.ff0p-15f, 0x03fe },  /* 1022 * 2^-24, exactly */
        { 0x1.ff8p-15f, 0x03ff },  /* 1023 * 2^-24 */
        { 0x1.ff4p-15f, 0x03fe },  /* 1022.5 * 2^-24: tie, even is 0x3fe */
        { 0x1.002p0f, 0x3c00 },    /* 1 + 2^-11: tie, even is 1.0 */
        { 0x1.006p0f, 0x3c02 },    /* 1 + 3*2^-11: tie, even is 0x3c02 */
        { 0x1.002002p0f, 0x3c01 }, /* just above a tie */
        { 0x1.001ffep0f, 0x3c00 }, /* just below a tie */
        { 0.1f, 0x2e66 },
        { 3.14159265f, 0x4248 },
        { -1000.0f, 0xe3d0 },
    };
    for (unsigned i = 0; i < sizeof C / sizeof C[0]; i++) {
        uint16_t got = wlm_f32_to_f16(C[i].f);
        CHECKF(got == C[i].h, "f32_to_f16(%a) = %04x, want %04x", C[i].f, got, C[i].h);
        CHECKF(ref_f32_to_f16(C[i].f) == C[i].h, "test reference disagrees on %a", C[i].f);
    }
    uint16_t n = wlm_f32_to_f16(NAN);
    CHECKF(half_is_nan(n), "NaN -> %04x", n);
    CHECK(half_is_nan(wlm_f32_to_f16(-NAN)));
    CHECK(half_is_nan(wlm_f32_to_f16(bitsf(0x7f800001u)))); /* signalling NaN with a low payload stays NaN */

    /* round trip of every half; and the midpoints between neighbours go to
     * the even one, one float ulp either side goes to the nearer one */
    int bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        if (half_is_nan(h)) {
            if (!half_is_nan(wlm_f32_to_f16(wlm_f16_to_f32(h)))) bad++;
            continue;
        }
        if (wlm_f32_to_f16(wlm_f16_to_f32(h)) != h) bad++;
        if ((h & 0x7fff) < 0x7bff) {
            uint16_t up = (uint16_t)(h + 1);
            float a = wlm_f16_to_f32(h), b = wlm_f16_to_f32(up);
            float mid = (float)(((double)a + b) / 2); /* exact: 12 significant bits */
            uint16_t even = (h & 1) ? up : h;
            if (wlm_f32_to_f16(mid) != even) bad++;
            if (wlm_f32_to_f16(nextafterf(mid, a)) != h) bad++;
            if (wlm_f32_to_f16(nextafterf(mid, b)) != up) bad++;
        }
    }
    CHECKF(bad == 0, "%d round-trip / midpoint failures", bad);

    /* random floats across the whole range vs the bisection reference */
    bad = 0;
    for (int i = 0; i < 300000; i++) {
        uint32_t e = 100 + tst_rand() % 45; /* 2^-27 .. 2^17 */
        uint32_t b = (tst_rand() & 1u) << 31 | e << 23 | (tst_rand() & 0x7fffff);
        float f = bitsf(b);
        if (wlm_f32_to_f16(f) != ref_f32_to_f16(f)) {
            if (bad < 5) fprintf(stderr, "  %a -> %04x want %04x\n", f, wlm_f32_to_f16(f), ref_f32_to_f16(f));
            bad++;
        }
    }
    CHECKF(bad == 0, "%d random floats rounded differently from the reference", bad);
}

/* bfloat16: the top 16 bits of a float; rounding to nearest even by the
 * distance to the two bracketing bfloats (2^128 stands in above the max). */
static uint16_t ref_f32_to_bf16(float f) {
    uint32_t b = fbits(f);
    if (f != f) return 0x7fc0;
    uint16_t lo = (uint16_t)(b >> 16);
    double a = fabs((double)f), va = fabs((double)bitsf((uint32_t)lo << 16));
    if (a == va) return lo;
    uint16_t hi = (uint16_t)(lo + 1);
    double vb = (hi & 0x7fff) == 0x7f80 ? ldexp(1.0, 128) : fabs((double)bitsf((uint32_t)hi << 16));
    double dl = a - va, dh = vb - a;
    return dl < dh ? lo : dh < dl ? hi
                                  : ((lo & 1) ? hi : lo);
}

TEST(kernels_bf16_conversion) {
    int bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        float f = wlm_bf16_to_f32((uint16_t)i);
        if (fbits(f) != i << 16) bad++;
        int nan = (i & 0x7f80) == 0x7f80 && (i & 0x7f);
        uint16_t back = wlm_f32_to_bf16(f);
        if (nan ? !((back & 0x7f80) == 0x7f80 && (back & 0x7f)) : back != i) bad++;
    }
    CHECKF(bad == 0, "%d bfloat16 decode/round-trip failures", bad);
    CHECK(wlm_bf16_to_f32(0x3f80) == 1.0f);
    CHECK(wlm_bf16_to_f32(0xc040) == -3.0f);
    CHECK(wlm_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(wlm_f32_to_bf16(bitsf(0x3f808000u)) == 0x3f80); /* tie: even */
    CHECK(wlm_f32_to_bf16(bitsf(0x3f818000u)) == 0x3f82); /* tie: even */
    CHECK(wlm_f32_to_bf16(bitsf(0x3f808001u)) == 0x3f81);
    CHECK(wlm_f32_to_bf16(bitsf(0x7f7fffffu)) == 0x7f80); /* FLT_MAX rounds to inf */
    CHECK(wlm_f32_to_bf16(INFINITY) == 0x7f80);
    CHECK(wlm_f32_to_bf16(-0.0f) == 0x8000);
    uint16_t n = wlm_f32_to_bf16(bitsf(0x7f800001u)); /* NaN with payload only in the low bits */
    CHECKF((n & 0x7f80) == 0x7f80 && (n & 0x7f), "NaN -> %04x", n);
    bad = 0;
    for (int i = 0; i < 300000; i++) {
        uint32_t b = tst_rand() << 8 ^ tst_rand();
        float f = bitsf(b);
        if (f != f) continue;
        if (wlm_f32_to_bf16(f) != ref_f32_to_bf16(f)) {
            if (bad < 5) fprintf(stderr, "  %08x -> %04x want %04x\n", b, wlm_f32_to_bf16(f), ref_f32_to_bf16(f));
            bad++;
        }
    }
    CHECKF(bad == 0, "%d random floats rounded differently from the reference", bad);
}

/* ---- 3. block layouts, dequantization and quantization error --------------------- */

TEST(kernels_dequantize_handwritten_blocks) {
    /* Q8_0: f16 d = 0.5 (0x3800, little-endian 00 38), then 32 int8 */
    _Alignas(4) static const uint8_t q8[2 * 34] = {
        0x00,
        0x38,
        0x00,
        0x01,
        0xff,
        0x7f,
        0x80,
        0x02,
        0xfe,
        0x10,
        0xf0,
        0x40,
        0xc0,
        0x03,
        0xfd,
        0x04,
        0xfc,
        0x05,
        0xfb,
        0x06,
        0xfa,
        0x07,
        0xf9,
        0x08,
        0xf8,
        0x09,
        0xf7,
        0x0a,
        0xf6,
        0x0b,
        0xf5,
        0x0c,
        0xf4,
        0x64,
        /* second block: d = -2 (0xc000), q_j = j - 16 */
        0x00,
        0xc0,
        0xf0,
        0xf1,
        0xf2,
        0xf3,
        0xf4,
        0xf5,
        0xf6,
        0xf7,
        0xf8,
        0xf9,
        0xfa,
        0xfb,
        0xfc,
        0xfd,
        0xfe,
        0xff,
        0x00,
        0x01,
        0x02,
        0x03,
        0x04,
        0x05,
        0x06,
        0x07,
        0x08,
        0x09,
        0x0a,
        0x0b,
        0x0c,
        0x0d,
        0x0e,
        0x0f,
    };
    static const int q8v[32] = { 0, 1, -1, 127, -128, 2, -2, 16, -16, 64, -64, 3, -3, 4, -4, 5,
                                 -5, 6, -6, 7, -7, 8, -8, 9, -9, 10, -10, 11, -11, 12, -12, 100 };
    float y[64];
    wlm_dequantize_row(GGML_Q8_0, q8, y, 64);
    int bad = 0;
    for (int j = 0; j < 32; j++)
        if (y[j] != 0.5f * q8v[j]) bad++;
    for (int j = 0; j < 32; j++)
        if (y[32 + j] != -2.0f * (j - 16)) bad++;
    CHECKF(bad == 0, "%d Q8_0 values wrong", bad);
    CHECK(y[3] == 63.5f && y[4] == -64.0f && y[31] == 50.0f);

    /* Q4_0: f16 d = 0.25 (0x3400), byte j = element j (low) | element j+16 (high) */
    _Alignas(4) static const uint8_t q4[18] = {
        0x00,
        0x34,
        0xf0,
        0x0f,
        0x88,
        0x17,
        0x71,
        0x2e,
        0xe2,
        0x3d,
        0xd3,
        0x4c,
        0xc4,
        0x5b,
        0xb5,
        0x6a,
        0xa6,
        0x99,
    };
    float z[32];
    wlm_dequantize_row(GGML_Q4_0, q4, z, 32);
    bad = 0;
    for (int j = 0; j < 16; j++) {
        int lo = q4[2 + j] & 15, hi = q4[2 + j] >> 4;
        if (z[j] != 0.25f * (lo - 8) || z[j + 16] != 0.25f * (hi - 8)) bad++;
    }
    CHECKF(bad == 0, "%d Q4_0 pairs wrong", bad);
    /* spelled out: byte 0 = 0xf0 -> element 0 is (0-8)/4 = -2, element 16 is (15-8)/4 = 1.75 */
    CHECK(z[0] == -2.0f && z[16] == 1.75f);
    CHECK(z[1] == 1.75f && z[17] == -2.0f);  /* 0x0f */
    CHECK(z[2] == 0.0f && z[18] == 0.0f);    /* 0x88 */
    CHECK(z[15] == 0.25f && z[31] == 0.25f); /* 0x99 */

    /* the struct layout agrees with the bytes */
    block_q4_0 b4;
    memcpy(&b4, q4, 18);
    CHECK(b4.d == 0x3400 && b4.qs[0] == 0xf0 && b4.qs[15] == 0x99);
    block_q8_0 b8;
    memcpy(&b8, q8, 34);
    CHECK(b8.d == 0x3800 && b8.qs[3] == 127 && b8.qs[4] == -128);

    /* F16, BF16 and F32 rows */
    uint16_t h[3] = { 0x3c00, 0xc000, 0x0001 };
    wlm_dequantize_row(GGML_F16, h, y, 3);
    CHECK(y[0] == 1.0f && y[1] == -2.0f && y[2] == 0x1p-24f);
    uint16_t bf[2] = { 0x3f80, 0x4049 };
    wlm_dequantize_row(GGML_BF16, bf, y, 2);
    CHECK(y[0] == 1.0f && y[1] == bitsf(0x40490000u));
    float f[2] = { 1.5f, -7.25f };
    wlm_dequantize_row(GGML_F32, f, y, 2);
    CHECK(y[0] == 1.5f && y[1] == -7.25f);
}

TEST(kernels_quantize_error_bounds) {
    enum { N = 32 * 64 };
    float *x = malloc(N * 4), *y = malloc(N * 4);
    block_q8_0 *q8 = malloc(sizeof(block_q8_0) * (N / 32));
    block_q4_0 *q4 = malloc(sizeof(block_q4_0) * (N / 32));
    double worst8 = 0, worst4 = 0; /* max |err| / d over blocks */
    for (int rep = 0; rep < 20; rep++) {
        for (int i = 0; i < N; i++) x[i] = rand_wide() * (rep == 0 ? 0.0f : 1.0f);
        if (rep == 1)
            for (int i = 0; i < N; i += 7) x[i] = -x[i] * 4; /* negative extremes */
        wlm_quantize_row_q8_0(x, q8, N);
        wlm_dequantize_row(GGML_Q8_0, q8, y, N);
        for (int b = 0; b < N / 32; b++) {
            double amax = 0;
            for (int j = 0; j < 32; j++) amax = fmax(amax, fabs(x[b * 32 + j]));
            double d = amax / 127, d16 = wlm_f16_to_f32(q8[b].d);
            CHECKF(fabs(d16 - d) <= d * 0x1p-11 + 1e-12, "Q8_0 scale %.9g for amax/127 = %.9g", d16, d);
            for (int j = 0; j < 32; j++) {
                double err = fabs((double)y[b * 32 + j] - x[b * 32 + j]);
                /* rounding to the integer grid (d/2) plus the f16 rounding of d times |q| */
                double bound = 0.5 * d * (1 + 1e-6) + fabs((double)q8[b].qs[j]) * fabs(d16 - d) + 1e-30;
                CHECKF(err <= bound, "Q8_0 block %d elem %d: err %.3g > %.3g", b, j, err, bound);
                if (d > 0 && err / d > worst8) worst8 = err / d;
                int q = q8[b].qs[j];
                CHECK(q >= -127 && q <= 127);
            }
        }
        wlm_quantize_row_q4_0(x, q4, N);
        wlm_dequantize_row(GGML_Q4_0, q4, y, N);
        for (int b = 0; b < N / 32; b++) {
            double amax = 0, vmax = 0;
            for (int j = 0; j < 32; j++)
                if (fabs(x[b * 32 + j]) > amax) {
                    amax = fabs(x[b * 32 + j]);
                    vmax = x[b * 32 + j];
                }
            double d = fabs(vmax) / 8, d16 = fabs(wlm_f16_to_f32(q4[b].d));
            for (int j = 0; j < 32; j++) {
                double err = fabs((double)y[b * 32 + j] - x[b * 32 + j]);
                /* the grid is d*(q-8), q in 0..15: the extreme itself maps to
                 * -8 exactly, the far side of the range may clamp (error <= d) */
                double bound = d * (1 + 1e-6) + 8 * fabs(d16 - d) + 1e-30;
                CHECKF(err <= bound, "Q4_0 block %d elem %d: err %.3g > %.3g", b, j, err, bound);
                if (d > 0 && err / d > worst4) worst4 = err / d;
            }
            /* the extreme element is represented exactly up to the f16 scale */
            if (amax > 0) {
                int jm = 0;
                for (int j = 0; j < 32; j++)
                    if (fabs(x[b * 32 + j]) == amax) {
                        jm = j;
                        break;
                    }
                CHECK(q4_val(&q4[b], jm) == -8);
            }
        }
    }
    CHECKF(worst8 <= 0.51 + 127 * 0x1p-11, "Q8_0 worst err/d %.3f", worst8);
    CHECKF(worst4 <= 1.0 + 8 * 0x1p-11, "Q4_0 worst err/d %.3f", worst4);
    printf("  quantize->dequantize worst |err|/d: Q8_0 %.3f, Q4_0 %.3f\n", worst8, worst4);
    /* all zero block: d = 0 and exact zeros back */
    memset(x, 0, 32 * 4);
    wlm_quantize_row_q8_0(x, q8, 32);
    wlm_dequantize_row(GGML_Q8_0, q8, y, 32);
    CHECK(q8[0].d == 0 && y[0] == 0 && y[31] == 0);
    wlm_quantize_row_q4_0(x, q4, 32);
    wlm_dequantize_row(GGML_Q4_0, q4, y, 32);
    CHECK((q4[0].d & 0x7fff) == 0 && y[0] == 0 && y[31] == 0);
    free(x);
    free(y);
    free(q8);
    free(q4);
}

/* ---- 4. wmath against libm ---------------------------------------------------------- */

TEST(kernels_wmath_expf_logf_ulps) {
    int64_t worst_exp = 0, worst_log = 0;
    float at_exp = 0, at_log = 0;
    long n_exp = 0, n_log = 0;
    /* expf over every 61st float in [-104, 89] (the whole non-trivial range,
     * subnormal results included) */
    for (uint32_t b = 0; b < 0x42b20000u; b += 61) {
        for (int s = 0; s < 2; s++) {
            float x = bitsf(b | (s ? 0x80000000u : 0));
            if (s && x < -104.0f) continue;
            float got = wlm_expf(x), want = (float)exp((double)x);
            int64_t u = ulp_diff(got, want);
            if (u > worst_exp) {
                worst_exp = u;
                at_exp = x;
            }
            n_exp++;
        }
    }
    /* logf over every 61st positive float, subnormals included */
    for (uint32_t b = 1; b < 0x7f800000u; b += 61) {
        float x = bitsf(b);
        float got = wlm_logf(x), want = (float)log((double)x);
        int64_t u = ulp_diff(got, want);
        if (u > worst_log) {
            worst_log = u;
            at_log = x;
        }
        n_log++;
    }
    /* wlm_expf must also agree with the float libm expf (which may itself be
     * off by one ulp) within 1 ulp */
    int64_t worst_libmf = 0;
    for (int i = 0; i < 200000; i++) {
        float x = (float)((tst_rand() & 0xffffff) / 16777216.0 * 190.0 - 102.0);
        int64_t u = ulp_diff(wlm_expf(x), expf(x));
        if (u > worst_libmf) worst_libmf = u;
    }
    printf("  expf: %ld points, max %lld ulp (at %a); vs libm expf max %lld ulp; logf: %ld points, max %lld ulp (at %a)\n",
           n_exp, (long long)worst_exp, at_exp, (long long)worst_libmf, n_log, (long long)worst_log, at_log);
    CHECKF(worst_exp <= 1, "expf max error %lld ulp at %a", (long long)worst_exp, at_exp);
    CHECKF(worst_libmf <= 1, "expf vs libm expf: %lld ulp", (long long)worst_libmf);
    CHECKF(worst_log <= 1, "logf max error %lld ulp at %a", (long long)worst_log, at_log);
    /* exact values */
    CHECK(wlm_expf(0.0f) == 1.0f);
    CHECK(wlm_expf(-0.0f) == 1.0f);
    CHECK(wlm_expf(1.0f) == (float)T_E);
    CHECK(wlm_logf(1.0f) == 0.0f);
    CHECK(wlm_logf(2.0f) == (float)T_LN2);
}

TEST(kernels_wmath_special_values) {
    CHECK(isinf(wlm_expf(INFINITY)) && wlm_expf(INFINITY) > 0);
    CHECK(wlm_expf(-INFINITY) == 0.0f && !signbit(wlm_expf(-INFINITY)));
    CHECK(isnan(wlm_expf(NAN)));
    CHECK(isinf(wlm_expf(89.0f))); /* overflow */
    CHECK(isfinite(wlm_expf(88.72f)) && wlm_expf(88.72f) > 3.3e38f);
    CHECK(wlm_expf(-104.0f) == 0.0f);                              /* underflow */
    CHECK(wlm_expf(-103.0f) > 0.0f && wlm_expf(-103.0f) < 1e-44f); /* subnormal result */
    CHECK(wlm_expf(-87.0f) == (float)exp(-87.0));
    CHECK(isinf(wlm_logf(0.0f)) && wlm_logf(0.0f) < 0);
    CHECK(isinf(wlm_logf(-0.0f)) && wlm_logf(-0.0f) < 0);
    CHECK(isnan(wlm_logf(-1.0f)));
    CHECK(isnan(wlm_logf(-INFINITY)));
    CHECK(isinf(wlm_logf(INFINITY)) && wlm_logf(INFINITY) > 0);
    CHECK(isnan(wlm_logf(NAN)));
    CHECK(wlm_logf(0x1p-149f) == (float)log(0x1p-149));
    CHECK(wlm_logf(3.4028235e38f) == (float)log(3.4028235e38));
    /* double versions */
    CHECK(wlm_exp(0.0) == 1.0);
    CHECK(isinf(wlm_exp(710.0)) && wlm_exp(-746.0) == 0.0);
    CHECK(wlm_exp(-745.0) > 0.0); /* smallest subnormals */
    CHECK(fabs(wlm_exp(700.0) / exp(700.0) - 1) < 1e-15);
    CHECK(fabs(wlm_exp(-740.0) - exp(-740.0)) <= 0x1p-1074);
    CHECK(isnan(wlm_log(-1e-300)) && wlm_log(1.0) == 0.0);
    CHECK(fabs(wlm_log(0x1p-1074) - log(0x1p-1074)) < 1e-13);
    CHECK(isinf(wlm_log(0.0)) && wlm_log(0.0) < 0);
    /* sin/cos */
    CHECK(wlm_sin(0.0) == 0.0 && !signbit(wlm_sin(0.0)));
    CHECK(wlm_sin(-0.0) == 0.0 && signbit(wlm_sin(-0.0)));
    CHECK(wlm_cos(0.0) == 1.0 && wlm_cos(-0.0) == 1.0);
    CHECK(isnan(wlm_sin(INFINITY)) && isnan(wlm_sin(-INFINITY)) && isnan(wlm_sin(NAN)));
    CHECK(isnan(wlm_cos(INFINITY)) && isnan(wlm_cos(-INFINITY)) && isnan(wlm_cos(NAN)));
    CHECK(wlm_sin(1e-300) == 1e-300);
    CHECK(fabs(wlm_sin(T_PI) - sin(T_PI)) < 1e-30); /* 1.22e-16, the error of T_PI */
    CHECK(fabs(wlm_cos(T_PI / 2) - cos(T_PI / 2)) < 1e-30);
    /* silu */
    CHECK(wlm_silu(0.0f) == 0.0f);
    CHECK(fabsf(wlm_silu(1.0f) - 0.7310586f) < 1e-7f);
    CHECK(wlm_silu(-200.0f) == 0.0f || fabsf(wlm_silu(-200.0f)) < 1e-40f);
    CHECK(wlm_silu(200.0f) == 200.0f);
}

TEST(kernels_wmath_sin_cos_exp_log_double) {
    double worst_sc = 0, worst_sc_abs = 0, at = 0, worst_e = 0, worst_l = 0;
    for (int i = 0; i < 400000; i++) {
        /* |x| < 1e5, spread over magnitudes from 1e-8 up */
        double u = (tst_rand() & 0xffffff) / 16777216.0;
        double x = ((tst_rand() & 1) ? -1 : 1) * pow(10.0, -8 + 13 * u);
        double s = wlm_sin(x), c = wlm_cos(x), rs = sin(x), rc = cos(x);
        /* relative to the value, with the absolute floor of one ulp of 1 near zeros */
        double es = fabs(s - rs) / fmax(fabs(rs), 0x1p-52), ec = fabs(c - rc) / fmax(fabs(rc), 0x1p-52);
        double e = fmax(es, ec);
        if (e > worst_sc) {
            worst_sc = e;
            at = x;
        }
        worst_sc_abs = fmax(worst_sc_abs, fmax(fabs(s - rs), fabs(c - rc)));
        double y = (tst_rand() & 0xffffff) / 16777216.0 * 1400 - 700;
        worst_e = fmax(worst_e, fabs(wlm_exp(y) - exp(y)) / exp(y));
        double z = pow(10.0, -300 + 600 * ((tst_rand() & 0xffffff) / 16777216.0));
        double lz = log(z);
        worst_l = fmax(worst_l, fabs(wlm_log(z) - lz) / fabs(lz));
    }
    printf("  sin/cos |x| < 1e5: max rel err %.3g (at %.17g), max abs err %.3g; exp rel %.3g; log rel %.3g\n",
           worst_sc, at, worst_sc_abs, worst_e, worst_l);
    CHECKF(worst_sc <= 2e-15, "sin/cos relative error %.3g at %.17g", worst_sc, at);
    CHECKF(worst_sc_abs <= 2.3e-16, "sin/cos absolute error %.3g", worst_sc_abs);
    CHECKF(worst_e <= 1e-15, "exp relative error %.3g", worst_e);
    CHECKF(worst_l <= 1e-15, "log relative error %.3g", worst_l);
    /* identities the engine relies on for RoPE: exact quadrants */
    CHECK(fabs(wlm_sin(T_PI / 2) - 1.0) <= 0x1p-53 && fabs(wlm_cos(T_PI) + 1.0) <= 0x1p-53);
    CHECK(dbits(wlm_cos(0.5)) == dbits(cos(0.5)) || fabs(wlm_cos(0.5) - cos(0.5)) <= 0x1p-53);
}

/* ---- 5. the float exp of the sampler's log-sum-exp (sum_exp) ----------------------------- */

#define EXPF_FAST_DIGEST 0xfc656a8b2d563719ull

/* wlm_expf_fast against wlm_exp (double) on every 61st float of its range
 * (an exhaustive native check of all 2.24e9 floats gave 9.80e-8, 1.18 ulp),
 * and its edges: 0 below ln(FLT_MIN), +inf above 88.375, exactly 1 at 0. */
TEST(kernels_expf_fast_accuracy) {
    double worst = 0;
    float at = 0;
    int64_t worst_ulp = 0;
    long n = 0, above_one = 0;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of every result's bits */
    const uint32_t lo_bits = fbits(WLM_EXPF_LO) & 0x7fffffffu, hi_bits = fbits(WLM_EXPF_HI);
    for (int sg = 0; sg < 2; sg++) {
        uint32_t end = sg ? lo_bits : hi_bits;
        for (uint32_t b = 0; b <= end; b += 61) {
            float x = bitsf(b | (sg ? 0x80000000u : 0));
            float got = wlm_expf_fast(x);
            double want = wlm_exp((double)x);
            double rel = fabs((double)got - want) / want;
            if (rel > worst) {
                worst = rel;
                at = x;
            }
            int64_t u = ulp_diff(got, (float)want);
            if (u > worst_ulp) worst_ulp = u;
            if (x <= 0 && got > 1.0f) above_one++;
            h = (h ^ fbits(got)) * 0x100000001b3ull;
            n++;
        }
    }
    printf("  expf_fast: %ld points in [%.9g, %.9g], max rel err %.4g (at %.9g), max %lld ulp from the rounded exp\n",
           n, WLM_EXPF_LO, WLM_EXPF_HI, worst, at, (long long)worst_ulp);
    CHECKF(worst < 1.0e-7, "relative error %.4g at %a", worst, at);
    CHECKF(worst_ulp <= 1, "%lld ulp", (long long)worst_ulp);
    CHECKF(above_one == 0, "%ld values above 1 for x <= 0 (a term of the sum must not exceed the max's)", above_one);
    /* the same bits in every build (gcc and clang natively, wasm scalar,
     * SIMD128 and relaxed): a digest of all the results above */
    CHECKF(h == EXPF_FAST_DIGEST, "digest %016llx, expected %016llx: this build's wlm_expf_fast differs", (unsigned long long)h,
           (unsigned long long)EXPF_FAST_DIGEST);
    /* the ends of the range and beyond */
    float lo = WLM_EXPF_LO, below = nextafterf(lo, -INFINITY), hi = WLM_EXPF_HI, above = nextafterf(hi, INFINITY);
    CHECK((double)lo > -126 * T_LN2 && (double)below <= -126 * T_LN2); /* LO: the first float above ln(FLT_MIN) */
    CHECKF(wlm_expf_fast(lo) >= 0x1p-126f && fabs(wlm_expf_fast(lo) / wlm_exp(lo) - 1) < 1e-7, "at LO: %a", wlm_expf_fast(lo));
    CHECK(wlm_expf_fast(below) == 0.0f && !signbit(wlm_expf_fast(below)));
    CHECK(wlm_expf_fast(-100.0f) == 0.0f && wlm_expf_fast(-3.4e38f) == 0.0f && wlm_expf_fast(-INFINITY) == 0.0f);
    CHECK(isfinite(wlm_expf_fast(hi)) && fabs(wlm_expf_fast(hi) / wlm_exp(hi) - 1) < 1e-7);
    CHECK(isinf(wlm_expf_fast(above)) && isinf(wlm_expf_fast(INFINITY)) && wlm_expf_fast(INFINITY) > 0);
    CHECK(isnan(wlm_expf_fast(NAN)));
    CHECK(wlm_expf_fast(0.0f) == 1.0f && wlm_expf_fast(-0.0f) == 1.0f);
    CHECK(wlm_expf_fast(0x1p-149f) == 1.0f && wlm_expf_fast(-0x1p-149f) == 1.0f); /* denormal arguments */
    CHECK(fabs(wlm_expf_fast(-1.0f) - 1 / T_E) < 1e-7 / T_E && fabs(wlm_expf_fast(1.0f) - T_E) < 1e-7 * T_E);
}

/* sum_exp's documented order written out independently: term i (NaN and
 * -inf skipped, above FLT_MAX taken as FLT_MAX) to double sum i % 8, fold
 * ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)) */
static double order_sum_exp(uint32_t n, const float *y, float m) {
    double s[8] = { 0 };
    for (uint32_t i = 0; i < n; i++) {
        if (isnan(y[i]) || y[i] == -INFINITY) continue;
        float x = y[i] > FLT_MAX ? FLT_MAX : y[i];
        s[i % 8] = s[i % 8] + (double)wlm_expf_fast(x - m);
    }
    double a = s[0] + s[4], b = s[2] + s[6], c = s[1] + s[5], d = s[3] + s[7];
    return (a + b) + (c + d);
}

/* one random logit: mostly spread values, sometimes one of the entries the
 * sampler must exclude or clamp, a denormal, or one far below the max */
static float rand_logit(int spread) {
    switch (tst_rand() % 32) {
    case 0: return NAN;
    case 1: return -INFINITY;
    case 2: return INFINITY;
    case 3: return FLT_MAX;
    case 4: return 3.39e38f;
    case 5: return -3.0e38f;
    case 6: return ldexpf(tst_randf(), -130); /* denormal (or zero) */
    case 7: return -100.0f + tst_randf();
    case 8: return -87.34f + 0.01f * tst_randf(); /* around the underflow edge */
    default: return tst_randf() * (float)spread;
    }
}

static double dbl_sum_exp(uint32_t n, const float *y, float m) {
    double z = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (isnan(y[i]) || y[i] == -INFINITY) continue;
        z += exp((double)(y[i] > FLT_MAX ? FLT_MAX : y[i]) - m);
    }
    return z;
}

/* every kernel set's sum_exp equals the scalar reference bit for bit (and
 * the documented order), at lengths that are not multiples of the lane
 * count, with NaN / -inf / +inf / huge / denormal / -100 entries, at the max
 * of the usable logits and at other offsets; and it is within float rounding
 * of the double-precision sum */
TEST(kernels_sum_exp_bit_identical) {
    enum { MAXN = 32000 + 8 };
    float *y = malloc(MAXN * 4);
    static const uint32_t big[] = { 255, 256, 1000, 4097, 32000 };
    int checked = 0;
    double worst = 0;
    for (int si = 0; si < 70 + 5; si++) {
        uint32_t n = si < 70 ? (uint32_t)si + 1 : big[si - 70];
        for (int rep = 0; rep < 6; rep++) {
            int off = rep & 1, plain = rep < 2; /* plain: finite moderate values only */
            for (uint32_t i = 0; i < n + 1; i++) y[i] = plain ? tst_randf() * 40.0f : rand_logit(rep < 4 ? 30 : 1000);
            const float *v = y + off;
            /* m: the sampler's max (clamped, exclusions skipped), then other offsets */
            float mx = -INFINITY;
            for (uint32_t i = 0; i < n; i++) {
                float x = v[i];
                if (isnan(x) || x == -INFINITY) continue;
                if (x > FLT_MAX) x = FLT_MAX;
                if (x > mx) mx = x;
            }
            float ms[5] = { mx, mx + 3.0f, mx - 5.0f, 0.0f, -INFINITY };
            for (int mi = 0; mi < 5; mi++) {
                float m = ms[mi];
                double ref = wlm_kernels_scalar.sum_exp(n, v, m);
                double ord = order_sum_exp(n, v, m);
                CHECKF(dbits(ref) == dbits(ord) || (ref != ref && ord != ord), "n=%u m=%g: scalar %.17g documented order %.17g", n, m, ref, ord);
                for (int k = 0; k < N_SETS; k++) {
                    double got = SETS[k]->sum_exp(n, v, m);
                    CHECKF(dbits(got) == dbits(ref) || (got != got && ref != ref), "%s n=%u rep %d m=%g: got %.17g ref %.17g",
                           SETS[k]->name, n, rep, m, got, ref);
                    checked++;
                }
                if (mi == 0 && mx != -INFINITY) {
                    CHECKF(ref >= 1.0 && ref <= n, "n=%u: sum %.17g at the max", n, ref); /* the max's term is exactly 1 */
                    double want = dbl_sum_exp(n, v, mx);
                    double rel = fabs(ref - want) / want;
                    if (rel > worst) worst = rel;
                    CHECKF(rel < 1.0e-7, "n=%u: sum %.17g, double %.17g", n, ref, want);
                }
            }
        }
    }
    /* all excluded: 0; an empty vector: 0 */
    for (int i = 0; i < 20; i++) y[i] = (i & 1) ? NAN : -INFINITY;
    for (int k = 0; k < N_SETS; k++) CHECK(dbits(SETS[k]->sum_exp(20, y, 1.0f)) == dbits(0.0) && dbits(SETS[k]->sum_exp(0, y, 1.0f)) == dbits(0.0));
    printf("  sum_exp: %d comparisons over %d kernel sets, worst rel err vs double at the max = %.3g\n", checked, N_SETS, worst);
    free(y);
}

/* logit_max: every set equals the reference bit for bit and the definition
 * (largest usable value, +inf as FLT_MAX, a zero maximum as +0, -inf when
 * nothing is usable), with zeros of both signs mixed in */
TEST(kernels_logit_max_bit_identical) {
    enum { MAXN = 32000 + 8 };
    float *y = malloc(MAXN * 4);
    static const uint32_t big[] = { 255, 256, 1000, 4097, 32000 };
    int checked = 0;
    for (int si = 0; si < 70 + 5; si++) {
        uint32_t n = si < 70 ? (uint32_t)si + 1 : big[si - 70];
        for (int rep = 0; rep < 8; rep++) {
            int off = rep & 1;
            for (uint32_t i = 0; i < n + 1; i++) {
                float v = rand_logit(rep < 4 ? 30 : 1000);
                if (rep >= 6) v = (tst_rand() & 1) ? -0.0f : (tst_rand() & 1) ? 0.0f
                                                                              : -fabsf(v); /* max is a zero */
                if (rep == 5 && (tst_rand() & 1)) v = -INFINITY;
                y[i] = v;
            }
            const float *v = y + off;
            float want = -INFINITY;
            for (uint32_t i = 0; i < n; i++) {
                if (isnan(v[i]) || v[i] == -INFINITY) continue;
                float x = v[i] > FLT_MAX ? FLT_MAX : v[i];
                if (x > want) want = x;
            }
            if (want == 0.0f) want = 0.0f; /* +0 */
            float ref = wlm_kernels_scalar.logit_max(n, v);
            CHECKF(fbits(ref) == fbits(want), "n=%u rep %d: scalar %a, definition %a", n, rep, ref, want);
            for (int k = 0; k < N_SETS; k++) {
                float got = SETS[k]->logit_max(n, v);
                CHECKF(fbits(got) == fbits(ref), "%s n=%u rep %d: %a, ref %a", SETS[k]->name, n, rep, got, ref);
                checked++;
            }
        }
    }
    for (int i = 0; i < 20; i++) y[i] = (i & 1) ? NAN : -INFINITY;
    for (int i = 20; i < 40; i++) y[i] = (i & 1) ? -0.0f : 0.0f;
    for (int k = 0; k < N_SETS; k++) {
        CHECK(SETS[k]->logit_max(20, y) == -INFINITY && SETS[k]->logit_max(0, y) == -INFINITY);
        CHECK(fbits(SETS[k]->logit_max(20, y + 20)) == 0 && fbits(SETS[k]->logit_max(20, y + 21)) == 0);
        CHECK(fbits(SETS[k]->logit_max(1, y + 21)) == 0); /* a lone -0 */
    }
    printf("  logit_max: %d comparisons over %d kernel sets\n", checked, N_SETS);
    free(y);
}

/* exp_shift (attention's softmax weights): every set writes
 * wlm_expf_fast(y[i] - m) bit for bit, at every length of a tile and beyond */
TEST(kernels_exp_shift_bit_identical) {
    enum { MAXN = 300 };
    float y[MAXN + 1], want[MAXN + 1], got[MAXN + 1];
    int checked = 0;
    for (uint32_t n = 1; n <= MAXN; n += (n < 70 ? 1 : 37)) {
        for (int rep = 0; rep < 4; rep++) {
            int off = rep & 1;
            for (uint32_t i = 0; i < n + 1; i++) y[i] = rep < 2 ? tst_randf() * 30.0f : rand_logit(100);
            float m = rep == 3 ? 0.0f : 30.0f;
            for (uint32_t i = 0; i < n; i++) want[i] = wlm_expf_fast(y[off + i] - m);
            for (int k = 0; k < N_SETS; k++) {
                memcpy(got, y + off, n * 4);
                SETS[k]->exp_shift(n, got, m);
                int bad = 0;
                for (uint32_t i = 0; i < n; i++) bad += !same_float(got[i], want[i]);
                CHECKF(bad == 0, "%s n=%u rep %d: %d values differ", SETS[k]->name, n, rep, bad);
                checked++;
            }
        }
    }
    printf("  exp_shift: %d vectors over %d kernel sets\n", checked, N_SETS);
}

/* silu_mul (the SwiGLU gate): every set equals the scalar wlm_silu(a) * b bit
 * for bit; wlm_silu within a few float roundings of x / (1 + exp(-x)) */
TEST(kernels_silu_mul_bit_identical) {
    enum { MAXN = 300 };
    float a[MAXN + 1], b[MAXN + 1], want[MAXN + 1], got[MAXN + 1];
    int checked = 0;
    for (uint32_t n = 1; n <= MAXN; n += (n < 70 ? 1 : 37)) {
        for (int rep = 0; rep < 4; rep++) {
            int off = rep & 1;
            for (uint32_t i = 0; i < n + 1; i++) {
                a[i] = rep < 2 ? tst_randf() * 12.0f : rand_logit(120);
                b[i] = rand_wide();
            }
            for (uint32_t i = 0; i < n; i++) want[i] = wlm_silu(a[off + i]) * b[off + i];
            for (int k = 0; k < N_SETS; k++) {
                memcpy(got, a + off, n * 4);
                SETS[k]->silu_mul(n, got, b + off);
                int bad = 0;
                for (uint32_t i = 0; i < n; i++) bad += !same_float(got[i], want[i]);
                CHECKF(bad == 0, "%s n=%u rep %d: %d values differ", SETS[k]->name, n, rep, bad);
                checked++;
            }
        }
    }
    double worst = 0;
    float at = 0;
    for (int i = 0; i < 400000; i++) {
        float x = (float)((tst_rand() & 0xffffff) / 16777216.0 * 176.0 - 88.0);
        double want = (double)x / (1.0 + wlm_exp(-(double)x));
        double rel = fabs(wlm_silu(x) - want) / fabs(want);
        if (want != 0 && rel > worst) {
            worst = rel;
            at = x;
        }
    }
    printf("  silu_mul: %d vectors over %d kernel sets; wlm_silu on [-88, 88] max rel err %.3g (at %.9g)\n", checked, N_SETS, worst, at);
    CHECKF(worst < 3e-7, "silu relative error %.3g at %a", worst, at);
    CHECK(fabs(wlm_silu(-88.5f)) < 1e-36 && wlm_silu(-INFINITY) != wlm_silu(-INFINITY) && wlm_silu(INFINITY) == INFINITY);
}

/* The SIMD lanes compute wlm_expf_fast itself: one usable value in lane j
 * of an 8-vector (the rest -inf) sums to exactly that value, for dense and
 * edge arguments */
TEST(kernels_sum_exp_lanes_are_expf_fast) {
    float y[8];
    static const float edges[] = { 0.0f, -0.0f, 1.0f, -1.0f, 0x1p-149f, -0x1p-149f, WLM_EXPF_LO, -87.33655f,
                                   WLM_EXPF_HI, 88.3751f, 88.72f, 89.0f, -104.0f, -1e30f, INFINITY, -0.3465736f, 0.3465736f };
    int bad = 0, n = 0;
    for (int i = 0; i < 200000 + (int)(sizeof edges / sizeof edges[0]); i++) {
        float x = i < 200000 ? (float)((tst_rand() & 0xffffff) / 16777216.0 * 195.0 - 105.0) : edges[i - 200000];
        int j = i & 7;
        for (int l = 0; l < 8; l++) y[l] = l == j ? x : -INFINITY;
        double want = (double)wlm_expf_fast(x > FLT_MAX ? FLT_MAX : x);
        for (int k = 0; k < N_SETS; k++) {
            double got = SETS[k]->sum_exp(8, y, 0.0f);
            if (dbits(got) != dbits(want)) {
                if (bad++ < 5) fprintf(stderr, "  %s: x=%a lane %d: %a, want %a\n", SETS[k]->name, x, j, got, want);
            }
            n++;
        }
    }
    CHECKF(bad == 0, "%d of %d lanes differ", bad, n);
}

/* sum_exp and the logprob on fixed vectors (a local generator, so the
 * inputs do not depend on which tests ran before): a digest of the results'
 * bits, the same in every build and kernel set */
#define SUM_EXP_DIGEST 0x8039ac11e2301906ull
TEST(kernels_sum_exp_same_bits_in_every_build) {
    enum { N = 32000 };
    float *y = malloc(N * 4);
    uint32_t g = 777;
    for (int k = 0; k < N_SETS; k++) {
        uint64_t h = 0xcbf29ce484222325ull;
        g = 777;
        for (int v = 0; v < 12; v++) {
            uint32_t n = v < 6 ? N - (uint32_t)v : 1 + 97 * (uint32_t)v;
            for (uint32_t i = 0; i < n; i++) {
                g = g * 1664525u + 1013904223u;
                float u = (float)(g >> 8) * (1.0f / 16777216.0f);
                uint32_t sel = (g >> 4) & 63;
                y[i] = sel == 0 ? NAN : sel == 1 ? -INFINITY
                    : sel == 2                   ? INFINITY
                    : sel == 3                   ? 3.3e38f
                    : sel == 4                   ? -0.0f
                    : sel == 5                   ? 0x1p-140f
                                                 : (u * 2 - 1) * (v & 1 ? 30.0f : 200.0f);
            }
            float m = SETS[k]->logit_max(n, y);
            uint64_t s = dbits(SETS[k]->sum_exp(n, y, m));
            h = (h ^ s) * 0x100000001b3ull;
            h = (h ^ fbits(m)) * 0x100000001b3ull;
            for (uint32_t t = 0; t < n; t += n / 7 + 1) h = (h ^ fbits(wlm_token_logprob(SETS[k], y, n, (int32_t)t))) * 0x100000001b3ull;
        }
        CHECKF(h == SUM_EXP_DIGEST, "%s: digest %016llx, expected %016llx", SETS[k]->name, (unsigned long long)h,
               (unsigned long long)SUM_EXP_DIGEST);
    }
    free(y);
}

/* the logprob the sampler reports, computed with each kernel set: the same
 * bits, and <= 0 even with logits above 3e38 (fuzz finding 2) */
TEST(kernels_token_logprob_every_set) {
    enum { N = 1003 };
    float *l = malloc(N * 4);
    for (int trial = 0; trial < 60; trial++) {
        for (int i = 0; i < N; i++) l[i] = trial < 20 ? tst_randf() * 20.0f : rand_logit(trial < 40 ? 50 : 1000);
        if (trial % 3 == 0) {
            l[3] = 3.4e38f;
            l[4] = 3.0e38f;
            l[9] = INFINITY;
        }
        for (int t = 0; t < N; t += 37) {
            float ref = wlm_token_logprob(&wlm_kernels_scalar, l, N, t);
            CHECKF(!(ref > 0.0f), "trial %d token %d: logprob %g", trial, t, ref);
            CHECKF(ref == ref || isnan(l[t]), "trial %d token %d: NaN logprob", trial, t);
            for (int k = 0; k < N_SETS; k++) {
                float got = wlm_token_logprob(SETS[k], l, N, t);
                CHECKF(fbits(got) == fbits(ref), "%s trial %d token %d: %.9g vs %.9g", SETS[k]->name, trial, t, got, ref);
            }
        }
    }
    free(l);
}

/* the register-tiled prefill kernel (i16x4 rows): every result equals the
 * scalar dot_q8_0 / dot_q4_0 of the same row and token bit for bit, in every
 * kernel set, for tiles cut at any row and token count */
TEST(kernels_gemm_i16x4_equals_row_dots) {
    enum { MAXB = 37,
           MAXR = 7,
           MAXT = 11 };
    static block_q8_0 w8[MAXR][MAXB], x8[MAXT][MAXB];
    static block_q4_0 w4[MAXR][MAXB];
    uint64_t rb = wlm_i16x4_row_bytes(MAXB * 32);
    uint8_t *wp = malloc(MAXR * rb), *xp = malloc(MAXT * rb);
    float y[MAXT * 9], ref[MAXT * 9];
    static const uint32_t NB[] = { 1, 3, 4, 5, 8, 9, 12, 15, 16, 24, 37 };
    int checked = 0;
    for (unsigned si = 0; si < sizeof NB / sizeof NB[0]; si++) {
        uint32_t nb = NB[si], n = nb * 32;
        for (int rep = 0; rep < 3; rep++) {
            float v[32];
            for (int t = 0; t < MAXT; t++)
                for (uint32_t b = 0; b < nb; b++) {
                    for (int j = 0; j < 32; j++) v[j] = tst_randf() * (1 + (b + t) % 7);
                    wlm_quantize_row_q8_0(v, &x8[t][b], 32);
                    if (rep == 2 && b % 3 == 0) rand_q8_block(&x8[t][b], 1 + (int)(tst_rand() % 3)); /* extremes */
                }
            for (int r = 0; r < MAXR; r++)
                for (uint32_t b = 0; b < nb; b++) {
                    for (int j = 0; j < 32; j++) v[j] = tst_randf();
                    wlm_quantize_row_q8_0(v, &w8[r][b], 32);
                    wlm_quantize_row_q4_0(v, &w4[r][b], 32);
                    if (rep == 2 && b % 2 == 0) {
                        rand_q8_block(&w8[r][b], 1 + (int)(tst_rand() % 3));
                        rand_q4_block(&w4[r][b], 1 + (int)(tst_rand() % 3));
                    }
                }
            for (int t = 0; t < MAXT; t++) wlm_unpack_i16x4(GGML_Q8_0, x8[t], xp + t * rb, n);
            for (int q4 = 0; q4 < 2; q4++) {
                for (int r = 0; r < MAXR; r++) wlm_unpack_i16x4(q4 ? GGML_Q4_0 : GGML_Q8_0, q4 ? (const void *)w4[r] : (const void *)w8[r], wp + r * rb, n);
                for (uint32_t nr = 1; nr <= MAXR; nr += 2)
                    for (uint32_t nt = 1; nt <= MAXT; nt += (nt < 6 ? 1 : 5)) {
                        for (uint32_t t = 0; t < nt; t++)
                            for (uint32_t r = 0; r < nr; r++)
                                ref[t * 9 + r] = q4 ? wlm_kernels_scalar.dot_q4_0(n, w4[r], x8[t]) : wlm_kernels_scalar.dot_q8_0(n, w8[r], x8[t]);
                        for (int k = 0; k < N_SETS; k++) {
                            for (uint32_t i = 0; i < MAXT * 9; i++) y[i] = -1.0f;
                            SETS[k]->gemm_i16x4(n, wp, rb, nr, xp, rb, nt, y, 9);
                            for (uint32_t t = 0; t < nt; t++)
                                for (uint32_t r = 0; r < nr; r++) {
                                    CHECKF(same_float(y[t * 9 + r], ref[t * 9 + r]), "%s %s nb=%u nr=%u nt=%u (r %u, t %u): %.9g vs %.9g",
                                           SETS[k]->name, q4 ? "q4_0" : "q8_0", nb, nr, nt, r, t, y[t * 9 + r], ref[t * 9 + r]);
                                    checked++;
                                }
                            /* nothing written outside the nr x nt results */
                            for (uint32_t t = 0; t < nt; t++)
                                for (uint32_t r = nr; r < 9; r++) CHECK(y[t * 9 + r] == -1.0f);
                        }
                    }
            }
        }
    }
    printf("  %d tiled results checked\n", checked);
    CHECK(checked > 10000);
    free(wp);
    free(xp);
}

/* Forward pass through the tiled prefill path: a tiny llama (rows of 9 and 17
 * blocks: groups of four plus a tail) in F32, F16, Q8_0 and Q4_0 gives the
 * same logits, bit for bit, whether the prompt is evaluated one token at a
 * time (row dots), in one batch of 19 (tiles plus token tails) or in chunks of
 * 6, 3 and 2; natively also with 2 and 3 threads. The Q4_0 model once more
 * with its matrices repacked into q4g: the same logits as without. */
#if !defined(__wasm__)
typedef struct {
    wlm_pool *p;
    uint32_t tid;
} fw_arg;
static void *fw_main(void *a) {
    fw_arg *w = a;
    wlm_worker_loop(w->p, w->tid);
    return NULL;
}
#endif

static wlm_ctx *fw_ctx(wlm_model *m, uint32_t n_batch, uint32_t all, uint32_t threads) {
    wlm_ctx_params p;
    wlm_ctx_default_params(&p);
    p.n_ctx = 64;
    p.n_batch = n_batch;
    p.logits_all = all;
    p.n_threads = threads;
    wlm_ctx *c = NULL;
    wlm_err err = { 0 };
    if (wlm_ctx_new(&c, m, &p, &err) != WLM_OK) fprintf(stderr, "  ctx_new: %s\n", err.msg);
    return c;
}

TEST(kernels_forward_prefill_equals_stepwise) {
    gb_file *f = malloc(sizeof *f);
    gb_llama lp = { 288, 2, 4, 2, 544, 0, 0, 4242 };
    gb_tiny_llama(f, &lp);
    size_t size = 0;
    unsigned char *raw = gb_serialize(f, &size);
    gb_free(f);
    free(f);
    REQUIRE(raw);
    unsigned char *bytes = tst_sys_copy(raw, size);
    free(raw);
    wlm_model *base;
    wlm_err err = { 0 };
    REQUIRE(wlm_model_load(&base, bytes, size, &err) == WLM_OK);
    enum { NT = 19 };
    int32_t toks[NT];
    for (int i = 0; i < NT; i++) toks[i] = 3 + (int32_t)(tst_rand() % (GB_TINY_NV - 3));
    static const uint32_t TYPES[] = { GGML_F32, GGML_F16, GGML_Q8_0, GGML_Q4_0, GGML_Q4_0 };
    float *q4_step = NULL;
    for (unsigned ti = 0; ti < 5; ti++) {
        wlm_model *m = base;
        unsigned char *qb = NULL;
        if (TYPES[ti] != GGML_F32) {
            uint64_t qs = 0;
            REQUIRE(wlm_quantize_size(base, TYPES[ti], &qs, &err) == WLM_OK);
            qb = wlm_sys_alloc(qs);
            REQUIRE(qb);
            char report[4096];
            REQUIRE(wlm_quantize(base, TYPES[ti], qb, qs, report, sizeof report, &err) == WLM_OK);
            REQUIRE(wlm_model_load(&m, qb, qs, &err) == WLM_OK);
            CHECK(wlm_gguf_tensor(&m->g, "blk.0.ffn_down.weight")->type == TYPES[ti]);
            CHECK(wlm_gguf_tensor(&m->g, "blk.1.attn_q.weight")->type == TYPES[ti]);
            if (ti == 4) {
                unsigned char *plain_bytes = tst_sys_copy(qb, qs);
                wlm_model *plain;
                REQUIRE(plain_bytes && wlm_model_load(&plain, plain_bytes, qs, &err) == WLM_OK);
                wlm_model_repack_q4g(m);
                CHECK(wlm_gguf_tensor(&m->g, "blk.0.ffn_down.weight")->q4g && wlm_gguf_tensor(&m->g, "blk.1.attn_q.weight")->q4g);
                CHECK(!m->tok_embd->q4g);
                CHECK(memcmp(qb, plain_bytes, qs) != 0); /* rewritten in place */
                /* wlm_quantize reads q4g matrices as the file's Q4_0: copied
                 * (Q4_0) and dequantized (Q8_0), the same bytes as from the
                 * model that was not repacked */
                static const uint32_t AGAIN[] = { GGML_Q4_0, GGML_Q8_0 };
                for (int ai = 0; ai < 2; ai++) {
                    uint64_t s1 = 0, s2 = 0;
                    REQUIRE(wlm_quantize_size(m, AGAIN[ai], &s1, &err) == WLM_OK && wlm_quantize_size(plain, AGAIN[ai], &s2, &err) == WLM_OK);
                    CHECK(s1 == s2);
                    unsigned char *o1 = malloc(s1), *o2 = malloc(s2);
                    REQUIRE(wlm_quantize(m, AGAIN[ai], o1, s1, NULL, 0, &err) == WLM_OK && wlm_quantize(plain, AGAIN[ai], o2, s2, NULL, 0, &err) == WLM_OK);
                    CHECKF(s1 == s2 && memcmp(o1, o2, s1) == 0, "quantize to %s from the repacked model differs", wlm_type_name(AGAIN[ai]));
                    if (ai == 0) CHECK(memcmp(o1, plain_bytes, s1) == 0); /* the original file */
                    free(o1);
                    free(o2);
                }
                wlm_model_free(plain);
                wlm_sys_free(plain_bytes);
            }
        }
        uint32_t V = m->hp.n_vocab;
        float *step = malloc(sizeof(float) * NT * V);
        wlm_ctx *a = fw_ctx(m, 1, 0, 1);
        REQUIRE(a);
        for (int i = 0; i < NT; i++) {
            REQUIRE(wlm_eval(a, &toks[i], 1, &err) == WLM_OK);
            memcpy(step + (size_t)i * V, wlm_ctx_logits(a), sizeof(float) * V);
        }
        wlm_ctx_free(a);
        if (ti == 3) {
            q4_step = malloc(sizeof(float) * NT * V);
            memcpy(q4_step, step, sizeof(float) * NT * V);
        }
        if (ti == 4) CHECKF(q4_step && memcmp(q4_step, step, sizeof(float) * NT * V) == 0, "q4g logits differ from Q4_0's");
        uint32_t max_thr = 1;
#if !defined(__wasm__)
        max_thr = 3;
#endif
        for (uint32_t nth = 1; nth <= max_thr; nth++) {
            wlm_pool *p = NULL;
#if !defined(__wasm__)
            pthread_t th[4];
            fw_arg fa[4];
            if (nth > 1) {
                p = wlm_pool_new(nth);
                REQUIRE(p);
                for (uint32_t t = 1; t < nth; t++) {
                    fa[t].p = p;
                    fa[t].tid = t;
                    pthread_create(&th[t], NULL, fw_main, &fa[t]);
                }
            }
#endif
            wlm_ctx *b = fw_ctx(m, NT, 1, nth);
            REQUIRE(b);
            wlm_ctx_set_pool(b, p, nth);
            REQUIRE(wlm_eval(b, toks, NT, &err) == WLM_OK);
            REQUIRE(wlm_ctx_n_logits(b) == NT);
            for (int i = 0; i < NT; i++)
                CHECKF(memcmp(wlm_ctx_logits(b) + (size_t)i * V, step + (size_t)i * V, sizeof(float) * V) == 0,
                       "%s, %u threads: batch logits at position %d differ from stepwise", wlm_type_name(TYPES[ti]), nth, i);
            wlm_ctx_free(b);
            /* chunks of 6, 3 and 2 tokens (each kernel set's small-batch
             * paths: gemv up to 2 or 3 tokens, tiles beyond) */
            static const uint32_t CHUNK[] = { 6, 3, 2 };
            for (unsigned ci = 0; ci < 3; ci++) {
                wlm_ctx *c = fw_ctx(m, CHUNK[ci], 0, nth);
                REQUIRE(c);
                wlm_ctx_set_pool(c, p, nth);
                REQUIRE(wlm_eval(c, toks, NT, &err) == WLM_OK);
                CHECKF(memcmp(wlm_ctx_logits(c), step + (size_t)(NT - 1) * V, sizeof(float) * V) == 0,
                       "%s, %u threads: logits in chunks of %u differ from stepwise", wlm_type_name(TYPES[ti]), nth, CHUNK[ci]);
                wlm_ctx_free(c);
            }
#if !defined(__wasm__)
            if (p) {
                wlm_pool_free(p);
                for (uint32_t t = 1; t < nth; t++) pthread_join(th[t], NULL);
            }
#endif
        }
        free(step);
        if (m != base) {
            wlm_model_free(m);
            wlm_sys_free(qb);
        }
    }
    free(q4_step);
    wlm_model_free(base);
    wlm_sys_free(bytes);
}

/* the decode / small-batch kernels (i16eo activations) equal dot_q8_0 /
 * dot_q4_0 bit for bit in every kernel set, for any row and token count,
 * extreme values, and weight scales that are subnormal, infinite or NaN */
TEST(kernels_gemv_q8_0_q4_0_equal_row_dots) {
    enum { MAXB = 41,
           MAXR = 9,
           MAXT = 9 };
    static block_q8_0 w8[MAXR][MAXB], x8[MAXT][MAXB];
    static block_q4_0 w4[MAXR][MAXB];
    uint64_t x16s = wlm_i16eo_row_bytes(MAXB * 32) + 8; /* rows apart by more than they need */
    uint8_t *x16 = malloc(x16s * MAXT);
    static const uint32_t NB[] = { 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 24, 41 };
    static const uint32_t NT[] = { 1, 2, 3, 4, 5, 8, 9 };
    int checked = 0;
    /* the i16eo order is a permutation of 0..31 */
    int seen[32] = { 0 };
    for (uint32_t k = 0; k < 32; k++) seen[wlm_i16eo_pos(k)]++;
    for (int k = 0; k < 32; k++) CHECK(seen[k] == 1);
    for (unsigned si = 0; si < sizeof NB / sizeof NB[0]; si++) {
        uint32_t nb = NB[si], n = nb * 32;
        for (int rep = 0; rep < 6; rep++) {
            rand_tokens(&x8[0][0], MAXB, MAXT, nb, rep % 3 == 2);
            for (int r = 0; r < MAXR; r++)
                for (uint32_t b = 0; b < nb; b++) {
                    int ex = rep % 3 == 1 ? (int)(tst_rand() % 4) : 0;
                    rand_q8_block(&w8[r][b], ex);
                    rand_q4_block(&w4[r][b], ex);
                    if (rep >= 3 && tst_rand() % 7 == 0) w8[r][b].d = w4[r][b].d = odd_scale(); /* non-finite or subnormal */
                }
            for (int t = 0; t < MAXT; t++) wlm_act_i16eo(x8[t], x16 + t * x16s, n);
            for (int k = 0; k < N_SETS; k++)
                for (uint32_t nr = 1; nr <= MAXR; nr++)
                    for (unsigned ti = 0; ti < sizeof NT / sizeof NT[0]; ti++) {
                        uint32_t nt = NT[ti];
                        if (nr != MAXR && nt != 1 && nt != 5) continue; /* the full grid at one row count */
                        enum { YS = MAXR + 3 };
                        float y8[MAXT * YS], y4[MAXT * YS];
                        for (int i = 0; i < MAXT * YS; i++) y8[i] = y4[i] = -1.0f;
                        SETS[k]->gemv_q8_0(n, (const uint8_t *)w8, sizeof w8[0], nr, (const uint8_t *)x8, sizeof x8[0], x16, x16s, nt, y8, YS);
                        SETS[k]->gemv_q4_0(n, (const uint8_t *)w4, sizeof w4[0], nr, (const uint8_t *)x8, sizeof x8[0], x16, x16s, nt, y4, YS);
                        for (uint32_t t = 0; t < MAXT; t++)
                            for (uint32_t r = 0; r < YS; r++) {
                                if (t >= nt || r >= nr) { /* nothing written outside the nt x nr block */
                                    CHECK(y8[t * YS + r] == -1.0f && y4[t * YS + r] == -1.0f);
                                    continue;
                                }
                                float r8 = wlm_kernels_scalar.dot_q8_0(n, w8[r], x8[t]), r4 = wlm_kernels_scalar.dot_q4_0(n, w4[r], x8[t]);
                                CHECKF(same_float(y8[t * YS + r], r8), "%s gemv_q8_0 nb=%u nr=%u nt=%u row %u tok %u: %.9g vs %.9g", SETS[k]->name, nb, nr, nt, r, t, y8[t * YS + r], r8);
                                CHECKF(same_float(y4[t * YS + r], r4), "%s gemv_q4_0 nb=%u nr=%u nt=%u row %u tok %u: %.9g vs %.9g", SETS[k]->name, nb, nr, nt, r, t, y4[t * YS + r], r4);
                                checked += 2;
                            }
                    }
        }
    }
    printf("  %d row-token dots checked\n", checked);
    CHECK(checked > 20000);
    free(x16);
}

/* dot_f16's fast half conversion hands rows holding an infinity or a NaN to
 * the exact path: the result matches the reference (NaN where it is NaN) */
TEST(kernels_dot_f16_nonfinite_rows) {
    enum { N = 200 };
    uint16_t h[N];
    float x[N];
    static const uint16_t odd[] = { 0x7c00, 0xfc00, 0x7e00, 0xfe01, 0x7c01, 0x0001, 0x8001, 0x7bff };
    int nan_seen = 0;
    for (int rep = 0; rep < 400; rep++) {
        uint32_t n = 1 + tst_rand() % N;
        for (uint32_t i = 0; i < n; i++) {
            h[i] = rand_half_moderate();
            x[i] = tst_randf();
        }
        uint32_t at = tst_rand() % n;
        h[at] = odd[rep % 8];
        if (rep % 5 == 0) x[at] = 0.0f; /* inf * 0 */
        float ref = wlm_kernels_scalar.dot_f16(n, h, x);
        nan_seen += ref != ref;
        for (int k = 0; k < N_SETS; k++) {
            float got = SETS[k]->dot_f16(n, h, x);
            CHECKF(same_float(got, ref), "%s n=%u half %04x at %u: %.9g vs %.9g", SETS[k]->name, n, h[at], at, got, ref);
        }
    }
    CHECK(nan_seen > 50);
}

/* every set's unpack_i16x4 writes the bytes of the reference unpacker, and
 * the layout is the documented one */
TEST(kernels_unpack_i16x4_layout) {
    enum { MAXB = 23 };
    static block_q8_0 w8[MAXB];
    static block_q4_0 w4[MAXB];
    uint64_t rb = wlm_i16x4_row_bytes(MAXB * 32);
    uint8_t *ref = malloc(rb), *got = malloc(rb);
    int checked = 0;
    for (uint32_t nb = 1; nb <= MAXB; nb++) {
        for (uint32_t b = 0; b < nb; b++) {
            rand_q8_block(&w8[b], (int)(tst_rand() % 4));
            rand_q4_block(&w4[b], (int)(tst_rand() % 4));
        }
        for (int q4 = 0; q4 < 2; q4++) {
            uint32_t type = q4 ? GGML_Q4_0 : GGML_Q8_0, n = nb * 32;
            const void *row = q4 ? (const void *)w4 : (const void *)w8;
            wlm_unpack_i16x4(type, row, ref, n);
            const int16_t *q = (const int16_t *)ref;
            for (uint32_t b = 0; b < nb; b++)
                for (uint32_t k = 0; k < 32; k++) {
                    int v = q4 ? q4_val(&w4[b], (int)k) : w8[b].qs[k];
                    uint32_t at = b < nb / 4 * 4 ? (b / 4) * 128 + (k / 2) * 8 + (b % 4) * 2 + (k & 1) : b * 32 + k;
                    CHECKF(q[at] == v, "%s nb=%u block %u value %u", q4 ? "q4_0" : "q8_0", nb, b, k);
                }
            for (uint32_t b = 0; b < nb; b++)
                CHECK(((const float *)(ref + n * 2))[b] == wlm_f16_to_f32(q4 ? w4[b].d : w8[b].d));
            for (int k = 0; k < N_SETS; k++) {
                memset(got, 0xa5, rb);
                SETS[k]->unpack_i16x4(type, row, got, n);
                CHECKF(memcmp(got, ref, wlm_i16x4_row_bytes(n)) == 0, "%s %s nb=%u", SETS[k]->name, q4 ? "q4_0" : "q8_0", nb);
                checked++;
            }
        }
    }
    CHECK(checked >= 2 * MAXB);
    free(ref);
    free(got);
}

/* the i8x4 form (relaxed-SIMD Q4_0 prefill): the reference writers put
 * every value where the layout says, and every set that has the unpackers
 * writes the same bytes */
TEST(kernels_i8x4_layout) {
    enum { MAXB = 23 };
    static block_q8_0 x8[MAXB];
    static block_q4_0 w4[MAXB];
    uint64_t ab = wlm_act_i8x4_row_bytes(MAXB * 32);
    uint8_t *ref = malloc(ab), *got = malloc(ab);
    int checked = 0;
    for (uint32_t nb = 1; nb <= MAXB; nb++) {
        uint32_t n = nb * 32;
        for (uint32_t b = 0; b < nb; b++) {
            rand_q8_block(&x8[b], (int)(tst_rand() % 4));
            rand_q4_block(&w4[b], (int)(tst_rand() % 4));
        }
        for (int act = 0; act < 2; act++) {
            if (act) wlm_act_i8x4(x8, ref, n);
            else wlm_unpack_q4_i8x4(w4, ref, n);
            for (uint32_t b = 0; b < nb; b++) {
                int32_t sum = 0;
                for (uint32_t k = 0; k < 32; k++) {
                    uint32_t at = b < nb / 4 * 4 ? (b / 4) * 128 + (k / 4) * 16 + (b % 4) * 4 + k % 4 : b * 32 + k;
                    int v = act ? x8[b].qs[k] : q4_val(&w4[b], (int)k) + 8;
                    CHECKF((act ? (int)(int8_t)ref[at] : (int)ref[at]) == v, "%s nb=%u block %u value %u", act ? "act" : "q4_0", nb, b, k);
                    sum += v;
                }
                float d;
                memcpy(&d, ref + n + b * 4, 4);
                CHECK(fbits(d) == fbits(wlm_f16_to_f32(act ? x8[b].d : w4[b].d)));
                if (act) {
                    int32_t s;
                    memcpy(&s, ref + n + nb * 4 + b * 4, 4);
                    CHECK(s == sum);
                }
            }
            for (int k = 0; k < N_SETS; k++) {
                if (!SETS[k]->gemm_q4_i8x4) continue; /* the relaxed set: its act_q4g writes the i8x4 form */
                memset(got, 0xa5, ab);
                if (act) SETS[k]->act_q4g(x8, got, n, 0, nb);
                else SETS[k]->unpack_q4_i8x4(w4, got, n);
                CHECKF(memcmp(got, ref, act ? wlm_act_i8x4_row_bytes(n) : wlm_q4_i8x4_row_bytes(n)) == 0, "%s %s nb=%u", SETS[k]->name, act ? "act" : "q4_0", nb);
                checked++;
            }
        }
    }
    printf("  %d kernel-set unpacks checked\n", checked);
    free(ref);
    free(got);
}

/* the relaxed-SIMD Q4_0 prefill kernel (i8x4 rows): every result equals the
 * scalar dot_q4_0 of the same row and token bit for bit, for tiles cut at any
 * row and token count, with extreme values (the int16 sums at their largest)
 * and infinite / NaN scales; in the sets that have it (relaxed SIMD) */
TEST(kernels_gemm_q4_i8x4_equals_row_dots) {
    enum { MAXB = 37,
           MAXR = 7,
           MAXT = 11 };
    static block_q8_0 x8[MAXT][MAXB];
    static block_q4_0 w4[MAXR][MAXB];
    uint64_t wb = wlm_q4_i8x4_row_bytes(MAXB * 32), xb = wlm_act_i8x4_row_bytes(MAXB * 32);
    uint8_t *wp = malloc(MAXR * wb), *xp = malloc(MAXT * xb);
    float y[MAXT * 9], ref[MAXT * 9];
    static const uint32_t NB[] = { 1, 3, 4, 5, 8, 9, 12, 15, 16, 24, 37 };
    int checked = 0, sets = 0;
    for (int k = 0; k < N_SETS; k++) sets += SETS[k]->gemm_q4_i8x4 != NULL;
    for (unsigned si = 0; sets && si < sizeof NB / sizeof NB[0]; si++) {
        uint32_t nb = NB[si], n = nb * 32;
        for (int rep = 0; rep < 4; rep++) {
            float v[32];
            for (int t = 0; t < MAXT; t++)
                for (uint32_t b = 0; b < nb; b++) {
                    for (int j = 0; j < 32; j++) v[j] = tst_randf() * (1 + (b + t) % 7);
                    wlm_quantize_row_q8_0(v, &x8[t][b], 32);
                    if (rep >= 2 && b % 3 == 0) rand_q8_block(&x8[t][b], rep == 3 ? 1 : 1 + (int)(tst_rand() % 3)); /* extremes */
                }
            for (int r = 0; r < MAXR; r++)
                for (uint32_t b = 0; b < nb; b++) {
                    for (int j = 0; j < 32; j++) v[j] = tst_randf();
                    wlm_quantize_row_q4_0(v, &w4[r][b], 32);
                    if (rep >= 2 && b % 2 == 0) rand_q4_block(&w4[r][b], rep == 3 ? 2 : 1 + (int)(tst_rand() % 3));
                    if (rep == 3 && b == 1) w4[r][b].d = r % 2 ? 0x7c00 : 0x7e00; /* +inf, NaN */
                }
            for (int t = 0; t < MAXT; t++) wlm_act_i8x4(x8[t], xp + t * xb, n);
            for (int r = 0; r < MAXR; r++) wlm_unpack_q4_i8x4(w4[r], wp + r * wb, n);
            for (uint32_t nr = 1; nr <= MAXR; nr += 2)
                for (uint32_t nt = 1; nt <= MAXT; nt += (nt < 6 ? 1 : 5)) {
                    for (uint32_t t = 0; t < nt; t++)
                        for (uint32_t r = 0; r < nr; r++) ref[t * 9 + r] = wlm_kernels_scalar.dot_q4_0(n, w4[r], x8[t]);
                    for (int k = 0; k < N_SETS; k++) {
                        if (!SETS[k]->gemm_q4_i8x4) continue;
                        for (uint32_t i = 0; i < MAXT * 9; i++) y[i] = -1.0f;
                        SETS[k]->gemm_q4_i8x4(n, wp, wb, nr, xp, xb, nt, y, 9);
                        for (uint32_t t = 0; t < nt; t++)
                            for (uint32_t r = 0; r < nr; r++) {
                                CHECKF(same_float(y[t * 9 + r], ref[t * 9 + r]), "%s nb=%u nr=%u nt=%u rep %d (r %u, t %u): %.9g vs %.9g",
                                       SETS[k]->name, nb, nr, nt, rep, r, t, y[t * 9 + r], ref[t * 9 + r]);
                                checked++;
                            }
                        for (uint32_t t = 0; t < nt; t++)
                            for (uint32_t r = nr; r < 9; r++) CHECK(y[t * 9 + r] == -1.0f);
                    }
                }
        }
    }
    if (!sets) printf("  no kernel set here has gemm_q4_i8x4 (relaxed SIMD only)\n");
    else printf("  %d tiled results checked in %d set(s)\n", checked, sets);
    CHECK(!sets || checked > 10000);
    free(wp);
    free(xp);
}

/* The q4g form (Q4_0 matrices repacked at load) against its documented
 * layout; back to the same Q4_0 bytes; its dequantization and unpacking
 * equal those of the Q4_0 row; every set's unpackers and act_q4g writer
 * (converted group range by group range) equal the reference writers. */
TEST(kernels_q4g_layout) {
    enum { MAXB = 23 };
    static block_q4_0 w4[MAXB], back[MAXB];
    static block_q8_0 x8[MAXB];
    uint8_t *g = malloc(sizeof w4), *ref = malloc(wlm_i16eo_row_bytes(MAXB * 32)), *got = malloc(wlm_i16eo_row_bytes(MAXB * 32));
    float *fa = malloc(sizeof(float) * MAXB * 32), *fb = malloc(sizeof(float) * MAXB * 32);
    int checked = 0;
    for (uint32_t nb = 1; nb <= MAXB; nb++) {
        uint32_t n = nb * 32, full = nb / 4 * 4;
        for (uint32_t b = 0; b < nb; b++) {
            rand_q4_block(&w4[b], (int)(tst_rand() % 4));
            rand_q8_block(&x8[b], (int)(tst_rand() % 4));
        }
        memcpy(g, w4, nb * sizeof(block_q4_0));
        wlm_q4g_from_q4_0(g, n);
        for (uint32_t b = 0; b < nb; b++) {
            const uint8_t *base = g + (b / 4) * 72;
            if (b < full) {
                CHECK((uint16_t)(base[(b % 4) * 2] | base[(b % 4) * 2 + 1] << 8) == w4[b].d);
                for (uint32_t k = 0; k < 16; k++) CHECK(base[8 + (k / 4) * 16 + (b % 4) * 4 + k % 4] == w4[b].qs[k]);
            } else {
                CHECK(memcmp(g + b * sizeof(block_q4_0), &w4[b], sizeof(block_q4_0)) == 0); /* tail blocks as they were */
            }
            CHECK(wlm_q4g_d(g, nb, b) == w4[b].d);
            for (uint32_t k = 0; k < 32; k++) CHECK((int)wlm_q4g_q(g, nb, b, k) == q4_val(&w4[b], (int)k) + 8);
        }
        for (int k = 0; k < N_SETS; k++) { /* every set's repack */
            memcpy(back, w4, nb * sizeof(block_q4_0));
            SETS[k]->q4g_from_q4_0((uint8_t *)back, n);
            CHECKF(memcmp(back, g, nb * sizeof(block_q4_0)) == 0, "%s q4g_from_q4_0 nb=%u", SETS[k]->name, nb);
        }
        wlm_q4g_to_q4_0(g, back, n);
        CHECKF(memcmp(back, w4, nb * sizeof(block_q4_0)) == 0, "nb=%u: q4g -> Q4_0 is not the original", nb);
        wlm_dequantize_row(GGML_Q4_0, w4, fa, n);
        wlm_dequantize_q4g_row(g, fb, n);
        CHECK(memcmp(fa, fb, sizeof(float) * n) == 0);
        for (int k = 0; k < N_SETS; k++) {
            wlm_unpack_i16x4(GGML_Q4_0, w4, ref, n);
            memset(got, 0xa5, wlm_i16x4_row_bytes(n));
            SETS[k]->unpack_i16x4(WLM_Q4G, g, got, n);
            CHECKF(memcmp(got, ref, wlm_i16x4_row_bytes(n)) == 0, "%s unpack_i16x4(q4g) nb=%u", SETS[k]->name, nb);
            checked++;
        }
        /* i16g: every value of the row at its own place, each group's
         * values where a q4g group's nibbles fall when read as int16 lanes
         * (lane l of vector f of slice p: byte 2l + (f >= 2), nibble f & 1) */
        uint64_t ab = wlm_i16eo_row_bytes(n);
        memset(ref, 0, ab);
        wlm_act_i16g_blocks(x8, ref, n, 0, nb);
        int seen[MAXB * 32] = { 0 };
        for (uint32_t b = 0; b < nb; b++)
            for (uint32_t k = 0; k < 32; k++) {
                uint32_t at = wlm_i16g_pos(b, nb, k);
                seen[at]++;
                CHECK(((const int16_t *)ref)[at] == x8[b].qs[k]);
                if (b < full) {
                    uint32_t in = at % 128, p = in / 32, f = (in % 32) / 8, l = in % 8, byte = 16 * p + 2 * l + (f >= 2);
                    CHECKF((byte % 16) / 4 == b % 4 && (f & 1) == (k >= 16) && 4 * p + byte % 4 == k % 16, "i16g nb=%u block %u value %u", nb, b, k);
                }
            }
        for (uint32_t i = 0; i < n; i++) CHECK(seen[i] == 1);
        for (int k = 0; k < N_SETS; k++) {
            if (!SETS[k]->act_q4g) continue;
            int i8 = SETS[k]->gemm_q4_i8x4 != NULL; /* relaxed SIMD: the i8x4 form */
            uint64_t rb = i8 ? wlm_act_i8x4_row_bytes(n) : ab;
            if (i8) wlm_act_i8x4(x8, ref, n);
            else wlm_act_i16g_blocks(x8, ref, n, 0, nb);
            memset(got, 0xa5, rb);
            for (uint32_t b0 = 0; b0 < nb;) { /* group-aligned pieces of random length */
                uint32_t len = 4 * (1 + tst_rand() % 3), b1 = WLM_MIN(nb, b0 + len);
                if (b1 < nb && nb - b1 < 4) b1 = nb;
                SETS[k]->act_q4g(x8, got, n, b0, b1);
                b0 = b1;
            }
            CHECKF(memcmp(got, ref, rb) == 0, "%s act_q4g nb=%u", SETS[k]->name, nb);
            checked++;
        }
    }
    printf("  %d kernel-set conversions checked\n", checked);
    free(g);
    free(ref);
    free(got);
    free(fa);
    free(fb);
}

/* nr random Q4_0 rows of nb blocks (rows `stride` blocks apart in w4 and in
 * wg) and their q4g copies in wg; by rep: extreme values (rep % 3 == 1),
 * subnormal, infinite or NaN scales (rep >= 3) */
static void rand_q4g_rows(block_q4_0 *w4, uint8_t *wg, uint32_t stride, int nr, uint32_t nb, int rep) {
    for (int r = 0; r < nr; r++) {
        block_q4_0 *w = w4 + (uint64_t)r * stride;
        for (uint32_t b = 0; b < nb; b++) {
            rand_q4_block(&w[b], rep % 3 == 1 ? (int)(tst_rand() % 4) : 0);
            if (rep >= 3 && tst_rand() % 7 == 0) w[b].d = odd_scale();
        }
        uint8_t *g = wg + (uint64_t)r * stride * sizeof(block_q4_0);
        memcpy(g, w, nb * sizeof(block_q4_0));
        wlm_q4g_from_q4_0(g, nb * 32);
    }
}

/* gemv_q4g (decode and small batches of q4g rows) equals the scalar
 * dot_q4_0 of the rows before the repack, bit for bit, in every kernel set,
 * for any row and token count, with extreme values and subnormal, infinite
 * or NaN weight scales in groups and in the tail */
TEST(kernels_gemv_q4g_equals_row_dots) {
    enum { MAXB = 41,
           MAXR = 9,
           MAXT = 7,
           YS = MAXR + 3 };
    static block_q8_0 x8[MAXT][MAXB];
    static block_q4_0 w4[MAXR][MAXB];
    static uint8_t wg[MAXR][MAXB * sizeof(block_q4_0)];
    uint64_t xs = wlm_i16eo_row_bytes(MAXB * 32) + 16;
    uint8_t *xa = malloc(xs * MAXT);
    static const uint32_t NB[] = { 1, 3, 4, 5, 7, 8, 9, 12, 16, 17, 24, 41 };
    int checked = 0;
    for (unsigned si = 0; si < sizeof NB / sizeof NB[0]; si++) {
        uint32_t nb = NB[si], n = nb * 32;
        for (int rep = 0; rep < 6; rep++) {
            rand_tokens(&x8[0][0], MAXB, MAXT, nb, rep % 3 == 2);
            rand_q4g_rows(&w4[0][0], &wg[0][0], MAXB, MAXR, nb, rep);
            for (int r = 0; r < MAXR; r++)
                for (int t = 0; t < 2; t++) CHECK(same_float(wlm_dot_q4g(n, wg[r], x8[t]), wlm_kernels_scalar.dot_q4_0(n, w4[r], x8[t])));
            for (int k = 0; k < N_SETS; k++) {
                if (SETS[k]->act_q4g)
                    for (int t = 0; t < MAXT; t++) SETS[k]->act_q4g(x8[t], xa + t * xs, n, 0, nb);
                for (uint32_t nr = 1; nr <= MAXR; nr += 4)
                    for (uint32_t nt = 1; nt <= MAXT; nt++) {
                        float y[MAXT * YS];
                        for (int i = 0; i < MAXT * YS; i++) y[i] = -1.0f;
                        SETS[k]->gemv_q4g(n, wg[0], sizeof wg[0], nr, (const uint8_t *)x8, sizeof x8[0], xa, xs, nt, y, YS);
                        for (uint32_t t = 0; t < MAXT; t++)
                            for (uint32_t r = 0; r < YS; r++) {
                                if (t >= nt || r >= nr) {
                                    CHECK(y[t * YS + r] == -1.0f);
                                    continue;
                                }
                                float want = wlm_kernels_scalar.dot_q4_0(n, w4[r], x8[t]);
                                CHECKF(same_float(y[t * YS + r], want), "%s gemv_q4g nb=%u nr=%u nt=%u row %u tok %u: %.9g vs %.9g",
                                       SETS[k]->name, nb, nr, nt, r, t, y[t * YS + r], want);
                                checked++;
                            }
                    }
            }
        }
    }
    printf("  %d row-token dots checked\n", checked);
    CHECK(checked > 20000);
    free(xa);
}

/* The q4gb form (batches of q4g rows, relaxed SIMD) against its documented
 * layout, and every set's writer against the reference; then gemm_q4gb
 * equals the scalar dot_q4_0 of the rows before the repack, bit for bit,
 * for every row count 1..9 and any token count (whole chunks of four and
 * the remainders), with extreme values, tail blocks after the last group
 * and subnormal, infinite or NaN weight scales (also in single rows between
 * finite ones: such a row takes the exact conversion, its neighbours not) */
TEST(kernels_gemm_q4gb_equals_row_dots) {
    enum { MAXB = 41,
           MAXR = 9,
           MAXT = 11,
           YS = MAXR + 3 };
    static block_q8_0 x8[MAXT][MAXB];
    static block_q4_0 w4[MAXR][MAXB];
    static uint8_t wg[MAXR][MAXB * sizeof(block_q4_0)];
    uint64_t cb = wlm_q4gb_chunk_bytes(MAXB * 32), xbytes = (MAXT + 3) / 4 * cb;
    uint8_t *ref = malloc(xbytes), *got = malloc(xbytes);
    static const uint32_t NB[] = { 1, 3, 4, 5, 7, 8, 9, 12, 16, 17, 24, 41 };
    int checked = 0, sets = 0;
    for (int k = 0; k < N_SETS; k++) sets += SETS[k]->gemm_q4gb != NULL;
    for (unsigned si = 0; si < sizeof NB / sizeof NB[0]; si++) {
        uint32_t nb = NB[si], n = nb * 32, ng = nb / 4;
        uint64_t cs = wlm_q4gb_chunk_bytes(n);
        for (int rep = 0; rep < 6; rep++) {
            /* rep 1: extreme values in weights and tokens at once (the int16
             * sums' widest range: -8 x 16 x -128 = 16384) */
            rand_tokens(&x8[0][0], MAXB, MAXT, nb, rep % 3 == 2 || rep == 1);
            memset(ref, 0x5a, xbytes);
            for (uint32_t t = 0; t < MAXT; t++) wlm_act_q4gb_row(x8[t], ref, n, t);
            for (uint32_t t = 0; t < MAXT; t++) /* the documented layout */
                for (uint32_t g = 0; g < ng; g++) {
                    const uint8_t *o = ref + t / 4 * cs + g * 640;
                    uint32_t j = t % 4;
                    for (uint32_t i = 0; i < 4; i++) {
                        const block_q8_0 *B = &x8[t][4 * g + i];
                        int32_t s[2] = { 0, 0 };
                        int16_t s8[2];
                        float d;
                        for (uint32_t v = 0; v < 8; v++)
                            for (uint32_t m = 0; m < 4; m++) {
                                CHECK((int8_t)o[64 * v + 16 * j + 4 * i + m] == B->qs[4 * v + m]);
                                s[m / 2] += B->qs[4 * v + m];
                            }
                        memcpy(&d, o + 512 + 16 * j + 4 * i, 4);
                        memcpy(s8, o + 576 + 16 * j + 4 * i, 4);
                        CHECK(fbits(d) == fbits(wlm_f16_to_f32(B->d)) && s8[0] == -8 * s[0] && s8[1] == -8 * s[1]);
                    }
                }
            for (int k = 0; k < N_SETS; k++) {
                if (!SETS[k]->act_q4gb) continue;
                memset(got, 0x5a, xbytes);
                for (uint32_t t = MAXT; t-- > 0;) SETS[k]->act_q4gb(x8[t], got, n, t); /* any order: each token its own slots */
                CHECKF(memcmp(got, ref, (MAXT + 3) / 4 * cs) == 0, "%s act_q4gb nb=%u", SETS[k]->name, nb);
            }
            rand_q4g_rows(&w4[0][0], &wg[0][0], MAXB, MAXR, nb, rep);
            if (rep == 0) /* rows 1, 4, 7 with an infinite scale in their first group, the others finite */
                for (uint32_t r = 1; r < MAXR; r += 3) {
                    w4[r][0].d = 0x7c00;
                    memcpy(wg[r], w4[r], nb * sizeof(block_q4_0));
                    wlm_q4g_from_q4_0(wg[r], n);
                }
            for (int k = 0; k < N_SETS; k++) {
                if (!SETS[k]->gemm_q4gb) continue;
                for (uint32_t nr = 1; nr <= MAXR; nr++)
                    for (uint32_t nt = 1; nt <= MAXT; nt++) {
                        float y[MAXT * YS];
                        for (int i = 0; i < MAXT * YS; i++) y[i] = -1.0f;
                        SETS[k]->gemm_q4gb(n, wg[0], sizeof wg[0], nr, (const uint8_t *)x8, sizeof x8[0], ref, nt, y, YS);
                        for (uint32_t t = 0; t < MAXT; t++)
                            for (uint32_t r = 0; r < YS; r++) {
                                if (t >= nt || r >= nr) {
                                    CHECK(y[t * YS + r] == -1.0f);
                                    continue;
                                }
                                float want = wlm_kernels_scalar.dot_q4_0(n, w4[r], x8[t]);
                                CHECKF(same_float(y[t * YS + r], want), "%s gemm_q4gb nb=%u nr=%u nt=%u row %u tok %u: %.9g vs %.9g",
                                       SETS[k]->name, nb, nr, nt, r, t, y[t * YS + r], want);
                                checked++;
                            }
                    }
            }
        }
    }
    if (!sets) printf("  no kernel set here has gemm_q4gb (relaxed SIMD only); the reference layout checked\n");
    else printf("  %d row-token dots checked in %d set(s)\n", checked, sets);
    CHECK(!sets || checked > 20000);
    free(ref);
    free(got);
}

/* the float tile kernel equals dot_f32 per (row, token) in every kernel set:
 * lengths across several of its stretches (256 floats) and with tails, 1-7
 * rows and 1-9 tokens (every tile shape and remainder), padded strides,
 * values of mixed magnitude with now and then an infinity or a NaN */
TEST(kernels_gemm_f32_equals_dot_f32) {
    enum { N = 700,
           R = 7,
           T = 9,
           WS = N + 5,
           XS = N + 3,
           YS = R + 2 };
    static float w[R * WS], x[T * XS], y[T * YS];
    int checked = 0;
    for (int rep = 0; rep < 60; rep++) {
        uint32_t n = rep < 4 ? (uint32_t[]){ 16, 256, 512, 700 }[rep] : 1 + tst_rand() % N;
        for (int i = 0; i < R * WS; i++) w[i] = tst_randf() * (rep % 3 ? 1.0f : 1e6f);
        for (int i = 0; i < T * XS; i++) x[i] = tst_randf() * (rep % 5 ? 1.0f : 1e-6f);
        if (rep % 7 == 3) w[tst_rand() % (R * WS)] = (rep & 1) ? INFINITY : NAN;
        for (int k = 0; k < N_SETS; k++) {
            uint32_t nr = 1 + tst_rand() % R, nt = 1 + tst_rand() % T;
            for (int i = 0; i < T * YS; i++) y[i] = -1.0f;
            SETS[k]->gemm_f32(n, w, WS, nr, x, XS, nt, y, YS);
            for (uint32_t t = 0; t < T; t++)
                for (uint32_t r = 0; r < YS; r++) {
                    if (t >= nt || r >= nr) {
                        CHECK(y[t * YS + r] == -1.0f);
                        continue;
                    }
                    float ref = wlm_kernels_scalar.dot_f32(n, w + r * WS, x + t * XS);
                    CHECKF(same_float(y[t * YS + r], ref), "%s gemm_f32 n=%u nr=%u nt=%u row %u tok %u: %.9g vs %.9g",
                           SETS[k]->name, n, nr, nt, r, t, y[t * YS + r], ref);
                    checked++;
                }
        }
    }
    printf("  %d row-token dots checked\n", checked);
    CHECK(checked > 1000);
}

/* the small-batch F16 kernel equals dot_f16 per (row, token) and the row
 * conversion equals wlm_f16_to_f32 per half, in every kernel set, for any
 * length, row and token count, with subnormal, infinite and NaN halves */
TEST(kernels_gemv_f16_cvt_f16_equal_reference) {
    enum { N = 83,
           R = 5,
           T = 5,
           YS = R + 2 };
    static uint16_t w[R][N + 5];
    static float x[T][N + 3];
    static const uint16_t odd[] = { 0x7c00, 0xfc00, 0x7e00, 0xfe01, 0x0001, 0x8001, 0x7bff, 0x8000 };
    static float x112[T][N + 3];
    int checked = 0, nonfinite = 0, checked_finite = 0, checked_x112 = 0;
    for (int rep = 0; rep < 120; rep++) {
        uint32_t n = 1 + tst_rand() % N;
        for (int r = 0; r < R; r++)
            for (uint32_t i = 0; i < n; i++) w[r][i] = rep % 3 == 0 ? rand_half_finite() : rand_half_moderate();
        if (rep % 4 == 1) w[tst_rand() % R][tst_rand() % n] = odd[tst_rand() % 8];
        for (int t = 0; t < T; t++)
            for (uint32_t i = 0; i < n; i++) x[t][i] = tst_randf();
        /* activations over the whole range the x 2^112 form takes: tiny ones
         * (products of subnormal size) and ones just under 2^16 */
        if (rep % 5 == 2) x[tst_rand() % T][tst_rand() % n] = 0x1.fffffep15f;
        if (rep % 5 == 3) x[tst_rand() % T][tst_rand() % n] = 0x1p-140f;
        for (int k = 0; k < N_SETS; k++) {
            uint32_t nr = 1 + tst_rand() % R, nt = 1 + tst_rand() % T;
            int all_finite = 1; /* then the rows are also run as a tensor marked finite at load would be */
            for (uint32_t r = 0; r < nr; r++)
                for (uint32_t i = 0; i < n; i++) all_finite &= (w[r][i] & 0x7c00) != 0x7c00;
            for (int mode = WLM_F16_CHECK; mode <= (all_finite ? WLM_F16_FINITE_X112 : WLM_F16_CHECK); mode++) {
                int finite = mode != WLM_F16_CHECK;
                float y[T * YS];
                for (int i = 0; i < T * YS; i++) y[i] = -1.0f;
                if (mode == WLM_F16_FINITE_X112) {
                    REQUIRE(wlm_f16_scale_x(&x[0][0], sizeof x[0] / 4, nt, n, &x112[0][0]));
                    SETS[k]->gemv_f16(n, (const uint8_t *)w, sizeof w[0], nr, &x112[0][0], n, nt, y, YS, mode);
                } else SETS[k]->gemv_f16(n, (const uint8_t *)w, sizeof w[0], nr, &x[0][0], sizeof x[0] / 4, nt, y, YS, mode);
                for (uint32_t t = 0; t < T; t++)
                    for (uint32_t r = 0; r < YS; r++) {
                        if (t >= nt || r >= nr) {
                            CHECK(y[t * YS + r] == -1.0f);
                            continue;
                        }
                        float ref = wlm_kernels_scalar.dot_f16(n, w[r], x[t]);
                        nonfinite += !(ref - ref == 0);
                        CHECKF(same_float(y[t * YS + r], ref), "%s gemv_f16 (mode %d) n=%u nr=%u nt=%u row %u tok %u: %.9g vs %.9g",
                               SETS[k]->name, mode, n, nr, nt, r, t, y[t * YS + r], ref);
                        checked++;
                        checked_finite += finite;
                        checked_x112 += mode == WLM_F16_FINITE_X112;
                    }
            }
            float c[N + 5];
            c[n] = -1.0f;
            SETS[k]->cvt_f16(n, w[rep % R], c);
            for (uint32_t i = 0; i < n; i++)
                CHECKF(same_float(c[i], wlm_f16_to_f32(w[rep % R][i])), "%s cvt_f16 half %04x", SETS[k]->name, w[rep % R][i]);
            CHECK(c[n] == -1.0f);
        }
    }
    printf("  %d row-token dots checked (%d of them as rows marked finite, %d of those against x times 2^112), %d non-finite\n",
           checked, checked_finite, checked_x112, nonfinite);
    CHECK(checked > 500 && nonfinite > 5 && checked_x112 > 200);
    /* the scaled form refuses what would overflow, and keeps infinities */
    float big[3] = { 1.0f, -0x1p16f, 2.0f }, inf[2] = { INFINITY, -1.0f }, out[3];
    CHECK(!wlm_f16_scale_x(big, 3, 1, 3, out));
    CHECK(wlm_f16_scale_x(inf, 2, 1, 2, out) && out[0] == INFINITY && out[1] == -0x1p112f);
}

/* every set's quantize_q8_0 writes wlm_quantize_row_q8_0's bytes: random
 * rows over many binades, zero blocks, and values that land exactly on .5
 * after scaling (amax 127 gives id 1: v = k + 0.5 rounds away from zero) */
TEST(kernels_quantize_q8_0_equals_reference) {
    enum { NB = 9 };
    static float x[NB * 32];
    static block_q8_0 ref[NB], got[NB];
    int checked = 0;
    for (int rep = 0; rep < 300; rep++) {
        uint32_t nb = 1 + tst_rand() % NB;
        for (uint32_t i = 0; i < nb * 32; i++) x[i] = rep % 3 == 0 ? rand_wide() : tst_randf() * (float)(1 + rep % 50);
        if (rep % 5 == 1)
            for (int i = 0; i < 32; i++) x[i] = 0.0f;
        if (rep % 5 == 2) {
            x[32 * (nb - 1)] = rep % 2 ? 127.0f : -127.0f;
            for (int i = 1; i < 32; i++) x[32 * (nb - 1) + i] = (float)((int)(tst_rand() % 253) - 126) + 0.5f;
        }
        if (rep % 7 == 3) x[tst_rand() % (nb * 32)] = -0.0f;
        wlm_quantize_row_q8_0(x, ref, nb * 32);
        for (int k = 0; k < N_SETS; k++) {
            memset(got, 0xa5, sizeof got);
            SETS[k]->quantize_q8_0(x, got, nb * 32);
            CHECKF(memcmp(got, ref, nb * sizeof(block_q8_0)) == 0, "%s quantize_q8_0 rep %d nb=%u", SETS[k]->name, rep, nb);
            checked++;
        }
    }
    printf("  %d rows checked\n", checked);
}

/* layer_norm (bert's LayerNorm with bias): every set writes the scalar
 * reference's bits, for whole rows and for the ranges threads write (any
 * [lo, hi), w and b given or not), and the values are within float rounding
 * of LayerNorm computed in double */
TEST(kernels_layer_norm_bit_identical) {
    enum { MAXN = 400 };
    static float x[MAXN + 1], w[MAXN + 1], b[MAXN + 1], want[MAXN], got[MAXN];
    int checked = 0;
    double worst = 0;
    for (uint32_t n = 1; n <= MAXN; n += (n < 70 ? 1 : 29)) {
        for (int rep = 0; rep < 4; rep++) {
            int off = rep & 1;
            float shift = rep == 3 ? 100.0f : 0.0f; /* a large mean: the two-pass variance */
            for (uint32_t i = 0; i < n + 1; i++) {
                x[i] = tst_randf() * 3.0f + shift;
                w[i] = 1.0f + tst_randf() * 0.5f;
                b[i] = tst_randf();
            }
            const float *wp = rep == 2 ? NULL : w + off, *bp = rep == 2 ? NULL : b + off;
            float eps = rep == 1 ? 1e-5f : 1e-12f;
            wlm_kernels_scalar.layer_norm(n, x + off, wp, bp, eps, want, 0, n);
            /* double reference */
            double mean = 0, var = 0;
            for (uint32_t i = 0; i < n; i++) mean += x[off + i];
            mean /= n;
            for (uint32_t i = 0; i < n; i++) var += (x[off + i] - mean) * (x[off + i] - mean);
            var /= n;
            for (uint32_t i = 0; i < n; i++) {
                double r = (x[off + i] - mean) / sqrt(var + eps) * (wp ? wp[i] : 1) + (bp ? bp[i] : 0);
                double e = fabs(want[i] - r);
                if (e > worst) worst = e;
            }
            for (int k = 0; k < N_SETS; k++) {
                /* the whole row, then in three ranges as threads write it */
                uint32_t cut[4] = { 0, n / 3, n / 3 + (n - n / 3) / 2 + 1, n };
                if (cut[2] > n) cut[2] = n;
                for (int whole = 0; whole < 2; whole++) {
                    memset(got, 0xff, sizeof got);
                    if (whole) SETS[k]->layer_norm(n, x + off, wp, bp, eps, got, 0, n);
                    else
                        for (int r = 0; r < 3; r++) SETS[k]->layer_norm(n, x + off, wp, bp, eps, got, cut[r], cut[r + 1]);
                    int bad = 0;
                    for (uint32_t i = 0; i < n; i++) bad += !same_float(got[i], want[i]);
                    CHECKF(bad == 0, "%s n=%u rep %d whole %d: %d values differ", SETS[k]->name, n, rep, whole, bad);
                    checked++;
                }
            }
        }
    }
    printf("  layer_norm: %d rows over %d kernel sets; max |error| vs double %.3g\n", checked, N_SETS, worst);
    CHECKF(worst < 2e-5, "layer_norm differs from the double reference by %.3g", worst);
}

/* A block so small that the inverse of its scale overflows (amax below about
 * 3.7e-37: v * id is infinite): the values saturate to +-127 in every set,
 * like a block at its largest value. Before, the reference converted the
 * infinity to int (undefined in C; natively and in wasm it gave 1) while the
 * SIMD set saturated to 127 and -128. Every Q8_0 activation is therefore in
 * [-127, 127], which the relaxed gemv_q8_0 takes as a 7-bit operand. */
TEST(kernels_quantize_q8_0_tiny_blocks) {
    static const float tiny[] = { 1e-38f, -1e-38f, 3e-39f, -2e-40f, 1.4e-45f, -1.4e-45f, 3.6e-37f, 0.0f, -0.0f };
    block_q8_0 ref, got;
    float x[32];
    int checked = 0;
    for (int rep = 0; rep < 200; rep++) {
        for (int i = 0; i < 32; i++) x[i] = tiny[tst_rand() % (sizeof tiny / sizeof tiny[0])];
        if (rep % 4 == 1) x[tst_rand() % 32] = NAN; /* a NaN is left out of amax and quantizes to 0 */
        wlm_quantize_row_q8_0(x, &ref, 32);
        float amax = 0;
        for (int i = 0; i < 32; i++)
            if (fabsf(x[i]) > amax) amax = fabsf(x[i]);
        volatile float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int i = 0; i < 32; i++) {
            CHECKF(ref.qs[i] >= -127 && ref.qs[i] <= 127, "rep %d: value %d of %g", rep, ref.qs[i], (double)x[i]);
            if (x[i] != x[i] || x[i] == 0.0f) CHECKF(ref.qs[i] == 0, "rep %d: %g -> %d", rep, (double)x[i], ref.qs[i]);
            else if (isinf(id)) CHECKF(ref.qs[i] == (x[i] < 0 ? -127 : 127), "rep %d: %g (scale inverse infinite) -> %d", rep, (double)x[i], ref.qs[i]);
        }
        for (int k = 0; k < N_SETS; k++) {
            memset(&got, 0xa5, sizeof got);
            SETS[k]->quantize_q8_0(x, &got, 32);
            CHECKF(memcmp(&got, &ref, sizeof ref) == 0, "%s quantize_q8_0 tiny block rep %d", SETS[k]->name, rep);
            checked++;
        }
    }
    printf("  %d tiny blocks checked\n", checked);
}
