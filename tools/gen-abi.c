/* Writes web/worker/abi.js: the layout of every C struct the engine's JS
 * reads or writes, with named readers and writers, so that no struct offset
 * is kept by hand in JS. There are two tables, one per pointer width: some
 * of these structs hold pointers (wlm_sampler_params.biases), which are 4
 * bytes in the wasm32 builds and 8 in the memory64 (wasm64) ones, and move
 * the fields after them. `make abi` builds this file twice and concatenates
 * what each prints (`gen-abi js`):
 *   - for wasm32-wasi, run under Node: ABI32, the wasm32 module's own layouts
 *     (and the file's header);
 *   - natively (LP64): ABI64 (and abiFor, which picks a table). For these
 *     fixed-width types the wasm64 layouts are the LP64 ones; that claim is
 *     checked, not assumed: `gen-abi asserts` prints every offset and size of
 *     the native run as a C static assertion, and `make abi-check64` compiles
 *     the structs below for wasm64 against them (WLM_ABI_CHECK: this file
 *     without stdio), so a struct whose wasm64 layout differs fails the build.
 * It fails when the fields listed here no longer cover a struct (a field
 * added in src/wlm.h must be listed, or JS would not see it), and does not
 * compile when a listed field has a type KIND does not know (a new pointer
 * type must be named there, so that JS writes it at the build's width). */
#include <stddef.h>
#include <stdint.h>
#include "wlm.h"

/* The engine's scratch block (one per engine): the out-parameters of its
 * calls and the small structs they take. Defined here so that JS gets its
 * layout from the same table as the C structs. */
