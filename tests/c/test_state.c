/* Saved state (src/kvcache.c, wlm_ctx_state_*) and vocabulary-only loads
 * (src/model.c wlm_model_load_vocab, src/gguf.c wlm_gguf_meta_bytes):
 *   - a generation saved, loaded into a new context (another length, the
 *     model loaded again) and continued gives the tokens and the very logits
 *     of the uninterrupted run: F32, Q8_0 and Q4_0 weights, F32 and F16
 *     caches, a slid ring (onFull 'slide'), a sequence of a forked set;
 *   - the size grows with the positions, not with the context length;
 *   - every truncation, a flipped byte, another version, another model,
 *     another KV type, a context too short, inconsistent counts behind a
 *     valid checksum are refused and change nothing;
 *   - a vocabulary-only load tokenizes as the vocabulary itself does, from
 *     exactly the bytes wlm_gguf_meta_bytes asks for, whose every answer on
 *     a shorter prefix is a true lower bound; it cannot run. */
#include <stdint.h>
#include <math.h>
#include "vocab_util.h"

/* a model file: its bytes as written (bytes), the copy the model is loaded
 * from (work: wlm_model_load_inplace may rewrite it, as the JS engine does) */
typedef struct { unsigned char *bytes, *work; uint64_t size; wlm_model *m; int inplace; } smodel;

static int st_open(smodel *t) {
    wlm_err err = { 0 };
    t->work = tst_sys_copy(t->bytes, t->size);
    if (!t->work) return 0;
    wlm_status st = t->inplace ? wlm_model_load_inplace(&t->m, t->work, t->size, &err) : wlm_model_load(&t->m, t->work, t->size, &err);
    if (st != WLM_OK) fprintf(stderr, "  load: %s\n", err.msg);
    return st == WLM_OK;
}

static int st_load(smodel *t) {
    unsigned long long size = 0;
    unsigned char *file = tst_read_file(tst_path("models/stories260K.gguf"), &size);
    memset(t, 0, sizeof *t);
    if (!file) { fprintf(stderr, "  cannot read %s\n", tst_path("models/stories260K.gguf")); return 0; }
    t->bytes = tst_sys_copy(file, size);
    t->size = size;
    free(file);
    return t->bytes && st_open(t);
}

/* the same model re-quantized to `type` (a new file: another fingerprint),
 * loaded in place when `inplace` (the SIMD builds repack Q4_0 into q4g) */
static int st_quantized(const smodel *src, uint32_t type, int inplace, smodel *out) {
    wlm_err err = { 0 };
    memset(out, 0, sizeof *out);
    out->inplace = inplace;
    if (wlm_quantize_size(src->m, type, &out->size, &err) != WLM_OK) return 0;
    out->bytes = wlm_sys_alloc(out->size);
    if (!out->bytes || wlm_quantize(src->m, type, out->bytes, out->size, NULL, 0, &err) != WLM_OK) return 0;
    return st_open(out);
}

/* the same file loaded again, the same way (a reload) */
static int st_reload(const smodel *src, smodel *out) {
    memset(out, 0, sizeof *out);
    out->bytes = tst_sys_copy(src->bytes, src->size);
    out->size = src->size;
    out->inplace = src->inplace;
    return out->bytes && st_open(out);
}

static void st_free(smodel *t) { wlm_model_free(t->m); wlm_sys_free(t->work); wlm_sys_free(t->bytes); memset(t, 0, sizeof *t); }

static wlm_ctx *st_ctx(wlm_model *m, uint32_t n_ctx, uint32_t kv_type, uint32_t slide, uint32_t n_keep, uint32_t n_seq) {
    wlm_ctx_params p;
    wlm_ctx_default_params(&p);
    p.n_ctx = n_ctx; p.n_batch = 16; p.kv_type = kv_type; p.full_policy = slide; p.n_keep = n_keep; p.n_seq_max = n_seq;
    wlm_ctx *c = NULL; wlm_err err = { 0 };
    if (wlm_ctx_new(&c, m, &p, &err) != WLM_OK) { fprintf(stderr, "  ctx_new: %s\n", err.msg); return NULL; }
    return c;
}

static void st_sampling(wlm_sampler_params *sp) {
    wlm_sampler_default_params(sp);
    sp->temperature = 0.9f; sp->top_k = 0; sp->top_p = 1; sp->min_p = 0; sp->repeat_penalty = 1.1f; sp->repeat_last_n = 16;
}

#define MAXTOK 256
typedef struct { int32_t ids[MAXTOK]; uint32_t n; } toks;

