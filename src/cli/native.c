/* Native front end: the same engine as the wasm build, for comparison,
 * sanitizers and the native baseline. Flags match `wasmlm` (web/cli.js):
 *   wasmlm-native generate -m PATH -p PROMPT [-n N] [--temp T] [--top-k K]
 *       [--top-p P] [--min-p P] [--repeat-penalty R] [--repeat-last-n N]
 *       [--seed S] [--ctx N] [--kv f16|f32] [--threads N] [--ignore-eos] [--parse-special]
 *   wasmlm-native info PATH
 *   wasmlm-native quantize IN OUT TYPE      (f32 | f16 | q8_0 | q4_0 | q4_1 | q5_0 | q5_1 | q2_k | q3_k | q4_k | q5_k | q6_k | q4_k_m | q5_k_m)
 * Generated text goes to stdout as it is produced; stats go to stderr. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include "../wlm.h"

#define DEFAULT_SEED 0xC0FFEEu

static double now_ms(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static unsigned char *read_file(const char *path, uint64_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "error: cannot open %s\n", path); return NULL; }
    fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
    /* the file bytes live in engine memory, as in the wasm build */
    extern void *wlm_sys_alloc(uint64_t);
    unsigned char *buf = wlm_sys_alloc((uint64_t)(n ? n : 1));
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) { fprintf(stderr, "error: cannot read %s\n", path); fclose(f); return NULL; }
    fclose(f);
    *size = (uint64_t)n;
    return buf;
}

static wlm_model *open_model(const char *path) {
    uint64_t size = 0;
    unsigned char *data = read_file(path, &size);
    if (!data) return NULL;
    wlm_model *m; wlm_err err;
    if (wlm_model_load_inplace(&m, data, size, &err)) { fprintf(stderr, "error: %s: %s\n", path, err.msg); return NULL; }
    return m;
}

typedef struct { wlm_pool *pool; uint32_t tid; } worker_arg;
static void *worker_main(void *a) { worker_arg *w = a; wlm_worker_loop(w->pool, w->tid); return NULL; }

/* n - 1 pthreads serving a pool (the calling thread is the n-th) */
static wlm_pool *start_pool(uint32_t n, pthread_t *th, worker_arg *args) {
    wlm_pool *p = wlm_pool_new(n);
    for (uint32_t t = 1; p && t < n; t++) {
        args[t].pool = p; args[t].tid = t;
        pthread_create(&th[t], NULL, worker_main, &args[t]);
    }
    return p;
}

static int usage(void) {
    fprintf(stderr, "usage: wasmlm-native generate -m MODEL -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
                    "                     [--repeat-penalty R] [--repeat-last-n N] [--seed S] [--ctx N] [--kv f16|f32] [--threads N] [--ignore-eos] [--parse-special]\n"
                    "       wasmlm-native info MODEL\n"
                    "       wasmlm-native quantize IN OUT TYPE   (f32|f16|q8_0|q4_0|q4_1|q5_0|q5_1|q2_k|q3_k|q4_k|q5_k|q6_k|q4_k_m|q5_k_m)\n"
                    "       wasmlm-native bandwidth [THREADS]    (GB/s of a streaming read, for the benchmark)\n");
    return 2;
}

