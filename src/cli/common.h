/* What the two C front ends (native.c, wasi.c) share: the generate flags
 * and their usage text, loading files and models, and the one generation
 * loop (prompt, sampling with the penalty window over the whole history,
 * the end-of-generation rule, the context-full stop). */
#ifndef WLM_CLI_COMMON_H
#define WLM_CLI_COMMON_H

#include <stdio.h>
#include "../wlm.h"

#define CLI_DEFAULT_SEED 0xC0FFEEull

/* flags only some front ends take */
enum { CLI_THREADS = 1,
       CLI_PARSE_SPECIAL = 2,
       CLI_PROMPTS = 4,
       CLI_JSONL = 8 };

typedef struct cli_gen_opts {
    const char *model, *prompt, *prompts_file;
    int n_predict, ignore_eos, parse_special, jsonl;
    uint32_t n_threads;
    unsigned long long seed;
    wlm_sampler_params sp; /* the library's defaults, then the flags */
    wlm_ctx_params cp;
} cli_gen_opts;

/* The generate command's usage lines for program `prog` with the flags in
 * `accept`. */
void cli_usage_generate(FILE *o, const char *prog, unsigned accept);
/* Parses the generate flags in `accept` into o. Returns -1 when they are
 * fine, else the exit code after printing the error (2: bad usage, in
 * which case the caller prints its usage). */
int cli_parse_generate(int argc, char **argv, unsigned accept, cli_gen_opts *o);

double cli_now_ms(void);
/* A whole file, NUL-terminated: in engine memory (wlm_sys_alloc: model
 * bytes must live there) or the C heap. Prints the error and returns NULL. */
unsigned char *cli_read_file(const char *path, uint64_t *size, int engine_mem);
/* Loads a model file (inplace: Q4_0 matrices repacked in the file's
 * buffer, as the native build does). Prints the error and returns NULL. */
wlm_model *cli_open_model(const char *path, int inplace);
/* Loads only the vocabulary of a GGUF file (a whole model or a
 * vocabulary-only file, for tokenize): reads its header and metadata and no
 * further (wlm_gguf_meta_bytes). Prints the error and returns NULL. */
wlm_model *cli_open_vocab(const char *path);

/* receives the generated text as it is produced */
typedef int (*cli_emit_fn)(void *arg, const char *s, uint32_t n);

typedef struct cli_gen_result {
    uint32_t n_prompt, n_hist; /* tokens: the prompt, and toks[n_prompt, n_hist) generated */
    int generated;             /* tokens generated (an end-of-generation token is not one) */
    const char *finish;        /* "length", "stop" or "context" */
    double ms_prefill, ms_decode;
} cli_gen_result;

/* One prompt from an empty context: tokenize, evaluate, then sample and
 * evaluate token by token until n_predict tokens, an end-of-generation
 * token (unless ignore_eos) or a full context. toks holds cap ids (the
 * history the repeat penalty reads). Returns 0, or 1 after printing the
 * error. */
int cli_generate(wlm_ctx *c, wlm_model *m, const cli_gen_opts *o, const char *prompt, int32_t *toks, uint32_t cap,
                 cli_emit_fn emit, void *arg, cli_gen_result *r);

/* The library's quantize targets by their lower-case names ("q4_k_m"):
 * the id of one (0xffffffff when unknown), and all of them joined by sep
 * (a static buffer). */
uint32_t cli_quant_type(const char *name);
const char *cli_quant_types(const char *sep);

#endif