typedef struct wlm_js_scratch {
    wlm_err err;
    uint64_t ptr;      /* an out pointer (wlm_model *, wlm_ctx *): a wasm32 one fills its low 4 bytes, a wasm64 one all 8
                        * (kept 8 bytes in both, so that the fields after it do not move with the width) */
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
/* the 64-bit offsets and sizes printed by the native `gen-abi asserts` */
#include WLM_ABI_CHECK
#else
#include <stdio.h>
#include <string.h>

typedef struct field {
    const char *c_name;
    size_t offset, size;
    const char *type; /* u32, i32, f32, u64, ptr (4 or 8 bytes), bytes (an array), struct */
} field;

/* The JS accessor kind of a field, from its C type (an array is seen as a
 * pointer to its first element). No default: a field of a type not named here
 * does not compile, so a new pointer is never taken for a nested struct. */
#define KIND(x)                                                                                                   \
    _Generic((x), uint32_t: "u32", int32_t: "i32", float: "f32", uint64_t: "u64", char *: "bytes",                \
             uint8_t *: "bytes", const wlm_logit_bias *: "ptr", const uint32_t *: "ptr", wlm_err: "struct",      \
             wlm_ctx_params: "struct", wlm_sampler_params: "struct", wlm_rng: "struct", wlm_detok: "struct",     \
             wlm_state_info: "struct")
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

/* Bytes of a pointer in this build: 4 when built for wasm32, 8 natively. */
#define PTR_BYTES sizeof(void *)

/* The DataView expression that reads a field of kind `t` at p + off. */
static void get_expr(const field *f, char *out, size_t cap) {
    const char *t = f->type;
    if (!strcmp(t, "ptr") && PTR_BYTES == 8) snprintf(out, cap, "Number(dv.getBigUint64(p + %zu, true))", f->offset);
    else
        snprintf(out, cap, "dv.%s(p + %zu, true)",
                 !strcmp(t, "u32") || !strcmp(t, "ptr") ? "getUint32"
                 : !strcmp(t, "i32")                    ? "getInt32"
                 : !strcmp(t, "f32")                    ? "getFloat32"
                                                        : "getBigUint64",
                 f->offset);
}

/* The DataView call that writes `v.<js>` as a field of kind `t` at p + off. */
static void set_expr(const field *f, const char *js, char *out, size_t cap) {
    const char *t = f->type;
    if (!strcmp(t, "ptr") && PTR_BYTES == 8) snprintf(out, cap, "dv.setBigUint64(p + %zu, BigInt(v.%s), true)", f->offset, js);
    else if (!strcmp(t, "ptr") || !strcmp(t, "u32")) snprintf(out, cap, "dv.setUint32(p + %zu, v.%s >>> 0, true)", f->offset, js);
    else if (!strcmp(t, "u64")) snprintf(out, cap, "dv.setBigUint64(p + %zu, BigInt(v.%s), true)", f->offset, js);
    else snprintf(out, cap, "dv.%s(p + %zu, v.%s, true)", !strcmp(t, "i32") ? "setInt32" : "setFloat32", f->offset, js);
}
static int scalar(const field *f) { return strcmp(f->type, "bytes") && strcmp(f->type, "struct"); }

/* One layout as members of this width's table object. */
static void emit(const layout *L) {
    char name[64], js[64], expr[160];
    upper_snake(L->js_name, name);
    printf("\n  /** %s: %s. Byte offsets of its fields and its size. */\n", L->c_name, L->doc);
    printf("  %s: Object.freeze({ size: %zu", name, L->size);
    for (int i = 0; i < L->n_fields; i++) {
        camel(L->fields[i].c_name, js);
        printf(", %s: %zu", js, L->fields[i].offset);
        if (!strcmp(L->fields[i].type, "bytes")) printf(", %sBytes: %zu", js, L->fields[i].size);
    }
    printf(" }),\n");
    if (!L->accessors) return;
    int ptrs = 0;
    for (int i = 0; i < L->n_fields; i++) ptrs |= !strcmp(L->fields[i].type, "ptr");
    printf("  /** Reads the scalar fields of a %s at byte `p`%s. */\n", L->c_name, ptrs ? " (pointers as Numbers)" : "");
    printf("  read%s(dv, p) {\n    return {\n", L->js_name);
    for (int i = 0; i < L->n_fields; i++) {
        const field *f = &L->fields[i];
        if (!scalar(f)) continue;
        camel(f->c_name, js);
        get_expr(f, expr, sizeof expr);
        printf("      %s: %s,\n", js, expr);
    }
    printf("    };\n  },\n");
    printf("  /** Writes the fields of `v` that are set into the %s at byte `p` (the others are left as they are). */\n", L->c_name);
    printf("  write%s(dv, p, v) {\n", L->js_name);
    for (int i = 0; i < L->n_fields; i++) {
        const field *f = &L->fields[i];
        if (!scalar(f)) continue;
        camel(f->c_name, js);
        set_expr(f, js, expr, sizeof expr);
        printf("    if (v.%s !== undefined) %s;\n", js, expr);
    }
    printf("  },\n");
}

/* Every offset and size of a layout as C static assertions (for `make abi-check64`). */
static void emit_asserts(const layout *L) {
    printf("_Static_assert(sizeof(%s) == %zu, \"%s: %zu bytes with 64-bit pointers\");\n", L->c_name, L->size, L->c_name, L->size);
    for (int i = 0; i < L->n_fields; i++) {
        const field *f = &L->fields[i];
        printf("_Static_assert(offsetof(%s, %s) == %zu && sizeof(((%s *)0)->%s) == %zu, \"%s.%s: %zu bytes at %zu with 64-bit pointers\");\n",
               L->c_name, f->c_name, f->offset, L->c_name, f->c_name, f->size, L->c_name, f->c_name, f->size, f->offset);
    }
}

int main(int argc, char **argv) {
    int n = (int)(sizeof LAYOUTS / sizeof LAYOUTS[0]);
    const char *mode = argc > 1 ? argv[1] : "";
    for (int i = 0; i < n; i++)
        if (!covers(&LAYOUTS[i])) return 1;
    if (PTR_BYTES != 4 && PTR_BYTES != 8) {
        fprintf(stderr, "gen-abi: %zu-byte pointers: build it for wasm32-wasi or natively on a 64-bit host\n", PTR_BYTES);
        return 1;
    }
    if (!strcmp(mode, "asserts")) {
        if (PTR_BYTES != 8) {
            fprintf(stderr, "gen-abi asserts: run the native (64-bit) build: its table is the one checked against wasm64\n");
            return 1;
        }
        printf("/* GENERATED by tools/gen-abi.c (native gen-abi asserts): the 64-bit layouts of web/worker/abi.js */\n");
        for (int i = 0; i < n; i++) emit_asserts(&LAYOUTS[i]);
        return 0;
    }
    if (strcmp(mode, "js")) {
        fprintf(stderr, "usage: gen-abi js | asserts\n");
        return 1;
    }
    if (PTR_BYTES == 4) {
        printf("// GENERATED by tools/gen-abi.c (`make abi`) from src/wlm.h: do not edit.\n");
        printf("// The layout of every C struct the engine's JS reads or writes, with named\n");
        printf("// readers and writers, in two tables: ABI32 for the wasm32 builds (printed by\n");
        printf("// gen-abi built for wasm32-wasi) and ABI64 for the memory64 (wasm64) ones\n");
        printf("// (printed by gen-abi built natively, LP64; `make abi-check64` holds clang's\n");
        printf("// wasm64 layouts to it). They differ where a struct holds a pointer: 4 bytes\n");
        printf("// or 8. Code takes the table of the build it runs (abiFor; WasmHeap.abi).\n");
        printf("// tests/js/abi.test.mjs fails when this file is stale.\n");
    }
    printf("\n/** The struct layouts of the %s builds (%zu-byte pointers). */\n", PTR_BYTES == 4 ? "wasm32" : "memory64 (wasm64)", PTR_BYTES);
    printf("export const ABI%d = Object.freeze({\n", (int)PTR_BYTES * 8);
    printf("  /** bytes of a pointer */\n  ptrBytes: %zu,\n", PTR_BYTES);
    for (int i = 0; i < n; i++) emit(&LAYOUTS[i]);
    printf("});\n");
    if (PTR_BYTES == 8) {
        printf("\n/** The table of a build: ABI64 for a memory64 (wasm64) one, else ABI32. */\n");
        printf("export function abiFor(memory64) {\n  return memory64 ? ABI64 : ABI32;\n}\n");
    }
    return 0;
}
#endif