/* samples the next token of sequence 0 from the logits left by the last eval */
static int32_t st_sample(wlm_ctx *c, const toks *t, wlm_rng *rng) {
    wlm_sampler_params sp; st_sampling(&sp);
    int32_t tok = -1; float lp; wlm_err err = { 0 };
    uint32_t nh = t->n < 16 ? t->n : 16;
    if (wlm_sample(c, wlm_ctx_logits(c), &sp, t->ids + t->n - nh, nh, rng, &tok, &lp, &err) != WLM_OK) fprintf(stderr, "  sample: %s\n", err.msg);
    return tok;
}

/* a prompt evaluated, then `steps` tokens sampled; each but the last
 * evaluated (the last is pending, as a generation that ended leaves it) */
static int st_generate(wlm_ctx *c, toks *t, wlm_rng *rng, uint32_t steps) {
    static const char *text = "Once upon a time, there was a little dog named";
    wlm_err err = { 0 };
    if (wlm_tokenize(c->m, text, (uint32_t)strlen(text), WLM_TOK_ADD_BOS, t->ids, MAXTOK, &t->n, &err) != WLM_OK) return 0;
    if (wlm_eval(c, t->ids, t->n, &err) != WLM_OK) { fprintf(stderr, "  eval: %s\n", err.msg); return 0; }
    wlm_rng_seed(rng, 7);
    for (uint32_t i = 0; i < steps; i++) {
        int32_t tok = st_sample(c, t, rng);
        if (tok < 0) return 0;
        t->ids[t->n++] = tok;
        if (i + 1 < steps && wlm_eval(c, &tok, 1, &err) != WLM_OK) { fprintf(stderr, "  eval: %s\n", err.msg); return 0; }
    }
    return 1;
}

/* evaluates the pending tokens (past the cache's positions), then samples
 * `steps` more, keeping every logits row */
static int st_continue(wlm_ctx *c, toks *t, wlm_rng *rng, uint32_t steps, float *logits) {
    wlm_err err = { 0 };
    uint32_t nv = wlm_model_hparams(c->m)->n_vocab, pos = wlm_ctx_pos(c);
    if (pos < t->n && wlm_eval(c, t->ids + pos, t->n - pos, &err) != WLM_OK) { fprintf(stderr, "  eval: %s\n", err.msg); return 0; }
    for (uint32_t i = 0; i < steps; i++) {
        memcpy(logits + (size_t)i * nv, wlm_ctx_logits(c), sizeof(float) * nv);
        int32_t tok = st_sample(c, t, rng);
        if (tok < 0) return 0;
        t->ids[t->n++] = tok;
        if (wlm_eval(c, &tok, 1, &err) != WLM_OK) { fprintf(stderr, "  eval: %s\n", err.msg); return 0; }
    }
    return 1;
}

static uint8_t *st_save(wlm_ctx *c, uint32_t seq, const toks *t, const wlm_rng *rng, uint64_t *size) {
    *size = wlm_ctx_state_size(c, seq, t->n);
    uint8_t *b = malloc(*size ? *size : 1);
    uint64_t written = 0; wlm_err err = { 0 };
    if (!b || wlm_ctx_state_save(c, seq, t->ids, t->n, rng, b, *size, &written, &err) != WLM_OK || written != *size) {
        fprintf(stderr, "  save: %s\n", err.msg);
        free(b);
        return NULL;
    }
    return b;
}

#define GEN 12
#define MORE 20

/* generate GEN tokens, save, continue MORE in the same context (the
 * uninterrupted run); load into a new context of another length on a
 * reloaded model, continue MORE: same tokens, same logits bits */
