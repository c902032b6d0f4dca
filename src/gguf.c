/* GGUF reader (versions 2 and 3).
 *
 * The whole file sits in memory; nothing is copied. Every count, length,
 * dimension and offset is checked against the bytes that remain before it is
 * used, with overflow-safe arithmetic, so a hostile file can only produce an
 * error message. Layout (little-endian):
 *   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x (string key, u32 type, value)
 *   n_tensors x (string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset)
 *   padding to general.alignment (default 32) | tensor data
 * string = u64 length + bytes; array = u32 element type + u64 count + items. */
#include "gguf.h"
#include "ggml_types.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" read as little-endian u32 */
#define GGUF_MAX_ARRAY_DEPTH 4
#define GGUF_MAX_NAME 256

typedef struct cur {
    const uint8_t *base;
    uint64_t pos, size;
    wlm_err *err;
    uint64_t want; /* after a WLM_ERR_TRUNCATED: a lower bound of the bytes the file needs */
} cur;

/* records, for a truncation, that the file needs at least pos + n bytes */
static void wants(cur *c, uint64_t n) { c->want = n > UINT64_MAX - c->pos ? UINT64_MAX : c->pos + n; }

static uint64_t left(const cur *c) { return c->size - c->pos; }

static wlm_status need(cur *c, uint64_t n, const char *what) {
    if (n > left(c)) {
        wants(c, n);
        return wlm_fail(c->err, WLM_ERR_TRUNCATED, "truncated: %s at byte %llu needs %llu bytes, file has %llu",
                        what, (unsigned long long)c->pos, (unsigned long long)n, (unsigned long long)c->size);
    }
    return WLM_OK;
}

static wlm_status get_u32(cur *c, uint32_t *v, const char *what) {
    wlm_status s = need(c, 4, what);
    if (s) return s;
    *v = wlm_rd32(c->base + c->pos);
    c->pos += 4;
    return WLM_OK;
}
static wlm_status get_u64(cur *c, uint64_t *v, const char *what) {
    wlm_status s = need(c, 8, what);
    if (s) return s;
    *v = wlm_rd64(c->base + c->pos);
    c->pos += 8;
    return WLM_OK;
}
static wlm_status get_str(cur *c, const char **p, uint64_t *len, const char *what) {
    wlm_status s = get_u64(c, len, what);
    if (s) return s;
    if (*len > left(c)) {
        wants(c, *len);
        return wlm_fail(c->err, WLM_ERR_TRUNCATED, "truncated: %s of length %llu at byte %llu runs past the end of the file (%llu bytes)",
                        what, (unsigned long long)*len, (unsigned long long)c->pos, (unsigned long long)c->size);
    }
    *p = (const char *)c->base + c->pos;
    c->pos += *len;
    return WLM_OK;
}