static int cmd_generate(int argc, char **argv) {
    const char *model = NULL, *prompt = "";
    int n_predict = 256, ignore_eos = 0, parse_special = 0, n_threads = 1;
    unsigned long long seed = DEFAULT_SEED;
    wlm_sampler_params sp; wlm_sampler_default_params(&sp);
    wlm_ctx_params cp; wlm_ctx_default_params(&cp);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (!strcmp(a, name) && v && (i++, 1))
        if (ARG("-m") || ARG("--model")) model = v;
        else if (ARG("-p") || ARG("--prompt")) prompt = v;
        else if (ARG("-n") || ARG("--max-tokens")) n_predict = atoi(v);
        else if (ARG("--temp") || ARG("--temperature")) sp.temperature = (float)atof(v);
        else if (ARG("--top-k")) sp.top_k = (uint32_t)atoi(v);
        else if (ARG("--top-p")) sp.top_p = (float)atof(v);
        else if (ARG("--min-p")) sp.min_p = (float)atof(v);
        else if (ARG("--repeat-penalty")) sp.repeat_penalty = (float)atof(v);
        else if (ARG("--repeat-last-n")) sp.repeat_last_n = (uint32_t)atoi(v);
        else if (ARG("--seed")) seed = strtoull(v, NULL, 0);
        else if (ARG("--ctx")) cp.n_ctx = (uint32_t)atoi(v);
        else if (ARG("-t") || ARG("--threads")) n_threads = atoi(v) < 1 ? 1 : atoi(v) > 64 ? 64 : atoi(v);
        else if (ARG("--kv")) cp.kv_type = !strcmp(v, "f16") ? WLM_KV_F16 : WLM_KV_F32;
        else if (!strcmp(a, "--ignore-eos")) ignore_eos = 1;
        else if (!strcmp(a, "--parse-special")) parse_special = 1;
        else { fprintf(stderr, "error: unknown or incomplete option %s\n", a); return usage(); }
#undef ARG
    }
    if (!model) return usage();
    wlm_model *m = open_model(model);
    if (!m) return 1;
    const wlm_hparams *hp = wlm_model_hparams(m);
    wlm_ctx *c; wlm_err err;
    cp.n_threads = (uint32_t)n_threads;
    if (wlm_ctx_new(&c, m, &cp, &err)) { fprintf(stderr, "error: %s\n", err.msg); return 1; }
    pthread_t th[64]; worker_arg wargs[64];
    wlm_pool *pool = n_threads > 1 ? start_pool((uint32_t)n_threads, th, wargs) : NULL;
    wlm_ctx_set_pool(c, pool, (uint32_t)n_threads);
    uint32_t n_ctx = wlm_ctx_n_ctx(c);
    int32_t *toks = malloc(sizeof(int32_t) * (n_ctx + (uint32_t)n_predict + 8));
    uint32_t n_prompt = 0;
    if (wlm_tokenize(m, prompt, (uint32_t)strlen(prompt), (hp->add_bos ? WLM_TOK_ADD_BOS : 0) | (parse_special ? WLM_TOK_PARSE_SPECIAL : 0), toks, n_ctx, &n_prompt, &err)) {
        if (err.code == WLM_ERR_ARG && n_prompt > n_ctx)
            fprintf(stderr, "error: prompt is %u tokens, longer than the context (%u)\n", n_prompt, n_ctx);
        else fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    if (n_prompt == 0) { fprintf(stderr, "error: empty prompt and the vocabulary has no BOS token\n"); return 1; }
    double t0 = now_ms();
    if (wlm_eval(c, toks, n_prompt, &err)) { fprintf(stderr, "error: %s\n", err.msg); return 1; }
    double t1 = now_ms();
    wlm_rng rng; wlm_rng_seed(&rng, seed);
    wlm_detok dt; wlm_detok_reset(&dt);
    char out[4096];
    uint32_t n_hist = n_prompt;
    int generated = 0;
    const char *reason = "length";
    for (; generated < n_predict; ) {
        int32_t tok; float lp;
        if (wlm_sample(c, wlm_ctx_logits(c), &sp, toks, n_hist, &rng, &tok, &lp, &err)) { fprintf(stderr, "error: %s\n", err.msg); return 1; }
        generated++;
        if (wlm_token_is_eog(m, tok) && !ignore_eos) { reason = "stop"; break; }
        toks[n_hist++] = tok;
        uint32_t nb = wlm_detok_push(m, &dt, tok, out, sizeof out);
        fwrite(out, 1, nb, stdout); fflush(stdout);
        if (generated >= n_predict) break;
        wlm_status s = wlm_eval(c, &tok, 1, &err);
        if (s == WLM_ERR_CONTEXT_FULL) { reason = "context"; break; }
        if (s) { fprintf(stderr, "error: %s\n", err.msg); return 1; }
    }
    uint32_t nb = wlm_detok_flush(&dt, out, sizeof out);
    fwrite(out, 1, nb, stdout); fflush(stdout);
    double t2 = now_ms();
    fprintf(stderr, "\n[wasmlm-native] prompt %u tokens, %.1f tok/s | generated %d tokens, %.1f tok/s | finish: %s\n",
            n_prompt, n_prompt / ((t1 - t0) / 1e3 + 1e-9), generated, generated / ((t2 - t1) / 1e3 + 1e-9), reason);
    wlm_ctx_free(c);
    if (pool) { wlm_pool_free(pool); for (int t = 1; t < n_threads; t++) pthread_join(th[t], NULL); }
    wlm_model_free(m); free(toks);
    return 0;
}