static void roundtrip(smodel *sm, uint32_t kv_type, const char *name) {
    wlm_ctx *a = st_ctx(sm->m, 256, kv_type, WLM_FULL_ERROR, 0, 1);
    REQUIRE(a);
    toks ta; wlm_rng ra;
    REQUIRE(st_generate(a, &ta, &ra, GEN));
    uint64_t size = 0;
    uint8_t *state = st_save(a, 0, &ta, &ra, &size);
    REQUIRE(state);
    uint32_t nv = wlm_model_hparams(sm->m)->n_vocab;
    float *la = malloc(sizeof(float) * nv * MORE), *lb = malloc(sizeof(float) * nv * MORE);
    toks t_ref = ta;
    wlm_rng r_ref = ra;
    REQUIRE(st_continue(a, &t_ref, &r_ref, MORE, la));

    smodel re;
    REQUIRE(st_reload(sm, &re));
    CHECK(wlm_model_fingerprint(re.m) == wlm_model_fingerprint(sm->m) && wlm_model_fingerprint(sm->m) != 0);
    wlm_ctx *b = st_ctx(re.m, 96, kv_type, WLM_FULL_ERROR, 0, 1);
    REQUIRE(b);
    wlm_state_info info; wlm_err err = { 0 };
    memset(&info, 0xff, sizeof info);
    REQUIRE(wlm_ctx_state_load(b, 0, state, size, &info, &err) == WLM_OK);
    CHECK(info.n_tokens == ta.n && info.n_pos == ta.n - 1 && info.has_rng == 1);
    CHECK(info.rng.state == ra.state && info.rng.inc == ra.inc);
    CHECK(wlm_ctx_pos(b) == ta.n - 1 && wlm_ctx_n_logits(b) == 0);
    toks tb;
    tb.n = info.n_tokens;
    for (uint32_t i = 0; i < tb.n; i++) tb.ids[i] = (int32_t)wlm_rd32(state + info.tokens_offset + 4 * i);
    CHECK(tb.n == ta.n && memcmp(tb.ids, ta.ids, 4 * ta.n) == 0);
    wlm_rng rb = info.rng;
    REQUIRE(st_continue(b, &tb, &rb, MORE, lb));
    CHECKF(tb.n == t_ref.n && memcmp(tb.ids, t_ref.ids, 4 * tb.n) == 0, "%s: continued tokens differ", name);
    CHECKF(memcmp(la, lb, sizeof(float) * nv * MORE) == 0, "%s: continued logits differ", name);
    printf("  %s: %u tokens saved in %llu bytes, %d more identical\n", name, ta.n, (unsigned long long)size, MORE);
    free(la); free(lb); free(state);
    wlm_ctx_free(a); wlm_ctx_free(b);
    st_free(&re);
}

TEST(state_save_load_continues_exactly) {
    smodel sm, q8, q4;
    REQUIRE(st_load(&sm));
    roundtrip(&sm, WLM_KV_F32, "F32 weights, F32 cache");
    roundtrip(&sm, WLM_KV_F16, "F32 weights, F16 cache");
    REQUIRE(st_quantized(&sm, GGML_Q8_0, 0, &q8));
    roundtrip(&q8, WLM_KV_F32, "Q8_0 weights");
    REQUIRE(st_quantized(&sm, GGML_Q4_0, 1, &q4));
    roundtrip(&q4, WLM_KV_F16, "Q4_0 weights loaded in place, F16 cache");
    CHECK(wlm_model_fingerprint(q8.m) != wlm_model_fingerprint(sm.m));
    CHECK(wlm_model_fingerprint(q4.m) != wlm_model_fingerprint(q8.m));
    /* taken before the in-place repack: a plain load of the same bytes agrees */
    smodel q4plain = q4;
    q4plain.inplace = 0; q4plain.m = NULL; q4plain.work = NULL;
    REQUIRE(st_open(&q4plain));
    CHECK(wlm_model_fingerprint(q4plain.m) == wlm_model_fingerprint(q4.m));
    wlm_model_free(q4plain.m); wlm_sys_free(q4plain.work);
    st_free(&q4); st_free(&q8); st_free(&sm);
}

TEST(state_size_follows_positions_not_context) {
    smodel sm;
    REQUIRE(st_load(&sm));
    const wlm_hparams *hp = wlm_model_hparams(sm.m);
    uint64_t row = (uint64_t)hp->n_layer * hp->n_head_kv * (hp->head_dim + hp->head_dim_v) * 4;
    uint64_t sizes[2][2];
    uint32_t lens[2] = { 64, 1024 };
    for (int k = 0; k < 2; k++) {
        wlm_ctx *c = st_ctx(sm.m, lens[k], WLM_KV_F32, WLM_FULL_ERROR, 0, 1);
        REQUIRE(c);
        int32_t ids[20];
        for (int i = 0; i < 20; i++) ids[i] = 10 + i;
        wlm_err err = { 0 };
        REQUIRE(wlm_eval(c, ids, 10, &err) == WLM_OK);
        sizes[k][0] = wlm_ctx_state_size(c, 0, 10);
        REQUIRE(wlm_eval(c, ids + 10, 10, &err) == WLM_OK);
        sizes[k][1] = wlm_ctx_state_size(c, 0, 20);
        wlm_ctx_free(c);
    }
    CHECK(sizes[0][0] == sizes[1][0] && sizes[0][1] == sizes[1][1]);
    /* per position: its token, its position and one row of keys and values per layer */
    CHECKF(sizes[0][1] - sizes[0][0] == 10 * (8 + row), "%llu vs %llu", (unsigned long long)(sizes[0][1] - sizes[0][0]),
           (unsigned long long)(10 * (8 + row)));
    CHECK(sizes[0][0] == 96 + 4ull * (10 + 10 + hp->n_layer) + 10 * row);
    printf("  10 positions: %llu bytes in a context of 64 and of 1024\n", (unsigned long long)sizes[0][0]);
    st_free(&sm);
}

