/* The C front ends' shared parts: generate flags and usage, file and model
 * loading, and the one generation loop both run (see common.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ctype.h>
#include "common.h"

void *wlm_sys_alloc(uint64_t bytes);

static uint32_t clamp_threads(int v) {
    if (v < 1) return 1;
    return v > 64 ? 64 : (uint32_t)v;
}

double cli_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void cli_usage_generate(FILE *o, const char *prog, unsigned accept) {
    int indent = fprintf(o, "usage: %s ", prog);
    fprintf(o, "generate -m MODEL %s [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n",
            accept & CLI_PROMPTS ? "(-p PROMPT | --prompts FILE)" : "-p PROMPT");
    fprintf(o, "%*s[--typical P] [--repeat-penalty R] [--presence-penalty P] [--frequency-penalty F] [--repeat-last-n N]\n", indent, "");
    fprintf(o, "%*s[--seed S] [--ctx N] [--kv f16|f32]%s [--ignore-eos]%s%s\n", indent, "",
            accept & CLI_THREADS ? " [--threads N]" : "", accept & CLI_PARSE_SPECIAL ? " [--parse-special]" : "",
            accept & CLI_JSONL ? " [--jsonl]" : "");
}

static void defaults(cli_gen_opts *o) {
    memset(o, 0, sizeof *o);
    o->prompt = NULL;
    o->n_predict = 256;
    o->n_threads = 1;
    o->seed = CLI_DEFAULT_SEED;
    wlm_sampler_default_params(&o->sp);
    wlm_ctx_default_params(&o->cp);
}

/* the flag at argv[*i] (its value, if any, after it): 1 taken, 0 unknown
 * or missing its value, -1 a bad value (message printed) */
static int take_flag(int argc, char **argv, int *i, unsigned accept, cli_gen_opts *o) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
#define ARG(name) (!strcmp(a, name) && v && (++*i, 1))
    if (ARG("-m") || ARG("--model")) o->model = v;
    else if (ARG("-p") || ARG("--prompt")) o->prompt = v;
    else if ((accept & CLI_PROMPTS) && ARG("--prompts")) o->prompts_file = v;
    else if (ARG("-n") || ARG("--max-tokens")) o->n_predict = atoi(v);
    else if (ARG("--temp") || ARG("--temperature")) o->sp.temperature = (float)atof(v);
    else if (ARG("--top-k")) o->sp.top_k = (uint32_t)atoi(v);
    else if (ARG("--top-p")) o->sp.top_p = (float)atof(v);
    else if (ARG("--min-p")) o->sp.min_p = (float)atof(v);
    else if (ARG("--typical") || ARG("--typical-p")) o->sp.typical_p = (float)atof(v);
    else if (ARG("--repeat-penalty")) o->sp.repeat_penalty = (float)atof(v);
    else if (ARG("--presence-penalty")) o->sp.presence_penalty = (float)atof(v);
    else if (ARG("--frequency-penalty")) o->sp.frequency_penalty = (float)atof(v);
    else if (ARG("--repeat-last-n")) o->sp.repeat_last_n = (uint32_t)atoi(v);
    else if (ARG("--seed")) o->seed = strtoull(v, NULL, 0);
    else if (ARG("--ctx")) o->cp.n_ctx = (uint32_t)atoi(v);
    else if ((accept & CLI_THREADS) && (ARG("-t") || ARG("--threads"))) o->n_threads = clamp_threads(atoi(v));
    else if (ARG("--kv")) {
        if (!strcmp(v, "f16")) o->cp.kv_type = WLM_KV_F16;
        else if (!strcmp(v, "f32")) o->cp.kv_type = WLM_KV_F32;
        else {
            fprintf(stderr, "error: --kv must be f16 or f32, not %s\n", v);
            return -1;
        }
    } else if (!strcmp(a, "--ignore-eos")) o->ignore_eos = 1;
    else if ((accept & CLI_PARSE_SPECIAL) && !strcmp(a, "--parse-special")) o->parse_special = 1;
    else if ((accept & CLI_JSONL) && !strcmp(a, "--jsonl")) o->jsonl = 1;
    else return 0;
