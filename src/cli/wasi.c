/* WASI command front end: the same engine as wasm/wasmlm.wasm, built as a
 * plain wasm32-wasi program (wasm/wasmlm-cli.wasm) for offline batch
 * generation under any WASI runtime (node:wasi via web/wasi-cli.js,
 * wasmtime, ...). Single-threaded. Flags match `wasmlm` (web/cli.js):
 *
 *   wasmlm-cli generate -m MODEL (-p PROMPT | --prompts FILE) [-n N] [--temp T]
 *       [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R]
 *       [--repeat-last-n N] [--seed S] [--ctx N] [--kv f16|f32] [--ignore-eos] [--jsonl]
 *   wasmlm-cli info MODEL
 *   wasmlm-cli tokenize -m MODEL -p TEXT
 *
 * --prompts FILE: one prompt per line (empty lines skipped); each is
 * generated from a fresh context with the same seed. Plain output is each
 * continuation followed by a newline; --jsonl prints one JSON object per
 * prompt ({"prompt","text","tokens","finish"}). Stats go to stderr.
 * Every failure prints "error: ..." naming the problem and exits non-zero. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../wlm.h"

#define DEFAULT_SEED 0xC0FFEEull

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

extern void *wlm_sys_alloc(uint64_t);

/* Reads a whole file; the model bytes must live in engine memory. */
static unsigned char *read_file(const char *path, uint64_t *size, int engine_mem) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "error: cannot open %s\n", path); return NULL; }
    if (fseek(f, 0, SEEK_END) != 0) { fprintf(stderr, "error: cannot seek in %s\n", path); fclose(f); return NULL; }
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (n < 0) { fprintf(stderr, "error: cannot size %s\n", path); fclose(f); return NULL; }
    unsigned char *buf = engine_mem ? wlm_sys_alloc((uint64_t)n + 1) : malloc((size_t)n + 1);
    if (!buf) { fprintf(stderr, "error: out of memory reading %s (%ld bytes)\n", path, n); fclose(f); return NULL; }
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) { fprintf(stderr, "error: cannot read %s\n", path); fclose(f); return NULL; }
    fclose(f);
    buf[n] = 0;
    *size = (uint64_t)n;
    return buf;
}

static wlm_model *open_model(const char *path) {
    uint64_t size = 0;
    unsigned char *data = read_file(path, &size, 1);
    if (!data) return NULL;
    wlm_model *m;
    wlm_err err;
    if (wlm_model_load(&m, data, size, &err)) { fprintf(stderr, "error: %s: %s\n", path, err.msg); return NULL; }
    return m;
}

static int usage(void) {
    fprintf(stderr,
        "usage: wasmlm-cli generate -m MODEL (-p PROMPT | --prompts FILE) [-n N] [--temp T] [--top-k K] [--top-p P]\n"
        "                  [--min-p P] [--repeat-penalty R] [--repeat-last-n N] [--seed S] [--ctx N] [--kv f16|f32]\n"
        "                  [--ignore-eos] [--jsonl]\n"
        "       wasmlm-cli info MODEL\n"
        "       wasmlm-cli tokenize -m MODEL -p TEXT\n");
    return 2;
}

/* JSON string body (quotes added by the caller) */
static void json_str(FILE *o, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(o, "\\%c", c);
        else if (c == '\n') fputs("\\n", o);
        else if (c == '\r') fputs("\\r", o);
        else if (c == '\t') fputs("\\t", o);
        else if (c < 0x20) fprintf(o, "\\u%04x", c);
        else fputc(c, o);
    }
}

typedef struct {
    wlm_model *m;
    wlm_ctx *c;
    wlm_sampler_params sp;
    unsigned long long seed;
    int n_predict, ignore_eos, jsonl;
    int32_t *toks;
    uint32_t cap;
    char *text;            /* generated text of one prompt (for --jsonl) */
    size_t text_len, text_cap;
} gen_state;

static int append_text(gen_state *g, const char *s, uint32_t n) {
    if (g->text_len + n + 1 > g->text_cap) {
        size_t nc = (g->text_len + n + 1) * 2;
        char *t = realloc(g->text, nc);
        if (!t) { fprintf(stderr, "error: out of memory\n"); return 1; }
        g->text = t; g->text_cap = nc;
    }
    memcpy(g->text + g->text_len, s, n);
    g->text_len += n;
    return 0;
}

static int emit(gen_state *g, const char *s, uint32_t n) {
    if (g->jsonl) return append_text(g, s, n);
    fwrite(s, 1, n, stdout);
    fflush(stdout);
    return 0;
}