/* the checksum as the format defines it (src/kvcache.c), to forge consistent edits */
static void fix_checksum(uint8_t *d, uint64_t total) {
    static const uint8_t zero[8];
    uint64_t h = wlm_hash64(0, d, 16);
    h = wlm_hash64(h, zero, 8);
    wlm_wr64(d + 16, wlm_hash64(h, d + 24, total - 24));
}

/* a load that must fail with `want`, leaving sequence 0 of c as it was */
static void refused(wlm_ctx *c, const uint8_t *d, uint64_t n, wlm_status want, const char *needle, const char *what) {
    uint32_t pos = wlm_ctx_pos(c), free_slots = wlm_ctx_free_slots(c);
    wlm_err err = { 0 };
    wlm_status st = wlm_ctx_state_load(c, 0, d, n, NULL, &err);
    CHECKF(st == want, "%s: status %d (want %d): %s", what, st, want, err.msg);
    CHECKF(!needle || strstr(err.msg, needle), "%s: message '%s' lacks '%s'", what, err.msg, needle);
    CHECKF(wlm_ctx_pos(c) == pos && wlm_ctx_free_slots(c) == free_slots, "%s: the context changed", what);
}

TEST(state_refuses_bad_bytes_and_changes_nothing) {
    smodel sm, q8;
    REQUIRE(st_load(&sm));
    wlm_ctx *a = st_ctx(sm.m, 64, WLM_KV_F32, WLM_FULL_ERROR, 0, 1);
    REQUIRE(a);
    toks t; wlm_rng r;
    REQUIRE(st_generate(a, &t, &r, 6));
    uint64_t size = 0;
    uint8_t *s = st_save(a, 0, &t, &r, &size);
    REQUIRE(s);
    /* the target holds a sequence of its own, which a refused load must keep */
    wlm_ctx *c = st_ctx(sm.m, 64, WLM_KV_F32, WLM_FULL_ERROR, 0, 1);
    REQUIRE(c);
    int32_t own[5] = { 1, 50, 60, 70, 80 };
    wlm_err err = { 0 };
    REQUIRE(wlm_eval(c, own, 5, &err) == WLM_OK);
    uint8_t *d = malloc(size + 8);
    /* every truncation */
    for (uint64_t n = 0; n < size; n++) {
        wlm_status st = wlm_ctx_state_load(c, 0, s, n, NULL, &err);
        if (st != WLM_ERR_TRUNCATED) { CHECKF(0, "cut at %llu: status %d: %s", (unsigned long long)n, st, err.msg); break; }
    }
    refused(c, s, 3, WLM_ERR_TRUNCATED, "cut short", "3 bytes");
    refused(c, s, size - 1, WLM_ERR_TRUNCATED, "cut short", "one byte short");
    CHECK(wlm_ctx_pos(c) == 5);
    /* trailing bytes */
    memcpy(d, s, size); memset(d + size, 0, 8);
    refused(c, d, size + 8, WLM_ERR_FORMAT, "extra bytes", "trailing bytes");
    /* not a state */
    memcpy(d, s, size); d[0] = 'X';
    refused(c, d, size, WLM_ERR_FORMAT, "not a wasmlm saved state", "magic");
    /* one flipped bit anywhere past the magic: the checksum */
    uint64_t at[] = { 5, 9, 17, 30, 40, 57, 61, 70, 85, 96, 100, size / 2, size - 1 };
    for (uint32_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        memcpy(d, s, size);
        d[at[i]] ^= 0x10;
        wlm_status want = at[i] < 8 ? WLM_ERR_UNSUPPORTED : at[i] < 16 ? WLM_ERR_TRUNCATED : WLM_ERR_FORMAT;
        char what[64]; snprintf(what, sizeof what, "bit flip at %llu", (unsigned long long)at[i]);
        if (at[i] >= 8 && at[i] < 16) want = (d[at[i]] ^ 0x10) < d[at[i]] ? WLM_ERR_TRUNCATED : WLM_ERR_FORMAT;
        refused(c, d, size, want, NULL, what);
    }
    /* another version (checksum made consistent) */
    memcpy(d, s, size); wlm_wr32(d + 4, 2); fix_checksum(d, size);
    refused(c, d, size, WLM_ERR_UNSUPPORTED, "version 2", "version");
    /* inconsistent counts behind a valid checksum */
    memcpy(d, s, size); wlm_wr32(d + 64, wlm_rd32(d + 64) - 1); fix_checksum(d, size);
    refused(c, d, size, WLM_ERR_FORMAT, "corrupt", "rows - 1");
    memcpy(d, s, size); wlm_wr32(d + 60, wlm_rd32(d + 56) + 1); fix_checksum(d, size);
    refused(c, d, size, WLM_ERR_FORMAT, "corrupt", "positions > tokens");
    memcpy(d, s, size); wlm_wr32(d + 96, 100000); fix_checksum(d, size);
    refused(c, d, size, WLM_ERR_FORMAT, "out of range", "token id");
    memcpy(d, s, size); wlm_wr32(d + 96 + 4 * t.n + 4, 7); fix_checksum(d, size);
    refused(c, d, size, WLM_ERR_FORMAT, "holds position", "position");
    memcpy(d, s, size); wlm_wr64(d + 88, 2); fix_checksum(d, size);
    refused(c, d, size, WLM_ERR_FORMAT, "increment", "even rng increment");
    memcpy(d, s, size); wlm_wr32(d + 76, 1); fix_checksum(d, size);   /* a rewind floor, in a model without a window */
    refused(c, d, size, WLM_ERR_FORMAT, "no sliding-window layers", "floor without a window");
    memcpy(d, s, size); wlm_wr32(d + 32, 0); fix_checksum(d, size);   /* no rng flag, rng bytes left */
    refused(c, d, size, WLM_ERR_FORMAT, "must be zero", "rng without its flag");
    memcpy(d, s, size); wlm_wr32(d + 68, 64); fix_checksum(d, size);
    refused(c, d, size, WLM_ERR_FORMAT, "ring", "a ring on an unslid state");
    /* another model, another KV type, a context too short */
    REQUIRE(st_quantized(&sm, GGML_Q8_0, 0, &q8));
    wlm_ctx *cq = st_ctx(q8.m, 64, WLM_KV_F32, WLM_FULL_ERROR, 0, 1);
    REQUIRE(cq);
    refused(cq, s, size, WLM_ERR_ARG, "another model", "another model");
    wlm_ctx *c16 = st_ctx(sm.m, 64, WLM_KV_F16, WLM_FULL_ERROR, 0, 1);
    REQUIRE(c16);
    refused(c16, s, size, WLM_ERR_UNSUPPORTED, "f32 cache", "KV type");
    wlm_ctx *c8 = st_ctx(sm.m, 8, WLM_KV_F32, WLM_FULL_ERROR, 0, 1);
    REQUIRE(c8);
    refused(c8, s, size, WLM_ERR_CONTEXT_FULL, "at least", "context too short");
    /* and a valid one loads over the target's own sequence */
    REQUIRE(wlm_ctx_state_load(c, 0, s, size, NULL, &err) == WLM_OK);
    CHECK(wlm_ctx_pos(c) == t.n - 1 && wlm_ctx_free_slots(c) == 64 - (t.n - 1));
    /* a state needs the token of every position it holds */
    uint64_t w;
    CHECK(wlm_ctx_state_save(a, 0, t.ids, 2, &r, d, size, &w, &err) == WLM_ERR_ARG);
    CHECK(wlm_ctx_state_save(a, 0, t.ids, t.n, &r, d, size - 1, &w, &err) == WLM_ERR_ARG && strstr(err.msg, "bytes"));
    free(d); free(s);
    wlm_ctx_free(a); wlm_ctx_free(c); wlm_ctx_free(cq); wlm_ctx_free(c16); wlm_ctx_free(c8);
    st_free(&q8); st_free(&sm);
}