static const uint8_t scalar_size[GGUF_TYPE_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
static const char *const gguf_type_names[GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"
};

/* Skips one value of `type`, checking every length. */
static wlm_status skip_value(cur *c, uint32_t type, int depth, const char *key, uint32_t klen) {
    if (type >= GGUF_TYPE_COUNT)
        return wlm_fail(c->err, WLM_ERR_FORMAT, "metadata '%.*s': unknown value type %u", (int)klen, key, type);
    if (type == GGUF_STRING) {
        uint64_t n;
        wlm_status s = get_u64(c, &n, "metadata string length");
        if (s) return s;
        if (n > left(c)) {
            wants(c, n);
            return wlm_fail(c->err, WLM_ERR_TRUNCATED, "truncated: metadata string of length %llu at byte %llu (in '%.*s') runs past the end of the file (%llu bytes)",
                            (unsigned long long)n, (unsigned long long)c->pos, (int)WLM_MIN(klen, 96u), key, (unsigned long long)c->size);
        }
        c->pos += n;
        return WLM_OK;
    }
    if (type != GGUF_ARRAY) return need(c, scalar_size[type], "metadata value") ? c->err->code : (c->pos += scalar_size[type], WLM_OK);
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return wlm_fail(c->err, WLM_ERR_FORMAT, "metadata '%.*s': arrays nested deeper than %d", (int)klen, key, GGUF_MAX_ARRAY_DEPTH);
    uint32_t et;
    uint64_t n;
    wlm_status s;
    if ((s = get_u32(c, &et, "array type")) || (s = get_u64(c, &n, "array length"))) return s;
    if (et >= GGUF_TYPE_COUNT)
        return wlm_fail(c->err, WLM_ERR_FORMAT, "metadata '%.*s': unknown array element type %u", (int)klen, key, et);
    if (et != GGUF_STRING && et != GGUF_ARRAY) {
        if (n > left(c) / scalar_size[et]) {
            wants(c, n > UINT64_MAX / 8 ? UINT64_MAX : n * scalar_size[et]);
            return wlm_fail(c->err, WLM_ERR_TRUNCATED, "truncated: metadata '%.*s' array of %llu %s runs past the end of the file (%llu bytes)",
                            (int)klen, key, (unsigned long long)n, gguf_type_names[et], (unsigned long long)c->size);
        }
        c->pos += n * scalar_size[et];
        return WLM_OK;
    }
    /* every string or nested array takes at least 8 bytes */
    if (n > left(c) / 8) {
        wants(c, n > UINT64_MAX / 8 ? UINT64_MAX : n * 8);
        return wlm_fail(c->err, WLM_ERR_TRUNCATED, "truncated: metadata '%.*s' array of %llu items runs past the end of the file (%llu bytes)",
                        (int)klen, key, (unsigned long long)n, (unsigned long long)c->size);
    }
    for (uint64_t i = 0; i < n; i++)
        if ((s = skip_value(c, et, depth + 1, key, klen))) return s;
    return WLM_OK;
}

int wlm_str_is(const char *s, uint32_t len, const char *lit) {
    size_t n = wlm_strlen(lit);
    return len == n && wlm_memeq(s, lit, n);
}

static int is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

/* Tensor data must not overlap: a file whose tensors share bytes is broken
 * (or built to make one write show up in two weights). Heap-sorts tensor
 * indices by offset (n log n: a hostile file may declare many tensors) and
 * compares neighbours. */
static void order_sift(uint64_t *ix, const wlm_tensor *t, uint64_t n, uint64_t i) {
    for (;;) {
        uint64_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && t[ix[l]].offset > t[ix[w]].offset) w = l;
        if (r < n && t[ix[r]].offset > t[ix[w]].offset) w = r;
        if (w == i) return;
        uint64_t x = ix[i];
        ix[i] = ix[w];
        ix[w] = x;
        i = w;
    }
}

static wlm_status check_overlap(wlm_gguf *g, wlm_err *err) {
    uint64_t n = g->n_tensors;
    if (n < 2) return WLM_OK;
    uint64_t *ix = (uint64_t *)((uint8_t *)g->tensors + WLM_ALIGN_UP(n * sizeof(wlm_tensor), 64));
    for (uint64_t i = 0; i < n; i++) ix[i] = i;
    for (uint64_t i = n / 2; i-- > 0;) order_sift(ix, g->tensors, n, i);
    for (uint64_t end = n; end > 1; end--) {
        uint64_t x = ix[0];
        ix[0] = ix[end - 1];
        ix[end - 1] = x;
        order_sift(ix, g->tensors, end - 1, 0);
    }
    for (uint64_t i = 1; i < n; i++) {
        const wlm_tensor *a = &g->tensors[ix[i - 1]], *b = &g->tensors[ix[i]];
        if (a->offset + a->nbytes > b->offset)
            return wlm_fail(err, WLM_ERR_FORMAT, "tensors %.*s and %.*s overlap (the first ends at byte %llu, the second starts at byte %llu)",
                            (int)WLM_MIN(a->name_len, 80u), a->name, (int)WLM_MIN(b->name_len, 80u), b->name,
                            (unsigned long long)(a->offset + a->nbytes), (unsigned long long)b->offset);
    }
    return WLM_OK;
}

/* The fixed header (magic, version, counts), checked: *c is left after it.
 * The counts are bounded by the bytes there are: a metadata pair takes
 * >= 13 bytes, a tensor info >= 32. A count that a real file could have
 * (< 2^24) but these bytes cannot hold means the file was cut short; a
 * larger one is nonsense. With meta_only the tensor count is not bounded
 * (the bytes may end after the metadata). */
