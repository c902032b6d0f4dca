/* libFuzzer target: arbitrary bytes as a GGUF model file through the public
 * API (src/gguf.c reader, src/model.c hyper-parameters and tensor map,
 * vocabulary loading). A file that loads is used: metadata and tensor
 * accessors, tokenize, a context, two evals and a sample, a quantize size.
 * Anything a file can do must end in a status and a message. Bytes that hold
 * the GGUF magic again later are also cut there into the parts of a split
 * GGUF (wlm_model_load_parts, each part an exact-size copy). The same bytes
 * go through the vocabulary-only path: wlm_gguf_meta_bytes on every prefix
 * length it names must agree with itself (a lower bound, then the size), and
 * wlm_model_load_vocab on the metadata bytes alone must load what the whole
 * file loads. */
#include "fuzz_common.h"

#define FZ_MAX_PARTS 8

static void try_parts(const uint8_t *data, size_t size) {
    size_t cut[FZ_MAX_PARTS + 1]; uint32_t n = 0;
    cut[n++] = 0;
    for (size_t i = 4; i + 4 <= size && n < FZ_MAX_PARTS; i++)
        if (memcmp(data + i, "GGUF", 4) == 0) cut[n++] = i;
    if (n < 2) return;
    cut[n] = size;
    uint8_t *parts[FZ_MAX_PARTS]; uint64_t sizes[FZ_MAX_PARTS];
    for (uint32_t i = 0; i < n; i++) {
        sizes[i] = cut[i + 1] - cut[i];
        parts[i] = malloc(sizes[i]);
        memcpy(parts[i], data + cut[i], sizes[i]);
    }
    wlm_model *m = NULL; wlm_err err = { 0 };
    wlm_status s = wlm_model_load_parts(&m, (const uint8_t *const *)parts, sizes, n, &err);
    if (s != WLM_OK) {
        FZ_ASSERT(m == NULL, "failed split load returned a model");
        FZ_ASSERT(err.msg[0] != 0 && memchr(err.msg, 0, sizeof err.msg) != NULL, "split load: status %d without a message", (int)s);
    } else {
        FZ_ASSERT(wlm_model_n_parts(m) == n, "%u parts loaded as %u", n, wlm_model_n_parts(m));
        for (uint32_t i = 0; i < wlm_tensor_count(m); i++) FZ_ASSERT(wlm_tensor_part(m, i) < n, "tensor in part %u of %u", wlm_tensor_part(m, i), n);
        uint64_t qsize;
        (void)wlm_quantize_size(m, 8, &qsize, &err);
        wlm_model_free(m);
    }
    for (uint32_t i = 0; i < n; i++) free(parts[i]);
}