/* onFull 'slide': a sequence past the ring, saved and continued in a
 * context with the same ring, equals the uninterrupted run; other contexts refuse it */
TEST(state_slid_ring_continues_in_the_same_ring) {
    smodel sm;
    REQUIRE(st_load(&sm));
    wlm_ctx *a = st_ctx(sm.m, 32, WLM_KV_F32, WLM_FULL_SLIDE, 4, 1);
    REQUIRE(a);
    toks ta; wlm_rng ra;
    REQUIRE(st_generate(a, &ta, &ra, 40));   /* ~ 12 prompt tokens + 40: slid by about 20 */
    REQUIRE(wlm_ctx_pos(a) > 32);
    uint64_t size = 0;
    uint8_t *s = st_save(a, 0, &ta, &ra, &size);
    REQUIRE(s);
    uint32_t nv = wlm_model_hparams(sm.m)->n_vocab;
    float *la = malloc(sizeof(float) * nv * MORE), *lb = malloc(sizeof(float) * nv * MORE);
    toks t_ref = ta; wlm_rng r_ref = ra;
    REQUIRE(st_continue(a, &t_ref, &r_ref, MORE, la));
    wlm_ctx *b = st_ctx(sm.m, 32, WLM_KV_F32, WLM_FULL_SLIDE, 4, 1);
    REQUIRE(b);
    wlm_state_info info; wlm_err err = { 0 };
    REQUIRE(wlm_ctx_state_load(b, 0, s, size, &info, &err) == WLM_OK);
    toks tb = ta; wlm_rng rb = info.rng;
    REQUIRE(st_continue(b, &tb, &rb, MORE, lb));
    CHECK(tb.n == t_ref.n && memcmp(tb.ids, t_ref.ids, 4 * tb.n) == 0);
    CHECK(memcmp(la, lb, sizeof(float) * nv * MORE) == 0);
    CHECK(wlm_ctx_truncate(b, 3, &err) == WLM_ERR_STATE);   /* slid: no rewinding, as in the original */
    wlm_ctx *plain = st_ctx(sm.m, 256, WLM_KV_F32, WLM_FULL_ERROR, 0, 1);
    wlm_ctx *longer = st_ctx(sm.m, 64, WLM_KV_F32, WLM_FULL_SLIDE, 4, 1);
    wlm_ctx *keep2 = st_ctx(sm.m, 32, WLM_KV_F32, WLM_FULL_SLIDE, 2, 1);
    REQUIRE(plain && longer && keep2);
    refused(plain, s, size, WLM_ERR_CONTEXT_FULL, "slid through a ring of 32", "slid into a plain context");
    refused(longer, s, size, WLM_ERR_CONTEXT_FULL, "onFull 'slide'", "slid into a longer ring");
    refused(keep2, s, size, WLM_ERR_CONTEXT_FULL, "nKeep 4", "slid into another n_keep");
    free(la); free(lb); free(s);
    wlm_ctx_free(a); wlm_ctx_free(b); wlm_ctx_free(plain); wlm_ctx_free(longer); wlm_ctx_free(keep2);
    st_free(&sm);
}