static wlm_status parse_header(cur *c, uint32_t *version, uint64_t *n_tensors, uint64_t *n_kv, int meta_only) {
    const uint8_t *data = c->base;
    uint64_t size = c->size;
    wlm_err *err = c->err;
    if (!data || size == 0) return wlm_fail(err, WLM_ERR_FORMAT, "not a GGUF file: empty file");
    if (size < 4) return wlm_fail(err, WLM_ERR_FORMAT, "not a GGUF file: only %llu bytes", (unsigned long long)size);
    uint32_t magic = wlm_rd32(data);
    if (magic != GGUF_MAGIC) return wlm_fail(err, WLM_ERR_FORMAT, "not a GGUF file (magic 0x%x)", magic);
    if (size < 24) {
        c->want = 24;
        return wlm_fail(err, WLM_ERR_TRUNCATED, "truncated: GGUF header needs 24 bytes, file has %llu", (unsigned long long)size);
    }
    c->pos = 4;
    get_u32(c, version, "version");
    if (*version == 1) return wlm_fail(err, WLM_ERR_UNSUPPORTED, "GGUF version 1 is not supported (only 2 and 3)");
    if (*version == 0x02000000u || *version == 0x03000000u) return wlm_fail(err, WLM_ERR_UNSUPPORTED, "big-endian GGUF files are not supported");
    if (*version < 2 || *version > 3) return wlm_fail(err, WLM_ERR_UNSUPPORTED, "unsupported GGUF version %u (only 2 and 3)", *version);
    get_u64(c, n_tensors, "tensor count");
    get_u64(c, n_kv, "metadata count");
    if (*n_kv > (size - 24) / 13) {
        if (*n_kv < (1u << 24)) {
            c->want = 24 + *n_kv * 13;
            return wlm_fail(err, WLM_ERR_TRUNCATED, "truncated: %llu metadata pairs need at least %llu bytes, file has %llu",
                            (unsigned long long)*n_kv, (unsigned long long)(24 + *n_kv * 13), (unsigned long long)size);
        }
        return wlm_fail(err, WLM_ERR_FORMAT, "absurd metadata count %llu for a file of %llu bytes", (unsigned long long)*n_kv, (unsigned long long)size);
    }
    if (meta_only) return WLM_OK;
    if (*n_tensors > (size - 24) / 32) {
        if (*n_tensors < (1u << 24)) return wlm_fail(err, WLM_ERR_TRUNCATED, "truncated: %llu tensor infos need at least %llu bytes, file has %llu",
                                                     (unsigned long long)*n_tensors, (unsigned long long)(24 + *n_tensors * 32), (unsigned long long)size);
        return wlm_fail(err, WLM_ERR_FORMAT, "absurd tensor count %llu for a file of %llu bytes", (unsigned long long)*n_tensors, (unsigned long long)size);
    }
    return WLM_OK;
}

wlm_status wlm_gguf_meta_bytes(const uint8_t *data, uint64_t size, uint64_t *need_out, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    cur c = { data, 0, size, err, 0 };
    uint32_t version;
    uint64_t n_tensors, n_kv;
    wlm_status s;
    /* a few bytes that may still start a GGUF file: read on */
    if (data && size < 24 && (size >= 4 || wlm_memeq(data, "GGUF", size))) {
        if (size < 4 || wlm_rd32(data) == GGUF_MAGIC) {
            if (need_out) *need_out = 24;
            return wlm_fail(err, WLM_ERR_TRUNCATED, "truncated: GGUF header needs 24 bytes, file has %llu", (unsigned long long)size);
        }
    }
    s = parse_header(&c, &version, &n_tensors, &n_kv, 1);
    for (uint64_t i = 0; !s && i < n_kv; i++) {
        const char *key = 0;
        uint64_t klen = 0;
        uint32_t type;
        if ((s = get_str(&c, &key, &klen, "metadata key"))) break;
        if (klen == 0 || klen > GGUF_MAX_NAME) {
            s = wlm_fail(err, WLM_ERR_FORMAT, "metadata key %llu has bad length %llu", (unsigned long long)i, (unsigned long long)klen);
            break;
        }
        if ((s = get_u32(&c, &type, "metadata type"))) break;
        s = skip_value(&c, type, 0, key, (uint32_t)klen);
    }
    if (need_out) *need_out = s == WLM_ERR_TRUNCATED ? WLM_MAX(c.want, size + 1) : s ? 0
                                                                                     : c.pos;
    return s;
}

