/* GGUF byte buffers for tests: a small description of a file (header fields,
 * metadata pairs as raw encoded values, tensor infos with their data) that
 * serializes to GGUF bytes. Tests build files from scratch (a tiny llama
 * model) or clone a real file into a description, change one thing and
 * serialize again. Written from the GGUF layout only:
 *   "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x (u64 len + key bytes, u32 value type, value)
 *   n_tensors x (u64 len + name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset)
 *   zero padding to the alignment | tensor data (offsets relative to here)
 * Header-only (static functions): include it in one test file. */
#ifndef GGUF_BUILD_H
#define GGUF_BUILD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GB_MAX_KV 64
#define GB_MAX_T 96
#define GB_AUTO UINT64_MAX

/* growable byte buffer */
typedef struct gb_buf {
    unsigned char *p;
    size_t len, cap;
} gb_buf;

static inline void gb_put(gb_buf *b, const void *src, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        b->p = realloc(b->p, cap);
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
}
static inline void gb_u8(gb_buf *b, uint8_t v) { gb_put(b, &v, 1); }
static inline void gb_u32(gb_buf *b, uint32_t v) {
    unsigned char x[4];
    for (int i = 0; i < 4; i++) x[i] = (unsigned char)(v >> (8 * i));
    gb_put(b, x, 4);
}
static inline void gb_u64(gb_buf *b, uint64_t v) {
    unsigned char x[8];
    for (int i = 0; i < 8; i++) x[i] = (unsigned char)(v >> (8 * i));
    gb_put(b, x, 8);
}
static inline void gb_f32(gb_buf *b, float f) {
    uint32_t v;
    memcpy(&v, &f, 4);
    gb_u32(b, v);
}
static inline void gb_strn(gb_buf *b, const char *s, size_t n) {
    gb_u64(b, n);
    gb_put(b, s, n);
}
static inline void gb_str(gb_buf *b, const char *s) { gb_strn(b, s, strlen(s)); }

/* GGUF value types */
enum { GB_U8 = 0,
       GB_I8,
       GB_U16,
       GB_I16,
       GB_U32,
       GB_I32,
       GB_F32,
       GB_BOOL,
       GB_STRING,
       GB_ARRAY,
       GB_U64,
       GB_I64,
       GB_F64 };

typedef struct gb_kv {
    char key[160];
    uint32_t type;
    gb_buf val; /* the value's encoding (what follows the type) */
} gb_kv;

typedef struct gb_tensor {
    char name[128];
    uint32_t n_dims, type;
    uint64_t ne[8];  /* n_dims may be set past 4 to write a bad file */
    uint64_t offset; /* relative to the data section; GB_AUTO = next aligned */
    gb_buf data;     /* the bytes written for it */
} gb_tensor;

typedef struct gb_file {
    uint32_t magic, version;
    uint64_t n_kv_override, n_t_override; /* GB_AUTO = the real counts */
    uint32_t alignment;                   /* used for padding and GB_AUTO offsets */
    gb_kv kv[GB_MAX_KV];
    int n_kv;
    gb_tensor t[GB_MAX_T];
    int n_t;
} gb_file;

static inline void gb_init(gb_file *f) {
    memset(f, 0, sizeof *f);
    f->magic = 0x46554747u;
    f->version = 3;
    f->alignment = 32;
    f->n_kv_override = f->n_t_override = GB_AUTO;
}

static inline void gb_free(gb_file *f) {
    for (int i = 0; i < f->n_kv; i++) free(f->kv[i].val.p);
    for (int i = 0; i < f->n_t; i++) free(f->t[i].data.p);
    memset(f, 0, sizeof *f);
}

static inline int gb_kv_find(const gb_file *f, const char *key) {
    for (int i = 0; i < f->n_kv; i++)
        if (!strcmp(f->kv[i].key, key)) return i;
    return -1;
}
static inline int gb_t_find(const gb_file *f, const char *name) {
    for (int i = 0; i < f->n_t; i++)
        if (!strcmp(f->t[i].name, name)) return i;
    return -1;
}

/* Adds a pair (or replaces the value of an existing key); returns its value
 * buffer, emptied, for the caller to fill. */
