/* Writes web/worker/abi.js: the wasm32 layout of every C struct the engine's
 * JS reads or writes, with named readers and writers, so that no struct
 * offset is kept by hand in JS. Built for wasm32-wasi and run under Node
 * (`make abi`), so the offsets are the wasm module's own. It fails when the
 * fields listed here no longer cover a struct (a field added in src/wlm.h
 * must be listed, or JS would not see it).
 *
 * The memory64 (wasm64) builds read the same table: none of these structs
 * holds a pointer or a size_t (the scratch's out-pointer slot is 8 bytes in
 * both). `gen-abi asserts` prints every offset and size as a C static
 * assertion, and `make abi-check64` compiles the structs below for wasm64
 * against them (WLM_ABI_CHECK: this file without stdio), so a struct whose
 * wasm64 layout differs fails the build instead of misleading JS. */
#include <stddef.h>
#include <stdint.h>
#include "wlm.h"

/* The engine's scratch block (one per engine): the out-parameters of its
 * calls and the small structs they take. Defined here so that JS gets its
 * layout from the same table as the C structs. */
typedef struct wlm_js_scratch {
    wlm_err err;
    uint64_t ptr;      /* an out pointer (wlm_model *, wlm_ctx *): a wasm32 one fills its low 4 bytes, a wasm64 one all 8 */
    uint32_t len;      /* a length out (metadata keys, tensor names) */
    uint32_t n_out;    /* tokens written by wlm_tokenize */
    int32_t token;     /* the token wlm_sample / wlm_spec_accept picked */
    float logprob;     /* its log-probability */
    int32_t accepted;  /* wlm_spec_accept: 1 when the draft token was kept */
    uint64_t u64;      /* a size out (metadata values, quantized file) */
    wlm_ctx_params ctx_params;
    wlm_sampler_params sampler;
    wlm_rng rng;       /* the single stream of a plain generation */
    wlm_detok detok;   /* its detokenizer */
    wlm_detok detok2;  /* detokenize()'s own */
    wlm_state_info state_info; /* what wlm_ctx_state_load read */
} wlm_js_scratch;

/* One generation stream's block: its rng and detokenizer. */
typedef struct wlm_js_stream {
    wlm_rng rng;
    wlm_detok detok;
} wlm_js_stream;

#ifdef WLM_ABI_CHECK
/* the wasm32 offsets and sizes printed by `gen-abi asserts` */
#include WLM_ABI_CHECK
#else
#include <stdio.h>
#include <string.h>

typedef struct field {
    const char *c_name;
    size_t offset, size;
    const char *type; /* u32, i32, f32, u64, bytes (an array), struct */
} field;

/* The JS accessor kind of a field, from its C type (a pointer is a u32 in wasm32). */
#define KIND(x) _Generic((x), uint32_t: "u32", int32_t: "i32", float: "f32", uint64_t: "u64", \
                         char *: "bytes", uint8_t *: "bytes", const uint32_t *: "u32", \
                         const wlm_logit_bias *: "u32", default: "struct")
#define F(S, f) { #f, offsetof(S, f), sizeof(((S *)0)->f), KIND(((S *)0)->f) }

typedef struct layout {
    const char *c_name, *js_name, *doc;
    size_t size, align;
    const field *fields;
    int n_fields;
    int accessors; /* 1: emit readX / writeX */
} layout;

#define LAYOUT(S, js, doc, acc, ...)                                                             \
    { #S, js, doc, sizeof(S), _Alignof(S), (const field[]){ __VA_ARGS__ },                       \
      (int)(sizeof((const field[]){ __VA_ARGS__ }) / sizeof(field)), acc }