static wlm_status parse_one(wlm_gguf *g, const uint8_t *data, uint64_t size, int meta_only, wlm_err *err) {
    wlm_memset(g, 0, sizeof *g);
    g->n_parts = 1;
    cur c = { data, 0, size, err, 0 };
    uint32_t version;
    uint64_t n_tensors, n_kv;
    wlm_status s0 = parse_header(&c, &version, &n_tensors, &n_kv, meta_only);
    if (s0) return s0;
    if (meta_only) n_tensors = 0; /* the tensor infos are not read */

    g->data = data;
    g->size = size;
    g->version = version;
    g->n_kv = n_kv;
    g->n_tensors = n_tensors;
    g->alignment = 32;
    /* index: metadata pairs | tensor infos | tensor order by offset (overlap check) */
    uint64_t index_bytes = WLM_ALIGN_UP(n_kv * sizeof(wlm_kv), 64) + WLM_ALIGN_UP(n_tensors * sizeof(wlm_tensor), 64) + n_tensors * sizeof(uint64_t) + 64;
    g->mem = wlm_sys_alloc(index_bytes);
    if (!g->mem) return wlm_fail_nomem(err, "the GGUF index", index_bytes);
    g->kv = (wlm_kv *)g->mem;
    g->tensors = (wlm_tensor *)((uint8_t *)g->mem + WLM_ALIGN_UP(n_kv * sizeof(wlm_kv), 64));

    wlm_status s;
    for (uint64_t i = 0; i < n_kv; i++) {
        wlm_kv *kv = &g->kv[i];
        const char *key = 0;
        uint64_t klen = 0;
        if ((s = get_str(&c, &key, &klen, "metadata key"))) goto fail;
        if (klen == 0 || klen > GGUF_MAX_NAME) {
            s = wlm_fail(err, WLM_ERR_FORMAT, "metadata key %llu has bad length %llu", (unsigned long long)i, (unsigned long long)klen);
            goto fail;
        }
        kv->key = key;
        kv->key_len = (uint32_t)klen;
        for (uint64_t j = 0; j < i; j++)
            if (g->kv[j].key_len == klen && wlm_memeq(g->kv[j].key, key, klen)) {
                s = wlm_fail(err, WLM_ERR_FORMAT, "duplicate metadata key '%.*s'", (int)klen, key);
                goto fail;
            }
        if ((s = get_u32(&c, &kv->type, "metadata type"))) goto fail;
        kv->val = data + c.pos;
        if (kv->type == GGUF_ARRAY && left(&c) >= 12) {
            kv->arr_type = wlm_rd32(data + c.pos);
            kv->arr_n = wlm_rd64(data + c.pos + 4);
            kv->arr_data = data + c.pos + 12;
        }
        uint64_t start = c.pos;
        if ((s = skip_value(&c, kv->type, 0, key, kv->key_len))) goto fail;
        kv->val_bytes = c.pos - start;
    }

    const wlm_kv *al = wlm_gguf_find(g, "general.alignment");
    if (al) {
        if (al->type != GGUF_U32) {
            s = wlm_fail(err, WLM_ERR_FORMAT, "general.alignment has type %s, expected u32", gguf_type_names[al->type]);
            goto fail;
        }
        uint32_t a = wlm_rd32(al->val);
        if (!is_pow2(a) || a > (1u << 20)) {
            s = wlm_fail(err, WLM_ERR_FORMAT, "general.alignment %u is not a power of two up to 1 MiB", a);
            goto fail;
        }
        g->alignment = a;
    }

    for (uint64_t i = 0; i < n_tensors; i++) {
        wlm_tensor *t = &g->tensors[i];
        const char *name = 0;
        uint64_t nlen = 0;
        if ((s = get_str(&c, &name, &nlen, "tensor name"))) goto fail;
        if (nlen == 0 || nlen > GGUF_MAX_NAME) {
            s = wlm_fail(err, WLM_ERR_FORMAT, "tensor %llu has bad name length %llu", (unsigned long long)i, (unsigned long long)nlen);
            goto fail;
        }
        t->name = name;
        t->name_len = (uint32_t)nlen;
        if ((s = get_u32(&c, &t->n_dims, "tensor dims"))) goto fail;
        if (t->n_dims == 0 || t->n_dims > 4) {
            s = wlm_fail(err, WLM_ERR_FORMAT, "tensor %.*s has %u dimensions (1 to 4 allowed)", (int)nlen, name, t->n_dims);
            goto fail;
        }
        uint64_t nel = 1;
        for (uint32_t d = 0; d < 4; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            if ((s = get_u64(&c, &t->ne[d], "tensor dimension"))) goto fail;
            if (t->ne[d] == 0 || t->ne[d] > ((uint64_t)1 << 40)) {
                s = wlm_fail(err, WLM_ERR_FORMAT, "tensor %.*s has absurd dimension %llu", (int)nlen, name, (unsigned long long)t->ne[d]);
                goto fail;
            }
            if (nel > (((uint64_t)1 << 50) / t->ne[d])) {
                s = wlm_fail(err, WLM_ERR_FORMAT, "tensor %.*s has too many elements (more than 2^50)", (int)nlen, name);
                goto fail;
            }
            nel *= t->ne[d];
        }
        if ((s = get_u32(&c, &t->type, "tensor type"))) goto fail;
        uint64_t off;
        if ((s = get_u64(&c, &off, "tensor offset"))) goto fail;
        const wlm_type_info *ti = wlm_type(t->type);
        if (!ti || !ti->block_bytes) {
            s = wlm_fail(err, WLM_ERR_UNSUPPORTED, "unknown tensor type %u in %.*s", t->type, (int)nlen, name);
            goto fail;
        }
        if (t->ne[0] % ti->block) {
            s = wlm_fail(err, WLM_ERR_FORMAT, "tensor %.*s: row length %llu is not a multiple of the %s block (%u)", (int)nlen, name, (unsigned long long)t->ne[0], ti->name, ti->block);
            goto fail;
        }
        t->nbytes = nel / ti->block * ti->block_bytes;
        if (off % g->alignment) {
            s = wlm_fail(err, WLM_ERR_FORMAT, "tensor %.*s: data offset %llu is not aligned to %u", (int)nlen, name, (unsigned long long)off, g->alignment);
            goto fail;
        }
        t->offset = off; /* relative for now */
        for (uint64_t j = 0; j < i; j++)
            if (g->tensors[j].name_len == nlen && wlm_memeq(g->tensors[j].name, name, nlen)) {
                s = wlm_fail(err, WLM_ERR_FORMAT, "duplicate tensor name '%.*s'", (int)nlen, name);
                goto fail;
            }
    }
    g->data_offset = WLM_ALIGN_UP(c.pos, g->alignment);
    for (uint64_t i = 0; i < n_tensors; i++) {
        wlm_tensor *t = &g->tensors[i];
        uint64_t start = g->data_offset + t->offset;
        if (t->offset > size || start > size || t->nbytes > size - start) {
            s = wlm_fail(err, WLM_ERR_TRUNCATED, "truncated: tensor %.*s data (%llu bytes at offset %llu after byte %llu) runs past the end of the file (%llu bytes)",
                         (int)t->name_len, t->name, (unsigned long long)t->nbytes, (unsigned long long)t->offset,
                         (unsigned long long)g->data_offset, (unsigned long long)size);
            goto fail;
        }
        t->offset = start;
        t->data = data + start;
    }
    if ((s = check_overlap(g, err))) goto fail;
    return WLM_OK;
fail:
    wlm_gguf_free(g);
    return s;
}

