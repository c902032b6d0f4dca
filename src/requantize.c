/* Re-quantization: writes a new GGUF with 2-D weight tensors converted to a
 * target type. Metadata is copied pair by pair (general.file_type updated),
 * 1-D tensors (norms) keep their type. Source tensors of any supported type
 * are dequantized row by row to floats, then quantized.
 *
 * The type of each tensor (choose_type):
 *   - a plain target type applies to every 2-D tensor;
 *   - mixtures WLM_QUANT_Q4_K_M / WLM_QUANT_Q5_K_M: base Q4_K / Q5_K, with
 *     Q6_K for output.weight (for token_embd.weight when the output is tied
 *     to it) and for attn_v.weight and ffn_down.weight of layer i when
 *     i < n/8, i >= 7n/8 or (i - n/8) % 3 == 2 (n = block_count);
 *   - a K-quant on a tensor whose row length is not a multiple of 256 falls
 *     back to a 32-block type of at least as many bits: Q2_K, Q3_K -> Q4_0,
 *     Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0;
 *   - a tensor whose row length is not a multiple of the (fallback) block
 *     keeps its type;
 *   - bert's position and token-type tables (position_embd.weight,
 *     token_types.weight) keep their type: rows added as they are, not
 *     multiplied (llama.cpp keeps them too, and adds them unconverted). */
#include "model.h"
#include "layouts.h"

/* The mixtures: not types, but requests for a base K type with Q6_K for
 * the tensors most sensitive to quantization (nominal_type) */
static const struct {
    const char *name;
    uint32_t id, base, file_type;
} MIXTURES[] = {
    { "Q4_K_M", WLM_QUANT_Q4_K_M, GGML_Q4_K, 15 },
    { "Q5_K_M", WLM_QUANT_Q5_K_M, GGML_Q5_K, 17 },
};
#define N_MIXTURES (sizeof MIXTURES / sizeof MIXTURES[0])

static int mixture_of(uint32_t t) {
    for (uint32_t i = 0; i < N_MIXTURES; i++)
        if (MIXTURES[i].id == t) return (int)i;
    return -1;
}

/* how many types are quantize targets (numbered 1.. in their rows) */
static uint32_t type_targets(void) {
    uint32_t n = 0;
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++)
        if (wlm_type(t) && wlm_type(t)->quantize) n++;
    return n;
}

uint32_t wlm_quantize_target(uint32_t i) {
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++) {
        const wlm_type_info *ti = wlm_type(t);
        if (ti && ti->quantize && ti->target == i + 1) return t;
    }
    uint32_t nt = type_targets();
    return i >= nt && i - nt < N_MIXTURES ? MIXTURES[i - nt].id : 0xffffffffu;
}

const char *wlm_quantize_target_name(uint32_t type) {
    int mx = mixture_of(type);
    if (mx >= 0) return MIXTURES[mx].name;
    const wlm_type_info *ti = wlm_type(type);
    return ti && ti->quantize ? ti->name : 0;
}

/* llama.cpp's file-type number for the whole file (a plain K type is
 * reported as its "_S" variant, the nearest llama.cpp file type) */
static uint32_t file_type_of(uint32_t t) {
    int mx = mixture_of(t);
    return mx >= 0 ? MIXTURES[mx].file_type : wlm_type(t)->file_type;
}

/* a type with no 32-block fallback keeps itself */
static uint32_t k_fallback(uint32_t t) {
    uint32_t f = wlm_type(t)->fallback;
    return f ? f : t;
}

static int name_is(const wlm_tensor *t, const char *s) { return wlm_str_is(t->name, t->name_len, s); }
/* "blk.N.<suffix>": returns N, or -1 when the name is not of that form */
static int layer_with_suffix(const wlm_tensor *t, const char *suffix) {
    const char *p = t->name;
    uint32_t n = t->name_len, i = 4, sl = (uint32_t)wlm_strlen(suffix);
    if (n < 4 + 2 + sl || !wlm_memeq(p, "blk.", 4)) return -1;
    int v = 0;
    if (p[i] < '0' || p[i] > '9') return -1;
    while (i < n && p[i] >= '0' && p[i] <= '9') v = v * 10 + (p[i++] - '0');
    if (i >= n || p[i] != '.' || n - i - 1 != sl || !wlm_memeq(p + i + 1, suffix, sl)) return -1;
    return v;
}