/* One prompt from an empty context. */
static int generate_one(gen_state *g, const char *prompt, double *ms_prefill, double *ms_decode, uint32_t *n_prompt_out, int *n_gen_out) {
    const wlm_hparams *hp = wlm_model_hparams(g->m);
    wlm_err err;
    uint32_t n_prompt = 0, n_ctx = wlm_ctx_n_ctx(g->c);
    if (wlm_tokenize(g->m, prompt, (uint32_t)strlen(prompt), hp->add_bos ? WLM_TOK_ADD_BOS : 0, g->toks, n_ctx, &n_prompt, &err)) {
        if (err.code == WLM_ERR_ARG && n_prompt > n_ctx) fprintf(stderr, "error: prompt is %u tokens, longer than the context (%u)\n", n_prompt, n_ctx);
        else fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    if (n_prompt == 0) { fprintf(stderr, "error: empty prompt and the vocabulary has no BOS token\n"); return 1; }
    wlm_ctx_reset(g->c);
    double t0 = now_ms();
    if (wlm_eval(g->c, g->toks, n_prompt, &err)) { fprintf(stderr, "error: %s\n", err.msg); return 1; }
    double t1 = now_ms();
    wlm_rng rng;
    wlm_rng_seed(&rng, g->seed);
    wlm_detok dt;
    wlm_detok_reset(&dt);
    char out[4096];
    uint32_t n_hist = n_prompt;
    int generated = 0;
    const char *reason = "length";
    g->text_len = 0;
    while (generated < g->n_predict) {
        int32_t tok;
        float lp;
        if (wlm_sample(g->c, wlm_ctx_logits(g->c), &g->sp, g->toks, n_hist, &rng, &tok, &lp, &err)) { fprintf(stderr, "error: %s\n", err.msg); return 1; }
        if (wlm_token_is_eog(g->m, tok) && !g->ignore_eos) { reason = "stop"; break; }
        generated++;
        if (n_hist < g->cap) g->toks[n_hist++] = tok;
        uint32_t nb = wlm_detok_push(g->m, &dt, tok, out, sizeof out);
        if (emit(g, out, nb)) return 1;
        if (generated >= g->n_predict) break;
        wlm_status s = wlm_eval(g->c, &tok, 1, &err);
        if (s == WLM_ERR_CONTEXT_FULL) { reason = "context"; break; }
        if (s) { fprintf(stderr, "error: %s\n", err.msg); return 1; }
    }
    uint32_t nb = wlm_detok_flush(&dt, out, sizeof out);
    if (emit(g, out, nb)) return 1;
    double t2 = now_ms();
    if (g->jsonl) {
        fputs("{\"prompt\":\"", stdout); json_str(stdout, prompt, strlen(prompt));
        fputs("\",\"text\":\"", stdout); json_str(stdout, g->text ? g->text : "", g->text_len);
        printf("\",\"tokens\":[");
        for (uint32_t i = n_prompt; i < n_hist; i++) printf(i > n_prompt ? ",%d" : "%d", g->toks[i]);
        printf("],\"finish\":\"%s\"}\n", reason);
    } else {
        fputc('\n', stdout);
    }
    fflush(stdout);
    *ms_prefill += t1 - t0;
    *ms_decode += t2 - t1;
    *n_prompt_out += n_prompt;
    *n_gen_out += generated;
    return 0;
}

static int cmd_generate(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *prompts_file = NULL;
    gen_state g;
    memset(&g, 0, sizeof g);
    g.n_predict = 256;
    g.seed = DEFAULT_SEED;
    wlm_sampler_default_params(&g.sp);
    wlm_ctx_params cp;
    wlm_ctx_default_params(&cp);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (!strcmp(a, name) && v && (i++, 1))
        if (ARG("-m") || ARG("--model")) model = v;
        else if (ARG("-p") || ARG("--prompt")) prompt = v;
        else if (ARG("--prompts")) prompts_file = v;
        else if (ARG("-n") || ARG("--max-tokens")) g.n_predict = atoi(v);
        else if (ARG("--temp") || ARG("--temperature")) g.sp.temperature = (float)atof(v);
        else if (ARG("--top-k")) g.sp.top_k = (uint32_t)atoi(v);
        else if (ARG("--top-p")) g.sp.top_p = (float)atof(v);
        else if (ARG("--min-p")) g.sp.min_p = (float)atof(v);
        else if (ARG("--repeat-penalty")) g.sp.repeat_penalty = (float)atof(v);
        else if (ARG("--repeat-last-n")) g.sp.repeat_last_n = (uint32_t)atoi(v);
        else if (ARG("--seed")) g.seed = strtoull(v, NULL, 0);
        else if (ARG("--ctx")) cp.n_ctx = (uint32_t)atoi(v);
        else if (ARG("--kv")) {
            if (!strcmp(v, "f16")) cp.kv_type = WLM_KV_F16;
            else if (!strcmp(v, "f32")) cp.kv_type = WLM_KV_F32;
            else { fprintf(stderr, "error: --kv must be f16 or f32, not %s\n", v); return 2; }
        }
        else if (!strcmp(a, "--ignore-eos")) g.ignore_eos = 1;
        else if (!strcmp(a, "--jsonl")) g.jsonl = 1;
        else { fprintf(stderr, "error: unknown or incomplete option %s\n", a); return usage(); }
#undef ARG
    }
    if (!model) { fprintf(stderr, "error: no model (-m MODEL)\n"); return usage(); }
    if (!prompt == !prompts_file) { fprintf(stderr, "error: give exactly one of -p PROMPT and --prompts FILE\n"); return usage(); }
    if (g.n_predict < 0) { fprintf(stderr, "error: -n must be >= 0\n"); return 2; }
    char *batch = NULL;
    uint64_t batch_len = 0;
    if (prompts_file && !(batch = (char *)read_file(prompts_file, &batch_len, 0))) return 1;
    g.m = open_model(model);
    if (!g.m) return 1;
    wlm_err err;
    cp.n_threads = 1;
    if (wlm_ctx_new(&g.c, g.m, &cp, &err)) { fprintf(stderr, "error: %s\n", err.msg); return 1; }
    g.cap = wlm_ctx_n_ctx(g.c) + (uint32_t)g.n_predict + 8;
    g.toks = malloc(sizeof(int32_t) * g.cap);
    if (!g.toks) { fprintf(stderr, "error: out of memory\n"); return 1; }
    double ms_prefill = 0, ms_decode = 0;
    uint32_t n_prompt = 0;
    int n_gen = 0, n_prompts = 0, rc = 0;
    if (prompt) {
        rc = generate_one(&g, prompt, &ms_prefill, &ms_decode, &n_prompt, &n_gen);
        n_prompts = 1;
    } else {
        for (char *line = batch; line && *line && !rc; ) {
            char *nl = strchr(line, '\n');
            if (nl) *nl = 0;
            size_t len = strlen(line);
            if (len && line[len - 1] == '\r') line[--len] = 0;
            if (len) { rc = generate_one(&g, line, &ms_prefill, &ms_decode, &n_prompt, &n_gen); n_prompts++; }
            line = nl ? nl + 1 : NULL;
        }
    }
    if (!rc) {
        fprintf(stderr, "[wasmlm-cli] %d prompt%s, %u prompt tokens at %.1f tok/s, %d generated at %.1f tok/s\n",
                n_prompts, n_prompts == 1 ? "" : "s", n_prompt, n_prompt / (ms_prefill / 1e3 + 1e-9), n_gen, n_gen / (ms_decode / 1e3 + 1e-9));
    }
    wlm_ctx_free(g.c);
    wlm_model_free(g.m);
    free(g.toks);
    free(g.text);
    free(batch);
    return rc;
}