/* ---- split GGUFs ------------------------------------------------------------
 *
 * A model published in parts NAME-00001-of-0000N.gguf: each part is a GGUF
 * file of its own with split.no (u16, 0-based), split.count (u16) and
 * split.tensors.count (i32, the tensors of all parts); the first part holds
 * the model's metadata, each part a subset of the tensors with offsets into
 * its own data section. Keys are read with the lenient integer getter (any
 * unsigned or non-negative integer type), as the other counts are. */

/* the split keys of one part; 0 for absent ones (count and no: has_* say so) */
typedef struct split_keys {
    uint32_t count, no, tensors;
    int has_count, has_no, has_tensors;
} split_keys;

static wlm_status read_split_keys(const wlm_gguf *g, split_keys *k, wlm_err *err) {
    wlm_memset(k, 0, sizeof *k);
    wlm_status s;
    k->has_count = wlm_gguf_find(g, "split.count") != 0;
    k->has_no = wlm_gguf_find(g, "split.no") != 0;
    k->has_tensors = wlm_gguf_find(g, "split.tensors.count") != 0;
    if ((s = wlm_kv_u32(g, "split.count", 0, &k->count, err))) return s;
    if ((s = wlm_kv_u32(g, "split.no", 0, &k->no, err))) return s;
    if ((s = wlm_kv_u32(g, "split.tensors.count", 0, &k->tensors, err))) return s;
    if (k->has_count && k->count == 0) return wlm_fail(err, WLM_ERR_FORMAT, "split.count is 0");
    if (k->has_count && k->has_no && k->no >= k->count)
        return wlm_fail(err, WLM_ERR_FORMAT, "split.no %u is out of range for split.count %u", k->no, k->count);
    return WLM_OK;
}