/* one sequence of a forked set (slots shared with the others, interleaved
 * by batched decoding) saved and loaded as sequence 0 of a fresh context,
 * and back as sequence 1 of a context whose sequence 0 stays as it was */
TEST(state_of_one_sequence_among_several) {
    smodel sm;
    REQUIRE(st_load(&sm));
    wlm_ctx *a = st_ctx(sm.m, 128, WLM_KV_F32, WLM_FULL_ERROR, 0, 4);
    REQUIRE(a);
    int32_t prompt[8] = { 1, 403, 407, 261, 378, 30, 40, 50 };
    wlm_err err = { 0 };
    REQUIRE(wlm_eval(a, prompt, 8, &err) == WLM_OK);
    for (uint32_t s = 1; s < 4; s++) REQUIRE(wlm_seq_fork(a, 0, s, &err) == WLM_OK);
    toks t2;
    memcpy(t2.ids, prompt, sizeof prompt); t2.n = 8;
    for (int step = 0; step < 20; step++) {
        int32_t tk[4]; uint32_t sq[4];
        for (uint32_t s = 0; s < 4; s++) { tk[s] = (int32_t)(100 + 7 * step + 13 * s) % 512; sq[s] = s; }
        REQUIRE(wlm_eval_batch(a, tk, sq, NULL, 4, &err) == WLM_OK);
        t2.ids[t2.n++] = tk[2];
    }
    /* the next token of sequence 2 in a, and after a reload in b */
    int32_t next = 77; uint32_t s2 = 2;
    uint64_t size = 0;
    uint8_t *st = st_save(a, 2, &t2, NULL, &size);
    REQUIRE(st);
    REQUIRE(wlm_eval_batch(a, &next, &s2, NULL, 1, &err) == WLM_OK);
    uint32_t nv = wlm_model_hparams(sm.m)->n_vocab;
    float *la = malloc(sizeof(float) * nv);
    memcpy(la, wlm_ctx_logits(a), sizeof(float) * nv);
    wlm_ctx *b = st_ctx(sm.m, 64, WLM_KV_F32, WLM_FULL_ERROR, 0, 2);
    REQUIRE(b);
    wlm_state_info info;
    REQUIRE(wlm_ctx_state_load(b, 0, st, size, &info, &err) == WLM_OK);
    CHECK(info.has_rng == 0 && info.n_pos == 28 && info.n_tokens == 28);
    REQUIRE(wlm_eval(b, &next, 1, &err) == WLM_OK);
    CHECK(memcmp(la, wlm_ctx_logits(b), sizeof(float) * nv) == 0);
    /* as sequence 1 beside an unrelated sequence 0, which keeps its logits */
    int32_t other[3] = { 1, 90, 91 };
    wlm_ctx_reset(b);
    REQUIRE(wlm_eval(b, other, 3, &err) == WLM_OK);
    float *l0 = malloc(sizeof(float) * nv);
    memcpy(l0, wlm_ctx_logits(b), sizeof(float) * nv);
    REQUIRE(wlm_ctx_state_load(b, 1, st, size, NULL, &err) == WLM_OK);
    uint32_t s1 = 1;
    REQUIRE(wlm_eval_batch(b, &next, &s1, NULL, 1, &err) == WLM_OK);
    CHECK(memcmp(la, wlm_ctx_logits(b), sizeof(float) * nv) == 0);
    REQUIRE(wlm_seq_truncate(b, 0, 2, &err) == WLM_OK);
    REQUIRE(wlm_eval(b, other + 2, 1, &err) == WLM_OK);
    CHECK(memcmp(l0, wlm_ctx_logits(b), sizeof(float) * nv) == 0);
    /* too little room beside what sequence 0 holds */
    wlm_ctx *small = st_ctx(sm.m, 30, WLM_KV_F32, WLM_FULL_ERROR, 0, 2);
    REQUIRE(small);
    REQUIRE(wlm_eval(small, other, 3, &err) == WLM_OK);
    CHECK(wlm_ctx_state_load(small, 1, st, size, NULL, &err) == WLM_ERR_CONTEXT_FULL && strstr(err.msg, "free"));
    CHECK(wlm_ctx_state_load(small, 2, st, size, NULL, &err) == WLM_ERR_ARG);
    free(la); free(l0); free(st);
    wlm_ctx_free(a); wlm_ctx_free(b); wlm_ctx_free(small);
    st_free(&sm);
}