static int cmd_info(const char *path) {
    wlm_model *m = open_model(path);
    if (!m) return 1;
    const wlm_hparams *hp = wlm_model_hparams(m);
    printf("vocab %u, context %u, embedding %u, layers %u, heads %u (kv %u), head dim %u, ffn %u\n",
           hp->n_vocab, hp->n_ctx_train, hp->n_embd, hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_ff);
    printf("%u metadata keys, %u tensors\n", wlm_meta_count(m), wlm_tensor_count(m));
    for (uint32_t i = 0; i < wlm_tensor_count(m); i++) {
        uint32_t nl;
        const char *n = wlm_tensor_name(m, i, &nl);
        printf("%-32.*s %-6s", (int)nl, n, wlm_type_name(wlm_tensor_type(m, i)));
        for (uint32_t d = 0; d < wlm_tensor_ndims(m, i); d++) printf(d ? " x %llu" : " %llu", (unsigned long long)wlm_tensor_dim(m, i, d));
        printf("\n");
    }
    wlm_model_free(m);
    return 0;
}

static int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL;
    for (int i = 0; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-m")) model = argv[i + 1];
        else if (!strcmp(argv[i], "-p")) text = argv[i + 1];
        else { fprintf(stderr, "error: unknown option %s\n", argv[i]); return usage(); }
    }
    if (!model || !text) return usage();
    wlm_model *m = open_model(model);
    if (!m) return 1;
    uint32_t cap = (uint32_t)strlen(text) + 8, n = 0;
    int32_t *ids = malloc(sizeof(int32_t) * cap);
    wlm_err err;
    if (!ids || wlm_tokenize(m, text, (uint32_t)strlen(text), wlm_model_hparams(m)->add_bos ? WLM_TOK_ADD_BOS : 0, ids, cap, &n, &err)) {
        fprintf(stderr, "error: %s\n", ids ? err.msg : "out of memory");
        return 1;
    }
    for (uint32_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    free(ids);
    wlm_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage();
    if (!strcmp(argv[1], "generate")) return cmd_generate(argc - 2, argv + 2);
    if (!strcmp(argv[1], "info") && argc == 3) return cmd_info(argv[2]);
    if (!strcmp(argv[1], "tokenize")) return cmd_tokenize(argc - 2, argv + 2);
    return usage();
}
