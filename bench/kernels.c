/* Kernel microbenchmarks behind the numbers docs/architecture.md and the
 * source comments give for the batch kernels (`make bench-kernels`: built
 * as wasm32-wasi programs, SIMD128 and relaxed SIMD, run in Node; the
 * relaxed one where Node's known-answer probe passes). Variants of one
 * question run interleaved, rep by rep, in one process, so a busy machine
 * slows them alike, after three warm-up runs each (make bench-kernels runs
 * Node with --no-liftoff: the optimized code a long generation runs); each
 * line gives the median ns per weight per token.
 * Random Q4_0 / Q4_K / Q6_K rows (scales 1e-5..1e-2), Q8_0 / Q8_K
 * activations from a fixed LCG; every pair of variants is checked to give
 * the same bits. With a second argument only the lines whose name holds it
 * run (make bench-kernels KERNELS_ONLY="Q8_0 decode").
 *   0. Q4_0 decode, 1-3 tokens: gemv_q4_0 on rows in file order against
 *      gemv_q4g on the same rows repacked at load (the q4g form); Q8_0
 *      decode (gemv_q8_0), 1-3 tokens, for its cost per weight.
 *   1. Q4_0 batches: gemv (blocks widened in registers for every token)
 *      against a panel of 4 rows unpacked to the i16x4 form + gemm_i16x4,
 *      and (relaxed build) to the i8x4 form + gemm_q4_i8x4; 1-8 and 64 tokens.
 *   1b. (relaxed build) batches on q4g rows, 2-64 tokens: gemm_q4gb against
 *      the byte tile on the same rows in file order and gemv_q4g (<= 8).
 *   2. K-quant prefill (kq_rows, 64 tokens): rows in pairs (one call for all
 *      rows) against one row at a time (a call per row); and K-quant decode
 *      (kq_rows, one token: the row kernels), for its cost per weight.
 *   3. F16 decode (gemv_f16, one token, in its three modes), 2048 x 1024; F16 batches of 2-64
 *      tokens (a panel of rows converted + gemm_f32, against a row converted
 *      + dot_f32 per token and gemv_f16); F32 batches (gemm_f32 against
 *      dot_f32 per row and token).
 *   4. Tiled attention (wlm_attention_tiled) of one query over 1024 cached
 *      positions, head size 64, F32 and F16 caches: ns per multiply-add
 *      (2 x 1024 x 64 a query), and its two kernels alone (att_scores,
 *      att_accum: ns per multiply-add of each).
 * `make bench-kernels-native` runs the same program compiled natively
 * (SIMDe, -O3 -march=native): the same kernels, native against V8. */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../src/internal.h"
#include "../src/quants.h"