static inline gb_buf *gb_kv_set(gb_file *f, const char *key, uint32_t type) {
    int i = gb_kv_find(f, key);
    if (i < 0) {
        i = f->n_kv++;
        memset(&f->kv[i], 0, sizeof f->kv[i]);
        snprintf(f->kv[i].key, sizeof f->kv[i].key, "%s", key);
    }
    f->kv[i].type = type;
    f->kv[i].val.len = 0;
    return &f->kv[i].val;
}
/* Adds a pair even when the key exists (for duplicate-key files). */
static inline gb_buf *gb_kv_add(gb_file *f, const char *key, uint32_t type) {
    int i = f->n_kv++;
    memset(&f->kv[i], 0, sizeof f->kv[i]);
    snprintf(f->kv[i].key, sizeof f->kv[i].key, "%s", key);
    f->kv[i].type = type;
    return &f->kv[i].val;
}
static inline void gb_kv_remove(gb_file *f, const char *key) {
    int i = gb_kv_find(f, key);
    if (i < 0) return;
    free(f->kv[i].val.p);
    memmove(&f->kv[i], &f->kv[i + 1], sizeof f->kv[0] * (size_t)(f->n_kv - i - 1));
    f->n_kv--;
}
static inline void gb_set_u32(gb_file *f, const char *key, uint32_t v) { gb_u32(gb_kv_set(f, key, GB_U32), v); }
static inline void gb_set_f32(gb_file *f, const char *key, float v) { gb_f32(gb_kv_set(f, key, GB_F32), v); }
static inline void gb_set_bool(gb_file *f, const char *key, int v) { gb_u8(gb_kv_set(f, key, GB_BOOL), (uint8_t)(v != 0)); }
static inline void gb_set_str(gb_file *f, const char *key, const char *s) { gb_str(gb_kv_set(f, key, GB_STRING), s); }

/* Adds a tensor; data (nbytes) is copied, or zero-filled when data is NULL. */
static inline gb_tensor *gb_tensor_add(gb_file *f, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne,
                                       const void *data, size_t nbytes) {
    gb_tensor *t = &f->t[f->n_t++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = n_dims;
    t->offset = GB_AUTO;
    for (uint32_t d = 0; d < 8; d++) t->ne[d] = d < n_dims && d < 4 ? ne[d] : 1;
    if (data) gb_put(&t->data, data, nbytes);
    else {
        unsigned char z[256] = { 0 };
        while (t->data.len < nbytes) gb_put(&t->data, z, nbytes - t->data.len < 256 ? nbytes - t->data.len : 256);
    }
    return t;
}
static inline void gb_tensor_remove(gb_file *f, const char *name) {
    int i = gb_t_find(f, name);
    if (i < 0) return;
    free(f->t[i].data.p);
    memmove(&f->t[i], &f->t[i + 1], sizeof f->t[0] * (size_t)(f->n_t - i - 1));
    f->n_t--;
}

/* Sets the number of data bytes of a tensor (zero-filling growth). */
static inline void gb_data_resize(gb_tensor *t, size_t n) {
    unsigned char z[256] = { 0 };
    if (n <= t->data.len) {
        t->data.len = n;
        return;
    }
    while (t->data.len < n) gb_put(&t->data, z, n - t->data.len < 256 ? n - t->data.len : 256);
}

/* Serializes; returns a malloc'd buffer (free it) and its size. Offsets:
 * GB_AUTO tensors are laid out one after the other, each aligned. Data is
 * written at the offsets actually recorded (explicit offsets that point
 * outside the data written are simply recorded, not honoured). */
static unsigned char *gb_serialize(const gb_file *f, size_t *size) {
    gb_buf b = { 0 };
    gb_u32(&b, f->magic);
    gb_u32(&b, f->version);
    gb_u64(&b, f->n_t_override != GB_AUTO ? f->n_t_override : (uint64_t)f->n_t);
    gb_u64(&b, f->n_kv_override != GB_AUTO ? f->n_kv_override : (uint64_t)f->n_kv);
    for (int i = 0; i < f->n_kv; i++) {
        gb_str(&b, f->kv[i].key);
        gb_u32(&b, f->kv[i].type);
        gb_put(&b, f->kv[i].val.p, f->kv[i].val.len);
    }
    uint64_t a = f->alignment ? f->alignment : 32, next = 0;
    uint64_t offs[GB_MAX_T];
    for (int i = 0; i < f->n_t; i++) {
        const gb_tensor *t = &f->t[i];
        gb_str(&b, t->name);
        gb_u32(&b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims && d < 8; d++) gb_u64(&b, t->ne[d]);
        gb_u32(&b, t->type);
        offs[i] = t->offset != GB_AUTO ? t->offset : next;
        gb_u64(&b, offs[i]);
        if (t->offset == GB_AUTO) next = (next + t->data.len + a - 1) / a * a;
    }
    while (b.len % a) gb_u8(&b, 0);
    size_t data_start = b.len;
    for (int i = 0; i < f->n_t; i++) {
        const gb_tensor *t = &f->t[i];
        if (t->offset != GB_AUTO) continue;
        size_t at = data_start + (size_t)offs[i];
        while (b.len < at) gb_u8(&b, 0);
        gb_put(&b, t->data.p, t->data.len);
    }
    *size = b.len;
    return b.p;
}

/* ---- a tiny llama model ------------------------------------------------------- */

typedef struct gb_llama {
    uint32_t n_embd, n_layer, n_head, n_head_kv, n_ff;
    int tied;     /* omit output.weight */
    int zero_mix; /* attn_output and ffn_down all zero (blocks add nothing) */
    uint32_t seed;
} gb_llama;

/* vocabulary of the tiny model */
static const char *const gb_tiny_pieces[] = {
    "<unk>",
    "<s>",
    "</s>",
    "<0x0A>",
    "<0x41>",
    "\xe2\x96\x81",
    "\xe2\x96\x81"
    "a",
    "\xe2\x96\x81"
    "b",
    "a",
    "b",
    "c",
    "ab",
    "\xe2\x96\x81"
    "ab",
    "ba",
    "\xe2\x96\x81"
    "c",
    "cab",
};
#define GB_TINY_NV ((uint32_t)(sizeof gb_tiny_pieces / sizeof gb_tiny_pieces[0]))

static inline float gb_rand_weight(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return ((float)(*s >> 8) / 16777216.0f - 0.5f) * 0.5f;
}

static inline void gb_f32_tensor(gb_file *f, const char *name, uint64_t ne0, uint64_t ne1, uint32_t *seed, float fill, int random) {
    uint64_t ne[2] = { ne0, ne1 };
    size_t n = (size_t)(ne0 * (ne1 ? ne1 : 1));
    float *v = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) v[i] = random ? gb_rand_weight(seed) : fill;
    gb_tensor_add(f, name, 0, ne1 ? 2 : 1, ne, v, n * sizeof(float));
    free(v);
}

