/* Helpers shared by the tokenizer tests: load a vocabulary-only GGUF (or
 * one built in memory), tokenize into a malloc'd array, and a tiny writer
 * for hand-built GGUF metadata. */
#ifndef VOCAB_UTIL_H
#define VOCAB_UTIL_H
#include "tst.h"
#include "../../src/internal.h"

#define VU_HELPER static __attribute__((unused))

typedef struct {
    unsigned char *file;
    wlm_gguf g;
    wlm_vocab v;
    int ok;
} tvocab;

/* takes ownership of `file` (malloc'd) */
VU_HELPER int tv_load_bytes(tvocab *t, unsigned char *file, unsigned long long size, wlm_err *err) {
    memset(t, 0, sizeof *t);
    t->file = file;
    if (wlm_gguf_parse(&t->g, file, size, err) != WLM_OK) return 0;
    if (wlm_vocab_load(&t->v, &t->g, err) != WLM_OK) return 0;
    t->ok = 1;
    return 1;
}

/* rel: a path under the shared data folder, e.g. "vocab/ggml-vocab-gpt-2.gguf" */
VU_HELPER int tv_load(tvocab *t, const char *rel) {
    unsigned long long size = 0;
    unsigned char *file = tst_read_file(tst_path(rel), &size);
    wlm_err err = { 0 };
    memset(t, 0, sizeof *t);
    if (!file) {
        fprintf(stderr, "  cannot read %s\n", tst_path(rel));
        return 0;
    }
    if (!tv_load_bytes(t, file, size, &err)) {
        fprintf(stderr, "  %s: %s\n", rel, err.msg);
        return 0;
    }
    return 1;
}

VU_HELPER void tv_free(tvocab *t) {
    wlm_vocab_free(&t->v);
    wlm_gguf_free(&t->g);
    free(t->file);
    memset(t, 0, sizeof *t);
}

/* tokenizes (flags: WLM_TOK_*) into a malloc'd array; NULL on failure */
VU_HELPER int32_t *tv_tokenize(const wlm_vocab *v, const char *s, uint32_t len, int flags, uint32_t *n) {
    uint32_t cap = 3 * len + 8;
    int32_t *out = malloc(sizeof(int32_t) * cap);
    wlm_err err = { 0 };
    if (wlm_vocab_tokenize(v, s, len, flags, out, cap, n, &err) != WLM_OK) {
        fprintf(stderr, "  tokenize failed: %s\n", err.msg);
        free(out);
        return NULL;
    }
    return out;
}

/* ---- hand-built GGUF metadata (no tensors) ---------------------------------- */

typedef struct {
    unsigned char *p;
    size_t n, cap;
    uint64_t n_kv;
} gbuf;
VU_HELPER void gb_put(gbuf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
VU_HELPER void gb_u32(gbuf *b, uint32_t v) { gb_put(b, &v, 4); }
VU_HELPER void gb_u64(gbuf *b, uint64_t v) { gb_put(b, &v, 8); }
VU_HELPER void gb_str(gbuf *b, const char *s) {
    gb_u64(b, strlen(s));
    gb_put(b, s, strlen(s));
}
VU_HELPER void gb_begin(gbuf *b) {
    memset(b, 0, sizeof *b);
    gb_put(b, "GGUF", 4);
    gb_u32(b, 3);
    gb_u64(b, 0);
    gb_u64(b, 0); /* n_kv patched by gb_end */
}
VU_HELPER void gb_key(gbuf *b, const char *k, uint32_t type) {
    gb_str(b, k);
    gb_u32(b, type);
    b->n_kv++;
}
VU_HELPER void gb_kv_str(gbuf *b, const char *k, const char *v) {
    gb_key(b, k, GGUF_STRING);
    gb_str(b, v);
}
VU_HELPER void gb_kv_u32(gbuf *b, const char *k, uint32_t v) {
    gb_key(b, k, GGUF_U32);
    gb_u32(b, v);
}
VU_HELPER void gb_kv_bool(gbuf *b, const char *k, int v) {
    unsigned char c = (unsigned char)v;
    gb_key(b, k, GGUF_BOOL);
    gb_put(b, &c, 1);
}
VU_HELPER void gb_strs(gbuf *b, const char *key, const char *const *t, uint32_t n) {
    gb_key(b, key, GGUF_ARRAY);
    gb_u32(b, GGUF_STRING);
    gb_u64(b, n);
    for (uint32_t i = 0; i < n; i++) gb_str(b, t[i]);
}
VU_HELPER void gb_tokens(gbuf *b, const char *const *t, uint32_t n) { gb_strs(b, "tokenizer.ggml.tokens", t, n); }
VU_HELPER void gb_scores(gbuf *b, const float *s, uint32_t n) {
    gb_key(b, "tokenizer.ggml.scores", GGUF_ARRAY);
    gb_u32(b, GGUF_F32);
    gb_u64(b, n);
    gb_put(b, s, 4 * n);
}
VU_HELPER void gb_types(gbuf *b, const int32_t *s, uint32_t n) {
    gb_key(b, "tokenizer.ggml.token_type", GGUF_ARRAY);
    gb_u32(b, GGUF_I32);
    gb_u64(b, n);
    gb_put(b, s, 4 * n);
}
VU_HELPER unsigned char *gb_end(gbuf *b, unsigned long long *size) {
    memcpy(b->p + 16, &b->n_kv, 8);
    *size = b->n;
    return b->p;
}

#endif