static void print_value(const uint8_t *v, uint32_t type) {
    switch (type) {
    case 0: printf("%u", v[0]); break;
    case 1: printf("%d", (int8_t)v[0]); break;
    case 2: { uint16_t x; memcpy(&x, v, 2); printf("%u", x); break; }
    case 3: { int16_t x; memcpy(&x, v, 2); printf("%d", x); break; }
    case 4: { uint32_t x; memcpy(&x, v, 4); printf("%u", x); break; }
    case 5: { int32_t x; memcpy(&x, v, 4); printf("%d", x); break; }
    case 6: { float x; memcpy(&x, v, 4); printf("%g", x); break; }
    case 7: printf("%s", v[0] ? "true" : "false"); break;
    case 8: { uint64_t n; memcpy(&n, v, 8); printf("\"%.*s\"", n > 200 ? 200 : (int)n, (const char *)v + 8); if (n > 200) printf("..."); break; }
    case 9: { uint32_t et; uint64_t n; memcpy(&et, v, 4); memcpy(&n, v + 4, 8); printf("[array of %llu, type %u]", (unsigned long long)n, et); break; }
    case 10: { uint64_t x; memcpy(&x, v, 8); printf("%llu", (unsigned long long)x); break; }
    case 11: { int64_t x; memcpy(&x, v, 8); printf("%lld", (long long)x); break; }
    case 12: { double x; memcpy(&x, v, 8); printf("%g", x); break; }
    }
}

static int cmd_info(const char *path) {
    wlm_model *m = open_model(path);
    if (!m) return 1;
    for (uint32_t i = 0; i < wlm_meta_count(m); i++) {
        uint32_t kl; const char *k = wlm_meta_key(m, i, &kl); uint64_t nb;
        printf("%.*s = ", (int)kl, k); print_value(wlm_meta_value(m, i, &nb), wlm_meta_type(m, i)); printf("\n");
    }
    printf("\n%-32s %-6s %-24s %s\n", "tensor", "type", "shape", "offset");
    for (uint32_t i = 0; i < wlm_tensor_count(m); i++) {
        uint32_t nl; const char *n = wlm_tensor_name(m, i, &nl);
        char shape[64] = "", *p = shape;
        for (uint32_t d = 0; d < wlm_tensor_ndims(m, i); d++) p += sprintf(p, d ? " x %llu" : "%llu", (unsigned long long)wlm_tensor_dim(m, i, d));
        printf("%-32.*s %-6s %-24s %llu\n", (int)nl, n, wlm_type_name(wlm_tensor_type(m, i)), shape, (unsigned long long)wlm_tensor_offset(m, i));
    }
    wlm_model_free(m);
    return 0;
}