/* "part I of N: " before a part's own error message */
static wlm_status part_fail(wlm_err *err, uint32_t i, uint32_t n) {
    char msg[sizeof err->msg];
    wlm_memcpy(msg, err->msg, sizeof msg);
    msg[sizeof msg - 1] = 0;
    return wlm_fail(err, err->code, "part %u of %u: %s", i + 1, n, msg);
}

static void free_parts(wlm_gguf *parts, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) wlm_gguf_free(&parts[i]);
    wlm_sys_free(parts);
}

wlm_status wlm_gguf_parse_meta(wlm_gguf *g, const uint8_t *data, uint64_t size, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    return parse_one(g, data, size, 1, err);
}

wlm_status wlm_gguf_parse(wlm_gguf *g, const uint8_t *data, uint64_t size, wlm_err *err) {
    const uint8_t *d[1] = { data };
    uint64_t z[1] = { size };
    return wlm_gguf_parse_parts(g, d, z, 1, err);
}

wlm_status wlm_gguf_parse_parts(wlm_gguf *g, const uint8_t *const *data, const uint64_t *sizes, uint32_t n, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    wlm_memset(g, 0, sizeof *g);
    if (n == 0 || !data || !sizes) return wlm_fail(err, WLM_ERR_ARG, "no GGUF parts given");
    if (n > 65535) return wlm_fail(err, WLM_ERR_ARG, "%u GGUF parts given (at most 65535)", n);
    split_keys k0, k;
    wlm_status s;
    if (n == 1) {
        if ((s = parse_one(g, data[0], sizes[0], 0, err))) return s;
        if ((s = read_split_keys(g, &k0, err))) {
            wlm_gguf_free(g);
            return s;
        }
        if (k0.has_count && k0.count > 1) {
            s = wlm_fail(err, WLM_ERR_FORMAT, "this file is part %u of a split GGUF of %u parts: load it with the other parts",
                         k0.no + 1, k0.count);
            wlm_gguf_free(g);
            return s;
        }
        return WLM_OK;
    }
    uint64_t pbytes = (uint64_t)n * sizeof(wlm_gguf);
    wlm_gguf *parts = wlm_sys_alloc(pbytes);
    if (!parts) return wlm_fail_nomem(err, "the split GGUF part table", pbytes);
    wlm_memset(parts, 0, pbytes);
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        if ((s = parse_one(&parts[i], data[i], sizes[i], 0, err))) {
            s = part_fail(err, i, n);
            goto fail;
        }
        if ((s = read_split_keys(&parts[i], &k, err))) {
            s = part_fail(err, i, n);
            goto fail;
        }
        if (i == 0) {
            if (!k.has_count || !k.has_no) {
                s = wlm_fail(err, WLM_ERR_FORMAT, "%u parts given, but the first has no split.count / split.no: it is not part of a split GGUF", n);
                goto fail;
            }
            k0 = k;
        } else if (!k.has_count || !k.has_no) {
            s = wlm_fail(err, WLM_ERR_FORMAT, "part %u of %u has no split.count / split.no: it is not part of a split GGUF", i + 1, n);
            goto fail;
        } else if (k.count != k0.count) {
            s = wlm_fail(err, WLM_ERR_FORMAT, "part %u belongs to another split GGUF: split.count %u, the first part says %u", i + 1, k.count, k0.count);
            goto fail;
        } else if (k.has_tensors && k0.has_tensors && k.tensors != k0.tensors) {
            s = wlm_fail(err, WLM_ERR_FORMAT, "part %u belongs to another split GGUF: split.tensors.count %u, the first part says %u", i + 1, k.tensors, k0.tensors);
            goto fail;
        }
        if (k.no != i) {
            /* the places before i hold parts 0 .. i-1 (each checked): a lower number is one of them again */
            if (k.no < i) s = wlm_fail(err, WLM_ERR_FORMAT, "split part %u of %u is given twice (in places %u and %u)", k.no + 1, k0.count, k.no + 1, i + 1);
            else s = wlm_fail(err, WLM_ERR_FORMAT, "split parts out of order: place %u holds part %u of %u", i + 1, k.no + 1, k0.count);
            goto fail;
        }
        total += parts[i].n_tensors; /* each count is below its part's size / 32: no overflow */
    }
    if (k0.count != n) {
        s = k0.count > n ? wlm_fail(err, WLM_ERR_FORMAT, "split GGUF of %u parts: only %u given (part %u is missing)", k0.count, n, n + 1)
                         : wlm_fail(err, WLM_ERR_FORMAT, "split GGUF of %u parts: %u given", k0.count, n);
        goto fail;
    }
    if (k0.has_tensors && total != k0.tensors) {
        s = wlm_fail(err, WLM_ERR_FORMAT, "split GGUF: the parts hold %llu tensors, split.tensors.count says %u", (unsigned long long)total, k0.tensors);
        goto fail;
    }
    /* one index: the first part's metadata, every part's tensors */
    uint64_t n_kv = parts[0].n_kv;
    uint64_t index_bytes = WLM_ALIGN_UP(n_kv * sizeof(wlm_kv), 64) + total * sizeof(wlm_tensor) + 64;
    void *mem = wlm_sys_alloc(index_bytes);
    if (!mem) {
        s = wlm_fail_nomem(err, "the GGUF index", index_bytes);
        goto fail;
    }
    *g = parts[0];
    g->mem = mem;
    g->n_parts = n;
    g->n_tensors = total;
    g->kv = (wlm_kv *)mem;
    g->tensors = (wlm_tensor *)((uint8_t *)mem + WLM_ALIGN_UP(n_kv * sizeof(wlm_kv), 64));
    wlm_memcpy(g->kv, parts[0].kv, n_kv * sizeof(wlm_kv));
    uint64_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        for (uint64_t t = 0; t < parts[i].n_tensors; t++) {
            wlm_tensor *x = &g->tensors[at];
            *x = parts[i].tensors[t];
            x->part = i;
            /* names are unique within a part (parse_one): compare with earlier parts */
            for (uint64_t j = 0; i > 0 && j < at && g->tensors[j].part < i; j++)
                if (g->tensors[j].name_len == x->name_len && wlm_memeq(g->tensors[j].name, x->name, x->name_len)) {
                    s = wlm_fail(err, WLM_ERR_FORMAT, "tensor %.*s is in split parts %u and %u", (int)WLM_MIN(x->name_len, 96u), x->name,
                                 g->tensors[j].part + 1, i + 1);
                    wlm_sys_free(mem);
                    wlm_memset(g, 0, sizeof *g);
                    goto fail;
                }
            at++;
        }
    }
    free_parts(parts, n);
    return WLM_OK;