static const layout LAYOUTS[] = {
    LAYOUT(wlm_err, "Err", "status code and message of a failed call", 1,
           F(wlm_err, code), F(wlm_err, msg)),
    LAYOUT(wlm_hparams, "Hparams", "the model's hyper-parameters (wlm_model_hparams)", 1,
           F(wlm_hparams, n_vocab), F(wlm_hparams, n_ctx_train), F(wlm_hparams, n_embd),
           F(wlm_hparams, n_layer), F(wlm_hparams, n_head), F(wlm_hparams, n_head_kv),
           F(wlm_hparams, head_dim), F(wlm_hparams, n_ff), F(wlm_hparams, n_rot),
           F(wlm_hparams, rope_freq_base), F(wlm_hparams, rms_eps), F(wlm_hparams, bos_id),
           F(wlm_hparams, eos_id), F(wlm_hparams, unk_id), F(wlm_hparams, add_bos),
           F(wlm_hparams, add_space_prefix), F(wlm_hparams, tied_output), F(wlm_hparams, head_dim_v),
           F(wlm_hparams, rope_type), F(wlm_hparams, rope_scaled)),
    LAYOUT(wlm_ctx_params, "CtxParams", "context options (wlm_ctx_new)", 1,
           F(wlm_ctx_params, n_ctx), F(wlm_ctx_params, n_batch), F(wlm_ctx_params, kv_type),
           F(wlm_ctx_params, full_policy), F(wlm_ctx_params, n_keep), F(wlm_ctx_params, logits_all),
           F(wlm_ctx_params, n_threads), F(wlm_ctx_params, n_seq_max), F(wlm_ctx_params, n_outputs),
           F(wlm_ctx_params, swa_full)),
    LAYOUT(wlm_sampler_params, "SamplerParams", "sampling filters (wlm_sample, wlm_sample_dist, wlm_spec_accept)", 1,
           F(wlm_sampler_params, temperature), F(wlm_sampler_params, top_k), F(wlm_sampler_params, top_p),
           F(wlm_sampler_params, min_p), F(wlm_sampler_params, repeat_penalty),
           F(wlm_sampler_params, repeat_last_n), F(wlm_sampler_params, presence_penalty),
           F(wlm_sampler_params, frequency_penalty), F(wlm_sampler_params, typical_p),
           F(wlm_sampler_params, n_biases), F(wlm_sampler_params, biases),
           F(wlm_sampler_params, allow)),
    LAYOUT(wlm_logit_bias, "LogitBias", "one (token, bias) pair of wlm_sampler_params.biases", 0,
           F(wlm_logit_bias, token), F(wlm_logit_bias, bias)),
    LAYOUT(wlm_rng, "Rng", "PCG32 state (wlm_rng_seed)", 0, F(wlm_rng, state), F(wlm_rng, inc)),
    LAYOUT(wlm_state_info, "StateInfo", "what a saved state holds (wlm_ctx_state_load)", 1,
           F(wlm_state_info, n_tokens), F(wlm_state_info, n_pos), F(wlm_state_info, tokens_offset),
           F(wlm_state_info, has_rng), F(wlm_state_info, rng)),
    LAYOUT(wlm_detok, "Detok", "streaming detokenizer state", 0,
           F(wlm_detok, pending), F(wlm_detok, n_pending)),
    LAYOUT(wlm_js_scratch, "Scratch", "the engine's scratch block (defined in tools/gen-abi.c)", 0,
           F(wlm_js_scratch, err), F(wlm_js_scratch, ptr), F(wlm_js_scratch, len),
           F(wlm_js_scratch, n_out), F(wlm_js_scratch, token), F(wlm_js_scratch, logprob),
           F(wlm_js_scratch, accepted), F(wlm_js_scratch, u64), F(wlm_js_scratch, ctx_params),
           F(wlm_js_scratch, sampler), F(wlm_js_scratch, rng), F(wlm_js_scratch, detok),
           F(wlm_js_scratch, detok2), F(wlm_js_scratch, state_info)),
    LAYOUT(wlm_js_stream, "Stream", "one generation stream's block (defined in tools/gen-abi.c)", 0,
           F(wlm_js_stream, rng), F(wlm_js_stream, detok)),
};

/* snake_case -> camelCase (n_head_kv -> nHeadKv) */
static void camel(const char *s, char *out) {
    int up = 0;
    for (; *s; s++) {
        if (*s == '_') { up = 1; continue; }
        *out++ = up && *s >= 'a' && *s <= 'z' ? (char)(*s - 32) : *s;
        up = 0;
    }
    *out = 0;
}

/* "CtxParams" -> "CTX_PARAMS" */
static void upper_snake(const char *s, char *out) {
    for (int i = 0; s[i]; i++) {
        if (i > 0 && s[i] >= 'A' && s[i] <= 'Z') *out++ = '_';
        *out++ = s[i] >= 'a' && s[i] <= 'z' ? (char)(s[i] - 32) : s[i];
    }
    *out = 0;
}

/* The fields must tile the struct (padding aside): an unlisted field fails here. */
static int covers(const layout *L) {
    size_t end = 0;
    for (int i = 0; i < L->n_fields; i++) {
        const field *f = &L->fields[i];
        if (f->offset < end || f->offset - end >= 8) {
            fprintf(stderr, "gen-abi: %s.%s at %zu: fields listed out of order or one is missing before it\n",
                    L->c_name, f->c_name, f->offset);
            return 0;
        }
        end = f->offset + f->size;
    }
    if (L->size - end >= L->align) {
        fprintf(stderr, "gen-abi: %s has %zu bytes after its last listed field: list the new field\n",
                L->c_name, L->size - end);
        return 0;
    }
    return 1;
}

