/* WASI command front end: the same engine as wasm/wasmlm.wasm, built as a
 * plain wasm32-wasi program (wasm/wasmlm-cli.wasm) for offline batch
 * generation under any WASI runtime (node:wasi via web/cli/wasi-cli.js,
 * wasmtime, ...). Single-threaded. Flags match `wasmlm` (web/cli/cli.js):
 *
 *   wasmlm-cli generate -m MODEL (-p PROMPT | --prompts FILE) [-n N] [--temp T]
 *       [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R]
 *       [--repeat-last-n N] [--seed S] [--ctx N] [--kv f16|f32] [--ignore-eos] [--jsonl]
 *   wasmlm-cli info MODEL
 *   wasmlm-cli tokenize -m MODEL -p TEXT   (MODEL: a model or a vocabulary-only
 *                                         GGUF; only its metadata is read)
 *
 * --prompts FILE: one prompt per line (empty lines skipped); each is
 * generated from a fresh context with the same seed. Plain output is each
 * continuation followed by a newline; --jsonl prints one JSON object per
 * prompt ({"prompt","text","tokens","finish"}). Stats go to stderr.
 * Every failure prints "error: ..." naming the problem and exits non-zero.
 * The flags, file loading and generation loop are src/cli/common.c's. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"

/* the generate flags this front end takes (common.h): one thread */
#define WASI_FLAGS (CLI_PROMPTS | CLI_JSONL)

static int usage(void) {
    cli_usage_generate(stderr, "wasmlm-cli", WASI_FLAGS);
    fprintf(stderr,
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
    cli_gen_opts o;
    int32_t *toks;
    uint32_t cap;
    char *text; /* generated text of one prompt (for --jsonl) */
    size_t text_len, text_cap;
} gen_state;

static int append_text(gen_state *g, const char *s, uint32_t n) {
    if (g->text_len + n + 1 > g->text_cap) {
        size_t nc = (g->text_len + n + 1) * 2;
        char *t = realloc(g->text, nc);
        if (!t) {
            fprintf(stderr, "error: out of memory\n");
            return 1;
        }
        g->text = t;
        g->text_cap = nc;
    }
    memcpy(g->text + g->text_len, s, n);
    g->text_len += n;
    return 0;
}

/* plain output streams the text; --jsonl keeps it for the prompt's line */
static int emit(void *arg, const char *s, uint32_t n) {
    gen_state *g = arg;
    if (g->o.jsonl) return append_text(g, s, n);
    fwrite(s, 1, n, stdout);
    fflush(stdout);
    return 0;
}

static void print_jsonl(const gen_state *g, const char *prompt, const cli_gen_result *r) {
    fputs("{\"prompt\":\"", stdout);
    json_str(stdout, prompt, strlen(prompt));
    fputs("\",\"text\":\"", stdout);
    json_str(stdout, g->text ? g->text : "", g->text_len);
    printf("\",\"tokens\":[");
    for (uint32_t i = r->n_prompt; i < r->n_hist; i++) printf(i > r->n_prompt ? ",%d" : "%d", g->toks[i]);
    printf("],\"finish\":\"%s\"}\n", r->finish);
}

/* One prompt from an empty context, its stats added to *sum. */
static int generate_one(gen_state *g, const char *prompt, cli_gen_result *sum) {
    cli_gen_result r;
    g->text_len = 0;
    if (cli_generate(g->c, g->m, &g->o, prompt, g->toks, g->cap, emit, g, &r)) return 1;
    if (g->o.jsonl) print_jsonl(g, prompt, &r);
    else fputc('\n', stdout);
    fflush(stdout);
    sum->ms_prefill += r.ms_prefill;
    sum->ms_decode += r.ms_decode;
    sum->n_prompt += r.n_prompt;
    sum->generated += r.generated;
    return 0;
}

static int cmd_generate(int argc, char **argv) {
    gen_state g;
    memset(&g, 0, sizeof g);
    int rc = cli_parse_generate(argc, argv, WASI_FLAGS, &g.o);
    if (rc >= 0) return rc == 2 ? usage() : rc;
    char *batch = NULL;
    uint64_t batch_len = 0;
    if (g.o.prompts_file && !(batch = (char *)cli_read_file(g.o.prompts_file, &batch_len, 0))) return 1;
    g.m = cli_open_model(g.o.model, 0);
    if (!g.m) return 1;
    wlm_err err;
    if (wlm_ctx_new(&g.c, g.m, &g.o.cp, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    g.cap = wlm_ctx_n_ctx(g.c) + (uint32_t)g.o.n_predict + 8;
    g.toks = malloc(sizeof(int32_t) * g.cap);
    if (!g.toks) {
        fprintf(stderr, "error: out of memory\n");
        return 1;
    }
    cli_gen_result sum;
    memset(&sum, 0, sizeof sum);
    int n_prompts = 0;
    rc = 0;
    if (g.o.prompt) {
        rc = generate_one(&g, g.o.prompt, &sum);
        n_prompts = 1;
    } else {
        for (char *line = batch; line && *line && !rc;) {
            char *nl = strchr(line, '\n');
            if (nl) *nl = 0;
            size_t len = strlen(line);
            if (len && line[len - 1] == '\r') line[--len] = 0;
            if (len) {
                rc = generate_one(&g, line, &sum);
                n_prompts++;
            }
            line = nl ? nl + 1 : NULL;
        }
    }
    if (!rc) {
        fprintf(stderr, "[wasmlm-cli] %d prompt%s, %u prompt tokens at %.1f tok/s, %d generated at %.1f tok/s\n",
                n_prompts, n_prompts == 1 ? "" : "s", sum.n_prompt, sum.n_prompt / (sum.ms_prefill / 1e3 + 1e-9),
                sum.generated, sum.generated / (sum.ms_decode / 1e3 + 1e-9));
    }
    wlm_ctx_free(g.c);
    wlm_model_free(g.m);
    free(g.toks);
    free(g.text);
    free(batch);
    return rc;
}

static int cmd_info(const char *path) {
    wlm_model *m = cli_open_model(path, 0);
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
        else {
            fprintf(stderr, "error: unknown option %s\n", argv[i]);
            return usage();
        }
    }
    if (!model || !text) return usage();
    wlm_model *m = cli_open_vocab(model); /* a model or a vocabulary-only file: the metadata is enough */
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
