/* Thread pool: the same logits, bit for bit, at any thread count; the pool
 * starts, runs many small jobs and shuts down cleanly. Native only (the
 * wasm32-wasi test build has no threads; the wasm threaded build is tested
 * from JS). */
#include "tst.h"
#include "gguf_build.h"
#include "../../src/internal.h"

#if !defined(__wasm__)
#include <pthread.h>

typedef struct {
    wlm_pool *p;
    uint32_t tid;
} warg;
static void *wmain(void *a) {
    warg *w = a;
    wlm_worker_loop(w->p, w->tid);
    return NULL;
}

/* a context of model m on n threads (a pool and n - 1 pthreads when n > 1) */
typedef struct {
    wlm_ctx *c;
    wlm_pool *p;
    uint32_t n;
    pthread_t th[8];
    warg a[8];
} tctx;

static int tctx_new(tctx *t, wlm_model *m, wlm_ctx_params cp, uint32_t n) {
    wlm_err err;
    cp.n_threads = n;
    t->n = n;
    if (wlm_ctx_new(&t->c, m, &cp, &err) != WLM_OK) return 0;
    t->p = n > 1 ? wlm_pool_new(n) : NULL;
    for (uint32_t i = 1; i < n; i++) {
        t->a[i].p = t->p;
        t->a[i].tid = i;
        pthread_create(&t->th[i], NULL, wmain, &t->a[i]);
    }
    wlm_ctx_set_pool(t->c, t->p, n);
    return 1;
}

static void tctx_free(tctx *t) {
    wlm_ctx_free(t->c);
    if (t->p) {
        wlm_pool_free(t->p);
        for (uint32_t i = 1; i < t->n; i++) pthread_join(t->th[i], NULL);
    }
}

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
        pthread_t th[8];
        warg a[8];
        for (uint32_t t = 1; t < n; t++) {
            a[t].p = p;
            a[t].tid = t;
            pthread_create(&th[t], NULL, wmain, &a[t]);
        }
        int bad = 0;
        for (int rep = 0; rep < 2000; rep++) {
            int64_t parts[8] = { 0 };
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
    unsigned char *data = tst_read_sys("models/stories260K.gguf", &size);
    REQUIRE(data);
    wlm_model *m;
    wlm_err err;
    REQUIRE(wlm_model_load(&m, data, size, &err) == WLM_OK);
    int32_t prompt[] = { 1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298 };
    float *ref = malloc(512 * 4 * 8);
    for (uint32_t n = 1; n <= 3; n++) {
        wlm_ctx_params cp;
        wlm_ctx_default_params(&cp);
        cp.n_batch = 4;
        cp.n_ctx = 64;
        tctx tc;
        REQUIRE(tctx_new(&tc, m, cp, n));
        wlm_ctx *c = tc.c;
        REQUIRE(wlm_eval(c, prompt, 11, &err) == WLM_OK); /* prefill in chunks of 4 */
        int32_t tok = 432;
        for (int s = 0; s < 8; s++) {
            const float *l = wlm_ctx_logits(c);
            if (n == 1) memcpy(ref + s * 512, l, 512 * 4);
            else CHECKF(memcmp(ref + s * 512, l, 512 * 4) == 0, "step %d differs with %u threads", s, n);
            REQUIRE(wlm_eval(c, &tok, 1, &err) == WLM_OK);
        }
        tctx_free(&tc);
    }
    free(ref);
    wlm_model_free(m);
    wlm_sys_free(data);
}

/* A model large enough that every step of the forward pass really runs on
 * several threads: GQA with 8 query and 2 key/value heads (the Q, K and V
 * heads are one range of 12 items, split unevenly at 3 threads), an FFN of
 * 544 rows (not a multiple of 256: Q4_K_M keeps K-quants for gate/up and
 * falls back for down, so the two halves of the FFN read different
 * activation forms), optionally biases on Q, K, V and the output, and an
 * F16 cache. Every weight type's path (F32, F16, Q8_0 and Q4_0 through the
 * int16 kernels, Q5_0 through the row dot, K-quants batched) gives the same
 * logits, bit for bit, at 1 to 4 threads, for a prefill in chunks of 4 and
 * for decode steps. */
static unsigned char *big_model(int biases, size_t *size) {
    gb_file *f = malloc(sizeof *f);
    gb_llama p = { 256, 2, 8, 2, 544, 0, 0, 5 };
    gb_tiny_llama(f, &p);
    if (biases) {
        uint32_t seed = 17;
        char name[96];
        for (uint32_t l = 0; l < p.n_layer; l++) {
            snprintf(name, sizeof name, "blk.%u.attn_q.bias", l);
            gb_f32_tensor(f, name, 256, 0, &seed, 0, 1);
            snprintf(name, sizeof name, "blk.%u.attn_k.bias", l);
            gb_f32_tensor(f, name, 64, 0, &seed, 0, 1);
            snprintf(name, sizeof name, "blk.%u.attn_v.bias", l);
            gb_f32_tensor(f, name, 64, 0, &seed, 0, 1);
            snprintf(name, sizeof name, "blk.%u.attn_output.bias", l);
            gb_f32_tensor(f, name, 256, 0, &seed, 0, 1);
        }
    }
    unsigned char *bytes = gb_serialize(f, size);
    gb_free(f);
    free(f);
    return bytes;
}

