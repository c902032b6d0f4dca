/* GGUF files (gguf.c): the parsed header, metadata values and tensor
 * descriptors as views into the file bytes, and typed metadata getters. */
#ifndef WLM_GGUF_H
#define WLM_GGUF_H

#include "base.h"

enum {
    GGUF_U8 = 0,
    GGUF_I8 = 1,
    GGUF_U16 = 2,
    GGUF_I16 = 3,
    GGUF_U32 = 4,
    GGUF_I32 = 5,
    GGUF_F32 = 6,
    GGUF_BOOL = 7,
    GGUF_STRING = 8,
    GGUF_ARRAY = 9,
    GGUF_U64 = 10,
    GGUF_I64 = 11,
    GGUF_F64 = 12,
    GGUF_TYPE_COUNT = 13
};

typedef struct wlm_kv {
    const char *key;
    uint32_t key_len;
    uint32_t type;      /* GGUF value type */
    const uint8_t *val; /* raw encoding in the file */
    uint64_t val_bytes;
    /* for arrays: element type, count, pointer to first element */
    uint32_t arr_type;
    uint64_t arr_n;
    const uint8_t *arr_data;
} wlm_kv;

typedef struct wlm_tensor {
    const char *name;
    uint32_t name_len;
    uint32_t type, n_dims;
    uint64_t ne[4];  /* ne[0] = row length (contiguous) */
    uint64_t offset; /* absolute offset in its file (its part, for a split GGUF) */
    uint64_t nbytes;
    const uint8_t *data; /* view into the file bytes */
    uint32_t q4g;        /* Q4_0 rows repacked in place into the q4g form (wlm_model_load_inplace) */
    uint32_t finite;     /* F16: no half is infinite or NaN (scanned at load), so kernels need not check */
    uint32_t part;       /* the part holding it (0-based; 0 for a single file) */
} wlm_tensor;

typedef struct wlm_gguf {
    const uint8_t *data;
    uint64_t size;
    uint32_t version, alignment;
    uint64_t n_kv, n_tensors, data_offset;
    wlm_kv *kv;
    wlm_tensor *tensors;
    void *mem;        /* the block holding kv[] and tensors[] */
    uint32_t n_parts; /* 1, or the parts of a split GGUF (data/size: the first one) */
} wlm_gguf;

/* One GGUF file. It may not be one part of a split GGUF of several parts
 * (split.count > 1): that needs wlm_gguf_parse_parts with every part. */
wlm_status wlm_gguf_parse(wlm_gguf *g, const uint8_t *data, uint64_t size, wlm_err *err);
/* The parts of a split GGUF in order (split.no 0, 1, ...; n = 1: a plain
 * file, as wlm_gguf_parse): metadata from the first part, the tensors of
 * every part in one table (offsets within their own part). Checks every part
 * as a file of its own, then that the parts belong together: split.count
 * equal to n in each, split.no equal to its place, split.tensors.count equal
 * to the tensors found, no tensor name in two parts. */
wlm_status wlm_gguf_parse_parts(wlm_gguf *g, const uint8_t *const *data, const uint64_t *sizes, uint32_t n, wlm_err *err);
/* The header and metadata only (a vocabulary-only load, wlm_model_load_vocab):
 * the tensor infos are not read (n_tensors = 0), so the bytes may end after
 * the metadata. A part of a split GGUF is accepted as it is. */
wlm_status wlm_gguf_parse_meta(wlm_gguf *g, const uint8_t *data, uint64_t size, wlm_err *err);
void wlm_gguf_free(wlm_gguf *g);
const wlm_kv *wlm_gguf_find(const wlm_gguf *g, const char *key);
wlm_tensor *wlm_gguf_tensor(const wlm_gguf *g, const char *name);
/* Typed getters: WLM_OK and *out set; a missing key leaves *out alone and
 * returns WLM_OK when `required` is 0; a wrong type is always an error. */
wlm_status wlm_kv_u32(const wlm_gguf *g, const char *key, int required, uint32_t *out, wlm_err *err);
wlm_status wlm_kv_f32(const wlm_gguf *g, const char *key, int required, float *out, wlm_err *err);
wlm_status wlm_kv_bool(const wlm_gguf *g, const char *key, uint32_t *out, wlm_err *err);
/* String value: pointer into the file and its length; NULL when absent. */
wlm_status wlm_kv_str(const wlm_gguf *g, const char *key, int required, const char **s, uint32_t *len, wlm_err *err);
int wlm_str_is(const char *s, uint32_t len, const char *lit);

#endif