fail:
    free_parts(parts, n); /* parse_one leaves a failed or unparsed part empty */
    return s;
}

void wlm_gguf_free(wlm_gguf *g) {
    if (g->mem) wlm_sys_free(g->mem);
    g->mem = 0;
    g->kv = 0;
    g->tensors = 0;
    g->n_kv = g->n_tensors = 0;
}

static int key_is(const wlm_kv *kv, const char *key) { return wlm_str_is(kv->key, kv->key_len, key); }

const wlm_kv *wlm_gguf_find(const wlm_gguf *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (key_is(&g->kv[i], key)) return &g->kv[i];
    return 0;
}

wlm_tensor *wlm_gguf_tensor(const wlm_gguf *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (wlm_str_is(g->tensors[i].name, g->tensors[i].name_len, name)) return &g->tensors[i];
    return 0;
}

static wlm_status wrong_type(wlm_err *err, const wlm_kv *kv, const char *want) {
    return wlm_fail(err, WLM_ERR_FORMAT, "metadata '%.*s' has type %s, expected %s", (int)kv->key_len, kv->key,
                    kv->type < GGUF_TYPE_COUNT ? gguf_type_names[kv->type] : "?", want);
}

static wlm_status missing(wlm_err *err, const char *key) {
    return wlm_fail(err, WLM_ERR_FORMAT, "missing metadata '%s'", key);
}