/* ---- vocabulary-only loads ------------------------------------------------------- */

static const char *const k_vocabs[] = { "llama-spm", "gpt-2", "deepseek-llm", "falcon" };

TEST(vocab_only_load_tokenizes_as_the_vocabulary) {
    for (uint32_t k = 0; k < sizeof k_vocabs / sizeof k_vocabs[0]; k++) {
        char rel[256];
        snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", k_vocabs[k]);
        tvocab ref;
        REQUIRE(tv_load(&ref, rel));
        unsigned long long size = 0, ni = 0;
        unsigned char *file = tst_read_file(tst_path(rel), &size);
        REQUIRE(file);
        unsigned char *bytes = tst_sys_copy(file, size);
        free(file);
        uint64_t meta = 0;
        wlm_err err = { 0 };
        REQUIRE(wlm_gguf_meta_bytes(bytes, size, &meta, &err) == WLM_OK);
        CHECKF(meta > 24 && meta <= size, "%s: meta %llu of %llu", k_vocabs[k], (unsigned long long)meta, size);
        /* exactly the metadata bytes are enough */
        wlm_model *m = NULL;
        REQUIRE(wlm_model_load_vocab(&m, bytes, meta, &err) == WLM_OK);
        CHECK(wlm_model_vocab_only(m) == 1 && wlm_model_fingerprint(m) == 0 && wlm_tensor_count(m) == 0);
        CHECK(wlm_model_hparams(m)->n_vocab == ref.v.n && wlm_model_hparams(m)->bos_id == ref.v.bos);
        wlm_ctx *c = NULL;
        CHECK(wlm_ctx_new(&c, m, NULL, &err) == WLM_ERR_STATE && strstr(err.msg, "vocabulary-only") && !c);
        uint64_t qs;
        CHECK(wlm_quantize_size(m, GGML_Q8_0, &qs, &err) == WLM_ERR_STATE);
        /* one byte less is not */
        wlm_model *m2 = NULL;
        CHECK(wlm_model_load_vocab(&m2, bytes, meta - 1, &err) == WLM_ERR_TRUNCATED && !m2);
        /* every test string: the same ids through the public API as through the vocabulary */
        snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.inp", k_vocabs[k]);
        char *inp = (char *)tst_read_file(tst_path(rel), &ni);
        REQUIRE(inp);
        const char *sep = "\n__ggml_vocab_test__\n";
        size_t sl = strlen(sep), ip = 0;
        int n_same = 0, n_all = 0;
        while (ip < ni) {
            size_t e = ip;
            while (e + sl <= ni && memcmp(inp + e, sep, sl) != 0) e++;
            if (e + sl > ni) break;
            uint32_t na = 0, nb = 0, len = (uint32_t)(e - ip);
            int32_t *a = tv_tokenize(&ref.v, inp + ip, len, 0, &na);
            int32_t *b = malloc(sizeof(int32_t) * (3 * len + 8));
            wlm_status st = wlm_tokenize(m, inp + ip, len, 0, b, 3 * len + 8, &nb, &err);
            n_all++;
            n_same += a && st == WLM_OK && na == nb && (na == 0 || memcmp(a, b, 4 * na) == 0);
            free(a); free(b);
            ip = e + sl;
        }
        CHECKF(n_same == n_all && n_all == 46, "%s: %d of %d strings the same", k_vocabs[k], n_same, n_all);
        printf("  %s: metadata %llu of %llu bytes, %d strings tokenized alike\n", k_vocabs[k], (unsigned long long)meta, size, n_all);
        free(inp);
        wlm_model_free(m);
        wlm_sys_free(bytes);
        tv_free(&ref);
    }
}

