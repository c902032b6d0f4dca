/* Per-token logprob cost over a 32000-entry vocabulary, before and after the
 * sum_exp kernel, side by side in one process (`make bench-logprob`: built as
 * a wasm32-wasi program, run in Node; also builds natively). Variants run
 * interleaved, rep by rep, so a busy machine slows them alike; the median of
 * each is printed. "before" is the former model_logprob of src/sampler.c: a
 * max pass, then wlm_expf (double exp) per entry. Logits: uniform in
 * [-12, 12), a fixed LCG. */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "../src/internal.h"
#include "../src/wmath.h"

static float before_logprob(const float *logits, uint32_t n, int32_t tok) {
    float m = -__builtin_inff();
    for (uint32_t i = 0; i < n; i++) {
        float x = logits[i];
        if (x != x || x == -__builtin_inff()) continue;
        if (x > 3.40282347e38f) x = 3.40282347e38f;
        if (x > m) m = x;
    }
    float x = logits[tok];
    if (x != x || x == -__builtin_inff()) return -__builtin_inff();
    if (x > 3.40282347e38f) x = 3.40282347e38f;
    double s = 0;
    for (uint32_t i = 0; i < n; i++) {
        float y = logits[i];
        if (y != y || y == -__builtin_inff()) continue;
        if (y > 3.40282347e38f) y = 3.40282347e38f;
        s += wlm_expf(y - m);
    }
    return (x - m) - (float)wlm_log(s);
}

static double now_us(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }

int main(int argc, char **argv) {
    enum { N = 32000 };
    int reps = argc > 1 ? atoi(argv[1]) : 300;
    if (reps < 1 || reps > 100000) reps = 300;
    float *l = malloc(N * sizeof(float));
    unsigned r = 12345;
    for (int i = 0; i < N; i++) { r = r * 1664525u + 1013904223u; l[i] = ((r >> 8) / 16777216.0f) * 24.0f - 12.0f; }
    /* variant 0: before; then per kernel set (at most 2): the whole logprob, sum_exp alone */
    const char *name[5]; double *t[5]; volatile float sink = 0;
    int nv = 1 + 2 * (int)wlm_kernel_set_count;
    name[0] = "before: model_logprob with wlm_expf";
    for (int v = 0; v < nv; v++) t[v] = malloc(reps * sizeof(double));
    static char lbl[4][80];
    for (uint32_t k = 0; k < wlm_kernel_set_count; k++) {
        snprintf(lbl[2 * k], 80, "after (%s): wlm_token_logprob", wlm_kernel_sets[k]->name);
        snprintf(lbl[2 * k + 1], 80, "after (%s): sum_exp alone", wlm_kernel_sets[k]->name);
        name[1 + 2 * k] = lbl[2 * k]; name[2 + 2 * k] = lbl[2 * k + 1];
    }
    float lp_before = before_logprob(l, N, 7), worst = 0;
    for (int i = 0; i < reps; i++) {
        int32_t tok = (int32_t)((i * 7919u) % N);
        double a = now_us(); sink += before_logprob(l, N, tok); t[0][i] = now_us() - a;
        for (uint32_t k = 0; k < wlm_kernel_set_count; k++) {
            const wlm_kernels *ks = wlm_kernel_sets[k];
            a = now_us(); float lp = wlm_token_logprob(ks, l, N, tok); t[1 + 2 * k][i] = now_us() - a;
            a = now_us(); sink += (float)ks->sum_exp(N, l, 12.0f); t[2 + 2 * k][i] = now_us() - a;
            float d = lp - before_logprob(l, N, tok); if (d < 0) d = -d; if (d > worst) worst = d;
        }
    }
    printf("vocabulary %d, %d reps, per call (median, min):\n", N, reps);
    double base = 0;
    for (int v = 0; v < nv; v++) {
        qsort(t[v], reps, sizeof(double), cmp);
        if (v == 0) base = t[v][reps / 2];
        printf("  %-44s %9.1f us  %9.1f us  x%.1f\n", name[v], t[v][reps / 2], t[v][0], base / t[v][reps / 2]);
    }
    printf("max |after - before| logprob: %.3g (before at token 7: %.9g)\n", (double)worst, (double)lp_before);
    (void)sink;
    return 0;
}
