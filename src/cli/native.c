/* Native front end: the same engine as the wasm build, for comparison,
 * sanitizers and the native baseline. Flags match `wasmlm` (web/cli/cli.js):
 *   wasmlm-native generate -m PATH -p PROMPT [-n N] [--temp T] [--top-k K]
 *       [--top-p P] [--min-p P] [--repeat-penalty R] [--repeat-last-n N]
 *       [--seed S] [--ctx N] [--kv f16|f32] [--threads N] [--ignore-eos] [--parse-special]
 *   wasmlm-native info PATH
 *   wasmlm-native quantize IN OUT TYPE      (the library's targets: wlm_quantize_target)
 *   wasmlm-native bandwidth [THREADS]
 * Generated text goes to stdout as it is produced; stats go to stderr. The
 * flags, file loading and generation loop are src/cli/common.c's. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include "common.h"

/* the generate flags this front end takes (common.h) */
#define NATIVE_FLAGS (CLI_THREADS | CLI_PARSE_SPECIAL)

typedef struct {
    wlm_pool *pool;
    uint32_t tid;
} worker_arg;
static void *worker_main(void *a) {
    worker_arg *w = a;
    wlm_worker_loop(w->pool, w->tid);
    return NULL;
}

/* n - 1 pthreads serving a pool (the calling thread is the n-th) */
static wlm_pool *start_pool(uint32_t n, pthread_t *th, worker_arg *args) {
    wlm_pool *p = wlm_pool_new(n);
    for (uint32_t t = 1; p && t < n; t++) {
        args[t].pool = p;
        args[t].tid = t;
        pthread_create(&th[t], NULL, worker_main, &args[t]);
    }
    return p;
}

static int usage(void) {
    cli_usage_generate(stderr, "wasmlm-native", NATIVE_FLAGS);
    fprintf(stderr, "       wasmlm-native info MODEL\n"
                    "       wasmlm-native quantize IN OUT TYPE   (%s)\n"
                    "       wasmlm-native bandwidth [THREADS]    (GB/s of a streaming read, for the benchmark)\n",
            cli_quant_types("|"));
    return 2;
}

static int emit_stdout(void *arg, const char *s, uint32_t n) {
    fwrite(s, 1, n, stdout);
    fflush(stdout);
    return 0;
}