/* the type the rule asks for tensor t, before the row-length check */
static uint32_t nominal_type(const wlm_model *m, const wlm_tensor *t, uint32_t req) {
    uint32_t want = req;
    int mx = mixture_of(req);
    if (mx >= 0) {
        want = MIXTURES[mx].base;
        int L = layer_with_suffix(t, "attn_v.weight");
        if (L < 0) L = layer_with_suffix(t, "ffn_down.weight");
        int n = (int)m->hp.n_layer;
        if (name_is(t, "output.weight") || (m->hp.tied_output && name_is(t, "token_embd.weight"))) want = GGML_Q6_K;
        else if (L >= 0 && (L < n / 8 || L >= 7 * n / 8 || (L - n / 8) % 3 == 2)) want = GGML_Q6_K;
    }
    return want;
}

/* tables whose rows are added to the embeddings as they are (bert) */
static int added_table(const wlm_tensor *t) { return name_is(t, "position_embd.weight") || name_is(t, "token_types.weight"); }

/* the type tensor t is written in for request `req` (t->type: kept) */
static uint32_t choose_type(const wlm_model *m, const wlm_tensor *t, uint32_t req) {
    const wlm_type_info *src = wlm_type(t->type);
    if (!wlm_type_supported(src) || t->n_dims < 2 || t->ne[1] <= 1 || added_table(t)) return t->type;
    uint32_t want = nominal_type(m, t, req);
    if (t->ne[0] % wlm_type(want)->block) want = k_fallback(want);
    if (t->ne[0] % wlm_type(want)->block) return t->type;
    return want;
}

/* the error for a type wlm_quantize cannot write, listing the targets */
static wlm_status unsupported_target(uint32_t type, wlm_err *err) {
    char list[256];
    uint32_t len = 0, id;
    for (uint32_t i = 0; (id = wlm_quantize_target(i)) != 0xffffffffu; i++)
        len += wlm_fmt(list + len, sizeof list - len, id >= WLM_QUANT_Q4_K_M ? "%s%s (%u)" : "%s%s",
                       i ? ", " : "", wlm_quantize_target_name(id), id);
    return wlm_fail(err, WLM_ERR_UNSUPPORTED, "cannot quantize to type %u (supported: %s)", type, list);
}

typedef struct wr {
    uint8_t *out;
    uint64_t cap, pos;
} wr;
static void put(wr *w, const void *p, uint64_t n) {
    if (w->out && w->pos + n <= w->cap) wlm_memcpy(w->out + w->pos, p, n);
    w->pos += n;
}
static void put32(wr *w, uint32_t v) { put(w, &v, 4); }
static void put64(wr *w, uint64_t v) { put(w, &v, 8); }
static void pad_to(wr *w, uint64_t a) {
    uint8_t z = 0;
    while (w->pos % a) put(w, &z, 1);
}

static int converts(const wlm_model *m, const wlm_tensor *t, uint32_t req) { return choose_type(m, t, req) != t->type; }

static uint64_t out_bytes(const wlm_model *m, const wlm_tensor *t, uint32_t req) {
    if (!converts(m, t, req)) return t->nbytes;
    const wlm_type_info *ti = wlm_type(choose_type(m, t, req));
    return (t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]) / ti->block * ti->block_bytes;
}

static int is_split_key(const wlm_kv *kv) { return kv->key_len > 6 && wlm_memeq(kv->key, "split.", 6); }