TEST(threads_same_logits_every_weight_type) {
    static const struct {
        uint32_t type;
        const char *name;
    } T[] = {
        { GGML_F32, "F32" },
        { GGML_F16, "F16" },
        { GGML_Q8_0, "Q8_0" },
        { GGML_Q4_0, "Q4_0" },
        { GGML_Q5_0, "Q5_0" },
        { WLM_QUANT_Q4_K_M, "Q4_K_M" },
    };
    enum { NV = GB_TINY_NV,
           STEPS = 6 };
    int32_t prompt[] = { 1, 6, 12, 9, 15, 7, 11, 14, 8, 13, 10 };
    for (int variant = 0; variant < 2; variant++) {
        size_t size;
        unsigned char *raw = big_model(variant, &size);
        unsigned char *f32data = tst_sys_copy(raw, size);
        free(raw);
        wlm_model *f32m;
        wlm_err err;
        REQUIRE(wlm_model_load(&f32m, f32data, size, &err) == WLM_OK);
        for (unsigned ti = 0; ti < sizeof T / sizeof T[0]; ti++) {
            wlm_model *m = f32m;
            unsigned char *qdata = NULL;
            if (T[ti].type != GGML_F32) {
                uint64_t qsize;
                REQUIRE(wlm_quantize_size(f32m, T[ti].type, &qsize, &err) == WLM_OK);
                qdata = wlm_sys_alloc(qsize);
                REQUIRE(qdata && wlm_quantize(f32m, T[ti].type, qdata, qsize, NULL, 0, &err) == WLM_OK);
                REQUIRE(wlm_model_load(&m, qdata, qsize, &err) == WLM_OK);
            }
            if (T[ti].type == WLM_QUANT_Q4_K_M) { /* the mixture this test is after */
                CHECK(m->layers[0].wq->type == GGML_Q4_K && m->layers[0].w_gate->type == GGML_Q4_K);
                CHECK(wlm_act_type(m->layers[0].w_down->type) == GGML_Q8_0);
            }
            float ref[STEPS][NV];
            for (uint32_t n = 1; n <= 4; n++) {
                wlm_ctx_params cp;
                wlm_ctx_default_params(&cp);
                cp.n_batch = 4;
                cp.n_ctx = 64;
                cp.kv_type = variant ? WLM_KV_F16 : WLM_KV_F32;
                tctx tc;
                REQUIRE(tctx_new(&tc, m, cp, n));
                wlm_ctx *c = tc.c;
                REQUIRE(wlm_eval(c, prompt, 11, &err) == WLM_OK);
                for (int s = 0; s < STEPS; s++) {
                    const float *l = wlm_ctx_logits(c);
                    if (n == 1) memcpy(ref[s], l, sizeof ref[s]);
                    else CHECKF(memcmp(ref[s], l, sizeof ref[s]) == 0, "%s%s: step %d differs with %u threads",
                                T[ti].name, variant ? " (biases, F16 cache)" : "", s, n);
                    int32_t tok = 2 + (s * 5) % (NV - 2);
                    REQUIRE(wlm_eval(c, &tok, 1, &err) == WLM_OK);
                }
                tctx_free(&tc);
            }
            if (qdata) {
                wlm_model_free(m);
                wlm_sys_free(qdata);
            }
        }
        wlm_model_free(f32m);
        wlm_sys_free(f32data);
    }
}
/* The sampler's log-probability over a large vocabulary (above the size
 * where its blocks go to the threads): the same value at 1 to 4 threads,
 * with excluded (NaN, -inf) and +inf logits in the mix, and close to a
 * plain softmax in double. */
TEST(threads_same_logprob_any_thread_count) {
    enum { NV = 50000 };
    unsigned long long size;
    unsigned char *data = tst_read_sys("models/stories260K.gguf", &size);
    REQUIRE(data);
    wlm_model *m;
    wlm_err err;
    REQUIRE(wlm_model_load(&m, data, size, &err) == WLM_OK);
    float *lg = malloc(NV * sizeof(float));
    for (int i = 0; i < NV; i++) lg[i] = tst_randf() * 12.0f;
    lg[77] = NAN;
    lg[4000] = -INFINITY;
    lg[49999] = 30.0f;
    int32_t toks[] = { 0, 1, 1234, 4000, 25000, 49999 };
    float ref[6];
    for (int k = 0; k < 6; k++) ref[k] = wlm_token_logprob(wlm_kernels_best(), lg, NV, toks[k]);
    double mx = 30.0, sum = 0;
    for (int i = 0; i < NV; i++)
        if (i != 77 && i != 4000) sum += exp((double)lg[i] - mx);
    for (int k = 0; k < 6; k++) {
        if (toks[k] == 4000) {
            CHECK(ref[k] == -INFINITY);
            continue;
        }
        double want = (double)lg[toks[k]] - mx - log(sum);
        CHECKF(fabs(ref[k] - want) < 1e-4, "token %d: logprob %g, want %g", toks[k], ref[k], want);
    }
    for (uint32_t n = 1; n <= 4; n++) {
        wlm_ctx_params cp;
        wlm_ctx_default_params(&cp);
        cp.n_ctx = 16;
        tctx tc;
        REQUIRE(tctx_new(&tc, m, cp, n));
        for (int k = 0; k < 6; k++) {
            float lp = wlm_ctx_token_logprob(tc.c, lg, NV, toks[k]);
            CHECKF(memcmp(&lp, &ref[k], sizeof lp) == 0, "token %d: %u threads give %.9g, 1 gives %.9g", toks[k], n, lp, ref[k]);
        }
        tctx_free(&tc);
    }
    free(lg);
    wlm_model_free(m);
    wlm_sys_free(data);
}
#endif