#undef ARG
    return 1;
}

int cli_parse_generate(int argc, char **argv, unsigned accept, cli_gen_opts *o) {
    defaults(o);
    for (int i = 0; i < argc; i++) {
        int r = take_flag(argc, argv, &i, accept, o);
        if (r < 0) return 2;
        if (r == 0) {
            fprintf(stderr, "error: unknown or incomplete option %s\n", argv[i]);
            return 2;
        }
    }
    if (!o->model) {
        fprintf(stderr, "error: no model (-m MODEL)\n");
        return 2;
    }
    if (accept & CLI_PROMPTS) {
        if (!o->prompt == !o->prompts_file) {
            fprintf(stderr, "error: give exactly one of -p PROMPT and --prompts FILE\n");
            return 2;
        }
    } else if (!o->prompt) {
        o->prompt = ""; /* the BOS token alone */
    }
    if (o->n_predict < 0) {
        fprintf(stderr, "error: -n must be >= 0\n");
        return 2;
    }
    o->cp.n_threads = o->n_threads;
    return -1;
}

unsigned char *cli_read_file(const char *path, uint64_t *size, int engine_mem) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "error: cannot open %s\n", path);
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        fprintf(stderr, "error: cannot seek in %s\n", path);
        fclose(f);
        return NULL;
    }
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (n < 0) {
        fprintf(stderr, "error: cannot size %s\n", path);
        fclose(f);
        return NULL;
    }
    unsigned char *buf = engine_mem ? wlm_sys_alloc((uint64_t)n + 1) : malloc((size_t)n + 1);
    if (!buf) {
        fprintf(stderr, "error: out of memory reading %s (%ld bytes)\n", path, n);
        fclose(f);
        return NULL;
    }
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "error: cannot read %s\n", path);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[n] = 0;
    *size = (uint64_t)n;
    return buf;
}

wlm_model *cli_open_model(const char *path, int inplace) {
    uint64_t size = 0;
    unsigned char *data = cli_read_file(path, &size, 1);
    if (!data) return NULL;
    wlm_model *m;
    wlm_err err;
    wlm_status s = inplace ? wlm_model_load_inplace(&m, data, size, &err) : wlm_model_load(&m, data, size, &err);
    if (s) {
        fprintf(stderr, "error: %s: %s\n", path, err.msg);
        return NULL;
    }
    return m;
}

wlm_model *cli_open_vocab(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "error: cannot open %s\n", path);
        return NULL;
    }
    unsigned char *buf = NULL;
    uint64_t have = 0, want = 1u << 20, need = 0;
    wlm_err err;
    wlm_status s;
    for (;;) {
        unsigned char *grown = realloc(buf, (size_t)want);
        if (!grown) {
            fprintf(stderr, "error: out of memory reading %s (%llu bytes)\n", path, (unsigned long long)want);
            s = WLM_ERR_NOMEM;
            break;
        }
        buf = grown;
        size_t got = fread(buf + have, 1, (size_t)(want - have), f);
        have += got;
        s = wlm_gguf_meta_bytes(buf, have, &need, &err);
        if (s != WLM_ERR_TRUNCATED || have < want) break; /* done, broken, or the file ended */
        want = need > 2 * have ? need : 2 * have;
    }
    fclose(f);
    wlm_model *m = NULL;
    if (s == WLM_OK || s == WLM_ERR_TRUNCATED) s = wlm_model_load_vocab(&m, buf, have, &err);
    if (s) {
        if (s != WLM_ERR_NOMEM) fprintf(stderr, "error: %s: %s\n", path, err.msg);
        free(buf);
        return NULL;
    }
    return m;
}