static int cmd_quantize(const char *in, const char *outp, const char *type_s) {
    static const struct { const char *name; uint32_t id; } TYPES[] = {
        {"f32", 0}, {"f16", 1}, {"q8_0", 8}, {"q4_0", 2}, {"q4_1", 3}, {"q5_0", 6}, {"q5_1", 7}, {"q2_k", 10},
        {"q3_k", 11}, {"q4_k", 12}, {"q5_k", 13}, {"q6_k", 14}, {"q4_k_m", WLM_QUANT_Q4_K_M}, {"q5_k_m", WLM_QUANT_Q5_K_M} };
    uint32_t type = 0xffffffffu;
    for (unsigned i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++) if (!strcmp(type_s, TYPES[i].name)) type = TYPES[i].id;
    if (type == 0xffffffffu) { fprintf(stderr, "error: unknown type %s (%s)\n", type_s, "f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, q4_k_m, q5_k_m"); return 2; }
    wlm_model *m = open_model(in);
    if (!m) return 1;
    wlm_err err; uint64_t size;
    if (wlm_quantize_size(m, type, &size, &err)) { fprintf(stderr, "error: %s\n", err.msg); return 1; }
    uint8_t *buf = malloc(size);
    static char report[1 << 16];
    if (!buf || wlm_quantize(m, type, buf, size, report, sizeof report, &err)) { fprintf(stderr, "error: %s\n", buf ? err.msg : "out of memory"); return 1; }
    FILE *f = fopen(outp, "wb");
    if (!f || fwrite(buf, 1, size, f) != size) { fprintf(stderr, "error: cannot write %s\n", outp); return 1; }
    fclose(f);
    fputs(report, stdout);
    printf("wrote %s (%llu bytes)\n", outp, (unsigned long long)size);
    free(buf); wlm_model_free(m);
    return 0;
}

/* Memory bandwidth of this machine: the best of several streaming reads of a
 * 1 GiB buffer by n threads (for the benchmark's bandwidth target). */
typedef struct { const uint64_t *p; size_t n; uint64_t sum; } bw_arg;
static void *bw_read(void *a) {
    bw_arg *b = a; uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= b->n; i += 4) { s0 += b->p[i]; s1 += b->p[i + 1]; s2 += b->p[i + 2]; s3 += b->p[i + 3]; }
    b->sum = s0 + s1 + s2 + s3;
    return NULL;
}

static int cmd_bandwidth(int threads) {
    size_t bytes = (size_t)1 << 30, n = bytes / 8;
    uint64_t *buf = malloc(bytes);
    if (!buf) { fprintf(stderr, "error: cannot allocate 1 GiB\n"); return 1; }
    for (size_t i = 0; i < n; i++) buf[i] = i;
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        pthread_t th[64]; bw_arg args[64];
        double t0 = now_ms();
        for (int t = 0; t < threads; t++) {
            args[t].p = buf + n / threads * t; args[t].n = n / threads;
            pthread_create(&th[t], NULL, bw_read, &args[t]);
        }
        uint64_t sum = 0;
        for (int t = 0; t < threads; t++) { pthread_join(th[t], NULL); sum += args[t].sum; }
        double gbs = bytes / ((now_ms() - t0) / 1e3) / 1e9;
        if (sum == 42) fprintf(stderr, " ");   /* keep the reads */
        if (gbs > best) best = gbs;
    }
    printf("%.2f\n", best);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage();
    if (!strcmp(argv[1], "bandwidth")) return cmd_bandwidth(argc > 2 ? atoi(argv[2]) < 1 ? 1 : atoi(argv[2]) > 64 ? 64 : atoi(argv[2]) : 1);
    if (!strcmp(argv[1], "generate")) return cmd_generate(argc - 2, argv + 2);
    if (!strcmp(argv[1], "info") && argc == 3) return cmd_info(argv[2]);
    if (!strcmp(argv[1], "quantize") && argc == 5) return cmd_quantize(argv[2], argv[3], argv[4]);
    return usage();
}