static wlm_status build(const wlm_model *m, uint32_t type, uint8_t *out, uint64_t cap, uint64_t *size,
                        char *report, uint32_t report_cap, wlm_err *err) {
    const wlm_gguf *g = &m->g;
    if (!wlm_quantize_target_name(type)) return unsupported_target(type, err);
    wr w = { out, cap, 0 };
    uint32_t rlen = 0;
    int has_ft = wlm_gguf_find(g, "general.file_type") != 0;
    /* the output is one file: a split model's split.* keys stay behind */
    uint64_t n_split_keys = 0;
    for (uint64_t i = 0; i < g->n_kv; i++) n_split_keys += is_split_key(&g->kv[i]);
    put32(&w, 0x46554747u);
    put32(&w, 3);
    put64(&w, g->n_tensors);
    put64(&w, g->n_kv - n_split_keys + (has_ft ? 0 : 1));
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const wlm_kv *kv = &g->kv[i];
        if (is_split_key(kv)) continue;
        put64(&w, kv->key_len);
        put(&w, kv->key, kv->key_len);
        if (wlm_str_is(kv->key, kv->key_len, "general.file_type")) {
            put32(&w, GGUF_U32);
            put32(&w, file_type_of(type));
            continue;
        }
        put32(&w, kv->type);
        put(&w, kv->val, kv->val_bytes);
    }
    if (!has_ft) {
        put64(&w, 17);
        put(&w, "general.file_type", 17);
        put32(&w, GGUF_U32);
        put32(&w, file_type_of(type));
    }
    uint64_t off = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const wlm_tensor *t = &g->tensors[i];
        put64(&w, t->name_len);
        put(&w, t->name, t->name_len);
        put32(&w, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) put64(&w, t->ne[d]);
        put32(&w, choose_type(m, t, type));
        put64(&w, off);
        off = WLM_ALIGN_UP(off + out_bytes(m, t, type), g->alignment);
    }
    pad_to(&w, g->alignment);
    uint64_t data_start = w.pos;
    float *row = 0;
    uint64_t widest = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (converts(m, &g->tensors[i], type) && g->tensors[i].ne[0] > widest) widest = g->tensors[i].ne[0];
    if (out && widest) {
        row = wlm_sys_alloc(widest * 4);
        if (!row) return wlm_fail_nomem(err, "quantize", widest * 4);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const wlm_tensor *t = &g->tensors[i];
        w.pos = WLM_ALIGN_UP(w.pos - data_start, g->alignment) + data_start;
        uint64_t nb = out_bytes(m, t, type);
        uint32_t tt = choose_type(m, t, type);
        if (tt == t->type && t->q4g) { /* repacked at load: the file's Q4_0 blocks again */
            uint64_t rb = t->ne[0] / 32 * sizeof(block_q4_0);
            for (uint64_t r = 0; r < t->nbytes / rb; r++, w.pos += rb)
                if (out && w.pos + rb <= w.cap) wlm_q4g_to_q4_0(t->data + r * rb, (block_q4_0 *)(w.out + w.pos), (uint32_t)t->ne[0]);
        } else if (tt == t->type) {
            put(&w, t->data, t->nbytes);
        }
        if (tt == t->type) {
            if (report) {
                uint32_t nom = nominal_type(m, t, type);
                const char *why = t->n_dims < 2 || t->ne[1] == 1     ? "1-D tensor"
                    : added_table(t)                                 ? "a table of rows added to the embeddings"
                    : !wlm_type_supported(wlm_type(t->type))         ? "source type not supported"
                    : (t->type == nom || t->type == k_fallback(nom)) ? "already the target type"
                    : !wlm_type_supported(wlm_type(t->type))         ? "source type not supported"
                                                                     : "row length is not a multiple of the block";
                rlen += wlm_fmt(report + rlen, report_cap - rlen, "%.*s: kept %s (%s)\n", (int)t->name_len, t->name, wlm_type_name(t->type), why);
            }
            continue;
        }
        uint64_t rows = t->ne[1] * t->ne[2] * t->ne[3], n = t->ne[0];
        uint64_t src_row = t->nbytes / rows, dst_row = nb / rows;
        if (out) {
            for (uint64_t r = 0; r < rows; r++) {
                if (t->q4g) wlm_dequantize_q4g_row(t->data + r * src_row, row, (uint32_t)n);
                else wlm_dequantize_row(t->type, t->data + r * src_row, row, (uint32_t)n);
                uint8_t *dst = w.out + w.pos + r * dst_row;
                if (w.pos + (r + 1) * dst_row > w.cap) break;
                wlm_quantize_row(tt, row, dst, (uint32_t)n);
            }
        }
        w.pos += nb;
        if (report)
            rlen += wlm_fmt(report + rlen, report_cap - rlen, "%.*s: %s -> %s (%llu -> %llu bytes)%s\n", (int)t->name_len, t->name,
                            wlm_type_name(t->type), wlm_type_name(tt), (unsigned long long)t->nbytes, (unsigned long long)nb,
                            tt != nominal_type(m, t, type) ? " [row length not a multiple of 256: 32-block fallback]" : "");
    }
    if (row) wlm_sys_free(row);
    *size = w.pos;
    if (out && w.pos > cap) return wlm_fail(err, WLM_ERR_ARG, "output buffer too small: %llu bytes needed, %llu given", (unsigned long long)w.pos, (unsigned long long)cap);
    return WLM_OK;
}

wlm_status wlm_quantize_size(const wlm_model *m, uint32_t type, uint64_t *size, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    if (m && m->vocab_only) return wlm_fail(err, WLM_ERR_STATE, "a vocabulary-only model has no weights to quantize");
    return build(m, type, 0, 0, size, 0, 0, err);
}

wlm_status wlm_quantize(const wlm_model *m, uint32_t type, uint8_t *out, uint64_t size,
                        char *report, uint32_t report_cap, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    if (!out) return wlm_fail(err, WLM_ERR_ARG, "wlm_quantize: NULL output");
    if (m && m->vocab_only) return wlm_fail(err, WLM_ERR_STATE, "a vocabulary-only model has no weights to quantize");
    if (report && report_cap) report[0] = 0;
    else report = 0;
    uint64_t got;
    return build(m, type, out, size, &got, report, report_cap, err);
}