/* the prompt's tokens into toks (at most the context); 0, or 1 after the error */
static int tokenize_prompt(wlm_ctx *c, wlm_model *m, const cli_gen_opts *o, const char *prompt, int32_t *toks, uint32_t *n) {
    uint32_t n_ctx = wlm_ctx_n_ctx(c);
    int flags = (wlm_model_hparams(m)->add_bos ? WLM_TOK_ADD_BOS : 0) | (o->parse_special ? WLM_TOK_PARSE_SPECIAL : 0);
    wlm_err err;
    if (wlm_tokenize(m, prompt, (uint32_t)strlen(prompt), flags, toks, n_ctx, n, &err)) {
        if (err.code == WLM_ERR_ARG && *n > n_ctx) fprintf(stderr, "error: prompt is %u tokens, longer than the context (%u)\n", *n, n_ctx);
        else fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    if (*n == 0) {
        fprintf(stderr, "error: empty prompt and the vocabulary has no BOS token\n");
        return 1;
    }
    return 0;
}

int cli_generate(wlm_ctx *c, wlm_model *m, const cli_gen_opts *o, const char *prompt, int32_t *toks, uint32_t cap,
                 cli_emit_fn emit, void *arg, cli_gen_result *r) {
    wlm_err err;
    memset(r, 0, sizeof *r);
    r->finish = "length";
    if (tokenize_prompt(c, m, o, prompt, toks, &r->n_prompt)) return 1;
    wlm_ctx_reset(c);
    double t0 = cli_now_ms();
    if (wlm_eval(c, toks, r->n_prompt, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    double t1 = cli_now_ms();
    wlm_rng rng;
    wlm_rng_seed(&rng, o->seed);
    wlm_detok dt;
    wlm_detok_reset(&dt);
    char out[4096];
    r->n_hist = r->n_prompt;
    while (r->generated < o->n_predict) {
        int32_t tok;
        float lp;
        if (wlm_sample(c, wlm_ctx_logits(c), &o->sp, toks, r->n_hist, &rng, &tok, &lp, &err)) {
            fprintf(stderr, "error: %s\n", err.msg);
            return 1;
        }
        if (wlm_token_is_eog(m, tok) && !o->ignore_eos) {
            r->finish = "stop";
            break;
        }
        r->generated++;
        if (r->n_hist < cap) toks[r->n_hist++] = tok;
        if (emit(arg, out, wlm_detok_push(m, &dt, tok, out, sizeof out))) return 1;
        if (r->generated >= o->n_predict) break;
        wlm_status s = wlm_eval(c, &tok, 1, &err);
        if (s == WLM_ERR_CONTEXT_FULL) {
            r->finish = "context";
            break;
        }
        if (s) {
            fprintf(stderr, "error: %s\n", err.msg);
            return 1;
        }
    }
    if (emit(arg, out, wlm_detok_flush(&dt, out, sizeof out))) return 1;
    r->ms_prefill = t1 - t0;
    r->ms_decode = cli_now_ms() - t1;
    return 0;
}

/* target i's name in lower case, as the command lines spell it */
static void target_name(uint32_t id, char *out, size_t cap) {
    const char *n = wlm_quantize_target_name(id);
    size_t i = 0;
    for (; n[i] && i + 1 < cap; i++) out[i] = (char)tolower((unsigned char)n[i]);
    out[i] = 0;
}

uint32_t cli_quant_type(const char *name) {
    char n[32];
    for (uint32_t i = 0, id; (id = wlm_quantize_target(i)) != 0xffffffffu; i++) {
        target_name(id, n, sizeof n);
        if (!strcmp(name, n)) return id;
    }
    return 0xffffffffu;
}

const char *cli_quant_types(const char *sep) {
    static char list[512];
    char n[32];
    size_t len = 0;
    list[0] = 0;
    for (uint32_t i = 0, id; (id = wlm_quantize_target(i)) != 0xffffffffu; i++) {
        target_name(id, n, sizeof n);
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? sep : "", n);
        if (len >= sizeof list) break;
    }
    return list;
}
