/* Thread pool: the same logits, bit for bit, at any thread count; the pool
 * starts, runs many small jobs and shuts down cleanly. Native only (the
 * wasm32-wasi test build has no threads; the wasm threaded build is tested
 * from JS). */
#include "tst.h"
#include "../../src/internal.h"

#if !defined(__wasm__)
#include <pthread.h>

typedef struct { wlm_pool *p; uint32_t tid; } warg;
static void *wmain(void *a) { warg *w = a; wlm_worker_loop(w->p, w->tid); return NULL; }

static void sum_job(void *arg, uint32_t tid, uint32_t nth) {
    int64_t *parts = arg;
    uint32_t lo, hi;
    wlm_split(1000, tid, nth, &lo, &hi);
    int64_t s = 0;
    for (uint32_t i = lo; i < hi; i++) s += i;
    parts[tid] = s;
}

TEST(threads_pool_jobs) {
    for (uint32_t n = 2; n <= 4; n++) {
        wlm_pool *p = wlm_pool_new(n);
        REQUIRE(p && wlm_pool_threads(p) == n);
        pthread_t th[8]; warg a[8];
        for (uint32_t t = 1; t < n; t++) { a[t].p = p; a[t].tid = t; pthread_create(&th[t], NULL, wmain, &a[t]); }
        int bad = 0;
        for (int rep = 0; rep < 2000; rep++) {
            int64_t parts[8] = {0};
            uint32_t nth = 1 + (uint32_t)rep % n;
            wlm_pool_run(p, sum_job, parts, nth);
            int64_t s = 0;
            for (uint32_t t = 0; t < nth; t++) s += parts[t];
            if (s != 499500) bad++;
        }
        CHECKF(bad == 0, "%d of 2000 jobs summed wrong with %u threads", bad, n);
        wlm_pool_free(p);
        for (uint32_t t = 1; t < n; t++) pthread_join(th[t], NULL);
    }
}

TEST(threads_same_logits_any_thread_count) {
    unsigned long long size;
    unsigned char *raw = tst_read_file(tst_path("models/stories260K.gguf"), &size);
    REQUIRE(raw);
    unsigned char *data = tst_sys_copy(raw, size);
    wlm_model *m; wlm_err err;
    REQUIRE(wlm_model_load(&m, data, size, &err) == WLM_OK);
    int32_t prompt[] = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298};
    float *ref = malloc(512 * 4 * 8);
    for (uint32_t n = 1; n <= 3; n++) {
        wlm_ctx_params cp; wlm_ctx_default_params(&cp);
        cp.n_threads = n; cp.n_batch = 4; cp.n_ctx = 64;
        wlm_ctx *c;
        REQUIRE(wlm_ctx_new(&c, m, &cp, &err) == WLM_OK);
        wlm_pool *p = n > 1 ? wlm_pool_new(n) : NULL;
        pthread_t th[4]; warg a[4];
        for (uint32_t t = 1; t < n; t++) { a[t].p = p; a[t].tid = t; pthread_create(&th[t], NULL, wmain, &a[t]); }
        wlm_ctx_set_pool(c, p, n);
        REQUIRE(wlm_eval(c, prompt, 11, &err) == WLM_OK);           /* prefill in chunks of 4 */
        int32_t tok = 432;
        for (int s = 0; s < 8; s++) {
            const float *l = wlm_ctx_logits(c);
            if (n == 1) memcpy(ref + s * 512, l, 512 * 4);
            else CHECKF(memcmp(ref + s * 512, l, 512 * 4) == 0, "step %d differs with %u threads", s, n);
            REQUIRE(wlm_eval(c, &tok, 1, &err) == WLM_OK);
        }
        wlm_ctx_free(c);
        if (p) { wlm_pool_free(p); for (uint32_t t = 1; t < n; t++) pthread_join(th[t], NULL); }
    }
    free(ref);
    wlm_model_free(m);
    wlm_sys_free(data);
    free(raw);
}
#endif