static int cmd_generate(int argc, char **argv) {
    cli_gen_opts o;
    int rc = cli_parse_generate(argc, argv, NATIVE_FLAGS, &o);
    if (rc >= 0) return rc == 2 ? usage() : rc;
    wlm_model *m = cli_open_model(o.model, 1);
    if (!m) return 1;
    wlm_ctx *c;
    wlm_err err;
    if (wlm_ctx_new(&c, m, &o.cp, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    pthread_t th[64];
    worker_arg wargs[64];
    wlm_pool *pool = o.n_threads > 1 ? start_pool(o.n_threads, th, wargs) : NULL;
    wlm_ctx_set_pool(c, pool, o.n_threads);
    uint32_t cap = wlm_ctx_n_ctx(c) + (uint32_t)o.n_predict + 8;
    int32_t *toks = malloc(sizeof(int32_t) * cap);
    cli_gen_result r;
    if (!toks || cli_generate(c, m, &o, o.prompt, toks, cap, emit_stdout, NULL, &r)) return 1;
    fprintf(stderr, "\n[wasmlm-native] prompt %u tokens, %.1f tok/s | generated %d tokens, %.1f tok/s | finish: %s\n",
            r.n_prompt, r.n_prompt / (r.ms_prefill / 1e3 + 1e-9), r.generated, r.generated / (r.ms_decode / 1e3 + 1e-9), r.finish);
    wlm_ctx_free(c);
    if (pool) {
        wlm_pool_free(pool);
        for (uint32_t t = 1; t < o.n_threads; t++) pthread_join(th[t], NULL);
    }
    wlm_model_free(m);
    free(toks);
    return 0;
}

static void print_value(const uint8_t *v, uint32_t type) {
    switch (type) {
    case 0: printf("%u", v[0]); break;
    case 1: printf("%d", (int8_t)v[0]); break;
    case 2: {
        uint16_t x;
        memcpy(&x, v, 2);
        printf("%u", x);
        break;
    }
    case 3: {
        int16_t x;
        memcpy(&x, v, 2);
        printf("%d", x);
        break;
    }
    case 4: {
        uint32_t x;
        memcpy(&x, v, 4);
        printf("%u", x);
        break;
    }
    case 5: {
        int32_t x;
        memcpy(&x, v, 4);
        printf("%d", x);
        break;
    }
    case 6: {
        float x;
        memcpy(&x, v, 4);
        printf("%g", x);
        break;
    }
    case 7: printf("%s", v[0] ? "true" : "false"); break;
    case 8: {
        uint64_t n;
        memcpy(&n, v, 8);
        printf("\"%.*s\"", n > 200 ? 200 : (int)n, (const char *)v + 8);
        if (n > 200) printf("...");
        break;
    }
    case 9: {
        uint32_t et;
        uint64_t n;
        memcpy(&et, v, 4);
        memcpy(&n, v + 4, 8);
        printf("[array of %llu, type %u]", (unsigned long long)n, et);
        break;
    }
    case 10: {
        uint64_t x;
        memcpy(&x, v, 8);
        printf("%llu", (unsigned long long)x);
        break;
    }
    case 11: {
        int64_t x;
        memcpy(&x, v, 8);
        printf("%lld", (long long)x);
        break;
    }
    case 12: {
        double x;
        memcpy(&x, v, 8);
        printf("%g", x);
        break;
    }
    }
}

static int cmd_info(const char *path) {
    wlm_model *m = cli_open_model(path, 1);
    if (!m) return 1;
    for (uint32_t i = 0; i < wlm_meta_count(m); i++) {
        uint32_t kl;
        const char *k = wlm_meta_key(m, i, &kl);
        uint64_t nb;
        printf("%.*s = ", (int)kl, k);
        print_value(wlm_meta_value(m, i, &nb), wlm_meta_type(m, i));
        printf("\n");
    }
    printf("\n%-32s %-6s %-24s %s\n", "tensor", "type", "shape", "offset");
    for (uint32_t i = 0; i < wlm_tensor_count(m); i++) {
        uint32_t nl;
        const char *n = wlm_tensor_name(m, i, &nl);
        char shape[64] = "", *p = shape;
        for (uint32_t d = 0; d < wlm_tensor_ndims(m, i); d++) p += sprintf(p, d ? " x %llu" : "%llu", (unsigned long long)wlm_tensor_dim(m, i, d));
        printf("%-32.*s %-6s %-24s %llu\n", (int)nl, n, wlm_type_name(wlm_tensor_type(m, i)), shape, (unsigned long long)wlm_tensor_offset(m, i));
    }
    wlm_model_free(m);
    return 0;
}

static int cmd_quantize(const char *in, const char *outp, const char *type_s) {
    uint32_t type = cli_quant_type(type_s);
    if (type == 0xffffffffu) {
        fprintf(stderr, "error: unknown type %s (%s)\n", type_s, cli_quant_types(", "));
        return 2;
    }
    wlm_model *m = cli_open_model(in, 1);
    if (!m) return 1;
    wlm_err err;
    uint64_t size;
    if (wlm_quantize_size(m, type, &size, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    uint8_t *buf = malloc(size);
    static char report[1 << 16];
    if (!buf || wlm_quantize(m, type, buf, size, report, sizeof report, &err)) {
        fprintf(stderr, "error: %s\n", buf ? err.msg : "out of memory");
        return 1;
    }
    FILE *f = fopen(outp, "wb");
    if (!f || fwrite(buf, 1, size, f) != size) {
        fprintf(stderr, "error: cannot write %s\n", outp);
        return 1;
    }
    fclose(f);
    fputs(report, stdout);
    printf("wrote %s (%llu bytes)\n", outp, (unsigned long long)size);
    free(buf);
    wlm_model_free(m);
    return 0;
}

/* Memory bandwidth of this machine: the best of several streaming reads of a
 * 1 GiB buffer by n threads (for the benchmark's bandwidth target). */
typedef struct {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} bw_arg;
static void *bw_read(void *a) {
    bw_arg *b = a;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= b->n; i += 4) {
        s0 += b->p[i];
        s1 += b->p[i + 1];
        s2 += b->p[i + 2];
        s3 += b->p[i + 3];
    }
    b->sum = s0 + s1 + s2 + s3;
    return NULL;
}

static int cmd_bandwidth(int threads) {
    size_t bytes = (size_t)1 << 30, n = bytes / 8;
    uint64_t *buf = malloc(bytes);
    if (!buf) {
        fprintf(stderr, "error: cannot allocate 1 GiB\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) buf[i] = i;
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        pthread_t th[64];
        bw_arg args[64];
        double t0 = cli_now_ms();
        for (int t = 0; t < threads; t++) {
            args[t].p = buf + n / threads * t;
            args[t].n = n / threads;
            pthread_create(&th[t], NULL, bw_read, &args[t]);
        }
        uint64_t sum = 0;
        for (int t = 0; t < threads; t++) {
            pthread_join(th[t], NULL);
            sum += args[t].sum;
        }
        double gbs = bytes / ((cli_now_ms() - t0) / 1e3) / 1e9;
        if (sum == 42) fprintf(stderr, " "); /* keep the reads */
        if (gbs > best) best = gbs;
    }
    printf("%.2f\n", best);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage();
    if (!strcmp(argv[1], "bandwidth")) return cmd_bandwidth(argc > 2 ? atoi(argv[2]) < 1 ? 1 : atoi(argv[2]) > 64 ? 64
                                                                                                                  : atoi(argv[2])
                                                                     : 1);
    if (!strcmp(argv[1], "generate")) return cmd_generate(argc - 2, argv + 2);
    if (!strcmp(argv[1], "info") && argc == 3) return cmd_info(argv[2]);
    if (!strcmp(argv[1], "quantize") && argc == 5) return cmd_quantize(argv[2], argv[3], argv[4]);
    return usage();
}