static const char *getter(const char *t) {
    return !strcmp(t, "u32") ? "getUint32" : !strcmp(t, "i32") ? "getInt32" : !strcmp(t, "f32") ? "getFloat32" : "getBigUint64";
}
static const char *setter(const char *t) {
    return !strcmp(t, "u32") ? "setUint32" : !strcmp(t, "i32") ? "setInt32" : !strcmp(t, "f32") ? "setFloat32" : "setBigUint64";
}
static int scalar(const field *f) { return strcmp(f->type, "bytes") && strcmp(f->type, "struct"); }

static void emit(const layout *L) {
    char name[64], js[64];
    upper_snake(L->js_name, name);
    printf("\n/** %s: %s. Byte offsets of its fields and its size. */\n", L->c_name, L->doc);
    printf("export const %s = Object.freeze({ size: %zu", name, L->size);
    for (int i = 0; i < L->n_fields; i++) {
        camel(L->fields[i].c_name, js);
        printf(", %s: %zu", js, L->fields[i].offset);
        if (!strcmp(L->fields[i].type, "bytes")) printf(", %sBytes: %zu", js, L->fields[i].size);
    }
    printf(" });\n");
    if (!L->accessors) return;
    printf("\n/** Reads the scalar fields of a %s at byte `p`. */\n", L->c_name);
    printf("export function read%s(dv, p) {\n  return {\n", L->js_name);
    for (int i = 0; i < L->n_fields; i++) {
        const field *f = &L->fields[i];
        if (!scalar(f)) continue;
        camel(f->c_name, js);
        printf("    %s: dv.%s(p + %zu, true),\n", js, getter(f->type), f->offset);
    }
    printf("  };\n}\n");
    printf("\n/** Writes the fields of `v` that are set into the %s at byte `p` (the others are left as they are). */\n", L->c_name);
    printf("export function write%s(dv, p, v) {\n", L->js_name);
    for (int i = 0; i < L->n_fields; i++) {
        const field *f = &L->fields[i];
        if (!scalar(f)) continue;
        camel(f->c_name, js);
        char val[96];
        snprintf(val, sizeof val, !strcmp(f->type, "u64") ? "BigInt(v.%s)" : !strcmp(f->type, "u32") ? "v.%s >>> 0" : "v.%s", js);
        printf("  if (v.%s !== undefined) dv.%s(p + %zu, %s, true);\n", js, setter(f->type), f->offset, val);
    }
    printf("}\n");
}

/* Every offset and size of a layout as C static assertions (for `make abi-check64`). */
static void emit_asserts(const layout *L) {
    printf("_Static_assert(sizeof(%s) == %zu, \"%s: %zu bytes in wasm32\");\n", L->c_name, L->size, L->c_name, L->size);
    for (int i = 0; i < L->n_fields; i++) {
        const field *f = &L->fields[i];
        printf("_Static_assert(offsetof(%s, %s) == %zu && sizeof(((%s *)0)->%s) == %zu, \"%s.%s: %zu bytes at %zu in wasm32\");\n",
               L->c_name, f->c_name, f->offset, L->c_name, f->c_name, f->size, L->c_name, f->c_name, f->size, f->offset);
    }
}

int main(int argc, char **argv) {
    int n = (int)(sizeof LAYOUTS / sizeof LAYOUTS[0]);
    for (int i = 0; i < n; i++)
        if (!covers(&LAYOUTS[i])) return 1;
    if (argc > 1 && !strcmp(argv[1], "asserts")) {
        printf("/* GENERATED by tools/gen-abi.c (gen-abi asserts): the wasm32 layouts of web/worker/abi.js */\n");
        for (int i = 0; i < n; i++) emit_asserts(&LAYOUTS[i]);
        return 0;
    }
    printf("// GENERATED by tools/gen-abi.c (`make abi`) from src/wlm.h: do not edit.\n");
    printf("// The wasm32 layout of every C struct the engine's JS reads or writes, with\n");
    printf("// named readers and writers; tests/js/abi.test.mjs fails when it is stale.\n");
    printf("// The wasm64 (memory64) builds have the same layout (`make abi-check64`).\n");
    for (int i = 0; i < n; i++) emit(&LAYOUTS[i]);
    return 0;
}
#endif