wlm_status wlm_kv_u32(const wlm_gguf *g, const char *key, int required, uint32_t *out, wlm_err *err) {
    const wlm_kv *kv = wlm_gguf_find(g, key);
    if (!kv) return required ? missing(err, key) : WLM_OK;
    switch (kv->type) {
    case GGUF_U32: *out = wlm_rd32(kv->val); return WLM_OK;
    case GGUF_I32: {
        int32_t v = (int32_t)wlm_rd32(kv->val);
        if (v < 0) break;
        *out = (uint32_t)v;
        return WLM_OK;
    }
    case GGUF_U64: {
        uint64_t v = wlm_rd64(kv->val);
        if (v > 0xffffffffu) break;
        *out = (uint32_t)v;
        return WLM_OK;
    }
    case GGUF_U16: *out = (uint32_t)(kv->val[0] | kv->val[1] << 8); return WLM_OK;
    case GGUF_U8: *out = kv->val[0]; return WLM_OK;
    default: return wrong_type(err, kv, "an unsigned integer");
    }
    return wlm_fail(err, WLM_ERR_FORMAT, "metadata '%s' is out of range", key);
}

wlm_status wlm_kv_f32(const wlm_gguf *g, const char *key, int required, float *out, wlm_err *err) {
    const wlm_kv *kv = wlm_gguf_find(g, key);
    if (!kv) return required ? missing(err, key) : WLM_OK;
    if (kv->type == GGUF_F32) {
        *out = wlm_rdf32(kv->val);
    } else if (kv->type == GGUF_F64) {
        double d;
        __builtin_memcpy(&d, kv->val, 8);
        *out = (float)d;
    } else return wrong_type(err, kv, "f32");
    if (!(*out - *out == 0.0f)) return wlm_fail(err, WLM_ERR_FORMAT, "metadata '%s' is not a finite number", key);
    return WLM_OK;
}

wlm_status wlm_kv_bool(const wlm_gguf *g, const char *key, uint32_t *out, wlm_err *err) {
    const wlm_kv *kv = wlm_gguf_find(g, key);
    if (!kv) return WLM_OK;
    if (kv->type != GGUF_BOOL) return wrong_type(err, kv, "bool");
    *out = kv->val[0] != 0;
    return WLM_OK;
}

wlm_status wlm_kv_str(const wlm_gguf *g, const char *key, int required, const char **s, uint32_t *len, wlm_err *err) {
    const wlm_kv *kv = wlm_gguf_find(g, key);
    *s = 0;
    *len = 0;
    if (!kv) return required ? missing(err, key) : WLM_OK;
    if (kv->type != GGUF_STRING) return wrong_type(err, kv, "string");
    uint64_t n = wlm_rd64(kv->val);
    if (n > 0xffffffu) return wlm_fail(err, WLM_ERR_FORMAT, "metadata '%s' string is too long (%llu bytes)", key, (unsigned long long)n);
    *s = (const char *)kv->val + 8;
    *len = (uint32_t)n;
    return WLM_OK;
}