/* A whole model loaded vocabulary-only from its metadata bytes alone; every
 * prefix's answer is a lower bound of those bytes and names more than it has */
TEST(vocab_only_from_a_model_prefix) {
    smodel sm;
    REQUIRE(st_load(&sm));
    uint64_t meta = 0;
    wlm_err err = { 0 };
    REQUIRE(wlm_gguf_meta_bytes(sm.bytes, sm.size, &meta, &err) == WLM_OK);
    CHECK(meta < sm.size / 4);
    uint64_t bad = 0, steps = 0;
    for (uint64_t n = 0; n < meta; n += 1 + n / 64, steps++) {
        uint64_t need = 0;
        wlm_status st = wlm_gguf_meta_bytes(sm.bytes, n, &need, &err);
        if (st != WLM_ERR_TRUNCATED || need <= n || need > meta) bad++;
    }
    CHECKF(bad == 0, "%llu of %llu prefixes answered wrongly", (unsigned long long)bad, (unsigned long long)steps);
    uint64_t need = 0;
    CHECK(wlm_gguf_meta_bytes((const uint8_t *)"GGUX", 4, &need, &err) == WLM_ERR_FORMAT && need == 0);
    CHECK(wlm_gguf_meta_bytes((const uint8_t *)"GG", 2, &need, &err) == WLM_ERR_TRUNCATED && need == 24);
    wlm_model *v = NULL;
    REQUIRE(wlm_model_load_vocab(&v, sm.bytes, meta, &err) == WLM_OK);
    const char *text = "Once upon a time, there was a little dog named Sam. </s> <s>";
    int32_t a[64], b[64];
    uint32_t na = 0, nb = 0;
    for (int flags = 0; flags < 4; flags++) {
        CHECK(wlm_tokenize(sm.m, text, (uint32_t)strlen(text), flags, a, 64, &na, &err) == WLM_OK);
        CHECK(wlm_tokenize(v, text, (uint32_t)strlen(text), flags, b, 64, &nb, &err) == WLM_OK);
        CHECK(na == nb && memcmp(a, b, 4 * na) == 0);
    }
    const wlm_hparams *hv = wlm_model_hparams(v), *hm = wlm_model_hparams(sm.m);
    CHECK(hv->n_vocab == hm->n_vocab && hv->eos_id == hm->eos_id && hv->add_bos == hm->add_bos && hv->n_ctx_train == hm->n_ctx_train);
    CHECK(hv->n_layer == 0 && wlm_meta_count(v) == wlm_meta_count(sm.m));
    wlm_detok d; char out[128];
    wlm_detok_reset(&d);
    uint32_t k = 0;
    for (uint32_t i = 0; i < na; i++) k += wlm_detok_push(v, &d, a[i], out + k, (uint32_t)sizeof out - k);
    CHECK(k > 10 && memcmp(out, " Once upon", 10) == 0);
    wlm_model_free(v);
    st_free(&sm);
}