static inline void gb_tiny_llama(gb_file *f, const gb_llama *p) {
    gb_init(f);
    uint32_t seed = p->seed ? p->seed : 1;
    uint32_t nv = GB_TINY_NV, d = p->n_embd, hd = p->n_embd / p->n_head, kvd = hd * p->n_head_kv;
    gb_set_str(f, "general.architecture", "llama");
    gb_set_str(f, "general.name", "tiny");
    gb_set_u32(f, "llama.context_length", 128);
    gb_set_u32(f, "llama.embedding_length", d);
    gb_set_u32(f, "llama.block_count", p->n_layer);
    gb_set_u32(f, "llama.feed_forward_length", p->n_ff);
    gb_set_u32(f, "llama.attention.head_count", p->n_head);
    gb_set_u32(f, "llama.attention.head_count_kv", p->n_head_kv);
    gb_set_u32(f, "llama.rope.dimension_count", hd);
    gb_set_f32(f, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gb_set_str(f, "tokenizer.ggml.model", "llama");
    gb_buf *b = gb_kv_set(f, "tokenizer.ggml.tokens", GB_ARRAY);
    gb_u32(b, GB_STRING);
    gb_u64(b, nv);
    for (uint32_t i = 0; i < nv; i++) gb_str(b, gb_tiny_pieces[i]);
    b = gb_kv_set(f, "tokenizer.ggml.scores", GB_ARRAY);
    gb_u32(b, GB_F32);
    gb_u64(b, nv);
    for (uint32_t i = 0; i < nv; i++) gb_f32(b, -(float)i);
    b = gb_kv_set(f, "tokenizer.ggml.token_type", GB_ARRAY);
    gb_u32(b, GB_I32);
    gb_u64(b, nv);
    for (uint32_t i = 0; i < nv; i++) {
        const char *s = gb_tiny_pieces[i];
        gb_u32(b, i == 0 ? 2 : i < 3              ? 3
                   : (s[0] == '<' && s[1] == '0') ? 6
                                                  : 1);
    }
    gb_set_u32(f, "tokenizer.ggml.unknown_token_id", 0);
    gb_set_u32(f, "tokenizer.ggml.bos_token_id", 1);
    gb_set_u32(f, "tokenizer.ggml.eos_token_id", 2);

    char name[96];
    gb_f32_tensor(f, "token_embd.weight", d, nv, &seed, 0, 1);
    gb_f32_tensor(f, "output_norm.weight", d, 0, &seed, 1.0f, 0);
    if (!p->tied) gb_f32_tensor(f, "output.weight", d, nv, &seed, 0, 1);
    for (uint32_t l = 0; l < p->n_layer; l++) {
#define GB_T(suffix, n0, n1, fill, rnd)               \
    snprintf(name, sizeof name, "blk.%u." suffix, l); \
    gb_f32_tensor(f, name, n0, n1, &seed, fill, rnd);
        GB_T("attn_norm.weight", d, 0, 1.0f, 0)
        GB_T("attn_q.weight", d, d, 0, 1)
        GB_T("attn_k.weight", d, kvd, 0, 1)
        GB_T("attn_v.weight", d, kvd, 0, 1)
        GB_T("attn_output.weight", d, d, 0, !p->zero_mix)
        GB_T("ffn_norm.weight", d, 0, 1.0f, 0)
        GB_T("ffn_gate.weight", d, p->n_ff, 0, 1)
        GB_T("ffn_down.weight", p->n_ff, d, 0, !p->zero_mix)
        GB_T("ffn_up.weight", d, p->n_ff, 0, 1)
#undef GB_T
    }
}

#endif