#if !WLM_SIMD128
int main(void) { puts("bench/kernels.c measures the SIMD kernel sets: build it for wasm32-wasi (make bench-kernels) or natively with SIMDe (make bench-kernels-native)"); return 0; }
#else
static double now_ms(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
static uint32_t lcg = 12345;
static uint32_t rnd(void) { lcg = lcg * 1664525u + 1013904223u; return lcg >> 8; }
static float rndf(void) { return (float)(rnd() % 2001) / 1000.0f - 1.0f; }
static uint16_t rnd_scale(void) { return wlm_f32_to_f16((float)(rnd() % 1000 + 1) * 1e-5f); }

static int cmp_d(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
static double median(double *v, int n) { qsort(v, (size_t)n, sizeof *v, cmp_d); return v[n / 2]; }

static const wlm_kernels *K = &wlm_kernels_simd128;
enum { N = 2048, PANEL = 4, MAXT = 64 };

/* ---- 1. Q4_0 batches -------------------------------------------------------------- */
static uint8_t *W4, *X8, *XE, *X16, *XA, *P;
static uint32_t rows4;
static float *Y;

static void q4_gemv(uint32_t nt) {
    uint64_t rb = N / 32 * sizeof(block_q4_0);
    K->gemv_q4_0(N, W4, rb, rows4, X8, N / 32 * sizeof(block_q8_0), XE, wlm_i16eo_row_bytes(N), nt, Y, rows4);
}
static uint8_t *W8;
static void q8_gemv(uint32_t nt) {
    uint64_t rb = N / 32 * sizeof(block_q8_0);
    K->gemv_q8_0(N, W8, rb, rows4, X8, N / 32 * sizeof(block_q8_0), XE, wlm_i16eo_row_bytes(N), nt, Y, rows4);
}
static uint8_t *W4G, *XG;
static void q4g_gemv(uint32_t nt) {
    uint64_t rb = N / 32 * sizeof(block_q4_0);
    K->gemv_q4g(N, W4G, rb, rows4, X8, N / 32 * sizeof(block_q8_0), XG, wlm_i16eo_row_bytes(N), nt, Y, rows4);
}
static void q4_i16x4(uint32_t nt) {
    uint64_t rb = N / 32 * sizeof(block_q4_0), pb = wlm_i16x4_row_bytes(N);
    for (uint32_t r = 0; r < rows4; r += PANEL) {
        for (int i = 0; i < PANEL; i++) K->unpack_i16x4(GGML_Q4_0, W4 + (r + i) * rb, P + i * pb, N);
        K->gemm_i16x4(N, P, pb, PANEL, X16, pb, nt, Y + r, rows4);
    }
}
/* the relaxed build's batches on q4g rows (gemm_q4gb) against the byte
 * tile on the same rows in file order (a panel unpacked to i8x4: q4_i8x4) */
static uint8_t *XB;
static void q4g_batch(uint32_t nt) {
    K->gemm_q4gb(N, W4G, N / 32 * sizeof(block_q4_0), rows4, X8, N / 32 * sizeof(block_q8_0), XB, nt, Y, rows4);
}
static void q4_i8x4(uint32_t nt) {
    uint64_t rb = N / 32 * sizeof(block_q4_0), pb = wlm_q4_i8x4_row_bytes(N);
    for (uint32_t r = 0; r < rows4; r += PANEL) {
        for (int i = 0; i < PANEL; i++) K->unpack_q4_i8x4((const block_q4_0 *)(W4 + (r + i) * rb), P + i * pb, N);
        K->gemm_q4_i8x4(N, P, pb, PANEL, XA, wlm_act_i8x4_row_bytes(N), nt, Y + r, rows4);
    }
}

/* ---- 2. K-quant prefill ----------------------------------------------------------- */
static uint8_t *WK, *XK, *SCR;
static uint32_t kq_type, rowsk;
static uint64_t kq_rb;
static void kq_pairs(uint32_t nt) {
    K->kq_rows(kq_type, N, WK, kq_rb, rowsk, XK, N / QK_K * sizeof(block_q8_k), nt, Y, rowsk, SCR, 1 << 20);
}
static void kq_single(uint32_t nt) {
    for (uint32_t r = 0; r < rowsk; r++)
        K->kq_rows(kq_type, N, WK + r * kq_rb, kq_rb, 1, XK, N / QK_K * sizeof(block_q8_k), nt, Y + r, rowsk, SCR, 1 << 20);
}

/* ---- 3. F16 decode --------------------------------------------------------------- */
static uint8_t *WH;
static float *XF, *XF112;
/* as wlm_mm runs it on a tensor marked finite at load: x times 2^112 (written per call there, once here);
 * and, for the decode line, the modes of an unmarked tensor and of marked rows without the scaled x */
static void f16_gemv(uint32_t nt) { K->gemv_f16(N, WH, N * 2, rows4, XF112, N, nt, Y, rows4, WLM_F16_FINITE_X112); }
static void f16_gemv_check(uint32_t nt) { K->gemv_f16(N, WH, N * 2, rows4, XF, N, nt, Y, rows4, WLM_F16_CHECK); }
static void f16_gemv_finite(uint32_t nt) { K->gemv_f16(N, WH, N * 2, rows4, XF, N, nt, Y, rows4, WLM_F16_FINITE); }

/* F16 batches: the row converted to floats, then dot_f32 per token (before
 * gemm_f32); a panel of 4 rows converted, then gemm_f32 (matmul.c's MM_PANEL_F32) */
static float *WF, *WROW;
static void f16_cvt_dot(uint32_t nt) {
    for (uint32_t r = 0; r < rows4; r++) {
        K->cvt_f16(N, (const uint16_t *)WH + (uint64_t)r * N, WROW);
        for (uint32_t t = 0; t < nt; t++) Y[t * rows4 + r] = K->dot_f32(N, WROW, XF + t * N);
    }
}
static void f16_cvt_gemm(uint32_t nt) {
    for (uint32_t r = 0; r < rows4; r += 4) {
        for (uint32_t i = 0; i < 4; i++) K->cvt_f16(N, (const uint16_t *)WH + (uint64_t)(r + i) * N, WROW + i * N);
        K->gemm_f32(N, WROW, N, 4, XF, N, nt, Y + r, rows4);
    }
}
/* F32 batches: dot_f32 per (row, token) against gemm_f32 */
static void f32_dot(uint32_t nt) {
    for (uint32_t r = 0; r < rows4; r++)
        for (uint32_t t = 0; t < nt; t++) Y[t * rows4 + r] = K->dot_f32(N, WF + (uint64_t)r * N, XF + t * N);
}
static void f32_gemm(uint32_t nt) { K->gemm_f32(N, WF, N, rows4, XF, N, nt, Y, rows4); }

typedef void (*variant)(uint32_t nt);

/* the lines whose name holds this text (argv[2]; all without it) */
static const char *only;
static int want(const char *what) { return !only || strstr(what, only) != NULL; }

/* runs the variants interleaved reps times; prints the medians; checks that
 * all give the bits of the first */
static void compare(const char *what, const char *const *names, const variant *v, int nv, uint32_t nt, uint32_t rows, int reps) {
    double t[4][64];
    static float ref[N * MAXT];
    if (!want(what)) return;
    for (int w = 0; w < 3; w++)   /* warm-up: V8 compiles hot functions in the background */
        for (int i = 0; i < nv; i++) v[i](nt);
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < nv; i++) {
            double t0 = now_ms();
            v[i](nt);
            t[i][r] = now_ms() - t0;
            if (r == 0 && i == 0) memcpy(ref, Y, sizeof(float) * rows * nt);
            if (r == 0 && i > 0 && memcmp(ref, Y, sizeof(float) * rows * nt)) { printf("%s: %s gives other bits than %s\n", what, names[i], names[0]); exit(1); }
        }
    printf("%-28s %2u tokens:", what, nt);
    for (int i = 0; i < nv; i++) printf("  %s %.4f", names[i], median(t[i], reps) * 1e6 / ((double)N * rows * nt));
    printf("   (ns/weight/token, median of %d)\n", reps);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 15;
    only = argc > 2 ? argv[2] : NULL;
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    printf("kernel set %s, n = %d\n", K->name, N);
    rows4 = 1024; rowsk = 256;
    uint64_t rb4 = N / 32 * sizeof(block_q4_0);
    W4 = malloc(rb4 * rows4);
    for (uint32_t r = 0; r < rows4; r++)
        for (uint32_t b = 0; b < N / 32; b++) {
            block_q4_0 *B = (block_q4_0 *)(W4 + r * rb4) + b;
            B->d = rnd_scale();
            for (int j = 0; j < 16; j++) B->qs[j] = (uint8_t)rnd();
        }
    uint64_t rb8 = N / 32 * sizeof(block_q8_0);
    W8 = malloc(rb8 * rows4);
    for (uint32_t r = 0; r < rows4; r++)
        for (uint32_t b = 0; b < N / 32; b++) {
            block_q8_0 *B = (block_q8_0 *)(W8 + r * rb8) + b;
            B->d = rnd_scale();
            for (int j = 0; j < 32; j++) B->qs[j] = (int8_t)(rnd() % 255 - 127);
        }
    W4G = malloc(rb4 * rows4);
    memcpy(W4G, W4, rb4 * rows4);
    for (uint32_t r = 0; r < rows4; r++) wlm_q4g_from_q4_0(W4G + r * rb4, N);
    XG = malloc(MAXT * wlm_i16eo_row_bytes(N));
    X8 = malloc(MAXT * N / 32 * sizeof(block_q8_0));
    XE = malloc(MAXT * wlm_i16eo_row_bytes(N));
    X16 = malloc(MAXT * wlm_i16x4_row_bytes(N));
    XA = malloc(MAXT * wlm_act_i8x4_row_bytes(N));
    XK = malloc(MAXT * N / QK_K * sizeof(block_q8_k));
    XB = malloc(MAXT / 4 * wlm_q4gb_chunk_bytes(N));
    float x[N];
    for (int t = 0; t < MAXT; t++) {
        for (int i = 0; i < N; i++) x[i] = rndf();
        block_q8_0 *q = (block_q8_0 *)X8 + t * (N / 32);
        wlm_quantize_row_q8_0(x, q, N);
        wlm_act_i16eo(q, XE + t * wlm_i16eo_row_bytes(N), N);
        K->unpack_i16x4(GGML_Q8_0, q, X16 + t * wlm_i16x4_row_bytes(N), N);
        if (K->gemm_q4_i8x4) K->act_q4g(q, XA + t * wlm_act_i8x4_row_bytes(N), N, 0, N / 32);   /* relaxed: the i8x4 form */
        K->act_q4g(q, XG + t * wlm_i16eo_row_bytes(N), N, 0, N / 32);
        wlm_quantize_row_q8_k(x, (block_q8_k *)XK + t * (N / QK_K), N);
        if (K->act_q4gb) K->act_q4gb(q, XB, N, (uint32_t)t);
    }
    P = malloc(PANEL * wlm_i16x4_row_bytes(N));
    Y = malloc(sizeof(float) * N * MAXT);
    SCR = aligned_alloc(16, 1 << 20);

    /* gemv takes up to 3 tokens a call in memory order (matmul.c's limit
     * decides which path a batch takes; here each runs every size) */
    for (uint32_t nt = 1; nt <= 3; nt++) {
        const char *names[] = { "gemv Q4_0", "gemv q4g" };
        variant v[] = { q4_gemv, q4g_gemv };
        compare("Q4_0 decode 2048x1024", names, v, 2, nt, rows4, reps);
    }
    for (uint32_t nt = 1; nt <= 3; nt++) {
        const char *names[] = { "gemv Q8_0" };
        variant v[] = { q8_gemv };
        compare("Q8_0 decode 2048x1024", names, v, 1, nt, rows4, reps);
    }
    if (K->gemm_q4gb) {
        static const uint32_t BT[] = { 2, 3, 4, 8, 16, 64 };
        for (unsigned i = 0; i < sizeof BT / sizeof BT[0]; i++) {
            const char *names[] = { "q4gb", "i8x4 tile", "gemv q4g" };
            variant v[] = { q4g_batch, q4_i8x4, q4g_gemv };
            compare("Q4_0 q4g batch 2048x1024", names, v, BT[i] > 8 ? 2 : 3, BT[i], rows4, reps);
        }
    }
    static const uint32_t NT[] = { 1, 2, 3, 4, 8, 64 };
    for (unsigned i = 0; i < sizeof NT / sizeof NT[0]; i++) {
        const char *names[] = { "gemv", "i16x4", "i8x4" };
        variant v[] = { q4_gemv, q4_i16x4, q4_i8x4 };
        int nv = K->gemm_q4_i8x4 ? 3 : 2;
        if (NT[i] > 8) { names[0] = names[1]; names[1] = names[2]; v[0] = v[1]; v[1] = v[2]; nv--; } /* gemv: small batches only */
        compare("Q4_0 2048x1024", names, v, nv, NT[i], rows4, reps);
    }
    for (int ti = 0; ti < 2; ti++) {
        kq_type = ti ? GGML_Q6_K : GGML_Q4_K;
        uint32_t bb = ti ? sizeof(block_q6_k) : sizeof(block_q4_k);
        kq_rb = (uint64_t)N / QK_K * bb;
        WK = malloc(kq_rb * rowsk);
        for (uint64_t i = 0; i < kq_rb * rowsk; i++) WK[i] = (uint8_t)rnd();
        for (uint32_t r = 0; r < rowsk; r++)
            for (uint32_t b = 0; b < N / QK_K; b++) {
                uint8_t *blk = WK + r * kq_rb + b * bb;
                uint16_t d = rnd_scale();
                if (ti) memcpy(blk + bb - 2, &d, 2);                  /* Q6_K: d last */
                else { memcpy(blk, &d, 2); memcpy(blk + 2, &d, 2); }  /* Q4_K: d, dmin first */
            }
        const char *names[] = { "row pairs", "one row a call" };
        variant v[] = { kq_pairs, kq_single };
        compare(ti ? "Q6_K prefill 2048x256" : "Q4_K prefill 2048x256", names, v, 2, 64, rowsk, reps);
        const char *dn[] = { "kq_rows" };
        variant dv[] = { kq_pairs };
        compare(ti ? "Q6_K decode 2048x256" : "Q4_K decode 2048x256", dn, dv, 1, 1, rowsk, reps);
        free(WK);
    }
    {
        WH = malloc((uint64_t)N * 2 * rows4);
        XF = malloc(sizeof(float) * N * MAXT);
        for (uint64_t i = 0; i < (uint64_t)N * rows4; i++) ((uint16_t *)WH)[i] = wlm_f32_to_f16(rndf() * 0.05f);
        for (int i = 0; i < N * MAXT; i++) XF[i] = rndf();
        XF112 = malloc(sizeof(float) * N * MAXT);
        for (int i = 0; i < N * MAXT; i++) XF112[i] = XF[i] * 0x1p112f;
        const char *names[] = { "check", "finite", "finite+x112" };
        variant v[] = { f16_gemv_check, f16_gemv_finite, f16_gemv };
        compare("F16 decode 2048x1024", names, v, 3, 1, rows4, reps);
        WROW = malloc(sizeof(float) * N * 4);
        const char *bn[] = { "cvt+gemm_f32", "cvt+dot_f32", "gemv_f16" };
        variant bv[] = { f16_cvt_gemm, f16_cvt_dot, f16_gemv };
        uint32_t bt[] = { 2, 3, 5, 9, 16, 64 };
        for (int i = 0; i < 6; i++) compare("F16 batch 2048x1024", bn, bv, bt[i] <= 9 ? 3 : 2, bt[i], rows4, reps);
        if (want("cvt_f16 alone")) {   /* the conversion alone */
            double tc[64];
            for (int r = 0; r < reps; r++) {
                double t0 = now_ms();
                for (uint32_t i = 0; i < rows4; i++) K->cvt_f16(N, (const uint16_t *)WH + (uint64_t)i * N, WROW + (i % 4) * N);
                tc[r] = now_ms() - t0;
            }
            printf("cvt_f16 alone 2048x1024: %.4f ns/weight (median of %d)\n", median(tc, reps) * 1e6 / ((double)N * rows4), reps);
        }
        WF = malloc(sizeof(float) * N * rows4);
        for (uint64_t i = 0; i < (uint64_t)N * rows4; i++) WF[i] = wlm_f16_to_f32(((uint16_t *)WH)[i]);
        const char *fn[] = { "gemm_f32", "dot_f32" };
        variant fv[] = { f32_gemm, f32_dot };
        for (int i = 0; i < 6; i++) compare("F32 batch 2048x1024", fn, fv, 2, bt[i], rows4, reps);
        free(WF); free(WROW); free(XF112);
    }
    if (want("attention")) {   /* 4. attention: 16 heads' caches of 1024 positions, one query each */
        enum { S = 1024, HD = 64, HEADS = 16 };
        float *Kf = malloc(sizeof(float) * S * HD * HEADS), *Vf = malloc(sizeof(float) * S * HD * HEADS), q[HD], out[HD], tile[WLM_ATT_TILE];
        uint16_t *Kh = malloc(2 * S * HD * HEADS), *Vh = malloc(2 * S * HD * HEADS);
        int32_t *pos = malloc(sizeof(int32_t) * S);
        uint32_t idx[WLM_ATT_TILE];
        for (uint32_t i = 0; i < S * HD * HEADS; i++) { Kf[i] = rndf(); Vf[i] = rndf(); Kh[i] = wlm_f32_to_f16(Kf[i]); Vh[i] = wlm_f32_to_f16(Vf[i]); }
        for (int i = 0; i < HD; i++) q[i] = rndf();
        for (int j = 0; j < S; j++) pos[j] = j;
        for (int i = 0; i < WLM_ATT_TILE; i++) idx[i] = (uint32_t)i;
        for (int f16 = 0; f16 < 2; f16++) {
            double ta[64], ts[64], tv[64];
            for (int r = -3; r < reps; r++) {
                double t0 = now_ms();
                for (int h = 0; h < HEADS; h++)
                    wlm_attention_tiled(K, q, f16 ? (const void *)(Kh + h * S * HD) : (const void *)(Kf + h * S * HD),
                                        f16 ? (const void *)(Vh + h * S * HD) : (const void *)(Vf + h * S * HD), f16, pos, S, S - 1, 0, HD, 0.125f, out, tile);
                double t1 = now_ms();
                for (int h = 0; h < HEADS; h++)
                    for (int j = 0; j < S; j += WLM_ATT_TILE)
                        K->att_scores(WLM_ATT_TILE, HD, q, f16 ? (const void *)(Kh + h * S * HD + j * HD) : (const void *)(Kf + h * S * HD + j * HD), f16, idx, 0.125f, tile);
                double t2 = now_ms();
                for (int h = 0; h < HEADS; h++)
                    for (int j = 0; j < S; j += WLM_ATT_TILE)
                        K->att_accum(WLM_ATT_TILE, HD, tile, f16 ? (const void *)(Vh + h * S * HD + j * HD) : (const void *)(Vf + h * S * HD + j * HD), f16, idx, out);
                double t3 = now_ms();
                if (r >= 0) { ta[r] = t1 - t0; ts[r] = t2 - t1; tv[r] = t3 - t2; }
            }
            double macs = 2.0 * S * HD * HEADS;
            printf("attention 1024 x hd 64 %s: %.4f ns per multiply-add; att_scores alone %.4f, att_accum alone %.4f (median of %d)\n", f16 ? "F16" : "F32",
                   median(ta, reps) * 1e6 / macs, median(ts, reps) * 1e6 / (macs / 2), median(tv, reps) * 1e6 / (macs / 2), reps);
        }
        free(Kf); free(Vf); free(Kh); free(Vh); free(pos);
    }
    return 0;
}
#endif