/* wlm_gguf_meta_bytes and wlm_model_load_vocab on exact-size copies */
static void try_vocab(const uint8_t *data, size_t size) {
    wlm_err err = { 0 };
    uint64_t need = 0;
    wlm_status s = wlm_gguf_meta_bytes(data, size, &need, &err);
    if (s == WLM_ERR_TRUNCATED) FZ_ASSERT(need > size, "truncated, but %llu bytes asked of %zu", (unsigned long long)need, size);
    else if (s == WLM_OK) FZ_ASSERT(need >= 24 && need <= size, "metadata of %llu bytes in %zu", (unsigned long long)need, size);
    else FZ_ASSERT(err.msg[0] != 0, "meta_bytes: status %d without a message", (int)s);
    /* the vocabulary from the whole file, then from its metadata bytes alone: the same outcome */
    wlm_model *v = NULL;
    uint8_t *d = malloc(size ? size : 1);
    if (size) memcpy(d, data, size);
    wlm_status sv = wlm_model_load_vocab(&v, size ? d : NULL, size, &err);
    if (sv != WLM_OK) {
        FZ_ASSERT(v == NULL && err.msg[0] != 0, "failed vocabulary load: status %d, model %p", (int)sv, (void *)v);
    } else {
        FZ_ASSERT(s == WLM_OK, "a vocabulary loaded from bytes whose metadata is not whole (status %d)", (int)s);
        int32_t ids[32]; uint32_t n = 0;
        wlm_ctx *c = NULL;
        FZ_ASSERT(wlm_ctx_new(&c, v, NULL, &err) == WLM_ERR_STATE && !c, "a context on a vocabulary-only model");
        if (wlm_tokenize(v, "Once upon a <s> time\n", 21, WLM_TOK_ADD_BOS | WLM_TOK_PARSE_SPECIAL, ids, 32, &n, &err) == WLM_OK)
            for (uint32_t i = 0; i < n; i++) FZ_ASSERT(ids[i] >= 0 && (uint32_t)ids[i] < wlm_model_hparams(v)->n_vocab, "token %d out of range", ids[i]);
        uint8_t *h = malloc(need);
        memcpy(h, data, need);
        wlm_model *v2 = NULL;
        FZ_ASSERT(wlm_model_load_vocab(&v2, h, need, &err) == WLM_OK, "the metadata bytes alone do not load: %s", err.msg);
        FZ_ASSERT(wlm_model_hparams(v2)->n_vocab == wlm_model_hparams(v)->n_vocab, "another vocabulary from the metadata bytes alone");
        wlm_model_free(v2);
        free(h);
        wlm_model_free(v);
    }
    free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try_parts(data, size);
    try_vocab(data, size);
    /* exact-size copy: reads past the end are ASan errors */
    uint8_t *d = malloc(size ? size : 1);
    if (size) memcpy(d, data, size);
    wlm_model *m = NULL; wlm_err err = { 0 };
    wlm_status s = wlm_model_load(&m, size ? d : NULL, size, &err);
    if (s != WLM_OK) {
        FZ_ASSERT(m == NULL, "failed load returned a model");
        FZ_ASSERT(err.msg[0] != 0, "status %d without a message", (int)s);
        FZ_ASSERT(memchr(err.msg, 0, sizeof err.msg) != NULL, "message not terminated");
        free(d);
        return 0;
    }
    const wlm_hparams *hp = wlm_model_hparams(m);
    FZ_ASSERT(hp->n_vocab > 0, "a loaded model with no vocabulary");
    /* accessors over every entry, plus one past the end */
    for (uint32_t i = 0; i <= wlm_meta_count(m); i++) {
        uint32_t len; uint64_t nb;
        const char *k = wlm_meta_key(m, i, &len);
        const uint8_t *v = wlm_meta_value(m, i, &nb);
        if (k && len) { volatile char c = k[len - 1]; (void)c; }
        if (v && nb) { volatile uint8_t c = v[nb - 1]; (void)c; }
        (void)wlm_meta_type(m, i);
    }
    for (uint32_t i = 0; i <= wlm_tensor_count(m); i++) {
        uint32_t len;
        const char *n = wlm_tensor_name(m, i, &len);
        if (n && len) { volatile char c = n[len - 1]; (void)c; }
        for (uint32_t dd = 0; dd < 5; dd++) (void)wlm_tensor_dim(m, i, dd);
        (void)wlm_type_name(wlm_tensor_type(m, i));
    }
    int32_t ids[32]; uint32_t n = 0;
    if (wlm_tokenize(m, "Once upon a <s> time\n", 21, WLM_TOK_ADD_BOS | WLM_TOK_PARSE_SPECIAL, ids, 32, &n, &err) == WLM_OK) {
        for (uint32_t i = 0; i < n; i++) FZ_ASSERT(ids[i] >= 0 && (uint32_t)ids[i] < hp->n_vocab, "token %d out of range", ids[i]);
        wlm_ctx_params p; wlm_ctx_default_params(&p); p.n_ctx = 8; p.n_batch = 4;
        wlm_ctx *c = NULL;
        if (n && wlm_ctx_new(&c, m, &p, &err) == WLM_OK) {
            if (wlm_eval(c, ids, n > 6 ? 6 : n, &err) == WLM_OK) {
                wlm_sampler_params sp; wlm_sampler_default_params(&sp);
                wlm_rng r; wlm_rng_seed(&r, 7);
                int32_t tok = -1; float lp;
                if (wlm_sample(c, wlm_ctx_logits(c), &sp, ids, n, &r, &tok, &lp, &err) == WLM_OK)
                    FZ_ASSERT(tok >= 0 && (uint32_t)tok < hp->n_vocab, "sampled %d of %u", tok, hp->n_vocab);
                (void)wlm_eval(c, &ids[0], 1, &err);
            }
            wlm_ctx_free(c);
        }
    }
    uint64_t qsize;
    (void)wlm_quantize_size(m, 8, &qsize, &err);
    wlm_model_free(m);
    free(d);
    return 0;
}
